/*
 * Unit tests for shm/ring.c in a single process: the ring lives in
 * ordinary memory; the other side is played by the same thread (or, for
 * waits, a thread).
 */
#include <pthread.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "shm/doorbell.h"
#include "shm/layout.h"
#include "shm/ring.h"

#define MAXREC 1000u

static void *mem_new(size_t bytes)
{
	void *p = NULL;

	CHECK(posix_memalign(&p, 128, bytes) == 0);
	memset(p, 0xa5, bytes); /* ring_init must not rely on zeroed memory */
	return p;
}

static struct ring *ring_new(uint64_t cap, uint32_t max_record)
{
	size_t bytes = ring_footprint(cap);
	void *mem = mem_new(bytes);

	CHECK_EQ(ring_init(mem, bytes, max_record, NULL, NULL), 0);
	return mem;
}

static void test_init_limits(void)
{
	size_t bytes = ring_footprint(4096);
	void *mem = mem_new(bytes);

	CHECK_EQ(ring_init(mem, 100, 8, NULL, NULL), -EINVAL);
	/* The data area must hold two of the largest record. */
	CHECK_EQ(ring_init(mem, bytes, 2048, NULL, NULL), -EINVAL);
	CHECK_EQ(ring_init(mem, bytes, 2040, NULL, NULL), 0);
	CHECK_EQ(ring_capacity(mem), 4096);
	CHECK_EQ(ring_max_record(mem), 2040);
	CHECK(ring_cap_for(100, 4) >= 4 * 108);
	free(mem);
}

static void test_empty_push_peek_release(void)
{
	struct ring *r = ring_new(4096, MAXREC);
	struct ring_rec rec;
	const char msg[] = "hello ring";

	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	CHECK(!ring_has_data(r));
	CHECK_EQ(ring_push(r, 7, msg, sizeof(msg)), 0);
	CHECK(ring_has_data(r));
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 7);
	CHECK_EQ(rec.len, sizeof(msg));
	CHECK(memcmp(rec.data, msg, sizeof(msg)) == 0);
	/* Peeking again returns the same record until it is released. */
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 7);
	ring_release(r, &rec);
	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	CHECK(!ring_has_data(r));

	/* A record of 1 byte and one of 0 bytes. */
	CHECK_EQ(ring_push(r, 1, "x", 1), 0);
	CHECK_EQ(ring_push(r, 2, NULL, 0), 0);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.len, 1);
	CHECK_EQ(((const char *)rec.data)[0], 'x');
	ring_release(r, &rec);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 2);
	CHECK_EQ(rec.len, 0);
	ring_release(r, &rec);
	CHECK(!ring_has_failed(r));
	free(r);
}

static void test_sizes(void)
{
	struct ring *r = ring_new(4 * (MAXREC + 8), MAXREC);
	static uint8_t big[MAXREC + 1];
	struct ring_rec rec;

	test_fill(big, MAXREC, 42);
	CHECK_EQ(ring_push(r, 1, big, MAXREC + 1), -EMSGSIZE);
	CHECK_EQ(ring_push(r, RING_TYPE_PAD, big, 1), -EINVAL);
	CHECK_EQ(ring_push(r, 1, big, MAXREC), 0);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.len, MAXREC);
	CHECK_EQ(test_verify(rec.data, rec.len, 42), 0);
	ring_release(r, &rec);
	free(r);
}

static void test_full(void)
{
	/* 1024 bytes of data: 64-byte records take 72 bytes each. */
	struct ring *r = ring_new(1024, 256);
	uint8_t buf[64];
	struct ring_rec rec;
	int n = 0, i;

	memset(buf, 1, sizeof(buf));
	while (ring_push(r, 1, buf, sizeof(buf)) == 0)
		n++;
	CHECK_EQ(n, 1024 / 72);
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), -EAGAIN);
	CHECK(!ring_has_space(r, 64));
	/* An 8-byte record still fits in the 16 bytes left. */
	CHECK(ring_has_space(r, 8));
	/* Freeing one record makes room for exactly one more. */
	CHECK_EQ(ring_peek(r, &rec), 0);
	ring_release(r, &rec);
	CHECK(ring_has_space(r, 64));
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), 0);
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), -EAGAIN);
	for (i = 0; i < n; i++) {
		CHECK_EQ(ring_peek(r, &rec), 0);
		ring_release(r, &rec);
	}
	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	free(r);
}

