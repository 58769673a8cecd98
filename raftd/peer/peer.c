/*
 * The peer transport's API and what drives it (see peer.h and
 * peer_int.h): what raftd's loop thread queues, what the transport hands
 * back, the members, and the turns (peer_poll, peer_run) that drive every
 * connection, on the loop thread or on a thread of the transport's own.
 */
#include "raftd/peer/peer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/msgframe.h"
#include "raftd/peer/peer_int.h"
#include "raftd/raft/raft.h"
#include "config/config.h"
#include "base/log/log.h"

static void peer_id_str(uint64_t id, char out[17])
{
	snprintf(out, 17, "%" PRIx64, id);
}

/* ---- queues ---- */

void peer_queue_push(struct peer_queue *q, struct peer_qmsg *m)
{
	m->next = NULL;
	if (!q->tail)
		q->tail = &q->head;
	*q->tail = m;
	q->tail = &m->next;
	q->n++;
	q->bytes += m->len;
}

void peer_queue_free(struct peer_queue *q)
{
	struct peer_qmsg *m = q->head;

	while (m) {
		struct peer_qmsg *next = m->next;
		raftd_free(m);
		m = next;
	}
	q->head = NULL;
	q->tail = &q->head;
	q->n = 0;
	q->bytes = 0;
}

/* ---- events ---- */

/* The transport this thread drives (its own thread, or the loop thread
 * that calls peer_poll and peer_run), NULL on other threads: events it
 * queues are signaled once per run (peer_run), so that a burst of
 * messages costs the loop one wake-up. */
static _Thread_local struct peer *peer_thread_of;

/* Makes event_fd readable for the events queued; under mu. */
static void peer_signal_events_locked(struct peer *p)
{
	const uint64_t one = 1;

	if (p->ev_signaled || !p->n_events)
		return;
	p->ev_signaled = true;
	if (write(p->event_fd, &one, sizeof(one)) < 0)
		log_warn("cannot signal the peer event fd", LOG_ERRNO(-errno));
}

/* Signals what the transport thread queued during its run. */
static void peer_publish_events(struct peer *p)
{
	if (!p->ev_unsignaled)
		return;
	p->ev_unsignaled = false;
	pthread_mutex_lock(&p->mu);
	peer_signal_events_locked(p);
	pthread_mutex_unlock(&p->mu);
}

void peer_emit_locked(struct peer *p, struct peer_event *ev)
{
	struct peer_evnode *n;

	if (ev->kind == PEER_EV_MESSAGE && p->n_events >= PEER_EVENTS_MAX) {
		char from[17];
		peer_id_str(ev->msg.from, from);
		log_warn("dropped internal Raft message since receiving buffer is full (overloaded network)",
			 LOG_I64("message-type", ev->msg.type), LOG_STR("local-member-id", p->self_str),
			 LOG_STR("from", from));
		peer_event_release(ev);
		return;
	}
	n = raftd_malloc(sizeof(*n));
	if (!n) {
		log_warn("dropped a peer event: out of memory", LOG_I64("kind", ev->kind));
		peer_event_release(ev);
		return;
	}
	n->next = NULL;
	n->ev = *ev;
	memset(ev, 0, sizeof(*ev));
	*p->ev_tail = n;
	p->ev_tail = &n->next;
	p->n_events++;
	if (peer_thread_of == p) {
		p->ev_unsignaled = true;
		p->run_due = true;
	} else {
		peer_signal_events_locked(p);
	}
}

void peer_emit(struct peer *p, struct peer_event *ev)
{
	pthread_mutex_lock(&p->mu);
	peer_emit_locked(p, ev);
	pthread_mutex_unlock(&p->mu);
}

void peer_emit_simple(struct peer *p, enum peer_event_kind kind, uint64_t id, bool ok)
{
	struct peer_event ev = { .kind = kind, .id = id, .ok = ok };
	peer_emit(p, &ev);
}

