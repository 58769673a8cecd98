/* One blocking HTTP/1.1 request to a peer (see peer_fetch.h). */
#include "raftd/peer/peer_fetch.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "raftd/alloc.h"
#include "raftd/peer/peer_int.h"
#include "base/log/errmsg.h"
#include "base/tls/tls.h"

/* A request in flight: the socket, TLS over it, and the time left. */
struct pf_conn {
	int fd;
	struct tls_conn *tls;
	uint64_t deadline_ns;
	const char *what;        /* "Get \"URL\"", for error texts */
};

static uint64_t pf_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left before the deadline (0 once passed). */
static int pf_left_ms(const struct pf_conn *c)
{
	uint64_t now = pf_now_ns();
	return now >= c->deadline_ns ? 0 : (int)((c->deadline_ns - now + 999999) / 1000000);
}

/* Waits for events on the socket; 0, -ETIMEDOUT or -errno. */
static int pf_wait(struct pf_conn *c, short events)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };
	for (;;) {
		int left = pf_left_ms(c);
		if (left == 0)
			return -ETIMEDOUT;
		int n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Connects to u (non-blocking, within the deadline). */
static int pf_dial(struct pf_conn *c, const struct peer_url *u)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, rc;

	rc = peer_url_sockaddr(u, &ss, &sl);
	if (rc)
		return errmsg_set(rc, "%s: dial %s %s%s%s: %s", c->what,
				  u->unix_socket ? "unix" : "tcp", u->host, u->unix_socket ? "" : ":",
				  u->unix_socket ? "" : u->port,
				  rc == -EHOSTUNREACH ? "no such host" : "path too long");
	c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return errmsg_set(-errno, "%s: socket: %s", c->what, strerror(errno));
	if (ss.ss_family != AF_UNIX)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&ss, sl) < 0) {
		if (errno != EINPROGRESS)
			rc = -errno;
		else if ((rc = pf_wait(c, POLLOUT)) == 0) {
			int err = 0;
			socklen_t el = sizeof(err);
			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
			rc = -err;
		}
		if (rc)
			return errmsg_set(rc, "%s: dial %s %s%s%s: connect: %s", c->what,
					  u->unix_socket ? "unix" : "tcp", u->host,
					  u->unix_socket ? "" : ":", u->unix_socket ? "" : u->port,
					  rc == -ETIMEDOUT ? "i/o timeout" : strerror(-rc));
	}
	return 0;
}

