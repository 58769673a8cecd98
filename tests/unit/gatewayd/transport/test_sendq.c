/*
 * Unit tests for gatewayd/transport/sendq.h, on real sockets: several sends in one
 * batch each deliver their own slice of the buffer, in full; a socket
 * that cannot take everything takes a part and the batch does not wait
 * (an alarm fails the test if it would); a socket with nothing free gives
 * -EAGAIN; a closed peer gives -EPIPE without a SIGPIPE; a pipe gives
 * -ENOTSOCK; a full queue refuses the next add; batches may follow one
 * another, and fini is harmless twice.
 */
#include "shm_testlib.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gatewayd/transport/sendq.h"

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0);
	CHECK_EQ(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static void pair(int sv[2])
{
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	set_nonblock(sv[0]);
	set_nonblock(sv[1]);
}

/* Everything readable on fd now, appended to out; returns the count. */
static size_t drain(int fd, uint8_t *out, size_t cap)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = read(fd, out + got, cap - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == cap)
			break;
	}
	return got;
}

static uint8_t buf[1 << 20];
static uint8_t in[1 << 20];

static void test_batch(void)
{
	struct sendq q;
	int rc = sendq_init(&q);
	if (rc) {
		printf("test_sendq: io_uring refused (%d): nothing to test\n", rc);
		exit(77);
	}
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);

	/* Three sockets, three slices, one batch. */
	int a[2], b[2], c[2];
	pair(a);
	pair(b);
	pair(c);
	CHECK(sendq_add(&q, a, a[0], 0, 100));
	CHECK(sendq_add(&q, b, b[0], 100, 1000));
	CHECK(sendq_add(&q, c, c[0], 5000, 7));
	CHECK(!sendq_add(&q, c, c[0], 5000, 0)); /* nothing to send */
	CHECK_EQ(sendq_send(&q, buf), 3);
	CHECK(q.ent[0].owner == a && q.ent[1].owner == b && q.ent[2].owner == c);
	CHECK_EQ(q.ent[0].res, 100);
	CHECK_EQ(q.ent[1].res, 1000);
	CHECK_EQ(q.ent[2].res, 7);
	CHECK_EQ(drain(a[1], in, sizeof(in)), 100);
	CHECK(memcmp(in, buf, 100) == 0);
	CHECK_EQ(drain(b[1], in, sizeof(in)), 1000);
	CHECK(memcmp(in, buf + 100, 1000) == 0);
	CHECK_EQ(drain(c[1], in, sizeof(in)), 7);
	CHECK(memcmp(in, buf + 5000, 7) == 0);
	CHECK_EQ(q.batches, 1);
	CHECK_EQ(q.sends, 3);

	/* A small socket buffer: the send takes a part and returns at once
	 * (were it to wait for room, the alarm would end the test); the
	 * next send to the same full socket takes nothing: -EAGAIN. */
	int small = 4096;
	CHECK_EQ(setsockopt(a[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	alarm(10);
	CHECK(sendq_add(&q, a, a[0], 0, sizeof(buf)));
	CHECK(sendq_add(&q, b, b[0], 64, 64));
	CHECK_EQ(sendq_send(&q, buf), 2);
	int part = q.ent[0].res;
	CHECK(part > 0 && (size_t)part < sizeof(buf));
	CHECK_EQ(q.ent[1].res, 64);
	CHECK(sendq_add(&q, a, a[0], (size_t)part, sizeof(buf) - (size_t)part));
	CHECK_EQ(sendq_send(&q, buf), 1);
	CHECK_EQ(q.ent[0].res, -EAGAIN);
	alarm(0);
	CHECK_EQ(drain(a[1], in, sizeof(in)), (size_t)part);
	CHECK(memcmp(in, buf, (size_t)part) == 0);
	CHECK_EQ(drain(b[1], in, sizeof(in)), 64);
	CHECK(memcmp(in, buf + 64, 64) == 0);

	/* The peer is gone: -EPIPE, and no SIGPIPE kills the test. A pipe
	 * is no socket. Neither keeps the others of its batch from going. */
	close(c[1]);
	int p[2];
	CHECK_EQ(pipe(p), 0);
	CHECK(sendq_add(&q, c, c[0], 0, 10));
	CHECK(sendq_add(&q, p, p[1], 0, 10));
	CHECK(sendq_add(&q, b, b[0], 10, 10));
	CHECK_EQ(sendq_send(&q, buf), 3);
	CHECK_EQ(q.ent[0].res, -EPIPE);
	CHECK_EQ(q.ent[1].res, -ENOTSOCK);
	CHECK_EQ(q.ent[2].res, 10);
	CHECK_EQ(drain(b[1], in, sizeof(in)), 10);
	CHECK(memcmp(in, buf + 10, 10) == 0);
	CHECK(q.on);

	/* A full queue refuses the next one; the batch still goes. */
	for (unsigned i = 0; i < SENDQ_ENTRIES; i++)
		CHECK(sendq_add(&q, b, b[0], i, 1));
	CHECK(!sendq_add(&q, b, b[0], 0, 1));
	CHECK_EQ(sendq_send(&q, buf), SENDQ_ENTRIES);
	for (unsigned i = 0; i < SENDQ_ENTRIES; i++)
		CHECK_EQ(q.ent[i].res, 1);
	CHECK_EQ(drain(b[1], in, sizeof(in)), SENDQ_ENTRIES);
	CHECK(memcmp(in, buf, SENDQ_ENTRIES) == 0);
	CHECK_EQ(sendq_send(&q, buf), 0); /* nothing queued */

	sendq_fini(&q);
	CHECK(!q.on);
	CHECK(!sendq_add(&q, b, b[0], 0, 1));
	sendq_fini(&q);
	int fds[] = { a[0], a[1], b[0], b[1], c[0], p[0], p[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		close(fds[i]);
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test */
	test_batch();
	printf("test_sendq: all passed\n");
	return 0;
}
