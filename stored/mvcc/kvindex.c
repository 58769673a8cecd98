/*
 * cetcd's index buckets (the encoding is described in kvindex.h), the half
 * that reads: opening the buckets, lookups of the latest entries and the
 * history, iteration, the meta keys' reads. Changes are kvindex_write.c.
 */
#include "stored/mvcc/kvindex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"
#include "base/log/errmsg.h"
#include "stored/alloc.h"
#include "stored/btree/page.h"
#include "stored/mvcc/mvcc_int.h"
#include "stored/mvcc/schema.h"

int kvindex_corrupt(const char *fmt, ...)
{
	char what[ERRMSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return errmsg_set(-EUCLEAN, "stored: %s", what);
}

_Static_assert(LONG_ENTRY_KEY == PAGE_MAX_KEY, "a long key's entry key is a whole B+tree key");
_Static_assert(LONG_PREFIX + HIST_TERM + HIST_SUFFIX == PAGE_MAX_KEY,
	       "a whole key's history key fits a B+tree key");

static void put_tag(uint8_t *out, const uint8_t *key, size_t len)
{
	uint16_t t = long_tag(key, len);
	out[0] = (uint8_t)(t >> 8);
	out[1] = (uint8_t)t;
}

void long_latest_key(uint8_t *out, const uint8_t *key, size_t len, struct rev r)
{
	memcpy(out, key, LONG_PREFIX);
	put_tag(out + LONG_PREFIX, key, len);
	rev_put_be64(out + LONG_PREFIX + LONG_TAG, (uint64_t)r.main);
	rev_put_be64(out + LONG_PREFIX + LONG_TAG + 8, (uint64_t)r.sub);
}

void long_hist_key(uint8_t *out, const uint8_t *key, size_t len, struct rev r)
{
	size_t w = 0;
	for (size_t i = 0; w < LONG_PREFIX; i++) {
		out[w++] = key[i];
		if (key[i] == 0 && w < LONG_PREFIX)
			out[w++] = 0xff;
	}
	put_tag(out + LONG_PREFIX, key, len);
	rev_put_be64(out + LONG_PREFIX + LONG_TAG, ~(uint64_t)r.main);
	rev_put_be64(out + LONG_PREFIX + LONG_TAG + 8, ~(uint64_t)r.sub);
}

bool kvindex_user_key(const uint8_t *val, size_t vlen, const uint8_t **key, size_t *len)
{
	struct proto_reader r = proto_reader_init(val, vlen);
	struct proto_field f;
	if (proto_read_field(&r, &f) == 0 && f.num == 1 && f.wire == PROTO_WIRE_BYTES &&
	    f.len > 0) {
		*key = f.data;
		*len = f.len;
		return true;
	}
	struct mvcc_kv kv;
	if (mvcc_kv_decode(val, vlen, &kv) || kv.key_len == 0)
		return false;
	*key = kv.key;
	*len = kv.key_len;
	return true;
}

static int open_one(struct btree_txn *t, const char *name, size_t len,
		    struct btree_bucket **out)
{
	return btree_bucket_open(t, NULL, name, len, out);
}

void kvindex_init(struct kvindex *x)
{
	memset(x, 0, sizeof(*x));
}

int kvindex_open_all(struct btree_txn *t, struct kvindex *x, kvindex_bucket_fn open_one)
{
	int rc;
	x->latest = x->history = x->meta = x->keyb = NULL;
	x->npre = x->pre_next = 0;
	rc = open_one(t, SCHEMA_BUCKET_KV_LATEST, SCHEMA_LEN(SCHEMA_BUCKET_KV_LATEST), &x->latest);
	if (!rc)
		rc = open_one(t, SCHEMA_BUCKET_KV_HISTORY, SCHEMA_LEN(SCHEMA_BUCKET_KV_HISTORY),
			      &x->history);
	if (!rc)
		rc = open_one(t, SCHEMA_BUCKET_KV_META, SCHEMA_LEN(SCHEMA_BUCKET_KV_META), &x->meta);
	if (!rc && btree_bucket_open(t, NULL, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY),
				     &x->keyb) != 0)
		x->keyb = NULL;  /* only the cache's places need it */
	return rc;
}

int kvindex_open(struct btree_txn *t, struct kvindex *x)
{
	return kvindex_open_all(t, x, open_one);
}

void kvindex_close(struct kvindex *x)
{
	if (!x)
		return;
	stored_free(x->wbuf);
	stored_free(x->seekbuf);
	stored_free(x->endbuf);
	stored_free(x->lgrp);
	stored_free(x->hgrp);
	x->wbuf = x->seekbuf = x->endbuf = NULL;
	x->lgrp = x->hgrp = NULL;
	x->wcap = x->seekcap = x->endcap = x->lgcap = x->hgcap = 0;
	x->npre = x->pre_next = 0;
}

