/*
 * Unit tests for shm/bcast.c: sequence numbers, padding, lap detection
 * (before and during a copy), small buffers, producer takeover.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "shm/bcast.h"
#include "shm/layout.h"
#include "shm/ring.h"

#define MAXREC 1000u

static struct bcast *bcast_new(uint64_t cap, uint32_t max_record)
{
	size_t bytes = bcast_footprint(cap);
	void *mem = NULL;

	CHECK(posix_memalign(&mem, 128, bytes) == 0);
	memset(mem, 0x5a, bytes);
	CHECK_EQ(bcast_init(mem, bytes, max_record), 0);
	return mem;
}

static void test_basic(void)
{
	struct bcast *b = bcast_new(4096, 256);
	struct bcast_cursor c = { 0 }, late = { 0 };
	struct bcast_rec rec;
	char buf[256];

	CHECK_EQ(bcast_init(b, 100, 8), -EINVAL);
	CHECK_EQ(bcast_max_record(b), 256);
	bcast_cursor_init(b, &c);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), -EAGAIN);
	CHECK(!bcast_has_data(b, &c));
	CHECK_EQ(bcast_next_seq(b), 1);
	CHECK_EQ(bcast_publish(b, 9, "first", 5), 0);
	CHECK_EQ(bcast_publish(b, 10, "second", 6), 0);
	CHECK(bcast_has_data(b, &c));
	/* A cursor made now starts after what is already there. */
	bcast_cursor_init(b, &late);
	CHECK_EQ(bcast_read(b, &late, &rec, buf, sizeof(buf)), -EAGAIN);

	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
	CHECK_EQ(rec.seq, 1);
	CHECK_EQ(rec.type, 9);
	CHECK_EQ(rec.len, 5);
	CHECK(rec.data == buf && memcmp(buf, "first", 5) == 0);
	/* Too small a buffer: told the size, cursor stays. */
	CHECK_EQ(bcast_read(b, &c, &rec, buf, 3), -ENOBUFS);
	CHECK_EQ(rec.len, 6);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
	CHECK_EQ(rec.seq, 2);
	CHECK(memcmp(buf, "second", 6) == 0);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), -EAGAIN);

	CHECK_EQ(bcast_publish(b, 1, buf, 257), -EMSGSIZE);
	CHECK_EQ(bcast_publish(b, UINT32_MAX, buf, 1), -EINVAL);
	CHECK_EQ(bcast_publish(b, 1, NULL, 0), 0);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
	CHECK_EQ(rec.len, 0);
	CHECK_EQ(rec.seq, 3);
	CHECK_EQ(c.laps, 0);
	free(b);
}

/* Two consumers at different speeds over many wraps (padding included):
 * the one that keeps up sees every record in order; the one that falls
 * behind by more than the capacity is told it was lapped and, after
 * re-syncing, reads valid records again. */
static void test_wrap_and_lap(void)
{
	struct bcast *b = bcast_new(4096, MAXREC);
	struct bcast_cursor fast = { 0 }, slow = { 0 };
	struct bcast_rec rec;
	static uint8_t buf[MAXREC], out[MAXREC];
	uint64_t seq, expect = 1;
	uint32_t len;
	int rc, i;

	bcast_cursor_init(b, &fast);
	bcast_cursor_init(b, &slow);
	for (seq = 1; seq <= 2000; seq++) {
		len = test_len(seq, 300, MAXREC, 10);
		test_fill(buf, len, seq);
		CHECK_EQ(bcast_publish(b, (uint32_t)len, buf, len), 0);
		CHECK_EQ(bcast_read(b, &fast, &rec, out, sizeof(out)), 0);
		CHECK_EQ(rec.seq, seq);
		CHECK_EQ(rec.len, len);
		CHECK_EQ(test_verify(out, rec.len, seq), 0);
	}
	CHECK_EQ(fast.laps, 0);
	CHECK_EQ(bcast_read(b, &slow, &rec, out, sizeof(out)), -ESTALE);
	CHECK_EQ(slow.laps, 1);
	/* Still lapped until re-synced. */
	CHECK_EQ(bcast_read(b, &slow, &rec, out, sizeof(out)), -ESTALE);
	bcast_cursor_init(b, &slow);
	for (i = 0; i < 3; i++) {
		len = 100 + i;
		test_fill(buf, len, seq);
		CHECK_EQ(bcast_publish(b, 0, buf, len), 0);
		seq++;
	}
	expect = seq - 3;
	while ((rc = bcast_read(b, &slow, &rec, out, sizeof(out))) == 0) {
		CHECK_EQ(rec.seq, expect);
		CHECK_EQ(test_verify(out, rec.len, expect), 0);
		expect++;
	}
	CHECK_EQ(rc, -EAGAIN);
	CHECK_EQ(expect, seq);
	free(b);
}

