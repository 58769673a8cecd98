/*
 * cetcd's index buckets against a brute-force list of (key, revision,
 * tombstone):
 *  - the layout: the latest bucket holds exactly the live keys' newest
 *    revisions (inline KeyValues and references to the key bucket), the
 *    history holds every other revision, each once, in the byte order
 *    (key ascending, revision descending), for keys full of 0x00 and 0xff
 *    bytes; so every key's revisions are its latest entry plus its history,
 *    the latest one newest;
 *  - lookups at a revision, answered by a latest entry or by the history,
 *    and below a key's first revision;
 *  - range walks (one key, [key, end), from key; at the current revision
 *    and at older ones, where the latest bucket and the history merge):
 *    keys with only a latest entry, only history (deleted), both;
 *  - a small history written by hand, its buckets and walks spelled out;
 *  - key size limits, range starts too long to be keys, the meta record;
 *  - a store whose index has another format is rebuilt into this one (and
 *    readers refuse the old one until then);
 *  - long keys' entries as the test reads the format, and the format 4
 *    they bring (and only they).
 * MVCC_SEED=n replays.
 */
#include "mvcc_util.h"

#include "stored/mvcc/kvindex.h"

struct hrec {
	uint8_t key[8];
	size_t klen;
	struct rev rev;
	bool tomb;
	bool in_latest;   /* the newest revision of a live key */
	int64_t version, create, lease;
	size_t vlen;
	size_t kvlen;     /* its KeyValue's encoded bytes (0: a tombstone) */
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

/* The key's latest entry for a write, as the store fetches it: NULL when
 * the key is not live. Checks it against the list on the way. */
static const struct kvindex_entry *prev_entry(struct kvindex *x, const uint8_t *key, size_t klen,
					      long newest, struct kvindex_entry *e)
{
	int rc = kvindex_latest_get(x, key, klen, e);
	if (newest < 0 || recs[newest].tomb) {
		T_RC(rc, -ENOENT);
		return NULL;
	}
	T_OK(rc);
	T_CHECK(rev_cmp(e->mod, recs[newest].rev) == 0);
	return e;
}

static void put_one(struct kvindex *x, struct hrec *h, const struct kvindex_entry *prev)
{
	struct mvcc_kv kv = { h->key, h->klen, bigval, h->vlen, h->create, h->rev.main,
			      h->version, h->lease };
	uint8_t *enc = malloc(mvcc_kv_encoded_len(&kv));
	size_t n = mvcc_kv_encode(&kv, enc);
	h->kvlen = n;
	T_OK(kvindex_put(x, &kv, h->rev, enc, n, prev));
	free(enc);
}

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
	t_phase = "build";
	for (int64_t m = 2; m < mains + 2; m++) {
		int subs = t_chance(100) ? 3 : 1;
		for (int sub = 0; sub < subs; sub++) {
			struct hrec h = { .rev = { m, sub } };
			struct kvindex_entry e;
			t_step = (uint64_t)m;
			random_key(h.key, &h.klen);
			long newest = find(h.key, h.klen, m);
			const struct kvindex_entry *prev = prev_entry(&x, h.key, h.klen, newest, &e);
			/* tombstones of live keys, as deletes write them; now
			 * and then one of a key that is not live, as a rebuild
			 * of an odd file may */
			h.tomb = prev ? t_chance(300) : t_chance(10);
			if (h.tomb) {
				T_OK(kvindex_tombstone(&x, h.key, h.klen, h.rev, prev));
			} else {
				h.version = prev ? recs[newest].version + 1 : 1;
				h.create = prev ? recs[newest].create : m;
				h.lease = t_chance(200) ? (int64_t)t_below(1000) : 0;
				/* KeyValues on both sides of KVINDEX_INLINE_MAX */
				h.vlen = t_chance(50) ? 3000 + t_below(2000) : t_below(100);
				put_one(&x, &h, prev);
			}
			recs[nrecs++] = h;
		}
	}
	T_OK(btree_commit(t, NULL));
	kvindex_close(&x);
	for (size_t i = 0; i < nrecs; i++)
		recs[i].in_latest = !recs[i].tomb &&
				    find(recs[i].key, recs[i].klen, INT64_MAX) == (long)i;
}

static struct hrec *sorted;  /* recs by key, newest first */

static bool first_of_key(size_t i)
{
	return i == 0 || key_cmp(sorted[i - 1].key, sorted[i - 1].klen, sorted[i].key,
				 sorted[i].klen) != 0;
}

