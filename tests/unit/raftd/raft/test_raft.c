/*
 * Deterministic tests of raftd/raft/raft.c: the single-voter path (election,
 * commit only after the leader's own fdatasync, ReadIndex), the same
 * through the real WAL with a restart, and small hand-driven three-node
 * scenarios: election, replication, a follower's conflicting suffix
 * replaced, pre-vote keeping a partitioned node from disrupting (and,
 * with pre-vote off, the same node deposing the leader), the
 * leader stepping down without a quorum (check-quorum), ReadIndex
 * confirmed by a heartbeat round, a follower caught up by snapshot; then
 * membership: a voter added and one removed, etcd's one pending conf
 * change, learners (replicated, never counted, never campaigning,
 * promoted), the leader removing itself, leadership transfer (at once,
 * after catching up, forwarded, abandoned), ReadIndex from a follower and
 * a learner in etcd's message shapes, and the configuration a snapshot
 * carries.
 */
#include "wal_util.h"

#include "raftd/raft/raft.h"
#include "raftd/wal/wal.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"

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

/* ---- three to five nodes, driven by hand ---- */

#define N 5

/* Conf change entries of these tests: the type, then the node id (the
 * core never reads an entry's data; etcd's is a raftpb.ConfChange). */
struct cc_data {
	uint8_t type;
	uint8_t node;
};

struct net {
	struct raft *r[N + 1];    /* NULL: not running */
	struct raft_msg q[4096];  /* in flight, in order; entries copied */
	struct raft_entry qe[4096][64];
	uint8_t qd[4096][64][32];
	struct raft_conf_state qc[4096]; /* MsgSnap's configuration */
	size_t nq;
	bool cut[N + 1];          /* isolated from everyone */
	bool no_pre_vote;         /* nodes start with pre_vote off */
	uint64_t read_ctx[N + 1]; /* each node's latest ReadIndex result */
	uint64_t read_index[N + 1];
};

/* Starts node id with an empty log and the configuration of nodes 1..3
 * as voters; nodes 4 and 5 are not members of it (yet): they join as an
 * etcd member started after "member add" does. */
static void net_start(struct net *n, uint64_t id)
{
	static const uint64_t voters[] = { 1, 2, 3 };
	struct raft_config c;
	raft_config_defaults(&c);
	c.id = id;
	c.voters = voters;
	c.n_voters = 3;
	c.seed = id * 11;
	c.pre_vote = !n->no_pre_vote;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &n->r[id]), 0);
}

static void net_init(struct net *n)
{
	memset(n, 0, sizeof(*n));
	for (uint64_t id = 1; id <= 3; id++)
		net_start(n, id);
}

static void net_free(struct net *n)
{
	for (int id = 1; id <= N; id++)
		raft_free(n->r[id]);
}

/* The application's part: applies the conf changes among committed
 * entries, as etcd's server calls ApplyConfChange. */
static void net_apply(struct raft *r, const struct raft_ready *rd)
{
	for (size_t i = 0; i < rd->n_committed; i++) {
		const struct raft_entry *e = &rd->committed[i];
		if (e->type != RAFT_ENTRY_CONF_CHANGE)
			continue;
		CHECK_EQ(e->len, sizeof(struct cc_data));
		struct cc_data cc;
		memcpy(&cc, e->data, sizeof(cc));
		CHECK_EQ(raft_apply_conf_change(r, e->index, cc.type, cc.node, NULL), 0);
	}
}

/* Takes every node's ready: persists at once (reports durability), and
 * queues the messages (copying entries). */
static void net_collect(struct net *n)
{
	for (int id = 1; id <= N; id++) {
		struct raft *r = n->r[id];
		struct raft_ready rd;
		while (r && raft_has_ready(r)) {
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
				if (m.snap_conf) {
					n->qc[n->nq] = *m.snap_conf;
					m.snap_conf = &n->qc[n->nq];
				}
				n->q[n->nq++] = m;
			}
			uint64_t li = rd.n_entries ? rd.entries[rd.n_entries - 1].index : 0;
			uint64_t lt = rd.n_entries ? rd.entries[rd.n_entries - 1].term : 0;
			net_apply(r, &rd);
			for (size_t i = 0; i < rd.n_reads; i++) {
				n->read_ctx[id] = rd.reads[i].context;
				n->read_index[id] = rd.reads[i].index;
			}
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
		static struct raft_conf_state qc[4096];
		memcpy(q, n->q, nq * sizeof(q[0]));
		memcpy(qe, n->qe, nq * sizeof(qe[0]));
		memcpy(qd, n->qd, nq * sizeof(qd[0]));
		memcpy(qc, n->qc, nq * sizeof(qc[0]));
		n->nq = 0;
		for (size_t i = 0; i < nq; i++) {
			struct raft_msg m = q[i];
			if (n->cut[m.to] || n->cut[m.from] || !n->r[m.to])
				continue;
			for (size_t k = 0; k < m.n_entries; k++)
				qe[i][k].data = qd[i][k];
			m.entries = qe[i];
			if (m.snap_conf)
				m.snap_conf = &qc[i];
			CHECK_EQ(raft_step(n->r[m.to], &m), 0);
		}
	}
	CHECK(!"the network never settled");
}

