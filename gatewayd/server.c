/* gatewayd's event loop: listeners, connections, protocol detection, the
 * timer, and the per-turn flush (see server.h). */
#include "gatewayd/server.h"
#include "base/clock/clock.h"
#include "gatewayd/jsongw/jsongw.h"
#include "gatewayd/offload.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/services/kv.h"
#include "gatewayd/transport/transport.h"
#include "gatewayd/services/watch.h"
#include "gatewayd/services/metrics.h"
#include "proto/check.h"
#include "config/config.h"
#include "gatewayd/noleader.h"
#include "shm/doorbell.h"
#include "base/sock/gwsock.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "shm/region.h"
#include "base/tls/tls.h"

/* What an epoll event's data.ptr points at. */
enum gw_src_kind {
	GW_SRC_LISTENER = 1, GW_SRC_CONN, GW_SRC_WAKER, GW_SRC_TIMER, GW_SRC_WATCH,
	GW_SRC_OFFLOAD, /* the worker finished jobs (offload.h) */
};

struct gw_listener {
	struct gw_src src;
	enum gw_listen_mode mode;
	bool paused;               /* out of descriptors: not accepting for now */
	struct gw_listener *next;
};

struct gw_watch {
	struct gw_src src;
	struct gw_watch *next;
};

enum gw_proto { GW_DETECT, GW_H2, GW_HTTP1 };

/* The HTTP/2 client preface (RFC 9113 section 3.4). */
static const char gw_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define GW_PREFACE_LEN 24u

/* Bytes read from one connection per turn before others get a go. */
#define GW_READ_PER_TURN (256u * 1024u)
/* How long a closing connection waits for the client to close after the
 * last answer went out (its unread bytes would otherwise reset the
 * answer away). */
#define GW_LINGER_NS 1000000000
/* A connection raftd handed over from the peer port whose client sent
 * nothing for this long is closed: etcd's peer listener times each read
 * out after rafthttp's ConnReadTimeout, its gRPC connections included.
 * Not while an HTTP/1 answer is being computed or written. */
#define GW_HANDED_READ_TIMEOUT_NS 5000000000ll
/* A client of a TLS (or http-and-https) listener that has not finished
 * its handshake this long after it connected is closed, so that stalled
 * clients do not keep descriptors for good. etcd 3.4's client listener
 * sets no limit; this is the TLS handshake timeout its own HTTP
 * transports use (pkg/transport's TLSHandshakeTimeout). */
#define GW_TLS_HANDSHAKE_TIMEOUT_S 10
#define GW_TLS_HANDSHAKE_TIMEOUT_NS ((int64_t)GW_TLS_HANDSHAKE_TIMEOUT_S * 1000000000)

struct gw_conn {
	struct gw_src src;         /* kind GW_SRC_CONN, fd of the transport */
	struct gw_server *s;
	struct transport t;
	enum gw_proto proto;
	struct h2_conn *h2;
	struct http1_conn h1;
	uint8_t preface[GW_PREFACE_LEN];
	uint32_t preface_len;
	uint32_t events;           /* epoll interest set now */
	bool out_blocked;          /* the transport took less than offered */
	bool read_blocked_on_write; /* the last read waits for the socket to take
				     * bytes (TLS) */
	bool listed;               /* on the flush list */
	bool lingering;            /* write side shut, waiting for the client's close */
	bool dead;                 /* closed; freed at the end of the turn */
	bool local;                /* from the local socket (GW_LISTEN_LOCAL) */
	bool metrics;              /* from a --listen-metrics-urls listener */
	int64_t linger_until_ns;
	int64_t read_at_ns;        /* local: when bytes last came (or an
				    * HTTP/1 answer was given) */
	struct dlist handed;       /* local: s->handed, ordered by read_at_ns */
	int64_t accepted_ns;       /* when the connection came */
	struct dlist handshaking;  /* TLS: s->handshaking until the handshake is
				    * done (or found done at its deadline) */
	struct dlist node;         /* s->conns */
	struct dlist linger;       /* s->linger, while lingering */
	struct dlist flush;        /* s->flush while listed, then s->dead */
};

/* ---- the turn's arena ---- */

#define GW_ARENA_BLOCK (64u * 1024u)

struct gw_arena_block {
	struct gw_arena_block *next;
	size_t cap, used;
	max_align_t data[];
};

struct gw_arena {
	struct gw_arena_block *head;
};

