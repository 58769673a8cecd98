/*
 * How far the db file grows ahead of its high-water mark (bt_db_grow in
 * stored/btree/dbfile.c): the file always covers the high-water mark that
 * readers are given, never runs more than 1/64 of it (or 256 KiB, for a
 * small file) and a page ahead of it, and is not grown by every commit
 * that adds a page at the end. Checked after every commit of a trickle of
 * one-page appends and of a load of bigger txns, and after the db is
 * reopened. Past 1 GiB the step stops at 16 MiB: checked on a sparse file
 * grown directly (bt_db_grow), which allocates nothing.
 */
#include <sys/stat.h>

#include "btree_util.h"

#include "stored/btree/btree_int.h"

static char dir[256];
static char path[300];

#define PS 4096u
#define GROW_MIN (256u << 10)
#define GROW_MAX (16u << 20)

static uint64_t grows;     /* changes of the file's size seen */
static uint64_t last_size;

/* The file as the db says and as the file system says, against the
 * high-water mark. */
static void check_file(struct btree_db *db)
{
	struct btree_db_stats st;
	struct stat sb;
	btree_db_stats(db, &st);
	T_CHECK(stat(path, &sb) == 0);
	uint64_t hwm = st.hwm_pgid * PS;
	uint64_t ahead = hwm / 64 > GROW_MIN ? hwm / 64 : GROW_MIN;
	if (ahead > GROW_MAX)
		ahead = GROW_MAX;
	if ((uint64_t)sb.st_size != st.file_bytes || st.file_bytes < hwm ||
	    st.file_bytes > hwm + ahead + PS)
		T_FAIL("file %" PRIu64 " bytes (stat %lld), high-water mark %" PRIu64
		       " bytes: more than %" PRIu64 " ahead, or short of it",
		       st.file_bytes, (long long)sb.st_size, hwm, ahead + PS);
	if (st.file_bytes != last_size)
		grows++;
	last_size = st.file_bytes;
}

static void put_at(struct btree_db *db, uint64_t i, size_t vlen)
{
	static uint8_t val[16384];
	struct btree_txn *t;
	struct btree_bucket *b;
	uint8_t k[8];
	for (int j = 0; j < 8; j++)
		k[j] = (uint8_t)(i >> (56 - 8 * j));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
	T_OK(btree_put(b, k, sizeof(k), val, vlen));
	T_OK(btree_commit(t, NULL));
}

/* The step at sizes up to the map's end, on a file that stays sparse:
 * its allocate says -EOPNOTSUPP, so the db grows it with ftruncate, as on
 * a file system without fallocate. Below 1 GiB the step is 1/64 of the
 * size; from 1 GiB on it is 16 MiB; at the map's end, what is left. */
static void test_step_cap(void)
{
	t_phase = "cap";
	char capath[320];
	snprintf(capath, sizeof(capath), "%s/capdb", dir);
	struct diskio_fault_opts fo = diskio_fault_defaults();
	fo.fail_allocate_at = 0;
	fo.fail_repeat = true;
	fo.fail_errno = EOPNOTSUPP;
	const uint64_t map = 4ull << 30;
	struct btree_db_opts o = { .create = true, .map_size = map, .page_size = PS,
				   .io_open = diskio_fault_open_arg, .io_open_arg = &fo };
	struct btree_db *db;
	T_OK(btree_db_open(capath, &o, &db));
	const struct { uint64_t need, step; } cases[] = {
		{ 512ull << 20, 8ull << 20 },          /* 1/64 */
		{ 1ull << 30, GROW_MAX },              /* 1/64 is the cap */
		{ (1ull << 30) + (64ull << 20), GROW_MAX }, /* 1/64 would be 17 MiB */
		{ 2ull << 30, GROW_MAX },              /* 1/64 would be 32 MiB */
		{ map - (4ull << 20), 4ull << 20 },    /* up to the map's end only */
	};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		t_step = c;
		struct btree_db_stats st;
		struct stat sb;
		T_OK(bt_db_grow(db, cases[c].need / PS));
		btree_db_stats(db, &st);
		T_CHECK(stat(capath, &sb) == 0);
		if (st.file_bytes != cases[c].need + cases[c].step || (uint64_t)sb.st_size != st.file_bytes)
			T_FAIL("grown for %" PRIu64 " bytes: file %" PRIu64 " bytes (stat %lld), not %" PRIu64,
			       cases[c].need, st.file_bytes, (long long)sb.st_size,
			       cases[c].need + cases[c].step);
		/* sparse: nothing was written or allocated for the growth */
		T_CHECK((uint64_t)sb.st_blocks * 512 < (1u << 20));
	}
	/* a size it already has: nothing changes */
	T_OK(bt_db_grow(db, (1ull << 30) / PS));
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	T_CHECK(st.file_bytes == map);
	/* the db still commits and checks out on the grown file */
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	T_OK(btree_commit(t, NULL));
	put_at(db, 0, 3000);
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	btree_db_close(db);
	T_CHECK(unlink(capath) == 0);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30, .page_size = PS };
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	T_OK(btree_commit(t, NULL));
	last_size = 4 * PS;

	/* A trickle: each commit appends a value of about a page. */
	t_phase = "trickle";
	uint64_t i = 0, commits = 3000;
	for (; i < commits; i++) {
		t_step = i;
		put_at(db, i, 3000 + t_below(1000));
		if (i % 50 == 49)
			T_OK(btree_db_checkpoint(db, NULL));
		check_file(db);
	}
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	printf("  trickle: %" PRIu64 " commits, %" PRIu64 " pages, %" PRIu64
	       " bytes of file, grown %" PRIu64 " times\n",
	       commits, st.hwm_pgid, st.file_bytes, grows);
	/* 64 pages or more a step: far fewer steps than commits. */
	T_CHECK(st.hwm_pgid > commits / 2 && grows <= st.hwm_pgid / 64 + 2);

	/* Bigger txns, past 16 MiB, where 1/64 is more than the 256 KiB. */
	t_phase = "load";
	for (uint64_t n = 0; n < 400; n++) {
		t_step = n;
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "b", 1, &b));
		for (int k = 0; k < 16; k++, i++) {
			static uint8_t val[16384];
			uint8_t key[8];
			for (int j = 0; j < 8; j++)
				key[j] = (uint8_t)(i >> (56 - 8 * j));
			T_OK(btree_put(b, key, sizeof(key), val, 1000 + t_below(4000)));
		}
		T_OK(btree_commit(t, NULL));
		if (n % 8 == 7)
			T_OK(btree_db_checkpoint(db, NULL));
		check_file(db);
	}
	btree_db_stats(db, &st);
	printf("  load: %" PRIu64 " pages, %" PRIu64 " bytes of file\n", st.hwm_pgid,
	       st.file_bytes);
	T_CHECK(st.hwm_pgid * PS > (24u << 20));
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	btree_db_close(db);

	/* Reopened, it goes on from the file it has. */
	t_phase = "reopen";
	o.create = false;
	T_OK(btree_db_open(path, &o, &db));
	for (uint64_t n = 0; n < 200; n++, i++) {
		t_step = n;
		put_at(db, i, 3000);
		check_file(db);
	}
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	btree_db_close(db);

	test_step_cap();

	t_rmdir(dir);
	t_no_leaks();
	printf("test_dbfile_grow: ok\n");
	return 0;
}