/* Three voters, node 1 elected. */
static void net_init_led(struct net *n)
{
	net_init(n);
	CHECK_EQ(raft_campaign(n->r[1]), 0);
	net_settle(n);
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
		if (n->r[id] && !n->cut[id] && raft_is_leader(n->r[id])) {
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
	for (int id = 1; id <= 3; id++) {
		CHECK_EQ(raft_leader(n.r[id]), 1);
		CHECK_EQ(raft_commit_index(n.r[id]), 1);
	}
	CHECK_EQ(raft_propose(n.r[2], &(struct raft_entry){ 0 }, 1), -EAGAIN);

	propose(&n, 1, "x");
	propose(&n, 1, "y");
	net_settle(&n);
	for (int id = 1; id <= 3; id++)
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

/* Without pre-vote (--pre-vote=false, etcd 3.4's default) a node
 * campaigns at once: MsgVote in a new term. Cut off, it raises its term
 * at each timeout, and back, that term deposes the leader (with
 * pre-vote it does not: test_three_nodes); a node with the whole log then
 * leads in a later term. */
static void test_pre_vote_off(void)
{
	static struct net n;
	memset(&n, 0, sizeof(n));
	n.no_pre_vote = true;
	for (uint64_t id = 1; id <= 3; id++)
		net_start(&n, id);

	CHECK_EQ(raft_campaign(n.r[1]), 0);
	CHECK(raft_role(n.r[1]) == RAFT_CANDIDATE);
	CHECK_EQ(raft_term(n.r[1]), 1);
	net_collect(&n);
	CHECK_EQ(n.nq, 2);
	for (size_t i = 0; i < n.nq; i++)
		CHECK(n.q[i].type == RAFT_MSG_VOTE && n.q[i].term == 1);
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 1);
	propose(&n, 1, "x");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[3]), 2);

	n.cut[3] = true;
	for (int i = 0; i < 5; i++) {
		net_tick(&n, 3, 25);
		net_settle(&n);
	}
	CHECK(raft_role(n.r[3]) == RAFT_CANDIDATE);
	uint64_t t3 = raft_term(n.r[3]);
	CHECK(t3 >= 5);
	propose(&n, 1, "y");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 3);

	n.cut[3] = false;
	net_tick(&n, 1, 1); /* the heartbeat's answer carries node 3's term */
	net_settle(&n);
	CHECK(!raft_is_leader(n.r[1]));
	CHECK_EQ(raft_term(n.r[1]), t3);
	for (int i = 0; i < 60 && !net_leader(&n); i++) {
		for (int id = 1; id <= 3; id++)
			net_tick(&n, id, 1);
		net_settle(&n);
	}
	int lead = net_leader(&n);
	CHECK(lead == 1 || lead == 2); /* node 3 lacks entry 3 */
	CHECK(raft_term(n.r[lead]) > t3);
	propose(&n, lead, "z");
	net_settle(&n);
	for (int id = 1; id <= 3; id++)
		CHECK_EQ(raft_commit_index(n.r[id]), raft_commit_index(n.r[lead]));
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

/* Node 1 leads and commits 20 entries while node 3 is cut off, compacts
 * its log to 15, and node 3 is back: the leader's next heartbeat round
 * finds it behind the log. */
static void net_init_behind(struct net *n)
{
	net_init(n);
	raft_campaign(n->r[1]);
	net_settle(n);
	n->cut[3] = true;
	for (int i = 0; i < 20; i++)
		propose(n, 1, "e");
	net_settle(n);
	CHECK_EQ(raft_commit_index(n->r[1]), 21);
	raft_compact(n->r[1], 15);
	CHECK_EQ(raft_log(n->r[1])->snap_index, 15);
	n->cut[3] = false;
	net_tick(n, 1, 1);
}

/* Delivers node 1's messages round by round until one of them is the
 * MsgSnap to node 3, which is held, not delivered: copied to *snap (the
 * rest of that round is delivered). False if none came in 20 rounds. */
