/* etcd 3.4's v3electionpb.Election service in gatewayd, as etcd's
 * v3election server runs it through clientv3/concurrency's Election:
 *
 *   Campaign(name, lease, value): the key <name>/<lease in hex> is put
 *   with the value and the lease unless it exists (an existing key with
 *   another value is proclaimed anew); the candidate leads once no key of
 *   the prefix created before its own is left. A candidate whose call
 *   ends while it waits resigns (deletes its key if it is still the one
 *   it made), as Election.Campaign does; one whose key went away while
 *   it waited (its lease expired) is answered "election: not leader"
 *   rather than told it leads with a key that is gone.
 *   Proclaim(leader, value): puts the value if the leader key is still
 *   the one created at leader.rev, else "election: not leader".
 *   Resign(leader): deletes the leader key if it is still that one.
 *   Leader(name): the first-created key of the prefix, else "election: no
 *   leader".
 *   Observe(name): a stream of the leader as it changes: the first-created
 *   key of the prefix whenever it is another key or was put again.
 *
 * A request without a lease (Campaign, Proclaim, Resign) gets a new 60 s
 * one, as etcd's server grants it. Errors are etcd's, as errors.New texts
 * reach a gRPC client (code Unknown); stored's as they come.
 */
#include <string.h>

#include "gatewayd/services/conc.h"
#include "stored/mvcc/mvcc.h"
#include "v3electionpb/v3election.pb-c.h"

#define EL_NOT_LEADER "election: not leader"
#define EL_NO_LEADER "election: no leader"
#define EL_MISSING_LEADER "\"leader\" field must be provided"

enum el_kind { EL_CAMPAIGN = 1, EL_PROCLAIM, EL_RESIGN, EL_LEADER, EL_OBSERVE };
enum el_step { EL_GRANT = 1, EL_TXN, EL_REPROCLAIM, EL_WAIT, EL_READ };

struct el_op {
	struct conc_op op;
	int kind;                 /* enum el_kind */
	int64_t lease;
	int64_t leader_rev;       /* the leader key's create revision */
	struct gw_header hdr;     /* Campaign: its Txn's header */
	bool observed;            /* Observe: a leader was sent */
	int64_t obs_create_rev, obs_mod_rev;
	uint64_t obs_key_hash;
	size_t name_len;          /* bytes: name "/" [hex lease] | key | value */
	size_t key_off, key_len;
	size_t value_off, value_len;
	uint8_t bytes[];
};

static ProtobufCBinaryData el_bin(struct el_op *e, size_t off, size_t len)
{
	return (ProtobufCBinaryData){ len, e->bytes + off };
}

static ProtobufCBinaryData el_pfx(struct el_op *e)
{
	return el_bin(e, 0, e->name_len + 1);
}

static ProtobufCBinaryData el_key(struct el_op *e)
{
	return el_bin(e, e->key_off, e->key_len);
}

static ProtobufCBinaryData el_value(struct el_op *e)
{
	return el_bin(e, e->value_off, e->value_len);
}

/* A new op: room for name "/" and the lease in hex, key, value. */
static struct el_op *el_new(struct gw_server *s, struct grpc_call *call, int kind,
			    ProtobufCBinaryData name, ProtobufCBinaryData key,
			    ProtobufCBinaryData value);

/* Campaign's key: etcd's fmt.Sprintf("%s%x", pfx, lease). */
static void el_set_lease(struct el_op *e, int64_t lease)
{
	char hex[CONC_LEASE_HEX_MAX];
	size_t n = conc_lease_hex(lease, hex);

	e->lease = lease;
	if (e->kind == EL_CAMPAIGN) {
		memcpy(e->bytes + e->name_len + 1, hex, n);
		e->key_off = 0;
		e->key_len = e->name_len + 1 + n;
	}
}

static uint64_t el_hash(ProtobufCBinaryData b)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < b.len; i++)
		h = (h ^ b.data[i]) * 1099511628211ull;
	return h;
}

