/*
 * Fuzz target: cetcd's key index as a db file holds it.
 *
 * A first byte below 0x80: a latest entry (stored/mvcc/kvindex.h: 'v'
 * varint references, 'r' fixed ones of format 2, 'i' inline KeyValues),
 * read by kvindex_latest_parse. The first byte is the key's length (up to
 * 15), then the key, then the value. A reference that parses, written
 * again as this build writes one, must parse to the same fields; an
 * inline entry's KeyValue lies inside the value.
 *
 * A first byte of 0x80 or more: the entries of long keys ("Long keys" in
 * kvindex.h), which are told apart by the KeyValues they name. The rest
 * are records that fill a new db's key bucket and index buckets: KeyValues
 * of a few long keys sharing their first 32,750 bytes (or raw bytes) at
 * revisions, latest entries and history entries filed under that prefix
 * with any tag, revision and value. Then every key is looked up at every
 * revision and the index walked (all keys, and a range, at the current
 * revision and older ones). Any error is fine; a crash, a hang, a
 * sanitizer report, or a walk at the current revision giving keys out of
 * order is a bug.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/wire.h"
#include "stored/btree/btree.h"
#include "stored/btree/page.h"
#include "stored/mvcc/mvcc_int.h"
#include "stored/mvcc/schema.h"

#define NLONG 6
#define LONG_MAX_LEN (LONG_PREFIX + 40)
#define MAX_REV 12

/* Long key i: 'L's with a 0x00 near the prefix's end for odd i (the
 * escaped prefix then ends elsewhere), and a few bytes of its own after
 * the prefix; key NLONG is the prefix itself, a whole key. */
static size_t long_key(unsigned i, uint8_t *k)
{
	memset(k, 'L', LONG_MAX_LEN);
	if (i >= NLONG)
		return LONG_PREFIX;
	if (i & 1)
		k[LONG_PREFIX - 3] = 0;
	k[LONG_PREFIX + 1] = (uint8_t)('a' + i / 2);
	return LONG_PREFIX + 2 + i;
}