static bool deliver_until_snap(struct net *n, struct raft_msg *snap)
{
	bool got = false;
	for (int round = 0; round < 20 && !got; round++) {
		net_collect(n);
		size_t nq = n->nq;
		n->nq = 0;
		for (size_t i = 0; i < nq; i++) {
			struct raft_msg m = n->q[i];
			m.entries = n->qe[i];
			if (m.type == RAFT_MSG_SNAP && m.to == 3) {
				*snap = m;
				got = true;
			} else {
				raft_step(n->r[m.to], &m);
			}
		}
	}
	return got;
}

/* A follower that fell behind the leader's compacted log gets a snapshot,
 * then the entries after it. */
static void test_snapshot_catch_up(void)
{
	static struct net n;
	struct raft_ready rd;
	struct raft_msg snap;
	net_init_behind(&n);
	CHECK(deliver_until_snap(&n, &snap));
	CHECK(snap.snap_index == 15);
	raft_step(n.r[3], &snap);
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
	for (int i = 0; i < 3; i++) {
		net_tick(&n, 1, 1);
		net_settle(&n);
	}
	CHECK_EQ(raft_commit_index(n.r[3]), 21);
	CHECK_EQ(raft_log(n.r[3])->snap_index, 15);
	CHECK_EQ(raft_last_index(n.r[3]), 21);
	net_free(&n);
}

/* An answer to a MsgApp sent before a snapshot, arriving after the
 * snapshot was sent, does not send the follower another snapshot: only
 * the answer to the probe moves it to replicating. */
static void test_snapshot_stale_ack(void)
{
	static struct net n;
	struct raft_ready rd;
	struct raft_progress pr;
	struct raft_msg snap;
	net_init_behind(&n);
	/* the leader sends node 3 the snapshot; it is held */
	CHECK(deliver_until_snap(&n, &snap));
	CHECK_EQ(raft_progress(n.r[1], 3, &pr), 0);
	CHECK(pr.state == RAFT_PROGRESS_SNAPSHOT && pr.pending_snapshot == 15);
	raft_report_snapshot(n.r[1], 3, true);
	/* a late acceptance of entries up to 5, sent before the snapshot */
	struct raft_msg stale = { .type = RAFT_MSG_APP_RESP, .from = 3, .to = 1,
				  .term = raft_term(n.r[1]), .index = 5 };
	CHECK_EQ(raft_step(n.r[1], &stale), 0);
	CHECK_EQ(raft_progress(n.r[1], 3, &pr), 0);
	CHECK(pr.state == RAFT_PROGRESS_PROBE && pr.match == 5 && pr.next == 16);
	raft_ready(n.r[1], &rd);
	for (size_t i = 0; i < rd.n_msgs; i++)
		CHECK(!(rd.msgs[i].type == RAFT_MSG_SNAP && rd.msgs[i].to == 3));
	raft_advance(n.r[1], &rd);
	net_free(&n);
}

/* ---- membership, learners, leadership transfer ---- */

static void settle_ticks(struct net *n, int id, int ticks)
{
	for (int i = 0; i < ticks; i++) {
		net_tick(n, id, 1);
		net_settle(n);
	}
}

/* Takes every node's ready and delivers only the messages to node to. */
static void deliver_only(struct net *n, int to)
{
	net_collect(n);
	for (size_t i = 0; i < n->nq; i++)
		if (n->q[i].to == (uint64_t)to && !n->cut[n->q[i].from])
			CHECK_EQ(raft_step(n->r[to], &n->q[i]), 0);
	n->nq = 0;
}

static void propose_cc(struct net *n, int id, enum raft_conf_change_type type, uint8_t node)
{
	struct cc_data cc = { (uint8_t)type, node };
	struct raft_entry e = { .type = RAFT_ENTRY_CONF_CHANGE, .len = sizeof(cc),
				.data = (uint8_t *)&cc };
	CHECK_EQ(raft_propose(n->r[id], &e, 1), 0);
}

/* A conf change committed and applied everywhere reachable: one more
 * heartbeat carries the commit index to the followers. */
static void change_conf(struct net *n, int lead, enum raft_conf_change_type type, uint8_t node)
{
	propose_cc(n, lead, type, node);
	net_settle(n);
	settle_ticks(n, lead, 1);
}

