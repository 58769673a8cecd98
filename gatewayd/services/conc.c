/* The ops of the v3lock and v3election services (conc.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/services/conc.h"
#include "gatewayd/services/watch.h"
#include "shm/region.h"
#include "stored/mvcc/mvcc.h"

struct conc_method {
	struct gw_server *s;
	conc_start_fn start;
	struct conc_method *next;
};

struct conc_state {
	struct dlist ops;            /* newest first */
	uint64_t next_id;
	uint32_t nwaiting;
	int64_t checked_rev;         /* the revision waiting ops last saw */
	bool recheck;                /* an op began waiting: check it next turn */
	struct conc_method *methods;
	struct mvcc_range_result res;
};

static struct conc_op *conc_find(struct conc_state *cs, uint64_t id)
{
	struct conc_op *op;

	if (!cs)
		return NULL;
	dlist_for_each(op, &cs->ops, node)
		if (op->id == id)
			return op;
	return NULL;
}

static void conc_unwait(struct gw_server *s, struct conc_op *op)
{
	if (!op->waiting)
		return;
	op->waiting = false;
	s->conc->nwaiting--;
	watch_release(s);
}

/* Takes op out of the waiters and the list: nothing finds it any more. */
static void conc_op_unlink(struct gw_server *s, struct conc_op *op)
{
	conc_unwait(s, op);
	dlist_remove(&op->node);
}

static void conc_op_free(struct gw_server *s, struct conc_op *op)
{
	conc_op_unlink(s, op);
	free(op);
}

struct conc_op *conc_op_new(struct gw_server *s, struct grpc_call *call,
			    const struct conc_vt *vt, size_t size)
{
	struct conc_state *cs = s->conc;
	struct conc_op *op = calloc(1, size);

	if (!op) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return NULL;
	}
	op->vt = vt;
	op->id = ++cs->next_id;
	op->call_id = grpc_call_id(call);
	dlist_insert_head(&cs->ops, &op->node);
	return op;
}

void conc_answer(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		 const ProtobufCMessage *m)
{
	/* m's bytes may live in op (a Lock's key, a Campaign's name and
	 * key): op is freed only once m is encoded, and unlinked before, so
	 * that nothing answers or abandons it meanwhile */
	conc_op_unlink(s, op);
	gw_answer(s, call, m);
	free(op);
}

void conc_fail(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
	       enum grpc_status code, const char *text)
{
	conc_op_free(s, op);
	grpc_call_finish(call, code, text);
}

void conc_fail_result(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		      int32_t status, const uint8_t *text, size_t len)
{
	char buf[GRPC_MESSAGE_MAX + 1];
	size_t n = len < GRPC_MESSAGE_MAX ? len : GRPC_MESSAGE_MAX;

	/* etcd's servers get the error through clientv3, which turns it into
	 * an error value of its own: its text reaches the client, as Unknown */
	(void)status;
	memcpy(buf, text, n);
	buf[n] = '\0';
	conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, buf);
}

/* ---- steps through the rings ---- */

/* What the rings keep for an op's proposal or read: the op by id (it may
 * be gone when the answer comes). */
struct conc_step {
	struct gw_deferred base;
	uint64_t op_id;
};

static struct conc_op *conc_step_op(struct gw_server *s, struct grpc_call *call,
				    struct gw_deferred *d)
{
	struct conc_op *op = conc_find(s->conc, ((struct conc_step *)d)->op_id);
	return op && op->call_id == grpc_call_id(call) ? op : NULL;
}

static void conc_step_result(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d,
			     int32_t status, const uint8_t *body, size_t len)
{
	struct conc_op *op = conc_step_op(s, call, d);
	if (op)
		op->vt->result(s, call, op, status, body, len);
}

/* Opens a view at the published root (through stored's latest-entry
 * cache). 0 or gw_read_begin's / mvcc_view_open's error. */
static int conc_view_begin(struct gw_server *s, struct gw_read *rd, struct mvcc_view *v)
{
	int rc = gw_read_begin(s, rd);
	if (rc)
		return rc;
	rc = mvcc_view_open(rd->txn, v);
	if (rc) {
		gw_read_end(s, rd);
		return rc;
	}
	if (rd->cache)
		mvcc_view_use_cache(v, rd->cache, rd->st.db_generation);
	return 0;
}

static void conc_view_end(struct gw_server *s, struct gw_read *rd, struct mvcc_view *v)
{
	mvcc_view_close(v);
	gw_read_end(s, rd);
}

