/*
 * raftd/proposals.c while no leader is known: a gateway's proposal is held
 * (no reply), stored's is still dropped; once a leader is known the held
 * proposals reach the log (or the leader) in arrival order, across slots
 * and drains, before anything newer; a held proposal stamped with a term
 * that has moved on is refused "leader changed"; the queue's bound
 * refuses the rest "no leader" as before; a held proposal older than the
 * request timeout is answered "etcdserver: request timed out"; stopping
 * answers them "server stopped"; holding off (hold_ticks 0) refuses at
 * once.
 */
#include "raftd_util.h"

#include "raftd/proposals.h"
#include "raftd/raft/raft.h"

static char path[512];

struct reply {
	uint32_t type;
	uint64_t rid;
	int32_t status;
	char text[128];
};

static bool take_reply(struct shm_region *r, uint32_t slot, struct reply *out)
{
	struct rt_rec rec;
	struct msg_reject h;

	if (!rt_take(shm_slot_ring(r, slot, SHM_SLOT_FROM_RAFTD), &rec))
		return false;
	memset(out, 0, sizeof(*out));
	out->type = rec.type;
	CHECK(rec.type == MSG_PROPOSE_REJECT && rec.len >= sizeof(h));
	memcpy(&h, rec.data, sizeof(h));
	CHECK(h.text_len == rec.len - sizeof(h) && h.text_len < sizeof(out->text));
	out->rid = h.origin.request_id;
	out->status = h.status;
	memcpy(out->text, rec.data + sizeof(h), h.text_len);
	return true;
}

static void expect_reply(struct shm_region *r, uint32_t slot, uint64_t rid, const char *text)
{
	struct reply rep;
	CHECK(take_reply(r, slot, &rep));
	CHECK_EQ(rep.rid, rid);
	CHECK_EQ(rep.status, 14);
	CHECK(strcmp(rep.text, text) == 0);
}

/* The request ids of the log's entries from index first on, as slot *
 * 1000 + rid, into out; returns how many. */
static size_t log_rids(struct raft *raft, uint64_t first, uint64_t *out, size_t max)
{
	size_t n = 0;
	for (uint64_t i = first; i <= raft_last_index(raft) && n < max; i++) {
		const struct raft_entry *e = raftlog_entry(raft_log(raft), i);
		uint64_t slot, rid;
		CHECK(e && rt_decode(e->data, e->len, &slot, &rid));
		out[n++] = slot * 1000 + rid;
	}
	return n;
}

/* A region with two slots claimed, proposals holding for hold_ticks, and a
 * core for member 1 of voters at term, which knows no leader. */
struct fx {
	struct shm_region *r;
	struct shm_slot_ref s, s1;
	struct proposals p;
	struct ring *in, *in1;
	struct raft *raft;
};

static void fx_open(struct fx *f, uint64_t hold_ticks, const uint64_t *voters, size_t n,
		    uint64_t term)
{
	f->r = rt_region(path, sizeof(path), 16 * 1024);
	CHECK_EQ(shm_slot_claim(f->r, &f->s), 0);
	CHECK_EQ(shm_slot_claim(f->r, &f->s1), 0);
	CHECK_EQ(proposals_init(&f->p, f->r), 0);
	f->p.hold_ticks = hold_ticks;
	f->in = shm_slot_ring(f->r, f->s.index, SHM_SLOT_TO_RAFTD);
	f->in1 = shm_slot_ring(f->r, f->s1.index, SHM_SLOT_TO_RAFTD);
	f->raft = rt_core_at(1, voters, n, term);
	CHECK_EQ(raft_leader(f->raft), 0);
}

static void fx_close(struct fx *f)
{
	raft_free(f->raft);
	proposals_free(&f->p);
	shm_region_detach(f->r);
}

static const uint64_t three[] = { 1, 2, 3 };

/* Held on a single voter that has not campaigned, released into its own
 * log once it leads: in arrival order across slots and drains, before a
 * newer proposal; a stale stamp refused then. */
