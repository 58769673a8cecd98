/*
 * cetcd's index of the key bucket: key -> revisions, kept in the db file
 * (etcd keeps it in memory only) so that any process with a read txn can
 * read by key at any revision without stored's memory.
 *
 * Three buckets (names in schema.h):
 *
 * cetcd_kv_latest: one entry per live key (a key whose newest revision is
 *   a put), keyed by the user key itself (a long key: see "Long keys"
 *   below), so that byte order is etcd's key
 *   order and the newest version of a key is one B+tree lookup. The value:
 *     'i' main(8) sub(8) KeyValue...   the KeyValue bytes inline, when they
 *                                      are at most KVINDEX_INLINE_MAX bytes
 *     'v' main sub create version lease
 *                                      larger ones: the KeyValue is read
 *                                      from the key bucket at (main, sub);
 *                                      each a varint (protobuf's, of the
 *                                      value as unsigned 64 bits)
 *     'r' main(8) sub(8) create(8) version(8) lease(8)
 *                                      the same, as format 2 wrote it
 *   (other integers 8-byte big-endian). A reference is 10 or so bytes
 *   where 'r' took 41, which in a latest bucket of 16-byte keys is a
 *   third of its pages. A range at the current revision is a
 *   cursor walk over this bucket, and a lookup of each referenced
 *   KeyValue in the key bucket (as etcd looks each revision up). A latest
 *   read is one read of the key bucket's entry when the latest-entry cache
 *   answers; otherwise one lookup here, and one more for a reference.
 *   Entries of either kind are read whatever the threshold was when they
 *   were written.
 *
 * cetcd_kv_history: every other revision of every key still in the key
 *   bucket: the puts that a newer revision superseded and the tombstones,
 *   keyed by
 *     esc(key) 0x00 0x01 ~main(8) ~sub(8)
 *   where esc() writes each 0x00 byte of the key as 0x00 0xff and every
 *   other byte as itself, and ~ is the bitwise complement, big-endian. The
 *   encoding keeps etcd's key order for arbitrary bytes (0x00 and 0xff
 *   included: the terminator 0x00 0x01 sorts below both 0x00 0xff and any
 *   non-zero byte) and puts a key's revisions newest first, so that one
 *   seek to esc(key) 0x00 0x01 ~at 0...0 lands on the newest revision at
 *   or below `at`, and a seek to esc(key) 0x00 0x02 on the next key. The
 *   value is one byte: 'p' (put) or 't' (tombstone).
 *
 * The two together, for every key: its latest entry's revision (if it is
 *   live) and its history entries are exactly its revisions in the key
 *   bucket, each in one place only, and the latest entry is newer than all
 *   of its history. A put of a new key (or of one whose newest revision is
 *   a tombstone) writes only the latest entry; a put of a live key moves
 *   the old latest revision into the history as 'p' first; a delete moves
 *   it there and adds the tombstone 't'. So the newest revision of a key
 *   at `at` is its latest entry when that is at or below `at`, else its
 *   newest history entry at or below `at`; a walk at an old revision merges
 *   the latest bucket (raw keys) with the history (esc(key) 0x00 0x01
 *   prefixes, which sort as the raw keys do).
 *
 * cetcd_kv_meta: format (8 bytes BE, KVINDEX_FORMAT_WHOLE, or
 *   KVINDEX_FORMAT once the index holds a long key's entry), revision (the
 *   current main revision, 8 bytes BE), covers (scheduledCompactRev and
 *   finishedCompactRev mains, 8 bytes BE each, then the last key of the key
 *   bucket): what the index was built from. A file whose key or meta bucket
 *   no longer matches (etcd wrote to it) gets its index rebuilt.
 *
 * The latest-entry cache (lcache.h), kept by stored's commits in shared
 * memory, says where each key's latest revision sits in the `key` bucket
 * (etcd's revision-keyed KeyValues), so that a reader's latest lookup reads
 * that one KeyValue instead of descending the tree; kvindex_use_cache turns
 * it on for a read txn, kvindex_feed_cache has the writer keep it. It
 * points into the key bucket rather than the latest bucket because a
 * revision's entry almost never moves once written (only the bucket's
 * last leaf, and compaction, rewrite old entries), while the latest
 * bucket's leaves are rewritten with every write to any of their keys,
 * which would make each commit re-place every entry of every leaf it
 * touches.
 *
 * Long keys. A B+tree key is at most 32768 bytes (bbolt's MaxKeySize),
 *   and etcd takes keys of any length its request limit lets through. A
 *   key of at most 32750 bytes (KVINDEX_WHOLE_KEY_BYTES) is its own latest
 *   key, one whose esc() is at most 32750 bytes is in its history keys
 *   whole, as above: nothing else changes for them. Longer ones are long
 *   keys, and their entries are filed under the first 32750 bytes and a
 *   tag, in 32768-byte B+tree keys:
 *     latest:   key[0..32750) tag(2) main(8) sub(8)
 *     history:  esc(key)[0..32750) tag(2) ~main(8) ~sub(8)
 *   where tag is 15 bits of the key's FNV-1a hash with the top bit set
 *   (long_tag in mvcc_int.h) and the revision is the entry's own (the
 *   latest entry's, whose value is as above). The history's cut may fall
 *   between 0x00 and its 0xff. Every whole key is at most 32750 bytes, and
 *   in the history ends in 0x00 0x01 and a revision, whose 0x00 is where a
 *   long key's tag (>= 0x80) is: so no whole key's entry sorts among the
 *   entries of the long keys that share a prefix (a group), a whole key
 *   sorts before or after a group as it does before or after each of its
 *   keys, and groups sort as their keys do; a 32768-byte history key is a
 *   long key's exactly when its byte 32750 is >= 0x80. Within a group only
 *   the full keys order the entries: they are read from the KeyValues in
 *   the key bucket (the latest entry's, or the history entry's revision,
 *   with its tombstone mark), which etcd keeps anyway. So:
 *     a lookup of a long key seeks its prefix and tag (and ~at in the
 *       history) and reads the KeyValue of each entry there until one
 *       names the key: one, unless keys of the same prefix share a tag;
 *     a walk reads a group whole when it comes to it, keeps its keys in
 *       the range (at an old revision, each key's newest revision at or
 *       below `at`), sorts them by full key and gives them in that order;
 *       the two streams of a walk at an old revision compare full keys;
 *     a write files the entry under the revision it has: a put of a live
 *       long key deletes the latest entry of prev's revision and adds one
 *       of its own, with no lookup; the history's keys are computed.
 *   A key of at most 32750 bytes with many 0x00 bytes is whole in the
 *   latest bucket and long in the history. A long key's entries make the
 *   meta format 4 (kvindex_meta_write, from `long_keys`); builds before
 *   format 4 do not read such a file (they rebuild the index, and refuse
 *   the long key they find), and a file without long keys stays format 3.
 *
 * Errors: 0 or negative errno of the B+tree (btree.h); -EUCLEAN when an
 * index entry is malformed (errmsg_get(-EUCLEAN) names it).
 */
