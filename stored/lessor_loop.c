/* The lessor's part of stored's loop (see lessor_loop.h). */
#include "stored/lessor_loop.h"
#include "stored/auth_check.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "base/clock/clock.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "shm/msg.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/status.h"

void lessor_loop_init(struct lessor_loop *ll, struct shm_region *r, struct lessor *l,
		      struct stored_results *results, uint64_t member_id, uint64_t cluster_id)
{
	memset(ll, 0, sizeof(*ll));
	ll->r = r;
	ll->lessor = l;
	ll->results = results;
	ll->member_id = member_id;
	ll->cluster_id = cluster_id;
	arena_init(&ll->arena);
}

void lessor_loop_fini(struct lessor_loop *ll)
{
	arena_release(&ll->arena);
}

int lessor_loop_load(struct lessor *l, struct mvcc_store *s)
{
	Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	struct mvcc_range_result res;
	static uint8_t zero[1];
	int rc = mvcc_batch_begin(s);

	if (rc)
		return rc;
	rc = lessor_load(l, mvcc_batch_txn(s));
	if (rc || lessor_count(l) == 0)
		goto out_abort;
	/* every live key (the empty key is not a valid one) */
	rr.key.data = zero;
	rr.key.len = 1;
	rr.range_end.data = zero;
	rr.range_end.len = 1;
	mvcc_range_result_init(&res);
	rc = mvcc_range(mvcc_batch_view(s), &rr, &res);
	for (size_t i = 0; rc == 0 && i < res.n; i++)
		if (res.kvs[i].f.lease)
			rc = lessor_attach_key(l, res.kvs[i].f.lease, res.kvs[i].f.key,
					       res.kvs[i].f.key_len);
	mvcc_range_result_free(&res);
	if (rc == 0)
		log_info("loaded the leases", LOG_U64("count", lessor_count(l)));
out_abort:
	mvcc_batch_abort(s);
	return rc;
}

static void ll_header(const struct lessor_loop *ll, int64_t revision,
		      Etcdserverpb__ResponseHeader *h)
{
	struct status_raftd rs;

	etcdserverpb__response_header__init(h);
	h->cluster_id = ll->cluster_id;
	h->member_id = ll->member_id;
	h->revision = revision;
	if (status_raftd_read(ll->r, &rs) == 0)
		h->raft_term = rs.term;
}

/* Packs m into the arena as the answer to o. */
static void ll_answer(struct lessor_loop *ll, const struct msg_origin *o, int64_t revision,
		      const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *p = arena_alloc(&ll->arena, n ? n : 1);
	struct msg_result h = { .origin = *o, .revision = (uint64_t)revision };

	if (!p) {
		static const char oom[] = "etcdserver: out of memory";
		h.status = 8;
		h.body_len = sizeof(oom) - 1;
		stored_results_stage(ll->results, &h, oom);
		return;
	}
	protobuf_c_message_pack(m, p);
	h.body_len = (uint32_t)n;
	stored_results_stage(ll->results, &h, p);
}

static int64_t ll_now(const struct lessor_loop *ll)
{
	return ll->clock ? ll->clock() : clock_now_ns();
}

/* Answers o with gRPC status code and its text. */
static void ll_fail(struct lessor_loop *ll, const struct msg_origin *o, int32_t code,
		    const char *text)
{
	struct msg_result h = { .origin = *o, .status = code,
				.body_len = (uint32_t)strlen(text) };
	stored_results_stage(ll->results, &h, text);
}

static void ll_refuse(struct lessor_loop *ll, const struct msg_origin *o, int err)
{
	ll_fail(ll, o, lessor_grpc_code(err), lessor_strerror(err));
}

/* A checkpoint of 0 for id: the first renewal after a checkpoint resets
 * the remaining TTL of every member (invariant 8, docs/invariants.md). */
static void ll_propose_checkpoints(struct lessor_loop *ll, const struct lessor_cp *cps, size_t n);

/* The answer to a keepalive of lease id: its TTL, 0 for a lease that is
 * gone (etcd's v3rpc turns ErrLeaseNotFound into TTL 0). */
