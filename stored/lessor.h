/*
 * stored's lessor: etcd 3.4's leases (lease/lessor.go) for one member.
 *
 * Every member keeps every lease: grants, revokes and checkpoints are
 * applied from committed entries into etcd's `lease` bucket (8-byte
 * big-endian id -> leasepb.Lease{ID, TTL, RemainingTTL}) inside the apply
 * batch, and into the table here. Keys remember their lease
 * (KeyValue.lease); the table keeps which keys each lease holds, from the
 * store's change events (lessor_on_event) and, at start, from a walk of
 * the live keys (lessor_attach_key).
 *
 * Only the primary (the leader's stored) keeps time. A lease of a member
 * that is not primary never expires here. Becoming primary (a new term in
 * which raftd leads, or a restart on the leader) extends every lease to
 * now + its remaining TTL + `extend` before any can expire (etcd's
 * Promote). The primary then finds expired leases (lessor_expired, at
 * most a batch per call, each asked again only after a retry interval)
 * and checkpoints due remaining TTLs (lessor_due_checkpoints); the caller
 * proposes revokes and checkpoints through Raft with the term.
 *
 * Times are monotonic nanoseconds given by the caller, so tests drive the
 * clock. Single-threaded; memory through stored_malloc.
 */
#ifndef CETCD_STORED_LESSOR_H
#define CETCD_STORED_LESSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stored/btree/btree.h"
#include "stored/mvcc/mvcc.h"

/* etcd's MaxLeaseTTL (seconds). */
#define LESSOR_MAX_TTL 9000000000LL
/* etcd's leaseRevokeRate / 2: expired leases revoked per 500 ms. */
#define LESSOR_REVOKE_BATCH 500
/* etcd's defaultExpiredleaseRetryInterval. */
#define LESSOR_RETRY_NS 3000000000LL
/* etcd's defaultLeaseCheckpointInterval. */
#define LESSOR_CHECKPOINT_INTERVAL_NS (300LL * 1000000000LL)
/* etcd's maxLeaseCheckpointBatchSize. */
#define LESSOR_CHECKPOINT_BATCH 1000

/* Request errors, with etcd's codes and texts (lessor_strerror). */
enum lessor_err {
	LESSOR_ERR_NOT_FOUND = -5101,     /* NOT_FOUND "etcdserver: requested lease not found" */
	LESSOR_ERR_EXISTS = -5102,        /* FAILED_PRECONDITION "etcdserver: lease already exists" */
	LESSOR_ERR_TTL_TOO_LARGE = -5103, /* OUT_OF_RANGE "etcdserver: too large lease TTL" */
	LESSOR_ERR_NOT_PRIMARY = -5104,   /* UNAVAILABLE "etcdserver: not leader" */
	/* lessor_renew's answer for a lease that expired and waits for its
	 * revoke: etcd's Renew waits for the revoke (then NOT_FOUND) or for
	 * the lessor's demotion (then NOT_PRIMARY), so that a client told
	 * "not found" can no longer use the lease. Never a request's answer
	 * (not a lessor_is_request_error): the caller waits as etcd does. */
	LESSOR_ERR_EXPIRED = -5105,
};
bool lessor_is_request_error(int err);
const char *lessor_strerror(int err);
int lessor_grpc_code(int err);

struct lessor_opts {
	int64_t min_ttl;            /* seconds; etcd's ceil(3/2 election timeout) */
	int64_t extend_ns;          /* added on promotion (etcd: the election timeout) */
	int64_t checkpoint_ns;      /* checkpoint interval; 0: LESSOR_CHECKPOINT_INTERVAL_NS */
	bool checkpoint;            /* propose checkpoints at all */
};

/* etcd's minimum TTL for an election timeout and heartbeat (ms). */
int64_t lessor_min_ttl(uint64_t election_ms, uint64_t heartbeat_ms);

struct lessor;

int lessor_new(const struct lessor_opts *o, struct lessor **out);
void lessor_free(struct lessor *l);

/* Forgets every lease and loads those of the `lease` bucket of t (a
 * missing bucket is an empty one), not primary. Malformed values are
 * skipped with a warning; an id found twice keeps its last value, as in
 * etcd; TTLs above LESSOR_MAX_TTL are cut to it. 0, -ENOMEM or a B+tree
 * error. */
