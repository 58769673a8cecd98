/*
 * Internals shared by the MVCC layer's files: the store (mvcc.c), views
 * (mvcc_view.c), the write primitives (mvcc_write.c), ranges
 * (mvcc_range.c), txns (mvcc_txn.c) and compaction (mvcc_compact.c); and
 * what the two halves of the index (kvindex.c, which reads, and
 * kvindex_write.c) and of the latest-entry cache (lcache.c, lcache_write.c)
 * share.
 */
#ifndef CETCD_STORED_MVCC_INT_H
#define CETCD_STORED_MVCC_INT_H

#include <errno.h>
#include <string.h>

#include "proto/wire.h"
#include "stored/alloc.h"
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

/* ---- the meta bucket: shared by mvcc_view.c and mvcc.c ---- */

static inline int open_bucket(struct btree_txn *t, const char *name,
			      struct btree_bucket **out)
{
	return btree_bucket_open(t, NULL, name, strlen(name), out);
}

/* A revision-valued meta key (scheduledCompactRev, finishedCompactRev):
 * its main, or -1 when absent. */
static inline int meta_rev(struct btree_bucket *meta, const char *name, int64_t *out)
{
	const uint8_t *v;
	size_t len;
	struct rev r;
	int rc = btree_get(meta, name, strlen(name), &v, &len);
	if (rc == -ENOENT) {
		*out = -1;
		return 0;
	}
	if (rc)
		return rc;
	if (rev_decode(v, len, &r, NULL))
		return kvindex_corrupt("meta %s is not a revision (%zu bytes)", name, len);
	*out = r.main;
	return 0;
}

