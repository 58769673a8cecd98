/* etcdserverpb.KV in gatewayd (see kv.h). */
#include "gatewayd/services/kv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "proto/wire.h"
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
};

#define KV_POINTS_MAX BTREE_GET_MANY_MAX

/* Per-server state: the range result, reused by every read, and the
 * point reads of the current turn. */
struct kv_state {
	struct mvcc_range_result res;
	struct kv_point points[KV_POINTS_MAX];
	uint32_t npoints;
};

/* ---- the hand-made RangeResponse ---- */

static size_t kv_field_len(size_t len)
{
	return 1 + proto_varint_len(len) + len; /* tag (fields < 16), length, bytes */
}

static size_t kv_header_inner(const struct gw_header *h)
{
	size_t n = 0;
	if (h->cluster_id)
		n += 1 + proto_varint_len(h->cluster_id);
	if (h->member_id)
		n += 1 + proto_varint_len(h->member_id);
	if (h->revision)
		n += 1 + proto_varint_len((uint64_t)h->revision);
	if (h->raft_term)
		n += 1 + proto_varint_len(h->raft_term);
	return n;
}

size_t kv_range_size(const struct gw_header *h, const struct kv_bytes *kvs, size_t n, bool more,
		     int64_t count)
{
	size_t len = kv_field_len(kv_header_inner(h));
	for (size_t i = 0; i < n; i++)
		len += kv_field_len(kvs[i].len);
	if (more)
		len += 2;
	if (count)
		len += 1 + proto_varint_len((uint64_t)count);
	return len;
}

size_t kv_range_write(uint8_t *out, const struct gw_header *h, const struct kv_bytes *kvs,
		      size_t n, bool more, int64_t count)
{
	uint8_t *w = out;

	*w++ = 1 << 3 | 2; /* header */
	w += proto_varint_put(w, kv_header_inner(h));
	if (h->cluster_id) {
		*w++ = 1 << 3;
		w += proto_varint_put(w, h->cluster_id);
	}
	if (h->member_id) {
		*w++ = 2 << 3;
		w += proto_varint_put(w, h->member_id);
	}
	if (h->revision) {
		*w++ = 3 << 3;
		w += proto_varint_put(w, (uint64_t)h->revision);
	}
	if (h->raft_term) {
		*w++ = 4 << 3;
		w += proto_varint_put(w, h->raft_term);
	}
	for (size_t i = 0; i < n; i++) {
		*w++ = 2 << 3 | 2; /* kvs: the stored bytes as they are */
		w += proto_varint_put(w, kvs[i].len);
		memcpy(w, kvs[i].p, kvs[i].len);
		w += kvs[i].len;
	}
	if (more) {
		*w++ = 3 << 3;
		*w++ = 1;
	}
	if (count) {
		*w++ = 4 << 3;
		w += proto_varint_put(w, (uint64_t)count);
	}
	return (size_t)(w - out);
}

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

/* Encodes the range result into the call's response and finishes it. */
static void kv_range_answer(struct gw_server *s, struct grpc_call *call,
			    const struct mvcc_range_result *res)
{
	struct gw_header h;
	struct kv_bytes *kvs = res->n ? gw_scratch(s, res->n * sizeof(*kvs)) : NULL;

	if (res->n && !kvs)
		goto out_nomem;
	for (size_t i = 0; i < res->n; i++) {
		kvs[i].p = res->kvs[i].kv;
		kvs[i].len = res->kvs[i].kv_len;
		if (!res->keys_only)
			continue;
		uint8_t *stripped = gw_scratch(s, kvs[i].len);
		if (!stripped)
			goto out_nomem;
		if (mvcc_kv_strip_value(kvs[i].p, kvs[i].len, stripped, &kvs[i].len)) {
			grpc_call_finish(call, GRPC_STATUS_DATA_LOSS,
					 "etcdserver: the db holds a malformed KeyValue");
			return;
		}
		kvs[i].p = stripped;
	}
	gw_header_fill(s, res->rev, &h);
	size_t len = kv_range_size(&h, kvs, res->n, res->more, res->count);
	uint8_t *out = grpc_call_send_reserve(call, len);
	if (!out)
		goto out_nomem;
	kv_range_write(out, &h, kvs, res->n, res->more, res->count);
	grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	return;

out_nomem:
	grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
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
	if (rc)
		kv_read_failed(s, call, rc);
	else
		kv_range_answer(s, call, &s->kv->res);
}

