/*
 * Deterministic tests of raftd/raft.c: the single-voter path (election,
 * commit only after the leader's own fdatasync, ReadIndex), the same
 * through the real WAL with a restart, and small hand-driven three-node
 * scenarios: election, replication, a follower's conflicting suffix
 * replaced, pre-vote keeping a partitioned node from disrupting, the
 * leader stepping down without a quorum (check-quorum), ReadIndex
 * confirmed by a heartbeat round, a follower caught up by snapshot.
 */
#include "test_wal_util.h"

#include "raftd/raft.h"
#include "raftd/wal.h"
#include "shm/diskio/diskio.h"
#include "shm/log/log.h"

static struct raft *single(uint64_t seed)
{
	struct raft_config c;
	static const uint64_t voters[] = { 1 };
	struct raft *r;

	raft_config_defaults(&c);
	c.id = 1;
	c.voters = voters;
	c.n_voters = 1;
	c.seed = seed;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), 0);
	return r;
}

/* Ticks until r leads; returns the ticks it took. */
static unsigned tick_to_leader(struct raft *r)
{
	unsigned t = 0;
	while (!raft_is_leader(r)) {
		CHECK(t < 100);
		raft_tick(r);
		t++;
	}
	return t;
}

static void test_single_voter(void)
{
	struct raft_ready rd;
	struct raft *r = single(7);

	CHECK(!raft_has_ready(r));
	unsigned t = tick_to_leader(r);
	CHECK(t >= 10 && t < 20); /* randomized in [election, 2 * election) */
	CHECK_EQ(raft_term(r), 1);
	CHECK_EQ(raft_leader(r), 1);

	CHECK(raft_has_ready(r));
	raft_ready(r, &rd);
	CHECK(rd.soft_changed && rd.role == RAFT_LEADER && rd.leader == 1);
	CHECK_EQ(rd.n_entries, 1); /* the leader's empty entry */
	CHECK(rd.entries[0].index == 1 && rd.entries[0].term == 1 && rd.entries[0].len == 0);
	CHECK(rd.hs_changed);
	CHECK(rd.hs.term == 1 && rd.hs.vote == 1 && rd.hs.commit == 0);
	CHECK_EQ(rd.n_committed, 0);
	CHECK_EQ(rd.n_msgs, 0);
	CHECK(!rd.msgs_after_persist);
	raft_advance(r, &rd);
	CHECK(!raft_has_ready(r));

	/* Proposals: appended at once, not committed before the fdatasync. */
	struct raft_entry p[2] = { { .len = 1, .data = (uint8_t *)"a" },
				   { .len = 2, .data = (uint8_t *)"bc" } };
	CHECK_EQ(raft_propose(r, p, 2), 0);
	raft_ready(r, &rd);
	CHECK_EQ(rd.n_entries, 2);
	CHECK(rd.entries[0].index == 2 && rd.entries[1].index == 3);
	CHECK(rd.entries[1].term == 1 && rd.entries[1].len == 2 && !memcmp(rd.entries[1].data, "bc", 2));
	CHECK(!rd.hs_changed);
	CHECK_EQ(rd.n_committed, 0);
	raft_advance(r, &rd);
	CHECK_EQ(raft_commit_index(r), 0);
	for (int i = 0; i < 30; i++)
		raft_tick(r); /* time alone commits nothing */
	CHECK_EQ(raft_commit_index(r), 0);
	CHECK(raft_is_leader(r)); /* a single voter is its own quorum */

	/* The WAL made entry 1 durable: it commits, and goes to apply. */
	raft_persisted(r, 1, 1);
	CHECK_EQ(raft_commit_index(r), 1);
	raft_ready(r, &rd);
	CHECK(rd.hs_changed && rd.hs.commit == 1);
	CHECK_EQ(rd.n_committed, 1);
	CHECK_EQ(rd.committed[0].index, 1);
	raft_advance(r, &rd);
	/* A stale report (wrong term) is ignored; the right one commits all. */
	raft_persisted(r, 3, 2);
	CHECK_EQ(raft_commit_index(r), 1);
	raft_persisted(r, 3, 1);
	CHECK_EQ(raft_commit_index(r), 3);
	raft_ready(r, &rd);
	CHECK_EQ(rd.n_committed, 2);
	CHECK(rd.committed[0].index == 2 && rd.committed[1].index == 3);
	raft_advance(r, &rd);

	/* ReadIndex on a lone voter: its commit index, at once. */
	CHECK_EQ(raft_read_index(r, 0), -EINVAL);
	CHECK_EQ(raft_read_index(r, 77), 0);
	raft_ready(r, &rd);
	CHECK_EQ(rd.n_reads, 1);
	CHECK(rd.reads[0].index == 3 && rd.reads[0].context == 77);
	raft_advance(r, &rd);
	CHECK(!raft_has_ready(r));
	raft_free(r);
}