static bool conf_is(struct raft *r, const char *voters, const char *learners)
{
	struct raft_conf_state cs;
	char v[RAFT_MAX_MEMBERS + 1] = "", l[RAFT_MAX_MEMBERS + 1] = "";
	raft_conf_state(r, &cs);
	/* ids below 10, sorted, as digits */
	for (uint64_t id = 1; id < 10; id++) {
		for (size_t i = 0; i < cs.n_voters; i++)
			if (cs.voters[i] == id)
				v[strlen(v)] = (char)('0' + id);
		for (size_t i = 0; i < cs.n_learners; i++)
			if (cs.learners[i] == id)
				l[strlen(l)] = (char)('0' + id);
	}
	return !strcmp(v, voters) && !strcmp(l, learners);
}

/* A voter joins (from an empty configuration), then one leaves: quorums
 * follow; the removed member never campaigns. */
static void test_conf_change_add_remove(void)
{
	static struct net n;
	net_init(&n);
	net_start(&n, 4);
	raft_campaign(n.r[1]);
	net_settle(&n);
	CHECK(!raft_has_ready(n.r[4]));
	change_conf(&n, 1, RAFT_CONF_ADD_NODE, 4);
	for (int id = 1; id <= 4; id++) {
		CHECK(conf_is(n.r[id], "1234", ""));
		CHECK_EQ(raft_commit_index(n.r[id]), 2);
	}
	struct raft_progress pr;
	CHECK_EQ(raft_progress(n.r[1], 4, &pr), 0);
	CHECK(!pr.learner && pr.match == 2 && pr.state == RAFT_PROGRESS_REPLICATE);
	CHECK_EQ(raft_progress(n.r[2], 4, &pr), -EAGAIN);
	CHECK_EQ(raft_progress(n.r[1], 9, &pr), -ENOENT);

	/* four voters: three make a quorum, two do not */
	n.cut[2] = true;
	propose(&n, 1, "a");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 3);
	n.cut[3] = true;
	propose(&n, 1, "b");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 3);
	n.cut[2] = n.cut[3] = false;
	settle_ticks(&n, 1, 1);
	CHECK_EQ(raft_commit_index(n.r[1]), 4);

	change_conf(&n, 1, RAFT_CONF_REMOVE_NODE, 2);
	CHECK(conf_is(n.r[1], "134", "") && conf_is(n.r[2], "134", ""));
	/* {1,3,4}: two of three commit, and node 2 no longer matters */
	n.cut[2] = n.cut[3] = true;
	propose(&n, 1, "c");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 6);
	/* the removed node never campaigns */
	uint64_t term = raft_term(n.r[2]);
	net_tick(&n, 2, 100);
	net_settle(&n);
	CHECK(raft_role(n.r[2]) == RAFT_FOLLOWER && raft_term(n.r[2]) == term);
	CHECK_EQ(raft_campaign(n.r[2]), 0);
	CHECK(raft_role(n.r[2]) == RAFT_FOLLOWER);
	net_free(&n);
}

/* etcd's one-conf-change-at-a-time rule. */
static void test_pending_conf_change(void)
{
	static struct net n;
	net_init_led(&n);
	/* two in one proposal: the second becomes an empty normal entry */
	struct cc_data a = { RAFT_CONF_ADD_LEARNER_NODE, 4 }, b = { RAFT_CONF_ADD_LEARNER_NODE, 5 };
	struct raft_entry e[2] = {
		{ .type = RAFT_ENTRY_CONF_CHANGE, .len = sizeof(a), .data = (uint8_t *)&a },
		{ .type = RAFT_ENTRY_CONF_CHANGE, .len = sizeof(b), .data = (uint8_t *)&b },
	};
	CHECK_EQ(raft_propose(n.r[1], e, 2), 0);
	const struct raftlog *l = raft_log(n.r[1]);
	CHECK(raftlog_entry(l, 2)->type == RAFT_ENTRY_CONF_CHANGE);
	CHECK(raftlog_entry(l, 3)->type == RAFT_ENTRY_NORMAL && raftlog_entry(l, 3)->len == 0);
	/* another one before the first is applied: replaced too */
	propose_cc(&n, 1, RAFT_CONF_ADD_LEARNER_NODE, 5);
	CHECK(raftlog_entry(l, 4)->type == RAFT_ENTRY_NORMAL && raftlog_entry(l, 4)->len == 0);
	net_settle(&n);
	CHECK(conf_is(n.r[1], "123", "4"));
	/* applied: the next one is taken */
	propose_cc(&n, 1, RAFT_CONF_ADD_LEARNER_NODE, 5);
	CHECK(raftlog_entry(l, 5)->type == RAFT_ENTRY_CONF_CHANGE);
	net_settle(&n);
	CHECK(conf_is(n.r[1], "123", "45") && conf_is(n.r[3], "123", "45"));

	/* A new leader takes none until it applied its whole log as of its
	 * election (etcd does not look for conf changes in the tail): node
	 * 2 leads with an entry of node 1 it never saw committed. */
	n.cut[3] = true;
	propose(&n, 1, "x");
	deliver_only(&n, 2);
	n.cut[1] = true;
	n.cut[3] = false;
	net_tick(&n, 3, 10); /* its leader's lease runs out */
	net_collect(&n);
	n.nq = 0;
	raft_campaign(n.r[2]);
	for (int i = 0; i < 2; i++) {
		deliver_only(&n, 3);
		deliver_only(&n, 2);
	}
	CHECK(raft_is_leader(n.r[2]));
	l = raft_log(n.r[2]);
	uint64_t last = raftlog_last_index(l);
	CHECK(raft_commit_index(n.r[2]) < last - 1);
	/* before the leader's empty entry commits, a change is refused */
	propose_cc(&n, 2, RAFT_CONF_REMOVE_NODE, 4);
	CHECK(raftlog_entry(l, last + 1)->type == RAFT_ENTRY_NORMAL);
	settle_ticks(&n, 2, 1);
	CHECK(conf_is(n.r[2], "123", "45"));
	propose_cc(&n, 2, RAFT_CONF_REMOVE_NODE, 4);
	CHECK(raftlog_entry(l, last + 2)->type == RAFT_ENTRY_CONF_CHANGE);
	net_settle(&n);
	CHECK(conf_is(n.r[2], "123", "5"));
	net_free(&n);
}

