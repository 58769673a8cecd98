/*
 * The io_uring backend of diskio. A batch with a sync is submitted as one
 * linked chain (write -> write -> ... -> fsync(DATASYNC)), so the sync runs
 * only after every write completed in full. A short write breaks the chain:
 * the kernel cancels the links after it, and they are resubmitted with the
 * remainder of the short write, until everything is written or a real
 * error comes. Batches larger than the ring go in several chains, each
 * reaped before the next; the sync is linked to the last one. A batch
 * without a sync is written with plain pwrite (see uring_write_batch).
 */
#include "stored/diskio.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

#include "stored/alloc.h"

struct uring_io {
	struct diskio base;     /* first: a struct diskio * is a struct uring_io * */
	struct io_uring ring;
	unsigned entries;
	size_t write_cap;       /* test knob: bytes per submitted write, 0 = all */
	/* The background chain (chain_submit) has a ring of its own, so that
	 * reaping a synchronous batch never takes its completions. */
	struct io_uring chain_ring;
	bool chain_ring_ready;
	unsigned chain_left;    /* completions still to come */
	int chain_err;          /* first failure of the chain, 0 if none */
	size_t chain_len[DISKIO_CHAIN_MAX];
};

/* What is still to be done for one write of the batch. */
struct uring_pending {
	const uint8_t *buf;
	size_t left;
	uint64_t off;
};

#define URING_SYNC_TAG UINT64_MAX

static struct io_uring_sqe *uring_sqe(struct uring_io *u)
{
	return io_uring_get_sqe(&u->ring);
}

/* Takes one completion of ring, its tag and result: waiting for it, or
 * -EAGAIN when none is ready and !wait. EINTR is retried. */
static int uring_take(struct io_uring *ring, bool wait, uint64_t *tag, int *res)
{
	for (;;) {
		struct io_uring_cqe *cqe;
		int rc = wait ? io_uring_wait_cqe(ring, &cqe) : io_uring_peek_cqe(ring, &cqe);
		if (rc == -EINTR)
			continue;
		if (rc < 0)
			return rc;
		*tag = io_uring_cqe_get_data64(cqe);
		*res = cqe->res;
		io_uring_cqe_seen(ring, cqe);
		return 0;
	}
}

/*
 * Submits one chain made of the still-pending writes among idx[0..n) and,
 * when with_sync, a trailing fdatasync; waits for all of its completions
 * and applies them. Sets *sync_done when the fsync completed successfully.
 */
static int uring_run_chain(struct uring_io *u, struct uring_pending *pend,
			   const size_t *idx, size_t n, bool with_sync, bool *sync_done)
{
	unsigned queued = 0;
	struct io_uring_sqe *last_write = NULL;
	for (size_t i = 0; i < n; i++) {
		struct uring_pending *p = &pend[idx[i]];
		if (p->left == 0)
			continue;
		struct io_uring_sqe *sqe = uring_sqe(u);
		if (!sqe)
			return -EBUSY;
		size_t len = p->left;
		if (u->write_cap && len > u->write_cap)
			len = u->write_cap;
		if (len > (1u << 30))
			len = 1u << 30;
		io_uring_prep_write(sqe, u->base.fd, p->buf, (unsigned)len, p->off);
		io_uring_sqe_set_data64(sqe, idx[i]);
		/* Writes followed by a sync form one chain; a chunk without
		 * its sync (not the last) goes unlinked. */
		if (with_sync)
			sqe->flags |= IOSQE_IO_LINK;
		last_write = sqe;
		queued++;
	}
	if (with_sync) {
		struct io_uring_sqe *sqe = uring_sqe(u);
		if (!sqe)
			return -EBUSY;
		io_uring_prep_fsync(sqe, u->base.fd, IORING_FSYNC_DATASYNC);
		io_uring_sqe_set_data64(sqe, URING_SYNC_TAG);
		queued++;
	} else if (last_write) {
		last_write->flags &= (uint8_t)~IOSQE_IO_LINK; /* the chain ends here */
	}
	if (queued == 0)
		return 0;
	int rc;
	do {
		rc = io_uring_submit_and_wait(&u->ring, queued);
	} while (rc == -EINTR);
	if (rc < 0)
		return rc;

	int err = 0;
	unsigned reaped = 0;
	while (reaped < queued) {
		uint64_t tag;
		int res;
		rc = uring_take(&u->ring, true, &tag, &res);
		if (rc < 0)
			return rc;
		reaped++;
		if (tag == URING_SYNC_TAG) {
			if (res == 0)
				*sync_done = true;
			else if (res != -ECANCELED && res != -EINTR && res != -EAGAIN && !err)
				err = res;
			continue;
		}
		struct uring_pending *p = &pend[tag];
		if (res > 0) {
			p->buf += res;
			p->left -= (size_t)res;
			p->off += (uint64_t)res;
		} else if (res == 0) {
			if (!err)
				err = -EIO;
		} else if (res != -ECANCELED && res != -EINTR && res != -EAGAIN) {
			if (!err)
				err = res;
		}
	}
	return err;
}

