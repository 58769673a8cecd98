/*
 * Unit tests for shm/metrics.c: each owner's block lies in the region's
 * metrics area apart from the others; a new owner zeroes the gauges its
 * predecessor left and keeps the counters; observations land in etcd's
 * buckets (bounds included in their bucket, past the last in +Inf); a
 * peer's entry is made once and found again, and none past the last.
 */
#include "shm_testlib.h"

#include "shm/layout.h"
#include "shm/metrics.h"
#include "shm/region.h"
#include "shm/slot.h"

static void test_blocks(const char *path)
{
	struct shm_region_params p = { .slot_count = 4, .max_request_bytes = 4096 };
	struct shm_region *l;

	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	CHECK_EQ(shm_metrics_blocks(l), SHM_METRICS_GATEWAY + 4);
	CHECK(shm_metrics_block(l, SHM_METRICS_GATEWAY + 4) == NULL);
	CHECK(shm_metrics_block(NULL, 0) == NULL);
	for (uint32_t i = 0; i < shm_metrics_blocks(l); i++) {
		uint8_t *b = (uint8_t *)shm_metrics_block(l, i);
		CHECK(b >= l->base + l->hdr->metrics_off);
		CHECK(b + sizeof(struct shm_metrics) <= l->base + l->hdr->metrics_off +
							      l->hdr->metrics_bytes);
		CHECK_EQ(((uintptr_t)b) % 128, 0);
		if (i > 0)
			CHECK(b == (uint8_t *)shm_metrics_block(l, i - 1) + sizeof(struct shm_metrics));
		/* a new region's counters are zero */
		CHECK_EQ(shm_metric_read(&shm_metrics_block(l, i)->m[SHM_M_MVCC_PUT]), 0);
	}
	CHECK(l->hdr->metrics_off + l->hdr->metrics_bytes <= l->hdr->rings_off);

	/* claiming a slot makes its block its own: pid, gauges zeroed */
	struct shm_metrics *g = shm_metrics_block(l, SHM_METRICS_GATEWAY + 0);
	shm_metric_add(g, SHM_M_MVCC_RANGE, 5);
	shm_metric_set(g, SHM_M_WATCHERS, 7);
	struct shm_slot_ref ref;
	CHECK_EQ(shm_slot_claim(l, &ref), 0);
	CHECK_EQ(ref.index, 0);
	CHECK_EQ(atomic_load(&g->pid), getpid());
	CHECK_EQ(shm_metric_read(&g->m[SHM_M_WATCHERS]), 0);
	CHECK_EQ(shm_metric_read(&g->m[SHM_M_MVCC_RANGE]), 5);
	shm_metric_add(g, SHM_M_MVCC_RANGE, 2);
	CHECK_EQ(shm_metric_read(&g->m[SHM_M_MVCC_RANGE]), 7);
	/* so does taking a role */
	struct shm_metrics *rd = shm_metrics_block(l, SHM_METRICS_RAFTD);
	shm_metric_set(rd, SHM_M_SNAPSHOT_APPLYING, 1);
	shm_metric_set(rd, SHM_M_RAFT_LOG_BYTES, 1 << 20);
	shm_metric_set(rd, SHM_M_RAFT_LOG_RESIDENT, 1 << 19);
	shm_metric_add(rd, SHM_M_LEADER_CHANGES, 3);
	CHECK_EQ(shm_role_claim(l, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_metric_read(&rd->m[SHM_M_SNAPSHOT_APPLYING]), 0);
	CHECK_EQ(shm_metric_read(&rd->m[SHM_M_RAFT_LOG_BYTES]), 0);
	CHECK_EQ(shm_metric_read(&rd->m[SHM_M_RAFT_LOG_RESIDENT]), 0);
	CHECK_EQ(shm_metric_read(&rd->m[SHM_M_LEADER_CHANGES]), 3);
	/* a NULL block is a no-op */
	shm_metric_add(NULL, SHM_M_MVCC_PUT, 1);
	shm_metric_observe(NULL, SHM_H_WAL_FSYNC, 1);
	shm_region_detach(l);
}

static void test_histograms(void)
{
	static struct shm_metrics m;
	unsigned n;
	const uint64_t *b = shm_metrics_hist_bounds(SHM_H_WAL_FSYNC, &n);

	/* etcd's ExponentialBuckets(0.001, 2, 14) */
	CHECK_EQ(n, 14);
	CHECK_EQ(b[0], 1000000);
	CHECK_EQ(b[13], 8192000000ull);
	shm_metric_observe(&m, SHM_H_WAL_FSYNC, 1);             /* <= 1 ms */
	shm_metric_observe(&m, SHM_H_WAL_FSYNC, 1000000);       /* the bound itself */
	shm_metric_observe(&m, SHM_H_WAL_FSYNC, 1000001);       /* <= 2 ms */
	shm_metric_observe(&m, SHM_H_WAL_FSYNC, 9000000000ull); /* +Inf */
	struct shm_metrics_hist *h = &m.hist[SHM_H_WAL_FSYNC];
	CHECK_EQ(shm_metric_read(&h->bucket[0]), 2);
	CHECK_EQ(shm_metric_read(&h->bucket[1]), 1);
	CHECK_EQ(shm_metric_read(&h->bucket[14]), 1);
	CHECK_EQ(shm_metric_read(&h->count), 4);
	CHECK_EQ(shm_metric_read(&h->sum_ns), 1 + 1000000 + 1000001 + 9000000000ull);
	/* each kind's bounds fit and grow */
	for (int k = 0; k < SHM_H_KIND_COUNT; k++) {
		b = shm_metrics_hist_bounds((enum shm_hist_kind)k, &n);
		CHECK(n + 1 <= SHM_HIST_BUCKETS);
		for (unsigned i = 1; i < n; i++)
			CHECK(b[i] > b[i - 1]);
	}
	b = shm_metrics_hist_bounds(SHM_H_BACKEND_SNAPSHOT, &n);
	CHECK_EQ(n, 17);
	CHECK_EQ(b[16], 655360000000ull);
	b = shm_metrics_hist_bounds(SHM_H_GRPC_HANDLING, &n);
	CHECK_EQ(n, 11);
	CHECK_EQ(b[0], 5000000);
	CHECK_EQ(b[10], 10000000000ull);
}

static void test_peers(void)
{
	static struct shm_metrics m;

	CHECK(shm_metrics_peer(&m, 0) == NULL);
	struct shm_metrics_peer *a = shm_metrics_peer(&m, 0xa1);
	CHECK(a != NULL);
	CHECK_EQ(atomic_load(&a->id), 0xa1);
	CHECK(shm_metrics_peer(&m, 0xa1) == a);
	struct shm_metrics_peer *b = shm_metrics_peer(&m, 0xb2);
	CHECK(b != NULL && b != a);
	for (uint64_t id = 3; id < 3 + SHM_METRICS_PEERS - 2; id++)
		CHECK(shm_metrics_peer(&m, id) != NULL);
	CHECK(shm_metrics_peer(&m, 999) == NULL); /* every entry taken */
	CHECK(shm_metrics_peer(&m, 0xb2) == b);
}

int main(void)
{
	char dir[256], path[300];

	test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/region", dir);
	test_blocks(path);
	test_histograms();
	test_peers();
	printf("ok\n");
	return 0;
}
