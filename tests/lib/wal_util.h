/*
 * Helpers shared by the WAL and Raft unit tests: a scratch directory that
 * is removed recursively, whole-file reads and writes, entries with
 * recognisable data, and allocation hooks that count live raftd
 * allocations and can fail the Nth one.
 */
#ifndef CETCD_TESTS_WAL_UTIL_H
#define CETCD_TESTS_WAL_UTIL_H

#include <ftw.h>
#include <poll.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "raftd/alloc.h"
#include "raftd/raft/raftlog.h"
#include "raftd/wal/wal.h"

static char wt_root[256];

static int wt_rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(path);
	return 0;
}

static void wt_rm_tree(const char *dir)
{
	nftw(dir, wt_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static pid_t wt_owner;

static void wt_cleanup(void)
{
	if (getpid() == wt_owner && wt_root[0])
		wt_rm_tree(wt_root);
}

/* The test's scratch directory, removed with everything in it when the
 * process exits: on tmpfs when there is one (fdatasync costs nothing
 * there, and the tests sync a lot), else under TMPDIR or /tmp. */
static inline const char *wt_scratch(void)
{
	if (wt_root[0])
		return wt_root;
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };
	for (size_t i = 0; i < 3 && !wt_root[0]; i++) {
		if (!bases[i])
			continue;
		snprintf(wt_root, sizeof(wt_root), "%s/cetcd-waltest.XXXXXX", bases[i]);
		if (!mkdtemp(wt_root))
			wt_root[0] = '\0';
	}
	CHECK(wt_root[0]);
	wt_owner = getpid();
	atexit(wt_cleanup);
	return wt_root;
}

/* A fresh path under the scratch directory: <scratch>/<name><n>. */
static inline void wt_path(char *buf, size_t len, const char *name)
{
	static int n;
	snprintf(buf, len, "%s/%s%d", wt_scratch(), name, n++);
}

/* The whole file; *len its size. malloc'd. */
static inline uint8_t *wt_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	CHECK(f);
	CHECK(fseek(f, 0, SEEK_END) == 0);
	long n = ftell(f);
	CHECK(n >= 0);
	rewind(f);
	uint8_t *buf = malloc((size_t)n + 1);
	CHECK(buf);
	CHECK(fread(buf, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static inline void wt_write_file(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	CHECK(f);
	CHECK(fwrite(buf, 1, len, f) == len);
	CHECK(fclose(f) == 0);
}

/* Copies every file of src (flat) into a new dir dst. */
static inline void wt_copy_dir(const char *src, const char *dst)
{
	char a[1024], b[1024];
	DIR *d = opendir(src);
	CHECK(d);
	CHECK(mkdir(dst, 0700) == 0);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		size_t n;
		snprintf(a, sizeof(a), "%s/%s", src, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", dst, e->d_name);
		uint8_t *buf = wt_read_file(a, &n);
		wt_write_file(b, buf, n);
		free(buf);
	}
	closedir(d);
}

/* Entry index in term with len bytes of data derived from (index, term). */
static inline struct raft_entry wt_entry(uint64_t index, uint64_t term, uint32_t len,
					 uint8_t *buf)
{
	struct raft_entry e = { .term = term, .index = index, .len = len };
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(index * 31 + term * 7 + i);
	e.data = len ? buf : NULL;
	return e;
}

/* Whether e is what wt_entry made for its index and term with len bytes. */
static inline bool wt_entry_ok(const struct raft_entry *e, uint64_t index, uint64_t term,
			       uint32_t len)
{
	if (e->index != index || e->term != term || e->len != len)
		return false;
	for (uint32_t i = 0; i < len; i++)
		if (e->data[i] != (uint8_t)(index * 31 + term * 7 + i))
			return false;
	return true;
}

/* ---- counting allocation hooks ---- */

static atomic_long wt_live;
static atomic_long wt_budget = -1; /* allocations left before failing; -1 = no limit */

static bool wt_alloc_permitted(void)
{
	long b = atomic_load(&wt_budget);
	while (b >= 0) {
		if (b == 0)
			return false;
		if (atomic_compare_exchange_weak(&wt_budget, &b, b - 1))
			return true;
	}
	return true;
}

static void *wt_malloc(size_t n)
{
	if (!wt_alloc_permitted())
		return NULL;
	void *p = malloc(n);
	if (p)
		atomic_fetch_add(&wt_live, 1);
	return p;
}

static void *wt_realloc(void *p, size_t n)
{
	if (!wt_alloc_permitted())
		return NULL;
	return realloc(p, n);
}

static void wt_free(void *p)
{
	if (p) {
		atomic_fetch_sub(&wt_live, 1);
		free(p);
	}
}

/* Installs the counting hooks. */
static inline void wt_count_allocs(void)
{
	static const struct raftd_alloc_hooks h = { wt_malloc, wt_realloc, wt_free };
	raftd_alloc_set_hooks(&h);
}

/* After wt_fail_after(n), n more allocations succeed, then all fail until
 * wt_fail_after(-1). */
static inline void wt_fail_after(long n)
{
	atomic_store(&wt_budget, n < 0 ? -1 : n);
}

static inline long wt_live_allocs(void)
{
	return atomic_load(&wt_live);
}

/* Waits until the WAL's eventfd is readable (a request finished). */
static inline void wt_wait_event(struct wal *w)
{
	struct pollfd p = { .fd = wal_event_fd(w), .events = POLLIN };
	CHECK_EQ(poll(&p, 1, 10000), 1);
}

#endif
