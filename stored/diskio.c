/*
 * Disk I/O: shared helpers, the plain syscall backend, and backend choice
 * (io_uring where permitted, plain otherwise, logged once).
 */
#include "stored/diskio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "stored/alloc.h"

static void (*diskio_logger)(const char *level, const char *msg);

void diskio_set_logger(void (*log)(const char *level, const char *msg))
{
	diskio_logger = log;
}

void diskio_log(const char *level, const char *msg)
{
	if (diskio_logger) {
		diskio_logger(level, msg);
		return;
	}
	/* A JSON line in the shape of etcd's logger; msg carries no quotes. */
	fprintf(stderr, "{\"level\":\"%s\",\"caller\":\"stored/diskio\",\"msg\":\"%s\"}\n",
		level, msg);
}

int diskio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

/* Writes entries w[0..n) that follow each other in the file with one
 * pwritev; on a short write, the rest goes through diskio_pwrite_all. */
static int pwrite_run(int fd, const struct diskio_write *w, size_t n)
{
	struct iovec iov[DISKIO_RUN_MAX];
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		iov[i].iov_base = (void *)w[i].buf;
		iov[i].iov_len = w[i].len;
		total += w[i].len;
	}
	ssize_t done;
	do
		done = pwritev(fd, iov, (int)n, (off_t)w[0].off);
	while (done < 0 && errno == EINTR);
	if (done < 0)
		return -errno;
	if ((size_t)done == total)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if ((size_t)done >= w[i].len) {
			done -= (ssize_t)w[i].len;
			continue;
		}
		int rc = diskio_pwrite_all(fd, (const uint8_t *)w[i].buf + done,
					   w[i].len - (size_t)done, w[i].off + (uint64_t)done);
		if (rc < 0)
			return rc;
		done = 0;
	}
	return 0;
}

int diskio_pwrite_batch(int fd, const struct diskio_write *w, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && j - i < DISKIO_RUN_MAX && w[j].off == w[j - 1].off + w[j - 1].len)
			j++;
		int rc = j - i == 1 ? diskio_pwrite_all(fd, w[i].buf, w[i].len, w[i].off)
				    : pwrite_run(fd, w + i, j - i);
		if (rc < 0)
			return rc;
		i = j;
	}
	return 0;
}

int diskio_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

void diskio_close(struct diskio *d)
{
	if (d)
		d->ops->destroy(d);
}

static int plain_sync(struct diskio *d)
{
	while (fdatasync(d->fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int plain_write_batch(struct diskio *d, const struct diskio_write *w,
			     size_t n, bool sync)
{
	int rc = diskio_pwrite_batch(d->fd, w, n);
	if (rc < 0)
		return rc;
	return sync ? plain_sync(d) : 0;
}

static int plain_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return diskio_pread_all(d->fd, buf, len, off);
}

static int plain_truncate(struct diskio *d, uint64_t size)
{
	while (ftruncate(d->fd, (off_t)size) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int plain_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	while (fallocate(d->fd, 0, (off_t)off, (off_t)len) < 0) {
		if (errno != EINTR)
			return errno == ENOSYS ? -EOPNOTSUPP : -errno;
	}
	return 0;
}

static void plain_destroy(struct diskio *d)
{
	stored_free(d);
}

static const struct diskio_ops plain_ops = {
	.name = "plain",
	.concurrent_writes = true,
	.write_batch = plain_write_batch,
	.read = plain_read,
	.sync = plain_sync,
	.truncate = plain_truncate,
	.allocate = plain_allocate,
	.destroy = plain_destroy,
};

const struct diskio_ops *diskio_plain_ops(void)
{
	return &plain_ops;
}

int diskio_plain_open(int fd, struct diskio **out)
{
	struct diskio *d = stored_malloc(sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ops = &plain_ops;
	d->fd = fd;
	*out = d;
	return 0;
}

int diskio_open_auto(int fd, struct diskio **out)
{
	static atomic_bool fallback_logged;
	int rc = diskio_uring_open(fd, 0, out);
	if (rc == 0 || rc == -ENOMEM)
		return rc;
	if (!atomic_exchange(&fallback_logged, true)) {
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "io_uring is not permitted here (%s); writing the db with pwrite and fdatasync",
			 strerror(-rc));
		diskio_log("warn", msg);
	}
	return diskio_plain_open(fd, out);
}
