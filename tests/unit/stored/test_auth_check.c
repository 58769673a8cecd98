/*
 * Unit tests for stored/auth_check.c through stored/apply.c: the second
 * check of every request at apply against the permission cache, beside
 * the tokens stored/auth.c makes at apply.
 *   - a permission revoked between a request's first check (its header's
 *     auth revision) and its apply wins: the old revision is refused,
 *     the new one denied; nothing is applied either time;
 *   - Range, Put (prev_kv, lease), DeleteRange (prev_kv), Txn (compares,
 *     both branches) and LeaseRevoke (keys attached) as etcd checks
 *     them, no user while auth is enabled, an unknown user, the
 *     admin-only requests, stored's own revokes as root;
 *   - the cache rebuilt at each auth change and at open;
 *   - a deleted user's token and requests both stop working; simple
 *     tokens made on every member, a full table, JWTs signed with the
 *     revision the checks compare against.
 */
#include "stored_util.h"

#include "auth/jwt.h"
#include "auth/token.h"
#include "raftpb/raft.pb-c.h"
#include "shm/tokens.h"
#include "stored/alloc.h"
#include "stored/apply.h"
#include "stored/auth.h"
#include "stored/auth_check.h"
#include "stored/lessor.h"
#include "stored/mvcc/mvcc.h"

#include <time.h>

#include "base/clock/clock.h"

static char dir[256];
static char region_path[512];

struct fixture {
	struct tst_store t;
	struct lessor *lessor;
	struct stored_auth_check ac;
};

static void fx_event(void *arg, const struct mvcc_event *ev)
{
	lessor_on_event(arg, ev);
}

/* The store with a lessor that follows its keys, and the check with the
 * table r (NULL: none) and the token options tokens (NULL: none). */
static void fx_open(struct fixture *f, struct shm_region *r, const struct auth_token_opts *tokens)
{
	struct lessor_opts lo = { .min_ttl = 2, .extend_ns = 1000000000 };
	struct mvcc_store_opts so = { .on_event = fx_event };

	CHECK_EQ(lessor_new(&lo, &f->lessor), 0);
	so.event_arg = f->lessor;
	tst_store_open_opts(&f->t, dir, &so);
	f->t.au.region = r;
	f->t.au.tokens = tokens;
	f->ac = (struct stored_auth_check){ .lessor = f->lessor };
	CHECK_EQ(stored_auth_check_load(&f->ac, mvcc_batch_txn(f->t.s)), 0);
	f->t.ids.auth_check = &f->ac;
	f->t.ids.lessor = f->lessor;
}

static void fx_close(struct fixture *f)
{
	tst_store_close(&f->t);
	stored_auth_check_fini(&f->ac);
	lessor_free(f->lessor);
}

/* Applies req with the header user@rev (user NULL: no header) at the
 * next index, proposed here (mine) or by another member. */
static void fx_apply_from(struct fixture *f, Etcdserverpb__InternalRaftRequest *req,
			  const char *user, uint64_t rev, bool mine, struct stored_apply_result *r)
{
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	struct msg_origin o = tst_origin(1, 1, f->t.index + 100);
	struct tbuf d = { 0 };
	struct msg_committed e = { .term = 7, .entry_type = RAFTPB__ENTRY_TYPE__EntryNormal };

	if (!mine)
		o.member_id = TST_MEMBER + 1;
	h.id = f->t.index + 1;
	h.username = (char *)(user ? user : "");
	h.auth_revision = rev;
	req->header = user ? &h : NULL;
	tst_entry(req, &o, &d);
	e.index = ++f->t.index;
	e.data_len = (uint32_t)d.len;
	CHECK_EQ(stored_apply_entry(f->t.s, &f->t.ids, &e, d.p, &f->t.a, r), 0);
	CHECK_EQ(r->deliver, mine);
	tbuf_free(&d);
	req->header = NULL;
}

static void fx_apply(struct fixture *f, Etcdserverpb__InternalRaftRequest *req, const char *user,
		     uint64_t rev, struct stored_apply_result *r)
{
	fx_apply_from(f, req, user, rev, true, r);
}

