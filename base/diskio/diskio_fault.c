/*
 * The fault-injecting diskio backend, for tests. It writes through to the
 * file, fails or tears chosen writes, fails chosen syncs, can lose the
 * device after a number of operations, and keeps an undo record of every
 * write since the last successful sync. The undo records give the file's
 * durable content (what the last good sync saw): a failed sync goes back
 * to it, as the kernel may drop the dirty pages when writeback fails, and
 * diskio_fault_crash rebuilds what a power cut could leave: the synced
 * state plus any subset of the later writes, some of them torn at a
 * sector boundary, the latest kept write winning where they overlap.
 */
#include "base/diskio/diskio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>


#define FAULT_SECTOR 512u

struct fault_undo {
	uint64_t off;
	size_t len;
	uint8_t *old;       /* bytes before the write (old_len of them; the rest was past EOF) */
	size_t old_len;
	uint8_t *data;      /* the bytes written */
};

struct fault_io {
	struct diskio base; /* first: a struct diskio * is a struct fault_io * */
	struct diskio_fault_opts opts;
	long writes, syncs, allocates, ops;
	long armed_writes, armed_syncs, armed_allocates; /* made while the trigger existed */
	bool cut;
	uint64_t rng;           /* for tears */
	uint64_t synced_size;   /* file size at the last successful sync */
	int synced_fd;          /* the file synced_size is of */
	struct fault_undo *undo;
	size_t nundo, undo_cap;
	struct diskio_write chain[DISKIO_CHAIN_MAX];  /* a chain not yet run */
	size_t nchain;
	bool chain_pending;     /* submitted, not yet reaped */
	bool chain_ran;         /* its ops have run (chain_rc is its result) */
	int chain_rc;
	struct diskio_crashlog log; /* opts.crashlog: the file's crash journal */
};

static void fault_forget(struct fault_io *f)
{
	for (size_t i = 0; i < f->nundo; i++) {
		diskio_free(f->undo[i].old);
		diskio_free(f->undo[i].data);
	}
	f->nundo = 0;
}

static int fault_file_size(int fd, uint64_t *size)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

/* Counts one op; false once the device is gone (the op must not happen). */
static bool fault_op(struct fault_io *f)
{
	if (f->cut)
		return false;
	if (f->opts.cut_at_op >= 0 && f->ops >= f->opts.cut_at_op) {
		f->cut = true;
		return false;
	}
	f->ops++;
	return true;
}

/* Whether op number idx of its kind (armed: that kind's count of ops made
 * while the trigger file exists) meets the fault set at `at`. A one-shot
 * fault with a trigger fires only for the backend that removes the file. */
static bool fault_fires(struct fault_io *f, long idx, long *armed, long at)
{
	const char *trigger = f->opts.trigger_path;
	if (trigger) {
		if (access(trigger, F_OK) != 0)
			return false;
		idx = (*armed)++;
	}
	if (at < 0 || (f->opts.fail_repeat ? idx < at : idx != at))
		return false;
	return !trigger || f->opts.fail_repeat || unlink(trigger) == 0;
}

/* A slow device: the write call waits opts.delay_ms first (while the
 * trigger file exists, when one is set). */
