/*
 * The peer transport's connections (peer_int.h): byte buffers, socket and
 * TLS I/O on non-blocking sockets, accepting, dialing and closing. What a
 * connection's bytes mean is peer_serve.c's and peer_client.c's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer_int.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls.h"

/* ---- buffers ---- */

int peer_buf_reserve(struct peer_buf *b, size_t more)
{
	size_t used = b->len - b->off, cap;
	uint8_t *np;

	if (b->cap - b->len >= more)
		return 0;
	if (b->off && b->cap - used >= more) {
		memmove(b->p, b->p + b->off, used);
		b->len = used;
		b->off = 0;
		return 0;
	}
	if (more > SIZE_MAX / 2 - used)
		return -ENOMEM;
	cap = b->cap ? b->cap : 4096;
	while (cap - used < more)
		cap *= 2;
	np = raftd_malloc(cap);
	if (!np)
		return -ENOMEM;
	if (used)
		memcpy(np, b->p + b->off, used);
	raftd_free(b->p);
	b->p = np;
	b->cap = cap;
	b->len = used;
	b->off = 0;
	return 0;
}

int peer_buf_append(struct peer_buf *b, const void *d, size_t n)
{
	int rc = peer_buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
	return 0;
}

int peer_buf_printf(struct peer_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = peer_buf_reserve(b, (size_t)n + 1);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

int peer_buf_chunk_head(struct peer_buf *b, size_t size)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[2 * sizeof(size_t) + 2];
	size_t i = sizeof(tmp);

	tmp[--i] = '\n';
	tmp[--i] = '\r';
	do {
		tmp[--i] = hex[size & 15];
		size >>= 4;
	} while (size);
	return peer_buf_append(b, tmp + i, sizeof(tmp) - i);
}

void peer_buf_consume(struct peer_buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
}

void peer_buf_free(struct peer_buf *b)
{
	raftd_free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- connections ---- */

void peer_conn_arm(struct peer_conn *c)
{
	uint32_t want = EPOLLIN;
	struct epoll_event ev;

	if (c->state == PEER_ST_CLOSED || c->checking)
		return;
	if (c->state == PEER_ST_CONNECTING)
		want = EPOLLOUT;
	else if (peer_buf_size(&c->out) || c->want_write)
		want |= EPOLLOUT;
	if (want == c->epoll_events)
		return;
	ev.events = want;
	ev.data.ptr = c;
	if (epoll_ctl(c->p->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->epoll_events = want;
}

struct peer_conn *peer_conn_new(struct peer *p, int fd, enum peer_conn_kind kind)
{
	struct peer_conn *c = raftd_calloc(1, sizeof(*c));
	struct epoll_event ev = { .events = EPOLLIN };

	if (!c)
		return NULL;
	c->p = p;
	c->fd = fd;
	c->kind = kind;
	ev.data.ptr = c;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		raftd_free(c);
		return NULL;
	}
	c->epoll_events = EPOLLIN;
	c->next = p->conns;
	p->conns = c;
	p->n_conns++;
	return c;
}

static void peer_sockaddr_text(const struct sockaddr_storage *ss, socklen_t sl, char *out,
			       size_t cap)
{
	char host[INET6_ADDRSTRLEN] = "", port[8] = "";

	if (ss->ss_family == AF_UNIX) {
		snprintf(out, cap, "@");
		return;
	}
	if (getnameinfo((const struct sockaddr *)ss, sl, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV))
		snprintf(out, cap, "?");
	else if (ss->ss_family == AF_INET6)
		snprintf(out, cap, "[%s]:%s", host, port);
	else
		snprintf(out, cap, "%s:%s", host, port);
}

void peer_conn_accept(struct peer *p, size_t i)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct peer_conn *c;
		int one = 1;
		int fd = accept4(p->lfds[i], (struct sockaddr *)&ss, &sl,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			int err = -errno;
			if (err == -EINTR || err == -ECONNABORTED)
				continue;
			if (accept_backoff_exhausted(err))
				peer_accept_pause(p, err, "cannot accept a peer connection for now");
			else if (err != -EAGAIN)
				log_warn("cannot accept a peer connection", LOG_ERRNO(err));
			return;
		}
		accept_backoff_ok(&p->accept_bo);
		if (ss.ss_family != AF_UNIX)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = peer_conn_new(p, fd, PEER_CONN_SERVER);
		if (!c) {
			log_warn("cannot take a peer connection: out of memory");
			close(fd);
			continue;
		}
		peer_sockaddr_text(&ss, sl, c->addr, sizeof(c->addr));
		c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
		c->state = PEER_ST_REQUEST;
		if (p->ltls[i]) {
			if (tls_conn_new(p->server_tls, fd, NULL, &c->tls)) {
				peer_conn_close(c);
				continue;
			}
			c->state = PEER_ST_HANDSHAKE;
		}
	}
}