int kvindex_latest_parse(const uint8_t *key, size_t klen, const uint8_t *v, size_t len,
			 bool fields, struct kvindex_entry *e)
{
	if (len > 0 && v[0] == LATEST_REF_VARINT) {
		uint64_t f[5];
		struct proto_reader r = proto_reader_init(v + 1, len - 1);
		for (int i = 0; i < 5; i++)
			if (proto_read_varint(&r, &f[i]) < 0)
				return corrupt("latest entry of a %zu-byte key ends inside field %d",
					       klen, i);
		if (!proto_reader_done(&r))
			return corrupt("latest entry of a %zu-byte key has %zu bytes past its fields",
				       klen, proto_reader_left(&r));
		e->mod = (struct rev){ (int64_t)f[0], (int64_t)f[1] };
		e->create_rev = (int64_t)f[2];
		e->version = (int64_t)f[3];
		e->lease = (int64_t)f[4];
		e->kv = NULL;
		e->kv_len = 0;
		return 0;
	}
	if (len < LATEST_HDR)
		return corrupt("latest entry of a %zu-byte key is %zu bytes long", klen, len);
	e->mod.main = (int64_t)rev_get_be64(v + 1);
	e->mod.sub = (int64_t)rev_get_be64(v + 9);
	if (v[0] == LATEST_REF && len == LATEST_REF_LEN) {
		e->create_rev = (int64_t)rev_get_be64(v + 17);
		e->version = (int64_t)rev_get_be64(v + 25);
		e->lease = (int64_t)rev_get_be64(v + 33);
		e->kv = NULL;
		e->kv_len = 0;
		return 0;
	}
	if (v[0] != LATEST_INLINE)
		return corrupt("latest entry of a %zu-byte key has kind 0x%02x, length %zu", klen,
			       v[0], len);
	struct mvcc_kv kv;
	e->kv = v + LATEST_HDR;
	e->kv_len = len - LATEST_HDR;
	if (!fields)
		return 0;
	if (mvcc_kv_decode(e->kv, e->kv_len, &kv) ||
	    mvcc_bytes_cmp(kv.key, kv.key_len, key, klen) != 0)
		return corrupt("latest entry of a %zu-byte key at revision %lld holds a "
			       "malformed KeyValue", klen, (long long)e->mod.main);
	e->create_rev = kv.create_rev;
	e->version = kv.version;
	e->lease = kv.lease;
	return 0;
}

/* The cache's place for the key of hash h, when the txn of `kb` may use it
 * (placed at or before the txn's txid). */
static bool cache_place(const struct lcache *lc, uint64_t generation, struct btree_bucket *kb,
			uint64_t h, struct lcache_loc *loc)
{
	return lcache_get(lc, generation, h, loc) &&
	       loc->txid <= btree_txn_id(btree_bucket_txn(kb));
}

/* The KeyValue at a place the cache gave: 0, or -EAGAIN when the place
 * does not hold a revision's entry. */
static int cache_read(struct btree_bucket *kb, const struct lcache_loc *loc, const uint8_t **v,
		      size_t *vlen)
{
	uint32_t vs;
	if (btree_entry_at(kb, loc->pgid, loc->index, loc->key_off, NULL, REV_BYTES, v, &vs))
		return -EAGAIN;
	*vlen = vs;
	return 0;
}

/* The latest entry of key from the KeyValue v (vlen bytes) read at a place
 * the cache gave, whose revision precedes it in the page; -EAGAIN when v
 * is not a live revision of key. */
static int cache_entry(const uint8_t *key, size_t len, const uint8_t *v, size_t vlen,
		       struct kvindex_entry *e)
{
	struct mvcc_kv kv;
	struct rev r;
	bool tomb;
	if (rev_decode(v - REV_BYTES, REV_BYTES, &r, &tomb) || tomb ||
	    mvcc_kv_decode(v, vlen, &kv) || kv.mod_rev != r.main ||
	    mvcc_bytes_cmp(kv.key, kv.key_len, key, len) != 0)
		return -EAGAIN;
	*e = (struct kvindex_entry){ .mod = r, .create_rev = kv.create_rev, .version = kv.version,
				     .lease = kv.lease, .kv = v, .kv_len = vlen };
	return 0;
}

int kvindex_cache_get(const struct lcache *lc, uint64_t generation,
		      struct btree_bucket *key_bucket, const uint8_t *key, size_t len,
		      struct kvindex_entry *out)
{
	struct lcache_loc loc;
	const uint8_t *v;
	size_t vlen;
	if (!cache_place(lc, generation, key_bucket, lcache_hash(key, len), &loc) ||
	    cache_read(key_bucket, &loc, &v, &vlen))
		return -EAGAIN;
	return cache_entry(key, len, v, vlen, out);
}

void kvindex_use_cache(struct kvindex *x, const struct lcache *lc, uint64_t generation)
{
	x->lc = lc;
	x->lc_generation = generation;
}

/* ---- the writer's side (see kvindex_feed_cache) ---- */

int kvindex_latest_prefetch(struct kvindex *x, size_t n, const uint8_t *const *keys,
			    const size_t *lens)
{
	const uint8_t *vals[BTREE_GET_MANY_MAX];
	size_t vlens[BTREE_GET_MANY_MAX];
	int rcs[BTREE_GET_MANY_MAX];
	bool hit[BTREE_GET_MANY_MAX];
	x->npre = x->pre_next = 0;
	if (n > BTREE_GET_MANY_MAX)
		return -EINVAL;
	if (n == 0 || btree_txn_writable(btree_bucket_txn(x->latest)))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (lens[i] > LONG_PREFIX)
			return 0;  /* a long key is looked up on its own */
	/* The cache first, in stages so that the misses of different keys
	 * overlap: every key's set, then every place found, then the
	 * entries; the tree for the keys it did not give. */
	const uint8_t *miss_keys[BTREE_GET_MANY_MAX];
	size_t miss_lens[BTREE_GET_MANY_MAX], miss_at[BTREE_GET_MANY_MAX], nmiss = 0;
	struct lcache_loc locs[BTREE_GET_MANY_MAX];
	uint64_t hs[BTREE_GET_MANY_MAX];
	bool placed[BTREE_GET_MANY_MAX];
	const struct lcache *lc = x->keyb ? x->lc : NULL;
	for (size_t i = 0; lc && i < n; i++) {
		hs[i] = lcache_hash(keys[i], lens[i]);
		lcache_prefetch(lc, hs[i]);
	}
	for (size_t i = 0; i < n; i++) {
		placed[i] = lc && cache_place(lc, x->lc_generation, x->keyb, hs[i], &locs[i]);
		if (placed[i])
			btree_entry_prefetch(x->keyb, locs[i].pgid, locs[i].index, locs[i].key_off);
	}
	struct kvindex_entry ents[BTREE_GET_MANY_MAX];
	for (size_t i = 0; i < n; i++) {
		hit[i] = placed[i] && cache_read(x->keyb, &locs[i], &vals[i], &vlens[i]) == 0 &&
			 cache_entry(keys[i], lens[i], vals[i], vlens[i], &ents[i]) == 0;
		if (hit[i]) {
			rcs[i] = 0;
			continue;
		}
		miss_keys[nmiss] = keys[i];
		miss_lens[nmiss] = lens[i];
		miss_at[nmiss++] = i;
	}
	if (nmiss) {
		const uint8_t *mvals[BTREE_GET_MANY_MAX];
		size_t mvlens[BTREE_GET_MANY_MAX];
		int mrcs[BTREE_GET_MANY_MAX];
		int rc = btree_get_many(x->latest, nmiss, miss_keys, miss_lens, mvals, mvlens, mrcs);
		if (rc)
			return rc;
		for (size_t j = 0; j < nmiss; j++) {
			size_t i = miss_at[j];
			rcs[i] = mrcs[j];
			vals[i] = mvals[j];
			vlens[i] = mvlens[j];
		}
	}
	for (size_t i = 0; i < n; i++)
		x->pre[i] = (struct kvindex_pre){
			.key = keys[i], .len = lens[i], .rc = rcs[i], .cached = hit[i],
			.val = vals[i], .vlen = vlens[i],
			.entry = hit[i] ? ents[i] : (struct kvindex_entry){ .kv = NULL } };
	x->npre = n;
	return 0;
}

