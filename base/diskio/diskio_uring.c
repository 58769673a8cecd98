/*
 * The io_uring backend of diskio. Every synced write goes as a list of
 * ops (writes and fsync(DATASYNC)s) run strictly in order: the ops are
 * submitted as one linked chain, as many as the ring holds. A short write
 * breaks the link (the kernel cancels the ops after it), and the list is
 * submitted again from where the write stopped, until every op is done.
 * Any other failure ends the list with that error; a failed fsync is
 * never submitted again (the kernel may have dropped the dirty pages, so
 * a later success proves nothing).
 *
 * Two lists use it: a synchronous batch (writes, then one fsync), reaped
 * before write_batch returns, and the background chain (write, fsync,
 * write, fsync, ...) on a ring of its own whose completions signal the
 * diskio's eventfd. Writes without a sync go through plain pwrite: they
 * only copy into the page cache, which pwrite does inline where io_uring
 * would hand buffered writes to its worker threads. A chain of one small
 * write runs on the caller's thread, pwrite and fdatasync, when the
 * caller asked for it (diskio_chain_runs_inline says which): no
 * worker thread is woken to start the sync, and no completion wakes the
 * caller, two hand-offs that can each cost as much as the copy and more
 * when the other CPU sleeps.
 */
#include "base/diskio/diskio.h"

#include <errno.h>
#include <liburing.h>
#include <unistd.h>

enum { OP_WRITE, OP_SYNC };

struct uring_op {
	int kind;
	const uint8_t *buf;  /* OP_WRITE: what is left to write */
	size_t left;         /* OP_WRITE: bytes left; OP_SYNC: 1 until done */
	uint64_t off;
};

/* A list of ops run in order on one ring. */
struct uring_list {
	struct io_uring ring;
	bool ready;           /* ring initialised */
	unsigned cap;         /* ops one submission may hold */
	struct uring_op *ops;
	size_t n;
	size_t next;          /* ops before it are done */
	unsigned outstanding; /* completions still to come */
	int err;              /* first real error, 0 if none */
};

struct uring_io {
	struct diskio base;   /* first: a struct diskio * is a struct uring_io * */
	size_t write_cap;     /* test knob: bytes per submitted write, 0 = all */
	unsigned batch_entries; /* size of the batch ring, made on first use */
	struct uring_list batch;
	struct uring_list chain;
	struct uring_op chain_ops[2 * DISKIO_CHAIN_MAX];
};

/* Queues ops from l->next on, linked, up to the ring's room, and submits
 * them. */
static int list_queue(struct uring_io *u, struct uring_list *l)
{
	unsigned queued = 0;
	struct io_uring_sqe *sqe = NULL;
	for (size_t i = l->next; i < l->n && queued < l->cap; i++) {
		struct uring_op *op = &l->ops[i];
		if (op->left == 0)
			continue;
		sqe = io_uring_get_sqe(&l->ring);
		if (!sqe)
			break;
		if (op->kind == OP_WRITE) {
			size_t len = op->left;
			if (u->write_cap && len > u->write_cap)
				len = u->write_cap;
			if (len > (1u << 30))
				len = 1u << 30;
			io_uring_prep_write(sqe, u->base.fd, op->buf, (unsigned)len, op->off);
		} else {
			io_uring_prep_fsync(sqe, u->base.fd, IORING_FSYNC_DATASYNC);
		}
		io_uring_sqe_set_data64(sqe, i);
		sqe->flags |= IOSQE_IO_LINK;
		queued++;
	}
	if (queued == 0)
		return 0;
	sqe->flags &= (uint8_t)~IOSQE_IO_LINK; /* the chain ends here */
	unsigned submitted = 0;
	while (submitted < queued) {
		int rc = io_uring_submit(&l->ring);
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		if (rc < 0) {
			/* What went in still completes; the rest never runs. */
			l->outstanding = submitted;
			if (!l->err)
				l->err = rc;
			return rc;
		}
		submitted += (unsigned)rc;
	}
	l->outstanding = queued;
	return 0;
}

static void list_apply(struct uring_list *l, uint64_t idx, int res)
{
	struct uring_op *op = &l->ops[idx];
	if (op->kind == OP_WRITE) {
		if (res > 0) {
			op->buf += res;
			op->left -= (size_t)res;
			op->off += (uint64_t)res;
		} else if (res == 0) {
			if (!l->err)
				l->err = -EIO; /* no progress on a regular file */
		} else if (res != -ECANCELED && res != -EINTR && res != -EAGAIN) {
			if (!l->err)
				l->err = res;
		}
	} else if (res == 0) {
		op->left = 0;
	} else if (res != -ECANCELED) {
		/* A sync that ran and failed: never again. */
		if (!l->err)
			l->err = res;
	}
}

/* Runs the list to its end: 0 when every op is done, -EINPROGRESS when
 * !wait and completions are still to come, else the first error. */
static int list_run(struct uring_io *u, struct uring_list *l, bool wait)
{
	for (;;) {
		while (l->outstanding > 0) {
			struct io_uring_cqe *cqe;
			int rc = wait ? io_uring_wait_cqe(&l->ring, &cqe)
				      : io_uring_peek_cqe(&l->ring, &cqe);
			if (rc == -EAGAIN && !wait)
				return -EINPROGRESS;
			if (rc == -EINTR)
				continue;
			if (rc < 0)
				return rc;
			uint64_t idx = io_uring_cqe_get_data64(cqe);
			int res = cqe->res;
			io_uring_cqe_seen(&l->ring, cqe);
			l->outstanding--;
			list_apply(l, idx, res);
		}
		if (l->err)
			return l->err;
		while (l->next < l->n && l->ops[l->next].left == 0)
			l->next++;
		if (l->next == l->n)
			return 0;
		int rc = list_queue(u, l);
		if (rc < 0 && l->outstanding == 0)
			return rc;
	}
}