static void conc_step_run(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d)
{
	struct conc_op *op = conc_step_op(s, call, d);
	struct mvcc_view v;
	struct gw_read rd;
	int rc;

	if (!op)
		return;
	rc = conc_view_begin(s, &rd, &v);
	if (rc) {
		conc_op_free(s, op);
		gw_read_refuse(s, call, rc);
		return;
	}
	op->vt->check(s, call, op, &v, (int64_t)rd.st.revision);
	conc_view_end(s, &rd, &v);
}

static void conc_step_free(struct gw_deferred *d)
{
	free(d);
}

static const struct gw_deferred_ops conc_step_ops = {
	.run = conc_step_run,
	.free = conc_step_free,
	.result = conc_step_result,
};

static struct conc_step *conc_step_new(struct grpc_call *call, struct conc_op *op)
{
	struct conc_step *st = malloc(sizeof(*st));

	if (!st) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return NULL;
	}
	st->base.ops = &conc_step_ops;
	st->op_id = op->id;
	return st;
}

/* req packed into scratch; NULL (call answered, if any) when out of memory. */
static uint8_t *conc_pack(struct gw_server *s, struct grpc_call *call,
			  const ProtobufCMessage *req, size_t *len)
{
	*len = protobuf_c_message_get_packed_size(req);
	uint8_t *body = gw_scratch(s, *len ? *len : 1);
	if (!body) {
		if (call)
			grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return NULL;
	}
	protobuf_c_message_pack(req, body);
	return body;
}

void conc_propose(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		  uint32_t field, const ProtobufCMessage *req)
{
	size_t len;
	uint8_t *body;
	struct conc_step *st;

	/* as etcd's servers get quota's NoSpace through clientv3: Unknown */
	if (alarm_db_no_space(s)) {
		s->stats.no_space++;
		conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, ALARM_NO_SPACE_TEXT);
		return;
	}
	body = conc_pack(s, call, req, &len);
	st = body ? conc_step_new(call, op) : NULL;

	if (!st) {
		conc_op_free(s, op);
		return;
	}
	gw_propose_then(s, call, field, body, len, &st->base);
}

void conc_propose_orphan(struct gw_server *s, uint32_t field, const ProtobufCMessage *req)
{
	size_t len;
	uint8_t *body = conc_pack(s, NULL, req, &len);

	if (body)
		gw_propose(s, NULL, field, body, len);
}

void conc_grant(struct gw_server *s, struct grpc_call *call, struct conc_op *op)
{
	Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;

	g.ttl = CONC_SESSION_TTL;
	g.id = lease_next_id(s);
	conc_propose(s, call, op, CONC_IRR_LEASE_GRANT, &g.base);
}

void conc_read(struct gw_server *s, struct grpc_call *call, struct conc_op *op)
{
	struct conc_step *st = conc_step_new(call, op);

	if (!st) {
		conc_op_free(s, op);
		return;
	}
	gw_read_linearizable(s, call, &st->base);
}

void conc_wait(struct gw_server *s, struct conc_op *op, int64_t min_rev)
{
	op->min_rev = min_rev;
	if (!op->waiting) {
		op->waiting = true;
		s->conc->nwaiting++;
		watch_hold(s);
	}
	s->conc->recheck = true;
	s->more_work = true;
}

/* ---- the turn ---- */

void conc_turn(struct gw_server *s)
{
	struct conc_state *cs = s->conc;
	struct conc_op *op, *next;
	struct status_stored st;
	struct mvcc_view v;
	struct gw_read rd;

	if (!cs || dlist_empty(&cs->ops))
		return;
	/* calls the rings ended (a request timeout, a leader change) */
	dlist_for_each_safe(op, next, &cs->ops, node) {
		if (grpc_call_find(s->grpc, op->call_id))
			continue;
		if (op->waiting && op->vt->abandon)
			op->vt->abandon(s, op);
		conc_op_free(s, op);
	}
	if (cs->nwaiting == 0 || status_stored_read(s->r, &st))
		return;
	if ((int64_t)st.revision == cs->checked_rev && !cs->recheck)
		return;
	if (conc_view_begin(s, &rd, &v))
		return; /* stored publishes nothing now: its next root wakes us */
	int64_t rev = (int64_t)rd.st.revision;
	cs->recheck = false;
	cs->checked_rev = rev;
	dlist_for_each_safe(op, next, &cs->ops, node) {
		if (!op->waiting || rev < op->min_rev)
			continue;
		struct grpc_call *call = grpc_call_find(s->grpc, op->call_id);
		if (call)
			op->vt->check(s, call, op, &v, rev);
	}
	conc_view_end(s, &rd, &v);
}

