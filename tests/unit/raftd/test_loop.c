/*
 * raftd's event loop (raftd/loop.c) with real rings, a real WAL and the
 * test playing the gateways (claiming slots, pushing MSG_PROPOSE and
 * MSG_READ_INDEX) and stored (holding its role, consuming MSG_COMMITTED as
 * stored does: skip an index already applied, drop one beyond applied + 1,
 * publish its status):
 *
 *   - a lone member bootstraps as etcd (ConfChange at index 1), leads at
 *     term 2, and proposals from two slots arrive on the COMMITTED ring in
 *     order, each exactly once, with their bytes; reads are answered with
 *     an index covering every write that came before;
 *   - a full COMMITTED ring never stalls the loop (reads still answered)
 *     and loses or repeats nothing once stored catches up;
 *   - a new stored epoch replays from its durable index + 1, in order;
 *   - without a leader (three voters, no peers) proposals and reads get
 *     etcd's "no leader";
 *   - a raftd process SIGKILLed while quiet comes back from its WAL and
 *     repeats nothing; SIGKILLed in the middle of a stream it loses nothing
 *     acknowledged (every entry pushed before the kill is in its WAL
 *     afterwards, same index, same bytes) and what it re-sends is only what
 *     stored already has, byte for byte; SIGTERM ends it cleanly.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/signalfd.h>

#include "raftd_util.h"

#include "base/clock/clock.h"
#include "raftd/bootstrap.h"
#include "raftd/loop.h"
#include "raftd/wal/wal.h"
#include "shm/hello.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"

#define MAX_INDEX 8192
#define MAX_RID 8192
#define WAIT_MS 20000

static char path[512];

/* ---- the test's stored ---- */

struct tstore {
	struct ring *ring;
	uint64_t applied;
	uint64_t hash[MAX_INDEX];  /* content of each index applied, 0 = none */
	uint64_t where[MAX_RID];   /* index each request id was applied at */
	uint64_t dups;             /* records at or below applied (skipped) */
	uint64_t ahead;            /* records beyond applied + 1 (dropped) */
	uint64_t replayed;         /* indexes applied again after a restart */
	bool allow_ahead;
	bool allow_repropose;      /* a request id at two indexes (a raftd
				    * killed after taking a proposal, before
				    * releasing it, proposes it again) */
	uint64_t reproposed;
	uint64_t members;          /* entries with data that are not client
				    * requests: raftd's own membership
				    * proposals (publish, cluster version) */
};

