/* MemberPromote on raftd's loop thread (see promote.h). */
#include "raftd/promote.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "raftd/alloc.h"
#include "raftd/roster.h"
#include "raftd/peer/peer.h"
#include "raftd/proposals.h"
#include "raftd/raft/raft.h"
#include "raftd/raft/raftmsg.h"
#include "cluster/member_json.h"
#include "cluster/membership.h"
#include "base/log/log.h"
#include "shm/msg.h"

#define PROMOTE_MSG_MEMBER_NOT_FOUND "etcdserver: member not found"
#define PROMOTE_MSG_NOT_LEARNER "etcdserver: can only promote a learner member"
#define PROMOTE_MSG_LEARNER_NOT_READY \
	"etcdserver: can only promote a learner member which is in sync with leader"
#define PROMOTE_MSG_TIMEOUT "etcdserver: request timed out"
/* etcd's membership errors, as its peer handler writes them */
#define PROMOTE_HTTP_ID_NOT_FOUND "membership: ID not found"
#define PROMOTE_HTTP_NOT_LEARNER "membership: can only promote a learner member"
#define PROMOTE_HTTP_INTERNAL "{\"message\":\"Internal Server Error\"}"
/* etcd's readyPercent: a learner is promoted once its match reaches 90%
 * of the leader's */
#define PROMOTE_READY_PERCENT 0.9

/* A promotion waiting: forwarded to the leader for a gateway or for a
 * peer, or proposed here (the leader) for a peer. */
enum promote_kind {
	PROMOTE_FWD_GATEWAY,
	PROMOTE_FWD_PEER,
	PROMOTE_APPLY_PEER,
};

struct promote_wait {
	enum promote_kind kind;
	uint64_t token;          /* forwards: PEER_EV_PROMOTE_DONE's */
	uint64_t serve_token;    /* a peer's request: peer_promote_answer's */
	uint32_t slot;           /* a gateway's request */
	struct msg_origin origin;
	uint64_t member_id;
	uint64_t ticks;          /* ticks waited */
};

/* Answers a peer's request as etcd's handler does: http.Error's text, or
 * WriteError's JSON for an internal error (500). */
static void promote_answer_peer(const struct promote_env *e, uint64_t serve_token, int status,
				const char *text)
{
	char body[160];
	int n;

	if (status == 500) {
		(void)peer_promote_answer(e->peer, serve_token, 500, "application/json",
					  PROMOTE_HTTP_INTERNAL, sizeof(PROMOTE_HTTP_INTERNAL) - 1);
		return;
	}
	/* Go's http.Error: the text and a line end */
	n = snprintf(body, sizeof(body), "%s\n", text);
	(void)peer_promote_answer(e->peer, serve_token, status, "text/plain; charset=utf-8", body,
				  (size_t)n);
}

/* etcd's promoteMember checks on the leader (mayPromoteMember): 0 when
 * the learner may be promoted, else the gRPC status and text, and the
 * HTTP status and text etcd's peer handler answers with. */
static int promote_check(const struct promote_env *e, uint64_t id, int32_t *grpc, const char **text,
			 int *http, const char **http_text)
{
	const struct member_info *m = membership_find(&e->roster->ms, id);
	struct raft_progress lead, learner;

	*grpc = PROPOSALS_GRPC_FAILED_PRECONDITION;
	*http = 412;
	if (!m) {
		*grpc = PROPOSALS_GRPC_NOT_FOUND;
		*text = PROMOTE_MSG_MEMBER_NOT_FOUND;
		*http = 404;
		*http_text = PROMOTE_HTTP_ID_NOT_FOUND;
	} else if (!m->is_learner) {
		*text = PROMOTE_MSG_NOT_LEARNER;
		*http_text = PROMOTE_HTTP_NOT_LEARNER;
	} else if (raft_progress(e->raft, e->member_id, &lead) ||
		   raft_progress(e->raft, m->id, &learner) ||
		   (double)learner.match < (double)lead.match * PROMOTE_READY_PERCENT) {
		*text = *http_text = PROMOTE_MSG_LEARNER_NOT_READY;
	} else {
		return 0;
	}
	return -EPERM;
}

/* Proposes the promotion of learner id (AddNode with "isPromote") with
 * origin appended (stored answers the gateway that asked; a zero origin
 * answers nobody). 0, -ENOMEM, or the core's refusal. */