static void check_layout(struct kvindex *x)
{
	t_phase = "history holds the superseded revisions";
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	btree_cursor_init(&c, x->history);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		uint8_t key[8];
		size_t klen;
		struct rev r;
		while (i < nrecs && sorted[i].in_latest)
			i++;
		t_step = i;
		T_CHECK(i < nrecs);
		hist_decode(kv.key, kv.key_len, key, &klen, &r);
		T_CHECK(key_cmp(key, klen, sorted[i].key, sorted[i].klen) == 0);
		T_CHECK(rev_cmp(r, sorted[i].rev) == 0);
		T_CHECK(kv.val_len == 1 && kv.val[0] == (sorted[i].tomb ? 't' : 'p'));
	}
	while (i < nrecs && sorted[i].in_latest)
		i++;
	T_CHECK(i == nrecs);

	t_phase = "latest bucket";
	size_t live = 0, only_latest = 0, only_history = 0, both = 0, inlined = 0, refs = 0;
	for (i = 0; i < nrecs; i++) {
		if (!first_of_key(i))
			continue;
		bool more = i + 1 < nrecs && !first_of_key(i + 1);
		struct kvindex_entry e;
		int rc = kvindex_latest_get(x, sorted[i].key, sorted[i].klen, &e);
		t_step = i;
		/* the newest revision is the latest entry exactly when live */
		T_CHECK(sorted[i].in_latest == !sorted[i].tomb);
		if (sorted[i].tomb) {
			T_RC(rc, -ENOENT);
			only_history++;
			continue;
		}
		T_OK(rc);
		live++;
		if (more)
			both++;
		else
			only_latest++;
		T_CHECK(rev_cmp(e.mod, sorted[i].rev) == 0);
		T_CHECK(e.version == sorted[i].version && e.create_rev == sorted[i].create &&
			e.lease == sorted[i].lease);
		if (sorted[i].kvlen > KVINDEX_INLINE_MAX) {
			T_CHECK(e.kv == NULL);
			refs++;
		} else {
			inlined++;
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
	/* the random history has keys of every kind, and entries of both */
	T_CHECK(only_latest > 0 && only_history > 0 && both > 0);
	T_CHECK(inlined > 0 && refs > 0);
}

static void check_find(struct kvindex *x, int64_t maxrev)
{
	t_phase = "history find";
	size_t by_latest = 0, by_history = 0;
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
		if (recs[want].in_latest)
			by_latest++;
		else
			by_history++;
	}
	T_CHECK(by_latest > 0 && by_history > 0);

	t_phase = "history find at a key's edges";
	for (size_t i = 0; i < nrecs; i++) {
		struct rev r;
		bool tomb;
		t_step = i;
		if (!first_of_key(i))
			continue;
		size_t j = i;  /* the key's oldest revision */
		while (j + 1 < nrecs && !first_of_key(j + 1))
			j++;
		const struct hrec *h = &sorted[i];
		T_RC(kvindex_history_find(x, h->key, h->klen, sorted[j].rev.main - 1, &r, &tomb),
		     -ENOENT);
		T_RC(kvindex_history_find(x, h->key, h->klen, -1, &r, &tomb), -ENOENT);
		T_OK(kvindex_history_find(x, h->key, h->klen, sorted[j].rev.main, &r, &tomb));
		/* several changes of a key in one main: the newest of them */
		T_CHECK(r.main == sorted[j].rev.main);
		T_OK(kvindex_history_find(x, h->key, h->klen, h->rev.main, &r, &tomb));
		T_CHECK(rev_cmp(r, h->rev) == 0 && tomb == h->tomb);
		T_OK(kvindex_history_find(x, h->key, h->klen, INT64_MAX, &r, &tomb));
		T_CHECK(rev_cmp(r, h->rev) == 0 && tomb == h->tomb);
	}
}

/* The live keys of a range at `at`, brute force, in key order: the record
 * visible for each. */
static size_t expect_range(const struct kvindex_range *kr, int64_t at, long *out)
{
	size_t n = 0;
	for (size_t i = 0; i < nrecs; i++) {
		if (!first_of_key(i) || !kvindex_range_contains(kr, sorted[i].key, sorted[i].klen))
			continue;
		long w = find(sorted[i].key, sorted[i].klen, at);
		if (w >= 0 && !recs[w].tomb)
			out[n++] = w;
	}
	return n;
}

/* Checks one hit against the record it should show. */
static void check_hit(const struct kvindex_hit *h, const struct hrec *want, bool latest)
{
	T_CHECK(rev_cmp(h->rev, want->rev) == 0);
	/* a hit names its key exactly when it is a latest entry */
	T_CHECK((h->key != NULL) == want->in_latest);
	T_CHECK(!latest || h->key != NULL);
	if (!h->key) {
		T_CHECK(h->kv == NULL);
		return;
	}
	T_CHECK(key_cmp(h->key, h->key_len, want->key, want->klen) == 0);
	T_CHECK((h->kv != NULL) == (want->kvlen <= KVINDEX_INLINE_MAX));
	if (h->kv) {
		struct mvcc_kv f;
		T_OK(mvcc_kv_decode(h->kv, h->kv_len, &f));
		T_CHECK(key_cmp(f.key, f.key_len, want->key, want->klen) == 0);
		T_CHECK(f.mod_rev == want->rev.main && f.value_len == want->vlen);
	}
}

