/*
 * The member's counters: one block per process in the region's metrics
 * area, each written only by the process that owns it and summed by
 * whoever serves /metrics (gatewayd/services/metrics.c).
 *
 * Owners: raftd and stored (by their role), the launcher, the corruption
 * monitor, and each gatewayd (by its slot: a restarted gatewayd that
 * claims the slot goes on counting where its predecessor stopped, so a
 * counter never goes back; gauges it sets afresh).
 *
 * Ordering: a block has one writer, so a counter is bumped with a relaxed
 * load and a relaxed store (no locked instruction, no fence) and read
 * with relaxed loads. A reader may see one counter's new value beside
 * another's old one, which Prometheus's model allows: each series is read
 * at some moment of the scrape. Nothing here waits, locks or allocates.
 *
 * Histograms are fixed arrays of per-bucket counts (not cumulative), the
 * sum in nanoseconds and the count; shm_metrics_hist_bounds gives each
 * kind's upper bounds, etcd's buckets.
 */
#ifndef CETCD_SHM_METRICS_H
#define CETCD_SHM_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct shm_region;

/* Counters and gauges, by index into shm_metrics.c. Gauges are set by
 * their owner, counters only grow. */
enum shm_metric {
	/* raftd */
	SHM_M_LEADER_CHANGES,       /* a leader known, other than the last one */
	SHM_M_HEARTBEAT_FAILURES,   /* heartbeats the leader could not send */
	SHM_M_WAL_WRITE_BYTES,      /* bytes written to the WAL */
	SHM_M_SNAPSHOT_APPLYING,    /* gauge: a received snapshot being installed */
	SHM_M_READ_INDEX_FAILED,    /* read indexes answered with an error */
	SHM_M_COMMITTED_FULL,       /* committed entries held: ring to stored full */
	SHM_M_RAFT_LOG_BYTES,       /* gauge: bytes of the Raft log raftd keeps
				     * (raftlog.bytes, raftd/retain.h) */
	SHM_M_RAFT_LOG_RESIDENT,    /* gauge: of which entry data in memory
				     * (raftlog.resident) */
	/* stored */
	SHM_M_SLOW_APPLY,           /* batches whose entries took over 100 ms */
	SHM_M_MVCC_PUT,             /* puts applied (etcd_mvcc_put_total) */
	SHM_M_MVCC_DELETE,          /* delete ranges applied */
	SHM_M_MVCC_TXN,             /* write txns applied */
	SHM_M_DB_SIZE,              /* gauge: db file bytes */
	SHM_M_DB_IN_USE,            /* gauge: db bytes not on the freelist */
	SHM_M_KEYS,                 /* gauge: live keys */
	SHM_M_RESULTS_FULL,         /* results dropped: a gateway's ring full */
	SHM_M_DEFRAGS_INFLIGHT,     /* gauge: 1 while a defragmentation runs */
	/* gatewayd */
	SHM_M_MVCC_RANGE,           /* ranges served (and read-only txns' ranges) */
	SHM_M_MVCC_TXN_READ,        /* read-only txns served by the gateway */
	SHM_M_PROPOSALS_PENDING,    /* gauge: proposals waiting for an answer */
	SHM_M_PROPOSALS_FAILED,     /* proposals answered with an error by the
				     * gateway (timeout, leader lost) */
	SHM_M_GRPC_SENT_BYTES,      /* gRPC message bytes sent */
	SHM_M_GRPC_RECEIVED_BYTES,  /* gRPC message bytes received */
	SHM_M_WATCHERS,             /* gauge: watchers */
	SHM_M_WATCH_STREAMS,        /* gauge: watch streams */
	SHM_M_SLOW_WATCHERS,        /* gauge: watchers catching up from the db */
	SHM_M_HEALTH_SUCCESS,       /* /health answered true */
	SHM_M_HEALTH_FAILURES,      /* /health answered false */
	SHM_M_BACKLOGGED,           /* proposals held: ring to raftd full */
	/* every process */
	SHM_M_LOOP_TURNS,           /* turns of the process's event loop */
	SHM_M_COUNT
};

/* Histogram kinds; each has its own bounds. */
enum shm_hist_kind {
	SHM_H_WAL_FSYNC,        /* raftd: a WAL batch's write and fdatasync */
	SHM_H_BACKEND_COMMIT,   /* stored: a batch's commit to the db */
	SHM_H_BACKEND_DEFRAG,   /* stored: a defragmentation */
	SHM_H_BACKEND_SNAPSHOT, /* raftd, gatewayd: a db copy streamed out */
	SHM_H_PEER_RTT,         /* raftd: round trip to a peer */
	SHM_H_GRPC_HANDLING,    /* gatewayd: a call's handling (extensive) */
	SHM_H_KIND_COUNT
};

