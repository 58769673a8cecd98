/* The auth store (see auth.h). */
#include "stored/auth.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/bcrypt.h"
#include "auth/check.h"
#include "auth/alloc.h"
#include "auth/jwt.h"
#include "auth/token.h"
#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "authpb/auth.pb-c.h"
#include "base/log/log.h"
#include "stored/apply.h"
#include "stored/auth_check.h"
#include "stored/auth_db.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"
#include "shm/tokens.h"

#define AUTH_ROOT "root"
#define AUTH_KEY_ENABLED "authEnabled"
/* bbolt's MaxKeySize: etcd cannot store a longer name either */
#define AUTH_MAX_KEY 32768

/* The apply's own errors (auth.h); etcd's are auth/error.h's. */
static const struct {
	int err;
	int code;
	const char *msg;
} auth_apply_errors[] = {
	{ AUTH_ERR_CORRUPT, STORED_GRPC_DATA_LOSS,
	  "etcdserver: a user or role in the db does not decode" },
	{ AUTH_ERR_NAME_TOO_LONG, STORED_GRPC_INVALID_ARGUMENT, "etcdserver: the name is too long" },
	{ AUTH_ERR_HASH, STORED_GRPC_UNKNOWN, "etcdserver: cannot hash the password" },
	{ AUTH_ERR_TOKEN_TABLE, STORED_GRPC_RESOURCE_EXHAUSTED,
	  "etcdserver: too many auth tokens are live" },
	{ AUTH_ERR_VERIFY_ONLY, STORED_GRPC_UNKNOWN,
	  "auth: token signing attempted with verify-only key" },
	{ AUTH_ERR_SIGN, STORED_GRPC_UNKNOWN, "auth: cannot sign the token" },
};

bool stored_auth_is_request_error(int err)
{
	for (size_t i = 0; i < sizeof(auth_apply_errors) / sizeof(auth_apply_errors[0]); i++)
		if (auth_apply_errors[i].err == err)
			return true;
	return auth_is_error(err);
}

const char *stored_auth_strerror(int err)
{
	for (size_t i = 0; i < sizeof(auth_apply_errors) / sizeof(auth_apply_errors[0]); i++)
		if (auth_apply_errors[i].err == err)
			return auth_apply_errors[i].msg;
	return auth_strerror(err);
}

int stored_auth_grpc_code(int err)
{
	for (size_t i = 0; i < sizeof(auth_apply_errors) / sizeof(auth_apply_errors[0]); i++)
		if (auth_apply_errors[i].err == err)
			return auth_apply_errors[i].code;
	return auth_grpc_code(err);
}

/* ---- the buckets ---- */

/* One request's view of the store. */
struct auth_ctx {
	struct stored_auth *au;
	struct arena *a;
	ProtobufCAllocator al;
	struct btree_bucket *meta, *users, *roles;
	uint64_t index;           /* the entry's Raft index */
	ProtobufCMessage *resp;   /* the answer, for the requests that fill it */
	const char *me;           /* the header's user name, or "" */
	/* the permissions the admin checks read (auth/check.h), as of the
	 * buckets: stored's cache (au->check), else own's */
	const struct auth_cache *perms;
	struct auth_cache *own;
};

static void *auth_pb_alloc(void *arena, size_t size)
{
	return arena_alloc(arena, size);
}

static void auth_pb_free(void *arena, void *p)
{
	(void)arena;
	(void)p;
}

/* Opens (creating them if need be) the three buckets. */
static int auth_ctx_open(struct auth_ctx *c, struct btree_txn *t, struct stored_auth *au,
			 struct arena *a)
{
	int rc;

	c->au = au;
	c->perms = NULL;
	c->own = NULL;
	c->a = a;
	c->al = (ProtobufCAllocator){ .alloc = auth_pb_alloc, .free = auth_pb_free,
				      .allocator_data = a };
	rc = btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH, SCHEMA_LEN(SCHEMA_BUCKET_AUTH), &c->meta);
	if (rc && rc != -EEXIST)
		return rc;
	rc = btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH_USERS,
				 SCHEMA_LEN(SCHEMA_BUCKET_AUTH_USERS), &c->users);
	if (rc && rc != -EEXIST)
		return rc;
	rc = btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH_ROLES,
				 SCHEMA_LEN(SCHEMA_BUCKET_AUTH_ROLES), &c->roles);
	return rc == -EEXIST ? 0 : rc;
}