/* The Txns of Campaign, Proclaim and Resign. */
static void el_txn(struct gw_server *s, struct grpc_call *call, struct el_op *e)
{
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__Compare *cmp[1];
	Etcdserverpb__RequestOp *then[1], *els[1] = { NULL };

	if (e->kind == EL_CAMPAIGN && e->op.step != EL_REPROCLAIM) {
		cmp[0] = conc_cmp_create(s, el_key(e), 0);
		then[0] = conc_op_put(s, el_key(e), el_value(e), e->lease);
		els[0] = conc_op_get(s, el_key(e));
		t.n_failure = 1;
		t.failure = els;
		e->op.step = EL_TXN;
	} else {
		cmp[0] = conc_cmp_create(s, el_key(e), e->leader_rev);
		then[0] = e->kind == EL_RESIGN ? conc_op_delete(s, el_key(e)) :
						 conc_op_put(s, el_key(e), el_value(e), e->lease);
		if (e->op.step != EL_REPROCLAIM)
			e->op.step = EL_TXN;
	}
	if (!cmp[0] || !then[0] || (t.n_failure && !els[0])) {
		conc_fail(s, call, &e->op, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	t.n_compare = 1;
	t.compare = cmp;
	t.n_success = 1;
	t.success = then;
	conc_propose(s, call, &e->op, CONC_IRR_TXN, &t.base);
}

static void el_campaign_answer(struct gw_server *s, struct grpc_call *call, struct el_op *e)
{
	V3electionpb__CampaignResponse r = V3ELECTIONPB__CAMPAIGN_RESPONSE__INIT;
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	V3electionpb__LeaderKey lk = V3ELECTIONPB__LEADER_KEY__INIT;

	h.cluster_id = e->hdr.cluster_id;
	h.member_id = e->hdr.member_id;
	h.revision = e->hdr.revision;
	h.raft_term = e->hdr.raft_term;
	lk.name = el_bin(e, 0, e->name_len);
	lk.key = el_key(e);
	lk.rev = e->leader_rev;
	lk.lease = e->lease;
	r.header = &h;
	r.leader = &lk;
	conc_answer(s, call, &e->op, &r.base);
}

static void el_campaign_txn_done(struct gw_server *s, struct grpc_call *call, struct el_op *e,
				 Etcdserverpb__TxnResponse *t)
{
	e->hdr.cluster_id = t->header->cluster_id;
	e->hdr.member_id = t->header->member_id;
	e->hdr.revision = t->header->revision;
	e->hdr.raft_term = t->header->raft_term;
	e->leader_rev = t->header->revision;
	if (!t->succeeded) {
		Mvccpb__KeyValue *kv = conc_txn_kv(t, 0);
		if (!kv) {
			conc_fail(s, call, &e->op, GRPC_STATUS_INTERNAL, "etcdserver: malformed result");
			return;
		}
		e->leader_rev = kv->create_revision;
		if (kv->value.len != e->value_len ||
		    (e->value_len && memcmp(kv->value.data, e->bytes + e->value_off, e->value_len))) {
			e->op.step = EL_REPROCLAIM;
			el_txn(s, call, e);
			return;
		}
	}
	e->op.step = EL_WAIT;
	conc_wait(s, &e->op, t->header->revision);
}

static void el_result(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		      int32_t status, const uint8_t *body, size_t len)
{
	struct el_op *e = (struct el_op *)op;

	if (status) {
		conc_fail_result(s, call, op, status, body, len);
		return;
	}
	if (op->step == EL_GRANT) {
		Etcdserverpb__LeaseGrantResponse *g =
			etcdserverpb__lease_grant_response__unpack(gw_pb_alloc(s), len, body);
		if (!g)
			goto out_malformed;
		el_set_lease(e, g->id);
		el_txn(s, call, e);
		return;
	}
	Etcdserverpb__TxnResponse *t = etcdserverpb__txn_response__unpack(gw_pb_alloc(s), len, body);
	if (!t || !t->header)
		goto out_malformed;
	if (op->step == EL_REPROCLAIM) {
		if (!t->succeeded) {
			conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, EL_NOT_LEADER);
			return;
		}
		op->step = EL_WAIT;
		conc_wait(s, op, t->header->revision);
		return;
	}
	switch (e->kind) {
	case EL_CAMPAIGN:
		el_campaign_txn_done(s, call, e, t);
		return;
	case EL_PROCLAIM: {
		V3electionpb__ProclaimResponse r = V3ELECTIONPB__PROCLAIM_RESPONSE__INIT;
		if (!t->succeeded) {
			conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, EL_NOT_LEADER);
			return;
		}
		r.header = t->header;
		conc_answer(s, call, op, &r.base);
		return;
	}
	case EL_RESIGN: {
		V3electionpb__ResignResponse r = V3ELECTIONPB__RESIGN_RESPONSE__INIT;
		r.header = t->header;
		conc_answer(s, call, op, &r.base);
		return;
	}
	}
out_malformed:
	conc_fail(s, call, op, GRPC_STATUS_INTERNAL, "etcdserver: malformed result");
}

/* The first-created key of e's prefix at v, or NULL (*err < 0 when it
 * could not be read). */
static Mvccpb__KeyValue *el_leader(struct gw_server *s, struct mvcc_view *v, struct el_op *e,
				   int *err)
{
	Etcdserverpb__RangeRequest r;
	Mvccpb__KeyValue **kvs;
	size_t n;

	conc_range_first_create(s, el_pfx(e), &r);
	*err = conc_range(s, v, &r, &kvs, &n);
	return *err == 0 && n ? kvs[0] : NULL;
}