/* Sets the listeners' epoll interest: EPOLLIN, or nothing while paused. */
static void peer_listeners_poll(struct peer *p, uint32_t events)
{
	for (size_t i = 0; i < p->n_listeners; i++) {
		struct epoll_event ev = { .events = events, .data.ptr = &p->lfds[i] };
		if (epoll_ctl(p->epfd, EPOLL_CTL_MOD, p->lfds[i], &ev) < 0)
			log_warn("cannot change the poll of a peer listener", LOG_ERRNO(-errno));
	}
}

void peer_accept_pause(struct peer *p, int err, const char *what)
{
	uint64_t now = clock_now_ns();
	uint64_t pause = accept_backoff_fail(&p->accept_bo, now, err, what, p->n_conns);

	if (!p->accept_resume_ns)
		peer_listeners_poll(p, 0);
	p->accept_resume_ns = now + pause;
	p->run_due = true; /* peer_turn keeps the time */
}

uint64_t peer_accept_resume(struct peer *p, uint64_t now)
{
	if (!p->accept_resume_ns || p->accept_resume_ns > now)
		return p->accept_resume_ns;
	p->accept_resume_ns = 0;
	peer_listeners_poll(p, EPOLLIN);
	return 0;
}

int peer_conn_dial(struct peer *p, const struct peer_url *u, enum peer_conn_kind kind,
		   struct peer_remote *r, struct peer_conn **out)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct peer_conn *c;
	int fd, rc, one = 1;

	/* a host name is looked up on the resolver's thread: the transport
	 * thread is raftd's loop */
	rc = peer_resolve(p, u, &ss, &sl);
	if (rc)
		return rc;
	if (u->tls && !p->client_tls)
		return -EPROTONOSUPPORT;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (ss.ss_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 && errno != EINPROGRESS) {
		rc = -errno;
		close(fd);
		return rc;
	}
	c = peer_conn_new(p, fd, kind);
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	if (u->tls && tls_conn_new(p->client_tls, fd, u->unix_socket ? NULL : u->host, &c->tls)) {
		peer_conn_close(c);
		return -ENOMEM;
	}
	snprintf(c->addr, sizeof(c->addr), "%s%s%s", u->host, u->unix_socket ? "" : ":",
		 u->unix_socket ? "" : u->port);
	c->remote = r;
	c->state = PEER_ST_CONNECTING;
	c->deadline_ns = clock_now_ns() + PEER_DIAL_TIMEOUT_NS;
	peer_conn_arm(c);
	*out = c;
	return 0;
}

/* Logs why a connection failed and closes it (reporting what it carried). */
static void peer_conn_fail(struct peer_conn *c, const char *what, int err)
{
	const char *text = c->tls && (err == -EPROTO || err == -EACCES) ? errmsg_get(err) : NULL;

	char why[256];

	snprintf(why, sizeof(why), "%s", text ? text : strerror(-err));
	if (c->kind == PEER_CONN_SERVER)
		log_warn(what, LOG_STR("local-member-id", c->p->self_str),
			 LOG_STR("remote-addr", c->addr), LOG_STR("error", why));
	else
		log_debug(what, LOG_STR("local-member-id", c->p->self_str),
			  LOG_STR("address", c->addr), LOG_STR("error", why));
	c->status = c->status ? c->status : err;
	peer_conn_close(c);
}

/*
 * The client SAN check's DNS lookups run on a thread of the TLS module
 * (tls.h), so that a slow resolver holds up the connection it checks and
 * not raftd's loop. While the check runs, the loop polls the check's
 * descriptor in place of the socket (which would report the client's
 * first request, or its hang-up, over and over); the connection's
 * deadline still applies.
 */
