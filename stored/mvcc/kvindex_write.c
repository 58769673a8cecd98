/*
 * cetcd's index buckets, the half that writes (the encoding is described
 * in kvindex.h): creating and dropping the buckets, puts, tombstones and
 * history deletes, the meta keys, and the writer's side of the latest-entry
 * cache (kvindex_feed_*). Lookups and iteration are kvindex.c.
 */
#include "stored/mvcc/kvindex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire.h"
#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "stored/alloc.h"
#include "stored/btree/page.h"
#include "stored/mvcc/mvcc_int.h"
#include "stored/mvcc/schema.h"

static void inv_put(uint8_t *out, int64_t main, int64_t sub)
{
	rev_put_be64(out, ~(uint64_t)main);
	rev_put_be64(out + 8, ~(uint64_t)sub);
}

/* Encodes the history key of (key, r) into x->wbuf; *out_len its length. */
static int hist_key(struct kvindex *x, const uint8_t *key, size_t len, struct rev r,
		    size_t *out_len)
{
	if (len == 0)
		return -EINVAL;
	if (!hist_whole(key, len)) {
		int rc = reserve(&x->wbuf, &x->wcap, LONG_ENTRY_KEY);
		if (rc)
			return rc;
		long_hist_key(x->wbuf, key, len, r);
		*out_len = LONG_ENTRY_KEY;
		return 0;
	}
	int rc = reserve(&x->wbuf, &x->wcap, 2 * len + HIST_TERM + HIST_SUFFIX);
	if (rc)
		return rc;
	size_t w = esc_put(x->wbuf, key, len);
	inv_put(x->wbuf + w, r.main, r.sub);
	*out_len = w + HIST_SUFFIX;
	return 0;
}

/* Opens a bucket of the index, creating it when it is missing. */
static int create_one(struct btree_txn *t, const char *name, size_t len,
		      struct btree_bucket **out)
{
	int rc = btree_bucket_create(t, NULL, name, len, out);
	return rc == -EEXIST ? 0 : rc;
}

int kvindex_create(struct btree_txn *t, struct kvindex *x)
{
	return kvindex_open_all(t, x, create_one);
}

int kvindex_drop(struct btree_txn *t)
{
	static const char *const names[] = { SCHEMA_BUCKET_KV_LATEST, SCHEMA_BUCKET_KV_HISTORY,
					     SCHEMA_BUCKET_KV_META };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		int rc = btree_bucket_delete(t, NULL, names[i], strlen(names[i]));
		if (rc && rc != -ENOENT)
			return rc;
	}
	return 0;
}

/* Whether the cache's place for the key of hash h is the key-bucket entry
 * of revision key rk (so that rk's move or removal concerns it). */
static bool feed_holds(struct kvindex_feed *f, uint64_t h, const uint8_t *rk)
{
	struct lcache_loc old;
	const uint8_t *k;
	uint32_t kl;
	lcache_flush(f->lc);
	return lcache_get(f->lc, f->generation, h, &old) &&
	       btree_db_entry_key(f->db, old.pgid, old.index, &k, &kl) == 0 && kl == REV_BYTES &&
	       memcmp(k, rk, REV_BYTES) == 0;
}

/*
 * A leaf of the key bucket was written. Entries come in key (revision)
 * order, so among a commit's own writes of one key the newest is placed
 * last; a commit's tombstone drops the key. An entry that only moved is an
 * older revision: its key's place follows it only if that place was this
 * very entry (the entry is its key's latest revision).
 */
static void feed_placed(void *arg, uint64_t pgid, uint64_t txid, const struct btree_placed *e,
			size_t n)
{
	struct kvindex_feed *f = arg;
	for (size_t i = 0; i < n; i++) {
		const struct btree_placed *p = &e[i];
		const uint8_t *key;
		size_t len;
		bool live = p->ksize == REV_BYTES;
		if ((!live && p->ksize != REV_MARKED_BYTES) || (!live && !p->fresh) ||
		    !kvindex_user_key(p->val, p->vsize, &key, &len))
			continue;
		uint64_t h = lcache_hash(key, len);
		struct lcache_loc loc = { .pgid = pgid, .txid = txid, .index = p->index,
					  .key_off = p->key_off };
		if (!live)
			lcache_del(f->lc, h);
		else if (p->fresh)
			lcache_put_queued(f->lc, h, &loc);
		else if (feed_holds(f, h, p->key))
			lcache_put(f->lc, h, &loc);
	}
}

static void feed_flush(void *arg)
{
	struct kvindex_feed *f = arg;
	lcache_flush(f->lc);
}

/* A revision left the key bucket (compaction): its key's place goes if it
 * was there. */
static void feed_gone(void *arg, const uint8_t *rk, uint32_t ksize, const uint8_t *val,
		      uint32_t vsize)
{
	struct kvindex_feed *f = arg;
	const uint8_t *key;
	size_t len;
	if (ksize != REV_BYTES || !kvindex_user_key(val, vsize, &key, &len))
		return;
	uint64_t h = lcache_hash(key, len);
	if (feed_holds(f, h, rk))
		lcache_del(f->lc, h);
}

