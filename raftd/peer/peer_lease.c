/*
 * Lease renewals and remaining times forwarded to the leader (etcd's
 * leasehttp client, raftd/lease_fwd.h decides what is asked): POST
 * /leases and /leases/internal over a small pool of keep-alive HTTP/1.1
 * connections to the leader's peer URLs, reused across requests as Go's
 * http.Transport reuses its idle connections, so that a renewal costs a
 * write and a read on a connection that is already up rather than a
 * dial, a TLS handshake and (at the leader) a relay to a gateway.
 *
 * One forwarding thread of its own drives every connection from an epoll
 * loop; raftd's loop thread hands it requests and cancellations under
 * pl->mu and an eventfd, and it reports each request's end as
 * PEER_EV_LEASE_DONE through the transport's event queue.
 *
 * A connection carries one request at a time. The pool follows the
 * target: the peer URLs of the leader the last request named. When they
 * change, idle connections to the old ones are closed at once and busy
 * ones once their answer is in (or at once, when cancelled). A request
 * whose connection fails before an answer is tried again on a fresh
 * connection to the target's next URL, each URL at most once more than
 * the first, within the request's deadline; then it ends with the error.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer_fetch.h"
#include "raftd/peer/peer_int.h"
#include "cluster/leasehttp.h"
#include "cluster/peer_request.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls.h"

/* Connections at once (raftd/lease_fwd.h keeps as many requests in
 * flight; more wait here for one to be free). */
#define PL_MAX_CONNS 16
/* An idle connection is closed after this long: before the leader
 * closes it, so that a renewal is not sent on a connection being closed
 * under it (etcd's peer listener times a read out after rafthttp's
 * ConnReadTimeout, 5 s; cetcd's gatewayd closes a handed connection
 * silent that long, gatewayd/server.c). */
#define PL_IDLE_NS (4ull * 1000 * 1000 * 1000)
/* Bytes read per read(2): an answer is a few dozen. */
#define PL_READ_CHUNK 4096u
/* The most URLs of a target kept. */
#define PL_MAX_URLS 8

/* A request to forward. */
struct pl_req {
	struct pl_req *next;
	uint64_t token;
	uint64_t deadline_ns;
	unsigned tries;              /* connections it failed on */
	bool internal;               /* /leases/internal */
	size_t body_len;
	uint8_t body[LEASEHTTP_MAX_REQUEST];
};

struct pl_list {
	struct pl_req *head;
	struct pl_req **tail;
};

enum pl_state {
	PL_FREE = 0,                 /* not in use (fd -1) */
	PL_CONNECTING,
	PL_HANDSHAKE,
	PL_SENDING,
	PL_READING,
	PL_IDLE,
};

struct pl_conn {
	int fd;
	struct tls_conn *tls;
	enum pl_state state;
	uint32_t armed;              /* the epoll events registered */
	uint64_t gen;                /* the target it was dialed for */
	size_t url;                  /* which of the target's URLs */
	bool reused;                 /* an answer came on it before */
	struct pl_req *req;          /* the request it carries, or NULL */
	uint64_t idle_since_ns;
	struct peer_buf out;
	struct peer_fetch_reader rd;
};

struct peer_lease {
	struct peer *p;
	pthread_t thread;
	int epfd;
	int wake_fd;                 /* eventfd: loop thread -> forwarder */

	/* under mu */
	pthread_mutex_t mu;
	bool stop;
	bool wake_pending;           /* wake_fd was written, not yet read */
	struct pl_list submitted;    /* handed over, not yet taken */
	uint64_t *cancels;           /* tokens given up */
	size_t n_cancels, cap_cancels;
	struct pl_req *free;         /* spare requests */
	uint64_t gen;                /* bumped when the target changes */
	char *urls[PL_MAX_URLS];     /* the target's URLs, owned */
	size_t n_urls;

	/* forwarder thread only */
	uint64_t my_gen;             /* the target below is gen's */
	struct peer_url target[PL_MAX_URLS];
	char target_text[PL_MAX_URLS][300];
	size_t n_target;
	size_t pick;                 /* the URL new connections dial */
	struct pl_list queue;        /* waiting for a connection */
	struct pl_conn conns[PL_MAX_CONNS];
};

static void pl_list_init(struct pl_list *l)
{
	l->head = NULL;
	l->tail = &l->head;
}

static void pl_list_push(struct pl_list *l, struct pl_req *r)
{
	r->next = NULL;
	*l->tail = r;
	l->tail = &r->next;
}

