/* A client connection's byte stream, behind a small ops table.
 *
 * The event loop reads and writes a connection only through these ops, so
 * a plain TCP socket, a TLS session (OpenSSL, ALPN "h2" or "http/1.1") and
 * a test backend in memory all plug into the same loop and the same
 * protocol code (h2.h for HTTP/2, an HTTP/1.1 handler for /health,
 * /metrics and /v3/). This file defines the interface and the plain
 * descriptor backend; it knows nothing about HTTP.
 *
 * Non-blocking contract, the same for every backend:
 * - read and writev never block. When they cannot make progress now they
 *   return -EAGAIN and set `want` to what would let them progress: a TLS
 *   backend may need the socket writable to finish a read (renegotiation,
 *   a handshake record), so the loop polls for what `want` says, not for
 *   what it was trying to do.
 * - writev may write fewer bytes than offered; the caller keeps the rest.
 * - Errors are negative errno values; none is left in errno.
 */
#ifndef CETCD_GATEWAYD_TRANSPORT_H
#define CETCD_GATEWAYD_TRANSPORT_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct transport;

/* Bits of transport.want. */
#define TRANSPORT_WANT_READ 0x1u
#define TRANSPORT_WANT_WRITE 0x2u

/* What the byte stream carries, when the transport knows it (TLS ALPN);
 * TRANSPORT_PROTO_UNKNOWN means the loop tells by the first bytes (the
 * HTTP/2 client preface or an HTTP/1 request line). */
enum transport_proto {
	TRANSPORT_PROTO_UNKNOWN = 0,
	TRANSPORT_PROTO_H2 = 1,
	TRANSPORT_PROTO_HTTP1 = 2,
};

struct transport_ops {
	/* Reads up to len bytes into buf. Returns the count read (> 0), 0 at
	 * the peer's end of stream, -EAGAIN when nothing can be read now, or
	 * another negative errno (-ECONNRESET, -EPROTO for a TLS failure). */
	ssize_t (*read)(struct transport *t, void *buf, size_t len);

	/* Writes from iov[0..iovcnt), in order, as much as fits now.
	 * Returns the count written (> 0, possibly short), -EAGAIN when
	 * nothing could be written now, or another negative errno
	 * (-EPIPE, -ECONNRESET). Never raises SIGPIPE. */
	ssize_t (*writev)(struct transport *t, const struct iovec *iov, int iovcnt);

	/* Ends the write side once what was written is out (a TLS session
	 * sends its close_notify first) and leaves reads open. Returns 0 or
	 * a negative errno. NULL: shutdown(2) of the descriptor's write side. */
	int (*shutdown)(struct transport *t);

	/* Releases the transport and its descriptor. t is not used again.
	 * Who frees the struct itself is the backend's business (the
	 * descriptor backend does not: it lives inside the caller's object). */
	void (*close)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
	int fd;                    /* the socket, for epoll; -1 once closed */
	uint32_t want;             /* TRANSPORT_WANT_*: what the last -EAGAIN awaits */
	enum transport_proto proto;
	void *impl;                /* the backend's own state (a TLS session), or NULL */
};

/* Shorthands for the ops. */
static inline ssize_t transport_read(struct transport *t, void *buf, size_t len)
{
	return t->ops->read(t, buf, len);
}

static inline ssize_t transport_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	return t->ops->writev(t, iov, iovcnt);
}

static inline void transport_close(struct transport *t)
{
	t->ops->close(t);
}

static inline int transport_shutdown(struct transport *t)
{
	if (t->ops->shutdown)
		return t->ops->shutdown(t);
	return shutdown(t->fd, SHUT_WR) < 0 ? -errno : 0;
}

/* Writes all of iov[0..iovcnt) or as much as the transport takes now.
 * Returns the count written (0 <= n <= total; n < total means the
 * transport said -EAGAIN, with t->want set), or a negative errno. */
ssize_t transport_writev_all(struct transport *t, const struct iovec *iov, int iovcnt);

/* Whether t is the plain descriptor backend (its bytes go to t->fd as
 * they are, so the loop may send them by other means, sendq.h). */
bool transport_is_fd(const struct transport *t);

/* The plain descriptor backend: fd is a connected, non-blocking socket
 * (or a pipe or socketpair end in tests). Takes ownership of fd: close
 * closes it. Sets t->proto to TRANSPORT_PROTO_UNKNOWN. */
void transport_fd_init(struct transport *t, int fd);

/*
 * The TLS backends (transport_tls.c), over a connected, non-blocking
 * socket fd, as a server with ctx (kept by reference: it must outlive the
 * transport):
 * - transport_tls_init: TLS from the first byte (an https listener). The
 *   handshake runs inside the first reads; once it is done, t->proto is
 *   what ALPN agreed ("h2" or "http/1.1"; UNKNOWN when the client offered
 *   neither, and the first bytes tell). A handshake the server refuses
 *   (no or a bad client certificate, a revoked one, no common version) is
 *   logged as etcd logs it ("rejected connection") and its read fails;
 *   closing it then ends the stream after the alert, reading away what
 *   the client sent meanwhile rather than resetting the connection.
 *   (The loop closes a client whose handshake is not done in time,
 *   telling it with transport_handshaking below.)
 * - transport_sniff_init: an address that is both http and https: the
 *   client's first byte tells a TLS handshake record from plain HTTP, and
 *   the transport becomes the TLS or the descriptor backend for good.
 *   Nothing is written before that byte came (writev says -EAGAIN,
 *   waiting to read).
 * Both take ownership of fd once they return 0 (close closes it); on
 * failure (-ENOMEM) fd stays the caller's.
 */
struct tls_ctx;
int transport_tls_init(struct transport *t, int fd, struct tls_ctx *ctx);
int transport_sniff_init(struct transport *t, int fd, struct tls_ctx *ctx);

/* The TLS session of a transport of the TLS backends once its handshake
 * is done, NULL for any other (the descriptor backend, a sniffing one
 * that found plain HTTP, or a handshake not done yet). */
struct tls_conn;
struct tls_conn *transport_tls_conn(const struct transport *t);

/* Whether t still waits for its client to get through TLS: a TLS backend
 * whose handshake is not done, or a sniffing one that has not seen the
 * first byte. false for the descriptor backend. */
bool transport_handshaking(const struct transport *t);

/* Logs, as a refused handshake is logged ("rejected connection"), that
 * t's client did not finish its handshake within timeout_s seconds; the
 * caller closes t. */
void transport_handshake_timed_out(struct transport *t, int timeout_s);

#endif
