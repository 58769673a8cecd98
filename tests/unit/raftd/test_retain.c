/*
 * raftd/retain.c: how far the applied Raft log is compacted. Alone, a
 * member keeps the catch-up margin only; a leader keeps back to its
 * lowest follower within --snapshot-count entries; the byte budget cuts
 * through both, down to a small floor; nothing that stored may still
 * need, nothing not applied or not durable, and nothing past the limit
 * goes; small steps wait. Also the log's count of the bytes it holds.
 */
#include "wal_util.h"

#include <stdint.h>

#include "raftd/raft/raftlog.h"
#include "raftd/retain.h"

#define VAL 1000u

/* Entries 1..n of VAL bytes each, all committed, durable and applied. */
static void make_log(struct raftlog *l, uint64_t n)
{
	static uint8_t buf[VAL];
	raftlog_init(l, 0, 0);
	for (uint64_t i = 1; i <= n; i++) {
		struct raft_entry e = { .term = 1, .index = i, .len = VAL, .data = buf };
		CHECK_EQ(raftlog_append(l, &e, 1), 0);
	}
	l->persisting = l->stabled = l->committed = l->applying = n;
}

/* The bytes of entries (from, to]. */
static uint64_t bytes_in(const struct raftlog *l, uint64_t from, uint64_t to)
{
	uint64_t b = 0;
	for (uint64_t i = from + 1; i <= to; i++)
		b += raftlog_entry_bytes(raftlog_entry(l, i));
	return b;
}

static struct retain alone(uint64_t keep_from)
{
	return (struct retain){ .keep_from = keep_from, .margin = RETAIN_MARGIN_ENTRIES,
				.limit = UINT64_MAX,
				.followers = UINT64_MAX, .max_extra = 100000,
				.budget = UINT64_MAX };
}

static void test_bytes_counted(void)
{
	struct raftlog l;
	make_log(&l, 300);
	CHECK_EQ(l.bytes, bytes_in(&l, 0, 300));
	raftlog_compact(&l, 120);
	CHECK_EQ(l.bytes, bytes_in(&l, 120, 300));
	struct raft_entry e = { .term = 2, .len = 10, .data = (uint8_t *)"0123456789" };
	bool matched;
	uint64_t last;
	l.committed = 200;
	CHECK_EQ(raftlog_maybe_append(&l, 250, 1, &e, 1, &matched, &last), 0); /* 251.. go */
	CHECK(matched);
	CHECK_EQ(raftlog_last_index(&l), 251);
	CHECK_EQ(l.bytes, bytes_in(&l, 120, 251));
	raftlog_reset(&l, 400, 3);
	CHECK_EQ(l.bytes, 0);
	raftlog_free(&l);
	CHECK_EQ(l.bytes, 0);
}

/* No follower: only the margin stays, a step at a time. */
static void test_alone(void)
{
	struct raftlog l;
	make_log(&l, 20000);
	struct retain r = alone(20001);
	CHECK_EQ(retain_compact_to(&l, &r), 20000 - RETAIN_MARGIN_ENTRIES);
	raftlog_compact(&l, 15000);
	r.keep_from = 20001; /* nothing new: nothing more goes */
	CHECK_EQ(retain_compact_to(&l, &r), 15000);
	/* stored's need rules: entries it has not made durable stay */
	raftlog_free(&l);
	make_log(&l, 20000);
	r.keep_from = 9001;
	CHECK_EQ(retain_compact_to(&l, &r), 4000);
	r.keep_from = 6000; /* 999 < a step */
	CHECK_EQ(retain_compact_to(&l, &r), 0);
	/* nor what is not applied or not durable here */
	r.keep_from = 20001;
	l.applying = 12000;
	CHECK_EQ(retain_compact_to(&l, &r), 7000);
	l.applying = 20000;
	l.stabled = 11000;
	CHECK_EQ(retain_compact_to(&l, &r), 6000);
	raftlog_free(&l);
}

/* A leader keeps what its lowest follower needs, within --snapshot-count. */
static void test_followers(void)
{
	struct raftlog l;
	make_log(&l, 20000);
	struct retain r = alone(20001);
	r.followers = 3000;
	CHECK_EQ(retain_compact_to(&l, &r), 3000);
	r.followers = 500; /* less than a step past the start */
	CHECK_EQ(retain_compact_to(&l, &r), 0);
	r.followers = 18000; /* ahead of the margin: the margin stays */
	CHECK_EQ(retain_compact_to(&l, &r), 15000);
	r.followers = 0;
	r.max_extra = 10000;
	CHECK_EQ(retain_compact_to(&l, &r), 5000);
	r.limit = 4200; /* a follower that just took a snapshot */
	CHECK_EQ(retain_compact_to(&l, &r), 4200);
	raftlog_free(&l);
}

/* Past the budget the oldest entries go, down to three quarters of it,
 * followers and margin or not, but never the floor. */
static void test_budget(void)
{
	struct raftlog l;
	make_log(&l, 20000);
	struct retain r = alone(20001);
	r.followers = 100;
	r.budget = 4u << 20;
	uint64_t to = retain_compact_to(&l, &r);
	uint64_t goal = r.budget - r.budget / 4;
	CHECK(to > 100 && to < 20000);
	CHECK(bytes_in(&l, to, 20000) <= goal);
	CHECK(bytes_in(&l, to - 1, 20000) > goal);
	raftlog_compact(&l, to);
	CHECK(l.bytes <= goal);
	CHECK_EQ(retain_compact_to(&l, &r), to); /* under it now */

	/* a budget smaller than the margin: the margin goes too */
	r.budget = 1;
	CHECK_EQ(retain_compact_to(&l, &r), 20000 - RETAIN_FLOOR_ENTRIES);
	r.limit = to + 10;
	CHECK_EQ(retain_compact_to(&l, &r), to + 10);
	r.limit = UINT64_MAX;
	r.keep_from = 19000;
	CHECK_EQ(retain_compact_to(&l, &r), 19000 - 1 - RETAIN_FLOOR_ENTRIES);
	r.keep_from = 0; /* stored has nothing yet */
	CHECK_EQ(retain_compact_to(&l, &r), to);
	raftlog_free(&l);

	/* a log no longer than the floor stays whole */
	make_log(&l, RETAIN_FLOOR_ENTRIES);
	r.keep_from = RETAIN_FLOOR_ENTRIES + 1;
	CHECK_EQ(retain_compact_to(&l, &r), 0);
	raftlog_free(&l);
}

int main(void)
{
	wt_count_allocs();
	test_bytes_counted();
	test_alone();
	test_followers();
	test_budget();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_retain: ok\n");
	return 0;
}