#ifndef CETCD_STORED_KVINDEX_H
#define CETCD_STORED_KVINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stored/btree/btree.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc_kv.h"
#include "stored/mvcc/revision.h"

/* The newest format this build reads: format 4 is format 3 with entries of
 * long keys, written only once a long key's entry is (see "Long keys"). */
#define KVINDEX_FORMAT 4u
/* The format of an index that holds no long key's entry. */
#define KVINDEX_FORMAT_WHOLE 3u
/* The oldest format this build reads: format 2 differs only in its 'r'
 * references, which are still read (an older build rebuilds an index of
 * format 3, whose 'v' references it cannot read). */
#define KVINDEX_FORMAT_OLDEST 2u
/* KeyValues up to this size are copied into the latest entry. A copy of a
 * larger one would double what the file holds for it and what a put
 * writes: with 1,000,000 random puts of 256-byte values, a threshold of
 * 2048 gave a 986 MB file and 138-157k puts/s, references 496-560 MB and
 * 231k puts/s. A reference costs a reader a second lookup only when the
 * latest-entry cache does not answer. */
#define KVINDEX_INLINE_MAX 64u
/* The longest key kept whole in the latest bucket, and the longest
 * esc(key) kept whole in the history: 32768 bytes of a B+tree key less
 * the terminator and revision. */