void *gw_scratch(struct gw_server *s, size_t len)
{
	struct gw_arena *a = s->arena;
	struct gw_arena_block *b = a->head;
	size_t need = (len + 15) & ~(size_t)15;

	if (need < len)
		return NULL;
	if (!b || b->cap - b->used < need) {
		size_t cap = need > GW_ARENA_BLOCK ? need : GW_ARENA_BLOCK;
		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->cap = cap;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	void *p = (uint8_t *)b->data + b->used;
	b->used += need;
	return p;
}

/* Frees all but one standard block. */
static void gw_arena_reset(struct gw_arena *a, bool all)
{
	struct gw_arena_block *keep = NULL, *b = a->head, *n;
	for (; b; b = n) {
		n = b->next;
		if (!all && !keep && b->cap == GW_ARENA_BLOCK) {
			keep = b;
			continue;
		}
		free(b);
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	a->head = keep;
}

static void *gw_pb_alloc_fn(void *arg, size_t size)
{
	return gw_scratch(arg, size);
}

static void gw_pb_free_fn(void *arg, void *p)
{
	(void)arg;
	(void)p;
}

/* ---- time ---- */

/* Arms the timerfd at the monotonic time when (INT64_MAX: disarmed),
 * unless it is armed there already or earlier (see below). */
static void gw_timer_arm(struct gw_server *s, int64_t when)
{
	struct itimerspec its = { 0 };

	/* An armed timer that fires at or before `when` and is still ahead
	 * stays: firing early costs one turn, which arms it again, while
	 * re-arming costs a system call on every turn in which requests wait
	 * (their settle poll moves with the clock). */
	if (when == s->timer_armed_ns || (s->timer_armed_ns <= when && s->timer_armed_ns > s->now_ns))
		return;
	if (when != INT64_MAX) {
		if (when <= 0)
			when = 1;
		its.it_value.tv_sec = when / 1000000000;
		its.it_value.tv_nsec = when % 1000000000;
	}
	if (timerfd_settime(s->timerfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
		s->timer_armed_ns = when;
}

/* ---- connections ---- */

static int gw_epoll(struct gw_server *s, int op, struct gw_src *src, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = src };
	return epoll_ctl(s->epfd, op, src->fd, &ev) < 0 ? -errno : 0;
}

/* Puts c's epoll interest in line with its state: reads unless its output
 * is blocked (back-pressure) or it lingers; writes while output waits. */
static void gw_conn_watch(struct gw_server *s, struct gw_conn *c)
{
	uint32_t ev = 0;

	if (c->lingering) {
		ev = EPOLLIN;
	} else if (c->out_blocked) {
		if (c->t.want & TRANSPORT_WANT_WRITE)
			ev |= EPOLLOUT;
		if (c->t.want & TRANSPORT_WANT_READ)
			ev |= EPOLLIN;
	} else {
		ev = EPOLLIN;
		if (c->read_blocked_on_write)
			ev |= EPOLLOUT;
	}
	if (ev != c->events && gw_epoll(s, EPOLL_CTL_MOD, &c->src, ev) == 0)
		c->events = ev;
}

static void gw_conn_list(struct gw_server *s, struct gw_conn *c)
{
	if (c->listed || c->dead)
		return;
	c->listed = true;
	dlist_insert_tail(&s->flush, &c->flush);
}

struct tls_conn *gw_call_tls(const struct gw_server *s, const struct grpc_call *call)
{
	struct h2_conn *h2 = grpc_call_conn(call);
	void *user = h2 ? h2_conn_user(h2) : NULL;

	/* the JSON gateway's loopback connection is its own, no gw_conn */
	if (!user || user == (void *)s->jsongw)
		return NULL;
	return transport_tls_conn(&((const struct gw_conn *)user)->t);
}

/* h2's pending callback: the connection got output outside a recv (an
 * answer from the rings); flush it at the end of the turn. */
static void gw_conn_pending(struct h2_conn *h2, void *user)
{
	struct gw_conn *c = user;
	(void)h2;
	gw_conn_list(c->s, c);
}

/* Lingering connections are queued in the order they began, which is
 * the order their times run out (each gets GW_LINGER_NS). */
static void gw_linger_unlink(struct gw_server *s, struct gw_conn *c)
{
	dlist_remove(&c->linger);
	s->lingering--;
}

/* A handed connection read from (or answered) now: its silence starts
 * again, and it goes last in s->handed, which stays ordered by
 * read_at_ns. */
static void gw_handed_touch(struct gw_server *s, struct gw_conn *c)
{
	if (!c->local)
		return;
	c->read_at_ns = s->now_ns;
	dlist_remove(&c->handed);
	dlist_insert_tail(&s->handed, &c->handed);
}

static int64_t gw_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static void gw_conn_close(struct gw_server *s, struct gw_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	if (c->lingering)
		gw_linger_unlink(s, c);
	dlist_remove(&c->handed);
	dlist_remove(&c->handshaking);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->src.fd, NULL);
	if (c->h2)
		grpc_server_conn_free(c->h2);
	c->h2 = NULL;
	if (c->proto == GW_HTTP1) {
		if (c->h1.waiting) {
			maint_hashkv_peer_drop(s, c);
			gw_lease_peer_drop(s, c);
			jsongw_http1_drop(s->jsongw, &c->h1);
			gw_read_index_http_drop(s, c);
		}
		http1_conn_fini(&c->h1);
	}
	transport_close(&c->t);
	dlist_remove(&c->node);
	s->conn_count--;
	if (!c->listed)
		dlist_insert_head(&s->dead, &c->flush);
	/* A listed one is freed by the flush pass, which owns c->flush. */
}

/* Ends a connection whose last answer is out: shuts the write side and
 * waits a little for the client to close first. */
static void gw_conn_linger(struct gw_server *s, struct gw_conn *c)
{
	if (c->lingering)
		return;
	if (transport_shutdown(&c->t) < 0) {
		gw_conn_close(s, c);
		return;
	}
	c->lingering = true;
	s->lingering++;
	c->linger_until_ns = s->now_ns + GW_LINGER_NS;
	dlist_insert_tail(&s->linger, &c->linger);
	gw_conn_watch(s, c);
}

static void gw_conn_flush(struct gw_server *s, struct gw_conn *c)
{
	int rc = 0;

	if (c->dead || c->lingering)
		return;
	if (c->proto == GW_H2) {
		rc = h2_conn_flush(c->h2, &c->t);
		if (rc < 0 && rc != -EAGAIN) {
			gw_conn_close(s, c);
			return;
		}
		c->out_blocked = rc == -EAGAIN;
		if (h2_conn_is_done(c->h2)) {
			gw_conn_close(s, c);
			return;
		}
	} else if (c->proto == GW_HTTP1) {
		size_t left = http1_conn_out_len(&c->h1);
		if (left > 0) {
			struct iovec iov = { c->h1.out.data + c->h1.out_off, left };
			ssize_t n = transport_writev_all(&c->t, &iov, 1);
			if (n < 0) {
				gw_conn_close(s, c);
				return;
			}
			http1_conn_out_done(&c->h1, (size_t)n);
			if (n > 0 && c->h1.waiting && jsongw_http1_drained(s->jsongw, &c->h1))
				s->more_work = true; /* the window goes back next turn */
		}
		c->out_blocked = http1_conn_out_len(&c->h1) > 0;
		if (http1_conn_is_done(&c->h1)) {
			gw_conn_linger(s, c);
			return;
		}
	}
	gw_conn_watch(s, c);
}

/* http1_ops.hashkv of the local socket's connections: c is the h1 of a
 * gw_conn, which owns the job. */
static int gw_http1_hashkv(void *arg, struct http1_conn *h1, int64_t rev)
{
	struct gw_conn *c = (struct gw_conn *)((char *)h1 - offsetof(struct gw_conn, h1));

	return maint_hashkv_peer(arg, c, rev);
}

/* http1_ops.serve of every connection: /metrics and the health checks
 * (services/http.c), which answer later through gw_http1_reply. */
static int gw_http1_serve(void *arg, struct http1_conn *h1, const struct http1_req *r)
{
	struct gw_conn *c = (struct gw_conn *)((char *)h1 - offsetof(struct gw_conn, h1));

	return http_serve(arg, c, h1, r);
}

/* http1_ops.lease of the local socket's connections. */
static int gw_http1_lease(void *arg, struct http1_conn *h1, const struct leasehttp_req *r)
{
	struct gw_conn *c = (struct gw_conn *)((char *)h1 - offsetof(struct gw_conn, h1));

	return gw_lease_peer(arg, c, r);
}

void gw_http1_reply(struct gw_server *s, void *owner, int status, const char *ctype,
		    const void *body, size_t len)
{
	struct gw_conn *c = owner;

	if (c->dead)
		return;
	gw_handed_touch(s, c);
	if (http1_conn_reply(&c->h1, status, ctype, body, len))
		gw_conn_close(s, c);
	else
		gw_conn_list(s, c);
}

void gw_http1_hashkv_done(struct gw_server *s, void *owner, int rc, const struct hashkv_resp *r,
			  const char *why)
{
	struct gw_conn *c = owner;

	if (c->dead)
		return;
	gw_handed_touch(s, c);
	if (http1_conn_hashkv_done(&c->h1, rc, r, why))
		gw_conn_close(s, c);
	else
		gw_conn_list(s, c);
}

void gw_http1_output(struct gw_server *s, void *owner, int rc)
{
	struct gw_conn *c = owner;

	if (c->dead)
		return;
	if (rc)
		gw_conn_close(s, c);
	else
		gw_conn_list(s, c);
}

/* http1_ops.gateway of the client port's connections. */
static int gw_http1_gateway(void *arg, struct http1_conn *h1, const struct http1_gw_req *r,
			    struct http1_gw_answer *now)
{
	struct gw_server *s = arg;
	struct gw_conn *c = (struct gw_conn *)((char *)h1 - offsetof(struct gw_conn, h1));

	return jsongw_http1(s->jsongw, c, h1, r, now);
}

static void gw_conn_start_http1(struct gw_server *s, struct gw_conn *c)
{
	c->proto = GW_HTTP1;
	s->stats.http1_conns++;
	http1_conn_init(&c->h1, c->local ? &s->http1_local : c->metrics ? &s->http1_metrics : &s->http1);
	c->h1.secure = c->t.impl != NULL; /* a TLS session */
}

/* The first bytes tell HTTP/2 (the client preface) from HTTP/1.x. */
static int gw_conn_detect(struct gw_server *s, struct gw_conn *c, const uint8_t *data, size_t len,
			  size_t *used)
{
	size_t n = GW_PREFACE_LEN - c->preface_len;
	if (n > len)
		n = len;
	*used = 0;
	if (c->metrics) {
		/* etcd's metrics listeners serve HTTP/1.x only */
		gw_conn_start_http1(s, c);
		return 0;
	}
	if (memcmp(data, gw_preface + c->preface_len, n) == 0) {
		memcpy(c->preface + c->preface_len, data, n);
		c->preface_len += (uint32_t)n;
		*used = n;
		if (c->preface_len < GW_PREFACE_LEN)
			return 0;
		int rc = grpc_server_conn_new(s->grpc, &c->h2);
		if (rc)
			return rc;
		h2_conn_set_user(c->h2, c, gw_conn_pending);
		c->proto = GW_H2;
		s->keepalive_next_ns = gw_min(s->keepalive_next_ns,
					      s->now_ns + h2_conn_config(c->h2)->keepalive_ns);
		s->stats.h2_conns++;
		return h2_conn_recv(c->h2, c->preface, GW_PREFACE_LEN);
	}
	/* Not the preface: HTTP/1.x, starting with the bytes held so far. */
	gw_conn_start_http1(s, c);
	return c->preface_len ? http1_conn_recv(&c->h1, c->preface, c->preface_len) : 0;
}

/* Hands received bytes to the connection's protocol. */
static int gw_conn_input(struct gw_server *s, struct gw_conn *c, const uint8_t *data, size_t len)
{
	size_t used = 0;
	int rc;

	/* ALPN agreed on HTTP/1.1: no preface to look for */
	if (c->proto == GW_DETECT && c->t.proto == TRANSPORT_PROTO_HTTP1)
		gw_conn_start_http1(s, c);
	if (c->proto == GW_DETECT) {
		rc = gw_conn_detect(s, c, data, len, &used);
		if (rc)
			return rc;
		data += used;
		len -= used;
	}
	if (len == 0)
		return 0;
	if (c->proto == GW_H2)
		return h2_conn_recv(c->h2, data, len);
	if (c->proto == GW_HTTP1)
		return http1_conn_recv(&c->h1, data, len);
	return 0;
}

static void gw_conn_readable(struct gw_server *s, struct gw_conn *c)
{
	static __thread uint8_t buf[64 * 1024];
	size_t total = 0;

	c->read_blocked_on_write = false;

	while (!c->dead && total < GW_READ_PER_TURN) {
		ssize_t n = transport_read(&c->t, buf, sizeof(buf));
		if (n == -EAGAIN) {
			c->read_blocked_on_write = (c->t.want & TRANSPORT_WANT_WRITE) != 0;
			break;
		}
		if (c->lingering) {
			if (n <= 0)
				gw_conn_close(s, c);
			else
				total += (size_t)n; /* dropped: the connection is over */
			continue;
		}
		if (n == 0 && c->proto == GW_HTTP1 && !c->h1.closing) {
			/* The client half-closed: answer what it sent, then end. */
			c->h1.closing = true;
			break;
		}
		if (n <= 0) {
			gw_conn_close(s, c);
			return;
		}
		total += (size_t)n;
		gw_handed_touch(s, c);
		if (gw_conn_input(s, c, buf, (size_t)n)) {
			gw_conn_close(s, c);
			return;
		}
		if (c->proto == GW_HTTP1 && c->h1.closing)
			break;
		/* A short read of a plain socket drained it: the epoll set is
		 * level-triggered, so what arrives later is reported again,
		 * and the read that would only say EAGAIN is saved. (TLS may
		 * hold decrypted bytes the socket no longer shows.) */
		if (!c->t.impl && (size_t)n < sizeof(buf))
			break;
	}
	if (!c->dead && !c->lingering)
		gw_conn_list(s, c);
}

/* A new connection on fd (non-blocking), served as mode says. */
static int gw_conn_adopt(struct gw_server *s, int fd, enum gw_listen_mode mode)
{
	struct gw_conn *c;
	int one = 1, rc = 0;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* not TCP: harmless */
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	if (mode == GW_LISTEN_PLAIN || mode == GW_LISTEN_LOCAL || mode == GW_LISTEN_METRICS_PLAIN)
		transport_fd_init(&c->t, fd);
	else if (mode == GW_LISTEN_TLS || mode == GW_LISTEN_METRICS_TLS)
		rc = transport_tls_init(&c->t, fd, s->tls);
	else
		rc = transport_sniff_init(&c->t, fd, s->tls);
	if (rc) {
		close(fd);
		free(c);
		return rc;
	}
	c->s = s;
	c->local = mode == GW_LISTEN_LOCAL;
	c->metrics = mode == GW_LISTEN_METRICS_PLAIN || mode == GW_LISTEN_METRICS_TLS;
	c->src = (struct gw_src){ .kind = GW_SRC_CONN, .fd = fd };
	c->events = EPOLLIN;
	rc = gw_epoll(s, EPOLL_CTL_ADD, &c->src, EPOLLIN);
	if (rc) {
		transport_close(&c->t);
		free(c);
		return rc;
	}
	dlist_init(&c->linger);
	dlist_init(&c->flush);
	dlist_init(&c->handed);
	dlist_init(&c->handshaking);
	gw_handed_touch(s, c);
	c->accepted_ns = s->now_ns;
	if (transport_handshaking(&c->t))
		dlist_insert_tail(&s->handshaking, &c->handshaking);
	dlist_insert_head(&s->conns, &c->node);
	s->conn_count++;
	s->stats.accepted++;
	return 0;
}

int gw_server_adopt(struct gw_server *s, int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return gw_conn_adopt(s, fd, GW_LISTEN_PLAIN);
}

/* Out of descriptors (err): every listener stops listening for the
 * back-off's pause rather than spin on one the kernel keeps reporting
 * (base/sock/accept_backoff.h). */
static void gw_accept_pause(struct gw_server *s, int err)
{
	uint64_t pause = accept_backoff_fail(&s->accept_bo, (uint64_t)s->now_ns, err,
					     "cannot accept client connections for now",
					     s->conn_count);

	for (struct gw_listener *l = s->listeners; l; l = l->next)
		if (!l->paused && gw_epoll(s, EPOLL_CTL_MOD, &l->src, 0) == 0)
			l->paused = true;
	s->accept_resume_ns = s->now_ns + (int64_t)pause;
}

static void gw_accept(struct gw_server *s, struct gw_listener *l)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(l->src.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			int err = -errno;
			if (accept_backoff_exhausted(err))
				gw_accept_pause(s, err);
			return;
		}
		accept_backoff_ok(&s->accept_bo);
		if (l->mode == GW_LISTEN_LOCAL && !gwsock_same_user(fd)) {
			log_warn("refused a connection on the local socket from another user");
			close(fd);
			continue;
		}
		if (gw_conn_adopt(s, fd, l->mode))
			log_warn("dropped a client connection", LOG_STR("reason", "out of memory"));
	}
}

