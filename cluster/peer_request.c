/* One blocking HTTP/1.1 request to a member (see peer_request.h). */
#include "cluster/peer_request.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "base/http/http.h"
#include "base/tls/tls.h"
#include "cluster/peer_url.h"

/* Bytes read per read(2) call. */
#define PR_READ_CHUNK (16u * 1024)

/* A request in flight: the socket, TLS over it, and the time left. */
struct pr_conn {
	int fd;
	struct tls_conn *tls;        /* NULL in the clear */
	uint64_t deadline_ns;        /* CLOCK_MONOTONIC */
};

/* Milliseconds left before the deadline, rounded up (0 once passed). */
static int pr_left_ms(const struct pr_conn *c)
{
	uint64_t now = clock_now_ns();

	return now >= c->deadline_ns ? 0 : (int)((c->deadline_ns - now + 999999) / 1000000);
}

/* Waits for events on the socket: 0, -ETIMEDOUT or -errno. */
static int pr_wait(const struct pr_conn *c, short events)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };

	for (;;) {
		int left = pr_left_ms(c), n;
		if (left == 0)
			return -ETIMEDOUT;
		n = poll(&pfd, 1, left);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/* Connects c->fd to u (non-blocking, within the deadline). */
static int pr_dial(struct pr_conn *c, const struct peer_url *u, enum peer_request_stage *stage)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, rc;

	*stage = PEER_REQUEST_ADDRESS;
	rc = peer_url_sockaddr(u, &ss, &sl);
	if (rc)
		return rc;
	*stage = PEER_REQUEST_SOCKET;
	c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -errno;
	if (ss.ss_family != AF_UNIX)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	*stage = PEER_REQUEST_CONNECT;
	if (connect(c->fd, (struct sockaddr *)&ss, sl) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	rc = pr_wait(c, POLLOUT);
	if (rc == 0) {
		int err = 0;
		socklen_t el = sizeof(err);
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
			err = errno;
		rc = -err;
	}
	return rc;
}

/* Writes all of buf. */
static int pr_write(const struct pr_conn *c, const void *buf, size_t len)
{
	const char *p = buf;

	if (c->tls) {
		int left = pr_left_ms(c);
		return left ? tls_conn_write_all_timed(c->tls, buf, len, left) : -ETIMEDOUT;
	}
	while (len) {
		ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
		int rc;
		if (w > 0) {
			p += w;
			len -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno != EAGAIN)
			return -errno;
		rc = pr_wait(c, POLLOUT);
		if (rc)
			return rc;
	}
	return 0;
}

/* Reads some bytes: the count, 0 at the end of the stream, or -errno. A
 * TLS stream cut without close_notify ends it, as Go's client takes it
 * from a server that closes after its answer. */
static ssize_t pr_read(const struct pr_conn *c, void *buf, size_t len)
{
	for (;;) {
		ssize_t n;
		short want = POLLIN;
		int rc;
		if (c->tls) {
			n = tls_conn_read(c->tls, buf, len);
			if (n == -EAGAIN && (tls_conn_want(c->tls) & TLS_WANT_WRITE))
				want = POLLOUT;
			if (n == -ECONNRESET)
				n = 0;
		} else {
			n = recv(c->fd, buf, len, 0);
			if (n < 0)
				n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		}
		if (n != -EAGAIN)
			return n;
		rc = pr_wait(c, want);
		if (rc)
			return rc;
	}
}

/* Reads the answer into out. */
static int pr_read_answer(const struct pr_conn *c, size_t max_body, struct peer_answer *out,
			  enum peer_request_stage *stage)
{
	struct http_reader r = { .max_body = max_body };
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	do {
		ssize_t n;
		if (cap - len < PR_READ_CHUNK) {
			uint8_t *nb = realloc(buf, cap ? cap * 2 : 2 * PR_READ_CHUNK);
			if (!nb) {
				rc = -ENOMEM;
				goto out_free;
			}
			buf = nb;
			cap = cap ? cap * 2 : 2 * PR_READ_CHUNK;
		}
		n = pr_read(c, buf + len, PR_READ_CHUNK);
		if (n < 0) {
			rc = (int)n;
			goto out_free;
		}
		len += (size_t)n;
		rc = http_reader_feed(&r, buf, len, n == 0);
	} while (rc == 0);
	if (rc < 0) {
		*stage = PEER_REQUEST_ANSWER;
		goto out_free;
	}
	out->body = malloc(r.body_len + 1);
	if (!out->body) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(out->body, buf, r.body_len);
	out->body[r.body_len] = '\0';
	out->len = r.body_len;
	out->status = r.status;
	out->close = r.close;
	memcpy(out->cluster_id, r.cluster_id, sizeof(out->cluster_id));
	rc = 0;
out_free:
	free(buf);
	return rc;
}

/* Sends rq on c (Host: host) and reads the answer. */
static int pr_exchange(const struct pr_conn *c, const char *host, const struct peer_request *rq,
		       struct peer_answer *out, enum peer_request_stage *stage)
{
	char head[1024], ct[96] = "", cl[40] = "";
	int n, rc;

	*stage = PEER_REQUEST_HEAD;
	if (rq->content_type)
		snprintf(ct, sizeof(ct), "Content-Type: %s\r\n", rq->content_type);
	if (rq->body_len || strcmp(rq->method, "POST") == 0)
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", rq->body_len);
	n = snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: %s\r\n%s%sConnection: close\r\n\r\n",
		     rq->method, rq->path, host,
		     rq->user_agent ? rq->user_agent : "Go-http-client/1.1", cl, ct);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -EINVAL;
	*stage = PEER_REQUEST_EXCHANGE;
	rc = pr_write(c, head, (size_t)n);
	if (!rc && rq->body_len)
		rc = pr_write(c, rq->body, rq->body_len);
	if (!rc)
		rc = pr_read_answer(c, rq->max_body, out, stage);
	return rc;
}