/* A learner gets the log but neither counts nor campaigns; promoted, it
 * does both. */
static void test_learner(void)
{
	static struct net n;
	net_init(&n);
	net_start(&n, 4);
	raft_campaign(n.r[1]);
	net_settle(&n);
	change_conf(&n, 1, RAFT_CONF_ADD_LEARNER_NODE, 4);
	CHECK(conf_is(n.r[4], "123", "4"));
	CHECK_EQ(raft_commit_index(n.r[4]), 2);
	struct raft_status st;
	raft_status(n.r[1], &st);
	CHECK_EQ(st.n_progress, 4);
	bool seen = false;
	for (size_t i = 0; i < st.n_progress; i++)
		if (st.progress[i].id == 4) {
			CHECK(st.progress[i].learner && st.progress[i].match == 2);
			seen = true;
		}
	CHECK(seen);
	CHECK_EQ(raft_transfer_leader(n.r[1], 4), -EINVAL);

	/* leader and learner alone: no commit */
	n.cut[2] = n.cut[3] = true;
	propose(&n, 1, "a");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 2);
	CHECK_EQ(raft_last_index(n.r[4]), 3);
	/* nor does the learner keep the leader in power: check-quorum */
	settle_ticks(&n, 1, 25);
	CHECK(!raft_is_leader(n.r[1]));
	/* it never campaigns */
	uint64_t term = raft_term(n.r[4]);
	n.cut[1] = true;
	settle_ticks(&n, 4, 100);
	CHECK(raft_role(n.r[4]) == RAFT_FOLLOWER && raft_term(n.r[4]) == term);

	/* a learner grants votes (etcd: it may have been promoted without
	 * knowing yet), with no lease in its way here */
	n.cut[1] = false;
	struct raft_msg v = { .type = RAFT_MSG_VOTE, .to = 4, .from = 1, .term = term + 5,
			      .index = 3, .log_term = term };
	CHECK_EQ(raft_step(n.r[4], &v), 0);
	struct raft_ready rd;
	raft_ready(n.r[4], &rd);
	CHECK(rd.n_msgs == 1 && rd.msgs[0].type == RAFT_MSG_VOTE_RESP && !rd.msgs[0].reject);
	raft_advance(n.r[4], &rd);
	n.cut[2] = n.cut[3] = false;
	int lead = 0;
	for (int i = 0; i < 60 && !lead; i++) {
		for (int id = 1; id <= 3; id++)
			net_tick(&n, id, 1);
		net_settle(&n);
		lead = net_leader(&n);
	}
	CHECK(lead >= 1 && lead <= 3);

	/* promote: now {1,2,3,4} with a quorum of three */
	change_conf(&n, lead, RAFT_CONF_ADD_NODE, 4);
	CHECK(conf_is(n.r[4], "1234", "") && conf_is(n.r[lead], "1234", ""));
	int other = lead == 3 ? 2 : 3, third = 6 - lead - other;
	n.cut[other] = n.cut[third] = true;
	uint64_t c = raft_commit_index(n.r[lead]);
	propose(&n, lead, "b");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[lead]), c);
	n.cut[third] = false;
	settle_ticks(&n, lead, 1);
	CHECK_EQ(raft_commit_index(n.r[lead]), c + 1);
	net_free(&n);
}