static void gw_listeners_resume(struct gw_server *s)
{
	s->accept_resume_ns = INT64_MAX;
	for (struct gw_listener *l = s->listeners; l; l = l->next)
		if (l->paused && gw_epoll(s, EPOLL_CTL_MOD, &l->src, EPOLLIN) == 0)
			l->paused = false;
}

/* ---- setup ---- */

int gw_server_listen(struct gw_server *s, int fd, enum gw_listen_mode mode)
{
	struct gw_listener *l;
	int rc;

	if (mode != GW_LISTEN_PLAIN && mode != GW_LISTEN_LOCAL && mode != GW_LISTEN_METRICS_PLAIN &&
	    !s->tls) {
		close(fd);
		return -EINVAL;
	}
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->src = (struct gw_src){ .kind = GW_SRC_LISTENER, .fd = fd };
	l->mode = mode;
	rc = gw_epoll(s, EPOLL_CTL_ADD, &l->src, EPOLLIN);
	if (rc) {
		close(fd);
		free(l);
		return rc;
	}
	l->next = s->listeners;
	s->listeners = l;
	return 0;
}

void gw_server_set_tls(struct gw_server *s, struct tls_ctx *ctx)
{
	tls_ctx_free(s->tls);
	s->tls = ctx;
}

int gw_server_watch(struct gw_server *s, int fd)
{
	struct gw_watch *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->src = (struct gw_src){ .kind = GW_SRC_WATCH, .fd = fd };
	rc = gw_epoll(s, EPOLL_CTL_ADD, &w->src, EPOLLIN);
	if (rc) {
		free(w);
		return rc;
	}
	w->next = s->watches;
	s->watches = w;
	return 0;
}

