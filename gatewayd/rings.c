/* The ring side of gatewayd's loop (see server.h): proposals and
 * read-index asks out to raftd, results, read indexes and rejections back,
 * matched to calls by request identity (pending.h), read waits on stored's
 * applied index, and request timeouts.
 *
 * Out: records are staged on SHM_SLOT_TO_RAFTD during a turn and
 * published once at its end (one wake of raftd per batch). When the ring
 * is full they queue in a bounded local backlog, in order, retried every
 * GW_BACKLOG_RETRY_NS; when that is full too, the request is refused with
 * etcd's "too many requests".
 *
 * In: a record is delivered only to the pending request whose (member,
 * slot, generation, request id) it names; every other record is dropped,
 * counted and logged at debug level. Lengths are checked before anything
 * is read: a record whose header and length disagree is dropped too.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/server.h"
#include "gatewayd/services/watch.h"
#include "proto/wire.h"
#include "shm/barrier.h"
#include "shm/doorbell.h"
#include "shm/hello.h"
#include "cluster/leasehttp.h"
#include "base/log/log.h"
#include "shm/msg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "stored/mvcc/mvcc_kv.h"

/* InternalRaftRequest.header (field 100, length-delimited) */
#define GW_IRR_HEADER_TAG (100u << 3 | 2) /* as a varint: a2 06 */

static const char gw_msg_too_many[] = "etcdserver: too many requests";
static const char gw_msg_too_large[] = "etcdserver: request is too large";
static const char gw_msg_timeout[] = "etcdserver: request timed out";
static const char gw_msg_timeout_apply[] =
	"etcdserver: request timed out, waiting for the applied index took too long";
static const char gw_msg_stopped[] = "etcdserver: server stopped";
static const char gw_msg_leader_changed[] = "etcdserver: leader changed";
static const char gw_msg_not_primary[] = LEASEHTTP_ERR_NOT_PRIMARY "\n";

static struct ring *gw_ring(struct gw_server *s, enum shm_slot_ring which)
{
	return shm_slot_ring(s->r, s->slot.index, which);
}

/* ---- setup ---- */

bool gw_rings_has_work(void *server)
{
	struct gw_server *s = server;
	struct status_stored st;
	uint64_t w;

	if (hello_replies_waiting(s->r, &s->slot))
		return true;
	if (watch_has_work(s))
		return true;
	w = atomic_load_explicit(&s->wait_index, memory_order_acquire);
	return w && status_stored_read(s->r, &st) == 0 && st.applied_index >= w;
}

int gw_rings_init(struct gw_server *s, uint32_t pending_cap, size_t backlog_bytes)
{
	struct msg_origin self = {
		.member_id = s->member_id,
		.slot = s->slot.index,
		.generation = s->slot.generation,
	};
	size_t floor = 2 * ((size_t)shm_region_max_record(s->r) + 16);
	int rc;

	atomic_init(&s->wait_index, 0);
	rc = pending_init(&s->pending, pending_cap, &self);
	if (rc)
		return rc;
	s->backlog_cap = backlog_bytes > floor ? backlog_bytes : floor;
	rc = shm_waker_start(&s->waker, shm_slot_doorbell(s->r, s->slot.index), gw_rings_has_work, s,
			     SHM_DOORBELL_BACKSTOP_MS);
	if (rc) {
		pending_fini(&s->pending);
		return rc;
	}
	return 0;
}

void gw_rings_fini(struct gw_server *s)
{
	shm_waker_stop(&s->waker);
	if (s->pending.v)
		shm_doorbell_want_events(shm_slot_doorbell(s->r, s->slot.index), false);
	pending_fini(&s->pending);
	free(s->backlog);
	s->backlog = NULL;
	free(s->waits);
	s->waits = NULL;
}

/* ---- answering ---- */

static enum grpc_status gw_status(int32_t code)
{
	return code > 0 && code <= GRPC_STATUS_UNAUTHENTICATED ? (enum grpc_status)code :
								 GRPC_STATUS_UNKNOWN;
}

/* Frees p and its ctx, and returns its call if that is still alive. */
static struct grpc_call *gw_take(struct gw_server *s, struct pending_req *p)
{
	struct grpc_call *call = grpc_call_find(s->grpc, p->call_id);
	struct gw_deferred *d = p->ctx;

	if (gw_pending_is_peer(p->tag))
		d = NULL; /* ctx is the waiting connection */
	pending_remove(&s->pending, p);
	if (d)
		d->ops->free(d);
	if (call)
		gw_call_set(call, GW_CALL_HANDLED, 0);
	return call;
}

/* Answers p's call with an error and frees p. */
static void gw_fail(struct gw_server *s, struct pending_req *p, enum grpc_status code,
		    const char *text)
{
	if (p->tag == GW_PENDING_TAG_HTTP_READ) {
		struct gw_http_read *r = p->ctx;
		pending_remove(&s->pending, p);
		r->done(s, r, text);
		return;
	}
	if (gw_pending_is_peer(p->tag)) {
		/* etcd's leaseHandler when the lessor does not answer in time */
		static const char timeout[] = LEASEHTTP_ERR_TIMEOUT "\n";
		void *owner = p->ctx;
		pending_remove(&s->pending, p);
		if (owner)
			gw_http1_reply(s, owner, 408, "text/plain; charset=utf-8", timeout,
					    sizeof(timeout) - 1);
		return;
	}
	struct grpc_call *call = gw_take(s, p);
	if (call)
		grpc_call_finish(call, code, text);
}

void gw_rings_cancel(struct gw_server *s, struct grpc_call *call)
{
	struct gw_call *g = gw_call_of(call);
	struct pending_req *p;

	if (g->stage != GW_CALL_PENDING || !s->pending.v)
		return;
	/* the call's id is already dead here: its state names the request
	 * it waits under */
	p = pending_find(&s->pending, g->rid);
	if (p) {
		struct gw_deferred *d = p->ctx;
		pending_remove(&s->pending, p);
		if (d)
			d->ops->free(d);
	}
	gw_call_set(call, GW_CALL_HANDLED, 0);
}

