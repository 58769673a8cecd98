/*
 * Unit tests for gatewayd/auth_call.c and services/authenticate.c: a
 * gateway in the test's process over a db whose auth store the test
 * writes with stored's own apply (stored/auth.h), published as stored
 * publishes it; simple tokens entered in the region's table as stored
 * enters them.
 *  - auth disabled: a proposal's header is its ID alone, a Range needs no
 *    user;
 *  - auth enabled: a Range without a token is "user name is empty", with
 *    an unknown token "invalid auth token" (Unauthenticated), with alice's
 *    token allowed on her prefix and denied elsewhere; a Put's proposal
 *    carries her name and the auth revision; a denied Put proposes
 *    nothing; an election's Leader needs READ over its keys; Defragment
 *    and MemberRemove need root (Defragment refused
 *    with the auth package's own text, as etcd's maintenance server does);
 *  - the cache follows the published auth revision: a permission granted
 *    later is seen by the next call;
 *  - Authenticate: refused while auth is disabled, with etcd's text for a
 *    wrong password and an unknown user, and for the right one proposes
 *    InternalAuthenticateRequest {name, a 16-letter simple_token prefix}
 *    with no password, after the worker checked the hash.
 */
#include "gw_harness.h"

#include <ctype.h>

#include "auth/bcrypt.h"
#include "auth/error.h"
#include "auth/perm.h"
#include "auth/token.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "shm/tokens.h"
#include "stored/auth.h"
#include "v3electionpb/v3election.pb-c.h"

#define MAX_REQ (64u * 1024u)

static struct stored_auth au = { .bcrypt_cost = 4 };
static uint64_t auth_index = 1000;

/* Applies req to the auth store in a batch of its own and publishes the
 * root with the auth state, as stored/loop.c does. */
static void auth_apply(Etcdserverpb__InternalRaftRequest *req)
{
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	Etcdserverpb__ResponseHeader **hdr;
	ProtobufCMessage *resp;
	struct btree_root root;
	struct mvcc_state st;
	struct arena a;

	h.username = "root";
	req->header = &h;
	arena_init(&a);
	CHECK_EQ(mvcc_batch_begin(store), 0);
	CHECK_EQ(mvcc_apply_begin(store, auth_index++), 0);
	CHECK_EQ(stored_auth_apply(mvcc_batch_txn(store), &au, req, auth_index, &a, &resp, &hdr), 0);
	CHECK_EQ(mvcc_batch_commit(store, &root), 0);
	arena_release(&a);
	mvcc_store_state(store, &st);
	struct status_stored pub = {
		.root_page = root.root_pgid, .txid = root.txid, .applied_index = st.consistent_index,
		.revision = (uint64_t)st.rev, .high_water_page = root.hwm_pgid, .epoch = 1,
		.auth_enabled = au.enabled, .auth_revision = au.revision,
	};
	status_stored_write(harn, &pub);
}

static void user_add(const char *name, const char *pw)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserAddRequest r = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	char hash[BCRYPT_HASH_SIZE];

	CHECK_EQ(bcrypt_hash(pw, strlen(pw), 4, hash), 0);
	r.name = (char *)name;
	r.password = (char *)pw;
	r.hashedpassword = hash;
	req.auth_user_add = &r;
	auth_apply(&req);
}

static void role_add(const char *name)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthRoleAddRequest r = ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;

	r.name = (char *)name;
	req.auth_role_add = &r;
	auth_apply(&req);
}

static void grant_role(const char *user, const char *role)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserGrantRoleRequest r = ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;

	r.user = (char *)user;
	r.role = (char *)role;
	req.auth_user_grant_role = &r;
	auth_apply(&req);
}

static void grant_perm(const char *role, int type, const char *key, const char *end)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthRoleGrantPermissionRequest r =
		ETCDSERVERPB__AUTH_ROLE_GRANT_PERMISSION_REQUEST__INIT;
	Authpb__Permission p = AUTHPB__PERMISSION__INIT;

	p.permtype = type;
	p.key.data = (uint8_t *)key;
	p.key.len = strlen(key);
	p.range_end.data = (uint8_t *)end;
	p.range_end.len = strlen(end);
	r.name = (char *)role;
	r.perm = &p;
	req.auth_role_grant_permission = &r;
	auth_apply(&req);
}

static void auth_enable(void)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthEnableRequest r = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;

	req.auth_enable = &r;
	auth_apply(&req);
}

/* A call with the token metadata (NULL: none). */
static struct tc_stream *call_as(const char *path, const ProtobufCMessage *m, const char *token)
{
	uint8_t *buf = malloc(protobuf_c_message_get_packed_size(m) + 1);
	CHECK(buf != NULL);
	size_t len = protobuf_c_message_pack(m, buf);
	struct tc_stream *s = token ? tc_request(&tc, path, "token", token, NULL)
				    : tc_request(&tc, path, NULL);
	tc_queue_message(&tc, s, 0, buf, len, true);
	free(buf);
	spin(2);
	return s;
}