static struct pl_req *pl_list_pop(struct pl_list *l)
{
	struct pl_req *r = l->head;
	if (r && !(l->head = r->next))
		l->tail = &l->head;
	return r;
}

/* Gives r back to the spare list. */
static void pl_req_put(struct peer_lease *pl, struct pl_req *r)
{
	pthread_mutex_lock(&pl->mu);
	r->next = pl->free;
	pl->free = r;
	pthread_mutex_unlock(&pl->mu);
}

/* Reports r's end to the loop thread and frees it: status the HTTP
 * status or a negative errno, resp the answer (its body taken). */
static void pl_finish(struct peer_lease *pl, struct pl_req *r, int status,
		      struct peer_fetch_resp *resp)
{
	struct peer *p = pl->p;
	struct peer_event ev = { .kind = PEER_EV_LEASE_DONE, .token = r->token, .status = status };

	if (resp) {
		ev.buf = (uint8_t *)resp->body;
		ev.len = resp->len;
		resp->body = NULL;
	}
	pthread_mutex_lock(&p->mu);
	if (!p->closing)
		peer_emit_locked(p, &ev);
	else
		peer_event_release(&ev);
	pthread_mutex_unlock(&p->mu);
	pl_req_put(pl, r);
}

/* (Re)registers c for what its state waits for. */
static void pl_arm(struct peer_lease *pl, struct pl_conn *c, uint32_t want)
{
	struct epoll_event ev = { .events = want | EPOLLRDHUP, .data.ptr = c };

	if (c->armed == want)
		return;
	if (epoll_ctl(pl->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->armed = want;
}

/* Closes c; its request, if any, is the caller's. */
static void pl_close(struct peer_lease *pl, struct pl_conn *c)
{
	epoll_ctl(pl->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	if (c->tls)
		tls_conn_free(c->tls);
	close(c->fd);
	peer_buf_free(&c->out);
	peer_fetch_reader_free(&c->rd);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* c failed with err: its request is tried again on a fresh connection to
 * the next URL while it has tries left, or ends with err. */
static void pl_fail(struct peer_lease *pl, struct pl_conn *c, int err)
{
	struct pl_req *r = c->req;
	bool reused = c->reused;
	bool current = c->gen == pl->my_gen;

	if (r && current && !reused && pl->n_target)
		log_warn("failed to forward a lease request to the leader",
			 LOG_STR("path", r->internal ? LEASEHTTP_INTERNAL_PATH : LEASEHTTP_PATH),
			 LOG_STR("address", pl->target_text[c->url % pl->n_target]),
			 LOG_STR("error", err == -ETIMEDOUT ? "i/o timeout" : strerror(-err)));
	if (current && !reused && pl->n_target && c->url == pl->pick)
		pl->pick = (pl->pick + 1) % pl->n_target;
	c->req = NULL;
	pl_close(pl, c);
	if (!r)
		return;
	/* a reused connection the server had closed: not the URL's fault */
	if (!reused)
		r->tries++;
	if (r->tries >= pl->n_target) {
		pl_finish(pl, r, err, NULL);
		return;
	}
	/* first in line: it has waited longest */
	r->next = pl->queue.head;
	pl->queue.head = r;
	if (!r->next)
		pl->queue.tail = &r->next;
}

/* Puts r's request on c's output. */
static int pl_encode(struct peer_lease *pl, struct pl_conn *c, const struct pl_req *r)
{
	char host[PEER_REQUEST_HOST_MAX];
	int rc;

	peer_request_host(&pl->target[c->url], host, sizeof(host));
	rc = peer_buf_printf(&c->out,
			     "POST %s HTTP/1.1\r\nHost: %s\r\n"
			     "User-Agent: Go-http-client/1.1\r\nContent-Length: %zu\r\n"
			     "Content-Type: application/protobuf\r\n\r\n",
			     r->internal ? LEASEHTTP_INTERNAL_PATH : LEASEHTTP_PATH, host, r->body_len);
	return rc ? rc : peer_buf_append(&c->out, r->body, r->body_len);
}

/* Writes what c's output holds as far as the socket takes it: 0 (all
 * written, or the rest waits for EPOLLOUT), or an error. */
static int pl_write(struct peer_lease *pl, struct pl_conn *c)
{
	while (peer_buf_size(&c->out)) {
		ssize_t w;
		if (c->tls) {
			w = tls_conn_write(c->tls, peer_buf_data(&c->out), peer_buf_size(&c->out));
		} else {
			w = send(c->fd, peer_buf_data(&c->out), peer_buf_size(&c->out),
				 MSG_NOSIGNAL);
			if (w < 0)
				w = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		}
		if (w == -EAGAIN) {
			bool rd = c->tls && (tls_conn_want(c->tls) & TLS_WANT_READ);
			pl_arm(pl, c, rd ? EPOLLIN : EPOLLOUT);
			return 0;
		}
		if (w < 0)
			return (int)w;
		peer_buf_consume(&c->out, (size_t)w);
	}
	c->state = PL_READING;
	pl_arm(pl, c, EPOLLIN);
	return 0;
}

/* Starts r on c (idle, or just connected). */
static void pl_send(struct peer_lease *pl, struct pl_conn *c, struct pl_req *r)
{
	int rc;

	c->req = r;
	c->state = PL_SENDING;
	rc = pl_encode(pl, c, r);
	if (!rc)
		rc = pl_write(pl, c);
	if (rc)
		pl_fail(pl, c, rc);
}

/* Reads what c has: an answer ends its request. */
static void pl_read(struct peer_lease *pl, struct pl_conn *c)
{
	struct peer_fetch_resp resp;
	int rc;

	for (;;) {
		uint8_t *at = peer_fetch_reader_space(&c->rd, PL_READ_CHUNK);
		ssize_t n;
		if (!at) {
			pl_fail(pl, c, -ENOMEM);
			return;
		}
		if (c->tls) {
			n = tls_conn_read(c->tls, at, PL_READ_CHUNK);
		} else {
			n = recv(c->fd, at, PL_READ_CHUNK, 0);
			if (n < 0)
				n = errno == EAGAIN || errno == EINTR ? -EAGAIN : -errno;
		}
		if (n == -EAGAIN) {
			bool wr = c->tls && (tls_conn_want(c->tls) & TLS_WANT_WRITE);
			pl_arm(pl, c, wr ? EPOLLOUT : EPOLLIN);
			return;
		}
		if (n < 0 || (n == 0 && c->state == PL_IDLE)) {
			pl_fail(pl, c, n < 0 ? (int)n : -ECONNRESET);
			return;
		}
		if (c->state == PL_IDLE) {
			/* nothing was asked: the server talks out of turn */
			pl_fail(pl, c, -EBADMSG);
			return;
		}
		rc = peer_fetch_reader_feed(&c->rd, (size_t)n, n == 0, &resp);
		if (rc < 0) {
			pl_fail(pl, c, rc);
			return;
		}
		if (rc == 1)
			break;
	}
	struct pl_req *r = c->req;
	c->req = NULL;
	c->reused = true;
	if (resp.close || peer_fetch_reader_pending(&c->rd) || c->gen != pl->my_gen) {
		pl_close(pl, c);
	} else {
		c->state = PL_IDLE;
		c->idle_since_ns = clock_now_ns();
		pl_arm(pl, c, EPOLLIN);
	}
	pl_finish(pl, r, resp.status, &resp);
}

/* c's connect or handshake moved on. */
static void pl_connect(struct peer_lease *pl, struct pl_conn *c)
{
	int rc = 0;

	if (c->state == PL_CONNECTING) {
		int err = 0;
		socklen_t el = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
		if (err) {
			pl_fail(pl, c, -err);
			return;
		}
		if (!pl->target[c->url].tls) {
			pl_send(pl, c, c->req);
			return;
		}
		rc = tls_conn_new(pl->p->client_tls, c->fd,
				  pl->target[c->url].unix_socket ? NULL : pl->target[c->url].host,
				  &c->tls);
		if (rc) {
			pl_fail(pl, c, rc);
			return;
		}
		c->state = PL_HANDSHAKE;
	}
	rc = tls_conn_handshake(c->tls);
	if (rc == -EAGAIN) {
		pl_arm(pl, c, tls_conn_want(c->tls) & TLS_WANT_WRITE ? EPOLLOUT : EPOLLIN);
		return;
	}
	if (rc) {
		pl_fail(pl, c, rc);
		return;
	}
	pl_send(pl, c, c->req);
}

/* Dials the target's picked URL for r on free slot c. */
static void pl_dial(struct peer_lease *pl, struct pl_conn *c, struct pl_req *r)
{
	const struct peer_url *u;
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1, rc;

	c->gen = pl->my_gen;
	c->url = pl->pick;
	c->req = r;
	u = &pl->target[c->url];
	if (u->tls && !pl->p->client_tls) {
		c->fd = -1;
		c->req = NULL;
		pl_finish(pl, r, -EPROTONOSUPPORT, NULL);
		return;
	}
	rc = peer_url_sockaddr(u, &ss, &sl);
	if (!rc) {
		c->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		rc = c->fd < 0 ? -errno : 0;
	}
	if (rc) {
		c->fd = -1;
		c->req = NULL;
		r->tries++;
		pl->pick = (pl->pick + 1) % pl->n_target;
		if (r->tries >= pl->n_target)
			pl_finish(pl, r, rc, NULL);
		else
			pl_list_push(&pl->queue, r);
		return;
	}
	if (ss.ss_family != AF_UNIX)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLRDHUP, .data.ptr = c };
	if (epoll_ctl(pl->epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
		rc = -errno;
		close(c->fd);
		c->fd = -1;
		c->req = NULL;
		pl_finish(pl, r, rc, NULL);
		return;
	}
	c->armed = EPOLLOUT;
	c->state = PL_CONNECTING;
	if (connect(c->fd, (struct sockaddr *)&ss, sl) == 0)
		pl_connect(pl, c);
	else if (errno != EINPROGRESS)
		pl_fail(pl, c, -errno);
}

/* Gives waiting requests a connection: an idle one to the target, a new
 * one while fewer than PL_MAX_CONNS are open, or a new one in the place
 * of an idle one to an old target. */
static void pl_assign(struct peer_lease *pl)
{
	while (pl->queue.head) {
		struct pl_conn *idle = NULL, *free_c = NULL, *stale = NULL;
		if (!pl->n_target)
			return; /* no leader's URLs yet: the loop thread times them out */
		for (size_t i = 0; i < PL_MAX_CONNS; i++) {
			struct pl_conn *c = &pl->conns[i];
			if (c->state == PL_FREE)
				free_c = free_c ? free_c : c;
			else if (c->state == PL_IDLE && c->gen == pl->my_gen)
				idle = c;
			else if (c->state == PL_IDLE)
				stale = c;
		}
		if (!idle && !free_c && stale) {
			pl_close(pl, stale);
			free_c = stale;
		}
		if (!idle && !free_c)
			return; /* all busy: the next to end takes one */
		struct pl_req *r = pl_list_pop(&pl->queue);
		if (idle)
			pl_send(pl, idle, r);
		else
			pl_dial(pl, free_c, r);
	}
}

/* Takes what the loop thread handed over. false once stopping. */
static bool pl_take(struct peer_lease *pl)
{
	struct pl_req *sub;
	uint64_t cancels[64];
	size_t n_cancels;
	bool more = true;

	while (more) {
		pthread_mutex_lock(&pl->mu);
		if (pl->stop) {
			pthread_mutex_unlock(&pl->mu);
			return false;
		}
		sub = pl->submitted.head;
		pl_list_init(&pl->submitted);
		n_cancels = pl->n_cancels < 64 ? pl->n_cancels : 64;
		if (n_cancels)
			memcpy(cancels, pl->cancels + pl->n_cancels - n_cancels,
			       n_cancels * sizeof(*cancels));
		pl->n_cancels -= n_cancels;
		more = pl->n_cancels > 0;
		if (pl->gen != pl->my_gen) {
			pl->my_gen = pl->gen;
			pl->n_target = 0;
			for (size_t i = 0; i < pl->n_urls; i++) {
				if (peer_url_parse(pl->urls[i], &pl->target[pl->n_target]))
					continue;
				snprintf(pl->target_text[pl->n_target],
					 sizeof(pl->target_text[0]), "%s", pl->urls[i]);
				pl->n_target++;
			}
			pl->pick = 0;
		}
		pthread_mutex_unlock(&pl->mu);
		while (sub) {
			struct pl_req *r = sub;
			sub = r->next;
			pl_list_push(&pl->queue, r);
		}
		for (size_t k = 0; k < n_cancels; k++) {
			struct pl_req **pp = &pl->queue.head, *r;
			for (; (r = *pp); pp = &r->next)
				if (r->token == cancels[k])
					break;
			if (r) {
				if (!(*pp = r->next))
					pl->queue.tail = pp;
				pl_req_put(pl, r);
				continue;
			}
			for (size_t i = 0; i < PL_MAX_CONNS; i++) {
				struct pl_conn *c = &pl->conns[i];
				if (c->req && c->req->token == cancels[k]) {
					/* HTTP/1.1 cannot take a request back */
					struct pl_req *gone = c->req;
					c->req = NULL;
					pl_close(pl, c);
					pl_req_put(pl, gone);
					break;
				}
			}
		}
	}
	/* idle connections to an old target are of no more use */
	for (size_t i = 0; i < PL_MAX_CONNS; i++)
		if (pl->conns[i].state == PL_IDLE && pl->conns[i].gen != pl->my_gen)
			pl_close(pl, &pl->conns[i]);
	return true;
}

/* Ends requests past their deadline and closes long idle connections;
 * returns the milliseconds until the next such time (-1: none). */
static int pl_expire(struct peer_lease *pl)
{
	uint64_t now = clock_now_ns(), next = UINT64_MAX;
	struct pl_req **pp = &pl->queue.head, *r;

	while ((r = *pp)) {
		if (r->deadline_ns <= now) {
			if (!(*pp = r->next))
				pl->queue.tail = pp;
			pl_finish(pl, r, -ETIMEDOUT, NULL);
			continue;
		}
		next = r->deadline_ns < next ? r->deadline_ns : next;
		pp = &r->next;
	}
	for (size_t i = 0; i < PL_MAX_CONNS; i++) {
		struct pl_conn *c = &pl->conns[i];
		uint64_t at = c->req ? c->req->deadline_ns :
			      c->state == PL_IDLE ? c->idle_since_ns + PL_IDLE_NS : UINT64_MAX;
		if (at > now) {
			next = at < next ? at : next;
			continue;
		}
		if (!c->req) {
			pl_close(pl, c);
			continue;
		}
		r = c->req;
		c->req = NULL;
		pl_close(pl, c);
		pl_finish(pl, r, -ETIMEDOUT, NULL);
	}
	if (next == UINT64_MAX)
		return -1;
	return (int)((next - now + 999999) / 1000000);
}

static void pl_io(struct peer_lease *pl, struct pl_conn *c, uint32_t events)
{
	switch (c->state) {
	case PL_CONNECTING:
	case PL_HANDSHAKE:
		pl_connect(pl, c);
		break;
	case PL_SENDING: {
		int rc = pl_write(pl, c);
		if (rc)
			pl_fail(pl, c, rc);
		else if (c->state == PL_READING && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)))
			pl_read(pl, c);
		break;
	}
	case PL_READING:
	case PL_IDLE:
		pl_read(pl, c);
		break;
	case PL_FREE:
		break;
	}
}

static void *pl_main(void *arg)
{
	struct peer_lease *pl = arg;
	struct epoll_event evs[PL_MAX_CONNS + 1];

	while (pl_take(pl)) {
		pl_assign(pl);
		int timeout = pl_expire(pl);
		int n = epoll_wait(pl->epfd, evs, PL_MAX_CONNS + 1, timeout);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == NULL) {
				uint64_t v;
				pthread_mutex_lock(&pl->mu);
				if (read(pl->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
					log_warn("cannot read the lease forwarder's wake fd",
						 LOG_ERRNO(-errno));
				pl->wake_pending = false;
				pthread_mutex_unlock(&pl->mu);
				continue;
			}
			pl_io(pl, evs[i].data.ptr, evs[i].events);
		}
	}
	return NULL;
}

/* Wakes the forwarder; under mu. */
static void pl_wake_locked(struct peer_lease *pl)
{
	peer_eventfd_wake(pl->wake_fd, &pl->wake_pending, "lease forwarder");
}

/* p->lease, started on first use (loop thread). */
static struct peer_lease *pl_get(struct peer *p)
{
	struct peer_lease *pl = p->lease;
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	if (pl)
		return pl;
	pl = raftd_calloc(1, sizeof(*pl));
	if (!pl)
		return NULL;
	pl->p = p;
	pl_list_init(&pl->submitted);
	pl_list_init(&pl->queue);
	for (size_t i = 0; i < PL_MAX_CONNS; i++)
		pl->conns[i].fd = -1;
	pthread_mutex_init(&pl->mu, NULL);
	pl->epfd = epoll_create1(EPOLL_CLOEXEC);
	pl->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (pl->epfd < 0 || pl->wake_fd < 0 || epoll_ctl(pl->epfd, EPOLL_CTL_ADD, pl->wake_fd, &ev))
		rc = -errno;
	else
		rc = shm_thread_start(&pl->thread, false, pl_main, pl);
	if (rc) {
		log_warn("cannot start the lease forwarder", LOG_ERRNO(rc));
		if (pl->epfd >= 0)
			close(pl->epfd);
		if (pl->wake_fd >= 0)
			close(pl->wake_fd);
		pthread_mutex_destroy(&pl->mu);
		raftd_free(pl);
		return NULL;
	}
	p->lease = pl;
	return pl;
}

/* Whether urls differ from the target's; under mu. */
static bool pl_target_differs(const struct peer_lease *pl, const char *const *urls, size_t n)
{
	if (n > PL_MAX_URLS)
		n = PL_MAX_URLS;
	if (n != pl->n_urls)
		return true;
	for (size_t i = 0; i < n; i++)
		if (strcmp(urls[i], pl->urls[i]))
			return true;
	return false;
}

/* Makes urls the target; under mu. */
static int pl_retarget_locked(struct peer_lease *pl, const char *const *urls, size_t n)
{
	char *copy[PL_MAX_URLS];

	if (n > PL_MAX_URLS)
		n = PL_MAX_URLS;
	for (size_t i = 0; i < n; i++) {
		copy[i] = raftd_malloc(strlen(urls[i]) + 1);
		if (!copy[i]) {
			while (i--)
				raftd_free(copy[i]);
			return -ENOMEM;
		}
		strcpy(copy[i], urls[i]);
	}
	for (size_t i = 0; i < pl->n_urls; i++)
		raftd_free(pl->urls[i]);
	memcpy(pl->urls, copy, n * sizeof(*copy));
	pl->n_urls = n;
	pl->gen++;
	return 0;
}

int peer_lease_forward(struct peer *p, const char *const *urls, size_t n,
		       const struct leasehttp_req *lr, uint64_t token, int timeout_ms)
{
	struct peer_lease *pl = pl_get(p);
	struct pl_req *r;
	int rc = 0;

	if (!pl)
		return -EAGAIN;
	pthread_mutex_lock(&pl->mu);
	if (pl_target_differs(pl, urls, n))
		rc = pl_retarget_locked(pl, urls, n);
	r = pl->free;
	if (r)
		pl->free = r->next;
	pthread_mutex_unlock(&pl->mu);
	if (rc)
		return rc;
	if (!r && !(r = raftd_malloc(sizeof(*r))))
		return -ENOMEM;
	r->token = token;
	r->deadline_ns = clock_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
	r->tries = 0;
	r->internal = lr->internal;
	r->body_len = leasehttp_request_encode(lr, r->body);
	pthread_mutex_lock(&pl->mu);
	pl_list_push(&pl->submitted, r);
	pl_wake_locked(pl);
	pthread_mutex_unlock(&pl->mu);
	return 0;
}

void peer_lease_cancel(struct peer *p, uint64_t token)
{
	struct peer_lease *pl = p->lease;

	if (!pl)
		return;
	pthread_mutex_lock(&pl->mu);
	if (pl->n_cancels == pl->cap_cancels) {
		size_t cap = pl->cap_cancels ? 2 * pl->cap_cancels : 16;
		uint64_t *v = raftd_realloc(pl->cancels, cap * sizeof(*v));
		if (!v) {
			/* it ends at its deadline and its answer is ignored */
			pthread_mutex_unlock(&pl->mu);
			return;
		}
		pl->cancels = v;
		pl->cap_cancels = cap;
	}
	pl->cancels[pl->n_cancels++] = token;
	pl_wake_locked(pl);
	pthread_mutex_unlock(&pl->mu);
}

void peer_lease_free(struct peer *p)
{
	struct peer_lease *pl = p->lease;
	struct pl_req *r;

	if (!pl)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->stop = true;
	pl->wake_pending = false;
	pl_wake_locked(pl);
	pthread_mutex_unlock(&pl->mu);
	pthread_join(pl->thread, NULL);
	for (size_t i = 0; i < PL_MAX_CONNS; i++) {
		struct pl_conn *c = &pl->conns[i];
		if (c->req)
			pl_list_push(&pl->queue, c->req);
		c->req = NULL;
		if (c->state != PL_FREE)
			pl_close(pl, c);
	}
	while ((r = pl_list_pop(&pl->submitted)))
		raftd_free(r);
	while ((r = pl_list_pop(&pl->queue)))
		raftd_free(r);
	while ((r = pl->free)) {
		pl->free = r->next;
		raftd_free(r);
	}
	for (size_t i = 0; i < pl->n_urls; i++)
		raftd_free(pl->urls[i]);
	raftd_free(pl->cancels);
	close(pl->epfd);
	close(pl->wake_fd);
	pthread_mutex_destroy(&pl->mu);
	raftd_free(pl);
	p->lease = NULL;
}
