/*
 * Unit tests for gatewayd/services/metrics.c: sample values written as
 * Prometheus's Go client writes them (strconv's shortest 'g'), the text
 * of counters, gauges and histograms (cumulative buckets, etcd's bounds,
 * +Inf, _sum and _count), gRPC series per method and code (v3lock's and
 * v3election's only once called, handling times only with --metrics
 * extensive), and the sums a scrape makes of a region's blocks: counters
 * of every block, gauges of live owners only, the status records' figures.
 */
#include "shm_testlib.h"

#include "gatewayd/services/metrics.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "shm/status.h"

static void expect_value(double v, const char *want)
{
	char got[40];

	metrics_format_value(got, sizeof(got), v);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "value %.17g: got %s, want %s\n", v, got, want);
		exit(1);
	}
}

/* Values as etcd 3.4 wrote them (from its /metrics). */
static void test_values(void)
{
	expect_value(0, "0");
	expect_value(1, "1");
	expect_value(5, "5");
	expect_value(20000, "20000");
	expect_value(0.054806591, "0.054806591");
	expect_value(0.015901599000000002, "0.015901599000000002");
	expect_value(2147483648.0, "2.147483648e+09");
	expect_value(25403392.0, "2.5403392e+07");
	expect_value(1.1944128512e10, "1.1944128512e+10");
	expect_value(1e6, "1e+06");
	expect_value(999999, "999999");
	expect_value(0.0001, "0.0001");
	expect_value(0.00001, "1e-05");
	expect_value(655.36, "655.36");
	expect_value(0.02, "0.02");
	expect_value(8.192, "8.192");
}

/* The text written so far, NUL-terminated (appended, not counted). */
static const char *text_of(struct metrics_buf *b)
{
	CHECK(!b->failed && b->out.len > 0 && b->out.data[b->out.len - 1] == '\n');
	CHECK_EQ(h2_buf_append(&b->out, h2_mem_libc(), "", 1), 0);
	b->out.len--;
	return (const char *)b->out.data;
}

