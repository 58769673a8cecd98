/*
 * Stress: a gatewayd-like consumer of a slot's result ring is killed with
 * SIGKILL mid-stream. A stored-like producer keeps pushing results tagged
 * with the slot generation it addresses (never blocking for a dead slot).
 * The kernel drops the dead holder's lock, a new consumer claims the slot
 * (generation bumped), drops anything addressed to the old generation and
 * then receives an unbroken, checksummed stream for its own generation.
 * The kill breaks invariants 1 and 2 (docs/invariants.md) on purpose.
 */
#include <stdatomic.h>

#include "shm_testlib.h"

#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

#define FIRST_RECORDS 200000u  /* the first consumer dies after this many */
#define SECOND_RECORDS 300000u /* the second one checks this many */

struct shared {
	_Atomic uint64_t received; /* by the current consumer */
	atomic_int stop_producer;
	_Atomic uint64_t produced, dropped_dead, switches;
	/* The generation whose consumer finished claiming the slot: results
	 * exist only in answer to requests, which a gatewayd sends after its
	 * claim, so the producer answers only a generation that said so. */
	_Atomic uint64_t ready_gen;
};

static char dir[256], path[512];
static struct shared *sh;

static int producer(void)
{
	struct shm_region *r;
	uint64_t gen = 0, seq = 0, g;
	struct ring *ring;
	uint8_t *buf;
	uint32_t len, max;
	int rc;

	if (shm_region_attach(path, &r) || shm_role_claim(r, SHM_ROLE_STORED))
		return 10;
	ring = shm_slot_ring(r, 0, SHM_SLOT_FROM_STORED);
	max = ring_max_record(ring);
	buf = malloc(max);
	if (!buf)
		return 11;
	while (!atomic_load(&sh->stop_producer)) {
		if (!shm_slot_is_live(r, 0)) {
			/* Results for a dead slot are dropped, never queued
			 * and never waited for. */
			atomic_fetch_add(&sh->dropped_dead, 1);
			usleep(100);
			continue;
		}
		g = shm_slot_generation(r, 0);
		if (g != atomic_load(&sh->ready_gen)) {
			usleep(100); /* claimed, but not asked anything yet */
			continue;
		}
		if (g != gen) {
			gen = g;
			seq = 0;
			atomic_fetch_add(&sh->switches, 1);
		}
		len = test_len(seq, 300, max, 5000);
		test_fill(buf, len, seq);
		rc = ring_push_wait(ring, (uint32_t)gen, buf, len, 50);
		if (rc == -ETIMEDOUT)
			continue; /* re-check liveness and generation */
		if (rc) {
			fprintf(stderr, "producer: push: %d\n", rc);
			return 12;
		}
		seq++;
		atomic_fetch_add(&sh->produced, 1);
	}
	free(buf);
	return 0;
}

/* Claims the slot and checks `want` records of its own generation. Old
 * generations are dropped (counted). Returns an exit status. */
static int consumer(uint32_t expect_index, uint64_t min_gen, uint64_t want)
{
	struct shm_region *r;
	struct shm_slot_ref s;
	struct ring_rec rec;
	struct ring *ring;
	uint64_t seq = 0, stale = 0;
	int rc;

	if (shm_region_attach(path, &r) || shm_slot_claim(r, &s))
		return 20;
	if (s.index != expect_index || s.generation < min_gen)
		return 21;
	ring = shm_slot_ring(r, s.index, SHM_SLOT_FROM_STORED);
	atomic_store(&sh->ready_gen, s.generation);
	while (seq < want) {
		rc = ring_peek(ring, &rec);
		if (rc == -EAGAIN) {
			shm_doorbell_wait(shm_slot_doorbell(r, s.index),
					  shm_role_doorbell(r, SHM_ROLE_STORED),
					  ring_wait_ready, ring, 50,
					  SHM_DOORBELL_BACKSTOP_MS);
			continue;
		}
		if (rc)
			return 22;
		if (rec.type != (uint32_t)s.generation) {
			if (rec.type > (uint32_t)s.generation)
				return 23; /* from the future? */
			stale++;
		} else {
			if (test_verify(rec.data, rec.len, seq) != 0) {
				fprintf(stderr, "consumer gen %llu: record %llu "
					"is wrong\n",
					(unsigned long long)s.generation,
					(unsigned long long)seq);
				return 24;
			}
			seq++;
			atomic_store(&sh->received, seq);
		}
		ring_release(ring, &rec);
	}
	printf("consumer: slot %u generation %llu checked %llu records, "
	       "dropped %llu addressed to an older generation\n", s.index,
	       (unsigned long long)s.generation, (unsigned long long)seq,
	       (unsigned long long)stale);
	return 0;
}

int main(void)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 256 * 1024 };
	struct shm_region *l;
	uint64_t gen1, gen2;
	pid_t prod, c1, c2;
	int rc;

	test_watchdog(180);
	sh = test_shared(sizeof(*sh));
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);

	prod = test_fork();
	CHECK(prod >= 0);
	if (prod == 0)
		test_child_exit(producer());
	c1 = test_fork();
	CHECK(c1 >= 0);
	if (c1 == 0)
		test_child_exit(consumer(0, 1, UINT64_MAX));
	CHECK(TEST_WAIT_FOR(atomic_load(&sh->received) >= FIRST_RECORDS,
			    60000));
	gen1 = shm_slot_generation(l, 0);
	CHECK(shm_slot_is_live(l, 0));
	kill(c1, SIGKILL);
	CHECK_EQ(test_wait(c1), 128 + SIGKILL);
	printf("killed the first consumer (generation %llu) after %llu "
	       "records\n", (unsigned long long)gen1,
	       (unsigned long long)atomic_load(&sh->received));
	CHECK_INVARIANT(INV1_SLOT_LIVENESS, !shm_slot_is_live(l, 0));
	/* Let the producer run into the dead slot for a moment. */
	CHECK(TEST_WAIT_FOR(atomic_load(&sh->dropped_dead) > 0, 10000));

	c2 = test_fork();
	CHECK(c2 >= 0);
	if (c2 == 0)
		test_child_exit(consumer(0, gen1 + 1, SECOND_RECORDS));
	rc = test_wait(c2);
	CHECK_EQ(rc, 0);
	gen2 = shm_slot_generation(l, 0);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, gen2, gen1 + 1);
	atomic_store(&sh->stop_producer, 1);
	CHECK_EQ(test_wait(prod), 0);
	printf("stress_slot_reclaim: producer pushed %llu, polled the dead "
	       "slot %llu times, saw %llu generations; slot 0 went from "
	       "generation %llu to %llu\n",
	       (unsigned long long)atomic_load(&sh->produced),
	       (unsigned long long)atomic_load(&sh->dropped_dead),
	       (unsigned long long)atomic_load(&sh->switches),
	       (unsigned long long)gen1, (unsigned long long)gen2);
	CHECK(atomic_load(&sh->switches) >= 2);
	shm_region_detach(l);
	return 0;
}
