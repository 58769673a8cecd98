/*
 * The WAL over io_uring: every write is capped so that it completes short
 * and the rest of the linked write + fsync chain is resubmitted; every
 * batch must still be durable and replay whole. Where io_uring is refused
 * (seccomp, kernel.io_uring_disabled) the test is skipped (exit 77).
 */
#include "wal_util.h"

#include "raftd/wal/wal.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"

static uint8_t bufs[8][2048];

static uint32_t len_of(uint64_t index) { return (uint32_t)(index * 53 % 700); }

/* A new WAL in a fresh directory dir (named after name) with segments of
 * segment_bytes, written through an io_uring of its own (returned). */
static struct diskio *uring_wal(const char *name, uint64_t segment_bytes, char *dir, size_t cap,
				struct wal **w)
{
	struct wal_options o = { .segment_bytes = segment_bytes };

	CHECK_EQ(diskio_uring_open(-1, 4, &o.io), 0);
	wt_path(dir, cap, name);
	CHECK_EQ(wal_create(dir, NULL, 0, &o, w), 0);
	CHECK(!strcmp(wal_io_name(*w), "io_uring"));
	return o.io;
}

static void test_uring_short_writes(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct diskio *io = uring_wal("uring", 64 * 1024, dir, sizeof(dir), &w);

	diskio_uring_set_write_cap(io, 100);
	uint64_t i = 1;
	for (int b = 0; b < 40; b++) {
		struct raft_entry ents[5];
		for (int k = 0; k < 5; k++, i++)
			ents[k] = wt_entry(i, 2, len_of(i), bufs[k]);
		struct raft_hardstate hs = { 2, 1, i - 1 };
		CHECK_EQ(wal_save(w, &hs, ents, 5), 0);
		CHECK_EQ(wal_submit(w), 0);
		/* an event loop: poll, then reap, until the batch is durable */
		while (wal_durable_seq(w) < wal_last_seq(w)) {
			wt_wait_event(w);
			CHECK(wal_reap(w) >= 0);
		}
	}
	CHECK(io->chains >= 40);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, 200);
	for (uint64_t k = 1; k <= 200; k++)
		CHECK(wt_entry_ok(&r.entries[k - 1], k, 2, len_of(k)));
	wal_replay_free(&r);

	/* The automatic choice takes io_uring here. */
	struct diskio *auto_io;
	CHECK_EQ(diskio_open_auto(-1, "a test file", &auto_io), 0);
	CHECK(!strcmp(diskio_name(auto_io), "io_uring"));
	diskio_close(auto_io);
}

/* Inline writes over io_uring: the WAL owes the next submit exactly when
 * the diskio layer will run that write on the caller's thread. A new
 * segment's first write carries its zeros (past DISKIO_INLINE_CHAIN_MAX)
 * and goes to the worker at once, from the reap; a small batch in space
 * already written is owed, and runs (written, synced, signalled) inside
 * wal_submit_owed. */
static void test_inline_owed(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct diskio *io = uring_wal("inline", 256 * 1024, dir, sizeof(dir), &w);

	wal_set_inline_writes(w, true);

	/* one batch past the segment size: its write goes to the worker,
	 * and a cut follows it */
	uint64_t i = 1;
	static uint8_t big[192][2048];
	struct raft_entry ents[192];
	for (int k = 0; k < 192; k++, i++)
		ents[k] = wt_entry(i, 2, 2000, big[k]);
	struct raft_hardstate hs = { 2, 1, 0 };
	CHECK_EQ(wal_save(w, &hs, ents, 192), 0);
	CHECK_EQ(wal_submit(w), 0);
	CHECK(diskio_chain_busy(io));
	uint64_t first = wal_last_seq(w);
	while (wal_durable_seq(w) < first) {
		wt_wait_event(w);
		CHECK(wal_reap(w) >= 0);
	}
	/* the cut: the new segment's write was submitted by the reap */
	CHECK(diskio_chain_busy(io));
	CHECK_EQ(wal_submit_owed(w), 0);
	while (diskio_chain_busy(io)) {
		wt_wait_event(w);
		CHECK(wal_reap(w) >= 0);
	}

	/* two small batches: the first inline at submit, the second saved
	 * while it is unreaped, owed by the reap, run by wal_submit_owed */
	struct raft_entry e = wt_entry(i, 2, 100, bufs[0]);
	CHECK_EQ(wal_save(w, NULL, &e, 1), 0);
	i++;
	CHECK_EQ(wal_submit(w), 0);
	e = wt_entry(i, 2, 100, bufs[1]);
	CHECK_EQ(wal_save(w, NULL, &e, 1), 0);
	CHECK_EQ(wal_reap(w), 1);
	CHECK(!diskio_chain_busy(io));
	CHECK(wal_durable_seq(w) < wal_last_seq(w));
	CHECK_EQ(wal_submit_owed(w), 0);
	struct pollfd p = { .fd = wal_event_fd(w), .events = POLLIN };
	CHECK_EQ(poll(&p, 1, 0), 1);
	CHECK_EQ(wal_reap(w), 1);
	CHECK_EQ(wal_durable_seq(w), wal_last_seq(w));
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, i);
	wal_replay_free(&r);
}

int main(void)
{
	struct diskio *probe;
	int rc = diskio_uring_open(-1, 4, &probe);
	if (rc) {
		printf("test_wal_uring: skipped: io_uring is refused here (%s)\n", strerror(-rc));
		return 77;
	}
	diskio_close(probe);
	log_set_level(LOG_LEVEL_FATAL);
	wt_count_allocs();
	test_uring_short_writes();
	test_inline_owed();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_wal_uring: ok\n");
	return 0;
}