static bool has_line(struct metrics_buf *b, const char *line)
{
	const char *t = text_of(b);
	size_t n = strlen(line);
	for (const char *p = t; (p = strstr(p, line)); p++)
		if ((p == t || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

#define EXPECT_LINE(b, l)                                                     \
	do {                                                                  \
		if (!has_line((b), (l))) {                                    \
			fprintf(stderr, "%s:%d: no line \"%s\"\n", __FILE__,  \
				__LINE__, (l));                               \
			exit(1);                                              \
		}                                                             \
	} while (0)

static void test_text(void)
{
	struct metrics_sum *s = calloc(1, sizeof(*s));
	struct metrics_buf b = { 0 };
	int range = metrics_grpc_index("/etcdserverpb.KV/Range");
	int lock = metrics_grpc_index("/v3lockpb.Lock/Lock");

	CHECK(s != NULL);
	CHECK(range >= 0 && lock >= 0);
	CHECK_EQ(metrics_grpc_index("/etcdserverpb.KV/Nope"), -1);
	CHECK_EQ(metrics_grpc_index("/etcdserverpb.KVX/Range"), -1);
	CHECK_EQ(metrics_grpc_index("etcdserverpb.KV/Range"), -1);
	CHECK_EQ(metrics_grpc_index("/etcdserverpb.KV"), -1);
	s->member_id = 0xbdae9bbc11dd390dull;
	s->has_leader = true;
	s->committed_index = 12;
	s->applied_index = 11;
	s->quota_backend_bytes = 2ll << 30;
	s->m[SHM_M_MVCC_PUT] = 3;
	s->m[SHM_M_MVCC_TXN] = 1;
	s->m[SHM_M_MVCC_TXN_READ] = 2;
	s->m[SHM_M_RAFT_LOG_BYTES] = 5000;
	s->m[SHM_M_RAFT_LOG_RESIDENT] = 3000;
	s->hist[SHM_H_WAL_FSYNC].bucket[0] = 2;
	s->hist[SHM_H_WAL_FSYNC].bucket[3] = 1;
	s->hist[SHM_H_WAL_FSYNC].bucket[14] = 1;
	s->hist[SHM_H_WAL_FSYNC].count = 4;
	s->hist[SHM_H_WAL_FSYNC].sum_ns = 12500000000ull;
	s->grpc[range].started = 4;
	s->grpc[range].handled[0] = 3;
	s->grpc[range].handled[14] = 1;
	s->npeers = 1;
	s->peer[0] = (struct metrics_peer_sum){ .id = 0xabc, .sent_bytes = 100, .received_bytes = 50 };
	s->peer[0].rtt.bucket[0] = 1;
	s->peer[0].rtt.count = 1;
	s->nprocs = 1;
	s->proc[0] = (struct metrics_proc){ .name = "raftd", .slot = -1, .pid = 1,
					    .rss_bytes = 4096, .cpu_seconds = 0.5, .open_fds = 9 };

	CHECK_EQ(metrics_text(s, false, &b), 0);
	const char *t = text_of(&b);
	EXPECT_LINE(&b, "# HELP etcd_mvcc_put_total Total number of puts seen by this member.");
	EXPECT_LINE(&b, "# TYPE etcd_mvcc_put_total counter");
	EXPECT_LINE(&b, "etcd_mvcc_put_total 3");
	EXPECT_LINE(&b, "etcd_mvcc_txn_total 3");
	EXPECT_LINE(&b, "# TYPE etcd_server_proposals_committed_total gauge");
	EXPECT_LINE(&b, "etcd_server_proposals_committed_total 12");
	EXPECT_LINE(&b, "etcd_server_proposals_applied_total 11");
	EXPECT_LINE(&b, "etcd_server_has_leader 1");
	EXPECT_LINE(&b, "etcd_server_is_leader 0");
	EXPECT_LINE(&b, "etcd_server_id{server_id=\"bdae9bbc11dd390d\"} 1");
	EXPECT_LINE(&b, "etcd_server_quota_backend_bytes 2.147483648e+09");
	EXPECT_LINE(&b, "# TYPE etcd_disk_wal_fsync_duration_seconds histogram");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"} 2");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.004\"} 2");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.008\"} 3");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"8.192\"} 3");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} 4");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_sum 12.5");
	EXPECT_LINE(&b, "etcd_disk_wal_fsync_duration_seconds_count 4");
	EXPECT_LINE(&b, "etcd_disk_backend_defrag_duration_seconds_bucket{le=\"409.6\"} 0");
	EXPECT_LINE(&b, "etcd_disk_backend_snapshot_duration_seconds_bucket{le=\"655.36\"} 0");
	EXPECT_LINE(&b, "grpc_server_started_total{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 4");
	EXPECT_LINE(&b, "grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 3");
	EXPECT_LINE(&b, "grpc_server_handled_total{grpc_code=\"Unavailable\",grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 1");
	EXPECT_LINE(&b, "grpc_server_handled_total{grpc_code=\"Unauthenticated\",grpc_method=\"Watch\",grpc_service=\"etcdserverpb.Watch\",grpc_type=\"bidi_stream\"} 0");
	EXPECT_LINE(&b, "grpc_server_started_total{grpc_method=\"Snapshot\",grpc_service=\"etcdserverpb.Maintenance\",grpc_type=\"server_stream\"} 0");
	EXPECT_LINE(&b, "etcd_network_peer_sent_bytes_total{To=\"abc\"} 100");
	EXPECT_LINE(&b, "etcd_network_peer_received_bytes_total{From=\"abc\"} 50");
	EXPECT_LINE(&b, "etcd_network_peer_round_trip_time_seconds_bucket{To=\"abc\",le=\"0.0001\"} 1");
	EXPECT_LINE(&b, "etcd_network_peer_round_trip_time_seconds_bucket{To=\"abc\",le=\"3.2768\"} 1");
	EXPECT_LINE(&b, "process_resident_memory_bytes 4096");
	EXPECT_LINE(&b, "process_cpu_seconds_total 0.5");
	EXPECT_LINE(&b, "process_open_fds 9");
	EXPECT_LINE(&b, "cetcd_process_open_fds{process=\"raftd\"} 9");
	EXPECT_LINE(&b, "# TYPE cetcd_raft_log_bytes gauge");
	EXPECT_LINE(&b, "cetcd_raft_log_bytes 5000");
	EXPECT_LINE(&b, "# TYPE cetcd_raft_log_resident_bytes gauge");
	EXPECT_LINE(&b, "cetcd_raft_log_resident_bytes 3000");
	/* basic: no handling times; v3lock not called yet: not shown */
	CHECK(strstr(t, "grpc_server_handling_seconds") == NULL);
	CHECK(strstr(t, "v3lockpb") == NULL);
	/* every family has its HELP and TYPE once */
	CHECK(strstr(strstr(t, "# TYPE etcd_mvcc_put_total") + 1, "# TYPE etcd_mvcc_put_total") == NULL);
	h2_buf_free(&b.out, h2_mem_libc());

	s->grpc[lock].started = 1;
	memset(&b, 0, sizeof(b));
	CHECK_EQ(metrics_text(s, true, &b), 0);
	EXPECT_LINE(&b, "# TYPE grpc_server_handling_seconds histogram");
	EXPECT_LINE(&b, "grpc_server_handling_seconds_bucket{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\",le=\"0.005\"} 0");
	EXPECT_LINE(&b, "grpc_server_handling_seconds_bucket{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\",le=\"+Inf\"} 0");
	EXPECT_LINE(&b, "grpc_server_handling_seconds_count{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 0");
	EXPECT_LINE(&b, "grpc_server_started_total{grpc_method=\"Lock\",grpc_service=\"v3lockpb.Lock\",grpc_type=\"unary\"} 1");
	h2_buf_free(&b.out, h2_mem_libc());

	/* no peers: no peer families, as Prometheus's client shows none */
	s->npeers = 0;
	memset(&b, 0, sizeof(b));
	CHECK_EQ(metrics_text(s, false, &b), 0);
	CHECK(strstr(text_of(&b), "etcd_network_peer") == NULL);
	h2_buf_free(&b.out, h2_mem_libc());
	free(s);
}

