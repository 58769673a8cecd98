/*
 * Unit tests for shm/doorbell.c: immediate return when work is there,
 * timeouts, a wake across processes through a ring, wakes only when the
 * consumer sleeps, spinning, and event notifications. The spin cases and
 * the litmus test break invariant 7 (docs/invariants.md) on purpose.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "shm/barrier.h"
#include "shm/bcast.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

static bool flag_set(void *arg)
{
	return atomic_load((atomic_int *)arg) != 0;
}

static void test_sleep_basics(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *d = (void *)mem;
	atomic_int flag;
	uint64_t t0;

	shm_doorbell_init(mem);
	atomic_init(&flag, 1);
	/* work is there: 0 at once (nobody rings, so a wait would end in
	 * -ETIMEDOUT after its full minute) */
	CHECK_EQ(shm_doorbell_sleep(d, flag_set, &flag, 60000), 0);
	CHECK(!shm_doorbell_is_sleeping(d));

	atomic_store(&flag, 0);
	CHECK_EQ(shm_doorbell_sleep(d, flag_set, &flag, 0), -ETIMEDOUT);
	t0 = clock_now_ns();
	CHECK_EQ(shm_doorbell_sleep(d, flag_set, &flag, 40), -ETIMEDOUT);
	CHECK(clock_now_ns() - t0 >= 35 * 1000000ull);
	CHECK(!shm_doorbell_is_sleeping(d));
	/* Ringing with nobody asleep issues no futex wake. */
	shm_doorbell_ring(d);
	CHECK_EQ(shm_doorbell_wakes(d), 0);
}

/*
 * The spin phase. A waiter whose producer runs spins on has_work rather
 * than sleeping: the setter waits until the waiter has called has_work
 * many times (it spins), sets the flag and rings as a producer does; the
 * ring must find nobody asleep. A waiter whose producer sleeps goes
 * straight to sleep instead: the setter waits for it to sleep, and then
 * its ring is a futex wake. (Both spin budgets are far longer than the
 * test runs, so neither outcome depends on timing.)
 */
struct spin_arg {
	struct shm_doorbell *d;
	atomic_int flag;
	atomic_ulong checks;  /* has_work calls */
	bool want_sleep;      /* the setter waits for a sleeper, not for spins */
	bool seen;            /* the setter saw what it waited for */
};

static bool spin_has_work(void *arg)
{
	struct spin_arg *a = arg;

	atomic_fetch_add(&a->checks, 1);
	return atomic_load(&a->flag) != 0;
}

static void *spin_setter(void *arg)
{
	struct spin_arg *a = arg;

	if (a->want_sleep)
		a->seen = TEST_WAIT_FOR(shm_doorbell_is_sleeping(a->d), 60000);
	else
		a->seen = TEST_WAIT_FOR(atomic_load(&a->checks) >= 10000, 60000);
	atomic_store(&a->flag, 1);
	shm_doorbell_ring(a->d);
	return NULL;
}

