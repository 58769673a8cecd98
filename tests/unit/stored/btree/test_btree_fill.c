/*
 * How full the engine's splits leave a bucket's leaves (node_write.c),
 * read back with btree_bucket_stats: keys appended in order fill their
 * pages; random inserts at the default fill give a B+tree's usual two
 * thirds or so; and a bucket of runs that grow at their front
 * (btree_bucket_set_runs, as the key index's history) keeps each run's
 * older elements in full pages, where splits at the fill alone leave them
 * about half empty.
 */
#include "btree_util.h"

static char dir[256];
static char path[300];

#define BATCH 64           /* puts a txn */
#define VAL 200u
#define RUN_SUFFIX 16u

struct fill {
	double leaf;           /* leaf_inuse / leaf pages' bytes */
	uint64_t leaves;
};

/* Opens a new db at path, has load() put n keys into bucket "b" in txns
 * of BATCH, then reads back the bucket's stats. */
static struct fill load(void (*put_one)(struct btree_bucket *, uint64_t), uint64_t n,
			uint32_t runs)
{
	struct btree_db *db;
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30, .page_size = 4096 };
	struct btree_txn *t;
	struct btree_bucket *b;
	unlink(path);
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	T_OK(btree_commit(t, NULL));
	for (uint64_t i = 0; i < n;) {
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
		btree_bucket_set_runs(b, runs);
		for (uint64_t k = 0; k < BATCH && i < n; k++, i++) {
			t_step = i;
			put_one(b, i);
		}
		T_OK(btree_commit(t, NULL));
	}
	T_OK(btree_db_check(db));
	struct btree_bucket_stats st;
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
	T_OK(btree_bucket_stats(b, &st));
	btree_txn_end(t);
	btree_db_close(db);
	T_CHECK(st.keys == n && st.overflow_pages == 0 && st.leaf_pages > 0);
	struct fill f = { (double)st.leaf_inuse / ((double)st.leaf_pages * 4096), st.leaf_pages };
	printf("  %-10s %6" PRIu64 " keys in %5" PRIu64 " leaves: fill %.3f\n", t_phase, n,
	       st.leaf_pages, f.leaf);
	return f;
}

static const uint8_t val[VAL];

static void put_be(struct btree_bucket *b, uint64_t i)
{
	uint8_t k[8];
	for (int j = 0; j < 8; j++)
		k[j] = (uint8_t)(i >> (56 - 8 * j));
	T_OK(btree_put(b, k, sizeof(k), val, VAL));
}

/* A random 32-byte key (a repeat, which would overwrite, or two keys
 * equal but for their last RUN_SUFFIX bytes, are as rare as not to matter
 * at these counts). */
static void put_random(struct btree_bucket *b, uint64_t i)
{
	uint64_t k[4] = { t_rand(), t_rand(), t_rand(), t_rand() };
	(void)i;
	T_OK(btree_put(b, k, sizeof(k), val, 40));
}

/* The i-th revision of one of 200 names: the name, then the revision's
 * complement (16 bytes, big-endian), so each name's revisions sort
 * newest first and every put goes in at the front of its run. */
static void put_run(struct btree_bucket *b, uint64_t i)
{
	uint8_t k[16 + RUN_SUFFIX];
	snprintf((char *)k, 17, "name-%011" PRIu64, t_below(200));
	for (int j = 0; j < 16; j++)
		k[16 + j] = (uint8_t)~(j < 8 ? 0 : i >> (120 - 8 * j));
	T_OK(btree_put(b, k, sizeof(k), "p", 1));
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);

	/* In order: every leaf but the last is cut full (one element of
	 * 224 bytes short of the page at most: 0.94 or more). */
	t_phase = "appends";
	struct fill f = load(put_be, 20000, 0);
	T_CHECK(f.leaf >= 0.94);

	/* Random order at the default fill of 0.5: about ln 2 (0.69); a cut
	 * nearer either end leaves less (0.63 at 0.7, 0.35 at 0.9). */
	t_phase = "random";
	f = load(put_random, 20000, 0);
	T_CHECK(f.leaf >= 0.64);
	/* Runs said to be runs: their older elements stay in full pages. */
	t_phase = "random+runs";
	struct fill fr = load(put_random, 20000, RUN_SUFFIX);
	T_CHECK(fr.leaf >= 0.64);

	t_phase = "runs";
	struct fill plain = load(put_run, 40000, 0);
	t_phase = "runs+runs";
	fr = load(put_run, 40000, RUN_SUFFIX);
	T_CHECK(fr.leaf >= 0.7);
	T_CHECK(fr.leaf >= plain.leaf + 0.12);

	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_fill: ok\n");
	return 0;
}