/* The auth revision a token issued now carries. */
static uint64_t fx_rev(const struct fixture *f)
{
	return f->t.au.revision;
}

static void want(const struct stored_apply_result *r, int err)
{
	int32_t code = err ? auth_grpc_code(err) : 0;
	const char *text = err ? auth_strerror(err) : "";

	if (r->status != code || (err && (r->body_len != strlen(text) ||
					  memcmp(r->body, text, r->body_len)))) {
		fprintf(stderr, "want %d \"%s\", got %d \"%.*s\"\n", code, text, r->status,
			(int)r->body_len, r->status ? (const char *)r->body : "");
		CHECK_INVARIANT(INV10_AUTH_TWICE, r->status == code);
		CHECK(0);
	}
}

/* ---- requests ---- */

static void put(struct fixture *f, const char *key, int64_t lease, bool prev_kv, const char *user,
		uint64_t rev, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	struct stored_apply_result r;
	struct mvcc_state before, after;

	p.key = tb(key);
	p.value = tb("v");
	p.lease = lease;
	p.prev_kv = prev_kv;
	req.put = &p;
	mvcc_store_state(f->t.s, &before);
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
	mvcc_store_state(f->t.s, &after);
	/* a refused Put writes nothing */
	CHECK_INVARIANT_EQ(INV10_AUTH_TWICE, after.rev, before.rev + (err ? 0 : 1));
}

static void range(struct fixture *f, const char *key, const char *end, const char *user,
		  uint64_t rev, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__RangeRequest g = ETCDSERVERPB__RANGE_REQUEST__INIT;
	struct stored_apply_result r;

	g.key = tb(key);
	g.range_end = tb(end);
	req.range = &g;
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
}

static void delete_range(struct fixture *f, const char *key, const char *end, bool prev_kv,
			 const char *user, uint64_t rev, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	struct stored_apply_result r;

	d.key = tb(key);
	d.range_end = tb(end);
	d.prev_kv = prev_kv;
	req.delete_range = &d;
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
}

/* A Txn comparing cmp's version, putting put_key on success and reading
 * read_key on failure. */
static void txn(struct fixture *f, const char *cmp, const char *put_key, const char *read_key,
		const char *user, uint64_t rev, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__Compare c = ETCDSERVERPB__COMPARE__INIT, *cs[1] = { &c };
	Etcdserverpb__RequestOp so = ETCDSERVERPB__REQUEST_OP__INIT, *sv[1] = { &so };
	Etcdserverpb__RequestOp fo = ETCDSERVERPB__REQUEST_OP__INIT, *fv[1] = { &fo };
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest g = ETCDSERVERPB__RANGE_REQUEST__INIT;
	struct stored_apply_result r;

	c.key = tb(cmp);
	c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
	c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
	p.key = tb(put_key);
	so.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	so.request_put = &p;
	g.key = tb(read_key);
	fo.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	fo.request_range = &g;
	t.n_compare = t.n_success = t.n_failure = 1;
	t.compare = cs;
	t.success = sv;
	t.failure = fv;
	req.txn = &t;
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
}

/* A Txn with no compare whose success branch is a Txn putting put_key. */
static void txn_nested(struct fixture *f, const char *put_key, const char *user, uint64_t rev,
		       int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT, in = t;
	Etcdserverpb__RequestOp so = ETCDSERVERPB__REQUEST_OP__INIT, *sv[1] = { &so };
	Etcdserverpb__RequestOp io = ETCDSERVERPB__REQUEST_OP__INIT, *iv[1] = { &io };
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	struct stored_apply_result r;

	p.key = tb(put_key);
	io.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	io.request_put = &p;
	in.n_success = 1;
	in.success = iv;
	so.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
	so.request_txn = &in;
	t.n_success = 1;
	t.success = sv;
	req.txn = &t;
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
}

static void lease_grant(struct fixture *f, int64_t id)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	struct stored_apply_result r;

	g.id = id;
	g.ttl = 60;
	req.lease_grant = &g;
	fx_apply(f, &req, "root", fx_rev(f), &r);
	want(&r, 0);
}