/* The prefetched answer for key, or -EAGAIN when there is none. Callers
 * usually ask in the order of the prefetch: that slot is tried first. */
static const struct kvindex_pre *prefetched(struct kvindex *x, const uint8_t *key, size_t len)
{
	for (size_t k = 0; k < x->npre; k++) {
		size_t i = (x->pre_next + k) % x->npre;
		const struct kvindex_pre *p = &x->pre[i];
		if (p->len != len || memcmp(p->key, key, len) != 0)
			continue;
		x->pre_next = (i + 1) % x->npre;
		return p;
	}
	return NULL;
}

/* The user key of the KeyValue at revision r (a tombstone's when tomb) in
 * the key bucket: how an entry of a long key is told from the others of
 * its group. */
static int key_at(struct kvindex *x, struct rev r, bool tomb, const uint8_t **key, size_t *len)
{
	uint8_t rk[REV_MARKED_BYTES];
	const uint8_t *v;
	size_t vlen, kl = tomb ? REV_MARKED_BYTES : REV_BYTES;
	if (tomb)
		rev_encode_tombstone(r, rk);
	else
		rev_encode(r, rk);
	int rc = x->keyb ? btree_get(x->keyb, rk, kl, &v, &vlen) : -ENOENT;
	if (rc == -ENOENT || rc == -EISDIR)
		return corrupt("an entry of a long key names revision %lld_%lld, which the key "
			       "bucket lacks", (long long)r.main, (long long)r.sub);
	if (rc)
		return rc;
	if (!kvindex_user_key(v, vlen, key, len))
		return corrupt("key bucket value at %lld_%lld is not a KeyValue", (long long)r.main,
			       (long long)r.sub);
	return 0;
}

/* The key a latest entry is of: from its inline KeyValue, or the key
 * bucket's. */
static int entry_key(struct kvindex *x, const struct kvindex_entry *e, const uint8_t **key,
		     size_t *len)
{
	if (!e->kv)
		return key_at(x, e->mod, false, key, len);
	if (!kvindex_user_key(e->kv, e->kv_len, key, len))
		return corrupt("latest entry at %lld holds a malformed KeyValue",
			       (long long)e->mod.main);
	return 0;
}

/* Whether a latest-bucket key is a long key's entry (a whole key is at
 * most LONG_PREFIX bytes, a long one's entry LONG_ENTRY_KEY). */
static int latest_long(const struct btree_kv *kv, bool *is_long)
{
	if (kv->flags & BTREE_KV_BUCKET)
		return corrupt("latest bucket holds a nested bucket");
	*is_long = kv->key_len > LONG_PREFIX;
	if (*is_long && kv->key_len != LONG_ENTRY_KEY)
		return corrupt("latest bucket key of %zu bytes", kv->key_len);
	return 0;
}

/* Seeks c to the first entry of a long key's prefix and tag: in the
 * history (hist) from revision `at` down, else in the latest bucket. The
 * prefix and tag stay in seekbuf. */
static int long_seek(struct kvindex *x, bool hist, const uint8_t *key, size_t len, int64_t at,
		     struct btree_cursor *c, struct btree_kv *kv)
{
	int rc = reserve(&x->seekbuf, &x->seekcap, LONG_ENTRY_KEY);
	if (rc)
		return rc;
	if (hist)
		long_hist_key(x->seekbuf, key, len, (struct rev){ at, -1 });
	else
		long_latest_key(x->seekbuf, key, len, (struct rev){ 0, 0 });
	btree_cursor_init(c, hist ? x->history : x->latest);
	return btree_cursor_seek(c, x->seekbuf, LONG_ENTRY_KEY, kv);
}

/* A long key's latest entry: the first one of its prefix and tag whose
 * KeyValue names key. */
static int long_latest_get(struct kvindex *x, const uint8_t *key, size_t len, bool fields,
			   struct kvindex_entry *out)
{
	struct btree_cursor c;
	struct btree_kv kv;
	const size_t pl = LONG_PREFIX + LONG_TAG;
	int rc;
	for (rc = long_seek(x, false, key, len, 0, &c, &kv); !rc;
	     rc = btree_cursor_next(&c, &kv)) {
		const uint8_t *k;
		size_t kl;
		bool is_long;
		rc = latest_long(&kv, &is_long);
		if (rc)
			return rc;
		if (!is_long || memcmp(kv.key, x->seekbuf, pl) != 0)
			return -ENOENT;
		rc = kvindex_latest_parse(key, len, kv.val, kv.val_len, false, out);
		if (!rc)
			rc = entry_key(x, out, &k, &kl);
		if (rc)
			return rc;
		if (mvcc_bytes_cmp(k, kl, key, len) != 0)
			continue;
		if (out->mod.main != (int64_t)rev_get_be64(kv.key + pl) ||
		    out->mod.sub != (int64_t)rev_get_be64(kv.key + pl + 8))
			return corrupt("latest entry of a %zu-byte key at %lld is filed under "
				       "another revision", len, (long long)out->mod.main);
		return fields && out->kv ? kvindex_latest_parse(key, len, kv.val, kv.val_len,
								 true, out) : 0;
	}
	return rc;
}

