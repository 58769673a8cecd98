/*
 * Unit tests for cluster/member_json.c and cluster/membership.c.
 *
 * The expected texts and bytes are what Debian's etcd 3.4 Go code gives
 * for the same values: json.Marshal of membership.Member,
 * ConfigChangeContext and Attributes, and etcdserverpb.Request.Marshal of
 * {ID: 77, Method: "PUT", Path: "/0/version", Val: "3.4.0"}.
 */
#include "shm_testlib.h"

#include <errno.h>

#include "etcdserverpb/etcdserver.pb-c.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "raftpb/raft.pb-c.h"
#include "cluster/member_json.h"
#include "cluster/membership.h"

static char *s_peers[] = { "http://a:1", "http://b<&>" };
static char *s_clients[] = { "http://c" };

static void test_json_encode(void)
{
	struct member_info m = {
		.id = 1234, .name = "n\xe2\x80\xa8\"", .n_peer_urls = 2, .peer_urls = s_peers,
		.n_client_urls = 1, .client_urls = s_clients, .is_learner = true,
	};
	char *out;
	size_t len;

	CHECK(member_json_encode(&m, &out, &len) == 0);
	CHECK(strcmp(out, "{\"id\":1234,\"peerURLs\":[\"http://a:1\",\"http://b\\u003c\\u0026\\u003e\"],"
			  "\"isLearner\":true,\"name\":\"n\\u2028\\\"\",\"clientURLs\":[\"http://c\"]}") == 0);
	CHECK(len == strlen(out));
	free(out);

	CHECK(member_json_encode_attributes(&m, &out, &len) == 0);
	CHECK(strcmp(out, "{\"name\":\"n\\u2028\\\"\",\"clientURLs\":[\"http://c\"]}") == 0);
	free(out);

	CHECK(member_json_encode_context(&m, true, &out, &len) == 0);
	CHECK(strcmp(out, "{\"id\":1234,\"peerURLs\":[\"http://a:1\",\"http://b\\u003c\\u0026\\u003e\"],"
			  "\"isLearner\":true,\"name\":\"n\\u2028\\\"\",\"clientURLs\":[\"http://c\"],"
			  "\"isPromote\":true}") == 0);
	CHECK(len == strlen(out));
	free(out);

	struct member_info empty = { .id = 5 };
	CHECK(member_json_encode_attributes(&empty, &out, &len) == 0);
	CHECK(strcmp(out, "{}") == 0);
	free(out);
	char *one[] = { "http://p" };
	empty.n_peer_urls = 1;
	empty.peer_urls = one;
	CHECK(member_json_encode(&empty, &out, &len) == 0);
	CHECK(strcmp(out, "{\"id\":5,\"peerURLs\":[\"http://p\"]}") == 0);
	free(out);
}

static void test_json_decode(void)
{
	struct member_info m = { 0 };
	bool promote = true;
	const char *ctx = "{\"id\":1234,\"peerURLs\":[\"http://a:1\",\"http://b\\u003c\\u0026\\u003e\"],"
			  "\"isLearner\":true,\"name\":\"n\\u2028\\\"\",\"clientURLs\":[\"http://c\"],"
			  "\"isPromote\":true}";

	/* a ConfChange with no context: no bytes at all */
	CHECK(member_json_decode_context(NULL, 0, &m, &promote) == -EBADMSG);
	CHECK(member_json_decode_context(ctx, strlen(ctx), &m, &promote) == 0);
	CHECK(promote);
	CHECK(m.id == 1234 && m.is_learner);
	CHECK(m.n_peer_urls == 2 && strcmp(m.peer_urls[1], "http://b<&>") == 0);
	CHECK(strcmp(m.name, "n\xe2\x80\xa8\"") == 0);
	CHECK(m.n_client_urls == 1 && strcmp(m.client_urls[0], "http://c") == 0);

	/* white space, unknown keys of every kind, a surrogate pair, null */
	const char *odd = " { \"extra\" : {\"a\":[1,2.5e3,{\"b\":null}],\"c\":false} ,\n"
			  "\"ID\": 18446744073709551615 , \"name\":\"\\ud83d\\ude00\\t\","
			  "\"clientURLs\":null }\n";
	CHECK(member_json_decode(odd, strlen(odd), &m) == 0);
	CHECK(m.id == UINT64_MAX);
	CHECK(strcmp(m.name, "\xf0\x9f\x98\x80\t") == 0);
	CHECK(m.n_client_urls == 0 && m.client_urls == NULL);
	CHECK(m.n_peer_urls == 2); /* absent: kept */
	member_info_clear(&m);

	static const char *const bad[] = {
		"", "[]", "{", "{\"id\":-1}", "{\"id\":1.5}", "{\"id\":18446744073709551616}",
		"{\"id\":01}", "{\"name\":1}", "{\"peerURLs\":[1]}", "{\"name\":\"\\u0000\"}",
		"{\"name\":\"a\"} x", "{\"isLearner\":\"yes\"}", "{\"name\":\"\\x\"}",
		("{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]"
		 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}"),
		"{\"name\":\"a\nb\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct member_info x = { .id = 9 };
		if (member_json_decode(bad[i], strlen(bad[i]), &x) != -EBADMSG) {
			fprintf(stderr, "decoded %s\n", bad[i]);
			exit(1);
		}
		CHECK(x.id == 9 && x.name == NULL);
	}
}