/* ---- unary methods ---- */

struct gw_method {
	struct gw_server *s;
	gw_unary_fn fn;
	void (*cancel)(struct gw_server *s, struct grpc_call *call);
	struct gw_method *next;
};

static void gw_unary_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct gw_method *m = grpc_call_handler_arg(call);
	if (gw_call_of(call)->stage != GW_CALL_AWAITING)
		return; /* a second message of a unary call: ignored, as grpc-go does */
	gw_call_set(call, GW_CALL_HANDLED, 0);
	m->fn(m->s, call, msg, len);
}

static void gw_unary_half_close(struct grpc_call *call)
{
	/* The client ended its side without a request (grpc-go reads EOF). */
	if (gw_call_of(call)->stage == GW_CALL_AWAITING)
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "EOF");
}

static void gw_unary_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	struct gw_method *m = grpc_call_handler_arg(call);
	(void)why;
	gw_rings_cancel(m->s, call);
	if (m->cancel)
		m->cancel(m->s, call);
}

static const struct grpc_handler gw_unary_handler = {
	.on_message = gw_unary_message,
	.on_half_close = gw_unary_half_close,
	.on_cancel = gw_unary_cancel,
};

int gw_handle_unary(struct gw_server *s, const char *path, gw_unary_fn fn)
{
	return gw_handle_unary_cancel(s, path, fn, NULL);
}

int gw_handle_unary_cancel(struct gw_server *s, const char *path, gw_unary_fn fn,
			   void (*cancel)(struct gw_server *s, struct grpc_call *call))
{
	struct gw_method *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->s = s;
	m->fn = fn;
	m->cancel = cancel;
	rc = grpc_server_handle(s->grpc, path, &gw_unary_handler, m);
	if (rc) {
		free(m);
		return rc;
	}
	m->next = s->methods;
	s->methods = m;
	return 0;
}

static void *gw_unpack_as(struct gw_server *s, struct grpc_call *call,
			  const ProtobufCMessageDescriptor *desc, const uint8_t **msg, size_t *len,
			  const char *prefix)
{
	char text[PROTO_CHECK_TEXT_MAX], status[sizeof(GW_STREAM_UNMARSHAL_PREFIX) + PROTO_CHECK_TEXT_MAX];
	bool canonical;
	int rc = proto_check_request(desc, *msg, *len, text, &canonical);
	void *m = NULL;

	if (rc == 0 && !canonical) {
		uint8_t *c = gw_scratch(s, proto_check_canonical_max(*len));
		size_t clen;
		if (!c) {
			grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
			return NULL;
		}
		rc = proto_check_canonicalize(desc, *msg, *len, c, &clen);
		*msg = c;
		*len = clen;
	}
	if (rc == 0) {
		m = protobuf_c_message_unpack(desc, gw_pb_alloc(s), *len, *msg);
		if (m)
			return m;
		snprintf(text, sizeof(text), "out of memory");
		rc = -ENOMEM;
	}
	snprintf(status, sizeof(status), "%s%s", prefix, text);
	grpc_call_finish(call, rc == -EILSEQ ? GRPC_STATUS_INVALID_ARGUMENT : GRPC_STATUS_INTERNAL,
			 status);
	return NULL;
}

