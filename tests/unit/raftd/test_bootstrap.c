/*
 * raftd/bootstrap.c: a new member's WAL holds what etcd 3.4 writes (the
 * expected bytes below were read from a WAL that Debian's etcd 3.4.23
 * created for --name 'n<1>&"x' --initial-cluster 'n<1>&"x=http://127.0.0.1:24801'),
 * a restarted member gets back its hard state, entries and ids, and bad
 * input (corrupt metadata, missing parameters) is refused cleanly.
 */
#include "wal_util.h"

#include "base/hex/hex.h"
#include "raftd/bootstrap.h"
#include "raftd/wal/wal.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"

/* Hex to bytes; returns the length. */
static size_t unhex(const char *h, uint8_t *out)
{
	ssize_t n = hex_decode(h, strlen(h), out);
	CHECK(n >= 0);
	return (size_t)n;
}

static const char etcd_metadata[] = "08f283d1e888e095d2f40110d5cbb6c79dfec285f101";
static const char etcd_conf_change[] =
	"0800100018f283d1e888e095d2f40122627b226964223a31373632383331303530313331333439353533"
	"382c227065657255524c73223a5b22687474703a2f2f3132372e302e302e313a3234383031225d2c226e"
	"616d65223a226e5c7530303363315c75303033655c75303032365c2278227d";
static const char etcd_cluster[] = "n<1>&\"x=http://127.0.0.1:24801";

static void test_metadata(void)
{
	uint8_t want[64], buf[BOOTSTRAP_METADATA_MAX];
	size_t n = unhex(etcd_metadata, want);
	uint64_t node, cluster;

	CHECK_EQ(bootstrap_metadata_encode(0xf4a457008d1441f2ull, 0xf10b0bf1d8eda5d5ull, buf), n);
	CHECK(memcmp(buf, want, n) == 0);
	CHECK_EQ(bootstrap_metadata_decode(buf, n, &node, &cluster), 0);
	CHECK(node == 0xf4a457008d1441f2ull && cluster == 0xf10b0bf1d8eda5d5ull);

	/* zero ids are still written (gogoproto non-nullable) */
	CHECK_EQ(bootstrap_metadata_encode(0, 0, buf), 4);
	CHECK_EQ(bootstrap_metadata_decode(buf, 4, &node, &cluster), 0);
	CHECK(node == 0 && cluster == 0);

	/* unknown fields of every wire type are skipped */
	const uint8_t extra[] = { 0x08, 0x05, 0x1a, 0x02, 'h', 'i', 0x25, 1, 2, 3, 4,
				  0x29, 1, 2, 3, 4, 5, 6, 7, 8, 0x10, 0x07 };
	CHECK_EQ(bootstrap_metadata_decode(extra, sizeof(extra), &node, &cluster), 0);
	CHECK(node == 5 && cluster == 7);

	/* malformed: truncated varint, wrong wire type, length past the end,
	 * field number 0, a group */
	const uint8_t bad1[] = { 0x08, 0x80 };
	const uint8_t bad2[] = { 0x0a, 0x01, 0x00 };
	const uint8_t bad3[] = { 0x1a, 0x05, 'x' };
	const uint8_t bad4[] = { 0x00, 0x01 };
	const uint8_t bad5[] = { 0x1b };
	CHECK_EQ(bootstrap_metadata_decode(bad1, sizeof(bad1), &node, &cluster), -EBADMSG);
	CHECK_EQ(bootstrap_metadata_decode(bad2, sizeof(bad2), &node, &cluster), -EBADMSG);
	CHECK_EQ(bootstrap_metadata_decode(bad3, sizeof(bad3), &node, &cluster), -EBADMSG);
	CHECK_EQ(bootstrap_metadata_decode(bad4, sizeof(bad4), &node, &cluster), -EBADMSG);
	CHECK_EQ(bootstrap_metadata_decode(bad5, sizeof(bad5), &node, &cluster), -EBADMSG);
}

static void test_conf_change(void)
{
	struct initial_cluster c;
	uint8_t want[512], *data;
	uint32_t len;
	size_t n = unhex(etcd_conf_change, want);

	CHECK_EQ(initial_cluster_parse(etcd_cluster, "etcd-cluster", &c), 0);
	CHECK(c.v[0].id == 0xf4a457008d1441f2ull);
	CHECK(c.cluster_id == 0xf10b0bf1d8eda5d5ull);
	CHECK_EQ(bootstrap_conf_change(&c.v[0], &data, &len), 0);
	CHECK_EQ(len, n);
	CHECK(memcmp(data, want, n) == 0);
	raftd_free(data);

	/* Go's JSON escapes for control bytes, U+2028 and invalid UTF-8 */
	char name[] = "a\tb\x01\xe2\x80\xa8\xff\xc3\xa9\\";
	char *urls[] = { "http://h:1", "http://h:2" };
	struct member_info m = { .name = name, .id = 1, .n_peer_urls = 2, .peer_urls = urls };
	CHECK_EQ(bootstrap_conf_change(&m, &data, &len), 0);
	const char *json = "{\"id\":1,\"peerURLs\":[\"http://h:1\",\"http://h:2\"],"
			   "\"name\":\"a\\tb\\u0001\\u2028\\ufffd\xc3\xa9\\\\\"}";
	CHECK_EQ(len, 5 + 1 + 1 + 1 + strlen(json));
	CHECK(memcmp(data, "\x08\x00\x10\x00\x18\x01\x22", 7) == 0);
	CHECK_EQ(data[7], strlen(json));
	CHECK(memcmp(data + 8, json, strlen(json)) == 0);
	raftd_free(data);
	initial_cluster_free(&c);
}

