/*
 * stored's MVCC layer: etcd 3.4's key-value semantics (revisions, Range,
 * Put, DeleteRange, Txn, Compact) over the B+tree, in etcd's bucket schema
 * (schema.h) plus cetcd's index buckets (kvindex.h).
 *
 * Writer (stored). mvcc_store_open creates etcd's buckets, checks the
 * index against the key bucket and rebuilds it when the file came from
 * etcd. Committed Raft entries are applied in batches, one B+tree write
 * txn each (invariant 11, docs/invariants.md):
 *
 *     mvcc_batch_begin(s);
 *     for each committed entry:
 *         if (mvcc_apply_begin(s, entry.index) == -EALREADY) continue;
 *         mvcc_put / mvcc_delete_range / mvcc_txn / mvcc_compact / ...
 *         (other state machines write through mvcc_batch_txn(s))
 *     if (compaction pending) mvcc_compact_step(s, 1000, &done);
 *     mvcc_batch_commit(s, &root);   publish root; checkpoint when due
 *
 * Applying is idempotent by Raft index: an entry at or below the consistent
 * index (etcd's meta/consistent_index, written in the same batch) is
 * skipped. A request refused with an MVCC_ERR_* wrote nothing; the batch
 * goes on. Any other error (-ENOMEM, -EIO, -ENOSPC, -EUCLEAN ...) leaves
 * the batch failed: call mvcc_batch_abort and apply again from the last
 * committed state.
 *
 * Readers (gatewayd, or stored itself). Any read txn, of this process or
 * of another one through btree_reader_begin, opens a view (mvcc_view_open)
 * and ranges without stored's memory: the current and compacted revisions
 * come from the db. Ranges hand back each stored KeyValue's bytes, valid
 * until the read txn ends, to be copied into a RangeResponse as they are.
 *
 * Errors beyond -errno: the MVCC_ERR_* codes below. mvcc_strerror gives
 * the text clients see and mvcc_grpc_code the gRPC status code, both as
 * etcd's rpctypes has them.
 *
 * Memory: the store and views allocate through stored_malloc; response
 * messages are built in the caller's arena and point into it (or, for
 * read-only views, into the read txn); they stay valid until the arena is
 * released (and the txn ends).
 */
#ifndef CETCD_STORED_MVCC_H
#define CETCD_STORED_MVCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "stored/btree/arena.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/kvindex.h"
#include "stored/mvcc/mvcc_kv.h"
#include "stored/mvcc/revision.h"

/*
 * Request errors. code: gRPC status, then the message (etcd's rpctypes):
 *   MVCC_ERR_COMPACTED       OUT_OF_RANGE (11)
 *        "etcdserver: mvcc: required revision has been compacted"
 *   MVCC_ERR_FUTURE_REV      OUT_OF_RANGE (11)
 *        "etcdserver: mvcc: required revision is a future revision"
 *   MVCC_ERR_KEY_NOT_FOUND   INVALID_ARGUMENT (3) "etcdserver: key not found"
 *   MVCC_ERR_LEASE_NOT_FOUND NOT_FOUND (5) "etcdserver: requested lease not found"
 *   MVCC_ERR_EMPTY_KEY       INVALID_ARGUMENT (3) "etcdserver: key is not provided"
 *   MVCC_ERR_VALUE_PROVIDED  INVALID_ARGUMENT (3) "etcdserver: value is provided"
 *   MVCC_ERR_LEASE_PROVIDED  INVALID_ARGUMENT (3) "etcdserver: lease is provided"
 *   MVCC_ERR_TOO_MANY_OPS    INVALID_ARGUMENT (3)
 *        "etcdserver: too many operations in txn request"
 *   MVCC_ERR_DUPLICATE_KEY   INVALID_ARGUMENT (3)
 *        "etcdserver: duplicate key given in txn request"
 */