void *gw_unpack(struct gw_server *s, struct grpc_call *call, const ProtobufCMessageDescriptor *desc,
		const uint8_t **msg, size_t *len)
{
	return gw_unpack_as(s, call, desc, msg, len, GW_UNMARSHAL_PREFIX);
}

void *gw_unpack_stream(struct gw_server *s, struct grpc_call *call,
		       const ProtobufCMessageDescriptor *desc, const uint8_t **msg, size_t *len)
{
	return gw_unpack_as(s, call, desc, msg, len, GW_STREAM_UNMARSHAL_PREFIX);
}

void gw_answer(struct gw_server *s, struct grpc_call *call, const ProtobufCMessage *m)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *p = grpc_call_send_reserve(call, len);
	(void)s;
	if (!p) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	protobuf_c_message_pack(m, p);
	grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

void gw_header_fill(struct gw_server *s, int64_t revision, struct gw_header *h)
{
	struct status_raftd rs = { 0 };
	struct status_stored st = { 0 };

	if (status_raftd_read(s->r, &rs))
		rs.term = 0;
	if (revision == 0 && status_stored_read(s->r, &st) == 0)
		revision = (int64_t)st.revision;
	h->cluster_id = s->cluster_id;
	h->member_id = s->member_id;
	h->raft_term = rs.term;
	h->revision = revision;
}

void gw_header_pb(struct gw_server *s, int64_t revision, Etcdserverpb__ResponseHeader *hdr)
{
	struct gw_header h;

	gw_header_fill(s, revision, &h);
	hdr->cluster_id = h.cluster_id;
	hdr->member_id = h.member_id;
	hdr->revision = h.revision;
	hdr->raft_term = h.raft_term;
}

/* ---- the attach exchange ---- */

void gw_server_hello(struct gw_server *s)
{
	bool retry = false;

	for (int role = 0; role < SHM_ROLE_COUNT; role++) {
		if (s->hello_sent[role])
			continue;
		int rc = hello_send(s->r, &s->slot, (enum shm_role)role, s->cfg->gateway_index);
		if (rc == 0) {
			s->hello_sent[role] = true;
		} else {
			retry = true;
			if (rc != -EAGAIN)
				log_warn("cannot send the attach hello",
					 LOG_STR("peer", hello_role_name((enum shm_role)role)),
					 LOG_ERRNO(rc));
		}
	}
	s->hello_retry_ns = retry ? clock_now_ns() + GW_HELLO_RETRY_NS : INT64_MAX;
}

/* ---- the loop ---- */

/* grpc-go's keepalive settings from etcd's flags, as etcd 3.4 hands them
 * to grpc-go (embed/etcd.go): a min time of 0 leaves grpc-go's policy
 * (5 min), an interval or a timeout of 0 its server parameters (2 h,
 * 20 s), and grpc-go raises an interval under 1 s to 1 s. */
static void gw_keepalive_config(const struct cetcd_config *cfg, struct h2_config *h)
{
	const int64_t sec = 1000000000LL;

	h->ping_min_ns = cfg->grpc_keepalive_min_time_ns > 0 ? cfg->grpc_keepalive_min_time_ns
							      : 5 * 60 * sec;
	h->keepalive_ns = 2 * 3600 * sec;
	h->keepalive_timeout_ns = 20 * sec;
	if (cfg->grpc_keepalive_interval_ns > 0 && cfg->grpc_keepalive_timeout_ns > 0) {
		h->keepalive_ns = cfg->grpc_keepalive_interval_ns < sec ? sec
									: cfg->grpc_keepalive_interval_ns;
		h->keepalive_timeout_ns = cfg->grpc_keepalive_timeout_ns;
	}
}

/* The HTTP/2 connections' keepalive (h2_conn_keepalive: a PING to one
 * silent for the interval, the close of one silent for the timeout after
 * it), once the earliest deadline has come; returns the next. Deadlines
 * only move later as bytes come, so the earliest known one is a safe time
 * to look again. */
static int64_t gw_keepalive_expire(struct gw_server *s)
{
	struct gw_conn *c, *n;
	int64_t next = INT64_MAX, at;

	if (s->keepalive_next_ns > s->now_ns)
		return s->keepalive_next_ns;
	dlist_for_each_safe(c, n, &s->conns, node) {
		if (c->proto != GW_H2 || c->dead || c->lingering)
			continue;
		if (h2_conn_keepalive(c->h2, s->now_ns, &at) == -ETIMEDOUT) {
			log_debug("closed a connection whose client did not answer a keepalive ping");
			gw_conn_close(s, c);
			continue;
		}
		next = gw_min(next, at);
	}
	s->keepalive_next_ns = next;
	return next;
}

/* Closes lingering connections whose time is up; returns the nearest
 * deadline of the others. */
static int64_t gw_linger_expire(struct gw_server *s)
{
	struct gw_conn *c;

	while ((c = dlist_entry(dlist_first(&s->linger), struct gw_conn, linger)) &&
	       c->linger_until_ns <= s->now_ns)
		gw_conn_close(s, c); /* unlinks it */
	return c ? c->linger_until_ns : INT64_MAX;
}

/* Closes handed connections silent for GW_HANDED_READ_TIMEOUT_NS (one
 * whose HTTP/1 answer is being computed or written starts its silence
 * again); returns when the next one's time is up. */
static int64_t gw_handed_expire(struct gw_server *s)
{
	struct gw_conn *c;

	while ((c = dlist_entry(dlist_first(&s->handed), struct gw_conn, handed)) &&
	       c->read_at_ns + GW_HANDED_READ_TIMEOUT_NS <= s->now_ns) {
		if (c->proto == GW_HTTP1 && (c->h1.waiting || http1_conn_out_len(&c->h1) > 0)) {
			gw_handed_touch(s, c);
			continue;
		}
		log_debug("closed a connection handed over from the peer port: its client sent nothing for 5 s",
			  LOG_STR("protocol", c->proto == GW_H2 ? "grpc" :
					      c->proto == GW_HTTP1 ? "http/1" : "unknown"));
		s->stats.handed_timeouts++;
		gw_conn_close(s, c); /* unlinks it */
	}
	return c ? c->read_at_ns + GW_HANDED_READ_TIMEOUT_NS : INT64_MAX;
}

