/*
 * Internals shared by the MVCC layer's files: the store, the write
 * primitives (mvcc_write.c), ranges (mvcc_range.c), txns (mvcc_txn.c)
 * and compaction (mvcc_compact.c).
 */
#ifndef CETCD_STORED_MVCC_INT_H
#define CETCD_STORED_MVCC_INT_H

#include "stored/mvcc/mvcc.h"

/* A compaction whose deletion is under way. */
struct mvcc_compact_job {
	bool active;
	int64_t target;      /* compact revision */
	struct rev next;     /* first key-bucket revision not examined yet */
};

/* What a batch changes and an abort puts back. */
struct mvcc_committed {
	int64_t rev;
	int64_t compact_rev;        /* scheduled (the one reads obey); -1: none */
	int64_t finished_compact;   /* -1: none */
	uint64_t consistent_index;
	struct mvcc_compact_job job;
};

struct mvcc_store {
	struct btree_db *db;
	struct mvcc_store_opts o;
	struct mvcc_committed c;      /* as applied so far */
	struct mvcc_committed saved;  /* as of the last commit */
	bool rebuilt;

	/* the open batch */
	struct btree_txn *wtxn;       /* NULL outside a batch */
	struct mvcc_view wv;          /* view of wtxn; wv.rev follows the op */
	struct btree_bucket *meta;
	bool entry_open;              /* mvcc_apply_begin said apply */
	bool ci_dirty;                /* consistent index to write */
	bool kv_dirty;                /* key bucket or compaction meta changed */

	/* the write op in progress (etcd's storeTxnWrite) */
	int64_t begin_rev;
	int64_t changes;

	/* scratch, reused */
	uint8_t *kvbuf;               /* encoded KeyValue of a write */
	size_t kvcap;
	uint8_t *keys;                /* keys of a delete, back to back */
	size_t keys_len, keys_cap;
	size_t *key_offs;             /* start of each key in keys, plus the end */
	size_t nkeys, key_offs_cap;
	struct mvcc_range_result rr;  /* ranges run by writes */
};

static inline int mvcc_i64_cmp(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* (Re)opens v's buckets in t, keeping its scratch. Does not read the
 * revisions. */
int mvcc_view_bind(struct btree_txn *t, struct mvcc_view *v);

/* Reads the KeyValue at revision r from the key bucket; -EUCLEAN when it
 * is missing or malformed. */
int mvcc_view_kv_at(struct mvcc_view *v, struct rev r, const uint8_t **kv, size_t *len);

/* Range at revision cur_rev (the txn's current revision), as mvcc_range. */
int mvcc_range_at(struct mvcc_view *v, const Etcdserverpb__RangeRequest *r, int64_t cur_rev,
		  struct mvcc_range_result *res);

/* Copies (or references) one KeyValue into a protobuf-c message in a. */
int mvcc_kv_message(const struct mvcc_kv *f, bool keys_only, struct arena *a, bool copy,
		    Mvccpb__KeyValue **out);
/* A response header with only the revision set, in a. */
Etcdserverpb__ResponseHeader *mvcc_header(struct arena *a, int64_t rev);

/* Write ops: etcd's storeTxnWrite. op_begin starts one main revision;
 * op_end makes it current if anything changed. */
void mvcc_op_begin(struct mvcc_store *s);
void mvcc_op_end(struct mvcc_store *s);
/* 0 when an entry is being applied, -EINVAL otherwise. */
int mvcc_check_open(struct mvcc_store *s);

/* Whether lease id exists for a put at apply. 1, 0, or an error. */
int mvcc_lease_exists(struct mvcc_store *s, int64_t id);

/*
 * The Put of an op (standalone or in a txn). strict: ignore_value or
 * ignore_lease on a missing key fails with MVCC_ERR_KEY_NOT_FOUND before
 * anything is written (a standalone Put); otherwise the put goes on with an
 * empty value and no lease.
 */
int mvcc_put_op(struct mvcc_store *s, const Etcdserverpb__PutRequest *r, bool strict,
		struct arena *a, Etcdserverpb__PutResponse **out);
/* The DeleteRange of an op. */
int mvcc_delete_op(struct mvcc_store *s, const Etcdserverpb__DeleteRangeRequest *r,
		   struct arena *a, Etcdserverpb__DeleteRangeResponse **out);

#endif