static void peer_conn_check_wait(struct peer_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	if (c->checking)
		return;
	if (epoll_ctl(c->p->epfd, EPOLL_CTL_ADD, tls_conn_check_fd(c->tls), &ev) != 0) {
		log_warn("cannot wait for a peer's address check", LOG_ERRNO(-errno));
		return; /* the socket's events keep asking, or the deadline ends it */
	}
	epoll_ctl(c->p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	c->epoll_events = 0;
	c->checking = true;
}

static void peer_conn_check_end(struct peer_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

	if (!c->checking)
		return;
	c->checking = false;
	epoll_ctl(c->p->epfd, EPOLL_CTL_DEL, tls_conn_check_fd(c->tls), NULL);
	if (epoll_ctl(c->p->epfd, EPOLL_CTL_ADD, c->fd, &ev) == 0)
		c->epoll_events = EPOLLIN;
}

/* The TLS handshake step; 0 once done. */
static int peer_conn_handshake(struct peer_conn *c)
{
	int rc = tls_conn_handshake(c->tls);

	c->want_write = false;
	if (rc == -EAGAIN && (tls_conn_want(c->tls) & TLS_WANT_CHECK)) {
		peer_conn_check_wait(c);
		return rc;
	}
	peer_conn_check_end(c);
	if (rc == -EAGAIN) {
		c->want_write = tls_conn_want(c->tls) & TLS_WANT_WRITE;
		return rc;
	}
	if (rc) {
		peer_conn_fail(c, c->kind == PEER_CONN_SERVER ? "rejected connection" :
				  "TLS handshake with remote peer failed", rc);
		return rc;
	}
	c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
	if (c->kind == PEER_CONN_SERVER) {
		c->state = PEER_ST_REQUEST;
		return 0;
	}
	return peer_client_request(c);
}

int peer_conn_flush(struct peer_conn *c)
{
	while (peer_buf_size(&c->out)) {
		size_t n = peer_buf_size(&c->out);
		ssize_t w;

		if (c->tls) {
			w = tls_conn_write(c->tls, peer_buf_data(&c->out), n);
			if (w == -EAGAIN)
				c->want_write = tls_conn_want(c->tls) & TLS_WANT_WRITE;
		} else {
			w = send(c->fd, peer_buf_data(&c->out), n, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w < 0)
				w = -errno;
		}
		if (w == -EAGAIN || w == -EWOULDBLOCK || w == -EINTR)
			break;
		if (w <= 0) {
			peer_conn_fail(c, "failed to write to a peer connection", w ? (int)w : -EPIPE);
			return w ? (int)w : -EPIPE;
		}
		peer_buf_consume(&c->out, (size_t)w);
		c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
		c->last_out_ns = clock_now_ns();
	}
	if (!peer_buf_size(&c->out) &&
	    (c->state == PEER_ST_STREAM_OUT || c->state == PEER_ST_RELAY))
		c->deadline_ns = 0; /* an idle stream writer or relay has nothing to time */
	peer_conn_arm(c);
	return 0;
}

/* Reads what the socket has into in; 1 when bytes came, 0 when none
 * (EAGAIN or EOF, c->eof says which), or a negative errno (c closed). */
static int peer_conn_read(struct peer_conn *c)
{
	ssize_t n;
	int rc = peer_buf_reserve(&c->in, PEER_READ_CHUNK);

	if (rc) {
		peer_conn_fail(c, "out of memory reading a peer connection", rc);
		return rc;
	}
	if (c->tls) {
		n = tls_conn_read(c->tls, c->in.p + c->in.len, c->in.cap - c->in.len);
		if (n == -EAGAIN) {
			c->want_write = tls_conn_want(c->tls) & TLS_WANT_WRITE;
			return 0;
		}
		if (n == -ECONNRESET)
			n = 0;
	} else {
		n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return 0;
			n = errno == ECONNRESET ? 0 : -errno;
		}
	}
	if (n == 0) {
		c->eof = true;
		return 0;
	}
	if (n < 0) {
		peer_conn_fail(c, "failed to read from a peer connection", (int)n);
		return (int)n;
	}
	c->in.len += (size_t)n;
	/* Each read gives the next PEER_IO_TIMEOUT_NS (etcd's timeoutConn),
	 * but for a request head: it has that long in all, from the
	 * connection's start or the last answer, however it trickles in
	 * (peer_serve_head starts the body's clock). */
	if (c->state != PEER_ST_STREAM_OUT && c->state != PEER_ST_RELAY &&
	    c->state != PEER_ST_REQUEST)
		c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
	return 1;
}

static void peer_conn_input(struct peer_conn *c)
{
	if (c->state == PEER_ST_RELAY)
		peer_grpc_input(c);
	else if (c->kind == PEER_CONN_SERVER)
		peer_serve_input(c);
	else
		peer_client_input(c);
}