static int uring_write_batch(struct diskio *d, const struct diskio_write *w,
			     size_t n, bool sync)
{
	struct uring_io *u = (struct uring_io *)d;
	/* Without a sync the writes only copy into the page cache: plain
	 * pwrite does that inline, where io_uring would hand buffered writes
	 * to its worker threads on many file systems. */
	if (!sync)
		return diskio_pwrite_batch(d->fd, w, n);
	struct uring_pending *pend = stored_malloc((n ? n : 1) * sizeof(*pend));
	size_t *idx = stored_malloc((n ? n : 1) * sizeof(*idx));
	int rc = -ENOMEM;
	if (!pend || !idx)
		goto out_free;
	for (size_t i = 0; i < n; i++) {
		pend[i].buf = w[i].buf;
		pend[i].left = w[i].len;
		pend[i].off = w[i].off;
	}

	size_t per_chain = u->entries - 1;  /* room for the trailing fsync */
	for (size_t start = 0; start < n || (start == 0 && n == 0);) {
		size_t end = n - start > per_chain ? start + per_chain : n;
		bool last = end == n;
		bool sync_done = false;
		/* Resubmit until this chunk (and its sync, on the last chunk) is done. */
		for (;;) {
			size_t m = 0;
			for (size_t i = start; i < end; i++)
				if (pend[i].left)
					idx[m++] = i;
			bool want_sync = last && sync && !sync_done;
			if (m == 0 && !want_sync)
				break;
			bool chain_synced = false;
			rc = uring_run_chain(u, pend, idx, m, want_sync, &chain_synced);
			if (rc < 0)
				goto out_free;
			/* A sync counts only if it ran after every write of the
			 * chunk was complete; otherwise it runs again. */
			bool complete = true;
			for (size_t i = start; i < end; i++)
				complete = complete && pend[i].left == 0;
			if (chain_synced && complete)
				sync_done = true;
		}
		if (n == 0)
			break;
		start = end;
	}
	rc = 0;
out_free:
	stored_free(idx);
	stored_free(pend);
	return rc;
}

static int uring_sync(struct diskio *d)
{
	return uring_write_batch(d, NULL, 0, true);
}

static int uring_read(struct diskio *d, void *buf, size_t len, uint64_t off)
{
	return diskio_pread_all(d->fd, buf, len, off);
}

static int uring_truncate(struct diskio *d, uint64_t size)
{
	struct diskio *plain;
	int rc = diskio_plain_open(d->fd, &plain);
	if (rc < 0)
		return rc;
	rc = diskio_truncate(plain, size);
	diskio_close(plain);
	return rc;
}

static int uring_allocate(struct diskio *d, uint64_t off, uint64_t len)
{
	struct diskio *plain;
	int rc = diskio_plain_open(d->fd, &plain);
	if (rc < 0)
		return rc;
	rc = diskio_allocate(plain, off, len);
	diskio_close(plain);
	return rc;
}

