/* Auth at apply: the second check of each request (see auth_check.h). */
#include "stored/auth_check.h"

#include <errno.h>
#include <string.h>

#include "auth/check.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "stored/auth.h"
#include "stored/auth_db.h"
#include "stored/lessor.h"

int stored_auth_check_load(struct stored_auth_check *ac, struct btree_txn *t)
{
	struct auth_cache *c;
	int rc = auth_db_load(t, &c);

	if (rc)
		return rc;
	auth_cache_free(ac->cache);
	ac->cache = c;
	return 0;
}

void stored_auth_check_fini(struct stored_auth_check *ac)
{
	auth_cache_free(ac->cache);
	ac->cache = NULL;
}

/* ---- the re-check ---- */

/* The lessor and the arena its keys are copied into. */
struct auth_check_leases {
	struct lessor *lessor;
	struct arena *a;
};

/* auth_lease_keys.each over the lessor's keys of lease id. */
static int auth_check_lease_each(void *arg, int64_t id,
				 int (*fn)(void *fn_arg, const uint8_t *key, size_t len), void *fn_arg)
{
	struct auth_check_leases *ls = arg;
	ProtobufCBinaryData *keys;
	size_t n;
	int rc;

	if (!ls->lessor)
		return 0;
	rc = lessor_keys(ls->lessor, id, ls->a, &keys, &n);
	if (rc == LESSOR_ERR_NOT_FOUND)
		return 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = fn(fn_arg, keys[i].data, keys[i].len);
	return rc;
}

int stored_auth_check_request(const struct stored_auth_check *ac,
			      const Etcdserverpb__InternalRaftRequest *req, struct arena *a)
{
	const struct auth_cache *c = ac->cache;
	const Etcdserverpb__RequestHeader *h = req->header;
	const char *user = h ? h->username : NULL;
	uint64_t rev = h ? h->auth_revision : 0;
	struct auth_check_leases ls = { .lessor = ac->lessor, .a = a };
	struct auth_lease_keys lk = { .each = auth_check_lease_each, .arg = &ls };

	if (!c || !auth_cache_enabled(c))
		return 0;
	if (req->range)
		return auth_check_range(c, user, rev, req->range);
	if (req->put)
		return auth_check_put(c, user, rev, req->put, &lk);
	if (req->delete_range)
		return auth_check_delete_range(c, user, rev, req->delete_range);
	if (req->txn)
		return auth_check_txn_applied(c, user, rev, req->txn);
	if (req->lease_revoke)
		return auth_check_lease_revoke(c, user, rev, req->lease_revoke, &lk);
	return 0;
}

void stored_auth_check_root_header(const struct stored_auth_check *ac,
				   Etcdserverpb__RequestHeader *h)
{
	if (!ac || !ac->cache || !auth_cache_enabled(ac->cache))
		return;
	h->username = (char *)AUTH_ROOT_ROLE; /* the root user has the root role's name */
	h->auth_revision = auth_cache_revision(ac->cache);
}

/* ---- after an auth change ---- */

int stored_auth_check_applied(struct stored_auth_check *ac, struct btree_txn *t,
			      const struct stored_auth *au)
{
	int rc;

	if (ac->cache && auth_cache_enabled(ac->cache) == au->enabled &&
	    auth_cache_revision(ac->cache) == au->revision)
		return 0;
	rc = stored_auth_check_load(ac, t);
	if (rc)
		log_error("cannot build the permission cache of the auth store",
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
	return rc;
}