int peer_request_host(const struct peer_url *u, char *buf, size_t cap)
{
	bool v6 = !u->unix_socket && strchr(u->host, ':');

	if (u->unix_socket)
		return snprintf(buf, cap, "localhost");
	return snprintf(buf, cap, "%s%s%s:%s", v6 ? "[" : "", u->host, v6 ? "]" : "", u->port);
}

int peer_request_url(const struct peer_url *u, struct tls_ctx *tls, const struct peer_request *rq,
		     int timeout_ms, struct peer_answer *out, enum peer_request_stage *stage)
{
	struct pr_conn c = { .fd = -1,
			     .deadline_ns = clock_now_ns() + (uint64_t)timeout_ms * 1000000 };
	char host[PEER_REQUEST_HOST_MAX];
	int rc;

	memset(out, 0, sizeof(*out));
	rc = pr_dial(&c, u, stage);
	if (rc)
		goto out_close;
	if (u->tls) {
		int left;
		*stage = PEER_REQUEST_TLS;
		rc = tls_conn_new(tls, c.fd, u->unix_socket ? NULL : u->host, &c.tls);
		if (rc)
			goto out_close;
		left = pr_left_ms(&c);
		rc = left ? tls_conn_handshake_timed(c.tls, left) : -ETIMEDOUT;
		if (rc)
			goto out_close;
	}
	peer_request_host(u, host, sizeof(host));
	rc = pr_exchange(&c, host, rq, out, stage);
out_close:
	if (c.tls)
		tls_conn_free(c.tls);
	if (c.fd >= 0)
		close(c.fd);
	return rc;
}

int peer_request_fd(int fd, const char *host, const struct peer_request *rq, int timeout_ms,
		    struct peer_answer *out, enum peer_request_stage *stage)
{
	struct pr_conn c = { .fd = fd,
			     .deadline_ns = clock_now_ns() + (uint64_t)timeout_ms * 1000000 };

	memset(out, 0, sizeof(*out));
	return pr_exchange(&c, host, rq, out, stage);
}

void peer_answer_free(struct peer_answer *a)
{
	free(a->body);
	a->body = NULL;
	a->len = 0;
}