/* A record of b by name: 0 with *out decoded (NULL: none), AUTH_ERR_CORRUPT,
 * or the B+tree's error. */
static int auth_get(struct auth_ctx *c, struct btree_bucket *b, const ProtobufCMessageDescriptor *d,
		    const void *name, size_t len, ProtobufCMessage **out)
{
	const uint8_t *v;
	size_t vlen;
	int rc;

	*out = NULL;
	if (len == 0 || len > AUTH_MAX_KEY)
		return 0;
	rc = btree_get(b, name, len, &v, &vlen);
	if (rc == -ENOENT || rc == -EISDIR)
		return 0;
	if (rc)
		return rc;
	*out = protobuf_c_message_unpack(d, &c->al, vlen, v);
	if (!*out) {
		log_warn("a record of the auth store does not decode",
			 LOG_BYTES("name", (const uint8_t *)name, len));
		return AUTH_ERR_CORRUPT;
	}
	return 0;
}

static int auth_get_user(struct auth_ctx *c, const void *name, size_t len, Authpb__User **u)
{
	return auth_get(c, c->users, &authpb__user__descriptor, name, len, (ProtobufCMessage **)u);
}

static int auth_get_role(struct auth_ctx *c, const char *name, Authpb__Role **r)
{
	return auth_get(c, c->roles, &authpb__role__descriptor, name, strlen(name),
			(ProtobufCMessage **)r);
}

/* The same, with etcd's not found errors. */
static int auth_need_user(struct auth_ctx *c, const char *name, Authpb__User **u)
{
	int rc = auth_get_user(c, name, strlen(name), u);

	return rc ? rc : *u ? 0 : AUTH_ERR_USER_NOT_FOUND;
}

static int auth_need_role(struct auth_ctx *c, const char *name, Authpb__Role **r)
{
	int rc = auth_get_role(c, name, r);

	return rc ? rc : *r ? 0 : AUTH_ERR_ROLE_NOT_FOUND;
}

/* Writes m (a User or a Role) under its name. */
static int auth_put(struct auth_ctx *c, struct btree_bucket *b, const ProtobufCBinaryData *name,
		    const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *p;
	int rc;

	if (name->len == 0 || name->len > AUTH_MAX_KEY)
		return AUTH_ERR_NAME_TOO_LONG;
	p = arena_alloc(c->a, n ? n : 1);
	if (!p)
		return -ENOMEM;
	protobuf_c_message_pack(m, p);
	rc = btree_put(b, name->data, name->len, p, n);
	return rc == -EINVAL ? AUTH_ERR_NAME_TOO_LONG : rc;
}

static int auth_put_user(struct auth_ctx *c, const Authpb__User *u)
{
	return auth_put(c, c->users, &u->name, &u->base);
}

static int auth_put_role(struct auth_ctx *c, const Authpb__Role *r)
{
	return auth_put(c, c->roles, &r->name, &r->base);
}

/* etcd's tokenProvider.invalidateUser: name's simple tokens go. */
static void auth_invalidate_user(struct auth_ctx *c, const char *name)
{
	if (c->au->region)
		shm_tokens_invalidate_user(c->au->region, name, strlen(name));
}

/* etcd's commitRevision: the revision after this change, written. */
static int auth_commit_revision(struct auth_ctx *c)
{
	uint64_t rev = c->au->revision + 1;
	uint8_t be[8];
	int rc;

	for (int i = 0; i < 8; i++)
		be[i] = (uint8_t)(rev >> (56 - 8 * i));
	rc = btree_put(c->meta, SCHEMA_AUTH_REVISION, SCHEMA_LEN(SCHEMA_AUTH_REVISION), be, 8);
	if (rc == 0)
		c->au->revision = rev;
	return rc;
}

