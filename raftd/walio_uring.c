/*
 * The io_uring backend of walio. A request is one linked chain:
 * write(remaining bytes) -> fsync(DATASYNC). A short write breaks the
 * link (the kernel cancels the fsync), and the chain is submitted again
 * from where the write stopped, until every byte is written and an fsync
 * that ran after the last byte succeeded. Any other error fails the
 * request; a failed fsync is never retried (after a failed fdatasync the
 * kernel may have dropped the dirty pages, so a later success proves
 * nothing).
 */
#include "raftd/walio.h"

#include <errno.h>
#include <liburing.h>
#include <unistd.h>

#include "raftd/alloc.h"

enum { TAG_WRITE = 1, TAG_SYNC = 2 };

struct uring_io {
	struct walio base; /* first: a struct walio * is a struct uring_io * */
	struct io_uring ring;
	struct walio_req req;
	size_t done;          /* bytes of req known written */
	size_t write_cap;     /* test knob: bytes per write, 0 = no cap */
	unsigned outstanding; /* completions still expected for this chain */
	bool synced;          /* an fsync succeeded after done == req.len */
	int err;              /* first real error of the request */
};

static bool transient(int res)
{
	return res == -EINTR || res == -EAGAIN || res == -ECANCELED;
}

/* Queues and submits the chain for what is left of the request. */
static int uring_queue_chain(struct uring_io *u)
{
	struct io_uring_sqe *sqe;
	unsigned queued = 0;

	if (u->done < u->req.len) {
		size_t len = u->req.len - u->done;
		if (u->write_cap && len > u->write_cap)
			len = u->write_cap;
		if (len > (1u << 30))
			len = 1u << 30;
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_write(sqe, u->req.fd, (const uint8_t *)u->req.buf + u->done,
				    (unsigned)len, u->req.off + u->done);
		io_uring_sqe_set_data64(sqe, TAG_WRITE);
		sqe->flags |= IOSQE_IO_LINK;
		queued++;
	}
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return -EBUSY;
	io_uring_prep_fsync(sqe, u->req.fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(sqe, TAG_SYNC);
	queued++;

	int rc;
	do {
		rc = io_uring_submit(&u->ring);
	} while (rc == -EINTR || rc == -EAGAIN);
	if (rc < 0)
		return rc;
	u->outstanding = queued;
	return 0;
}

static int uring_submit(struct walio *io, const struct walio_req *req)
{
	struct uring_io *u = (struct uring_io *)io;
	u->req = *req;
	u->done = 0;
	u->synced = false;
	u->err = 0;
	return uring_queue_chain(u);
}

static void uring_apply(struct uring_io *u, uint64_t tag, int res)
{
	if (tag == TAG_WRITE) {
		if (res > 0)
			u->done += (size_t)res;
		else if (res == 0 && !u->err)
			u->err = -EIO; /* no progress on a regular file */
		else if (res < 0 && !transient(res) && !u->err)
			u->err = res;
	} else if (res == 0) {
		if (u->done == u->req.len)
			u->synced = true;
	} else if (res != -ECANCELED && !u->err) {
		u->err = res;
	}
}

static int uring_reap(struct walio *io, bool wait)
{
	struct uring_io *u = (struct uring_io *)io;

	for (;;) {
		while (u->outstanding > 0) {
			struct io_uring_cqe *cqe;
			int rc = wait ? io_uring_wait_cqe(&u->ring, &cqe)
				      : io_uring_peek_cqe(&u->ring, &cqe);
			if (rc == -EAGAIN && !wait)
				return -EINPROGRESS;
			if (rc == -EINTR)
				continue;
			if (rc < 0)
				return rc;
			uint64_t tag = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&u->ring, cqe);
			u->outstanding--;
			uring_apply(u, tag, res);
		}
		if (u->err)
			return u->err;
		if (u->synced)
			return 0;
		int rc = uring_queue_chain(u);
		if (rc < 0)
			return rc;
	}
}

static void uring_destroy(struct walio *io)
{
	struct uring_io *u = (struct uring_io *)io;
	io_uring_queue_exit(&u->ring);
	raftd_free(u);
}

static const struct walio_ops uring_ops = {
	.name = "io_uring",
	.submit = uring_submit,
	.reap = uring_reap,
	.destroy = uring_destroy,
};

int walio_uring_open(unsigned entries, struct walio **out)
{
	struct uring_io *u = raftd_calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	int rc = io_uring_queue_init(entries ? entries : 8, &u->ring, 0);
	if (rc < 0)
		goto out_free;
	rc = walio_base_init(&u->base, &uring_ops);
	if (rc < 0)
		goto out_exit;
	rc = io_uring_register_eventfd(&u->ring, u->base.event_fd);
	if (rc < 0)
		goto out_close_eventfd;
	*out = &u->base;
	return 0;

out_close_eventfd:
	close(u->base.event_fd);
out_exit:
	io_uring_queue_exit(&u->ring);
out_free:
	raftd_free(u);
	return rc;
}

void walio_uring_set_write_cap(struct walio *io, size_t cap)
{
	if (io->ops == &uring_ops)
		((struct uring_io *)io)->write_cap = cap;
}
