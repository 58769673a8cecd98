/*
 * Unit tests for shm/waker.c, the doorbell bridge, in both its modes.
 * Thread mode: the eventfd fires for work and only after the loop
 * drained, stop is safe in every state, and, over many rounds with the
 * producer racing the bridge's thread, no wake-up is lost. Ring mode: the
 * loop counts as asleep only between prepare and done, a wake makes the
 * ring readable, a wake that lands between the re-check and the arming of
 * the wait is not lost, and no wake-up is lost over many racing rounds.
 * The start picks ring mode where it can unless CETCD_WAKER=thread.
 *
 * The bridge runs with a backstop of an hour, so a lost wake-up is not
 * covered up by a timed futex return: the round hangs, and a round that
 * does not fire within a generous deadline fails the test. The racing
 * rounds break invariant 7 (docs/invariants.md) on purpose.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
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

static int start_thread(struct shm_waker *wk, struct shm_doorbell *db, struct work *w,
			int backstop_ms)
{
	return shm_waker_start_mode(wk, db, work_waiting, w, backstop_ms, SHM_WAKER_THREAD);
}

/* Whether the bridge's descriptor became readable within ms. */
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
	CHECK_EQ(start_thread(&wk, db, &w, 0), -EINVAL);
	CHECK_EQ(shm_waker_fd(&wk), -1);
	shm_waker_stop(&wk); /* failed to start */

	/* Stopping a bridge asleep on its doorbell. */
	CHECK_EQ(start_thread(&wk, db, &w, TEST_NO_BACKSTOP_MS), 0);
	CHECK(shm_waker_fd(&wk) >= 0);
	/* the thread sleeps for the loop: its timeout passes unchanged */
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK_EQ(shm_waker_prepare(&wk, 50), 50);
	shm_waker_done(&wk);
	CHECK(TEST_WAIT_FOR(shm_doorbell_is_sleeping(db), TEST_DEADLINE_MS));
	CHECK(!fired_within(&wk, 0));
	shm_waker_stop(&wk);
	CHECK_EQ(shm_waker_fd(&wk), -1);
	CHECK(!shm_doorbell_is_sleeping(db));
	shm_waker_stop(&wk); /* stopped already */

	/* Stopping a bridge that fired and waits for the loop to drain. */
	CHECK_EQ(start_thread(&wk, db, &w, TEST_NO_BACKSTOP_MS), 0);
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
	CHECK_EQ(start_thread(&wk, db, &w, TEST_NO_BACKSTOP_MS), 0);
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
	CHECK_EQ(start_thread(&wk, db, &w, TEST_NO_BACKSTOP_MS), 0);
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
 * test_doorbell's litmus test of the protocol itself.) The ring-mode test
 * also has it wait for the loop's announcement instead (when_asleep). */
struct racer {
	struct work *w;
	struct shm_doorbell *db;
	_Atomic uint64_t go;   /* the round to publish; UINT64_MAX: exit */
	_Atomic bool when_asleep;
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
		if (atomic_load_explicit(&r->when_asleep, memory_order_relaxed)) {
			while (!shm_doorbell_is_sleeping(r->db))
				shm_cpu_relax();
		} else {
			/* log-uniform up to ~4096 pauses, so that the publish
			 * lands anywhere from before the bridge's thread left
			 * its wait for drained to after it fell asleep */
			spin = (unsigned)(rng_next(&r->rng) % 4096) >> (rng_next(&r->rng) % 13);
			while (spin--)
				shm_cpu_relax();
		}
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
	uint64_t seed = clock_now_ns() | 1, rng = seed;
	uint64_t counts[ROUND_KINDS] = { 0 };
	struct shm_waker wk;
	struct work w;
	struct racer race = { .w = &w, .db = db };
	pthread_t racer;
	uint64_t i, wakes;
	int64_t end;

