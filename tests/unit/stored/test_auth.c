/*
 * Unit tests for stored/auth.c through stored/apply.c: auth entries in,
 * the auth buckets and etcd's answers out. Each of the 16 requests with
 * etcd 3.4's errors (code and text), the revision bumps etcd counts and
 * those it does not (AuthEnable, a role granted twice), the root user and
 * role special cases, sorted roles and permissions, a role's delete
 * taking it from every user, the admin check while auth is enabled, the
 * records' bytes as etcd writes them, passwords hashed at apply or taken
 * from hashedPassword, and a record that does not decode.
 */
#include "stored_util.h"

#include "auth/bcrypt.h"
#include "auth/token.h"
#include "base/clock/clock.h"
#include "shm/tokens.h"
#include "authpb/auth.pb-c.h"
#include "raftpb/raft.pb-c.h"
#include "stored/alloc.h"
#include "stored/apply.h"
#include "stored/auth.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/schema.h"

static char dir[256];

/* Applies req as user (NULL: no header) at the next index; the result in
 * *r. */
static void fx_apply(struct tst_store *f, Etcdserverpb__InternalRaftRequest *req, const char *user,
		     struct stored_apply_result *r)
{
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	struct msg_origin o = tst_origin(1, 1, f->index + 100);
	struct tbuf d = { 0 };
	struct msg_committed e = { .term = 7, .entry_type = RAFTPB__ENTRY_TYPE__EntryNormal };

	h.id = f->index + 1;
	if (user) {
		h.username = (char *)user;
		req->header = &h;
	} else {
		req->header = NULL;
	}
	tst_entry(req, &o, &d);
	e.index = ++f->index;
	e.data_len = (uint32_t)d.len;
	CHECK_EQ(stored_apply_entry(f->s, &f->ids, &e, d.p, &f->a, r), 0);
	CHECK(r->deliver);
	tbuf_free(&d);
	req->header = NULL;
}

static void check_error(const struct stored_apply_result *r, int32_t code, const char *text)
{
	if (r->status != code || r->body_len != strlen(text) || memcmp(r->body, text, r->body_len)) {
		fprintf(stderr, "want %d \"%s\", got %d \"%.*s\"\n", code, text, r->status,
			(int)r->body_len, (const char *)r->body);
		CHECK(0);
	}
}

/* The answer decoded as d (status 0, a full header at the store's
 * revision and the entry's term). */
static void *check_ok(struct tst_store *f, const struct stored_apply_result *r,
		      const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m;
	Etcdserverpb__ResponseHeader *h;
	struct mvcc_state st;

	if (r->status) {
		fprintf(stderr, "want ok, got %d \"%.*s\"\n", r->status, (int)r->body_len,
			(const char *)r->body);
		CHECK(0);
	}
	m = protobuf_c_message_unpack(d, NULL, r->body_len, r->body);
	CHECK(m != NULL);
	/* every auth response has its header first */
	h = *(Etcdserverpb__ResponseHeader **)((char *)m + d->fields[0].offset);
	CHECK(h != NULL);
	mvcc_store_state(f->s, &st);
	CHECK_EQ(h->cluster_id, TST_CLUSTER);
	CHECK_EQ(h->member_id, TST_MEMBER);
	CHECK_EQ(h->raft_term, 7);
	CHECK_EQ(h->revision, st.rev);
	return m;
}

/* The record of bucket under name, its bytes in *out (NULL: none). */
static bool fx_record(struct tst_store *f, const char *bucket, const char *name, struct tbuf *out)
{
	struct btree_bucket *b;
	const uint8_t *v;
	size_t vlen;

	out->len = 0;
	CHECK_EQ(btree_bucket_open(mvcc_batch_txn(f->s), NULL, bucket, strlen(bucket), &b), 0);
	if (btree_get(b, name, strlen(name), &v, &vlen) != 0)
		return false;
	tbuf_add(out, v, vlen);
	return true;
}

static Authpb__User *fx_user(struct tst_store *f, const char *name)
{
	struct tbuf d = { 0 };
	Authpb__User *u = NULL;

	if (fx_record(f, SCHEMA_BUCKET_AUTH_USERS, name, &d)) {
		u = authpb__user__unpack(NULL, d.len, d.p);
		CHECK(u != NULL);
	}
	tbuf_free(&d);
	return u;
}

/* ---- request makers ---- */