static int uring_chain_reap(struct diskio *d, bool wait, bool *done);

static void uring_destroy(struct diskio *d)
{
	struct uring_io *u = (struct uring_io *)d;
	if (u->chain_ring_ready) {
		bool done;
		(void)uring_chain_reap(d, true, &done);  /* its buffers are the caller's */
		io_uring_queue_exit(&u->chain_ring);
	}
	io_uring_queue_exit(&u->ring);
	stored_free(u);
}

/* user_data of a chain's ops: 2i for the write of entry i, 2i+1 for its
 * sync. */
static int uring_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	struct uring_io *u = (struct uring_io *)d;
	int rc;
	if (u->chain_left)
		return -EBUSY;
	if (!u->chain_ring_ready) {
		rc = io_uring_queue_init(2 * DISKIO_CHAIN_MAX, &u->chain_ring, 0);
		if (rc < 0)
			return rc;
		u->chain_ring_ready = true;
	}
	for (size_t i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&u->chain_ring);
		io_uring_prep_write(sqe, d->fd, w[i].buf, (unsigned)w[i].len, w[i].off);
		sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, 2 * i);
		sqe = io_uring_get_sqe(&u->chain_ring);
		io_uring_prep_fsync(sqe, d->fd, IORING_FSYNC_DATASYNC);
		if (i + 1 < n)
			sqe->flags |= IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, 2 * i + 1);
		u->chain_len[i] = w[i].len;
	}
	u->chain_err = 0;
	rc = io_uring_submit(&u->chain_ring);
	if (rc < 0) {
		/* Nothing went in: drop the prepared entries by submitting
		 * nothing more; the ring is reset on the next init. */
		io_uring_queue_exit(&u->chain_ring);
		u->chain_ring_ready = false;
		return rc;
	}
	u->chain_left = (unsigned)rc;
	if ((size_t)rc < 2 * n)
		u->chain_err = -EIO;  /* the rest never ran: the caller redoes it all */
	return 0;
}

static int uring_chain_reap(struct diskio *d, bool wait, bool *done)
{
	struct uring_io *u = (struct uring_io *)d;
	while (u->chain_left) {
		uint64_t tag;
		int res;
		int rc = uring_take(&u->chain_ring, wait, &tag, &res);
		if (rc == -EAGAIN) {
			*done = false;
			return 0;
		}
		if (rc < 0)
			return rc;
		u->chain_left--;
		int err = 0;
		if (res < 0)
			err = res;
		else if (tag % 2 == 0 && (size_t)res != u->chain_len[tag / 2])
			err = -EIO;
		if (err && !u->chain_err)
			u->chain_err = err;
	}
	*done = true;
	return u->chain_err;
}

static const struct diskio_ops uring_ops = {
	.name = "io_uring",
	.concurrent_writes = true,
	.write_batch = uring_write_batch,
	.read = uring_read,
	.sync = uring_sync,
	.truncate = uring_truncate,
	.allocate = uring_allocate,
	.destroy = uring_destroy,
	.chain_submit = uring_chain_submit,
	.chain_reap = uring_chain_reap,
};

int diskio_uring_open(int fd, unsigned entries, struct diskio **out)
{
	struct uring_io *u = stored_calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	if (entries == 0)
		entries = 64;
	if (entries < 2)
		entries = 2;
	int rc = io_uring_queue_init(entries, &u->ring, 0);
	if (rc < 0) {
		stored_free(u);
		return rc;
	}
	u->entries = u->ring.sq.ring_entries;
	u->base.ops = &uring_ops;
	u->base.fd = fd;
	*out = &u->base;
	return 0;
}

void diskio_uring_set_write_cap(struct diskio *d, size_t cap)
{
	if (d->ops == &uring_ops)
		((struct uring_io *)d)->write_cap = cap;
}