static void lease_revoke(struct fixture *f, int64_t id, const char *user, uint64_t rev, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseRevokeRequest v = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	struct stored_apply_result r;

	v.id = id;
	req.lease_revoke = &v;
	if (user && strcmp(user, "stored") == 0) {
		/* stored's own revoke of an expired lease */
		stored_auth_check_root_header(&f->ac, &h);
		user = h.username[0] ? h.username : NULL;
		rev = h.auth_revision;
	}
	fx_apply(f, &req, user, rev, &r);
	want(&r, err);
}

/* The auth store's requests, as root at the current revision. */
static void mgmt(struct fixture *f, Etcdserverpb__InternalRaftRequest *req, const char *user)
{
	struct stored_apply_result r;

	fx_apply(f, req, user, fx_rev(f), &r);
	want(&r, 0);
}

static void user_add(struct fixture *f, const char *name, const char *as, int err)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserAddRequest ua = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	struct stored_apply_result r;

	ua.name = (char *)name;
	ua.password = "pw";
	/* a hash as gatewayd sends it: nothing hashed at apply */
	ua.hashedpassword = "$2a$04$abcdefghijklmnopqrstuuAbcdefghijklmnopqrstuvwxyz01234";
	req.auth_user_add = &ua;
	fx_apply(f, &req, as, fx_rev(f), &r);
	want(&r, err);
}

static void grant_role(struct fixture *f, const char *user, const char *role)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserGrantRoleRequest g = ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;

	g.user = (char *)user;
	g.role = (char *)role;
	req.auth_user_grant_role = &g;
	mgmt(f, &req, "root");
}

/* Adds role (key NULL), or grants or revokes its permission [key, end). */
static void perm(struct fixture *f, bool grant, const char *role, const char *key,
		 const char *end, int type)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthRoleAddRequest ra = ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT;
	Etcdserverpb__AuthRoleGrantPermissionRequest g =
		ETCDSERVERPB__AUTH_ROLE_GRANT_PERMISSION_REQUEST__INIT;
	Etcdserverpb__AuthRoleRevokePermissionRequest v =
		ETCDSERVERPB__AUTH_ROLE_REVOKE_PERMISSION_REQUEST__INIT;
	Authpb__Permission p = AUTHPB__PERMISSION__INIT;

	ra.name = g.name = v.role = (char *)role;
	if (key) {
		p.key = v.key = tb(key);
		p.range_end = v.range_end = tb(end);
		p.permtype = (Authpb__Permission__Type)type;
		g.perm = &p;
	}
	if (!key)
		req.auth_role_add = &ra;
	else if (grant)
		req.auth_role_grant_permission = &g;
	else
		req.auth_role_revoke_permission = &v;
	mgmt(f, &req, "root");
}

static void enable(struct fixture *f, bool on)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthEnableRequest en = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
	Etcdserverpb__AuthDisableRequest dis = ETCDSERVERPB__AUTH_DISABLE_REQUEST__INIT;

	if (on)
		req.auth_enable = &en;
	else
		req.auth_disable = &dis;
	mgmt(f, &req, "root");
}

/* root (with the root role) and alice, whose role "rw" may write [k, l)
 * and read [k, m); auth enabled. */
static void fx_users(struct fixture *f)
{
	user_add(f, "root", NULL, 0);
	user_add(f, "alice", NULL, 0);
	grant_role(f, "root", "root");
	perm(f, true, "rw", NULL, NULL, 0);
	perm(f, true, "rw", "k", "l", AUTH_PB_WRITE);
	perm(f, true, "rw", "k", "m", AUTH_PB_READ);
	grant_role(f, "alice", "rw");
	enable(f, true);
	CHECK(auth_cache_enabled(f->ac.cache));
	CHECK_EQ(auth_cache_revision(f->ac.cache), f->t.au.revision);
}

