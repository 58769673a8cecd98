/*
 * WAL disk writes (see walio.h): the shared request bookkeeping, the plain
 * backend, the fault-injecting test backend and the backend choice.
 */
#include "raftd/walio.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "raftd/alloc.h"
#include "shm/log/log.h"

int walio_submit(struct walio *io, const struct walio_req *req)
{
	if (io->busy)
		return -EBUSY;
	int rc = io->ops->submit(io, req);
	if (rc == 0) {
		io->busy = true;
		io->requests++;
		io->bytes += req->len;
	}
	return rc;
}

int walio_reap(struct walio *io, bool wait)
{
	uint64_t v;

	if (!io->busy)
		return 0;
	/* Drain first, then look: a completion that lands after the look
	 * signals the eventfd again, so no wake-up is lost. */
	while (read(io->event_fd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	int rc = io->ops->reap(io, wait);
	if (rc != -EINPROGRESS)
		io->busy = false;
	return rc;
}

void walio_close(struct walio *io)
{
	if (!io)
		return;
	if (io->busy)
		(void)walio_reap(io, true);
	int efd = io->event_fd;
	io->ops->destroy(io);
	if (efd >= 0)
		close(efd);
}

int walio_base_init(struct walio *io, const struct walio_ops *ops)
{
	io->ops = ops;
	io->busy = false;
	io->requests = io->bytes = 0;
	io->event_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return io->event_fd < 0 ? -errno : 0;
}

static void walio_signal(struct walio *io)
{
	uint64_t one = 1;
	while (write(io->event_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* pwrite of every byte, in pieces of at most chunk bytes (0 = any). */
static int pwrite_all(int fd, const uint8_t *p, size_t len, uint64_t off, size_t chunk)
{
	while (len > 0) {
		size_t n = chunk && len > chunk ? chunk : len;
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int run_request(const struct walio_req *req, size_t chunk)
{
	int rc = pwrite_all(req->fd, req->buf, req->len, req->off, chunk);
	if (rc == 0 && fdatasync(req->fd) < 0)
		rc = -errno;
	return rc;
}

/* ---- plain ---- */

struct plain_io {
	struct walio base; /* first: a struct walio * is a struct plain_io * */
	int result;
};

static int plain_submit(struct walio *io, const struct walio_req *req)
{
	struct plain_io *p = (struct plain_io *)io;
	p->result = run_request(req, 0);
	walio_signal(io);
	return 0;
}

static int plain_reap(struct walio *io, bool wait)
{
	(void)wait;
	return ((struct plain_io *)io)->result;
}

/* For backends that hold nothing but their own allocation. */
static void destroy_free(struct walio *io)
{
	raftd_free(io);
}

static const struct walio_ops plain_ops = {
	.name = "plain",
	.submit = plain_submit,
	.reap = plain_reap,
	.destroy = destroy_free,
};

int walio_plain_open(struct walio **out)
{
	struct plain_io *p = raftd_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	int rc = walio_base_init(&p->base, &plain_ops);
	if (rc) {
		raftd_free(p);
		return rc;
	}
	*out = &p->base;
	return 0;
}

int walio_open_auto(struct walio **out)
{
	static atomic_bool logged;
	int rc = walio_uring_open(0, out);
	if (rc == 0 || rc == -ENOMEM)
		return rc;
	if (!atomic_exchange(&logged, true))
		log_warn("io_uring is not permitted here; the WAL falls back to pwrite and fdatasync",
			 LOG_ERRNO(rc));
	return walio_plain_open(out);
}

/* ---- fault injection (tests) ---- */

struct fault_io {
	struct walio base; /* first */
	struct walio_fault_opts o;
	long next;         /* index of the next request */
	bool gone;         /* after a tear: nothing reaches the file any more */
	uint64_t rng;
	bool held;
	long held_idx;
	struct walio_req held_req;
	int result;
};

static uint64_t fault_rand(struct fault_io *f)
{
	/* splitmix64 */
	uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Writes a random subset of the request's 512-byte sectors, as a power
 * cut in the middle of the write could leave it. */
static int fault_tear(struct fault_io *f, const struct walio_req *req)
{
	const uint8_t *p = req->buf;
	uint64_t off = req->off, end = req->off + req->len;
	while (off < end) {
		uint64_t next = (off / 512 + 1) * 512;
		if (next > end)
			next = end;
		if (fault_rand(f) & 1) {
			int rc = pwrite_all(req->fd, p + (off - req->off), next - off, off, 0);
			if (rc)
				return rc;
		}
		off = next;
	}
	return 0;
}

static void fault_run(struct fault_io *f, long idx, const struct walio_req *req)
{
	if (f->gone) {
		f->result = -EIO;
	} else if (idx == f->o.fail_at) {
		f->result = -f->o.fail_errno;
	} else if (idx == f->o.tear_at) {
		(void)fault_tear(f, req);
		f->gone = true;
		f->result = -EIO;
	} else {
		f->result = run_request(req, f->o.write_chunk);
	}
	walio_signal(&f->base);
}

static int fault_submit(struct walio *io, const struct walio_req *req)
{
	struct fault_io *f = (struct fault_io *)io;
	long idx = f->next++;
	if (f->o.hold) {
		f->held = true;
		f->held_idx = idx;
		f->held_req = *req;
		return 0;
	}
	fault_run(f, idx, req);
	return 0;
}

static int fault_reap(struct walio *io, bool wait)
{
	struct fault_io *f = (struct fault_io *)io;
	if (f->held)
		return wait ? -EDEADLK : -EINPROGRESS;
	return f->result;
}

static const struct walio_ops fault_ops = {
	.name = "fault",
	.submit = fault_submit,
	.reap = fault_reap,
	.destroy = destroy_free,
};

int walio_fault_open(const struct walio_fault_opts *o, struct walio **out)
{
	struct fault_io *f = raftd_calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	int rc = walio_base_init(&f->base, &fault_ops);
	if (rc) {
		raftd_free(f);
		return rc;
	}
	f->o = *o;
	if (f->o.fail_errno <= 0)
		f->o.fail_errno = EIO;
	f->rng = o->seed;
	*out = &f->base;
	return 0;
}

bool walio_fault_release(struct walio *io)
{
	if (io->ops != &fault_ops)
		return false;
	struct fault_io *f = (struct fault_io *)io;
	if (!f->held)
		return false;
	f->held = false;
	fault_run(f, f->held_idx, &f->held_req);
	return true;
}

bool walio_fault_is_held(const struct walio *io)
{
	return io->ops == &fault_ops && ((const struct fault_io *)io)->held;
}

void walio_fault_set_hold(struct walio *io, bool hold)
{
	if (io->ops == &fault_ops)
		((struct fault_io *)io)->o.hold = hold;
}
