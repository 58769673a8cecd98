/*
 * Lookups of several keys at once: btree_get_many must answer exactly as
 * btree_get does key by key (present, absent, a nested bucket's name, keys
 * it refuses, values on overflow pages) in read txns, where it walks the
 * tree level by level for all keys, and in write txns and inline buckets,
 * where it goes key by key; and the MVCC view's prefetch
 * (mvcc_view_prefetch) must leave every single-key Range answering
 * byte for byte as without it, whatever order the keys are asked in.
 * MVCC_SEED=n replays a seed.
 */
#include "mvcc_util.h"

enum { NKEYS = 4000 };

static uint8_t *keys[NKEYS];
static size_t klens[NKEYS];

/* Keys of 1 to 120 bytes, many sharing long prefixes, some with 0x00 and
 * 0xff bytes; duplicates are harmless (the last put wins). */
static void make_keys(void)
{
	static const char *const prefix[] = { "", "/registry/pods/default/", "/registry/", "k" };
	for (int i = 0; i < NKEYS; i++) {
		const char *p = prefix[t_below(4)];
		size_t pl = strlen(p), extra = 1 + t_below(t_chance(100) ? 100 : 12);
		klens[i] = pl + extra;
		keys[i] = t_xmalloc(klens[i]);
		memcpy(keys[i], p, pl);
		for (size_t j = 0; j < extra; j++)
			keys[i][pl + j] = t_chance(50) ? (uint8_t)(t_chance(500) ? 0x00 : 0xff)
						       : (uint8_t)('a' + t_below(26));
	}
}

/* Compares btree_get_many on n picked keys with btree_get on each. */
static void same_as_get(struct btree_bucket *b, size_t n, const uint8_t *const *k,
			const size_t *kl)
{
	const uint8_t *vals[BTREE_GET_MANY_MAX];
	size_t vlens[BTREE_GET_MANY_MAX];
	int rcs[BTREE_GET_MANY_MAX];
	T_OK(btree_get_many(b, n, k, kl, vals, vlens, rcs));
	for (size_t i = 0; i < n; i++) {
		const uint8_t *v;
		size_t vl;
		int rc = btree_get(b, k[i], kl[i], &v, &vl);
		t_step = i;
		T_CHECK(rcs[i] == rc);
		if (rc == 0)
			T_CHECK(vals[i] == v && vlens[i] == vl);
	}
}

/* n keys: from the set, absent ones, and now and then a nested bucket's
 * name or an empty key. */
static size_t pick(const uint8_t **k, size_t *kl, uint8_t absent[][8])
{
	size_t n = 1 + t_below(BTREE_GET_MANY_MAX);
	for (size_t i = 0; i < n; i++) {
		uint64_t r = t_below(100);
		if (r < 80) {
			size_t j = t_below(NKEYS);
			k[i] = keys[j];
			kl[i] = klens[j];
		} else if (r < 96) {
			for (int j = 0; j < 8; j++)
				absent[i][j] = (uint8_t)t_below(256);
			k[i] = absent[i];
			kl[i] = 1 + t_below(8);
		} else if (r < 99) {
			k[i] = (const uint8_t *)"nested";
			kl[i] = 6;
		} else {
			k[i] = (const uint8_t *)"";
			kl[i] = 0;
		}
	}
	return n;
}

