
#include "raftd/proposals.h"

#include <errno.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/wal/walrec.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "shm/ring.h"
#include "shm/slot.h"

/* Index of stored's proposal ring in the per-ring bitmaps (after the
 * slots). */
#define PROPOSALS_STORED(p) ((p)->n_slots)

static size_t bitmap_words(uint32_t bits)
{
	return (bits + 63) / 64;
}

static bool bit_test(const uint64_t *m, uint32_t i)
{
	return (m[i / 64] >> (i % 64)) & 1;
}

static void bit_set(uint64_t *m, uint32_t i)
{
	m[i / 64] |= 1ull << (i % 64);
}

int proposals_init(struct proposals *p, struct shm_region *r)
{
	memset(p, 0, sizeof(*p));
	p->r = r;
	p->n_slots = shm_slot_count(r);
	p->ents = raftd_calloc(PROPOSALS_BATCH, sizeof(*p->ents));
	p->origins = raftd_calloc(PROPOSALS_BATCH, sizeof(*p->origins));
	/* staged replies, then the rings whose failure was logged */
	p->staged = raftd_calloc(2 * bitmap_words(p->n_slots + 1), sizeof(*p->staged));
	if (!p->ents || !p->origins || !p->staged) {
		proposals_free(p);
		return -ENOMEM;
	}
	return 0;
}

static void held_clear(struct proposals *p)
{
	for (size_t i = 0; i < p->n_held; i++)
		raftd_free(p->held[i].data);
	p->n_held = 0;
	p->held_bytes = 0;
}

void proposals_free(struct proposals *p)
{
	held_clear(p);
	raftd_free(p->held);
	p->held = NULL;
	p->cap_held = 0;
	raftd_free(p->ents);
	raftd_free(p->origins);
	raftd_free(p->reads);
	raftd_free(p->staged);
	p->ents = NULL;
	p->origins = NULL;
	p->reads = NULL;
	p->staged = NULL;
	p->n_reads = p->cap_reads = 0;
}

bool proposals_leader_confirmed(const struct raft *raft)
{
	const struct raftlog *l = raft_log(raft);
	return raft_is_leader(raft) && raftlog_term(l, l->committed) == raft_term(raft);
}

/* ---- replies ---- */

/* Stages a reply (hdr then body) on slot's reply ring if the origin is
 * the slot's current generation. */
static void reply(struct proposals *p, uint32_t slot, const struct msg_origin *o,
		  uint32_t type, const void *hdr, size_t hdr_len, const void *body,
		  size_t body_len)
{
	struct ring *ring = shm_slot_ring(p->r, slot, SHM_SLOT_FROM_RAFTD);
	void *dst;

	if (!ring || shm_slot_generation(p->r, slot) != o->generation) {
		p->stats.replies_stale++;
		return;
	}
	uint32_t len = (uint32_t)(hdr_len + body_len);
	int rc = ring_reserve(ring, len, &dst);
	if (rc) {
		p->stats.replies_full++;
		log_debug("dropped a reply to a gateway", LOG_U64("slot", slot),
			  LOG_U64("generation", o->generation), LOG_U64("type", type),
			  LOG_ERRNO(rc));
		return;
	}
	memcpy(dst, hdr, hdr_len);
	if (body_len)
		memcpy((uint8_t *)dst + hdr_len, body, body_len);
	if (ring_commit(ring, type, len) == 0)
		bit_set(p->staged, slot);
}

static void reject(struct proposals *p, uint32_t slot, const struct msg_origin *o,
		   int32_t status, const char *text)
{
	struct msg_reject h = { .origin = *o, .status = status,
				.text_len = (uint32_t)strlen(text) };
	reply(p, slot, o, MSG_PROPOSE_REJECT, &h, sizeof(h), text, h.text_len);
	p->stats.rejected++;
}

void proposals_answer(struct proposals *p, uint32_t slot, const struct msg_origin *o,
		      int32_t status, const char *text, const void *body, size_t body_len)
{
	if (status) {
		reject(p, slot, o, status, text);
		return;
	}
	struct msg_result h = { .origin = *o, .body_len = (uint32_t)body_len };
	reply(p, slot, o, MSG_RESULT, &h, sizeof(h), body, body_len);
}