/* ---- calls ---- */

static struct conc_op *conc_of_call(struct gw_server *s, uint64_t call_id)
{
	struct conc_op *op;

	if (!s->conc)
		return NULL;
	dlist_for_each(op, &s->conc->ops, node)
		if (op->call_id == call_id)
			return op;
	return NULL;
}

static void conc_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct conc_method *m = grpc_call_handler_arg(call);

	if (gw_call_of(call)->stage != GW_CALL_AWAITING)
		return; /* a second message: ignored, as grpc-go does */
	gw_call_set(call, GW_CALL_HANDLED, 0);
	m->start(m->s, call, msg, len);
}

static void conc_half_close(struct grpc_call *call)
{
	if (gw_call_of(call)->stage == GW_CALL_AWAITING)
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "EOF");
}

static void conc_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	struct conc_method *m = grpc_call_handler_arg(call);
	struct gw_server *s = m->s;
	struct conc_op *op = conc_of_call(s, grpc_call_id(call));

	(void)why;
	gw_rings_cancel(s, call);
	if (!op)
		return;
	if (op->waiting && op->vt->abandon)
		op->vt->abandon(s, op);
	conc_op_free(s, op);
}

static const struct grpc_handler conc_handler = {
	.on_message = conc_message,
	.on_half_close = conc_half_close,
	.on_cancel = conc_cancel,
};

int conc_handle(struct gw_server *s, const char *path, conc_start_fn start)
{
	struct conc_method *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	m->s = s;
	m->start = start;
	rc = grpc_server_handle(s->grpc, path, &conc_handler, m);
	if (rc) {
		free(m);
		return rc;
	}
	m->next = s->conc->methods;
	s->conc->methods = m;
	return 0;
}

int conc_register(struct gw_server *s)
{
	int rc;

	s->conc = calloc(1, sizeof(*s->conc));
	if (!s->conc)
		return -ENOMEM;
	dlist_init(&s->conc->ops);
	mvcc_range_result_init(&s->conc->res);
	rc = v3lock_register(s);
	if (!rc)
		rc = v3election_register(s);
	return rc;
}

void conc_free(struct gw_server *s)
{
	struct conc_state *cs = s->conc;
	struct conc_op *op;

	if (!cs)
		return;
	while ((op = dlist_entry(dlist_first(&cs->ops), struct conc_op, node)))
		conc_op_free(s, op);
	while (cs->methods) {
		struct conc_method *m = cs->methods;
		cs->methods = m->next;
		free(m);
	}
	mvcc_range_result_free(&cs->res);
	free(cs);
	s->conc = NULL;
}

/* ---- building requests ---- */

size_t conc_lease_hex(int64_t lease, char out[CONC_LEASE_HEX_MAX])
{
	int n = lease < 0 ? snprintf(out, CONC_LEASE_HEX_MAX, "-%" PRIx64, (uint64_t)-(lease + 1) + 1) :
			    snprintf(out, CONC_LEASE_HEX_MAX, "%" PRIx64, (uint64_t)lease);
	return (size_t)n;
}

ProtobufCBinaryData conc_cat(struct gw_server *s, const void *a, size_t alen, const void *b,
			     size_t blen)
{
	ProtobufCBinaryData r = { 0, NULL };
	uint8_t *p = gw_scratch(s, alen + blen + 1);

	if (!p)
		return r;
	if (alen)
		memcpy(p, a, alen);
	if (blen)
		memcpy(p + alen, b, blen);
	r.data = p;
	r.len = alen + blen;
	return r;
}

ProtobufCBinaryData conc_prefix_end(struct gw_server *s, ProtobufCBinaryData key)
{
	static uint8_t zero;
	ProtobufCBinaryData r = conc_cat(s, key.data, key.len, NULL, 0);

	for (size_t i = r.len; r.data && i > 0; i--) {
		if (r.data[i - 1] < 0xff) {
			r.data[i - 1]++;
			r.len = i;
			return r;
		}
	}
	r.data = &zero; /* every byte 0xff: from the key on */
	r.len = 1;
	return r;
}