/* A restarted producer makes every consumer see a lap, never a repeated
 * or missing sequence number. */
static void test_producer_takeover(void)
{
	struct bcast *b = bcast_new(4096, 256);
	struct bcast_cursor c = { 0 };
	struct bcast_rec rec;
	char buf[256];

	bcast_cursor_init(b, &c);
	CHECK_EQ(bcast_publish(b, 1, "a", 1), 0);
	bcast_producer_takeover(b);
	CHECK_EQ(bcast_publish(b, 1, "b", 1), 0);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
	CHECK_EQ(rec.seq, 1);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), -ESTALE);
	bcast_cursor_init(b, &c);
	CHECK_EQ(bcast_publish(b, 1, "c", 1), 0);
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
	CHECK_EQ(rec.seq, 4);
	free(b);
}

/* A producer thread that never waits, racing a reader thread on a small
 * ring of large records: the reader either gets a record whose checksum
 * holds, or -ESTALE; never anything else. */
struct race {
	struct bcast *b;
	atomic_int stop;
	uint64_t published;
};

static void *race_producer(void *arg)
{
	struct race *ra = arg;
	static uint8_t buf[MAXREC];
	uint64_t seq = 1;
	uint32_t len;

	while (!atomic_load(&ra->stop)) {
		len = test_len(seq, MAXREC, MAXREC, 0);
		test_fill(buf, len, seq);
		CHECK_EQ(bcast_publish(ra->b, 0, buf, len), 0);
		seq++;
	}
	ra->published = seq - 1;
	return NULL;
}

static void test_race(void)
{
	struct race ra = { .b = bcast_new(4 * 1024, MAXREC) };
	static uint8_t out[MAXREC];
	struct bcast_cursor c = { 0 };
	struct bcast_rec rec;
	uint64_t good = 0, start = clock_now_ns();
	pthread_t t;
	int rc;

	atomic_init(&ra.stop, 0);
	bcast_cursor_init(ra.b, &c);
	CHECK_EQ(pthread_create(&t, NULL, race_producer, &ra), 0);
	/* At least 400 ms and 1000 intact records, at most 20 s. */
	while (clock_now_ns() - start < 400 * 1000000ull || good < 1000) {
		CHECK(clock_now_ns() - start < 20000 * 1000000ull);
		rc = bcast_read(ra.b, &c, &rec, out, sizeof(out));
		if (rc == -EAGAIN)
			continue;
		if (rc == -ESTALE) {
			bcast_cursor_init(ra.b, &c);
			continue;
		}
		CHECK_EQ(rc, 0);
		CHECK_EQ(test_verify(out, rec.len, rec.seq), 0);
		good++;
	}
	atomic_store(&ra.stop, 1);
	pthread_join(t, NULL);
	printf("bcast race: %llu published, %llu read intact, %llu laps "
	       "(%llu caught after the copy)\n",
	       (unsigned long long)ra.published, (unsigned long long)good,
	       (unsigned long long)c.laps, (unsigned long long)c.torn_reads);
	CHECK(good > 0);
	free(ra.b);
}

/*
 * Trimming at quiet times: once nothing was published for
 * SHM_TRIM_QUIET_NS the data pages go back. A cursor that had read
 * everything goes on with the next record; one that had not, even one
 * that never read a record, is told it was lapped, never handed the
 * zeroes as a record.
 */
