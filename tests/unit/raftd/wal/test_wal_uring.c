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


static void test_uring_short_writes(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = { .segment_bytes = 64 * 1024 };

	CHECK_EQ(diskio_uring_open(-1, 4, &o.io), 0);
	diskio_uring_set_write_cap(o.io, 100);
	struct diskio *io = o.io;
	wt_path(dir, sizeof(dir), "uring");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	CHECK(!strcmp(wal_io_name(w), "io_uring"));
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
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_wal_uring: ok\n");
	return 0;
}
