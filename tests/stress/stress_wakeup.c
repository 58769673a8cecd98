/*
 * Stress: the no-lost-wake-up protocol. Two processes play ping-pong
 * through two rings of a real region, and neither ever spins: each sleeps
 * on its futex doorbell as soon as its ring is empty, so both sleep and
 * wake hundreds of thousands of times. A futex wait that times out (the
 * 1 s backstop) while a record is waiting would be a lost wake-up; the
 * count must be 0.
 *
 * A second phase streams records through a ring kept nearly full, so that
 * the producer also sleeps waiting for room (ring_push_wait) while the
 * consumer sleeps waiting for data; a wait for room that needed the
 * backstop would be a lost wake-up in the other direction.
 *
 * This is invariant 7 (docs/invariants.md), broken on purpose by making
 * every hand-over a sleep: a wake-up lost once in a million rounds shows.
 *
 * CETCD_STRESS_ROUNDS overrides the number of round trips.
 */
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

static char dir[256], path[512];
static uint64_t rounds = 300000;
#define STREAM_RECORDS 200000u

struct shared {
	_Atomic uint64_t sleeps[2], timeouts[2], lost[2], slow_pushes;
};
static struct shared *sh;

/* Waits for a record on `in` by sleeping only; counts lost wake-ups. */
static int wait_record(struct ring *in, struct shm_doorbell *db, int side,
		       struct ring_rec *rec)
{
	int rc;

	for (;;) {
		rc = ring_peek(in, rec);
		if (rc != -EAGAIN)
			return rc;
		atomic_fetch_add(&sh->sleeps[side], 1);
		rc = shm_doorbell_sleep(db, ring_wait_ready, in,
					SHM_DOORBELL_BACKSTOP_MS);
		if (rc == -ETIMEDOUT) {
			atomic_fetch_add(&sh->timeouts[side], 1);
			if (ring_has_data(in))
				atomic_fetch_add(&sh->lost[side], 1);
		}
	}
}

/* side 0 is a gateway (slot 0), side 1 is raftd. */
static int player(int side)
{
	struct shm_region *r;
	struct shm_slot_ref s;
	struct shm_doorbell *db;
	struct ring *in, *out;
	struct ring_rec rec;
	uint64_t i, v;
	int rc;

	if (shm_region_attach(path, &r))
		return 10;
	if (side == 0) {
		if (shm_slot_claim(r, &s) || s.index != 0)
			return 11;
		db = shm_slot_doorbell(r, 0);
		out = shm_slot_ring(r, 0, SHM_SLOT_TO_RAFTD);
		in = shm_slot_ring(r, 0, SHM_SLOT_FROM_RAFTD);
	} else {
		if (shm_role_claim(r, SHM_ROLE_RAFTD))
			return 11;
		db = shm_role_doorbell(r, SHM_ROLE_RAFTD);
		out = shm_slot_ring(r, 0, SHM_SLOT_FROM_RAFTD);
		in = shm_slot_ring(r, 0, SHM_SLOT_TO_RAFTD);
	}
	/* Phase 1: ping-pong. */
	for (i = 0; i < rounds; i++) {
		if (side == 0 && ring_push(out, 1, &i, sizeof(i)))
			return 12;
		rc = wait_record(in, db, side, &rec);
		if (rc)
			return 13;
		memcpy(&v, rec.data, sizeof(v));
		if (v != i)
			return 14;
		ring_release(in, &rec);
		if (side == 1 && ring_push(out, 1, &i, sizeof(i)))
			return 15;
	}
	/* Phase 2: the gateway streams into a nearly full ring. */
	for (i = 0; i < STREAM_RECORDS; i++) {
		if (side == 0) {
			int64_t t0 = clock_now_ns();
			uint8_t big[1024];

			memcpy(big, &i, sizeof(i));
			if (ring_push_wait(out, 2, big, sizeof(big), 30000))
				return 16;
			if (clock_now_ns() - t0 >
			    (int64_t)SHM_DOORBELL_BACKSTOP_MS * 900000)
				atomic_fetch_add(&sh->slow_pushes, 1);
			continue;
		}
		rc = wait_record(in, db, side, &rec);
		if (rc)
			return 17;
		memcpy(&v, rec.data, sizeof(v));
		if (v != i || rec.len != 1024)
			return 18;
		ring_release(in, &rec);
		/* Let the ring fill up now and then. */
		if ((i & 1023) == 0)
			usleep(500);
	}
	shm_region_detach(r);
	return 0;
}

int main(void)
{
	/* Rings of ~4 largest records: 4 * (1 KiB + overhead) keeps the
	 * second phase's ring full most of the time. */
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 1024 };
	const char *env = getenv("CETCD_STRESS_ROUNDS");
	struct shm_region *l;
	pid_t a, b;
	uint64_t t0, ns, lost, sleeps;

	if (env)
		rounds = strtoull(env, NULL, 10);
	sh = test_shared(sizeof(*sh));
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	t0 = clock_now_ns();
	a = test_fork();
	CHECK(a >= 0);
	if (a == 0)
		test_child_exit(player(0));
	b = test_fork();
	CHECK(b >= 0);
	if (b == 0)
		test_child_exit(player(1));
	CHECK_EQ(test_wait(a), 0);
	CHECK_EQ(test_wait(b), 0);
	ns = clock_now_ns() - t0;
	lost = atomic_load(&sh->lost[0]) + atomic_load(&sh->lost[1]);
	sleeps = atomic_load(&sh->sleeps[0]) + atomic_load(&sh->sleeps[1]);
	printf("stress_wakeup: %llu round trips + %u streamed records in "
	       "%.1f s; sleeps: gateway %llu, raftd %llu; futex wakes: "
	       "gateway %llu, raftd %llu; backstop timeouts %llu\n",
	       (unsigned long long)rounds, STREAM_RECORDS, ns / 1e9,
	       (unsigned long long)atomic_load(&sh->sleeps[0]),
	       (unsigned long long)atomic_load(&sh->sleeps[1]),
	       (unsigned long long)shm_doorbell_wakes(shm_slot_doorbell(l, 0)),
	       (unsigned long long)shm_doorbell_wakes(
		       shm_role_doorbell(l, SHM_ROLE_RAFTD)),
	       (unsigned long long)(atomic_load(&sh->timeouts[0]) +
				    atomic_load(&sh->timeouts[1])));
	printf("stress_wakeup: futex waits that timed out with data waiting: "
	       "%llu; pushes that waited for room as long as the backstop: "
	       "%llu\n", (unsigned long long)lost,
	       (unsigned long long)atomic_load(&sh->slow_pushes));
	CHECK_INVARIANT_EQ(INV7_WAKEUPS, lost, 0);
	CHECK_INVARIANT_EQ(INV7_WAKEUPS, atomic_load(&sh->slow_pushes), 0);
	CHECK(sleeps >= rounds); /* they really slept */
	shm_region_detach(l);
	return 0;
}