/* Closes TLS connections whose handshake is not done
 * GW_TLS_HANDSHAKE_TIMEOUT_NS after they came (logged as etcd logs a
 * refused handshake); ones found done leave the list. Returns when the
 * next one's time is up. */
static int64_t gw_handshake_expire(struct gw_server *s)
{
	struct gw_conn *c;

	while ((c = dlist_entry(dlist_first(&s->handshaking), struct gw_conn, handshaking)) &&
	       c->accepted_ns + GW_TLS_HANDSHAKE_TIMEOUT_NS <= s->now_ns) {
		if (!transport_handshaking(&c->t)) {
			dlist_remove(&c->handshaking);
			continue;
		}
		transport_handshake_timed_out(&c->t, GW_TLS_HANDSHAKE_TIMEOUT_S);
		s->stats.handshake_timeouts++;
		gw_conn_close(s, c); /* unlinks it */
	}
	return c ? c->accepted_ns + GW_TLS_HANDSHAKE_TIMEOUT_NS : INT64_MAX;
}

/* Takes the connections off the flush list in order, a closed one onto
 * the dead list; returns the first one still open, NULL at the end. */
static struct gw_conn *gw_flush_take(struct gw_server *s)
{
	struct gw_conn *c;

	while ((c = dlist_entry(dlist_first(&s->flush), struct gw_conn, flush))) {
		dlist_remove(&c->flush);
		c->listed = false;
		if (!c->dead)
			return c;
		dlist_insert_head(&s->dead, &c->flush);
	}
	return NULL;
}

/* Up to how many bytes of a turn's output go in one batch; connections
 * past it are written one by one. */
#define GW_BATCH_BYTES (1u << 20)

/*
 * Sends the output of the listed plain HTTP/2 connections with one system
 * call (sendq.h), in list order; each one sent is listed again, for
 * gw_conn_flush to write what its socket did not take and to settle its
 * state. Connections with a backlog, TLS, HTTP/1 or past the batch's
 * size stay listed and are written by gw_conn_flush alone.
 */
static void gw_flush_batch(struct gw_server *s)
{
	struct sendq *q = &s->sendq;
	struct h2_ctx *ctx = NULL;
	struct gw_conn *c, *next;
	size_t off, len, total;

	if (!q->on)
		return;
	dlist_for_each_safe(c, next, &s->flush, flush) {
		if (c->dead || c->lingering || c->proto != GW_H2 || !c->h2 || !transport_is_fd(&c->t))
			continue;
		if (ctx && h2_conn_ctx(c->h2) != ctx)
			continue;
		ctx = h2_conn_ctx(c->h2);
		if (h2_conn_produce(c->h2, &off, &len) < 0 || len == 0)
			continue; /* gw_conn_flush settles it */
		if (!sendq_add(q, c, c->t.fd, off, len)) {
			/* no room: it keeps the bytes, and writes them itself */
			if (h2_conn_produced(c->h2, off, len, 0) < 0)
				continue;
			break;
		}
		dlist_remove(&c->flush);
		c->listed = false;
		h2_ctx_batch(ctx, &total);
		if (total >= GW_BATCH_BYTES)
			break;
	}
	if (!ctx)
		return;
	unsigned n = sendq_send(q, h2_ctx_batch(ctx, &total));
	for (unsigned i = 0; i < n; i++) {
		const struct sendq_ent *e = &q->ent[i];
		c = e->owner;
		if (e->res < 0 && e->res != -EAGAIN && e->res != -ENOTSOCK) {
			gw_conn_close(s, c); /* the peer is gone (-EPIPE, -ECONNRESET) */
			continue;
		}
		/* -ENOTSOCK: a pipe in a test; its own write takes it all */
		size_t sent = e->res > 0 ? (size_t)e->res : 0;
		h2_conn_produced(c->h2, e->off, e->len, sent); /* a failure: the flush closes c */
		gw_conn_list(s, c);
	}
	h2_ctx_batch_reset(ctx);
	if (!q->on && q->failed)
		log_warn("writing connections one by one from now on: io_uring refused a batch",
			 LOG_ERRNO(q->failed));
	q->failed = 0;
}

static void gw_flush_all(struct gw_server *s)
{
	struct gw_conn *c;

	gw_flush_batch(s);
	while ((c = gw_flush_take(s)))
		gw_conn_flush(s, c);
}

static void gw_free_dead(struct gw_server *s)
{
	struct gw_conn *c;

	while ((c = dlist_entry(dlist_first(&s->dead), struct gw_conn, flush))) {
		dlist_remove(&c->flush);
		free(c);
	}
}

static void gw_event(struct gw_server *s, struct gw_src *src, uint32_t events)
{
	uint64_t ticks;

	switch (src->kind) {
	case GW_SRC_LISTENER:
		gw_accept(s, (struct gw_listener *)src);
		break;
	case GW_SRC_CONN: {
		struct gw_conn *c = (struct gw_conn *)src;
		if (c->dead)
			break;
		if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) ||
		    ((events & EPOLLOUT) && c->read_blocked_on_write))
			gw_conn_readable(s, c);
		if ((events & EPOLLOUT) && !c->dead)
			gw_conn_list(s, c);
		break;
	}
	case GW_SRC_WAKER:
		s->waker_fired = true;
		s->stats.wakes++;
		break;
	case GW_SRC_TIMER:
		if (read(src->fd, &ticks, sizeof(ticks)) < 0)
			ticks = 0;
		s->timer_armed_ns = INT64_MAX; /* one-shot: it is spent */
		break;
	case GW_SRC_WATCH:
		s->watch_fired = src->fd;
		break;
	case GW_SRC_OFFLOAD:
		gw_offload_ready(s);
		break;
	}
}

