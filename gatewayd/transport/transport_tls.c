/* The TLS backends of the transport interface: a server's TLS session
 * over a client socket (base/tls), and the sniffing backend of an address
 * that serves http and https at once (see transport.h). */
#include "gatewayd/transport/transport.h"

#include <errno.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls.h"

/* The first byte of a TLS handshake record (a ClientHello), which no
 * HTTP/1 request line nor the HTTP/2 preface starts with. */
#define TRANSPORT_TLS_HANDSHAKE_RECORD 0x16

/* t->impl of both backends. */
struct transport_tls {
	struct tls_ctx *ctx;   /* the listener's, by reference */
	struct tls_conn *conn; /* NULL while sniffing */
	bool handshaken;       /* the handshake is done and its checks passed */
	bool refused;          /* the handshake failed (its alert is sent) */
};

/* Bytes of a refused client read and dropped at close, at most. */
#define TRANSPORT_TLS_REFUSED_DRAIN (64u * 1024u)

static uint32_t transport_tls_want(const struct tls_conn *c)
{
	uint32_t w = tls_conn_want(c);
	return ((w & TLS_WANT_READ) ? TRANSPORT_WANT_READ : 0) |
	       ((w & TLS_WANT_WRITE) ? TRANSPORT_WANT_WRITE : 0);
}

/* etcd's logTLSHandshakeFailure: a client the TLS listener refused. A
 * client that hung up before saying anything is not worth a warning. */
static void transport_tls_rejected(struct transport *t, int rc)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[NI_MAXHOST], port[NI_MAXSERV], addr[NI_MAXHOST + NI_MAXSERV + 4] = "";

	/* Go's RemoteAddr().String(): "ip:port", "[ip6]:port" */
	if (getpeername(t->fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) &&
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) == 0)
		snprintf(addr, sizeof(addr), "%s%s%s:%s", strchr(host, ':') ? "[" : "", host,
			 strchr(host, ':') ? "]" : "", port);
	if (rc == -ECONNRESET)
		log_debug("rejected connection", LOG_STR("remote-addr", addr),
			  LOG_STR("error", errmsg_get(rc)));
	else
		log_warn("rejected connection", LOG_STR("remote-addr", addr),
			 LOG_STR("error", errmsg_get(rc)));
}

/* The handshake, until it is done; then what ALPN agreed. Returns 0, or
 * -EAGAIN with t->want set, or the refusal. */
static int transport_tls_handshake(struct transport *t, struct transport_tls *x)
{
	int rc = tls_conn_handshake(x->conn);

	if (rc == -EAGAIN) {
		t->want = transport_tls_want(x->conn);
		return rc;
	}
	if (rc) {
		x->refused = true;
		transport_tls_rejected(t, rc);
		return rc;
	}
	const char *alpn = tls_conn_alpn(x->conn);
	if (strcmp(alpn, "h2") == 0)
		t->proto = TRANSPORT_PROTO_H2;
	else if (strcmp(alpn, "http/1.1") == 0)
		t->proto = TRANSPORT_PROTO_HTTP1;
	x->handshaken = true;
	return 0;
}

static ssize_t transport_tls_read(struct transport *t, void *buf, size_t len)
{
	struct transport_tls *x = t->impl;
	ssize_t n;

	if (!x->handshaken) {
		int rc = transport_tls_handshake(t, x);
		if (rc)
			return rc;
	}
	n = tls_conn_read(x->conn, buf, len);
	if (n == -EAGAIN)
		t->want = transport_tls_want(x->conn);
	return n;
}

/* Callers hand one contiguous buffer (h2.c and http1.c do), so the first
 * bytes offered go to one SSL write, which OpenSSL cuts into records. A
 * write that said -EAGAIN has its record half sent: it is finished by
 * the next write, which offers the same bytes again (perhaps moved,
 * perhaps with more after them), as OpenSSL wants. */
static ssize_t transport_tls_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct transport_tls *x = t->impl;
	int i = 0;
	ssize_t n;

	while (i < iovcnt && iov[i].iov_len == 0)
		i++;
	if (i == iovcnt)
		return 0;
	if (!x->handshaken) {
		int rc = transport_tls_handshake(t, x);
		if (rc)
			return rc;
	}
	n = tls_conn_write(x->conn, iov[i].iov_base, iov[i].iov_len);
	if (n == -EAGAIN)
		t->want = transport_tls_want(x->conn);
	return n;
}

