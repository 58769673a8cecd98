/* stored's applier: decode, dispatch, encode (see apply.h). */
#include "shm/metrics.h"
#include "stored/apply.h"
#include "stored/alarm.h"
#include "stored/auth.h"
#include "stored/auth_check.h"
#include "stored/lessor_apply.h"
#include "stored/membership_db.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "proto/check.h"
#include "raftpb/raft.pb-c.h"
#include "base/log/log.h"

static const char apply_msg_malformed[] = "etcdserver: the request in the raft log does not decode";

/* protobuf-c allocates the decoded request in the batch's arena; nothing
 * is freed one by one. */
static void *apply_pb_alloc(void *arena, size_t size)
{
	return arena_alloc(arena, size);
}

static void apply_pb_free(void *arena, void *p)
{
	(void)arena;
	(void)p;
}

static void apply_error(struct stored_apply_result *out, int32_t status, const char *text)
{
	out->status = status;
	out->body = (const uint8_t *)text;
	out->body_len = (uint32_t)strlen(text);
}

/* The member fields of a top-level header, as etcd's v3rpc fills them
 * before answering (nested headers of a Txn keep the revision alone). */
static void apply_header_fill(const struct stored_apply_ids *ids, uint64_t term,
			      Etcdserverpb__ResponseHeader *h)
{
	h->cluster_id = ids->cluster_id;
	h->member_id = ids->member_id;
	h->raft_term = term;
}

/* Packs m into the arena as the result's body. */
static int apply_encode(struct arena *a, const ProtobufCMessage *m, struct stored_apply_result *out)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *p;

	if (n > UINT32_MAX) {
		apply_error(out, STORED_GRPC_RESOURCE_EXHAUSTED,
			    "etcdserver: the response is larger than 4 GiB");
		return 0;
	}
	p = arena_alloc(a, n ? n : 1);
	if (!p)
		return -ENOMEM;
	protobuf_c_message_pack(m, p);
	out->status = 0;
	out->body = p;
	out->body_len = (uint32_t)n;
	return 0;
}

int stored_apply_compaction_body(const struct stored_apply_ids *ids, int64_t revision,
				 uint64_t term, struct arena *a, const uint8_t **body,
				 uint32_t *len)
{
	Etcdserverpb__CompactionResponse resp = ETCDSERVERPB__COMPACTION_RESPONSE__INIT;
	Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	struct stored_apply_result r;
	int rc;

	apply_header_fill(ids, term, &hdr);
	hdr.revision = revision;
	resp.header = &hdr;
	rc = apply_encode(a, &resp.base, &r);
	if (rc)
		return rc;
	*body = r.body;
	*len = r.body_len;
	return 0;
}

/* The request kinds stored does not apply yet, in etcd's order of
 * precedence, with the name its answer gives. */
