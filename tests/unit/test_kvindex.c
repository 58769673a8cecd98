/*
 * cetcd's index buckets against a brute-force list of (key, revision,
 * tombstone): the history bucket's byte order is (key ascending, revision
 * descending) for keys full of 0x00 and 0xff bytes; the latest bucket holds
 * exactly the live keys (inline KeyValues and references to the key
 * bucket); lookups at a revision and range walks (one key, [key, end),
 * from key; latest and history) give what the list gives; key size limits;
 * range starts too long to be keys; the meta record. MVCC_SEED=n replays.
 */
#include "test_mvcc_util.h"

#include "stored/kvindex.h"

struct hrec {
	uint8_t key[8];
	size_t klen;
	struct rev rev;
	bool tomb;
	int64_t version, create, lease;
	size_t vlen;
};

static struct hrec *recs;
static size_t nrecs;

static int key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	return m_cmp(a, al, b, bl);
}

/* Index of the newest record of key at or below at, or -1. */
static long find(const uint8_t *k, size_t kl, int64_t at)
{
	long best = -1;
	for (size_t i = 0; i < nrecs; i++) {
		if (key_cmp(recs[i].key, recs[i].klen, k, kl) != 0 || recs[i].rev.main > at)
			continue;
		if (best < 0 || rev_cmp(recs[i].rev, recs[best].rev) > 0)
			best = (long)i;
	}
	return best;
}

/* Decodes a history key with the test's own reading of the format. */
static void hist_decode(const uint8_t *k, size_t len, uint8_t *key, size_t *klen, struct rev *r)
{
	size_t i = 0, w = 0;
	T_CHECK(len >= 18);
	for (;;) {
		T_CHECK(i < len - 16);
		if (k[i] == 0) {
			T_CHECK(i + 1 < len - 16 + 1);
			if (k[i + 1] == 0x01)
				break;
			T_CHECK(k[i + 1] == 0xff);
			key[w++] = 0;
			i += 2;
		} else {
			key[w++] = k[i++];
		}
	}
	T_CHECK(i + 2 == len - 16);
	*klen = w;
	r->main = (int64_t)~rev_get_be64(k + i + 2);
	r->sub = (int64_t)~rev_get_be64(k + i + 10);
}

static int hrec_order(const void *a, const void *b)
{
	const struct hrec *x = a, *y = b;
	int c = key_cmp(x->key, x->klen, y->key, y->klen);
	return c ? c : -rev_cmp(x->rev, y->rev);
}

static void random_key(uint8_t *k, size_t *len)
{
	static const uint8_t alphabet[] = { 0x00, 0x01, 0xfe, 0xff, 'a' };
	*len = 1 + t_below(5);
	for (size_t i = 0; i < *len; i++)
		k[i] = alphabet[t_below(sizeof(alphabet))];
}

static uint8_t bigval[5000];

/* Writes a random history through the index and records it. */
static void build(struct btree_db *db, int64_t mains)
{
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	T_OK(btree_write_begin(db, &t));
	T_OK(kvindex_create(t, &x));
	recs = calloc((size_t)mains * 3, sizeof(*recs));
	nrecs = 0;
	for (int64_t m = 2; m < mains + 2; m++) {
		int subs = t_chance(100) ? 3 : 1;
		for (int sub = 0; sub < subs; sub++) {
			struct hrec h = { .rev = { m, sub } };
			random_key(h.key, &h.klen);
			long prev = find(h.key, h.klen, m);
			bool live = prev >= 0 && !recs[prev].tomb;
			h.tomb = live && t_chance(300);
			if (h.tomb) {
				T_OK(kvindex_tombstone(&x, h.key, h.klen, h.rev));
			} else {
				h.version = live ? recs[prev].version + 1 : 1;
				h.create = live ? recs[prev].create : m;
				h.lease = t_chance(200) ? (int64_t)t_below(1000) : 0;
				h.vlen = t_chance(50) ? 3000 + t_below(2000) : t_below(64);
				struct mvcc_kv kv = { h.key, h.klen, bigval, h.vlen, h.create, m,
						      h.version, h.lease };
				uint8_t *enc = malloc(mvcc_kv_encoded_len(&kv));
				size_t n = mvcc_kv_encode(&kv, enc);
				T_OK(kvindex_put(&x, &kv, h.rev, enc, n));
				free(enc);
			}
			recs[nrecs++] = h;
		}
	}
	T_OK(btree_commit(t, NULL));
	kvindex_close(&x);
}