static void feed_reset(void *arg)
{
	struct kvindex_feed *f = arg;
	lcache_clear(f->lc, f->generation);
	f->warm_len = 0;
	f->warm_done = false;
}

int kvindex_feed_cache(struct btree_db *db, struct kvindex_feed *f, struct lcache *lc,
		       uint64_t generation)
{
	const struct btree_observer o = {
		.placed = feed_placed,
		.gone = feed_gone,
		.reset = feed_reset,
		.flush = feed_flush,
		.arg = f,
	};
	f->db = db;
	f->lc = lc;
	f->generation = generation;
	f->warm_len = 0;
	f->warm_done = false;
	lcache_clear(lc, generation);
	return btree_db_observe(db, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY), &o);
}

void kvindex_feed_close(struct kvindex_feed *f)
{
	stored_free(f->warm_key);
	f->warm_key = NULL;
	f->warm_len = f->warm_cap = 0;
}

/* Places the key of the latest-bucket entry kv at its revision's entry in
 * the key bucket of txn t (none when the entry does not parse or the
 * revision is not there: such a key stays out of the cache). */
static void warm_one(struct kvindex_feed *f, struct btree_txn *t, struct btree_bucket *kb,
		     const struct btree_kv *kv)
{
	struct kvindex_entry e;
	struct btree_cursor c;
	struct btree_kv at;
	uint8_t rk[REV_BYTES];
	if (kvindex_latest_parse(kv->key, kv->key_len, kv->val, kv->val_len, false, &e))
		return;
	rev_encode(e.mod, rk);
	btree_cursor_init(&c, kb);
	if (btree_cursor_seek(&c, rk, sizeof(rk), &at) != 0 || at.key_len != REV_BYTES ||
	    memcmp(at.key, rk, REV_BYTES) != 0)
		return;
	const struct btree_cursor_frame *fr = &c.stack[c.depth - 1];
	if (!fr->page)
		return;
	struct lcache_loc loc = { .pgid = fr->pgid, .txid = btree_txn_id(t), .index = fr->index,
				  .key_off = (uint32_t)(at.key - fr->page) };
	lcache_put_queued(f->lc, lcache_hash(kv->key, kv->key_len), &loc);
}

int kvindex_feed_warm(struct kvindex_feed *f, size_t max, int64_t until_ns, bool *done)
{
	struct btree_txn *t;
	struct btree_bucket *latest, *kb;
	struct btree_cursor c;
	struct btree_kv kv;
	int rc;

	*done = true;
	if (!f->lc || f->warm_done)
		return 0;
	rc = btree_db_read_begin(f->db, NULL, &t);
	if (rc)
		return rc;
	if (btree_bucket_open(t, NULL, SCHEMA_BUCKET_KV_LATEST, SCHEMA_LEN(SCHEMA_BUCKET_KV_LATEST),
			      &latest) != 0 ||
	    btree_bucket_open(t, NULL, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY), &kb) != 0) {
		f->warm_done = true;  /* no index or no key bucket: nothing to tell of */
		goto out_end;
	}
	btree_cursor_init(&c, latest);
	rc = f->warm_len ? btree_cursor_seek(&c, f->warm_key, f->warm_len, &kv)
			 : btree_cursor_first(&c, &kv);
	for (size_t n = 0; rc == 0 && n < max; n++) {
		if (until_ns && n && n % KVINDEX_WARM_CLOCK_EVERY == 0 && clock_now_ns() >= until_ns)
			break;
		if (!(kv.flags & BTREE_KV_BUCKET))
			warm_one(f, t, kb, &kv);
		rc = btree_cursor_next(&c, &kv);
	}
	lcache_flush(f->lc);
	if (rc == -ENOENT) {
		f->warm_done = true;
		rc = 0;
	} else if (rc == 0) {
		rc = reserve(&f->warm_key, &f->warm_cap, kv.key_len);
		if (rc == 0) {
			memcpy(f->warm_key, kv.key, kv.key_len);
			f->warm_len = kv.key_len;
			*done = false;
		}
	}
out_end:
	btree_txn_end(t);
	return rc;
}

/* Adds the history entry (key, r) with mark HIST_PUT or HIST_TOMBSTONE. */
static int hist_add(struct kvindex *x, const uint8_t *key, size_t len, struct rev r,
		    uint8_t mark)
{
	size_t hlen;
	int rc = hist_key(x, key, len, r, &hlen);
	if (rc)
		return rc;
	if (hlen == LONG_ENTRY_KEY && (x->wbuf[LONG_PREFIX] & 0x80))
		x->long_keys = true;
	return btree_put(x->history, x->wbuf, hlen, &mark, 1);
}

/* Moves prev, a live key's latest revision that r supersedes, into the
 * history (the latest entry itself is the caller's to replace or drop). */
static int supersede(struct kvindex *x, const uint8_t *key, size_t len,
		     const struct kvindex_entry *prev, struct rev r)
{
	if (rev_cmp(prev->mod, r) >= 0)
		return corrupt("a %zu-byte key gets revision %lld_%lld while its latest entry is "
			       "%lld_%lld", len, (long long)r.main, (long long)r.sub,
			       (long long)prev->mod.main, (long long)prev->mod.sub);
	return hist_add(x, key, len, prev->mod, HIST_PUT);
}