enum mvcc_err {
	MVCC_ERR_COMPACTED = -5001,
	MVCC_ERR_FUTURE_REV = -5002,
	MVCC_ERR_KEY_NOT_FOUND = -5003,
	MVCC_ERR_LEASE_NOT_FOUND = -5004,
	MVCC_ERR_EMPTY_KEY = -5005,
	MVCC_ERR_VALUE_PROVIDED = -5006,
	MVCC_ERR_LEASE_PROVIDED = -5007,
	MVCC_ERR_TOO_MANY_OPS = -5008,
	MVCC_ERR_DUPLICATE_KEY = -5009,
};

/* Whether err is one of the MVCC_ERR_* (the request was refused and
 * nothing was written). */
bool mvcc_is_request_error(int err);
/* The message a client sees: etcd's text for MVCC_ERR_*, strerror(-err)
 * otherwise. Static storage. */
const char *mvcc_strerror(int err);
/* The gRPC status code for err: as above for MVCC_ERR_*, UNKNOWN (2) for
 * anything else (etcd answers unexpected errors so). */
int mvcc_grpc_code(int err);

/* ---- validation etcd does in its gRPC layer (for gatewayd) ---- */

/*
 * Each returns 0 or the MVCC_ERR_* etcd's v3rpc returns, checked in etcd's
 * order: Range, DeleteRange: empty key. Put: empty key, value with
 * ignore_value, lease with ignore_lease. Txn: more than max_txn_ops
 * compares, success or failure ops (a nested txn gets what its parent left:
 * max_txn_ops minus the parent's largest list), empty keys in compares and
 * ops, an op with nothing set ("etcdserver: key not found"), then puts
 * that collide with another put or a delete of the same branch ("duplicate
 * key given in txn request"; a delete with range_end "\0" never collides,
 * as in etcd). -ENOMEM.
 */
int mvcc_validate_range(const Etcdserverpb__RangeRequest *r);
int mvcc_validate_put(const Etcdserverpb__PutRequest *r);
int mvcc_validate_delete_range(const Etcdserverpb__DeleteRangeRequest *r);
int mvcc_validate_txn(const Etcdserverpb__TxnRequest *r, unsigned max_txn_ops);

/* Nested txns deeper than this are refused with MVCC_ERR_TOO_MANY_OPS,
 * by validation and at apply, so that recursion stays bounded. etcd has no
 * such bound, but its --max-txn-ops budget (128 by default) shrinks with
 * each level and stops nesting far sooner. */
#define MVCC_TXN_MAX_DEPTH 1024

/* Whether etcd serves the txn without Raft: every op of both branches is a
 * Range (a nested txn is not). */
bool mvcc_txn_is_readonly(const Etcdserverpb__TxnRequest *r);

/* The operations a txn ran, as etcd's metrics count them: the compares
 * and ranges of the branch taken (nested txns' too) as ranges, its puts
 * and deletes; etcd_mvcc_txn_total counts a txn of more than one. resp
 * is the txn's answer (which branch ran); adds to *c. */
struct mvcc_op_counts {
	uint64_t ranges, puts, deletes;
};
void mvcc_txn_count_ops(const Etcdserverpb__TxnRequest *r, const Etcdserverpb__TxnResponse *resp,
			struct mvcc_op_counts *c);

/* ---- reading ---- */

/* A read view of one txn. Fields are read-only for callers. */
struct mvcc_view {
	struct btree_txn *txn;
	struct btree_bucket *key;    /* etcd's key bucket */
	struct kvindex idx;
	int64_t rev;                 /* current revision as of the txn */
	int64_t compact_rev;         /* reads below it fail; -1: never compacted */
};

/*
 * Opens a view of t (a read txn, or stored's write txn). -ENOENT when the
 * file has no index (stored has not opened it yet), -EUCLEAN. Close it
 * with mvcc_view_close before the txn ends.
 */