static void user_add(struct tst_store *f, const char *name, const char *pw, const char *hashed,
		     bool no_password, const char *as, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserAddRequest ua = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	Authpb__UserAddOptions opts = AUTHPB__USER_ADD_OPTIONS__INIT;

	ua.name = (char *)name;
	ua.password = (char *)pw;
	if (hashed)
		ua.hashedpassword = (char *)hashed;
	if (no_password) {
		opts.no_password = true;
		ua.options = &opts;
	}
	req.auth_user_add = &ua;
	fx_apply(f, &req, as, r);
}

#define NAME_REQ(fn, field, type, INIT, member)                                         \
	static void fn(struct tst_store *f, const char *name, const char *as,             \
		       struct stored_apply_result *r)                                   \
	{                                                                               \
		Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT; \
		type x = INIT;                                                          \
		x.member = (char *)name;                                                \
		req.field = &x;                                                         \
		fx_apply(f, &req, as, r);                                               \
	}
NAME_REQ(user_get, auth_user_get, Etcdserverpb__AuthUserGetRequest,
	 ETCDSERVERPB__AUTH_USER_GET_REQUEST__INIT, name)
NAME_REQ(user_delete, auth_user_delete, Etcdserverpb__AuthUserDeleteRequest,
	 ETCDSERVERPB__AUTH_USER_DELETE_REQUEST__INIT, name)
NAME_REQ(role_add, auth_role_add, Etcdserverpb__AuthRoleAddRequest,
	 ETCDSERVERPB__AUTH_ROLE_ADD_REQUEST__INIT, name)
NAME_REQ(role_get, auth_role_get, Etcdserverpb__AuthRoleGetRequest,
	 ETCDSERVERPB__AUTH_ROLE_GET_REQUEST__INIT, role)
NAME_REQ(role_delete, auth_role_delete, Etcdserverpb__AuthRoleDeleteRequest,
	 ETCDSERVERPB__AUTH_ROLE_DELETE_REQUEST__INIT, role)

static void user_role(struct tst_store *f, bool grant, const char *user, const char *role,
		      const char *as, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserGrantRoleRequest g = ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
	Etcdserverpb__AuthUserRevokeRoleRequest v = ETCDSERVERPB__AUTH_USER_REVOKE_ROLE_REQUEST__INIT;

	if (grant) {
		g.user = (char *)user;
		g.role = (char *)role;
		req.auth_user_grant_role = &g;
	} else {
		v.name = (char *)user;
		v.role = (char *)role;
		req.auth_user_revoke_role = &v;
	}
	fx_apply(f, &req, as, r);
}

static void perm(struct tst_store *f, bool grant, const char *role, const char *key,
		 const char *end, int type, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthRoleGrantPermissionRequest g =
		ETCDSERVERPB__AUTH_ROLE_GRANT_PERMISSION_REQUEST__INIT;
	Etcdserverpb__AuthRoleRevokePermissionRequest v =
		ETCDSERVERPB__AUTH_ROLE_REVOKE_PERMISSION_REQUEST__INIT;
	Authpb__Permission p = AUTHPB__PERMISSION__INIT;

	if (grant) {
		p.key = tb(key);
		p.range_end = tb(end);
		p.permtype = (Authpb__Permission__Type)type;
		g.name = (char *)role;
		g.perm = &p;
		req.auth_role_grant_permission = &g;
	} else {
		v.role = (char *)role;
		v.key = tb(key);
		v.range_end = tb(end);
		req.auth_role_revoke_permission = &v;
	}
	fx_apply(f, &req, NULL, r);
}

static void simple(struct tst_store *f, int which, const char *as, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthEnableRequest en = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
	Etcdserverpb__AuthDisableRequest dis = ETCDSERVERPB__AUTH_DISABLE_REQUEST__INIT;
	Etcdserverpb__AuthUserListRequest ul = ETCDSERVERPB__AUTH_USER_LIST_REQUEST__INIT;
	Etcdserverpb__AuthRoleListRequest rl = ETCDSERVERPB__AUTH_ROLE_LIST_REQUEST__INIT;

	if (which == 0)
		req.auth_enable = &en;
	else if (which == 1)
		req.auth_disable = &dis;
	else if (which == 2)
		req.auth_user_list = &ul;
	else
		req.auth_role_list = &rl;
	fx_apply(f, &req, as, r);
}
enum { ENABLE, DISABLE, USER_LIST, ROLE_LIST };