static void test_btree(void)
{
	t_phase = "btree_get_many";
	char dir[256], path[300];
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	struct btree_txn *t;
	struct btree_bucket *b, *nested, *small;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	T_OK(btree_bucket_create(t, b, "nested", 6, &nested));
	T_OK(btree_bucket_create(t, NULL, "small", 5, &small));
	uint8_t *big = t_xmalloc(9000);
	for (int i = 0; i < 9000; i++)
		big[i] = (uint8_t)i;
	for (int i = 0; i < NKEYS; i++) {
		size_t vl = t_chance(20) ? 4000 + t_below(5000) : t_below(300);
		T_OK(btree_put(b, keys[i], klens[i], big + t_below(9000 - vl + 1), vl));
	}
	for (int i = 0; i < 3; i++)
		T_OK(btree_put(small, keys[i], klens[i], "v", 1));
	T_OK(btree_commit(t, NULL));

	/* read txns: level by level */
	const uint8_t *k[BTREE_GET_MANY_MAX];
	size_t kl[BTREE_GET_MANY_MAX];
	uint8_t absent[BTREE_GET_MANY_MAX][8];
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
	T_OK(btree_bucket_open(t, NULL, "small", 5, &small));
	for (int round = 0; round < 400; round++) {
		size_t n = pick(k, kl, absent);
		same_as_get(b, n, k, kl);
		same_as_get(small, n, k, kl);  /* inline: key by key */
	}
	/* every key of the set, in groups */
	for (int i = 0; i + BTREE_GET_MANY_MAX <= NKEYS; i += BTREE_GET_MANY_MAX)
		same_as_get(b, BTREE_GET_MANY_MAX, (const uint8_t *const *)&keys[i], &klens[i]);
	const uint8_t *vals[BTREE_GET_MANY_MAX + 1];
	size_t vlens[BTREE_GET_MANY_MAX + 1];
	int rcs[BTREE_GET_MANY_MAX + 1];
	const uint8_t *many[BTREE_GET_MANY_MAX + 1];
	size_t many_l[BTREE_GET_MANY_MAX + 1];
	for (int i = 0; i <= BTREE_GET_MANY_MAX; i++) {
		many[i] = keys[i];
		many_l[i] = klens[i];
	}
	T_RC(btree_get_many(b, BTREE_GET_MANY_MAX + 1, many, many_l, vals, vlens, rcs), -EINVAL);
	T_OK(btree_get_many(b, 0, many, many_l, vals, vlens, rcs));
	btree_txn_end(t);

	/* a write txn sees its own changes: key by key */
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
	for (int round = 0; round < 50; round++) {
		size_t n = pick(k, kl, absent);
		for (size_t i = 0; i < n / 2; i++)
			if (kl[i] > 0 && !(kl[i] == 6 && memcmp(k[i], "nested", 6) == 0))
				T_OK(btree_put(b, k[i], kl[i], "changed", 7));
		same_as_get(b, n, k, kl);
	}
	btree_txn_end(t);
	free(big);
	btree_db_close(db);
	t_rmdir(dir);
}

/* ---- the MVCC view's prefetch ---- */

static void test_prefetch(void)
{
	t_phase = "mvcc_view_prefetch";
	struct tdb d;
	tdb_init(&d, NULL);
	/* two rounds of puts (some keys twice) and some deletes */
	for (int round = 0; round < 2; round++) {
		tdb_begin(&d);
		for (int i = round; i < NKEYS; i += 1 + round)
			tdb_put(&d, keys[i], klens[i], round ? "second" : "first");
		tdb_commit(&d);
	}
	tdb_begin(&d);
	for (int i = 0; i < NKEYS; i += 7) {
		DeleteRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
		DeleteResponse *resp;
		req.key = tbn(keys[i], klens[i]);
		tdb_entry(&d);
		T_OK(mvcc_delete_range(d.s, &req, &d.a, &resp));
	}
	tdb_commit(&d);

	struct btree_txn *t1, *t2;
	struct mvcc_view v1, v2;
	T_OK(btree_db_read_begin(d.db, &d.root, &t1));
	T_OK(btree_db_read_begin(d.db, &d.root, &t2));
	T_OK(mvcc_view_open(t1, &v1));
	T_OK(mvcc_view_open(t2, &v2));
	const uint8_t *k[BTREE_GET_MANY_MAX];
	size_t kl[BTREE_GET_MANY_MAX];
	uint8_t absent[BTREE_GET_MANY_MAX][8];
	for (int round = 0; round < 300; round++) {
		size_t n = pick(k, kl, absent);
		T_OK(mvcc_view_prefetch(&v1, n, k, kl));
		/* asked in another order, some twice, at the current revision
		 * and (now and then) an older one */
		for (size_t j = 0; j < n + 4; j++) {
			size_t i = t_chance(700) ? j % n : t_below(n);
			int64_t rev = t_chance(100) ? 2 + (int64_t)t_below(3) : 0;
			struct tbuf a = { 0 }, b = { 0 };
			t_step = (uint64_t)round * 1000 + j;
			tm_range_bytes(&v1, k[i], kl[i], rev, &a);
			tm_range_bytes(&v2, k[i], kl[i], rev, &b);
			T_CHECK(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
			tbuf_free(&a);
			tbuf_free(&b);
		}
	}
	T_RC(mvcc_view_prefetch(&v1, BTREE_GET_MANY_MAX + 1, k, kl), -EINVAL);
	mvcc_view_close(&v1);
	mvcc_view_close(&v2);
	btree_txn_end(t1);
	btree_txn_end(t2);
	tdb_free(&d);
}

int main(void)
{
	t_set_seed(tm_pick_seed());
	make_keys();
	test_btree();
	test_prefetch();
	for (int i = 0; i < NKEYS; i++)
		free(keys[i]);
	t_no_leaks();
	printf("test_btree_getmany: ok\n");
	return 0;
}