static void refused(struct tc_stream *s, int err)
{
	wait_closed(s);
	check_status(s, auth_grpc_code(err), auth_strerror(err));
}

static struct tc_stream *range_as(const char *key, const char *token)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;

	r.key.data = (uint8_t *)key;
	r.key.len = strlen(key);
	r.serializable = true;
	return call_as("/etcdserverpb.KV/Range", &r.base, token);
}

static struct tc_stream *put_as(const char *key, const char *token)
{
	Etcdserverpb__PutRequest r = ETCDSERVERPB__PUT_REQUEST__INIT;

	r.key.data = (uint8_t *)key;
	r.key.len = strlen(key);
	return call_as("/etcdserverpb.KV/Put", &r.base, token);
}

/* The one proposal the gateway made, unpacked (freed by the caller). */
static Etcdserverpb__InternalRaftRequest *the_proposal(void)
{
	struct rec r = one_proposal();
	struct msg_propose mp;

	CHECK(r.type == MSG_PROPOSE && r.len >= sizeof(mp));
	memcpy(&mp, r.data, sizeof(mp));
	Etcdserverpb__InternalRaftRequest *irr =
		etcdserverpb__internal_raft_request__unpack(NULL, mp.data_len, r.data + sizeof(mp));
	CHECK(irr != NULL && irr->header != NULL);
	free_recs(&r, 1);
	return irr;
}

static void no_proposal(void)
{
	struct rec v[2];

	spin(2);
	CHECK_EQ(take_to_raftd(v, 2), 0);
}

/* Takes the read index the gateway asked for and answers it as raftd. */
static void read_index(void)
{
	struct rec r = one_proposal();
	struct msg_read_index ri;

	CHECK(r.type == MSG_READ_INDEX);
	memcpy(&ri, r.data, sizeof(ri));
	free_recs(&r, 1);
	struct msg_read_index_reply rr = { .origin = ri.origin, .index = 1 };
	CHECK_EQ(ring_push(shm_slot_ring(harn, slot.index, SHM_SLOT_FROM_RAFTD),
			   MSG_READ_INDEX_REPLY, &rr, sizeof(rr)),
		 0);
}

static void add_token(const char *token, const char *user)
{
	CHECK_EQ(shm_tokens_add(harn, token, strlen(token), user, strlen(user),
				(uint64_t)clock_now_ms(), 60000),
		 0);
}

static void test_disabled(void)
{
	size_t len;

	gwh_put_root("x", "1"); /* index 1: the auth store's batches follow */
	user_add("root", "rootpw");
	grant_role("root", "root");
	user_add("alice", "alicepw");
	role_add("ra");
	grant_perm("ra", AUTH_PB_READWRITE, "a/", "a0"); /* the prefix a/ */
	grant_role("alice", "ra");
	spin(2);
	CHECK(!gw_auth_enabled(srv));
	CHECK(answer(range_as("x", NULL), &len) != NULL);
	struct tc_stream *s = put_as("x", NULL);
	Etcdserverpb__InternalRaftRequest *irr = the_proposal();
	CHECK(irr->header->username[0] == '\0' && irr->header->auth_revision == 0);
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	CHECK_EQ(nghttp2_submit_rst_stream(tc.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL), 0);

	/* Authenticate needs auth enabled */
	Etcdserverpb__AuthenticateRequest ar = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
	ar.name = "alice";
	ar.password = "alicepw";
	s = call_as("/etcdserverpb.Auth/Authenticate", &ar.base, NULL);
	read_index(); /* its linearizable read first */
	refused(s, AUTH_ERR_AUTH_NOT_ENABLED);
}

