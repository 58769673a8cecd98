/*
 * MemberPromote between members, as etcd 3.4 does it over the peer port:
 * a follower that is asked to promote a learner cannot tell whether the
 * learner caught up (only the leader tracks its progress), so it forwards
 * the call to the leader with POST /members/promote/<id> (etcd's
 * promoteMemberHTTP) and relays the answer; the leader serves that path
 * (peerMemberPromoteHandler) as it serves a client's promotion.
 *
 * Served (transport thread): the request is handed to the loop thread as
 * PEER_EV_PROMOTE with a token, and its connection waits (PEER_ST_WAIT)
 * until peer_promote_answer queues the answer for that token.
 *
 * Forwarded (loop thread): peer_promote_forward starts a thread that makes
 * the blocking request (peer_fetch.h) and reports PEER_EV_PROMOTE_DONE.
 * peer_stop waits for such threads (each is bounded by its timeout).
 * Lease renewals and remaining times a follower asks of the leader have a
 * forwarder of their own (raftd/peer/peer_lease.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer_fetch.h"
#include "raftd/peer/peer_int.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"

/* How long a served promotion may wait for the loop's answer: etcd's
 * request timeout (5 s and two election timeouts) with room to spare;
 * the loop answers before. */
#define PP_WAIT_NS (30ull * 1000 * 1000 * 1000)

/* An answer queued for the transport thread. */
struct pp_answer {
	struct pp_answer *next;
	uint64_t token;
	int status;
	char ctype[48];
	size_t len;
	char body[];
};

struct peer_promote {
	uint64_t next_token;       /* served requests' tokens */
	struct pp_answer *answers; /* queued by the loop thread */
	unsigned forwards;         /* forwarding threads running */
	pthread_cond_t idle;       /* signalled when forwards drops to 0 */
};

/* p->promote, made on first use; under mu. NULL when out of memory. */
static struct peer_promote *pp_get_locked(struct peer *p)
{
	if (!p->promote) {
		struct peer_promote *pp = raftd_calloc(1, sizeof(*pp));
		if (!pp)
			return NULL;
		pthread_cond_init(&pp->idle, NULL);
		p->promote = pp;
	}
	return p->promote;
}