/* A record that would straddle the end is preceded by padding, and the
 * consumer never sees the padding. */
static void test_padding(void)
{
	struct ring *r = ring_new(1024, 400);
	uint8_t buf[400];
	struct ring_rec rec;
	uint64_t seq = 0, next = 0;
	int round;

	/* 300-byte records (308 in the ring): three fill 924 bytes, the
	 * fourth must wrap with 100 bytes of padding. */
	for (round = 0; round < 50; round++) {
		while (1) {
			test_fill(buf, 300, seq);
			if (ring_push(r, 3, buf, 300) != 0)
				break;
			seq++;
		}
		CHECK_EQ(ring_peek(r, &rec), 0);
		CHECK_EQ(rec.type, 3);
		CHECK_EQ(rec.len, 300);
		CHECK_EQ(test_verify(rec.data, rec.len, next), 0);
		CHECK((const uint8_t *)rec.data + rec.len <=
		      (const uint8_t *)r + ring_footprint(1024));
		next++;
		ring_release(r, &rec);
	}
	while (ring_peek(r, &rec) == 0) {
		CHECK_EQ(test_verify(rec.data, rec.len, next), 0);
		next++;
		ring_release(r, &rec);
	}
	CHECK_EQ(next, seq);
	CHECK(!ring_has_failed(r));
	free(r);
}

/* Randomized model test: random lengths (max size included), random
 * interleaving of pushes and pops, against a FIFO of expected sequence
 * numbers; every payload is checksummed. */
static void test_random_model(void)
{
	enum { MODEL = 4096 };
	uint64_t model[MODEL];
	struct ring *r = ring_new(ring_cap_for(MAXREC, 3), MAXREC);
	static uint8_t buf[MAXREC];
	struct ring_rec rec;
	unsigned head = 0, tail = 0, step;
	uint64_t seq = 0, rng = 12345;
	uint32_t len;
	int rc;

	for (step = 0; step < 300000; step++) {
		rng = test_mix(rng);
		if (rng % 100 < 55) {
			len = test_len(seq, 200, MAXREC, 40);
			test_fill(buf, len, seq);
			rc = ring_push(r, (uint32_t)seq, buf, len);
			if (rc == -EAGAIN) {
				CHECK(head - tail > 0);
				continue;
			}
			CHECK_EQ(rc, 0);
			CHECK(head - tail < MODEL);
			model[head++ % MODEL] = seq++;
		} else {
			rc = ring_peek(r, &rec);
			if (head == tail) {
				CHECK_EQ(rc, -EAGAIN);
				continue;
			}
			CHECK_EQ(rc, 0);
			CHECK_EQ(rec.type, (uint32_t)model[tail % MODEL]);
			CHECK_EQ(test_verify(rec.data, rec.len,
					     model[tail % MODEL]), 0);
			tail++;
			ring_release(r, &rec);
		}
	}
	CHECK(seq > 50000);
	CHECK(!ring_has_failed(r));
	free(r);
}

static void test_stage_publish_and_reserve(void)
{
	struct ring *r = ring_new(4096, 512);
	struct ring_rec rec;
	void *p;

	CHECK_EQ(ring_stage(r, 1, "a", 1), 0);
	CHECK_EQ(ring_stage(r, 2, "bb", 2), 0);
	/* Staged records are invisible until published. */
	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	ring_publish(r);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 1);
	ring_release(r, &rec);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 2);
	ring_release(r, &rec);

	CHECK_EQ(ring_commit(r, 1, 0), -EINVAL); /* nothing reserved */
	CHECK_EQ(ring_reserve(r, 513, &p), -EMSGSIZE);
	CHECK_EQ(ring_reserve(r, 100, &p), 0);
	memcpy(p, "zero-copy", 9);
	CHECK_EQ(ring_commit(r, 5, 101), -EINVAL); /* more than reserved */
	CHECK_EQ(ring_commit(r, 5, 9), 0);
	ring_publish(r);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 5);
	CHECK_EQ(rec.len, 9);
	CHECK(memcmp(rec.data, "zero-copy", 9) == 0);
	ring_release(r, &rec);
	free(r);
}

