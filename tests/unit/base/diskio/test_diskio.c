/*
 * The disk I/O layer: plain syscalls, its error rule (a failed write or
 * sync fails the file for good, and nothing reaches the file after it),
 * the fault backend (failed writes and syncs, a failed sync that drops
 * every write since the last good one, held chains, chains run at submit
 * when the caller's thread runs them, the device cut after n ops, and
 * power-cut rebuilds that drop, keep or tear unsynced writes),
 * --unsafe-no-fsync (syncs skipped), and the directory fsyncs. test_diskio_uring covers io_uring.
 *
 * test_failed_sync and test_dirs break invariant 12 (docs/invariants.md)
 * on purpose (a failed fsync; files created in new directories) and name
 * it in their failure messages (the phase).
 */
#include <poll.h>

#include "diskio_util.h"

/* Two recognisable blocks, filled by main. */
static uint8_t a[4096], b[4096];

static void test_plain(void)
{
	t_phase = "plain";
	int fd = open_file();
	struct diskio *d;
	T_OK(diskio_plain_open(fd, &d));
	T_CHECK(strcmp(diskio_name(d), "plain") == 0);
	batch_roundtrip(d, fd, 50, 4096, 1);
	separate_roundtrip(d, fd, false);
	separate_roundtrip(d, fd, true);
	T_OK(diskio_sync(d));
	T_OK(diskio_allocate(d, 0, 1 << 20));
	T_CHECK(file_size(fd) == 1 << 20);
	T_OK(diskio_truncate(d, 8192));
	T_CHECK(file_size(fd) == 8192);
	uint8_t b[16];
	T_RC(diskio_read(d, b, sizeof(b), 8190), -ENODATA);
	diskio_close(d);
	close(fd);
}


/* diskio_pwrite_batch: runs of adjacent writes (longer than one pwritev
 * takes) mixed with gaps and single writes, then the file read back. */
static void test_pwrite_batch(void)
{
	t_phase = "pwrite batch";
	int fd = open_file();
	const size_t len = 512, n = 3 * DISKIO_RUN_MAX + 7;
	uint8_t *buf = t_xmalloc(n * len);
	struct diskio_write *w = t_xmalloc(n * sizeof(*w));
	uint64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		memset(buf + i * len, (int)(uint8_t)(i * 31 + 1), len);
		if (i % 100 == 99)
			off += len;  /* a gap ends a run */
		w[i] = (struct diskio_write){ buf + i * len, len, off };
		off += len;
	}
	T_OK(diskio_pwrite_batch(fd, w, n));
	uint8_t back[512];
	for (size_t i = 0; i < n; i++) {
		T_CHECK(pread(fd, back, len, (off_t)w[i].off) == (ssize_t)len);
		T_CHECK(memcmp(back, buf + i * len, len) == 0);
	}
	T_CHECK(file_size(fd) == off);
	/* An error is returned, not lost. */
	int ro = open(path, O_RDONLY);
	T_RC(diskio_pwrite_batch(ro, w, 2), -EBADF);
	close(ro);
	free(w);
	free(buf);
	close(fd);
}


