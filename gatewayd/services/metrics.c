/* /metrics: summing the region's metrics blocks and writing them in
 * Prometheus's text format (see metrics.h). */
#include "gatewayd/services/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "gatewayd/transport/h2.h"
#include "shm/doorbell.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/status.h"

/* etcd 3.4's services in go-grpc-prometheus's registration, then the
 * two it learns of only when called. */
const struct metrics_method metrics_methods[] = {
	{ "etcdserverpb.KV", "Range", "unary", false },
	{ "etcdserverpb.KV", "Put", "unary", false },
	{ "etcdserverpb.KV", "DeleteRange", "unary", false },
	{ "etcdserverpb.KV", "Txn", "unary", false },
	{ "etcdserverpb.KV", "Compact", "unary", false },
	{ "etcdserverpb.Watch", "Watch", "bidi_stream", false },
	{ "etcdserverpb.Lease", "LeaseGrant", "unary", false },
	{ "etcdserverpb.Lease", "LeaseRevoke", "unary", false },
	{ "etcdserverpb.Lease", "LeaseKeepAlive", "bidi_stream", false },
	{ "etcdserverpb.Lease", "LeaseTimeToLive", "unary", false },
	{ "etcdserverpb.Lease", "LeaseLeases", "unary", false },
	{ "etcdserverpb.Cluster", "MemberAdd", "unary", false },
	{ "etcdserverpb.Cluster", "MemberRemove", "unary", false },
	{ "etcdserverpb.Cluster", "MemberUpdate", "unary", false },
	{ "etcdserverpb.Cluster", "MemberList", "unary", false },
	{ "etcdserverpb.Cluster", "MemberPromote", "unary", false },
	{ "etcdserverpb.Maintenance", "Alarm", "unary", false },
	{ "etcdserverpb.Maintenance", "Status", "unary", false },
	{ "etcdserverpb.Maintenance", "Defragment", "unary", false },
	{ "etcdserverpb.Maintenance", "Hash", "unary", false },
	{ "etcdserverpb.Maintenance", "HashKV", "unary", false },
	{ "etcdserverpb.Maintenance", "Snapshot", "server_stream", false },
	{ "etcdserverpb.Maintenance", "MoveLeader", "unary", false },
	{ "etcdserverpb.Auth", "AuthEnable", "unary", false },
	{ "etcdserverpb.Auth", "AuthDisable", "unary", false },
	{ "etcdserverpb.Auth", "Authenticate", "unary", false },
	{ "etcdserverpb.Auth", "UserAdd", "unary", false },
	{ "etcdserverpb.Auth", "UserGet", "unary", false },
	{ "etcdserverpb.Auth", "UserList", "unary", false },
	{ "etcdserverpb.Auth", "UserDelete", "unary", false },
	{ "etcdserverpb.Auth", "UserChangePassword", "unary", false },
	{ "etcdserverpb.Auth", "UserGrantRole", "unary", false },
	{ "etcdserverpb.Auth", "UserRevokeRole", "unary", false },
	{ "etcdserverpb.Auth", "RoleAdd", "unary", false },
	{ "etcdserverpb.Auth", "RoleGet", "unary", false },
	{ "etcdserverpb.Auth", "RoleList", "unary", false },
	{ "etcdserverpb.Auth", "RoleDelete", "unary", false },
	{ "etcdserverpb.Auth", "RoleGrantPermission", "unary", false },
	{ "etcdserverpb.Auth", "RoleRevokePermission", "unary", false },
	{ "grpc.health.v1.Health", "Check", "unary", false },
	{ "grpc.health.v1.Health", "Watch", "server_stream", false },
	{ "v3lockpb.Lock", "Lock", "unary", true },
	{ "v3lockpb.Lock", "Unlock", "unary", true },
	{ "v3electionpb.Election", "Campaign", "unary", true },
	{ "v3electionpb.Election", "Proclaim", "unary", true },
	{ "v3electionpb.Election", "Leader", "unary", true },
	{ "v3electionpb.Election", "Observe", "server_stream", true },
	{ "v3electionpb.Election", "Resign", "unary", true },
};
const unsigned metrics_method_count = sizeof(metrics_methods) / sizeof(metrics_methods[0]);
_Static_assert(sizeof(metrics_methods) / sizeof(metrics_methods[0]) <= SHM_GRPC_METHODS,
	       "the region has room for every method's counters");