/* A ConfChange as etcd encodes it, into buf. */
static size_t conf_change(uint8_t *buf, uint64_t id, int type, uint64_t node, const char *ctx)
{
	Raftpb__ConfChange cc = RAFTPB__CONF_CHANGE__INIT;
	cc.has_id = cc.has_type = cc.has_node_id = 1;
	cc.id = id;
	cc.type = type;
	cc.node_id = node;
	if (ctx) {
		cc.has_context = 1;
		cc.context.data = (uint8_t *)ctx;
		cc.context.len = strlen(ctx);
	}
	return raftpb__conf_change__pack(&cc, buf);
}

static void apply_cc(struct membership *ms, int type, uint64_t node, const char *ctx,
		     enum membership_change want, enum membership_error err)
{
	uint8_t buf[1024];
	struct membership_result r;
	size_t n = conf_change(buf, 42, type, node, ctx);
	CHECK(membership_apply(ms, 1, buf, n, &r) == 0);
	if (r.change != want || r.error != err) {
		fprintf(stderr, "conf change %d of %llu: change %d error %d, want %d %d\n", type,
			(unsigned long long)node, r.change, r.error, want, err);
		exit(1);
	}
	CHECK(r.cc_id == 42 && r.node_id == node);
}

static void test_conf_changes(void)
{
	struct membership ms;
	membership_init(&ms);

	apply_cc(&ms, 0, 1, "{\"id\":1,\"peerURLs\":[\"http://1\"],\"name\":\"one\"}",
		 MEMBERSHIP_ADDED, 0);
	apply_cc(&ms, 0, 2, "{\"id\":2,\"peerURLs\":[\"http://2\"],\"isPromote\":false}",
		 MEMBERSHIP_ADDED, 0);
	CHECK(ms.count == 2 && ms.v[0].id == 1 && strcmp(ms.v[0].name, "one") == 0);
	/* etcd's refusals */
	apply_cc(&ms, 0, 2, "{\"id\":2,\"peerURLs\":[\"http://9\"]}", MEMBERSHIP_REFUSED,
		 MEMBERSHIP_ERR_ID_EXISTS);
	apply_cc(&ms, 0, 3, "{\"id\":3,\"peerURLs\":[\"http://2\"]}", MEMBERSHIP_REFUSED,
		 MEMBERSHIP_ERR_PEER_URL_EXISTS);
	apply_cc(&ms, 1, 7, NULL, MEMBERSHIP_REFUSED, MEMBERSHIP_ERR_ID_NOT_FOUND);
	apply_cc(&ms, 0, 2, "{\"id\":2,\"peerURLs\":[\"http://2\"],\"isPromote\":true}",
		 MEMBERSHIP_REFUSED, MEMBERSHIP_ERR_NOT_LEARNER);
	/* a learner, only one of them, promoted */
	apply_cc(&ms, 3, 4, "{\"id\":4,\"peerURLs\":[\"http://4\"],\"isLearner\":true}",
		 MEMBERSHIP_ADDED, 0);
	apply_cc(&ms, 3, 5, "{\"id\":5,\"peerURLs\":[\"http://5\"],\"isLearner\":true}",
		 MEMBERSHIP_REFUSED, MEMBERSHIP_ERR_TOO_MANY_LEARNERS);
	CHECK(membership_find(&ms, 4)->is_learner);
	apply_cc(&ms, 0, 4, "{\"id\":4,\"peerURLs\":[\"http://4\"],\"isLearner\":true,\"isPromote\":true}",
		 MEMBERSHIP_PROMOTED, 0);
	CHECK(!membership_find(&ms, 4)->is_learner);
	/* update: its own URLs may stay, another's may not */
	apply_cc(&ms, 2, 2, "{\"id\":2,\"peerURLs\":[\"http://1\"]}", MEMBERSHIP_REFUSED,
		 MEMBERSHIP_ERR_PEER_URL_EXISTS);
	apply_cc(&ms, 2, 2, "{\"id\":2,\"peerURLs\":[\"http://2\",\"http://22\"]}",
		 MEMBERSHIP_UPDATED, 0);
	CHECK(membership_find(&ms, 2)->n_peer_urls == 2);
	/* removal is for good */
	apply_cc(&ms, 1, 2, NULL, MEMBERSHIP_REMOVED, 0);
	CHECK(!membership_find(&ms, 2) && membership_is_removed(&ms, 2) && ms.count == 2);
	apply_cc(&ms, 0, 2, "{\"id\":2,\"peerURLs\":[\"http://2\"]}", MEMBERSHIP_REFUSED,
		 MEMBERSHIP_ERR_ID_REMOVED);
	apply_cc(&ms, 1, 2, NULL, MEMBERSHIP_REFUSED, MEMBERSHIP_ERR_ID_REMOVED);

	/* a context naming another id, or no JSON, is undecodable */
	uint8_t buf[256];
	struct membership_result r;
	size_t n = conf_change(buf, 1, 0, 8, "{\"id\":9,\"peerURLs\":[\"http://8\"]}");
	CHECK(membership_apply(&ms, 1, buf, n, &r) == -EBADMSG);
	n = conf_change(buf, 1, 0, 8, "nope");
	CHECK(membership_apply(&ms, 1, buf, n, &r) == -EBADMSG);
	n = conf_change(buf, 1, 9, 8, NULL);
	CHECK(membership_apply(&ms, 1, buf, n, &r) == -EBADMSG);
	CHECK(ms.count == 2);
	membership_free(&ms);
}