static void test_fault(void)
{
	t_phase = "fault backend";
	uint8_t back[4096];

	/* Unsynced writes are dropped, size included; synced ones stay. */
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, a, sizeof(a), 0));
	T_OK(diskio_sync(d));
	T_OK(diskio_write(d, b, sizeof(b), 0));
	T_OK(diskio_write(d, b, sizeof(b), 8192));
	T_OK(diskio_allocate(d, 0, 65536));
	T_OK(diskio_fault_crash(d, DISKIO_CRASH_DROP_ALL, 1));
	T_CHECK(diskio_fault_is_cut(d));
	T_CHECK(file_size(fd) == 4096);
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, a, 4096) == 0);
	T_RC(diskio_write(d, a, sizeof(a), 0), -EIO);
	diskio_close(d);
	close(fd);

	/* Random mode: each sector of an unsynced write holds either the old
	 * or the new bytes, torn only at 512-byte boundaries. */
	for (uint64_t seed = 0; seed < 40; seed++) {
		fd = open_file();
		T_OK(diskio_fault_open(fd, &o, &d));
		T_OK(diskio_write(d, a, sizeof(a), 0));
		T_OK(diskio_sync(d));
		T_OK(diskio_write(d, b, sizeof(b), 0));
		T_OK(diskio_fault_crash(d, DISKIO_CRASH_RANDOM, seed));
		T_CHECK(pread(fd, back, sizeof(back), 0) == 4096);
		for (size_t s = 0; s < 4096; s += 512) {
			T_CHECK(back[s] == 'a' || back[s] == 'b');
			T_CHECK(memchr(back + s, back[s] == 'a' ? 'b' : 'a', 512) == NULL);
			if (back[s] == 'a')  /* the kept part is a prefix */
				T_CHECK(memchr(back + s, 'b', 4096 - s) == NULL);
		}
		diskio_close(d);
		close(fd);
	}

	/* Injected failures. */
	fd = open_file();
	o.fail_write_at = 1;
	o.fail_sync_at = 0;
	o.fail_errno = ENOSPC;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, a, sizeof(a), 0));
	T_RC(diskio_write(d, a, sizeof(a), 4096), -ENOSPC);
	/* A full file system refused a write without a sync: usable. */
	T_CHECK(diskio_failed(d) == 0);
	/* A sync that fails fails the file: it never runs again. */
	t_phase = "invariant 12 (durable means fsynced, directories too): fault backend";
	T_RC(diskio_sync(d), -ENOSPC);
	T_CHECK(diskio_failed(d) == -ENOSPC);
	T_RC(diskio_sync(d), -ENOSPC);
	T_CHECK(diskio_fault_ops(d) == 3);
	t_phase = "fault backend";
	diskio_close(d);
	close(fd);

	/* The device cut after 3 ops: the 4th does nothing. */
	fd = open_file();
	o = diskio_fault_defaults();
	o.cut_at_op = 3;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, a, sizeof(a), 0));
	T_OK(diskio_sync(d));
	T_OK(diskio_write(d, b, sizeof(b), 0));
	T_RC(diskio_sync(d), -EIO);
	T_CHECK(diskio_fault_ops(d) == 3 && diskio_fault_is_cut(d) && diskio_failed(d) == -EIO);
	T_OK(diskio_fault_crash(d, DISKIO_CRASH_DROP_ALL, 0));
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, a, 4096) == 0);
	diskio_close(d);
	close(fd);
}

/* The rule: a sync that fails drops every write since the last good one
 * (the file reads as the disk holds it) and fails the file for good:
 * nothing is written or synced again, whatever is asked. */
static void test_failed_sync(void)
{
	t_phase = "invariant 12 (durable means fsynced, directories too): failed sync";
	uint8_t back[4096];
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, a, sizeof(a), 0));
	T_OK(diskio_sync(d));
	T_OK(diskio_write(d, b, sizeof(b), 0));
	T_OK(diskio_write(d, b, sizeof(b), 4096));
	diskio_fault_fail_sync_after(d, 0);
	T_RC(diskio_sync(d), -EIO);
	T_CHECK(diskio_failed(d) == -EIO);
	/* the size stays, as a running kernel keeps it: what lay past the
	 * durable end reads as zeros */
	T_CHECK(file_size(fd) == 8192);
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, a, 4096) == 0);
	static const uint8_t zeros[4096];
	T_CHECK(pread(fd, back, sizeof(back), 4096) == 4096 && memcmp(back, zeros, 4096) == 0);
	long ops = diskio_fault_ops(d);
	T_RC(diskio_sync(d), -EIO);
	T_RC(diskio_write(d, b, sizeof(b), 0), -EIO);
	struct diskio_write w = { b, sizeof(b), 0 };
	T_RC(diskio_write_batch(d, &w, 1, true), -EIO);
	T_RC(diskio_chain_submit(d, &w, 1), -EIO);
	T_RC(diskio_truncate(d, 0), -EIO);
	T_RC(diskio_allocate(d, 0, 8192), -EIO);
	T_CHECK(diskio_fault_ops(d) == ops);
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, a, 4096) == 0);
	/* Reads still work. */
	T_OK(diskio_read(d, back, sizeof(back), 0));
	diskio_close(d);
	close(fd);

	/* The same through a chain: write, failed sync; the reap reports it
	 * and the file is failed. */
	fd = open_file();
	T_OK(diskio_fault_open(fd, &o, &d));
	diskio_fault_fail_sync_after(d, 0);
	T_OK(diskio_chain_submit(d, &w, 1));
	T_RC(diskio_chain_reap(d, true), -EIO);
	T_CHECK(!diskio_chain_busy(d) && diskio_failed(d) == -EIO && file_size(fd) == 4096);
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, zeros, 4096) == 0);
	T_RC(diskio_chain_submit(d, &w, 1), -EIO);
	diskio_close(d);
	close(fd);

	/* The plain backend keeps the same rule: a write that fails (a
	 * read-only fd) fails the file. */
	int ro = open(path, O_RDONLY);
	T_OK(diskio_plain_open(ro, &d));
	T_RC(diskio_write(d, a, sizeof(a), 0), -EBADF);
	T_CHECK(diskio_failed(d) == -EBADF);
	T_RC(diskio_sync(d), -EBADF);
	diskio_close(d);
	close(ro);
}

