/*
 * The page writer (stored/btree/pagewrite.h) and the commits that use it:
 *
 *  - alone: thousands of page writes, adjacent and scattered, pushed while
 *    the thread writes earlier ones, land byte for byte; an error comes
 *    back from the next drain and only from it; stopping writes what is
 *    still queued;
 *  - both paths: fewer than PAGEWRITE_WAKE writes never reach the thread
 *    (the drain writes them on the caller's thread), more do; an error on
 *    either path comes back from the next drain only; a drain while the
 *    thread writes a slow batch writes the rest itself and returns only
 *    once that batch is done;
 *  - under the B+tree: a backend whose writes may run on another thread
 *    (and record which thread ran them) shows the spill's pages written
 *    by the page writer; a commit whose page writes fail with -ENOSPC
 *    fails, leaves the db usable and loses no earlier commit; with -EIO it
 *    leaves the db failed; a commit of a few keys writes its pages on
 *    the committing thread; a commit whose spill fails halfway (the map is
 *    full) returns only once the page writer has stopped touching its
 *    pages (a slow backend keeps it busy), and the sanitizer build checks
 *    that no buffer is freed while the writer may still read it;
 *  - a commit's pages go out one write syscall each, adjacent ones too.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "btree_util.h"

#include "stored/btree/pagewrite.h"

static char dir[256];
static char path[300];

/* ---- the page writer alone ---- */

static void fill(uint8_t *b, size_t len, uint64_t tag)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = tag * 0x9e3779b97f4a7c15ull + i;
		memcpy(b + i, &v, 8);
	}
}

static void test_alone(void)
{
	t_phase = "page writer alone";
	enum { N = 3000, PAGE = 4096 };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0);
	struct diskio *io;
	T_OK(diskio_plain_open(fd, &io));
	struct pagewrite *p;
	T_OK(pagewrite_start(io, &p));
	uint8_t *bufs = t_xmalloc((size_t)N * PAGE);
	uint64_t *offs = t_xmalloc(N * sizeof(*offs));
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			/* runs of adjacent pages with gaps, in a shuffled order
			 * of runs */
			uint64_t slot = (uint64_t)i + (uint64_t)(i / 7) * 3;
			offs[i] = slot * PAGE;
			fill(bufs + (size_t)i * PAGE, PAGE, (uint64_t)round << 32 | (uint64_t)i);
			T_OK(pagewrite_push(p, bufs + (size_t)i * PAGE, PAGE, offs[i]));
		}
		T_OK(pagewrite_drain(p));
		uint8_t back[PAGE];
		for (int i = 0; i < N; i++) {
			t_step = (uint64_t)i;
			T_CHECK(pread(fd, back, PAGE, (off_t)offs[i]) == PAGE);
			T_CHECK(memcmp(back, bufs + (size_t)i * PAGE, PAGE) == 0);
		}
	}
	pagewrite_stop(p);

	/* errors: the next drain says so, the one after does not */
	int ro = open(path, O_RDONLY);
	struct diskio *rio;
	T_OK(diskio_plain_open(ro, &rio));
	T_OK(pagewrite_start(rio, &p));
	T_OK(pagewrite_push(p, bufs, PAGE, 0));
	T_RC(pagewrite_drain(p), -EBADF);
	T_OK(pagewrite_drain(p));
	pagewrite_stop(p);
	diskio_close(rio);
	close(ro);

	/* stopping writes what is queued */
	T_OK(pagewrite_start(io, &p));
	fill(bufs, PAGE, 77);
	T_OK(pagewrite_push(p, bufs, PAGE, 5 * PAGE));
	pagewrite_stop(p);
	uint8_t back[PAGE];
	T_CHECK(pread(fd, back, PAGE, 5 * PAGE) == PAGE && memcmp(back, bufs, PAGE) == 0);

	diskio_close(io);
	close(fd);
	free(bufs);
	free(offs);
}

/* ---- under the B+tree: a backend that may fail its page writes ---- */