void gw_rings_stop(struct gw_server *s)
{
	struct pending_req *p;

	if (!s->pending.v)
		return;
	while ((p = pending_first(&s->pending)) != NULL)
		gw_fail(s, p, GRPC_STATUS_UNAVAILABLE, gw_msg_stopped);
	s->backlog_head = s->backlog_len = 0;
	s->nwaits = 0;
	atomic_store(&s->wait_index, 0);
}

/* ---- out: the ring to raftd and the backlog ---- */

#define GW_BACKLOG_HDR 8u

static size_t gw_pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Room for a record of len bytes: staged in the ring when nothing waits in
 * the backlog and the ring has room, else at the backlog's end. NULL when
 * neither can take it. *in_ring says which. */
static uint8_t *gw_out_reserve(struct gw_server *s, uint32_t len, bool *in_ring)
{
	struct ring *ring = gw_ring(s, SHM_SLOT_TO_RAFTD);
	void *p;

	if (s->backlog_len == 0 && ring_reserve(ring, len, &p) == 0) {
		*in_ring = true;
		return p;
	}
	*in_ring = false;
	size_t need = GW_BACKLOG_HDR + gw_pad8(len);
	if (s->backlog_len + need > s->backlog_cap)
		return NULL;
	if (!s->backlog) {
		s->backlog = malloc(s->backlog_cap);
		if (!s->backlog)
			return NULL;
	}
	if (s->backlog_head + s->backlog_len + need > s->backlog_cap) {
		memmove(s->backlog, s->backlog + s->backlog_head, s->backlog_len);
		s->backlog_head = 0;
	}
	return s->backlog + s->backlog_head + s->backlog_len + GW_BACKLOG_HDR;
}

static void gw_out_commit(struct gw_server *s, uint32_t type, uint32_t len, bool in_ring)
{
	if (in_ring) {
		ring_commit(gw_ring(s, SHM_SLOT_TO_RAFTD), type, len);
		s->staged = true;
		return;
	}
	uint8_t *h = s->backlog + s->backlog_head + s->backlog_len;
	memcpy(h, &type, 4);
	memcpy(h + 4, &len, 4);
	s->backlog_len += GW_BACKLOG_HDR + gw_pad8(len);
	s->stats.backlogged++;
	shm_metric_add(s->metrics, SHM_M_BACKLOGGED, 1);
}

void gw_rings_publish(struct gw_server *s)
{
	struct ring *ring = gw_ring(s, SHM_SLOT_TO_RAFTD);

	while (s->backlog_len > 0) {
		uint8_t *h = s->backlog + s->backlog_head;
		uint32_t type, len;
		void *p;
		memcpy(&type, h, 4);
		memcpy(&len, h + 4, 4);
		int rc = ring_reserve(ring, len, &p);
		if (rc == -EAGAIN)
			break;
		if (rc == 0) {
			memcpy(p, h + GW_BACKLOG_HDR, len);
			ring_commit(ring, type, len);
			s->staged = true;
		} else {
			log_warn("dropped a request the ring to raftd refuses", LOG_ERRNO(rc),
				 LOG_U64("len", len));
		}
		s->backlog_head += GW_BACKLOG_HDR + gw_pad8(len);
		s->backlog_len -= GW_BACKLOG_HDR + gw_pad8(len);
	}
	if (s->backlog_len == 0)
		s->backlog_head = 0;
	if (s->staged) {
		ring_publish(ring);
		s->staged = false;
	}
	s->propose_term_read = false; /* the next turn's proposals look again */
}

static void gw_refuse_too_many(struct gw_server *s, struct grpc_call *call)
{
	s->stats.too_many++;
	if (call)
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, gw_msg_too_many);
}

/* A MSG_PROPOSE record being written for a call. */
struct gw_proposal {
	struct pending_req *p;
	struct msg_propose mp;
	uint8_t origin[MSG_ORIGIN_MAX_BYTES];
	size_t olen;
	uint32_t rec_len;
	bool in_ring;
	uint8_t *out;
};

/* Registers call as pending (g->p, whose request_id the entry data may
 * carry). false: the call was answered (too many requests). */
static bool gw_propose_pending(struct gw_server *s, struct grpc_call *call, struct gw_proposal *g)
{
	g->p = pending_add(&s->pending, PENDING_PROPOSE, call ? grpc_call_id(call) : 0,
			   s->now_ns + s->request_timeout_ns);
	if (!g->p)
		gw_refuse_too_many(s, call);
	return g->p != NULL;
}

/*
 * The term to stamp a proposal with (MSG_PROPOSE_F_SEEN_TERM): raftd's,
 * read once for all the proposals of a turn, and again after raftd refused
 * one (gw_on_reject), so that a term change it reports is not stamped
 * on later proposals. A term older than raftd's by the time it reads the
 * proposal only costs a "leader changed" refusal, which clients retry;
 * never newer than raftd's, it cannot make gw_settle take a proposal of
 * the new term for lost. 0 when the status could not be read, or raftd
 * knows no leader: it holds the proposal until one is known and proposes
 * it in that leader's term, which the stamp would take for lost.
 */
static uint64_t gw_propose_term(struct gw_server *s)
{
	struct status_raftd rs;

	if (!s->propose_term_read) {
		s->propose_term = status_raftd_read(s->r, &rs) == 0 && rs.leader_id ? rs.term : 0;
		s->propose_term_read = true;
	}
	return s->propose_term;
}

/*
 * Reserves the pending call's MSG_PROPOSE record for data_len bytes of
 * entry data, which the caller writes at the returned pointer before
 * gw_propose_commit; the call's origin follows them. NULL: the call was
 * answered (too large, too many requests) and is no longer pending.
 */
