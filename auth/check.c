/* The checks of each request kind (see check.h). */
#include "auth/check.h"

#include <string.h>

static const char *user_or_empty(const char *user)
{
	return user ? user : "";
}

int auth_check_op(const struct auth_cache *c, const char *user, uint64_t revision,
		  enum auth_perm_type t, const uint8_t *key, size_t key_len,
		  const uint8_t *range_end, size_t range_end_len)
{
	if (!auth_cache_enabled(c))
		return 0;
	if (revision == 0)
		return AUTH_ERR_USER_EMPTY;
	if (revision < auth_cache_revision(c))
		return AUTH_ERR_OLD_REVISION;
	user = user_or_empty(user);
	const struct auth_user *u = auth_cache_user(c, user, strlen(user));
	if (!u)
		return AUTH_ERR_PERMISSION_DENIED;
	if (auth_user_is_root(u))
		return 0;
	if (auth_user_permitted(c, u, t, key, key_len, range_end, range_end_len))
		return 0;
	return AUTH_ERR_PERMISSION_DENIED;
}

int auth_check_admin(const struct auth_cache *c, const char *user)
{
	if (!auth_cache_enabled(c))
		return 0;
	user = user_or_empty(user);
	if (!*user)
		return AUTH_ERR_USER_EMPTY;
	const struct auth_user *u = auth_cache_user(c, user, strlen(user));
	if (!u)
		return AUTH_ERR_USER_NOT_FOUND;
	return auth_user_is_root(u) ? 0 : AUTH_ERR_PERMISSION_DENIED;
}

bool auth_check_needs_admin(const Etcdserverpb__InternalRaftRequest *r)
{
	return r->auth_enable || r->auth_disable || r->auth_user_add || r->auth_user_delete ||
	       r->auth_user_change_password || r->auth_user_grant_role ||
	       r->auth_user_revoke_role || r->auth_role_add || r->auth_role_grant_permission ||
	       r->auth_role_revoke_permission || r->auth_role_delete || r->auth_user_list ||
	       r->auth_role_list;
}

int auth_check_user_get(const struct auth_cache *c, const char *user,
			const Etcdserverpb__AuthUserGetRequest *r)
{
	int rc = auth_check_admin(c, user);
	if (rc && strcmp(user_or_empty(r->name), user_or_empty(user)) == 0)
		return 0;
	return rc;
}

int auth_check_role_get(const struct auth_cache *c, const char *user,
			const Etcdserverpb__AuthRoleGetRequest *r)
{
	int rc = auth_check_admin(c, user);
	if (rc) {
		const char *name = user_or_empty(user), *role = user_or_empty(r->role);
		const struct auth_user *u = auth_cache_user(c, name, strlen(name));
		if (u && auth_user_has_role(c, u, role, strlen(role)))
			return 0;
	}
	return rc;
}

/* The checked user, for the per-key callbacks of the lease checks. */
struct lease_check {
	const struct auth_cache *c;
	const char *user;
	uint64_t revision;
	enum auth_perm_type t;
};

static int lease_key_check(void *arg, const uint8_t *key, size_t len)
{
	const struct lease_check *lc = arg;
	return auth_check_op(lc->c, lc->user, lc->revision, lc->t, key, len, NULL, 0);
}

/* t on every key attached to lease id (etcd's checkLeasePuts for WRITE). */
static int lease_keys_check(const struct auth_cache *c, const char *user, uint64_t revision,
			    enum auth_perm_type t, int64_t id, const struct auth_lease_keys *lk)
{
	struct lease_check lc = { c, user, revision, t };
	if (!lk || id == 0)
		return 0;
	return lk->each(lk->arg, id, lease_key_check, &lc);
}

int auth_check_range(const struct auth_cache *c, const char *user, uint64_t revision,
		     const Etcdserverpb__RangeRequest *r)
{
	return auth_check_op(c, user, revision, AUTH_PERM_READ, r->key.data, r->key.len,
			     r->range_end.data, r->range_end.len);
}

int auth_check_put(const struct auth_cache *c, const char *user, uint64_t revision,
		   const Etcdserverpb__PutRequest *r, const struct auth_lease_keys *lk)
{
	int rc = auth_check_op(c, user, revision, AUTH_PERM_WRITE, r->key.data, r->key.len, NULL, 0);
	if (rc == 0)
		rc = lease_keys_check(c, user, revision, AUTH_PERM_WRITE, r->lease, lk);
	if (rc == 0 && r->prev_kv)
		rc = auth_check_op(c, user, revision, AUTH_PERM_READ, r->key.data, r->key.len,
				   NULL, 0);
	return rc;
}

