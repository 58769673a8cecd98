/* Lease calls forwarded to the leader (see lease_fwd.h). */
#include "raftd/lease_fwd.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "raftd/alloc.h"
#include "raftd/roster.h"
#include "raftd/peer/peer.h"
#include "raftd/promote.h"
#include "raftd/proposals.h"
#include "raftd/raft/raft.h"
#include "cluster/membership.h"
#include "cluster/leasehttp.h"
#include "base/log/log.h"
#include "shm/msg.h"
#include "shm/status.h"

#define LEASE_FWD_MSG_TIMEOUT "etcdserver: request timed out"

struct lease_fwd_wait {
	uint32_t slot;
	struct msg_origin origin;
	struct leasehttp_req req;
	uint64_t token;     /* in flight (PEER_EV_LEASE_DONE's); 0: waiting */
	uint64_t to;        /* in flight: the leader asked */
	uint64_t ticks;     /* ticks waited */
	bool asked;         /* a leader was asked, or would have been but for
			     * LEASE_FWD_MAX_FLIGHT */
	bool later;         /* the leader refused it: asked again at a tick */
};

/* Removes ls->v[i]; one in flight frees its place. */
static void lf_drop(struct lease_fwds *ls, size_t i)
{
	if (ls->v[i].token)
		ls->flight--;
	ls->v[i] = ls->v[--ls->n];
}

/* Ends w with an error: etcd's ErrTimeout once a leader was asked,
 * ErrNoLeader when none was known all along. */
static void lf_fail(const struct promote_env *e, const struct lease_fwd_wait *w)
{
	proposals_answer(e->props, w->slot, &w->origin, PROPOSALS_GRPC_UNAVAILABLE,
			 w->asked ? LEASE_FWD_MSG_TIMEOUT : PROPOSALS_MSG_NO_LEADER, NULL, 0);
}

/* Asks the leader for w if one is known and fewer than
 * LEASE_FWD_MAX_FLIGHT requests are in flight: 0 (in flight, or waiting
 * for a leader or a place), or an error (answered by the caller). A
 * member that came to lead while w waited asks itself over its own peer
 * URL, as etcd does: its gateways answer there from its lessor. */
static int lf_ask(struct lease_fwds *ls, const struct promote_env *e, struct lease_fwd_wait *w)
{
	const struct member_info *lm = membership_find(&e->roster->ms, raft_leader(e->raft));
	uint64_t left = e->roster->timeout_ticks > w->ticks ? e->roster->timeout_ticks - w->ticks : 1;

	if (!lm || !lm->n_peer_urls)
		return 0; /* tried again by lease_fwd_tick */
	w->asked = true;
	if (ls->flight >= LEASE_FWD_MAX_FLIGHT)
		return 0; /* started when one in flight ends, or at a tick */
	w->token = ++ls->seq;
	w->to = lm->id;
	int rc = peer_lease_forward(e->peer, (const char *const *)lm->peer_urls, lm->n_peer_urls,
				    &w->req, w->token, (int)(left * e->tick_ms));
	if (rc)
		w->token = 0;
	else
		ls->flight++;
	return rc;
}

/* A new leader is known: what is in flight to another member is given up
 * and asked of the new one at once, rather than waiting for an answer
 * that a stopped or cut-off old leader may never give (the request
 * timeout is longer than a short lease's TTL). */
static void lf_follow_leader(struct lease_fwds *ls, const struct promote_env *e)
{
	uint64_t lead = raft_leader(e->raft);
	size_t moved = 0;

	if (lead == 0 || lead == ls->leader)
		return;
	ls->leader = lead;
	for (size_t i = 0; i < ls->n; i++) {
		struct lease_fwd_wait *w = &ls->v[i];
		if (w->token == 0 || w->to == lead)
			continue;
		peer_lease_cancel(e->peer, w->token);
		w->token = 0;
		w->later = false;
		ls->flight--;
		moved++;
	}
	if (moved) {
		char to[17];
		snprintf(to, sizeof(to), "%" PRIx64, lead);
		log_info("lease requests in flight to a former leader are asked of the new one",
			 LOG_U64("requests", moved), LOG_STR("leader", to));
	}
	for (size_t i = ls->n; i-- > 0;) {
		struct lease_fwd_wait *w = &ls->v[i];
		if (w->token == 0 && lf_ask(ls, e, w)) {
			lf_fail(e, w);
			lf_drop(ls, i);
		}
	}
}

/* A place in flight was freed: asks for the one waiting longest. */
static void lf_next(struct lease_fwds *ls, const struct promote_env *e)
{
	size_t best = ls->n;

	for (size_t i = 0; i < ls->n; i++)
		if (ls->v[i].token == 0 && !ls->v[i].later && (best == ls->n || ls->v[i].ticks > ls->v[best].ticks))
			best = i;
	if (best < ls->n && lf_ask(ls, e, &ls->v[best])) {
		lf_fail(e, &ls->v[best]);
		lf_drop(ls, best);
	}
}