/* Chains: held until released, one at a time, the eventfd signalled when
 * one ended; the plain backend runs them at once. */
static void test_chains(void)
{
	t_phase = "chains";
	uint8_t back[4096];
	struct diskio_write w[2] = { { a, sizeof(a), 0 }, { a, sizeof(a), 4096 } };
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.chain = DISKIO_FAULT_CHAIN_HELD;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_chain_submit(d, w, 2));
	T_RC(diskio_chain_submit(d, w, 2), -EBUSY);
	T_CHECK(diskio_fault_is_held(d) && diskio_chain_busy(d));
	T_RC(diskio_chain_reap(d, false), -EINPROGRESS);
	T_CHECK(file_size(fd) == 0);
	T_CHECK(diskio_fault_release(d));
	struct pollfd p = { .fd = diskio_event_fd(d), .events = POLLIN };
	T_CHECK(poll(&p, 1, 10000) == 1);
	T_OK(diskio_chain_reap(d, false));
	T_CHECK(!diskio_chain_busy(d) && d->chains == 1 && d->chain_bytes == 8192);
	T_CHECK(file_size(fd) == 8192);
	T_OK(diskio_chain_reap(d, false));  /* nothing in flight */
	diskio_close(d);
	close(fd);

	fd = open_file();
	T_OK(diskio_plain_open(fd, &d));
	T_RC(diskio_chain_submit(d, w, 0), -EINVAL);
	T_RC(diskio_chain_submit(d, w, DISKIO_CHAIN_MAX + 1), -EINVAL);
	T_OK(diskio_chain_submit(d, w, 2));
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(pread(fd, back, sizeof(back), 4096) == 4096 && memcmp(back, a, 4096) == 0);
	/* Another file, as the WAL moves to its next segment. */
	int fd2 = open_file();
	T_OK(diskio_set_fd(d, fd2));
	T_OK(diskio_chain_submit(d, w, 1));
	T_RC(diskio_set_fd(d, fd), -EBUSY);
	T_OK(diskio_chain_reap(d, true));
	diskio_close(d);
	close(fd2);
	close(fd);
}

/* The fault backend and diskio_set_inline_chain: with chains run at
 * reap, a chain the caller's thread runs (diskio_chain_runs_inline) is
 * written, synced and signalled by the submit, as io_uring runs it; a
 * larger one, or any with the setting off, still waits for the reap. A
 * held chain stays held. */
static void test_fault_inline_chain(void)
{
	t_phase = "fault inline chain";
	static uint8_t big[DISKIO_INLINE_CHAIN_MAX + 4096];
	uint8_t back[4096];
	struct diskio_write small = { a, sizeof(a), 0 };
	struct diskio_write large = { big, sizeof(big), 8192 };
	struct pollfd p = { .fd = -1, .events = POLLIN };
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.chain = DISKIO_FAULT_CHAIN_AT_REAP;
	T_OK(diskio_fault_open(fd, &o, &d));
	p.fd = diskio_event_fd(d);

	/* off: at reap */
	T_CHECK(!diskio_chain_runs_inline(d, 1, sizeof(a)));
	T_OK(diskio_chain_submit(d, &small, 1));
	T_CHECK(file_size(fd) == 0);
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(file_size(fd) == sizeof(a));

	/* on: the small chain is done when submit returns */
	diskio_set_inline_chain(d, true);
	T_CHECK(diskio_chain_runs_inline(d, 1, sizeof(a)));
	T_CHECK(!diskio_chain_runs_inline(d, 1, sizeof(big)));
	T_CHECK(!diskio_chain_runs_inline(d, 2, sizeof(a)));
	small.buf = b;
	long ops = diskio_fault_ops(d);
	T_OK(diskio_chain_submit(d, &small, 1));
	T_CHECK(diskio_fault_ops(d) == ops + 2); /* its write and its sync */
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, b, 4096) == 0);
	T_CHECK(poll(&p, 1, 0) == 1);
	T_OK(diskio_chain_reap(d, false));
	T_CHECK(!diskio_chain_busy(d));

	/* on, but too large: at reap */
	T_OK(diskio_chain_submit(d, &large, 1));
	T_CHECK(diskio_fault_ops(d) == ops + 2 && file_size(fd) == sizeof(a));
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(file_size(fd) == 8192 + sizeof(big));

	/* held chains stay held */
	diskio_fault_set_chain(d, DISKIO_FAULT_CHAIN_HELD);
	small.off = 4096;
	T_OK(diskio_chain_submit(d, &small, 1));
	T_CHECK(diskio_fault_is_held(d));
	T_CHECK(diskio_fault_release(d));
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(pread(fd, back, sizeof(back), 4096) == 4096 && memcmp(back, b, 4096) == 0);
	diskio_close(d);
	close(fd);
}

