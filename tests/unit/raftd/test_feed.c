/*
 * raftd/feed.c: committed entries go to stored in order, each once, only
 * up to what the core handed over; a full ring leaves them queued and they
 * go on as room frees; a new stored epoch replays from its durable index
 * + 1; where a feed starts after a raftd restart; entries that cannot be
 * pushed stall the feed loudly instead of skipping.
 *
 * test_in_order_and_bounded and test_replay_on_new_epoch break invariant 5
 * (docs/invariants.md) on purpose: the log holds entries the core has not
 * handed over (not committed and durable here), which must not reach
 * stored, and stored restarts below what it was fed.
 */
#include "raftd_util.h"

#include "raftd/feed.h"
#include "raftd/raft/raftlog.h"

static char path[512];

/* A log of entries 1..n, entry i of term 1 + i / 50 with rt_len(i) bytes. */
static void make_log(struct raftlog *l, uint64_t n)
{
	uint8_t buf[256];
	raftlog_init(l, 0, 0);
	for (uint64_t i = 1; i <= n; i++) {
		struct raft_entry e = { .term = 1 + i / 50, .index = i, .len = rt_len(i),
					.data = buf };
		rt_payload(buf, e.len, 7, i);
		CHECK_EQ(raftlog_append(l, &e, 1), 0);
	}
}

/* Takes every MSG_COMMITTED waiting; checks each is the next one expected
 * (*next), with the log's term and bytes. Returns how many. */
static uint64_t consume(struct ring *ring, uint64_t *next)
{
	struct rt_rec rec;
	uint64_t n = 0, slot, rid;
	while (rt_take(ring, &rec)) {
		struct msg_committed h = rt_committed(&rec);
		CHECK_EQ(h.index, *next);
		CHECK_EQ(h.term, 1 + h.index / 50);
		CHECK_EQ(h.entry_type, RAFT_ENTRY_NORMAL);
		CHECK(rt_decode(rec.data + sizeof(h), h.data_len, &slot, &rid));
		CHECK(slot == 7 && rid == h.index);
		(*next)++;
		n++;
	}
	return n;
}

/* feed_pump makes records visible without waking stored; feed_wake wakes
 * a sleeping stored once for everything pushed since the last wake. */
static void test_wake_after_pump(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { 0 };
	struct test_sleeper sl;
	struct raftlog log;
	struct feed f;
	uint64_t next = 1;

	make_log(&log, 20);
	feed_init(&f, ring, &st);
	test_sleeper_start(&sl, shm_role_doorbell(r, SHM_ROLE_STORED)); /* stored sleeps */
	feed_wake(&f); /* nothing pushed: no wake */
	CHECK_EQ(test_sleeper_wakes(&sl), 0);
	feed_handed(&f, 5);
	CHECK_EQ(feed_pump(&f, &log, 100), 5);
	feed_handed(&f, 8);
	CHECK_EQ(feed_pump(&f, &log, 100), 3);
	CHECK(ring_has_data(ring));
	CHECK_EQ(test_sleeper_wakes(&sl), 0);
	CHECK(!test_sleeper_rung(&sl));
	feed_wake(&f);
	CHECK_EQ(test_sleeper_wakes(&sl), 1);
	CHECK(test_sleeper_rung(&sl));
	feed_wake(&f); /* once */
	CHECK_EQ(test_sleeper_wakes(&sl), 1);
	test_sleeper_stop(&sl);
	CHECK_EQ(consume(ring, &next), 8);
	raftlog_free(&log);
	shm_region_detach(r);
}

static void test_in_order_and_bounded(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { 0 };
	struct raftlog log;
	struct feed f;
	uint64_t next = 1;

	make_log(&log, 2000);
	feed_init(&f, ring, &st);
	CHECK_EQ(feed_start_after(&f), 0);
	CHECK(!feed_pending(&f));
	/* 2000 entries in the log, none handed over yet */
	CHECK_INVARIANT_EQ(INV5_COMMITTED_DURABLE, feed_pump(&f, &log, 100), 0);

	feed_handed(&f, 10);
	CHECK(feed_pending(&f));
	CHECK_EQ(feed_pump(&f, &log, 4), 4); /* bounded per pump */
	CHECK_INVARIANT_EQ(INV5_COMMITTED_DURABLE, feed_pump(&f, &log, 100), 6);
	CHECK(!feed_pending(&f));
	CHECK_EQ(consume(ring, &next), 10);
	feed_handed(&f, 5); /* never moves back */
	CHECK_EQ(f.handed, 10);

	/* a small ring fills: the feed stops, keeps its place, goes on */
	feed_handed(&f, 2000);
	uint64_t rounds = 0;
	while (next <= 2000) {
		int n = feed_pump(&f, &log, 100000);
		CHECK(n >= 0);
		if (n == 0)
			CHECK(f.blocked || next > 2000);
		consume(ring, &next);
		rounds++;
	}
	CHECK(rounds > 3); /* the ring really was full on the way */
	CHECK(f.full > 0);
	CHECK_EQ(f.pushed, 2000);
	CHECK_EQ(feed_keep_from(&f), 1); /* stored's durable index is 0 */
	raftlog_free(&log);
	shm_region_detach(r);
}