static void read_reply(struct proposals *p, const struct proposals_read *rd, uint64_t index,
		       uint64_t term, int32_t status)
{
	struct msg_read_index_reply h = { .origin = rd->origin, .index = index, .term = term,
					  .status = status };
	reply(p, rd->slot, &rd->origin, MSG_READ_INDEX_REPLY, &h, sizeof(h), NULL, 0);
	if (status)
		p->stats.reads_failed++;
	else
		p->stats.reads_answered++;
}

/* Why the core refused (raft_propose's or raft_read_index's rc), as etcd
 * says it. */
static void refusal(const struct raft *raft, int rc, int32_t *status, const char **text)
{
	if (rc == -ENOMEM) {
		*status = PROPOSALS_GRPC_RESOURCE_EXHAUSTED;
		*text = PROPOSALS_MSG_TOO_MANY;
	} else if (raft_leader(raft) == 0) {
		*status = PROPOSALS_GRPC_UNAVAILABLE;
		*text = PROPOSALS_MSG_NO_LEADER;
	} else {
		/* a follower; forwarding to the leader needs the peer links */
		*status = PROPOSALS_GRPC_FAILED_PRECONDITION;
		*text = PROPOSALS_MSG_NOT_LEADER;
	}
}

void proposals_flush(struct proposals *p)
{
	for (uint32_t w = 0; w < bitmap_words(p->n_slots + 1); w++) {
		while (p->staged[w]) {
			uint32_t slot = w * 64 + (uint32_t)__builtin_ctzll(p->staged[w]);
			p->staged[w] &= p->staged[w] - 1;
			ring_publish(shm_slot_ring(p->r, slot, SHM_SLOT_FROM_RAFTD));
		}
	}
}

/* ---- proposals ---- */

/* The ring's batch (p->ents[0..n)) to the core; refusals answered. */
static void propose_batch(struct proposals *p, struct raft *raft, size_t n, bool from_stored,
			  uint32_t slot)
{
	int32_t status;
	const char *text;

	if (n == 0)
		return;
	int rc = raft_propose(raft, p->ents, n);
	if (rc == -EAGAIN && !from_stored && p->forward && raft_leader(raft) &&
	    p->forward(p->forward_arg, raft_leader(raft), p->ents, n) == 0) {
		p->stats.forwarded += n;
		return;
	}
	if (rc == 0) {
		p->stats.proposed += n;
		return;
	}
	if (from_stored) {
		p->stats.dropped_stored += n;
		return;
	}
	refusal(raft, rc, &status, &text);
	for (size_t i = 0; i < n; i++)
		reject(p, slot, &p->origins[i], status, text);
}

/* ---- proposals held while no leader is known ---- */

/* Copies a gateway's proposal into the hold queue; false when holding is
 * off, the queue is full or memory is short (it is refused as before). */
static bool hold(struct proposals *p, uint32_t slot, const struct msg_propose *h,
		 const struct raft_entry *e)
{
	uint8_t *data = NULL;

	if (!p->hold_ticks)
		return false;
	if (p->n_held >= PROPOSALS_HOLD_MAX || p->held_bytes + e->len > PROPOSALS_HOLD_BYTES) {
		p->stats.held_full++;
		return false;
	}
	if (raftd_reserve((void **)&p->held, &p->cap_held, p->n_held + 1, sizeof(*p->held), 64))
		return false;
	if (e->len) {
		data = raftd_malloc(e->len);
		if (!data)
			return false;
		memcpy(data, e->data, e->len);
	}
	p->held[p->n_held++] = (struct proposals_held){
		.origin = h->origin, .slot = slot, .flags = h->flags, .term = h->term,
		.held_at = p->ticks, .data = data, .len = e->len,
	};
	p->held_bytes += e->len;
	p->stats.held++;
	return true;
}

/* A leader is known (or raftd stops): the held proposals go to the core
 * (or the leader) in arrival order, a run of one slot's per batch. */