static void ll_keepalive_answer(struct lessor_loop *ll, const struct msg_origin *o, int64_t id,
				int64_t ttl, int64_t revision)
{
	Etcdserverpb__ResponseHeader hdr;
	Etcdserverpb__LeaseKeepAliveResponse r = ETCDSERVERPB__LEASE_KEEP_ALIVE_RESPONSE__INIT;

	ll_header(ll, revision, &hdr);
	r.header = &hdr;
	r.id = id;
	r.ttl = ttl;
	ll_answer(ll, o, revision, &r.base);
}

/* Answers the keepalives that waited for a lease now revoked, or for a
 * lessor now demoted or in another term than theirs; the others wait on.
 * etcd's Renew waits on the demotion of the promotion it was asked in: a
 * later promotion extends every lease, the expired one too, so a waiter of
 * an earlier term would wait for a revoke nobody proposes. A waiter whose
 * gateway's slot was claimed again is dropped (its answer would be too:
 * stored_results_stage), and one that waited as long as its gateway
 * does is answered as the gateway has answered it (gatewayd/rings.c,
 * gw_expire): request ids are never reused within a slot's generation
 * (gatewayd/pending.h), so that answer reaches no other request. */
static void ll_settle_waiters(struct lessor_loop *ll, int64_t revision)
{
	static const char timed_out[] = "etcdserver: request timed out";
	size_t keep = 0;
	bool primary = lessor_is_primary(ll->lessor);
	uint64_t term = lessor_term(ll->lessor);
	int64_t now = ll_now(ll);
	int64_t life = ll->waiter_life_ns > 0 ? ll->waiter_life_ns : LESSOR_WAITER_LIFE_NS;

	for (size_t i = 0; i < ll->nwaiters; i++) {
		struct lessor_waiter *w = &ll->waiters[i];
		if (w->origin.generation != shm_slot_generation(ll->r, w->origin.slot))
			continue;
		if (!primary || w->term != term)
			ll_refuse(ll, &w->origin, LESSOR_ERR_NOT_PRIMARY);
		else if (!lessor_exists(ll->lessor, w->id))
			ll_keepalive_answer(ll, &w->origin, w->id, 0, revision);
		else if (now - w->parked_ns >= life)
			ll_fail(ll, &w->origin, 14, timed_out); /* UNAVAILABLE */
		else
			ll->waiters[keep++] = *w;
	}
	ll->nwaiters = keep;
}