static void test_replay_on_new_epoch(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { .epoch = 1 };
	struct raftlog log;
	struct feed f;
	uint64_t next = 1;

	make_log(&log, 100);
	feed_init(&f, ring, &st);
	feed_handed(&f, 100);
	while (next <= 100) {
		CHECK(feed_pump(&f, &log, 1000) >= 0);
		consume(ring, &next);
	}
	/* same epoch, durable moving: no replay, only the keep point */
	st.durable_index = 60;
	st.applied_index = 100;
	CHECK(!feed_observe(&f, &st));
	CHECK_EQ(feed_keep_from(&f), 61);
	CHECK_EQ(feed_pump(&f, &log, 1000), 0);

	/* stored restarted from its checkpoint at 40: 41..100 again */
	st.epoch = 2;
	st.durable_index = 40;
	st.applied_index = 40;
	CHECK_INVARIANT(INV5_COMMITTED_DURABLE, feed_observe(&f, &st));
	CHECK_EQ(f.replays, 1);
	CHECK_INVARIANT_EQ(INV5_COMMITTED_DURABLE, feed_keep_from(&f), 41);
	next = 41;
	while (next <= 100) {
		CHECK(feed_pump(&f, &log, 1000) >= 0);
		consume(ring, &next);
	}
	CHECK(!feed_pending(&f));
	CHECK(!feed_observe(&f, &st)); /* seen */

	/* records already in the ring arrive first, then the replay */
	CHECK(feed_pump(&f, &log, 1000) == 0);
	struct raftlog log2;
	make_log(&log2, 120);
	feed_handed(&f, 120);
	CHECK_EQ(feed_pump(&f, &log2, 10), 10); /* 101..110 in the ring */
	st.epoch = 3;
	st.durable_index = 90;
	CHECK(feed_observe(&f, &st));
	CHECK(feed_pump(&f, &log2, 1000) > 0); /* 91..120 */
	next = 101;
	struct rt_rec rec;
	for (int i = 0; i < 10; i++) {
		CHECK(rt_take(ring, &rec));
		CHECK_EQ(rt_committed(&rec).index, next++);
	}
	next = 91;
	consume(ring, &next);
	CHECK_EQ(next, 121);

	/* an epoch of 0 (a fresh region) is not a restart */
	st.epoch = 0;
	CHECK(!feed_observe(&f, &st));
	raftlog_free(&log);
	raftlog_free(&log2);
	shm_region_detach(r);
}

static void test_start_points(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { .epoch = 5, .applied_index = 70, .durable_index = 30 };
	struct feed f;

	/* from stored's durable index, also while it runs: a stored that
	 * restarted publishes the applied index of the root it holds (its
	 * predecessor's, 70) while it has applied only to its checkpoint
	 * (30) and drops entries past a gap; one that did apply to 70 skips
	 * 31..70 as duplicates. Its epoch is no news. */
	feed_init(&f, ring, &st);
	CHECK_INVARIANT_EQ(INV5_COMMITTED_DURABLE, feed_start_after(&f), 30);
	CHECK(!feed_observe(&f, &st));
	CHECK_EQ(feed_keep_from(&f), 31);
	shm_region_detach(r);
}

static void test_stalls(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { .epoch = 1 };
	struct raftlog log;
	struct feed f;
	uint64_t next = 21;

	/* entries up to 20 are gone from the log: asking for 11 stalls */
	make_log(&log, 40);
	log.applying = log.stabled = log.committed = 40;
	raftlog_compact(&log, 20);
	st.durable_index = 10;
	feed_init(&f, ring, &st);
	feed_handed(&f, 40);
	CHECK_EQ(feed_pump(&f, &log, 1000), 0);
	CHECK(f.stalled);
	CHECK(!feed_pending(&f));
	CHECK_EQ(feed_pump(&f, &log, 1000), 0);
	CHECK(!ring_has_data(ring));
	/* a stored restarted with a checkpoint at 20 is served again */
	st.epoch = 2;
	st.durable_index = 20;
	CHECK(feed_observe(&f, &st));
	CHECK_EQ(feed_pump(&f, &log, 1000), 20);
	consume(ring, &next);
	CHECK_EQ(next, 41);

	/* an entry larger than a ring record stalls the feed, not skips it */
	static uint8_t big[8192];
	struct raft_entry e = { .term = 1, .index = 41, .len = sizeof(big), .data = big };
	CHECK_EQ(raftlog_append(&log, &e, 1), 0);
	feed_handed(&f, 41);
	CHECK_EQ(feed_pump(&f, &log, 1000), 0);
	CHECK(f.stalled);
	CHECK(!ring_has_data(ring));
	raftlog_free(&log);
	shm_region_detach(r);
}