static void check_ranges(struct kvindex *x, int64_t maxrev)
{
	t_phase = "range walks";
	long *want = malloc(nrecs * sizeof(*want));
	size_t hits_latest = 0, hits_history = 0;
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
		int64_t at = latest ? maxrev : (int64_t)t_below((uint64_t)maxrev + 3) - 1;
		size_t n = expect_range(&kr, at, want), i = 0;
		struct kvindex_iter it;
		struct kvindex_hit h;
		int rc;
		kvindex_iter_begin(&it, x, &kr, at, latest);
		while ((rc = kvindex_iter_next(&it, &h)) == 0) {
			T_CHECK(i < n);
			check_hit(&h, &recs[want[i]], latest);
			if (!latest && h.key)
				hits_latest++;
			else if (!latest)
				hits_history++;
			i++;
		}
		T_RC(rc, -ENOENT);
		T_CHECK(i == n);
		T_RC(kvindex_iter_next(&it, &h), -ENOENT);
	}
	/* walks at old revisions took keys from both buckets */
	T_CHECK(hits_latest > 0 && hits_history > 0);
	free(want);
}

/* ---- a history written by hand ---- */

static const struct sop {
	const char *key;
	size_t klen;
	int64_t main, sub;
	bool del;
} sops[] = {
	{ "a", 1, 2, 0, false },             /* K0: only a latest entry */
	{ "a\0", 2, 3, 0, false },           /* K1: history and latest */
	{ "a\0\xff", 3, 4, 0, false },       /* K2: only history (deleted) */
	{ "a\0", 2, 5, 0, false },
	{ "a\0\xff", 3, 6, 0, true },
	{ "a\xff", 2, 7, 0, false },         /* K3: put, delete, put again */
	{ "a\xff", 2, 8, 0, true },
	{ "a\xff", 2, 9, 0, false },
	{ "b", 1, 10, 0, false },            /* K4: created late */
	{ "\xff", 1, 10, 1, false },         /* K5: put and deleted late */
	{ "\xff", 1, 12, 0, true },
};
#define NSOPS (sizeof(sops) / sizeof(sops[0]))

/* The name K0..K5 of a scenario key. */
static int sop_key_id(const uint8_t *key, size_t len)
{
	static const char *const names[] = { "a", "a\0", "a\0\xff", "a\xff", "b", "\xff" };
	static const size_t lens[] = { 1, 2, 3, 2, 1, 1 };
	for (int i = 0; i < 6; i++)
		if (key_cmp(key, len, (const uint8_t *)names[i], lens[i]) == 0)
			return i;
	T_FAIL("a walk returned a key the scenario never wrote");
	return -1;
}

/* Walks a range at `at` and compares the walk, as text, with want:
 * "K<id>@<main>L" for a latest entry, "...H" for a history one. */
static void check_walk(struct kvindex *x, const char *key, size_t klen, const char *end,
		       size_t elen, int64_t at, const char *want)
{
	struct kvindex_range kr;
	struct kvindex_iter it;
	struct kvindex_hit h;
	char got[256];
	size_t w = 0;
	int rc;
	got[0] = 0;
	kvindex_range_from_request(&kr, (const uint8_t *)key, klen, (const uint8_t *)end, elen);
	kvindex_iter_begin(&it, x, &kr, at, false);
	while ((rc = kvindex_iter_next(&it, &h)) == 0) {
		int id = -1;
		if (h.key) {
			id = sop_key_id(h.key, h.key_len);
		} else {
			for (size_t i = 0; i < NSOPS; i++)
				if (sops[i].main == h.rev.main && sops[i].sub == h.rev.sub)
					id = sop_key_id((const uint8_t *)sops[i].key, sops[i].klen);
		}
		w += (size_t)snprintf(got + w, sizeof(got) - w, "%sK%d@%lld%c", w ? " " : "", id,
				      (long long)h.rev.main, h.key ? 'L' : 'H');
		T_CHECK(w < sizeof(got));
	}
	T_RC(rc, -ENOENT);
	if (strcmp(got, want) != 0)
		T_FAIL("walk of a %zu-byte key to a %zu-byte end at %lld: got \"%s\", want \"%s\"",
		       klen, elen, (long long)at, got, want);
}