static void list_start(struct uring_list *l, struct uring_op *ops, size_t n)
{
	l->ops = ops;
	l->n = n;
	l->next = 0;
	l->err = 0;
	l->outstanding = 0;
}

static void op_write(struct uring_op *op, const struct diskio_write *w)
{
	*op = (struct uring_op){ OP_WRITE, w->buf, w->len, w->off };
}

static void op_sync(struct uring_op *op)
{
	*op = (struct uring_op){ OP_SYNC, NULL, 1, 0 };
}

static int uring_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync)
{
	struct uring_io *u = (struct uring_io *)d;
	if (!sync)
		return diskio_pwrite_unsynced(d, w, n);
	if (!u->batch.ready) {
		/* Made on first use (the WAL never needs it); where the kernel
		 * refuses another ring, the batch goes through plain syscalls. */
		if (io_uring_queue_init(u->batch_entries, &u->batch.ring, 0) < 0)
			return diskio_plain_ops()->write_batch(d, w, n, sync);
		u->batch.ready = true;
		u->batch.cap = u->batch.ring.sq.ring_entries;
	}
	struct uring_op *ops = diskio_zalloc((n + 1) * sizeof(*ops));
	if (!ops)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		op_write(&ops[i], &w[i]);
	op_sync(&ops[n]);
	list_start(&u->batch, ops, n + 1);
	int rc = list_queue(u, &u->batch);
	if (rc == 0 || u->batch.outstanding)
		rc = list_run(u, &u->batch, true);
	diskio_free(ops);
	return rc;
}

static int uring_sync(struct diskio *d)
{
	return uring_write_batch(d, NULL, 0, true);
}

static int uring_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	struct uring_io *u = (struct uring_io *)d;
	struct uring_list *l = &u->chain;
	for (size_t i = 0; i < n; i++) {
		op_write(&u->chain_ops[2 * i], &w[i]);
		op_sync(&u->chain_ops[2 * i + 1]);
	}
	list_start(l, u->chain_ops, 2 * n);
	if (diskio_chain_runs_inline(d, n, w[0].len)) {
		/* the caller's own write and fdatasync; the reap reports it,
		 * as it does the worker's */
		int rc = diskio_pwrite_all(u->base.fd, w[0].buf, w[0].len, w[0].off);
		if (rc == 0 && fdatasync(u->base.fd) < 0)
			rc = -errno;
		l->err = rc;
		l->next = l->n;
		diskio_signal(&u->base);
		return 0;
	}
	int rc = list_queue(u, l);
	/* Part of it may have gone in: it is reaped, and reports rc. */
	return rc < 0 && l->outstanding == 0 ? rc : 0;
}

static int uring_chain_reap(struct diskio *d, bool wait)
{
	struct uring_io *u = (struct uring_io *)d;
	return list_run(u, &u->chain, wait);
}

static int uring_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return diskio_plain_ops()->read(d, buf, len, off);
}

static int uring_truncate(struct diskio *d, uint64_t size)
{
	return diskio_plain_ops()->truncate(d, size);
}

static int uring_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	return diskio_plain_ops()->allocate(d, off, len);
}

static void uring_destroy(struct diskio *d)
{
	struct uring_io *u = (struct uring_io *)d;
	io_uring_queue_exit(&u->chain.ring);
	if (u->batch.ready)
		io_uring_queue_exit(&u->batch.ring);
	diskio_free(u);
}

static const struct diskio_ops uring_ops = {
	.name = "io_uring",
	.concurrent_writes = true,
	.write_batch = uring_write_batch,
	.read = uring_read,
	.sync = uring_sync,
	.truncate = uring_truncate,
	.allocate = uring_allocate,
	.chain_submit = uring_chain_submit,
	.chain_reap = uring_chain_reap,
	.destroy = uring_destroy,
};

int diskio_uring_open(int fd, unsigned entries, struct diskio **out)
{
	struct uring_io *u = diskio_zalloc(sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->batch_entries = entries ? entries : 64;
	/* The chain ring is made now, so that a kernel that refuses io_uring
	 * says so here, where diskio_open_auto can fall back. */
	int rc = io_uring_queue_init(2 * DISKIO_CHAIN_MAX, &u->chain.ring, 0);
	if (rc < 0)
		goto out_free;
	u->chain.ready = true;
	u->chain.cap = 2 * DISKIO_CHAIN_MAX;
	rc = diskio_base_init(&u->base, &uring_ops, fd);
	if (rc < 0)
		goto out_exit;
	rc = io_uring_register_eventfd(&u->chain.ring, u->base.event_fd);
	if (rc < 0)
		goto out_close_eventfd;
	*out = &u->base;
	return 0;

out_close_eventfd:
	close(u->base.event_fd);
out_exit:
	io_uring_queue_exit(&u->chain.ring);
out_free:
	diskio_free(u);
	return rc;
}

void diskio_uring_set_write_cap(struct diskio *d, size_t cap)
{
	if (d->ops == &uring_ops)
		((struct uring_io *)d)->write_cap = cap;
}
