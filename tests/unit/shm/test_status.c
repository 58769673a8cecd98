/*
 * Unit tests for shm/status.c: round trips through the region (the
 * records, and stored's delivered index beside its record, each written
 * without touching the other), and the seqlock under a racing writer (no
 * torn read is ever returned), and a writer that died mid-write.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "shm/status.h"

static void test_round_trip(const char *path)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 4096 };
	struct shm_region *l, *a;
	struct status_raftd rs = { 0 };
	struct status_stored ss = { 0 };
	struct status_stored in = {
		.root_page = 11, .txid = 12, .applied_index = 13,
		.revision = 14, .high_water_page = 15, .epoch = 16,
		.durable_index = 17, .db_generation = 18,
	};

	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(status_raftd_read(a, &rs), 0);
	CHECK_EQ(rs.leader_id, 0);
	CHECK(!rs.is_leader);
	rs = (struct status_raftd){ .leader_id = 7, .term = 3,
				    .commit_index = 99, .is_leader = true };
	status_raftd_write(l, &rs);
	memset(&rs, 0, sizeof(rs));
	CHECK_EQ(status_raftd_read(a, &rs), 0);
	CHECK_EQ(rs.leader_id, 7);
	CHECK_EQ(rs.term, 3);
	CHECK_EQ(rs.commit_index, 99);
	CHECK(rs.is_leader);

	CHECK_EQ(status_stored_delivered(a), 0);
	status_stored_write(l, &in);
	CHECK_EQ(status_stored_read(a, &ss), 0);
	CHECK(memcmp(&ss, &in, sizeof(ss)) == 0);
	CHECK_EQ(status_stored_delivered(a), 0);

	/* the delivered index is a word of its own: publishing it is no
	 * write of the record (its version stays), and the record's writes
	 * leave it alone */
	uint64_t version = status_stored_version(a);
	status_stored_deliver(l, 21);
	CHECK_EQ(status_stored_delivered(a), 21);
	CHECK_EQ(status_stored_version(a), version);
	in.applied_index = 22;
	status_stored_write(l, &in);
	CHECK_EQ(status_stored_version(a), version + 1);
	CHECK_EQ(status_stored_delivered(a), 21);
	CHECK_EQ(status_stored_read(a, &ss), 0);
	CHECK_EQ(ss.applied_index, 22);

	/* db_no_space and the auth store's flag share a word: each reads
	 * back as it was written, beside the auth revision */
	for (int k = 0; k < 4; k++) {
		in.db_no_space = (k & 1) != 0;
		in.auth_enabled = (k & 2) != 0;
		in.auth_revision = 100 + (uint64_t)k;
		status_stored_write(l, &in);
		CHECK_EQ(status_stored_read(a, &ss), 0);
		CHECK(ss.db_no_space == in.db_no_space && ss.auth_enabled == in.auth_enabled);
		CHECK_EQ(ss.auth_revision, 100 + (uint64_t)k);
		CHECK_EQ(ss.defrag_total_ns, in.defrag_total_ns);
	}
	shm_region_detach(a);
	shm_region_detach(l);
}

struct race {
	uint8_t mem[STATUS_SEQLOCK_BYTES] __attribute__((aligned(64)));
	atomic_int stop;
};

static void *writer(void *arg)
{
	struct race *ra = arg;
	uint64_t w[STATUS_SEQLOCK_WORDS];
	uint64_t k = 0;
	unsigned i;

	while (!atomic_load_explicit(&ra->stop, memory_order_relaxed)) {
		k++;
		for (i = 0; i < STATUS_SEQLOCK_WORDS; i++)
			w[i] = k * 1000 + i;
		status_seqlock_write((struct status_seqlock *)ra->mem, w,
				     STATUS_SEQLOCK_WORDS);
	}
	return NULL;
}

static void test_torn_reads(void)
{
	static struct race ra;
	uint64_t w[STATUS_SEQLOCK_WORDS], last = 0, reads = 0, changes = 0;
	int64_t start = clock_now_ns();
	pthread_t t;
	unsigned i;

	status_seqlock_init(ra.mem);
	for (i = 0; i < STATUS_SEQLOCK_WORDS; i++)
		w[i] = i;
	status_seqlock_write((struct status_seqlock *)ra.mem, w,
			     STATUS_SEQLOCK_WORDS);
	atomic_init(&ra.stop, 0);
	CHECK_EQ(pthread_create(&t, NULL, writer, &ra), 0);
	/* At least 300 ms and 100 versions seen (a loaded machine may run
	 * the writer rarely), at most 20 s. */
	while (clock_now_ns() - start < 300 * 1000000ll || changes < 100) {
		CHECK(clock_now_ns() - start < 20000 * 1000000ll);
		CHECK_EQ(status_seqlock_read((void *)ra.mem, w,
					     STATUS_SEQLOCK_WORDS), 0);
		/* Every word comes from the same write. */
		for (i = 1; i < STATUS_SEQLOCK_WORDS; i++)
			CHECK_EQ(w[i], w[0] + i);
		CHECK(w[0] >= last);
		changes += w[0] != last;
		last = w[0];
		reads++;
	}
	atomic_store(&ra.stop, 1);
	pthread_join(t, NULL);
	printf("seqlock: %llu consistent reads, %llu distinct versions, "
	       "%llu writes\n", (unsigned long long)reads,
	       (unsigned long long)changes,
	       (unsigned long long)status_seqlock_version((void *)ra.mem));
	CHECK(reads > 100);
}

/* A writer that died between its two seq stores: readers give up with
 * -EAGAIN and a message instead of spinning forever; the next writer
 * repairs it. */
static void test_dead_writer(void)
{
	static uint8_t mem[STATUS_SEQLOCK_BYTES] __attribute__((aligned(64)));
	uint64_t w[2] = { 5, 6 }, seq_odd = 7, got[2];
	struct status_seqlock *s = (struct status_seqlock *)mem;
	uint64_t t0;

	status_seqlock_init(mem);
	status_seqlock_write(s, w, 2);
	memcpy(mem, &seq_odd, sizeof(seq_odd)); /* seq is the first word */
	t0 = clock_now_ns();
	CHECK_EQ(status_seqlock_read(s, got, 2), -EAGAIN);
	CHECK(clock_now_ns() - t0 < 5000 * 1000000ull);
	CHECK(strstr(errmsg_get(-EAGAIN), "died mid-write"));
	w[0] = 8;
	status_seqlock_write(s, w, 2);
	CHECK_EQ(status_seqlock_read(s, got, 2), 0);
	CHECK_EQ(got[0], 8);
	CHECK_EQ(got[1], 6);
}

int main(void)
{
	char dir[256], path[512];

	test_region_path(dir, sizeof(dir), path, sizeof(path));
	test_round_trip(path);
	test_torn_reads();
	test_dead_writer();
	printf("test_status: ok\n");
	return 0;
}
