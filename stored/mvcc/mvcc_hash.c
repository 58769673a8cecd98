/*
 * Maintenance.HashKV and Maintenance.Hash as etcd 3.4 computes them
 * (mvcc/kvstore.go HashByRev, mvcc/backend Hash), so that etcd and cetcd
 * members holding the same data answer the same hash. Both run in steps
 * over one read txn, so that a caller with an event loop can spread a big
 * db over many turns.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "base/crc32c/crc32c.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/schema.h"

/* What a step's budget is charged, beside the bytes hashed: every entry
 * visited, and every index lookup (a few page reads each). */
#define HASH_ENTRY_COST 64u
#define HASH_LOOKUP_COST 1024u

/* cetcd's own buckets (the index, schema.h) are named so. */
#define HASH_OWN_PREFIX "cetcd_"

enum { HASHKV_PREFIX = 0, HASHKV_REST, HASHKV_DONE };

/* The walk's next entry: the first one when *started is false. */
static int hash_cursor_next(struct btree_cursor *c, bool *started, struct btree_kv *e)
{
	bool first = !*started;

	*started = true;
	return first ? btree_cursor_first(c, e) : btree_cursor_next(c, e);
}

/* A whole key and value into the sum. */
static uint32_t hash_entry(uint32_t crc, const struct btree_kv *e)
{
	return crc32c_update(crc32c_update(crc, e->key, e->key_len), e->val, e->val_len);
}

int mvcc_hashkv_begin(struct mvcc_hashkv *h, struct mvcc_view *v, int64_t rev)
{
	memset(h, 0, sizeof(*h));
	h->v = v;
	h->rev = v->rev;
	h->compact_rev = v->compact_rev;
	if (rev > 0 && rev <= v->compact_rev)
		return MVCC_ERR_COMPACTED;
	if (rev > 0 && rev > v->rev)
		return MVCC_ERR_FUTURE_REV;
	h->at = rev == 0 ? v->rev : rev;
	h->crc_all = crc32c_update(0, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY));
	h->crc_kept = h->crc_all;
	btree_cursor_init(&h->c, v->key);
	h->state = HASHKV_PREFIX;
	return 0;
}

/*
 * Whether etcd's Keep(at) holds rev, a revision of key at or below the
 * compact revision: whether it is the key's newest revision at `at` and
 * that is a put. etcd finds it in its in-memory index; the history of
 * cetcd's index answers the same (compaction never removes a key's newest
 * revision at or above the compact revision).
 */
static int hashkv_kept(struct mvcc_hashkv *h, const struct btree_kv *e, struct rev rev,
		       bool tombstone, bool *kept)
{
	struct mvcc_kv kv;
	struct rev newest;
	bool newest_tomb;

	*kept = false;
	if (tombstone)
		return 0;
	if (mvcc_kv_decode(e->val, e->val_len, &kv))
		return kvindex_corrupt("key bucket entry %lld_%lld holds no KeyValue",
				       (long long)rev.main, (long long)rev.sub);
	int rc = kvindex_history_find(&h->v->idx, kv.key, kv.key_len, h->at, &newest,
				      &newest_tomb);
	if (rc == -ENOENT)
		return kvindex_corrupt("key bucket entry %lld_%lld is missing from the index",
				       (long long)rev.main, (long long)rev.sub);
	if (rc)
		return rc;
	*kept = !newest_tomb && rev_cmp(newest, rev) == 0;
	return 0;
}

/* Whether any key is live at h->at: whether etcd's Keep(at) is not
 * empty. A walk that stops at the first live key. */
static int hashkv_any_live(struct mvcc_hashkv *h, bool *live)
{
	static const uint8_t from[1] = { 0 };
	struct kvindex_range r = { .key = from, .key_len = 1, .kind = KVINDEX_RANGE_FROM };
	struct kvindex_iter it;
	struct kvindex_hit hit;

	kvindex_iter_begin(&it, &h->v->idx, &r, h->at, h->at == h->v->rev);
	int rc = kvindex_iter_next(&it, &hit);
	*live = rc == 0;
	return rc == -ENOENT ? 0 : rc;
}

/*
 * The entries at or below the compact revision come first (the bucket is
 * in revision order). etcd hashes those its Keep(at) holds, unless Keep
 * is empty: then all of them. Both sums run along; the choice is made
 * once the prefix is over, and needs the walk of hashkv_any_live only when
 * the prefix had entries and Keep held none of them.
 */
static int hashkv_end_prefix(struct mvcc_hashkv *h)
{
	bool live = true;

	if (h->kept == 0 && h->skipped > 0) {
		int rc = hashkv_any_live(h, &live);
		if (rc)
			return rc;
	}
	h->crc = live ? h->crc_kept : h->crc_all;
	h->state = HASHKV_REST;
	return 0;
}