/* An Authenticate of name with the proposer's prefix; its answer. */
static void authenticate(struct fixture *f, const char *name, bool mine,
			 struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__InternalAuthenticateRequest a =
		ETCDSERVERPB__INTERNAL_AUTHENTICATE_REQUEST__INIT;

	a.name = (char *)name;
	a.simple_token = "AbCdEfGhIjKlMnOp";
	req.authenticate = &a;
	fx_apply_from(f, &req, NULL, 0, mine, r);
}

/* The token of a successful Authenticate's answer, copied to out. */
static void token_of(const struct stored_apply_result *r, char *out, size_t cap)
{
	Etcdserverpb__AuthenticateResponse *m;

	want(r, 0);
	m = etcdserverpb__authenticate_response__unpack(NULL, r->body_len, r->body);
	CHECK(m != NULL);
	CHECK(strlen(m->token) < cap);
	snprintf(out, cap, "%s", m->token);
	etcdserverpb__authenticate_response__free_unpacked(m, NULL);
}

/* Who the region's table says token belongs to ("" when nobody). */
static const char *token_user(struct shm_region *reg, const char *token)
{
	static char user[SHM_TOKEN_USER_MAX + 1];
	size_t n = 0;

	if (shm_tokens_lookup(reg, token, strlen(token), (uint64_t)clock_now_ms(), 300000, user,
			      sizeof(user) - 1, &n) != 0)
		n = 0;
	user[n] = '\0';
	return user;
}

/* Fills the table with tokens of "filler" until token finds no room. */
static void fill_around(struct shm_region *reg, const char *token)
{
	uint64_t now = (uint64_t)clock_now_ms();
	char t[64];

	for (unsigned i = 0;; i++) {
		CHECK(i < 16 * SHM_TOKENS_ENTRIES);
		snprintf(t, sizeof(t), "filler.%u", i);
		(void)shm_tokens_add(reg, t, strlen(t), "filler", 6, now, 300000);
		if (i % 64)
			continue;
		int rc = shm_tokens_add(reg, token, strlen(token), "probe", 5, now, 300000);
		if (rc == -ENOSPC)
			return;
		CHECK_EQ(rc, 0);
		CHECK_EQ(shm_tokens_invalidate_user(reg, "probe", 5), 1);
	}
}

/* ---- tests ---- */

static void test_revoked_between_check_and_apply(void)
{
	struct fixture f;
	uint64_t r0;

	fx_open(&f, NULL, NULL);
	fx_users(&f);
	r0 = fx_rev(&f);
	/* gatewayd checked alice's Put at r0 and proposed it; it applies */
	put(&f, "k1", 0, false, "alice", r0, 0);
	/* a second one is checked at r0 too, but the permission is revoked
	 * before it applies */
	perm(&f, false, "rw", "k", "l", 0);
	CHECK_EQ(fx_rev(&f), r0 + 1);
	CHECK_EQ(auth_cache_revision(f.ac.cache), r0 + 1);
	put(&f, "k1", 0, false, "alice", r0, AUTH_ERR_OLD_REVISION);
	/* checked again at the new revision, it is denied */
	put(&f, "k1", 0, false, "alice", r0 + 1, AUTH_ERR_PERMISSION_DENIED);
	/* her reads were not revoked, but an old revision is refused all
	 * the same */
	range(&f, "k1", "", "alice", r0, AUTH_ERR_OLD_REVISION);
	range(&f, "k1", "", "alice", r0 + 1, 0);
	/* a later header (a member that applied more auth changes) is
	 * checked against what this member holds */
	range(&f, "k1", "", "alice", r0 + 5, 0);
	/* granted back: the Put applies at the newest revision */
	perm(&f, true, "rw", "k", "l", AUTH_PB_WRITE);
	put(&f, "k1", 0, false, "alice", r0 + 1, AUTH_ERR_OLD_REVISION);
	put(&f, "k1", 0, false, "alice", r0 + 2, 0);
	fx_close(&f);
}

