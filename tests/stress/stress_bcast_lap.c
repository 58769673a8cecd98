/*
 * Stress: stored-like producer process publishing events as fast as it can
 * into the region's broadcast ring, never waiting; a gateway-like consumer
 * that keeps up (sleeping on its doorbell when idle, woken through
 * shm_events_notify) and one that is slow. The slow one must be lapped and
 * must say so (-ESTALE) instead of returning garbage, including when the
 * producer overwrites a record while it is being copied. Every record a
 * consumer accepts is checked (sequence number and checksum).
 * A second round runs a ring of a member with 1 MiB requests, records of
 * up to 8 KiB, and the producer trimming the ring as under steady
 * traffic (bcast_trim_idle on a clock that moves a second every 64
 * records): pages given back while a consumer copies from them must also
 * end in a lap, never in a record of zeroes.
 */
#include <stdatomic.h>

#include "shm_testlib.h"

#include "shm/bcast.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

#define RUN_MS 3000

struct shared {
	atomic_int stop;
	_Atomic uint64_t published;
};

static char dir[256], path[512];
static struct shared *sh;
static bool trim; /* the second round */

static int producer(void)
{
	struct shm_region *r;
	struct bcast *b;
	uint8_t *buf;
	uint32_t len, max;
	uint64_t seq;
	int64_t now = 0;

	if (shm_region_attach(path, &r) || shm_role_claim(r, SHM_ROLE_STORED))
		return 10;
	b = shm_events(r);
	max = bcast_max_record(b);
	buf = malloc(max);
	if (!buf)
		return 11;
	seq = bcast_next_seq(b);
	while (!atomic_load(&sh->stop)) {
		len = test_len(seq, 8192, max, trim ? 0 : 8);
		test_fill(buf, len, seq);
		if (bcast_publish(b, 0, buf, len))
			return 12;
		seq++;
		if (trim && (seq & 63) == 0) {
			now += SHM_TRIM_QUIET_NS;
			(void)bcast_trim_idle(b, now);
		}
		if ((seq & 15) == 0) {
			shm_events_notify(r);
			/* Leave the fast consumer a chance on 2 cores. */
			if ((seq & 255) == 0)
				sched_yield();
		}
		atomic_store_explicit(&sh->published, seq,
				      memory_order_relaxed);
	}
	shm_events_notify(r);
	free(buf);
	return 0;
}

/* slow: pause after every record, so the producer laps this consumer. */
static int consumer(bool slow)
{
	struct shm_region *r;
	struct shm_slot_ref s;
	struct bcast_cursor c = { 0 };
	struct bcast_wait ev;
	struct bcast_rec rec;
	struct bcast *b;
	uint64_t good = 0, resyncs = 0, last = 0;
	uint8_t *buf;
	int rc;

	if (shm_region_attach(path, &r) || shm_slot_claim(r, &s))
		return 20;
	b = shm_events(r);
	buf = malloc(bcast_max_record(b));
	if (!buf)
		return 21;
	shm_doorbell_want_events(shm_slot_doorbell(r, s.index), true);
	bcast_cursor_init(b, &c);
	ev.b = b;
	ev.c = &c;
	while (!atomic_load(&sh->stop)) {
		rc = bcast_read(b, &c, &rec, buf, bcast_max_record(b));
		if (rc == -EAGAIN) {
			shm_doorbell_sleep(shm_slot_doorbell(r, s.index),
					   bcast_wait_ready, &ev, 100);
			continue;
		}
		if (rc == -ESTALE) {
			/* Lapped: a gateway would catch up from the db. */
			bcast_cursor_init(b, &c);
			resyncs++;
			last = 0;
			continue;
		}
		if (rc) {
			fprintf(stderr, "consumer: read: %d\n", rc);
			return 22;
		}
		if (test_verify(buf, rec.len, rec.seq) != 0 ||
		    (last && rec.seq != last + 1)) {
			fprintf(stderr, "consumer: record %llu is wrong\n",
				(unsigned long long)rec.seq);
			return 23;
		}
		last = rec.seq;
		good++;
		if (slow)
			usleep(200);
	}
	printf("%s consumer: %llu records checked, lapped %llu times (%llu "
	       "detected only after copying a record the producer was "
	       "overwriting)\n", slow ? "slow" : "fast",
	       (unsigned long long)good, (unsigned long long)c.laps,
	       (unsigned long long)c.torn_reads);
	if (good == 0 || (slow && c.laps == 0) || c.laps != resyncs)
		return 24;
	return 0;
}

static void run_round(size_t max_request_bytes)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = max_request_bytes };
	struct shm_region *l;
	pid_t prod, fast, slow;

	atomic_store(&sh->stop, 0);
	atomic_store(&sh->published, 0);
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	fast = test_fork();
	CHECK(fast >= 0);
	if (fast == 0)
		test_child_exit(consumer(false));
	slow = test_fork();
	CHECK(slow >= 0);
	if (slow == 0)
		test_child_exit(consumer(true));
	prod = test_fork();
	CHECK(prod >= 0);
	if (prod == 0)
		test_child_exit(producer());
	usleep(RUN_MS * 1000);
	atomic_store(&sh->stop, 1);
	CHECK_EQ(test_wait(prod), 0);
	CHECK_EQ(test_wait(fast), 0);
	CHECK_EQ(test_wait(slow), 0);
	printf("stress_bcast_lap: %llu events published into a %llu-byte "
	       "ring%s\n", (unsigned long long)atomic_load(&sh->published),
	       (unsigned long long)bcast_capacity(shm_events(l)),
	       trim ? ", trimmed as under steady traffic" : "");
	shm_region_detach(l);
}

int main(void)
{
	sh = test_shared(sizeof(*sh));
	run_round(16 * 1024);
	trim = true;
	run_round(1024 * 1024);
	return 0;
}