static void test_create_and_restart(void)
{
	struct initial_cluster c;
	struct bootstrap_state s;
	char dir[512];
	uint8_t want[512];
	size_t n = unhex(etcd_conf_change, want);

	CHECK_EQ(initial_cluster_parse(etcd_cluster, "etcd-cluster", &c), 0);
	wt_path(dir, sizeof(dir), "new");
	strcat(dir, "/member/wal"); /* parents made too */
	struct bootstrap_params p = { .wal_dir = dir, .member_id = c.v[0].id, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(s.created);
	CHECK(s.member_id == c.v[0].id && s.cluster_id == c.cluster_id);
	CHECK(s.hs.term == 1 && s.hs.vote == 0 && s.hs.commit == 1);
	CHECK_EQ(s.n_entries, 1);
	CHECK(s.entries[0].index == 1 && s.entries[0].term == 1);
	CHECK_EQ(s.entries[0].type, RAFT_ENTRY_CONF_CHANGE);
	CHECK(s.entries[0].len == n && memcmp(s.entries[0].data, want, n) == 0);
	bootstrap_state_free(&s);

	/* what etcd's reader sees: the metadata, the entry, the state */
	struct wal_replay rep;
	uint8_t md[64];
	size_t md_len = unhex(etcd_metadata, md);
	CHECK_EQ(wal_read(dir, 0, 0, &rep), 0);
	CHECK(rep.metadata_len == md_len && memcmp(rep.metadata, md, md_len) == 0);
	CHECK_EQ(rep.n_entries, 1);
	CHECK(rep.state.term == 1 && rep.state.commit == 1);
	wal_replay_free(&rep);

	/* restart: ids from the WAL even when the flags say otherwise */
	p.member_id = 42;
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(!s.created);
	CHECK(s.member_id == c.v[0].id && s.cluster_id == c.cluster_id);
	CHECK(s.hs.term == 1 && s.hs.commit == 1);
	CHECK_EQ(s.n_entries, 1);
	CHECK(s.entries[0].len == n && memcmp(s.entries[0].data, want, n) == 0);

	/* a second opener finds the WAL locked */
	struct bootstrap_state s2;
	CHECK_EQ(bootstrap_open(&p, &s2), -EBUSY);
	bootstrap_state_free(&s);
	initial_cluster_free(&c);

	/* three members: one entry each, in id order */
	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380,"
				       "c=http://10.0.0.3:2380", "tok", &c), 0);
	wt_path(dir, sizeof(dir), "three");
	p = (struct bootstrap_params){ .wal_dir = dir, .member_id = c.v[1].id, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK_EQ(s.n_entries, 3);
	CHECK_EQ(s.hs.commit, 3);
	for (size_t i = 0; i < 3; i++) {
		uint8_t *d;
		uint32_t l;
		CHECK_EQ(bootstrap_conf_change(&c.v[i], &d, &l), 0);
		CHECK(s.entries[i].index == i + 1 && s.entries[i].len == l &&
		      memcmp(s.entries[i].data, d, l) == 0);
		raftd_free(d);
	}
	bootstrap_state_free(&s);
	initial_cluster_free(&c);
}

static void test_refusals(void)
{
	struct initial_cluster c;
	struct bootstrap_state s;
	struct wal *w;
	char dir[512];

	CHECK_EQ(initial_cluster_parse("x=http://127.0.0.1:1", "t", &c), 0);
	/* no directory, no cluster for a new WAL, no member id */
	struct bootstrap_params p = { .wal_dir = "", .member_id = 1, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), -EINVAL);
	wt_path(dir, sizeof(dir), "refuse");
	p.wal_dir = dir;
	p.cluster = NULL;
	CHECK_EQ(bootstrap_open(&p, &s), -EINVAL);
	p.cluster = &c;
	p.member_id = 0;
	CHECK_EQ(bootstrap_open(&p, &s), -EINVAL);
	CHECK(!wal_exists(dir));

	/* a WAL created but stopped before its bootstrap entries were
	 * durable gets them on the next start */
	uint8_t md[BOOTSTRAP_METADATA_MAX];
	size_t md_len = bootstrap_metadata_encode(c.v[0].id, c.cluster_id, md);
	wt_path(dir, sizeof(dir), "half");
	CHECK_EQ(wal_create(dir, md, md_len, NULL, &w), 0);
	CHECK_EQ(wal_close(w), 0);
	p = (struct bootstrap_params){ .wal_dir = dir, .member_id = c.v[0].id, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(s.created);
	CHECK_EQ(s.n_entries, 1);
	CHECK(s.hs.term == 1 && s.hs.commit == 1);
	CHECK(s.member_id == c.v[0].id);
	bootstrap_state_free(&s);
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(!s.created);
	CHECK_EQ(s.n_entries, 1);
	bootstrap_state_free(&s);

	/* metadata that is not a Metadata: refused with -EBADMSG */
	wt_path(dir, sizeof(dir), "junk");
	const uint8_t junk[] = { 0x0a, 0x09 };
	CHECK_EQ(wal_create(dir, junk, sizeof(junk), NULL, &w), 0);
	CHECK_EQ(wal_close(w), 0);
	p.member_id = c.v[0].id;
	CHECK_EQ(bootstrap_open(&p, &s), -EBADMSG);
	initial_cluster_free(&c);
}