static void check_layout(struct btree_txn *t, struct kvindex *x)
{
	t_phase = "history order";
	struct hrec *sorted = malloc(nrecs * sizeof(*sorted));
	memcpy(sorted, recs, nrecs * sizeof(*sorted));
	qsort(sorted, nrecs, sizeof(*sorted), hrec_order);
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	btree_cursor_init(&c, x->history);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		uint8_t key[8];
		size_t klen;
		struct rev r;
		t_step = i;
		T_CHECK(i < nrecs);
		hist_decode(kv.key, kv.key_len, key, &klen, &r);
		T_CHECK(key_cmp(key, klen, sorted[i].key, sorted[i].klen) == 0);
		T_CHECK(rev_cmp(r, sorted[i].rev) == 0);
		T_CHECK(kv.val_len == 1 && kv.val[0] == (sorted[i].tomb ? 't' : 'p'));
	}
	T_CHECK(i == nrecs);

	t_phase = "latest bucket";
	size_t live = 0;
	for (i = 0; i < nrecs; i++) {
		/* the newest record of each key comes first in its group */
		if (i > 0 && key_cmp(sorted[i - 1].key, sorted[i - 1].klen, sorted[i].key,
				     sorted[i].klen) == 0)
			continue;
		struct kvindex_entry e;
		int rc = kvindex_latest_get(x, sorted[i].key, sorted[i].klen, &e);
		if (sorted[i].tomb) {
			T_RC(rc, -ENOENT);
			continue;
		}
		T_OK(rc);
		live++;
		T_CHECK(rev_cmp(e.mod, sorted[i].rev) == 0);
		T_CHECK(e.version == sorted[i].version && e.create_rev == sorted[i].create &&
			e.lease == sorted[i].lease);
		if (sorted[i].vlen > 2000) {
			T_CHECK(e.kv == NULL);
		} else {
			struct mvcc_kv f;
			T_CHECK(e.kv != NULL);
			T_OK(mvcc_kv_decode(e.kv, e.kv_len, &f));
			T_CHECK(f.value_len == sorted[i].vlen && f.mod_rev == sorted[i].rev.main);
		}
	}
	size_t n = 0;
	btree_cursor_init(&c, x->latest);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv))
		n++;
	T_CHECK(n == live);
	free(sorted);
	(void)t;
}

static void check_find(struct kvindex *x, int64_t maxrev)
{
	t_phase = "history find";
	for (t_step = 0; t_step < 3000; t_step++) {
		uint8_t k[8];
		size_t kl;
		random_key(k, &kl);
		int64_t at = (int64_t)t_below((uint64_t)maxrev + 3) - 1;
		long want = find(k, kl, at);
		struct rev r;
		bool tomb;
		int rc = kvindex_history_find(x, k, kl, at, &r, &tomb);
		if (want < 0) {
			T_RC(rc, -ENOENT);
			continue;
		}
		T_OK(rc);
		T_CHECK(rev_cmp(r, recs[want].rev) == 0 && tomb == recs[want].tomb);
	}
}

static struct hrec *sorted;  /* recs by key, newest first */

/* The live keys of a range at `at`, brute force, as revisions in key order. */
static size_t expect_range(const struct kvindex_range *kr, int64_t at, struct rev *out)
{
	size_t n = 0;
	for (size_t i = 0; i < nrecs; i++) {
		if (i > 0 && key_cmp(sorted[i - 1].key, sorted[i - 1].klen, sorted[i].key,
				     sorted[i].klen) == 0)
			continue;  /* one key at a time */
		if (!kvindex_range_contains(kr, sorted[i].key, sorted[i].klen))
			continue;
		long w = find(sorted[i].key, sorted[i].klen, at);
		if (w >= 0 && !recs[w].tomb)
			out[n++] = recs[w].rev;
	}
	return n;
}

static void check_ranges(struct kvindex *x, int64_t maxrev)
{
	t_phase = "range walks";
	struct rev *want = malloc(nrecs * sizeof(*want));
	sorted = malloc(nrecs * sizeof(*sorted));
	memcpy(sorted, recs, nrecs * sizeof(*sorted));
	qsort(sorted, nrecs, sizeof(*sorted), hrec_order);
	for (t_step = 0; t_step < 1500; t_step++) {
		uint8_t k[8], e[8];
		size_t kl, el;
		random_key(k, &kl);
		random_key(e, &el);
		struct kvindex_range kr;
		switch (t_below(4)) {
		case 0:
			kvindex_range_from_request(&kr, k, kl, NULL, 0);
			break;
		case 1:
			kvindex_range_from_request(&kr, k, kl, (const uint8_t *)"", 1);
			break;
		default:
			kvindex_range_from_request(&kr, k, kl, e, el);
			break;
		}
		bool latest = t_chance(300);
		int64_t at = latest ? maxrev : (int64_t)t_below((uint64_t)maxrev + 2);
		size_t n = expect_range(&kr, at, want), i = 0;
		struct kvindex_iter it;
		struct kvindex_hit h;
		int rc;
		kvindex_iter_begin(&it, x, &kr, at, latest);
		while ((rc = kvindex_iter_next(&it, &h)) == 0) {
			T_CHECK(i < n);
			T_CHECK(rev_cmp(h.rev, want[i]) == 0);
			T_CHECK(latest == (h.key != NULL));
			i++;
		}
		T_RC(rc, -ENOENT);
		T_CHECK(i == n);
		T_RC(kvindex_iter_next(&it, &h), -ENOENT);
	}
	free(want);
	free(sorted);
}

