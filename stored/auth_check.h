/*
 * Auth at apply: the second of the two checks of every request (the first
 * is gatewayd's, before it reads or proposes), as etcd 3.4's
 * authApplierV3 (etcdserver/apply_auth.go) makes it.
 *
 * stored keeps a permission cache (auth/perm.h) of its db as of the
 * consistent index: built when the db is opened (start, snapshot install)
 * and again, from the write txn that made it, after each applied auth
 * request that changed the auth store's enabled flag or revision. Every
 * request is checked against it with its header's username and
 * auth_revision (auth/check.h), which gatewayd and etcd members alike set
 * from the token the request came with:
 *   Range                    READ on its range
 *   Put                      WRITE on its key, READ too with prev_kv,
 *                            WRITE on every key attached to its lease
 *   DeleteRange              WRITE on its range, READ too with prev_kv
 *   Txn                      as etcd 3.4 applies one (auth_check_txn_applied):
 *                            READ on every compare's range, a branch's
 *                            Range and DeleteRange as above, its Put WRITE
 *                            on the key alone, a nested Txn not looked into
 *   LeaseRevoke              WRITE on every key attached to the lease
 * and nothing else here (etcd checks no Compaction, LeaseGrant, Alarm or
 * Authenticate at apply; the auth store's own requests, and the tokens an
 * Authenticate makes, are stored/auth.c's). A header older than the
 * cache's revision is refused with "etcdserver: revision of auth store is
 * old" (the permission may have changed since gatewayd checked it), one
 * without a user (revision 0) with "etcdserver: user name is empty", both
 * as etcd does. A refused request changes nothing; every member decides
 * alike, for it reads the same header and the same auth store at the
 * same index.
 */
#ifndef CETCD_STORED_AUTH_CHECK_H
#define CETCD_STORED_AUTH_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "auth/perm.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "stored/btree/arena.h"

struct btree_txn;
struct lessor;
struct stored_auth;

struct stored_auth_check {
	struct auth_cache *cache; /* the db's, as of the consistent index */
	struct lessor *lessor;    /* the keys of each lease; NULL: no leases */
};

/* (Re)builds ac->cache from what t holds (auth_db_load), replacing the
 * old one only on success. Returns 0 or auth_db_load's error. */
int stored_auth_check_load(struct stored_auth_check *ac, struct btree_txn *t);
/* Frees the cache. */
void stored_auth_check_fini(struct stored_auth_check *ac);

/*
 * The re-check of req at apply, as above, the keys of leases copied into
 * arena a. Returns 0 (apply it), an AUTH_ERR_* (answer it, apply
 * nothing), or -ENOMEM.
 */
int stored_auth_check_request(const struct stored_auth_check *ac,
			      const Etcdserverpb__InternalRaftRequest *req, struct arena *a);

/*
 * After stored/auth.c applied an auth request through the write txn t:
 * when au's enabled flag or revision moved away from the cache's, the
 * cache is rebuilt from t, so the next entry is checked against it.
 * Returns 0 or an error that fails the batch (auth_db_load's).
 */
int stored_auth_check_applied(struct stored_auth_check *ac, struct btree_txn *t,
			      const struct stored_auth *au);

/* The header stored's own proposals carry (its expired leases' revokes),
 * as etcd's AuthStore.WithRoot makes it: "root" and the auth revision
 * while auth is enabled, no user otherwise. */
void stored_auth_check_root_header(const struct stored_auth_check *ac,
				   Etcdserverpb__RequestHeader *h);

#endif
