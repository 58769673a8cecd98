/* etcdserverpb.KV in gatewayd (see kv.h). */
#include "gatewayd/services/kv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "auth/check.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/services/kv_range.h"
#include "stored/btree/arena.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/mvcc_kv.h"

/* Fields of InternalRaftRequest the KV writes go in. */
enum {
	KV_IRR_PUT = 4,
	KV_IRR_DELETE_RANGE = 5,
	KV_IRR_TXN = 6,
	KV_IRR_COMPACTION = 7,
};

/* A serializable Range of one key, kept until the end of the turn. */
struct kv_point {
	uint64_t call_id;                       /* grpc_call_id */
	const Etcdserverpb__RangeRequest *r;    /* in the turn's arena */
	uint64_t auth_rev;                      /* the caller's token's (kv_auth_read) */
};

#define KV_POINTS_MAX BTREE_GET_MANY_MAX

/* Per-server state: the range result, reused by every read, the point
 * reads of the current turn, and the Ranges being streamed. */
struct kv_state {
	struct mvcc_range_result res;
	struct kv_point points[KV_POINTS_MAX];
	uint32_t npoints;
	struct kv_job *jobs;    /* streamed Ranges (owned; each freed when its call ends) */
};

/* ---- answering ---- */

static void kv_refuse(struct grpc_call *call, int rc)
{
	grpc_call_finish(call, (enum grpc_status)mvcc_grpc_code(rc), mvcc_strerror(rc));
}

/* An error of the read path: MVCC's own with etcd's text, the rest as
 * gw_read_refuse answers. */
static void kv_read_failed(struct gw_server *s, struct grpc_call *call, int rc)
{
	if (mvcc_is_request_error(rc))
		kv_refuse(call, rc);
	else
		gw_read_refuse(s, call, rc);
}

static void kv_malformed(struct grpc_call *call)
{
	grpc_call_finish(call, GRPC_STATUS_DATA_LOSS, "etcdserver: the db holds a malformed KeyValue");
}

/* ---- auth: etcd's checks around a serialized read (doSerialize) ---- */

/* Txn: its compares and every op (read-only ones before the read, the
 * others before proposing them). */
static int kv_auth_txn(const struct gw_auth_info *ai, const void *r)
{
	return auth_check_txn(ai->cache, ai->user, ai->revision, r, NULL);
}

/* Before the read: the caller may read what r (a Range) or t (a
 * read-only Txn) asks. true: go on, with *rev the auth revision of the
 * caller's token; false: the call was answered. */
static bool kv_auth_read(struct gw_server *s, struct grpc_call *call,
			 const Etcdserverpb__RangeRequest *r, const Etcdserverpb__TxnRequest *t,
			 uint64_t *rev)
{
	return r ? gw_auth_check(s, call, gw_auth_range, r, rev)
		 : gw_auth_check(s, call, kv_auth_txn, t, rev);
}

/* After it: a token of another auth revision than the read's root saw
 * is refused (etcd compares with the store's revision after the read);
 * false: the call was answered. */
static bool kv_auth_after(struct gw_server *s, struct grpc_call *call, uint64_t rev,
			  const struct gw_read *rd)
{
	struct gw_auth_info ai = { .revision = rev };
	int rc = gw_auth_after_read(&ai, rd->st.auth_revision);

	if (rc)
		gw_auth_refuse(s, call, rc);
	return rc == 0;
}