static void test_batched_release(void)
{
	struct ring *r = ring_new(1024, 256);
	uint8_t buf[64] = { 0 };
	struct ring_rec rec, first;
	int n = 0;

	while (ring_push(r, 1, buf, sizeof(buf)) == 0)
		n++;
	CHECK_EQ(ring_peek(r, &first), 0);
	ring_consume(r, &first);
	CHECK_EQ(ring_peek(r, &rec), 0);
	ring_consume(r, &rec);
	/* Consumed but not released: the producer still sees a full ring
	 * and the first record's bytes are intact. */
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(first.len, 64);
	ring_release_consumed(r);
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), 0);
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), 0);
	CHECK_EQ(ring_push(r, 1, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(ring_drain(r), n);
	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	free(r);
}

static void test_takeover(void)
{
	struct ring *r = ring_new(4096, 256);
	struct ring_rec rec;

	/* A producer that staged without publishing dies: the new one
	 * forgets the staged record. */
	CHECK_EQ(ring_push(r, 1, "one", 3), 0);
	CHECK_EQ(ring_stage(r, 2, "two", 3), 0);
	ring_producer_takeover(r);
	CHECK_EQ(ring_push(r, 3, "three", 5), 0);
	/* A consumer that consumed without releasing dies: the new one
	 * reads the record again. */
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 1);
	ring_consume(r, &rec);
	ring_consumer_takeover(r);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 1);
	ring_release(r, &rec);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 3);
	ring_release(r, &rec);
	CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	free(r);
}

static void test_corruption_fails_ring(void)
{
	struct ring *r = ring_new(4096, 256);
	struct ring_rec rec;
	uint32_t bad_len = 100000;

	CHECK_EQ(ring_push(r, 1, "abc", 3), 0);
	/* Overwrite the record's length in the data area. */
	memcpy((uint8_t *)r + RING_HEADER_BYTES, &bad_len, 4);
	CHECK_EQ(ring_peek(r, &rec), -EIO);
	CHECK(ring_has_failed(r));
	CHECK_EQ(ring_push(r, 1, "abc", 3), -EIO);
	CHECK_EQ(ring_peek(r, &rec), -EIO);
	free(r);
}

/* ring_push_wait: times out on a ring nobody drains; succeeds once a
 * consumer thread frees room. */
struct waiter_ctx {
	struct ring *r;
	int delay_ms;
};

static void *consumer_thread(void *arg)
{
	struct waiter_ctx *c = arg;
	struct ring_rec rec;

	usleep((useconds_t)c->delay_ms * 1000);
	CHECK_EQ(ring_peek(c->r, &rec), 0);
	ring_release(c->r, &rec);
	return NULL;
}

static void test_push_wait(void)
{
	size_t bytes = ring_footprint(1024);
	uint8_t *mem = mem_new(bytes + 2 * SHM_DOORBELL_BYTES);
	struct shm_doorbell *cdb = (void *)(mem + bytes);
	struct shm_doorbell *pdb = (void *)(mem + bytes + SHM_DOORBELL_BYTES);
	struct ring *r = (struct ring *)mem;
	struct waiter_ctx ctx = { .r = r, .delay_ms = 50 };
	uint8_t buf[64] = { 0 };
	pthread_t t;
	uint64_t t0;

	shm_doorbell_init(cdb);
	shm_doorbell_init(pdb);
	CHECK_EQ(ring_init(r, bytes, 256, cdb, pdb), 0);
	while (ring_push(r, 1, buf, sizeof(buf)) == 0)
		;
	t0 = clock_now_ns();
	CHECK_EQ(ring_push_wait(r, 1, buf, sizeof(buf), 30), -ETIMEDOUT);
	CHECK(clock_now_ns() - t0 >= 25 * 1000000u);

	CHECK_EQ(pthread_create(&t, NULL, consumer_thread, &ctx), 0);
	t0 = clock_now_ns();
	CHECK_EQ(ring_push_wait(r, 1, buf, sizeof(buf), 20000), 0);
	/* Woken by the release, long before the timeout. */
	CHECK(clock_now_ns() - t0 < 10000 * 1000000ull);
	CHECK(shm_doorbell_wakes(pdb) >= 1);
	pthread_join(t, NULL);
	CHECK_EQ(ring_push_wait(r, 1, buf, 257, 10), -EMSGSIZE);
	free(mem);
}