/* Looks key up in the latest bucket (or the prefetched answers, or the
 * latest-entry cache); `fields` as for kvindex_latest_parse. */
static int latest_lookup(struct kvindex *x, const uint8_t *key, size_t len, bool fields,
			 struct kvindex_entry *out)
{
	const uint8_t *v = NULL;
	size_t vlen = 0;
	int rc;
	if (len == 0)
		return -ENOENT;
	if (len > LONG_PREFIX) {
		if (x->lc && x->keyb &&
		    kvindex_cache_get(x->lc, x->lc_generation, x->keyb, key, len, out) == 0)
			return 0;
		return long_latest_get(x, key, len, fields, out);
	}
	const struct kvindex_pre *p = prefetched(x, key, len);
	if (p && p->cached) {
		*out = p->entry;
		return 0;
	}
	if (p) {
		rc = p->rc;
		v = p->val;
		vlen = p->vlen;
	} else if (x->lc && x->keyb &&
		   kvindex_cache_get(x->lc, x->lc_generation, x->keyb, key, len, out) == 0) {
		return 0;
	} else {
		rc = btree_get(x->latest, key, len, &v, &vlen);
	}
	if (rc)
		return rc == -EISDIR ? corrupt("latest bucket holds a nested bucket") : rc;
	return kvindex_latest_parse(key, len, v, vlen, fields, out);
}

int kvindex_latest_get(struct kvindex *x, const uint8_t *key, size_t len,
		       struct kvindex_entry *out)
{
	return latest_lookup(x, key, len, true, out);
}

/* Whether a history key is a long key's: LONG_ENTRY_KEY bytes with a tag,
 * whose top bit is set, where a whole key's of that length has the 0x00 of
 * its terminator. */
static bool hist_long(const struct btree_kv *kv)
{
	return kv->key_len == LONG_ENTRY_KEY && (kv->key[LONG_PREFIX] & 0x80);
}

/* Splits a history key: the length of esc(key) 0x00 0x01 (of a long key's,
 * its prefix and tag) and the revision. */
static int hist_split(const struct btree_kv *kv, size_t *prefix_len, struct rev *r, bool *tomb)
{
	if (kv->flags & BTREE_KV_BUCKET)
		return corrupt("history bucket holds a nested bucket");
	if (kv->key_len < HIST_TERM + HIST_SUFFIX + 1 || kv->val_len != 1 ||
	    (kv->val[0] != HIST_PUT && kv->val[0] != HIST_TOMBSTONE))
		return corrupt("history entry of %zu bytes with a %zu-byte value is malformed",
			       kv->key_len, kv->val_len);
	size_t pl = kv->key_len - HIST_SUFFIX;
	if (!hist_long(kv) && (kv->key[pl - 2] != 0x00 || kv->key[pl - 1] != 0x01))
		return corrupt("history key of %zu bytes lacks its terminator", kv->key_len);
	*prefix_len = pl;
	r->main = (int64_t)~rev_get_be64(kv->key + pl);
	r->sub = (int64_t)~rev_get_be64(kv->key + pl + 8);
	*tomb = kv->val[0] == HIST_TOMBSTONE;
	return 0;
}

/* Puts prefix (esc(key) 0x00 0x01, plen bytes) then ~at 0...0 in seekbuf. */
static int seek_at(struct kvindex *x, struct btree_cursor *c, const uint8_t *prefix, size_t plen,
		   int64_t at, struct btree_kv *kv)
{
	bool in_place = prefix == x->seekbuf;
	int rc = reserve(&x->seekbuf, &x->seekcap, plen + HIST_SUFFIX);
	if (rc)
		return rc;
	if (!in_place)
		memmove(x->seekbuf, prefix, plen);
	rev_put_be64(x->seekbuf + plen, ~(uint64_t)at);
	memset(x->seekbuf + plen + 8, 0, 8);
	return btree_cursor_seek(c, x->seekbuf, plen + HIST_SUFFIX, kv);
}

/* The newest history entry of a long key at or below at: the first one of
 * its prefix and tag, from ~at on, whose KeyValue names key. */
static int long_hist_find(struct kvindex *x, const uint8_t *key, size_t len, int64_t at,
			  struct rev *rev, bool *tombstone)
{
	struct btree_cursor c;
	struct btree_kv kv;
	const size_t pl = LONG_PREFIX + LONG_TAG;
	int rc;
	for (rc = long_seek(x, true, key, len, at, &c, &kv); !rc;
	     rc = btree_cursor_next(&c, &kv)) {
		const uint8_t *k;
		size_t kl, hpl;
		if (!hist_long(&kv) || memcmp(kv.key, x->seekbuf, pl) != 0)
			return -ENOENT;
		rc = hist_split(&kv, &hpl, rev, tombstone);
		if (!rc && rev->main > at)
			rc = corrupt("history seek at %lld found revision %lld", (long long)at,
				     (long long)rev->main);
		if (!rc)
			rc = key_at(x, *rev, *tombstone, &k, &kl);
		if (rc)
			return rc;
		if (mvcc_bytes_cmp(k, kl, key, len) == 0)
			return 0;
	}
	return rc;
}