struct cw_io {
	struct diskio base;   /* first */
	pthread_t owner;      /* the thread that opened the db */
	_Atomic int fail;     /* 0, or the error unsynced writes return */
	atomic_bool slow;     /* each unsynced batch takes 2 ms more */
	atomic_ulong elsewhere;   /* unsynced batches written by another thread */
	atomic_ulong calls, inflight;  /* unsynced batches begun, not yet ended */
};

/* Unsynced batches begun on any cw_io, counted past its close. */
static atomic_ulong cw_calls_total;

static int cw_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync)
{
	struct cw_io *c = (struct cw_io *)d;
	if (!sync) {
		if (!pthread_equal(pthread_self(), c->owner))
			atomic_fetch_add(&c->elsewhere, 1);
		int f = atomic_load(&c->fail);
		if (f)
			return f;
		atomic_fetch_add(&c->calls, 1);
		atomic_fetch_add(&cw_calls_total, 1);
		atomic_fetch_add(&c->inflight, 1);
		if (atomic_load(&c->slow))
			usleep(2000);
	}
	int rc = diskio_plain_ops()->write_batch(d, w, n, sync);
	if (!sync)
		atomic_fetch_sub(&c->inflight, 1);
	return rc;
}

/* No background chains: plain's chain ops keep their result past the
 * struct diskio, where cw_io keeps `owner`. A checkpoint then writes
 * through cw_write_batch on the spot. */
static int cw_no_chains(struct diskio *d, const struct diskio_write *w, size_t n)
{
	(void)d;
	(void)w;
	(void)n;
	return -EOPNOTSUPP;
}

/* The plain backend's ops but for its writes and chains (cw_open). */
static struct diskio_ops cw_ops;

static struct cw_io *last_cw;

static void cw_destroy(struct diskio *d)
{
	stored_free(d);
}

static int cw_open(int fd, void *arg, struct diskio **out)
{
	(void)arg;
	if (!cw_ops.name) {
		cw_ops = *diskio_plain_ops();
		cw_ops.name = "concurrent-test";
		cw_ops.write_batch = cw_write_batch;
		cw_ops.chain_submit = cw_no_chains;
		cw_ops.destroy = cw_destroy;
	}
	struct cw_io *c = stored_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	int rc = diskio_base_init(&c->base, &cw_ops, fd);
	if (rc < 0) {
		stored_free(c);
		return rc;
	}
	c->owner = pthread_self();
	last_cw = c;
	*out = &c->base;
	return 0;
}

/* n pages of tag at page slots first.. (every third one skipped), pushed */
static void push_pages(struct pagewrite *p, uint8_t *bufs, int first, int n, uint64_t tag)
{
	for (int i = 0; i < n; i++) {
		uint8_t *b = bufs + (size_t)i * 4096;
		fill(b, 4096, tag << 32 | (uint64_t)i);
		T_OK(pagewrite_push(p, b, 4096, (uint64_t)(first + i + i / 2) * 4096));
	}
}

static void check_pages(int fd, const uint8_t *bufs, int first, int n)
{
	uint8_t back[4096];
	for (int i = 0; i < n; i++) {
		t_step = (uint64_t)i;
		T_CHECK(pread(fd, back, 4096, (off_t)(first + i + i / 2) * 4096) == 4096);
		T_CHECK(memcmp(back, bufs + (size_t)i * 4096, 4096) == 0);
	}
}

/* Waits (5 s at most) until the thread has begun a batch since it had
 * begun `before`: PAGEWRITE_WAKE queued writes must wake it, and a drain
 * that came first would write them all itself. */
static bool thread_took(struct cw_io *c, unsigned long before)
{
	for (int i = 0; i < 50000 && atomic_load(&c->elsewhere) == before; i++)
		usleep(100);
	return atomic_load(&c->elsewhere) > before;
}

