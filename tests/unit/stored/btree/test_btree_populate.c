/*
 * A db mapping is populated when it is made (dbfile_read.c's bt_map_init, as etcd
 * maps bbolt with MAP_POPULATE): right after btree_reader_open, before it
 * reads a single page, the reader's mapping of a db of a few MiB already
 * has the whole file in its page tables (the mapping's Rss in
 * /proc/self/smaps), and the pages past the file's end are not mapped.
 * The writer's own mapping is checked the same way after a reopen.
 */
#include <sys/stat.h>

#include "btree_util.h"

static char dir[256];
static char path[300];

/* The Rss (bytes) of this process's mapping of path, or -1 when there is
 * none; fails the test on two. */
static long long mapping_rss(const char *file)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[1024];
	bool in = false;
	int found = 0;
	long long rss = -1;

	if (!f)
		T_FAIL("open /proc/self/smaps: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		int n = 0;
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %n", &lo, &hi, &n) == 2 && n > 0) {
			char *name = line + n;
			name[strcspn(name, "\n")] = '\0';
			in = strcmp(name, file) == 0;
			found += in;
			continue;
		}
		long long kb;
		if (in && sscanf(line, "Rss: %lld kB", &kb) == 1)
			rss = kb * 1024;
	}
	fclose(f);
	if (found > 1)
		T_FAIL("%d mappings of %s", found, file);
	return rss;
}

static off_t file_size(const char *file)
{
	struct stat st;
	if (stat(file, &st) != 0)
		T_FAIL("stat %s: %s", file, strerror(errno));
	return st.st_size;
}

/* A db of about 8 MiB: 2,000 values of 4 KiB in one bucket, durable. */
static void fill(void)
{
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *b;
	struct btree_root root;
	uint8_t val[4000];
	struct btree_db_opts o = { .create = true };

	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	for (uint32_t i = 0; i < 2000; i++) {
		uint8_t key[4] = { (uint8_t)(i >> 24), (uint8_t)(i >> 16), (uint8_t)(i >> 8),
				   (uint8_t)i };
		memset(val, (int)(i & 0xFF), sizeof(val));
		T_OK(btree_put(b, key, sizeof(key), val, sizeof(val)));
	}
	T_OK(btree_commit(t, &root));
	T_OK(btree_db_checkpoint(db, &root));
	btree_db_close(db);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_phase = "populate";
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	fill();
	off_t size = file_size(path);
	T_CHECK(size >= 8 << 20);

	struct btree_reader *r;
	T_OK(btree_reader_open(path, NULL, &r));
	long long rss = mapping_rss(path);
	if (rss < (long long)size * 95 / 100 || rss > (long long)size)
		T_FAIL("a reader's fresh mapping has %lld bytes of a %lld-byte file in its page "
		       "tables (want all of the file, nothing past it)", rss, (long long)size);
	btree_reader_close(r);
	T_CHECK(mapping_rss(path) == -1);

	struct btree_db *db;
	T_OK(btree_db_open(path, NULL, &db));
	rss = mapping_rss(path);
	if (rss < (long long)size * 95 / 100)
		T_FAIL("the writer's mapping has %lld bytes of a %lld-byte file in its page tables",
		       rss, (long long)size);
	btree_db_close(db);

	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_populate: ok (%lld-byte file, mapped whole at open)\n", (long long)size);
	return 0;
}
