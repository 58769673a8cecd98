/* etcd 3.4's v3lockpb.Lock service in gatewayd, as etcd's v3lock server
 * runs it through clientv3/concurrency's Mutex:
 *
 *   Lock(name, lease): the key <name>/<lease in hex> is put with the lease
 *   unless it exists (one Txn, which also reads the first-created key of
 *   the prefix); the lock is held once no key of the prefix created
 *   before it is left. A request without a lease gets a new 60 s one,
 *   as etcd's server grants it. A waiter whose call ends (client gone,
 *   deadline) deletes its key, as Mutex.Lock does when its wait fails; a
 *   waiter whose own key went away meanwhile (its lease expired) is
 *   answered etcd's "mutex: session is expired" rather than being told it
 *   holds a lock whose key is gone.
 *   Unlock(key): deletes the key.
 *
 * Errors are etcd's: stored's (e.g. "etcdserver: requested lease not
 * found") with code Unknown, as etcd's server passes on its client's.
 */
#include <string.h>

#include "gatewayd/services/conc.h"
#include "stored/mvcc/mvcc.h"
#include "v3lockpb/v3lock.pb-c.h"

enum { LOCK_GRANT = 1, LOCK_TXN, LOCK_WAIT, UNLOCK_DELETE };

#define LOCK_SESSION_EXPIRED "mutex: session is expired"

struct lock_op {
	struct conc_op op;
	int64_t lease;
	int64_t my_rev;
	size_t name_len;  /* bytes: name, then "/", then the lease in hex */
	size_t key_len;
	uint8_t bytes[];
};

static ProtobufCBinaryData lock_pfx(struct lock_op *l)
{
	return (ProtobufCBinaryData){ l->name_len + 1, l->bytes };
}

static ProtobufCBinaryData lock_key(struct lock_op *l)
{
	return (ProtobufCBinaryData){ l->key_len, l->bytes };
}

/* Writes the key for lease (etcd: fmt.Sprintf("%s%x", pfx, lease)). */
static void lock_set_lease(struct lock_op *l, int64_t lease)
{
	char hex[CONC_LEASE_HEX_MAX];
	size_t n = conc_lease_hex(lease, hex);

	l->lease = lease;
	memcpy(l->bytes + l->name_len + 1, hex, n);
	l->key_len = l->name_len + 1 + n;
}