/* The leader applies its own removal: it stays leader without counting
 * itself (etcd 3.4), drops proposals; once it stops, the rest elect. */
static void test_remove_leader(void)
{
	static struct net n;
	net_init_led(&n);
	change_conf(&n, 1, RAFT_CONF_REMOVE_NODE, 1);
	CHECK(conf_is(n.r[1], "23", "") && conf_is(n.r[2], "23", "") &&
	      conf_is(n.r[3], "23", ""));
	CHECK(raft_is_leader(n.r[1]));
	struct raft_entry e = { .len = 1, .data = (uint8_t *)"x" };
	CHECK_EQ(raft_propose(n.r[1], &e, 1), -EPERM);
	CHECK_EQ(raft_commit_index(n.r[2]), 2);
	n.cut[1] = true; /* the application stops it */
	int lead = elect_without_1(&n);
	propose(&n, lead, "y");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[5 - lead]), 4);
	net_free(&n);
}

/* Leadership transfer: at once to an up-to-date voter, after catching up
 * a lagging one, forwarded from a follower, and abandoned after an
 * election timeout. */
static void test_transfer_leader(void)
{
	static struct net n;
	struct raft_ready rd;
	net_init_led(&n);
	propose(&n, 1, "a");
	net_settle(&n);

	CHECK_EQ(raft_transfer_leader(n.r[1], 1), -EALREADY);
	CHECK_EQ(raft_transfer_leader(n.r[1], 9), -EINVAL);
	CHECK_EQ(raft_transfer_leader(n.r[1], 2), 0);
	struct raft_entry e = { .len = 1, .data = (uint8_t *)"x" };
	CHECK_EQ(raft_propose(n.r[1], &e, 1), -EBUSY);
	raft_ready(n.r[1], &rd);
	CHECK(rd.n_msgs == 1 && rd.msgs[0].type == RAFT_MSG_TIMEOUT_NOW && rd.msgs[0].to == 2 &&
	      rd.msgs[0].term == 1);
	struct raft_msg tn = rd.msgs[0];
	raft_advance(n.r[1], &rd);
	CHECK_EQ(raft_step(n.r[2], &tn), 0);
	raft_ready(n.r[2], &rd);
	/* no pre-vote, straight to a vote marked as a transfer */
	CHECK(raft_role(n.r[2]) == RAFT_CANDIDATE && raft_term(n.r[2]) == 2);
	CHECK(rd.n_msgs == 2 && rd.msgs[0].type == RAFT_MSG_VOTE && rd.msgs[0].transfer);
	struct raft_msg votes[2] = { rd.msgs[0], rd.msgs[1] };
	raft_advance(n.r[2], &rd);
	/* node 3 heard from its leader just now, yet grants it */
	CHECK_EQ(raft_step(n.r[votes[0].to], &votes[0]), 0);
	CHECK_EQ(raft_step(n.r[votes[1].to], &votes[1]), 0);
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 2);
	CHECK_EQ(raft_leader(n.r[1]), 2);

	/* a lagging target is caught up first */
	n.cut[3] = true;
	propose(&n, 2, "b");
	propose(&n, 2, "c");
	net_settle(&n);
	n.cut[3] = false;
	CHECK_EQ(raft_transfer_leader(n.r[2], 3), 0);
	raft_ready(n.r[2], &rd);
	CHECK(rd.n_msgs == 1 && rd.msgs[0].type == RAFT_MSG_APP && rd.msgs[0].to == 3);
	raft_advance(n.r[2], &rd);
	n.nq = 0;
	CHECK_EQ(raft_step(n.r[3], &rd.msgs[0]), 0); /* its entries: none, a probe */
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 3);
	CHECK_EQ(raft_commit_index(n.r[3]), raft_last_index(n.r[3]));

	/* forwarded by a follower, naming itself */
	CHECK_EQ(raft_transfer_leader(n.r[1], 2), -EINVAL);
	CHECK_EQ(raft_transfer_leader(n.r[1], 1), 0);
	net_settle(&n);
	CHECK_EQ(net_leader(&n), 1);

	/* a target that never answers: abandoned after an election timeout */
	n.cut[3] = true;
	CHECK_EQ(raft_transfer_leader(n.r[1], 3), 0);
	struct raft_status st;
	raft_status(n.r[1], &st);
	CHECK_EQ(st.lead_transferee, 3);
	CHECK_EQ(raft_propose(n.r[1], &e, 1), -EBUSY);
	settle_ticks(&n, 1, 10);
	raft_status(n.r[1], &st);
	CHECK_EQ(st.lead_transferee, 0);
	CHECK(raft_is_leader(n.r[1]));
	CHECK_EQ(raft_propose(n.r[1], &e, 1), 0);
	net_free(&n);
}