/* The newest history entry of key at or below at. */
static int hist_find(struct kvindex *x, const uint8_t *key, size_t len, int64_t at,
		     struct rev *rev, bool *tombstone)
{
	if (!hist_whole(key, len))
		return long_hist_find(x, key, len, at, rev, tombstone);
	int rc = reserve(&x->seekbuf, &x->seekcap, 2 * len + HIST_TERM + HIST_SUFFIX);
	if (rc)
		return rc;
	size_t plen = esc_put(x->seekbuf, key, len);
	struct btree_cursor c;
	struct btree_kv kv;
	size_t pl;
	btree_cursor_init(&c, x->history);
	rc = seek_at(x, &c, x->seekbuf, plen, at, &kv);
	if (rc)
		return rc;
	if (kv.key_len != plen + HIST_SUFFIX || memcmp(kv.key, x->seekbuf, plen) != 0)
		return -ENOENT;
	rc = hist_split(&kv, &pl, rev, tombstone);
	if (rc)
		return rc;
	return rev->main <= at ? 0 : corrupt("history seek at %lld found revision %lld",
					     (long long)at, (long long)rev->main);
}

/*
 * The newest revision of key at or below at, as kvindex_history_find; when
 * it is the latest entry, *in_latest is set and *e holds that entry
 * (without its create revision, version and lease when inline).
 */
static int find_at(struct kvindex *x, const uint8_t *key, size_t len, int64_t at,
		   struct kvindex_entry *e, bool *in_latest, struct rev *rev, bool *tombstone)
{
	*in_latest = false;
	if (len == 0 || at < 0)
		return -ENOENT;  /* revisions are never negative */
	int rc = latest_lookup(x, key, len, false, e);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0 && e->mod.main <= at) {
		/* newer than all of the key's history */
		*in_latest = true;
		*rev = e->mod;
		*tombstone = false;
		return 0;
	}
	return hist_find(x, key, len, at, rev, tombstone);
}

int kvindex_history_find(struct kvindex *x, const uint8_t *key, size_t len, int64_t at,
			 struct rev *rev, bool *tombstone)
{
	struct kvindex_entry e;
	bool in_latest;
	return find_at(x, key, len, at, &e, &in_latest, rev, tombstone);
}

void kvindex_range_from_request(struct kvindex_range *r, const uint8_t *key, size_t key_len,
				const uint8_t *range_end, size_t range_end_len)
{
	r->key = key;
	r->key_len = key_len;
	r->end = range_end;
	r->end_len = range_end_len;
	if (range_end_len == 0)
		r->kind = KVINDEX_RANGE_ONE;
	else if (range_end_len == 1 && range_end[0] == 0)
		r->kind = KVINDEX_RANGE_FROM;
	else
		r->kind = KVINDEX_RANGE_TO;
}

bool kvindex_range_contains(const struct kvindex_range *r, const uint8_t *key, size_t len)
{
	int c = mvcc_bytes_cmp(key, len, r->key, r->key_len);
	switch (r->kind) {
	case KVINDEX_RANGE_ONE:
		return c == 0;
	case KVINDEX_RANGE_FROM:
		return c >= 0;
	case KVINDEX_RANGE_TO:
		return c >= 0 && mvcc_bytes_cmp(key, len, r->end, r->end_len) < 0;
	}
	return false;
}

enum { IT_START, IT_EMITTED, IT_DONE };
/* States of the two streams of a walk at an old revision. */
enum { STREAM_ON, STREAM_STEP, STREAM_END };

void kvindex_iter_begin(struct kvindex_iter *it, struct kvindex *x,
			const struct kvindex_range *r, int64_t at, bool latest)
{
	/* The cursors and stream entries are set before their first use
	 * (the cursors are large: no memset for a one-key read). */
	it->x = x;
	it->r = *r;
	it->at = at;
	it->latest = latest;
	it->state = IT_START;
	it->endlen = it->nextlen = 0;
	it->lstate = it->hstate = STREAM_END;
	it->lpend = it->hlong_start = false;
	it->lgn = it->lgpos = it->hgn = it->hgpos = 0;
}

static void hit_latest(struct kvindex_hit *h, const uint8_t *key, size_t len,
		       const struct kvindex_entry *e)
{
	h->rev = e->mod;
	h->key = key;
	h->key_len = len;
	h->kv = e->kv;
	h->kv_len = e->kv_len;
}

static void hit_history(struct kvindex_hit *h, struct rev r)
{
	h->rev = r;
	h->key = NULL;
	h->key_len = 0;
	h->kv = NULL;
	h->kv_len = 0;
}

static int iter_one(struct kvindex_iter *it, struct kvindex_hit *h)
{
	struct kvindex *x = it->x;
	struct kvindex_entry e;
	struct rev r;
	bool in_latest, tomb;
	int rc;
	it->state = IT_DONE;
	if (it->latest) {
		rc = latest_lookup(x, it->r.key, it->r.key_len, false, &e);
		if (!rc)
			hit_latest(h, it->r.key, it->r.key_len, &e);
		return rc;
	}
	rc = find_at(x, it->r.key, it->r.key_len, it->at, &e, &in_latest, &r, &tomb);
	if (rc)
		return rc;
	if (in_latest)
		hit_latest(h, it->r.key, it->r.key_len, &e);
	else if (tomb)
		return -ENOENT;
	else
		hit_history(h, r);
	return 0;
}

/* Whether the raw key kv lies at or past the end of a [key, end) range. */
static bool past_raw_end(const struct kvindex_iter *it, const struct btree_kv *kv)
{
	return it->r.kind == KVINDEX_RANGE_TO &&
	       mvcc_bytes_cmp(kv->key, kv->key_len, it->r.end, it->r.end_len) >= 0;
}

/*
 * Compares esc(key) 0x00 0x01 with p, the plen-byte prefix of a history
 * key, as memcmp orders the two encodings: the order of the user keys,
 * and 0 for the same key.
 */