/* The single voter through the real WAL: persist each ready, report
 * durability as the WAL does, restart from the WAL's replay, and go on. */
static void run_ready(struct raft *r, struct wal *w, uint64_t *applied)
{
	struct raft_ready rd;
	while (raft_has_ready(r)) {
		raft_ready(r, &rd);
		CHECK_EQ(wal_save(w, rd.hs_changed ? &rd.hs : NULL, rd.entries, rd.n_entries), 0);
		uint64_t li = rd.n_entries ? rd.entries[rd.n_entries - 1].index : 0;
		uint64_t lt = rd.n_entries ? rd.entries[rd.n_entries - 1].term : 0;
		for (size_t i = 0; i < rd.n_committed; i++) {
			CHECK_EQ(rd.committed[i].index, *applied + 1);
			*applied = rd.committed[i].index;
		}
		raft_advance(r, &rd);
		CHECK_EQ(wal_sync(w), 0);
		if (li)
			raft_persisted(r, li, lt);
	}
}

static void test_single_voter_with_wal(void)
{
	char dir[512];
	struct wal *w;
	struct wal_options o = { .segment_bytes = 32 * 1024 };
	struct wal_replay rep;
	uint64_t applied = 0;
	uint8_t data[100];

	wt_path(dir, sizeof(dir), "raftwal");
	CHECK_EQ(diskio_plain_open(-1, &o.io), 0);
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	struct raft *r = single(3);
	tick_to_leader(r);
	run_ready(r, w, &applied);
	for (int i = 0; i < 300; i++) {
		struct raft_entry e = wt_entry(0, 0, (uint32_t)(i % 100), data);
		CHECK_EQ(raft_propose(r, &e, 1), 0);
		if (i % 7 == 0)
			run_ready(r, w, &applied);
	}
	run_ready(r, w, &applied);
	CHECK_EQ(applied, 301);
	CHECK_EQ(raft_commit_index(r), 301);
	raft_free(r);
	CHECK_EQ(wal_close(w), 0);

	/* Restart: replay, hand the log to a new core, which must become
	 * leader of term 2 and deliver what the application lacks. */
	CHECK_EQ(diskio_plain_open(-1, &o.io), 0);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &rep), 0);
	CHECK_EQ(rep.n_entries, 301);
	struct raft_config c;
	static const uint64_t voters[] = { 1 };
	raft_config_defaults(&c);
	c.id = 1;
	c.voters = voters;
	c.n_voters = 1;
	applied = 250; /* the application's durable point */
	CHECK_EQ(raft_new(&c, &rep.state, 0, 0, rep.entries, rep.n_entries, applied, &r), 0);
	rep.entries = NULL; /* taken over */
	rep.n_entries = 0;
	wal_replay_free(&rep);
	CHECK_EQ(raft_commit_index(r), 301);
	CHECK_EQ(raft_term(r), 1);
	run_ready(r, w, &applied);
	CHECK_EQ(applied, 301); /* 251..301 re-delivered */
	tick_to_leader(r);
	CHECK_EQ(raft_term(r), 2);
	run_ready(r, w, &applied);
	CHECK_EQ(applied, 302); /* the new term's empty entry */
	raft_free(r);
	CHECK_EQ(wal_close(w), 0);
}

/* ---- three nodes, driven by hand ---- */

#define N 3

struct net {
	struct raft *r[N + 1];
	struct raft_msg q[4096];  /* in flight, in order; entries copied */
	struct raft_entry qe[4096][64];
	uint8_t qd[4096][64][32];
	size_t nq;
	bool cut[N + 1];          /* isolated from everyone */
};

static void net_init(struct net *n)
{
	static const uint64_t voters[N] = { 1, 2, 3 };
	memset(n, 0, sizeof(*n));
	for (uint64_t id = 1; id <= N; id++) {
		struct raft_config c;
		raft_config_defaults(&c);
		c.id = id;
		c.voters = voters;
		c.n_voters = N;
		c.seed = id * 11;
		CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &n->r[id]), 0);
	}
}