/* A Range now, from the latest published root. */
static void kv_range_now(struct gw_server *s, struct grpc_call *call,
			 const Etcdserverpb__RangeRequest *r)
{
	struct mvcc_view v;
	struct gw_read rd;

	if (kv_view_begin(s, call, &rd, &v))
		return;
	kv_range_in(s, call, &v, r);
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
		if (call)
			kv_range_in(s, call, &v, k->points[i].r);
	}
	kv_view_end(s, &rd, &v);
}

/* A read-only Txn now. */
static void kv_txn_now(struct gw_server *s, struct grpc_call *call,
		       const Etcdserverpb__TxnRequest *r)
{
	Etcdserverpb__TxnResponse *resp = NULL;
	struct mvcc_view v;
	struct gw_read rd;
	struct arena a;

	if (kv_view_begin(s, call, &rd, &v))
		return;
	arena_init(&a);
	int rc = mvcc_txn_read(&v, r, &a, &resp);
	if (rc) {
		kv_read_failed(s, call, rc);
	} else {
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

	if (k->txn) {
		Etcdserverpb__TxnRequest *r =
			gw_unpack(s, call, &etcdserverpb__txn_request__descriptor, &msg, &len);
		if (r)
			kv_txn_now(s, call, r);
	} else {
		Etcdserverpb__RangeRequest *r =
			gw_unpack(s, call, &etcdserverpb__range_request__descriptor, &msg, &len);
		if (r)
			kv_range_now(s, call, r);
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
	if (rc) {
		kv_refuse(call, rc);
	} else if (r->serializable && r->range_end.len == 0) {
		/* a point read: with the others of this turn (kv_turn) */
		struct kv_state *k = s->kv;
		if (k->npoints == KV_POINTS_MAX)
			kv_turn(s);
		k->points[k->npoints++] = (struct kv_point){ grpc_call_id(call), r };
	} else if (r->serializable) {
		kv_range_now(s, call, r);
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

struct kv_write {
	const ProtobufCMessageDescriptor *desc;
	int (*check)(const void *r);
	uint32_t field; /* of InternalRaftRequest */
};

static const struct kv_write kv_write_put = {
	&etcdserverpb__put_request__descriptor, kv_check_put, KV_IRR_PUT,
};
static const struct kv_write kv_write_delete_range = {
	&etcdserverpb__delete_range_request__descriptor, kv_check_delete_range,
	KV_IRR_DELETE_RANGE,
};
static const struct kv_write kv_write_compact = {
	&etcdserverpb__compaction_request__descriptor, kv_check_nothing, KV_IRR_COMPACTION,
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
	else if (!alarm_no_space_refuses(s, call))
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
	if (rc)
		kv_refuse(call, rc);
	else if (!mvcc_txn_is_readonly(r)) {
		if (!alarm_no_space_refuses(s, call))
			gw_propose(s, call, KV_IRR_TXN, msg, len);
	}
	else if (kv_txn_serializable(r))
		kv_txn_now(s, call, r);
	else
		kv_read_later(s, call, true, msg, len);
}

int kv_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		gw_unary_fn fn;
	} methods[] = {
		{ "/etcdserverpb.KV/Range", kv_range },
		{ "/etcdserverpb.KV/Put", kv_put },
		{ "/etcdserverpb.KV/DeleteRange", kv_delete_range },
		{ "/etcdserverpb.KV/Txn", kv_txn },
		{ "/etcdserverpb.KV/Compact", kv_compact },
	};

	s->kv = calloc(1, sizeof(*s->kv));
	if (!s->kv)
		return -ENOMEM;
	mvcc_range_result_init(&s->kv->res);
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
	mvcc_range_result_free(&s->kv->res);
	free(s->kv);
	s->kv = NULL;
}