/* --unsafe-no-fsync: every sync fails on this file, yet nothing fails,
 * because none is made: a synced batch, a sync and a chain (written at
 * submit, ended at once) write their bytes only. Off again, the first
 * sync fails as before. */
static void test_unsafe_no_sync(void)
{
	t_phase = "unsafe no sync";
	uint8_t back[4096];
	struct diskio_write w[2] = { { a, sizeof(a), 0 }, { b, sizeof(b), 4096 } };
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.fail_sync_at = 0;
	o.fail_repeat = true;
	o.chain = DISKIO_FAULT_CHAIN_HELD;
	T_OK(diskio_fault_open(fd, &o, &d));
	diskio_set_unsafe_no_sync(true);
	T_CHECK(diskio_unsafe_no_sync());
	T_OK(diskio_write_batch(d, w, 1, true));
	T_OK(diskio_sync(d));
	T_OK(diskio_chain_submit(d, w, 2));
	T_CHECK(diskio_chain_busy(d) && !diskio_fault_is_held(d));
	struct pollfd p = { .fd = diskio_event_fd(d), .events = POLLIN };
	T_CHECK(poll(&p, 1, 0) == 1);
	T_OK(diskio_chain_reap(d, false));
	T_CHECK(!diskio_chain_busy(d) && diskio_failed(d) == 0 && d->chains == 1);
	T_CHECK(file_size(fd) == 8192);
	T_CHECK(pread(fd, back, sizeof(back), 4096) == 4096 && memcmp(back, b, 4096) == 0);
	diskio_set_unsafe_no_sync(false);
	T_RC(diskio_write_batch(d, w, 1, true), -EIO);
	T_CHECK(diskio_failed(d) == -EIO);
	diskio_close(d);
	close(fd);
}

/* ---- directories ---- */

static char synced[16][300];
static int nsynced;

static void record_sync(const char *d)
{
	if (nsynced < 16)
		snprintf(synced[nsynced], sizeof(synced[0]), "%s", d);
	nsynced++;
}

static bool was_synced(const char *d)
{
	for (int i = 0; i < nsynced && i < 16; i++)
		if (strcmp(synced[i], d) == 0)
			return true;
	return false;
}

/* Every directory diskio_mkdir_all creates has its parent fsynced, and so
 * has the last one when it existed already. */
static void test_dirs(void)
{
	t_phase = "invariant 12 (durable means fsynced, directories too): directories";
	char x[300], xy[300], xyz[300], file[330];
	snprintf(x, sizeof(x), "%s/x", dir);
	snprintf(xy, sizeof(xy), "%s/x/y", dir);
	snprintf(xyz, sizeof(xyz), "%s/x/y/z", dir);
	diskio_set_dir_sync_hook(record_sync);
	nsynced = 0;
	T_OK(diskio_mkdir_all(xyz, 0700));
	T_CHECK(nsynced == 3 && was_synced(dir) && was_synced(x) && was_synced(xy));
	struct stat st;
	T_CHECK(stat(xyz, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
	nsynced = 0;
	char slashed[310];
	snprintf(slashed, sizeof(slashed), "%s/", xyz);
	T_OK(diskio_mkdir_all(slashed, 0700));
	T_CHECK(nsynced == 1 && was_synced(xy));
	nsynced = 0;
	snprintf(file, sizeof(file), "%s/f", xyz);
	int fd = open(file, O_RDWR | O_CREAT, 0600);
	T_CHECK(fd >= 0);
	close(fd);
	T_OK(diskio_sync_parent(file));
	T_CHECK(nsynced == 1 && was_synced(xyz));
	T_RC(diskio_mkdir_all(file, 0700), -ENOTDIR);
	diskio_set_dir_sync_hook(NULL);
	unlink(file);
	rmdir(xyz);
	rmdir(xy);
	rmdir(x);
}

/* The layer's allocations, counted: none may be left at the end. */
static long diskio_live;

static void *count_alloc(size_t n)
{
	void *p = malloc(n);
	if (p)
		diskio_live++;
	return p;
}

static void count_free(void *p)
{
	diskio_live--;
	free(p);
}

int main(void)
{
	t_set_seed(0);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	diskio_set_allocator(count_alloc, count_free);
	fill(a, sizeof(a), 'a');
	fill(b, sizeof(b), 'b');
	test_plain();
	test_pwrite_batch();
	test_fault();
	test_failed_sync();
	test_chains();
	test_fault_inline_chain();
	test_unsafe_no_sync();
	test_dirs();
	t_rmdir(dir);
	t_no_leaks();
	T_CHECK(diskio_live == 0);
	printf("test_diskio: ok\n");
	return 0;
}