static uint64_t content_hash(uint32_t type, const uint8_t *p, uint32_t len)
{
	uint64_t h = 0xcbf29ce484222325ull ^ type;
	for (uint32_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h | 1;
}

/* Consumes up to max records waiting on COMMITTED, as stored would. */
static void ts_consume_some(struct tstore *t, uint64_t max)
{
	struct rt_rec rec;

	for (uint64_t n = 0; n < max && rt_take(t->ring, &rec); n++) {
		struct msg_committed h = rt_committed(&rec);
		const uint8_t *data = rec.data + sizeof(h);
		uint64_t hs = content_hash(h.entry_type, data, h.data_len);
		CHECK(h.index > 0 && h.index < MAX_INDEX);
		if (h.index <= t->applied) {
			CHECK(t->hash[h.index] == hs); /* a repeat is the same entry */
			t->dups++;
			continue;
		}
		if (h.index > t->applied + 1) {
			CHECK(t->allow_ahead);
			t->ahead++;
			continue;
		}
		if (t->hash[h.index]) {
			CHECK(t->hash[h.index] == hs);
			t->replayed++;
		}
		t->hash[h.index] = hs;
		t->applied = h.index;
		uint64_t slot, rid;
		if (h.entry_type == RAFT_ENTRY_NORMAL && rt_decode(data, h.data_len, &slot, &rid)) {
			CHECK(rid < MAX_RID);
			if (t->where[rid] && t->where[rid] != h.index) {
				CHECK(t->allow_repropose);
				t->reproposed++;
				continue;
			}
			t->where[rid] = h.index;
		} else if (h.entry_type == RAFT_ENTRY_NORMAL && h.data_len) {
			t->members++;
		}
	}
}

static void ts_consume(struct tstore *t)
{
	ts_consume_some(t, UINT64_MAX);
}

/* Consumes until applied reaches index (or fails after WAIT_MS). */
static void ts_wait_applied(struct tstore *t, uint64_t index)
{
	int64_t end = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	for (;;) {
		ts_consume(t);
		if (t->applied >= index)
			return;
		if (clock_now_ns() > end) {
			fprintf(stderr, "stored applied %llu, waited for %llu\n",
				(unsigned long long)t->applied, (unsigned long long)index);
			CHECK(!"timed out waiting for committed entries");
		}
		usleep(200);
	}
}

/* Consumes until request id rid was applied. */
static void ts_wait_rid(struct tstore *t, uint64_t rid)
{
	int64_t end = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (!t->where[rid]) {
		ts_consume(t);
		CHECK(clock_now_ns() < end);
		usleep(200);
	}
}

/* Consumes until raftd's own two entries (its publish and the cluster
 * version) have come, within WAIT_MS. */
static void ts_wait_members(struct tstore *t)
{
	int64_t until = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (t->members < 2 && clock_now_ns() < until) {
		usleep(200);
		ts_consume(t);
	}
	CHECK_EQ(t->members, 2);
}

/* The test takes stored's role (a stored that started, applied nothing)
 * and two gateway slots in r. */
static void play_stored_and_gateways(struct shm_region *r, struct tstore *t,
				     struct shm_slot_ref *s0, struct shm_slot_ref *s1)
{
	memset(t, 0, sizeof(*t));
	t->ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	CHECK_EQ(shm_role_claim(r, SHM_ROLE_STORED), 0);
	CHECK_EQ(shm_slot_claim(r, s0), 0);
	CHECK_EQ(shm_slot_claim(r, s1), 0);
	rt_stored_status(r, 1, 0, 0);
}

/* Every entry stored applied is in the WAL in dir, same index, same
 * bytes. */
static void check_wal(const char *dir, const struct tstore *t)
{
	struct wal_replay rep;
	CHECK_EQ(wal_read(dir, 0, 0, &rep), 0);
	CHECK(rep.n_entries >= t->applied);
	for (uint64_t i = 1; i <= t->applied; i++) {
		const struct raft_entry *e = &rep.entries[i - 1];
		CHECK_EQ(e->index, i);
		CHECK(content_hash(e->type, e->data, e->len) == t->hash[i]);
	}
	wal_replay_free(&rep);
}

/* Pushes a proposal, consuming COMMITTED while the slot's ring is full. */
static void push(struct tstore *t, struct shm_region *r, const struct shm_slot_ref *s,
		 uint64_t rid)
{
	struct ring *in = shm_slot_ring(r, s->index, SHM_SLOT_TO_RAFTD);
	int64_t end = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (rt_propose(in, s, rid, 0) == -EAGAIN) {
		if (t)
			ts_consume(t);
		CHECK(clock_now_ns() < end);
		usleep(100);
	}
}

/* Waits for the next reply from raftd on slot s. */
static struct rt_rec wait_reply(struct shm_region *r, const struct shm_slot_ref *s)
{
	struct rt_rec rec;
	struct ring *ring = shm_slot_ring(r, s->index, SHM_SLOT_FROM_RAFTD);
	CHECK(TEST_WAIT_FOR(rt_take(ring, &rec), WAIT_MS));
	return rec;
}

/* Reads raftd's status once it leads in a term above min_term. */
static struct status_raftd wait_leader(struct shm_region *r, uint64_t min_term)
{
	struct status_raftd st = { 0 };
	CHECK(TEST_WAIT_FOR(status_raftd_read(r, &st) == 0 && st.is_leader &&
			    st.term > min_term, WAIT_MS));
	return st;
}

/* ---- a loop in a thread of this process ---- */

struct runner {
	struct shm_region *r; /* the loop's own handle (another "process") */
	struct loop *loop;
	pthread_t thread;
	int rc;
};

static void *runner_main(void *arg)
{
	struct runner *u = arg;
	u->rc = loop_run(u->loop);
	return NULL;
}

/* The request timeout runner_start gives raftd (0: etcd's default). */
static uint64_t runner_request_timeout_ms;

static void runner_start(struct runner *u, const char *wal_dir, const struct initial_cluster *c,
			 uint64_t member)
{
	CHECK_EQ(shm_region_attach(path, &u->r), 0);
	CHECK_EQ(shm_role_claim(u->r, SHM_ROLE_RAFTD), 0);
	struct loop_options o = {
		.region = u->r, .wal_dir = wal_dir, .cluster = c, .member_id = member,
		.tick_ms = 10, .election_ms = 100, .signal_fd = -1,
		.request_timeout_ms = runner_request_timeout_ms,
	};
	CHECK_EQ(loop_new(&o, &u->loop), 0);
	CHECK_EQ(pthread_create(&u->thread, NULL, runner_main, u), 0);
}

static void runner_stop(struct runner *u, struct loop_stats *st)
{
	loop_stop(u->loop);
	CHECK_EQ(pthread_join(u->thread, NULL), 0);
	CHECK_EQ(u->rc, 0);
	loop_get_stats(u->loop, st);
	loop_free(u->loop);
	shm_region_detach(u->r);
}

static void test_lone_member(void)
{
	static struct tstore t;
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct initial_cluster c;
	struct shm_slot_ref s0, s1;
	struct runner u;
	struct loop_stats stats;
	char wal_dir[512];

	play_stored_and_gateways(r, &t, &s0, &s1);
	CHECK_EQ(initial_cluster_parse("t=http://127.0.0.1:1", "tok", &c), 0);
	wt_path(wal_dir, sizeof(wal_dir), "lone");
	runner_start(&u, wal_dir, &c, c.v[0].id);

	/* the attach hello is served by the loop */
	CHECK_EQ(hello_send(r, &s0, SHM_ROLE_RAFTD, 0), 0);
	bool acked = false;
	CHECK(TEST_WAIT_FOR(hello_take_acks(r, &s0, SHM_ROLE_RAFTD, &acked) >= 0 && acked,
			    WAIT_MS));

	/* etcd's bootstrap entry, then the leader's empty entry of term 2 */
	struct status_raftd st = wait_leader(r, 0);
	CHECK(st.leader_id == c.v[0].id && st.term == 2);
	CHECK(shm_region_member_id(r) == 0); /* main.c sets it, not the loop */
	ts_wait_applied(&t, 2);
	/* term 2 settled at its first entry, the leader's empty one */
	CHECK(TEST_WAIT_FOR(status_raftd_read(r, &st) == 0 && st.settled_term == 2, WAIT_MS));
	CHECK_EQ(st.settled_index, 2);
	uint8_t *cc;
	uint32_t cc_len;
	CHECK_EQ(bootstrap_conf_change(&c.v[0], &cc, &cc_len), 0);
	CHECK(t.hash[1] == content_hash(RAFT_ENTRY_CONF_CHANGE, cc, cc_len));
	raftd_free(cc);
	CHECK(t.hash[2] == content_hash(RAFT_ENTRY_NORMAL, NULL, 0));

	/* two slots, interleaved bursts: each once, per-slot order kept */
	uint64_t rid = 1;
	for (int burst = 0; burst < 20; burst++) {
		for (int k = 0; k < 15; k++, rid++)
			push(&t, r, (burst + k) % 3 ? &s0 : &s1, rid);
		ts_consume(&t);
	}
	uint64_t last_rid = rid - 1;
	ts_wait_rid(&t, last_rid);
	uint64_t prev0 = 0, prev1 = 0;
	for (uint64_t i = 1; i <= last_rid; i++)
		ts_wait_rid(&t, i);
	/* index order matches push order within each slot */
	for (uint64_t i = 1; i <= last_rid; i++) {
		int burst = (int)((i - 1) / 15), k = (int)((i - 1) % 15);
		uint64_t *prev = (burst + k) % 3 ? &prev0 : &prev1;
		CHECK(t.where[i] > *prev);
		*prev = t.where[i];
	}
	CHECK_EQ(t.dups, 0);
	/* raftd published this member and set the cluster version, once
	 * each, among the requests */
	ts_wait_members(&t);
	CHECK_EQ(t.applied, 2 + t.members + last_rid);

	/* a read covers every write before it */
	CHECK_EQ(rt_read_index(shm_slot_ring(r, s1.index, SHM_SLOT_TO_RAFTD), &s1, 5000), 0);
	struct rt_rec rec = wait_reply(r, &s1);
	struct msg_read_index_reply ri;
	CHECK_EQ(rec.type, MSG_READ_INDEX_REPLY);
	memcpy(&ri, rec.data, sizeof(ri));
	CHECK(ri.status == 0 && ri.origin.request_id == 5000 && ri.origin.slot == s1.index);
	CHECK(ri.index >= t.applied);

	/* stored asleep on its doorbell: the loop wakes it for each committed
	 * proposal (feed_wake after the turn's peer writes); a turn that
	 * published without waking would leave it asleep */
	{
		struct shm_doorbell *sdb = shm_role_doorbell(r, SHM_ROLE_STORED);
		uint64_t wakes0 = shm_doorbell_wakes(sdb);
		for (int k = 0; k < 5; k++, rid++) {
			struct test_sleeper sl;
			ts_consume(&t);
			test_sleeper_start(&sl, sdb);
			push(NULL, r, &s0, rid);
			CHECK(TEST_WAIT_FOR(test_sleeper_rung(&sl), WAIT_MS));
			test_sleeper_stop(&sl);
			ts_wait_rid(&t, rid);
		}
		CHECK(shm_doorbell_wakes(sdb) >= wakes0 + 5);
	}

	/* stored stops taking entries: the ring fills, the loop goes on */
	uint64_t before = t.applied;
	CHECK(400 * 64 > ring_capacity(t.ring)); /* more than it holds */
	for (int k = 0; k < 400; k++, rid++)
		push(NULL, r, k % 2 ? &s0 : &s1, rid);
	CHECK_EQ(rt_read_index(shm_slot_ring(r, s0.index, SHM_SLOT_TO_RAFTD), &s0, 5001), 0);
	rec = wait_reply(r, &s0);
	memcpy(&ri, rec.data, sizeof(ri));
	CHECK(rec.type == MSG_READ_INDEX_REPLY && ri.status == 0);
	CHECK(ri.index >= before); /* covers every acknowledged write */
	for (uint64_t i = rid - 400; i < rid; i++)
		ts_wait_rid(&t, i);
	CHECK_EQ(t.applied, before + 400);
	CHECK_EQ(t.dups, 0);

	/* stored restarts with a checkpoint at applied - 150: replay */
	uint64_t top = t.applied, durable = top - 150;
	t.applied = durable;
	rt_stored_status(r, 2, durable, durable);
	ts_wait_applied(&t, top);
	CHECK_EQ(t.replayed, 150);
	CHECK_EQ(t.dups, 0);
	/* and entries after it go on normally */
	push(&t, r, &s0, rid);
	ts_wait_rid(&t, rid);
	CHECK_EQ(t.applied, top + 1);

	runner_stop(&u, &stats);
	CHECK_EQ(stats.replays, 1);
	CHECK(stats.commits_blocked > 0);
	CHECK(stats.proposed == rid);
	CHECK(stats.wal_batches > 0 && stats.wal_batches <= stats.wal_saves + 1);
	CHECK_EQ(stats.commits_pushed, t.applied + 150);
	CHECK_EQ(stats.read_rounds, 2);
	CHECK_EQ(stats.hellos, 1);
	/* after a stop, raftd says it has no leader */
	CHECK_EQ(status_raftd_read(r, &st), 0);
	CHECK(!st.is_leader && st.leader_id == 0);

	check_wal(wal_dir, &t);
	initial_cluster_free(&c);
	shm_region_detach(r);
	printf("lone member: %llu entries, %llu WAL batches for %llu saves\n",
	       (unsigned long long)t.applied, (unsigned long long)stats.wal_batches,
	       (unsigned long long)stats.wal_saves);
}

static void test_no_leader(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct initial_cluster c;
	struct shm_slot_ref s;
	struct runner u;
	struct loop_stats stats;
	char wal_dir[512];

	CHECK_EQ(shm_slot_claim(r, &s), 0);
	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380,"
				       "c=http://10.0.0.3:2380", "tok", &c), 0);
	wt_path(wal_dir, sizeof(wal_dir), "three");
	runner_request_timeout_ms = 300;
	runner_start(&u, wal_dir, &c, c.v[1].id);

	/* the read is refused at once; the proposal waits for a leader until
	 * the request timeout (30 ticks) */
	struct ring *in = shm_slot_ring(r, s.index, SHM_SLOT_TO_RAFTD);
	CHECK_EQ(rt_propose(in, &s, 1, 0), 0);
	CHECK_EQ(rt_read_index(in, &s, 2), 0);
	uint64_t sent_ms = clock_now_ns() / 1000000;
	static const char *const texts[] = { "etcdserver: no leader",
					     "etcdserver: request timed out" };
	for (uint64_t want = 2; want >= 1; want--) {
		struct rt_rec rec = wait_reply(r, &s);
		struct msg_reject h;
		CHECK_EQ(rec.type, MSG_PROPOSE_REJECT);
		memcpy(&h, rec.data, sizeof(h));
		CHECK(h.status == 14 && h.origin.request_id == want);
		const char *text = texts[2 - want];
		CHECK(h.text_len == strlen(text) && memcmp(rec.data + sizeof(h), text, h.text_len) == 0);
	}
	CHECK(clock_now_ns() / 1000000 - sent_ms >= 300);
	runner_request_timeout_ms = 0;
	/* the bootstrap entries are committed (the log says so) and fed */
	struct ring *committed = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct rt_rec rec;
	for (uint64_t i = 1; i <= 3; i++) {
		CHECK(TEST_WAIT_FOR(rt_take(committed, &rec), WAIT_MS));
		struct msg_committed h = rt_committed(&rec);
		CHECK(h.index == i && h.entry_type == RAFT_ENTRY_CONF_CHANGE);
	}
	/* it campaigns after its election timeout, in vain */
	struct status_raftd st;
	CHECK(TEST_WAIT_FOR(status_raftd_read(r, &st) == 0 && st.term >= 2, WAIT_MS));
	CHECK(!st.is_leader && st.leader_id == 0);
	runner_stop(&u, &stats);
	CHECK_EQ(stats.rejected, 2);
	CHECK(stats.msgs_dropped > 0); /* its vote requests had nowhere to go */

	/* restarted while stored runs, publishing applied 3 and durable 0:
	 * 1..3 come again from its durable index (a stored that restarted
	 * publishes the applied index of the root it holds, not what it
	 * applied; one that applied them skips them); stored then restarts
	 * from a checkpoint at 1: 2 and 3 come again, though nothing new
	 * commits without a leader */
	CHECK_EQ(shm_role_claim(r, SHM_ROLE_STORED), 0);
	rt_stored_status(r, 1, 3, 0);
	runner_start(&u, wal_dir, &c, c.v[1].id);
	for (uint64_t i = 1; i <= 3; i++) {
		CHECK(TEST_WAIT_FOR(rt_take(committed, &rec), WAIT_MS));
		CHECK_EQ(rt_committed(&rec).index, i);
	}
	rt_stored_status(r, 2, 1, 1);
	for (uint64_t i = 2; i <= 3; i++) {
		CHECK(TEST_WAIT_FOR(rt_take(committed, &rec), WAIT_MS));
		CHECK_EQ(rt_committed(&rec).index, i);
	}
	runner_stop(&u, &stats);
	CHECK_EQ(stats.replays, 1);
	CHECK_EQ(stats.commits_pushed, 5);
	CHECK(!ring_has_data(committed));
	initial_cluster_free(&c);
	shm_region_detach(r);
}