static void release_held(struct proposals *p, struct raft *raft, bool stopping)
{
	size_t i = 0;

	while (i < p->n_held) {
		uint32_t slot = p->held[i].slot;
		size_t n = 0;
		for (; i < p->n_held && p->held[i].slot == slot && n < PROPOSALS_BATCH; i++) {
			const struct proposals_held *q = &p->held[i];
			if (stopping) {
				reject(p, slot, &q->origin, PROPOSALS_GRPC_UNAVAILABLE,
				       PROPOSALS_MSG_STOPPED);
			} else if ((q->flags & MSG_PROPOSE_F_SEEN_TERM) && q->term != raft_term(raft)) {
				/* as take_proposal: its stamp is of a term gone */
				p->stats.stale_term++;
				reject(p, slot, &q->origin, PROPOSALS_GRPC_UNAVAILABLE,
				       PROPOSALS_MSG_LEADER_CHANGED);
			} else {
				p->ents[n] = (struct raft_entry){
					.type = (q->flags & MSG_PROPOSE_F_CONF_CHANGE) ?
							RAFT_ENTRY_CONF_CHANGE : RAFT_ENTRY_NORMAL,
					.len = q->len,
					.data = q->data,
				};
				p->origins[n++] = q->origin;
			}
		}
		p->stats.held_released += n;
		propose_batch(p, raft, n, false, slot);
	}
	held_clear(p);
}

/* Answers the held proposals older than the request timeout. */
static void expire_held(struct proposals *p)
{
	size_t k = 0;

	for (size_t i = 0; i < p->n_held; i++) {
		struct proposals_held *q = &p->held[i];
		if (p->ticks - q->held_at <= p->hold_ticks) {
			p->held[k++] = *q;
			continue;
		}
		reject(p, q->slot, &q->origin, PROPOSALS_GRPC_UNAVAILABLE, PROPOSALS_MSG_TIMEOUT);
		p->stats.held_expired++;
		p->held_bytes -= q->len;
		raftd_free(q->data);
	}
	p->n_held = k;
}

static void malformed(struct proposals *p, uint32_t slot, const struct ring_rec *rec,
		      const char *why)
{
	p->stats.malformed++;
	log_warn(why, LOG_U64("slot", slot), LOG_U64("type", rec->type),
		 LOG_U64("len", rec->len));
}

/* Takes one MSG_PROPOSE into the batch (p->ents[*n]), or answers it. */
static void take_proposal(struct proposals *p, struct raft *raft, const struct ring_rec *rec,
			  bool from_stored, uint32_t slot, bool stopping, size_t *n)
{
	struct msg_propose h;

	if (rec->len < sizeof(h)) {
		malformed(p, slot, rec, "dropped a proposal record shorter than its header");
		return;
	}
	memcpy(&h, rec->data, sizeof(h));
	if (h.data_len != rec->len - sizeof(h) || (!from_stored && h.origin.slot != slot)) {
		malformed(p, slot, rec, "dropped a proposal record whose header does not match it");
		return;
	}
	bool seen_term = !from_stored && (h.flags & MSG_PROPOSE_F_SEEN_TERM);
	if (seen_term && h.term != raft_term(raft)) {
		/* sent before a term change the gateway did not see: its
		 * settled-term rule would take it for lost; it is, now */
		p->stats.stale_term++;
		reject(p, slot, &h.origin, PROPOSALS_GRPC_UNAVAILABLE,
		       PROPOSALS_MSG_LEADER_CHANGED);
		return;
	}
	if (!seen_term && h.term != 0 &&
	    (raft_term(raft) != h.term || !proposals_leader_confirmed(raft))) {
		/* a lease revoke or checkpoint of another term (invariant 8) */
		p->stats.dropped_term++;
		log_debug("dropped a proposal made in another term", LOG_U64("term", h.term),
			  LOG_U64("current-term", raft_term(raft)));
		return;
	}
	struct raft_entry e = {
		.type = (h.flags & MSG_PROPOSE_F_CONF_CHANGE) ? RAFT_ENTRY_CONF_CHANGE :
								 RAFT_ENTRY_NORMAL,
		.len = h.data_len,
		.data = h.data_len ? (uint8_t *)rec->data + sizeof(h) : NULL,
	};
	int32_t status = 0;
	const char *text = NULL;
	if (stopping) {
		status = PROPOSALS_GRPC_UNAVAILABLE;
		text = PROPOSALS_MSG_STOPPED;
	} else if (walrec_entry_size(&e) - WALREC_FRAME_BYTES >= WALREC_MAX_RECORD) {
		status = PROPOSALS_GRPC_INVALID_ARGUMENT;
		text = PROPOSALS_MSG_TOO_LARGE;
	} else if (!raft_is_leader(raft) && !(p->forward && raft_leader(raft) && !from_stored)) {
		if (!from_stored && raft_leader(raft) == 0 && hold(p, slot, &h, &e))
			return;
		refusal(raft, -EAGAIN, &status, &text);
	}
	if (status) {
		if (from_stored)
			p->stats.dropped_stored++;
		else
			reject(p, slot, &h.origin, status, text);
		return;
	}
	p->ents[*n] = e;
	p->origins[*n] = h.origin;
	(*n)++;
}