static void check_scenario(struct btree_db *db)
{
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	t_phase = "scenario";
	T_OK(btree_write_begin(db, &t));
	T_OK(kvindex_drop(t));
	T_OK(kvindex_create(t, &x));
	for (size_t i = 0; i < NSOPS; i++) {
		const struct sop *o = &sops[i];
		const uint8_t *k = (const uint8_t *)o->key;
		struct rev r = { o->main, o->sub };
		struct kvindex_entry e;
		const struct kvindex_entry *prev = NULL;
		t_step = i;
		int rc = kvindex_latest_get(&x, k, o->klen, &e);
		if (rc == 0)
			prev = &e;
		else
			T_RC(rc, -ENOENT);
		if (o->del) {
			T_OK(kvindex_tombstone(&x, k, o->klen, r, prev));
			continue;
		}
		struct mvcc_kv kv = { k, o->klen, (const uint8_t *)"v", 1, o->main, o->main, 1, 0 };
		uint8_t enc[64];
		size_t n = mvcc_kv_encode(&kv, enc);
		T_OK(kvindex_put(&x, &kv, r, enc, n, prev));
	}

	/* the buckets, entry by entry */
	static const struct { const char *key; size_t klen; int64_t main, sub; char mark; } hist[] = {
		{ "a\0", 2, 3, 0, 'p' },
		{ "a\0\xff", 3, 6, 0, 't' },
		{ "a\0\xff", 3, 4, 0, 'p' },
		{ "a\xff", 2, 8, 0, 't' },
		{ "a\xff", 2, 7, 0, 'p' },
		{ "\xff", 1, 12, 0, 't' },
		{ "\xff", 1, 10, 1, 'p' },
	};
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	btree_cursor_init(&c, x.history);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		uint8_t key[8];
		size_t klen;
		struct rev r;
		T_CHECK(i < sizeof(hist) / sizeof(hist[0]));
		hist_decode(kv.key, kv.key_len, key, &klen, &r);
		T_CHECK(key_cmp(key, klen, (const uint8_t *)hist[i].key, hist[i].klen) == 0);
		T_CHECK(r.main == hist[i].main && r.sub == hist[i].sub);
		T_CHECK(kv.val_len == 1 && kv.val[0] == hist[i].mark);
	}
	T_CHECK(i == sizeof(hist) / sizeof(hist[0]));
	static const struct { const char *key; size_t klen; int64_t main; } lat[] = {
		{ "a", 1, 2 }, { "a\0", 2, 5 }, { "a\xff", 2, 9 }, { "b", 1, 10 },
	};
	i = 0;
	btree_cursor_init(&c, x.latest);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		struct kvindex_entry e;
		T_CHECK(i < sizeof(lat) / sizeof(lat[0]));
		T_CHECK(key_cmp(kv.key, kv.key_len, (const uint8_t *)lat[i].key, lat[i].klen) == 0);
		T_OK(kvindex_latest_get(&x, kv.key, kv.key_len, &e));
		T_CHECK(e.mod.main == lat[i].main && e.kv != NULL);
	}
	T_CHECK(i == sizeof(lat) / sizeof(lat[0]));

	/* walks at each revision: everything from "a" on, [a\0, a\xff),
	 * [a\0\xff, b), and single keys */
	static const struct {
		int64_t at;
		const char *from_a, *to, *to2, *one_k2, *one_k3;
	} want[] = {
		{ -1, "", "", "", "", "" },
		{ 1, "", "", "", "", "" },
		{ 2, "K0@2L", "", "", "", "" },
		{ 3, "K0@2L K1@3H", "K1@3H", "", "", "" },
		{ 4, "K0@2L K1@3H K2@4H", "K1@3H K2@4H", "K2@4H", "K2@4H", "" },
		{ 5, "K0@2L K1@5L K2@4H", "K1@5L K2@4H", "K2@4H", "K2@4H", "" },
		{ 6, "K0@2L K1@5L", "K1@5L", "", "", "" },
		{ 7, "K0@2L K1@5L K3@7H", "K1@5L", "K3@7H", "", "K3@7H" },
		{ 8, "K0@2L K1@5L", "K1@5L", "", "", "" },
		{ 9, "K0@2L K1@5L K3@9L", "K1@5L", "K3@9L", "", "K3@9L" },
		{ 10, "K0@2L K1@5L K3@9L K4@10L K5@10H", "K1@5L", "K3@9L", "", "K3@9L" },
		{ 11, "K0@2L K1@5L K3@9L K4@10L K5@10H", "K1@5L", "K3@9L", "", "K3@9L" },
		{ 12, "K0@2L K1@5L K3@9L K4@10L", "K1@5L", "K3@9L", "", "K3@9L" },
		{ INT64_MAX, "K0@2L K1@5L K3@9L K4@10L", "K1@5L", "K3@9L", "", "K3@9L" },
	};
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int64_t at = want[i].at;
		t_step = i;
		check_walk(&x, "a", 1, "", 1, at, want[i].from_a);
		check_walk(&x, "a\0", 2, "a\xff", 2, at, want[i].to);
		check_walk(&x, "a\0\xff", 3, "b", 1, at, want[i].to2);
		check_walk(&x, "a\0\xff", 3, NULL, 0, at, want[i].one_k2);
		check_walk(&x, "a\xff", 2, NULL, 0, at, want[i].one_k3);
	}
	/* a start between keys, and ranges that hold no key */
	check_walk(&x, "a\0\x01", 3, "", 1, 7, "K3@7H");
	check_walk(&x, "a\0\x01", 3, "a\0\xfe", 3, 5, "");
	check_walk(&x, "c", 1, "", 1, 11, "K5@10H");

	/* a put or tombstone must be newer than the entry it supersedes */
	struct kvindex_entry e;
	T_OK(kvindex_latest_get(&x, (const uint8_t *)"a", 1, &e));
	struct mvcc_kv stale = { (const uint8_t *)"a", 1, (const uint8_t *)"v", 1, 2, 2, 2, 0 };
	uint8_t enc[64];
	size_t n = mvcc_kv_encode(&stale, enc);
	T_RC(kvindex_put(&x, &stale, (struct rev){ 2, 0 }, enc, n, &e), -EUCLEAN);
	T_CHECK(strstr(errmsg_get(-EUCLEAN), "latest entry is 2_0") != NULL);
	T_RC(kvindex_tombstone(&x, (const uint8_t *)"a", 1, (struct rev){ 1, 5 }, &e), -EUCLEAN);
	btree_txn_end(t);
	kvindex_close(&x);
}