static uint8_t *gw_propose_reserve(struct gw_server *s, struct grpc_call *call, size_t data_len,
				   uint32_t flags, struct gw_proposal *g)
{
	pending_origin(&s->pending, g->p, &g->mp.origin);
	g->olen = msg_origin_encode(&g->mp.origin, g->origin);
	size_t rec_len = sizeof(g->mp) + data_len + g->olen;
	if (data_len > s->max_request_bytes || rec_len > shm_region_max_record(s->r)) {
		pending_remove(&s->pending, g->p);
		if (call)
			grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, gw_msg_too_large);
		return NULL;
	}
	g->out = gw_out_reserve(s, (uint32_t)rec_len, &g->in_ring);
	if (!g->out) {
		pending_remove(&s->pending, g->p);
		gw_refuse_too_many(s, call);
		return NULL;
	}
	g->rec_len = (uint32_t)rec_len;
	/* a term raftd was in: raftd refuses the request if it has moved on
	 * by the time it reads it, and gw_settle answers it if a later term
	 * settles without it */
	g->mp.term = gw_propose_term(s);
	g->p->seen_term = g->mp.term;
	if (g->mp.term)
		flags |= MSG_PROPOSE_F_SEEN_TERM;
	g->mp.data_len = (uint32_t)(data_len + g->olen);
	g->mp.flags = flags;
	memcpy(g->out, &g->mp, sizeof(g->mp));
	return g->out + sizeof(g->mp);
}

/* Appends the origin and sends the record gw_propose_reserve made. */
static void gw_propose_commit(struct gw_server *s, struct grpc_call *call, struct gw_proposal *g)
{
	memcpy(g->out + g->rec_len - g->olen, g->origin, g->olen);
	gw_out_commit(s, MSG_PROPOSE, g->rec_len, g->in_ring);
	if (call)
		gw_call_set(call, GW_CALL_PENDING, g->p->request_id);
	s->stats.proposals++;
}

/* gw_propose, with d (or NULL) kept as the pending entry's ctx. The
 * header names the call's user and the auth revision of its token (etcd's
 * processInternalRaftRequestOnce), which stored checks the request
 * against at apply; a call whose token names nobody is answered here. */
static void gw_propose_ctx(struct gw_server *s, struct grpc_call *call, uint32_t field,
			   const uint8_t *body, size_t len, struct gw_deferred *d)
{
	const struct gw_auth_info *ai = NULL;
	struct gw_proposal g;
	size_t ulen = 0;

	if (call && gw_auth_enabled(s)) {
		int rc = gw_auth_of(s, call, &ai);
		if (rc) {
			gw_auth_refuse(s, call, rc);
			if (d)
				d->ops->free(d);
			return;
		}
		ulen = strlen(ai->user);
	}
	if (!gw_propose_pending(s, call, &g)) {
		if (d)
			d->ops->free(d);
		return;
	}
	uint64_t rid = g.p->request_id;
	uint64_t arev = ai ? ai->revision : 0;
	/* header { ID = rid, username, auth_revision } then field { body }:
	 * etcd's InternalRaftRequest */
	size_t hdr_inner = 1 + proto_varint_len(rid);
	if (ulen)
		hdr_inner += 1 + proto_varint_len(ulen) + ulen;
	if (arev)
		hdr_inner += 1 + proto_varint_len(arev);
	size_t hdr_len = proto_varint_len(GW_IRR_HEADER_TAG) + proto_varint_len(hdr_inner) +
			 hdr_inner;
	uint64_t tag = (uint64_t)field << 3 | 2;
	size_t irr_len = hdr_len + proto_varint_len(tag) + proto_varint_len(len) + len;
	uint8_t *w = gw_propose_reserve(s, call, irr_len, 0, &g);
	if (!w) {
		if (d)
			d->ops->free(d);
		return;
	}
	w += proto_varint_put(w, GW_IRR_HEADER_TAG);
	w += proto_varint_put(w, hdr_inner);
	*w++ = 1 << 3; /* RequestHeader.ID, varint */
	w += proto_varint_put(w, rid);
	if (ulen) {
		*w++ = 2 << 3 | 2; /* RequestHeader.username, bytes */
		w += proto_varint_put(w, ulen);
		memcpy(w, ai->user, ulen);
		w += ulen;
	}
	if (arev) {
		*w++ = 3 << 3; /* RequestHeader.auth_revision, varint */
		w += proto_varint_put(w, arev);
	}
	w += proto_varint_put(w, tag);
	w += proto_varint_put(w, len);
	if (len)
		memcpy(w, body, len);
	g.p->ctx = call ? d : NULL;
	gw_propose_commit(s, call, &g);
	if (d && !call)
		d->ops->free(d);
}

void gw_propose(struct gw_server *s, struct grpc_call *call, uint32_t field, const uint8_t *body,
		size_t len)
{
	gw_propose_ctx(s, call, field, body, len, NULL);
}

void gw_propose_then(struct gw_server *s, struct grpc_call *call, uint32_t field,
		     const uint8_t *body, size_t len, struct gw_deferred *d)
{
	gw_propose_ctx(s, call, field, body, len, d);
}

void gw_propose_conf_change(struct gw_server *s, struct grpc_call *call, const uint8_t *cc,
			    size_t len)
{
	struct gw_proposal g;
	uint8_t *w;

	if (!gw_propose_pending(s, call, &g) ||
	    !(w = gw_propose_reserve(s, call, len, MSG_PROPOSE_F_CONF_CHANGE, &g)))
		return;
	memcpy(w, cc, len);
	gw_propose_commit(s, call, &g);
}

/* Sends raftd a request of its own (type, an origin then id), pending as
 * a proposal: raftd answers it, or stored once what it proposed applied. */
static void gw_ask_raftd(struct gw_server *s, struct grpc_call *call, uint32_t type, uint64_t id)
{
	struct gw_proposal g;
	struct {
		struct msg_origin origin;
		uint64_t id;
	} m;
	bool in_ring;

	_Static_assert(sizeof(m) == sizeof(struct msg_move_leader) &&
			       sizeof(m) == sizeof(struct msg_promote),
		       "raftd's requests are an origin and an id");
	if (!gw_propose_pending(s, call, &g))
		return;
	uint8_t *out = gw_out_reserve(s, sizeof(m), &in_ring);
	if (!out) {
		pending_remove(&s->pending, g.p);
		gw_refuse_too_many(s, call);
		return;
	}
	pending_origin(&s->pending, g.p, &m.origin);
	m.id = id;
	memcpy(out, &m, sizeof(m));
	gw_out_commit(s, type, sizeof(m), in_ring);
	gw_call_set(call, GW_CALL_PENDING, g.p->request_id);
}

