/*
 * raftd/proposals.c against a real Raft core and real rings: proposals
 * from two slots reach the log in ring order, batched, bytes intact;
 * hellos are answered beside them; refusals carry etcd's codes and
 * messages (no leader, not leader, stopped); term-carrying proposals from
 * stored are dropped unless the leader leads in that term and has
 * confirmed it (test_term_carrying breaks invariant 8, docs/invariants.md,
 * on purpose with revokes of other terms and before the leader confirmed
 * its term); reads share one ReadIndex round (one out at a time),
 * wait for the leader's first commit in its term, and are failed on a
 * leadership change or timeout; replies never go to a newer generation of a slot; malformed
 * records are dropped without harm.
 */
#include "raftd_util.h"

#include "raftd/proposals.h"
#include "raftd/raft/raft.h"
#include "shm/hello.h"

static char path[512];

static struct raft *new_core(uint64_t id, const uint64_t *voters, size_t n)
{
	return rt_core_at(id, voters, n, 0);
}

/* Plays the WAL for the core: every ready's entries are durable at once.
 * Read states go to p. */
static void settle(struct raft *raft, struct proposals *p)
{
	struct raft_ready rd;
	for (int i = 0; i < 10 && raft_has_ready(raft); i++) {
		raft_ready(raft, &rd);
		uint64_t idx = 0, term = 0;
		if (rd.n_entries) {
			idx = rd.entries[rd.n_entries - 1].index;
			term = rd.entries[rd.n_entries - 1].term;
		}
		for (size_t k = 0; k < rd.n_reads; k++)
			proposals_read_state(p, &rd.reads[k], raft_term(raft));
		raft_advance(raft, &rd);
		if (idx)
			raft_persisted(raft, idx, term);
	}
}

/* A single voter that leads and has committed its first entry. */
static struct raft *leader(struct proposals *p)
{
	static const uint64_t one[] = { 1 };
	struct raft *raft = new_core(1, one, 1);
	CHECK_EQ(raft_campaign(raft), 0);
	CHECK(raft_is_leader(raft));
	CHECK(!proposals_leader_confirmed(raft));
	settle(raft, p);
	CHECK(proposals_leader_confirmed(raft));
	return raft;
}

struct reply {
	uint32_t type;
	struct msg_origin origin;
	int32_t status;
	uint64_t index;
	uint64_t term;
	char text[128];
};

/* Takes the next record on slot s's reply ring from raftd. */
static bool take_reply(struct shm_region *r, uint32_t slot, struct reply *out)
{
	struct rt_rec rec;
	if (!rt_take(shm_slot_ring(r, slot, SHM_SLOT_FROM_RAFTD), &rec))
		return false;
	memset(out, 0, sizeof(*out));
	out->type = rec.type;
	if (rec.type == MSG_PROPOSE_REJECT) {
		struct msg_reject h;
		CHECK(rec.len >= sizeof(h));
		memcpy(&h, rec.data, sizeof(h));
		CHECK_EQ(h.text_len, rec.len - sizeof(h));
		CHECK(h.text_len < sizeof(out->text));
		out->origin = h.origin;
		out->status = h.status;
		memcpy(out->text, rec.data + sizeof(h), h.text_len);
	} else if (rec.type == MSG_READ_INDEX_REPLY) {
		struct msg_read_index_reply h;
		CHECK_EQ(rec.len, sizeof(h));
		memcpy(&h, rec.data, sizeof(h));
		out->origin = h.origin;
		out->status = h.status;
		out->index = h.index;
		out->term = h.term;
	}
	return true;
}

