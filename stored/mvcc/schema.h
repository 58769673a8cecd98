/*
 * The db file's bucket schema: etcd 3.4's buckets and meta keys, so that
 * etcd and its tools read a file written by stored, plus cetcd's own index
 * buckets (their encoding is described in kvindex.h).
 *
 * etcd's buckets:
 *   key      revision (rev_encode: 8-byte big-endian main, '_', 8-byte
 *            big-endian sub; an 18th byte 't' marks a tombstone) ->
 *            mvccpb.KeyValue bytes (a tombstone's value is KeyValue{key})
 *   meta     consistent_index (8 bytes big-endian), scheduledCompactRev and
 *            finishedCompactRev (17-byte revisions with sub 0)
 *   lease    8-byte big-endian lease id -> leasepb.Lease
 *   alarm, members, members_removed, cluster, auth, authUsers, authRoles
 *            (owned by the alarm, membership and auth code)
 */
#ifndef CETCD_STORED_SCHEMA_H
#define CETCD_STORED_SCHEMA_H

#define SCHEMA_BUCKET_KEY             "key"
#define SCHEMA_BUCKET_META            "meta"
#define SCHEMA_BUCKET_LEASE           "lease"
#define SCHEMA_BUCKET_ALARM           "alarm"
#define SCHEMA_BUCKET_MEMBERS         "members"
#define SCHEMA_BUCKET_MEMBERS_REMOVED "members_removed"
#define SCHEMA_BUCKET_CLUSTER         "cluster"
#define SCHEMA_BUCKET_AUTH            "auth"
#define SCHEMA_BUCKET_AUTH_USERS      "authUsers"
#define SCHEMA_BUCKET_AUTH_ROLES      "authRoles"
/* key of the auth bucket: the auth store's revision, 8 bytes big-endian */
#define SCHEMA_AUTH_REVISION          "authRevision"

/* Keys of the meta bucket. */
#define SCHEMA_META_CONSISTENT_INDEX  "consistent_index"
#define SCHEMA_META_SCHEDULED_COMPACT "scheduledCompactRev"
#define SCHEMA_META_FINISHED_COMPACT  "finishedCompactRev"

/* cetcd's index of the key bucket (kvindex.h). */
#define SCHEMA_BUCKET_KV_LATEST  "cetcd_kv_latest"
#define SCHEMA_BUCKET_KV_HISTORY "cetcd_kv_history"
#define SCHEMA_BUCKET_KV_META    "cetcd_kv_meta"

/* Keys of cetcd_kv_meta. */
#define SCHEMA_KV_META_FORMAT   "format"    /* 8 bytes BE: KVINDEX_FORMAT */
#define SCHEMA_KV_META_REVISION "revision"  /* 8 bytes BE: current main revision */
#define SCHEMA_KV_META_COVERS   "covers"    /* what of key/meta the index matches */

/* Length of a bucket name literal, without its NUL. */
#define SCHEMA_LEN(lit) (sizeof(lit) - 1)

#endif