void gw_move_leader(struct gw_server *s, struct grpc_call *call, uint64_t target)
{
	gw_ask_raftd(s, call, MSG_MOVE_LEADER, target);
}

void gw_promote(struct gw_server *s, struct grpc_call *call, uint64_t member_id)
{
	gw_ask_raftd(s, call, MSG_PROMOTE, member_id);
}

/* Whether a renewal or remaining time must be asked of the leader over
 * the peer port: this member does not lead (or knows no leader yet, which
 * raftd waits for, as etcd's waitLeader does). */
static bool gw_lease_remote(struct gw_server *s, const struct msg_keepalive *m)
{
	struct status_raftd rs;

	if (m->op != MSG_LEASE_KEEPALIVE && m->op != MSG_LEASE_TIME_TO_LIVE)
		return false;
	if (status_raftd_read(s->r, &rs))
		return false;
	return !rs.is_leader;
}

/* Sends m (its origin filled) to stored's lessor, or to raftd to ask the
 * leader (MSG_LEASE_FORWARD). 0, or -ENOSPC when the ring is full. */
static int gw_push_lease(struct gw_server *s, const struct msg_keepalive *m)
{
	bool in_ring;

	if (!gw_lease_remote(s, m))
		return ring_push(gw_ring(s, SHM_SLOT_TO_STORED), MSG_KEEPALIVE, m, sizeof(*m)) ?
			       -ENOSPC : 0;
	uint8_t *out = gw_out_reserve(s, sizeof(*m), &in_ring);
	if (!out)
		return -ENOSPC;
	memcpy(out, m, sizeof(*m));
	gw_out_commit(s, MSG_LEASE_FORWARD, sizeof(*m), in_ring);
	return 0;
}

static int gw_wait_add(struct gw_server *s, uint64_t rid);

/* Whether p is a renewal that this member's lessor makes: a keepalive of
 * a gRPC stream, or a peer's POST /leases. */
static bool gw_pending_renews(const struct pending_req *p)
{
	return p->tag == GW_PENDING_TAG_STREAM || p->tag == GW_PENDING_TAG_PEER;
}

/*
 * A renewal this member's lessor is to make waits first for raftd to
 * confirm that this member leads, with a ReadIndex round asked after the
 * renewal came, and then for stored to apply that index, as etcd's
 * LeaseRenew does on a leader (its ensureLeadership and waitAppliedIndex).
 * The lessor renews only as the primary of the term the round confirmed
 * (invariant 8, docs/invariants.md): a leader whose raftd is stopped,
 * or that is cut off from the others, confirms nothing, so it renews
 * nothing that a successor may already have expired. The confirmation
 * needs no clock: whoever becomes leader after this term was voted in by
 * a member that acknowledged the round, so after the renewal came, and
 * its lessor's promotion extends every lease by the TTL from then.
 * 0, or -ENOSPC when the ring and its backlog are full.
 */
static int gw_lease_confirm(struct gw_server *s, struct pending_req *p)
{
	struct msg_read_index ri;
	bool in_ring;
	uint8_t *out = gw_out_reserve(s, sizeof(ri), &in_ring);

	if (!out)
		return -ENOSPC;
	pending_set_kind(&s->pending, p, PENDING_READ_INDEX);
	pending_origin(&s->pending, p, &ri.origin);
	memcpy(out, &ri, sizeof(ri));
	gw_out_commit(s, MSG_READ_INDEX, sizeof(ri), in_ring);
	s->stats.read_indexes++;
	return 0;
}

/* Sends the lease request that p holds (a peer's, or a renewal of a
 * stream once confirmed) to stored's lessor. 0, or -ENOSPC when the ring
 * is full. */
static int gw_lease_local_push(struct gw_server *s, struct pending_req *p)
{
	struct msg_keepalive rec = { .lease_id = p->lease_id,
				     .op = gw_pending_renews(p) ? MSG_LEASE_KEEPALIVE :
								  MSG_LEASE_TIME_TO_LIVE,
				     .flags = p->tag == GW_PENDING_TAG_PEER_TTL_KEYS ?
						      MSG_LEASE_F_KEYS : 0,
				     .term = p->lease_term };

	pending_set_kind(&s->pending, p, PENDING_PROPOSE);
	p->seen_term = 0;
	pending_origin(&s->pending, p, &rec.origin);
	return ring_push(gw_ring(s, SHM_SLOT_TO_STORED), MSG_KEEPALIVE, &rec, sizeof(rec)) ?
		       -ENOSPC : 0;
}

/* As etcd's leaseHandler, a peer's renewal or remaining time is answered
 * once this member applied what was committed when it came (its
 * ApplyWait): a follower forwards a renewal right after the grant it
 * answered, and the lessor here must know that lease by then. Waits as a
 * read does (gw_serve_waits); past the request timeout it is answered 408
 * (gw_fail). */
int gw_lease_peer(struct gw_server *s, void *owner, const struct leasehttp_req *r)
{
	struct pending_req *p = pending_add(&s->pending, PENDING_PROPOSE, 0,
					    s->now_ns + s->request_timeout_ns);
	struct status_raftd rs;
	struct status_stored st;

	if (!p)
		return -ENOMEM;
	p->tag = !r->internal ? GW_PENDING_TAG_PEER :
		 r->keys      ? GW_PENDING_TAG_PEER_TTL_KEYS : GW_PENDING_TAG_PEER_TTL;
	p->ctx = owner;
	p->lease_id = r->id;
	if (gw_pending_renews(p)) {
		if (gw_lease_confirm(s, p) != 0) {
			pending_remove(&s->pending, p);
			return -ENOMEM;
		}
		return 0;
	}
	if (status_raftd_read(s->r, &rs) == 0 && rs.commit_index > 0 &&
	    (status_stored_read(s->r, &st) != 0 || st.applied_index < rs.commit_index)) {
		pending_set_kind(&s->pending, p, PENDING_READ_WAIT);
		p->read_index = rs.commit_index;
		if (gw_wait_add(s, p->request_id) == 0) {
			s->more_work = true; /* gw_serve_waits asks for stored's notice */
			return 0;
		}
	}
	if (gw_lease_local_push(s, p) != 0) {
		pending_remove(&s->pending, p);
		return -ENOMEM;
	}
	return 0;
}