static int promote_propose(const struct promote_env *e, uint64_t id,
			   const struct msg_origin *origin)
{
	const struct member_info *m = membership_find(&e->roster->ms, id);
	char *ctx;
	size_t ctx_len;

	if (!m || member_json_encode_context(m, true, &ctx, &ctx_len))
		return -ENOMEM;
	struct raftmsg_conf_change cc = {
		.id = e->roster->req_next++, .type = RAFTMSG_CONF_ADD_NODE, .node_id = m->id,
		.has_context = true, .context_len = ctx_len, .context = (const uint8_t *)ctx,
	};
	size_t n = raftmsg_conf_change_size(&cc);
	uint8_t *data = raftd_malloc(n + MSG_ORIGIN_MAX_BYTES);
	int rc = -ENOMEM;
	if (data) {
		raftmsg_conf_change_encode(&cc, data);
		n += msg_origin_encode(origin, data + n);
		struct raft_entry ent = { .type = RAFT_ENTRY_CONF_CHANGE, .len = (uint32_t)n,
					  .data = data };
		rc = raft_propose(e->raft, &ent, 1);
	}
	raftd_free(data);
	free(ctx);
	return rc;
}

static struct promote_wait *promote_add(struct promotes *ps)
{
	if (raftd_reserve((void **)&ps->v, &ps->cap, ps->n + 1, sizeof(*ps->v), 4))
		return NULL;
	struct promote_wait *p = &ps->v[ps->n++];
	memset(p, 0, sizeof(*p));
	return p;
}

static void promote_drop(struct promotes *ps, size_t i)
{
	ps->v[i] = ps->v[--ps->n];
}

/* How long a promotion may take: etcd's request timeout. */
static int promote_timeout_ms(const struct promote_env *e)
{
	return (int)(e->roster->timeout_ticks * e->tick_ms);
}

/*
 * etcd's PromoteMember on a follower: the leader decides, so the call
 * goes to it over the peer port (peer_promote_forward), for a gateway
 * (slot, origin) or for a peer's request (serve_token). Without a known
 * leader it waits for one (promote_tick), as etcd's waitLeader does, and
 * ends with etcd's "no leader" (a peer gets etcd's internal error) when
 * none comes within the request timeout.
 */
static void promote_forward(struct promotes *ps, const struct promote_env *e,
			    enum promote_kind kind, uint64_t id,
			    uint32_t slot, const struct msg_origin *origin, uint64_t serve_token)
{
	const struct member_info *lm = membership_find(&e->roster->ms, raft_leader(e->raft));
	struct promote_wait *p = e->peer ? promote_add(ps) : NULL;
	int rc = 0;

	if (p) {
		p->kind = kind;
		p->serve_token = serve_token;
		p->slot = slot;
		if (origin)
			p->origin = *origin;
		p->member_id = id;
		if (lm && lm->id != e->member_id && lm->n_peer_urls) {
			p->token = ++ps->seq;
			rc = peer_promote_forward(e->peer, (const char *const *)lm->peer_urls,
						  lm->n_peer_urls, id, p->token, promote_timeout_ms(e));
			if (rc)
				promote_drop(ps, ps->n - 1);
		}
		if (!rc)
			return;
	}
	if (kind == PROMOTE_FWD_GATEWAY)
		proposals_answer(e->props, slot, origin, PROPOSALS_GRPC_UNAVAILABLE,
				 PROPOSALS_MSG_NO_LEADER, NULL, 0);
	else
		promote_answer_peer(e, serve_token, 500, NULL);
}

/* A gateway's MSG_PROMOTE: checked and proposed on the leader, forwarded
 * to it from a follower. */
void promote_gateway(struct promotes *ps, const struct promote_env *e, uint32_t slot,
		     const struct msg_promote *req)
{
	const char *text, *http_text;
	int32_t status;
	int http;

	if (!raft_is_leader(e->raft)) {
		promote_forward(ps, e, PROMOTE_FWD_GATEWAY, req->member_id, slot, &req->origin, 0);
		return;
	}
	if (promote_check(e, req->member_id, &status, &text, &http, &http_text)) {
		proposals_answer(e->props, slot, &req->origin, status, text, NULL, 0);
		return;
	}
	int rc = promote_propose(e, req->member_id, &req->origin);
	if (rc == -ENOMEM)
		proposals_answer(e->props, slot, &req->origin, PROPOSALS_GRPC_RESOURCE_EXHAUSTED,
				 PROPOSALS_MSG_TOO_MANY, NULL, 0);
	else if (rc)
		proposals_answer(e->props, slot, &req->origin, PROPOSALS_GRPC_UNAVAILABLE,
				 PROPOSALS_MSG_NOT_LEADER, NULL, 0);
}

/* A peer's POST /members/promote/<id> (etcd's peerMemberPromoteHandler):
 * on the leader, checked and proposed, answered once applied; on a
 * follower, forwarded on to the leader. */