/* Encodes the range result into the call's response and finishes it. */
static void kv_range_answer(struct gw_server *s, struct grpc_call *call,
			    const struct mvcc_range_result *res)
{
	struct gw_header h;
	size_t len, kv_len;

	gw_header_fill(s, res->rev, &h);
	len = kv_range_head_len(&h) + kv_range_tail_len(res->more, res->count);
	for (size_t i = 0; i < res->n; i++) {
		if (kv_range_kv_len(&res->kvs[i], res->keys_only, &kv_len)) {
			kv_malformed(call);
			return;
		}
		len += kv_len;
	}
	uint8_t *out = grpc_call_send_reserve(call, len);
	if (!out) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	out += kv_range_head_write(out, &h);
	for (size_t i = 0; i < res->n; i++)
		out += kv_range_kv_write(out, &res->kvs[i], res->keys_only);
	kv_range_tail_write(out, res->more, res->count);
	grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

/* Opens a view of rd's txn that reads through stored's latest-entry
 * cache when there is one. */
static int kv_view_open(struct gw_read *rd, struct mvcc_view *v)
{
	int rc = mvcc_view_open(rd->txn, v);
	if (rc == 0 && rd->cache)
		mvcc_view_use_cache(v, rd->cache, rd->st.db_generation);
	return rc;
}

/* Opens a view at the published root; answers the call on failure. */
static int kv_view_begin(struct gw_server *s, struct grpc_call *call, struct gw_read *rd,
			 struct mvcc_view *v)
{
	int rc = gw_read_begin(s, rd);
	if (rc) {
		gw_read_refuse(s, call, rc);
		return rc;
	}
	rc = kv_view_open(rd, v);
	if (rc) {
		gw_read_end(s, rd);
		gw_read_refuse(s, call, rc);
	}
	return rc;
}

static void kv_view_end(struct gw_server *s, struct gw_read *rd, struct mvcc_view *v)
{
	mvcc_view_close(v);
	gw_read_end(s, rd);
}

/* Answers a Range from view v (before the view's txn ends: the answer's
 * kvs point into it). */
static void kv_range_in(struct gw_server *s, struct grpc_call *call, struct mvcc_view *v,
			const Etcdserverpb__RangeRequest *r)
{
	int rc = mvcc_range(v, r, &s->kv->res);
	shm_metric_add(s->metrics, SHM_M_MVCC_RANGE, 1);
	if (rc)
		kv_read_failed(s, call, rc);
	else
		kv_range_answer(s, call, &s->kv->res);
}

/* ---- Ranges answered over several turns ---- */

/*
 * A Range whose answer is larger than KV_INLINE_BYTES (or takes more than
 * KV_INLINE_KEYS keys to measure) is streamed from a read txn of its own
 * (a gw_pin) that stays open until the answer is sent: counted a step of
 * KV_COUNT_TURN_KEYS keys per turn, then written a step at a time while
 * the call has less than KV_QUEUE_HIGH bytes queued and not yet framed.
 * The client's HTTP/2 window decides how fast the queue drains, so what a
 * Range holds here is its queue, at most a window framed and unsent, and
 * the walk's position; not its answer. Every KV_FORGET_BYTES of KeyValues
 * read, the job lets its mapping's pages go (btree_reader_forget), so the
 * db read does not stay resident either. At most KV_JOBS_PINNED_MAX jobs
 * hold a txn at once; the others wait for one to end. A job whose call
 * ends (a cancel, a deadline, its connection closing) is dropped at once,
 * and its txn with it.
 */
#define KV_INLINE_KEYS 1024u
#define KV_INLINE_BYTES (1u << 20)
#define KV_COUNT_TURN_KEYS 2048u
#define KV_QUEUE_HIGH (512u * 1024)
#define KV_TURN_BUDGET (4u << 20)       /* KeyValue bytes read a turn, all jobs */
#define KV_FORGET_BYTES (4u << 20)
/* Jobs holding a read txn at once in this gatewayd: each takes an entry
 * of the reader table, which every process of the member shares, so the
 * others wait, in the order they came, doing nothing until one ends. */
#define KV_JOBS_PINNED_MAX 2u
/* grpc-go's largest message (etcd's server sets math.MaxInt32). */
#define KV_MAX_SEND_BYTES 2147483647u

struct kv_job {
	struct kv_job *next;
	uint64_t call_id;
	Etcdserverpb__RangeRequest *r;  /* the job's own (protobuf-c's malloc) */
	struct gw_pin pin;
	bool running;                   /* pin and stream are open */
	bool counted;
	struct kv_range_stream st;
	uint64_t forgot_at;             /* st.w.read at the last forget */
};

static void kv_job_free(struct gw_server *s, struct kv_job *j)
{
	kv_range_stream_free(&j->st);
	gw_pin_release(s, &j->pin);
	if (j->r)
		etcdserverpb__range_request__free_unpacked(j->r, NULL);
	free(j);
}

/* Takes j out of the server's list and frees it. */
static void kv_job_drop(struct gw_server *s, struct kv_job *j)
{
	for (struct kv_job **p = &s->kv->jobs; *p; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			break;
		}
	}
	if (j->pin.claimed)
		s->more_work = true; /* a job that waits for a txn may start */
	kv_job_free(s, j);
}