/* etcd parses the id with strconv.ParseUint(s, 10, 64). */
static bool pp_parse_id(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

void peer_promote_serve(struct peer_conn *c)
{
	static const char prefix[] = "/members/promote/";
	struct peer *p = c->p;
	struct http_str path = c->head.path;
	const char *idp = path.p + sizeof(prefix) - 1;
	size_t idlen = path.len - (sizeof(prefix) - 1);
	uint64_t id;

	if (!pp_parse_id(idp, idlen, &id)) {
		char text[160];
		snprintf(text, sizeof(text), "member %.*s not found in cluster",
			 (int)(idlen > 64 ? 64 : idlen), idp);
		char body[192];
		int n = snprintf(body, sizeof(body), "%s\n", text);
		peer_serve_reply(c, 404, "text/plain; charset=utf-8", NULL, body, (size_t)n);
		return;
	}
	pthread_mutex_lock(&p->mu);
	struct peer_promote *pp = pp_get_locked(p);
	if (!pp) {
		pthread_mutex_unlock(&p->mu);
		static const char oom[] = "{\"message\":\"Internal Server Error\"}";
		peer_serve_reply(c, 500, "application/json", NULL, oom, sizeof(oom) - 1);
		return;
	}
	c->promote_token = ++pp->next_token;
	struct peer_event ev = { .kind = PEER_EV_PROMOTE, .id = id, .token = c->promote_token };
	peer_emit_locked(p, &ev);
	pthread_mutex_unlock(&p->mu);
	c->state = PEER_ST_WAIT;
	c->deadline_ns = clock_now_ns() + PP_WAIT_NS;
}

int peer_promote_answer(struct peer *p, uint64_t token, int status, const char *ctype,
			const char *body, size_t len)
{
	struct pp_answer *a = raftd_malloc(sizeof(*a) + len + 1);

	if (!a)
		return -ENOMEM;
	a->token = token;
	a->status = status;
	snprintf(a->ctype, sizeof(a->ctype), "%s", ctype);
	a->len = len;
	if (len)
		memcpy(a->body, body, len);
	a->body[len] = '\0';
	pthread_mutex_lock(&p->mu);
	struct peer_promote *pp = pp_get_locked(p);
	if (!pp) {
		pthread_mutex_unlock(&p->mu);
		raftd_free(a);
		return -ENOMEM;
	}
	a->next = pp->answers;
	pp->answers = a;
	peer_wake_locked(p);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

void peer_promote_flush(struct peer *p)
{
	struct pp_answer *list;

	pthread_mutex_lock(&p->mu);
	list = p->promote ? p->promote->answers : NULL;
	if (p->promote)
		p->promote->answers = NULL;
	pthread_mutex_unlock(&p->mu);
	while (list) {
		struct pp_answer *a = list;
		list = a->next;
		for (struct peer_conn *c = p->conns; c; c = c->next) {
			if (c->state != PEER_ST_WAIT || c->promote_token != a->token)
				continue;
			c->promote_token = 0;
			c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
			peer_serve_reply(c, a->status, a->ctype, NULL, a->body, a->len);
			/* written out, then closed or ready for the next request */
			peer_serve_input(c);
			break;
		}
		raftd_free(a);
	}
}

/* ---- forwarding to the leader ---- */

struct pp_forward {
	struct peer *p;
	enum peer_event_kind done;   /* reported when it ends */
	char path[64];
	uint64_t token;
	int timeout_ms;
	size_t n_urls;
	char **urls;
};

static void pp_forward_free(struct pp_forward *f)
{
	for (size_t i = 0; i < f->n_urls; i++)
		raftd_free(f->urls[i]);
	raftd_free(f->urls);
	raftd_free(f);
}

static void *pp_forward_main(void *arg)
{
	struct pp_forward *f = arg;
	struct peer *p = f->p;
	struct peer_fetch_resp resp = { 0 };
	int rc = -EHOSTUNREACH;

	for (size_t i = 0; i < f->n_urls; i++) {
		rc = peer_fetch_post(p->client_tls, f->urls[i], f->path, NULL, NULL, 0,
				     f->timeout_ms, &resp);
		if (!rc)
			break;
		log_warn("failed to forward a request to the leader", LOG_STR("path", f->path),
			 LOG_STR("address", f->urls[i]), LOG_STR("error", errmsg_get(rc)));
	}
	struct peer_event ev = { .kind = f->done, .token = f->token,
				 .status = rc ? rc : resp.status };
	if (!rc) {
		ev.buf = (uint8_t *)resp.body;
		ev.len = resp.len;
		resp.body = NULL;
	}
	pthread_mutex_lock(&p->mu);
	if (!p->closing)
		peer_emit_locked(p, &ev);
	else
		peer_event_release(&ev);
	if (--p->promote->forwards == 0)
		pthread_cond_broadcast(&p->promote->idle);
	pthread_mutex_unlock(&p->mu);
	pp_forward_free(f);
	return NULL;
}

/* Starts a thread that POSTs f's request to the leader's URLs in turn and
 * reports f->done. Takes f. */
static int pp_forward_start(struct peer *p, struct pp_forward *f, const char *const *urls,
			    size_t n, uint64_t token, int timeout_ms)
{
	pthread_t t;
	int rc;

	f->p = p;
	f->token = token;
	f->timeout_ms = timeout_ms;
	f->urls = raftd_calloc(n ? n : 1, sizeof(*f->urls));
	if (!f->urls) {
		raftd_free(f);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++, f->n_urls++) {
		f->urls[i] = raftd_malloc(strlen(urls[i]) + 1);
		if (!f->urls[i]) {
			pp_forward_free(f);
			return -ENOMEM;
		}
		strcpy(f->urls[i], urls[i]);
	}
	pthread_mutex_lock(&p->mu);
	struct peer_promote *pp = pp_get_locked(p);
	if (!pp) {
		pthread_mutex_unlock(&p->mu);
		pp_forward_free(f);
		return -ENOMEM;
	}
	pp->forwards++;
	pthread_mutex_unlock(&p->mu);
	rc = shm_thread_start(&t, true, pp_forward_main, f);
	if (rc) {
		pthread_mutex_lock(&p->mu);
		if (--pp->forwards == 0)
			pthread_cond_broadcast(&pp->idle);
		pthread_mutex_unlock(&p->mu);
		pp_forward_free(f);
		return -EAGAIN;
	}
	return 0;
}

int peer_promote_forward(struct peer *p, const char *const *urls, size_t n, uint64_t member_id,
			 uint64_t token, int timeout_ms)
{
	struct pp_forward *f = raftd_calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->done = PEER_EV_PROMOTE_DONE;
	snprintf(f->path, sizeof(f->path), "/members/promote/%" PRIu64, member_id);
	return pp_forward_start(p, f, urls, n, token, timeout_ms);
}

void peer_promote_free(struct peer *p)
{
	struct peer_promote *pp;

	peer_lease_free(p);
	pthread_mutex_lock(&p->mu);
	pp = p->promote;
	while (pp && pp->forwards)
		pthread_cond_wait(&pp->idle, &p->mu);
	p->promote = NULL;
	pthread_mutex_unlock(&p->mu);
	if (!pp)
		return;
	while (pp->answers) {
		struct pp_answer *a = pp->answers;
		pp->answers = a->next;
		raftd_free(a);
	}
	pthread_cond_destroy(&pp->idle);
	raftd_free(pp);
}