static void change_password(struct tst_store *f, const char *name, const char *pw,
			    const char *hashed, const char *as, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserChangePasswordRequest c =
		ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;

	c.name = (char *)name;
	c.password = (char *)pw;
	if (hashed)
		c.hashedpassword = (char *)hashed;
	req.auth_user_change_password = &c;
	fx_apply(f, &req, as, r);
}

static void authenticate(struct tst_store *f, const char *name, struct stored_apply_result *r)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__InternalAuthenticateRequest a = ETCDSERVERPB__INTERNAL_AUTHENTICATE_REQUEST__INIT;

	a.name = (char *)name;
	a.simple_token = "AbCdEfGhIjKlMnOp";
	req.authenticate = &a;
	fx_apply(f, &req, NULL, r);
}

/* An Authenticate's answer: a simple token for the entry's index, or
 * none. */
static void check_token(struct tst_store *f, const struct stored_apply_result *r, bool simple)
{
	Etcdserverpb__AuthenticateResponse *m =
		check_ok(f, r, &etcdserverpb__authenticate_response__descriptor);
	char want[64] = "";

	if (simple)
		snprintf(want, sizeof(want), "AbCdEfGhIjKlMnOp.%llu", (unsigned long long)f->index);
	CHECK(strcmp(m->token, want) == 0);
	protobuf_c_message_free_unpacked(&m->base, NULL);
}

/* Whether the table has the simple token of the entry at index for user. */
static bool token_user(struct tst_store *f, uint64_t index, const char *user)
{
	char tok[64], got[SHM_TOKEN_USER_MAX];
	size_t n;
	int len = snprintf(tok, sizeof(tok), "AbCdEfGhIjKlMnOp.%llu", (unsigned long long)index);

	if (shm_tokens_lookup(f->au.region, tok, (size_t)len, (uint64_t)clock_now_ms(), 300000, got,
			      sizeof(got), &n) != 0)
		return false;
	return n == strlen(user) && memcmp(got, user, n) == 0;
}

/* The string list of an answer, as "a,b,c". */
static void joined(char **v, size_t n, char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i < n; i++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? "," : "", v[i]);
}

static void check_list(struct tst_store *f, int which, const char *want)
{
	struct stored_apply_result r;
	char got[512];

	simple(f, which, "root", &r);
	if (which == USER_LIST) {
		Etcdserverpb__AuthUserListResponse *m =
			check_ok(f, &r, &etcdserverpb__auth_user_list_response__descriptor);
		joined(m->users, m->n_users, got, sizeof(got));
		protobuf_c_message_free_unpacked(&m->base, NULL);
	} else {
		Etcdserverpb__AuthRoleListResponse *m =
			check_ok(f, &r, &etcdserverpb__auth_role_list_response__descriptor);
		joined(m->roles, m->n_roles, got, sizeof(got));
		protobuf_c_message_free_unpacked(&m->base, NULL);
	}
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "list: want \"%s\", got \"%s\"\n", want, got);
		CHECK(0);
	}
}

static void check_user_roles(struct tst_store *f, const char *name, const char *want)
{
	struct stored_apply_result r;
	Etcdserverpb__AuthUserGetResponse *m;
	char got[512];

	user_get(f, name, "root", &r);
	m = check_ok(f, &r, &etcdserverpb__auth_user_get_response__descriptor);
	joined(m->roles, m->n_roles, got, sizeof(got));
	protobuf_c_message_free_unpacked(&m->base, NULL);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "roles of %s: want \"%s\", got \"%s\"\n", name, want, got);
		CHECK(0);
	}
}

/* The role's permissions as "type:key-end" items. */
static void check_perms(struct tst_store *f, const char *role, const char *want)
{
	struct stored_apply_result r;
	Etcdserverpb__AuthRoleGetResponse *m;
	char got[512] = "";

	role_get(f, role, NULL, &r);
	m = check_ok(f, &r, &etcdserverpb__auth_role_get_response__descriptor);
	for (size_t i = 0; i < m->n_perm; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d:%.*s-%.*s",
			 i ? "," : "", m->perm[i]->permtype, (int)m->perm[i]->key.len,
			 (const char *)m->perm[i]->key.data, (int)m->perm[i]->range_end.len,
			 (const char *)m->perm[i]->range_end.data);
	protobuf_c_message_free_unpacked(&m->base, NULL);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "perms of %s: want \"%s\", got \"%s\"\n", role, want, got);
		CHECK(0);
	}
}