static void test_trim_idle(void)
{
	const uint64_t cap = 64 * 1024;
	const int64_t q = SHM_TRIM_QUIET_NS;
	size_t bytes = bcast_footprint(cap);
	int fd;
	struct bcast *b = test_shared_file(bytes, &fd);
	struct bcast_cursor c = { 0 }, late = { 0 };
	struct bcast_rec rec;
	static uint8_t buf[MAXREC];
	uint64_t seq;

	CHECK_EQ(bcast_init(b, bytes, MAXREC), 0);
	CHECK_EQ(bcast_trim_idle(b, 0), INT64_MAX);
	bcast_cursor_init(b, &c);
	for (seq = 1; seq <= 300; seq++) {
		uint32_t len = test_len(seq, 900, MAXREC, 0);
		if (seq == 280) /* less than the ring behind, and never read */
			bcast_cursor_init(b, &late);
		test_fill(buf, len, seq);
		CHECK_EQ(bcast_publish(b, 1, buf, len), 0);
		CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
		CHECK_EQ(test_verify(buf, rec.len, rec.seq), 0);
	}
	CHECK(test_held_bytes(fd) >= cap);
	CHECK_EQ(bcast_trim_idle(b, 10 * q), 11 * q);
	CHECK_EQ(bcast_trim_idle(b, 11 * q - 1), 11 * q);
	CHECK(test_held_bytes(fd) >= cap);
	CHECK_EQ(bcast_trim_idle(b, 11 * q), INT64_MAX);
	CHECK(test_held_bytes(fd) <= 2 * SHM_PAGE); /* shared with the header, the end */
	CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(bcast_read(b, &late, &rec, buf, sizeof(buf)), -ESTALE);
	/* The next records reach both (the late one re-synced). */
	bcast_cursor_init(b, &late);
	for (; seq <= 600; seq++) {
		uint32_t len = test_len(seq, 900, MAXREC, 0);
		test_fill(buf, len, seq);
		CHECK_EQ(bcast_publish(b, 1, buf, len), 0);
		CHECK_EQ(bcast_read(b, &c, &rec, buf, sizeof(buf)), 0);
		CHECK_EQ(rec.seq, seq);
		CHECK_EQ(test_verify(buf, rec.len, rec.seq), 0);
		CHECK_EQ(bcast_read(b, &late, &rec, buf, sizeof(buf)), 0);
		CHECK_EQ(rec.seq, seq);
		CHECK_EQ(test_verify(buf, rec.len, rec.seq), 0);
	}
	CHECK_EQ(c.laps, 0);
	munmap(b, bytes);
	close(fd);
}

static uint64_t bcast_head(struct bcast *b)
{
	struct bcast_cursor c;

	bcast_cursor_init(b, &c);
	return c.pos;
}

/* Publishes records of up to 900 bytes until `bytes` more were published;
 * *c (if any) reads and checks each one as it goes. */
static void publish_bytes(struct bcast *b, uint64_t *seq, uint64_t bytes,
			  struct bcast_cursor *c)
{
	static uint8_t buf[MAXREC];
	struct bcast_rec rec;
	uint64_t pos = bcast_head(b);

	while (bcast_head(b) < pos + bytes) {
		uint32_t len = test_len(*seq, 900, MAXREC, 0);
		test_fill(buf, len, *seq);
		CHECK_EQ(bcast_publish(b, 1, buf, len), 0);
		if (c) {
			CHECK_EQ(bcast_read(b, c, &rec, buf, sizeof(buf)), 0);
			CHECK_EQ(rec.seq, *seq);
			CHECK_EQ(test_verify(buf, rec.len, rec.seq), 0);
		}
		(*seq)++;
	}
}

/* Reads every record up to head through c, each one checked. */
static void read_all(struct bcast *b, struct bcast_cursor *c, uint64_t next_seq)
{
	static uint8_t buf[MAXREC];
	struct bcast_rec rec;
	uint64_t n = 0;

	while (bcast_read(b, c, &rec, buf, sizeof(buf)) == 0) {
		CHECK_EQ(test_verify(buf, rec.len, rec.seq), 0);
		n++;
	}
	CHECK(n > 0);
	CHECK_EQ(c->seq, next_seq);
	CHECK_EQ(bcast_read(b, c, &rec, buf, sizeof(buf)), -EAGAIN);
}

/*
 * Trimming under traffic: a ring that is never quiet gives back, once a
 * second, the pages of the records older than twice the last second's
 * traffic (at least 1 MiB) behind head, keeping as much of the oldest
 * ones (the producer overwrites them next), at any phase of the data area
 * and before the first lap:
 * - a cursor lagging less than that reads its records whole;
 * - one lagging more, also one that never read a record, is lapped, never
 *   handed the zeroes as a record;
 * - a second's traffic of a quarter of the ring or more gives back
 *   nothing, and a look within the second does nothing;
 * - the pages written after are whole again (every record verified).
 */
