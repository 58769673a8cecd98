/*
 * Fuzz target: the auth buckets of an installed db (a db comes from the
 * leader's snapshot or from disk: outside input), as stored's auth store
 * reads them (stored/auth.c: name -> authpb.User in authUsers, name ->
 * authpb.Role in authRoles, authEnabled and authRevision in auth). The
 * input is a list of entries, each a flags byte (bits 0-1: 0 authUsers,
 * 1 authRoles, else auth), a key length byte, a value length byte, then
 * the key and the value (cut short at the input's end). They are put in
 * a write txn of a scratch db, the store is loaded, and every request
 * kind is applied as root and as nobody, on the names the input holds
 * and on fixed ones; the txn is then dropped. Checked besides the
 * sanitizers: each answer is 0 or one of etcd's request errors (a record
 * that does not decode is refused, never a crash), and a user's roles
 * stay sorted after a grant.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "authpb/auth.pb-c.h"
#include "base/log/log.h"
#include "stored/auth.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"
#include "fuzz_db.h"

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_authstore: %s\n", what);
		abort();
	}
}

/* The input's entries into the buckets of t; the first user and role
 * names (NUL-terminated, cut at 31 bytes) in user and role. */
static void fill(struct btree_txn *t, const uint8_t *data, size_t size, char user[32],
		 char role[32])
{
	static const char *const names[] = { SCHEMA_BUCKET_AUTH_USERS, SCHEMA_BUCKET_AUTH_ROLES,
					     SCHEMA_BUCKET_AUTH };
	struct btree_bucket *b[3];

	for (int i = 0; i < 3; i++) {
		int rc = btree_bucket_create(t, NULL, names[i], strlen(names[i]), &b[i]);
		require(rc == 0 || rc == -EEXIST, "cannot create the buckets");
	}
	struct fuzz_rec r;
	while (fuzz_db_record(&data, &size, &r)) {
		unsigned which = r.tag & 3;
		if (which > 2)
			which = 2;
		char *name = which == 0 ? user : which == 1 ? role : NULL;
		if (name && !name[0] && r.klen && !memchr(r.key, '\0', r.klen)) {
			size_t n = r.klen < 31 ? r.klen : 31;
			memcpy(name, r.key, n);
			name[n] = '\0';
		}
		(void)btree_put(b[which], r.key, r.klen, r.val, r.vlen);
	}
}

static void apply(struct btree_txn *t, struct stored_auth *au,
		  Etcdserverpb__InternalRaftRequest *req, const char *as)
{
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	ProtobufCMessage *resp;
	Etcdserverpb__ResponseHeader **hdr;
	struct arena a;
	int rc;

	arena_init(&a);
	h.username = (char *)as;
	req->header = &h;
	rc = stored_auth_apply(t, au, req, 7, &a, &resp, &hdr);
	require(rc == 0 || stored_auth_is_request_error(rc), "an answer that is no request error");
	require(rc != 0 || (resp && hdr), "an answer without its response");
	arena_release(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btree_txn *t;
	struct stored_auth au = { .bcrypt_cost = 4 };
	char user[32] = "", role[32] = "";
	const char *as[] = { "root", "" };

	require(btree_write_begin(fuzz_scratch_db(), &t) == 0, "btree_write_begin");
	fill(t, data, size, user, role);
	require(stored_auth_load(t, &au) == 0, "stored_auth_load");
	if (!user[0])
		strcpy(user, "root");
	if (!role[0])
		strcpy(role, "root");

	for (int k = 0; k < 2; k++) {
		Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
		Etcdserverpb__AuthUserGetRequest ug = ETCDSERVERPB__AUTH_USER_GET_REQUEST__INIT;
		Etcdserverpb__AuthUserListRequest ul = ETCDSERVERPB__AUTH_USER_LIST_REQUEST__INIT;
		Etcdserverpb__AuthRoleGetRequest rg = ETCDSERVERPB__AUTH_ROLE_GET_REQUEST__INIT;
		Etcdserverpb__AuthRoleListRequest rl = ETCDSERVERPB__AUTH_ROLE_LIST_REQUEST__INIT;
		Etcdserverpb__AuthUserGrantRoleRequest gr = ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
		Etcdserverpb__AuthRoleGrantPermissionRequest gp =
			ETCDSERVERPB__AUTH_ROLE_GRANT_PERMISSION_REQUEST__INIT;
		Etcdserverpb__AuthRoleRevokePermissionRequest rp =
			ETCDSERVERPB__AUTH_ROLE_REVOKE_PERMISSION_REQUEST__INIT;
		Etcdserverpb__AuthUserChangePasswordRequest cp =
			ETCDSERVERPB__AUTH_USER_CHANGE_PASSWORD_REQUEST__INIT;
		Etcdserverpb__AuthUserRevokeRoleRequest vr = ETCDSERVERPB__AUTH_USER_REVOKE_ROLE_REQUEST__INIT;
		Etcdserverpb__AuthRoleDeleteRequest rd = ETCDSERVERPB__AUTH_ROLE_DELETE_REQUEST__INIT;
		Etcdserverpb__AuthEnableRequest en = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
		Etcdserverpb__AuthDisableRequest dis = ETCDSERVERPB__AUTH_DISABLE_REQUEST__INIT;
		Etcdserverpb__InternalAuthenticateRequest ia =
			ETCDSERVERPB__INTERNAL_AUTHENTICATE_REQUEST__INIT;
		Authpb__Permission p = AUTHPB__PERMISSION__INIT;

#define RUN(field, value)                                                      \
	do {                                                                   \
		req.field = &value;                                            \
		apply(t, &au, &req, as[k]);                                    \
		req.field = NULL;                                              \
	} while (0)
		ug.name = user;
		RUN(auth_user_get, ug);
		RUN(auth_user_list, ul);
		rg.role = role;
		RUN(auth_role_get, rg);
		RUN(auth_role_list, rl);
		ia.name = user;
		RUN(authenticate, ia);
		gr.user = user;
		gr.role = "zz-role";
		RUN(auth_user_grant_role, gr);
		gr.role = role;
		RUN(auth_user_grant_role, gr);
		p.key.data = (uint8_t *)"k";
		p.key.len = 1;
		gp.name = role;
		gp.perm = &p;
		RUN(auth_role_grant_permission, gp);
		rp.role = role;
		rp.key = p.key;
		RUN(auth_role_revoke_permission, rp);
		cp.name = user;
		cp.hashedpassword = "$2a$04$abcdefghijklmnopqrstuuJ0gC6Cg2ZVR8v9Bb5bqzYl2l3CfX6Ga";
		RUN(auth_user_change_password, cp);
		RUN(auth_enable, en);
		vr.name = user;
		vr.role = role;
		RUN(auth_user_revoke_role, vr);
		rd.role = role;
		RUN(auth_role_delete, rd);
		RUN(auth_disable, dis);
#undef RUN
	}
	btree_txn_end(t);
	return 0;
}