#define FP 9
#define IA 3

/* Users: add (hashed at apply, taken hashed, without a password), the
 * bytes etcd writes, errors, passwords, delete. */
static void test_users(void)
{
	struct tst_store f;
	struct stored_apply_result r;
	Authpb__User *u;

	tst_store_open(&f, dir);
	/* etcd's fresh store is at auth revision 1 (mvcc.c writes it) */
	CHECK_EQ(f.au.revision, 1);
	check_list(&f, USER_LIST, "");
	user_add(&f, "", "pw", NULL, false, NULL, &r);
	check_error(&r, IA, "etcdserver: user name is empty");
	CHECK_EQ(f.au.revision, 1);

	/* hashed here at the store's cost */
	user_add(&f, "alice", "secret", NULL, false, NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_user_add_response__descriptor), NULL);
	CHECK_EQ(f.au.revision, 2);
	u = fx_user(&f, "alice");
	CHECK(u != NULL);
	CHECK_EQ(u->name.len, 5);
	CHECK(bcrypt_is_hash((const char *)u->password.data, u->password.len));
	CHECK(memcmp(u->password.data, "$2a$04$", 7) == 0);
	CHECK(bcrypt_verify("secret", 6, (const char *)u->password.data, u->password.len));
	CHECK(!bcrypt_verify("secreT", 6, (const char *)u->password.data, u->password.len));
	/* etcd stores options even when the request had none */
	CHECK(u->options != NULL && !u->options->no_password);
	CHECK_EQ(u->n_roles, 0);
	authpb__user__free_unpacked(u, NULL);

	/* the bytes: name, password, options as an empty message */
	{
		static const char hash[] = "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy";
		static const uint8_t want_head[] = { 0x0a, 3, 'b', 'o', 'b', 0x12, 60 };
		struct tbuf d = { 0 };

		user_add(&f, "bob", "ignored", hash, false, NULL, &r);
		CHECK_EQ(r.status, 0);
		CHECK(fx_record(&f, SCHEMA_BUCKET_AUTH_USERS, "bob", &d));
		CHECK_EQ(d.len, sizeof(want_head) + 60 + 2);
		CHECK(memcmp(d.p, want_head, sizeof(want_head)) == 0);
		CHECK(memcmp(d.p + sizeof(want_head), hash, 60) == 0);
		CHECK(d.p[d.len - 2] == 0x22 && d.p[d.len - 1] == 0);
		tbuf_free(&d);
	}
	CHECK_EQ(f.au.revision, 3);
	user_add(&f, "bob", "x", NULL, false, NULL, &r);
	check_error(&r, FP, "etcdserver: user name already exists");
	CHECK_EQ(f.au.revision, 3);

	/* no password: none stored, the option kept */
	user_add(&f, "carol", "", NULL, true, NULL, &r);
	CHECK_EQ(r.status, 0);
	u = fx_user(&f, "carol");
	CHECK(u && u->password.len == 0 && u->options && u->options->no_password);
	authpb__user__free_unpacked(u, NULL);
	check_list(&f, USER_LIST, "alice,bob,carol");

	/* passwords */
	change_password(&f, "nobody", "x", NULL, NULL, &r);
	check_error(&r, FP, "etcdserver: user name not found");
	change_password(&f, "alice", "other", NULL, NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_user_change_password_response__descriptor), NULL);
	u = fx_user(&f, "alice");
	CHECK(bcrypt_verify("other", 5, (const char *)u->password.data, u->password.len));
	CHECK(u->options != NULL);
	authpb__user__free_unpacked(u, NULL);
	CHECK_EQ(f.au.revision, 5);

	user_get(&f, "nobody", NULL, &r);
	check_error(&r, FP, "etcdserver: user name not found");
	user_delete(&f, "nobody", NULL, &r);
	check_error(&r, FP, "etcdserver: user name not found");
	user_delete(&f, "bob", NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_user_delete_response__descriptor), NULL);
	CHECK(fx_user(&f, "bob") == NULL);
	CHECK_EQ(f.au.revision, 6);
	check_list(&f, USER_LIST, "alice,carol");
	tst_store_close(&f);
}

