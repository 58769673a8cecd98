/*
 * Helpers of the disk I/O layer's tests: a scratch file, its size, a
 * batch of out-of-order writes read back, and the write syscalls a batch
 * of adjacent writes takes (t_write_syscalls, btree_util.h).
 */
#ifndef CETCD_TEST_DISKIO_UTIL_H
#define CETCD_TEST_DISKIO_UTIL_H

#include <fcntl.h>
#include <sys/stat.h>

#include "btree_util.h"

#include "base/diskio/diskio.h"

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

static void fill(uint8_t *b, size_t n, uint8_t v)
{
	memset(b, v, n);
}

/* Writes 8 adjacent pages in one batch without a sync, each page
 * separately (diskio_set_separate_writes) or not, and checks the file and
 * the write syscalls: one pwritev for the run, or one pwrite a page. */
static inline void separate_roundtrip(struct diskio *d, int fd, bool separate)
{
	enum { N = 8, LEN = 4096 };
	uint8_t *buf = t_xmalloc(N * LEN), back[LEN];
	struct diskio_write w[N];
	for (size_t i = 0; i < N; i++) {
		memset(buf + i * LEN, (int)(uint8_t)(i + 40), LEN);
		w[i] = (struct diskio_write){ buf + i * LEN, LEN, (uint64_t)i * LEN };
	}
	diskio_set_separate_writes(d, separate);
	uint64_t before = t_write_syscalls();
	T_OK(diskio_write_batch(d, w, N, false));
	T_CHECK(t_write_syscalls() - before == (separate ? N : 1));
	for (size_t i = 0; i < N; i++) {
		T_OK(diskio_read(d, back, LEN, (uint64_t)i * LEN));
		T_CHECK(memcmp(back, buf + i * LEN, LEN) == 0);
	}
	T_CHECK(file_size(fd) >= N * LEN);
	diskio_set_separate_writes(d, false);
	free(buf);
}

#endif