struct in {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* A reference to revision r as this build writes one. */
static size_t ref_to(uint8_t *out, struct rev r)
{
	const uint64_t f[5] = { (uint64_t)r.main, (uint64_t)r.sub, (uint64_t)r.main, 1, 0 };
	size_t n = 1;
	out[0] = LATEST_REF_VARINT;
	for (int i = 0; i < 5; i++)
		n += proto_varint_put(out + n, f[i]);
	return n;
}

/* One record: what goes into which bucket. */
static int one_record(struct in *in, struct btree_bucket *keyb, struct btree_bucket *latest,
		      struct btree_bucket *hist)
{
	static uint8_t k[LONG_MAX_LEN], bk[PAGE_MAX_KEY], val[256];
	unsigned op = take(in), ki = take(in) % (NLONG + 1);
	struct rev r = { (int64_t)(take(in) % MAX_REV), (int64_t)(take(in) % 3) };
	size_t klen = long_key(ki, k), vlen = take(in) % 64;
	for (size_t i = 0; i < vlen; i++)
		val[i] = (uint8_t)take(in);
	switch (op % 4) {
	case 0: { /* a KeyValue of key ki at r, put or tombstone */
		uint8_t rk[REV_MARKED_BYTES];
		struct mvcc_kv kv = { k, klen, val, vlen % 8, r.main, r.main, 1, 0 };
		uint8_t *enc = malloc(mvcc_kv_encoded_len(&kv));
		if (!enc)
			return -ENOMEM;
		size_t n = mvcc_kv_encode(&kv, enc);
		bool tomb = op & 4;
		if (tomb)
			rev_encode_tombstone(r, rk);
		else
			rev_encode(r, rk);
		int rc = btree_put(keyb, rk, tomb ? REV_MARKED_BYTES : REV_BYTES, enc, n);
		free(enc);
		return rc;
	}
	case 1: { /* raw bytes at a revision of the key bucket */
		uint8_t rk[REV_BYTES];
		rev_encode(r, rk);
		return btree_put(keyb, rk, REV_BYTES, val, vlen);
	}
	case 2: /* a latest entry of a long key, any tag */
		long_latest_key(bk, k, klen, r);
		if (op & 8) {
			bk[LONG_PREFIX] = (uint8_t)take(in);
			bk[LONG_PREFIX + 1] = (uint8_t)take(in);
		}
		if (op & 16)  /* a well-formed reference */
			vlen = ref_to(val, r);
		return btree_put(latest, bk, LONG_ENTRY_KEY, val, vlen);
	default: /* a history entry of a long key, any tag and value */
		long_hist_key(bk, k, klen, r);
		if (op & 8) {
			bk[LONG_PREFIX] = (uint8_t)take(in);
			bk[LONG_PREFIX + 1] = (uint8_t)take(in);
		}
		val[0] = op & 16 ? HIST_TOMBSTONE : op & 32 ? HIST_PUT : val[0];
		return btree_put(hist, bk, LONG_ENTRY_KEY, val, vlen ? 1 : 0);
	}
}

/* Walks a range of x at `at` (latest: at the current revision); a walk at
 * the current revision gives keys in order. */
static void walk(struct kvindex *x, const struct kvindex_range *r, int64_t at, bool latest)
{
	struct kvindex_iter it;
	struct kvindex_hit h;
	const uint8_t *prev = NULL;
	size_t prev_len = 0;
	kvindex_iter_begin(&it, x, r, at, latest);
	for (int n = 0; n < 4 * (NLONG + 4) * MAX_REV && kvindex_iter_next(&it, &h) == 0; n++) {
		if (!latest || !h.key)
			continue;
		if (prev && mvcc_bytes_cmp(prev, prev_len, h.key, h.key_len) > 0)
			abort();
		prev = h.key;
		prev_len = h.key_len;
	}
}

static char dir[] = "/tmp/fuzz-kvlong-XXXXXX", path[64];

static void rm_dir(void)
{
	unlink(path);
	rmdir(dir);
}

static void long_fuzz(struct in *in)
{
	static uint8_t k[LONG_MAX_LEN], end[LONG_MAX_LEN];
	struct btree_db_opts o = { .create = true, .scratch = true, .map_size = 1ull << 28 };
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *keyb;
	struct kvindex x;
	if (!path[0]) {
		if (!mkdtemp(dir))
			abort();
		snprintf(path, sizeof(path), "%s/db", dir);
		atexit(rm_dir);
	}
	unlink(path);
	if (btree_db_open(path, &o, &db))
		abort();
	kvindex_init(&x);
	if (btree_write_begin(db, &t) ||
	    btree_bucket_create(t, NULL, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY), &keyb) ||
	    kvindex_create(t, &x))
		abort();
	for (int n = 0; in->n && n < 64; n++)
		if (one_record(in, keyb, x.latest, x.history))
			break;
	/* lookups of every key at every revision, walks of all and of a range */
	for (unsigned i = 0; i <= NLONG; i++) {
		struct kvindex_entry e;
		size_t klen = long_key(i, k);
		(void)kvindex_latest_get(&x, k, klen, &e);
		for (int64_t at = 0; at <= MAX_REV; at++) {
			struct rev r;
			bool tomb;
			(void)kvindex_history_find(&x, k, klen, at, &r, &tomb);
		}
	}
	struct kvindex_range all, some;
	kvindex_range_from_request(&all, (const uint8_t *)"L", 1, (const uint8_t *)"", 1);
	size_t from = long_key(1, k), to = long_key(4, end);
	kvindex_range_from_request(&some, k, from, end, to);
	for (int64_t at = 0; at <= MAX_REV; at++) {
		walk(&x, &all, at, at == MAX_REV);
		walk(&x, &some, at, at == MAX_REV);
	}
	btree_txn_end(t);
	kvindex_close(&x);
	btree_db_close(db);
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvindex_entry e, again;
	uint8_t buf[LATEST_REF_VARINT_MAX];

	if (size == 0)
		return 0;
	if (data[0] & 0x80) {
		struct in in = { data + 1, size - 1 };
		long_fuzz(&in);
		return 0;
	}
	size_t klen = data[0] % 16;
	if (size < 1 + klen)
		return 0;
	const uint8_t *key = data + 1, *v = data + 1 + klen;
	size_t vlen = size - 1 - klen;
	if (kvindex_latest_parse(key, klen, v, vlen, true, &e) != 0)
		return 0;
	if (e.kv) {
		if (e.kv < v || e.kv + e.kv_len > v + vlen)
			abort();
		return 0;
	}
	const uint64_t f[5] = { (uint64_t)e.mod.main, (uint64_t)e.mod.sub,
				(uint64_t)e.create_rev, (uint64_t)e.version, (uint64_t)e.lease };
	size_t n = 1;
	buf[0] = LATEST_REF_VARINT;
	for (int i = 0; i < 5; i++)
		n += proto_varint_put(buf + n, f[i]);
	if (kvindex_latest_parse(key, klen, buf, n, true, &again) != 0 || again.kv ||
	    memcmp(&again.mod, &e.mod, sizeof(e.mod)) != 0 || again.create_rev != e.create_rev ||
	    again.version != e.version || again.lease != e.lease)
		abort();
	return 0;
}
