/*
 * Stress: 10 million records through one SPSC ring of a real region, from
 * a gatewayd-like producer process to a raftd-like consumer process. Most
 * records are small; a few are as large as the largest message
 * (--max-request-bytes 1.5 MiB plus overhead). Every record carries its
 * sequence number and a checksum; the consumer checks both. Both sides use
 * the real waits: the producer ring_push_wait when the ring is full, the
 * consumer spins briefly and then sleeps on its doorbell. Every 64
 * records the producer trims the ring (ring_trim_idle) on a clock of its
 * own that makes every look a quiet one and a second after the last:
 * whenever the consumer has just released everything, the data pages go
 * back while the consumer runs on, and at every other look the free
 * part's pages past the next 64 KiB do (ring_trim_busy), however far
 * behind the consumer is; no record may come out wrong for it.
 *
 * CETCD_STRESS_RECORDS overrides the record count.
 */
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

#define MAX_REQUEST (1536u * 1024)
#define BIG_EVERY 200000u /* about one record in this many is max size */

static char dir[256], path[512];
static uint64_t records = 10000000;

static int producer(void)
{
	struct shm_region *r;
	struct shm_slot_ref s;
	struct ring *ring;
	uint8_t *buf;
	uint32_t max, len;
	uint64_t seq, trims = 0;
	int64_t fake_ns = 0;
	int rc;

	if (shm_region_attach(path, &r) || shm_slot_claim(r, &s))
		return 10;
	ring = shm_slot_ring(r, s.index, SHM_SLOT_TO_RAFTD);
	max = ring_max_record(ring);
	buf = malloc(max);
	if (!buf)
		return 11;
	for (seq = 0; seq < records; seq++) {
		if (seq % 64 == 0) {
			(void)ring_trim_idle(ring, fake_ns);  /* sees head move */
			fake_ns += 2 * SHM_TRIM_QUIET_NS;
			trims += ring_trim_idle(ring, fake_ns) == INT64_MAX;
		}
		len = test_len(seq, 256, max, BIG_EVERY);
		test_fill(buf, len, seq);
		rc = ring_push_wait(ring, (uint32_t)seq, buf, len, 20000);
		if (rc) {
			fprintf(stderr, "producer: push of record %llu: %d\n",
				(unsigned long long)seq, rc);
			return 12;
		}
	}
	free(buf);
	shm_region_detach(r);
	printf("producer: %llu trims of the ring\n", (unsigned long long)trims);
	return trims ? 0 : 13;
}

static int consumer(void)
{
	struct shm_doorbell *db, *peer;
	uint64_t seq = 0, big = 0, backstops = 0, batch = 0;
	struct shm_region *r;
	struct ring_rec rec;
	struct ring *ring;
	int rc;

	if (shm_region_attach(path, &r) || shm_role_claim(r, SHM_ROLE_RAFTD))
		return 20;
	ring = shm_slot_ring(r, 0, SHM_SLOT_TO_RAFTD);
	db = shm_role_doorbell(r, SHM_ROLE_RAFTD);
	peer = shm_slot_doorbell(r, 0);
	while (seq < records) {
		rc = ring_peek(ring, &rec);
		if (rc == -EAGAIN) {
			ring_release_consumed(ring);
			batch = 0;
			rc = shm_doorbell_wait(db, peer, ring_wait_ready, ring, 50,
					       SHM_DOORBELL_BACKSTOP_MS);
			if (rc == -ETIMEDOUT && ring_has_data(ring))
				backstops++;
			continue;
		}
		if (rc) {
			fprintf(stderr, "consumer: peek: %d\n", rc);
			return 21;
		}
		if (rec.type != (uint32_t)seq ||
		    test_verify(rec.data, rec.len, seq) != 0 ||
		    rec.len != test_len(seq, 256, ring_max_record(ring),
					BIG_EVERY)) {
			fprintf(stderr, "consumer: record %llu is wrong (type "
				"%u, len %u, verify %d)\n",
				(unsigned long long)seq, rec.type, rec.len,
				test_verify(rec.data, rec.len, seq));
			return 22;
		}
		big += rec.len > MAX_REQUEST;
		seq++;
		/* Give bytes back in batches, as a busy raftd would. */
		ring_consume(ring, &rec);
		if (++batch == 16) {
			ring_release_consumed(ring);
			batch = 0;
		}
	}
	ring_release_consumed(ring);
	printf("consumer: %llu records checked, %llu of them larger than "
	       "max-request-bytes, %llu waits that timed out with data "
	       "waiting\n", (unsigned long long)seq, (unsigned long long)big,
	       (unsigned long long)backstops);
	if (big == 0 || backstops != 0)
		return 23;
	shm_region_detach(r);
	return 0;
}

int main(void)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = MAX_REQUEST };
	struct shm_region *l;
	const char *env = getenv("CETCD_STRESS_RECORDS");
	pid_t prod, cons;
	uint64_t t0, ns;
	int prc, crc;

	if (env)
		records = strtoull(env, NULL, 10);
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	t0 = clock_now_ns();
	cons = test_fork();
	CHECK(cons >= 0);
	if (cons == 0)
		test_child_exit(consumer());
	prod = test_fork();
	CHECK(prod >= 0);
	if (prod == 0)
		test_child_exit(producer());
	prc = test_wait(prod);
	crc = test_wait(cons);
	ns = clock_now_ns() - t0;
	printf("stress_ring: %llu records in %.2f s (%.2f M records/s), "
	       "producer exit %d, consumer exit %d\n",
	       (unsigned long long)records, ns / 1e9, records / (ns / 1e3),
	       prc, crc);
	CHECK_EQ(prc, 0);
	CHECK_EQ(crc, 0);
	shm_region_detach(l);
	return 0;
}