int auth_check_delete_range(const struct auth_cache *c, const char *user, uint64_t revision,
			    const Etcdserverpb__DeleteRangeRequest *r)
{
	int rc = auth_check_op(c, user, revision, AUTH_PERM_WRITE, r->key.data, r->key.len,
			       r->range_end.data, r->range_end.len);
	if (rc == 0 && r->prev_kv)
		rc = auth_check_op(c, user, revision, AUTH_PERM_READ, r->key.data, r->key.len,
				   r->range_end.data, r->range_end.len);
	return rc;
}

/*
 * Every op of one branch of a Txn. etcd34: as etcd 3.4's apply checks a
 * branch (checkTxnReqsPermission): a Put's key only (not its prev_kv nor
 * its lease's keys) and no nested Txn; else every op, nested Txns alike.
 */
static int ops_check(const struct auth_cache *c, const char *user, uint64_t revision,
		     Etcdserverpb__RequestOp *const *ops, size_t n, const struct auth_lease_keys *lk,
		     bool etcd34)
{
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const Etcdserverpb__RequestOp *op = ops[i];
		switch (op ? op->request_case : ETCDSERVERPB__REQUEST_OP__REQUEST__NOT_SET) {
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
			if (op->request_range)
				rc = auth_check_range(c, user, revision, op->request_range);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
			if (op->request_put && etcd34)
				rc = auth_check_op(c, user, revision, AUTH_PERM_WRITE,
						   op->request_put->key.data,
						   op->request_put->key.len, NULL, 0);
			else if (op->request_put)
				rc = auth_check_put(c, user, revision, op->request_put, lk);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
			if (op->request_delete_range)
				rc = auth_check_delete_range(c, user, revision,
							     op->request_delete_range);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
			if (op->request_txn && !etcd34)
				rc = auth_check_txn(c, user, revision, op->request_txn, lk);
			break;
		default:
			break;
		}
	}
	return rc;
}

static int txn_check(const struct auth_cache *c, const char *user, uint64_t revision,
		     const Etcdserverpb__TxnRequest *r, const struct auth_lease_keys *lk,
		     bool etcd34)
{
	int rc = 0;
	for (size_t i = 0; i < r->n_compare && rc == 0; i++)
		if (r->compare[i])
			rc = auth_check_op(c, user, revision, AUTH_PERM_READ, r->compare[i]->key.data,
					   r->compare[i]->key.len, r->compare[i]->range_end.data,
					   r->compare[i]->range_end.len);
	if (rc == 0)
		rc = ops_check(c, user, revision, r->success, r->n_success, lk, etcd34);
	if (rc == 0)
		rc = ops_check(c, user, revision, r->failure, r->n_failure, lk, etcd34);
	return rc;
}

int auth_check_txn(const struct auth_cache *c, const char *user, uint64_t revision,
		   const Etcdserverpb__TxnRequest *r, const struct auth_lease_keys *lk)
{
	return txn_check(c, user, revision, r, lk, false);
}

int auth_check_txn_applied(const struct auth_cache *c, const char *user, uint64_t revision,
			   const Etcdserverpb__TxnRequest *r)
{
	return txn_check(c, user, revision, r, NULL, true);
}

int auth_check_lease_revoke(const struct auth_cache *c, const char *user, uint64_t revision,
			    const Etcdserverpb__LeaseRevokeRequest *r,
			    const struct auth_lease_keys *lk)
{
	return lease_keys_check(c, user, revision, AUTH_PERM_WRITE, r->id, lk);
}

int auth_check_lease_time_to_live(const struct auth_cache *c, const char *user,
				  uint64_t revision, const Etcdserverpb__LeaseTimeToLiveRequest *r,
				  const struct auth_lease_keys *lk)
{
	if (!r->keys || !auth_cache_enabled(c))
		return 0;
	if (!*user_or_empty(user))
		return AUTH_ERR_USER_EMPTY;
	return lease_keys_check(c, user, revision, AUTH_PERM_READ, r->id, lk);
}

int auth_check_watch(const struct auth_cache *c, const char *user, uint64_t revision,
		     const Etcdserverpb__WatchCreateRequest *r)
{
	return auth_check_op(c, user, revision, AUTH_PERM_READ, r->key.data, r->key.len,
			     r->range_end.data, r->range_end.len);
}