static void check_limits(struct btree_db *db)
{
	t_phase = "key limits";
	static uint8_t big[40000];
	memset(big, 'k', sizeof(big));

	/* the largest whole key, written, superseded and found; a range
	 * starting with a longer key (none stored) finds the keys after it;
	 * only the empty key is refused */
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	T_OK(btree_write_begin(db, &t));
	T_OK(kvindex_drop(t));
	T_OK(kvindex_create(t, &x));
	struct mvcc_kv kv = { big, KVINDEX_WHOLE_KEY_BYTES, (const uint8_t *)"v", 1, 5, 5, 1, 0 };
	uint8_t *enc = malloc(mvcc_kv_encoded_len(&kv));
	size_t n = mvcc_kv_encode(&kv, enc);
	T_OK(kvindex_put(&x, &kv, (struct rev){ 5, 0 }, enc, n, NULL));
	struct kvindex_entry e;
	T_OK(kvindex_latest_get(&x, big, KVINDEX_WHOLE_KEY_BYTES, &e));
	kv.mod_rev = 7;
	kv.version = 2;
	n = mvcc_kv_encode(&kv, enc);
	T_OK(kvindex_put(&x, &kv, (struct rev){ 7, 0 }, enc, n, &e));
	struct mvcc_kv kv2 = { (const uint8_t *)"l", 1, (const uint8_t *)"w", 1, 6, 6, 1, 0 };
	uint8_t enc2[64];
	size_t n2 = mvcc_kv_encode(&kv2, enc2);
	T_OK(kvindex_put(&x, &kv2, (struct rev){ 6, 0 }, enc2, n2, NULL));
	kv.key_len = 0;
	T_RC(kvindex_put(&x, &kv, (struct rev){ 8, 0 }, enc, n, NULL), -EINVAL);
	kv.key_len = KVINDEX_WHOLE_KEY_BYTES;
	T_RC(kvindex_tombstone(&x, big, 0, (struct rev){ 8, 0 }, NULL), -EINVAL);
	T_CHECK(!x.long_keys);
	struct rev r;
	bool tomb;
	T_OK(kvindex_history_find(&x, big, KVINDEX_WHOLE_KEY_BYTES, 9, &r, &tomb));
	T_CHECK(r.main == 7 && !tomb);
	T_OK(kvindex_history_find(&x, big, KVINDEX_WHOLE_KEY_BYTES, 6, &r, &tomb));
	T_CHECK(r.main == 5 && !tomb);
	T_RC(kvindex_history_find(&x, big, KVINDEX_WHOLE_KEY_BYTES + 1, 9, &r, &tomb), -ENOENT);
	for (int latest = 0; latest < 2; latest++) {
		struct kvindex_range kr;
		struct kvindex_iter it;
		struct kvindex_hit h;
		int64_t at = latest ? 7 : 6;
		kvindex_range_from_request(&kr, big, sizeof(big), (const uint8_t *)"", 1);
		kvindex_iter_begin(&it, &x, &kr, at, latest);
		T_OK(kvindex_iter_next(&it, &h));
		T_CHECK(h.rev.main == 6);
		T_RC(kvindex_iter_next(&it, &h), -ENOENT);
		/* from one byte shorter: the big key itself is first */
		kvindex_range_from_request(&kr, big, KVINDEX_WHOLE_KEY_BYTES - 1, (const uint8_t *)"", 1);
		kvindex_iter_begin(&it, &x, &kr, at, latest);
		T_OK(kvindex_iter_next(&it, &h));
		T_CHECK(h.rev.main == (latest ? 7 : 5));
		/* a longer end than any key: [big, big + 'k') holds the big key */
		kvindex_range_from_request(&kr, big, KVINDEX_WHOLE_KEY_BYTES, big, sizeof(big));
		kvindex_iter_begin(&it, &x, &kr, at, latest);
		T_OK(kvindex_iter_next(&it, &h));
		T_CHECK(h.rev.main == (latest ? 7 : 5));
		T_RC(kvindex_iter_next(&it, &h), -ENOENT);
	}
	/* compaction removes superseded revisions; the latest entry stays */
	T_OK(kvindex_history_del(&x, big, KVINDEX_WHOLE_KEY_BYTES, (struct rev){ 5, 0 }));
	T_RC(kvindex_history_find(&x, big, KVINDEX_WHOLE_KEY_BYTES, 6, &r, &tomb), -ENOENT);
	T_OK(kvindex_history_find(&x, big, KVINDEX_WHOLE_KEY_BYTES, 9, &r, &tomb));
	T_CHECK(r.main == 7);
	T_RC(kvindex_history_del(&x, big, KVINDEX_WHOLE_KEY_BYTES, (struct rev){ 5, 0 }), -ENOENT);
	T_RC(kvindex_history_del(&x, big, KVINDEX_WHOLE_KEY_BYTES, (struct rev){ 7, 0 }), -ENOENT);
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

/* ---- an index of another format, in a store ---- */

static void store_put(struct tdb *d, const char *k, size_t klen, const char *v)
{
	tdb_begin(d);
	tdb_put(d, k, klen, v);
	tdb_commit(d);
}

static void store_del(struct tdb *d, const char *k)
{
	DeleteRequest q = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	DeleteResponse *resp;
	q.key = tb(k);
	tdb_begin(d);
	tdb_entry(d);
	T_OK(mvcc_delete_range(d->s, &q, &d->a, &resp));
	T_CHECK(resp->deleted == 1);
	tdb_commit(d);
}

static void check_format_rebuild(void)
{
	struct tdb d;
	struct tbuf before = { 0 }, after = { 0 };
	struct btree_txn *t;
	struct kvindex x;
	struct kvindex_meta m;
	struct mvcc_state st;
	t_phase = "index of another format";
	tdb_init(&d, NULL);
	store_put(&d, "k1", 2, "a");        /* 2 */
	store_put(&d, "k2", 2, "b");        /* 3 */
	store_put(&d, "k1", 2, "c");        /* 4 */
	store_del(&d, "k2");                /* 5 */
	store_put(&d, "k\0\xff", 3, "d");   /* 6 */
	store_put(&d, "k2", 2, "e");        /* 7 */
	tdb_dump(&d, tm_is_index_bucket, &before);

	/* what format 1 looked like: every revision in the history, and the
	 * format number 1 */
	kvindex_init(&x);
	T_OK(btree_write_begin(d.db, &t));
	T_OK(kvindex_open(t, &x));
	T_OK(kvindex_meta_read(&x, &m));
	T_CHECK(m.format == KVINDEX_FORMAT_WHOLE);
	m.format = 1;
	T_OK(kvindex_meta_write(&x, &m));
	static const uint8_t k1_at4[] = { 'k', '1', 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					  0xff, 0xff };
	T_OK(btree_put(x.history, k1_at4, sizeof(k1_at4), "p", 1));
	T_OK(btree_commit(t, NULL));
	kvindex_close(&x);
	T_OK(btree_db_checkpoint(d.db, NULL));

	/* a reader refuses it, saying why */
	struct mvcc_view v;
	T_OK(btree_db_read_begin(d.db, NULL, &t));
	T_RC(mvcc_view_open(t, &v), -EUCLEAN);
	T_CHECK(strstr(errmsg_get(-EUCLEAN), "format 1") != NULL);
	btree_txn_end(t);

	/* the store rebuilds it as this build writes it */
	tdb_reopen(&d, true);
	mvcc_store_state(d.s, &st);
	T_CHECK(st.rebuilt && st.rev == 7);
	tdb_dump(&d, tm_is_index_bucket, &after);
	tm_same_dump(&after, &before, "index rebuilt from format 1");
	tdb_reopen(&d, true);
	mvcc_store_state(d.s, &st);
	T_CHECK(!st.rebuilt);
	tbuf_free(&before);
	tbuf_free(&after);
	tdb_free(&d);
}

/* The format in the index meta of d's file. */
static uint64_t meta_format(struct tdb *d)
{
	struct btree_txn *t;
	struct kvindex x;
	struct kvindex_meta m;
	kvindex_init(&x);
	T_OK(btree_db_read_begin(d->db, NULL, &t));
	T_OK(kvindex_open(t, &x));
	T_OK(kvindex_meta_read(&x, &m));
	btree_txn_end(t);
	kvindex_close(&x);
	return m.format;
}

/* Checks the one entry of bucket b whose key is len bytes long and
 * starts with p (plen bytes): its tag (returned) and revision. */
static unsigned long_entry(struct btree_bucket *b, size_t len, const uint8_t *p, size_t plen,
			   uint64_t main, uint64_t sub, uint8_t val0)
{
	struct btree_cursor c;
	struct btree_kv kv;
	int n = 0;
	unsigned tag = 0;
	btree_cursor_init(&c, b);
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		if (kv.key_len != len)
			continue;
		n++;
		T_CHECK(memcmp(kv.key, p, plen) == 0);
		tag = (unsigned)kv.key[plen] << 8 | kv.key[plen + 1];
		T_CHECK(tag & 0x8000);
		T_CHECK(rev_get_be64(kv.key + plen + 2) == main);
		T_CHECK(rev_get_be64(kv.key + plen + 10) == sub);
		T_CHECK(kv.val_len > 0 && kv.val[0] == val0);
	}
	T_CHECK(n == 1);
	return tag;
}