int stored_auth_load(struct btree_txn *t, struct stored_auth *au)
{
	struct btree_bucket *b;
	const uint8_t *v;
	size_t vlen;
	int rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_AUTH, SCHEMA_LEN(SCHEMA_BUCKET_AUTH), &b);

	au->enabled = false;
	au->revision = 0;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = btree_get(b, AUTH_KEY_ENABLED, SCHEMA_LEN(AUTH_KEY_ENABLED), &v, &vlen);
	if (rc == 0)
		au->enabled = vlen == 1 && v[0] == 1;
	else if (rc != -ENOENT)
		return rc;
	rc = btree_get(b, SCHEMA_AUTH_REVISION, SCHEMA_LEN(SCHEMA_AUTH_REVISION), &v, &vlen);
	if (rc == 0 && vlen == 8) {
		for (int i = 0; i < 8; i++)
			au->revision = au->revision << 8 | v[i];
	} else if (rc && rc != -ENOENT) {
		return rc;
	}
	return 0;
}

/* ---- users' roles: kept sorted, looked up as Go's sort.SearchStrings ---- */

static size_t auth_search(char *const *v, size_t n, const char *x)
{
	size_t i = 0, j = n;

	while (i < j) {
		size_t h = i + (j - i) / 2;
		if (strcmp(v[h], x) < 0)
			i = h + 1;
		else
			j = h;
	}
	return i;
}

static bool auth_has_role_sorted(const Authpb__User *u, const char *role)
{
	size_t i = auth_search(u->roles, u->n_roles, role);

	return i < u->n_roles && strcmp(u->roles[i], role) == 0;
}

static int auth_cmp_str(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* u's roles without role, in a new array (the old one is the caller's);
 * how many went in *removed. */
static int auth_roles_without(struct auth_ctx *c, Authpb__User *u, const char *role, size_t *removed)
{
	char **v = arena_alloc(c->a, (u->n_roles ? u->n_roles : 1) * sizeof(*v));
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < u->n_roles; i++)
		if (strcmp(u->roles[i], role) != 0)
			v[n++] = u->roles[i];
	*removed = u->n_roles - n;
	u->roles = n ? v : NULL;
	u->n_roles = n;
	return 0;
}

/* ---- the requests ---- */

/* A password's hash: etcd 3.5's hashedPassword as it came, or hashed here
 * from the password at the store's cost (into the arena). */
static int auth_password(struct auth_ctx *c, const char *name, const char *password,
			 const char *hashed, ProtobufCBinaryData *out)
{
	char *h;
	int rc;

	if (hashed && *hashed) {
		out->data = (uint8_t *)hashed;
		out->len = strlen(hashed);
		return 0;
	}
	h = arena_alloc(c->a, BCRYPT_HASH_SIZE);
	if (!h)
		return -ENOMEM;
	rc = bcrypt_hash(password, strlen(password), c->au->bcrypt_cost, h);
	if (rc == -ENOMEM)
		return rc;
	if (rc) {
		log_warn("failed to bcrypt hash password", LOG_STR("user-name", name), LOG_ERRNO(rc));
		return AUTH_ERR_HASH;
	}
	out->data = (uint8_t *)h;
	out->len = BCRYPT_HASH_LEN;
	return 0;
}

static int auth_enable(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	static const uint8_t one = 1;
	Authpb__User *u;
	int rc;

	(void)req;
	if (c->au->enabled) {
		log_info("authentication is already enabled; ignored auth enable request");
		return 0;
	}
	rc = auth_get_user(c, AUTH_ROOT, SCHEMA_LEN(AUTH_ROOT), &u);
	if (rc)
		return rc;
	if (!u)
		return AUTH_ERR_ROOT_USER_NOT_EXIST;
	if (!auth_has_role_sorted(u, AUTH_ROOT))
		return AUTH_ERR_ROOT_ROLE_NOT_EXIST;
	rc = btree_put(c->meta, AUTH_KEY_ENABLED, SCHEMA_LEN(AUTH_KEY_ENABLED), &one, 1);
	if (rc)
		return rc;
	c->au->enabled = true;
	log_info("enabled authentication");
	return 0;
}

static int auth_disable(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	static const uint8_t zero = 0;
	int rc;

	(void)req;
	if (!c->au->enabled)
		return 0;
	rc = btree_put(c->meta, AUTH_KEY_ENABLED, SCHEMA_LEN(AUTH_KEY_ENABLED), &zero, 1);
	if (!rc)
		rc = auth_commit_revision(c);
	if (rc)
		return rc;
	c->au->enabled = false;
	if (c->au->region)
		shm_tokens_clear(c->au->region); /* etcd's tokenProvider.disable */
	log_info("disabled authentication");
	return 0;
}