/* ---- reads ---- */

static void take_read(struct proposals *p, const struct ring_rec *rec, uint32_t slot,
		      bool stopping)
{
	struct msg_read_index h;

	if (rec->len != sizeof(h)) {
		malformed(p, slot, rec, "dropped a read-index record of the wrong size");
		return;
	}
	memcpy(&h, rec->data, sizeof(h));
	if (h.origin.slot != slot) {
		malformed(p, slot, rec, "dropped a read-index record naming another slot");
		return;
	}
	p->stats.reads++;
	if (stopping) {
		reject(p, slot, &h.origin, PROPOSALS_GRPC_UNAVAILABLE, PROPOSALS_MSG_STOPPED);
		return;
	}
	if (raftd_reserve((void **)&p->reads, &p->cap_reads, p->n_reads + 1, sizeof(*p->reads),
			  64)) {
		reject(p, slot, &h.origin, PROPOSALS_GRPC_RESOURCE_EXHAUSTED, PROPOSALS_MSG_TOO_MANY);
		return;
	}
	p->reads[p->n_reads++] = (struct proposals_read){ .origin = h.origin, .slot = slot };
}

/* Answers and removes the reads for which answer() says so. */
static void sweep_reads(struct proposals *p,
			bool (*answer)(struct proposals *p, const struct proposals_read *rd,
				       const void *arg),
			const void *arg)
{
	size_t k = 0;
	for (size_t i = 0; i < p->n_reads; i++)
		if (!answer(p, &p->reads[i], arg))
			p->reads[k++] = p->reads[i];
	p->n_reads = k;
}

struct refuse_arg {
	int32_t status;
	const char *text;
};

static bool refuse_unasked(struct proposals *p, const struct proposals_read *rd, const void *arg)
{
	const struct refuse_arg *a = arg;
	if (rd->ctx)
		return false;
	reject(p, rd->slot, &rd->origin, a->status, a->text);
	return true;
}

void proposals_ask_reads(struct proposals *p, struct raft *raft)
{
	size_t unasked = 0;
	for (size_t i = 0; i < p->n_reads; i++)
		unasked += p->reads[i].ctx == 0;
	if (unasked == 0)
		return;
	/* One round at a time, as etcd's linearizable read loop: the reads
	 * that come meanwhile share the next round, so that a busy member
	 * confirms its reads with a heartbeat round a round trip rather than
	 * one a loop turn. A round unanswered for a tick is taken as lost
	 * (its reads still wait for it, or for their timeout). */
	for (size_t i = 0; i < p->n_reads; i++)
		if (p->reads[i].ctx && p->reads[i].ctx == p->next_ctx &&
		    p->ticks <= p->reads[i].asked_at + 1)
			return;
	/* a leader waits until it has committed an entry of its term */
	if (raft_is_leader(raft) && !proposals_leader_confirmed(raft))
		return;
	uint64_t ctx = p->next_ctx + 1;
	int rc = raft_read_index(raft, ctx);
	if (rc) {
		struct refuse_arg a;
		refusal(raft, rc, &a.status, &a.text);
		sweep_reads(p, refuse_unasked, &a);
		return;
	}
	p->next_ctx = ctx;
	p->stats.read_rounds++;
	for (size_t i = 0; i < p->n_reads; i++) {
		if (p->reads[i].ctx == 0) {
			p->reads[i].ctx = ctx;
			p->reads[i].asked_at = p->ticks;
		}
	}
}

