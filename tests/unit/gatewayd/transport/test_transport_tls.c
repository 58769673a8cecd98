/*
 * Unit tests for gatewayd's TLS transports (transport_tls.c), over
 * socketpairs, with base/tls clients and an auto TLS certificate made in a
 * scratch directory:
 * - the handshake runs inside the server's reads; ALPN sets the
 *   transport's protocol: "http/1.1" for a client that offers it beside
 *   "h2" (the server's order), "h2" for a gRPC client, unknown for one
 *   that offers neither
 * - a server refusing the client (no client certificate) fails the read,
 *   not with -EAGAIN
 * - 4 MB written through a small socket buffer, re-offering what was not
 *   taken from a buffer that moves each time (as h2.c keeps its output),
 *   arrive intact
 * - shutdown sends close_notify: the client reads a clean end
 * - the sniffing backend becomes TLS on a ClientHello and the plain
 *   descriptor backend on anything else, and writes nothing before
 */
#include "shm_testlib.h"

#include <fcntl.h>
#include <sys/socket.h>

#include "gatewayd/transport/transport.h"
#include "base/log/errmsg.h"
#include "base/tls/tls.h"

static char dir[256];
static struct tls_info self; /* the auto TLS pair */

struct ends {
	struct tls_ctx *sctx, *cctx;
	struct tls_conn *c;   /* the client */
	struct transport t;   /* the server's side */
	int fds[2];           /* [0] the server's, [1] the client's */
};

static struct tls_ctx *server_ctx(bool client_cert_auth)
{
	static const char *const alpn[] = { "http/1.1", "h2" };
	struct tls_info si = self;
	struct tls_ctx *ctx;

	si.self_signed = false;
	si.client_cert_auth = client_cert_auth;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), 0);
	CHECK_EQ(tls_ctx_set_alpn(ctx, alpn, 2), 0);
	return ctx;
}

/* A client offering alpn[0..nalpn) and a server transport made by init
 * over a socketpair. */
static void open_ends(struct ends *e, bool client_cert_auth, const char *const *alpn,
		      size_t nalpn, int (*init)(struct transport *, int, struct tls_ctx *))
{
	struct tls_info ci = { .side = TLS_SIDE_CLIENT, .self_signed = true };

	memset(e, 0, sizeof(*e));
	e->sctx = server_ctx(client_cert_auth);
	CHECK_EQ(tls_ctx_new(&ci, TLS_CLIENT, &e->cctx), 0);
	if (nalpn)
		CHECK_EQ(tls_ctx_set_alpn(e->cctx, alpn, nalpn), 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, e->fds) == 0);
	CHECK_EQ(init(&e->t, e->fds[0], e->sctx), 0);
	CHECK_EQ(tls_conn_new(e->cctx, e->fds[1], NULL, &e->c), 0);
}

static void close_ends(struct ends *e)
{
	transport_close(&e->t); /* closes fds[0] */
	CHECK_EQ(e->t.fd, -1);
	tls_conn_free(e->c);
	close(e->fds[1]);
	tls_ctx_free(e->sctx);
	tls_ctx_free(e->cctx);
}

/* Runs the client's handshake and the server's reads until the client is
 * done and the server read says -EAGAIN with nothing to read; returns the
 * server's last read (0 nothing yet, or its failure). */
static int drive(struct ends *e)
{
	char b[64];
	int crc = -EAGAIN;
	ssize_t n = -EAGAIN;

	for (int i = 0; i < 1000; i++) {
		if (crc == -EAGAIN)
			crc = tls_conn_handshake(e->c);
		n = transport_read(&e->t, b, sizeof(b));
		if (n != -EAGAIN)
			return (int)n;
		CHECK(e->t.want & (TRANSPORT_WANT_READ | TRANSPORT_WANT_WRITE));
		if (crc == 0 && i > 4)
			return 0;
	}
	return 0;
}

static void test_alpn(void)
{
	static const char *const both[] = { "h2", "http/1.1" };
	static const char *const h2[] = { "h2" };
	static const char *const other[] = { "spdy/3" };
	struct ends e;

	open_ends(&e, false, both, 2, transport_tls_init);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_UNKNOWN);
	CHECK_EQ(drive(&e), 0);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_HTTP1);
	CHECK(strcmp(tls_conn_alpn(e.c), "http/1.1") == 0);
	close_ends(&e);

	open_ends(&e, false, h2, 1, transport_tls_init);
	CHECK_EQ(drive(&e), 0);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_H2);
	close_ends(&e);

	open_ends(&e, false, other, 1, transport_tls_init);
	CHECK_EQ(drive(&e), 0);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_UNKNOWN);
	close_ends(&e);
	printf("  ALPN: http/1.1 before h2, h2 alone, none\n");
}