static void test_paths(void)
{
	t_phase = "inline and threaded page writes";
	enum { MANY = PAGEWRITE_WAKE * 8 };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0);
	struct diskio *io;
	T_OK(cw_open(fd, NULL, &io));
	struct cw_io *c = last_cw;
	struct pagewrite *p;
	T_OK(pagewrite_start(io, &p));
	uint8_t *bufs = t_xmalloc((size_t)MANY * 4096);

	/* a few: written by the drain, on this thread */
	for (int n = 1; n < PAGEWRITE_WAKE; n += 7) {
		push_pages(p, bufs, 0, n, (uint64_t)n);
		T_OK(pagewrite_drain(p));
		T_CHECK(atomic_load(&c->elsewhere) == 0);
		check_pages(fd, bufs, 0, n);
	}
	/* many: the thread writes them */
	push_pages(p, bufs, 100, MANY, 1000);
	T_CHECK(thread_took(c, 0));
	T_OK(pagewrite_drain(p));
	check_pages(fd, bufs, 100, MANY);

	/* an error on either path, reported once (-ENOSPC leaves the
	 * diskio usable) */
	atomic_store(&c->fail, -ENOSPC);
	push_pages(p, bufs, 0, 2, 1);
	T_RC(pagewrite_drain(p), -ENOSPC);
	T_OK(pagewrite_drain(p));
	unsigned long before = atomic_load(&c->elsewhere);
	push_pages(p, bufs, 0, MANY, 2);
	T_CHECK(thread_took(c, before));
	T_RC(pagewrite_drain(p), -ENOSPC);
	T_OK(pagewrite_drain(p));
	atomic_store(&c->fail, 0);

	/* the thread busy with a slow batch: the drain writes the rest
	 * beside it and waits for it */
	atomic_store(&c->slow, true);
	before = atomic_load(&c->elsewhere);
	push_pages(p, bufs, 400, PAGEWRITE_WAKE, 3);
	T_CHECK(thread_took(c, before));
	push_pages(p, bufs + PAGEWRITE_WAKE * 4096, 1000, 3, 4);
	T_OK(pagewrite_drain(p));
	T_CHECK(atomic_load(&c->inflight) == 0);
	T_CHECK(atomic_load(&c->elsewhere) == before + 1);
	check_pages(fd, bufs + PAGEWRITE_WAKE * 4096, 1000, 3);
	check_pages(fd, bufs, 400, PAGEWRITE_WAKE);
	atomic_store(&c->slow, false);

	pagewrite_stop(p);
	diskio_close(io);
	close(fd);
	free(bufs);
}

/* A write txn putting keys "<tag>-<i>" (i < n) with 200-byte values into
 * bucket "b", scattered: many leaves, so that the spill hands pages over
 * as it goes. */
static int commit_keys(struct btree_db *db, char tag, int n)
{
	return t_put_tagged(db, tag, n, 200, true);
}

/* How many keys of tag the newest commit holds, each with its value. */
static int count_keys(struct btree_db *db, char tag, int n)
{
	return t_count_tagged(db, tag, n, 200);
}