static void net_free(struct net *n)
{
	for (int id = 1; id <= N; id++)
		raft_free(n->r[id]);
}

/* Takes every node's ready: persists at once (reports durability), and
 * queues the messages (copying entries). */
static void net_collect(struct net *n)
{
	for (int id = 1; id <= N; id++) {
		struct raft *r = n->r[id];
		struct raft_ready rd;
		while (raft_has_ready(r)) {
			raft_ready(r, &rd);
			for (size_t i = 0; i < rd.n_msgs; i++) {
				CHECK(n->nq < 4096);
				struct raft_msg m = rd.msgs[i];
				CHECK(m.n_entries <= 64);
				for (size_t k = 0; k < m.n_entries; k++) {
					n->qe[n->nq][k] = m.entries[k];
					CHECK(m.entries[k].len <= 32);
					if (m.entries[k].len)
						memcpy(n->qd[n->nq][k], m.entries[k].data,
						       m.entries[k].len);
					n->qe[n->nq][k].data = n->qd[n->nq][k];
				}
				m.entries = n->qe[n->nq];
				n->q[n->nq++] = m;
			}
			uint64_t li = rd.n_entries ? rd.entries[rd.n_entries - 1].index : 0;
			uint64_t lt = rd.n_entries ? rd.entries[rd.n_entries - 1].term : 0;
			raft_advance(r, &rd);
			if (li)
				raft_persisted(r, li, lt);
		}
	}
}

/* Delivers queued messages (dropping those to or from a cut node) until
 * the network is quiet. */
static void net_settle(struct net *n)
{
	for (int round = 0; round < 100; round++) {
		net_collect(n);
		if (n->nq == 0)
			return;
		size_t nq = n->nq;
		static struct raft_msg q[4096];
		static struct raft_entry qe[4096][64];
		static uint8_t qd[4096][64][32];
		memcpy(q, n->q, nq * sizeof(q[0]));
		memcpy(qe, n->qe, nq * sizeof(qe[0]));
		memcpy(qd, n->qd, nq * sizeof(qd[0]));
		n->nq = 0;
		for (size_t i = 0; i < nq; i++) {
			struct raft_msg m = q[i];
			if (n->cut[m.to] || n->cut[m.from])
				continue;
			for (size_t k = 0; k < m.n_entries; k++)
				qe[i][k].data = qd[i][k];
			m.entries = qe[i];
			CHECK_EQ(raft_step(n->r[m.to], &m), 0);
		}
	}
	CHECK(!"the network never settled");
}

static void net_tick(struct net *n, int id, int ticks)
{
	for (int i = 0; i < ticks; i++)
		raft_tick(n->r[id]);
}

static int net_leader(struct net *n)
{
	int lead = 0;
	for (int id = 1; id <= N; id++)
		if (!n->cut[id] && raft_is_leader(n->r[id])) {
			CHECK(lead == 0);
			lead = id;
		}
	return lead;
}

static void propose(struct net *n, int id, const char *s)
{
	struct raft_entry e = { .len = (uint32_t)strlen(s), .data = (uint8_t *)s };
	CHECK_EQ(raft_propose(n->r[id], &e, 1), 0);
}

/* With node 1 cut off, ticks nodes 2 and 3 until one leads; returns it. */
static int elect_without_1(struct net *n)
{
	for (int i = 0; i < 40 && !net_leader(n); i++) {
		net_tick(n, 2, 1);
		net_tick(n, 3, 1);
		net_settle(n);
	}
	int lead = net_leader(n);
	CHECK(lead == 2 || lead == 3);
	return lead;
}

