/*
 * Disk I/O behind an ops struct, so that the db file can be written through
 * io_uring, through plain syscalls, or through a test backend that fails,
 * tears or drops writes.
 *
 * A struct diskio does not own its fd: whoever opened the fd closes it
 * after diskio_close. Every function returns 0 or a negative errno. A write
 * returns only once all of its bytes were written (short writes are
 * resubmitted); nothing is durable before a sync (or a batch with sync).
 */
#ifndef CETCD_STORED_DISKIO_H
#define CETCD_STORED_DISKIO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diskio;

/* One write of a batch: len bytes from buf at file offset off. */
struct diskio_write {
	const void *buf;
	size_t len;
	uint64_t off;
};

struct diskio_ops {
	const char *name;
	/* write_batch may run on another thread than the rest (plain
	 * syscalls on the fd); the db then writes a commit's pages on a
	 * thread of their own while it builds them (pagewrite.h). */
	bool concurrent_writes;
	/* Writes every entry (in any order); when sync, then fdatasyncs, so
	 * that on return the whole batch is durable. */
	int (*write_batch)(struct diskio *d, const struct diskio_write *w,
			   size_t n, bool sync);
	/* Reads exactly len bytes; -ENODATA if the file ends first. */
	int (*read)(struct diskio *d, void *buf, size_t len, uint64_t off);
	int (*sync)(struct diskio *d);                      /* fdatasync */
	int (*truncate)(struct diskio *d, uint64_t size);   /* ftruncate */
	/* Makes [off, off+len) allocated and part of the file (fallocate mode
	 * 0); -EOPNOTSUPP where the file system cannot. */
	int (*allocate)(struct diskio *d, uint64_t off, uint64_t len);
	void (*destroy)(struct diskio *d);
	/* Optional (NULL where a backend does not offer it). Starts writing
	 * each entry followed by an fdatasync, strictly in order, in the
	 * background: 1 to DISKIO_CHAIN_MAX entries (diskio_chain_submit
	 * checks), one chain at a time (-EBUSY), buffers valid until the
	 * chain is reaped. */
	int (*chain_submit)(struct diskio *d, const struct diskio_write *w, size_t n);
	/* Reaps the chain: *done once it has ended (with wait, blocks until
	 * then). 0 when every write was whole and every sync succeeded, else
	 * the first error (-EIO for a short write). After an error nothing
	 * of the chain may be written again: a sync may have failed, and
	 * the kernel may have dropped the dirty pages. No chain: *done, 0. */
	int (*chain_reap)(struct diskio *d, bool wait, bool *done);
};

#define DISKIO_CHAIN_MAX 4u

struct diskio {
	const struct diskio_ops *ops;
	int fd;
};

static inline int diskio_write_batch(struct diskio *d, const struct diskio_write *w,
				     size_t n, bool sync)
{
	return d->ops->write_batch(d, w, n, sync);
}

static inline int diskio_write(struct diskio *d, const void *buf, size_t len,
			       uint64_t off)
{
	struct diskio_write w = { buf, len, off };
	return d->ops->write_batch(d, &w, 1, false);
}

static inline int diskio_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return d->ops->read(d, buf, len, off);
}

static inline int diskio_sync(struct diskio *d) { return d->ops->sync(d); }

static inline int diskio_truncate(struct diskio *d, uint64_t size)
{
	return d->ops->truncate(d, size);
}

static inline int diskio_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	return d->ops->allocate(d, off, len);
}

static inline bool diskio_has_chain(const struct diskio *d)
{
	return d->ops->chain_submit != NULL;
}
static inline int diskio_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	if (n == 0 || n > DISKIO_CHAIN_MAX)
		return -EINVAL;
	return d->ops->chain_submit(d, w, n);
}
static inline int diskio_chain_reap(struct diskio *d, bool wait, bool *done)
{
	if (!d->ops->chain_reap) {
		*done = true;
		return 0;
	}
	return d->ops->chain_reap(d, wait, done);
}
static inline const char *diskio_name(const struct diskio *d) { return d->ops->name; }

/* Frees d (not its fd). NULL is accepted. */
void diskio_close(struct diskio *d);