/* The Txn of Mutex.Lock. */
static void lock_txn(struct gw_server *s, struct grpc_call *call, struct lock_op *l)
{
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__Compare *cmp[1] = { conc_cmp_create(s, lock_key(l), 0) };
	Etcdserverpb__RequestOp *then[2] = {
		conc_op_put(s, lock_key(l), (ProtobufCBinaryData){ 0, NULL }, l->lease),
		conc_op_first_create(s, lock_pfx(l)),
	};
	Etcdserverpb__RequestOp *els[2] = { conc_op_get(s, lock_key(l)),
					    conc_op_first_create(s, lock_pfx(l)) };

	if (!cmp[0] || !then[0] || !then[1] || !els[0] || !els[1]) {
		conc_fail(s, call, &l->op, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	t.n_compare = 1;
	t.compare = cmp;
	t.n_success = 2;
	t.success = then;
	t.n_failure = 2;
	t.failure = els;
	l->op.step = LOCK_TXN;
	conc_propose(s, call, &l->op, CONC_IRR_TXN, &t.base);
}

static void lock_answer(struct gw_server *s, struct grpc_call *call, struct lock_op *l,
			Etcdserverpb__ResponseHeader *hdr)
{
	V3lockpb__LockResponse r = V3LOCKPB__LOCK_RESPONSE__INIT;

	r.header = hdr;
	r.key = lock_key(l);
	conc_answer(s, call, &l->op, &r.base);
}

static void lock_result(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
			int32_t status, const uint8_t *body, size_t len)
{
	struct lock_op *l = (struct lock_op *)op;

	if (status) {
		conc_fail_result(s, call, op, status, body, len);
		return;
	}
	switch (op->step) {
	case LOCK_GRANT: {
		Etcdserverpb__LeaseGrantResponse *g =
			etcdserverpb__lease_grant_response__unpack(gw_pb_alloc(s), len, body);
		if (!g)
			goto out_malformed;
		lock_set_lease(l, g->id);
		lock_txn(s, call, l);
		return;
	}
	case LOCK_TXN: {
		Etcdserverpb__TxnResponse *t =
			etcdserverpb__txn_response__unpack(gw_pb_alloc(s), len, body);
		if (!t || !t->header)
			goto out_malformed;
		l->my_rev = t->header->revision;
		if (!t->succeeded) {
			Mvccpb__KeyValue *mine = conc_txn_kv(t, 0);
			if (!mine)
				goto out_malformed;
			l->my_rev = mine->create_revision;
		}
		Mvccpb__KeyValue *owner = conc_txn_kv(t, 1);
		if (!owner || owner->create_revision == l->my_rev) {
			lock_answer(s, call, l, t->header);
			return;
		}
		l->op.step = LOCK_WAIT;
		conc_wait(s, op, t->header->revision);
		return;
	}
	case UNLOCK_DELETE: {
		Etcdserverpb__DeleteRangeResponse *d =
			etcdserverpb__delete_range_response__unpack(gw_pb_alloc(s), len, body);
		V3lockpb__UnlockResponse r = V3LOCKPB__UNLOCK_RESPONSE__INIT;
		if (!d)
			goto out_malformed;
		r.header = d->header;
		conc_answer(s, call, op, &r.base);
		return;
	}
	}
out_malformed:
	conc_fail(s, call, op, GRPC_STATUS_INTERNAL, "etcdserver: malformed result");
}

/* Waiting: the lock is ours once no key of the prefix created before ours
 * is left (waitDeletes' condition, read at once instead of key by key). */
static void lock_check(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		       struct mvcc_view *v, int64_t rev)
{
	struct lock_op *l = (struct lock_op *)op;
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	Mvccpb__KeyValue **kvs;
	size_t n;

	int mine = conc_exists(s, v, lock_key(l));
	if (mine == 0) {
		conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, LOCK_SESSION_EXPIRED);
		return;
	}
	r.key = lock_pfx(l);
	r.range_end = conc_prefix_end(s, r.key);
	r.max_create_revision = l->my_rev - 1;
	r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
	r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	r.limit = 1;
	if (mine < 0 || conc_range(s, v, &r, &kvs, &n))
		return; /* unreadable now: the next revision checks again */
	if (n > 0)
		return;
	gw_header_pb(s, rev, &h);
	lock_answer(s, call, l, &h);
}

/* The waiter's call ended: Mutex.Lock deletes its key when its wait fails. */
static void lock_abandon(struct gw_server *s, struct conc_op *op)
{
	Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;

	d.key = lock_key((struct lock_op *)op);
	conc_propose_orphan(s, CONC_IRR_DELETE_RANGE, &d.base);
}

static const struct conc_vt lock_vt = {
	.result = lock_result,
	.check = lock_check,
	.abandon = lock_abandon,
};

static void lock_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
		       size_t len)
{
	V3lockpb__LockRequest *r = gw_unpack(s, call, &v3lockpb__lock_request__descriptor, &msg, &len);
	struct lock_op *l;

	if (!r)
		return;
	l = (struct lock_op *)conc_op_new(s, call, &lock_vt, sizeof(*l) + r->name.len + 1 + CONC_LEASE_HEX_MAX);
	if (!l)
		return;
	l->name_len = r->name.len;
	if (r->name.len)
		memcpy(l->bytes, r->name.data, r->name.len);
	l->bytes[r->name.len] = '/';
	if (r->lease == 0) {
		l->op.step = LOCK_GRANT;
		conc_grant(s, call, &l->op);
		return;
	}
	lock_set_lease(l, r->lease);
	lock_txn(s, call, l);
}

static void unlock_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	V3lockpb__UnlockRequest *r =
		gw_unpack(s, call, &v3lockpb__unlock_request__descriptor, &msg, &len);
	Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	struct conc_op *op;

	if (!r)
		return;
	if (r->key.len == 0) { /* etcd's check of the Delete it makes */
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "etcdserver: key is not provided");
		return;
	}
	if (!(op = conc_op_new(s, call, &lock_vt, sizeof(struct lock_op))))
		return;
	op->step = UNLOCK_DELETE;
	d.key = r->key;
	conc_propose(s, call, op, CONC_IRR_DELETE_RANGE, &d.base);
}

int v3lock_register(struct gw_server *s)
{
	int rc = conc_handle(s, "/v3lockpb.Lock/Lock", lock_start);
	return rc ? rc : conc_handle(s, "/v3lockpb.Lock/Unlock", unlock_start);
}