/* Largest bucket count of any kind, +Inf included. */
#define SHM_HIST_BUCKETS 18

struct shm_metrics_hist {
	_Atomic uint64_t bucket[SHM_HIST_BUCKETS]; /* counts, not cumulative */
	_Atomic uint64_t sum_ns;
	_Atomic uint64_t count;
};

/* gRPC methods a gateway counts (the table is gatewayd/services/metrics.c's),
 * and grpc's status codes (0 OK .. 16 Unauthenticated). */
#define SHM_GRPC_METHODS 56
#define SHM_GRPC_CODES 17

struct shm_metrics_grpc {
	_Atomic uint64_t started;
	_Atomic uint64_t msg_received;
	_Atomic uint64_t msg_sent;
	_Atomic uint64_t handled[SHM_GRPC_CODES];
};

/* Peers raftd counts bytes and round trips of. */
#define SHM_METRICS_PEERS 16

struct shm_metrics_peer {
	_Atomic uint64_t id; /* 0: free; set once, before the others */
	_Atomic uint64_t sent_bytes;
	_Atomic uint64_t received_bytes;
	struct shm_metrics_hist rtt;
};

struct shm_metrics {
	_Alignas(128) _Atomic int32_t pid; /* the owner's, for /proc; 0: none yet */
	uint32_t pad;
	_Atomic uint64_t m[SHM_M_COUNT];
	struct shm_metrics_hist hist[SHM_H_KIND_COUNT - 1]; /* all but grpc */
	struct shm_metrics_peer peer[SHM_METRICS_PEERS];
	struct shm_metrics_grpc grpc[SHM_GRPC_METHODS];
	struct shm_metrics_hist grpc_handling[SHM_GRPC_METHODS];
};

/* Owners of the blocks, in the area's order; gatewayd i's is
 * SHM_METRICS_GATEWAY + i. */
enum shm_metrics_owner {
	SHM_METRICS_RAFTD,
	SHM_METRICS_STORED,
	SHM_METRICS_LAUNCHER,
	SHM_METRICS_MONITOR,
	SHM_METRICS_GATEWAY,
};

/* The block of owner (NULL if out of range). Valid while the region is
 * attached. */
struct shm_metrics *shm_metrics_block(struct shm_region *r, uint32_t owner);
/* How many blocks there are: SHM_METRICS_GATEWAY + the slot count. */
uint32_t shm_metrics_blocks(const struct shm_region *r);

/* The owner takes its block: records its pid and zeroes the gauges a
 * predecessor left (counters carry on). */
void shm_metrics_own(struct shm_metrics *m);

/* Writer side: the block's owner only. */
static inline void shm_metric_add(struct shm_metrics *m, enum shm_metric i, uint64_t n)
{
	if (m)
		atomic_store_explicit(&m->m[i], atomic_load_explicit(&m->m[i], memory_order_relaxed) + n,
				      memory_order_relaxed);
}

static inline void shm_metric_set(struct shm_metrics *m, enum shm_metric i, uint64_t v)
{
	if (m)
		atomic_store_explicit(&m->m[i], v, memory_order_relaxed);
}

static inline void shm_metric_bump(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/* Records one observation of ns nanoseconds in h, a histogram of kind. */
void shm_metrics_observe(struct shm_metrics_hist *h, enum shm_hist_kind kind, uint64_t ns);

/* Shorthand for a block's own histograms (kind != SHM_H_GRPC_HANDLING). */
static inline void shm_metric_observe(struct shm_metrics *m, enum shm_hist_kind kind, uint64_t ns)
{
	if (m)
		shm_metrics_observe(&m->hist[kind], kind, ns);
}

/* raftd's counters of peer id (created on first use; NULL when every
 * entry is taken). Owner only. */
struct shm_metrics_peer *shm_metrics_peer(struct shm_metrics *m, uint64_t id);

/* The upper bounds of kind's finite buckets, in nanoseconds, and how many
 * there are (the +Inf bucket follows them). */
const uint64_t *shm_metrics_hist_bounds(enum shm_hist_kind kind, unsigned *n);

/* Which of the metrics are gauges: what shm_metrics_own zeroes, and what a
 * sum leaves out for an owner no longer alive. */
bool shm_metric_is_gauge(enum shm_metric i);

/* Reader side: adds the block's values to the sums (relaxed loads). */
static inline uint64_t shm_metric_read(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

#endif