/* Roles, permissions, users' roles. */
static void test_roles(void)
{
	struct tst_store f;
	struct stored_apply_result r;
	uint64_t rev;

	tst_store_open(&f, dir);
	role_add(&f, "", NULL, &r);
	check_error(&r, IA, "etcdserver: role name is empty");
	role_add(&f, "r1", NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_role_add_response__descriptor), NULL);
	role_add(&f, "r0", NULL, &r);
	CHECK_EQ(r.status, 0);
	role_add(&f, "r1", NULL, &r);
	check_error(&r, FP, "etcdserver: role name already exists");
	/* etcd's role list ranges over ["\x00", "\xff"): a name from 0xff on
	 * is not listed */
	role_add(&f, "\xff-hidden", NULL, &r);
	CHECK_EQ(r.status, 0);
	check_list(&f, ROLE_LIST, "r0,r1");
	CHECK_EQ(f.au.revision, 4);

	/* permissions: sorted by key, one per (key, range end) */
	perm(&f, true, "nope", "a", "", 0, &r);
	check_error(&r, FP, "etcdserver: role name not found");
	perm(&f, true, "r1", "b", "", 0, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_role_grant_permission_response__descriptor),
		NULL);
	perm(&f, true, "r1", "a", "c", 0, &r);
	perm(&f, true, "r1", "a", "b", 0, &r);
	check_perms(&f, "r1", "0:a-c,0:a-b,0:b-");
	perm(&f, true, "r1", "a", "c", 1, &r); /* the same pair: its type changes */
	check_perms(&f, "r1", "1:a-c,0:a-b,0:b-");
	CHECK_EQ(f.au.revision, 8);
	{
		/* the bytes of a role */
		struct tbuf d = { 0 };
		Authpb__Role *ro;
		CHECK(fx_record(&f, SCHEMA_BUCKET_AUTH_ROLES, "r1", &d));
		CHECK(d.p[0] == 0x0a && d.p[1] == 2 && d.p[2] == 'r' && d.p[3] == '1');
		/* Permission{permType WRITE, key "a", range_end "c"} */
		static const uint8_t p0[] = { 0x12, 8, 0x08, 1, 0x12, 1, 'a', 0x1a, 1, 'c' };
		CHECK(memcmp(d.p + 4, p0, sizeof(p0)) == 0);
		ro = authpb__role__unpack(NULL, d.len, d.p);
		CHECK(ro && ro->n_keypermission == 3);
		authpb__role__free_unpacked(ro, NULL);
		tbuf_free(&d);
	}
	perm(&f, false, "r1", "a", "b", 0, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_role_revoke_permission_response__descriptor),
		NULL);
	check_perms(&f, "r1", "1:a-c,0:b-");
	perm(&f, false, "r1", "a", "b", 0, &r);
	check_error(&r, FP, "etcdserver: permission is not granted to the role");
	perm(&f, false, "nope", "a", "b", 0, &r);
	check_error(&r, FP, "etcdserver: role name not found");
	role_get(&f, "nope", NULL, &r);
	check_error(&r, FP, "etcdserver: role name not found");

	/* users' roles */
	user_add(&f, "u", "", NULL, true, NULL, &r);
	user_add(&f, "v", "", NULL, true, NULL, &r);
	rev = f.au.revision;
	user_role(&f, true, "nobody", "r1", NULL, &r);
	check_error(&r, FP, "etcdserver: user name not found");
	user_role(&f, true, "u", "nope", NULL, &r);
	check_error(&r, FP, "etcdserver: role name not found");
	user_role(&f, true, "u", "r1", NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_user_grant_role_response__descriptor), NULL);
	user_role(&f, true, "u", "r0", NULL, &r);
	/* "root" need not exist as a role */
	user_role(&f, true, "u", "root", NULL, &r);
	check_user_roles(&f, "u", "r0,r1,root");
	CHECK_EQ(f.au.revision, rev + 3);
	user_role(&f, true, "u", "r1", NULL, &r); /* granted already: no change */
	CHECK_EQ(r.status, 0);
	CHECK_EQ(f.au.revision, rev + 3);
	user_role(&f, true, "v", "r0", NULL, &r);

	/* a role's delete takes it from every user, one revision */
	role_delete(&f, "nope", NULL, &r);
	check_error(&r, FP, "etcdserver: role name not found");
	role_delete(&f, "r0", NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_role_delete_response__descriptor), NULL);
	CHECK_EQ(f.au.revision, rev + 5);
	check_user_roles(&f, "u", "r1,root");
	check_user_roles(&f, "v", "");
	check_list(&f, ROLE_LIST, "r1");

	user_role(&f, false, "u", "r0", NULL, &r);
	check_error(&r, FP, "etcdserver: role is not granted to the user");
	user_role(&f, false, "nobody", "r0", NULL, &r);
	check_error(&r, FP, "etcdserver: user name not found");
	user_role(&f, false, "u", "r1", NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_user_revoke_role_response__descriptor), NULL);
	check_user_roles(&f, "u", "root");
	CHECK_EQ(f.au.revision, rev + 6);
	tst_store_close(&f);
}

