/*
 * Durable file I/O (see diskio.h): the error rule every backend is held
 * to, the plain backend, the backend choice, the plain helpers and the
 * directory fsyncs.
 */
#include "base/diskio/diskio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/log/log.h"

static void *(*diskio_alloc_fn)(size_t) = malloc;
static void (*diskio_free_fn)(void *) = free;

void diskio_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *))
{
	diskio_alloc_fn = alloc_fn ? alloc_fn : malloc;
	diskio_free_fn = free_fn ? free_fn : free;
}

void *diskio_zalloc(size_t size)
{
	void *p = diskio_alloc_fn(size ? size : 1);
	if (p)
		memset(p, 0, size);
	return p;
}

void diskio_free(void *p)
{
	if (p)
		diskio_free_fn(p);
}

static bool diskio_no_sync; /* --unsafe-no-fsync, set once at start */

void diskio_set_unsafe_no_sync(bool on)
{
	diskio_no_sync = on;
}

bool diskio_unsafe_no_sync(void)
{
	return diskio_no_sync;
}

/* ---- the error rule ---- */

/* Errors that say nothing about the file: the op did not start. */
static bool not_started(int rc)
{
	return rc == -ENOMEM || rc == -EINVAL || rc == -EBUSY || rc == -EOPNOTSUPP;
}

/* Records rc as the error that failed d for good (the first one wins) and
 * returns it. */
static int diskio_fail(struct diskio *d, int rc)
{
	int none = 0;
	if (atomic_compare_exchange_strong(&d->failed, &none, rc))
		log_error("a disk write or sync failed; the file accepts no more writes, restart to recover from its last durable state",
			  LOG_STR("backend", d->ops->name), LOG_ERRNO(rc));
	return rc;
}

/* rc of a write or sync: any failure but a refusal fails d. */
static int diskio_result(struct diskio *d, int rc)
{
	return rc < 0 && !not_started(rc) ? diskio_fail(d, rc) : rc;
}

/* The syncs this thread has waited for (diskio_thread_syncs). */
static _Thread_local uint64_t diskio_syncs_waited;

uint64_t diskio_thread_syncs(void)
{
	return diskio_syncs_waited;
}

int diskio_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync)
{
	int f = diskio_failed(d);
	if (f)
		return f;
	sync = sync && !diskio_no_sync;
	diskio_syncs_waited += sync;
	int rc = d->ops->write_batch(d, w, n, sync);
	/* A file system that is full refuses a write and leaves the page
	 * cache as it was: without a sync, the caller may give up that write
	 * alone (the db fails the commit and goes on). */
	if (!sync && (rc == -ENOSPC || rc == -EDQUOT))
		return rc;
	return diskio_result(d, rc);
}

int diskio_write(struct diskio *d, const void *buf, size_t len, uint64_t off)
{
	struct diskio_write w = { buf, len, off };
	return diskio_write_batch(d, &w, 1, false);
}

int diskio_sync(struct diskio *d)
{
	int f = diskio_failed(d);
	if (f)
		return f;
	if (diskio_no_sync)
		return 0;
	diskio_syncs_waited++;
	return diskio_result(d, d->ops->sync(d));
}

int diskio_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return d->ops->read(d, buf, len, off);
}

int diskio_truncate(struct diskio *d, uint64_t size)
{
	int f = diskio_failed(d);
	return f ? f : d->ops->truncate(d, size);
}

int diskio_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	int f = diskio_failed(d);
	return f ? f : d->ops->allocate(d, off, len);
}

int diskio_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	int f = diskio_failed(d);
	if (f)
		return f;
	if (n == 0 || n > DISKIO_CHAIN_MAX)
		return -EINVAL;
	if (d->chain_busy)
		return -EBUSY;
	if (diskio_no_sync) {
		/* the writes now, in order; the chain ends with them */
		int rc = 0;
		for (size_t i = 0; i < n && !rc; i++)
			rc = d->ops->write_batch(d, &w[i], 1, false);
		d->chain_unsynced = true;
		d->chain_rc = rc;
		diskio_signal(d);
	} else {
		int rc = d->ops->chain_submit(d, w, n);
		if (rc < 0)
			return diskio_result(d, rc);
	}
	d->chain_busy = true;
	d->chains++;
	for (size_t i = 0; i < n; i++)
		d->chain_bytes += w[i].len;
	return 0;
}