/* ReadIndex from a follower and a learner in etcd's message shapes: the
 * request without a term, the answer with the leader's term and the
 * context; heartbeats carry the newest pending context until a quorum
 * answers one. */
static void test_follower_read_index(void)
{
	static struct net n;
	struct raft_ready rd;
	net_init_led(&n);

	CHECK_EQ(raft_read_index(n.r[2], 0x0102030405060708ull), 0);
	raft_ready(n.r[2], &rd);
	CHECK(rd.n_msgs == 1);
	struct raft_msg req = rd.msgs[0];
	CHECK(req.type == RAFT_MSG_READ_INDEX && req.to == 1 && req.term == 0 &&
	      req.context == 0x0102030405060708ull && req.n_entries == 0);
	raft_advance(n.r[2], &rd);
	CHECK_EQ(raft_step(n.r[1], &req), 0);
	raft_ready(n.r[1], &rd);
	CHECK(rd.n_msgs == 2);
	for (size_t i = 0; i < 2; i++)
		CHECK(rd.msgs[i].type == RAFT_MSG_HEARTBEAT &&
		      rd.msgs[i].context == 0x0102030405060708ull);
	raft_advance(n.r[1], &rd); /* the round is lost */
	/* the next heartbeat carries the pending context again */
	net_tick(&n, 1, 1);
	raft_ready(n.r[1], &rd);
	CHECK(rd.n_msgs == 2 && rd.msgs[0].context == 0x0102030405060708ull);
	struct raft_msg hb = rd.msgs[0];
	raft_advance(n.r[1], &rd);
	CHECK_EQ(raft_step(n.r[hb.to], &hb), 0);
	raft_ready(n.r[hb.to], &rd);
	struct raft_msg ack = rd.msgs[0];
	raft_advance(n.r[hb.to], &rd);
	CHECK_EQ(raft_step(n.r[1], &ack), 0);
	raft_ready(n.r[1], &rd);
	CHECK(rd.n_msgs == 1 && rd.n_reads == 0);
	struct raft_msg resp = rd.msgs[0];
	CHECK(resp.type == RAFT_MSG_READ_INDEX_RESP && resp.to == 2 && resp.term == 1 &&
	      resp.index == 1 && resp.context == 0x0102030405060708ull);
	raft_advance(n.r[1], &rd);
	CHECK_EQ(raft_step(n.r[2], &resp), 0);
	raft_ready(n.r[2], &rd);
	CHECK(rd.n_reads == 1 && rd.reads[0].index == 1 &&
	      rd.reads[0].context == 0x0102030405060708ull);
	raft_advance(n.r[2], &rd);
	/* afterwards heartbeats carry no context */
	net_tick(&n, 1, 1);
	raft_ready(n.r[1], &rd);
	CHECK(rd.n_msgs == 2 && rd.msgs[0].context == 0);
	raft_advance(n.r[1], &rd);

	/* a learner's read, answered while learners' acks do not count */
	net_start(&n, 4);
	change_conf(&n, 1, RAFT_CONF_ADD_LEARNER_NODE, 4);
	n.cut[2] = n.cut[3] = true;
	CHECK_EQ(raft_read_index(n.r[4], 77), 0);
	net_settle(&n);
	CHECK_EQ(n.read_ctx[4], 0); /* the learner's own ack does not count */
	n.cut[2] = false;
	settle_ticks(&n, 1, 1);
	CHECK(n.read_ctx[4] == 77 && n.read_index[4] == raft_commit_index(n.r[1]));
	net_free(&n);
}

/* A snapshot carries the configuration at its point: a member added
 * after the leader compacted past its conf change learns the members
 * from it; a snapshot that does not name the receiver is refused. */
