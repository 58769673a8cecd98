/* The transport interface's shared helper and its plain descriptor
 * backend (see transport.h). */
#include "gatewayd/transport/transport.h"

#include <errno.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

/* How many iovecs transport_writev_all hands to one writev. */
#define TRANSPORT_IOV_BATCH 64

ssize_t transport_writev_all(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct iovec batch[TRANSPORT_IOV_BATCH];
	size_t total = 0;
	int i = 0;
	size_t off = 0; /* bytes of iov[i] already written */

	while (i < iovcnt) {
		int n = 0;
		for (int j = i; j < iovcnt && n < TRANSPORT_IOV_BATCH; j++) {
			size_t skip = j == i ? off : 0;
			if (iov[j].iov_len == skip)
				continue;
			batch[n].iov_base = (char *)iov[j].iov_base + skip;
			batch[n].iov_len = iov[j].iov_len - skip;
			n++;
		}
		if (n == 0)
			break;
		ssize_t w = transport_writev(t, batch, n);
		if (w == -EAGAIN)
			break;
		if (w < 0)
			return w;
		total += (size_t)w;
		/* Advance (i, off) by w bytes. */
		size_t left = (size_t)w;
		while (i < iovcnt && left >= iov[i].iov_len - off) {
			left -= iov[i].iov_len - off;
			i++;
			off = 0;
		}
		off += left;
	}
	return (ssize_t)total;
}

/* The result of a failed read(2) or write(2) other than EINTR: -EAGAIN
 * with t->want set when the descriptor is not ready, else -errno. */
static ssize_t transport_fd_error(struct transport *t, uint32_t want)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		t->want = want;
		return -EAGAIN;
	}
	return -errno;
}

static ssize_t transport_fd_read(struct transport *t, void *buf, size_t len)
{
	for (;;) {
		ssize_t n = read(t->fd, buf, len);
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return transport_fd_error(t, TRANSPORT_WANT_READ);
	}
}

static ssize_t transport_fd_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	/* sendmsg with MSG_NOSIGNAL, so a closed peer is -EPIPE rather than
	 * a SIGPIPE; a descriptor that is not a socket (a pipe in a test)
	 * falls back to writev. */
	bool use_writev = false;
	for (;;) {
		ssize_t n;
		if (!use_writev) {
			struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
			n = sendmsg(t->fd, &msg, MSG_NOSIGNAL);
			if (n < 0 && errno == ENOTSOCK) {
				use_writev = true;
				continue;
			}
		} else {
			n = writev(t->fd, iov, iovcnt);
		}
		if (n >= 0)
			return n;
		if (errno != EINTR)
			return transport_fd_error(t, TRANSPORT_WANT_WRITE);
	}
}

static void transport_fd_close(struct transport *t)
{
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

static const struct transport_ops transport_fd_ops = {
	.read = transport_fd_read,
	.writev = transport_fd_writev,
	.shutdown = NULL,
	.close = transport_fd_close,
};

bool transport_is_fd(const struct transport *t)
{
	return t->ops == &transport_fd_ops;
}

void transport_fd_init(struct transport *t, int fd)
{
	t->ops = &transport_fd_ops;
	t->fd = fd;
	t->want = 0;
	t->proto = TRANSPORT_PROTO_UNKNOWN;
	t->impl = NULL;
}