static void test_commits(void)
{
	t_phase = "commits through the page writer";
	unlink(path);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30, .io_open = cw_open };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	/* The spill hands pages to the page writer's thread; on a busy
	 * machine that thread may not run before the commit's drain writes
	 * them itself, so the same commit goes again, each time another
	 * chance, until the thread has written some. */
	T_OK(commit_keys(db, 'a', 20000));
	for (int i = 0; i < 50 && atomic_load(&last_cw->elsewhere) == 0; i++)
		T_OK(commit_keys(db, 'a', 20000));
	T_CHECK(atomic_load(&last_cw->elsewhere) > 0);
	T_OK(btree_db_checkpoint(db, NULL));
	/* a commit of a few pages is written where it is committed */
	unsigned long elsewhere = atomic_load(&last_cw->elsewhere);
	T_OK(commit_keys(db, 'e', 3));
	T_CHECK(atomic_load(&last_cw->elsewhere) == elsewhere);
	T_CHECK(count_keys(db, 'e', 3) == 3);

	/* -ENOSPC: the commit fails, the db goes on */
	atomic_store(&last_cw->fail, -ENOSPC);
	T_CHECK(commit_keys(db, 'b', 20000) < 0);
	atomic_store(&last_cw->fail, 0);
	T_CHECK(count_keys(db, 'b', 20000) == 0);
	T_CHECK(count_keys(db, 'a', 20000) == 20000);
	/* a slow writer: the commit returns only once its pages are in */
	atomic_store(&last_cw->slow, true);
	T_OK(commit_keys(db, 'c', 20000));
	atomic_store(&last_cw->slow, false);
	T_CHECK(atomic_load(&last_cw->inflight) == 0);
	T_OK(btree_db_check(db));
	T_CHECK(count_keys(db, 'c', 20000) == 20000 && count_keys(db, 'a', 20000) == 20000);
	T_OK(btree_db_checkpoint(db, NULL));

	/* -EIO: the commit fails and so does the db, until reopened */
	atomic_store(&last_cw->fail, -EIO);
	T_CHECK(commit_keys(db, 'd', 20000) < 0);
	atomic_store(&last_cw->fail, 0);
	struct btree_txn *t;
	int rc = btree_write_begin(db, &t);
	if (rc == 0)
		rc = btree_commit(t, NULL);
	T_CHECK(rc < 0);
	btree_db_close(db);

	/* what the last checkpoint made durable is all there */
	o.io_open = NULL;
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_db_check(db));
	T_CHECK(count_keys(db, 'a', 20000) == 20000 && count_keys(db, 'c', 20000) == 20000 &&
		count_keys(db, 'd', 20000) == 0);
	btree_db_close(db);
}

/* A commit's pages go out one write each, adjacent ones too (the db sets
 * diskio_set_separate_writes): a fresh db's first big commit takes every
 * page from the high-water mark, one run of adjacent pages that a
 * pwritev would otherwise write a few hundred at a time. */
static void test_separate_writes(void)
{
	t_phase = "a commit's pages, one write each";
	unlink(path);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	struct btree_db_stats before, after;
	btree_db_stats(db, &before);
	uint64_t writes = t_write_syscalls();
	T_OK(t_put_tagged(db, 'a', 20000, 200, false));
	writes = t_write_syscalls() - writes;
	btree_db_stats(db, &after);
	uint64_t pages = after.hwm_pgid - before.hwm_pgid;
	T_CHECK(pages > 1000);
	if (writes < pages)
		T_FAIL("%llu pages written in %llu write syscalls",
		       (unsigned long long)pages, (unsigned long long)writes);
	T_CHECK(count_keys(db, 'a', 20000) == 20000);
	btree_db_close(db);
}

static void test_spill_fails(void)
{
	t_phase = "a spill that fails halfway";
	unlink(path);
	/* room for the first commit but not for the second */
	struct btree_db_opts o = { .create = true, .map_size = 24ull << 20, .io_open = cw_open };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	T_OK(commit_keys(db, 'a', 20000));
	T_OK(btree_db_checkpoint(db, NULL));
	atomic_store(&last_cw->slow, true);
	T_CHECK(commit_keys(db, 'b', 60000) < 0);
	/* nothing of that commit is being written, or will be: the close
	 * stops the page writer, which writes whatever is still queued */
	unsigned long calls = atomic_load(&cw_calls_total);
	T_CHECK(atomic_load(&last_cw->calls) > 0);
	T_CHECK(atomic_load(&last_cw->inflight) == 0);
	atomic_store(&last_cw->slow, false);
	T_CHECK(count_keys(db, 'a', 20000) == 20000 && count_keys(db, 'b', 60000) == 0);
	T_OK(btree_db_check(db));
	btree_db_close(db);
	T_CHECK(atomic_load(&cw_calls_total) == calls);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	test_alone();
	test_paths();
	test_commits();
	test_separate_writes();
	test_spill_fails();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_pagewrite: ok\n");
	return 0;
}