int mvcc_hashkv_step(struct mvcc_hashkv *h, size_t budget, bool *done)
{
	struct btree_kv e;
	size_t spent = 0;

	*done = h->state == HASHKV_DONE;
	while (!*done && spent < budget) {
		int rc = hash_cursor_next(&h->c, &h->started, &e);
		if (rc == -ENOENT) {
			if (h->state == HASHKV_PREFIX && (rc = hashkv_end_prefix(h)))
				return rc;
			h->hash = h->crc;
			h->state = HASHKV_DONE;
			*done = true;
			break;
		}
		if (rc)
			return rc;
		struct rev r;
		bool tomb;
		if (rev_decode(e.key, e.key_len, &r, &tomb))
			return kvindex_corrupt("key bucket key of %zu bytes is not a revision",
					       e.key_len);
		spent += HASH_ENTRY_COST;
		if (h->state == HASHKV_PREFIX && r.main > h->compact_rev &&
		    (rc = hashkv_end_prefix(h)))
			return rc;
		if (r.main > h->at)
			continue; /* etcd reads on to the end and skips these */
		if (h->state == HASHKV_PREFIX) {
			bool kept;
			spent += HASH_LOOKUP_COST;
			if ((rc = hashkv_kept(h, &e, r, tomb, &kept)))
				return rc;
			h->crc_all = hash_entry(h->crc_all, &e);
			if (kept) {
				h->crc_kept = hash_entry(h->crc_kept, &e);
				h->kept++;
			} else {
				h->skipped++;
			}
		} else {
			h->crc = hash_entry(h->crc, &e);
		}
		spent += e.key_len + e.val_len;
	}
	return 0;
}

int mvcc_hashkv(struct mvcc_view *v, int64_t rev, struct mvcc_hashkv *h)
{
	bool done = false;
	int rc = mvcc_hashkv_begin(h, v, rev);

	while (!rc && !done)
		rc = mvcc_hashkv_step(h, SIZE_MAX, &done);
	return rc;
}

/* ---- the whole db ---- */

static bool hash_own_bucket(const uint8_t *name, size_t len)
{
	return len >= SCHEMA_LEN(HASH_OWN_PREFIX) &&
	       memcmp(name, HASH_OWN_PREFIX, SCHEMA_LEN(HASH_OWN_PREFIX)) == 0;
}

/* etcd's DefaultIgnores: the consistent index, which differs between
 * members that hold the same data. */
static bool hash_ignored(const struct mvcc_hashdb *h, const struct btree_kv *e)
{
	return h->in_meta && e->key_len == SCHEMA_LEN(SCHEMA_META_CONSISTENT_INDEX) &&
	       memcmp(e->key, SCHEMA_META_CONSISTENT_INDEX, e->key_len) == 0;
}

void mvcc_hashdb_begin(struct mvcc_hashdb *h, struct mvcc_view *v)
{
	memset(h, 0, sizeof(*h));
	h->t = v->txn;
	h->rev = v->rev;
	btree_cursor_init(&h->top, btree_txn_root(v->txn));
}

/* Moves to the next top-level bucket that is hashed, hashing its name;
 * -ENOENT after the last one. */
static int hashdb_next_bucket(struct mvcc_hashdb *h, size_t *spent)
{
	struct btree_kv b;
	struct btree_bucket *bucket;
	int rc;

	for (;;) {
		rc = hash_cursor_next(&h->top, &h->top_started, &b);
		if (rc)
			return rc;
		*spent += HASH_LOOKUP_COST;
		if (!(b.flags & BTREE_KV_BUCKET))
			return kvindex_corrupt("the db's top level holds a value, not a bucket, "
					       "at a key of %zu bytes", b.key_len);
		if (!hash_own_bucket(b.key, b.key_len))
			break;
	}
	rc = btree_bucket_open(h->t, NULL, b.key, b.key_len, &bucket);
	if (rc)
		return rc;
	h->crc = crc32c_update(h->crc, b.key, b.key_len);
	h->in_meta = b.key_len == SCHEMA_LEN(SCHEMA_BUCKET_META) &&
		     memcmp(b.key, SCHEMA_BUCKET_META, b.key_len) == 0;
	btree_cursor_init(&h->c, bucket);
	h->in_bucket = true;
	h->bucket_started = false;
	return 0;
}

int mvcc_hashdb_step(struct mvcc_hashdb *h, size_t budget, bool *done)
{
	struct btree_kv e;
	size_t spent = 0;
	int rc;

	*done = h->done;
	while (!*done && spent < budget) {
		if (!h->in_bucket) {
			rc = hashdb_next_bucket(h, &spent);
			if (rc == -ENOENT) {
				h->hash = h->crc;
				*done = h->done = true;
				break;
			}
			if (rc)
				return rc;
		}
		rc = hash_cursor_next(&h->c, &h->bucket_started, &e);
		if (rc == -ENOENT) {
			h->in_bucket = false;
			continue;
		}
		if (rc)
			return rc;
		spent += HASH_ENTRY_COST + e.key_len + e.val_len;
		if (hash_ignored(h, &e))
			continue;
		/* a nested bucket has no value: bbolt's ForEach gives it nil */
		if (e.flags & BTREE_KV_BUCKET)
			e.val_len = 0;
		h->crc = hash_entry(h->crc, &e);
	}
	return 0;
}

int mvcc_hashdb(struct mvcc_view *v, struct mvcc_hashdb *h)
{
	bool done = false;
	int rc = 0;

	mvcc_hashdb_begin(h, v);
	while (!rc && !done)
		rc = mvcc_hashdb_step(h, SIZE_MAX, &done);
	return rc;
}