void gw_lease_peer_drop(struct gw_server *s, void *owner)
{
	if (!s->pending.v)
		return;
	for (struct pending_req *p = pending_first(&s->pending); p;
	     p = pending_next(&s->pending, p))
		if (gw_pending_is_peer(p->tag) && p->ctx == owner)
			p->ctx = NULL;
}

/* stored's answer to a peer's lease request, as etcd's leaseHandler
 * answers: the response (wrapped for /leases/internal), 404 for an
 * unknown lease, 400 with the lessor's error. */
static void gw_lease_peer_answer(struct gw_server *s, struct pending_req *p,
				 const struct msg_result *h, const uint8_t *body)
{
	static const char text_ct[] = "text/plain; charset=utf-8";
	static const char not_found[] = LEASEHTTP_ERR_NOT_FOUND "\n";
	void *owner = p->ctx;
	bool internal = p->tag != GW_PENDING_TAG_PEER;
	int64_t ttl = 0;

	pending_remove(&s->pending, p);
	s->stats.results++;
	if (!owner)
		return;
	if (h->status != 0 || leasehttp_response_ttl(body, h->body_len, &ttl)) {
		gw_http1_reply(s, owner, 400, text_ct, gw_msg_not_primary,
			       sizeof(gw_msg_not_primary) - 1);
		return;
	}
	/* stored answers an unknown lease with TTL 0 (renew) or -1 */
	if (internal ? ttl == -1 : ttl <= 0) {
		gw_http1_reply(s, owner, 404, text_ct, not_found, sizeof(not_found) - 1);
		return;
	}
	if (!internal) {
		gw_http1_reply(s, owner, 200, "application/protobuf", body, h->body_len);
		return;
	}
	uint8_t *w = gw_scratch(s, h->body_len + 16);
	if (!w) {
		gw_http1_reply(s, owner, 500, text_ct, "out of memory\n", 14);
		return;
	}
	size_t n = proto_varint_put(w, 1 << 3 | 2); /* LeaseInternalResponse field 1 */
	n += proto_varint_put(w + n, h->body_len);
	memcpy(w + n, body, h->body_len);
	gw_http1_reply(s, owner, 200, "application/protobuf", w, n + h->body_len);
}

/* Answers renewal p as a lessor that is not primary does: a peer's with
 * etcd's leaseHandler's 400, a stream's by ending it Unavailable. */
static void gw_lease_not_primary(struct gw_server *s, struct pending_req *p)
{
	static const char not_leader[] = "etcdserver: not leader";

	if (gw_pending_is_peer(p->tag)) {
		void *owner = p->ctx;
		pending_remove(&s->pending, p);
		if (owner)
			gw_http1_reply(s, owner, 400, "text/plain; charset=utf-8",
				       gw_msg_not_primary, sizeof(gw_msg_not_primary) - 1);
		return;
	}
	gw_fail(s, p, GRPC_STATUS_UNAVAILABLE, not_leader);
}

void gw_ask_stored(struct gw_server *s, struct grpc_call *call, const struct msg_keepalive *m,
		   bool stream)
{
	struct msg_keepalive rec = *m;
	struct pending_req *p = pending_add(&s->pending, PENDING_PROPOSE, grpc_call_id(call),
					    s->now_ns + s->request_timeout_ns);

	if (!p) {
		gw_refuse_too_many(s, call);
		return;
	}
	if (stream)
		p->tag = GW_PENDING_TAG_STREAM;
	int rc;
	if (m->op == MSG_LEASE_KEEPALIVE && !gw_lease_remote(s, m)) {
		p->lease_id = m->lease_id;
		rc = gw_lease_confirm(s, p);
	} else {
		pending_origin(&s->pending, p, &rec.origin);
		rc = gw_push_lease(s, &rec);
	}
	if (rc != 0) {
		pending_remove(&s->pending, p);
		gw_refuse_too_many(s, call);
		return;
	}
	if (stream)
		gw_call_of(call)->inflight++;
	else
		gw_call_set(call, GW_CALL_PENDING, p->request_id);
}

void gw_ask_stored_defrag(struct gw_server *s, struct grpc_call *call)
{
	struct msg_defrag rec = { 0 };
	struct pending_req *p = pending_add(&s->pending, PENDING_PROPOSE, grpc_call_id(call),
					    s->now_ns + GW_DEFRAG_TIMEOUT_NS);

	if (!p) {
		gw_refuse_too_many(s, call);
		return;
	}
	p->seen_term = 0;
	pending_origin(&s->pending, p, &rec.origin);
	if (ring_push(gw_ring(s, SHM_SLOT_TO_STORED), MSG_DEFRAG, &rec, sizeof(rec))) {
		pending_remove(&s->pending, p);
		gw_refuse_too_many(s, call);
		return;
	}
	gw_call_set(call, GW_CALL_PENDING, p->request_id);
}

void gw_read_linearizable(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d)
{
	struct msg_read_index ri;
	struct pending_req *p;
	bool in_ring;

	p = pending_add(&s->pending, PENDING_READ_INDEX, grpc_call_id(call),
			s->now_ns + s->request_timeout_ns);
	uint8_t *out = p ? gw_out_reserve(s, sizeof(ri), &in_ring) : NULL;
	if (!out) {
		if (p)
			pending_remove(&s->pending, p);
		d->ops->free(d);
		gw_refuse_too_many(s, call);
		return;
	}
	p->ctx = d;
	pending_origin(&s->pending, p, &ri.origin);
	memcpy(out, &ri, sizeof(ri));
	gw_out_commit(s, MSG_READ_INDEX, sizeof(ri), in_ring);
	gw_call_set(call, GW_CALL_PENDING, p->request_id);
	s->stats.read_indexes++;
}

int gw_read_index_http(struct gw_server *s, struct gw_http_read *r)
{
	struct msg_read_index ri;
	struct pending_req *p;
	bool in_ring;

	p = pending_add(&s->pending, PENDING_READ_INDEX, 0, s->now_ns + s->request_timeout_ns);
	uint8_t *out = p ? gw_out_reserve(s, sizeof(ri), &in_ring) : NULL;
	if (!out) {
		if (p)
			pending_remove(&s->pending, p);
		return -ENOMEM;
	}
	p->tag = GW_PENDING_TAG_HTTP_READ;
	p->ctx = r;
	pending_origin(&s->pending, p, &ri.origin);
	memcpy(out, &ri, sizeof(ri));
	gw_out_commit(s, MSG_READ_INDEX, sizeof(ri), in_ring);
	s->stats.read_indexes++;
	return 0;
}