static void spin_case(bool peer_asleep)
{
	static uint8_t mem[2 * SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	struct shm_doorbell *d = (void *)mem;
	struct shm_doorbell *peer = (void *)(mem + SHM_DOORBELL_BYTES);
	struct test_sleeper ps;
	struct spin_arg a = { .d = d, .want_sleep = peer_asleep };
	pthread_t t;

	shm_doorbell_init(d);
	shm_doorbell_init(peer);
	atomic_init(&a.flag, 0);
	atomic_init(&a.checks, 0);
	if (peer_asleep)
		test_sleeper_start(&ps, peer);
	CHECK_EQ(pthread_create(&t, NULL, spin_setter, &a), 0);
	CHECK_EQ(shm_doorbell_wait(d, peer, spin_has_work, &a, 60000000, 60000), 0);
	pthread_join(t, NULL);
	if (peer_asleep)
		test_sleeper_stop(&ps);
	if (!a.seen || shm_doorbell_wakes(d) != (peer_asleep ? 1u : 0u)) {
		fprintf(stderr, "invariant 7 (wake-ups are never lost): spin only while the peer "
			"runs, but with the peer %s the "
			"waiter %s (has_work checked %lu times, %llu futex wakes)\n",
			peer_asleep ? "asleep" : "running",
			peer_asleep ? "never slept" : "slept instead of spinning",
			(unsigned long)atomic_load(&a.checks),
			(unsigned long long)shm_doorbell_wakes(d));
		exit(1);
	}
}

static void test_spin(void)
{
	spin_case(false);
	spin_case(true);
}

/*
 * Across processes: a child sleeps on its doorbell waiting for a ring; the
 * parent waits until the child says it sleeps, then pushes one record. The
 * child must wake long before its backstop timeout.
 */
static void test_cross_process_wake(void)
{
	size_t ring_bytes = ring_footprint(4096);
	size_t bytes = ring_bytes + 2 * SHM_DOORBELL_BYTES + 64;
	uint8_t *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct shm_doorbell *cdb, *pdb;
	struct ring *r;
	_Atomic int *done; /* records the child has taken */
	uint64_t wakes;
	pid_t pid;
	int i;

	CHECK(mem != MAP_FAILED);
	done = (_Atomic int *)(mem + ring_bytes + 2 * SHM_DOORBELL_BYTES);
	atomic_init(done, 0);
	r = (struct ring *)mem;
	cdb = (void *)(mem + ring_bytes);
	pdb = (void *)(mem + ring_bytes + SHM_DOORBELL_BYTES);
	shm_doorbell_init(cdb);
	shm_doorbell_init(pdb);
	CHECK_EQ(ring_init(r, ring_bytes, 256, cdb, pdb), 0);

	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct ring_rec rec;

		for (i = 0; i < 20; i++) {
			while (!ring_has_data(r)) {
				if (shm_doorbell_sleep(cdb, ring_wait_ready, r,
						       10000) == -ETIMEDOUT)
					_exit(2); /* a lost wake-up */
			}
			if (ring_peek(r, &rec) || rec.type != (uint32_t)i)
				_exit(3);
			ring_release(r, &rec);
			atomic_store(done, i + 1);
		}
		_exit(0);
	}
	for (i = 0; i < 20; i++) {
		/* Once the child has taken the last record it has left its
		 * last sleep, so the sleeper seen next is a new one (not one
		 * the previous push woke that has yet to say it is awake). */
		CHECK(TEST_WAIT_FOR(atomic_load(done) == i, 10000));
		CHECK(TEST_WAIT_FOR(shm_doorbell_is_sleeping(cdb), 10000));
		wakes = shm_doorbell_wakes(cdb);
		CHECK_EQ(ring_push(r, (uint32_t)i, "x", 1), 0);
		/* The consumer slept, so the push rang its doorbell. */
		CHECK_EQ(shm_doorbell_wakes(cdb), wakes + 1);
	}
	CHECK_EQ(test_wait(pid), 0);

	/* With the consumer awake, pushes issue no futex wake. */
	wakes = shm_doorbell_wakes(cdb);
	for (i = 0; i < 100; i++)
		CHECK_EQ(ring_push(r, 1, "y", 1), 0);
	CHECK_EQ(shm_doorbell_wakes(cdb), wakes);
	munmap(mem, bytes);
}

/* shm_events_notify wakes the slots that asked for events, and only
 * when they sleep. */
static void test_events_notify(void)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 4096 };
	struct shm_region *l, *stored;
	struct shm_doorbell *d0, *d1;
	char dir[256], path[512];

	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	CHECK_EQ(shm_region_attach(path, &stored), 0);
	d0 = shm_slot_doorbell(l, 0);
	d1 = shm_slot_doorbell(l, 1);
	CHECK(shm_role_doorbell(l, SHM_ROLE_RAFTD) != NULL);
	shm_doorbell_want_events(d0, true);

	pid_t pid = test_fork();

	CHECK(pid >= 0);
	if (pid == 0) {
		struct shm_region *gw;
		struct bcast_cursor c = { 0 };
		struct bcast_wait ev;
		struct shm_slot_ref s;

		if (shm_region_attach(path, &gw) || shm_slot_claim(gw, &s) ||
		    s.index != 0)
			_exit(1);
		shm_doorbell_want_events(shm_slot_doorbell(gw, 0), true);
		bcast_cursor_init(shm_events(gw), &c);
		ev.b = shm_events(gw);
		ev.c = &c;
		while (!bcast_wait_ready(&ev)) {
			if (shm_doorbell_sleep(shm_slot_doorbell(gw, 0),
					       bcast_wait_ready, &ev,
					       10000) == -ETIMEDOUT)
				_exit(2);
		}
		_exit(0);
	}
	/* slot 1 sleeps too but did not ask for events: a notice that woke
	 * every sleeper would show here */
	struct test_sleeper s1;
	test_sleeper_start(&s1, d1);
	CHECK(TEST_WAIT_FOR(shm_doorbell_is_sleeping(d0), 10000));
	CHECK_EQ(bcast_publish(shm_events(stored), 1, "ev", 2), 0);
	shm_events_notify(stored);
	CHECK_EQ(test_wait(pid), 0);
	CHECK(shm_doorbell_wakes(d0) >= 1);
	CHECK_EQ(test_sleeper_wakes(&s1), 0);
	CHECK(!test_sleeper_rung(&s1));
	test_sleeper_stop(&s1);
	shm_region_detach(stored);
	shm_region_detach(l);
}

