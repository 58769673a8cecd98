/*
 * Letting go of a db file (dbfile_read.c's bt_map_release): a reader's or
 * the writer's file that is still linked is unmapped and closed at once;
 * one that another file was renamed over (a defragmented or installed db)
 * is let go of on a thread of its own (btree_detached_releases counts
 * it), and its mapping and descriptor are gone soon after.
 */
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include "btree_util.h"

static char dir[256];
static char path[300];
static char other[300];

/* Whether this process maps a file whose name (as /proc/self/maps
 * gives it, " (deleted)" included) begins with file. */
static bool mapped(const char *file)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[1024];
	bool found = false;

	if (!f)
		T_FAIL("open /proc/self/maps: %s", strerror(errno));
	while (!found && fgets(line, sizeof(line), f)) {
		char *name = strchr(line, '/');
		found = name && strncmp(name, file, strlen(file)) == 0;
	}
	fclose(f);
	return found;
}

/* Whether one of this process's descriptors is open on file. */
static bool open_here(const char *file)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char link[300], target[512];
	bool found = false;

	if (!d)
		T_FAIL("open /proc/self/fd: %s", strerror(errno));
	while (!found && (e = readdir(d)) != NULL) {
		snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		found = strncmp(target, file, strlen(file)) == 0;
	}
	closedir(d);
	return found;
}

/* Waits up to 5 s for this process to hold file neither mapped nor open. */
static void wait_gone(const char *file)
{
	for (int i = 0; i < 500; i++) {
		if (!mapped(file) && !open_here(file))
			return;
		usleep(10000);
	}
	T_FAIL("%s is still mapped or open 5 s after its release", file);
}

/* A small durable db at p. */
static void make_db(const char *p)
{
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *b;
	struct btree_db_opts o = { .create = true };

	T_OK(btree_db_open(p, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "b", 1, &b));
	T_OK(btree_put(b, "k", 1, "v", 1));
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
	btree_db_close(db);
}

/* Another db renamed over path: the file open there is unlinked. */
static void replace(void)
{
	make_db(other);
	if (rename(other, path) != 0)
		T_FAIL("rename: %s", strerror(errno));
}

int main(void)
{
	struct btree_reader *r;
	struct btree_db *db;
	uint64_t n0;

	t_set_seed(t_pick_seed());
	t_phase = "release";
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	snprintf(other, sizeof(other), "%s/db.new", dir);
	make_db(path);

	/* still linked: at once, in this thread */
	n0 = btree_detached_releases();
	T_OK(btree_reader_open(path, NULL, &r));
	T_CHECK(mapped(path));
	btree_reader_close(r);
	T_CHECK(!mapped(path) && !open_here(path));
	T_OK(btree_db_open(path, NULL, &db));
	btree_db_close(db);
	T_CHECK(!mapped(path) && !open_here(path));
	T_CHECK(btree_detached_releases() == n0);

	/* a reader of a replaced file */
	T_OK(btree_reader_open(path, NULL, &r));
	replace();
	btree_reader_close(r);
	if (btree_detached_releases() != n0 + 1)
		T_FAIL("a reader of an unlinked file was let go of in the caller's thread");
	wait_gone(path);

	/* the writer of a replaced file */
	T_OK(btree_db_open(path, NULL, &db));
	replace();
	btree_db_close(db);
	if (btree_detached_releases() != n0 + 2)
		T_FAIL("the writer of an unlinked file was let go of in the caller's thread");
	wait_gone(path);

	t_rmdir(dir);
	t_no_leaks();
	printf("test_dbfile_read_release: ok\n");
	return 0;
}