int peer_recv(struct peer *p, struct peer_event *ev)
{
	struct peer_evnode *n;
	uint64_t v;

	/* the whole queue is taken at once: one lock and one read of
	 * event_fd for a burst */
	if (!p->taken) {
		pthread_mutex_lock(&p->mu);
		p->taken = p->ev_head;
		p->ev_head = NULL;
		p->ev_tail = &p->ev_head;
		p->n_events = 0;
		if (p->ev_signaled) {
			p->ev_signaled = false;
			if (read(p->event_fd, &v, sizeof(v)) < 0)
				log_warn("cannot clear the peer event fd", LOG_ERRNO(-errno));
		}
		pthread_mutex_unlock(&p->mu);
		if (!p->taken)
			return -EAGAIN;
	}
	n = p->taken;
	p->taken = n->next;
	*ev = n->ev;
	raftd_free(n);
	return 0;
}

bool peer_has_events(const struct peer *p)
{
	return p->taken != NULL;
}

void peer_event_release(struct peer_event *ev)
{
	raftmsg_release(&ev->msg);
	raftd_free(ev->buf);
	if (ev->snap_db_path) {
		/* a db file nobody took is removed */
		unlink(ev->snap_db_path);
		raftd_free(ev->snap_db_path);
	}
	memset(ev, 0, sizeof(*ev));
}

int peer_event_fd(const struct peer *p)
{
	return p->event_fd;
}

/* ---- members ---- */

struct peer_remote *peer_remote_find(struct peer *p, uint64_t id)
{
	for (struct peer_remote *r = p->remotes; r; r = r->next)
		if (r->id == id && !r->gone)
			return r;
	return NULL;
}

bool peer_is_removed(struct peer *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_removed; i++)
		if (p->removed[i] == id)
			return true;
	return false;
}

static void peer_strv_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		raftd_free(v[i]);
	raftd_free(v);
}

static char *peer_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = raftd_malloc(n);

	if (d)
		memcpy(d, s, n);
	return d;
}

static char **peer_strv_dup(const char *const *v, size_t n)
{
	char **d = raftd_calloc(n ? n : 1, sizeof(*d));

	if (!d)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		d[i] = peer_strdup(v[i]);
		if (!d[i]) {
			peer_strv_free(d, i);
			return NULL;
		}
	}
	return d;
}

void peer_eventfd_wake(int fd, bool *pending, const char *what)
{
	const uint64_t one = 1;

	if (*pending)
		return;
	*pending = true;
	if (write(fd, &one, sizeof(one)) < 0)
		log_warn("cannot wake a peer thread", LOG_STR("thread", what), LOG_ERRNO(-errno));
}

void peer_wake_locked(struct peer *p)
{
	/* on the thread that drives it, the transport's next run is enough */
	if (peer_thread_of == p)
		p->run_due = true;
	else
		peer_eventfd_wake(p->wake_fd, &p->wake_pending, "peer transport");
}

static void peer_remote_free(struct peer_remote *r)
{
	for (int s = 0; s < PEER_N_STREAMS; s++)
		peer_queue_free(&r->wq[s]);
	peer_queue_free(&r->pipeq);
	peer_strv_free(r->urls, r->n_urls);
	raftd_free(r);
}