/* Writes all of buf. */
static int pf_write(struct pf_conn *c, const char *buf, size_t len)
{
	if (c->tls) {
		int left = pf_left_ms(c);
		return left ? tls_conn_write_all_timed(c->tls, buf, len, left) : -ETIMEDOUT;
	}
	while (len) {
		ssize_t w = send(c->fd, buf, len, MSG_NOSIGNAL);
		if (w > 0) {
			buf += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		int rc = pf_wait(c, POLLOUT);
		if (rc)
			return rc;
	}
	return 0;
}

/* Reads some bytes: the count, 0 at the end of the stream, or -errno. */
static ssize_t pf_read(struct pf_conn *c, void *buf, size_t len)
{
	for (;;) {
		ssize_t n;
		short want = POLLIN;
		if (c->tls) {
			n = tls_conn_read(c->tls, buf, len);
			if (n == -EAGAIN && (tls_conn_want(c->tls) & TLS_WANT_WRITE))
				want = POLLOUT;
		} else {
			n = recv(c->fd, buf, len, 0);
			if (n < 0)
				n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		}
		if (n != -EAGAIN)
			return n;
		int rc = pf_wait(c, want);
		if (rc)
			return rc;
	}
}

uint8_t *peer_fetch_reader_space(struct peer_fetch_reader *r, size_t want)
{
	return peer_buf_reserve(&r->in, want) ? NULL : r->in.p + r->in.len;
}

int peer_fetch_reader_feed(struct peer_fetch_reader *r, size_t n, bool eof,
			   struct peer_fetch_resp *out)
{
	struct http_reader *hr = &r->hr;
	int rc;

	r->in.len += n;
	hr->max_body = PEER_FETCH_MAX_BODY;
	rc = http_reader_feed(hr, r->in.p, r->in.len, eof);
	if (rc <= 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->len = hr->body_len;
	out->body = raftd_malloc(out->len + 1);
	if (!out->body)
		return -ENOMEM;
	if (out->len)
		memcpy(out->body, r->in.p, out->len);
	out->body[out->len] = '\0';
	out->status = hr->status;
	out->close = hr->close;
	memcpy(out->cluster_id, hr->cluster_id, sizeof(out->cluster_id));
	r->in.len = http_reader_next(hr, r->in.p, r->in.len);
	return 1;
}

void peer_fetch_reader_free(struct peer_fetch_reader *r)
{
	peer_buf_free(&r->in);
	memset(r, 0, sizeof(*r));
}

/* Reads the answer into out. */
static int pf_read_answer(struct pf_conn *c, struct peer_fetch_resp *out)
{
	struct peer_fetch_reader r = { 0 };
	int rc;

	do {
		uint8_t *at = peer_fetch_reader_space(&r, PEER_READ_CHUNK);
		if (!at) {
			rc = -ENOMEM;
			break;
		}
		ssize_t n = pf_read(c, at, PEER_READ_CHUNK);
		if (n < 0) {
			rc = (int)n;
			break;
		}
		rc = peer_fetch_reader_feed(&r, (size_t)n, n == 0, out);
	} while (rc == 0);
	peer_fetch_reader_free(&r);
	return rc < 0 ? rc : 0;
}

static int pf_request(struct tls_ctx *tls, const char *url, const char *method, const char *path,
		      const char *ctype, const void *body, size_t body_len, int timeout_ms,
		      struct peer_fetch_resp *out)
{
	struct pf_conn c = { .fd = -1, .deadline_ns = pf_now_ns() + (uint64_t)timeout_ms * 1000000 };
	char what[600], req[1024], ct[96] = "", cl[40] = "";
	struct peer_url u;
	int rc, n;

	memset(out, 0, sizeof(*out));
	/* Go's url.Error: the method with its first letter only in capitals */
	snprintf(what, sizeof(what), "%c%s \"%s%s\"", method[0], strcmp(method, "GET") ? "ost" : "et",
		 url, path);
	c.what = what;
	if (peer_url_parse(url, &u))
		return errmsg_set(-EINVAL, "%s: unsupported URL", what);
	if (u.tls && !tls)
		return errmsg_set(-EPROTONOSUPPORT, "%s: no peer TLS is configured for this URL",
				  what);
	rc = pf_dial(&c, &u);
	if (rc)
		goto out_close;
	if (u.tls) {
		rc = tls_conn_new(tls, c.fd, u.unix_socket ? NULL : u.host, &c.tls);
		if (!rc) {
			int left = pf_left_ms(&c);
			rc = left ? tls_conn_handshake_timed(c.tls, left) : -ETIMEDOUT;
		}
		if (rc) {
			char why[256];
			snprintf(why, sizeof(why), "%s", errmsg_get(rc));
			errmsg_set(rc, "%s: %s", what, why);
			goto out_close;
		}
	}
	bool v6 = !u.unix_socket && strchr(u.host, ':');
	if (ctype)
		snprintf(ct, sizeof(ct), "Content-Type: %s\r\n", ctype);
	if (strcmp(method, "POST") == 0)
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", body_len);
	n = snprintf(req, sizeof(req),
		     "%s %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\nUser-Agent: Go-http-client/1.1\r\n"
		     "%s%sConnection: close\r\n\r\n",
		     method, path, v6 ? "[" : "", u.unix_socket ? "localhost" : u.host,
		     v6 ? "]" : "", u.unix_socket ? "" : ":", u.unix_socket ? "" : u.port, cl, ct);
	if (n < 0 || (size_t)n >= sizeof(req)) {
		rc = errmsg_set(-EINVAL, "%s: the request is too long", what);
		goto out_close;
	}
	rc = pf_write(&c, req, (size_t)n);
	if (!rc && body_len)
		rc = pf_write(&c, body, body_len);
	if (!rc)
		rc = pf_read_answer(&c, out);
	if (rc) {
		peer_fetch_free(out);
		errmsg_set(rc, "%s: %s", what,
			   rc == -ETIMEDOUT ? "context deadline exceeded (Client.Timeout exceeded while awaiting headers)" :
			   rc == -EBADMSG ? "malformed HTTP response" :
			   rc == -ECONNRESET ? "EOF" : strerror(-rc));
	}
out_close:
	if (c.tls)
		tls_conn_free(c.tls);
	if (c.fd >= 0)
		close(c.fd);
	return rc;
}

int peer_fetch(struct tls_ctx *tls, const char *url, const char *method, const char *path,
	       int timeout_ms, struct peer_fetch_resp *out)
{
	return pf_request(tls, url, method, path, NULL, NULL, 0, timeout_ms, out);
}

int peer_fetch_post(struct tls_ctx *tls, const char *url, const char *path, const char *ctype,
		    const void *body, size_t len, int timeout_ms, struct peer_fetch_resp *out)
{
	return pf_request(tls, url, "POST", path, ctype, body, len, timeout_ms, out);
}

void peer_fetch_free(struct peer_fetch_resp *r)
{
	raftd_free(r->body);
	r->body = NULL;
	r->len = 0;
}