void lease_fwd_gateway(struct lease_fwds *ls, const struct promote_env *e, uint32_t slot,
		       const struct msg_keepalive *m)
{
	struct lease_fwd_wait *w;

	lf_follow_leader(ls, e);
	if (m->op != MSG_LEASE_KEEPALIVE && m->op != MSG_LEASE_TIME_TO_LIVE) {
		proposals_answer(e->props, slot, &m->origin, PROPOSALS_GRPC_INVALID_ARGUMENT,
				 "cetcd: not a lease call the leader answers", NULL, 0);
		return;
	}
	if (!e->peer || ls->n >= LEASE_FWD_MAX_WAITING ||
	    raftd_reserve((void **)&ls->v, &ls->cap, ls->n + 1, sizeof(*ls->v), 8)) {
		proposals_answer(e->props, slot, &m->origin,
				 e->peer ? PROPOSALS_GRPC_RESOURCE_EXHAUSTED :
					   PROPOSALS_GRPC_UNAVAILABLE,
				 e->peer ? PROPOSALS_MSG_TOO_MANY : PROPOSALS_MSG_NOT_LEADER, NULL, 0);
		return;
	}
	w = &ls->v[ls->n++];
	memset(w, 0, sizeof(*w));
	w->slot = slot;
	w->origin = m->origin;
	w->req.internal = m->op == MSG_LEASE_TIME_TO_LIVE;
	w->req.id = m->lease_id;
	w->req.keys = (m->flags & MSG_LEASE_F_KEYS) != 0;
	if (lf_ask(ls, e, w)) {
		proposals_answer(e->props, slot, &m->origin, PROPOSALS_GRPC_RESOURCE_EXHAUSTED,
				 PROPOSALS_MSG_TOO_MANY, NULL, 0);
		lf_drop(ls, ls->n - 1);
	}
}

/* This member's store revision, as etcd's v3rpc header carries it
 * (kv.Rev() at the member the client talks to); 0 when stored has not
 * published a status. */
static int64_t lf_revision(const struct promote_env *e)
{
	struct status_stored st;

	if (!e->region || status_stored_read(e->region, &st))
		return 0;
	return (int64_t)st.revision;
}

/* Answers w with resp (the leader's response message) under this
 * member's header. */
static void lf_answer(const struct promote_env *e, const struct lease_fwd_wait *w,
		      const uint8_t *resp, size_t len)
{
	Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	uint8_t hbuf[64];

	hdr.cluster_id = e->cluster_id;
	hdr.member_id = e->member_id;
	hdr.raft_term = raft_term(e->raft);
	hdr.revision = lf_revision(e);
	size_t hlen = etcdserverpb__response_header__pack(&hdr, hbuf);
	uint8_t *out = raftd_malloc(len + hlen + 16);
	long n = out ? leasehttp_reheader(resp, len, hbuf, hlen, out) : -ENOMEM;
	if (n < 0)
		proposals_answer(e->props, w->slot, &w->origin, PROPOSALS_GRPC_UNKNOWN,
				 "lease: the leader's answer does not decode", NULL, 0);
	else
		proposals_answer(e->props, w->slot, &w->origin, 0, NULL, out, (size_t)n);
	raftd_free(out);
}

/* An unknown lease, as etcd's v3rpc answers it. */
static void lf_not_found(const struct promote_env *e, const struct lease_fwd_wait *w)
{
	uint8_t buf[32];
	size_t n;

	if (w->req.internal) {
		Etcdserverpb__LeaseTimeToLiveResponse r =
			ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
		r.id = w->req.id;
		r.ttl = -1;
		n = etcdserverpb__lease_time_to_live_response__pack(&r, buf);
	} else {
		Etcdserverpb__LeaseKeepAliveResponse r = ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;
		r.id = w->req.id;
		n = etcdserverpb__lease_keep_alive_response__pack(&r, buf);
	}
	lf_answer(e, w, buf, n);
}

void lease_fwd_done(struct lease_fwds *ls, const struct promote_env *e,
		    const struct peer_event *ev)
{
	for (size_t i = 0; i < ls->n; i++) {
		struct lease_fwd_wait *w = &ls->v[i];
		const uint8_t *resp;
		size_t len;
		if (w->token == 0 || w->token != ev->token)
			continue;
		w->token = 0;
		ls->flight--;
		if (ev->status == 404) {
			lf_not_found(e, w);
			lf_drop(ls, i);
			lf_next(ls, e);
			return;
		}
		if (ev->status == 200) {
			int rc = leasehttp_response_decode(&w->req, ev->buf, ev->len, &resp, &len);
			if (rc == 0) {
				lf_answer(e, w, resp, len);
				lf_drop(ls, i);
				lf_next(ls, e);
				return;
			}
			log_warn("the leader's answer to a lease request does not decode; asking again",
				 LOG_I64("lease-id", w->req.id),
				 LOG_STR("error", rc == -ESRCH ? "lease: renew id mismatch" :
								 "malformed LeaseKeepAliveResponse"));
		} else {
			log_debug("the leader did not renew a lease; asking again",
				  LOG_I64("lease-id", w->req.id), LOG_I64("status", ev->status),
				  LOG_BYTES("answer", ev->buf ? (const char *)ev->buf : "",
					    ev->len > 200 ? 200 : ev->len));
		}
		/* asked again at the next tick, within the request timeout */
		w->later = true;
		lf_next(ls, e);
		return;
	}
}

void lease_fwd_tick(struct lease_fwds *ls, const struct promote_env *e)
{
	lf_follow_leader(ls, e);
	for (size_t i = ls->n; i-- > 0;) {
		struct lease_fwd_wait *w = &ls->v[i];
		w->ticks++;
		w->later = false;
		if (w->token)
			continue; /* in flight: the forwarder ends it by its deadline */
		if (w->ticks >= e->roster->timeout_ticks) {
			lf_fail(e, w);
			lf_drop(ls, i);
		} else if (lf_ask(ls, e, w)) {
			lf_fail(e, w);
			lf_drop(ls, i);
		}
	}
}

void lease_fwd_free(struct lease_fwds *ls)
{
	raftd_free(ls->v);
	memset(ls, 0, sizeof(*ls));
}