/* Plain pwrite/pread/fdatasync on fd. -ENOMEM. */
int diskio_plain_open(int fd, struct diskio **out);
/* The plain backend's ops, for a backend that changes only some of them
 * (the tests' failing ones): it starts from a copy, and its struct, with
 * its struct diskio first, comes from stored_calloc so that the plain
 * destroy frees it. */
const struct diskio_ops *diskio_plain_ops(void);

/* io_uring for durable writes: a batch with a sync goes as one linked
 * write+fsync chain, short writes resubmitted; a batch without a sync is
 * copied to the page cache with pwrite. entries is the ring size (0 = 64).
 * -errno from io_uring_queue_init (e.g. -EPERM where seccomp or
 * kernel.io_uring_disabled refuse it, -ENOSYS), -ENOMEM. */
int diskio_uring_open(int fd, unsigned entries, struct diskio **out);

/* Test knob for the io_uring backend: each submitted write carries at most
 * cap bytes (0 = no cap), so that every larger write completes short and
 * exercises resubmission. */
void diskio_uring_set_write_cap(struct diskio *d, size_t cap);

/* io_uring when the kernel allows it, else the plain backend; the fallback
 * is logged once per process. -ENOMEM. */
int diskio_open_auto(int fd, struct diskio **out);

/* Where diskio logs (one line per call, no newline); default: a JSON line
 * on stderr. NULL restores the default. */
void diskio_set_logger(void (*log)(const char *level, const char *msg));
void diskio_log(const char *level, const char *msg);

/* Plain helpers shared by the backends: full pwrite with short-write and
 * EINTR handling, full pread. */
int diskio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Writes a batch with pwrite, entries that follow each other in the file
 * (in the order given) together with one pwritev of up to DISKIO_RUN_MAX. */
#define DISKIO_RUN_MAX 256
int diskio_pwrite_batch(int fd, const struct diskio_write *w, size_t n);
int diskio_pread_all(int fd, void *buf, size_t len, uint64_t off);

/*
 * The fault-injecting backend (tests). It writes through to fd with plain
 * syscalls and remembers, for every write since the last successful sync,
 * what the bytes were before, so that diskio_fault_crash can turn the file
 * into what a power cut could leave.
 */
struct diskio_fault_opts {
	long fail_write_at;   /* the nth write (0-based) fails with fail_errno; -1 = never */
	long fail_sync_at;    /* the nth sync fails with fail_errno; -1 = never */
	int fail_errno;       /* positive errno, default EIO */
	long cut_at_op;       /* after this many ops (writes, syncs, truncates,
			       * allocates) the device is gone: every later op
			       * does nothing and fails with EIO; -1 = never */
	int chain;            /* background chains (DISKIO_FAULT_CHAIN_*) */
};

enum {
	DISKIO_FAULT_CHAIN_NONE,       /* refused: the caller writes synchronously */
	DISKIO_FAULT_CHAIN_AT_SUBMIT,  /* its ops run as it is submitted */
	DISKIO_FAULT_CHAIN_AT_REAP,    /* its ops run only when it is reaped, after
					* whatever the caller wrote meanwhile */
};

static inline struct diskio_fault_opts diskio_fault_defaults(void)
{
	struct diskio_fault_opts o = { -1, -1, 5 /* EIO */, -1, DISKIO_FAULT_CHAIN_NONE };
	return o;
}

int diskio_fault_open(int fd, const struct diskio_fault_opts *o, struct diskio **out);

enum diskio_crash_mode {
	DISKIO_CRASH_DROP_ALL,  /* every write since the last sync is lost */
	DISKIO_CRASH_RANDOM,    /* each is kept, lost, or torn at a 512-byte
				 * boundary, at random (seed) */
	DISKIO_CRASH_KEEP_ALL,  /* every write reached the disk, only the
				 * syncs after the cut did not happen */
};

/* Rewrites the file as a power cut at this moment could leave it, and
 * marks the device gone. 0 or -errno of the repair writes. */
int diskio_fault_crash(struct diskio *d, enum diskio_crash_mode mode, uint64_t seed);

/* Cuts the device after n more ops (n = 0: now). */
void diskio_fault_cut_after(struct diskio *d, long n);

/* Counters of the fault backend: ops so far, and whether the device is gone. */
long diskio_fault_ops(const struct diskio *d);
bool diskio_fault_is_cut(const struct diskio *d);

#endif
