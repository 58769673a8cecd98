/*
 * The io_uring backend of the disk I/O layer: batches larger than the
 * ring, linked fsync, short writes resubmitted until complete (in batches
 * and in background chains), errors reported and failing the file, and
 * the automatic choice. Where io_uring is refused (seccomp,
 * kernel.io_uring_disabled) the test is skipped (exit 77).
 */
#include "diskio_util.h"

#include <poll.h>

static void test_uring(void)
{
	t_phase = "io_uring";
	int fd = open_file();
	struct diskio *d;
	T_OK(diskio_uring_open(fd, 8, &d));
	T_CHECK(strcmp(diskio_name(d), "io_uring") == 0);
	/* Larger than the ring: several chains. */
	batch_roundtrip(d, fd, 100, 4096, 3);
	separate_roundtrip(d, fd, false);
	separate_roundtrip(d, fd, true);
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
	T_OK(diskio_open_auto(fd, "a test file", &d));
	T_CHECK(strcmp(diskio_name(d), "io_uring") == 0);
	batch_roundtrip(d, fd, 10, 4096, 5);
	diskio_close(d);
	close(fd);
}

/* The io_uring backend's background chain: writes and syncs in order,
 * one chain at a time, errors reported by the reap. */
static void test_uring_chain(void)
{
	t_phase = "io_uring chain";
	int fd = open_file();
	struct diskio *d;
	T_OK(diskio_uring_open(fd, 8, &d));
	uint8_t a[8192], b[4096], back[8192];
	fill(a, sizeof(a), 'a');
	fill(b, sizeof(b), 'b');
	struct diskio_write w[2] = { { a, sizeof(a), 4096 }, { b, sizeof(b), 0 } };
	T_OK(diskio_chain_submit(d, w, 2));
	T_RC(diskio_chain_submit(d, w, 2), -EBUSY);
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(pread(fd, back, sizeof(a), 4096) == (ssize_t)sizeof(a) &&
		memcmp(back, a, sizeof(a)) == 0);
	T_CHECK(pread(fd, back, sizeof(b), 0) == (ssize_t)sizeof(b) &&
		memcmp(back, b, sizeof(b)) == 0);
	/* Asked to, the backend runs a chain of one small write itself: it is
	 * written and synced when submit returns, so that a reap that does
	 * not wait finds it done and the event fd is readable; a large one
	 * goes to the kernel, and is there once it is reaped. */
	static uint8_t big[200 << 10], bigback[sizeof(big)];
	fill(big, sizeof(big), 'g');
	struct diskio_write wc = { big, 512, 16384 };
	diskio_set_inline_chain(d, true);
	T_OK(diskio_chain_submit(d, &wc, 1));
	T_CHECK(pread(fd, bigback, 512, 16384) == 512 && memcmp(bigback, big, 512) == 0);
	struct pollfd pfd = { .fd = diskio_event_fd(d), .events = POLLIN };
	T_CHECK(poll(&pfd, 1, 0) == 1);
	T_OK(diskio_chain_reap(d, false));
	T_CHECK(!diskio_chain_busy(d));
	wc = (struct diskio_write){ big, sizeof(big), 32768 };
	T_OK(diskio_chain_submit(d, &wc, 1));
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(pread(fd, bigback, sizeof(big), 32768) == (ssize_t)sizeof(big) &&
		memcmp(bigback, big, sizeof(big)) == 0);
	T_RC(diskio_chain_submit(d, w, 0), -EINVAL);
	T_RC(diskio_chain_submit(d, w, DISKIO_CHAIN_MAX + 1), -EINVAL);
	/* Reaping with nothing in flight. */
	T_OK(diskio_chain_reap(d, false));
	diskio_close(d);
	close(fd);

	/* A chain on a read-only fd fails, and the reap says so. */
	int ro = open(path, O_RDONLY);
	T_OK(diskio_uring_open(ro, 8, &d));
	T_OK(diskio_chain_submit(d, w, 2));
	T_RC(diskio_chain_reap(d, true), -EBADF);
	T_CHECK(diskio_failed(d) == -EBADF);
	T_RC(diskio_chain_submit(d, w, 1), -EBADF);
	diskio_close(d);
	/* The same when the chain runs at submit: the reap says so. */
	T_OK(diskio_uring_open(ro, 8, &d));
	diskio_set_inline_chain(d, true);
	T_OK(diskio_chain_submit(d, w, 1));
	T_RC(diskio_chain_reap(d, true), -EBADF);
	T_CHECK(diskio_failed(d) == -EBADF);
	diskio_close(d);
	/* A chain left in flight is reaped when the backend closes. */
	T_OK(diskio_uring_open(ro, 8, &d));
	T_OK(diskio_chain_submit(d, w, 1));
	diskio_close(d);
	close(ro);
}


/* Chains whose every write completes short: the rest of the chain (and
 * its syncs) is resubmitted, never assumed complete. */
static void test_uring_chain_short(void)
{
	t_phase = "io_uring chain, short writes";
	int fd = open_file();
	struct diskio *d;
	T_OK(diskio_uring_open(fd, 8, &d));
	diskio_uring_set_write_cap(d, 1000);
	static uint8_t a[3][20000], back[20000];
	struct diskio_write w[3];
	for (int i = 0; i < 3; i++) {
		fill(a[i], sizeof(a[i]), (uint8_t)('p' + i));
		w[i] = (struct diskio_write){ a[i], sizeof(a[i]), (uint64_t)i * sizeof(a[i]) };
	}
	T_OK(diskio_chain_submit(d, w, 3));
	T_OK(diskio_chain_reap(d, true));
	for (int i = 0; i < 3; i++) {
		T_CHECK(pread(fd, back, sizeof(back), (off_t)w[i].off) == (ssize_t)sizeof(back));
		T_CHECK(memcmp(back, a[i], sizeof(back)) == 0);
	}
	diskio_close(d);
	close(fd);
}

int main(void)
{
	t_set_seed(0);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	struct diskio *probe;
	int rc = diskio_uring_open(-1, 8, &probe);
	if (rc < 0) {
		printf("test_diskio_uring: skipped: io_uring is refused here (%s)\n", strerror(-rc));
		t_rmdir(dir);
		return 77;
	}
	diskio_close(probe);
	test_uring();
	test_uring_chain();
	test_uring_chain_short();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_diskio_uring: ok\n");
	return 0;
}
