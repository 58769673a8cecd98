/*
 * Membership in the db file, as etcd 3.4 keeps it in its backend
 * (etcdserver/api/membership/store.go):
 *
 *   members          the member id in hex ("8e9e05c52164694d") -> the
 *                    member as etcd's JSON (cluster/member_json.h)
 *   members_removed  a removed member's id in hex -> "removed"
 *   cluster          "clusterVersion" -> the cluster version ("3.4.0")
 *
 * stored applies the committed entries that change membership
 * (cluster/membership.h) into these buckets in the entry's batch, and
 * loads them when it opens the db; gatewayd reads them for MemberList.
 */
#ifndef CETCD_STORED_MEMBERSHIP_DB_H
#define CETCD_STORED_MEMBERSHIP_DB_H

#include <stdbool.h>
#include <stdint.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "cluster/membership.h"

struct btree_txn;

#define MEMBERSHIP_DB_VERSION_KEY "clusterVersion"

struct btree_bucket;

/* Opens the top-level bucket name through t: 0, -ENOENT when it does not
 * exist, or the B+tree's error. (Shared by the loader and the applier.) */
int membership_db_bucket(struct btree_txn *t, const char *name, struct btree_bucket **out);

/*
 * Loads the buckets through t (a write txn, or a reader's) into m, which
 * the caller initialized (entries are added to what it holds). A member
 * whose JSON cannot be decoded is skipped with a warning. Missing buckets
 * load nothing. Returns 0, -ENOMEM, or the B+tree's error.
 */
int membership_db_load(struct btree_txn *t, struct membership *m);

/*
 * Applies the committed entry (type, data[0..len)) to m and, when it
 * changed membership, to the buckets through the open write txn t. *res
 * says what it did; the entry was membership's (a conf change or a v2
 * request) unless res->change is MEMBERSHIP_NONE for a normal entry:
 * such entries are left to the key-value applier. A conf change that
 * cannot be decoded is logged and counts as refused (etcd would stop
 * there). Returns 0, -ENOMEM or the B+tree's error (the batch must then
 * be aborted).
 */
int membership_db_apply(struct btree_txn *t, struct membership *m, uint32_t type,
			const uint8_t *data, size_t len, struct membership_result *res);

/* m as etcd's Cluster service answers a member (pointing into m, valid
 * while m is). */
void membership_db_pb(const struct member_info *m, Etcdserverpb__Member *out);

/* Whether an entry's outcome *res was membership's. */
static inline bool membership_db_handled(uint32_t type, const struct membership_result *res)
{
	return type != 0 || res->change != MEMBERSHIP_NONE;
}

#endif
