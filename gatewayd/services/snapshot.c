/* Maintenance.Snapshot in gatewayd, as etcd 3.4's maintenance server
 * answers it: the db as one consistent copy (stored/btree/dbsnap.h: the
 * file bbolt's Tx.WriteTo writes), in messages of SNAP_CHUNK bytes whose
 * remaining_bytes counts down to 0, then one last message whose blob is
 * the SHA-256 of every byte before it (remaining_bytes 0), which
 * `etcdctl snapshot restore` checks; then status OK. No response header,
 * as etcd sends none.
 *
 * A db can be gigabytes, and the client reads at its own pace, so a
 * stream never holds the loop: each turn (snapshot_turn, from maint_turn)
 * tops up each stream's queue of unsent response bytes to SNAP_QUEUE_HIGH,
 * within SNAP_TURN_BUDGET bytes for all streams. After the turn's flush
 * (snapshot_flushed), a stream whose queue went below SNAP_QUEUE_HIGH keeps
 * the loop awake for the next top-up; one whose queue stays full waits,
 * without spinning, for the client's flow-control window or the socket
 * to open, either of which wakes the loop. The copy's read txn (a reader
 * entry and an open file of its own) lasts until the stream ends; while
 * it does stored reuses no page freed after it, as with etcd. */
#include <errno.h>
#include <stdlib.h>

#include <openssl/evp.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/server.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "stored/btree/dbsnap.h"

#define SNAP_CHUNK (32u * 1024)           /* etcd's snapshotSendBufferSize */
#define SNAP_QUEUE_HIGH (512u * 1024)     /* unsent bytes kept per stream */
#define SNAP_TURN_BUDGET (1u << 20)       /* db bytes read per turn, all streams */
#define SNAP_SHA_BYTES 32u

struct snap_stream {
	struct snap_stream *next;
	uint64_t call_id;
	struct dbsnap *snap;
	EVP_MD_CTX *sha;
	uint64_t total;
	uint64_t sent;
	int64_t start_ns;  /* when the copy was opened */
};

static void snap_free(struct snap_stream *st)
{
	dbsnap_close(st->snap);
	EVP_MD_CTX_free(st->sha);
	free(st);
}

/* Takes st out of the server's list and frees it. */
static void snap_drop(struct gw_server *s, struct snap_stream *st)
{
	for (struct snap_stream **p = &s->snapshots; *p; p = &(*p)->next) {
		if (*p == st) {
			*p = st->next;
			break;
		}
	}
	snap_free(st);
}

/* Queues one SnapshotResponse. */
static int snap_send(struct grpc_call *call, uint64_t remaining, uint8_t *blob, size_t len)
{
	Etcdserverpb__SnapshotResponse resp;
	uint8_t *p;
	size_t n;

	etcdserverpb__snapshot_response__init(&resp);
	resp.remaining_bytes = remaining;
	resp.blob.data = blob;
	resp.blob.len = len;
	n = etcdserverpb__snapshot_response__get_packed_size(&resp);
	p = grpc_call_send_reserve(call, n);
	if (!p)
		return -ENOMEM;
	etcdserverpb__snapshot_response__pack(&resp, p);
	return 0;
}

/* Ends a stream that failed after it began, as etcd's togRPCError does
 * for an error it does not know. */