void peer_conn_io(struct peer_conn *c, uint32_t events)
{
	if (c->state == PEER_ST_CLOSED)
		return;
	if (c->state == PEER_ST_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);
		if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			return;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
			err = errno;
		if (err) {
			peer_conn_fail(c, "failed to dial remote peer", -err);
			return;
		}
		c->state = PEER_ST_HANDSHAKE;
		if (!c->tls) {
			peer_client_request(c);
			return;
		}
	}
	if (c->state == PEER_ST_HANDSHAKE) {
		if (peer_conn_handshake(c)) {
			peer_conn_arm(c);
			return;
		}
	}
	if (peer_buf_size(&c->out) || c->want_write) {
		c->want_write = false;
		if (peer_conn_flush(c))
			return;
		if (c->state == PEER_ST_RELAY)
			peer_grpc_written(c);
		else if (c->kind == PEER_CONN_SERVER && c->state == PEER_ST_RESPOND &&
			 !peer_buf_size(&c->out))
			peer_serve_written(c);
		else if (c->kind != PEER_CONN_SERVER)
			peer_client_written(c);
		if (c->state == PEER_ST_CLOSED)
			return;
	}
	/* read to EAGAIN: TLS may hold decrypted bytes the socket no
	 * longer signals */
	for (;;) {
		int rc = peer_conn_read(c);
		if (rc < 0)
			return;
		if (rc == 0 && !c->eof)
			break;
		peer_conn_input(c);
		if (c->state == PEER_ST_CLOSED)
			return;
		if (c->eof) {
			/* the handlers saw the end; whatever is left is cut off */
			peer_conn_close(c);
			return;
		}
	}
	peer_conn_arm(c);
}

void peer_conn_close(struct peer_conn *c)
{
	if (c->state == PEER_ST_CLOSED)
		return;
	if (c->state == PEER_ST_RELAY)
		peer_grpc_closed(c);
	else if (c->kind == PEER_CONN_SERVER)
		peer_writer_closed(c);
	else
		peer_client_closed(c, c->status < 0 ? c->status : -ECONNRESET);
	if (c->checking)
		epoll_ctl(c->p->epfd, EPOLL_CTL_DEL, tls_conn_check_fd(c->tls), NULL);
	c->checking = false;
	epoll_ctl(c->p->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->tls) {
		tls_conn_shutdown(c->tls);
		tls_conn_free(c->tls);
		c->tls = NULL;
	}
	close(c->fd);
	c->fd = -1;
	c->state = PEER_ST_CLOSED;
}

void peer_conn_reap(struct peer *p)
{
	struct peer_conn **cp = &p->conns;

	while (*cp) {
		struct peer_conn *c = *cp;
		if (c->state != PEER_ST_CLOSED) {
			cp = &c->next;
			continue;
		}
		*cp = c->next;
		p->n_conns--;
		peer_snap_recv_free(c->snap_in);
		peer_snap_send_free(c->snap_out);
		peer_buf_free(&c->in);
		peer_buf_free(&c->out);
		peer_buf_free(&c->body);
		raftd_free(c);
	}
}

/* ---- message bodies ---- */

void peer_conn_body_begin(struct peer_conn *c, bool to_eof, uint64_t max)
{
	c->body_chunked = c->head.chunked;
	c->body_left = c->head.has_length ? c->head.content_length : 0;
	c->body_to_eof = to_eof && !c->head.chunked && !c->head.has_length;
	memset(&c->chunk, 0, sizeof(c->chunk));
	c->body_max = max;
	c->body.off = c->body.len = 0;
}

int peer_conn_pull_body(struct peer_conn *c)
{
	size_t n = peer_buf_size(&c->in);
	int rc;

	if (c->body_chunked) {
		size_t used, made;
		rc = peer_buf_reserve(&c->body, n);
		if (rc)
			return rc;
		rc = http_chunked_decode(&c->chunk, peer_buf_data(&c->in), n,
					 c->body.p + c->body.len, &used, &made);
		if (rc < 0)
			return rc;
		peer_buf_consume(&c->in, used);
		c->body.len += made;
	} else {
		if (!c->body_to_eof && n > c->body_left)
			n = (size_t)c->body_left;
		rc = peer_buf_append(&c->body, peer_buf_data(&c->in), n);
		if (rc)
			return rc;
		peer_buf_consume(&c->in, n);
		c->body_left -= c->body_to_eof ? 0 : n;
		rc = c->body_to_eof ? c->eof : c->body_left == 0;
	}
	if (peer_buf_size(&c->body) > c->body_max)
		return -EMSGSIZE;
	return rc;
}