/*
 * Long keys: a key over 32,750 bytes is filed under its first 32,750
 * bytes, a tag and the revision (escaped and complemented in the
 * history), 32768 bytes; the meta format is 3 until such an entry is
 * written, 4 from then on (also after a reopen, and when the index is
 * rebuilt from the key bucket).
 */
static void check_format_long(void)
{
	struct tdb d;
	struct tbuf before = { 0 }, after = { 0 };
	struct btree_txn *t;
	struct kvindex x;
	struct mvcc_state st;
	static uint8_t lk[40000], esc[32750];
	t_phase = "long keys' entries and format";
	memset(lk, 'L', sizeof(lk));
	lk[100] = 0;  /* escaped: 0x00 0xff, so the history's prefix is one byte shorter */
	memcpy(esc, lk, 101);
	esc[101] = 0xff;
	memcpy(esc + 102, lk + 101, sizeof(esc) - 102);
	tdb_init(&d, NULL);
	store_put(&d, "a", 1, "1");                          /* 2 */
	T_CHECK(meta_format(&d) == KVINDEX_FORMAT_WHOLE);
	store_put(&d, (const char *)lk, sizeof(lk), "2");   /* 3 */
	store_put(&d, (const char *)lk, sizeof(lk), "3");   /* 4 */
	T_CHECK(meta_format(&d) == KVINDEX_FORMAT);

	kvindex_init(&x);
	T_OK(btree_db_read_begin(d.db, NULL, &t));
	T_OK(kvindex_open(t, &x));
	unsigned lt = long_entry(x.latest, 32768, lk, KVINDEX_WHOLE_KEY_BYTES, 4, 0, 'v');
	unsigned ht = long_entry(x.history, 32768, esc, KVINDEX_WHOLE_KEY_BYTES, ~3ull, ~0ull, 'p');
	T_CHECK(lt == ht);
	btree_txn_end(t);
	kvindex_close(&x);

	/* a reopened store keeps format 4 through commits of short keys */
	tdb_reopen(&d, true);
	store_put(&d, "b", 1, "4");                          /* 5 */
	T_CHECK(meta_format(&d) == KVINDEX_FORMAT);
	tdb_dump(&d, tm_is_index_bucket, &before);

	/* an index of format 1 is rebuilt as format 4, entry for entry */
	kvindex_init(&x);
	T_OK(btree_write_begin(d.db, &t));
	T_OK(kvindex_open(t, &x));
	T_OK(btree_put(x.meta, SCHEMA_KV_META_FORMAT, SCHEMA_LEN(SCHEMA_KV_META_FORMAT),
		       "\0\0\0\0\0\0\0\1", 8));
	T_OK(btree_commit(t, NULL));
	kvindex_close(&x);
	T_OK(btree_db_checkpoint(d.db, NULL));
	T_CHECK(meta_format(&d) == 1);
	tdb_reopen(&d, true);
	mvcc_store_state(d.s, &st);
	T_CHECK(st.rebuilt && st.rev == 5);
	T_CHECK(meta_format(&d) == KVINDEX_FORMAT);
	tdb_dump(&d, tm_is_index_bucket, &after);
	tm_same_dump(&after, &before, "index of long keys rebuilt");
	tbuf_free(&before);
	tbuf_free(&after);
	tdb_free(&d);
}