int metrics_grpc_index(const char *path)
{
	if (!path || path[0] != '/')
		return -1;
	const char *slash = strchr(path + 1, '/');
	if (!slash)
		return -1;
	size_t svc_len = (size_t)(slash - path - 1);
	for (unsigned i = 0; i < metrics_method_count; i++) {
		const struct metrics_method *m = &metrics_methods[i];
		if (strlen(m->service) == svc_len && memcmp(m->service, path + 1, svc_len) == 0 &&
		    strcmp(m->method, slash + 1) == 0)
			return (int)i;
	}
	return -1;
}

/* grpc-go's names of the status codes, as go-grpc-prometheus labels them. */
static const char *const grpc_code_names[SHM_GRPC_CODES] = {
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
};

/* ---- collecting ---- */

static void hist_add(struct metrics_hist_sum *to, const struct shm_metrics_hist *h)
{
	for (unsigned i = 0; i < SHM_HIST_BUCKETS; i++)
		to->bucket[i] += shm_metric_read(&h->bucket[i]);
	to->sum_ns += shm_metric_read(&h->sum_ns);
	to->count += shm_metric_read(&h->count);
}

/* What /proc/<pid> tells of one process; false if it is gone. */
static bool proc_read(struct metrics_proc *p)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* after the command's ')' come state (field 3) .. rss (field 24) */
	char *s = strrchr(buf, ')');
	if (!s)
		return false;
	unsigned long long f[22] = { 0 };
	unsigned field = 0;
	for (char *tok = strtok(s + 1, " "); tok && field < 22; tok = strtok(NULL, " "))
		f[field++] = strtoull(tok, NULL, 10);
	if (field < 22)
		return false;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	p->cpu_seconds = (double)(f[11] + f[12]) / (double)(ticks > 0 ? ticks : 100);
	p->rss_bytes = (uint64_t)f[21] * (uint64_t)(page > 0 ? page : 4096);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)p->pid);
	DIR *d = opendir(path);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.')
				p->open_fds++;
		closedir(d);
	}
	return true;
}

static void ring_note(struct metrics_sum *out, const char *name, int32_t slot, struct ring *r)
{
	if (!r || out->nrings >= METRICS_MAX_RINGS)
		return;
	out->ring[out->nrings++] = (struct metrics_ring){
		.name = name, .slot = slot, .depth_bytes = ring_depth(r),
		.capacity_bytes = ring_capacity(r),
	};
}

static const char *const slot_ring_names[SHM_SLOT_RING_COUNT] = {
	[SHM_SLOT_TO_RAFTD] = "to_raftd",
	[SHM_SLOT_FROM_RAFTD] = "from_raftd",
	[SHM_SLOT_FROM_STORED] = "from_stored",
	[SHM_SLOT_TO_STORED] = "to_stored",
};

/* Whether block owner's process is alive, and its doorbell. */
static bool owner_live(struct shm_region *r, uint32_t owner, const struct shm_metrics *m,
		       struct shm_doorbell **db)
{
	*db = NULL;
	switch (owner) {
	case SHM_METRICS_RAFTD:
		*db = shm_role_doorbell(r, SHM_ROLE_RAFTD);
		return shm_role_is_live(r, SHM_ROLE_RAFTD);
	case SHM_METRICS_STORED:
		*db = shm_role_doorbell(r, SHM_ROLE_STORED);
		return shm_role_is_live(r, SHM_ROLE_STORED);
	case SHM_METRICS_LAUNCHER:
	case SHM_METRICS_MONITOR: {
		/* no lock names them: the pid, while /proc has it */
		int32_t pid = atomic_load_explicit(&m->pid, memory_order_relaxed);
		char path[32];
		snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		return pid > 0 && access(path, F_OK) == 0;
	}
	default:
		*db = shm_slot_doorbell(r, owner - SHM_METRICS_GATEWAY);
		return shm_slot_is_live(r, owner - SHM_METRICS_GATEWAY);
	}
}