static void el_campaign_check(struct gw_server *s, struct grpc_call *call, struct el_op *e,
			      struct mvcc_view *v)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Mvccpb__KeyValue **kvs;
	size_t n;

	int mine = conc_exists(s, v, el_key(e));
	if (mine == 0) {
		conc_fail(s, call, &e->op, GRPC_STATUS_UNKNOWN, EL_NOT_LEADER);
		return;
	}
	r.key = el_pfx(e);
	r.range_end = conc_prefix_end(s, r.key);
	r.max_create_revision = e->leader_rev - 1;
	r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE;
	r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	r.limit = 1;
	if (mine < 0 || conc_range(s, v, &r, &kvs, &n) || n > 0)
		return; /* still waits (or unreadable now: the next revision checks) */
	el_campaign_answer(s, call, e);
}

/* Observe: sends the leader if it is another key, or was put again, since
 * the last one sent. */
static void el_observe_check(struct gw_server *s, struct grpc_call *call, struct el_op *e,
			     struct mvcc_view *v, int64_t rev)
{
	V3electionpb__LeaderResponse r = V3ELECTIONPB__LEADER_RESPONSE__INIT;
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	int err;
	Mvccpb__KeyValue *kv = el_leader(s, v, e, &err);
	bool first = e->op.step == EL_READ;

	e->op.step = EL_WAIT;
	if (!kv || err) {
		conc_wait(s, &e->op, rev + 1);
		return;
	}
	uint64_t kh = el_hash(kv->key);
	bool same = e->observed && kh == e->obs_key_hash && kv->create_revision == e->obs_create_rev;
	if (!same || kv->mod_revision > e->obs_mod_rev) {
		/* etcd: the Get's header first, then each event's revision */
		gw_header_pb(s, first ? rev : kv->mod_revision, &h);
		r.header = &h;
		r.kv = kv;
		size_t n = v3electionpb__leader_response__get_packed_size(&r);
		uint8_t *p = grpc_call_send_reserve(call, n);
		if (!p) {
			conc_fail(s, call, &e->op, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
			return;
		}
		v3electionpb__leader_response__pack(&r, p);
		e->observed = true;
		e->obs_key_hash = kh;
		e->obs_create_rev = kv->create_revision;
		e->obs_mod_rev = kv->mod_revision;
	}
	conc_wait(s, &e->op, rev + 1);
}

static void el_check(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		     struct mvcc_view *v, int64_t rev)
{
	struct el_op *e = (struct el_op *)op;

	switch (e->kind) {
	case EL_CAMPAIGN:
		el_campaign_check(s, call, e, v);
		return;
	case EL_OBSERVE:
		el_observe_check(s, call, e, v, rev);
		return;
	case EL_LEADER: {
		V3electionpb__LeaderResponse r = V3ELECTIONPB__LEADER_RESPONSE__INIT;
		Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
		int err;
		Mvccpb__KeyValue *kv = el_leader(s, v, e, &err);
		if (err) {
			conc_fail(s, call, op, GRPC_STATUS_INTERNAL, "etcdserver: cannot read the db");
			return;
		}
		if (!kv) {
			conc_fail(s, call, op, GRPC_STATUS_UNKNOWN, EL_NO_LEADER);
			return;
		}
		gw_header_pb(s, rev, &h);
		r.header = &h;
		r.kv = kv;
		conc_answer(s, call, op, &r.base);
		return;
	}
	}
}

/* A waiting candidate's call ended: Election.Campaign resigns. */
static void el_abandon(struct gw_server *s, struct conc_op *op)
{
	struct el_op *e = (struct el_op *)op;
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__Compare *cmp[1];
	Etcdserverpb__RequestOp *then[1];

	if (e->kind != EL_CAMPAIGN)
		return;
	cmp[0] = conc_cmp_create(s, el_key(e), e->leader_rev);
	then[0] = conc_op_delete(s, el_key(e));
	if (!cmp[0] || !then[0])
		return;
	t.n_compare = 1;
	t.compare = cmp;
	t.n_success = 1;
	t.success = then;
	conc_propose_orphan(s, CONC_IRR_TXN, &t.base);
}

static const struct conc_vt el_vt = {
	.result = el_result,
	.check = el_check,
	.abandon = el_abandon,
};

static struct el_op *el_new(struct gw_server *s, struct grpc_call *call, int kind,
			    ProtobufCBinaryData name, ProtobufCBinaryData key,
			    ProtobufCBinaryData value)
{
	size_t head = name.len + 1 + CONC_LEASE_HEX_MAX;
	struct el_op *e = (struct el_op *)conc_op_new(s, call, &el_vt,
						      sizeof(*e) + head + key.len + value.len);
	if (!e)
		return NULL;
	e->kind = kind;
	e->name_len = name.len;
	if (name.len)
		memcpy(e->bytes, name.data, name.len);
	e->bytes[name.len] = '/';
	e->key_off = head;
	e->key_len = key.len;
	if (key.len)
		memcpy(e->bytes + head, key.data, key.len);
	e->value_off = head + key.len;
	e->value_len = value.len;
	if (value.len)
		memcpy(e->bytes + e->value_off, value.data, value.len);
	return e;
}

/* Campaign, Proclaim and Resign: a lease first if the request has none. */
static void el_begin(struct gw_server *s, struct grpc_call *call, struct el_op *e, int64_t lease)
{
	if (lease == 0) {
		e->op.step = EL_GRANT;
		conc_grant(s, call, &e->op);
		return;
	}
	el_set_lease(e, lease);
	el_txn(s, call, e);
}

static void campaign_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			   size_t len)
{
	V3electionpb__CampaignRequest *r =
		gw_unpack(s, call, &v3electionpb__campaign_request__descriptor, &msg, &len);
	struct el_op *e;

	if (!r || !(e = el_new(s, call, EL_CAMPAIGN, r->name, (ProtobufCBinaryData){ 0, NULL },
			       r->value)))
		return;
	el_begin(s, call, e, r->lease);
}

