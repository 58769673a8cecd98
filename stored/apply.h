/*
 * stored's applier: one committed Raft entry in, its effect on the store
 * and the answer for the client that asked out.
 *
 * Entry data is an etcdserverpb.InternalRaftRequest with the request's
 * origin appended (shm/msg.h). The applier checks the bytes (strings
 * without NUL, a well-formed message), decodes them, runs the request
 * through the MVCC layer inside the batch the caller opened, and encodes
 * etcd's response message (PutResponse, DeleteRangeResponse, TxnResponse,
 * CompactionResponse, RangeResponse) with a full ResponseHeader: the
 * cluster and member ids, the revision after the entry and the entry's
 * Raft term. A request the store refuses (lease not found, compacted,
 * ...) gives an error result with etcd's gRPC code and exact text and
 * changes nothing.
 *
 * Entries that carry no client request still move the consistent index:
 * empty entries (a new leader's no-op), configuration changes and etcd's
 * v2 membership requests (which change the members buckets), and request
 * kinds stored does not apply (v2 requests, and leases, alarms and auth
 * when ids leaves them out), which are answered UNIMPLEMENTED without
 * touching the store.
 *
 * Memory: the decoded request, the response and every byte a result
 * points at live in the caller's arena, valid until it is released.
 */
#ifndef CETCD_STORED_APPLY_H
#define CETCD_STORED_APPLY_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/msg.h"
#include "stored/btree/arena.h"
#include "stored/mvcc/mvcc.h"

/* gRPC status codes the applier answers with (grpc-go's codes). */
#define STORED_GRPC_UNKNOWN 2
#define STORED_GRPC_INVALID_ARGUMENT 3
#define STORED_GRPC_NOT_FOUND 5
#define STORED_GRPC_PERMISSION_DENIED 7
#define STORED_GRPC_FAILED_PRECONDITION 9
#define STORED_GRPC_RESOURCE_EXHAUSTED 8
#define STORED_GRPC_UNIMPLEMENTED 12
#define STORED_GRPC_INTERNAL 13
#define STORED_GRPC_DATA_LOSS 15

/* Who this member is, for response headers and for telling whether a
 * result has anyone here to go to. */
struct stored_apply_ids {
	uint64_t member_id;
	uint64_t cluster_id;
	/* stored's metrics block (shm/metrics.h): puts, deletes, txns and
	 * ranges applied; NULL: not counted */
	struct shm_metrics *metrics;
	/* the cluster's membership as of the store's consistent index, which
	 * configuration changes and v2 membership requests update (with the
	 * db's members buckets, stored/membership_db.h); NULL: such entries only
	 * move the index */
	struct membership *membership;
	/* the raised alarms (stored/alarm.h), which Alarm requests change
	 * and which refuse requests as etcd's appliers do; NULL: Alarm
	 * requests are not applied */
	struct stored_alarms *alarms;
	/* the leases (stored/lessor.h), which lease entries change; NULL:
	 * lease entries are answered UNIMPLEMENTED */
	struct lessor *lessor;
	/* the auth store's flag and revision (stored/auth.h), which auth
	 * entries change; NULL: auth entries are answered UNIMPLEMENTED */
	struct stored_auth *auth;
	/* the permission cache and the tokens (stored/auth_check.h): every
	 * request checked again at apply; NULL: not checked */
	struct stored_auth_check *auth_check;
};

/* What one applied entry gives the client that asked. */
struct stored_apply_result {
	/* true: a client of this member waits for the result below. false:
	 * nobody here to answer (no origin, another member's request, or an
	 * entry that is not a request); the other fields are unset. */
	bool deliver;
	struct msg_origin origin;
	uint64_t index;          /* Raft index of the entry */
	uint64_t term;           /* its Raft term */
	uint64_t revision;       /* store revision after the entry */
	int32_t status;          /* 0, or a gRPC status code */
	const uint8_t *body;     /* status 0: the encoded response; otherwise
				  * the message text (not NUL-terminated) */
	uint32_t body_len;
	/* A physical compaction: answer only once the compaction's deletion
	 * is done (stored_apply_compaction_body then gives the body). */
	bool after_compaction;
};

/*
 * A committed entry's request as etcd logs a slow one (its
 * InternalRaftStringer: header:<ID:... > put:<key:"k" value_size:3 >, values
 * never shown), NUL-terminated in out (cut at cap). Requests other than
 * puts and lease grants and revokes are named with their size only.
 * Allocates while it runs (for the rare slow entry, not the apply path).
 */
void stored_apply_describe(const uint8_t *data, uint32_t len, char *out, size_t cap);

/*
 * Applies one committed entry (index, term, entry type and data_len from
 * e; data_len bytes at data) in the store's open batch. The caller has
 * checked that e->index follows the store's consistent index.
 * Returns 0 with *out filled, -EALREADY when the index is at or below the
 * consistent index (nothing done), or an error that fails the batch
 * (-ENOMEM, -EIO, -ENOSPC, -EUCLEAN ...: the caller aborts it).
 */
int stored_apply_entry(struct mvcc_store *s, const struct stored_apply_ids *ids,
		       const struct msg_committed *e, const uint8_t *data, struct arena *a,
		       struct stored_apply_result *out);

/*
 * The body of a finished physical compaction's answer: a CompactionResponse
 * whose header carries the revision at the time it finished (as etcd
 * answers it) and the term of the compaction's entry. Encoded into arena
 * a. Returns 0 or -ENOMEM.
 */
int stored_apply_compaction_body(const struct stored_apply_ids *ids, int64_t revision,
				 uint64_t term, struct arena *a, const uint8_t **body,
				 uint32_t *len);

#endif