int peer_set_members(struct peer *p, const struct peer_member *v, size_t n,
		     const uint64_t *removed, size_t n_removed)
{
	struct peer_remote *fresh = NULL;
	char ***urls = raftd_calloc(n ? n : 1, sizeof(*urls));
	uint64_t *rm = raftd_calloc(n_removed ? n_removed : 1, sizeof(*rm));
	int rc = -ENOMEM;

	if (!urls || !rm)
		goto out_free;
	if (n_removed)
		memcpy(rm, removed, n_removed * sizeof(*rm));
	/* everything that allocates is made before the lock is taken */
	for (size_t i = 0; i < n; i++) {
		urls[i] = peer_strv_dup(v[i].urls, v[i].n_urls);
		if (!urls[i])
			goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		struct peer_remote *r = raftd_calloc(1, sizeof(*r));
		if (!r)
			goto out_free;
		r->id = v[i].id;
		peer_id_str(r->id, r->idstr);
		for (int s = 0; s < PEER_N_STREAMS; s++)
			r->wq[s].tail = &r->wq[s].head;
		r->pipeq.tail = &r->pipeq.head;
		msgappv2_encoder_init(&r->enc);
		r->next = fresh;
		fresh = r;
	}

	pthread_mutex_lock(&p->mu);
	for (struct peer_remote *r = p->remotes; r; r = r->next) {
		bool keep = false;
		for (size_t i = 0; i < n && !keep; i++)
			keep = v[i].id == r->id && v[i].id != p->self_id;
		if (!r->gone && !keep)
			r->gone = true;
	}
	for (size_t i = 0; i < n; i++) {
		struct peer_remote *r, **fp;
		if (v[i].id == p->self_id)
			continue;
		r = peer_remote_find(p, v[i].id);
		if (r) {
			/* etcd's peer.update: the URLs change, the streams stay */
			peer_strv_free(r->urls, r->n_urls);
		} else {
			for (fp = &fresh; (*fp)->id != v[i].id; fp = &(*fp)->next)
				;
			r = *fp;
			*fp = r->next;
			r->next = p->remotes;
			p->remotes = r;
			log_info("added remote peer", LOG_STR("local-member-id", p->self_str),
				 LOG_STR("remote-peer-id", r->idstr));
		}
		r->urls = urls[i];
		r->n_urls = v[i].n_urls;
		urls[i] = NULL;
	}
	raftd_free(p->removed);
	p->removed = rm;
	p->n_removed = n_removed;
	rm = NULL;
	peer_wake_locked(p);
	pthread_mutex_unlock(&p->mu);
	rc = 0;

out_free:
	while (fresh) {
		struct peer_remote *r = fresh;
		fresh = r->next;
		peer_remote_free(r);
	}
	for (size_t i = 0; urls && i < n; i++)
		if (urls[i])
			peer_strv_free(urls[i], v[i].n_urls);
	raftd_free(urls);
	raftd_free(rm);
	return rc;
}

int peer_set_members_json(struct peer *p, const char *json, size_t len)
{
	char *copy = raftd_malloc(len + 1);

	if (!copy)
		return -ENOMEM;
	memcpy(copy, json, len);
	copy[len] = '\0';
	pthread_mutex_lock(&p->mu);
	raftd_free(p->members_json);
	p->members_json = copy;
	p->members_json_len = len;
	pthread_mutex_unlock(&p->mu);
	return 0;
}