static void test_trim_busy(void)
{
	const uint64_t kib = 1024, mib = 1024 * kib, cap = 8 * mib;
	const int64_t q = SHM_TRIM_QUIET_NS;
	size_t bytes = bcast_footprint(cap);
	int fd;
	struct bcast *b = test_shared_file(bytes, &fd);
	struct bcast_cursor c = { 0 }, near = { 0 }, far = { 0 }, never = { 0 };
	struct bcast_rec rec;
	static uint8_t buf[MAXREC];
	uint64_t seq = 1, held;
	int64_t now = 0;

	CHECK_EQ(bcast_init(b, bytes, MAXREC), 0);
	bcast_cursor_init(b, &c);
	/* Before the first lap: a busy second keeps everything; then a light
	 * one gives back the records more than 1 MiB behind head. */
	(void)bcast_trim_idle(b, now);
	publish_bytes(b, &seq, 2200 * kib, &c);
	bcast_cursor_init(b, &far);
	publish_bytes(b, &seq, 800 * kib, &c);
	now += q;
	(void)bcast_trim_idle(b, now);
	CHECK(test_held_bytes(fd) >= 3000 * kib);
	bcast_cursor_init(b, &near);
	publish_bytes(b, &seq, 400 * kib, &c);
	(void)bcast_trim_idle(b, now + q - 1); /* within the second */
	CHECK(test_held_bytes(fd) >= 3400 * kib);
	now += q;
	(void)bcast_trim_idle(b, now);
	CHECK(test_held_bytes(fd) <= mib + 4 * SHM_PAGE);
	read_all(b, &near, seq);
	CHECK_EQ(bcast_read(b, &far, &rec, buf, sizeof(buf)), -ESTALE);
	CHECK_EQ(c.laps + near.laps, 0);

	for (int phase = 0; phase < 6; phase++) {
		/* a busy second: more than a lap, read as it goes; the ring
		 * holds all of it */
		publish_bytes(b, &seq, cap + (uint64_t)phase * 1500 * kib, &c);
		bcast_cursor_init(b, &never);
		publish_bytes(b, &seq, 1500 * kib, &c);
		bcast_cursor_init(b, &far);
		CHECK_EQ(bcast_read(b, &far, &rec, buf, sizeof(buf)), -EAGAIN);
		publish_bytes(b, &seq, 600 * kib, &c);
		now += q;
		(void)bcast_trim_idle(b, now);
		CHECK(test_held_bytes(fd) >= cap);
		/* a light second: far falls 1.05 MiB behind, near 0.45 MiB */
		bcast_cursor_init(b, &near);
		publish_bytes(b, &seq, 450 * kib, &c);
		now += q;
		(void)bcast_trim_idle(b, now);
		held = test_held_bytes(fd);
		CHECK(held <= 2 * mib + 4 * SHM_PAGE);
		CHECK(held >= 2 * mib - 4 * SHM_PAGE);
		read_all(b, &near, seq);
		CHECK_EQ(bcast_read(b, &far, &rec, buf, sizeof(buf)), -ESTALE);
		CHECK_EQ(bcast_read(b, &never, &rec, buf, sizeof(buf)), -ESTALE);
		/* a few records more and another look: the same 2 MiB */
		publish_bytes(b, &seq, 64 * kib, &c);
		now += q;
		(void)bcast_trim_idle(b, now);
		CHECK(test_held_bytes(fd) <= 2 * mib + 4 * SHM_PAGE);
		CHECK_EQ(c.laps + near.laps, 0);
	}
	/* records go on through the pages given back, intact */
	publish_bytes(b, &seq, 2 * cap, &c);
	CHECK(test_held_bytes(fd) >= cap);
	CHECK_EQ(c.laps, 0);
	munmap(b, bytes);
	close(fd);
}

int main(void)
{
	test_basic();
	test_wrap_and_lap();
	test_producer_takeover();
	test_race();
	test_trim_idle();
	test_trim_busy();
	printf("test_bcast: ok\n");
	return 0;
}
