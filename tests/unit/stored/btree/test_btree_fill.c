/*
 * How full the engine's splits leave a bucket's leaves (node_write.c),
 * read back with btree_bucket_stats: keys appended in order fill their
 * pages; random inserts at the default fill give a B+tree's usual two
 * thirds or so; and a bucket of runs that grow at their front
 * (btree_bucket_set_runs, as the key index's history) keeps each run's
 * older elements in full pages, where splits at the fill alone leave them
 * about half empty. Appended keys may also go to leaves of several pages
 * (btree_bucket_set_append_pages, as the key bucket's), which leave less
 * of each page unused, within a count of elements a leaf may hold.
 */
#include "btree_util.h"

static char dir[256];
static char path[300];

#define BATCH 64           /* puts a txn */
#define VAL 200u
#define RUN_SUFFIX 16u

struct fill {
	double leaf;           /* leaf_inuse / the bytes of leaf and overflow pages */
	uint64_t leaves;       /* leaf nodes (a leaf page and its overflow pages) */
	uint64_t overflow;
};

/* How load() has its txns split: btree_bucket_set_runs's suffix, and
 * btree_bucket_set_append_pages's arguments. */
struct split {
	uint32_t runs;
	uint32_t pages, max_elems;
};

static uint32_t val_size = VAL;  /* put_be's values */

/* Opens a new db at path, has load() put n keys into bucket "b" in txns
 * of batch, then reads back the bucket's stats. */
static struct fill load_in(void (*put_one)(struct btree_bucket *, uint64_t), uint64_t n,
			   struct split sp, uint64_t batch)
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
		btree_bucket_set_runs(b, sp.runs);
		btree_bucket_set_append_pages(b, sp.pages, sp.max_elems);
		for (uint64_t k = 0; k < batch && i < n; k++, i++) {
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
	T_CHECK(st.keys == n && st.leaf_pages > 0);
	T_CHECK(sp.pages > 1 || st.overflow_pages == 0);
	struct fill f = { (double)st.leaf_inuse /
				  ((double)(st.leaf_pages + st.overflow_pages) * 4096),
			  st.leaf_pages, st.overflow_pages };
	printf("  %-12s %6" PRIu64 " keys in %5" PRIu64 " leaves, %5" PRIu64
	       " overflow pages: fill %.3f\n", t_phase, n, st.leaf_pages, st.overflow_pages, f.leaf);
	return f;
}

static struct fill load(void (*put_one)(struct btree_bucket *, uint64_t), uint64_t n,
			uint32_t runs)
{
	return load_in(put_one, n, (struct split){ .runs = runs }, BATCH);
}

static const uint8_t val[512];

static void put_be(struct btree_bucket *b, uint64_t i)
{
	uint8_t k[8];
	for (int j = 0; j < 8; j++)
		k[j] = (uint8_t)(i >> (56 - 8 * j));
	T_OK(btree_put(b, k, sizeof(k), val, val_size));
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

	/* Elements of 324 bytes: 12 fill a page to 0.95; leaves of up to 4
	 * pages, cut in batches of 200 appends (16 pages' worth), hold 25
	 * to 50 and fill their pages to 0.97 or more. */
	val_size = 300;
	t_phase = "appends/324";
	f = load(put_be, 20000, 0);
	T_CHECK(f.leaf < 0.96 && f.overflow == 0);
	t_phase = "appends/324x4";
	struct fill f4 = load_in(put_be, 20000, (struct split){ .pages = 4, .max_elems = 255 },
				 200);
	T_CHECK(f4.leaf >= 0.97 && f4.overflow > 0);
	T_CHECK(f4.leaf >= f.leaf + 0.02);
	/* Appended a few at a time, less than two pages a txn: single pages,
	 * cut full or nearly (11 or 12 elements), not two short (0.80). */
	t_phase = "appends/324x4 by 5";
	f = load_in(put_be, 5000, (struct split){ .pages = 4, .max_elems = 255 }, 5);
	T_CHECK(f.overflow == 0 && f.leaf >= 0.9);
	/* Elements of 32 bytes: a page holds 127; at most 200 a leaf keeps
	 * the leaves to one page (200 would take 1.6 pages). */
	val_size = 8;
	t_phase = "appends/32x4 max 200";
	f = load_in(put_be, 20000, (struct split){ .pages = 4, .max_elems = 200 }, 1000);
	T_CHECK(f.overflow == 0 && f.leaf >= 0.94);
	/* At most 300: leaves of two pages (300 take 2.3), 254 to 255 each. */
	t_phase = "appends/32x4 max 300";
	f = load_in(put_be, 20000, (struct split){ .pages = 4, .max_elems = 300 }, 1000);
	T_CHECK(f.overflow > 0 && f.overflow <= f.leaves && f.leaves >= 20000 / 256);
	val_size = VAL;

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