static void check_limits(struct btree_db *db)
{
	t_phase = "key limits";
	static uint8_t big[40000];
	memset(big, 'k', sizeof(big));
	T_CHECK(kvindex_key_fits(big, KVINDEX_MAX_KEY_BYTES));
	T_CHECK(!kvindex_key_fits(big, KVINDEX_MAX_KEY_BYTES + 1));
	T_CHECK(!kvindex_key_fits(big, 0));
	big[0] = 0;
	T_CHECK(!kvindex_key_fits(big, KVINDEX_MAX_KEY_BYTES));
	T_CHECK(kvindex_key_fits(big, KVINDEX_MAX_KEY_BYTES - 1));
	big[0] = 'k';

	/* the largest key, written and found; a range starting with a longer
	 * (unstorable) key still finds the keys after it */
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	T_OK(btree_write_begin(db, &t));
	T_OK(kvindex_drop(t));
	T_OK(kvindex_create(t, &x));
	struct mvcc_kv kv = { big, KVINDEX_MAX_KEY_BYTES, (const uint8_t *)"v", 1, 5, 5, 1, 0 };
	uint8_t *enc = malloc(mvcc_kv_encoded_len(&kv));
	size_t n = mvcc_kv_encode(&kv, enc);
	T_OK(kvindex_put(&x, &kv, (struct rev){ 5, 0 }, enc, n));
	struct mvcc_kv kv2 = { (const uint8_t *)"l", 1, (const uint8_t *)"w", 1, 6, 6, 1, 0 };
	uint8_t enc2[64];
	n = mvcc_kv_encode(&kv2, enc2);
	T_OK(kvindex_put(&x, &kv2, (struct rev){ 6, 0 }, enc2, n));
	kv.key_len = KVINDEX_MAX_KEY_BYTES + 1;
	T_RC(kvindex_put(&x, &kv, (struct rev){ 7, 0 }, enc, n), -EINVAL);
	struct rev r;
	bool tomb;
	T_OK(kvindex_history_find(&x, big, KVINDEX_MAX_KEY_BYTES, 9, &r, &tomb));
	T_CHECK(r.main == 5 && !tomb);
	for (int latest = 0; latest < 2; latest++) {
		struct kvindex_range kr;
		struct kvindex_iter it;
		struct kvindex_hit h;
		kvindex_range_from_request(&kr, big, sizeof(big), (const uint8_t *)"", 1);
		kvindex_iter_begin(&it, &x, &kr, 6, latest);
		T_OK(kvindex_iter_next(&it, &h));
		T_CHECK(h.rev.main == 6);
		T_RC(kvindex_iter_next(&it, &h), -ENOENT);
		/* from one byte shorter: the big key itself is first */
		kvindex_range_from_request(&kr, big, KVINDEX_MAX_KEY_BYTES - 1, (const uint8_t *)"", 1);
		kvindex_iter_begin(&it, &x, &kr, 6, latest);
		T_OK(kvindex_iter_next(&it, &h));
		T_CHECK(h.rev.main == 5);
	}
	T_OK(kvindex_history_del(&x, big, KVINDEX_MAX_KEY_BYTES, (struct rev){ 5, 0 }));
	T_RC(kvindex_history_find(&x, big, KVINDEX_MAX_KEY_BYTES, 9, &r, &tomb), -ENOENT);
	T_RC(kvindex_history_del(&x, big, KVINDEX_MAX_KEY_BYTES, (struct rev){ 5, 0 }), -ENOENT);
	free(enc);

	t_phase = "meta";
	struct kvindex_meta m = { .format = KVINDEX_FORMAT, .revision = 77 }, got;
	T_RC(kvindex_meta_read(&x, &got), -ENOENT);
	kvindex_covers_make(&m, 5, -1, (const uint8_t *)"0123456789abcdefgt", 18);
	T_CHECK(m.covers_len == 34);
	T_OK(kvindex_meta_write(&x, &m));
	T_OK(kvindex_meta_read(&x, &got));
	T_CHECK(got.format == KVINDEX_FORMAT && got.revision == 77 && got.covers_len == 34 &&
		memcmp(got.covers, m.covers, 34) == 0);
	T_OK(kvindex_meta_set_revision(&x, 78));
	T_OK(kvindex_meta_read(&x, &got));
	T_CHECK(got.revision == 78);
	btree_txn_end(t);
	kvindex_close(&x);
}

int main(void)
{
	char dir[256], path[300];
	struct btree_db *db;
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	t_set_seed(tm_pick_seed());
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	T_OK(btree_db_open(path, &o, &db));
	memset(bigval, 'v', sizeof(bigval));

	int64_t mains = 1500;
	build(db, mains);
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(kvindex_open(t, &x));
	check_layout(t, &x);
	check_find(&x, mains + 1);
	check_ranges(&x, mains + 1);
	btree_txn_end(t);
	kvindex_close(&x);
	check_limits(db);

	btree_db_close(db);
	t_rmdir(dir);
	free(recs);
	t_no_leaks();
	printf("test_kvindex: ok (seed %" PRIu64 ", %zu revisions)\n", t_seed, nrecs);
	return 0;
}