/*
 * One turn of the loop. The order is what makes a turn one batch:
 *
 *  1. Wait (not at all if the last turn left work, or if the waker's
 *     re-check finds records: in ring mode the loop itself is the
 *     doorbell's sleeper, shm/waker.h), and take the time once for every
 *     deadline below.
 *  2. Events: accept, read and decode requests. Handlers answer at once,
 *     stage proposals and read-index asks for raftd, or queue point reads
 *     for step 3. A waker event only marks that the rings have records:
 *     they are read in step 5, with everything else that arrived.
 *  3. kv_turn: the point reads that step 2 queued, answered from one read
 *     transaction (one root, one reader slot, prefetched together);
 *     kv_jobs_turn: a bounded step of each streamed Range (kv_jobs_flushed,
 *     after step 8, keeps the loop awake while one has room for more); then
 *     maint_turn: a bounded step of a running Hash or HashKV; snapshot_turn:
 *     a bounded step of each Snapshot stream (snapshot_flushed, after step
 *     8, keeps the loop awake while one has room for more).
 *  4. Retries whose time came: the attach hello, paused listeners.
 *  5. gw_rings_turn: results and read indexes from raftd and stored, reads
 *     whose applied index is there, request timeouts. After step 2, so
 *     that a record answering a call of this turn is seen in this turn.
 *     Then conc_turn: locks and elections that wait recheck the store
 *     if stored published a new revision.
 *  6. Expiries: gRPC deadlines, the look for a leader of the streams
 *     that require one (noleader.h), lingering connections, handed
 *     connections whose client fell silent, TLS handshakes not done in
 *     time.
 *  7. gw_rings_publish: everything staged in steps 2-6 goes to raftd with
 *     one publish and at most one wake-up; the backlog first, in order.
 *  8. gw_flush_all: every connection that got output in steps 2-6, the
 *     plain HTTP/2 ones all in one system call (sendq.h), the others one
 *     writev each. After every step that answers, so that each socket is
 *     written once per turn.
 *  9. In thread mode the waker's thread may sleep again: the rings were
 *     drained in step 5, so a record that lands from now on rings it
 *     afresh (shm/waker.h).
 * 10. The turn is over: connections closed during it are freed (steps 2-8
 *     may still have touched them), and its scratch (gw_scratch) is reset.
 *     A loop quiet for a second gives its freed pages back (base/mem/mem.h).
 * 11. The timer is armed at the nearest deadline any step left.
 *
 * Returns the descriptor of a watched source that fired (gw_server_watch),
 * or -1.
 */
int gw_server_turn(struct gw_server *s, int timeout_ms)
{
	struct epoll_event evs[64];
	int n;

	if (s->more_work)
		timeout_ms = 0;
	timeout_ms = shm_waker_prepare(&s->waker, timeout_ms);
	s->more_work = false;
	s->watch_fired = -1;
	n = epoll_wait(s->epfd, evs, 64, timeout_ms);
	if (n < 0) {
		/* EINTR: a signal, or in ring mode the doorbell's wake */
		if (errno != EINTR)
			log_error("epoll_wait failed", LOG_ERRNO(-errno));
		else if (s->waker.ring_live)
			s->stats.wakes++;
		n = 0;
	}
	shm_waker_done(&s->waker);
	s->now_ns = clock_now_ns();
	s->stats.turns++;
	gw_auth_turn(s);

	for (int i = 0; i < n; i++)                 /* 2 */
		gw_event(s, evs[i].data.ptr, evs[i].events);
	jsongw_turn(s->jsongw);
	kv_turn(s);                                 /* 3 */
	kv_jobs_turn(s);
	maint_turn(s);
	snapshot_turn(s);
	watch_turn(s);
	if (s->hello_retry_ns <= s->now_ns)         /* 4 */
		gw_server_hello(s);
	if (s->accept_resume_ns <= s->now_ns)
		gw_listeners_resume(s);
	gw_rings_turn(s);                           /* 5 */
	conc_turn(s);
	shm_metric_set(s->metrics, SHM_M_PROPOSALS_PENDING, s->pending.proposals);
	shm_metric_add(s->metrics, SHM_M_LOOP_TURNS, 1);
	grpc_server_expire(s->grpc);                /* 6 */
	int64_t noleader = gw_noleader_turn(s);
	int64_t linger = gw_min(gw_linger_expire(s), gw_handed_expire(s));
	linger = gw_min(linger, gw_keepalive_expire(s));
	linger = gw_min(linger, gw_handshake_expire(s));
	gw_rings_publish(s);                        /* 7 */
	if (jsongw_turn(s->jsongw))                 /* 8 */
		s->more_work = true;
	gw_flush_all(s);
	snapshot_flushed(s);
	kv_jobs_flushed(s);
	watch_flushed(s);
	if (s->waker_fired) {                       /* 9 */
		s->waker_fired = false;
		shm_waker_drained(&s->waker);
	}
	gw_free_dead(s);                            /* 10 */
	gw_arena_reset(s->arena, false);
	int64_t mem_next = mem_idle_turn(&s->mem, s->now_ns);
	/* the slot's rings, quiet for a second, give their pages back */
	mem_next = gw_min(mem_next, shm_slot_trim(s->r, s->slot.index, s->now_ns));

	int64_t next = gw_min(grpc_server_next_deadline_ns(s->grpc), gw_rings_next_deadline(s));
	next = gw_min(next, gw_min(linger, s->hello_retry_ns));
	next = gw_min(next, gw_min(watch_next_deadline(s), mem_next));
	next = gw_min(next, noleader);
	gw_timer_arm(s, gw_min(next, s->accept_resume_ns)); /* 11 */
	return s->watch_fired;
}

int gw_server_run(struct gw_server *s)
{
	struct config_watchdog wd;

	config_watchdog_init(&wd, clock_now_ns());
	for (;;) {
		/* systemd's watchdog is fed here, by the loop itself */
		int fd = gw_server_turn(s, config_watchdog_turn(&wd, clock_now_ns()));
		if (fd >= 0)
			return fd;
	}
}

static void gw_close_listeners(struct gw_server *s)
{
	while (s->listeners) {
		struct gw_listener *l = s->listeners;
		s->listeners = l->next;
		close(l->src.fd); /* also leaves the epoll set */
		free(l);
	}
}

void gw_server_drain(struct gw_server *s, int drain_ms)
{
	struct gw_conn *c, *n;
	int64_t deadline;

	s->draining = true;
	gw_close_listeners(s);
	gw_rings_stop(s);
	dlist_for_each_safe(c, n, &s->conns, node) {
		if (c->proto == GW_H2)
			h2_conn_shutdown(c->h2);
		else if (c->proto == GW_HTTP1)
			c->h1.closing = true;
		else
			gw_conn_close(s, c);
		if (!c->dead)
			gw_conn_list(s, c);
	}
	gw_flush_all(s);
	gw_free_dead(s);
	deadline = clock_now_ns() + (int64_t)drain_ms * 1000000;
	while (!dlist_empty(&s->conns)) {
		int64_t left = deadline - clock_now_ns();
		if (left <= 0)
			break;
		gw_server_turn(s, (int)(left / 1000000) + 1);
	}
	while ((c = dlist_entry(dlist_first(&s->conns), struct gw_conn, node)))
		gw_conn_close(s, c);
	gw_free_dead(s);
}

/* ---- life cycle ---- */

