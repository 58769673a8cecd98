/*
 * Unit tests for raftd/raft/msgconv.c: every message type the core sends goes
 * to the wire (encoded with raftmsg_encode, decoded again as a peer
 * would) and back, unchanged; the wire forms follow raft.h's mapping.
 */
#include "shm_testlib.h"

#include "raftd/alloc.h"
#include "raftd/raft/msgconv.h"

/* The wire form of the last round trip points into this scratch. */
static struct msgconv_scratch s1;

static void round_trip(const struct raft_msg *m, struct raftmsg *wire_out)
{
	struct msgconv_scratch s2 = { 0 };
	struct raftmsg w, back_w;
	struct raft_msg back;

	CHECK(msgconv_to_wire(m, &s1, &w) == 0);
	size_t n = raftmsg_size(&w);
	uint8_t *buf = malloc(n ? n : 1);
	CHECK(buf && raftmsg_encode(&w, buf) == n);
	CHECK(raftmsg_decode(buf, n, &back_w) == 0);
	CHECK(msgconv_from_wire(&back_w, &s2, &back) == 0);
	CHECK(back.type == m->type && back.to == m->to && back.from == m->from);
	CHECK(back.term == m->term && back.log_term == m->log_term && back.index == m->index);
	CHECK(back.commit == m->commit && back.reject == m->reject);
	CHECK(back.reject_hint == m->reject_hint && back.context == m->context);
	CHECK(back.transfer == m->transfer && back.n_entries == m->n_entries);
	for (size_t i = 0; i < m->n_entries; i++) {
		CHECK(back.entries[i].term == m->entries[i].term);
		CHECK(back.entries[i].index == m->entries[i].index);
		CHECK(back.entries[i].type == m->entries[i].type);
		CHECK(back.entries[i].len == m->entries[i].len);
		CHECK(m->entries[i].len == 0 ||
		      memcmp(back.entries[i].data, m->entries[i].data, m->entries[i].len) == 0);
	}
	if (m->type == RAFT_MSG_SNAP) {
		CHECK(back.snap_index == m->snap_index && back.snap_term == m->snap_term);
		CHECK(back.snap_conf->n_voters == m->snap_conf->n_voters);
		CHECK(back.snap_conf->voters[0] == m->snap_conf->voters[0]);
		CHECK(back.snap_conf->n_learners == m->snap_conf->n_learners);
	}
	if (wire_out)
		*wire_out = w; /* points into s1 and the caller's message */
	raftmsg_release(&back_w);
	free(buf);
	msgconv_scratch_free(&s2);
}

int main(void)
{
	uint8_t data[] = "payload";
	struct raft_entry ents[3] = {
		{ .term = 2, .index = 10, .type = RAFT_ENTRY_NORMAL, .len = 0 },
		{ .term = 2, .index = 11, .type = RAFT_ENTRY_NORMAL, .len = 7, .data = data },
		{ .term = 3, .index = 12, .type = RAFT_ENTRY_CONF_CHANGE, .len = 3, .data = data },
	};
	struct raftmsg w;

	struct raft_msg app = { .type = RAFT_MSG_APP, .to = 2, .from = 1, .term = 3, .log_term = 2,
				.index = 9, .commit = 8, .entries = ents, .n_entries = 3 };
	round_trip(&app, &w);
	struct raft_msg resp = { .type = RAFT_MSG_APP_RESP, .to = 1, .from = 2, .term = 3,
				 .index = 12, .reject = true, .reject_hint = 7 };
	round_trip(&resp, NULL);

	/* heartbeats carry the read context in Context, 8 bytes big-endian */
	struct raft_msg hb = { .type = RAFT_MSG_HEARTBEAT, .to = 2, .from = 1, .term = 3,
			       .commit = 12, .context = 0x0102030405060708ull };
	round_trip(&hb, &w);
	CHECK(w.has_context && w.context_len == 8 && w.context[0] == 1 && w.context[7] == 8);
	struct raft_msg hb0 = { .type = RAFT_MSG_HEARTBEAT_RESP, .to = 1, .from = 2, .term = 3 };
	round_trip(&hb0, &w);
	CHECK(!w.has_context);

	/* ReadIndex: the context in Entries[0].Data, and no entries in the core */
	struct raft_msg ri = { .type = RAFT_MSG_READ_INDEX, .to = 1, .from = 2, .context = 77 };
	round_trip(&ri, &w);
	CHECK(w.n_entries == 1);
	struct raft_msg rr = { .type = RAFT_MSG_READ_INDEX_RESP, .to = 2, .from = 1, .term = 3,
			       .index = 12, .context = 77 };
	round_trip(&rr, NULL);

	/* votes, a transfer's with "CampaignTransfer" */
	struct raft_msg vote = { .type = RAFT_MSG_VOTE, .to = 2, .from = 3, .term = 4,
				 .log_term = 3, .index = 12, .transfer = true };
	round_trip(&vote, &w);
	CHECK(w.has_context && w.context_len == 16 && memcmp(w.context, "CampaignTransfer", 16) == 0);
	struct raft_msg pv = { .type = RAFT_MSG_PRE_VOTE, .to = 2, .from = 3, .term = 5 };
	round_trip(&pv, NULL);
	struct raft_msg tn = { .type = RAFT_MSG_TIMEOUT_NOW, .to = 3, .from = 1, .term = 4 };
	round_trip(&tn, NULL);
	struct raft_msg prop = { .type = RAFT_MSG_PROP, .to = 1, .from = 2, .entries = ents + 1,
				 .n_entries = 2 };
	round_trip(&prop, NULL);

	struct raft_conf_state cs = { .voters = { 1, 2, 3 }, .n_voters = 3, .learners = { 4 },
				      .n_learners = 1 };
	struct raft_msg snap = { .type = RAFT_MSG_SNAP, .to = 4, .from = 1, .term = 4,
				 .snap_index = 100, .snap_term = 3, .snap_conf = &cs };
	round_trip(&snap, NULL);

	/* types peers never send are refused */
	struct raftmsg bad = { .type = RAFT_MSG_UNREACHABLE };
	struct msgconv_scratch s = { 0 };
	struct raft_msg out;
	CHECK(msgconv_from_wire(&bad, &s, &out) == -EINVAL);
	bad.type = 99;
	CHECK(msgconv_from_wire(&bad, &s, &out) == -EINVAL);
	msgconv_scratch_free(&s);
	msgconv_scratch_free(&s1);
	printf("ok\n");
	return 0;
}