static const char *owner_name(uint32_t owner)
{
	switch (owner) {
	case SHM_METRICS_RAFTD: return "raftd";
	case SHM_METRICS_STORED: return "stored";
	case SHM_METRICS_LAUNCHER: return "launcher";
	case SHM_METRICS_MONITOR: return "monitor";
	default: return "gatewayd";
	}
}

void metrics_collect(struct shm_region *r, int64_t quota_backend_bytes, struct metrics_sum *out)
{
	struct status_raftd rs;
	struct status_stored ss;
	uint32_t blocks = shm_metrics_blocks(r);

	memset(out, 0, sizeof(*out));
	out->quota_backend_bytes = quota_backend_bytes;
	out->member_id = shm_region_member_id(r);
	if (status_raftd_read(r, &rs) == 0) {
		out->has_leader = rs.leader_id != 0;
		out->is_leader = rs.is_leader;
		out->committed_index = rs.commit_index;
	}
	if (status_stored_read(r, &ss) == 0)
		out->applied_index = ss.applied_index;

	for (uint32_t o = 0; o < blocks; o++) {
		struct shm_metrics *m = shm_metrics_block(r, o);
		struct shm_doorbell *db;
		bool live = owner_live(r, o, m, &db);

		for (unsigned i = 0; i < SHM_M_COUNT; i++)
			if (live || !shm_metric_is_gauge((enum shm_metric)i))
				out->m[i] += shm_metric_read(&m->m[i]);
		for (unsigned k = 0; k < SHM_H_KIND_COUNT - 1; k++)
			hist_add(&out->hist[k], &m->hist[k]);
		for (unsigned g = 0; g < SHM_GRPC_METHODS; g++) {
			struct shm_metrics_grpc *c = &m->grpc[g];
			out->grpc[g].started += shm_metric_read(&c->started);
			out->grpc[g].msg_received += shm_metric_read(&c->msg_received);
			out->grpc[g].msg_sent += shm_metric_read(&c->msg_sent);
			for (unsigned k = 0; k < SHM_GRPC_CODES; k++)
				out->grpc[g].handled[k] += shm_metric_read(&c->handled[k]);
			hist_add(&out->grpc_handling[g], &m->grpc_handling[g]);
		}
		for (unsigned p = 0; p < SHM_METRICS_PEERS; p++) {
			/* acquire: the id before the counters it names */
			uint64_t id = atomic_load_explicit(&m->peer[p].id, memory_order_acquire);
			if (!id)
				continue;
			unsigned j = 0;
			while (j < out->npeers && out->peer[j].id != id)
				j++;
			if (j == out->npeers) {
				if (out->npeers == SHM_METRICS_PEERS)
					continue;
				out->peer[out->npeers++].id = id;
			}
			out->peer[j].sent_bytes += shm_metric_read(&m->peer[p].sent_bytes);
			out->peer[j].received_bytes += shm_metric_read(&m->peer[p].received_bytes);
			hist_add(&out->peer[j].rtt, &m->peer[p].rtt);
		}
		int32_t pid = atomic_load_explicit(&m->pid, memory_order_relaxed);
		if (!live || pid <= 0 || out->nprocs >= METRICS_MAX_PROCS)
			continue;
		struct metrics_proc *pr = &out->proc[out->nprocs];
		*pr = (struct metrics_proc){
			.name = owner_name(o),
			.slot = o >= SHM_METRICS_GATEWAY ? (int32_t)(o - SHM_METRICS_GATEWAY) : -1,
			.pid = pid,
			.loop_turns = shm_metric_read(&m->m[SHM_M_LOOP_TURNS]),
			.wakes = db ? shm_doorbell_wakes(db) : 0,
		};
		if (proc_read(pr))
			out->nprocs++;
	}

	uint32_t slots = shm_slot_count(r);
	for (uint32_t i = 0; i < slots; i++) {
		if (!shm_slot_is_live(r, i))
			continue;
		for (unsigned k = 0; k < SHM_SLOT_RING_COUNT; k++)
			ring_note(out, slot_ring_names[k], (int32_t)i,
				  shm_slot_ring(r, i, (enum shm_slot_ring)k));
	}
	ring_note(out, "committed", -1, shm_daemon_ring(r, SHM_RING_COMMITTED));
	ring_note(out, "stored_proposals", -1, shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS));
}