int peer_set_cluster_version(struct peer *p, const char *version)
{
	if (strlen(version) >= sizeof(p->cluster_version))
		return -EINVAL;
	pthread_mutex_lock(&p->mu);
	strcpy(p->cluster_version, version);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

uint64_t peer_active_since(struct peer *p, uint64_t id)
{
	uint64_t since = 0;

	pthread_mutex_lock(&p->mu);
	struct peer_remote *r = peer_remote_find(p, id);
	if (r && r->active)
		since = r->active_since_ns;
	pthread_mutex_unlock(&p->mu);
	return since;
}

void peer_status_activate(struct peer *p, struct peer_remote *r)
{
	bool was;

	pthread_mutex_lock(&p->mu);
	was = r->active;
	if (!was) {
		r->active = true;
		r->active_since_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&p->mu);
	if (!was)
		log_info("peer became active", LOG_STR("peer-id", r->idstr));
}

void peer_status_deactivate(struct peer *p, struct peer_remote *r, const char *source,
			    const char *action, const char *reason)
{
	char msg[256];
	bool was;

	pthread_mutex_lock(&p->mu);
	was = r->active;
	r->active = false;
	r->active_since_ns = 0;
	pthread_mutex_unlock(&p->mu);
	snprintf(msg, sizeof(msg), "failed to %s %s on %s (%s)", action, r->idstr, source, reason);
	if (was)
		log_warn("peer became inactive (message send to peer failed)",
			 LOG_STR("peer-id", r->idstr), LOG_STR("error", msg));
	else
		log_debug("peer deactivated again", LOG_STR("peer-id", r->idstr),
			  LOG_STR("error", msg));
}

/* ---- sending ---- */

/* Drops m for r (a full queue): etcd's warning and ReportUnreachable. */
static void peer_drop_locked(struct peer *p, struct peer_remote *r, const struct raftmsg *m)
{
	struct peer_event ev = { .kind = PEER_EV_UNREACHABLE, .id = m->to };

	log_warn("dropped internal Raft message since sending buffer is full (overloaded network)",
		 LOG_I64("message-type", m->type), LOG_STR("local-member-id", p->self_str),
		 LOG_STR("remote-peer-id", r->idstr), LOG_BOOL("remote-peer-active", r->active));
	peer_emit_locked(p, &ev);
	if (m->type == RAFT_MSG_SNAP) {
		struct peer_event done = { .kind = PEER_EV_SNAPSHOT_DONE, .id = m->to };
		peer_emit_locked(p, &done);
	}
}

static struct peer_qmsg *peer_qmsg_new(const struct raftmsg *m, size_t len)
{
	struct peer_qmsg *q = raftd_malloc(sizeof(*q) + len);

	if (q) {
		q->type = m->type;
		q->to = m->to;
		q->len = len;
	}
	return q;
}

/* Whether a stream queue is too full to take len more bytes. */
static bool peer_stream_full(const struct peer *p, const struct peer_queue *q, size_t len)
{
	return q->n >= p->queue_msgs || (q->n && q->bytes + len > p->queue_bytes);
}

int peer_send(struct peer *p, const struct raftmsg *m)
{
	struct peer_remote *r;
	struct peer_queue *q;
	struct peer_qmsg *qm;
	size_t len;
	int rc = 0;

	if (m->to == 0)
		return 0; /* etcd's Send: a message dropped on purpose */
	pthread_mutex_lock(&p->mu);
	r = peer_remote_find(p, m->to);
	if (!r) {
		rc = -ENOENT;
		goto out_unlock;
	}
	/* etcd's peer.pick: MsgApp on the msgapp stream, the rest on the
	 * message stream, and the pipeline while a stream is down (and for
	 * MsgSnap, which would hold a stream for long) */
	if (m->type == RAFT_MSG_APP && r->working[PEER_STREAM_MSGAPP]) {
		q = &r->wq[PEER_STREAM_MSGAPP];
		/* (the size first: a message dropped must not move the
		 * encoder's state) */
		len = msgappv2_encoded_size(&r->enc, m);
		if (peer_stream_full(p, q, len))
			goto out_drop;
		qm = peer_qmsg_new(m, len);
		if (!qm)
			goto out_nomem;
		msgappv2_encode(&r->enc, m, qm->data);
	} else if (m->type != RAFT_MSG_SNAP && r->working[PEER_STREAM_MESSAGE]) {
		q = &r->wq[PEER_STREAM_MESSAGE];
		len = msgframe_size(m);
		if (peer_stream_full(p, q, len))
			goto out_drop;
		qm = peer_qmsg_new(m, len);
		if (!qm)
			goto out_nomem;
		msgframe_encode(m, qm->data);
	} else {
		q = &r->pipeq;
		if (q->n >= PEER_PIPELINE_QUEUE)
			goto out_drop;
		qm = peer_qmsg_new(m, raftmsg_size(m));
		if (!qm)
			goto out_nomem;
		raftmsg_encode(m, qm->data);
	}
	peer_queue_push(q, qm);
	peer_wake_locked(p);
	goto out_unlock;

out_nomem:
	rc = -ENOMEM;
	goto out_unlock;
out_drop:
	peer_drop_locked(p, r, m);
out_unlock:
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* ---- listeners ---- */

static int peer_listen(struct peer *p, const struct config_urls *urls)
{
	if (urls->count > sizeof(p->lfds) / sizeof(p->lfds[0])) {
		log_error("too many peer URLs to listen on", LOG_U64("count", urls->count));
		return -E2BIG;
	}
	for (size_t i = 0; i < urls->count; i++) {
		const struct config_url *u = &urls->v[i];
		bool unix_socket = config_url_is_unix(u);
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int rc, fd = -1;

		p->ltls[i] = !strcmp(u->scheme, "https") || !strcmp(u->scheme, "unixs");
		if (p->ltls[i] && !p->server_tls) {
			log_error("cannot listen for peers: a TLS URL without peer TLS",
				  LOG_STR("address", u->text));
			return -EINVAL;
		}
		/* TCP, or etcd's unix listener: the socket file is the URL's
		 * host:port (a stale one is replaced) */
		struct config_error err;
		rc = config_listen_url(u, false, &fd, &err);
		if (rc) {
			log_error("cannot listen for peers", LOG_STR("address", u->text),
				  LOG_STR("reason", err.msg));
			return rc;
		}
		p->lfds[p->n_listeners++] = fd;
		if (!unix_socket && getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			p->lports[i] = ntohs(ss.ss_family == AF_INET6 ?
						     ((struct sockaddr_in6 *)&ss)->sin6_port :
						     ((struct sockaddr_in *)&ss)->sin_port);
		log_info("listening for peers", LOG_STR("address", u->text));
	}
	return 0;
}

uint16_t peer_listen_port(const struct peer *p, size_t i)
{
	return i < p->n_listeners ? p->lports[i] : 0;
}

/* ---- driving the transport ---- */

/* Takes the remotes peer_set_members dropped out of the list and frees
 * them with what they had in flight. */
static void peer_reap_remotes(struct peer *p)
{
	struct peer_remote *gone = NULL, **rp;

	pthread_mutex_lock(&p->mu);
	for (rp = &p->remotes; *rp;) {
		struct peer_remote *r = *rp;
		if (r->gone) {
			*rp = r->next;
			r->next = gone;
			gone = r;
		} else {
			rp = &r->next;
		}
	}
	pthread_mutex_unlock(&p->mu);
	while (gone) {
		struct peer_remote *r = gone;
		gone = r->next;
		peer_client_drop(p, r);
		log_info("removed remote peer", LOG_STR("local-member-id", p->self_str),
			 LOG_STR("remote-peer-id", r->idstr));
		peer_remote_free(r);
	}
}

/* One turn of work besides socket events; returns when the next is due
 * (0: none). */
static uint64_t peer_turn(struct peer *p, uint64_t now)
{
	uint64_t next = 0, v;
	struct peer_remote *head;
	bool synced;

	pthread_mutex_lock(&p->mu);
	if (p->wake_pending) {
		p->wake_pending = false;
		if (read(p->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			log_warn("cannot read the peer wake fd", LOG_ERRNO(-errno));
	}
	synced = p->snap_synced;
	p->snap_synced = false;
	pthread_mutex_unlock(&p->mu);
	if (synced)
		peer_serve_snap_synced(p);
	peer_reap_remotes(p);
	peer_snap_start_all(p);
	peer_promote_flush(p);
	/* remotes are only unlinked by the driving thread and only added at
	 * the head, so the list from this head on stays valid without the
	 * lock */
	pthread_mutex_lock(&p->mu);
	head = p->remotes;
	pthread_mutex_unlock(&p->mu);
	for (struct peer_remote *r = head; r; r = r->next) {
		uint64_t t = peer_client_tick(p, r, now);
		if (t && (!next || t < next))
			next = t;
	}
	v = peer_accept_resume(p, now);
	if (v && (!next || v < next))
		next = v;
	for (struct peer_conn *c = p->conns; c; c = c->next) {
		if (c->state == PEER_ST_CLOSED || !c->deadline_ns)
			continue;
		if (c->deadline_ns <= now) {
			/* one that never sent a whole request is anyone's
			 * (a port scan, a slow or hostile client): etcd's
			 * peer server does not log those */
			if (c->kind == PEER_CONN_SERVER &&
			    (c->state == PEER_ST_REQUEST || c->state == PEER_ST_HANDSHAKE))
				log_debug("closed a peer-port connection that sent no whole request in time",
					  LOG_STR("local-member-id", p->self_str),
					  LOG_STR("remote-addr", c->addr), LOG_I64("state", c->state));
			else
				log_warn("closed a peer connection that made no progress (i/o timeout)",
					 LOG_STR("local-member-id", p->self_str),
					 LOG_STR("remote-addr", c->addr), LOG_I64("state", c->state));
			peer_conn_close(c);
			continue;
		}
		if (!next || c->deadline_ns < next)
			next = c->deadline_ns;
	}
	return next;
}

/* Waits up to timeout_ms for socket events and wake-ups and handles
 * them; a run is due after them. 0, or the -errno of epoll_wait (logged). */
static int peer_poll_wait(struct peer *p, int timeout_ms)
{
	struct epoll_event evs[64];
	int n;

	n = epoll_wait(p->epfd, evs, 64, timeout_ms);
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		log_error("peer transport: epoll_wait failed", LOG_ERRNO(-errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		void *ptr = evs[i].data.ptr;
		if (ptr == &p->wake_fd)
			continue; /* peer_turn reads it */
		if (ptr >= (void *)&p->lfds[0] && ptr < (void *)&p->lfds[p->n_listeners]) {
			peer_conn_accept(p, (size_t)((int *)ptr - p->lfds));
			continue;
		}
		peer_conn_io(ptr, evs[i].events);
	}
	peer_conn_reap(p);
	p->run_due = true;
	return 0;
}

int peer_poll_fd(const struct peer *p)
{
	return p->epfd;
}

void peer_poll(struct peer *p)
{
	peer_thread_of = p;
	(void)peer_poll_wait(p, 0); /* a failure is logged; the next turn polls again */
}

int peer_run(struct peer *p)
{
	uint64_t now = clock_now_ns();

	peer_thread_of = p;
	if (p->run_due || (p->next_run_ns && p->next_run_ns <= now)) {
		/* cleared first: what the turn asks for itself is run next */
		p->run_due = false;
		p->next_run_ns = peer_turn(p, now);
		peer_conn_reap(p);
		peer_publish_events(p);
		now = clock_now_ns();
	}
	if (p->run_due)
		return 0;
	if (!p->next_run_ns)
		return -1;
	return p->next_run_ns <= now ? 0 : (int)((p->next_run_ns - now + 999999) / 1000000);
}

/* The transport's own thread (without peer_opts.driven): runs and polls
 * in turn, as a loop thread that drives it does. */
static void *peer_main(void *arg)
{
	struct peer *p = arg;

	peer_thread_of = p;
	for (;;) {
		int timeout_ms;
		bool stop;

		pthread_mutex_lock(&p->mu);
		stop = p->stop;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			break;
		timeout_ms = peer_run(p);
		if (timeout_ms < 0 || timeout_ms > 1000)
			timeout_ms = 1000;
		if (peer_poll_wait(p, timeout_ms))
			break;
	}
	peer_publish_events(p);
	return NULL;
}

static int peer_urls_header(struct peer *p, const struct peer_opts *o)
{
	size_t n = 1;

	for (size_t i = 0; i < o->n_self_urls; i++)
		n += strlen(o->self_urls[i]) + 1;
	p->peer_urls_hdr = raftd_malloc(n);
	if (!p->peer_urls_hdr)
		return -ENOMEM;
	p->peer_urls_hdr[0] = '\0';
	for (size_t i = 0; i < o->n_self_urls; i++) {
		if (i)
			strcat(p->peer_urls_hdr, ",");
		strcat(p->peer_urls_hdr, o->self_urls[i]);
	}
	return 0;
}

int peer_start(const struct peer_opts *o, struct peer **out)
{
	struct peer *p = raftd_calloc(1, sizeof(*p));
	struct epoll_event ev = { .events = EPOLLIN };
	int rc;

	if (!p)
		return -ENOMEM;
	p->self_id = o->self_id;
	p->cluster_id = o->cluster_id;
	peer_id_str(o->self_id, p->self_str);
	peer_id_str(o->cluster_id, p->cid_str);
	snprintf(p->server_version, sizeof(p->server_version), "%s",
		 o->server_version ? o->server_version : "3.4.0");
	snprintf(p->min_cluster_version, sizeof(p->min_cluster_version), "%s",
		 o->min_cluster_version ? o->min_cluster_version : "3.0.0");
	strcpy(p->cluster_version, "not_decided");
	if (o->snap_dir)
		snprintf(p->snap_dir, sizeof(p->snap_dir), "%s", o->snap_dir);
	p->server_tls = o->server_tls;
	p->client_tls = o->client_tls;
	p->queue_msgs = o->queue_msgs ? o->queue_msgs : PEER_STREAM_QUEUE;
	p->queue_bytes = o->queue_bytes ? o->queue_bytes : PEER_STREAM_QUEUE_BYTES;
	p->epfd = p->wake_fd = p->event_fd = -1;
	p->ev_tail = &p->ev_head;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->snap_synced_cond, NULL);
	rc = peer_urls_header(p, o);
	if (!rc)
		rc = peer_grpc_init(p, o->data_dir, o->gateways);
	if (rc)
		goto out_free;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	p->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (p->epfd < 0 || p->wake_fd < 0 || p->event_fd < 0) {
		rc = -errno;
		goto out_free;
	}
	ev.data.ptr = &p->wake_fd;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->wake_fd, &ev) < 0) {
		rc = -errno;
		goto out_free;
	}
	if (o->listen && (rc = peer_listen(p, o->listen)))
		goto out_free;
	for (size_t i = 0; i < p->n_listeners; i++) {
		ev.data.ptr = &p->lfds[i];
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, p->lfds[i], &ev) < 0) {
			rc = -errno;
			goto out_free;
		}
	}
	if (o->driven) {
		*out = p;
		return 0;
	}
	rc = shm_thread_start(&p->thread, false, peer_main, p);
	if (rc)
		goto out_free;
	p->running = true;
	*out = p;
	return 0;

out_free:
	peer_stop(p);
	return rc;
}

void peer_stop(struct peer *p)
{
	struct peer_remote *r;
	struct peer_evnode *n;

	if (!p)
		return;
	if (p->running) {
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		p->wake_pending = false;
		peer_wake_locked(p);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
	}
	p->closing = true;
	peer_promote_free(p);
	peer_resolve_free(p);
	for (struct peer_conn *c = p->conns; c; c = c->next)
		peer_conn_close(c);
	peer_conn_reap(p);
	peer_serve_snap_wait(p);
	while ((r = p->remotes)) {
		p->remotes = r->next;
		peer_remote_free(r);
	}
	peer_snap_send_free(p->snaps);
	p->snaps = NULL;
	while ((n = p->ev_head)) {
		p->ev_head = n->next;
		peer_event_release(&n->ev);
		raftd_free(n);
	}
	while ((n = p->taken)) {
		p->taken = n->next;
		peer_event_release(&n->ev);
		raftd_free(n);
	}
	for (size_t i = 0; i < p->n_listeners; i++)
		close(p->lfds[i]);
	if (p->epfd >= 0)
		close(p->epfd);
	if (p->wake_fd >= 0)
		close(p->wake_fd);
	if (p->event_fd >= 0)
		close(p->event_fd);
	pthread_cond_destroy(&p->snap_synced_cond);
	pthread_mutex_destroy(&p->mu);
	raftd_free(p->removed);
	raftd_free(p->members_json);
	raftd_free(p->peer_urls_hdr);
	peer_grpc_fini(p);
	raftd_free(p);
}