/* Proclaim and Resign act on a LeaderKey; etcd refuses a request without. */
static void el_leader_key_start(struct gw_server *s, struct grpc_call *call, int kind,
				V3electionpb__LeaderKey *lk, ProtobufCBinaryData value)
{
	struct el_op *e;

	if (!lk) {
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, EL_MISSING_LEADER);
		return;
	}
	if (!(e = el_new(s, call, kind, lk->name, lk->key, value)))
		return;
	e->leader_rev = lk->rev;
	el_begin(s, call, e, lk->lease);
}

static void proclaim_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			   size_t len)
{
	V3electionpb__ProclaimRequest *r =
		gw_unpack(s, call, &v3electionpb__proclaim_request__descriptor, &msg, &len);

	if (r)
		el_leader_key_start(s, call, EL_PROCLAIM, r->leader, r->value);
}

static void resign_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	V3electionpb__ResignRequest *r =
		gw_unpack(s, call, &v3electionpb__resign_request__descriptor, &msg, &len);

	if (r)
		el_leader_key_start(s, call, EL_RESIGN, r->leader, (ProtobufCBinaryData){ 0, NULL });
}

/*
 * Leader and Observe read the election's keys, "name/" and every key
 * under it, as etcd's election server reads them through its client with
 * the caller's credentials (its Range of the prefix): READ over that
 * range, or the call is answered with etcd's error and false.
 */
static bool el_may_read(struct gw_server *s, struct grpc_call *call, ProtobufCBinaryData name)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint8_t *pfx;

	if (!gw_auth_enabled(s))
		return true;
	pfx = gw_scratch(s, name.len + 1);
	if (!pfx) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return false;
	}
	if (name.len)
		memcpy(pfx, name.data, name.len);
	pfx[name.len] = '/';
	r.key = (ProtobufCBinaryData){ name.len + 1, pfx };
	r.range_end = conc_prefix_end(s, r.key);
	return gw_auth_check(s, call, gw_auth_range, &r, NULL);
}

static void el_read_start(struct gw_server *s, struct grpc_call *call, int kind,
			  const uint8_t *msg, size_t len)
{
	V3electionpb__LeaderRequest *r =
		kind == EL_OBSERVE
			? gw_unpack_stream(s, call, &v3electionpb__leader_request__descriptor, &msg, &len)
			: gw_unpack(s, call, &v3electionpb__leader_request__descriptor, &msg, &len);
	struct el_op *e;

	if (!r || !el_may_read(s, call, r->name) ||
	    !(e = el_new(s, call, kind, r->name, (ProtobufCBinaryData){ 0, NULL },
			 (ProtobufCBinaryData){ 0, NULL })))
		return;
	e->op.step = EL_READ;
	conc_read(s, call, &e->op);
}

static void leader_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	el_read_start(s, call, EL_LEADER, msg, len);
}

static void observe_start(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			  size_t len)
{
	el_read_start(s, call, EL_OBSERVE, msg, len);
}

int v3election_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		conc_start_fn fn;
	} methods[] = {
		{ "/v3electionpb.Election/Campaign", campaign_start },
		{ "/v3electionpb.Election/Proclaim", proclaim_start },
		{ "/v3electionpb.Election/Leader", leader_start },
		{ "/v3electionpb.Election/Observe", observe_start },
		{ "/v3electionpb.Election/Resign", resign_start },
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		int rc = conc_handle(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return 0;
}