Etcdserverpb__Compare *conc_cmp_create(struct gw_server *s, ProtobufCBinaryData key, int64_t rev)
{
	Etcdserverpb__Compare *c = gw_scratch(s, sizeof(*c));

	if (!c)
		return NULL;
	etcdserverpb__compare__init(c);
	c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
	c->key = key;
	c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
	c->create_revision = rev;
	return c;
}

static Etcdserverpb__RequestOp *conc_reqop(struct gw_server *s)
{
	Etcdserverpb__RequestOp *o = gw_scratch(s, sizeof(*o));

	if (o)
		etcdserverpb__request_op__init(o);
	return o;
}

Etcdserverpb__RequestOp *conc_op_put(struct gw_server *s, ProtobufCBinaryData key,
				     ProtobufCBinaryData value, int64_t lease)
{
	Etcdserverpb__RequestOp *o = conc_reqop(s);
	Etcdserverpb__PutRequest *p = gw_scratch(s, sizeof(*p));

	if (!o || !p)
		return NULL;
	etcdserverpb__put_request__init(p);
	p->key = key;
	p->value = value;
	p->lease = lease;
	o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	o->request_put = p;
	return o;
}

Etcdserverpb__RequestOp *conc_op_get(struct gw_server *s, ProtobufCBinaryData key)
{
	Etcdserverpb__RequestOp *o = conc_reqop(s);
	Etcdserverpb__RangeRequest *r = gw_scratch(s, sizeof(*r));

	if (!o || !r)
		return NULL;
	etcdserverpb__range_request__init(r);
	r->key = key;
	o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	o->request_range = r;
	return o;
}

Etcdserverpb__RequestOp *conc_op_delete(struct gw_server *s, ProtobufCBinaryData key)
{
	Etcdserverpb__RequestOp *o = conc_reqop(s);
	Etcdserverpb__DeleteRangeRequest *d = gw_scratch(s, sizeof(*d));

	if (!o || !d)
		return NULL;
	etcdserverpb__delete_range_request__init(d);
	d->key = key;
	o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	o->request_delete_range = d;
	return o;
}

void conc_range_first_create(struct gw_server *s, ProtobufCBinaryData pfx,
			     Etcdserverpb__RangeRequest *r)
{
	etcdserverpb__range_request__init(r);
	r->key = pfx;
	r->range_end = conc_prefix_end(s, pfx);
	r->sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
	r->sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
	r->limit = 1;
}

Etcdserverpb__RequestOp *conc_op_first_create(struct gw_server *s, ProtobufCBinaryData pfx)
{
	Etcdserverpb__RequestOp *o = conc_reqop(s);
	Etcdserverpb__RangeRequest *r = gw_scratch(s, sizeof(*r));

	if (!o || !r)
		return NULL;
	conc_range_first_create(s, pfx, r);
	o->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	o->request_range = r;
	return o;
}

/* ---- reading ---- */

int conc_range(struct gw_server *s, struct mvcc_view *v, const Etcdserverpb__RangeRequest *r,
	       Mvccpb__KeyValue ***kvs, size_t *n)
{
	struct mvcc_range_result *res = &s->conc->res;
	int rc = mvcc_range(v, r, res);

	*kvs = NULL;
	*n = 0;
	if (rc)
		return rc;
	if (res->n == 0)
		return 0;
	*kvs = gw_scratch(s, res->n * sizeof(**kvs));
	if (!*kvs)
		return -ENOMEM;
	for (size_t i = 0; i < res->n; i++) {
		(*kvs)[i] = mvccpb__key_value__unpack(gw_pb_alloc(s), res->kvs[i].kv_len,
						      res->kvs[i].kv);
		if (!(*kvs)[i])
			return -EUCLEAN;
	}
	*n = res->n;
	return 0;
}

int conc_exists(struct gw_server *s, struct mvcc_view *v, ProtobufCBinaryData key)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Mvccpb__KeyValue **kvs;
	size_t n;

	r.key = key;
	r.count_only = false;
	int rc = conc_range(s, v, &r, &kvs, &n);
	return rc < 0 ? rc : n > 0;
}

Mvccpb__KeyValue *conc_txn_kv(const Etcdserverpb__TxnResponse *t, size_t i)
{
	if (i >= t->n_responses || !t->responses[i] ||
	    t->responses[i]->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE ||
	    !t->responses[i]->response_range || t->responses[i]->response_range->n_kvs == 0)
		return NULL;
	return t->responses[i]->response_range->kvs[0];
}