/* Stopping with proposals streaming in: each one is durable in the WAL
 * and handed to stored, or refused with "server stopped", or still unread
 * in the ring; none is lost in between. */
static void test_stop_accounts_for_everything(void)
{
	static struct tstore t;
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	struct initial_cluster c;
	struct shm_slot_ref s0, s1;
	struct runner u;
	struct loop_stats stats;
	char wal_dir[512];
	enum { N = 300 };
	static uint8_t fate[N + 1]; /* 1 WAL, 2 refused, 3 unread */

	memset(fate, 0, sizeof(fate));
	play_stored_and_gateways(r, &t, &s0, &s1);
	CHECK_EQ(initial_cluster_parse("s=http://127.0.0.1:3", "tok", &c), 0);
	wt_path(wal_dir, sizeof(wal_dir), "stop");
	runner_start(&u, wal_dir, &c, c.v[0].id);
	wait_leader(r, 0);
	for (uint64_t rid = 1; rid <= N; rid++)
		push(NULL, r, &s0, rid);
	runner_stop(&u, &stats);

	/* what the WAL holds went to stored too */
	struct wal_replay rep;
	uint64_t slot, rid, in_wal = 0, refused = 0, unread = 0;
	CHECK_EQ(wal_read(wal_dir, 0, 0, &rep), 0);
	for (size_t i = 0; i < rep.n_entries; i++) {
		const struct raft_entry *e = &rep.entries[i];
		if (rt_decode(e->data, e->len, &slot, &rid)) {
			CHECK(rid >= 1 && rid <= N && !fate[rid]);
			fate[rid] = 1;
			in_wal++;
		}
	}
	ts_consume(&t);
	CHECK_EQ(t.applied, rep.n_entries);
	wal_replay_free(&rep);
	struct rt_rec rec;
	while (rt_take(shm_slot_ring(r, s0.index, SHM_SLOT_FROM_RAFTD), &rec)) {
		struct msg_reject h;
		CHECK_EQ(rec.type, MSG_PROPOSE_REJECT);
		memcpy(&h, rec.data, sizeof(h));
		CHECK(h.status == 14 && h.text_len == 26 &&
		      memcmp(rec.data + sizeof(h), "etcdserver: server stopped", 26) == 0);
		rid = h.origin.request_id;
		CHECK(rid >= 1 && rid <= N && !fate[rid]);
		fate[rid] = 2;
		refused++;
	}
	while (rt_take(shm_slot_ring(r, s0.index, SHM_SLOT_TO_RAFTD), &rec)) {
		struct msg_propose h;
		memcpy(&h, rec.data, sizeof(h));
		rid = h.origin.request_id;
		CHECK(rid >= 1 && rid <= N && !fate[rid]);
		fate[rid] = 3;
		unread++;
	}
	CHECK_EQ(in_wal + refused + unread, N);
	CHECK_EQ(stats.rejected, refused);
	printf("stop while streaming: %llu durable and fed, %llu refused, %llu left unread\n",
	       (unsigned long long)in_wal, (unsigned long long)refused,
	       (unsigned long long)unread);
	initial_cluster_free(&c);
	shm_region_detach(r);
}