void promote_peer_request(struct promotes *ps, const struct promote_env *e, uint64_t id,
			  uint64_t serve_token)
{
	const char *text, *http_text;
	struct msg_origin nobody = { 0 };
	struct promote_wait *p;
	int32_t status;
	int http;

	if (!raft_is_leader(e->raft)) {
		promote_forward(ps, e, PROMOTE_FWD_PEER, id, 0, NULL, serve_token);
		return;
	}
	if (promote_check(e, id, &status, &text, &http, &http_text)) {
		char mid[24];
		snprintf(mid, sizeof(mid), "%" PRIx64, id);
		log_warn("failed to promote a member", LOG_STR("member-id", mid),
			 LOG_STR("error", http_text));
		promote_answer_peer(e, serve_token, http, http_text);
		return;
	}
	if (!(p = promote_add(ps)) || promote_propose(e, id, &nobody)) {
		if (p)
			promote_drop(ps, ps->n - 1);
		promote_answer_peer(e, serve_token, 500, NULL);
		return;
	}
	p->kind = PROMOTE_APPLY_PEER;
	p->serve_token = serve_token;
	p->member_id = id;
}

/* A promotion this member proposed for a peer was applied: answered with
 * the members after it, as etcd's handler encodes them. */
void promote_applied(struct promotes *ps, const struct promote_env *e, uint64_t node_id)
{
	for (size_t i = ps->n; i-- > 0;) {
		struct promote_wait *p = &ps->v[i];
		char *json;
		size_t len;
		if (p->kind != PROMOTE_APPLY_PEER || p->member_id != node_id)
			continue;
		if (roster_json(&e->roster->ms, &json, &len)) {
			promote_answer_peer(e, p->serve_token, 500, NULL);
		} else {
			json[len] = '\n'; /* json.Encoder ends the value so */
			(void)peer_promote_answer(e->peer, p->serve_token, 200, "application/json",
						  json, len + 1);
			raftd_free(json);
		}
		promote_drop(ps, i);
	}
}

/* The gateway's answer to a promotion the leader answered: the members
 * of a 200 as a MemberPromoteResponse (etcd's ClusterServer header),
 * etcd's error for the others (promoteMemberHTTP's mapping). */
static void promote_relay_gateway(const struct promote_env *e, const struct promote_wait *p,
				  int status,
				  const char *body, size_t len)
{
	const struct msg_origin *o = &p->origin;
	struct member_info *ms = NULL;
	size_t n = 0;

	if (status < 0 || status == 408) {
		proposals_answer(e->props, p->slot, o, PROPOSALS_GRPC_UNAVAILABLE, PROMOTE_MSG_TIMEOUT,
				 NULL, 0);
		return;
	}
	if (status == 404) {
		proposals_answer(e->props, p->slot, o, PROPOSALS_GRPC_NOT_FOUND,
				 PROMOTE_MSG_MEMBER_NOT_FOUND, NULL, 0);
		return;
	}
	if (status == 412 && (strstr(body, PROMOTE_MSG_LEARNER_NOT_READY) ||
			      strstr(body, PROMOTE_HTTP_NOT_LEARNER))) {
		proposals_answer(e->props, p->slot, o, PROPOSALS_GRPC_FAILED_PRECONDITION,
				 strstr(body, PROMOTE_MSG_LEARNER_NOT_READY) ?
					 PROMOTE_MSG_LEARNER_NOT_READY : PROMOTE_MSG_NOT_LEARNER,
				 NULL, 0);
		return;
	}
	if (status != 200 || member_json_decode_array(body, len, &ms, &n)) {
		char text[512];
		snprintf(text, sizeof(text), "member promote: unknown error(%.*s)",
			 (int)(len > 400 ? 400 : len), body);
		proposals_answer(e->props, p->slot, o, PROPOSALS_GRPC_UNKNOWN, text, NULL, 0);
		return;
	}
	Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	Etcdserverpb__MemberPromoteResponse r = ETCDSERVERPB__MEMBER_PROMOTE_RESPONSE__INIT;
	Etcdserverpb__Member *pbs = raftd_calloc(n ? n : 1, sizeof(*pbs));
	Etcdserverpb__Member **ptrs = raftd_calloc(n ? n : 1, sizeof(*ptrs));
	uint8_t *out = NULL;
	size_t out_len = 0;
	hdr.cluster_id = e->cluster_id;
	hdr.member_id = e->member_id;
	hdr.raft_term = raft_term(e->raft);
	if (pbs && ptrs) {
		for (size_t i = 0; i < n; i++) {
			etcdserverpb__member__init(&pbs[i]);
			pbs[i].id = ms[i].id;
			pbs[i].name = ms[i].name ? ms[i].name : (char *)"";
			pbs[i].n_peerurls = ms[i].n_peer_urls;
			pbs[i].peerurls = ms[i].peer_urls;
			pbs[i].n_clienturls = ms[i].n_client_urls;
			pbs[i].clienturls = ms[i].client_urls;
			pbs[i].islearner = ms[i].is_learner;
			ptrs[i] = &pbs[i];
		}
		r.header = &hdr;
		r.n_members = n;
		r.members = ptrs;
		out_len = etcdserverpb__member_promote_response__get_packed_size(&r);
		out = raftd_malloc(out_len ? out_len : 1);
	}
	if (out) {
		etcdserverpb__member_promote_response__pack(&r, out);
		proposals_answer(e->props, p->slot, o, 0, NULL, out, out_len);
	} else {
		proposals_answer(e->props, p->slot, o, PROPOSALS_GRPC_RESOURCE_EXHAUSTED,
				 PROPOSALS_MSG_TOO_MANY, NULL, 0);
	}
	raftd_free(out);
	raftd_free(pbs);
	raftd_free(ptrs);
	for (size_t i = 0; i < n; i++)
		member_info_clear(&ms[i]);
	free(ms);
}