#define KVINDEX_WHOLE_KEY_BYTES 32750u

/* The newest version of a live key. */
struct kvindex_entry {
	struct rev mod;
	int64_t create_rev;
	int64_t version;
	int64_t lease;
	const uint8_t *kv;   /* inline KeyValue bytes, or NULL: read the key */
	size_t kv_len;       /* bucket at mod */
};

/* The index buckets of one txn and scratch space for encoding keys. The
 * scratch is owned by the struct (kvindex_close frees it). */
struct kvindex {
	struct btree_bucket *latest;
	struct btree_bucket *history;
	struct btree_bucket *meta;
	uint8_t *wbuf;      /* history keys of writes */
	size_t wcap;
	uint8_t *seekbuf;   /* iterator seeks */
	size_t seekcap;
	uint8_t *endbuf;    /* iterator's encoded range end */
	size_t endcap;
	/* Latest-bucket lookups done ahead by kvindex_latest_prefetch: their
	 * keys (the caller's bytes), results and values (the txn's): with
	 * `cached`, the entry the cache gave; otherwise the latest-bucket
	 * value. */
	size_t npre, pre_next;
	struct kvindex_pre {
		const uint8_t *key;
		size_t len;
		int rc;
		bool cached;
		const uint8_t *val;
		size_t vlen;
		struct kvindex_entry entry;
	} pre[BTREE_GET_MANY_MAX];
	/* kvindex_use_cache: the latest-entry cache and the db generation
	 * of this txn's file (read txns only), and the key bucket its places
	 * are in (NULL: the file has none). */
	const struct lcache *lc;
	uint64_t lc_generation;
	struct btree_bucket *keyb;
	/* The sorted groups of long keys a walk is in: the latest bucket's
	 * and the history's (kvindex_iter's lg and hg count and step them). */
	struct kvindex_grp *lgrp, *hgrp;
	size_t lgcap, hgcap;
	/* An entry of a long key was written through x, or the file held one
	 * (the caller's to set): kvindex_meta_write writes format 4. */
	bool long_keys;
};

/* A long key of a group, in a walk: the key (its KeyValue's bytes), and
 * its latest entry, or its history revision at the walk's `at`. */
struct kvindex_grp {
	const uint8_t *key;
	size_t len;
	struct kvindex_entry e;
	bool tomb;
};

/* Zeroes x before its first use. */
void kvindex_init(struct kvindex *x);
/* Opens the index buckets of t into x (zeroed, or used before: its scratch
 * is kept). -ENOENT when the file has none (a plain etcd db: rebuild it). */
int kvindex_open(struct btree_txn *t, struct kvindex *x);
/* Creates the buckets (or opens those that exist) in the write txn t. */
int kvindex_create(struct btree_txn *t, struct kvindex *x);
/* Deletes the index buckets of the write txn t, if any. */
int kvindex_drop(struct btree_txn *t);
/* Frees the scratch; the buckets belong to the txn. NULL-safe. */
void kvindex_close(struct kvindex *x);

/*
 * Lets the latest lookups of a read txn's index find entries through the
 * latest-entry cache lc (lcache.h), which must describe the txn's file
 * as db generation `generation`; a key the cache does not hold for the
 * txn is looked up in the tree as before. lc must outlive x's use of it.
 */
void kvindex_use_cache(struct kvindex *x, const struct lcache *lc, uint64_t generation);

/*
 * The writer's side of the latest-entry cache. kvindex_feed_cache makes the
 * writer db keep lc up to date (btree_db_observe on the key bucket), after
 * clearing it for db generation `generation` (non-zero): each commit places
 * the key revisions it writes, drops the keys it deletes, and moves the
 * places of the entries its rewrites move. Call it before publishing any
 * commit of db to readers, and again with a new generation for a new file;
 * f, lc and db must outlive each other's use; 0 or -ENOMEM.
 * kvindex_feed_warm tells lc, between write txns, of up to max further keys
 * of the newest commit that no commit has placed (those of the file as it
 * was opened, or all of them after a reset), resuming where the last call
 * stopped, until *done; with until_ns non-zero it also stops once
 * clock_now_ns reaches until_ns (looked at every KVINDEX_WARM_CLOCK_EVERY
 * keys, after at least that many: each call moves on). Each key is a
 * lookup at a random place of the key bucket, a page fault of its own in a
 * mapping not yet touched (a new file): a few microseconds, so that a
 * count alone does not bound the time. -EBUSY during a write txn, -ENOMEM,
 * or the tree's read errors. kvindex_feed_close frees what f holds.
 */