/* Jobs that hold a reader entry. */
static uint32_t kv_jobs_pinned(const struct kv_state *k)
{
	uint32_t n = 0;

	for (const struct kv_job *j = k->jobs; j; j = j->next)
		n += j->pin.claimed;
	return n;
}

/* Queues a job for call's Range (msg: its request bytes, checked). */
static void kv_job_add(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
		       size_t len)
{
	struct kv_job *j = calloc(1, sizeof(*j));
	if (j)
		j->r = etcdserverpb__range_request__unpack(NULL, len, msg);
	if (!j || !j->r) {
		if (j)
			kv_job_free(s, j);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	kv_range_stream_init(&j->st);
	j->call_id = grpc_call_id(call);
	struct kv_job **tail = &s->kv->jobs;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	s->more_work = true; /* it starts with the next turn, if it may */
}

/* Opens j's txn, view and stream. gw_pin_begin's codes, the walk's. */
static int kv_job_start(struct gw_server *s, struct kv_job *j)
{
	struct gw_header h;
	int rc = gw_pin_begin(s, &j->pin, false);
	if (rc)
		return rc;
	gw_header_fill(s, j->pin.v.rev, &h);
	rc = kv_range_stream_begin(&j->st, &j->pin.v, j->r, &h);
	if (rc)
		return rc;
	j->running = true;
	return 0;
}

static uint8_t *kv_call_sink(void *arg, size_t len)
{
	return grpc_call_send_part(arg, len);
}

/* An error of a streamed Range: before its message began, etcd's answer;
 * after, the stream is reset (grpc_call_finish). */
static void kv_stream_failed(struct gw_server *s, struct grpc_call *call, int rc)
{
	if (rc == -EUCLEAN)
		log_error("a streamed range found the db malformed", LOG_STR("reason", errmsg_get(rc)));
	if (rc == -ENOMEM)
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
	else if (rc == -EUCLEAN)
		kv_malformed(call);
	else
		kv_read_failed(s, call, rc);
}

/* Lets j's mapping's pages go every KV_FORGET_BYTES of KeyValues read. */
static void kv_job_forget(struct kv_job *j)
{
	if (j->pin.db && j->st.w.read - j->forgot_at >= KV_FORGET_BYTES) {
		btree_reader_forget(j->pin.db);
		j->forgot_at = j->st.w.read;
	}
}

/* One step of j: start, count, or write while the call's queue has room.
 * Returns whether j is done (answered, and freed). */
static bool kv_job_step(struct gw_server *s, struct grpc_call *call, struct kv_job *j,
			size_t *budget)
{
	bool done = false;
	int rc = 0;

	if (!j->running) {
		rc = kv_job_start(s, j);
		if (rc == -ESTALE) {
			gw_pin_end(s, &j->pin); /* a new db file: start over next turn */
			return false;
		}
	}
	if (rc == 0 && !j->counted) {
		size_t keys = KV_COUNT_TURN_KEYS;
		uint64_t walked = j->st.w.read;
		rc = kv_range_stream_count(&j->st, &keys, &j->counted);
		walked = j->st.w.read - walked;
		*budget = *budget > walked ? *budget - (size_t)walked : 0;
		if (rc == 0 && j->counted && j->st.total > KV_MAX_SEND_BYTES) {
			char text[96];
			snprintf(text, sizeof(text),
				 "grpc: trying to send message larger than max (%llu vs. %u)",
				 (unsigned long long)j->st.total, KV_MAX_SEND_BYTES);
			grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, text);
			return true;
		}
		if (rc == 0 && j->counted)
			rc = grpc_call_send_begin(call, j->st.total);
	}
	while (rc == 0 && j->counted && !done && *budget > 0 &&
	       grpc_call_pending_bytes(call) < KV_QUEUE_HIGH) {
		size_t step = *budget < KV_QUEUE_HIGH ? *budget : KV_QUEUE_HIGH;
		*budget -= step;
		rc = kv_range_stream_write(&j->st, kv_call_sink, call, &step, &done);
		*budget += step;
		kv_job_forget(j);
	}
	kv_job_forget(j);
	if (rc)
		kv_stream_failed(s, call, rc);
	else if (done)
		grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	return rc || done;
}

