/*
 * The WAL's disk writes behind an ops struct: one request at a time, each
 * "write these bytes at this offset, then fdatasync", started without
 * waiting and finished later, so that raftd's event loop never blocks on
 * the disk while a group commit is in flight.
 *
 * Backends:
 *   io_uring  a linked write + fsync(DATASYNC) chain; a short write breaks
 *             the link and the remainder (and the sync) is resubmitted, so
 *             a request completes only when every byte was written and
 *             then synced;
 *   plain     pwrite + fdatasync run at once inside submit, for where
 *             io_uring is not permitted (seccomp, io_uring_disabled);
 *   fault     (tests) plain writes plus failures, torn writes, a device
 *             that is gone, and requests held until released.
 *
 * Completion is signalled on walio_event_fd (an eventfd, readable when a
 * request finished); walio_reap collects it. A walio does not own the file
 * descriptors it writes to. Functions return 0 or a negative errno.
 */
#ifndef CETCD_RAFTD_WALIO_H
#define CETCD_RAFTD_WALIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct walio;

/* Write len bytes from buf at off in fd, then fdatasync(fd). buf must stay
 * valid and unchanged until the request is reaped. len may be 0 (sync
 * only). */
struct walio_req {
	int fd;
	const void *buf;
	size_t len;
	uint64_t off;
};

struct walio_ops {
	const char *name;
	/* Starts req; nothing else may be in flight. */
	int (*submit)(struct walio *io, const struct walio_req *req);
	/* 0 once the request is complete (written and synced), -EINPROGRESS
	 * while it runs (only when !wait), or the request's -errno. */
	int (*reap)(struct walio *io, bool wait);
	void (*destroy)(struct walio *io);
};

struct walio {
	const struct walio_ops *ops;
	int event_fd;  /* eventfd, owned; readable when a request finished */
	bool busy;     /* a request was submitted and not yet reaped */
	uint64_t requests; /* statistic: requests submitted */
	uint64_t bytes;    /* statistic: bytes requested */
};

/* Starts a request. -EBUSY if one is in flight; else the backend's -errno
 * (the request then never ran). */
int walio_submit(struct walio *io, const struct walio_req *req);

/* Collects the request in flight: 0 when it completed (or none was in
 * flight), -EINPROGRESS when !wait and it still runs, else its -errno.
 * Never blocks when !wait. */
int walio_reap(struct walio *io, bool wait);

static inline int walio_event_fd(const struct walio *io) { return io->event_fd; }
static inline bool walio_busy(const struct walio *io) { return io->busy; }
static inline const char *walio_name(const struct walio *io) { return io->ops->name; }

/* Frees io; a request in flight is waited for first. NULL is accepted. */
void walio_close(struct walio *io);

/* Plain pwrite + fdatasync. -ENOMEM, -errno of eventfd. */
int walio_plain_open(struct walio **out);

/* io_uring with a ring of entries (0 = 8). -errno of io_uring_queue_init
 * (-EPERM, -ENOSYS where it is refused), -ENOMEM. */
int walio_uring_open(unsigned entries, struct walio **out);

/* Test knob of the io_uring backend: each write carries at most cap bytes
 * (0 = no cap), so that larger requests complete short and are
 * resubmitted. Ignored by other backends. */
void walio_uring_set_write_cap(struct walio *io, size_t cap);

/* io_uring when the kernel allows it, else plain; the fallback is logged
 * once per process. -ENOMEM. */
int walio_open_auto(struct walio **out);

/* For backends: fills the shared part of io (ops, a fresh eventfd, zeroed
 * counters). -errno of eventfd. */
int walio_base_init(struct walio *io, const struct walio_ops *ops);

/* ---- the fault-injecting backend (tests) ---- */

struct walio_fault_opts {
	long fail_at;       /* the nth request (0-based) fails with fail_errno,
			     * writing nothing; -1 = never */
	int fail_errno;     /* positive errno; default EIO */
	long tear_at;       /* the nth request is torn: a random subset of its
			     * 512-byte sectors (file offsets) is written, it
			     * fails with EIO, and the device is gone: every
			     * later request fails with EIO writing nothing;
			     * -1 = never */
	uint64_t seed;      /* for tear_at */
	bool hold;          /* requests wait for walio_fault_release */
	size_t write_chunk; /* > 0: write in pieces of at most this many bytes */
};

static inline struct walio_fault_opts walio_fault_defaults(void)
{
	struct walio_fault_opts o = { -1, 5 /* EIO */, -1, 1, false, 0 };
	return o;
}

/* The fault backend. -ENOMEM, -errno of eventfd. */
int walio_fault_open(const struct walio_fault_opts *o, struct walio **out);

/* Runs a held request now (it completes as the options say). Returns
 * false if none was waiting. */
bool walio_fault_release(struct walio *io);

/* Whether a request is held, waiting for walio_fault_release. */
bool walio_fault_is_held(const struct walio *io);

/* Changes the hold option (a held request stays held until released). */
void walio_fault_set_hold(struct walio *io, bool hold);

#endif
