/* /metrics: the member's counters in Prometheus's text format 0.0.4,
 * with etcd 3.4's metric names, types, help texts, labels and buckets,
 * plus cetcd's own under cetcd_.
 *
 * A scrape reads the region's metrics blocks (shm/metrics.h), the status
 * records and the rings, and each process's /proc entries, and sums them
 * (metrics_collect); nothing of it waits for or slows another process.
 * metrics_text then writes the sums out; the two are apart so that tests
 * can render sums they made.
 */
#ifndef CETCD_GATEWAYD_METRICS_H
#define CETCD_GATEWAYD_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/transport/h2.h"
#include "shm/metrics.h"

struct shm_region;

/* The gRPC methods counted: etcd 3.4's services as go-grpc-prometheus
 * registers them at start (each shown from the start), then v3lock's and
 * v3election's, which etcd registers later (each shown once called). */
struct metrics_method {
	const char *service;
	const char *method;
	const char *type; /* unary, server_stream, bidi_stream */
	bool lazy;        /* shown only once started */
};
extern const struct metrics_method metrics_methods[];
extern const unsigned metrics_method_count;

/* A path's index in metrics_methods ("/etcdserverpb.KV/Range"), or -1. */
int metrics_grpc_index(const char *path);

/* A histogram summed over blocks. */
struct metrics_hist_sum {
	uint64_t bucket[SHM_HIST_BUCKETS];
	uint64_t sum_ns;
	uint64_t count;
};

/* One process of the member, as /proc tells. */
struct metrics_proc {
	const char *name; /* raftd, stored, launcher, monitor, gatewayd */
	int32_t slot;     /* gatewayd's slot; -1 for the others */
	int32_t pid;
	uint64_t rss_bytes;
	double cpu_seconds;
	uint64_t open_fds;
	uint64_t loop_turns;
	uint64_t wakes;   /* its doorbell's futex wakes; 0 without one */
};

/* One ring, as its cursors tell. */
struct metrics_ring {
	const char *name; /* to_raftd, from_raftd, from_stored, to_stored,
			   * committed, stored_proposals */
	int32_t slot;     /* -1 for the daemon rings */
	uint64_t depth_bytes;
	uint64_t capacity_bytes;
};

struct metrics_peer_sum {
	uint64_t id;
	uint64_t sent_bytes;
	uint64_t received_bytes;
	struct metrics_hist_sum rtt;
};

#define METRICS_MAX_PROCS (SHM_METRICS_GATEWAY + 1024)
#define METRICS_MAX_RINGS (4 * 1024 + 2)

struct metrics_sum {
	uint64_t member_id;
	bool has_leader, is_leader;
	uint64_t committed_index, applied_index;
	int64_t quota_backend_bytes;
	uint64_t m[SHM_M_COUNT];
	struct metrics_hist_sum hist[SHM_H_KIND_COUNT - 1];
	struct metrics_peer_sum peer[SHM_METRICS_PEERS];
	unsigned npeers;
	struct shm_metrics_grpc_sum {
		uint64_t started, msg_received, msg_sent;
		uint64_t handled[SHM_GRPC_CODES];
	} grpc[SHM_GRPC_METHODS];
	struct metrics_hist_sum grpc_handling[SHM_GRPC_METHODS];
	struct metrics_proc proc[METRICS_MAX_PROCS];
	unsigned nprocs;
	struct metrics_ring ring[METRICS_MAX_RINGS];
	unsigned nrings;
};

/* Sums what region r holds (and /proc of its processes) into *out. */
void metrics_collect(struct shm_region *r, int64_t quota_backend_bytes, struct metrics_sum *out);

/* The text being written (free with h2_buf_free(&out, h2_mem_libc()));
 * failed once out of memory. */
struct metrics_buf {
	struct h2_buf out;
	bool failed;
};

/* Writes sum out in the text format; with extensive, also
 * grpc_server_handling_seconds (etcd's --metrics extensive). 0 or
 * -ENOMEM. */
int metrics_text(const struct metrics_sum *sum, bool extensive, struct metrics_buf *out);

/* v as Prometheus's Go client writes a sample value (strconv's 'g' with
 * the shortest digits that read back as v). buf holds 32 bytes. */
void metrics_format_value(char *buf, size_t len, double v);

#endif