static void test_two_slots_in_order(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	struct shm_slot_ref s0, s1;
	struct proposals p;

	CHECK_EQ(shm_slot_claim(r, &s0), 0);
	CHECK_EQ(shm_slot_claim(r, &s1), 0);
	CHECK_EQ(proposals_init(&p, r), 0);
	struct raft *raft = leader(&p);
	uint64_t first = raft_last_index(raft) + 1;
	struct ring *in0 = shm_slot_ring(r, s0.index, SHM_SLOT_TO_RAFTD);
	struct ring *in1 = shm_slot_ring(r, s1.index, SHM_SLOT_TO_RAFTD);

	/* a hello first, then proposals from both slots, interleaved */
	CHECK_EQ(hello_send(r, &s0, SHM_ROLE_RAFTD, 0), 0);
	for (uint64_t i = 1; i <= 40; i++) {
		CHECK_EQ(rt_propose(in0, &s0, i, 0), 0);
		CHECK_EQ(rt_propose(in1, &s1, 1000 + i, 0), 0);
	}
	CHECK(proposals_waiting(r));
	CHECK_EQ(proposals_drain(&p, raft, false), 81);
	CHECK(!proposals_waiting(r));
	CHECK(!proposals_more(&p));
	CHECK_EQ(p.stats.proposed, 80);
	CHECK_EQ(p.stats.hellos, 1);
	proposals_flush(&p);
	bool acked = false;
	CHECK_EQ(hello_take_acks(r, &s0, SHM_ROLE_RAFTD, &acked), 1);
	CHECK(acked);

	/* each ring's records in their order, slot 0's batch first */
	const struct raftlog *l = raft_log(raft);
	CHECK_EQ(raft_last_index(raft), first + 79);
	uint64_t want0 = 1, want1 = 1001;
	for (uint64_t idx = first; idx < first + 80; idx++) {
		const struct raft_entry *e = raftlog_entry(l, idx);
		uint64_t slot, rid;
		CHECK(e && e->type == RAFT_ENTRY_NORMAL);
		CHECK(rt_decode(e->data, e->len, &slot, &rid));
		if (slot == s0.index)
			CHECK_EQ(rid, want0++);
		else
			CHECK_EQ(rid, want1++);
		CHECK_EQ(slot == s0.index, idx < first + 40);
	}
	CHECK(want0 == 41 && want1 == 1041);

	/* more than a batch on one ring: the rest waits for the next drain */
	for (uint64_t i = 0; i < PROPOSALS_BATCH + 10; i++)
		while (rt_propose(in0, &s0, 2000 + i, 0) == -EAGAIN) {
			CHECK(proposals_drain(&p, raft, false) > 0);
			settle(raft, &p);
		}
	while (proposals_waiting(r)) {
		CHECK(proposals_drain(&p, raft, false) > 0);
		settle(raft, &p);
	}
	CHECK_EQ(p.stats.proposed, 80 + PROPOSALS_BATCH + 10);
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

static void test_refusals(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	static const uint64_t three[] = { 1, 2, 3 };
	struct shm_slot_ref s;
	struct proposals p;
	struct reply rep;

	CHECK_EQ(shm_slot_claim(r, &s), 0);
	CHECK_EQ(proposals_init(&p, r), 0);
	struct ring *in = shm_slot_ring(r, s.index, SHM_SLOT_TO_RAFTD);
	struct ring *sp = shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS);

	/* three voters, no peers: nobody leads */
	struct raft *raft = new_core(1, three, 3);
	CHECK_EQ(rt_propose(in, &s, 7, 0), 0);
	CHECK_EQ(rt_read_index(in, &s, 8), 0);
	CHECK_EQ(rt_propose(sp, NULL, 9, 0), 0); /* stored's: dropped, no reply */
	CHECK_EQ(proposals_drain(&p, raft, false), 3);
	proposals_flush(&p);
	CHECK(take_reply(r, s.index, &rep));
	CHECK(rep.type == MSG_PROPOSE_REJECT && rep.status == 14 && rep.origin.request_id == 7);
	CHECK(strcmp(rep.text, "etcdserver: no leader") == 0);
	CHECK(rep.origin.generation == s.generation && rep.origin.slot == s.index);
	CHECK(take_reply(r, s.index, &rep));
	CHECK(rep.type == MSG_PROPOSE_REJECT && rep.status == 14 && rep.origin.request_id == 8);
	CHECK(strcmp(rep.text, "etcdserver: no leader") == 0);
	CHECK(!take_reply(r, s.index, &rep));
	CHECK_EQ(p.stats.dropped_stored, 1);
	CHECK_EQ(raft_last_index(raft), 0);

	/* a follower that knows its leader cannot forward yet */
	struct raft_msg hb = { .type = RAFT_MSG_HEARTBEAT, .to = 1, .from = 2, .term = 5 };
	CHECK_EQ(raft_step(raft, &hb), 0);
	CHECK_EQ(raft_leader(raft), 2);
	CHECK_EQ(rt_propose(in, &s, 10, 0), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	proposals_flush(&p);
	CHECK(take_reply(r, s.index, &rep));
	CHECK(rep.status == 9 && strcmp(rep.text, "etcdserver: not leader") == 0);
	/* its reads go to the leader (a message), answered later */
	CHECK_EQ(rt_read_index(in, &s, 11), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	CHECK_EQ(p.n_reads, 1);
	CHECK(p.reads[0].ctx != 0);
	raft_free(raft);

	/* stopping: everything is refused with "server stopped" */
	raft = leader(&p);
	CHECK_EQ(rt_propose(in, &s, 12, 0), 0);
	CHECK_EQ(rt_read_index(in, &s, 13), 0);
	CHECK_EQ(proposals_drain(&p, raft, true), 2);
	proposals_fail_reads(&p, 14, true); /* and what waited */
	proposals_flush(&p);
	for (int i = 0; i < 3; i++) {
		CHECK(take_reply(r, s.index, &rep));
		CHECK(rep.type == MSG_PROPOSE_REJECT && rep.status == 14);
		CHECK(strcmp(rep.text, "etcdserver: server stopped") == 0);
	}
	CHECK_EQ(p.n_reads, 0);
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

/* The log ends with exactly two proposals after last: rid1, then rid2. */
static void check_two_entries(struct raft *raft, uint64_t last, uint64_t rid1, uint64_t rid2)
{
	uint64_t slot, rid;
	CHECK_EQ(raft_last_index(raft), last + 2);
	const struct raft_entry *e = raftlog_entry(raft_log(raft), last + 1);
	CHECK(rt_decode(e->data, e->len, &slot, &rid) && rid == rid1);
	e = raftlog_entry(raft_log(raft), last + 2);
	CHECK(rt_decode(e->data, e->len, &slot, &rid) && rid == rid2);
}

static void test_term_carrying(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	static const uint64_t one[] = { 1 };
	struct proposals p;

	CHECK_EQ(proposals_init(&p, r), 0);
	struct ring *sp = shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS);
	struct raft *raft = rt_core_at(1, one, 1, 3);
	CHECK_EQ(raft_campaign(raft), 0);
	uint64_t term = raft_term(raft);
	CHECK_EQ(term, 4);

	/* leads in the term but has not confirmed it yet: dropped */
	CHECK_EQ(rt_propose(sp, NULL, 1, term), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	CHECK_INVARIANT_EQ(INV8_LEASES, p.stats.dropped_term, 1);
	settle(raft, &p);
	uint64_t last = raft_last_index(raft);
	/* confirmed: its own term goes in, others are dropped */
	CHECK_EQ(rt_propose(sp, NULL, 2, term), 0);
	CHECK_EQ(rt_propose(sp, NULL, 3, term - 1), 0);
	CHECK_EQ(rt_propose(sp, NULL, 4, term + 1), 0);
	CHECK_EQ(rt_propose(sp, NULL, 5, 0), 0); /* no term: always */
	CHECK_EQ(proposals_drain(&p, raft, false), 4);
	CHECK_INVARIANT_EQ(INV8_LEASES, p.stats.dropped_term, 3);
	check_two_entries(raft, last, 2, 5);
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

/* A gateway's request stamped with the term it saw goes in only in that
 * term; one sent before a term change is refused "leader changed". */
static void test_seen_term(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	static const uint64_t one[] = { 1 };
	struct shm_slot_ref s;
	struct proposals p;
	struct reply rep;

	CHECK_EQ(shm_slot_claim(r, &s), 0);
	CHECK_EQ(proposals_init(&p, r), 0);
	struct ring *in = shm_slot_ring(r, s.index, SHM_SLOT_TO_RAFTD);
	struct raft *raft = rt_core_at(1, one, 1, 3);
	CHECK_EQ(raft_campaign(raft), 0);
	settle(raft, &p);
	uint64_t term = raft_term(raft), last = raft_last_index(raft);
	CHECK_EQ(term, 4);
	CHECK_EQ(rt_propose_flags(in, &s, 1, term, MSG_PROPOSE_F_SEEN_TERM), 0);
	CHECK_EQ(rt_propose_flags(in, &s, 2, term - 1, MSG_PROPOSE_F_SEEN_TERM), 0);
	CHECK_EQ(rt_propose(in, &s, 3, 0), 0); /* no stamp: as before */
	CHECK_EQ(proposals_drain(&p, raft, false), 3);
	proposals_flush(&p);
	CHECK_EQ(p.stats.stale_term, 1);
	CHECK_EQ(p.stats.dropped_term, 0);
	CHECK(take_reply(r, s.index, &rep));
	CHECK(rep.type == MSG_PROPOSE_REJECT && rep.status == 14 && rep.origin.request_id == 2);
	CHECK(strcmp(rep.text, "etcdserver: leader changed") == 0);
	CHECK(!take_reply(r, s.index, &rep));
	check_two_entries(raft, last, 1, 3);
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

static void test_reads(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	static const uint64_t one[] = { 1 };
	struct shm_slot_ref s0, s1;
	struct proposals p;
	struct reply rep;

	CHECK_EQ(shm_slot_claim(r, &s0), 0);
	CHECK_EQ(shm_slot_claim(r, &s1), 0);
	CHECK_EQ(proposals_init(&p, r), 0);
	struct ring *in0 = shm_slot_ring(r, s0.index, SHM_SLOT_TO_RAFTD);
	struct ring *in1 = shm_slot_ring(r, s1.index, SHM_SLOT_TO_RAFTD);
	struct raft *raft = new_core(1, one, 1);
	CHECK_EQ(raft_campaign(raft), 0);

	/* before the leader's first commit in its term: held, not refused */
	CHECK_EQ(rt_read_index(in0, &s0, 1), 0);
	CHECK_EQ(rt_read_index(in1, &s1, 2), 0);
	CHECK_EQ(rt_read_index(in0, &s0, 3), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 3);
	CHECK_EQ(p.n_reads, 3);
	CHECK_EQ(p.stats.read_rounds, 0);
	proposals_flush(&p);
	CHECK(!take_reply(r, s0.index, &rep));

	/* the term's first entry commits: one round for all three */
	settle(raft, &p);
	proposals_ask_reads(&p, raft);
	CHECK_EQ(p.stats.read_rounds, 1);
	settle(raft, &p);
	proposals_flush(&p);
	CHECK_EQ(p.n_reads, 0);
	uint64_t commit = raft_commit_index(raft);
	for (int i = 0; i < 3; i++) {
		uint32_t slot = i == 1 ? s1.index : s0.index;
		CHECK(take_reply(r, slot, &rep));
		CHECK(rep.type == MSG_READ_INDEX_REPLY && rep.status == 0);
		CHECK_EQ(rep.index, commit);
		CHECK_EQ(rep.term, raft_term(raft)); /* the term that confirmed it */
		CHECK_EQ(rep.origin.request_id, i == 2 ? 3 : (uint64_t)i + 1);
	}
	CHECK_EQ(p.stats.reads_answered, 3);

	/* a round the core dropped (leadership lost) is failed: Unavailable */
	CHECK_EQ(rt_read_index(in0, &s0, 4), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	CHECK_EQ(p.n_reads, 1);
	proposals_fail_reads(&p, 14, false);
	proposals_flush(&p);
	CHECK(take_reply(r, s0.index, &rep));
	CHECK(rep.type == MSG_READ_INDEX_REPLY && rep.status == 14 && rep.index == 0 &&
	      rep.term == 0);

	/* an asked round that never comes back expires */
	CHECK_EQ(rt_read_index(in0, &s0, 5), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	for (int i = 0; i < 3; i++)
		proposals_tick(&p, 3);
	CHECK_EQ(p.n_reads, 1);
	proposals_tick(&p, 3);
	proposals_flush(&p);
	CHECK_EQ(p.n_reads, 0);
	CHECK(take_reply(r, s0.index, &rep));
	CHECK(rep.status == 14 && rep.origin.request_id == 5);

	/* the slot gets a new holder before the answer: the reply is dropped,
	 * the new generation never sees it */
	settle(raft, &p); /* forget the expired round's read state */
	CHECK_EQ(rt_read_index(in1, &s1, 6), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	shm_slot_release(r, &s1);
	struct shm_slot_ref s1b;
	CHECK_EQ(shm_slot_claim(r, &s1b), 0);
	CHECK_EQ(s1b.index, s1.index);
	CHECK(s1b.generation > s1.generation);
	settle(raft, &p);
	proposals_flush(&p);
	CHECK(!take_reply(r, s1b.index, &rep));
	CHECK_EQ(p.stats.replies_stale, 1);
	raft_free(raft);

	/* One round at a time: on a follower (its rounds go to the leader),
	 * a read that comes while a round is out waits for the next, which
	 * starts when the round is answered, or after a tick without an
	 * answer (lost). */
	static const uint64_t three[] = { 1, 2, 3 };
	raft = new_core(1, three, 3);
	struct raft_msg hb = { .type = RAFT_MSG_HEARTBEAT, .to = 1, .from = 2, .term = 5 };
	CHECK_EQ(raft_step(raft, &hb), 0);
	uint64_t rounds = p.stats.read_rounds;
	CHECK_EQ(rt_read_index(in0, &s0, 7), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	CHECK_EQ(p.stats.read_rounds, rounds + 1);
	uint64_t first = p.reads[0].ctx;
	CHECK_EQ(rt_read_index(in0, &s0, 8), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	CHECK_EQ(p.stats.read_rounds, rounds + 1);
	CHECK(p.n_reads == 2 && p.reads[1].ctx == 0);
	/* the first round is answered: the next one starts for read 8 */
	proposals_read_state(&p, &(struct raft_read_state){ .index = 4, .context = first }, 5);
	proposals_ask_reads(&p, raft);
	CHECK_EQ(p.stats.read_rounds, rounds + 2);
	CHECK(p.n_reads == 1 && p.reads[0].ctx != 0 && p.reads[0].ctx != first);
	proposals_flush(&p);
	CHECK(take_reply(r, s0.index, &rep));
	CHECK(rep.origin.request_id == 7 && rep.status == 0 && rep.index == 4 && rep.term == 5);
	/* that one is never answered: read 9 waits a tick, then goes */
	CHECK_EQ(rt_read_index(in0, &s0, 9), 0);
	CHECK_EQ(proposals_drain(&p, raft, false), 1);
	proposals_tick(&p, 100);
	proposals_ask_reads(&p, raft);
	CHECK_EQ(p.stats.read_rounds, rounds + 2);
	proposals_tick(&p, 100);
	proposals_ask_reads(&p, raft);
	CHECK_EQ(p.stats.read_rounds, rounds + 3);
	CHECK(p.n_reads == 2 && p.reads[1].ctx != 0 && p.reads[1].ctx != p.reads[0].ctx);
	proposals_fail_reads(&p, 14, false);
	proposals_flush(&p);
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

static void test_malformed(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	struct shm_slot_ref s;
	struct proposals p;
	uint8_t buf[128] = { 0 };

	CHECK_EQ(shm_slot_claim(r, &s), 0);
	CHECK_EQ(proposals_init(&p, r), 0);
	struct raft *raft = leader(&p);
	uint64_t last = raft_last_index(raft);
	struct ring *in = shm_slot_ring(r, s.index, SHM_SLOT_TO_RAFTD);

	struct msg_propose h = { .origin = { .slot = s.index, .generation = s.generation },
				 .data_len = 50 };
	memcpy(buf, &h, sizeof(h));
	CHECK_EQ(ring_push(in, MSG_PROPOSE, buf, 10), 0);                 /* short */
	CHECK_EQ(ring_push(in, MSG_PROPOSE, buf, sizeof(h) + 20), 0);     /* length lies */
	h.data_len = 20;
	h.origin.slot = s.index + 1;
	memcpy(buf, &h, sizeof(h));
	CHECK_EQ(ring_push(in, MSG_PROPOSE, buf, sizeof(h) + 20), 0);     /* other slot */
	CHECK_EQ(ring_push(in, MSG_READ_INDEX, buf, 3), 0);               /* short read */
	CHECK_EQ(ring_push(in, MSG_COMMITTED, buf, 30), 0);               /* wrong way */
	CHECK_EQ(ring_push(in, HELLO_TYPE_HELLO, buf, 5), 0);             /* bad hello */
	CHECK_EQ(rt_propose(in, &s, 1, 0), 0);                            /* and a good one */
	CHECK_EQ(proposals_drain(&p, raft, false), 7);
	CHECK_EQ(p.stats.malformed, 5);
	CHECK_EQ(p.stats.hellos, 1);
	CHECK_EQ(raft_last_index(raft), last + 1);
	proposals_flush(&p);
	struct reply rep;
	CHECK(!take_reply(r, s.index, &rep));
	raft_free(raft);
	proposals_free(&p);
	shm_region_detach(r);
}

int main(void)
{
	wt_count_allocs();
	test_two_slots_in_order();
	test_refusals();
	test_term_carrying();
	test_seen_term();
	test_reads();
	test_malformed();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_proposals: ok\n");
	return 0;
}