int mvcc_view_open(struct btree_txn *t, struct mvcc_view *v);
void mvcc_view_close(struct mvcc_view *v);

/*
 * Looks the latest versions of up to BTREE_GET_MANY_MAX keys up together
 * (kvindex_latest_prefetch), for the ranges of one key each at the view's
 * revision that follow: a reader that has several point reads to answer
 * overlaps their cache misses. The keys must stay put until the view
 * closes or the next prefetch. 0 or an error (then nothing was kept).
 */
int mvcc_view_prefetch(struct mvcc_view *v, size_t n, const uint8_t *const *keys,
		       const size_t *lens);

/* Lets the view's latest lookups use the latest-entry cache lc, which
 * describes the txn's file as db generation `generation`
 * (kvindex_use_cache). */
void mvcc_view_use_cache(struct mvcc_view *v, const struct lcache *lc, uint64_t generation);

/* One KeyValue of a range: its stored bytes and their fields. */
struct mvcc_kv_ref {
	const uint8_t *kv;    /* stored mvccpb.KeyValue bytes */
	size_t kv_len;
	struct mvcc_kv f;     /* decoded; points into kv */
};

/*
 * The answer to a RangeRequest, without the response header's member
 * fields. kvs are in response order; when keys_only, each must be sent
 * without its value (mvcc_kv_strip_value). Reused across ranges: init
 * once, free once.
 */
struct mvcc_range_result {
	struct mvcc_kv_ref *kvs;
	size_t n;
	int64_t count;       /* keys in the range at the revision, before limit and filters */
	bool more;
	bool keys_only;
	int64_t rev;         /* the header's revision */
	size_t cap;          /* private */
	struct mvcc_kv_ref *tmp;
	size_t tmp_cap;
};

void mvcc_range_result_init(struct mvcc_range_result *res);
void mvcc_range_result_free(struct mvcc_range_result *res);

/*
 * Range as etcd 3.4 answers it: key alone, [key, range_end), or every key
 * >= key (range_end "\0"); at r->revision (<= 0: the view's revision);
 * count_only, keys_only, limit (more), min/max mod and create revision
 * filters, sort order and target with etcd's "fetch all, filter, sort, then
 * limit". Ties of a sort keep key order (a stable sort; etcd's Go sort
 * agrees up to 12 keys and is unspecified beyond). An unknown sort target
 * or order leaves key order. MVCC_ERR_FUTURE_REV, MVCC_ERR_COMPACTED,
 * -ENOMEM, -EUCLEAN. res->kvs point into the txn.
 */
int mvcc_range(struct mvcc_view *v, const Etcdserverpb__RangeRequest *r,
	       struct mvcc_range_result *res);

/*
 * A Range handed out one KeyValue at a time, for an answer too large to
 * hold (gatewayd streams it): the same KeyValues in the same order as
 * mvcc_range gives, with the same count and more, walked twice. The
 * first pass (from mvcc_range_walk_begin) walks every key of the range,
 * for count and more; the KeyValues it hands out are the answer, to be
 * measured; n, count and more are final once it ends. mvcc_range_walk_rewind
 * starts the second pass, which hands the same n KeyValues out again, to
 * be sent. Each KeyValue is decoded (mvcc_kv_decode: the value's bytes
 * are not read), and nothing is copied: out points into the txn.
 *
 * Without a sort (or ascending by key, which is key order) the walk holds
 * no memory of its own, and a count_only range reads the index alone. A
 * sorted range needs every KeyValue at once: its first pass first
 * collects a reference to each (no bytes) in the walk's result, a step at
 * a time, then filters, sorts and limits them as mvcc_range does; both
 * passes hand those out.
 *
 * The view and r must stay as they are until the walk is freed.
 * begin: 0, MVCC_ERR_FUTURE_REV, MVCC_ERR_COMPACTED. next: 0 with *out;
 * -ENOENT at the end of the pass; -EAGAIN when *budget keys were walked
 * without a KeyValue to hand out (call again); -ENOMEM, -EUCLEAN, B+tree
 * errors. Each key walked takes one from *budget. `read` counts the
 * KeyValue bytes the walk has read (or handed out) so far.
 */