static void ll_keepalive(struct lessor_loop *ll, const struct msg_keepalive *m, int64_t revision)
{
	Etcdserverpb__ResponseHeader hdr;
	int64_t now = ll_now(ll);

	ll_header(ll, revision, &hdr);
	switch (m->op) {
	case MSG_LEASE_KEEPALIVE: {
		int64_t ttl = 0;
		bool clear = false;
		/* renewed only by the primary of the term raftd confirmed this
		 * member led in after the renewal came (invariant 8) */
		int rc = m->term == 0 || m->term != lessor_term(ll->lessor) ?
				 LESSOR_ERR_NOT_PRIMARY :
				 lessor_renew(ll->lessor, m->lease_id, now, &ttl, &clear);
		if (rc == LESSOR_ERR_NOT_PRIMARY) {
			ll_refuse(ll, &m->origin, rc);
			return;
		}
		if (rc == LESSOR_ERR_EXPIRED && ll->nwaiters < LESSOR_WAITERS_MAX) {
			ll->waiters[ll->nwaiters++] = (struct lessor_waiter){
				m->origin, m->lease_id, lessor_term(ll->lessor), now
			};
			return;
		}
		if (clear) {
			struct lessor_cp cp = { m->lease_id, 0 };
			ll_propose_checkpoints(ll, &cp, 1);
		}
		/* etcd answers an unknown lease with TTL 0 */
		ll_keepalive_answer(ll, &m->origin, m->lease_id, rc == 0 ? ttl : 0, revision);
		return;
	}
	case MSG_LEASE_TIME_TO_LIVE: {
		Etcdserverpb__LeaseTimeToLiveResponse r = ETCDSERVERPB__LEASE_TIME_TO_LIVE_RESPONSE__INIT;
		if (!lessor_is_primary(ll->lessor)) {
			ll_refuse(ll, &m->origin, LESSOR_ERR_NOT_PRIMARY);
			return;
		}
		int rc = lessor_time_to_live(ll->lessor, m->lease_id, now,
					     (m->flags & MSG_LEASE_F_KEYS) != 0, &ll->arena, &r.ttl,
					     &r.grantedttl, &r.keys, &r.n_keys);
		r.header = &hdr;
		r.id = m->lease_id;
		if (rc == LESSOR_ERR_NOT_FOUND) {
			/* etcd's v3rpc answers an unknown lease with TTL -1 */
			r.ttl = -1;
			r.grantedttl = 0;
			r.n_keys = 0;
		} else if (rc) {
			ll_refuse(ll, &m->origin, rc);
			return;
		}
		ll_answer(ll, &m->origin, revision, &r.base);
		return;
	}
	case MSG_LEASE_LEASES: {
		Etcdserverpb__LeaseLeasesResponse r = ETCDSERVERPB__LEASE_LEASES_RESPONSE__INIT;
		int64_t *ids;
		size_t n;
		if (lessor_ids(ll->lessor, &ll->arena, &ids, &n) != 0) {
			ll_refuse(ll, &m->origin, -ENOMEM);
			return;
		}
		Etcdserverpb__LeaseStatus *st = arena_alloc(&ll->arena, (n ? n : 1) * sizeof(*st));
		Etcdserverpb__LeaseStatus **sp = arena_alloc(&ll->arena, (n ? n : 1) * sizeof(*sp));
		if (!st || !sp) {
			ll_refuse(ll, &m->origin, -ENOMEM);
			return;
		}
		for (size_t i = 0; i < n; i++) {
			etcdserverpb__lease_status__init(&st[i]);
			st[i].id = ids[i];
			sp[i] = &st[i];
		}
		r.header = &hdr;
		r.n_leases = n;
		r.leases = sp;
		ll_answer(ll, &m->origin, revision, &r.base);
		return;
	}
	default:
		ll_refuse(ll, &m->origin, -EINVAL);
		return;
	}
}

void lessor_loop_requests(struct lessor_loop *ll, int64_t revision)
{
	uint32_t n = shm_slot_count(ll->r);
	size_t waiting = ll->nwaiters;
	bool any = false;

	if (waiting) {
		ll_settle_waiters(ll, revision);
		any = ll->nwaiters != waiting;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct ring *in = shm_slot_ring(ll->r, i, SHM_SLOT_TO_STORED);
		struct ring_rec rec;

		while (in && ring_peek(in, &rec) == 0) {
			struct msg_keepalive m;
			if (hello_serve_record(ll->r, SHM_ROLE_STORED, i, &rec)) {
				/* answered */
			} else if (rec.type == MSG_KEEPALIVE && rec.len == sizeof(m)) {
				memcpy(&m, rec.data, sizeof(m));
				if (m.origin.slot == i) {
					ll_keepalive(ll, &m, revision);
					any = true;
				}
			} else if (rec.type == MSG_DEFRAG && ll->other) {
				ll->other(ll->other_arg, i, &rec);
			} else {
				log_debug("dropped a record stored does not serve", LOG_U64("slot", i),
					  LOG_U64("type", rec.type), LOG_U64("len", rec.len));
			}
			ring_release(in, &rec);
		}
	}
	if (any) {
		stored_results_publish(ll->results);
		stored_results_wake(ll->results);
	}
	arena_release(&ll->arena);
}

/* Pushes one InternalRaftRequest of stored's own to raftd with the
 * lessor's term; as_root: as the root user while auth is enabled (etcd
 * revokes expired leases WithRoot, for the revoke of a lease with keys is
 * checked at apply). */