static void test_three_nodes(void)
{
	static struct net n;
	net_init(&n);

	/* Node 1 campaigns; pre-vote then vote; everyone follows. */
	CHECK_EQ(raft_campaign(n.r[1]), 0);
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 1);
	CHECK_EQ(raft_term(n.r[1]), 1);
	for (int id = 1; id <= N; id++) {
		CHECK_EQ(raft_leader(n.r[id]), 1);
		CHECK_EQ(raft_commit_index(n.r[id]), 1);
	}
	CHECK_EQ(raft_propose(n.r[2], &(struct raft_entry){ 0 }, 1), -EAGAIN);

	propose(&n, 1, "x");
	propose(&n, 1, "y");
	net_settle(&n);
	for (int id = 1; id <= N; id++)
		CHECK_EQ(raft_commit_index(n.r[id]), 3);

	/* ReadIndex from a follower: forwarded, confirmed by a heartbeat
	 * round, answered with the leader's commit index. */
	CHECK_EQ(raft_read_index(n.r[3], 42), 0);
	net_collect(&n);
	struct raft_ready rd;
	CHECK(!raft_has_ready(n.r[3]));
	net_settle(&n);
	/* the read state was taken by net_collect: ask again and look */
	CHECK_EQ(raft_read_index(n.r[1], 43), 0);
	raft_ready(n.r[1], &rd);
	CHECK_EQ(rd.n_reads, 0); /* not before the heartbeat round */
	CHECK(rd.n_msgs == 2 && rd.msgs[0].type == RAFT_MSG_HEARTBEAT && rd.msgs[0].context == 43);
	raft_advance(n.r[1], &rd);
	/* deliver the heartbeats by hand, and one answer: a quorum */
	struct raft_msg hb = rd.msgs[0];
	hb.to = 2;
	CHECK_EQ(raft_step(n.r[2], &hb), 0);
	raft_ready(n.r[2], &rd);
	CHECK(rd.n_msgs == 1 && rd.msgs[0].type == RAFT_MSG_HEARTBEAT_RESP && rd.msgs[0].context == 43);
	struct raft_msg ack = rd.msgs[0];
	raft_advance(n.r[2], &rd);
	CHECK_EQ(raft_step(n.r[1], &ack), 0);
	raft_ready(n.r[1], &rd);
	CHECK_EQ(rd.n_reads, 1);
	CHECK(rd.reads[0].index == 3 && rd.reads[0].context == 43);
	raft_advance(n.r[1], &rd);

	/* Node 3 is cut off; it times out over and over but, with pre-vote,
	 * never raises its term, so rejoining does not depose the leader. */
	n.cut[3] = true;
	for (int i = 0; i < 5; i++) {
		net_tick(&n, 3, 25);
		net_settle(&n);
	}
	CHECK_EQ(raft_term(n.r[3]), 1);
	CHECK(raft_role(n.r[3]) == RAFT_PRE_CANDIDATE);
	propose(&n, 1, "z");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 4);
	n.cut[3] = false;
	net_tick(&n, 1, 1); /* a heartbeat brings node 3 back */
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 1);
	CHECK_EQ(raft_term(n.r[1]), 1);
	CHECK_EQ(raft_commit_index(n.r[3]), 4);

	/* The leader is cut off: check-quorum makes it step down within two
	 * election timeouts (the first check may still see the followers
	 * active); the others elect a new leader in a new term. */
	n.cut[1] = true;
	for (int i = 0; i < 20; i++) {
		net_tick(&n, 1, 1);
		net_settle(&n);
	}
	CHECK(!raft_is_leader(n.r[1]));
	int lead = elect_without_1(&n);
	CHECK_EQ(raft_term(n.r[lead]), 2);
	propose(&n, lead, "w");
	net_settle(&n);

	/* Back, the old leader learns the new term and follows. */
	n.cut[1] = false;
	net_tick(&n, lead, 1);
	net_settle(&n);
	CHECK_EQ(raft_leader(n.r[1]), (uint64_t)lead);
	CHECK_EQ(raft_term(n.r[1]), 2);
	CHECK_EQ(raft_commit_index(n.r[1]), raft_commit_index(n.r[lead]));
	net_free(&n);
}

/* A follower whose log has an uncommitted suffix from an old term gets it
 * replaced by the new leader's entries. */
static void test_conflicting_suffix(void)
{
	static struct net n;
	net_init(&n);
	raft_campaign(n.r[1]);
	net_settle(&n);
	propose(&n, 1, "a");
	net_settle(&n);
	/* Leader 1 appends two entries that reach nobody, then is cut. */
	n.cut[1] = true;
	propose(&n, 1, "lost1");
	propose(&n, 1, "lost2");
	net_settle(&n);
	CHECK_EQ(raft_last_index(n.r[1]), 4);
	int lead = elect_without_1(&n);
	propose(&n, lead, "b");
	propose(&n, lead, "c");
	propose(&n, lead, "d");
	net_settle(&n);
	n.cut[1] = false;
	for (int i = 0; i < 3; i++) {
		net_tick(&n, lead, 1);
		net_settle(&n);
	}
	const struct raftlog *a = raft_log(n.r[1]), *b = raft_log(n.r[lead]);
	CHECK_EQ(raftlog_last_index(a), raftlog_last_index(b));
	for (uint64_t i = 1; i <= raftlog_last_index(a); i++) {
		const struct raft_entry *x = raftlog_entry(a, i), *y = raftlog_entry(b, i);
		CHECK(x->term == y->term && x->len == y->len);
		CHECK(!x->len || !memcmp(x->data, y->data, x->len));
	}
	/* the new leader's empty entry and "b" replaced "lost1" and "lost2" */
	CHECK(raftlog_entry(a, 3)->term == raft_term(n.r[lead]) && raftlog_entry(a, 3)->len == 0);
	CHECK(raftlog_entry(a, 4)->len == 1 && raftlog_entry(a, 4)->data[0] == 'b');
	CHECK_EQ(raft_commit_index(n.r[1]), raftlog_last_index(b));
	net_free(&n);
}

