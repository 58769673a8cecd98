/*
 * The lease entries of the Raft log applied to the store and the lessor:
 * LeaseGrant (etcd's rules: lessor_grant), LeaseRevoke (the lease's keys
 * deleted in one revision, sorted, then the lease removed, in the batch's
 * txn) and LeaseCheckpoint (each remaining TTL recorded and persisted).
 * Entries from etcd members apply alike.
 */
#ifndef CETCD_STORED_LESSOR_APPLY_H
#define CETCD_STORED_LESSOR_APPLY_H

#include "etcdserverpb/raft_internal.pb-c.h"
#include "stored/lessor.h"

/* Whether req is a lease entry. */
bool lessor_apply_handles(const Etcdserverpb__InternalRaftRequest *req);

/*
 * Applies the lease entry req in the store's open batch. Returns 0 with
 * *resp (the response message, in arena a) and *hdr (where its header
 * goes), a LESSOR_ERR_* or MVCC_ERR_* (nothing changed), or a
 * batch-failing error.
 */
int lessor_apply(struct mvcc_store *s, struct lessor *l,
		 const Etcdserverpb__InternalRaftRequest *req, struct arena *a,
		 ProtobufCMessage **resp, Etcdserverpb__ResponseHeader ***hdr);

#endif