static void be64(uint8_t *p, int64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)((uint64_t)v >> (56 - 8 * i));
}

/* Format 2 wrote references as 'r' and five 8-byte fields; this build
 * writes varints ('v'), reads both, and takes a format 2 index as it is. A
 * 'v' entry cut short, or with bytes past its fields, is refused. */
static void check_format_2(void)
{
	struct tdb d;
	struct btree_txn *t;
	struct kvindex x;
	struct kvindex_meta m;
	struct kvindex_entry e, got;
	struct mvcc_state st;
	char big[200];
	t_phase = "index of format 2";
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	tdb_init(&d, NULL);
	store_put(&d, "big", 3, big);       /* 2 */
	store_put(&d, "big", 3, big);       /* 3: version 2 */

	kvindex_init(&x);
	T_OK(btree_write_begin(d.db, &t));
	T_OK(kvindex_open(t, &x));
	T_OK(kvindex_latest_get(&x, (const uint8_t *)"big", 3, &e));
	T_CHECK(e.kv == NULL && e.mod.main == 3 && e.create_rev == 2 && e.version == 2);
	const uint8_t *v;
	size_t vlen;
	T_OK(btree_get(x.latest, "big", 3, &v, &vlen));
	T_CHECK(vlen < 16 && v[0] == 'v');
	uint8_t r[41] = { 'r' };
	be64(r + 1, e.mod.main);
	be64(r + 9, e.mod.sub);
	be64(r + 17, e.create_rev);
	be64(r + 25, e.version);
	be64(r + 33, e.lease);
	T_OK(btree_put(x.latest, "big", 3, r, sizeof(r)));
	T_OK(kvindex_meta_read(&x, &m));
	m.format = 2;
	T_OK(kvindex_meta_write(&x, &m));
	T_OK(btree_commit(t, NULL));
	kvindex_close(&x);

	tdb_reopen(&d, true);
	mvcc_store_state(d.s, &st);
	T_CHECK(!st.rebuilt && st.rev == 3);
	T_OK(btree_db_read_begin(d.db, NULL, &t));
	T_OK(kvindex_open(t, &x));
	T_OK(kvindex_latest_get(&x, (const uint8_t *)"big", 3, &got));
	T_CHECK(got.kv == NULL && rev_cmp(got.mod, e.mod) == 0 && got.create_rev == 2 &&
		got.version == 2 && got.lease == e.lease);
	kvindex_close(&x);
	btree_txn_end(t);

	static const uint8_t cut[] = { 'v', 3, 0, 2, 0x80 }, extra[] = { 'v', 3, 0, 2, 2, 0, 7 };
	const struct { const uint8_t *b; size_t n; } bad[] = { { cut, sizeof(cut) },
								 { extra, sizeof(extra) } };
	for (size_t i = 0; i < 2; i++) {
		T_OK(btree_write_begin(d.db, &t));
		T_OK(kvindex_open(t, &x));
		T_OK(btree_put(x.latest, "big", 3, bad[i].b, bad[i].n));
		T_RC(kvindex_latest_get(&x, (const uint8_t *)"big", 3, &got), -EUCLEAN);
		kvindex_close(&x);
		btree_txn_end(t);
	}
	tdb_free(&d);
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
	sorted = malloc(nrecs * sizeof(*sorted));
	memcpy(sorted, recs, nrecs * sizeof(*sorted));
	qsort(sorted, nrecs, sizeof(*sorted), hrec_order);
	struct btree_txn *t;
	struct kvindex x;
	kvindex_init(&x);
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(kvindex_open(t, &x));
	check_layout(&x);
	check_find(&x, mains + 1);
	check_ranges(&x, mains + 1);
	btree_txn_end(t);
	kvindex_close(&x);
	check_scenario(db);
	check_limits(db);

	btree_db_close(db);
	t_rmdir(dir);
	check_format_rebuild();
	check_format_2();
	check_format_long();
	free(sorted);
	free(recs);
	t_no_leaks();
	printf("test_kvindex: ok (seed %" PRIu64 ", %zu revisions)\n", t_seed, nrecs);
	return 0;
}