/* Pushes records, numbered from *seq on, until `bytes` of payload went
 * through, each read back, checked and released at once. */
static void pass_through(struct ring *r, uint64_t *seq, uint64_t bytes)
{
	uint8_t buf[MAXREC];
	struct ring_rec rec;

	for (uint64_t got = 0; got < bytes; (*seq)++) {
		uint32_t len = test_len(*seq, 100, MAXREC, 7);
		test_fill(buf, len, *seq);
		CHECK_EQ(ring_push(r, (uint32_t)*seq, buf, len), 0);
		CHECK_EQ(ring_peek(r, &rec), 0);
		CHECK_EQ(rec.type, (uint32_t)*seq);
		CHECK_EQ(test_verify(rec.data, rec.len, *seq), 0);
		got += rec.len;
		ring_release(r, &rec);
	}
}

/* A ring of cap data bytes in a shared file of its own (for
 * test_held_bytes on *fd); freed with shared_ring_free. */
static struct ring *shared_ring(uint64_t cap, int *fd)
{
	size_t bytes = ring_footprint(cap);
	struct ring *r = test_shared_file(bytes, fd);

	CHECK_EQ(ring_init(r, bytes, MAXREC, NULL, NULL), 0);
	return r;
}

static void shared_ring_free(struct ring *r, uint64_t cap, int fd)
{
	munmap(r, ring_footprint(cap));
	close(fd);
}

/*
 * Trimming at quiet times: a ring whose data area the traffic touched
 * holds those pages until it has been quiet for SHM_TRIM_QUIET_NS and
 * the consumer released everything; then its data pages go back (the
 * file holds only the control block's page), and the ring carries
 * records as before.
 */
static void test_trim_idle(void)
{
	const uint64_t cap = 64 * 1024;
	const int64_t q = SHM_TRIM_QUIET_NS;
	int fd;
	struct ring *r = shared_ring(cap, &fd);
	struct ring_rec rec;
	uint8_t buf[MAXREC];
	uint64_t seq = 0;

	/* A new ring has nothing to give back. */
	CHECK_EQ(ring_trim_idle(r, 0), INT64_MAX);
	/* Traffic through the whole data area, all released. */
	pass_through(r, &seq, 3 * cap);
	CHECK(test_held_bytes(fd) >= cap);
	/* Not quiet long enough: asked again when it will be. */
	CHECK_EQ(ring_trim_idle(r, 10 * q), 11 * q);
	CHECK_EQ(ring_trim_idle(r, 11 * q - 1), 11 * q);
	CHECK(test_held_bytes(fd) >= cap);
	/* A record the consumer holds keeps every page. */
	test_fill(buf, 100, seq);
	CHECK_EQ(ring_push(r, (uint32_t)seq, buf, 100), 0);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(ring_trim_idle(r, 20 * q), 21 * q); /* it moved: quiet from now */
	CHECK_EQ(ring_trim_idle(r, 22 * q), 23 * q); /* quiet, but not released */
	CHECK(test_held_bytes(fd) >= cap);
	CHECK_EQ(test_verify(rec.data, rec.len, seq), 0);
	ring_release(r, &rec);
	seq++;
	/* Quiet and released: the data pages go; those it shares with the
	 * control block and the file's end stay. */
	CHECK_EQ(ring_trim_idle(r, 23 * q), INT64_MAX);
	CHECK(test_held_bytes(fd) <= 2 * SHM_PAGE);
	CHECK_EQ(ring_trim_idle(r, 30 * q), INT64_MAX); /* once a quiet spell */
	/* Records go on where the cursors were, across the end again. */
	pass_through(r, &seq, 2 * cap);
	CHECK(!ring_has_failed(r));
	CHECK(test_held_bytes(fd) >= cap);
	shared_ring_free(r, cap, fd);
}