int diskio_chain_reap(struct diskio *d, bool wait)
{
	uint64_t v;
	if (!d->chain_busy)
		return 0;
	diskio_syncs_waited += wait;
	/* Drain first, then look: a completion that lands after the look
	 * signals the eventfd again, so no wake-up is lost. */
	while (read(d->event_fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	int rc = d->chain_unsynced ? d->chain_rc : d->ops->chain_reap(d, wait);
	d->chain_unsynced = false;
	if (rc == -EINPROGRESS)
		return rc;
	d->chain_busy = false;
	return rc < 0 ? diskio_fail(d, rc) : 0;
}

int diskio_set_fd(struct diskio *d, int fd)
{
	if (d->chain_busy)
		return -EBUSY;
	d->fd = fd;
	return 0;
}

void diskio_close(struct diskio *d)
{
	if (!d)
		return;
	if (d->chain_busy)
		(void)diskio_chain_reap(d, true);
	int efd = d->event_fd;
	d->ops->destroy(d);
	if (efd >= 0)
		close(efd);
}

int diskio_base_init(struct diskio *d, const struct diskio_ops *ops, int fd)
{
	d->ops = ops;
	d->fd = fd;
	atomic_init(&d->failed, 0);
	d->chain_busy = false;
	d->chain_unsynced = false;
	d->chains = d->chain_bytes = 0;
	d->inline_chain = false;
	d->separate = false;
	d->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return d->event_fd < 0 ? -errno : 0;
}

void diskio_signal(struct diskio *d)
{
	uint64_t one = 1;
	while (write(d->event_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

void diskio_set_inline_chain(struct diskio *d, bool on)
{
	d->inline_chain = on;
}

bool diskio_chain_runs_inline(const struct diskio *d, size_t n, size_t len)
{
	return d->inline_chain && n == 1 && len <= DISKIO_INLINE_CHAIN_MAX;
}

void diskio_set_separate_writes(struct diskio *d, bool on)
{
	d->separate = on;
}

/* ---- plain helpers ---- */

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

int diskio_pwrite_unsynced(struct diskio *d, const struct diskio_write *w, size_t n)
{
	if (!d->separate)
		return diskio_pwrite_batch(d->fd, w, n);
	for (size_t i = 0; i < n; i++) {
		int rc = diskio_pwrite_all(d->fd, w[i].buf, w[i].len, w[i].off);
		if (rc < 0)
			return rc;
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

/* ---- plain ---- */

struct plain_io {
	struct diskio base; /* first: a struct diskio * is a struct plain_io * */
	int chain_rc;       /* result of the chain run at submit */
};

/* fdatasync once: EINTR is not retried either, since a sync that was
 * interrupted may have failed to write pages back. */
static int plain_sync(struct diskio *d)
{
	return fdatasync(d->fd) < 0 ? -errno : 0;
}

static int plain_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync)
{
	int rc = diskio_pwrite_unsynced(d, w, n);
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

static int plain_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	struct plain_io *p = (struct plain_io *)d;
	p->chain_rc = 0;
	for (size_t i = 0; i < n && p->chain_rc == 0; i++)
		p->chain_rc = plain_write_batch(d, &w[i], 1, true);
	diskio_signal(d);
	return 0;
}

static int plain_chain_reap(struct diskio *d, bool wait)
{
	(void)wait;
	return ((struct plain_io *)d)->chain_rc;
}

static void plain_destroy(struct diskio *d)
{
	diskio_free(d);
}

static const struct diskio_ops plain_ops = {
	.name = "plain",
	.concurrent_writes = true,
	.write_batch = plain_write_batch,
	.read = plain_read,
	.sync = plain_sync,
	.truncate = plain_truncate,
	.allocate = plain_allocate,
	.chain_submit = plain_chain_submit,
	.chain_reap = plain_chain_reap,
	.destroy = plain_destroy,
};

const struct diskio_ops *diskio_plain_ops(void)
{
	return &plain_ops;
}

int diskio_plain_open(int fd, struct diskio **out)
{
	struct plain_io *p = diskio_zalloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	int rc = diskio_base_init(&p->base, &plain_ops, fd);
	if (rc < 0) {
		diskio_free(p);
		return rc;
	}
	*out = &p->base;
	return 0;
}

int diskio_open_auto(int fd, const char *what, struct diskio **out)
{
	static atomic_bool logged;
	/* Any refusal, -ENOMEM included (the kernel's limit on rings), falls
	 * back: plain syscalls keep the same rule. */
	int rc = diskio_uring_open(fd, 0, out);
	if (rc == 0)
		return rc;
	if (!atomic_exchange(&logged, true))
		log_warn("io_uring is not permitted here; writing with pwrite and fdatasync",
			 LOG_STR("file", what), LOG_ERRNO(rc));
	return diskio_plain_open(fd, out);
}

/* ---- directories ---- */

static void (*dir_sync_hook)(const char *dir);

void diskio_set_dir_sync_hook(void (*hook)(const char *dir))
{
	dir_sync_hook = hook;
}

int diskio_fdatasync(int fd)
{
	diskio_syncs_waited++;
	return fdatasync(fd) < 0 ? -errno : 0;
}

int diskio_sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	diskio_syncs_waited++;
	int rc = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	if (rc == 0 && dir_sync_hook)
		dir_sync_hook(dir);
	return rc;
}

/* Writes into buf the directory that holds path ("." for a bare name,
 * "/" for a name in the root). */
static int parent_of(const char *path, char *buf, size_t cap)
{
	size_t len = strlen(path);
	while (len > 1 && path[len - 1] == '/')
		len--;
	while (len > 0 && path[len - 1] != '/')
		len--;
	while (len > 1 && path[len - 1] == '/')
		len--;
	if (len == 0)
		return snprintf(buf, cap, ".") >= (int)cap ? -ENAMETOOLONG : 0;
	if (len >= cap)
		return -ENAMETOOLONG;
	memcpy(buf, path, len);
	buf[len] = '\0';
	return 0;
}

int diskio_sync_parent(const char *path)
{
	char dir[PATH_MAX];
	int rc = parent_of(path, dir, sizeof(dir));
	return rc ? rc : diskio_sync_dir(dir);
}

int diskio_mkdir_all(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	while (len > 1 && buf[len - 1] == '/')
		buf[--len] = '\0';
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		if (buf[i - 1] == '/')
			continue;
		char c = buf[i];
		buf[i] = '\0';
		bool created = mkdir(buf, mode) == 0;
		if (!created && errno != EEXIST)
			return -errno;
		/* The last one is synced in its parent even if it existed. */
		if (created || c == '\0') {
			int rc = diskio_sync_parent(buf);
			if (rc)
				return rc;
		}
		buf[i] = c;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}