void gw_read_index_http_drop(struct gw_server *s, void *owner)
{
	if (!s->pending.v)
		return;
	for (struct pending_req *p = pending_first(&s->pending); p;
	     p = pending_next(&s->pending, p)) {
		struct gw_http_read *r = p->ctx;
		if (p->tag == GW_PENDING_TAG_HTTP_READ && r->owner == owner)
			r->owner = NULL;
	}
}

/* ---- read waits ---- */

static int gw_wait_add(struct gw_server *s, uint64_t rid)
{
	if (s->nwaits == s->waits_cap) {
		uint32_t cap = s->waits_cap ? 2 * s->waits_cap : 64;
		uint64_t *v = realloc(s->waits, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->waits = v;
		s->waits_cap = cap;
	}
	s->waits[s->nwaits++] = rid;
	return 0;
}

/* Runs p's deferred read (its wait is over). */
static void gw_run(struct gw_server *s, struct pending_req *p)
{
	struct gw_deferred *d = p->ctx;
	p->ctx = NULL;
	struct grpc_call *call = gw_take(s, p);
	if (call)
		d->ops->run(s, call, d);
	d->ops->free(d);
	s->stats.results++;
}

/* Serves the reads whose index stored has applied, and tells the waker
 * (and stored's event notice) what the others wait for. */
static void gw_serve_waits(struct gw_server *s)
{
	struct shm_doorbell *db = shm_slot_doorbell(s->r, s->slot.index);
	struct status_stored st;
	uint64_t min = UINT64_MAX;
	uint32_t j = 0;

	if (s->nwaits == 0)
		return;
	if (status_stored_read(s->r, &st))
		st.applied_index = 0;
	for (uint32_t i = 0; i < s->nwaits; i++) {
		struct pending_req *p = pending_find(&s->pending, s->waits[i]);
		if (!p || p->kind != PENDING_READ_WAIT)
			continue; /* answered, cancelled or timed out meanwhile */
		if (p->read_index <= st.applied_index && p->tag == GW_PENDING_TAG_HTTP_READ) {
			struct gw_http_read *r = p->ctx;
			pending_remove(&s->pending, p);
			r->done(s, r, NULL);
			continue;
		}
		if (p->read_index <= st.applied_index &&
		    (gw_pending_is_peer(p->tag) || p->tag == GW_PENDING_TAG_STREAM)) {
			if (gw_lease_local_push(s, p))
				gw_fail(s, p, GRPC_STATUS_RESOURCE_EXHAUSTED, gw_msg_too_many);
			continue;
		}
		if (p->read_index <= st.applied_index) {
			gw_run(s, p);
			continue;
		}
		if (p->read_index < min)
			min = p->read_index;
		s->waits[j++] = s->waits[i];
	}
	s->nwaits = j;
	if (j == 0) {
		atomic_store_explicit(&s->wait_index, 0, memory_order_release);
		shm_doorbell_want_events(db, watch_wants_events(s));
		return;
	}
	/* Ask for stored's notices, full fence, look again (stored publishes,
	 * fences, then checks who wants notices): one of us sees the other. */
	atomic_store_explicit(&s->wait_index, min, memory_order_release);
	shm_doorbell_want_events(db, true);
	shm_full_fence();
	if (status_stored_read(s->r, &st) == 0 && st.applied_index >= min)
		s->more_work = true;
}

/* ---- in: records from raftd and stored ---- */

static void gw_drop(struct gw_server *s, const char *what, const struct msg_origin *o,
		    enum pending_miss why)
{
	s->stats.dropped++;
	log_debug("dropped a record from the rings", LOG_STR("record", what),
		  LOG_STR("reason", pending_miss_name(why)), LOG_U64("member", o->member_id),
		  LOG_U64("slot", o->slot), LOG_U64("generation", o->generation),
		  LOG_U64("request-id", o->request_id));
}

static void gw_malformed(struct gw_server *s, const struct ring_rec *rec)
{
	s->stats.malformed++;
	log_debug("dropped a malformed record from the rings", LOG_U64("type", rec->type),
		  LOG_U64("len", rec->len));
}

/* A message text from a record, NUL-terminated into buf. */
static const char *gw_text(const uint8_t *p, uint32_t len, char *buf, size_t cap)
{
	size_t n = len < cap - 1 ? len : cap - 1;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return buf;
}

/* The shape of a reply record: a fixed header that starts with the
 * origin, then as many bytes as the header's 32-bit count at tail_len_off
 * says (GW_NO_TAIL: none); and the kinds of request it may answer. */
#define GW_NO_TAIL SIZE_MAX
struct gw_reply_fmt {
	const char *what;
	size_t hlen;
	size_t tail_len_off;
	uint32_t kinds; /* 1 << enum pending_kind */
};

static const struct gw_reply_fmt gw_fmt_result = {
	"result", sizeof(struct msg_result), offsetof(struct msg_result, body_len),
	1u << PENDING_PROPOSE,
};
static const struct gw_reply_fmt gw_fmt_reject = {
	"rejection", sizeof(struct msg_reject), offsetof(struct msg_reject, text_len),
	1u << PENDING_PROPOSE | 1u << PENDING_READ_INDEX,
};
static const struct gw_reply_fmt gw_fmt_interim = {
	"interim result", sizeof(struct msg_result_interim), GW_NO_TAIL,
	1u << PENDING_PROPOSE,
};
static const struct gw_reply_fmt gw_fmt_read_index = {
	"read index", sizeof(struct msg_read_index_reply), GW_NO_TAIL,
	1u << PENDING_READ_INDEX,
};

/* Copies rec's header into hdr and finds the request it answers; NULL
 * (counted, logged at debug) when the record is malformed or answers
 * nothing of this process. */
static struct pending_req *gw_reply(struct gw_server *s, const struct ring_rec *rec,
				    const struct gw_reply_fmt *f, void *hdr)
{
	struct msg_origin o;
	enum pending_miss why;
	uint32_t tail = 0;

	if (rec->len < f->hlen) {
		gw_malformed(s, rec);
		return NULL;
	}
	memcpy(hdr, rec->data, f->hlen);
	if (f->tail_len_off != GW_NO_TAIL)
		memcpy(&tail, (const uint8_t *)hdr + f->tail_len_off, sizeof(tail));
	if ((uint64_t)f->hlen + tail != rec->len) {
		gw_malformed(s, rec);
		return NULL;
	}
	memcpy(&o, hdr, sizeof(o));
	struct pending_req *p = pending_match(&s->pending, &o, &why);
	if (!p || !(f->kinds & 1u << p->kind)) {
		gw_drop(s, f->what, &o, p ? PENDING_MISS_UNKNOWN : why);
		return NULL;
	}
	return p;
}

static void gw_on_result(struct gw_server *s, const struct ring_rec *rec)
{
	struct msg_result h;
	char text[GRPC_MESSAGE_MAX + 1];
	struct pending_req *p = gw_reply(s, rec, &gw_fmt_result, &h);

	if (!p)
		return;
	const uint8_t *body = (const uint8_t *)rec->data + sizeof(h);
	if (gw_pending_is_peer(p->tag)) {
		gw_lease_peer_answer(s, p, &h, body);
		return;
	}
	if (p->tag == GW_PENDING_TAG_STREAM) {
		/* one answer of a stream (a lease keepalive): the call goes on,
		 * unless the client half-closed and this was the last */
		struct grpc_call *sc = grpc_call_find(s->grpc, p->call_id);
		pending_remove(&s->pending, p);
		s->stats.results++;
		if (!sc)
			return;
		struct gw_call *g = gw_call_of(sc);
		if (g->inflight)
			g->inflight--;
		if (h.status != 0)
			grpc_call_finish(sc, gw_status(h.status),
					 gw_text(body, h.body_len, text, sizeof(text)));
		else if (grpc_call_send(sc, body, h.body_len) != 0)
			grpc_call_finish(sc, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		else if (g->half_closed && g->inflight == 0)
			grpc_call_finish(sc, GRPC_STATUS_OK, NULL);
		return;
	}
	struct gw_deferred *d = p->ctx;
	if (d && d->ops->result) {
		/* a step of a service's own: its maker takes the result */
		p->ctx = NULL;
		struct grpc_call *dc = gw_take(s, p);
		s->stats.results++;
		if (dc)
			d->ops->result(s, dc, d, h.status, body, h.body_len);
		d->ops->free(d);
		return;
	}
	struct grpc_call *call = gw_take(s, p);
	s->stats.results++;
	if (call)
		gw_answer_result(call, h.status, body, h.body_len);
}

/* stored still works on a request it applied (a physical compaction's
 * deletion): its deadline starts again from now, and it waits on. Only a
 * unary call's proposal waits this way; nothing is answered here. */
static void gw_on_interim(struct gw_server *s, const struct ring_rec *rec)
{
	struct msg_result_interim h;
	struct pending_req *p = gw_reply(s, rec, &gw_fmt_interim, &h);
	int64_t deadline = s->now_ns + s->request_timeout_ns;

	if (!p)
		return;
	if (p->tag != 0) {
		gw_drop(s, gw_fmt_interim.what, &h.origin, PENDING_MISS_UNKNOWN);
		return;
	}
	s->stats.interims++;
	if (deadline > p->deadline_ns)
		pending_set_deadline(&s->pending, p, deadline);
}

void gw_answer_result(struct grpc_call *call, int32_t status, const uint8_t *body, size_t len)
{
	char text[GRPC_MESSAGE_MAX + 1];

	if (status != 0) {
		grpc_call_finish(call, gw_status(status), gw_text(body, (uint32_t)len, text, sizeof(text)));
		return;
	}
	if (grpc_call_send(call, body, len) == 0)
		grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	else
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
}

static void gw_on_reject(struct gw_server *s, const struct ring_rec *rec)
{
	struct msg_reject h;
	char text[GRPC_MESSAGE_MAX + 1];
	struct pending_req *p = gw_reply(s, rec, &gw_fmt_reject, &h);

	s->propose_term_read = false; /* its term may have moved on */
	if (!p)
		return;
	s->stats.results++;
	gw_fail(s, p, gw_status(h.status),
		gw_text((const uint8_t *)rec->data + sizeof(h), h.text_len, text, sizeof(text)));
}

static void gw_on_read_index(struct gw_server *s, const struct ring_rec *rec)
{
	struct msg_read_index_reply h;
	struct pending_req *p = gw_reply(s, rec, &gw_fmt_read_index, &h);

	if (!p)
		return;
	if (h.status != 0 && gw_pending_renews(p)) {
		/* a renewal on a member that could not confirm it leads: what
		 * a lessor that is not primary answers (etcd's LeaseRenew when
		 * ensureLeadership fails), which a client or a forwarding
		 * follower tries elsewhere */
		s->stats.results++;
		gw_lease_not_primary(s, p);
		return;
	}
	if (h.status != 0) {
		/* raftd could not confirm its leadership: etcd's answer when the
		 * leader changes under a read, which clients retry */
		s->stats.results++;
		gw_fail(s, p, gw_status(h.status), gw_msg_leader_changed);
		return;
	}
	pending_set_kind(&s->pending, p, PENDING_READ_WAIT);
	p->read_index = h.index;
	p->lease_term = h.term;
	if (gw_wait_add(s, p->request_id)) {
		s->stats.too_many++;
		gw_fail(s, p, GRPC_STATUS_RESOURCE_EXHAUSTED, gw_msg_too_many);
	}
}

static void gw_on_ack(struct gw_server *s, enum shm_role role, const struct ring_rec *rec)
{
	struct hello_msg m;

	if (rec->len != sizeof(m)) {
		gw_malformed(s, rec);
		return;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.version != HELLO_VERSION || m.slot != s->slot.index ||
	    m.generation != s->slot.generation) {
		s->stats.dropped++;
		log_debug("dropped an ack for another slot generation",
			  LOG_STR("peer", hello_role_name(role)), LOG_U64("slot", m.slot),
			  LOG_U64("generation", m.generation));
		return;
	}
	s->attached[role] = true;
	log_info("attached", LOG_STR("peer", hello_role_name(role)), LOG_U64("slot", s->slot.index),
		 LOG_U64("generation", s->slot.generation), LOG_I64("peer-pid", m.pid));
}

static void gw_on_record(struct gw_server *s, enum shm_role from, const struct ring_rec *rec)
{
	switch (rec->type) {
	case HELLO_TYPE_ACK:
		gw_on_ack(s, from, rec);
		return;
	case MSG_RESULT:
		/* stored answers applied requests; raftd the requests it
		 * serves itself (MoveLeader) */
		gw_on_result(s, rec);
		return;
	case MSG_RESULT_INTERIM:
		if (from == SHM_ROLE_STORED) {
			gw_on_interim(s, rec);
			return;
		}
		break;
	case MSG_READ_INDEX_REPLY:
		if (from == SHM_ROLE_RAFTD) {
			gw_on_read_index(s, rec);
			return;
		}
		break;
	case MSG_PROPOSE_REJECT:
		gw_on_reject(s, rec);
		return;
	default:
		break;
	}
	s->stats.dropped++;
	log_debug("dropped a record of a type this gateway does not take",
		  LOG_STR("peer", hello_role_name(from)), LOG_U64("type", rec->type),
		  LOG_U64("len", rec->len));
}

/* Takes up to a batch of records; false when more wait. */
static bool gw_drain(struct gw_server *s, enum shm_slot_ring which, enum shm_role from)
{
	struct ring *ring = gw_ring(s, which);
	struct ring_rec rec;
	uint32_t n;
	int rc = 0;

	for (n = 0; n < GW_RING_BATCH; n++) {
		rc = ring_peek(ring, &rec);
		if (rc)
			break;
		gw_on_record(s, from, &rec);
		ring_consume(ring, &rec);
	}
	ring_release_consumed(ring);
	if (n == GW_RING_BATCH)
		s->more_work = true;
	if (rc == -EIO && !s->ring_failed[from]) {
		log_error("the slot's reply ring is corrupt; restart this gateway",
			  LOG_STR("peer", hello_role_name(from)), LOG_U64("slot", s->slot.index));
		s->ring_failed[from] = true;
	}
	return n < GW_RING_BATCH;
}

/*
 * Answers "etcdserver: leader changed" to the proposals lost in a leader
 * change, about one election after it instead of at their timeout.
 *
 * A proposal sent while raftd was in term t is either in the log as an
 * entry of term t (raftd refuses it otherwise: MSG_PROPOSE_F_SEEN_TERM)
 * or nowhere. Once an entry of a later term T is committed, every entry
 * of term t that will ever commit lies before T's first entry N (raftd's
 * settled_term and settled_index). So when stored has delivered the
 * results up to N, and they have been taken from the ring, a proposal of
 * an earlier term still waiting was lost. delivered is stored's
 * delivered index read before this turn drained the ring.
 *
 * One case stays open, as it is for etcd's timeouts: a request forwarded
 * to a leader that took it only after it had lost its term and won a new
 * one. The client's error then means, like "request timed out", that
 * the outcome is unknown.
 */
static void gw_settle(struct gw_server *s, uint64_t delivered)
{
	struct status_raftd rs;
	struct pending_req *p, *next;
	uint64_t answered = 0;

	if (s->pending.count == 0 || status_raftd_read(s->r, &rs) != 0 ||
	    rs.settled_term <= s->settled_done || delivered < rs.settled_index)
		return;
	for (p = pending_first(&s->pending); p; p = next) {
		next = pending_next(&s->pending, p);
		if (p->kind == PENDING_PROPOSE && p->seen_term && p->seen_term < rs.settled_term) {
			answered++;
			gw_fail(s, p, GRPC_STATUS_UNAVAILABLE, gw_msg_leader_changed);
		}
	}
	s->settled_done = rs.settled_term;
	if (answered) {
		s->stats.leader_changed += answered;
		shm_metric_add(s->metrics, SHM_M_PROPOSALS_FAILED, answered);
		log_info("answered proposals lost in a leader change", LOG_U64("count", answered),
			 LOG_U64("term", rs.settled_term), LOG_U64("settled-index", rs.settled_index));
	}
}

static void gw_expire(struct gw_server *s)
{
	struct pending_req *p;

	while ((p = pending_first(&s->pending)) != NULL && p->deadline_ns <= s->now_ns) {
		bool applying = p->kind == PENDING_READ_WAIT;
		s->stats.timeouts++;
		if (p->kind == PENDING_PROPOSE)
			shm_metric_add(s->metrics, SHM_M_PROPOSALS_FAILED, 1);
		else if (p->kind == PENDING_READ_INDEX)
			shm_metric_add(s->metrics, SHM_M_READ_INDEX_FAILED, 1);
		gw_fail(s, p, GRPC_STATUS_UNAVAILABLE, applying ? gw_msg_timeout_apply : gw_msg_timeout);
	}
}

void gw_rings_turn(struct gw_server *s)
{
	/* before the drain: the results it covers are in the ring by now */
	uint64_t delivered = status_stored_delivered(s->r);
	bool drained;

	gw_drain(s, SHM_SLOT_FROM_RAFTD, SHM_ROLE_RAFTD);
	drained = gw_drain(s, SHM_SLOT_FROM_STORED, SHM_ROLE_STORED);
	gw_serve_waits(s);
	if (drained)
		gw_settle(s, delivered);
	gw_expire(s);
}

int64_t gw_rings_next_deadline(struct gw_server *s)
{
	int64_t next = pending_next_deadline(&s->pending);
	/* requests wait: look at raftd's settled term now and then */
	if (s->pending.count && s->now_ns + GW_SETTLE_POLL_NS < next)
		next = s->now_ns + GW_SETTLE_POLL_NS;
	if (s->backlog_len > 0 && s->now_ns + GW_BACKLOG_RETRY_NS < next)
		next = s->now_ns + GW_BACKLOG_RETRY_NS;
	return next;
}