static void snap_fail(struct gw_server *s, struct grpc_call *call, struct snap_stream *st, int rc)
{
	log_warn("cannot send the database snapshot to the client", LOG_U64("sent-bytes", st->sent),
		 LOG_U64("total-bytes", st->total), LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
	grpc_call_finish(call, rc == -ENOMEM ? GRPC_STATUS_RESOURCE_EXHAUSTED : GRPC_STATUS_UNKNOWN,
			 errmsg_get(rc));
	snap_drop(s, st);
}

/*
 * Queues up to *budget bytes of st's copy, while its queue is under
 * SNAP_QUEUE_HIGH; then, at the end of the copy, the checksum and the
 * status. Returns whether st is done (and freed).
 */
static bool snap_step(struct gw_server *s, struct grpc_call *call, struct snap_stream *st,
		      size_t *budget)
{
	uint8_t buf[SNAP_CHUNK];

	while (st->sent < st->total && *budget > 0 &&
	       grpc_call_pending_bytes(call) < SNAP_QUEUE_HIGH) {
		uint64_t left = st->total - st->sent;
		size_t want = left < SNAP_CHUNK ? (size_t)left : SNAP_CHUNK;
		ssize_t n = dbsnap_read(st->snap, buf, want);
		if (n >= 0 && (size_t)n != want)
			n = errmsg_set(-EIO, "dbsnap: the copy ended %llu bytes early",
				       (unsigned long long)(left - (uint64_t)n));
		if (n < 0) {
			snap_fail(s, call, st, (int)n);
			return true;
		}
		st->sent += want;
		int rc = snap_send(call, st->total - st->sent, buf, want);
		if (rc == 0 && EVP_DigestUpdate(st->sha, buf, want) != 1)
			rc = errmsg_set(-ENOMEM, "snapshot: SHA-256 failed");
		if (rc) {
			snap_fail(s, call, st, rc);
			return true;
		}
		*budget = *budget > want ? *budget - want : 0;
	}
	if (st->sent < st->total)
		return false;

	uint8_t sha[SNAP_SHA_BYTES];
	unsigned len = 0;
	if (EVP_DigestFinal_ex(st->sha, sha, &len) != 1 || len != SNAP_SHA_BYTES) {
		snap_fail(s, call, st, errmsg_set(-EINVAL, "snapshot: SHA-256 failed"));
		return true;
	}
	int rc = snap_send(call, 0, sha, len);
	if (rc) {
		snap_fail(s, call, st, rc);
		return true;
	}
	/* etcd's snapshotDurations: the copy's time, opened to sent */
	shm_metric_observe(s->metrics, SHM_H_BACKEND_SNAPSHOT, (uint64_t)(s->now_ns - st->start_ns));
	log_info("sent database snapshot to client", LOG_U64("total-bytes", st->total),
		 LOG_U64("consistent-index", dbsnap_index(st->snap)));
	grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	snap_drop(s, st);
	return true;
}

void snapshot_turn(struct gw_server *s)
{
	size_t budget = SNAP_TURN_BUDGET;
	struct snap_stream *st = s->snapshots, *next;

	for (; st && budget > 0; st = next) {
		next = st->next;
		struct grpc_call *call = grpc_call_find(s->grpc, st->call_id);
		if (!call) {
			snap_drop(s, st); /* its cancel frees it first; kept as a safety net */
			continue;
		}
		snap_step(s, call, st, &budget);
	}
	/* the next turn starts with the next stream, so that none waits on
	 * the budget of those before it turn after turn */
	st = s->snapshots;
	if (st && st->next) {
		struct snap_stream **tail = &st->next;
		while (*tail)
			tail = &(*tail)->next;
		s->snapshots = st->next;
		st->next = NULL;
		*tail = st;
	}
}

void snapshot_flushed(struct gw_server *s)
{
	for (struct snap_stream *st = s->snapshots; st; st = st->next) {
		struct grpc_call *call = grpc_call_find(s->grpc, st->call_id);
		if (!call || grpc_call_pending_bytes(call) < SNAP_QUEUE_HIGH) {
			s->more_work = true;
			return;
		}
	}
}

static void snapshot_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	struct snap_stream *st;
	int rc;

	if (gw_call_of(call)->stage != GW_CALL_AWAITING)
		return; /* a second request on a server stream: ignored, as grpc-go does */
	gw_call_set(call, GW_CALL_HANDLED, 0);
	if (!gw_unpack_stream(s, call, &etcdserverpb__snapshot_request__descriptor, &msg, &len) ||
	    !gw_auth_maint(s, call))
		return;
	st = calloc(1, sizeof(*st));
	if (!st || !(st->sha = EVP_MD_CTX_new()) ||
	    EVP_DigestInit_ex(st->sha, EVP_sha256(), NULL) != 1) {
		if (st)
			snap_free(st);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	rc = dbsnap_open(s->r, s->db_path, &st->snap);
	if (rc) {
		log_warn("cannot take a database snapshot for the client",
			 LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		snap_free(st);
		gw_read_refuse(s, call, rc);
		return;
	}
	st->call_id = grpc_call_id(call);
	st->start_ns = s->now_ns;
	st->total = dbsnap_size(st->snap);
	st->next = s->snapshots;
	s->snapshots = st;
	log_info("sending database snapshot to client", LOG_U64("total-bytes", st->total),
		 LOG_U64("consistent-index", dbsnap_index(st->snap)));
	s->more_work = true; /* the first chunks go with the next turn */
}

static void snapshot_half_close(struct grpc_call *call)
{
	/* The client ended its side without a request (grpc-go reads EOF). */
	if (gw_call_of(call)->stage == GW_CALL_AWAITING)
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "EOF");
}

static void snapshot_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	uint64_t id = grpc_call_id(call);

	(void)why;
	for (struct snap_stream *st = s->snapshots; st; st = st->next) {
		if (st->call_id == id) {
			snap_drop(s, st);
			return;
		}
	}
}

static const struct grpc_handler snapshot_handler = {
	.on_message = snapshot_message,
	.on_half_close = snapshot_half_close,
	.on_cancel = snapshot_cancel,
};

int snapshot_register(struct gw_server *s)
{
	return grpc_server_handle(s->grpc, "/etcdserverpb.Maintenance/Snapshot", &snapshot_handler,
				  s);
}