struct mvcc_range_walk {
	struct mvcc_view *v;
	const Etcdserverpb__RangeRequest *r;
	int64_t rev;         /* the revision read at */
	int64_t hdr_rev;     /* the response header's (the view's) */
	size_t n;            /* KeyValues in the answer (final after the first pass) */
	int64_t count;
	bool more;
	uint64_t read;
	/* private */
	bool sorted, collecting;
	int pass;
	size_t handed, pos;
	struct kvindex_range kr;
	struct kvindex_iter it;
	struct mvcc_range_result res;
};
void mvcc_range_walk_init(struct mvcc_range_walk *w);
int mvcc_range_walk_begin(struct mvcc_range_walk *w, struct mvcc_view *v,
			  const Etcdserverpb__RangeRequest *r);
int mvcc_range_walk_next(struct mvcc_range_walk *w, struct mvcc_kv_ref *out, size_t *budget);
void mvcc_range_walk_rewind(struct mvcc_range_walk *w);
void mvcc_range_walk_free(struct mvcc_range_walk *w);

/*
 * Builds a RangeResponse (header with the revision only) from a result in
 * arena a. copy: copy keys and values into the arena (needed when the
 * txn will change before the response is encoded); otherwise they point
 * into the txn. -ENOMEM, -EUCLEAN.
 */
int mvcc_range_response(const struct mvcc_range_result *res, struct arena *a, bool copy,
			Etcdserverpb__RangeResponse **out);

/* A read-only Txn (mvcc_txn_is_readonly) on a view; -EINVAL otherwise. */
int mvcc_txn_read(struct mvcc_view *v, const Etcdserverpb__TxnRequest *r, struct arena *a,
		  Etcdserverpb__TxnResponse **out);

/* ---- hashes (Maintenance.HashKV and Maintenance.Hash) ---- */

/*
 * etcd 3.4's HashByRev over a view: CRC-32C of the key bucket's name, then
 * of each entry's key (the revision, with its tombstone mark) and value
 * as stored, in revision order, up to revision `at`; of the entries at or
 * below the compact revision only those etcd's Keep(at) holds (each key's
 * newest revision at `at` when that is a put), unless it holds none.
 *
 * mvcc_hashkv_begin checks rev as etcd does: 0 is the view's revision;
 * MVCC_ERR_COMPACTED at or below the compact revision, MVCC_ERR_FUTURE_REV
 * above the view's (a negative rev hashes the name alone, as etcd does).
 * mvcc_hashkv_step goes on for about `budget` bytes of work (entries and
 * index lookups count too) and sets *done when the hash is ready. Every
 * step but the one that follows the entries at or below the compact
 * revision stays within the budget; that one, when Keep held none of
 * them, also looks for one live key (etcd's test whether Keep is empty).
 * The view must stay open throughout. Errors: -EUCLEAN, the B+tree's.
 * mvcc_hashkv runs it all at once.
 */
struct mvcc_hashkv {
	uint32_t hash;            /* the answer, once done */
	int64_t rev;              /* the view's revision (the response header's) */
	int64_t compact_rev;      /* the response's compact_revision; -1: none */
	/* private */
	struct mvcc_view *v;
	int64_t at;
	int state;
	bool started;
	struct btree_cursor c;
	uint32_t crc;             /* after the prefix */
	uint32_t crc_all, crc_kept; /* the prefix, without and with Keep */
	uint64_t kept, skipped;   /* prefix entries Keep held and did not */
};
int mvcc_hashkv_begin(struct mvcc_hashkv *h, struct mvcc_view *v, int64_t rev);
int mvcc_hashkv_step(struct mvcc_hashkv *h, size_t budget, bool *done);
int mvcc_hashkv(struct mvcc_view *v, int64_t rev, struct mvcc_hashkv *h);