static void fault_delay(const struct fault_io *f)
{
	const char *trigger = f->opts.trigger_path;
	if (f->opts.delay_ms <= 0 || (trigger && access(trigger, F_OK) != 0))
		return;
	struct timespec ts = { f->opts.delay_ms / 1000, f->opts.delay_ms % 1000 * 1000000 };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Before an op that changes the file: when d was pointed at another
 * file (the WAL's next segment) with nothing pending, that file's durable
 * size is its size now; with opts.crashlog, its journal is opened. */
static int fault_track(struct fault_io *f)
{
	if (f->synced_fd != f->base.fd) {
		diskio_crashlog_end(&f->log);
		int rc = fault_file_size(f->base.fd, &f->synced_size);
		if (rc < 0)
			return rc;
		f->synced_fd = f->base.fd;
	}
	return f->opts.crashlog ? diskio_crashlog_begin(&f->log, f->base.fd, f->synced_size) : 0;
}

/* The last good sync moved (or the file is done with): what the journal
 * holds no longer needs undoing. */
static void fault_forget_all(struct fault_io *f)
{
	fault_forget(f);
	diskio_crashlog_end(&f->log);
}

/* Records what w is about to overwrite (and the bytes it writes), in
 * memory and in the crash journal, before it reaches the file. */
static int fault_record(struct fault_io *f, const struct diskio_write *w)
{
	int rc = fault_track(f);
	if (rc < 0)
		return rc;
	if (f->nundo == f->undo_cap) {
		size_t cap = f->undo_cap ? f->undo_cap * 2 : 16;
		struct fault_undo *u = diskio_zalloc(cap * sizeof(*u));
		if (!u)
			return -ENOMEM;
		if (f->nundo)
			memcpy(u, f->undo, f->nundo * sizeof(*u));
		diskio_free(f->undo);
		f->undo = u;
		f->undo_cap = cap;
	}
	struct fault_undo *u = &f->undo[f->nundo];
	uint64_t size;
	rc = fault_file_size(f->base.fd, &size);
	if (rc < 0)
		return rc;
	u->off = w->off;
	u->len = w->len;
	u->old_len = w->off >= size ? 0 : (size_t)(size - w->off < w->len ? size - w->off : w->len);
	u->old = diskio_zalloc(u->old_len);
	u->data = diskio_zalloc(w->len);
	if (!u->old || !u->data)
		goto out_free;
	memcpy(u->data, w->buf, w->len);
	rc = diskio_pread_all(f->base.fd, u->old, u->old_len, w->off);
	if (rc == 0)
		rc = diskio_crashlog_append(&f->log, DISKIO_CRASHLOG_WRITE, w->off, w->len,
					    u->old, u->old_len);
	if (rc < 0)
		goto out_free;
	f->nundo++;
	return 0;

out_free:
	diskio_free(u->old);
	diskio_free(u->data);
	return rc < 0 ? rc : -ENOMEM;
}

/* Writes a random subset of w's 512-byte sectors, as a power cut in the
 * middle of the write could leave it. */
static int fault_tear(struct fault_io *f, const struct diskio_write *w)
{
	const uint8_t *p = w->buf;
	uint64_t off = w->off, end = w->off + w->len;
	while (off < end) {
		uint64_t next = (off / FAULT_SECTOR + 1) * FAULT_SECTOR;
		if (next > end)
			next = end;
		if (diskio_fault_rand(&f->rng) & 1) {
			int rc = diskio_pwrite_all(f->base.fd, p + (off - w->off), next - off, off);
			if (rc < 0)
				return rc;
		}
		off = next;
	}
	return 0;
}

static int fault_write_one(struct fault_io *f, const struct diskio_write *w)
{
	if (!fault_op(f))
		return -EIO;
	long idx = f->writes++;
	if (fault_fires(f, idx, &f->armed_writes, f->opts.fail_write_at))
		return -f->opts.fail_errno;
	int rc = fault_record(f, w);
	if (rc < 0)
		return rc;
	if (idx == f->opts.tear_write_at) {
		(void)fault_tear(f, w);
		f->cut = true;
		return -EIO;
	}
	return diskio_pwrite_all(f->base.fd, w->buf, w->len, w->off);
}

/* Puts the file's bytes back to what the last good sync saw: undoes
 * every write since, in reverse order. What a write put past the end of
 * the file then reads as zeros. With truncate (a power cut) the file also
 * loses what it grew by; without (a failed sync) it keeps its size, as a
 * running kernel keeps it: a writer's mapping of the file must not end
 * under it. */
static int fault_revert(struct fault_io *f, bool truncate)
{
	static const uint8_t zeros[4096];
	for (size_t i = f->nundo; i-- > 0;) {
		struct fault_undo *u = &f->undo[i];
		int rc = diskio_pwrite_all(f->base.fd, u->old, u->old_len, u->off);
		for (size_t off = u->old_len; rc == 0 && !truncate && off < u->len;) {
			size_t n = u->len - off < sizeof(zeros) ? u->len - off : sizeof(zeros);
			rc = diskio_pwrite_all(f->base.fd, zeros, n, u->off + off);
			off += n;
		}
		if (rc < 0)
			return rc;
	}
	if (truncate && ftruncate(f->base.fd, (off_t)f->synced_size) < 0)
		return -errno;
	return 0;
}

static int fault_sync(struct diskio *d)
{
	struct fault_io *f = (struct fault_io *)d;
	if (!fault_op(f))
		return -EIO;
	if (fault_fires(f, f->syncs++, &f->armed_syncs, f->opts.fail_sync_at)) {
		/* Writeback failed: the kernel may drop the dirty pages, and
		 * what the file reads is what the disk holds. */
		int rc = fault_revert(f, false);
		fault_forget_all(f);
		return rc < 0 ? rc : -f->opts.fail_errno;
	}
	if (fdatasync(d->fd) < 0)
		return -errno;
	fault_forget_all(f);
	f->synced_fd = d->fd;
	return fault_file_size(d->fd, &f->synced_size);
}

static int fault_write_batch(struct diskio *d, const struct diskio_write *w,
			     size_t n, bool sync)
{
	struct fault_io *f = (struct fault_io *)d;
	fault_delay(f);
	for (size_t i = 0; i < n; i++) {
		int rc = fault_write_one(f, &w[i]);
		if (rc < 0)
			return rc;
	}
	return sync ? fault_sync(d) : 0;
}

static int fault_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return diskio_pread_all(d->fd, buf, len, off);
}

/* Journals a truncate to size with the bytes it cuts off. (The in-memory
 * undo records do not: a failed sync keeps the size, and
 * diskio_fault_crash cuts to the synced size.) */
static int fault_crashlog_truncate(struct fault_io *f, uint64_t size)
{
	uint64_t cur;
	int rc = fault_track(f);
	if (rc == 0)
		rc = fault_file_size(f->base.fd, &cur);
	if (rc < 0)
		return rc;
	size_t cut = cur > size ? (size_t)(cur - size) : 0;
	uint8_t *old = diskio_zalloc(cut ? cut : 1);
	if (!old)
		return -ENOMEM;
	rc = diskio_pread_all(f->base.fd, old, cut, size);
	if (rc == 0)
		rc = diskio_crashlog_append(&f->log, DISKIO_CRASHLOG_TRUNCATE, size, 0, old, cut);
	diskio_free(old);
	return rc;
}

static int fault_truncate(struct diskio *d, uint64_t size)
{
	struct fault_io *f = (struct fault_io *)d;
	if (!fault_op(f))
		return -EIO;
	if (f->opts.crashlog) {
		int rc = fault_crashlog_truncate(f, size);
		if (rc < 0)
			return rc;
	}
	if (ftruncate(d->fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

static int fault_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	struct fault_io *f = (struct fault_io *)d;
	if (!fault_op(f))
		return -EIO;
	long idx = f->allocates++;
	if (fault_fires(f, idx, &f->armed_allocates, f->opts.fail_allocate_at))
		return -f->opts.fail_errno;
	int rc = f->opts.crashlog ? fault_track(f) : 0;
	if (rc == 0)
		rc = diskio_crashlog_append(&f->log, DISKIO_CRASHLOG_ALLOCATE, off, len, NULL, 0);
	if (rc < 0)
		return rc;
	if (fallocate(d->fd, 0, (off_t)off, (off_t)len) < 0)
		return -errno;
	return 0;
}

static void fault_destroy(struct diskio *d)
{
	struct fault_io *f = (struct fault_io *)d;
	fault_forget_all(f);
	diskio_free(f->undo);
	diskio_free(f);
}

/* A chain's ops, in order, through the same faults as any other op. */
static int fault_chain_run(struct fault_io *f, const struct diskio_write *w, size_t n)
{
	fault_delay(f);
	for (size_t i = 0; i < n; i++) {
		int rc = fault_write_one(f, &w[i]);
		if (rc == 0)
			rc = fault_sync(&f->base);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int fault_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	struct fault_io *f = (struct fault_io *)d;
	if (f->opts.chain == DISKIO_FAULT_CHAIN_NONE)
		return -EOPNOTSUPP;
	if (f->chain_pending)
		return -EBUSY;
	size_t len = 0;
	for (size_t i = 0; i < n; i++)
		len += w[i].len;
	/* a chain that runs on the caller's thread runs at submit, as the
	 * io_uring backend runs it; a held one stays held (the test holds
	 * it on purpose) */
	bool now = f->opts.chain == DISKIO_FAULT_CHAIN_AT_SUBMIT ||
		   (f->opts.chain == DISKIO_FAULT_CHAIN_AT_REAP && diskio_chain_runs_inline(d, n, len));
	f->chain_pending = true;
	f->chain_ran = false;
	if (now) {
		f->chain_rc = fault_chain_run(f, w, n);
		f->chain_ran = true;
	} else {
		memcpy(f->chain, w, n * sizeof(*w));
		f->nchain = n;
	}
	if (f->opts.chain != DISKIO_FAULT_CHAIN_HELD)
		diskio_signal(d);
	return 0;
}

static int fault_chain_reap(struct diskio *d, bool wait)
{
	struct fault_io *f = (struct fault_io *)d;
	if (!f->chain_pending)
		return 0;
	if (!f->chain_ran) {
		if (f->opts.chain == DISKIO_FAULT_CHAIN_HELD)
			return wait ? -EDEADLK : -EINPROGRESS;
		f->chain_rc = fault_chain_run(f, f->chain, f->nchain);
	}
	f->chain_pending = false;
	return f->chain_rc;
}

static const struct diskio_ops fault_ops = {
	.name = "fault",
	.write_batch = fault_write_batch,
	.read = fault_read,
	.sync = fault_sync,
	.truncate = fault_truncate,
	.allocate = fault_allocate,
	.destroy = fault_destroy,
	.chain_submit = fault_chain_submit,
	.chain_reap = fault_chain_reap,
};

int diskio_fault_open(int fd, const struct diskio_fault_opts *o, struct diskio **out)
{
	struct fault_io *f = diskio_zalloc(sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->opts = o ? *o : diskio_fault_defaults();
	if (f->opts.fail_errno <= 0)
		f->opts.fail_errno = EIO;
	f->rng = f->opts.seed * 0x9E3779B97F4A7C15ull + 1;
	f->synced_fd = fd;
	f->log.fd = -1;
	int rc = fd >= 0 ? fault_file_size(fd, &f->synced_size) : 0;
	if (rc < 0)
		goto out_free;
	rc = diskio_base_init(&f->base, &fault_ops, fd);
	if (rc < 0)
		goto out_free;
	*out = &f->base;
	return 0;

out_free:
	diskio_free(f);
	return rc;
}

static struct fault_io *as_fault(const struct diskio *d)
{
	return d->ops == &fault_ops ? (struct fault_io *)d : NULL;
}

bool diskio_fault_release(struct diskio *d)
{
	struct fault_io *f = as_fault(d);
	if (!f || !f->chain_pending || f->chain_ran)
		return false;
	f->chain_rc = fault_chain_run(f, f->chain, f->nchain);
	f->chain_ran = true;
	diskio_signal(d);
	return true;
}

bool diskio_fault_is_held(const struct diskio *d)
{
	struct fault_io *f = as_fault(d);
	return f && f->chain_pending && !f->chain_ran &&
	       f->opts.chain == DISKIO_FAULT_CHAIN_HELD;
}

void diskio_fault_set_chain(struct diskio *d, int chain)
{
	struct fault_io *f = as_fault(d);
	if (f)
		f->opts.chain = chain;
}

void diskio_fault_fail_sync_after(struct diskio *d, long n)
{
	struct fault_io *f = as_fault(d);
	if (f)
		f->opts.fail_sync_at = f->syncs + n;
}

int diskio_fault_crash(struct diskio *d, enum diskio_crash_mode mode, uint64_t seed)
{
	struct fault_io *f = (struct fault_io *)d;
	int fd = d->fd;
	int rc;
	f->cut = true;
	if (mode == DISKIO_CRASH_KEEP_ALL)
		goto out_forget;

	rc = fault_revert(f, true);
	if (rc < 0)
		return rc;

	if (mode == DISKIO_CRASH_RANDOM) {
		uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
		for (size_t i = 0; i < f->nundo; i++) {
			struct fault_undo *u = &f->undo[i];
			uint64_t r = diskio_fault_rand(&s) % 3;
			size_t keep = 0;
			if (r == 0) {
				keep = u->len;
			} else if (r == 1) {
				size_t sectors = (u->len + FAULT_SECTOR - 1) / FAULT_SECTOR;
				keep = (size_t)(diskio_fault_rand(&s) % (sectors + 1)) * FAULT_SECTOR;
				if (keep > u->len)
					keep = u->len;
			}
			rc = diskio_pwrite_all(fd, u->data, keep, u->off);
			if (rc < 0)
				return rc;
		}
	}
out_forget:
	if (fdatasync(fd) < 0)
		return -errno;
	fault_forget_all(f);
	return 0;
}

void diskio_fault_cut_after(struct diskio *d, long n)
{
	struct fault_io *f = (struct fault_io *)d;
	f->opts.cut_at_op = f->ops + n;
}

long diskio_fault_ops(const struct diskio *d)
{
	return ((const struct fault_io *)d)->ops;
}

bool diskio_fault_is_cut(const struct diskio *d)
{
	return ((const struct fault_io *)d)->cut;
}