/* The compaction reads obey: the scheduled one when it is ahead. */
static inline int64_t effective_compact(int64_t scheduled, int64_t finished)
{
	return scheduled > finished ? scheduled : finished;
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

/* One txn being run, on a view (read-only) or on the store's batch
 * (mvcc_txn.c). */
struct txn_exec {
	struct mvcc_view *v;
	struct mvcc_store *s;           /* NULL: read-only */
	struct arena *a;
	struct mvcc_range_result *rr;
	bool *path;                      /* branch taken by each txn, preorder */
	size_t npath, path_cap;
	/* with s: the writes of put and delete ops (mvcc_put_op and
	 * mvcc_delete_op, set by mvcc_txn in mvcc_write.c) */
	int (*put)(struct mvcc_store *s, const Etcdserverpb__PutRequest *r, bool strict,
		   struct arena *a, Etcdserverpb__PutResponse **out);
	int (*del)(struct mvcc_store *s, const Etcdserverpb__DeleteRangeRequest *r,
		   struct arena *a, Etcdserverpb__DeleteRangeResponse **out);
};

/* Runs r on x: the compares' path, the checks (puts' too when writes),
 * the ops; frees the path. */
int mvcc_txn_exec(struct txn_exec *x, const Etcdserverpb__TxnRequest *r, bool writes,
		  Etcdserverpb__TxnResponse **out);

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

/* ---- the latest-entry cache: shared by lcache.c and lcache_write.c ---- */

#define WAY_TAG_SHIFT 48
#define WAY_PGID_SHIFT 20
#define WAY_INDEX_SHIFT 12

static inline uint64_t lcache_tag(uint64_t h)
{
	uint64_t t = h >> WAY_TAG_SHIFT;
	return t ? t : 1;
}

static inline uint64_t way_tag(uint64_t way)
{
	return way >> WAY_TAG_SHIFT;
}

static inline struct lcache_set *lcache_set_of(const struct lcache *c, uint64_t h)
{
	return &c->sets[h & c->mask];
}

/* The way of s holding tag, or LCACHE_WAYS. */
static inline unsigned set_find(const struct lcache_set *s, uint64_t tag)
{
	for (unsigned w = 0; w < LCACHE_WAYS; w++) {
		uint64_t v = atomic_load_explicit(&s->way[w], memory_order_relaxed);
		if (v && way_tag(v) == tag)
			return w;
	}
	return LCACHE_WAYS;
}

/* ---- the index buckets: shared by kvindex.c and kvindex_write.c ---- */

#define LATEST_INLINE 'i'
#define LATEST_REF 'r'
#define LATEST_HDR 17u            /* kind, main, sub */
#define LATEST_REF_LEN (LATEST_HDR + 24u)
#define LATEST_REF_VARINT 'v'
#define LATEST_REF_VARINT_MAX (1u + 5u * PROTO_VARINT_MAX_BYTES)
#define HIST_PUT 'p'
#define HIST_TOMBSTONE 't'
#define HIST_SUFFIX 16u           /* ~main, ~sub */
#define HIST_TERM 2u              /* 0x00 0x01 */

#define corrupt(...) kvindex_corrupt("cetcd index: " __VA_ARGS__)

/* Grows one of the scratch buffers. */
static inline int reserve(uint8_t **buf, size_t *cap, size_t need)
{
	return stored_reserve((void **)buf, cap, need, 1, 64);
}

/* Writes esc(key) 0x00 0x01; returns its length. */
static inline size_t esc_put(uint8_t *out, const uint8_t *key, size_t len)
{
	size_t w = 0;
	for (size_t i = 0; i < len; i++) {
		out[w++] = key[i];
		if (key[i] == 0)
			out[w++] = 0xff;
	}
	out[w++] = 0x00;
	out[w++] = 0x01;
	return w;
}

/* Long keys (kvindex.h): the bytes of a key, or of its escaped form, that
 * their entries' B+tree keys hold, the tag after them, and those keys'
 * length (PAGE_MAX_KEY). */
#define LONG_PREFIX KVINDEX_WHOLE_KEY_BYTES
#define LONG_TAG 2u
#define LONG_ENTRY_KEY (LONG_PREFIX + LONG_TAG + HIST_SUFFIX)

/* The length of esc(key) without its terminator. */
static inline size_t esc_len(const uint8_t *key, size_t len)
{
	size_t n = len;
	for (size_t i = 0; i < len; i++)
		n += key[i] == 0;
	return n;
}

/* Whether key's history entries hold it whole (esc(key) fits). */
static inline bool hist_whole(const uint8_t *key, size_t len)
{
	return esc_len(key, len) <= LONG_PREFIX;
}

/* The tag of a long key: 15 bits of its FNV-1a hash with the top bit set
 * (part of the file format: it must never change). */
static inline uint16_t long_tag(const uint8_t *key, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ key[i]) * 16777619u;
	return (uint16_t)(0x8000u | ((h ^ (h >> 15)) & 0x7fffu));
}

/* Writes the latest-bucket key of the long key `key` whose latest
 * revision is r (LONG_ENTRY_KEY bytes), or the history key of its
 * revision r (LONG_ENTRY_KEY bytes, the revision complemented). */
void long_latest_key(uint8_t *out, const uint8_t *key, size_t len, struct rev r);
void long_hist_key(uint8_t *out, const uint8_t *key, size_t len, struct rev r);

/* The etcd key a KeyValue names (field 1, which etcd and cetcd write
 * first; any other layout is decoded whole); false when it has none. */
bool kvindex_user_key(const uint8_t *val, size_t vlen, const uint8_t **key, size_t *len);

/* Parses a latest-bucket value of key. Without `fields` an inline entry's
 * create revision, version and lease are left unset (walks need only the
 * revision and the bytes, which the caller decodes anyway). */
int kvindex_latest_parse(const uint8_t *key, size_t klen, const uint8_t *v, size_t len,
			 bool fields, struct kvindex_entry *e);

/* Opens one of the index's buckets: btree_bucket_open's (kvindex.c), or
 * creating it when missing (kvindex_write.c). */
typedef int (*kvindex_bucket_fn)(struct btree_txn *t, const char *name, size_t len,
				 struct btree_bucket **out);
/* Opens x's buckets in t with open_one (the key bucket, which only the
 * cache's places need, only when it exists). */
int kvindex_open_all(struct btree_txn *t, struct kvindex *x, kvindex_bucket_fn open_one);

#endif