/* Enable and disable, the root special cases, the admin check, and
 * Authenticate. */
static void test_enable(void)
{
	struct tst_store f;
	struct stored_apply_result r;
	struct stored_auth loaded = { 0 };

	tst_store_open(&f, dir);
	simple(&f, ENABLE, NULL, &r);
	check_error(&r, FP, "etcdserver: root user does not exist");
	authenticate(&f, "root", &r);
	check_error(&r, FP, "etcdserver: authentication is not enabled");
	user_add(&f, "root", "rootpw", NULL, false, NULL, &r);
	simple(&f, ENABLE, NULL, &r);
	check_error(&r, FP, "etcdserver: root user does not have root role");
	CHECK(!f.au.enabled);
	user_role(&f, true, "root", "root", NULL, &r);
	CHECK_EQ(f.au.revision, 3);
	simple(&f, ENABLE, NULL, &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_enable_response__descriptor), NULL);
	CHECK(f.au.enabled);
	CHECK_EQ(f.au.revision, 3); /* etcd does not count an enable */
	simple(&f, ENABLE, "root", &r); /* enabled already: fine */
	CHECK_EQ(r.status, 0);

	/* the flag and the revision as etcd keeps them */
	{
		struct tbuf d = { 0 };
		static const uint8_t rev3[] = { 0, 0, 0, 0, 0, 0, 0, 3 };
		CHECK(fx_record(&f, SCHEMA_BUCKET_AUTH, "authEnabled", &d));
		CHECK(d.len == 1 && d.p[0] == 1);
		CHECK(fx_record(&f, SCHEMA_BUCKET_AUTH, "authRevision", &d));
		CHECK(d.len == 8 && memcmp(d.p, rev3, 8) == 0);
		tbuf_free(&d);
	}
	loaded.bcrypt_cost = 7;
	CHECK_EQ(stored_auth_load(mvcc_batch_txn(f.s), &loaded), 0);
	CHECK(loaded.enabled && loaded.revision == 3 && loaded.bcrypt_cost == 7);

	/* management needs a root user in the header now */
	role_add(&f, "r", NULL, &r);
	check_error(&r, IA, "etcdserver: user name is empty");
	role_add(&f, "r", "ghost", &r);
	check_error(&r, FP, "etcdserver: user name not found");
	user_add(&f, "alice", "", NULL, true, "root", &r);
	CHECK_EQ(r.status, 0);
	role_add(&f, "r", "alice", &r);
	check_error(&r, 7, "etcdserver: permission denied");
	role_add(&f, "r", "root", &r);
	CHECK_EQ(r.status, 0);
	simple(&f, USER_LIST, "alice", &r);
	check_error(&r, 7, "etcdserver: permission denied");
	/* but one's own user, and a role one holds */
	user_get(&f, "alice", "alice", &r);
	CHECK_EQ(r.status, 0);
	user_get(&f, "root", "alice", &r);
	check_error(&r, 7, "etcdserver: permission denied");
	role_get(&f, "r", "alice", &r);
	check_error(&r, 7, "etcdserver: permission denied");
	user_role(&f, true, "alice", "r", "root", &r);
	role_get(&f, "r", "alice", &r);
	CHECK_EQ(r.status, 0);

	/* root stays while enabled */
	user_delete(&f, "root", "root", &r);
	check_error(&r, IA, "etcdserver: invalid auth management");
	user_role(&f, false, "root", "root", "root", &r);
	check_error(&r, IA, "etcdserver: invalid auth management");
	role_delete(&f, "root", "root", &r);
	check_error(&r, IA, "etcdserver: invalid auth management");

	/* Authenticate: etcd's nop provider makes no token and fails it */
	authenticate(&f, "ghost", &r);
	check_error(&r, IA, "etcdserver: authentication failed, invalid user ID or password");
	authenticate(&f, "alice", &r); /* no password: never */
	check_error(&r, IA, "etcdserver: authentication failed, invalid user ID or password");
	authenticate(&f, "root", &r);
	check_error(&r, IA, "etcdserver: authentication failed, invalid user ID or password");
	/* simple tokens: "<prefix>.<index>", kept in the region's table */
	struct tst_member mb;
	struct auth_token_opts simple_opts = { .type = AUTH_TOKEN_SIMPLE, .simple_ttl_ms = 300000 };
	tst_member_init(&mb, 4096);
	f.au.region = tst_attach(&mb);
	f.au.tokens = &simple_opts;
	authenticate(&f, "root", &r);
	check_token(&f, &r, true);
	CHECK(token_user(&f, f.index, "root"));
	uint64_t root_token = f.index;
	user_add(&f, "carol", "pw", NULL, false, "root", &r);
	authenticate(&f, "carol", &r);
	check_token(&f, &r, true);
	uint64_t carol_token = f.index;
	authenticate(&f, "carol", &r);
	check_token(&f, &r, true);
	uint64_t carol_token2 = f.index;
	CHECK(token_user(&f, carol_token, "carol") && token_user(&f, carol_token2, "carol"));
	/* a new password, or the user's delete, ends its tokens (only its) */
	change_password(&f, "carol", "pw2", NULL, "root", &r);
	CHECK(r.status == 0);
	CHECK(!token_user(&f, carol_token, "carol") && !token_user(&f, carol_token2, "carol"));
	CHECK(token_user(&f, root_token, "root"));
	authenticate(&f, "carol", &r);
	carol_token = f.index;
	user_delete(&f, "carol", "root", &r);
	CHECK(r.status == 0);
	CHECK(!token_user(&f, carol_token, "carol"));
	CHECK(token_user(&f, root_token, "root"));

	uint64_t rev = f.au.revision;
	simple(&f, DISABLE, "alice", &r);
	check_error(&r, 7, "etcdserver: permission denied");
	simple(&f, DISABLE, "root", &r);
	protobuf_c_message_free_unpacked(
		check_ok(&f, &r, &etcdserverpb__auth_disable_response__descriptor), NULL);
	CHECK(!f.au.enabled);
	CHECK(!token_user(&f, root_token, "root")); /* disabled: every token goes */
	CHECK_EQ(f.au.revision, rev + 1);
	simple(&f, DISABLE, NULL, &r); /* disabled already: no change */
	CHECK_EQ(r.status, 0);
	CHECK_EQ(f.au.revision, rev + 1);
	/* and now root goes like any user */
	user_role(&f, false, "root", "root", NULL, &r);
	CHECK_EQ(r.status, 0);
	user_delete(&f, "root", NULL, &r);
	CHECK_EQ(r.status, 0);
	shm_region_detach(f.au.region);
	shm_region_detach(mb.launcher);
	tst_member_clean(&mb);
	tst_store_close(&f);
}

