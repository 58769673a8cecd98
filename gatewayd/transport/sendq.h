/*
 * One system call for a turn's socket writes.
 *
 * At the end of a turn the loop writes every connection that got output
 * (server.c, step 8). One sendmsg each costs a system call each, and on a
 * busy machine a process is most often preempted on the way back from one:
 * a write to a loopback or local client wakes that client, which then
 * takes the CPU before the loop has written the next connection, so the
 * watchers of one event could get it a scheduler slice apart. A sendq
 * hands all the sends to the kernel in one io_uring_enter, where they run
 * one after the other before the process can be preempted.
 *
 * Each send carries MSG_DONTWAIT: a socket that cannot take everything
 * takes what it can, and the send completes at once with the count (or
 * -EAGAIN) instead of waiting in the ring. So when sendq_send returns,
 * every send has its result, and the buffers may be reused: the semantics
 * are those of a non-blocking sendmsg per connection, in order.
 *
 * Where io_uring is refused (an old kernel, a seccomp or sysctl policy),
 * sendq_init says so and the loop writes each connection itself.
 */
#ifndef CETCD_GATEWAYD_SENDQ_H
#define CETCD_GATEWAYD_SENDQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <liburing.h>

/* Sends per batch; more connections than that are written one by one. */
#define SENDQ_ENTRIES 128u

struct sendq_ent {
	void *owner;    /* the caller's, e.g. the connection */
	int fd;
	size_t off;     /* the bytes: [off, off + len) of the caller's buffer */
	size_t len;
	int res;        /* after sendq_send: bytes sent (>= 0) or -errno */
};

struct sendq {
	struct io_uring ring;
	bool on;                /* the ring exists */
	int failed;             /* why the ring was given up (-errno), or 0 */
	unsigned n;             /* sends queued */
	struct sendq_ent ent[SENDQ_ENTRIES];
	uint64_t batches;       /* statistics: io_uring_enter calls */
	uint64_t sends;         /*   and the sends they carried */
};

/* Sets up q's ring. 0, or the negative errno io_uring gave (q->on is
 * false then, and sendq_add refuses everything). */
int sendq_init(struct sendq *q);
void sendq_fini(struct sendq *q);

/* Queues a send of len > 0 bytes at off of the buffer sendq_send will be
 * given. false when q is full or off. */
bool sendq_add(struct sendq *q, void *owner, int fd, size_t off, size_t len);

/* Sends everything queued from buf, with one io_uring_enter, and fills
 * each entry's res; the entries stay readable until the next sendq_add.
 * A send the ring could not carry at all gets res -EAGAIN (nothing sent:
 * the caller keeps it, and writes it by itself), one whose fate is
 * unknown -EIO (close that connection); either way the ring is given up
 * for good (q->on false, q->failed the reason). Returns how many entries
 * there are. */
unsigned sendq_send(struct sendq *q, const uint8_t *buf);

#endif