struct kvindex_feed {
	struct btree_db *db;
	struct lcache *lc;
	uint64_t generation;
	uint8_t *warm_key;     /* latest-bucket key where warming resumes */
	size_t warm_len, warm_cap;
	bool warm_done;
};
int kvindex_feed_cache(struct btree_db *db, struct kvindex_feed *f, struct lcache *lc,
		       uint64_t generation);
#define KVINDEX_WARM_CLOCK_EVERY 16u
int kvindex_feed_warm(struct kvindex_feed *f, size_t max, int64_t until_ns, bool *done);
void kvindex_feed_close(struct kvindex_feed *f);

/*
 * The latest entry of key through lc alone, in the read txn of key_bucket
 * (its `key` bucket): 0 with *out (kv the bytes in the key bucket, valid
 * like btree_get's), or -EAGAIN when lc holds no place for key that the txn
 * may use (placed after the txn's commit, or not a KeyValue of key).
 */
int kvindex_cache_get(const struct lcache *lc, uint64_t generation,
		      struct btree_bucket *key_bucket, const uint8_t *key, size_t len,
		      struct kvindex_entry *out);

/*
 * Looks up to BTREE_GET_MANY_MAX keys up in the latest bucket together
 * (btree_get_many: their cache misses overlap), so that the
 * kvindex_latest_get calls for them that follow find the answers ready
 * (a range of one key at the current revision does one). The keys must
 * stay as they are until the next prefetch or kvindex_close. Read txns
 * only; in a write txn nothing is kept, since a later change would make
 * the answers stale. 0 or an error of the lookup (nothing kept).
 */
int kvindex_latest_prefetch(struct kvindex *x, size_t n, const uint8_t *const *keys,
			    const size_t *lens);

/* Looks key up in the latest bucket. -ENOENT when it is not live. Bytes
 * are valid like btree_get's. */
int kvindex_latest_get(struct kvindex *x, const uint8_t *key, size_t len,
		       struct kvindex_entry *out);

/*
 * The newest revision of key at or below main revision at: its latest
 * entry when that is at or below at, else its newest history entry there;
 * *rev and *tombstone. -ENOENT when the key has none (never written then,
 * or compacted away).
 */
int kvindex_history_find(struct kvindex *x, const uint8_t *key, size_t len, int64_t at,
			 struct rev *rev, bool *tombstone);

/*
 * Records a put of kv (its fields) at revision r; kv_bytes are its
 * encoding. prev is the key's latest entry as kvindex_latest_get returned
 * it in this txn, or NULL when that said -ENOENT: a put with the wrong
 * prev breaks the index. Moves prev's revision into the history and makes
 * r the latest entry. Only prev->mod is read, so prev's bytes may have gone
 * stale through writes to other buckets. Write txns only. -EINVAL for the
 * empty key; -EUCLEAN when r is not newer than prev (or, for a long key,
 * prev's latest entry is missing).
 */
int kvindex_put(struct kvindex *x, const struct mvcc_kv *kv, struct rev r,
		const uint8_t *kv_bytes, size_t kv_len, const struct kvindex_entry *prev);

/* Records a tombstone of key at r; prev as for kvindex_put (NULL: the key
 * is not live, only the tombstone is added). Moves prev's revision into
 * the history, removes the latest entry and adds the tombstone there.
 * -EINVAL and -EUCLEAN as kvindex_put. */
int kvindex_tombstone(struct kvindex *x, const uint8_t *key, size_t len, struct rev r,
		      const struct kvindex_entry *prev);

/* Removes the history entry of key at r (compaction, which never removes
 * a key's latest entry). -ENOENT if absent. */
int kvindex_history_del(struct kvindex *x, const uint8_t *key, size_t len, struct rev r);