static void test_enabled(void)
{
	size_t len;

	auth_enable();
	spin(2);
	CHECK(gw_auth_enabled(srv));
	uint64_t rev = au.revision;
	add_token("AAAAAAAAAAAAAAAA.7", "alice");
	add_token("BBBBBBBBBBBBBBBB.8", "root");

	refused(range_as("a/1", NULL), AUTH_ERR_USER_EMPTY);
	refused(range_as("a/1", "CCCCCCCCCCCCCCCC.9"), AUTH_ERR_INVALID_AUTH_TOKEN);
	refused(range_as("a/1", "not-a-token"), AUTH_ERR_INVALID_AUTH_TOKEN);
	CHECK(answer(range_as("a/1", "AAAAAAAAAAAAAAAA.7"), &len) != NULL);
	refused(range_as("x", "AAAAAAAAAAAAAAAA.7"), AUTH_ERR_PERMISSION_DENIED);
	CHECK(answer(range_as("x", "BBBBBBBBBBBBBBBB.8"), &len) != NULL);

	/* a write: checked, then proposed with the user and revision */
	refused(put_as("x", "AAAAAAAAAAAAAAAA.7"), AUTH_ERR_PERMISSION_DENIED);
	no_proposal();
	struct tc_stream *s = put_as("a/2", "AAAAAAAAAAAAAAAA.7");
	Etcdserverpb__InternalRaftRequest *irr = the_proposal();
	CHECK(irr->put != NULL);
	CHECK(strcmp(irr->header->username, "alice") == 0);
	CHECK(irr->header->auth_revision == rev);
	etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
	CHECK_EQ(nghttp2_submit_rst_stream(tc.session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL), 0);
	spin(2);

	/* admin calls */
	Etcdserverpb__DefragmentRequest dr = ETCDSERVERPB__DEFRAGMENT_REQUEST__INIT;
	s = call_as("/etcdserverpb.Maintenance/Defragment", &dr.base, "AAAAAAAAAAAAAAAA.7");
	wait_closed(s); /* etcd's authMaintenanceServer: the auth package's error */
	check_status(s, GRPC_STATUS_UNKNOWN, "auth: permission denied");
	Etcdserverpb__MemberRemoveRequest mr = ETCDSERVERPB__MEMBER_REMOVE_REQUEST__INIT;
	mr.id = 12345;
	refused(call_as("/etcdserverpb.Cluster/MemberRemove", &mr.base, NULL), AUTH_ERR_USER_EMPTY);
	no_proposal();

	/* an election's leader is read over "name/": not hers under b */
	V3electionpb__LeaderRequest lr = V3ELECTIONPB__LEADER_REQUEST__INIT;
	lr.name.data = (uint8_t *)"b";
	lr.name.len = 1;
	refused(call_as("/v3electionpb.Election/Leader", &lr.base, "AAAAAAAAAAAAAAAA.7"),
		AUTH_ERR_PERMISSION_DENIED);

	/* the cache follows the auth revision: x granted to alice's role */
	grant_perm("ra", AUTH_PB_READ, "x", "");
	CHECK(au.revision > rev);
	spin(2);
	CHECK(answer(range_as("x", "AAAAAAAAAAAAAAAA.7"), &len) != NULL);
}

static void test_authenticate(void)
{
	Etcdserverpb__AuthenticateRequest ar = ETCDSERVERPB__AUTHENTICATE_REQUEST__INIT;
	struct { const char *name, *pw; int err; } bad[] = {
		{ "alice", "wrong", AUTH_ERR_AUTH_FAILED },
		{ "nobody", "alicepw", AUTH_ERR_AUTH_FAILED },
	};

	for (size_t i = 0; i < 3; i++) {
		ar.name = (char *)(i < 2 ? bad[i].name : "alice");
		ar.password = (char *)(i < 2 ? bad[i].pw : "alicepw");
		struct tc_stream *s = call_as("/etcdserverpb.Auth/Authenticate", &ar.base, NULL);
		read_index();
		if (i < 2) {
			int64_t end = clock_now_ns() + 5000000000ll;
			while (!s->closed && clock_now_ns() < end) {
				spin(1);
				usleep(1000);
			}
			refused(s, bad[i].err);
			continue;
		}
		/* the worker checks the hash; then the proposal */
		struct rec v[2];
		int n = 0;
		int64_t end = clock_now_ns() + 5000000000ll;
		while (n == 0 && clock_now_ns() < end) {
			spin(1);
			n = take_to_raftd(v, 2);
			if (!n)
				usleep(1000);
		}
		CHECK_EQ(n, 1);
		struct msg_propose mp;
		memcpy(&mp, v[0].data, sizeof(mp));
		Etcdserverpb__InternalRaftRequest *irr = etcdserverpb__internal_raft_request__unpack(
			NULL, mp.data_len, v[0].data + sizeof(mp));
		CHECK(irr && irr->authenticate);
		CHECK(strcmp(irr->authenticate->name, "alice") == 0);
		CHECK(irr->authenticate->password[0] == '\0');
		CHECK(strlen(irr->authenticate->simple_token) == 16);
		for (int k = 0; k < 16; k++)
			CHECK(isalpha((unsigned char)irr->authenticate->simple_token[k]));
		etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);
		free_recs(v, n);
		CHECK_EQ(nghttp2_submit_rst_stream(tc.session, NGHTTP2_FLAG_NONE, s->id,
						   NGHTTP2_CANCEL),
			 0);
		spin(2);
	}
}

int main(void)
{
	char *flags[] = { "--initial-advertise-peer-urls", "http://127.0.0.1:23800",
			  "--initial-cluster", "gw=http://127.0.0.1:23800",
			  "--listen-client-urls", "http://127.0.0.1:23790",
			  "--advertise-client-urls", "http://127.0.0.1:23790" };
	struct gw_params p = { .request_timeout_ns = 5000000000ll, .pending_cap = 16 };
	struct auth_token_opts *tokens;

	CHECK_EQ(auth_token_opts_parse("simple", 0, &tokens), 0);
	p.auth_tokens = tokens;
	gwh_start(&p, MAX_REQ, flags, 8, NULL);
	gwh_open_db();
	gwh_hello();
	test_disabled();
	test_enabled();
	test_authenticate();
	gwh_stop();
	auth_token_opts_free(tokens);
	printf("gatewayd/test_auth_call: ok\n");
	return 0;
}