/*
 * Trimming under traffic: a ring that is never quiet gives back, once a
 * second, the pages of its free part past what the traffic of the last
 * second would need (twice it, at least 64 KiB, past head), at any phase
 * of the data area (the free part wrapping past its end or not):
 * - records the consumer has not read, and records read and not yet
 *   released, keep their bytes;
 * - the pages written after are whole again (every record verified);
 * - a second's traffic of a whole lap or more gives back nothing;
 * - an open reservation gives back nothing;
 * - a look within the second does nothing.
 */
static void test_trim_busy(void)
{
	const uint64_t cap = 1024 * 1024;
	const int64_t q = SHM_TRIM_QUIET_NS;
	int fd;
	struct ring *r = shared_ring(cap, &fd);
	struct ring_rec rec;
	uint8_t buf[MAXREC];
	uint64_t seq = 0, rseq = 0;
	int64_t now = 0;

	for (int phase = 0; phase < 7; phase++) {
		/* a busy second: more than a lap through the ring, all released */
		pass_through(r, &seq, cap + (uint64_t)phase * 150000);
		rseq = seq;
		now += q;
		(void)ring_trim_idle(r, now);
		CHECK(test_held_bytes(fd) >= cap);
		/* a quiet second: 30 records left unread, the oldest 10 of them
		 * read and not released */
		for (int i = 0; i < 30; i++, seq++) {
			uint32_t len = test_len(seq, 100, MAXREC, 7);
			test_fill(buf, len, seq);
			CHECK_EQ(ring_push(r, (uint32_t)seq, buf, len), 0);
		}
		for (int i = 0; i < 10; i++, rseq++) {
			CHECK_EQ(ring_peek(r, &rec), 0);
			CHECK_EQ(test_verify(rec.data, rec.len, rseq), 0);
			ring_consume(r, &rec);
		}
		/* an open reservation: nothing given back */
		void *room;
		CHECK_EQ(ring_reserve(r, 64, &room), 0);
		now += q;
		(void)ring_trim_idle(r, now);
		CHECK(test_held_bytes(fd) >= cap);
		test_fill(room, 64, seq);
		CHECK_EQ(ring_commit(r, (uint32_t)seq, 64), 0);
		seq++;
		ring_publish(r);
		/* within the second: nothing */
		(void)ring_trim_idle(r, now + q - 1);
		CHECK(test_held_bytes(fd) >= cap);
		/* the next second's look gives back all but the records in the
		 * ring and 64 KiB past head */
		now += q;
		(void)ring_trim_idle(r, now);
		uint64_t held = test_held_bytes(fd);
		CHECK(held <= 31 * (MAXREC + 8) + (64u << 10) + 4 * SHM_PAGE);
		/* again at once: the same */
		now += q;
		(void)ring_trim_idle(r, now);
		CHECK_EQ(test_held_bytes(fd), held);
		CHECK(!ring_has_failed(r));
		/* the consumed records are intact, and so are the rest */
		ring_release_consumed(r);
		for (; rseq < seq; rseq++) {
			CHECK_EQ(ring_peek(r, &rec), 0);
			CHECK_EQ(rec.type, (uint32_t)rseq);
			CHECK_EQ(test_verify(rec.data, rec.len, rseq), 0);
			ring_release(r, &rec);
		}
		CHECK_EQ(ring_peek(r, &rec), -EAGAIN);
	}
	/* records go on through the pages given back, intact */
	pass_through(r, &seq, 2 * cap);
	CHECK(!ring_has_failed(r));
	CHECK(test_held_bytes(fd) >= cap);
	shared_ring_free(r, cap, fd);
}

int main(void)
{
	test_init_limits();
	test_empty_push_peek_release();
	test_sizes();
	test_full();
	test_padding();
	test_random_model();
	test_stage_publish_and_reserve();
	test_batched_release();
	test_takeover();
	test_corruption_fails_ring();
	test_push_wait();
	test_trim_idle();
	test_trim_busy();
	printf("test_ring: ok\n");
	return 0;
}