/* Which keys a range covers, after etcd's range_end rules. */
enum kvindex_range_kind {
	KVINDEX_RANGE_ONE,    /* the key alone (range_end empty) */
	KVINDEX_RANGE_TO,     /* [key, end) */
	KVINDEX_RANGE_FROM,   /* every key >= key (range_end "\0") */
};
struct kvindex_range {
	const uint8_t *key;
	size_t key_len;
	const uint8_t *end;
	size_t end_len;
	enum kvindex_range_kind kind;
};

/* Maps a request's (key, range_end) to a range: etcd's mkGteRange. */
void kvindex_range_from_request(struct kvindex_range *r, const uint8_t *key, size_t key_len,
				const uint8_t *range_end, size_t range_end_len);

/* Whether key lies in the range. */
bool kvindex_range_contains(const struct kvindex_range *r, const uint8_t *key, size_t len);

/*
 * Walks the live keys of a range at a revision, in key order. With
 * `latest` (at is the current revision of the txn) it walks the latest
 * bucket; otherwise it merges the latest bucket with the history: a step
 * along the latest bucket per key, and one or two history seeks per key
 * that has history. One iterator at a time per kvindex (it uses the
 * kvindex's scratch); the buckets must not change while it runs.
 */
struct kvindex_iter {
	struct kvindex *x;
	struct kvindex_range r;
	int64_t at;
	bool latest;
	int state;
	size_t endlen;        /* bytes of the encoded end in x->endbuf */
	size_t nextlen;       /* bytes of the next-key seek in x->seekbuf */
	/* The walk at an old revision reads two streams, the latest bucket
	 * (lc, lkv) and the history (c, hkv). Each is on an entry of the
	 * range not yet used (kv holds it), due to step past the one it used,
	 * or past the end of the range. */
	int lstate, hstate;
	struct btree_kv lkv, hkv;
	struct btree_cursor c;   /* the history */
	struct btree_cursor lc;  /* the latest bucket */
	/* The latest stream's item: its key, entry; lpend: the cursor already
	 * stands on the next entry (lkv, lpend_rc), read past a group. */
	const uint8_t *lkey;
	size_t lkey_len;
	struct kvindex_entry lent;
	bool lpend;
	bool hlong_start;        /* the start's esc() is over the history's limit */
	int lpend_rc, hpend_rc;  /* hpend_rc: the history's, past its group */
	size_t lgn, lgpos, hgn, hgpos;  /* groups in x->lgrp, x->hgrp */
};

struct kvindex_hit {
	struct rev rev;       /* the key's revision visible at `at` */
	const uint8_t *key;   /* the key, when the hit is a latest entry; NULL
			       * when it comes from the history */
	size_t key_len;
	const uint8_t *kv;    /* inline KeyValue bytes, or NULL */
	size_t kv_len;
};

void kvindex_iter_begin(struct kvindex_iter *it, struct kvindex *x,
			const struct kvindex_range *r, int64_t at, bool latest);
/* The next live key: 0, -ENOENT when there is none left, or an error. */
int kvindex_iter_next(struct kvindex_iter *it, struct kvindex_hit *h);

/* The index meta record. */
#define KVINDEX_COVERS_MAX (16u + REV_MARKED_BYTES)
struct kvindex_meta {
	uint64_t format;
	int64_t revision;
	uint8_t covers[KVINDEX_COVERS_MAX];
	size_t covers_len;
};

/* Reads the meta record; -ENOENT when any part is missing. */
int kvindex_meta_read(struct kvindex *x, struct kvindex_meta *m);
int kvindex_meta_write(struct kvindex *x, const struct kvindex_meta *m);
/* Only the revision (the part that changes with every write). */
int kvindex_meta_set_revision(struct kvindex *x, int64_t revision);

/* Fills covers from the scheduled and finished compaction mains and the
 * last key of the key bucket (last_len 0: the bucket is empty). */
void kvindex_covers_make(struct kvindex_meta *m, int64_t scheduled, int64_t finished,
			 const uint8_t *last_key, size_t last_len);

/* Records "stored: <description of the malformed data>" in the thread's
 * error slot (base/log/errmsg.h; the MVCC layer reports through it too);
 * returns -EUCLEAN. */
int kvindex_corrupt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