static const struct {
	size_t off;
	const char *msg;
} apply_unimplemented[] = {
#define APPLY_NOT_YET(field)                                                   \
	{ offsetof(Etcdserverpb__InternalRaftRequest, field),                  \
	  "cetcd: " #field " requests are not implemented yet" }
	APPLY_NOT_YET(lease_grant),
	APPLY_NOT_YET(lease_revoke),
	APPLY_NOT_YET(lease_checkpoint),
	APPLY_NOT_YET(alarm),
#undef APPLY_NOT_YET
};

/* Whether the request only reads (etcd's noSideEffect): applying it for
 * nobody is pointless. */
static bool apply_no_side_effect(const Etcdserverpb__InternalRaftRequest *req)
{
	return req->range || (req->txn && mvcc_txn_is_readonly(req->txn));
}

/* Counts what a KV request ran, as etcd's metrics do (resp: its answer,
 * NULL when it was refused). */
static void apply_count(struct shm_metrics *m, const Etcdserverpb__InternalRaftRequest *req,
			const ProtobufCMessage *resp)
{
	struct mvcc_op_counts c = { 0 };

	if (req->range)
		c.ranges = 1;
	else if (req->put)
		c.puts = 1;
	else if (req->delete_range)
		c.deletes = 1;
	else if (req->txn && resp)
		mvcc_txn_count_ops(req->txn, (const Etcdserverpb__TxnResponse *)resp, &c);
	shm_metric_add(m, SHM_M_MVCC_RANGE, c.ranges);
	shm_metric_add(m, SHM_M_MVCC_PUT, c.puts);
	shm_metric_add(m, SHM_M_MVCC_DELETE, c.deletes);
	if (c.ranges + c.puts + c.deletes > 1)
		shm_metric_add(m, SHM_M_MVCC_TXN, 1);
}

/*
 * Runs the KV request of req (etcd's applierV3backend.Apply order) and, if
 * a client waits, encodes its response. 0 with the result filled, or a
 * batch-failing error.
 */
static int apply_kv(struct mvcc_store *s, const struct stored_apply_ids *ids,
		    const Etcdserverpb__InternalRaftRequest *req, uint64_t term, struct arena *a,
		    struct stored_apply_result *out)
{
	ProtobufCMessage *resp = NULL;
	Etcdserverpb__ResponseHeader **hdr = NULL;
	int rc;

#define APPLY_KV(type, call, arg)                                              \
	do {                                                                   \
		type *r_ = NULL;                                               \
		rc = call(s, arg, a, &r_);                                     \
		if (r_) {                                                      \
			resp = &r_->base;                                      \
			hdr = &r_->header;                                     \
		}                                                              \
	} while (0)
	if (req->range) {
		APPLY_KV(Etcdserverpb__RangeResponse, mvcc_range_apply, req->range);
	} else if (req->put) {
		APPLY_KV(Etcdserverpb__PutResponse, mvcc_put, req->put);
	} else if (req->delete_range) {
		APPLY_KV(Etcdserverpb__DeleteRangeResponse, mvcc_delete_range, req->delete_range);
	} else if (req->txn) {
		APPLY_KV(Etcdserverpb__TxnResponse, mvcc_txn, req->txn);
	} else {
		APPLY_KV(Etcdserverpb__CompactionResponse, mvcc_compact, req->compaction);
		out->after_compaction = rc == 0 && req->compaction->physical;
	}
#undef APPLY_KV

	if (rc && !mvcc_is_request_error(rc))
		return rc;
	apply_count(ids->metrics, req, resp);
	if (rc) {
		apply_error(out, mvcc_grpc_code(rc), mvcc_strerror(rc));
		return 0;
	}
	if (!out->deliver || out->after_compaction)
		return 0;
	if (!resp) {
		apply_error(out, STORED_GRPC_INTERNAL, "etcdserver: the store gave no response");
		return 0;
	}
	if (!*hdr) {
		*hdr = arena_alloc(a, sizeof(**hdr));
		if (!*hdr)
			return -ENOMEM;
		etcdserverpb__response_header__init(*hdr);
	}
	apply_header_fill(ids, term, *hdr);
	return apply_encode(a, resp, out);
}

/* etcd's gRPC error for a refused configuration change (v3rpc's
 * toGRPCErrorMap). */
static void apply_membership_error(enum membership_error e, struct stored_apply_result *out)
{
	switch (e) {
	case MEMBERSHIP_ERR_ID_EXISTS:
		apply_error(out, STORED_GRPC_FAILED_PRECONDITION, "etcdserver: member ID already exist");
		break;
	case MEMBERSHIP_ERR_PEER_URL_EXISTS:
		apply_error(out, STORED_GRPC_FAILED_PRECONDITION, "etcdserver: Peer URLs already exists");
		break;
	case MEMBERSHIP_ERR_NOT_LEARNER:
		apply_error(out, STORED_GRPC_FAILED_PRECONDITION,
			    "etcdserver: can only promote a learner member");
		break;
	case MEMBERSHIP_ERR_TOO_MANY_LEARNERS:
		apply_error(out, STORED_GRPC_FAILED_PRECONDITION,
			    "etcdserver: too many learner members in cluster");
		break;
	default: /* removed, not found */
		apply_error(out, STORED_GRPC_NOT_FOUND, "etcdserver: member not found");
		break;
	}
}

/*
 * The answer to a configuration change this member's client proposed (its
 * origin follows the ConfChange's fields): MemberAdd, MemberRemove,
 * MemberUpdate or MemberPromote's response with the members after the
 * change, or etcd's error when the change was refused. Other membership
 * entries answer nobody.
 */
static int apply_membership_answer(const struct stored_apply_ids *ids,
				   const struct msg_committed *e, const uint8_t *data,
				   const struct membership_result *mr, struct arena *a,
				   struct stored_apply_result *out)
{
	const struct membership *ms = ids->membership;

	if (e->entry_type != RAFTPB__ENTRY_TYPE__EntryConfChange ||
	    msg_origin_find(data, e->data_len, &out->origin) != 0 ||
	    out->origin.member_id != ids->member_id)
		return 0;
	out->deliver = true;
	if (mr->change == MEMBERSHIP_REFUSED) {
		apply_membership_error(mr->error, out);
		return 0;
	}
	Etcdserverpb__ResponseHeader hdr = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	Etcdserverpb__Member *pbs = arena_alloc(a, (ms->count ? ms->count : 1) * sizeof(*pbs) + 1);
	Etcdserverpb__Member **ptrs = arena_alloc(a, (ms->count ? ms->count : 1) * sizeof(*ptrs));
	Etcdserverpb__Member added;
	if (!pbs || !ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < ms->count; i++) {
		membership_db_pb(&ms->v[i], &pbs[i]);
		ptrs[i] = &pbs[i];
	}
	/* etcd's Cluster service headers carry no revision */
	apply_header_fill(ids, e->term, &hdr);

	switch (mr->change) {
	case MEMBERSHIP_ADDED: {
		Etcdserverpb__MemberAddResponse r = ETCDSERVERPB__MEMBER_ADD_RESPONSE__INIT;
		/* etcd answers the new member with its id, peer URLs and role */
		etcdserverpb__member__init(&added);
		added.id = mr->member->id;
		added.n_peerurls = mr->member->n_peer_urls;
		added.peerurls = mr->member->peer_urls;
		added.islearner = mr->member->is_learner;
		r.header = &hdr;
		r.member = &added;
		r.n_members = ms->count;
		r.members = ptrs;
		return apply_encode(a, &r.base, out);
	}
	case MEMBERSHIP_REMOVED: {
		Etcdserverpb__MemberRemoveResponse r = ETCDSERVERPB__MEMBER_REMOVE_RESPONSE__INIT;
		r.header = &hdr;
		r.n_members = ms->count;
		r.members = ptrs;
		return apply_encode(a, &r.base, out);
	}
	case MEMBERSHIP_UPDATED: {
		Etcdserverpb__MemberUpdateResponse r = ETCDSERVERPB__MEMBER_UPDATE_RESPONSE__INIT;
		r.header = &hdr;
		r.n_members = ms->count;
		r.members = ptrs;
		return apply_encode(a, &r.base, out);
	}
	case MEMBERSHIP_PROMOTED: {
		Etcdserverpb__MemberPromoteResponse r = ETCDSERVERPB__MEMBER_PROMOTE_RESPONSE__INIT;
		r.header = &hdr;
		r.n_members = ms->count;
		r.members = ptrs;
		return apply_encode(a, &r.base, out);
	}
	default:
		out->deliver = false;
		return 0;
	}
}

/* Maintenance.Alarm (stored/alarm.h). etcd 3.4 answers it without a
 * header: neither its applier nor v3rpc's Alarm fills one in. */
static int apply_alarm(struct mvcc_store *s, const struct stored_apply_ids *ids,
		       const Etcdserverpb__AlarmRequest *r, struct arena *a,
		       struct stored_apply_result *out)
{
	Etcdserverpb__AlarmResponse *resp;
	int rc = stored_alarm_apply(mvcc_batch_txn(s), ids->alarms, r, a, &resp);

	if (rc || !out->deliver)
		return rc;
	return apply_encode(a, &resp->base, out);
}

/* resp with etcd's newHeader (the member, the store's revision, the
 * entry's term) at *hdr, encoded as the result. */
static int apply_answer(struct mvcc_store *s, const struct stored_apply_ids *ids, uint64_t term,
			struct arena *a, ProtobufCMessage *resp, Etcdserverpb__ResponseHeader **hdr,
			struct stored_apply_result *out)
{
	struct mvcc_state st;

	*hdr = arena_alloc(a, sizeof(**hdr));
	if (!*hdr)
		return -ENOMEM;
	etcdserverpb__response_header__init(*hdr);
	apply_header_fill(ids, term, *hdr);
	mvcc_store_state(s, &st);
	(*hdr)->revision = st.rev;
	return apply_encode(a, resp, out);
}

/* A lease entry (stored/lessor_apply.h), answered with etcd's header. */
static int apply_lease(struct mvcc_store *s, const struct stored_apply_ids *ids,
		       const Etcdserverpb__InternalRaftRequest *req, uint64_t term,
		       struct arena *a, struct stored_apply_result *out)
{
	ProtobufCMessage *resp;
	Etcdserverpb__ResponseHeader **hdr;
	int rc = lessor_apply(s, ids->lessor, req, a, &resp, &hdr);

	if (lessor_is_request_error(rc)) {
		apply_error(out, lessor_grpc_code(rc), lessor_strerror(rc));
		return 0;
	}
	if (mvcc_is_request_error(rc)) {
		apply_error(out, mvcc_grpc_code(rc), mvcc_strerror(rc));
		return 0;
	}
	if (rc || !out->deliver)
		return rc;
	return apply_answer(s, ids, term, a, resp, hdr, out);
}

/* An auth store entry (stored/auth.h), answered with etcd's header. */
static int apply_auth(struct mvcc_store *s, const struct stored_apply_ids *ids,
		      const Etcdserverpb__InternalRaftRequest *req, uint64_t index, uint64_t term,
		      struct arena *a, struct stored_apply_result *out)
{
	ProtobufCMessage *resp;
	Etcdserverpb__ResponseHeader **hdr;
	int rc = stored_auth_apply(mvcc_batch_txn(s), ids->auth, req, index, a, &resp, &hdr);

	if (stored_auth_is_request_error(rc)) {
		apply_error(out, stored_auth_grpc_code(rc), stored_auth_strerror(rc));
		return 0;
	}
	if (rc == 0 && ids->auth_check)
		rc = stored_auth_check_applied(ids->auth_check, mvcc_batch_txn(s), ids->auth);
	if (rc || !out->deliver)
		return rc;
	return apply_answer(s, ids, term, a, resp, hdr, out);
}

int stored_apply_entry(struct mvcc_store *s, const struct stored_apply_ids *ids,
		       const struct msg_committed *e, const uint8_t *data, struct arena *a,
		       struct stored_apply_result *out)
{
	ProtobufCAllocator al = { .alloc = apply_pb_alloc, .free = apply_pb_free,
				  .allocator_data = a };
	Etcdserverpb__InternalRaftRequest *req;
	struct mvcc_state st;
	int rc;

	memset(out, 0, sizeof(*out));
	out->index = e->index;
	out->term = e->term;
	rc = mvcc_apply_begin(s, e->index);
	if (rc)
		return rc;

	/* Not a client request: a new leader's empty entry, a configuration
	 * change, or etcd's v2 membership requests. The index moves all the
	 * same. */
	if (e->entry_type == RAFTPB__ENTRY_TYPE__EntryNormal && e->data_len == 0)
		return 0;
	if (ids->membership) {
		struct membership_result mr;
		rc = membership_db_apply(mvcc_batch_txn(s), ids->membership, e->entry_type, data,
					 e->data_len, &mr);
		if (rc)
			return rc;
		if (membership_db_handled(e->entry_type, &mr))
			return apply_membership_answer(ids, e, data, &mr, a, out);
	}
	if (e->entry_type != RAFTPB__ENTRY_TYPE__EntryNormal)
		return 0;

	rc = msg_origin_find(data, e->data_len, &out->origin);
	if (rc == -EBADMSG) {
		log_warn("skipped a committed entry that is not a protobuf message",
			 LOG_U64("index", e->index), LOG_U64("len", e->data_len));
		return 0;
	}
	out->deliver = rc == 0 && out->origin.member_id == ids->member_id;

	if (proto_check_strings(&etcdserverpb__internal_raft_request__descriptor, data,
				e->data_len) != 0 ||
	    (req = etcdserverpb__internal_raft_request__unpack(&al, e->data_len, data)) == NULL) {
		log_warn("skipped a committed entry that is not an InternalRaftRequest",
			 LOG_U64("index", e->index), LOG_U64("len", e->data_len));
		apply_error(out, STORED_GRPC_INVALID_ARGUMENT, apply_msg_malformed);
		goto out_revision;
	}

	if (req->v2) {
		apply_error(out, STORED_GRPC_UNIMPLEMENTED, "cetcd: v2 requests are not supported");
		goto out_revision;
	}
	if (ids->alarms && (stored_alarm_refuses(ids->alarms, req, out) || req->alarm)) {
		if (out->status == 0 && (rc = apply_alarm(s, ids, req->alarm, a, out)))
			return rc;
		goto out_revision;
	}
	/* the second check of the request's permissions, as of this index */
	if (ids->auth_check && (rc = stored_auth_check_request(ids->auth_check, req, a))) {
		if (!auth_is_error(rc))
			return rc;
		apply_error(out, auth_grpc_code(rc), auth_strerror(rc));
		goto out_revision;
	}
	if (req->range || req->put || req->delete_range || req->txn || req->compaction) {
		if (!out->deliver && apply_no_side_effect(req))
			goto out_revision;
		rc = apply_kv(s, ids, req, e->term, a, out);
		if (rc)
			return rc;
		goto out_revision;
	}
	if (ids->lessor && lessor_apply_handles(req)) {
		rc = apply_lease(s, ids, req, e->term, a, out);
		if (rc)
			return rc;
		goto out_revision;
	}
	if (ids->auth && stored_auth_handles(req)) {
		rc = apply_auth(s, ids, req, e->index, e->term, a, out);
		if (rc)
			return rc;
		goto out_revision;
	}
	apply_error(out, STORED_GRPC_UNIMPLEMENTED, "cetcd: this request kind is not implemented");
	for (size_t i = 0; i < sizeof(apply_unimplemented) / sizeof(apply_unimplemented[0]); i++) {
		if (*(void *const *)((const char *)req + apply_unimplemented[i].off)) {
			apply_error(out, STORED_GRPC_UNIMPLEMENTED, apply_unimplemented[i].msg);
			break;
		}
	}

out_revision:
	mvcc_store_state(s, &st);
	out->revision = (uint64_t)st.rev;
	return 0;
}

void stored_apply_describe(const uint8_t *data, uint32_t len, char *out, size_t cap)
{
	Etcdserverpb__InternalRaftRequest *req;
	const ProtobufCMessageDescriptor *d = &etcdserverpb__internal_raft_request__descriptor;
	char head[48] = "";

	if (cap == 0)
		return;
	out[0] = '\0';
	req = proto_check_strings(d, data, len) == 0
		      ? etcdserverpb__internal_raft_request__unpack(NULL, len, data)
		      : NULL;
	if (!req) {
		snprintf(out, cap, "<not an InternalRaftRequest, size:%u>", len);
		return;
	}
	if (req->header)
		snprintf(head, sizeof(head), "ID:%llu ", (unsigned long long)req->header->id);
	if (req->put) {
		const Etcdserverpb__PutRequest *p = req->put;
		int n = snprintf(out, cap, "header:<%s> put:<key:\"%.*s\" value_size:%zu ", head,
				 (int)(p->key.len > 256 ? 256 : p->key.len), (const char *)p->key.data,
				 p->value.len);
		if (n >= 0 && (size_t)n < cap && p->lease)
			n += snprintf(out + n, cap - (size_t)n, "lease:%lld ", (long long)p->lease);
		if (n >= 0 && (size_t)n < cap)
			snprintf(out + n, cap - (size_t)n, ">");
	} else if (req->lease_grant) {
		snprintf(out, cap, "header:<%s> lease_grant:<ttl:%lld-second id:%016llx>", head,
			 (long long)req->lease_grant->ttl, (unsigned long long)req->lease_grant->id);
	} else if (req->lease_revoke) {
		snprintf(out, cap, "header:<%s> lease_revoke:<id:%016llx>", head,
			 (unsigned long long)req->lease_revoke->id);
	} else {
		/* the first request field set, by its .proto name */
		const char *name = "unknown";
		for (unsigned i = 0; i < d->n_fields; i++) {
			const ProtobufCFieldDescriptor *f = &d->fields[i];
			if (f->type == PROTOBUF_C_TYPE_MESSAGE && strcmp(f->name, "header") != 0 &&
			    *(void *const *)((const char *)req + f->offset)) {
				name = f->name;
				break;
			}
		}
		snprintf(out, cap, "header:<%s> %s:<size:%u>", head, name, len);
	}
	etcdserverpb__internal_raft_request__free_unpacked(req, NULL);
}