/* A record that does not decode is refused, not a crash; the KV store's
 * revision never moves. */
static void test_corrupt(void)
{
	struct tst_store f;
	struct stored_apply_result r;
	struct btree_bucket *b;
	struct mvcc_state st;

	tst_store_open(&f, dir);
	CHECK_EQ(btree_bucket_open(mvcc_batch_txn(f.s), NULL, SCHEMA_BUCKET_AUTH_USERS,
				   strlen(SCHEMA_BUCKET_AUTH_USERS), &b),
		 0);
	CHECK_EQ(btree_put(b, "bad", 3, "\x0a\x7f", 2), 0);
	user_get(&f, "bad", NULL, &r);
	check_error(&r, 15, "etcdserver: a user or role in the db does not decode");
	simple(&f, USER_LIST, NULL, &r);
	check_error(&r, 15, "etcdserver: a user or role in the db does not decode");
	role_add(&f, "r", NULL, &r);
	role_delete(&f, "r", NULL, &r);
	check_error(&r, 15, "etcdserver: a user or role in the db does not decode");
	mvcc_store_state(f.s, &st);
	CHECK_EQ(st.rev, 1);
	tst_store_close(&f);
}

int main(void)
{
	test_tmpdir(dir, sizeof(dir));
	test_users();
	test_roles();
	test_enable();
	test_corrupt();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_auth: ok\n");
	return 0;
}