/*
 * etcd 3.4's backend Hash over the view's txn: CRC-32C of every top-level
 * bucket in name order, its name then each entry's key and value (a nested
 * bucket's key alone), without meta's consistent_index (etcd's
 * DefaultIgnores) and without cetcd's own buckets (cetcd_*: the index,
 * which holds nothing that is not in the key bucket), so that an etcd and
 * a cetcd db with the same contents hash alike. hash is the answer once
 * done, rev the view's revision (the response header's). Steps as
 * mvcc_hashkv_step, each within its budget. Errors: -EUCLEAN (a value at
 * the top level), the B+tree's.
 */
struct mvcc_hashdb {
	uint32_t hash;
	int64_t rev;
	/* private */
	struct btree_txn *t;
	struct btree_cursor top, c;
	uint32_t crc;
	bool top_started, in_bucket, bucket_started, in_meta, done;
};
void mvcc_hashdb_begin(struct mvcc_hashdb *h, struct mvcc_view *v);
int mvcc_hashdb_step(struct mvcc_hashdb *h, size_t budget, bool *done);
int mvcc_hashdb(struct mvcc_view *v, struct mvcc_hashdb *h);

/* ---- the writer ---- */

struct mvcc_store;

/* One change, as etcd's watchable store sees it. */
enum mvcc_event_type { MVCC_EVENT_PUT = 0, MVCC_EVENT_DELETE = 1 };
struct mvcc_event {
	enum mvcc_event_type type;
	struct rev rev;
	const uint8_t *key;
	size_t key_len;
	const uint8_t *kv;        /* bytes written to the key bucket: the new
				   * KeyValue, or KeyValue{key} for a delete
				   * (whose event etcd sends with mod_revision
				   * rev.main) */
	size_t kv_len;
	const uint8_t *prev_kv;   /* the version replaced; NULL if none */
	size_t prev_kv_len;
};

struct mvcc_store_opts {
	/* Whether lease id exists, asked at apply by Put and by the puts of a
	 * Txn: 1 yes, 0 no, or a negative error. NULL: the id is looked up in
	 * the lease bucket of the batch's txn. */
	int (*lease_exists)(void *arg, struct btree_txn *t, int64_t id);
	void *lease_arg;
	/* Called for every change in order, before it is written; bytes are
	 * valid during the call only. A batch's events are final only when
	 * mvcc_batch_commit succeeds. May be NULL. */
	void (*on_event)(void *arg, const struct mvcc_event *ev);
	void *event_arg;
	/* Key-bucket entries per commit while rebuilding the index; 0: 10000. */
	uint32_t rebuild_batch;
};

/* What the store has committed (or, inside a batch, applied so far). */
struct mvcc_state {
	int64_t rev;                 /* current revision (1 when empty) */
	int64_t compact_rev;         /* last compaction asked for; -1: none */
	int64_t finished_compact_rev;/* last compaction done; -1: none */
	uint64_t consistent_index;   /* last Raft index applied */
	bool compacting;             /* compact_rev's deletion is not done */
	bool rebuilt;                /* the open rebuilt the index */
};

/*
 * Opens the MVCC state of db (its one writer): creates etcd's buckets
 * where missing, rebuilds the index from the key bucket when there is
 * none or it does not match (in commits of o->rebuild_batch entries, each
 * checkpointed so that the file does not grow by every chunk's copies),
 * and resumes an unfinished compaction. Otherwise it commits but does not
 * checkpoint. o may be NULL. -EUCLEAN, -ENOMEM, B+tree errors
 * (errmsg_get(rc) describes each).
 */
int mvcc_store_open(struct btree_db *db, const struct mvcc_store_opts *o,
		    struct mvcc_store **out);