static int auth_user_add(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserAddRequest *r = req->auth_user_add;
	Authpb__User nu = AUTHPB__USER__INIT, *u;
	Authpb__UserAddOptions *opts = r->options;
	int rc;

	if (!*r->name)
		return AUTH_ERR_USER_EMPTY;
	rc = auth_get_user(c, r->name, strlen(r->name), &u);
	if (rc)
		return rc;
	if (u)
		return AUTH_ERR_USER_ALREADY_EXIST;
	if (!(opts && opts->no_password)) {
		rc = auth_password(c, r->name, r->password, r->hashedpassword, &nu.password);
		if (rc)
			return rc;
	}
	if (!opts) {
		opts = arena_alloc(c->a, sizeof(*opts));
		if (!opts)
			return -ENOMEM;
		authpb__user_add_options__init(opts);
	}
	nu.name.data = (uint8_t *)r->name;
	nu.name.len = strlen(r->name);
	nu.options = opts;
	if ((rc = auth_put_user(c, &nu)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("added a user", LOG_STR("user-name", r->name));
	return 0;
}

static int auth_user_delete(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserDeleteRequest *r = req->auth_user_delete;
	Authpb__User *u;
	int rc;

	if (c->au->enabled && strcmp(r->name, AUTH_ROOT) == 0) {
		log_warn("cannot delete 'root' user", LOG_STR("user-name", r->name));
		return AUTH_ERR_INVALID_AUTH_MGMT;
	}
	if ((rc = auth_need_user(c, r->name, &u)))
		return rc;
	rc = btree_del(c->users, r->name, strlen(r->name));
	if (rc || (rc = auth_commit_revision(c)))
		return rc;
	auth_invalidate_user(c, r->name);
	log_info("deleted a user", LOG_STR("user-name", r->name));
	return 0;
}

static int auth_user_change_password(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserChangePasswordRequest *r = req->auth_user_change_password;
	Authpb__User *u;
	ProtobufCBinaryData pw;
	int rc;

	if ((rc = auth_need_user(c, r->name, &u)))
		return rc;
	rc = auth_password(c, r->name, r->password, r->hashedpassword, &pw);
	if (rc)
		return rc;
	u->password = pw;
	if ((rc = auth_put_user(c, u)) || (rc = auth_commit_revision(c)))
		return rc;
	auth_invalidate_user(c, r->name);
	log_info("changed a password of a user", LOG_STR("user-name", r->name));
	return 0;
}

static int auth_user_grant_role(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserGrantRoleRequest *r = req->auth_user_grant_role;
	Authpb__User *u;
	Authpb__Role *role;
	char **v;
	int rc;

	if ((rc = auth_need_user(c, r->user, &u)))
		return rc;
	if (strcmp(r->role, AUTH_ROOT) != 0) {
		rc = auth_get_role(c, r->role, &role);
		if (rc)
			return rc;
		if (!role)
			return AUTH_ERR_ROLE_NOT_FOUND;
	}
	if (auth_has_role_sorted(u, r->role)) {
		log_warn("ignored grant role request to a user", LOG_STR("user-name", r->user),
			 LOG_STR("duplicate-role-name", r->role));
		return 0;
	}
	v = arena_alloc(c->a, (u->n_roles + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	if (u->n_roles)
		memcpy(v, u->roles, u->n_roles * sizeof(*v));
	v[u->n_roles] = r->role;
	u->roles = v;
	u->n_roles++;
	qsort(u->roles, u->n_roles, sizeof(*u->roles), auth_cmp_str);
	if ((rc = auth_put_user(c, u)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("granted a role to a user", LOG_STR("user-name", r->user),
		 LOG_STR("added-role-name", r->role));
	return 0;
}

static int auth_user_revoke_role(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserRevokeRoleRequest *r = req->auth_user_revoke_role;
	Authpb__User *u;
	size_t removed;
	int rc;

	if (c->au->enabled && strcmp(r->name, AUTH_ROOT) == 0 && strcmp(r->role, AUTH_ROOT) == 0) {
		log_warn("'root' user cannot revoke 'root' role", LOG_STR("user-name", r->name));
		return AUTH_ERR_INVALID_AUTH_MGMT;
	}
	if ((rc = auth_need_user(c, r->name, &u)))
		return rc;
	rc = auth_roles_without(c, u, r->role, &removed);
	if (rc)
		return rc;
	if (!removed)
		return AUTH_ERR_ROLE_NOT_GRANTED;
	if ((rc = auth_put_user(c, u)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("revoked a role from a user", LOG_STR("user-name", r->name),
		 LOG_STR("revoked-role-name", r->role));
	return 0;
}

static int auth_role_add(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthRoleAddRequest *r = req->auth_role_add;
	Authpb__Role nr = AUTHPB__ROLE__INIT, *role;
	int rc;

	if (!*r->name)
		return AUTH_ERR_ROLE_EMPTY;
	rc = auth_get_role(c, r->name, &role);
	if (rc)
		return rc;
	if (role)
		return AUTH_ERR_ROLE_ALREADY_EXIST;
	nr.name.data = (uint8_t *)r->name;
	nr.name.len = strlen(r->name);
	if ((rc = auth_put_role(c, &nr)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("created a role", LOG_STR("role-name", r->name));
	return 0;
}

/* bytes.Compare */
static int auth_cmp_bytes(const ProtobufCBinaryData *x, const ProtobufCBinaryData *y)
{
	size_t n = x->len < y->len ? x->len : y->len;
	int d = n ? memcmp(x->data, y->data, n) : 0;

	if (d)
		return d;
	return x->len < y->len ? -1 : x->len > y->len;
}

static bool auth_eq_bytes(const ProtobufCBinaryData *x, const ProtobufCBinaryData *y)
{
	return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

static int auth_role_grant_permission(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthRoleGrantPermissionRequest *r = req->auth_role_grant_permission;
	static const Authpb__Permission none = AUTHPB__PERMISSION__INIT;
	const Authpb__Permission *p = r->perm ? r->perm : &none;
	Authpb__Role *role;
	size_t i = 0, j, n;
	int rc;

	if ((rc = auth_need_role(c, r->name, &role)))
		return rc;
	n = role->n_keypermission;
	/* sort.Search: the first permission whose key is at or after p's */
	for (j = n; i < j;) {
		size_t h = i + (j - i) / 2;
		if (auth_cmp_bytes(&role->keypermission[h]->key, &p->key) < 0)
			i = h + 1;
		else
			j = h;
	}
	if (i < n && auth_eq_bytes(&role->keypermission[i]->key, &p->key) &&
	    auth_eq_bytes(&role->keypermission[i]->range_end, &p->range_end)) {
		role->keypermission[i]->permtype = p->permtype;
	} else {
		Authpb__Permission **v = arena_alloc(c->a, (n + 1) * sizeof(*v));
		Authpb__Permission *np = arena_alloc(c->a, sizeof(*np));
		if (!v || !np)
			return -ENOMEM;
		authpb__permission__init(np);
		np->key = p->key;
		np->range_end = p->range_end;
		np->permtype = p->permtype;
		if (n)
			memcpy(v, role->keypermission, n * sizeof(*v));
		/* appended, then sorted by key as etcd's sort.Sort of the
		 * permissions does for them: an insertion sort, which keeps
		 * the order of equal keys */
		for (j = n; j > 0 && auth_cmp_bytes(&np->key, &v[j - 1]->key) < 0; j--)
			v[j] = v[j - 1];
		v[j] = np;
		role->keypermission = v;
		role->n_keypermission = n + 1;
	}
	if ((rc = auth_put_role(c, role)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("granted/updated a permission to a user", LOG_STR("user-name", r->name));
	return 0;
}

static int auth_role_revoke_permission(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthRoleRevokePermissionRequest *r = req->auth_role_revoke_permission;
	Authpb__Role *role;
	size_t n = 0;
	int rc;

	if ((rc = auth_need_role(c, r->role, &role)))
		return rc;
	for (size_t i = 0; i < role->n_keypermission; i++) {
		Authpb__Permission *p = role->keypermission[i];
		if (!auth_eq_bytes(&p->key, &r->key) || !auth_eq_bytes(&p->range_end, &r->range_end))
			role->keypermission[n++] = p;
	}
	if (n == role->n_keypermission)
		return AUTH_ERR_PERMISSION_NOT_GRANTED;
	role->n_keypermission = n;
	if ((rc = auth_put_role(c, role)) || (rc = auth_commit_revision(c)))
		return rc;
	log_info("revoked a permission on range", LOG_STR("role-name", r->role));
	return 0;
}

/* Every record of b (decoded into the arena), in key order; with
 * below_ff, only the keys before "\xff" (etcd's getAllRoles ranges over
 * ["\x00", "\xff")). */
static int auth_all(struct auth_ctx *c, struct btree_bucket *b, const ProtobufCMessageDescriptor *d,
		    bool below_ff, ProtobufCMessage ***out, size_t *nout)
{
	struct btree_cursor cur;
	struct btree_kv kv;
	size_t n = 0, cap = 0;
	ProtobufCMessage **v = NULL;
	int rc;

	btree_cursor_init(&cur, b);
	for (rc = btree_cursor_first(&cur, &kv); rc == 0; rc = btree_cursor_next(&cur, &kv)) {
		ProtobufCMessage *m;
		if (kv.flags & BTREE_KV_BUCKET)
			continue;
		if (below_ff && kv.key_len && kv.key[0] == 0xff)
			break;
		m = protobuf_c_message_unpack(d, &c->al, kv.val_len, kv.val);
		if (!m) {
			log_warn("a record of the auth store does not decode",
				 LOG_BYTES("name", kv.key, kv.key_len));
			return AUTH_ERR_CORRUPT;
		}
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			ProtobufCMessage **nv = arena_alloc(c->a, ncap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			if (n)
				memcpy(nv, v, n * sizeof(*nv));
			v = nv;
			cap = ncap;
		}
		v[n++] = m;
	}
	if (rc != -ENOENT && rc != 0)
		return rc;
	*out = v;
	*nout = n;
	return 0;
}

static int auth_role_delete(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthRoleDeleteRequest *r = req->auth_role_delete;
	Authpb__Role *role;
	Authpb__User **users;
	size_t n, removed;
	int rc;

	if (c->au->enabled && strcmp(r->role, AUTH_ROOT) == 0) {
		log_warn("cannot delete 'root' role", LOG_STR("role-name", r->role));
		return AUTH_ERR_INVALID_AUTH_MGMT;
	}
	if ((rc = auth_need_role(c, r->role, &role)))
		return rc;
	/* every user read before any is written: a cursor does not outlive
	 * a change of its bucket */
	rc = auth_all(c, c->users, &authpb__user__descriptor, false, (ProtobufCMessage ***)&users, &n);
	if (rc)
		return rc;
	rc = btree_del(c->roles, r->role, strlen(r->role));
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		if ((rc = auth_roles_without(c, users[i], r->role, &removed)))
			return rc;
		if (removed && (rc = auth_put_user(c, users[i])))
			return rc;
	}
	if ((rc = auth_commit_revision(c)))
		return rc;
	log_info("deleted a role", LOG_STR("role-name", r->role));
	return 0;
}

/* The response of type d, zeroed, in the arena. */
static ProtobufCMessage *auth_resp(struct auth_ctx *c, const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = arena_alloc(c->a, d->sizeof_message);

	if (m)
		d->message_init(m);
	return m;
}

bool stored_auth_handles(const Etcdserverpb__InternalRaftRequest *req)
{
	return auth_check_needs_admin(req) || req->authenticate || req->auth_user_get ||
	       req->auth_role_get;
}

/* etcd's tokenProvider.assign for Authenticate r: the token in the
 * response (auth.h). */
static int auth_assign(struct auth_ctx *c, const Etcdserverpb__InternalAuthenticateRequest *r)
{
	Etcdserverpb__AuthenticateResponse *resp = (Etcdserverpb__AuthenticateResponse *)c->resp;
	const struct auth_token_opts *o = c->au->tokens;
	size_t n;
	int rc;

	if (!o || o->type == AUTH_TOKEN_NONE)
		return AUTH_ERR_AUTH_FAILED; /* etcd's nop provider: its assign fails */
	if (o->type == AUTH_TOKEN_JWT) {
		char *tok;
		int64_t exp = (int64_t)time(NULL) + o->jwt_ttl_ns / 1000000000;
		rc = auth_jwt_sign(o->jwt, r->name, strlen(r->name), c->au->revision, exp, &tok, &n);
		if (rc == -ENOMEM)
			return rc;
		if (rc)
			return rc == -EPERM ? AUTH_ERR_VERIFY_ONLY : AUTH_ERR_SIGN;
		resp->token = arena_alloc(c->a, n + 1);
		if (resp->token)
			memcpy(resp->token, tok, n + 1);
		auth_free(tok);
		return resp->token ? 0 : -ENOMEM;
	}
	resp->token = arena_alloc(c->a, AUTH_TOKEN_SIMPLE_MAX + 1);
	if (!resp->token)
		return -ENOMEM;
	n = auth_token_simple_format(r->simple_token, c->index, resp->token);
	if (!c->au->region)
		return 0;
	rc = shm_tokens_add(c->au->region, resp->token, n, r->name, strlen(r->name),
			    (uint64_t)clock_now_ms(), o->simple_ttl_ms);
	if (rc == -EEXIST)
		return 0; /* this entry applied again, after a batch that was not kept */
	if (rc) {
		log_warn("cannot keep the simple token", LOG_STR("user-name", r->name),
			 LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		return rc == -ENOMEM ? rc : AUTH_ERR_TOKEN_TABLE;
	}
	return 0;
}

static int auth_authenticate(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__InternalAuthenticateRequest *r = req->authenticate;
	Authpb__User *u;
	int rc;

	if (!c->au->enabled)
		return AUTH_ERR_AUTH_NOT_ENABLED;
	rc = auth_get_user(c, r->name, strlen(r->name), &u);
	if (rc)
		return rc;
	if (!u || (u->options && u->options->no_password))
		return AUTH_ERR_AUTH_FAILED;
	return auth_assign(c, r);
}

/* The names of records (Users or Roles: their name is their first
 * field) as strings in the arena. */
static int auth_names(struct auth_ctx *c, ProtobufCMessage **v, size_t n, size_t name_off,
		      char ***out)
{
	char **names = arena_alloc(c->a, (n ? n : 1) * sizeof(*names));

	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const ProtobufCBinaryData *b =
			(const ProtobufCBinaryData *)((const char *)v[i] + name_off);
		names[i] = arena_alloc(c->a, b->len + 1);
		if (!names[i])
			return -ENOMEM;
		if (b->len)
			memcpy(names[i], b->data, b->len);
		names[i][b->len] = '\0';
	}
	*out = names;
	return 0;
}

static int auth_user_get(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthUserGetRequest *r = req->auth_user_get;
	Etcdserverpb__AuthUserGetResponse *out = (Etcdserverpb__AuthUserGetResponse *)c->resp;
	Authpb__User *u;
	int rc = auth_check_user_get(c->perms, c->me, r);

	if (rc || (rc = auth_need_user(c, r->name, &u)))
		return rc;
	out->roles = u->roles;
	out->n_roles = u->n_roles;
	return 0;
}

static int auth_role_get(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	const Etcdserverpb__AuthRoleGetRequest *r = req->auth_role_get;
	Etcdserverpb__AuthRoleGetResponse *out = (Etcdserverpb__AuthRoleGetResponse *)c->resp;
	Authpb__Role *role;
	int rc = auth_check_role_get(c->perms, c->me, r);

	if (rc || (rc = auth_need_role(c, r->role, &role)))
		return rc;
	out->perm = role->keypermission;
	out->n_perm = role->n_keypermission;
	return 0;
}

/* The names of every record of b (auth_all), as strings in the arena. */
static int auth_list(struct auth_ctx *c, struct btree_bucket *b, const ProtobufCMessageDescriptor *d,
		     bool below_ff, size_t name_off, char ***out, size_t *n)
{
	ProtobufCMessage **v;
	int rc = auth_all(c, b, d, below_ff, &v, n);

	return rc ? rc : auth_names(c, v, *n, name_off, out);
}

static int auth_user_list(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	Etcdserverpb__AuthUserListResponse *out = (Etcdserverpb__AuthUserListResponse *)c->resp;

	(void)req;
	return auth_list(c, c->users, &authpb__user__descriptor, false, offsetof(Authpb__User, name),
			 &out->users, &out->n_users);
}

static int auth_role_list(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req)
{
	Etcdserverpb__AuthRoleListResponse *out = (Etcdserverpb__AuthRoleListResponse *)c->resp;

	(void)req;
	return auth_list(c, c->roles, &authpb__role__descriptor, true, offsetof(Authpb__Role, name),
			 &out->roles, &out->n_roles);
}

/* Each request kind: where the request is, its response, its applier. */
#define AUTH_KIND(field)                                                       \
	{ offsetof(Etcdserverpb__InternalRaftRequest, field),                  \
	  &etcdserverpb__##field##_response__descriptor, field }
static const struct {
	size_t req_off;
	const ProtobufCMessageDescriptor *d;
	int (*fn)(struct auth_ctx *c, const Etcdserverpb__InternalRaftRequest *req);
} auth_kinds[] = {
	{ offsetof(Etcdserverpb__InternalRaftRequest, authenticate),
	  &etcdserverpb__authenticate_response__descriptor, auth_authenticate },
	AUTH_KIND(auth_enable),
	AUTH_KIND(auth_disable),
	AUTH_KIND(auth_user_add),
	AUTH_KIND(auth_user_delete),
	AUTH_KIND(auth_user_change_password),
	AUTH_KIND(auth_user_grant_role),
	AUTH_KIND(auth_user_get),
	AUTH_KIND(auth_user_revoke_role),
	AUTH_KIND(auth_role_add),
	AUTH_KIND(auth_role_grant_permission),
	AUTH_KIND(auth_role_get),
	AUTH_KIND(auth_role_revoke_permission),
	AUTH_KIND(auth_role_delete),
	AUTH_KIND(auth_user_list),
	AUTH_KIND(auth_role_list),
};
#undef AUTH_KIND

/* c->perms for the admin checks: stored's permission cache, which it
 * keeps in step with the buckets (auth_check.h), or one built from t (a
 * record that does not decode then answers AUTH_ERR_CORRUPT). */
static int auth_perms(struct auth_ctx *c, struct btree_txn *t)
{
	int rc = 0;

	if (c->au->check && c->au->check->cache)
		c->perms = c->au->check->cache;
	else if (!(rc = auth_db_load(t, &c->own)))
		c->perms = c->own;
	return rc == -EUCLEAN ? AUTH_ERR_CORRUPT : rc;
}

static int auth_apply_done(struct auth_ctx *c, int rc)
{
	auth_cache_free(c->own);
	c->own = NULL;
	return rc;
}

int stored_auth_apply(struct btree_txn *t, struct stored_auth *au,
		      const Etcdserverpb__InternalRaftRequest *req, uint64_t index,
		      struct arena *a, ProtobufCMessage **resp,
		      Etcdserverpb__ResponseHeader ***hdr)
{
	struct auth_ctx c;
	int rc = auth_ctx_open(&c, t, au, a);

	*resp = NULL;
	*hdr = NULL;
	if (rc)
		return rc;
	c.index = index;
	c.me = req->header && req->header->username ? req->header->username : "";
	if (auth_check_needs_admin(req) || req->auth_user_get || req->auth_role_get) {
		if ((rc = auth_perms(&c, t)))
			return rc;
		if (auth_check_needs_admin(req) && (rc = auth_check_admin(c.perms, c.me)))
			return auth_apply_done(&c, rc);
	}
	for (size_t i = 0; i < sizeof(auth_kinds) / sizeof(auth_kinds[0]); i++) {
		const ProtobufCMessageDescriptor *d = auth_kinds[i].d;
		if (!*(void *const *)((const char *)req + auth_kinds[i].req_off))
			continue;
		c.resp = *resp = auth_resp(&c, d);
		if (!*resp)
			return -ENOMEM;
		/* every one has its ResponseHeader as field 1 */
		*hdr = (Etcdserverpb__ResponseHeader **)((char *)*resp +
							 protobuf_c_message_descriptor_get_field(d, 1)->offset);
		return auth_apply_done(&c, auth_kinds[i].fn(&c, req));
	}
	return auth_apply_done(&c, -EINVAL);
}