static void ll_propose(struct lessor_loop *ll, Etcdserverpb__InternalRaftRequest *req,
		       bool as_root)
{
	Etcdserverpb__RequestHeader h = ETCDSERVERPB__REQUEST_HEADER__INIT;
	struct ring *ring = shm_daemon_ring(ll->r, SHM_RING_STORED_PROPOSALS);
	struct msg_propose mp = { .term = lessor_term(ll->lessor) };

	h.id = ++ll->proposal_id;
	if (as_root)
		stored_auth_check_root_header(ll->auth, &h);
	req->header = &h;
	size_t n = protobuf_c_message_get_packed_size(&req->base);
	uint8_t *buf = arena_alloc(&ll->arena, sizeof(mp) + n);
	if (!buf)
		return;
	mp.data_len = (uint32_t)n;
	memcpy(buf, &mp, sizeof(mp));
	protobuf_c_message_pack(&req->base, buf + sizeof(mp));
	int rc = ring_stage(ring, MSG_PROPOSE, buf, (uint32_t)(sizeof(mp) + n));
	if (rc)
		log_warn("cannot propose a lease entry now; it is asked again later", LOG_ERRNO(rc));
}

static void ll_propose_checkpoints(struct lessor_loop *ll, const struct lessor_cp *cps, size_t n)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseCheckpointRequest cr = ETCDSERVERPB__LEASE_CHECKPOINT_REQUEST__INIT;
	Etcdserverpb__LeaseCheckpoint *v = arena_alloc(&ll->arena, n * sizeof(*v));
	Etcdserverpb__LeaseCheckpoint **pv = arena_alloc(&ll->arena, n * sizeof(*pv));

	if (!v || !pv || n == 0)
		return;
	for (size_t i = 0; i < n; i++) {
		etcdserverpb__lease_checkpoint__init(&v[i]);
		v[i].id = cps[i].id;
		v[i].remaining_ttl = cps[i].remaining;
		pv[i] = &v[i];
	}
	cr.n_checkpoints = n;
	cr.checkpoints = pv;
	req.lease_checkpoint = &cr;
	ll_propose(ll, &req, false);
	ring_publish(shm_daemon_ring(ll->r, SHM_RING_STORED_PROPOSALS));
}

void lessor_loop_tick(struct lessor_loop *ll)
{
	struct status_raftd rs;
	int64_t now = ll_now(ll);

	if (status_raftd_read(ll->r, &rs) != 0)
		return;
	if (lessor_set_primary(ll->lessor, rs.is_leader, rs.term, now))
		log_info("promoted the lessor: every lease extended", LOG_U64("term", rs.term),
			 LOG_U64("leases", lessor_count(ll->lessor)));
	if (!lessor_is_primary(ll->lessor) || now - ll->tick_ns < LESSOR_TICK_NS)
		return;
	ll->tick_ns = now;

	int64_t ids[LESSOR_REVOKE_BATCH];
	size_t n = lessor_expired(ll->lessor, now, ids, LESSOR_REVOKE_BATCH);
	for (size_t i = 0; i < n; i++) {
		Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
		Etcdserverpb__LeaseRevokeRequest rr = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
		rr.id = ids[i];
		req.lease_revoke = &rr;
		ll_propose(ll, &req, true);
	}
	struct lessor_cp *cps = arena_alloc(&ll->arena, LESSOR_CHECKPOINT_BATCH * sizeof(*cps));
	size_t ncp = cps ? lessor_due_checkpoints(ll->lessor, now, cps, LESSOR_CHECKPOINT_BATCH) : 0;
	if (ncp)
		ll_propose_checkpoints(ll, cps, ncp);
	if (n)
		ring_publish(shm_daemon_ring(ll->r, SHM_RING_STORED_PROPOSALS));
	arena_release(&ll->arena);
}

int lessor_loop_timeout_ms(const struct lessor_loop *ll)
{
	int64_t next = lessor_next_deadline(ll->lessor);
	int64_t now = ll_now(ll);
	/* keepalives waiting for a revoke or a demotion: look again soon
	 * (a revoke's apply wakes the loop; a demotion may not) */
	int cap = ll->nwaiters ? (int)(LESSOR_TICK_NS / 5 / 1000000) : 60000;

	if (next == INT64_MAX)
		return ll->nwaiters ? cap : -1;
	if (next < ll->tick_ns + LESSOR_TICK_NS)
		next = ll->tick_ns + LESSOR_TICK_NS;
	int64_t ms = (next - now) / 1000000 + 1;
	return ms < 1 ? 1 : ms > cap ? cap : (int)ms;
}