static void test_snapshot_conf(void)
{
	static struct net n;
	net_init_led(&n);
	change_conf(&n, 1, RAFT_CONF_ADD_LEARNER_NODE, 5);
	propose(&n, 1, "a");
	net_settle(&n);
	change_conf(&n, 1, RAFT_CONF_ADD_NODE, 4);
	propose(&n, 1, "b");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[1]), 5);
	raft_compact(n.r[1], 3); /* past the learner, before node 4 */
	net_start(&n, 4);
	settle_ticks(&n, 1, 3);
	/* the snapshot at 3 (voters 1-3, learner 5) does not name node 4:
	 * it refuses it, as etcd does */
	CHECK_EQ(raft_log(n.r[4])->snap_index, 0);
	CHECK(conf_is(n.r[4], "123", ""));
	struct raft_progress pr;
	CHECK_EQ(raft_progress(n.r[1], 4, &pr), 0);
	CHECK(pr.state == RAFT_PROGRESS_SNAPSHOT && pr.pending_snapshot == 3);
	raft_report_snapshot(n.r[1], 4, false); /* the transport's word */
	raft_compact(n.r[1], 5);
	settle_ticks(&n, 1, 3);
	CHECK_EQ(raft_log(n.r[4])->snap_index, 5);
	CHECK_EQ(raft_commit_index(n.r[4]), 5);
	CHECK(conf_is(n.r[4], "1234", "5"));
	propose(&n, 1, "c");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[4]), 6);

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
	c.learners = dup;
	c.n_learners = 1;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), 0); /* a learner */
	raft_free(r);
	c.learners = other;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), -EINVAL); /* 2 twice */
	c.n_learners = 0;
	CHECK_EQ(raft_new(&c, NULL, 0, 0, NULL, 0, 0, &r), 0); /* not a member */
	raft_free(r);
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
	m.from = 1;
	CHECK_EQ(raft_step(r, &m), -EINVAL); /* from itself */
	m.from = 9; /* not a member (yet, here): taken, as etcd does */
	m.term = 50;
	CHECK_EQ(raft_step(r, &m), 0);
	CHECK_EQ(raft_term(r), 50);
	CHECK_EQ(raft_leader(r), 9);
	CHECK_EQ(raft_apply_conf_change(r, 1, 7, 2, NULL), -EINVAL);
	CHECK_EQ(raft_apply_conf_change(r, 1, RAFT_CONF_REMOVE_NODE, 1, NULL), -EINVAL);
	m.type = 99;
	CHECK_EQ(raft_step(r, &m), -EINVAL);
	raft_free(r);
}

/* A follower told that its leader's process is gone ends the leader's
 * lease and campaigns within ticks ranked by id; a voter that was not
 * told still honours the lease. */
static void test_leader_down(void)
{
	static struct net n;
	net_init_led(&n);
	propose(&n, 1, "x");
	net_settle(&n);
	raft_free(n.r[1]);
	n.r[1] = NULL;

	/* about a peer that is not the leader: nothing changes */
	raft_report_leader_down(n.r[2], 3);
	net_tick(&n, 2, 1);
	net_settle(&n);
	CHECK(raft_role(n.r[2]) == RAFT_FOLLOWER);
	CHECK_EQ(raft_term(n.r[2]), 1);

	/* Node 2, the lowest id left, campaigns at its next tick; node 3,
	 * not told, still sees the lease and refuses its pre-vote. */
	raft_report_leader_down(n.r[2], 1);
	net_tick(&n, 2, 1);
	net_settle(&n);
	CHECK(raft_role(n.r[2]) == RAFT_PRE_CANDIDATE);
	CHECK_EQ(net_leader(&n), 0);
	CHECK_EQ(raft_term(n.r[2]), 1);

	/* Told too, node 3 (ranked second) campaigns within three ticks and
	 * wins: long before an election timeout (10 ticks). */
	raft_report_leader_down(n.r[3], 1);
	net_tick(&n, 3, 1);
	net_settle(&n);
	CHECK(raft_role(n.r[3]) == RAFT_FOLLOWER);
	for (int i = 1; i < 3 && !net_leader(&n); i++) {
		net_tick(&n, 3, 1);
		net_settle(&n);
	}
	CHECK_EQ(net_leader(&n), 3);
	CHECK_EQ(raft_term(n.r[3]), 2);
	propose(&n, 3, "y");
	net_settle(&n);
	CHECK_EQ(raft_commit_index(n.r[2]), raft_commit_index(n.r[3]));
	CHECK_EQ(raft_leader(n.r[2]), 3);
	net_free(&n);
}

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	wt_count_allocs();
	test_single_voter();
	test_single_voter_with_wal();
	test_three_nodes();
	test_pre_vote_off();
	test_conflicting_suffix();
	test_snapshot_catch_up();
	test_snapshot_stale_ack();
	test_conf_change_add_remove();
	test_pending_conf_change();
	test_learner();
	test_remove_leader();
	test_leader_down();
	test_transfer_leader();
	test_follower_read_index();
	test_snapshot_conf();
	test_bad_input();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_raft: ok\n");
	return 0;
}