/* Sums over a region's blocks. */
static void test_collect(const char *path)
{
	struct shm_region_params p = { .slot_count = 4, .max_request_bytes = 4096 };
	struct shm_region *l, *a;
	struct shm_slot_ref s0, s1;
	struct metrics_sum *sum = calloc(1, sizeof(*sum));

	CHECK(sum != NULL);
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	shm_region_set_ids(l, 0x1234, 0x99);
	CHECK_EQ(shm_slot_claim(a, &s0), 0);
	CHECK_EQ(shm_slot_claim(a, &s1), 0);
	CHECK_EQ(shm_role_claim(a, SHM_ROLE_STORED), 0);
	struct shm_metrics *g0 = shm_metrics_block(a, SHM_METRICS_GATEWAY + s0.index);
	struct shm_metrics *g1 = shm_metrics_block(a, SHM_METRICS_GATEWAY + s1.index);
	struct shm_metrics *st = shm_metrics_block(a, SHM_METRICS_STORED);
	shm_metric_add(g0, SHM_M_MVCC_RANGE, 2);
	shm_metric_add(g1, SHM_M_MVCC_RANGE, 3);
	shm_metric_add(st, SHM_M_MVCC_RANGE, 1);
	shm_metric_add(st, SHM_M_MVCC_PUT, 7);
	shm_metric_set(g0, SHM_M_WATCHERS, 4);
	shm_metric_set(g1, SHM_M_WATCHERS, 5);
	shm_metric_observe(st, SHM_H_BACKEND_COMMIT, 3000000);
	shm_metric_observe(st, SHM_H_BACKEND_COMMIT, 3000000);
	shm_metric_bump(&g0->grpc[0].started, 2);
	shm_metric_bump(&g1->grpc[0].started, 1);
	struct status_raftd rs = { .leader_id = 0x1234, .term = 2, .commit_index = 40, .is_leader = true };
	status_raftd_write(l, &rs);
	struct status_stored ss = { .applied_index = 39 };
	status_stored_write(l, &ss);

	metrics_collect(l, 100, sum);
	CHECK_EQ(sum->member_id, 0x1234);
	CHECK(sum->has_leader && sum->is_leader);
	CHECK_EQ(sum->committed_index, 40);
	CHECK_EQ(sum->applied_index, 39);
	CHECK_EQ(sum->quota_backend_bytes, 100);
	CHECK_EQ(sum->m[SHM_M_MVCC_RANGE], 6);
	CHECK_EQ(sum->m[SHM_M_MVCC_PUT], 7);
	CHECK_EQ(sum->m[SHM_M_WATCHERS], 9);
	CHECK_EQ(sum->grpc[0].started, 3);
	CHECK_EQ(sum->hist[SHM_H_BACKEND_COMMIT].count, 2);
	CHECK_EQ(sum->hist[SHM_H_BACKEND_COMMIT].bucket[2], 2); /* <= 4 ms */
	CHECK_EQ(sum->hist[SHM_H_BACKEND_COMMIT].sum_ns, 6000000);
	/* this process, seen through /proc as stored and both gateways */
	CHECK_EQ(sum->nprocs, 3);
	for (unsigned i = 0; i < sum->nprocs; i++) {
		CHECK_EQ(sum->proc[i].pid, getpid());
		CHECK(sum->proc[i].rss_bytes > 0);
		CHECK(sum->proc[i].open_fds > 0);
	}
	/* the live slots' four rings each, and the two daemon rings */
	CHECK_EQ(sum->nrings, 2 * 4 + 2);

	/* a gateway gone: its counters stay in the sums, its gauges do not */
	shm_slot_release(a, &s1);
	metrics_collect(l, 100, sum);
	CHECK_EQ(sum->m[SHM_M_MVCC_RANGE], 6);
	CHECK_EQ(sum->m[SHM_M_WATCHERS], 4);
	CHECK_EQ(sum->grpc[0].started, 3);
	CHECK_EQ(sum->nprocs, 2);
	CHECK_EQ(sum->nrings, 4 + 2);
	shm_region_detach(a);
	shm_region_detach(l);
	free(sum);
}

int main(void)
{
	char dir[256], path[300];

	test_tmpdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/region", dir);
	test_values();
	test_text();
	test_collect(path);
	printf("ok\n");
	return 0;
}