	printf("no-lost-wakeup seed %llu\n", (unsigned long long)seed);
	shm_doorbell_init(mem);
	atomic_init(&w.published, 0);
	atomic_init(&w.taken, 0);
	atomic_init(&race.go, 0);
	atomic_init(&race.when_asleep, false);
	race.rng = rng_next(&rng);
	CHECK_EQ(pthread_create(&racer, NULL, racer_main, &race), 0);
	CHECK_EQ(start_thread(&wk, db, &w, TEST_NO_BACKSTOP_MS), 0);
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
			end = clock_now_ns() + (int64_t)TEST_DEADLINE_MS * 1000000;
			while (!shm_doorbell_is_sleeping(db)) {
				CHECK(clock_now_ns() < end);
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
				"invariant 7 (wake-ups are never lost): "
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

/* ---- ring mode ---- */

/* The work of the ring-mode tests, with a hook in its has_work: when
 * inject is set, the first re-check that finds no work publishes inject
 * and rings right after it, as a producer whose publish lands after the
 * loop's re-check and before its wait is armed. */
struct hooked {
	struct work w;
	struct shm_doorbell *db;
	uint64_t inject;
};

static bool hooked_has_work(void *arg)
{
	struct hooked *h = arg;
	bool work = work_waiting(&h->w);

	if (!work && h->inject) {
		work_publish(&h->w, h->db, h->inject);
		h->inject = 0;
	}
	return work;
}

static void hooked_init(struct hooked *h, struct shm_doorbell *db)
{
	shm_doorbell_init(db);
	atomic_init(&h->w.published, 0);
	atomic_init(&h->w.taken, 0);
	h->db = db;
	h->inject = 0;
}

/* Starts ring mode; false (and a note) where the kernel has no io_uring
 * futex waits, so that the ring tests are skipped visibly. */
static bool start_ring(struct shm_waker *wk, struct hooked *h)
{
	int rc = shm_waker_start_mode(wk, h->db, hooked_has_work, h, TEST_NO_BACKSTOP_MS,
				      SHM_WAKER_RING);
	if (rc == -EOPNOTSUPP) {
		printf("ring mode: not available on this kernel (io_uring FUTEX_WAIT, 6.7+): "
		       "its tests are skipped\n");
		return false;
	}
	CHECK_EQ(rc, 0);
	CHECK_EQ(strcmp(shm_waker_mode_name(wk), "ring"), 0);
	CHECK(shm_waker_fd(wk) >= 0);
	return true;
}

struct late_producer {
	struct hooked *h;
	uint64_t n;
};

/* Publishes once the loop is asleep. */
static void *late_producer_main(void *arg)
{
	struct late_producer *p = arg;
	int64_t end = clock_now_ns() + (int64_t)TEST_DEADLINE_MS * 1000000;

	while (!shm_doorbell_is_sleeping(p->h->db) && clock_now_ns() < end)
		sched_yield();
	usleep(2000); /* into poll, most likely */
	work_publish(&p->h->w, p->h->db, p->n);
	return NULL;
}

static void test_ring_basics(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *db = (void *)mem;
	struct late_producer lp;
	struct shm_waker wk;
	struct hooked h;
	pthread_t t;
	uint64_t wakes;

	hooked_init(&h, db);
	if (!start_ring(&wk, &h))
		return;

	/* No work: the loop counts as asleep from prepare to done only. */
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK(shm_doorbell_is_sleeping(db));
	CHECK(!fired_within(&wk, 0));
	shm_waker_done(&wk);
	CHECK(!shm_doorbell_is_sleeping(db));
	/* The loop's own timeout passes through; one that does not wait
	 * does not announce. */
	CHECK_EQ(shm_waker_prepare(&wk, 50), 50);
	CHECK(shm_doorbell_is_sleeping(db));
	shm_waker_done(&wk);
	CHECK_EQ(shm_waker_prepare(&wk, 0), 0);
	CHECK(!shm_doorbell_is_sleeping(db));
	shm_waker_done(&wk);

	/* Work published while the loop is busy wakes no one, and the next
	 * prepare finds it without sleeping. */
	wakes = shm_doorbell_wakes(db);
	work_publish(&h.w, db, 1);
	CHECK_EQ(shm_doorbell_wakes(db), wakes);
	CHECK_EQ(shm_waker_prepare(&wk, -1), 0);
	CHECK(!shm_doorbell_is_sleeping(db));
	shm_waker_done(&wk);
	atomic_store(&h.w.taken, 1);

	/* Work published to the sleeping loop makes the ring readable; done
	 * takes the completion. */
	lp = (struct late_producer){ .h = &h, .n = 2 };
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK_EQ(pthread_create(&t, NULL, late_producer_main, &lp), 0);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	shm_waker_done(&wk);
	pthread_join(t, NULL);
	CHECK(work_waiting(&h.w));
	CHECK_EQ(shm_doorbell_wakes(db), wakes + 1);
	CHECK(!fired_within(&wk, 0));
	CHECK(!shm_doorbell_is_sleeping(db));
	atomic_store(&h.w.taken, 2);

	/* A publish between the re-check and the arming of the wait: the
	 * wait is armed with the value read before the announcement, which
	 * the wake moved, so it completes at once. */
	h.inject = 3;
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK_EQ(h.inject, 0);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	shm_waker_done(&wk);
	CHECK(work_waiting(&h.w));
	atomic_store(&h.w.taken, 3);

	/* The same with a wait still in flight from an earlier sleep that
	 * ended by timeout: the wake completes that one. */
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK(!fired_within(&wk, 20));
	shm_waker_done(&wk);
	h.inject = 4;
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	shm_waker_done(&wk);
	CHECK(work_waiting(&h.w));
	atomic_store(&h.w.taken, 4);
	CHECK_EQ(wk.arm_failures, 0);

	/* Stopping between prepare and done takes the count back. */
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	shm_waker_stop(&wk);
	CHECK(!shm_doorbell_is_sleeping(db));
	CHECK_EQ(shm_waker_fd(&wk), -1);
	shm_waker_stop(&wk); /* stopped already */
}

/* The mode the daemons get: ring where it runs, thread when asked. */
static void test_auto_mode(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *db = (void *)mem;
	struct shm_waker ring, wk;
	struct hooked h;
	bool have_ring;

	hooked_init(&h, db);
	have_ring = shm_waker_start_mode(&ring, db, hooked_has_work, &h, TEST_NO_BACKSTOP_MS,
					 SHM_WAKER_RING) == 0;
	shm_waker_stop(&ring);
	CHECK_EQ(setenv("CETCD_WAKER", "thread", 1), 0);
	CHECK_EQ(shm_waker_start(&wk, db, hooked_has_work, &h, TEST_NO_BACKSTOP_MS), 0);
	CHECK_EQ(strcmp(shm_waker_mode_name(&wk), "thread"), 0);
	shm_waker_stop(&wk);
	CHECK_EQ(unsetenv("CETCD_WAKER"), 0);
	CHECK_EQ(shm_waker_start(&wk, db, hooked_has_work, &h, TEST_NO_BACKSTOP_MS), 0);
	CHECK_EQ(strcmp(shm_waker_mode_name(&wk), have_ring ? "ring" : "thread"), 0);
	shm_waker_stop(&wk);
	printf("auto mode: %s\n", have_ring ? "ring" : "thread");
}

enum ring_round {
	RING_BEFORE,  /* published before prepare: its re-check finds it */
	RING_ASLEEP,  /* published to the loop in poll: only the wake finds it */
	RING_WINDOW,  /* published between re-check and arming (the hook) */
	RING_RACE,    /* published after a random spin: anywhere */
	RING_ROUNDS
};

/*
 * Many rounds of: the loop (this thread) takes the work, a producer
 * publishes the next piece in one of the ways of enum ring_round, and the
 * loop waits as gatewayd's and raftd's do (prepare, poll with no bound but
 * the deadline, done) until the work is there. A wait that ends without
 * the work is a spurious wake-up (a completion of an earlier round's wake,
 * counted); a wait that reaches the deadline is a lost one.
 */
/* A wait that completes with an error (neither a wake, a changed value
 * nor a cancellation) is not armed again on the next turn, which polls
 * instead: a wait that kept failing would otherwise make the loop spin,
 * re-arming it every turn. The failure is put on the waker's ring as a
 * failed read of descriptor -1, the completion a failed wait leaves. */
static void test_ring_failed_wait(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	static char byte;
	struct shm_doorbell *db = (void *)mem;
	struct shm_waker wk;
	struct hooked h;

	hooked_init(&h, db);
	if (!start_ring(&wk, &h))
		return;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&wk.ring);
	CHECK(sqe != NULL);
	io_uring_prep_read(sqe, -1, &byte, 1, 0);
	CHECK_EQ(io_uring_submit(&wk.ring), 1);
	CHECK(fired_within(&wk, TEST_DEADLINE_MS));
	uint64_t failures = wk.arm_failures;

	CHECK_EQ(shm_waker_prepare(&wk, -1), SHM_WAKER_DEGRADED_MS);
	CHECK(!wk.armed);
	CHECK_EQ(wk.arm_failures, failures + 1);
	CHECK(shm_doorbell_is_sleeping(db)); /* announced: a wake still counts */
	shm_waker_done(&wk);
	/* the turn after: armed again, the loop's own timeout */
	CHECK_EQ(shm_waker_prepare(&wk, -1), -1);
	CHECK(wk.armed);
	CHECK(!fired_within(&wk, 0));
	shm_waker_done(&wk);
	shm_waker_stop(&wk);
}

static void test_ring_no_lost_wakeup(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	static const char *const names[RING_ROUNDS] = { "published before prepare",
							"published to a sleeper",
							"published between re-check and arming",
							"published racing the sleeper" };
	const uint64_t rounds = 30000;
	uint64_t seed = clock_now_ns() | 1, rng = seed;
	uint64_t counts[RING_ROUNDS] = { 0 }, spurious = 0, found_by_recheck = 0;
	struct racer race;
	struct shm_waker wk;
	struct hooked h;
	pthread_t racer;
	uint64_t i, wakes;

	hooked_init(&h, (void *)mem);
	if (!start_ring(&wk, &h))
		return;
	printf("ring no-lost-wakeup seed %llu\n", (unsigned long long)seed);
	race = (struct racer){ .w = &h.w, .db = h.db, .rng = rng_next(&rng) };
	atomic_init(&race.go, 0);
	atomic_init(&race.when_asleep, false);
	CHECK_EQ(pthread_create(&racer, NULL, racer_main, &race), 0);

	for (i = 1; i <= rounds; i++) {
		enum ring_round kind = (enum ring_round)(rng_next(&rng) % RING_ROUNDS);
		int cap;

		atomic_store_explicit(&h.w.taken, i - 1, memory_order_relaxed);
		switch (kind) {
		case RING_BEFORE:
			work_publish(&h.w, h.db, i);
			break;
		case RING_WINDOW:
			h.inject = i;
			break;
		default:
			atomic_store_explicit(&race.when_asleep, kind == RING_ASLEEP,
					      memory_order_relaxed);
			atomic_store_explicit(&race.go, i, memory_order_release);
			break;
		}
		counts[kind]++;
		for (;;) {
			cap = shm_waker_prepare(&wk, -1);
			CHECK(cap == 0 || cap == -1);
			if (cap == 0) {
				found_by_recheck++;
				break;
			}
			if (!fired_within(&wk, TEST_DEADLINE_MS)) {
				fprintf(stderr,
					"invariant 7 (wake-ups are never lost): "
					"lost wake-up in round %llu (%s; seed %llu): the ring did "
					"not fire within %d ms\n",
					(unsigned long long)i, names[kind],
					(unsigned long long)seed, TEST_DEADLINE_MS);
				exit(1);
			}
			shm_waker_done(&wk);
			if (work_waiting(&h.w))
				break;
			spurious++;
		}
		shm_waker_done(&wk);
		if (kind == RING_BEFORE)
			CHECK_EQ(cap, 0);
		if (kind == RING_WINDOW)
			CHECK_EQ(cap, -1);
		/* the racer is done with round i once the work is there */
		CHECK_EQ(atomic_load(&h.w.published), i);
	}
	wakes = shm_doorbell_wakes(h.db);
	printf("ring rounds: %llu before, %llu asleep, %llu in the window, %llu racing; "
	       "%llu found by the re-check, %llu spurious wake-ups, futex wakes %llu, "
	       "arm failures %llu\n",
	       (unsigned long long)counts[0], (unsigned long long)counts[1],
	       (unsigned long long)counts[2], (unsigned long long)counts[3],
	       (unsigned long long)found_by_recheck, (unsigned long long)spurious,
	       (unsigned long long)wakes, (unsigned long long)wk.arm_failures);
	for (i = 0; i < RING_ROUNDS; i++)
		CHECK(counts[i] > 0);
	CHECK(wakes >= counts[RING_ASLEEP] + counts[RING_WINDOW]);
	CHECK(wakes <= counts[RING_ASLEEP] + counts[RING_WINDOW] + counts[RING_RACE]);
	CHECK_EQ(wk.arm_failures, 0);
	atomic_store(&race.go, UINT64_MAX);
	pthread_join(racer, NULL);
	shm_waker_stop(&wk);
}

int main(void)
{
	test_start_stop();
	test_fires_once_until_drained();
	test_no_lost_wakeup();
	test_ring_basics();
	test_ring_failed_wait();
	test_auto_mode();
	test_ring_no_lost_wakeup();
	printf("test_waker: ok\n");
	return 0;
}