/* Takes the next record, which must be a MSG_SNAPSHOT_INSTALL of index
 * for path. */
static void take_install(struct ring *ring, uint64_t index, const char *want_path)
{
	struct rt_rec rec;
	struct msg_snapshot_install h;
	CHECK(rt_take(ring, &rec));
	CHECK_EQ(rec.type, MSG_SNAPSHOT_INSTALL);
	memcpy(&h, rec.data, sizeof(h));
	CHECK_EQ(h.index, index);
	CHECK_EQ(h.path_len, strlen(want_path));
	CHECK_EQ(rec.len, sizeof(h) + h.path_len);
	CHECK(memcmp(rec.data + sizeof(h), want_path, h.path_len) == 0);
}

/* A snapshot from the leader: its install goes to stored once released
 * (the WAL holds it), before every entry after it, and again when stored
 * restarts below it; never while stored's state is unknown. */
static void test_install(void)
{
	struct shm_region *r = rt_region(path, sizeof(path), 1);
	struct ring *ring = shm_daemon_ring(r, SHM_RING_COMMITTED);
	struct status_stored st = { .epoch = 1, .applied_index = 20, .durable_index = 10 };
	struct raftlog log;
	struct feed f;
	struct rt_rec rec;
	uint64_t next = 21;
	const char *db = "/data/member/snap/0000000000000046.snap.db";

	/* the core's log after the snapshot at 70: entries 71.. */
	make_log(&log, 100);
	raftlog_compact(&log, 70);
	feed_init(&f, ring, &st);
	CHECK_EQ(feed_install(&f, 70, 2, db), 0);
	feed_install_hold(&f);
	feed_handed(&f, 80);
	CHECK(!feed_pending(&f));
	CHECK_EQ(feed_pump(&f, &log, 1000), 0); /* held: nothing, not even 71.. */
	CHECK(!rt_take(ring, &rec));
	CHECK(!f.stalled);
	feed_install_release(&f);
	CHECK(feed_pending(&f));
	CHECK_EQ(feed_pump(&f, &log, 1000), 11); /* the install, then 71..80 */
	take_install(ring, 70, db);
	next = 71;
	CHECK_EQ(consume(ring, &next), 10);

	/* stored restarts before its durable index reached 70: again */
	st.epoch = 2;
	st.durable_index = 10;
	st.applied_index = 10;
	CHECK(feed_observe(&f, &st));
	CHECK_EQ(feed_pump(&f, &log, 1000), 11);
	take_install(ring, 70, db);
	next = 71;
	CHECK_EQ(consume(ring, &next), 10);

	/* it installed: forgotten; a later restart replays entries only */
	st.durable_index = 75;
	CHECK(!feed_observe(&f, &st));
	CHECK(!f.install_active);
	st.epoch = 3;
	CHECK(feed_observe(&f, &st));
	CHECK_EQ(feed_pump(&f, &log, 1000), 5);
	next = 76;
	CHECK_EQ(consume(ring, &next), 5);

	/* a raftd restarted before stored published: the install waits for
	 * stored's state, and goes only if stored is below it */
	struct status_stored none = { 0 };
	feed_init(&f, ring, &none);
	CHECK_EQ(feed_install(&f, 70, 2, db), 0);
	CHECK(!feed_pending(&f));
	CHECK_EQ(feed_pump(&f, &log, 1000), 0);
	st.epoch = 4;
	st.durable_index = 90; /* its db is past the snapshot already */
	CHECK(feed_observe(&f, &st));
	CHECK(!f.install_active);
	CHECK_EQ(feed_pump(&f, &log, 1000), 0); /* 91.. not handed yet */
	CHECK(!rt_take(ring, &rec));
	raftlog_free(&log);
	shm_region_detach(r);
}

int main(void)
{
	wt_count_allocs();
	test_in_order_and_bounded();
	test_replay_on_new_epoch();
	test_start_points();
	test_stalls();
	test_install();
	test_wake_after_pump();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_feed: ok\n");
	return 0;
}