/* A forwarded promotion ended (PEER_EV_PROMOTE_DONE). */
void promote_forward_done(struct promotes *ps, const struct promote_env *e,
			  const struct peer_event *ev)
{
	const char *body = ev->buf ? (const char *)ev->buf : "";

	for (size_t i = 0; i < ps->n; i++) {
		struct promote_wait *p = &ps->v[i];
		if (p->kind == PROMOTE_APPLY_PEER || p->token != ev->token)
			continue;
		if (p->kind == PROMOTE_FWD_GATEWAY)
			promote_relay_gateway(e, p, ev->status, body, ev->len);
		else if (ev->status < 0)
			promote_answer_peer(e, p->serve_token, 500, NULL);
		else
			(void)peer_promote_answer(e->peer, p->serve_token, ev->status,
						  body[0] == '[' || body[0] == '{' ?
							  "application/json" :
							  "text/plain; charset=utf-8",
						  body, ev->len);
		promote_drop(ps, i);
		return;
	}
}

/* Promotions proposed for a peer that were not applied within the
 * request timeout get etcd's internal error (its ErrTimeout); forwards
 * end by their own timeout, and are dropped if they never report. */
void promote_tick(struct promotes *ps, const struct promote_env *e)
{
	for (size_t i = ps->n; i-- > 0;) {
		struct promote_wait *p = &ps->v[i];
		if (p->kind != PROMOTE_APPLY_PEER && p->token == 0) {
			/* waiting for a leader: asked again once one is known
			 * (the call is copied out first: asking may add to
			 * ps->v) */
			const struct member_info *lm =
				membership_find(&e->roster->ms, raft_leader(e->raft));
			struct promote_wait w = *p;
			if (++p->ticks >= e->roster->timeout_ticks) {
				if (w.kind == PROMOTE_FWD_GATEWAY)
					proposals_answer(e->props, w.slot, &w.origin,
							 PROPOSALS_GRPC_UNAVAILABLE,
							 PROPOSALS_MSG_NO_LEADER, NULL, 0);
				else
					promote_answer_peer(e, w.serve_token, 500, NULL);
				promote_drop(ps, i);
			} else if (raft_is_leader(e->raft) || (lm && lm->n_peer_urls)) {
				promote_drop(ps, i);
				if (w.kind == PROMOTE_FWD_GATEWAY) {
					struct msg_promote req = { .origin = w.origin,
								   .member_id = w.member_id };
					promote_gateway(ps, e, w.slot, &req);
				} else {
					promote_peer_request(ps, e, w.member_id, w.serve_token);
				}
			}
			continue;
		}
		uint64_t limit = e->roster->timeout_ticks * (p->kind == PROMOTE_APPLY_PEER ? 1 : 2);
		if (++p->ticks < limit)
			continue;
		if (p->kind == PROMOTE_FWD_GATEWAY)
			proposals_answer(e->props, p->slot, &p->origin, PROPOSALS_GRPC_UNAVAILABLE,
					 PROMOTE_MSG_TIMEOUT, NULL, 0);
		else
			promote_answer_peer(e, p->serve_token, 500, NULL);
		promote_drop(ps, i);
	}
}

void promote_free(struct promotes *ps)
{
	raftd_free(ps->v);
	memset(ps, 0, sizeof(*ps));
}