static void test_release_in_order(void)
{
	static const uint64_t one[] = { 1 };
	struct fx f;
	struct reply rep;

	fx_open(&f, 10, one, 1, 3);
	struct ring *sp = shm_daemon_ring(f.r, SHM_RING_STORED_PROPOSALS);

	CHECK_EQ(rt_propose(f.in, &f.s, 1, 0), 0);
	CHECK_EQ(rt_propose(f.in, &f.s, 2, 0), 0);
	CHECK_EQ(rt_propose(f.in1, &f.s1, 1, 0), 0);
	CHECK_EQ(rt_propose(sp, NULL, 9, 0), 0); /* stored's: dropped as before */
	/* stamped in the term it is held in: waits too */
	CHECK_EQ(rt_propose_flags(f.in1, &f.s1, 2, 3, MSG_PROPOSE_F_SEEN_TERM), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 5);
	CHECK_EQ(rt_propose(f.in, &f.s, 3, 0), 0);
	CHECK_EQ(rt_propose(f.in1, &f.s1, 3, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 2);
	for (int i = 0; i < 5; i++)
		proposals_tick(&f.p, 100);
	proposals_flush(&f.p);
	CHECK(!take_reply(f.r, f.s.index, &rep));
	CHECK(!take_reply(f.r, f.s1.index, &rep));
	CHECK_EQ(f.p.n_held, 6);
	CHECK_EQ(f.p.stats.held, 6);
	CHECK_EQ(f.p.stats.dropped_stored, 1);
	CHECK_EQ(raft_last_index(f.raft), 0);

	/* a leader (term 4): the held go first, then the ring's newer one */
	CHECK_EQ(raft_campaign(f.raft), 0);
	CHECK(raft_is_leader(f.raft));
	uint64_t first = raft_last_index(f.raft) + 1;
	CHECK_EQ(rt_propose(f.in, &f.s, 4, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 1);
	proposals_flush(&f.p);
	CHECK_EQ(f.p.n_held, 0);
	CHECK_EQ(f.p.held_bytes, 0);
	CHECK_EQ(f.p.stats.held_released, 5);
	CHECK_EQ(f.p.stats.stale_term, 1);
	expect_reply(f.r, f.s1.index, 2, "etcdserver: leader changed");
	CHECK(!take_reply(f.r, f.s1.index, &rep));
	CHECK(!take_reply(f.r, f.s.index, &rep));
	uint64_t got[16];
	const uint64_t want[] = { f.s.index * 1000 + 1, f.s.index * 1000 + 2, f.s1.index * 1000 + 1,
				  f.s.index * 1000 + 3, f.s1.index * 1000 + 3, f.s.index * 1000 + 4 };
	CHECK_EQ(log_rids(f.raft, first, got, 16), 6);
	for (size_t i = 0; i < 6; i++)
		CHECK_EQ(got[i], want[i]);
	fx_close(&f);
}

static uint64_t fwd_rids[16];
static size_t n_fwd;

static int record_forward(void *arg, uint64_t leader, const struct raft_entry *ents, size_t n)
{
	(void)arg;
	CHECK_EQ(leader, 2);
	for (size_t i = 0; i < n && n_fwd < 16; i++) {
		uint64_t slot, rid;
		CHECK(rt_decode(ents[i].data, ents[i].len, &slot, &rid));
		fwd_rids[n_fwd++] = rid;
	}
	return 0;
}

/* A follower that comes to know its leader forwards what it held. */
static void test_release_forwarded(void)
{
	struct fx f;
	struct reply rep;

	fx_open(&f, 10, three, 3, 0);
	f.p.forward = record_forward;
	for (uint64_t i = 1; i <= 3; i++)
		CHECK_EQ(rt_propose(f.in, &f.s, i, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 3);
	CHECK_EQ(n_fwd, 0);
	struct raft_msg hb = { .type = RAFT_MSG_HEARTBEAT, .to = 1, .from = 2, .term = 5 };
	CHECK_EQ(raft_step(f.raft, &hb), 0);
	CHECK_EQ(raft_leader(f.raft), 2);
	CHECK_EQ(rt_propose(f.in, &f.s, 4, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 1);
	proposals_flush(&f.p);
	CHECK(!take_reply(f.r, f.s.index, &rep));
	CHECK_EQ(n_fwd, 4);
	for (size_t i = 0; i < 4; i++)
		CHECK_EQ(fwd_rids[i], i + 1);
	CHECK_EQ(f.p.stats.forwarded, 4);
	CHECK_EQ(f.p.n_held, 0);
	fx_close(&f);
}

/* The bound, the request timeout, stopping, and holding off. */
static void test_bound_timeout_stop(void)
{
	struct fx f;
	struct reply rep;

	fx_open(&f, 3, three, 3, 0);

	/* past PROPOSALS_HOLD_MAX: "no leader" at once, as before */
	uint64_t extra = 5;
	for (uint64_t i = 1; i <= PROPOSALS_HOLD_MAX + extra; i++)
		while (rt_propose(f.in, &f.s, i, 0) == -EAGAIN)
			CHECK(proposals_drain(&f.p, f.raft, false) > 0);
	while (proposals_waiting(f.r))
		CHECK(proposals_drain(&f.p, f.raft, false) > 0);
	proposals_flush(&f.p);
	CHECK_EQ(f.p.n_held, PROPOSALS_HOLD_MAX);
	CHECK_EQ(f.p.stats.held_full, extra);
	CHECK(f.p.held_bytes > 0 && f.p.held_bytes <= PROPOSALS_HOLD_BYTES);
	for (uint64_t i = 1; i <= extra; i++)
		expect_reply(f.r, f.s.index, PROPOSALS_HOLD_MAX + i, "etcdserver: no leader");
	CHECK(!take_reply(f.r, f.s.index, &rep));

	/* held hold_ticks ticks: still waiting; one more: timed out, in order */
	for (int i = 0; i < 3; i++)
		proposals_tick(&f.p, 100);
	proposals_flush(&f.p);
	CHECK(!take_reply(f.r, f.s.index, &rep));
	CHECK_EQ(f.p.n_held, PROPOSALS_HOLD_MAX);
	size_t answered = 0;
	proposals_tick(&f.p, 100);
	for (;;) {
		proposals_flush(&f.p);
		if (!take_reply(f.r, f.s.index, &rep))
			break;
		CHECK_EQ(rep.rid, ++answered);
		CHECK(strcmp(rep.text, "etcdserver: request timed out") == 0);
	}
	/* the replies past the reply ring's room were dropped (counted) */
	CHECK_EQ(answered + f.p.stats.replies_full, PROPOSALS_HOLD_MAX);
	CHECK(answered > 0);
	CHECK_EQ(f.p.n_held, 0);
	CHECK_EQ(f.p.held_bytes, 0);
	CHECK_EQ(f.p.stats.held_expired, PROPOSALS_HOLD_MAX);

	/* stopping answers what waits */
	CHECK_EQ(rt_propose(f.in, &f.s, 7001, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 1);
	CHECK_EQ(f.p.n_held, 1);
	CHECK_EQ(proposals_drain(&f.p, f.raft, true), 0);
	proposals_flush(&f.p);
	expect_reply(f.r, f.s.index, 7001, "etcdserver: server stopped");
	CHECK_EQ(f.p.n_held, 0);

	/* holding off: refused at once */
	f.p.hold_ticks = 0;
	CHECK_EQ(rt_propose(f.in, &f.s, 7002, 0), 0);
	CHECK_EQ(proposals_drain(&f.p, f.raft, false), 1);
	proposals_flush(&f.p);
	expect_reply(f.r, f.s.index, 7002, "etcdserver: no leader");
	CHECK_EQ(f.p.n_held, 0);
	fx_close(&f);
}

int main(void)
{
	wt_count_allocs();
	test_release_in_order();
	test_release_forwarded();
	test_bound_timeout_stop();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_proposals_hold: ok\n");
	return 0;
}