static int transport_tls_shutdown(struct transport *t)
{
	struct transport_tls *x = t->impl;

	/* close_notify if it fits now; the socket's end follows either way */
	if (x->handshaken)
		tls_conn_shutdown(x->conn);
	return shutdown(t->fd, SHUT_WR) < 0 ? -errno : 0;
}

/* A refused client often sent more after its part of the handshake (a
 * TLS 1.3 client sends its request at once): closing with those bytes
 * unread would reset the connection, and the client's kernel would drop
 * the alert with it. So the alert is followed by the end of the stream,
 * and what already came is read away first, as Go's server, which read
 * it with the handshake, closes cleanly. */
static void transport_tls_drain_refused(int fd)
{
	char buf[4096];
	size_t total = 0;
	ssize_t n;

	shutdown(fd, SHUT_WR);
	while (total < TRANSPORT_TLS_REFUSED_DRAIN &&
	       ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0 || (n < 0 && errno == EINTR)))
		total += n > 0 ? (size_t)n : 0;
}

static void transport_tls_close(struct transport *t)
{
	struct transport_tls *x = t->impl;

	if (x && x->refused && t->fd >= 0)
		transport_tls_drain_refused(t->fd);
	if (x) {
		tls_conn_free(x->conn);
		free(x);
	}
	t->impl = NULL;
	if (t->fd >= 0)
		close(t->fd);
	t->fd = -1;
}

static const struct transport_ops transport_tls_ops = {
	.read = transport_tls_read,
	.writev = transport_tls_writev,
	.shutdown = transport_tls_shutdown,
	.close = transport_tls_close,
};

/* Starts the TLS session of x on t's socket. */
static int transport_tls_start(struct transport *t, struct transport_tls *x)
{
	int rc = tls_conn_new(x->ctx, t->fd, NULL, &x->conn);

	if (rc)
		return rc;
	t->ops = &transport_tls_ops;
	t->want = 0;
	t->proto = TRANSPORT_PROTO_UNKNOWN;
	return 0;
}

int transport_tls_init(struct transport *t, int fd, struct tls_ctx *ctx)
{
	struct transport_tls *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return -ENOMEM;
	x->ctx = ctx;
	t->fd = fd;
	t->impl = x;
	rc = transport_tls_start(t, x);
	if (rc) {
		free(x);
		t->impl = NULL;
	}
	return rc;
}

/* ---- http and https on one address ---- */

/* Peeks at the client's first byte and becomes the backend it asks for. */
static ssize_t transport_sniff_read(struct transport *t, void *buf, size_t len)
{
	struct transport_tls *x = t->impl;
	unsigned char b;
	ssize_t n;

	do
		n = recv(t->fd, &b, 1, MSG_PEEK);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		t->want = TRANSPORT_WANT_READ;
		return -EAGAIN;
	}
	if (n == 1 && b == TRANSPORT_TLS_HANDSHAKE_RECORD) {
		int rc = transport_tls_start(t, x);
		if (rc)
			return rc;
	} else {
		free(x);
		transport_fd_init(t, t->fd);
	}
	return transport_read(t, buf, len);
}

static ssize_t transport_sniff_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	(void)iov;
	(void)iovcnt;
	t->want = TRANSPORT_WANT_READ;
	return -EAGAIN;
}

static const struct transport_ops transport_sniff_ops = {
	.read = transport_sniff_read,
	.writev = transport_sniff_writev,
	.shutdown = NULL,
	.close = transport_tls_close,
};

int transport_sniff_init(struct transport *t, int fd, struct tls_ctx *ctx)
{
	struct transport_tls *x = calloc(1, sizeof(*x));

	if (!x)
		return -ENOMEM;
	x->ctx = ctx;
	t->ops = &transport_sniff_ops;
	t->fd = fd;
	t->want = 0;
	t->proto = TRANSPORT_PROTO_UNKNOWN;
	t->impl = x;
	return 0;
}

struct tls_conn *transport_tls_conn(const struct transport *t)
{
	const struct transport_tls *x = t->impl;

	return t->ops == &transport_tls_ops && x && x->handshaken ? x->conn : NULL;
}

bool transport_handshaking(const struct transport *t)
{
	const struct transport_tls *x = t->impl;

	if (t->ops == &transport_sniff_ops)
		return true;
	return t->ops == &transport_tls_ops && x && !x->handshaken;
}

void transport_handshake_timed_out(struct transport *t, int timeout_s)
{
	transport_tls_rejected(t, errmsg_set(-ETIMEDOUT, "tls: handshake not done within %ds",
					     timeout_s));
}