/* ---- the text format ---- */

static void buf_put(struct metrics_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void buf_put(struct metrics_buf *b, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	if (b->failed)
		return;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* every line written here is far shorter than the buffer */
	if (n < 0 || (size_t)n >= sizeof(line) ||
	    h2_buf_append(&b->out, h2_mem_libc(), line, (size_t)n))
		b->failed = true;
}

void metrics_format_value(char *buf, size_t len, double v)
{
	char e[40];
	int prec;

	if (isnan(v)) {
		snprintf(buf, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == 0) {
		snprintf(buf, len, "0");
		return;
	}
	/* the fewest digits that read back as v */
	for (prec = 0; prec < 17; prec++) {
		snprintf(e, sizeof(e), "%.*e", prec, v);
		if (strtod(e, NULL) == v)
			break;
	}
	int exp = atoi(strchr(e, 'e') + 1);
	int digits = prec + 1;
	/* Go's shortest %g: exponent form below 1e-4 and from 1e6 up */
	if (exp < -4 || exp >= 6) {
		snprintf(buf, len, "%s", e);
		return;
	}
	int decimals = digits - (exp + 1);
	snprintf(buf, len, "%.*f", decimals > 0 ? decimals : 0, v);
}

static void family(struct metrics_buf *b, const char *name, const char *type, const char *help)
{
	buf_put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One sample; labels is the text inside the braces, or NULL. */
static void sample(struct metrics_buf *b, const char *name, const char *labels, double v)
{
	char val[40];

	metrics_format_value(val, sizeof(val), v);
	if (labels && labels[0])
		buf_put(b, "%s{%s} %s\n", name, labels, val);
	else
		buf_put(b, "%s %s\n", name, val);
}

static void hist_samples(struct metrics_buf *b, const char *name, const char *labels,
			 enum shm_hist_kind kind, const struct metrics_hist_sum *h)
{
	unsigned n;
	const uint64_t *bounds = shm_metrics_hist_bounds(kind, &n);
	uint64_t cum = 0;
	char le[40], val[40];
	const char *sep = labels && labels[0] ? "," : "";

	if (!labels)
		labels = "";
	for (unsigned i = 0; i <= n; i++) {
		cum += h->bucket[i];
		if (i < n)
			metrics_format_value(le, sizeof(le), (double)bounds[i] / 1e9);
		else
			snprintf(le, sizeof(le), "+Inf");
		buf_put(b, "%s_bucket{%s%sle=\"%s\"} %llu\n", name, labels, sep, le,
			(unsigned long long)cum);
	}
	metrics_format_value(val, sizeof(val), (double)h->sum_ns / 1e9);
	if (labels[0]) {
		buf_put(b, "%s_sum{%s} %s\n", name, labels, val);
		buf_put(b, "%s_count{%s} %llu\n", name, labels, (unsigned long long)h->count);
	} else {
		buf_put(b, "%s_sum %s\n%s_count %llu\n", name, val, name,
			(unsigned long long)h->count);
	}
}

/* The labels of a method's series. */
static void method_labels(char *buf, size_t len, const struct metrics_method *m, const char *code)
{
	if (code)
		snprintf(buf, len, "grpc_code=\"%s\",grpc_method=\"%s\",grpc_service=\"%s\",grpc_type=\"%s\"",
			 code, m->method, m->service, m->type);
	else
		snprintf(buf, len, "grpc_method=\"%s\",grpc_service=\"%s\",grpc_type=\"%s\"",
			 m->method, m->service, m->type);
}

static bool method_shown(const struct metrics_sum *s, unsigned i)
{
	return !metrics_methods[i].lazy || s->grpc[i].started > 0;
}

static void grpc_text(const struct metrics_sum *s, bool extensive, struct metrics_buf *b)
{
	char labels[256];

	family(b, "grpc_server_handled_total", "counter",
	       "Total number of RPCs completed on the server, regardless of success or failure.");
	for (unsigned i = 0; i < metrics_method_count; i++) {
		if (!method_shown(s, i))
			continue;
		for (unsigned c = 0; c < SHM_GRPC_CODES; c++) {
			method_labels(labels, sizeof(labels), &metrics_methods[i], grpc_code_names[c]);
			sample(b, "grpc_server_handled_total", labels, (double)s->grpc[i].handled[c]);
		}
	}
	if (extensive) {
		family(b, "grpc_server_handling_seconds", "histogram",
		       "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.");
		for (unsigned i = 0; i < metrics_method_count; i++) {
			if (!method_shown(s, i))
				continue;
			method_labels(labels, sizeof(labels), &metrics_methods[i], NULL);
			hist_samples(b, "grpc_server_handling_seconds", labels, SHM_H_GRPC_HANDLING,
				     &s->grpc_handling[i]);
		}
	}
	static const struct {
		const char *name, *help;
		size_t off;
	} per_method[] = {
		{ "grpc_server_msg_received_total", "Total number of RPC stream messages received on the server.",
		  offsetof(struct shm_metrics_grpc_sum, msg_received) },
		{ "grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.",
		  offsetof(struct shm_metrics_grpc_sum, msg_sent) },
		{ "grpc_server_started_total", "Total number of RPCs started on the server.",
		  offsetof(struct shm_metrics_grpc_sum, started) },
	};
	for (unsigned f = 0; f < sizeof(per_method) / sizeof(per_method[0]); f++) {
		family(b, per_method[f].name, "counter", per_method[f].help);
		for (unsigned i = 0; i < metrics_method_count; i++) {
			if (!method_shown(s, i))
				continue;
			uint64_t v;
			memcpy(&v, (const char *)&s->grpc[i] + per_method[f].off, sizeof(v));
			method_labels(labels, sizeof(labels), &metrics_methods[i], NULL);
			sample(b, per_method[f].name, labels, (double)v);
		}
	}
}

static void peer_text(const struct metrics_sum *s, struct metrics_buf *b)
{
	char labels[64];

	if (s->npeers == 0)
		return; /* as Prometheus's client shows a vector without children */
	family(b, "etcd_network_peer_received_bytes_total", "counter",
	       "The total number of bytes received from peers.");
	for (unsigned i = 0; i < s->npeers; i++) {
		snprintf(labels, sizeof(labels), "From=\"%llx\"", (unsigned long long)s->peer[i].id);
		sample(b, "etcd_network_peer_received_bytes_total", labels,
		       (double)s->peer[i].received_bytes);
	}
	family(b, "etcd_network_peer_round_trip_time_seconds", "histogram",
	       "Round-Trip-Time histogram between peers");
	for (unsigned i = 0; i < s->npeers; i++) {
		snprintf(labels, sizeof(labels), "To=\"%llx\"", (unsigned long long)s->peer[i].id);
		hist_samples(b, "etcd_network_peer_round_trip_time_seconds", labels, SHM_H_PEER_RTT,
			     &s->peer[i].rtt);
	}
	family(b, "etcd_network_peer_sent_bytes_total", "counter",
	       "The total number of bytes sent to peers.");
	for (unsigned i = 0; i < s->npeers; i++) {
		snprintf(labels, sizeof(labels), "To=\"%llx\"", (unsigned long long)s->peer[i].id);
		sample(b, "etcd_network_peer_sent_bytes_total", labels, (double)s->peer[i].sent_bytes);
	}
}

/* The member's processes one by one, and its rings: cetcd's own. */
static void cetcd_text(const struct metrics_sum *s, struct metrics_buf *b)
{
	static const struct {
		const char *name, *type, *help;
	} per_proc[] = {
		{ "cetcd_doorbell_wakes_total", "counter",
		  "Futex wakes issued on the process's doorbell (its rings had records for it)." },
		{ "cetcd_loop_turns_total", "counter", "Turns of the process's event loop." },
		{ "cetcd_process_cpu_seconds_total", "counter",
		  "User and system CPU time the process spent, in seconds." },
		{ "cetcd_process_open_fds", "gauge", "Open file descriptors of the process." },
		{ "cetcd_process_resident_memory_bytes", "gauge",
		  "Resident memory of the process in bytes (the shared region counts in each)." },
	};
	char labels[96];

	for (unsigned f = 0; f < sizeof(per_proc) / sizeof(per_proc[0]); f++) {
		family(b, per_proc[f].name, per_proc[f].type, per_proc[f].help);
		for (unsigned i = 0; i < s->nprocs; i++) {
			const struct metrics_proc *p = &s->proc[i];
			double v = f == 0 ? (double)p->wakes : f == 1 ? (double)p->loop_turns :
				   f == 2 ? p->cpu_seconds : f == 3 ? (double)p->open_fds :
				   (double)p->rss_bytes;
			if (p->slot >= 0)
				snprintf(labels, sizeof(labels), "process=\"%s\",slot=\"%d\"", p->name,
					 (int)p->slot);
			else
				snprintf(labels, sizeof(labels), "process=\"%s\"", p->name);
			sample(b, per_proc[f].name, labels, v);
		}
	}
	for (int f = 0; f < 2; f++) {
		const char *name = f == 0 ? "cetcd_ring_capacity_bytes" : "cetcd_ring_depth_bytes";
		family(b, name, "gauge", f == 0 ? "Bytes a ring's data area holds." :
			  "Bytes published on a ring and not yet released by its consumer.");
		for (unsigned i = 0; i < s->nrings; i++) {
			const struct metrics_ring *r = &s->ring[i];
			if (r->slot >= 0)
				snprintf(labels, sizeof(labels), "ring=\"%s\",slot=\"%d\"", r->name,
					 (int)r->slot);
			else
				snprintf(labels, sizeof(labels), "ring=\"%s\"", r->name);
			sample(b, name, labels, (double)(f == 0 ? r->capacity_bytes : r->depth_bytes));
		}
	}
	family(b, "cetcd_ring_full_total", "counter",
	       "Records a producer found no room for: held for later (to_raftd, committed) or dropped (from_stored).");
	sample(b, "cetcd_ring_full_total", "ring=\"committed\"", (double)s->m[SHM_M_COMMITTED_FULL]);
	sample(b, "cetcd_ring_full_total", "ring=\"from_stored\"", (double)s->m[SHM_M_RESULTS_FULL]);
	sample(b, "cetcd_ring_full_total", "ring=\"to_raftd\"", (double)s->m[SHM_M_BACKLOGGED]);
	family(b, "cetcd_raft_log_bytes", "gauge",
	       "Bytes of Raft log entries raftd keeps (within --raft-log-mib once applied and durable).");
	sample(b, "cetcd_raft_log_bytes", NULL, (double)s->m[SHM_M_RAFT_LOG_BYTES]);
	family(b, "cetcd_raft_log_resident_bytes", "gauge",
	       "Bytes of Raft log entry data raftd holds in memory; the rest is read back from the WAL when a follower needs it.");
	sample(b, "cetcd_raft_log_resident_bytes", NULL, (double)s->m[SHM_M_RAFT_LOG_RESIDENT]);
}

/* The families that are one sample of one summed metric. */
static const struct {
	const char *name, *type, *help;
	enum shm_metric i;
} plain_families[] = {
	{ "etcd_debugging_mvcc_keys_total", "gauge", "Total number of keys.", SHM_M_KEYS },
	{ "etcd_debugging_mvcc_slow_watcher_total", "gauge", "Total number of unsynced slow watchers.",
	  SHM_M_SLOW_WATCHERS },
	{ "etcd_debugging_mvcc_watch_stream_total", "gauge", "Total number of watch streams.",
	  SHM_M_WATCH_STREAMS },
	{ "etcd_debugging_mvcc_watcher_total", "gauge", "Total number of watchers.", SHM_M_WATCHERS },
	{ "etcd_disk_defrag_inflight", "gauge",
	  "Whether or not defrag is active on the member. 1 means active, 0 means not.",
	  SHM_M_DEFRAGS_INFLIGHT },
	{ "etcd_disk_wal_write_bytes_total", "gauge", "Total number of bytes written in WAL.",
	  SHM_M_WAL_WRITE_BYTES },
	{ "etcd_mvcc_db_total_size_in_bytes", "gauge",
	  "Total size of the underlying database physically allocated in bytes.", SHM_M_DB_SIZE },
	{ "etcd_mvcc_db_total_size_in_use_in_bytes", "gauge",
	  "Total size of the underlying database logically in use in bytes.", SHM_M_DB_IN_USE },
	{ "etcd_mvcc_delete_total", "counter", "Total number of deletes seen by this member.",
	  SHM_M_MVCC_DELETE },
	{ "etcd_mvcc_put_total", "counter", "Total number of puts seen by this member.",
	  SHM_M_MVCC_PUT },
	{ "etcd_mvcc_range_total", "counter", "Total number of ranges seen by this member.",
	  SHM_M_MVCC_RANGE },
	{ "etcd_network_client_grpc_received_bytes_total", "counter",
	  "The total number of bytes received from grpc clients.", SHM_M_GRPC_RECEIVED_BYTES },
	{ "etcd_network_client_grpc_sent_bytes_total", "counter",
	  "The total number of bytes sent to grpc clients.", SHM_M_GRPC_SENT_BYTES },
	{ "etcd_server_health_failures", "counter", "The total number of failed health checks",
	  SHM_M_HEALTH_FAILURES },
	{ "etcd_server_health_success", "counter", "The total number of successful health checks",
	  SHM_M_HEALTH_SUCCESS },
	{ "etcd_server_heartbeat_send_failures_total", "counter",
	  "The total number of leader heartbeat send failures (likely overloaded from slow disk).",
	  SHM_M_HEARTBEAT_FAILURES },
	{ "etcd_server_leader_changes_seen_total", "counter", "The number of leader changes seen.",
	  SHM_M_LEADER_CHANGES },
	{ "etcd_server_proposals_failed_total", "counter", "The total number of failed proposals seen.",
	  SHM_M_PROPOSALS_FAILED },
	{ "etcd_server_proposals_pending", "gauge", "The current number of pending proposals to commit.",
	  SHM_M_PROPOSALS_PENDING },
	{ "etcd_server_read_indexes_failed_total", "counter",
	  "The total number of failed read indexes seen.", SHM_M_READ_INDEX_FAILED },
	{ "etcd_server_slow_apply_total", "counter",
	  "The total number of slow apply requests (likely overloaded from slow disk).",
	  SHM_M_SLOW_APPLY },
	{ "etcd_server_snapshot_apply_in_progress_total", "gauge",
	  "1 if the server is applying the incoming snapshot. 0 if none.", SHM_M_SNAPSHOT_APPLYING },
};

/* The families that are one histogram of the member's. */
static const struct {
	const char *name, *help;
	enum shm_hist_kind kind;
} hist_families[] = {
	{ "etcd_disk_backend_commit_duration_seconds",
	  "The latency distributions of commit called by backend.", SHM_H_BACKEND_COMMIT },
	{ "etcd_disk_backend_defrag_duration_seconds",
	  "The latency distribution of backend defragmentation.", SHM_H_BACKEND_DEFRAG },
	{ "etcd_disk_backend_snapshot_duration_seconds",
	  "The latency distribution of backend snapshots.", SHM_H_BACKEND_SNAPSHOT },
	{ "etcd_disk_wal_fsync_duration_seconds", "The latency distributions of fsync called by WAL.",
	  SHM_H_WAL_FSYNC },
};

int metrics_text(const struct metrics_sum *s, bool extensive, struct metrics_buf *b)
{
	char labels[64];
	double cpu = 0, rss = 0, fds = 0;

	cetcd_text(s, b);
	family(b, "etcd_cluster_version", "gauge",
	       "Which version is running. 1 for 'cluster_version' label with current cluster version");
	sample(b, "etcd_cluster_version", "cluster_version=\"3.4\"", 1);
	for (unsigned i = 0; i < sizeof(plain_families) / sizeof(plain_families[0]); i++) {
		family(b, plain_families[i].name, plain_families[i].type, plain_families[i].help);
		sample(b, plain_families[i].name, NULL, (double)s->m[plain_families[i].i]);
	}
	for (unsigned i = 0; i < sizeof(hist_families) / sizeof(hist_families[0]); i++) {
		family(b, hist_families[i].name, "histogram", hist_families[i].help);
		hist_samples(b, hist_families[i].name, NULL, hist_families[i].kind,
			     &s->hist[hist_families[i].kind]);
	}
	/* etcd counts a txn of reads in the gateway and one of writes in the
	 * applier alike */
	family(b, "etcd_mvcc_txn_total", "counter", "Total number of txns seen by this member.");
	sample(b, "etcd_mvcc_txn_total", NULL, (double)(s->m[SHM_M_MVCC_TXN] + s->m[SHM_M_MVCC_TXN_READ]));
	peer_text(s, b);
	family(b, "etcd_server_has_leader", "gauge",
	       "Whether or not a leader exists. 1 is existence, 0 is not.");
	sample(b, "etcd_server_has_leader", NULL, s->has_leader ? 1 : 0);
	family(b, "etcd_server_id", "gauge",
	       "Server or member ID in hexadecimal format. 1 for 'server_id' label with current ID.");
	snprintf(labels, sizeof(labels), "server_id=\"%llx\"", (unsigned long long)s->member_id);
	sample(b, "etcd_server_id", labels, 1);
	family(b, "etcd_server_is_leader", "gauge",
	       "Whether or not this member is a leader. 1 if is, 0 otherwise.");
	sample(b, "etcd_server_is_leader", NULL, s->is_leader ? 1 : 0);
	family(b, "etcd_server_proposals_applied_total", "gauge",
	       "The total number of consensus proposals applied.");
	sample(b, "etcd_server_proposals_applied_total", NULL, (double)s->applied_index);
	family(b, "etcd_server_proposals_committed_total", "gauge",
	       "The total number of consensus proposals committed.");
	sample(b, "etcd_server_proposals_committed_total", NULL, (double)s->committed_index);
	family(b, "etcd_server_quota_backend_bytes", "gauge",
	       "Current backend storage quota size in bytes.");
	sample(b, "etcd_server_quota_backend_bytes", NULL, (double)s->quota_backend_bytes);
	family(b, "etcd_server_version", "gauge",
	       "Which version is running. 1 for 'server_version' label with current version.");
	sample(b, "etcd_server_version", "server_version=\"" CETCD_ETCD_SERVER_VERSION "\"", 1);
	grpc_text(s, extensive, b);
	for (unsigned i = 0; i < s->nprocs; i++) {
		cpu += s->proc[i].cpu_seconds;
		rss += (double)s->proc[i].rss_bytes;
		fds += (double)s->proc[i].open_fds;
	}
	family(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
	sample(b, "process_cpu_seconds_total", NULL, cpu);
	family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
	sample(b, "process_open_fds", NULL, fds);
	family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
	sample(b, "process_resident_memory_bytes", NULL, rss);
	return b->failed ? -ENOMEM : 0;
}