/* A follower that fell behind the leader's compacted log gets a snapshot,
 * then the entries after it. */
static void test_snapshot_catch_up(void)
{
	static struct net n;
	struct raft_ready rd;
	net_init(&n);
	raft_campaign(n.r[1]);
	net_settle(&n);
	n.cut[3] = true;
	for (int i = 0; i < 20; i++)
		propose(&n, 1, "e");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 21);
	raft_compact(n.r[1], 15);
	CHECK_EQ(raft_log(n.r[1])->snap_index, 15);
	n.cut[3] = false;
	net_tick(&n, 1, 1);
	/* deliver until node 3 is handed the snapshot */
	bool got = false;
	for (int round = 0; round < 20 && !got; round++) {
		net_collect(&n);
		size_t nq = n.nq;
		n.nq = 0;
		for (size_t i = 0; i < nq; i++) {
			struct raft_msg m = n.q[i];
			m.entries = n.qe[i];
			raft_step(n.r[m.to], &m);
			if (m.type == RAFT_MSG_SNAP && m.to == 3) {
				CHECK(m.snap_index == 15);
				raft_report_snapshot(n.r[1], 3, true);
				CHECK(raft_has_ready(n.r[3]));
				raft_ready(n.r[3], &rd);
				CHECK(rd.has_snapshot && rd.snap_index == 15);
				CHECK(rd.msgs_after_persist);
				raft_advance(n.r[3], &rd);
				for (size_t k = 0; k < rd.n_msgs; k++) {
					struct raft_msg a = rd.msgs[k];
					raft_step(n.r[a.to], &a);
				}
				got = true;
			}
		}
	}
	CHECK(got);
	for (int i = 0; i < 3; i++) {
		net_tick(&n, 1, 1);
		net_settle(&n);
	}
	CHECK_EQ(raft_commit_index(n.r[3]), 21);
	CHECK_EQ(raft_log(n.r[3])->snap_index, 15);
	CHECK_EQ(raft_last_index(n.r[3]), 21);
	net_free(&n);
}

static void test_bad_input(void)
{
	struct raft_config c;
	struct raft *r;
	static const uint64_t dup[] = { 1, 1 }, other[] = { 2, 3 };

	raft_config_defaults(&c);
	c.id = 1;
	c.voters = dup;
	c.n_voters = 2;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), -EINVAL);
	c.voters = other;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), -EINVAL);
	struct raft_hardstate hs = { 1, 0, 5 };
	c.voters = dup;
	c.n_voters = 1;
	CHECK_EQ(raft_new(&c, &hs, 0, 0, NULL, 0, 0, &r), -EINVAL); /* commit past the log */
	r = single(1);
	struct raft_msg m = { .type = RAFT_MSG_HUP, .to = 1, .from = 2 };
	CHECK_EQ(raft_step(r, &m), -EINVAL);
	m.type = RAFT_MSG_APP;
	m.to = 9;
	CHECK_EQ(raft_step(r, &m), -EINVAL);
	m.to = 1;
	m.from = 9; /* not a member: dropped */
	m.term = 50;
	CHECK_EQ(raft_step(r, &m), 0);
	CHECK_EQ(raft_term(r), 0);
	m.type = 99;
	CHECK_EQ(raft_step(r, &m), -EINVAL);
	raft_free(r);
}

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	wt_count_allocs();
	test_single_voter();
	test_single_voter_with_wal();
	test_three_nodes();
	test_conflicting_suffix();
	test_snapshot_catch_up();
	test_bad_input();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_raft: ok\n");
	return 0;
}
