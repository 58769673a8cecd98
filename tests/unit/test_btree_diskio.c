/*
 * The disk I/O backends of the db file: plain syscalls, io_uring (batches
 * larger than the ring, linked fsync, and short writes resubmitted until
 * complete), the automatic choice, and the fault backend (failed writes
 * and syncs, the device cut after n ops, and power-cut rebuilds that drop,
 * keep or tear unsynced writes).
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_btree_util.h"

static char dir[256];
static char path[300];

static int open_file(void)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0);
	return fd;
}

static uint64_t file_size(int fd)
{
	struct stat st;
	T_CHECK(fstat(fd, &st) == 0);
	return (uint64_t)st.st_size;
}

/* Writes n blocks of len bytes (block i filled with i+tag) in one batch,
 * then checks the file. */
static void batch_roundtrip(struct diskio *d, int fd, size_t n, size_t len, uint8_t tag)
{
	uint8_t *buf = t_xmalloc(n * len);
	struct diskio_write *w = t_xmalloc(n * sizeof(*w));
	for (size_t i = 0; i < n; i++) {
		memset(buf + i * len, (int)(uint8_t)(i + tag), len);
		/* out of order on purpose */
		size_t slot = (i * 7) % n;
		w[i] = (struct diskio_write){ buf + i * len, len, (uint64_t)slot * len };
	}
	T_OK(diskio_write_batch(d, w, n, true));
	uint8_t *back = t_xmalloc(len);
	for (size_t i = 0; i < n; i++) {
		size_t slot = (i * 7) % n;
		T_OK(diskio_read(d, back, len, (uint64_t)slot * len));
		T_CHECK(memcmp(back, buf + i * len, len) == 0);
	}
	T_CHECK(file_size(fd) >= n * len);
	free(back);
	free(w);
	free(buf);
}

static void test_plain(void)
{
	t_phase = "plain";
	int fd = open_file();
	struct diskio *d;
	T_OK(diskio_plain_open(fd, &d));
	T_CHECK(strcmp(diskio_name(d), "plain") == 0);
	batch_roundtrip(d, fd, 50, 4096, 1);
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

static void test_uring(void)
{
	t_phase = "io_uring";
	int fd = open_file();
	struct diskio *d;
	int rc = diskio_uring_open(fd, 8, &d);
	if (rc < 0) {
		printf("io_uring refused here (%s): its test is skipped\n", strerror(-rc));
		close(fd);
		return;
	}
	T_CHECK(strcmp(diskio_name(d), "io_uring") == 0);
	/* Larger than the ring: several chains. */
	batch_roundtrip(d, fd, 100, 4096, 3);
	/* Every write completes short and is resubmitted in pieces. */
	diskio_uring_set_write_cap(d, 1000);
	batch_roundtrip(d, fd, 20, 8192, 9);
	diskio_uring_set_write_cap(d, 512);
	batch_roundtrip(d, fd, 3, 65536, 17);
	diskio_uring_set_write_cap(d, 0);
	T_OK(diskio_sync(d));
	T_OK(diskio_write_batch(d, NULL, 0, false));
	/* An error is reported, not lost: writing to a read-only fd. */
	int ro = open(path, O_RDONLY);
	struct diskio *dro;
	T_OK(diskio_uring_open(ro, 8, &dro));
	uint8_t b[4096] = { 0 };
	T_RC(diskio_write(dro, b, sizeof(b), 0), -EBADF);
	diskio_close(dro);
	close(ro);
	diskio_close(d);
	close(fd);

	fd = open_file();
	T_OK(diskio_open_auto(fd, &d));
	batch_roundtrip(d, fd, 10, 4096, 5);
	diskio_close(d);
	close(fd);
}

static void fill(uint8_t *b, size_t n, uint8_t v)
{
	memset(b, v, n);
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

/* The io_uring backend's background chain: writes and syncs in order,
 * one chain at a time, errors reported by the reap. */
static void test_uring_chain(void)
{
	t_phase = "io_uring chain";
	int fd = open_file();
	struct diskio *d;
	if (diskio_uring_open(fd, 8, &d) < 0) {
		printf("io_uring refused here: its chain test is skipped\n");
		close(fd);
		return;
	}
	T_CHECK(diskio_has_chain(d));
	uint8_t a[8192], b[4096], back[8192];
	fill(a, sizeof(a), 'a');
	fill(b, sizeof(b), 'b');
	struct diskio_write w[2] = { { a, sizeof(a), 4096 }, { b, sizeof(b), 0 } };
	T_OK(diskio_chain_submit(d, w, 2));
	T_RC(diskio_chain_submit(d, w, 2), -EBUSY);
	bool done = false;
	T_OK(diskio_chain_reap(d, true, &done));
	T_CHECK(done);
	T_CHECK(pread(fd, back, sizeof(a), 4096) == (ssize_t)sizeof(a) &&
		memcmp(back, a, sizeof(a)) == 0);
	T_CHECK(pread(fd, back, sizeof(b), 0) == (ssize_t)sizeof(b) &&
		memcmp(back, b, sizeof(b)) == 0);
	T_RC(diskio_chain_submit(d, w, 0), -EINVAL);
	T_RC(diskio_chain_submit(d, w, DISKIO_CHAIN_MAX + 1), -EINVAL);
	/* Reaping with nothing in flight. */
	T_OK(diskio_chain_reap(d, false, &done));
	T_CHECK(done);
	diskio_close(d);
	close(fd);

	/* A chain on a read-only fd fails, and the reap says so. */
	int ro = open(path, O_RDONLY);
	T_OK(diskio_uring_open(ro, 8, &d));
	T_OK(diskio_chain_submit(d, w, 2));
	int rc = diskio_chain_reap(d, true, &done);
	T_CHECK(done && rc == -EBADF);
	/* A chain left in flight is reaped when the backend closes. */
	T_OK(diskio_chain_submit(d, w, 1));
	diskio_close(d);
	close(ro);
}


static void test_fault(void)
{
	t_phase = "fault backend";
	uint8_t a[4096], b[4096], back[4096];
	fill(a, sizeof(a), 'a');
	fill(b, sizeof(b), 'b');

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
	T_RC(diskio_sync(d), -ENOSPC);
	T_OK(diskio_sync(d));
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
	T_CHECK(diskio_fault_ops(d) == 3 && diskio_fault_is_cut(d));
	T_OK(diskio_fault_crash(d, DISKIO_CRASH_DROP_ALL, 0));
	T_CHECK(pread(fd, back, sizeof(back), 0) == 4096 && memcmp(back, a, 4096) == 0);
	diskio_close(d);
	close(fd);
}

int main(void)
{
	t_set_seed(0);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	test_plain();
	test_uring();
	test_pwrite_batch();
	test_uring_chain();
	test_fault();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_diskio: ok\n");
	return 0;
}