void kv_jobs_turn(struct gw_server *s)
{
	size_t budget = KV_TURN_BUDGET;
	struct kv_job *j, *next;

	if (!s->kv)
		return;
	uint32_t pinned = kv_jobs_pinned(s->kv);
	for (j = s->kv->jobs; j && budget > 0; j = next) {
		next = j->next;
		bool held = j->pin.claimed;
		if (!held && pinned >= KV_JOBS_PINNED_MAX)
			continue; /* waits for a txn */
		struct grpc_call *call = grpc_call_find(s->grpc, j->call_id);
		if (call && !kv_job_step(s, call, j, &budget)) {
			pinned += !held && j->pin.claimed;
			continue;
		}
		pinned -= held;
		kv_job_drop(s, j); /* a gone call's cancel drops it first: a safety net */
	}
	/* the next turn starts with the next job, so that none waits on the
	 * budget of those before it turn after turn */
	j = s->kv->jobs;
	if (j && j->next) {
		struct kv_job **tail = &j->next;
		while (*tail)
			tail = &(*tail)->next;
		s->kv->jobs = j->next;
		j->next = NULL;
		*tail = j;
	}
}

void kv_jobs_flushed(struct gw_server *s)
{
	if (!s->kv)
		return;
	bool may_start = kv_jobs_pinned(s->kv) < KV_JOBS_PINNED_MAX;
	for (struct kv_job *j = s->kv->jobs; j; j = j->next) {
		if (!j->pin.claimed && !may_start)
			continue; /* waits for a txn, without work */
		struct grpc_call *call = grpc_call_find(s->grpc, j->call_id);
		if (!call || !j->counted || grpc_call_pending_bytes(call) < KV_QUEUE_HIGH) {
			s->more_work = true;
			return;
		}
	}
}

/* The call ended (cancel, deadline, connection closed): its job goes,
 * and the txn it held with it. */
static void kv_cancel(struct gw_server *s, struct grpc_call *call)
{
	uint64_t id = grpc_call_id(call);

	for (struct kv_job *j = s->kv->jobs; j; j = j->next) {
		if (j->call_id == id) {
			kv_job_drop(s, j);
			return;
		}
	}
}

/* ---- Ranges now ---- */

/* A sink over one buffer that holds the whole answer. */
struct kv_buf_sink {
	uint8_t *p;
	size_t left;
};

static uint8_t *kv_buf_reserve(void *arg, size_t len)
{
	struct kv_buf_sink *b = arg;
	if (len > b->left)
		return NULL;
	uint8_t *p = b->p;
	b->p += len;
	b->left -= len;
	return p;
}

/*
 * A Range now, from the latest published root (msg: its request bytes).
 * A range of one key is answered whole (mvcc_range). A wider one is
 * measured first: when that takes at most KV_INLINE_KEYS keys and its
 * answer is at most KV_INLINE_BYTES, it is written whole now; otherwise
 * it becomes a job with a txn of its own.
 */