/* Every allocation failure on the way is reported, and leaks nothing. */
static void test_out_of_memory(void)
{
	struct initial_cluster c;
	struct bootstrap_state s;
	char dir[512];
	int fails = 0;

	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380", "t", &c), 0);
	for (long budget = 0;; budget++) {
		wt_path(dir, sizeof(dir), "oom");
		struct bootstrap_params p = { .wal_dir = dir, .member_id = c.v[0].id,
					      .cluster = &c };
		long live = wt_live_allocs();
		wt_fail_after(budget);
		int rc = bootstrap_open(&p, &s);
		wt_fail_after(-1);
		if (rc == 0) {
			bootstrap_state_free(&s);
			CHECK_EQ(wt_live_allocs(), live);
			break;
		}
		CHECK_EQ(rc, -ENOMEM);
		CHECK_EQ(wt_live_allocs(), live);
		fails++;
	}
	CHECK(fails > 3);
	initial_cluster_free(&c);
}

/* A member joining a running cluster: the WAL has the ids the cluster
 * gave and no bootstrap entries, also when reopened before anything came;
 * bootstrap_wal_ids reads them back without replaying or locking. */
static void test_join(void)
{
	struct initial_cluster c;
	struct bootstrap_state s;
	uint64_t mid, cid;
	char dir[512];

	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380", "tok", &c), 0);
	c.v[0].id = 0x1111;
	c.v[1].id = 0x2222;
	c.cluster_id = 0xc1c1;
	wt_path(dir, sizeof(dir), "join");
	CHECK_EQ(bootstrap_wal_ids(dir, &mid, &cid), -ENOENT);
	struct bootstrap_params p = { .wal_dir = dir, .member_id = 0x2222, .cluster = &c,
				      .join = true };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(s.created);
	CHECK(s.member_id == 0x2222 && s.cluster_id == 0xc1c1);
	CHECK_EQ(s.n_entries, 0);
	CHECK(raft_hardstate_is_empty(&s.hs));
	/* read while raftd holds the WAL */
	CHECK_EQ(bootstrap_wal_ids(dir, &mid, &cid), 0);
	CHECK(mid == 0x2222 && cid == 0xc1c1);
	bootstrap_state_free(&s);

	/* reopened with the flags of a new cluster: still no bootstrap
	 * entries, since the WAL is another cluster's */
	initial_cluster_free(&c);
	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380", "tok", &c), 0);
	p = (struct bootstrap_params){ .wal_dir = dir, .member_id = c.v[1].id, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	CHECK(!s.created);
	CHECK(s.member_id == 0x2222 && s.cluster_id == 0xc1c1);
	CHECK_EQ(s.n_entries, 0);
	bootstrap_state_free(&s);

	/* a new cluster's WAL: the ids it was created with */
	wt_path(dir, sizeof(dir), "join-new");
	p = (struct bootstrap_params){ .wal_dir = dir, .member_id = c.v[0].id, .cluster = &c };
	CHECK_EQ(bootstrap_open(&p, &s), 0);
	bootstrap_state_free(&s);
	CHECK_EQ(bootstrap_wal_ids(dir, &mid, &cid), 0);
	CHECK(mid == c.v[0].id && cid == c.cluster_id);
	/* a later segment without a good metadata record: the first's */
	char seg[640];
	snprintf(seg, sizeof(seg), "%s/0000000000000001-0000000000000009.wal", dir);
	FILE *f = fopen(seg, "w");
	CHECK(f != NULL);
	CHECK(fwrite("garbage!", 1, 8, f) == 8);
	fclose(f);
	mid = cid = 0;
	CHECK_EQ(bootstrap_wal_ids(dir, &mid, &cid), 0);
	CHECK(mid == c.v[0].id && cid == c.cluster_id);
	initial_cluster_free(&c);
}

int main(void)
{
	wt_count_allocs();
	test_metadata();
	test_conf_change();
	test_create_and_restart();
	test_join();
	test_refusals();
	test_out_of_memory();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_bootstrap: ok\n");
	return 0;
}