static void *unlock_later(void *arg)
{
	int *fd = arg;
	usleep(150 * 1000);
	close(*fd); /* drops the flock */
	return NULL;
}

/* A WAL still locked when raftd starts (its killed predecessor's io_uring
 * not yet torn down) is waited for, not refused at once. */
static void test_waits_for_wal_lock(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct initial_cluster c;
	struct runner u;
	struct loop_stats stats;
	char wal_dir[512], seg[600];
	pthread_t th;

	CHECK_EQ(initial_cluster_parse("w=http://127.0.0.1:4", "tok", &c), 0);
	wt_path(wal_dir, sizeof(wal_dir), "locked");
	runner_start(&u, wal_dir, &c, c.v[0].id);
	runner_stop(&u, &stats);

	snprintf(seg, sizeof(seg), "%s/0000000000000000-0000000000000000.wal", wal_dir);
	int fd = open(seg, O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
	CHECK_EQ(pthread_create(&th, NULL, unlock_later, &fd), 0);
	int64_t t0 = clock_now_ns();
	runner_start(&u, wal_dir, &c, c.v[0].id);
	CHECK(clock_now_ns() - t0 >= 100 * 1000000ll);
	CHECK_EQ(pthread_join(th, NULL), 0);
	wait_leader(r, 2); /* it leads again, in a new term */
	runner_stop(&u, &stats);
	initial_cluster_free(&c);
	shm_region_detach(r);
}

/* ---- raftd as a process, killed and restarted ---- */

static char fork_wal_dir[512];
static struct initial_cluster fork_cluster;

/* The child: attaches on its own (after fork a handle must not be shared),
 * claims the role and runs the loop until SIGTERM. */
static void child_main(void)
{
	struct shm_region *r;
	sigset_t set;
	struct loop *l;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	CHECK_EQ(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	CHECK(sfd >= 0);
	CHECK_EQ(shm_region_attach(path, &r), 0);
	CHECK_EQ(shm_role_claim(r, SHM_ROLE_RAFTD), 0);
	struct loop_options o = {
		.region = r, .wal_dir = fork_wal_dir, .cluster = &fork_cluster,
		.member_id = fork_cluster.v[0].id, .tick_ms = 10, .election_ms = 100,
		.signal_fd = sfd,
	};
	CHECK_EQ(loop_new(&o, &l), 0);
	int rc = loop_run(l);
	loop_free(l);
	shm_region_detach(r);
	test_child_exit(rc ? 1 : 0);
}

/* The raftd child running now, killed if a check fails in the parent. */
static pid_t live_child;
static pid_t parent_pid;

static void kill_live_child(void)
{
	if (getpid() == parent_pid && live_child > 0) {
		kill(live_child, SIGKILL);
		test_wait(live_child);
	}
}

static pid_t spawn(void)
{
	if (!parent_pid) {
		parent_pid = getpid();
		atexit(kill_live_child);
	}
	pid_t pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0)
		child_main();
	live_child = pid;
	return pid;
}

/* Kills the child with sig and reaps it; returns its wait status. */
static int end_child(pid_t pid, int sig)
{
	CHECK_EQ(kill(pid, sig), 0);
	int st = test_wait(pid);
	live_child = 0;
	return st;
}

static void test_kill_and_restart(void)
{
	static struct tstore t;
	struct shm_region *r = rt_region(path, sizeof(path), 16 * 1024);
	struct shm_slot_ref s0, s1;

	play_stored_and_gateways(r, &t, &s0, &s1);
	CHECK_EQ(initial_cluster_parse("k=http://127.0.0.1:2", "tok", &fork_cluster), 0);
	wt_path(fork_wal_dir, sizeof(fork_wal_dir), "fork");

	pid_t pid = spawn();
	struct status_raftd st = wait_leader(r, 0);
	uint64_t rid = 1;
	for (int k = 0; k < 200; k++, rid++)
		push(&t, r, k % 2 ? &s0 : &s1, rid);
	for (uint64_t i = 1; i < rid; i++)
		ts_wait_rid(&t, i);
	/* and raftd's own two (its publish, the cluster version), which may
	 * commit after the last request: one left unread at the kill would
	 * come after the restart as a third */
	ts_wait_members(&t);
	rt_stored_status(r, 1, t.applied, 0);

	/* quiet kill: every pushed entry was taken; the new raftd feeds
	 * again from stored's durable index (0 here), so what stored applied
	 * comes once more (skipped) and nothing after it twice */
	CHECK_EQ(end_child(pid, SIGKILL), 128 + SIGKILL);
	uint64_t a1 = t.applied, m1 = t.members;
	pid = spawn();
	st = wait_leader(r, st.term);
	for (int k = 0; k < 100; k++, rid++)
		push(&t, r, k % 2 ? &s0 : &s1, rid);
	for (uint64_t i = rid - 100; i < rid; i++)
		ts_wait_rid(&t, i);
	CHECK_EQ(t.dups, a1);
	/* a1 + 1 is the new term's empty entry; the proposals follow it,
	 * with the restarted member's publish among them */
	CHECK(t.members - m1 <= 1);
	for (uint64_t i = 201; i <= 300; i++)
		CHECK(t.where[i] > a1 + 1 && t.where[i] <= a1 + 101 + (t.members - m1));
	CHECK(t.hash[a1 + 1] == content_hash(RAFT_ENTRY_NORMAL, NULL, 0));

	/* kill in the middle of a stream */
	uint64_t first = rid;
	for (int k = 0; k < 300; k++, rid++)
		push(&t, r, k % 2 ? &s0 : &s1, rid);
	/* stored takes one entry at a time: more wait in the ring, or in
	 * the WAL, when raftd dies */
	int64_t end = clock_now_ns() + (uint64_t)WAIT_MS * 1000000u;
	while (!t.where[first + 100]) {
		ts_consume_some(&t, 1);
		CHECK(clock_now_ns() < end);
	}
	rt_stored_status(r, 1, t.applied, 0);
	CHECK_EQ(end_child(pid, SIGKILL), 128 + SIGKILL);
	uint64_t acked = t.applied; /* pushed to stored before the kill */
	t.allow_repropose = true;
	pid = spawn();
	st = wait_leader(r, st.term);
	/* a barrier: once it is applied, everything queued before it was
	 * proposed before it */
	uint64_t barrier = rid++;
	push(&t, r, &s0, barrier);
	ts_wait_rid(&t, barrier);
	uint64_t lost = 0;
	for (uint64_t i = first; i < barrier; i++)
		lost += t.where[i] == 0;
	CHECK_EQ(t.ahead, 0);
	CHECK(t.dups > 0); /* the ring held entries past the published applied */

	/* SIGTERM: clean exit; the WAL holds every entry stored got, as it
	 * got it */
	CHECK_EQ(end_child(pid, SIGTERM), 0);
	check_wal(fork_wal_dir, &t);
	printf("kill mid-stream: %llu applied by stored before the kill, all kept; %llu repeats skipped; "
	       "%llu proposals taken but not committed by the killed raftd, %llu proposed again\n",
	       (unsigned long long)acked, (unsigned long long)t.dups,
	       (unsigned long long)lost, (unsigned long long)t.reproposed);
	initial_cluster_free(&fork_cluster);
	shm_region_detach(r);
}

int main(void)
{
	test_lone_member();
	test_no_leader();
	test_stop_accounts_for_everything();
	test_waits_for_wal_lock();
	test_kill_and_restart();
	printf("raftd/test_loop: ok\n");
	return 0;
}