int lessor_load(struct lessor *l, struct btree_txn *t);

/* Attaches key to lease id (nothing when the lease is unknown). */
int lessor_attach_key(struct lessor *l, int64_t id, const uint8_t *key, size_t len);
/* Keeps the attachments after a store change (an on_event hook). */
void lessor_on_event(struct lessor *l, const struct mvcc_event *ev);

/* ---- applied from committed entries, in the batch's txn t ---- */

/* etcd's Grant: id 0 NOT_FOUND, ttl > max TTL_TOO_LARGE, EXISTS; ttl
 * below the minimum is raised to it. *granted gets the TTL. */
int lessor_grant(struct lessor *l, struct btree_txn *t, int64_t id, int64_t ttl, int64_t now_ns,
		 int64_t *granted);
/* The keys of lease id, sorted (Go's string order), copied into arena a.
 * NOT_FOUND when there is no such lease. */
int lessor_keys(struct lessor *l, int64_t id, struct arena *a, ProtobufCBinaryData **keys,
		size_t *n);
/* Removes lease id from the table and the bucket (its keys were deleted
 * first by the caller). NOT_FOUND. */
int lessor_remove(struct lessor *l, struct btree_txn *t, int64_t id);
/* etcd's Checkpoint: records remaining (seconds) for a known lease and
 * persists it; an unknown one is ignored. */
int lessor_checkpoint(struct lessor *l, struct btree_txn *t, int64_t id, int64_t remaining,
		      int64_t now_ns);

/* ---- the primary's side ---- */

/* Tells the lessor whether this member leads and in which term; promotes
 * (extends every lease) on a new leading term, demotes otherwise.
 * Returns true when it promoted. */
bool lessor_set_primary(struct lessor *l, bool leader, uint64_t term, int64_t now_ns);
bool lessor_is_primary(const struct lessor *l);
uint64_t lessor_term(const struct lessor *l);

/* etcd's Renew: 0, the lease's TTL in *ttl and its expiry moved to now +
 * TTL; *clear_checkpoint: a checkpointed remaining TTL must be reset
 * through Raft (a checkpoint of 0). NOT_FOUND, NOT_PRIMARY, EXPIRED (the
 * lease expired and waits for its revoke). */
int lessor_renew(struct lessor *l, int64_t id, int64_t now_ns, int64_t *ttl,
		 bool *clear_checkpoint);

/* What LeaseTimeToLive answers: remaining seconds (truncated), granted
 * TTL, the keys when keys is set (sorted, into arena a). NOT_FOUND. */
int lessor_time_to_live(struct lessor *l, int64_t id, int64_t now_ns, bool keys, struct arena *a,
			int64_t *remaining, int64_t *granted, ProtobufCBinaryData **kv, size_t *n);

/* Every lease id, into arena a. 0 or -ENOMEM. */
int lessor_ids(struct lessor *l, struct arena *a, int64_t **ids, size_t *n);
size_t lessor_count(const struct lessor *l);
/* Whether lease id exists (granted and not yet revoked). */
bool lessor_exists(const struct lessor *l, int64_t id);

/* Up to max expired leases (primary only), soonest expired first; each is
 * not returned again for LESSOR_RETRY_NS. */
size_t lessor_expired(struct lessor *l, int64_t now_ns, int64_t *ids, size_t max);

struct lessor_cp {
	int64_t id;
	int64_t remaining;
};
/* Up to max due checkpoints (primary only): leases whose remaining TTL is
 * below their TTL, with the remaining seconds (rounded up). Each is
 * scheduled again only when its checkpoint applies. */
size_t lessor_due_checkpoints(struct lessor *l, int64_t now_ns, struct lessor_cp *out, size_t max);

/* When the primary next has something to do; INT64_MAX: nothing. */
int64_t lessor_next_deadline(const struct lessor *l);

/* Checks the table against its heaps (every lease in its places, the
 * heaps in order): 0, or a negative code naming the first fault. For
 * tests. */
int lessor_verify(const struct lessor *l);

#endif