struct round_arg {
	const struct raft_read_state *rs;
	uint64_t term;
};

static bool answer_round(struct proposals *p, const struct proposals_read *rd, const void *arg)
{
	const struct round_arg *a = arg;
	if (rd->ctx != a->rs->context)
		return false;
	read_reply(p, rd, a->rs->index, a->term, 0);
	return true;
}

void proposals_read_state(struct proposals *p, const struct raft_read_state *rs, uint64_t term)
{
	struct round_arg a = { rs, term };
	sweep_reads(p, answer_round, &a);
}

static bool fail_asked(struct proposals *p, const struct proposals_read *rd, const void *arg)
{
	(void)arg;
	if (!rd->ctx)
		return false;
	read_reply(p, rd, 0, 0, PROPOSALS_GRPC_UNAVAILABLE);
	return true;
}

void proposals_fail_reads(struct proposals *p, int32_t status, bool all)
{
	if (all) {
		struct refuse_arg a = { status, PROPOSALS_MSG_STOPPED };
		for (size_t i = 0; i < p->n_reads; i++)
			p->reads[i].ctx = 0;
		sweep_reads(p, refuse_unasked, &a);
		return;
	}
	sweep_reads(p, fail_asked, NULL);
}

static bool expired(struct proposals *p, const struct proposals_read *rd, const void *arg)
{
	const uint64_t *expire = arg;
	if (!rd->ctx || p->ticks - rd->asked_at <= *expire)
		return false;
	read_reply(p, rd, 0, 0, PROPOSALS_GRPC_UNAVAILABLE);
	return true;
}

void proposals_tick(struct proposals *p, uint64_t expire_ticks)
{
	p->ticks++;
	sweep_reads(p, expired, &expire_ticks);
	if (p->n_held)
		expire_held(p);
}

/* ---- draining ---- */

/* Logs once that a request ring failed (its cursors or a record header
 * were corrupt; the ring refuses further use). */
static void ring_failed(struct proposals *p, bool from_stored, uint32_t slot)
{
	uint64_t *logged = p->staged + bitmap_words(p->n_slots + 1);
	uint32_t bit = from_stored ? PROPOSALS_STORED(p) : slot;

	if (bit_test(logged, bit))
		return;
	bit_set(logged, bit);
	log_error("a request ring to raftd is corrupt; its requests are lost until the member restarts",
		  LOG_STR("ring", from_stored ? "stored-proposals" : "gateway-slot"),
		  LOG_U64("slot", slot));
}

/* A request for raftd itself (MoveLeader, MemberPromote): its record
 * checked, then handed to handler (NULL: refused as unsupported). */
static bool take_admin(struct proposals *p, const struct ring_rec *rec, uint32_t slot,
		       bool stopping, size_t len, void *hdr, bool supported)
{
	struct msg_origin o;

	if (rec->len != len) {
		malformed(p, slot, rec, "dropped a request record of the wrong size");
		return false;
	}
	memcpy(hdr, rec->data, len);
	memcpy(&o, hdr, sizeof(o));
	if (o.slot != slot) {
		malformed(p, slot, rec, "dropped a request record whose header does not match it");
		return false;
	}
	if (stopping) {
		reject(p, slot, &o, PROPOSALS_GRPC_UNAVAILABLE, PROPOSALS_MSG_STOPPED);
		return false;
	}
	if (!supported) {
		reject(p, slot, &o, PROPOSALS_GRPC_UNIMPLEMENTED,
		       "cetcd: this request is not supported here");
		return false;
	}
	return true;
}

static void take_move_leader(struct proposals *p, const struct ring_rec *rec, uint32_t slot,
			     bool stopping)
{
	struct msg_move_leader h;
	if (take_admin(p, rec, slot, stopping, sizeof(h), &h, p->move_leader != NULL))
		p->move_leader(p->move_leader_arg, slot, &h);
}