_Static_assert(LATEST_REF_VARINT_MAX <= LATEST_HDR + KVINDEX_INLINE_MAX,
	       "a reference fits the buffer of an inline entry");

/* Removes the latest entry of a long key (at prev's revision) from the
 * latest bucket. */
static int long_latest_del(struct kvindex *x, const uint8_t *key, size_t len,
			   const struct kvindex_entry *prev)
{
	int rc = reserve(&x->wbuf, &x->wcap, LONG_ENTRY_KEY);
	if (rc)
		return rc;
	long_latest_key(x->wbuf, key, len, prev->mod);
	rc = btree_del(x->latest, x->wbuf, LONG_ENTRY_KEY);
	if (rc == -ENOENT)
		return corrupt("latest entry of a %zu-byte key at %lld_%lld is missing", len,
			       (long long)prev->mod.main, (long long)prev->mod.sub);
	return rc;
}

int kvindex_put(struct kvindex *x, const struct mvcc_kv *kv, struct rev r,
		const uint8_t *kv_bytes, size_t kv_len, const struct kvindex_entry *prev)
{
	uint8_t val[LATEST_HDR + KVINDEX_INLINE_MAX];
	size_t vlen;
	int rc;
	if (kv->key_len == 0)
		return -EINVAL;
	if (prev) {
		rc = supersede(x, kv->key, kv->key_len, prev, r);
		if (rc)
			return rc;
	}
	if (kv_len <= KVINDEX_INLINE_MAX) {
		val[0] = LATEST_INLINE;
		rev_put_be64(val + 1, (uint64_t)r.main);
		rev_put_be64(val + 9, (uint64_t)r.sub);
		memcpy(val + LATEST_HDR, kv_bytes, kv_len);
		vlen = LATEST_HDR + kv_len;
	} else {
		const uint64_t f[5] = { (uint64_t)r.main, (uint64_t)r.sub, (uint64_t)kv->create_rev,
					(uint64_t)kv->version, (uint64_t)kv->lease };
		val[0] = LATEST_REF_VARINT;
		vlen = 1;
		for (int i = 0; i < 5; i++)
			vlen += proto_varint_put(val + vlen, f[i]);
	}
	if (kv->key_len <= LONG_PREFIX)
		return btree_put(x->latest, kv->key, kv->key_len, val, vlen);
	/* a long key: filed under its prefix, tag and revision */
	x->long_keys = true;
	if (prev) {
		rc = long_latest_del(x, kv->key, kv->key_len, prev);
		if (rc)
			return rc;
	}
	rc = reserve(&x->wbuf, &x->wcap, LONG_ENTRY_KEY);
	if (rc)
		return rc;
	long_latest_key(x->wbuf, kv->key, kv->key_len, r);
	return btree_put(x->latest, x->wbuf, LONG_ENTRY_KEY, val, vlen);
}

int kvindex_tombstone(struct kvindex *x, const uint8_t *key, size_t len, struct rev r,
		      const struct kvindex_entry *prev)
{
	int rc;
	if (len == 0)
		return -EINVAL;
	if (prev) {
		rc = supersede(x, key, len, prev, r);
		if (!rc)
			rc = len <= LONG_PREFIX ? btree_del(x->latest, key, len)
						: long_latest_del(x, key, len, prev);
		if (rc)
			return rc;
	}
	return hist_add(x, key, len, r, HIST_TOMBSTONE);
}

int kvindex_history_del(struct kvindex *x, const uint8_t *key, size_t len, struct rev r)
{
	size_t hlen;
	int rc = hist_key(x, key, len, r, &hlen);
	if (rc)
		return rc == -EINVAL ? -ENOENT : rc;
	return btree_del(x->history, x->wbuf, hlen);
}

static int meta_put64(struct kvindex *x, const char *name, uint64_t v)
{
	uint8_t b[8];
	rev_put_be64(b, v);
	return btree_put(x->meta, name, strlen(name), b, sizeof(b));
}

int kvindex_meta_write(struct kvindex *x, const struct kvindex_meta *m)
{
	uint64_t format = m->format;
	if (x->long_keys && format < KVINDEX_FORMAT)
		format = KVINDEX_FORMAT;  /* builds before it must not read long keys' entries */
	int rc = meta_put64(x, SCHEMA_KV_META_FORMAT, format);
	if (!rc)
		rc = meta_put64(x, SCHEMA_KV_META_REVISION, (uint64_t)m->revision);
	if (!rc)
		rc = btree_put(x->meta, SCHEMA_KV_META_COVERS, SCHEMA_LEN(SCHEMA_KV_META_COVERS),
			       m->covers, m->covers_len);
	return rc;
}

int kvindex_meta_set_revision(struct kvindex *x, int64_t revision)
{
	return meta_put64(x, SCHEMA_KV_META_REVISION, (uint64_t)revision);
}