static int esc_cmp(const uint8_t *key, size_t len, const uint8_t *p, size_t plen)
{
	size_t i = 0, j = 0;
	bool escaping = false;   /* the 0xff after a 0x00 byte is due */
	for (;; j++) {
		uint8_t b;
		if (escaping) {
			b = 0xff;
			escaping = false;
		} else if (i < len) {
			b = key[i++];
			escaping = b == 0;
		} else if (i == len) {
			b = 0x00;
			i++;
		} else if (i == len + 1) {
			b = 0x01;
			i++;
		} else {
			return j < plen ? -1 : 0;
		}
		if (j == plen)
			return 1;
		if (b != p[j])
			return b < p[j] ? -1 : 1;
	}
}

static int grp_cmp(const void *a, const void *b)
{
	const struct kvindex_grp *ga = a, *gb = b;
	int c = mvcc_bytes_cmp(ga->key, ga->len, gb->key, gb->len);
	if (c)
		return c;
	return rev_cmp(gb->e.mod, ga->e.mod);  /* newest first */
}

/* Adds g to the n members of a group being read, when its key lies in
 * the walk's range. */
static int grp_keep(const struct kvindex_iter *it, struct kvindex_grp **v, size_t *cap,
		    size_t *n, const struct kvindex_grp *g)
{
	if (!kvindex_range_contains(&it->r, g->key, g->len))
		return 0;
	int rc = stored_reserve((void **)v, cap, *n + 1, sizeof(**v), 16);
	if (!rc)
		(*v)[(*n)++] = *g;
	return rc;
}

/* Ends the reading of a group whose last step said rc (-ENOENT: the
 * bucket ended): sorts its n members in v. */
static int grp_sort(int rc, struct kvindex_grp *v, size_t n)
{
	if (rc && rc != -ENOENT)
		return rc;
	/* (v is NULL while no member lies in the range: qsort must not see it) */
	if (n > 1)
		qsort(v, n, sizeof(*v), grp_cmp);
	return 0;
}

/*
 * The latest stream is on the first entry of a group of long keys (lkv):
 * reads the whole group and keeps its keys that lie in the range, sorted;
 * the cursor is left on the entry after the group (lpend).
 */
static int lgroup_collect(struct kvindex_iter *it)
{
	struct kvindex *x = it->x;
	const uint8_t *p = it->lkv.key;  /* the txn's bytes: they stay */
	size_t n = 0;
	int rc = 0;
	for (;;) {
		struct kvindex_grp g = { .tomb = false };
		bool is_long;
		rc = latest_long(&it->lkv, &is_long);
		if (rc)
			return rc;
		if (!is_long || memcmp(it->lkv.key, p, LONG_PREFIX) != 0)
			break;
		rc = kvindex_latest_parse(it->lkv.key, it->lkv.key_len, it->lkv.val,
					  it->lkv.val_len, false, &g.e);
		if (!rc)
			rc = entry_key(x, &g.e, &g.key, &g.len);
		if (rc)
			return rc;
		if (g.len <= LONG_PREFIX || memcmp(g.key, p, LONG_PREFIX) != 0)
			return corrupt("latest entry at %lld names a %zu-byte key outside its group",
				       (long long)g.e.mod.main, g.len);
		rc = grp_keep(it, &x->lgrp, &x->lgcap, &n, &g);
		if (!rc)
			rc = btree_cursor_next(&it->lc, &it->lkv);
		if (rc)
			break;
	}
	int next = rc;
	rc = grp_sort(rc, x->lgrp, n);
	if (rc)
		return rc;
	it->lgn = n;
	it->lgpos = 0;
	it->lpend = true;
	it->lpend_rc = next;
	return 0;
}

/*
 * Moves the latest stream to its next key in the range (lkey, lent; lstate
 * STREAM_ON) or to its end (STREAM_END); `first` seeks the range's start.
 * A whole key's entry is the key; a group of long keys is read and sorted
 * first.
 */
static int lstream_next(struct kvindex_iter *it, bool first)
{
	bool long_start = it->r.key_len > LONG_PREFIX;
	int rc;
	for (;;) {
		if (it->lgpos < it->lgn) {
			const struct kvindex_grp *g = &it->x->lgrp[it->lgpos++];
			it->lkey = g->key;
			it->lkey_len = g->len;
			it->lent = g->e;
			it->lstate = STREAM_ON;
			return 0;
		}
		if (first) {
			btree_cursor_init(&it->lc, it->x->latest);
			rc = btree_cursor_seek(&it->lc, it->r.key,
					       long_start ? LONG_PREFIX : it->r.key_len, &it->lkv);
			first = false;
		} else if (it->lpend) {
			rc = it->lpend_rc;
			it->lpend = false;
		} else {
			rc = btree_cursor_next(&it->lc, &it->lkv);
		}
		bool is_long = false;
		if (!rc)
			rc = latest_long(&it->lkv, &is_long);
		if (rc)
			break;
		if (is_long) {
			/* every key of the group sorts above its prefix */
			if (it->r.kind == KVINDEX_RANGE_TO &&
			    mvcc_bytes_cmp(it->lkv.key, LONG_PREFIX, it->r.end, it->r.end_len) >= 0) {
				rc = -ENOENT;
				break;
			}
			rc = lgroup_collect(it);
			if (rc)
				break;
			continue;
		}
		if (past_raw_end(it, &it->lkv)) {
			rc = -ENOENT;
			break;
		}
		if (long_start &&
		    mvcc_bytes_cmp(it->lkv.key, it->lkv.key_len, it->r.key, it->r.key_len) < 0)
			continue;  /* the start's prefix itself */
		rc = kvindex_latest_parse(it->lkv.key, it->lkv.key_len, it->lkv.val,
					  it->lkv.val_len, false, &it->lent);
		if (rc)
			break;
		it->lkey = it->lkv.key;
		it->lkey_len = it->lkv.key_len;
		it->lstate = STREAM_ON;
		return 0;
	}
	it->lstate = STREAM_END;
	return rc == -ENOENT ? 0 : rc;
}