/* Frees the store (ends an open batch without committing). NULL-safe. */
void mvcc_store_close(struct mvcc_store *s);
void mvcc_store_state(const struct mvcc_store *s, struct mvcc_state *out);

/* Starts an apply batch: one B+tree write txn. -EBUSY if one is open. */
int mvcc_batch_begin(struct mvcc_store *s);
/* The batch's write txn, for the other state machines of stored. */
struct btree_txn *mvcc_batch_txn(struct mvcc_store *s);
/* A view of the batch so far (for reads inside the apply loop). */
struct mvcc_view *mvcc_batch_view(struct mvcc_store *s);

/*
 * Starts applying the entry at Raft index `index`: 0 to apply it,
 * -EALREADY when index <= the consistent index (already applied: skip
 * it), -EINVAL outside a batch. The consistent index becomes index and is
 * written with the batch.
 */
int mvcc_apply_begin(struct mvcc_store *s, uint64_t index);

/*
 * The KV requests of an applied entry, as etcd's applier runs them. Each
 * builds its response in arena a (header: revision only; the caller
 * fills cluster, member and term) and returns 0, an MVCC_ERR_* (nothing
 * written, *out untouched), or a batch-failing error.
 *   Put: MVCC_ERR_LEASE_NOT_FOUND, MVCC_ERR_KEY_NOT_FOUND (ignore_value or
 *        ignore_lease on a missing key), MVCC_ERR_EMPTY_KEY.
 *   DeleteRange: deleted count, prev_kvs.
 *   Txn: compares at the txn's start (nested ones too), then the checks
 *        of etcd (puts: lease, ignore_* keys; ranges: revisions), then the
 *        ops of the chosen branches in order, all at one main revision
 *        with increasing sub revisions. A put whose ignore_value or
 *        ignore_lease key was deleted earlier in the same txn (etcd
 *        crashes) keeps an empty value and no lease.
 *   Compact: MVCC_ERR_COMPACTED (at or below the last compaction),
 *        MVCC_ERR_FUTURE_REV; records scheduledCompactRev; the deletion
 *        then runs through mvcc_compact_step.
 *   Range: a Range that went through Raft.
 */
int mvcc_put(struct mvcc_store *s, const Etcdserverpb__PutRequest *r, struct arena *a,
	     Etcdserverpb__PutResponse **out);
int mvcc_delete_range(struct mvcc_store *s, const Etcdserverpb__DeleteRangeRequest *r,
		      struct arena *a, Etcdserverpb__DeleteRangeResponse **out);
int mvcc_txn(struct mvcc_store *s, const Etcdserverpb__TxnRequest *r, struct arena *a,
	     Etcdserverpb__TxnResponse **out);
int mvcc_compact(struct mvcc_store *s, const Etcdserverpb__CompactionRequest *r,
		 struct arena *a, Etcdserverpb__CompactionResponse **out);
int mvcc_range_apply(struct mvcc_store *s, const Etcdserverpb__RangeRequest *r,
		     struct arena *a, Etcdserverpb__RangeResponse **out);

/*
 * Runs the pending compaction for up to max_entries entries of the key
 * bucket in the open batch: deletes each revision at or below the compact
 * revision except every key's newest one there unless it is a tombstone
 * (etcd's rule), from the key bucket and the index. *done (may be NULL)
 * tells whether it finished; the batch then records finishedCompactRev.
 * Nothing to do (and *done true) when no compaction is pending. Readers at
 * or above the compact revision see the same data throughout.
 */
int mvcc_compact_step(struct mvcc_store *s, uint32_t max_entries, bool *done);

/* Writes the consistent index and the index meta, commits the batch's
 * txn and returns the triple to publish (out may be NULL). On failure the
 * store is back at the last commit. */
int mvcc_batch_commit(struct mvcc_store *s, struct btree_root *out);
/* Drops the open batch; the store is back at the last commit. */
void mvcc_batch_abort(struct mvcc_store *s);

#endif