static void kv_range_now(struct gw_server *s, struct grpc_call *call,
			 const Etcdserverpb__RangeRequest *r, const uint8_t *msg, size_t len,
			 uint64_t auth_rev)
{
	struct kv_range_stream st;
	struct gw_header h;
	struct mvcc_view v;
	struct gw_read rd;
	size_t keys = KV_INLINE_KEYS, bytes = SIZE_MAX;
	bool counted = false, done = false;

	if (kv_view_begin(s, call, &rd, &v))
		return;
	if (!kv_auth_after(s, call, auth_rev, &rd)) {
		kv_view_end(s, &rd, &v);
		return;
	}
	if (r->range_end.len == 0) {
		kv_range_in(s, call, &v, r);
		kv_view_end(s, &rd, &v);
		return;
	}
	kv_range_stream_init(&st);
	gw_header_fill(s, v.rev, &h);
	int rc = kv_range_stream_begin(&st, &v, r, &h);
	if (rc == 0)
		rc = kv_range_stream_count(&st, &keys, &counted);
	if (rc) {
		kv_stream_failed(s, call, rc);
	} else if (!counted || st.total > KV_INLINE_BYTES) {
		kv_job_add(s, call, msg, len);
	} else {
		struct kv_buf_sink b = { grpc_call_send_reserve(call, st.total), st.total };
		rc = b.p ? kv_range_stream_write(&st, kv_buf_reserve, &b, &bytes, &done) : -ENOMEM;
		if (rc == 0 && (!done || b.left))
			rc = kvindex_corrupt("a range walked again gave another answer");
		if (rc)
			kv_stream_failed(s, call, rc);
		else
			grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	}
	kv_range_stream_free(&st);
	kv_view_end(s, &rd, &v);
}

/*
 * Answers the point reads gathered this turn from one view: their keys are
 * looked up together first (mvcc_view_prefetch), so that the lookups'
 * cache misses overlap, then each Range runs as kv_range_now would run it.
 * A call gone meanwhile (its stream reset) is skipped.
 */
void kv_turn(struct gw_server *s)
{
	struct kv_state *k = s->kv;
	const uint8_t *keys[KV_POINTS_MAX];
	size_t lens[KV_POINTS_MAX];
	struct mvcc_view v;
	struct gw_read rd;
	uint32_t n;
	int rc;

	if (!k || k->npoints == 0)
		return;
	n = k->npoints;
	k->npoints = 0;
	rc = gw_read_begin(s, &rd);
	if (rc == 0) {
		rc = kv_view_open(&rd, &v);
		if (rc)
			gw_read_end(s, &rd);
	}
	if (rc) {
		for (uint32_t i = 0; i < n; i++) {
			struct grpc_call *call = grpc_call_find(s->grpc, k->points[i].call_id);
			if (call)
				gw_read_refuse(s, call, rc);
		}
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		keys[i] = k->points[i].r->key.data;
		lens[i] = k->points[i].r->key.len;
	}
	/* Only a head start: each Range below finds its answer either way. */
	(void)mvcc_view_prefetch(&v, n, keys, lens);
	for (uint32_t i = 0; i < n; i++) {
		struct grpc_call *call = grpc_call_find(s->grpc, k->points[i].call_id);
		if (call && kv_auth_after(s, call, k->points[i].auth_rev, &rd))
			kv_range_in(s, call, &v, k->points[i].r);
	}
	kv_view_end(s, &rd, &v);
}

/* A read-only Txn now. */
static void kv_txn_now(struct gw_server *s, struct grpc_call *call,
		       const Etcdserverpb__TxnRequest *r, uint64_t auth_rev)
{
	Etcdserverpb__TxnResponse *resp = NULL;
	struct mvcc_view v;
	struct gw_read rd;
	struct arena a;

	if (kv_view_begin(s, call, &rd, &v))
		return;
	if (!kv_auth_after(s, call, auth_rev, &rd)) {
		kv_view_end(s, &rd, &v);
		return;
	}
	arena_init(&a);
	int rc = mvcc_txn_read(&v, r, &a, &resp);
	if (rc) {
		kv_read_failed(s, call, rc);
	} else {
		/* counted as etcd counts a txn (mvcc_txn_count_ops) */
		struct mvcc_op_counts c = { 0 };
		mvcc_txn_count_ops(r, resp, &c);
		shm_metric_add(s->metrics, SHM_M_MVCC_RANGE, c.ranges);
		shm_metric_add(s->metrics, SHM_M_MVCC_TXN_READ, c.ranges > 1);
		if (resp->header)
			gw_header_pb(s, resp->header->revision, resp->header);
		gw_answer(s, call, &resp->base);
	}
	arena_release(&a);
	kv_view_end(s, &rd, &v);
}