static void test_refused(void)
{
	static const char *const h2[] = { "h2" };
	struct ends e;
	char b[8];

	open_ends(&e, true, h2, 1, transport_tls_init);
	int rc = drive(&e);
	for (int i = 0; i < 100 && (rc == 0 || rc == -EAGAIN); i++) {
		rc = (int)transport_read(&e.t, b, sizeof(b));
		if (rc == -EAGAIN)
			usleep(1000);
	}
	CHECK(rc < 0 && rc != -EAGAIN);
	printf("  a client without a certificate: %s\n", errmsg_get(rc));
	close_ends(&e);
}

static void test_bulk(void)
{
	static const char *const h2[] = { "h2" };
	const size_t total = 4u << 20;
	uint8_t *src = malloc(total), *got = malloc(total);
	size_t sent = 0, recvd = 0;
	int small = 4096, eagains = 0;
	struct ends e;

	CHECK(src && got);
	test_fill(src, (uint32_t)total, 7);
	open_ends(&e, false, h2, 1, transport_tls_init);
	CHECK(setsockopt(e.fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	CHECK_EQ(drive(&e), 0);
	while (recvd < total) {
		if (sent < total) {
			/* what was not taken, offered again from a new place */
			size_t left = total - sent;
			uint8_t *moved = malloc(left);
			CHECK(moved);
			memcpy(moved, src + sent, left);
			struct iovec iov = { moved, left };
			ssize_t n = transport_writev_all(&e.t, &iov, 1);
			CHECK(n >= 0);
			if ((size_t)n < left) {
				eagains++;
				CHECK(e.t.want & (TRANSPORT_WANT_READ | TRANSPORT_WANT_WRITE));
			}
			sent += (size_t)n;
			free(moved);
		}
		ssize_t r = tls_conn_read(e.c, got + recvd, total - recvd);
		CHECK(r > 0 || r == -EAGAIN);
		if (r > 0)
			recvd += (size_t)r;
	}
	CHECK_EQ(sent, total);
	CHECK(memcmp(src, got, total) == 0);
	CHECK(eagains > 0); /* the small buffer did push back */
	printf("  4 MB through a %d-byte socket buffer, %d short writes\n", small, eagains);

	/* close_notify, then the socket's end */
	CHECK_EQ(transport_shutdown(&e.t), 0);
	ssize_t r;
	char b[8];
	for (int i = 0; i < 100 && (r = tls_conn_read(e.c, b, sizeof(b))) == -EAGAIN; i++)
		usleep(1000);
	CHECK_EQ(r, 0);
	close_ends(&e);
	free(src);
	free(got);
}

static void test_sniff(void)
{
	static const char *const h2[] = { "h2" };
	static const char req[] = "GET /health HTTP/1.1\r\n\r\n";
	struct ends e;
	char b[64];

	/* a TLS client */
	open_ends(&e, false, h2, 1, transport_sniff_init);
	struct iovec iov = { (void *)req, sizeof(req) - 1 };
	CHECK_EQ(transport_writev(&e.t, &iov, 1), -EAGAIN); /* nothing before the first byte */
	CHECK_EQ(e.t.want, TRANSPORT_WANT_READ);
	CHECK_EQ(transport_read(&e.t, b, sizeof(b)), -EAGAIN);
	CHECK_EQ(drive(&e), 0);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_H2);
	CHECK_EQ(tls_conn_write(e.c, "ping", 4), 4);
	ssize_t n = -EAGAIN;
	for (int i = 0; i < 100 && (n = transport_read(&e.t, b, sizeof(b))) == -EAGAIN; i++)
		usleep(1000);
	CHECK_EQ(n, 4);
	CHECK(memcmp(b, "ping", 4) == 0);
	close_ends(&e);

	/* a plain client: the bytes as they came */
	open_ends(&e, false, h2, 1, transport_sniff_init);
	CHECK_EQ(write(e.fds[1], req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
	n = transport_read(&e.t, b, sizeof(b));
	CHECK_EQ(n, (ssize_t)(sizeof(req) - 1));
	CHECK(memcmp(b, req, sizeof(req) - 1) == 0);
	CHECK_EQ(e.t.proto, TRANSPORT_PROTO_UNKNOWN);
	CHECK(e.t.impl == NULL); /* the descriptor backend now */
	CHECK_EQ(transport_writev(&e.t, &iov, 1), (ssize_t)(sizeof(req) - 1));
	close_ends(&e);

	/* a client that hangs up first */
	open_ends(&e, false, h2, 1, transport_sniff_init);
	shutdown(e.fds[1], SHUT_WR);
	CHECK_EQ(transport_read(&e.t, b, sizeof(b)), 0);
	close_ends(&e);
	printf("  sniffing: TLS, plain, and an early end\n");
}

int main(void)
{
	const char *hosts[] = { "127.0.0.1" };
	char fx[300];

	signal(SIGPIPE, SIG_IGN);
	test_tmpdir(dir, sizeof(dir));
	snprintf(fx, sizeof(fx), "%s/fixtures", dir);
	CHECK_EQ(tls_self_cert(fx, hosts, 1, &self), 0);
	self.side = TLS_SIDE_CLIENT;

	test_alpn();
	test_refused();
	test_bulk();
	test_sniff();

	tls_info_free(&self);
	printf("test_transport_tls: ok\n");
	return 0;
}