static int iter_latest(struct kvindex_iter *it, struct kvindex_hit *h)
{
	int rc = lstream_next(it, it->state == IT_START);
	if (!rc && it->lstate != STREAM_ON)
		rc = -ENOENT;
	if (rc) {
		it->state = IT_DONE;
		return rc;
	}
	it->state = IT_EMITTED;
	hit_latest(h, it->lkey, it->lkey_len, &it->lent);
	return 0;
}

/*
 * The history stream is on the first entry of a group of long keys (hkv):
 * reads the whole group and keeps, for each of its keys in the range, its
 * newest revision at or below `at` (a key with none is left out), in key
 * order; *next is the result of the step past the group (hkv its entry).
 */
static int hgroup_collect(struct kvindex_iter *it, int *next)
{
	struct kvindex *x = it->x;
	const uint8_t *p = it->hkv.key;  /* the txn's bytes: they stay */
	size_t n = 0, kept = 0;
	int rc = 0;
	for (;;) {
		struct kvindex_grp g;
		size_t pl;
		if (!hist_long(&it->hkv) || memcmp(it->hkv.key, p, LONG_PREFIX) != 0)
			break;
		rc = hist_split(&it->hkv, &pl, &g.e.mod, &g.tomb);
		if (rc)
			return rc;
		if (g.e.mod.main <= it->at) {
			rc = key_at(x, g.e.mod, g.tomb, &g.key, &g.len);
			if (rc)
				return rc;
			rc = grp_keep(it, &x->hgrp, &x->hgcap, &n, &g);
		}
		if (!rc)
			rc = btree_cursor_next(&it->c, &it->hkv);
		if (rc)
			break;
	}
	*next = rc;
	/* a key's revisions newest first: the first one of each key answers */
	rc = grp_sort(rc, x->hgrp, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (kept == 0 || mvcc_bytes_cmp(x->hgrp[i].key, x->hgrp[i].len,
						x->hgrp[kept - 1].key, x->hgrp[kept - 1].len) != 0)
			x->hgrp[kept++] = x->hgrp[i];
	it->hgn = kept;
	it->hgpos = 0;
	return 0;
}

/* Takes the history stream's positioning result rc (its entry in hkv). */
static int hist_landed(struct kvindex_iter *it, int rc)
{
	struct kvindex *x = it->x;
	for (it->hgn = it->hgpos = 0; !rc; it->hgn = it->hgpos = 0) {
		if (hist_long(&it->hkv)) {
			/* every key of the group sorts above its prefix */
			if (it->r.kind == KVINDEX_RANGE_TO &&
			    mvcc_bytes_cmp(it->hkv.key, LONG_PREFIX, x->endbuf, it->endlen) >= 0) {
				rc = -ENOENT;
				break;
			}
			int next;
			rc = hgroup_collect(it, &next);
			if (rc)
				break;
			if (it->hgn) {
				it->hpend_rc = next;
				break;
			}
			rc = next;
			continue;
		}
		/* esc(end) 0x00 0x01 in endbuf: a history key sorts below it
		 * exactly when its user key sorts below end. */
		if (it->r.kind == KVINDEX_RANGE_TO &&
		    mvcc_bytes_cmp(it->hkv.key, it->hkv.key_len, x->endbuf, it->endlen) >= 0) {
			rc = -ENOENT;
			break;
		}
		if (!it->hlong_start)
			break;
		/* a long start: the key of its prefix, below it, is skipped */
		size_t pl;
		struct rev r;
		bool tomb;
		rc = hist_split(&it->hkv, &pl, &r, &tomb);
		if (rc || esc_cmp(it->r.key, it->r.key_len, it->hkv.key, pl) <= 0)
			break;
		rc = reserve(&x->seekbuf, &x->seekcap, pl);
		if (rc)
			break;
		memmove(x->seekbuf, it->hkv.key, pl);
		x->seekbuf[pl - 1] = 0x02;
		rc = btree_cursor_seek(&it->c, x->seekbuf, pl, &it->hkv);
	}
	it->hstate = rc ? STREAM_END : STREAM_ON;
	return rc == -ENOENT ? 0 : rc;
}

/* Positions both streams of a walk at an old revision at the range's
 * start: the history at the start key's newest revision at or below `at`
 * (or the first entry of the key after it). */
static int merge_start(struct kvindex_iter *it)
{
	struct kvindex *x = it->x;
	int rc;
	if (it->at < 0)
		return -ENOENT;  /* revisions are never negative */
	if (it->r.kind == KVINDEX_RANGE_TO) {
		rc = reserve(&x->endbuf, &x->endcap, 2 * it->r.end_len + HIST_TERM);
		if (rc)
			return rc;
		it->endlen = esc_put(x->endbuf, it->r.end, it->r.end_len);
	}
	rc = reserve(&x->seekbuf, &x->seekcap, 2 * it->r.key_len + HIST_TERM + HIST_SUFFIX);
	if (rc)
		return rc;
	btree_cursor_init(&it->c, x->history);
	size_t plen = esc_put(x->seekbuf, it->r.key, it->r.key_len);
	it->hlong_start = !hist_whole(it->r.key, it->r.key_len);
	if (!it->hlong_start) {
		rc = seek_at(x, &it->c, x->seekbuf, plen, it->at, &it->hkv);
	} else {
		/* The group of the key's escaped prefix, and the key of that
		 * prefix itself (below the start: hist_landed skips it). */
		rc = btree_cursor_seek(&it->c, x->seekbuf, LONG_PREFIX, &it->hkv);
	}
	rc = hist_landed(it, rc);
	if (rc)
		return rc;
	return lstream_next(it, true);
}

/* Moves the streams past the entries they used: the latest one to its
 * next key, the history to the next key of its group, or the seek in
 * seekbuf (the next key's). */
static int merge_step(struct kvindex_iter *it)
{
	int rc = 0;
	if (it->lstate == STREAM_STEP)
		rc = lstream_next(it, false);
	if (rc || it->hstate != STREAM_STEP)
		return rc;
	if (it->hgn == 0)
		return hist_landed(it, btree_cursor_seek(&it->c, it->x->seekbuf, it->nextlen,
							 &it->hkv));
	if (++it->hgpos < it->hgn) {
		it->hstate = STREAM_ON;
		return 0;
	}
	return hist_landed(it, it->hpend_rc);
}

/* Makes the history stream step to the key after the one whose prefix
 * (esc(key) 0x00 0x01, plen bytes) it is on: esc(key) 0x00 0x02. */
static int hist_skip_key(struct kvindex_iter *it, size_t plen)
{
	struct kvindex *x = it->x;
	int rc = reserve(&x->seekbuf, &x->seekcap, plen);
	if (rc)
		return rc;
	memmove(x->seekbuf, it->hkv.key, plen);
	x->seekbuf[plen - 1] = 0x02;
	it->nextlen = plen;
	it->hstate = STREAM_STEP;
	return 0;
}

/*
 * The walk at an old revision: the latest bucket and the history in one
 * key order. A key's latest entry answers when it is at or below `at`
 * (all of its history is older); otherwise its newest history entry at or
 * below `at` does, found with one seek when the first one is too new (a
 * group of long keys has it already).
 */
static int iter_merge(struct kvindex_iter *it, struct kvindex_hit *h)
{
	struct rev r = { 0, 0 };
	size_t pl = 0;
	bool tomb = false;
	int rc;

	rc = it->state == IT_START ? merge_start(it) : merge_step(it);
	for (; !rc; rc = merge_step(it)) {
		bool lon = it->lstate == STREAM_ON, hon = it->hstate == STREAM_ON;
		const struct kvindex_grp *hg = hon && it->hgn ? &it->x->hgrp[it->hgpos] : NULL;
		if (!lon && !hon) {
			rc = -ENOENT;
			break;
		}
		if (hon && !hg) {
			rc = hist_split(&it->hkv, &pl, &r, &tomb);
			if (rc)
				break;
		}
		int c = !hon ? -1 : !lon ? 1 :
			hg ? mvcc_bytes_cmp(it->lkey, it->lkey_len, hg->key, hg->len) :
			esc_cmp(it->lkey, it->lkey_len, it->hkv.key, pl);
		if (c <= 0) {
			it->lstate = STREAM_STEP;
			if (it->lent.mod.main <= it->at) {
				if (c == 0 && hg)
					it->hstate = STREAM_STEP;
				else if (c == 0)
					rc = hist_skip_key(it, pl);
				if (rc)
					break;
				it->state = IT_EMITTED;
				hit_latest(h, it->lkey, it->lkey_len, &it->lent);
				return 0;
			}
			if (c < 0)
				continue;  /* created after `at`, no history */
		}
		/* The history answers for this key. */
		if (hg) {
			it->hstate = STREAM_STEP;
			if (hg->tomb)
				continue;
			it->state = IT_EMITTED;
			hit_history(h, hg->e.mod);
			return 0;
		}
		if (r.main > it->at) {
			/* its newest revision is too new: find the newest one
			 * at or below `at`, or land on the next key */
			rc = hist_landed(it, seek_at(it->x, &it->c, it->hkv.key, pl, it->at,
						     &it->hkv));
			if (rc)
				break;
			continue;
		}
		rc = hist_skip_key(it, pl);
		if (rc)
			break;
		if (tomb)
			continue;
		it->state = IT_EMITTED;
		hit_history(h, r);
		return 0;
	}
	it->state = IT_DONE;
	return rc;
}

int kvindex_iter_next(struct kvindex_iter *it, struct kvindex_hit *h)
{
	if (it->state == IT_DONE)
		return -ENOENT;
	if (it->r.kind == KVINDEX_RANGE_ONE) {
		int rc = iter_one(it, h);
		return rc;
	}
	if (it->r.kind == KVINDEX_RANGE_TO &&
	    mvcc_bytes_cmp(it->r.key, it->r.key_len, it->r.end, it->r.end_len) >= 0) {
		it->state = IT_DONE;
		return -ENOENT;
	}
	return it->latest ? iter_latest(it, h) : iter_merge(it, h);
}

static int meta_get64(struct kvindex *x, const char *name, uint64_t *out)
{
	const uint8_t *v;
	size_t len;
	int rc = btree_get(x->meta, name, strlen(name), &v, &len);
	if (rc)
		return rc == -EISDIR ? corrupt("meta %s is a bucket", name) : rc;
	if (len != 8)
		return corrupt("meta %s is %zu bytes long", name, len);
	*out = rev_get_be64(v);
	return 0;
}

int kvindex_meta_read(struct kvindex *x, struct kvindex_meta *m)
{
	uint64_t rev = 0;
	const uint8_t *v;
	size_t len;
	int rc = meta_get64(x, SCHEMA_KV_META_FORMAT, &m->format);
	if (!rc)
		rc = meta_get64(x, SCHEMA_KV_META_REVISION, &rev);
	if (!rc)
		rc = btree_get(x->meta, SCHEMA_KV_META_COVERS, SCHEMA_LEN(SCHEMA_KV_META_COVERS),
			       &v, &len);
	if (rc)
		return rc;
	if (len < 16 || len > KVINDEX_COVERS_MAX)
		return corrupt("meta covers is %zu bytes long", len);
	m->revision = (int64_t)rev;
	memcpy(m->covers, v, len);
	m->covers_len = len;
	return 0;
}

void kvindex_covers_make(struct kvindex_meta *m, int64_t scheduled, int64_t finished,
			 const uint8_t *last_key, size_t last_len)
{
	if (last_len > REV_MARKED_BYTES)
		last_len = REV_MARKED_BYTES;
	rev_put_be64(m->covers, (uint64_t)scheduled);
	rev_put_be64(m->covers + 8, (uint64_t)finished);
	if (last_len)
		memcpy(m->covers + 16, last_key, last_len);
	m->covers_len = 16 + last_len;
}