/* A linearizable read kept until its read index is applied: the request
 * bytes, unpacked again then. */
struct kv_deferred {
	struct gw_deferred base;
	bool txn;
	size_t len;
	uint8_t msg[];
};

static void kv_deferred_run(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d)
{
	struct kv_deferred *k = (struct kv_deferred *)d;

	const uint8_t *msg = k->msg;
	size_t len = k->len;
	uint64_t rev;

	/* checked once the read index is applied, as etcd's Range checks
	 * after linearizableReadNotify */
	if (k->txn) {
		Etcdserverpb__TxnRequest *r =
			gw_unpack(s, call, &etcdserverpb__txn_request__descriptor, &msg, &len);
		if (r && kv_auth_read(s, call, NULL, r, &rev))
			kv_txn_now(s, call, r, rev);
	} else {
		Etcdserverpb__RangeRequest *r =
			gw_unpack(s, call, &etcdserverpb__range_request__descriptor, &msg, &len);
		if (r && kv_auth_read(s, call, r, NULL, &rev))
			kv_range_now(s, call, r, msg, len, rev);
	}
}

static void kv_deferred_free(struct gw_deferred *d)
{
	free(d);
}

static const struct gw_deferred_ops kv_deferred_ops = {
	.run = kv_deferred_run,
	.free = kv_deferred_free,
};

static void kv_read_later(struct gw_server *s, struct grpc_call *call, bool txn,
			  const uint8_t *msg, size_t len)
{
	struct kv_deferred *k = malloc(sizeof(*k) + len);
	if (!k) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	k->base.ops = &kv_deferred_ops;
	k->txn = txn;
	k->len = len;
	memcpy(k->msg, msg, len);
	gw_read_linearizable(s, call, &k->base);
}

/* ---- the methods ---- */

static void kv_range(struct gw_server *s, struct grpc_call *call, const uint8_t *msg, size_t len)
{
	Etcdserverpb__RangeRequest *r =
		gw_unpack(s, call, &etcdserverpb__range_request__descriptor, &msg, &len);
	if (!r)
		return;
	int rc = mvcc_validate_range(r);
	uint64_t rev;
	if (rc) {
		kv_refuse(call, rc);
	} else if (r->serializable && !kv_auth_read(s, call, r, NULL, &rev)) {
		return;
	} else if (r->serializable && r->range_end.len == 0) {
		/* a point read: with the others of this turn (kv_turn) */
		struct kv_state *k = s->kv;
		if (k->npoints == KV_POINTS_MAX)
			kv_turn(s);
		k->points[k->npoints++] = (struct kv_point){ grpc_call_id(call), r, rev };
	} else if (r->serializable) {
		kv_range_now(s, call, r, msg, len, rev);
	} else {
		kv_read_later(s, call, false, msg, len);
	}
}

/* The writes etcd's v3rpc only checks before proposing them. */
static int kv_check_put(const void *r)
{
	return mvcc_validate_put(r);
}

static int kv_check_delete_range(const void *r)
{
	return mvcc_validate_delete_range(r);
}

static int kv_check_nothing(const void *r)
{
	(void)r; /* Compact: the revision is judged at apply */
	return 0;
}

/* The permission checks of the writes, made before proposing them so
 * that a refused write costs no Raft round (stored makes them again at
 * apply, where etcd makes them, with the leases' keys). */
static int kv_auth_put(const struct gw_auth_info *ai, const void *r)
{
	return auth_check_put(ai->cache, ai->user, ai->revision, r, NULL);
}

static int kv_auth_delete_range(const struct gw_auth_info *ai, const void *r)
{
	return auth_check_delete_range(ai->cache, ai->user, ai->revision, r);
}

static int kv_auth_nothing(const struct gw_auth_info *ai, const void *r)
{
	(void)ai;
	(void)r; /* etcd 3.4 lets any user compact */
	return 0;
}

struct kv_write {
	const ProtobufCMessageDescriptor *desc;
	int (*check)(const void *r);
	int (*auth)(const struct gw_auth_info *ai, const void *r);
	uint32_t field; /* of InternalRaftRequest */
};