static void take_promote(struct proposals *p, const struct ring_rec *rec, uint32_t slot,
			 bool stopping)
{
	struct msg_promote h;
	if (take_admin(p, rec, slot, stopping, sizeof(h), &h, p->promote != NULL))
		p->promote(p->promote_arg, slot, &h);
}

static void take_lease_forward(struct proposals *p, const struct ring_rec *rec, uint32_t slot,
			       bool stopping)
{
	struct msg_keepalive h;
	if (take_admin(p, rec, slot, stopping, sizeof(h), &h, p->lease_forward != NULL))
		p->lease_forward(p->lease_forward_arg, slot, &h);
}

/* Drains one batch of ring (slot's requests, or stored's proposals). */
static int drain_ring(struct proposals *p, struct raft *raft, struct ring *ring,
		      bool from_stored, uint32_t slot, bool stopping)
{
	struct ring_rec rec;
	size_t n = 0;
	unsigned taken = 0;
	int rc = 0;

	while (taken < PROPOSALS_BATCH && (rc = ring_peek(ring, &rec)) == 0) {
		ring_consume(ring, &rec);
		taken++;
		if (!from_stored && hello_serve_record(p->r, SHM_ROLE_RAFTD, slot, &rec)) {
			p->stats.hellos++;
			continue;
		}
		if (rec.type == MSG_PROPOSE)
			take_proposal(p, raft, &rec, from_stored, slot, stopping, &n);
		else if (rec.type == MSG_READ_INDEX && !from_stored)
			take_read(p, &rec, slot, stopping);
		else if (rec.type == MSG_MOVE_LEADER && !from_stored)
			take_move_leader(p, &rec, slot, stopping);
		else if (rec.type == MSG_PROMOTE && !from_stored)
			take_promote(p, &rec, slot, stopping);
		else if (rec.type == MSG_LEASE_FORWARD && !from_stored)
			take_lease_forward(p, &rec, slot, stopping);
		else
			malformed(p, slot, &rec, "dropped a record of a type raftd does not take");
	}
	/* the batch's data lives in the ring until it is released */
	propose_batch(p, raft, n, from_stored, slot);
	ring_release_consumed(ring);
	if (rc == -EIO || ring_has_failed(ring)) {
		ring_failed(p, from_stored, slot);
		return -EIO;
	}
	if (taken == PROPOSALS_BATCH && ring_has_data(ring))
		p->more = true;
	return (int)taken;
}

/* Whether ring has records to drain (a failed ring has none to give). */
static bool has_requests(struct ring *ring)
{
	return ring && !ring_has_failed(ring) && ring_has_data(ring);
}

bool proposals_waiting(struct shm_region *r)
{
	uint32_t n = shm_slot_count(r);
	for (uint32_t i = 0; i < n; i++)
		if (has_requests(shm_slot_ring(r, i, SHM_SLOT_TO_RAFTD)))
			return true;
	return has_requests(shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS));
}

int proposals_drain(struct proposals *p, struct raft *raft, bool stopping)
{
	int total = 0, failed = 0;

	p->more = false;
	/* before anything newer, so that they keep their order */
	if (p->n_held && (stopping || raft_leader(raft)))
		release_held(p, raft, stopping);
	for (uint32_t i = 0; i < p->n_slots; i++) {
		struct ring *ring = shm_slot_ring(p->r, i, SHM_SLOT_TO_RAFTD);
		if (!has_requests(ring))
			continue;
		int rc = drain_ring(p, raft, ring, false, i, stopping);
		if (rc < 0)
			failed = rc;
		else
			total += rc;
	}
	struct ring *sp = shm_daemon_ring(p->r, SHM_RING_STORED_PROPOSALS);
	if (has_requests(sp)) {
		int rc = drain_ring(p, raft, sp, true, 0, stopping);
		if (rc < 0)
			failed = rc;
		else
			total += rc;
	}
	if (!stopping)
		proposals_ask_reads(p, raft);
	return failed ? failed : total;
}
