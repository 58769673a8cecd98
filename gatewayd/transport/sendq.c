/* A turn's socket writes in one io_uring_enter (see sendq.h). */
#include "gatewayd/transport/sendq.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

int sendq_init(struct sendq *q)
{
	memset(q, 0, sizeof(*q));
	/* SUBMIT_ALL: one send that fails at submission (a closed
	 * descriptor) does not stop the ones after it. */
	int rc = io_uring_queue_init(SENDQ_ENTRIES, &q->ring, IORING_SETUP_SUBMIT_ALL);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(SENDQ_ENTRIES, &q->ring, 0);
	if (rc < 0)
		return rc;
	q->on = true;
	return 0;
}

void sendq_fini(struct sendq *q)
{
	if (q->on)
		io_uring_queue_exit(&q->ring);
	q->on = false;
	q->n = 0;
}

bool sendq_add(struct sendq *q, void *owner, int fd, size_t off, size_t len)
{
	if (!q->on || q->n == SENDQ_ENTRIES || len == 0)
		return false;
	q->ent[q->n++] = (struct sendq_ent){ .owner = owner, .fd = fd, .off = off, .len = len };
	return true;
}

/* Gives the ring up for good: entries still in it would go with the next
 * batch, over buffers reused by then. */
static void sendq_give_up(struct sendq *q, int why)
{
	io_uring_queue_exit(&q->ring);
	q->on = false;
	q->failed = why;
}

unsigned sendq_send(struct sendq *q, const uint8_t *buf)
{
	unsigned n = q->n;

	q->n = 0;
	if (n == 0)
		return 0;
	for (unsigned i = 0; i < n; i++) {
		struct sendq_ent *e = &q->ent[i];
		/* The ring has an entry for each of ours and is empty
		 * between calls, so this cannot fail. */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
		io_uring_prep_send(sqe, e->fd, buf + e->off, e->len, MSG_DONTWAIT | MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, i);
		e->res = INT32_MIN; /* no completion yet */
	}
	/* MSG_DONTWAIT makes every send complete inside this call (a full
	 * socket completes with -EAGAIN instead of waiting), so waiting for
	 * all of them does not sleep. The kernel waits only when it took
	 * every send. */
	int rc;
	do
		rc = io_uring_submit_and_wait(&q->ring, n);
	while (rc == -EINTR);
	unsigned submitted = rc > 0 ? (unsigned)rc : 0, seen = 0;
	while (seen < submitted) {
		struct io_uring_cqe *cqe;
		int w = io_uring_wait_cqe(&q->ring, &cqe);
		if (w == -EINTR)
			continue;
		if (w < 0)
			break;
		uint64_t i = io_uring_cqe_get_data64(cqe);
		if (i < n)
			q->ent[i].res = cqe->res;
		io_uring_cqe_seen(&q->ring, cqe);
		seen++;
	}
	if (seen < n) {
		/* The kernel took sends in order: the ones after the first
		 * `submitted` never left (-EAGAIN: the caller writes them
		 * itself); one taken whose completion did not come may or
		 * may not have gone, and its stream cannot be trusted
		 * (-EIO: the caller closes it). */
		for (unsigned i = 0; i < n; i++)
			if (q->ent[i].res == INT32_MIN)
				q->ent[i].res = i < submitted ? -EIO : -EAGAIN;
		sendq_give_up(q, rc < 0 ? rc : -EIO);
	}
	q->batches++;
	q->sends += seen;
	return n;
}
