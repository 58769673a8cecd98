/* Applying etcd's lease entries (LeaseGrant, LeaseRevoke, LeaseCheckpoint)
 * as etcd's applierV3backend does (see lessor_apply.h). */
#include "stored/lessor_apply.h"

#include <errno.h>
#include <string.h>

#include "base/clock/clock.h"
#include "base/log/log.h"

/* The revoke of one lease: its keys deleted in one revision (sorted, so
 * every member deletes them in the same order), then the lease. */
static int lessor_apply_revoke(struct mvcc_store *s, struct lessor *l, int64_t id,
			       struct arena *a)
{
	ProtobufCBinaryData *keys;
	size_t n;
	int rc = lessor_keys(l, id, a, &keys, &n);

	if (rc)
		return rc;
	if (n) {
		Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
		Etcdserverpb__RequestOp **ops = arena_alloc(a, n * sizeof(*ops));
		Etcdserverpb__RequestOp *opv = arena_alloc(a, n * sizeof(*opv));
		Etcdserverpb__DeleteRangeRequest *dr = arena_alloc(a, n * sizeof(*dr));
		Etcdserverpb__TxnResponse *tr;
		if (!ops || !opv || !dr)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			etcdserverpb__delete_range_request__init(&dr[i]);
			dr[i].key = keys[i];
			etcdserverpb__request_op__init(&opv[i]);
			opv[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			opv[i].request_delete_range = &dr[i];
			ops[i] = &opv[i];
		}
		txn.n_success = n;
		txn.success = ops;
		rc = mvcc_txn(s, &txn, a, &tr);
		if (rc)
			return rc;
	}
	return lessor_remove(l, mvcc_batch_txn(s), id);
}

bool lessor_apply_handles(const Etcdserverpb__InternalRaftRequest *req)
{
	return req->lease_grant || req->lease_revoke || req->lease_checkpoint;
}

int lessor_apply(struct mvcc_store *s, struct lessor *l,
		 const Etcdserverpb__InternalRaftRequest *req, struct arena *a,
		 ProtobufCMessage **resp, Etcdserverpb__ResponseHeader ***hdr)
{
	struct btree_txn *t = mvcc_batch_txn(s);
	int rc;

	*resp = NULL;
	*hdr = NULL;
	if (req->lease_grant) {
		Etcdserverpb__LeaseGrantResponse *r = arena_alloc(a, sizeof(*r));
		int64_t ttl = 0;
		if (!r)
			return -ENOMEM;
		etcdserverpb__lease_grant_response__init(r);
		rc = lessor_grant(l, t, req->lease_grant->id, req->lease_grant->ttl,
				  clock_now_ns(), &ttl);
		if (rc)
			return rc;
		r->id = req->lease_grant->id;
		r->ttl = ttl;
		*resp = &r->base;
		*hdr = &r->header;
		return 0;
	}
	if (req->lease_revoke) {
		Etcdserverpb__LeaseRevokeResponse *r = arena_alloc(a, sizeof(*r));
		if (!r)
			return -ENOMEM;
		etcdserverpb__lease_revoke_response__init(r);
		rc = lessor_apply_revoke(s, l, req->lease_revoke->id, a);
		if (rc)
			return rc;
		*resp = &r->base;
		*hdr = &r->header;
		return 0;
	}
	Etcdserverpb__LeaseCheckpointResponse *r = arena_alloc(a, sizeof(*r));
	if (!r)
		return -ENOMEM;
	etcdserverpb__lease_checkpoint_response__init(r);
	int64_t now = clock_now_ns();
	for (size_t i = 0; i < req->lease_checkpoint->n_checkpoints; i++) {
		const Etcdserverpb__LeaseCheckpoint *cp = req->lease_checkpoint->checkpoints[i];
		rc = lessor_checkpoint(l, t, cp->id, cp->remaining_ttl, now);
		if (rc)
			return rc;
	}
	*resp = &r->base;
	*hdr = &r->header;
	return 0;
}
