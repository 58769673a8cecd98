/*
 * The permission checks of each request kind against a permission cache
 * (perm.h), as etcd 3.4 makes them: its authApplierV3 at apply, its v3
 * server before a serialized read (EtcdServer.Range, Txn,
 * LeaseTimeToLive), its Watch and Maintenance services. gatewayd is to
 * check a request before it reads or proposes it, stored again at apply
 * against the auth revision the proposal carries.
 *
 * Each check takes the user (RequestHeader.username, NUL-terminated; NULL
 * or "" when the request carries none) and the auth revision the user's
 * token was issued at (RequestHeader.auth_revision; 0 when none) and
 * answers 0 (permitted) or a code of error.h (auth_strerror,
 * auth_grpc_code):
 *   AUTH_ERR_USER_EMPTY        auth is enabled and the request has no user
 *                              (revision 0)
 *   AUTH_ERR_OLD_REVISION      the revision is below the cache's
 *   AUTH_ERR_PERMISSION_DENIED the user does not exist, or lacks a
 *                              permission (or, for admin calls, the root
 *                              role)
 *   AUTH_ERR_USER_NOT_FOUND    admin calls: the user does not exist
 * With auth disabled every check answers 0. A user with the root role may
 * do anything. A request that asks for no key at all (a Txn with no
 * compare and no op) is permitted whoever asks, as in etcd.
 *
 * Beyond etcd 3.4.23, as etcd's later fixes of its authApplierV3
 * (GHSA-x35m-3gp4-4fh5): the ops of a nested Txn are checked as those of
 * the outer one, and a Put inside a Txn is checked as a Put alone (its
 * prev_kv needs READ, its lease's keys WRITE). etcd 3.4 checks nothing for
 * a Compaction (any user may compact), and cetcd neither.
 *
 * No check allocates; each is O(keys asked * log intervals of the user).
 */
#ifndef CETCD_AUTH_CHECK_H
#define CETCD_AUTH_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/error.h"
#include "auth/perm.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"

/*
 * The keys attached to a lease, from whoever keeps the leases: each calls
 * fn(fn_arg, key, len) for every key attached to lease id (none when there
 * is no such lease), stops at the first non-zero answer and returns it,
 * else 0. The checks pass fn's answers through (so a negative errno of
 * each's own comes back as the check's answer).
 */
struct auth_lease_keys {
	int (*each)(void *arg, int64_t id, int (*fn)(void *fn_arg, const uint8_t *key, size_t len),
		    void *fn_arg);
	void *arg;
};

/*
 * etcd's isOpPermitted: whether user may do t on [key, range_end) (the
 * range as auth_user_permitted reads it).
 */
int auth_check_op(const struct auth_cache *c, const char *user, uint64_t revision,
		  enum auth_perm_type t, const uint8_t *key, size_t key_len,
		  const uint8_t *range_end, size_t range_end_len);

/* etcd's IsAdminPermitted: user has the root role (no revision check):
 * AUTH_ERR_USER_EMPTY, AUTH_ERR_USER_NOT_FOUND, AUTH_ERR_PERMISSION_DENIED.
 * For the calls of auth_check_needs_admin, Defragment, Snapshot, Hash,
 * HashKV and the membership changes. */
int auth_check_admin(const struct auth_cache *c, const char *user);

/* Whether the proposal r is an admin-only one (etcd's needAdminPermission:
 * AuthEnable, AuthDisable, UserAdd, UserDelete, UserChangePassword,
 * UserGrantRole, UserRevokeRole, RoleAdd, RoleGrantPermission,
 * RoleRevokePermission, RoleDelete, UserList, RoleList). */
bool auth_check_needs_admin(const Etcdserverpb__InternalRaftRequest *r);

/* UserGet: admin, or the user asks about itself. RoleGet: admin, or the
 * user has the role. The admin check's code otherwise. */
int auth_check_user_get(const struct auth_cache *c, const char *user,
			const Etcdserverpb__AuthUserGetRequest *r);
int auth_check_role_get(const struct auth_cache *c, const char *user,
			const Etcdserverpb__AuthRoleGetRequest *r);

/* Range: READ on its range. */
int auth_check_range(const struct auth_cache *c, const char *user, uint64_t revision,
		     const Etcdserverpb__RangeRequest *r);
/* Put: WRITE on its key; WRITE on every key already attached to its lease
 * (lk NULL: not checked here; stored, which keeps the leases, checks it at
 * apply); READ on its key with prev_kv. */
int auth_check_put(const struct auth_cache *c, const char *user, uint64_t revision,
		   const Etcdserverpb__PutRequest *r, const struct auth_lease_keys *lk);
/* DeleteRange: WRITE on its range; READ on it too with prev_kv. */
int auth_check_delete_range(const struct auth_cache *c, const char *user, uint64_t revision,
			    const Etcdserverpb__DeleteRangeRequest *r);
/* Txn: READ on the range of every compare, then every op of success and
 * failure as above, nested Txns alike. The check before a proposal. */
int auth_check_txn(const struct auth_cache *c, const char *user, uint64_t revision,
		   const Etcdserverpb__TxnRequest *r, const struct auth_lease_keys *lk);
/*
 * Txn as etcd 3.4 checks it when it applies one (checkTxnReqsPermission):
 * READ on every compare; in each branch a Range's READ, a Put's WRITE on
 * its key alone (neither its prev_kv nor its lease's keys), a
 * DeleteRange's as above, and nothing for a nested Txn. Every member of a
 * cluster must reach the same decision on an entry, etcd 3.4 members too,
 * so stored checks an applied Txn with this rule and never a stricter one:
 * refusing at apply what an etcd member applies would leave the members'
 * data apart. The stricter auth_check_txn refuses such a Txn before it is
 * proposed, where refusing is a member's own business.
 */
int auth_check_txn_applied(const struct auth_cache *c, const char *user, uint64_t revision,
			   const Etcdserverpb__TxnRequest *r);
/* LeaseRevoke: WRITE on every key attached to the lease. */
int auth_check_lease_revoke(const struct auth_cache *c, const char *user, uint64_t revision,
			    const Etcdserverpb__LeaseRevokeRequest *r,
			    const struct auth_lease_keys *lk);
/* LeaseTimeToLive with keys: a user (AUTH_ERR_USER_EMPTY without one), and
 * READ on every key attached to the lease; without keys, nothing. */
int auth_check_lease_time_to_live(const struct auth_cache *c, const char *user,
				  uint64_t revision, const Etcdserverpb__LeaseTimeToLiveRequest *r,
				  const struct auth_lease_keys *lk);
/* Watch creation: READ on its range. */
int auth_check_watch(const struct auth_cache *c, const char *user, uint64_t revision,
		     const Etcdserverpb__WatchCreateRequest *r);

#endif
