/*
 * Unit tests for shm/waker.c, the doorbell bridge: the eventfd fires for
 * work and only after the loop drained, stop is safe in every state, and,
 * over many rounds with the producer racing the bridge's thread, no
 * wake-up is lost.
 *
 * The bridge runs with a backstop of an hour, so a lost wake-up is not
 * covered up by a timed futex return: the round hangs, and a round that
 * does not fire within a generous deadline fails the test.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "shm/barrier.h"
#include "shm/doorbell.h"
#include "shm/waker.h"

/* Long enough that no round of the test ever ends by the backstop. */
#define TEST_NO_BACKSTOP_MS (3600 * 1000)
/* How long a round may take before its wake-up counts as lost. */
#define TEST_DEADLINE_MS 20000

/* The "ring": a producer publishes by moving published; the loop takes
 * the work by copying published into taken. */
struct work {
	_Atomic uint64_t published;
	_Atomic uint64_t taken;
};

static bool work_waiting(void *arg)
{
	struct work *w = arg;
	return atomic_load_explicit(&w->published, memory_order_acquire) !=
	       atomic_load_explicit(&w->taken, memory_order_relaxed);
}

/* A producer's side of the protocol: publish, then ring (full fence, wake
 * if the consumer announced it sleeps). */
static void work_publish(struct work *w, struct shm_doorbell *db, uint64_t n)
{
	atomic_store_explicit(&w->published, n, memory_order_release);
	shm_doorbell_ring(db);
}

/* Whether the bridge's eventfd became readable within ms. */
static bool fired_within(struct shm_waker *wk, int ms)
{
	struct pollfd p = { .fd = shm_waker_fd(wk), .events = POLLIN };
	int rc;

	do
		rc = poll(&p, 1, ms);
	while (rc < 0 && errno == EINTR);
	return rc == 1 && (p.revents & POLLIN);
}

static void test_start_stop(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *db = (void *)mem;
	struct shm_waker wk = { .efd = -1 };
	struct work w;

	shm_doorbell_init(mem);
	atomic_init(&w.published, 0);
	atomic_init(&w.taken, 0);
	shm_waker_stop(&wk); /* never started */
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, 0), -EINVAL);
	CHECK_EQ(shm_waker_fd(&wk), -1);
	shm_waker_stop(&wk); /* failed to start */

	/* Stopping a bridge asleep on its doorbell. */
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, TEST_NO_BACKSTOP_MS), 0);
	CHECK(shm_waker_fd(&wk) >= 0);
	CHECK(TEST_WAIT_FOR(shm_doorbell_is_sleeping(db), TEST_DEADLINE_MS));
	CHECK(!fired_within(&wk, 0));
	shm_waker_stop(&wk);
	CHECK_EQ(shm_waker_fd(&wk), -1);
	CHECK(!shm_doorbell_is_sleeping(db));
	shm_waker_stop(&wk); /* stopped already */

	/* Stopping a bridge that fired and waits for the loop to drain. */
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, TEST_NO_BACKSTOP_MS), 0);
	work_publish(&w, db, 1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	shm_waker_stop(&wk);
}

/* The eventfd fires once per batch of work: after it fired, more work
 * does not fire it again until the loop drained, and draining with the
 * work taken lets the thread sleep without firing. */