static void test_request_kinds(void)
{
	struct fixture f;
	uint64_t rv;

	fx_open(&f, NULL, NULL);
	/* auth disabled: anyone, with or without a header */
	put(&f, "x", 0, false, NULL, 0, 0);
	put(&f, "x", 0, false, "nobody", 3, 0);
	fx_users(&f);
	rv = fx_rev(&f);

	/* no user: etcd's "user name is empty" (revision 0) */
	put(&f, "k1", 0, false, NULL, 0, AUTH_ERR_USER_EMPTY);
	range(&f, "k1", "", NULL, 0, AUTH_ERR_USER_EMPTY);
	put(&f, "k1", 0, false, "alice", 0, AUTH_ERR_USER_EMPTY);
	/* a user the store does not know */
	put(&f, "k1", 0, false, "bob", rv, AUTH_ERR_PERMISSION_DENIED);
	/* root may do anything */
	put(&f, "x", 0, false, "root", rv, 0);

	/* Put: WRITE on the key; prev_kv needs READ too ([k, l) is read) */
	put(&f, "k2", 0, true, "alice", rv, 0);
	put(&f, "l1", 0, false, "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	/* Range: READ on its range */
	range(&f, "k", "m", "alice", rv, 0);
	range(&f, "k", "n", "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	/* DeleteRange: WRITE; with prev_kv READ as well */
	delete_range(&f, "k", "l", true, "alice", rv, 0);
	delete_range(&f, "k", "m", false, "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	/* Txn: the compare's range is read, each op of both branches
	 * checked whichever runs */
	txn(&f, "l5", "k3", "k4", "alice", rv, 0);
	txn(&f, "x", "k3", "k4", "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	txn(&f, "k3", "l3", "k4", "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	txn(&f, "k3", "k3", "x", "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	/* but as etcd 3.4 applies a Txn, so that its members and these agree:
	 * a nested Txn is not looked into (its Put of x applies), while a Put
	 * in a branch still needs WRITE on its key */
	txn_nested(&f, "x", "alice", rv, 0);
	txn(&f, "k3", "l1", "k4", "alice", rv, AUTH_ERR_PERMISSION_DENIED);

	/* leases: a key attached that alice may not write keeps her from
	 * revoking the lease and from attaching more keys to it */
	lease_grant(&f, 7);
	lease_grant(&f, 8);
	put(&f, "k5", 7, false, "alice", rv, 0);
	put(&f, "k6", 8, false, "alice", rv, 0);
	put(&f, "x", 8, false, "root", rv, 0);
	put(&f, "k7", 8, false, "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	lease_revoke(&f, 8, "alice", rv, AUTH_ERR_PERMISSION_DENIED);
	lease_revoke(&f, 8, NULL, 0, AUTH_ERR_USER_EMPTY);
	lease_revoke(&f, 7, "alice", rv, 0);
	/* a lease with no keys (or none at all) asks for nothing */
	lease_grant(&f, 9);
	lease_revoke(&f, 9, "alice", rv, 0);
	/* stored revokes an expired lease as root, at the revision it holds */
	lease_revoke(&f, 8, "stored", 0, 0);

	/* the admin-only requests need the root role (stored/auth.c) */
	user_add(&f, "carol", "alice", AUTH_ERR_PERMISSION_DENIED);
	user_add(&f, "carol", "bob", AUTH_ERR_USER_NOT_FOUND);
	user_add(&f, "carol", NULL, AUTH_ERR_USER_EMPTY);
	user_add(&f, "carol", "root", 0);
	fx_close(&f);
}

/* The cache a reopened store builds is the one the changes left. */
static void test_cache_at_open(void)
{
	struct fixture f;
	struct stored_auth_check again = { 0 };
	uint64_t rv;

	fx_open(&f, NULL, NULL);
	fx_users(&f);
	perm(&f, false, "rw", "k", "l", 0);
	rv = fx_rev(&f);
	CHECK_EQ(stored_auth_check_load(&again, mvcc_batch_txn(f.t.s)), 0);
	CHECK(auth_cache_enabled(again.cache));
	CHECK_EQ(auth_cache_revision(again.cache), rv);
	const struct auth_user *u = auth_cache_user(again.cache, "alice", 5);
	CHECK(u != NULL);
	CHECK(!auth_user_permitted(again.cache, u, AUTH_PERM_WRITE, (const uint8_t *)"k1", 2,
				   NULL, 0));
	CHECK(auth_user_permitted(again.cache, u, AUTH_PERM_READ, (const uint8_t *)"k1", 2, NULL,
				  0));
	stored_auth_check_fini(&again);
	/* disabled: the cache says so, and stored's revokes carry no user */
	enable(&f, false);
	CHECK(!auth_cache_enabled(f.ac.cache));
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	stored_auth_check_root_header(&f.ac, &h);
	CHECK_EQ(strcmp(h.username, ""), 0);
	CHECK_EQ(h.auth_revision, 0);
	put(&f, "k1", 0, false, NULL, 0, 0);
	fx_close(&f);
}

static void test_simple_tokens(struct shm_region *reg)
{
	struct auth_token_opts *opts;
	struct stored_apply_result r;
	struct fixture f;
	char ta[64], tb1[64], tr[64], want_tok[64];

	CHECK_EQ(auth_token_opts_parse("simple", 300, &opts), 0);
	fx_open(&f, reg, opts);
	fx_users(&f);
	CHECK_EQ(mvcc_batch_commit(f.t.s, NULL), 0);
	CHECK_EQ(mvcc_batch_begin(f.t.s), 0);
	authenticate(&f, "alice", true, &r);
	token_of(&r, ta, sizeof(ta));
	/* the same entry applied again, its batch not kept: its token is in
	 * the table already, and it answers as the first time */
	mvcc_batch_abort(f.t.s);
	CHECK_EQ(mvcc_batch_begin(f.t.s), 0);
	f.t.index--;
	authenticate(&f, "alice", true, &r);
	token_of(&r, tb1, sizeof(tb1));
	CHECK_EQ(strcmp(tb1, ta), 0);
	/* "<the proposer's prefix>.<the entry's index>" */
	snprintf(want_tok, sizeof(want_tok), "AbCdEfGhIjKlMnOp.%llu", (unsigned long long)f.t.index);
	CHECK_EQ(strcmp(ta, want_tok), 0);
	CHECK_EQ(strcmp(token_user(reg, ta), "alice"), 0);
	/* another member's Authenticate: the token is kept here too */
	authenticate(&f, "alice", false, &r);
	snprintf(tb1, sizeof(tb1), "AbCdEfGhIjKlMnOp.%llu", (unsigned long long)f.t.index);
	CHECK_EQ(strcmp(token_user(reg, tb1), "alice"), 0);
	authenticate(&f, "root", true, &r);
	token_of(&r, tr, sizeof(tr));
	CHECK_EQ(strcmp(token_user(reg, tr), "root"), 0);
	/* no such user: no token */
	authenticate(&f, "bob", true, &r);
	want(&r, AUTH_ERR_AUTH_FAILED);

	/* a new password: alice's tokens stop working, root's do not */
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserChangePasswordRequest cp =
		ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;
	cp.name = "alice";
	cp.hashedpassword = "$2a$04$abcdefghijklmnopqrstuuAbcdefghijklmnopqrstuvwxyz98765";
	req.auth_user_change_password = &cp;
	mgmt(&f, &req, "root");
	CHECK_EQ(strcmp(token_user(reg, ta), ""), 0);
	CHECK_EQ(strcmp(token_user(reg, tb1), ""), 0);
	CHECK_EQ(strcmp(token_user(reg, tr), "root"), 0);

	/* deleted: her new token stops working */
	authenticate(&f, "alice", true, &r);
	token_of(&r, ta, sizeof(ta));
	CHECK_EQ(strcmp(token_user(reg, ta), "alice"), 0);
	Etcdserverpb__InternalRaftRequest del = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserDeleteRequest ud = ETCDSERVERPB__AUTH_USER_DELETE_REQUEST__INIT;
	ud.name = "alice";
	del.auth_user_delete = &ud;
	mgmt(&f, &del, "root");
	CHECK_EQ(strcmp(token_user(reg, ta), ""), 0);
	CHECK_EQ(strcmp(token_user(reg, tr), "root"), 0);
	/* and a request she had checked before is refused at apply */
	put(&f, "k1", 0, false, "alice", fx_rev(&f) - 1, AUTH_ERR_OLD_REVISION);
	put(&f, "k1", 0, false, "alice", fx_rev(&f), AUTH_ERR_PERMISSION_DENIED);

	/* the table has no room where the next token would go: etcd's map
	 * would grow, cetcd answers that it is full */
	snprintf(want_tok, sizeof(want_tok), "AbCdEfGhIjKlMnOp.%llu",
		 (unsigned long long)f.t.index + 1);
	fill_around(reg, want_tok);
	authenticate(&f, "root", true, &r);
	CHECK_EQ(r.status, STORED_GRPC_RESOURCE_EXHAUSTED);
	CHECK_EQ(strcmp(token_user(reg, want_tok), ""), 0);
	CHECK(shm_tokens_invalidate_user(reg, "filler", 6) > 0);

	/* auth disabled: every token is gone; Authenticate is refused */
	enable(&f, false);
	CHECK_EQ(strcmp(token_user(reg, tr), ""), 0);
	authenticate(&f, "root", true, &r);
	want(&r, AUTH_ERR_AUTH_NOT_ENABLED);
	fx_close(&f);
	auth_token_opts_free(opts);
}

static void test_jwt_and_none(void)
{
	static const char secret[] = "a secret of the test, 32 bytes!!";
	struct auth_token_opts *opts;
	struct auth_jwt_claims cl;
	struct stored_apply_result r;
	struct fixture f;
	char key[300], spec[400], tok[2048];
	FILE *fp;

	snprintf(key, sizeof(key), "%s/hs.key", dir);
	fp = fopen(key, "w");
	CHECK(fp != NULL);
	CHECK_EQ(fwrite(secret, 1, sizeof(secret) - 1, fp), sizeof(secret) - 1);
	CHECK_EQ(fclose(fp), 0);
	snprintf(spec, sizeof(spec), "jwt,priv-key=%s,sign-method=HS256,ttl=10m", key);
	CHECK_EQ(auth_token_opts_parse(spec, 300, &opts), 0);
	fx_open(&f, NULL, opts);
	fx_users(&f);
	authenticate(&f, "alice", true, &r);
	token_of(&r, tok, sizeof(tok));
	int64_t now = (int64_t)time(NULL);
	CHECK_EQ(auth_jwt_verify(opts->jwt, tok, strlen(tok), now, &cl), 0);
	CHECK_EQ(strcmp(cl.username, "alice"), 0);
	CHECK_EQ(cl.revision, fx_rev(&f));
	CHECK(cl.exp >= now + 600 - 2 && cl.exp <= now + 600 + 2);
	auth_jwt_claims_free(&cl);
	authenticate(&f, "bob", true, &r);
	want(&r, AUTH_ERR_AUTH_FAILED);
	fx_close(&f);
	auth_token_opts_free(opts);
	unlink(key);

	/* --auth-token "": etcd's nop provider fails every Authenticate */
	fx_open(&f, NULL, NULL);
	fx_users(&f);
	authenticate(&f, "alice", true, &r);
	want(&r, AUTH_ERR_AUTH_FAILED);
	fx_close(&f);
}

int main(void)
{
	struct shm_region_params p = { .slot_count = 4, .max_request_bytes = 4096 };
	struct shm_region *reg;
	char rdir[256];

	test_watchdog(240);
	test_tmpdir(dir, sizeof(dir));
	test_region_path(rdir, sizeof(rdir), region_path, sizeof(region_path));
	CHECK_EQ(shm_region_create(region_path, &p, &reg), 0);
	test_revoked_between_check_and_apply();
	test_request_kinds();
	test_cache_at_open();
	test_simple_tokens(reg);
	test_jwt_and_none();
	shm_region_detach(reg);
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_auth_check: ok\n");
	return 0;
}
