/* The region's metrics area (see metrics.h). */
#include <stddef.h>
#include <unistd.h>

#include "shm/layout.h"
#include "shm/metrics.h"

#define MS(x) ((uint64_t)(x) * 1000000u)
#define US(x) ((uint64_t)(x) * 1000u)

/* etcd's buckets: prometheus.ExponentialBuckets(start, 2, n) of
 * wal/metrics.go, mvcc/backend/metrics.go and rafthttp/metrics.go, and
 * go-grpc-prometheus's default (prometheus.DefBuckets). */
static const uint64_t bounds_1ms_x14[] = {
	MS(1), MS(2), MS(4), MS(8), MS(16), MS(32), MS(64), MS(128), MS(256), MS(512),
	MS(1024), MS(2048), MS(4096), MS(8192),
};
static const uint64_t bounds_100ms_x13[] = {
	MS(100), MS(200), MS(400), MS(800), MS(1600), MS(3200), MS(6400), MS(12800),
	MS(25600), MS(51200), MS(102400), MS(204800), MS(409600),
};
static const uint64_t bounds_10ms_x17[] = {
	MS(10), MS(20), MS(40), MS(80), MS(160), MS(320), MS(640), MS(1280), MS(2560),
	MS(5120), MS(10240), MS(20480), MS(40960), MS(81920), MS(163840), MS(327680),
	MS(655360),
};
static const uint64_t bounds_100us_x16[] = {
	US(100), US(200), US(400), US(800), US(1600), US(3200), US(6400), US(12800),
	US(25600), US(51200), US(102400), US(204800), US(409600), US(819200),
	US(1638400), US(3276800),
};
static const uint64_t bounds_default[] = {
	MS(5), MS(10), MS(25), MS(50), MS(100), MS(250), MS(500), MS(1000), MS(2500),
	MS(5000), MS(10000),
};

#define BOUNDS(a) { a, sizeof(a) / sizeof(a[0]) }
static const struct {
	const uint64_t *v;
	unsigned n;
} hist_bounds[SHM_H_KIND_COUNT] = {
	[SHM_H_WAL_FSYNC] = BOUNDS(bounds_1ms_x14),
	[SHM_H_BACKEND_COMMIT] = BOUNDS(bounds_1ms_x14),
	[SHM_H_BACKEND_DEFRAG] = BOUNDS(bounds_100ms_x13),
	[SHM_H_BACKEND_SNAPSHOT] = BOUNDS(bounds_10ms_x17),
	[SHM_H_PEER_RTT] = BOUNDS(bounds_100us_x16),
	[SHM_H_GRPC_HANDLING] = BOUNDS(bounds_default),
};
_Static_assert(sizeof(bounds_10ms_x17) / sizeof(uint64_t) + 1 <= SHM_HIST_BUCKETS,
	       "the largest histogram fits");

const uint64_t *shm_metrics_hist_bounds(enum shm_hist_kind kind, unsigned *n)
{
	*n = hist_bounds[kind].n;
	return hist_bounds[kind].v;
}

void shm_metrics_observe(struct shm_metrics_hist *h, enum shm_hist_kind kind, uint64_t ns)
{
	const uint64_t *b = hist_bounds[kind].v;
	unsigned n = hist_bounds[kind].n, i = 0;

	while (i < n && ns > b[i])
		i++;
	shm_metric_bump(&h->bucket[i], 1);
	shm_metric_bump(&h->sum_ns, ns);
	shm_metric_bump(&h->count, 1);
}

bool shm_metric_is_gauge(enum shm_metric i)
{
	switch (i) {
	case SHM_M_SNAPSHOT_APPLYING:
	case SHM_M_RAFT_LOG_BYTES:
	case SHM_M_RAFT_LOG_RESIDENT:
	case SHM_M_DB_SIZE:
	case SHM_M_DB_IN_USE:
	case SHM_M_KEYS:
	case SHM_M_DEFRAGS_INFLIGHT:
	case SHM_M_PROPOSALS_PENDING:
	case SHM_M_WATCHERS:
	case SHM_M_WATCH_STREAMS:
	case SHM_M_SLOW_WATCHERS:
		return true;
	default:
		return false;
	}
}

uint32_t shm_metrics_blocks(const struct shm_region *r)
{
	return SHM_METRICS_GATEWAY + r->hdr->slot_count;
}

struct shm_metrics *shm_metrics_block(struct shm_region *r, uint32_t owner)
{
	if (!r || owner >= shm_metrics_blocks(r))
		return NULL;
	return (struct shm_metrics *)(r->base + r->hdr->metrics_off) + owner;
}

void shm_metrics_own(struct shm_metrics *m)
{
	if (!m)
		return;
	for (int i = 0; i < SHM_M_COUNT; i++)
		if (shm_metric_is_gauge((enum shm_metric)i))
			atomic_store_explicit(&m->m[i], 0, memory_order_relaxed);
	atomic_store_explicit(&m->pid, (int32_t)getpid(), memory_order_relaxed);
}

struct shm_metrics_peer *shm_metrics_peer(struct shm_metrics *m, uint64_t id)
{
	struct shm_metrics_peer *free_one = NULL;

	if (!m || id == 0)
		return NULL;
	for (int i = 0; i < SHM_METRICS_PEERS; i++) {
		uint64_t v = atomic_load_explicit(&m->peer[i].id, memory_order_relaxed);
		if (v == id)
			return &m->peer[i];
		if (v == 0 && !free_one)
			free_one = &m->peer[i];
	}
	if (free_one)
		/* release: a reader that sees the id sees zeroed counters */
		atomic_store_explicit(&free_one->id, id, memory_order_release);
	return free_one;
}