int gw_server_new(struct shm_region *r, const struct shm_slot_ref *slot,
		  const struct gw_params *p, struct gw_server **out)
{
	struct grpc_server_config gc;
	struct gw_server *s;
	int rc;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	dlist_init(&s->conns);
	dlist_init(&s->flush);
	dlist_init(&s->dead);
	dlist_init(&s->linger);
	dlist_init(&s->handed);
	dlist_init(&s->handshaking);
	s->r = r;
	s->slot = *slot;
	s->cfg = p->cfg;
	s->auth_tokens = p->auth_tokens;
	s->member_id = p->member_id;
	s->cluster_id = p->cluster_id;
	s->max_request_bytes = p->cfg->max_request_bytes;
	s->max_txn_ops = p->cfg->max_txn_ops;
	s->request_timeout_ns = p->request_timeout_ns ? p->request_timeout_ns :
				(int64_t)config_request_timeout_ms(p->cfg) * 1000000;
	s->epfd = s->timerfd = -1;
	s->timer_armed_ns = INT64_MAX;
	s->keepalive_next_ns = INT64_MAX;
	s->accept_resume_ns = INT64_MAX;
	s->hello_retry_ns = INT64_MAX;
	s->watch_fired = -1;
	s->now_ns = clock_now_ns();
	mem_idle_init(&s->mem); /* the loop runs on this thread */
	s->waker.efd = -1;
	if (p->db_path)
		s->db_path = strdup(p->db_path);
	else if (asprintf(&s->db_path, "%s/member/snap/db", p->cfg->data_dir) < 0)
		s->db_path = NULL;
	s->arena = calloc(1, sizeof(*s->arena));
	if (!s->db_path || !s->arena) {
		rc = -ENOMEM;
		goto out_free;
	}
	s->pb = (ProtobufCAllocator){ .alloc = gw_pb_alloc_fn, .free = gw_pb_free_fn,
				      .allocator_data = s };
	s->access = (struct http1_access){ .cors = &p->cfg->cors, .hosts = &p->cfg->host_whitelist };
	s->http1 = (struct http1_ops){ .serve = gw_http1_serve, .access = &s->access, .arg = s };
	s->http1_local = (struct http1_ops){ .serve = gw_http1_serve, .hashkv = gw_http1_hashkv,
					     .lease = gw_http1_lease, .arg = s };
	s->http1_metrics = (struct http1_ops){ .serve = gw_http1_serve, .serve_only = true,
					       .arg = s };

	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s->epfd < 0 || s->timerfd < 0) {
		rc = -errno;
		goto out_free;
	}
	/* Batched writes unless CETCD_SENDQ=off; without io_uring, each
	 * connection is written by itself. */
	const char *sq = getenv("CETCD_SENDQ");
	if (!(sq && strcmp(sq, "off") == 0)) {
		rc = sendq_init(&s->sendq);
		if (rc)
			log_info("writing each connection by itself: no io_uring", LOG_ERRNO(rc));
	}
	s->timer_src = (struct gw_src){ .kind = GW_SRC_TIMER, .fd = s->timerfd };
	rc = gw_epoll(s, EPOLL_CTL_ADD, &s->timer_src, EPOLLIN);
	if (rc)
		goto out_free;

	grpc_server_config_default(&gc, s->max_request_bytes);
	gc.h2.max_concurrent_streams = p->cfg->max_concurrent_streams;
	gw_keepalive_config(p->cfg, &gc.h2);
	rc = grpc_server_new(&gc, &s->grpc);
	if (rc)
		goto out_free;

	if (p->cfg->enable_grpc_gateway) {
		rc = jsongw_new(s, &s->jsongw);
		if (rc)
			goto out_free;
		s->http1.gateway = gw_http1_gateway;
		/* a request of --max-request-bytes as JSON: base64 and names */
		s->http1.gateway_max_body = 2 * (size_t)s->max_request_bytes + (64u << 10);
	}

	rc = gw_rings_init(s, p->pending_cap ? p->pending_cap : GW_DEFAULT_PENDING,
			   p->backlog_bytes ? p->backlog_bytes : GW_DEFAULT_BACKLOG_BYTES);
	if (rc)
		goto out_free;
	s->waker_src = (struct gw_src){ .kind = GW_SRC_WAKER, .fd = shm_waker_fd(&s->waker) };
	rc = gw_epoll(s, EPOLL_CTL_ADD, &s->waker_src, EPOLLIN);
	if (rc)
		goto out_free;

	s->metrics = shm_metrics_block(r, SHM_METRICS_GATEWAY + slot->index);
	grpc_server_set_metrics(s->grpc, s->metrics, metrics_grpc_index,
				strcmp(p->cfg->metrics, "extensive") == 0);
	gw_noleader_init(s);
	rc = kv_register(s);
	if (!rc)
		rc = maint_register(s);
	if (!rc)
		rc = cluster_register(s);
	if (!rc)
		rc = alarm_register(s);
	if (!rc)
		rc = lease_register(s);
	if (!rc)
		rc = watch_register(s);
	if (!rc)
		rc = conc_register(s);
	if (!rc)
		rc = gw_offload_init(s, GW_SRC_OFFLOAD);
	if (!rc)
		rc = gw_epoll(s, EPOLL_CTL_ADD, gw_offload_src(s), EPOLLIN);
	if (!rc)
		rc = auth_service_register(s);
	if (!rc)
		rc = authn_register(s);
	if (rc)
		goto out_free;
	*out = s;
	return 0;

out_free:
	gw_server_free(s);
	return rc;
}

void gw_server_free(struct gw_server *s)
{
	struct gw_conn *c;

	if (!s)
		return;
	gw_rings_stop(s);
	while (gw_flush_take(s))
		; /* unlisted, a closed one goes on the dead list */
	while ((c = dlist_entry(dlist_first(&s->conns), struct gw_conn, node)))
		gw_conn_close(s, c);
	gw_free_dead(s);
	gw_close_listeners(s);
	tls_ctx_free(s->tls); /* after the connections made from it */
	while (s->watches) {
		struct gw_watch *w = s->watches;
		s->watches = w->next;
		free(w);
	}
	jsongw_free(s->jsongw); /* its connection before the gRPC server */
	conc_free(s);
	gw_offload_fini(s);
	gw_auth_fini(s);
	gw_rings_fini(s);
	watch_free(s);
	if (s->grpc)
		grpc_server_free(s->grpc);
	while (s->methods) {
		struct gw_method *m = s->methods;
		s->methods = m->next;
		free(m);
	}
	kv_fini(s);
	gw_db_close(s);
	if (s->arena) {
		gw_arena_reset(s->arena, true);
		free(s->arena);
	}
	sendq_fini(&s->sendq);
	if (s->timerfd >= 0)
		close(s->timerfd);
	if (s->epfd >= 0)
		close(s->epfd);
	free(s->db_path);
	free(s);
}