static const struct kv_write kv_write_put = {
	&etcdserverpb__put_request__descriptor, kv_check_put, kv_auth_put, KV_IRR_PUT,
};
static const struct kv_write kv_write_delete_range = {
	&etcdserverpb__delete_range_request__descriptor, kv_check_delete_range,
	kv_auth_delete_range, KV_IRR_DELETE_RANGE,
};
static const struct kv_write kv_write_compact = {
	&etcdserverpb__compaction_request__descriptor, kv_check_nothing, kv_auth_nothing,
	KV_IRR_COMPACTION,
};

static void kv_propose(struct gw_server *s, struct grpc_call *call, const struct kv_write *w,
		       const uint8_t *msg, size_t len)
{
	const void *r = gw_unpack(s, call, w->desc, &msg, &len);
	if (!r || alarm_quota_refuses(s, call, r))
		return;
	int rc = w->check(r);
	if (rc)
		kv_refuse(call, rc);
	else if (gw_auth_check(s, call, w->auth, r, NULL) && !alarm_no_space_refuses(s, call))
		gw_propose(s, call, w->field, msg, len);
}

static void kv_put(struct gw_server *s, struct grpc_call *call, const uint8_t *msg, size_t len)
{
	kv_propose(s, call, &kv_write_put, msg, len);
}

static void kv_delete_range(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			    size_t len)
{
	kv_propose(s, call, &kv_write_delete_range, msg, len);
}

static void kv_compact(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
		       size_t len)
{
	kv_propose(s, call, &kv_write_compact, msg, len);
}

/* etcd's isTxnSerializable: every op of both branches a serializable
 * Range (so a txn without ops is too). */
static bool kv_txn_serializable(const Etcdserverpb__TxnRequest *r)
{
	for (size_t i = 0; i < r->n_success; i++)
		if (r->success[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE ||
		    !r->success[i]->request_range->serializable)
			return false;
	for (size_t i = 0; i < r->n_failure; i++)
		if (r->failure[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE ||
		    !r->failure[i]->request_range->serializable)
			return false;
	return true;
}

static void kv_txn(struct gw_server *s, struct grpc_call *call, const uint8_t *msg, size_t len)
{
	Etcdserverpb__TxnRequest *r =
		gw_unpack(s, call, &etcdserverpb__txn_request__descriptor, &msg, &len);
	if (!r || alarm_quota_refuses(s, call, &r->base))
		return;
	int rc = mvcc_validate_txn(r, s->max_txn_ops > UINT32_MAX ? UINT32_MAX :
				      (unsigned)s->max_txn_ops);
	uint64_t rev;
	if (rc)
		kv_refuse(call, rc);
	else if (!mvcc_txn_is_readonly(r)) {
		if (gw_auth_check(s, call, kv_auth_txn, r, NULL) && !alarm_no_space_refuses(s, call))
			gw_propose(s, call, KV_IRR_TXN, msg, len);
	}
	else if (kv_txn_serializable(r)) {
		if (kv_auth_read(s, call, NULL, r, &rev))
			kv_txn_now(s, call, r, rev);
	}
	else
		kv_read_later(s, call, true, msg, len);
}

int kv_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		gw_unary_fn fn;
	} methods[] = {
		{ "/etcdserverpb.KV/Put", kv_put },
		{ "/etcdserverpb.KV/DeleteRange", kv_delete_range },
		{ "/etcdserverpb.KV/Txn", kv_txn },
		{ "/etcdserverpb.KV/Compact", kv_compact },
	};

	s->kv = calloc(1, sizeof(*s->kv));
	if (!s->kv)
		return -ENOMEM;
	mvcc_range_result_init(&s->kv->res);
	int rc = gw_handle_unary_cancel(s, "/etcdserverpb.KV/Range", kv_range, kv_cancel);
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		int rc = gw_handle_unary(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return 0;
}

void kv_fini(struct gw_server *s)
{
	if (!s->kv)
		return;
	while (s->kv->jobs)
		kv_job_drop(s, s->kv->jobs);
	mvcc_range_result_free(&s->kv->res);
	free(s->kv);
	s->kv = NULL;
}