/*
 * The race the protocol's two full fences close, as a store-buffer litmus
 * test: each round a sleeper and a producer start together (both spin on
 * the round number) and, after a small random spin each, the sleeper
 * sleeps until `published` reaches the round while the producer publishes
 * and rings. Without the producer's fence its load of "sleeping" can pass
 * its store of `published` (x86 lets a load pass an earlier store), and
 * without the sleeper's its re-check can pass its announcement; either way
 * both miss the other and the sleeper waits for its timeout, which only a
 * lost wake-up reaches.
 */
struct litmus {
	struct shm_doorbell *d;
	_Atomic uint64_t go;        /* the round both sides start */
	_Atomic uint64_t published; /* the producer's work: the round number */
	_Atomic uint64_t want;      /* the round the sleeper waits for */
	uint64_t rng;
};

#define LITMUS_DEADLINE_MS 20000

static unsigned litmus_spin(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (unsigned)(*s % 32) >> (unsigned)((*s >> 8) % 6);
}

static bool litmus_ready(void *arg)
{
	struct litmus *t = arg;
	return atomic_load_explicit(&t->published, memory_order_acquire) >=
	       atomic_load_explicit(&t->want, memory_order_relaxed);
}

/* Waits for round i to start; yields now and then so that a descheduled
 * partner gets the core back. */
static void litmus_wait_go(struct litmus *t, uint64_t i)
{
	unsigned n = 0;

	while (atomic_load_explicit(&t->go, memory_order_acquire) < i) {
		if (++n % 1024 == 0)
			sched_yield();
		else
			shm_cpu_relax();
	}
}

static void *litmus_producer(void *arg)
{
	struct litmus *t = arg;
	uint64_t i, rng = t->rng;
	unsigned spin;

	for (i = 1;; i++) {
		litmus_wait_go(t, i);
		if (atomic_load(&t->go) == UINT64_MAX)
			return NULL;
		spin = litmus_spin(&rng);
		while (spin--)
			shm_cpu_relax();
		atomic_store_explicit(&t->published, i, memory_order_release);
		shm_doorbell_ring(t->d);
	}
}

static void test_no_lost_wakeup_litmus(void)
{
	static uint8_t mem[SHM_DOORBELL_BYTES] __attribute__((aligned(64)));
	const uint64_t rounds = 100000;
	struct litmus t = { .d = (void *)mem };
	uint64_t i, rng, slept = 0;
	pthread_t producer;
	unsigned spin;
	int rc;

	shm_doorbell_init(mem);
	rng = clock_now_ns() | 1;
	printf("litmus seed %llu\n", (unsigned long long)rng);
	t.rng = rng * 7 + 1;
	atomic_init(&t.go, 0);
	atomic_init(&t.published, 0);
	atomic_init(&t.want, 0);
	CHECK_EQ(pthread_create(&producer, NULL, litmus_producer, &t), 0);
	for (i = 1; i <= rounds; i++) {
		atomic_store_explicit(&t.want, i, memory_order_relaxed);
		atomic_store_explicit(&t.go, i, memory_order_release);
		/* longer: the producer starts late, as it sees go late */
		spin = 4 * litmus_spin(&rng);
		while (spin--)
			shm_cpu_relax();
		while (!litmus_ready(&t)) {
			uint64_t wakes = shm_doorbell_wakes(t.d);

			rc = shm_doorbell_sleep(t.d, litmus_ready, &t, LITMUS_DEADLINE_MS);
			if (rc == -ETIMEDOUT) {
				fprintf(stderr, "invariant 7 (wake-ups are never lost): "
					"lost wake-up in litmus round %llu: slept %d ms\n",
					(unsigned long long)i, LITMUS_DEADLINE_MS);
				exit(1);
			}
			CHECK_EQ(rc, 0);
			slept += shm_doorbell_wakes(t.d) != wakes;
		}
	}
	atomic_store(&t.go, UINT64_MAX);
	pthread_join(producer, NULL);
	/* rounds the sleeper never slept in test nothing of the protocol */
	CHECK(slept > 0);
	printf("litmus: %llu rounds, %llu of them woken by the producer\n", (unsigned long long)rounds,
	       (unsigned long long)slept);
}

int main(void)
{
	test_sleep_basics();
	test_spin();
	test_cross_process_wake();
	test_events_notify();
	test_no_lost_wakeup_litmus();
	printf("test_doorbell: ok\n");
	return 0;
}