static void test_v2(void)
{
	static const uint8_t want[] = {
		0x08, 0x4d, 0x12, 0x03, 'P', 'U', 'T', 0x1a, 0x0a, '/', '0', '/', 'v', 'e', 'r',
		's', 'i', 'o', 'n', 0x22, 0x05, '3', '.', '4', '.', '0', 0x28, 0x00, 0x32, 0x00,
		0x38, 0x00, 0x48, 0x00, 0x50, 0x00, 0x58, 0x00, 0x60, 0x00, 0x68, 0x00, 0x70, 0x00,
		0x78, 0x00, 0x80, 0x01, 0x00,
	};
	struct membership ms;
	struct membership_result r;
	uint8_t *p;
	size_t len;

	CHECK(membership_v2_put(77, "/0/version", "3.4.0", &p, &len) == 0);
	CHECK(len == sizeof(want) && memcmp(p, want, len) == 0);

	membership_init(&ms);
	CHECK(membership_apply(&ms, 0, p, len, &r) == 0);
	CHECK(r.change == MEMBERSHIP_VERSION && r.request_id == 77);
	CHECK(ms.has_version && ms.version_major == 3 && ms.version_minor == 4);
	free(p);

	/* a publish of an unknown member changes nothing; of a member, its
	 * attributes */
	char path[48];
	membership_attributes_path(0xabc, path);
	CHECK(strcmp(path, "/0/members/abc/attributes") == 0);
	CHECK(membership_v2_put(5, path, "{\"name\":\"x\",\"clientURLs\":[\"http://c\"]}", &p,
				&len) == 0);
	CHECK(membership_apply(&ms, 0, p, len, &r) == 0 && r.change == MEMBERSHIP_IGNORED);
	char *peer[] = { "http://p" };
	struct member_info mi = { .id = 0xabc, .name = "", .n_peer_urls = 1, .peer_urls = peer };
	CHECK(membership_put(&ms, &mi) == 0);
	CHECK(membership_apply(&ms, 0, p, len, &r) == 0 && r.change == MEMBERSHIP_ATTRIBUTES);
	CHECK(r.node_id == 0xabc && r.request_id == 5);
	CHECK(strcmp(r.member->name, "x") == 0 && r.member->n_client_urls == 1);

	/* the same request inside an InternalRaftRequest (v2, field 2) */
	Etcdserverpb__Request *q = etcdserverpb__request__unpack(NULL, len, p);
	CHECK(q && q->id == 5 && strcmp(q->method, "PUT") == 0 && strcmp(q->path, path) == 0);
	char *val = q->val;
	q->val = "{\"name\":\"y\"}";
	Etcdserverpb__InternalRaftRequest ir = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	ir.v2 = q;
	uint8_t wrapped[512];
	size_t wlen = etcdserverpb__internal_raft_request__pack(&ir, wrapped);
	CHECK(membership_apply(&ms, 0, wrapped, wlen, &r) == 0 && r.change == MEMBERSHIP_ATTRIBUTES);
	CHECK(strcmp(r.member->name, "y") == 0 && r.member->n_client_urls == 0);
	q->val = val;
	etcdserverpb__request__free_unpacked(q, NULL);
	free(p);

	/* a raw Request does not decode as an InternalRaftRequest: etcd tells
	 * them apart that way too */
	CHECK(membership_v2_put(6, "/0/version", "3.5.0", &p, &len) == 0);
	CHECK(etcdserverpb__internal_raft_request__unpack(NULL, len, p) == NULL);
	CHECK(membership_apply(&ms, 0, p, len, &r) == 0 && r.change == MEMBERSHIP_VERSION);
	CHECK(ms.version_minor == 5);
	free(p);

	/* key-value requests are not membership's */
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__InternalRaftRequest kv = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	kv.put = &put;
	wlen = etcdserverpb__internal_raft_request__pack(&kv, wrapped);
	CHECK(membership_apply(&ms, 0, wrapped, wlen, &r) == 0 && r.change == MEMBERSHIP_NONE);
	CHECK(membership_apply(&ms, 0, (const uint8_t *)"\xff", 1, &r) == 0 &&
	      r.change == MEMBERSHIP_NONE);
	membership_free(&ms);
}

int main(void)
{
	test_json_encode();
	test_json_decode();
	test_conf_changes();
	test_v2();
	printf("ok\n");
	return 0;
}