static void test_fires_once_until_drained(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *db = (void *)mem;
	struct shm_waker wk;
	struct work w;
	uint64_t v;

	shm_doorbell_init(mem);
	atomic_init(&w.published, 0);
	atomic_init(&w.taken, 0);
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, TEST_NO_BACKSTOP_MS), 0);
	work_publish(&w, db, 1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	work_publish(&w, db, 2);
	CHECK_EQ(read(shm_waker_fd(&wk), &v, sizeof(v)), (ssize_t)sizeof(v));
	CHECK_EQ(v, 1);
	/* The thread waits for drained: a second batch does not fire. */
	CHECK(!fired_within(&wk, 50));
	atomic_store(&w.taken, 2);
	/* The eventfd was read above, so this drained posts nothing. */
	shm_waker_drained(&wk);
	shm_waker_stop(&wk);

	atomic_store(&w.published, 0);
	atomic_store(&w.taken, 0);
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, TEST_NO_BACKSTOP_MS), 0);
	work_publish(&w, db, 1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	atomic_store(&w.taken, 1);
	shm_waker_drained(&wk);
	CHECK(TEST_WAIT_FOR(shm_doorbell_is_sleeping(db), TEST_DEADLINE_MS));
	CHECK(!fired_within(&wk, 0));
	shm_waker_stop(&wk);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* How a round publishes its work relative to the bridge going to sleep. */
enum round_kind {
	ROUND_BEFORE_DRAINED, /* before the thread may sleep: only its re-check finds it */
	ROUND_ASLEEP,         /* once the thread announced itself: only the wake finds it */
	ROUND_RACE,           /* after a random spin: the two race */
	ROUND_KINDS
};

/* A second producer thread for ROUND_RACE: spins until told the round's
 * number, then publishes it after a random spin, while the loop's thread
 * drains and the bridge's thread heads for its doorbell. (The few
 * nanoseconds that the full fences guard are raced more tightly by
 * test_doorbell's litmus test of the protocol itself.) */
struct racer {
	struct work *w;
	struct shm_doorbell *db;
	_Atomic uint64_t go;   /* the round to publish; UINT64_MAX: exit */
	uint64_t rng;
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	uint64_t done = 0, go;
	unsigned spin;

	for (;;) {
		while ((go = atomic_load_explicit(&r->go, memory_order_acquire)) == done)
			shm_cpu_relax();
		if (go == UINT64_MAX)
			return NULL;
		/* log-uniform up to ~4096 pauses, so that the publish lands
		 * anywhere from before the bridge's thread left its wait for
		 * drained to after it fell asleep */
		spin = (unsigned)(rng_next(&r->rng) % 4096) >> (rng_next(&r->rng) % 13);
		while (spin--)
			shm_cpu_relax();
		work_publish(r->w, r->db, go);
		done = go;
	}
}

static const char *const round_names[ROUND_KINDS] = { "published before drained",
						      "published to a sleeper",
						      "published racing the sleeper" };

/*
 * Many rounds of: the loop (this thread) takes the work and drains, a
 * producer (this thread or the racer) publishes the next piece, and the
 * eventfd must fire. ROUND_BEFORE_DRAINED rounds hang without the
 * re-check after announcing, ROUND_ASLEEP rounds without the wake, and
 * ROUND_RACE rounds mix the two at random moments.
 */
static void test_no_lost_wakeup(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *db = (void *)mem;
	const uint64_t rounds = 30000;
	uint64_t seed = test_now_ns() | 1, rng = seed;
	uint64_t counts[ROUND_KINDS] = { 0 };
	struct shm_waker wk;
	struct work w;
	struct racer race = { .w = &w, .db = db };
	pthread_t racer;
	uint64_t i, wakes, end;

	printf("no-lost-wakeup seed %llu\n", (unsigned long long)seed);
	shm_doorbell_init(mem);
	atomic_init(&w.published, 0);
	atomic_init(&w.taken, 0);
	atomic_init(&race.go, 0);
	race.rng = rng_next(&rng);
	CHECK_EQ(pthread_create(&racer, NULL, racer_main, &race), 0);
	CHECK_EQ(shm_waker_start(&wk, db, work_waiting, &w, TEST_NO_BACKSTOP_MS), 0);
	work_publish(&w, db, 1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));

	for (i = 2; i <= rounds; i++) {
		enum round_kind kind = (enum round_kind)(rng_next(&rng) % ROUND_KINDS);

		/* The loop takes what fired the previous round. */
		atomic_store_explicit(&w.taken, i - 1, memory_order_relaxed);
		switch (kind) {
		case ROUND_BEFORE_DRAINED:
			/* The thread waits for drained, so it is not asleep
			 * and the producer's ring wakes no one. */
			work_publish(&w, db, i);
			shm_waker_drained(&wk);
			break;
		case ROUND_ASLEEP:
			shm_waker_drained(&wk);
			end = test_now_ns() + (uint64_t)TEST_DEADLINE_MS * 1000000u;
			while (!shm_doorbell_is_sleeping(db)) {
				CHECK(test_now_ns() < end);
				sched_yield();
			}
			work_publish(&w, db, i);
			break;
		default:
			/* The racer publishes while drained wakes the
			 * bridge's thread. */
			atomic_store_explicit(&race.go, i, memory_order_release);
			shm_waker_drained(&wk);
			break;
		}
		counts[kind]++;
		if (!fired_within(&wk, TEST_DEADLINE_MS)) {
			fprintf(stderr,
				"lost wake-up in round %llu (%s; seed %llu): the bridge did not "
				"fire within %d ms\n",
				(unsigned long long)i, round_names[kind], (unsigned long long)seed,
				TEST_DEADLINE_MS);
			exit(1);
		}
	}
	wakes = shm_doorbell_wakes(db);
	printf("rounds: %llu before drained, %llu asleep, %llu racing (%llu of them woken); "
	       "futex wakes %llu\n",
	       (unsigned long long)counts[0], (unsigned long long)counts[1],
	       (unsigned long long)counts[2], (unsigned long long)(wakes - counts[1]),
	       (unsigned long long)wakes);
	/* Every round of each kind ran, ROUND_ASLEEP rounds were found by a
	 * wake and ROUND_BEFORE_DRAINED rounds were not: those the re-check
	 * found. */
	CHECK(counts[ROUND_BEFORE_DRAINED] > 0 && counts[ROUND_ASLEEP] > 0 &&
	      counts[ROUND_RACE] > 0);
	CHECK(wakes >= counts[ROUND_ASLEEP]);
	CHECK(wakes <= counts[ROUND_ASLEEP] + counts[ROUND_RACE] + 1);
	atomic_store(&race.go, UINT64_MAX);
	pthread_join(racer, NULL);
	shm_waker_stop(&wk);
}

int main(void)
{
	test_start_stop();
	test_fires_once_until_drained();
	test_no_lost_wakeup();
	printf("test_waker: ok\n");
	return 0;
}
