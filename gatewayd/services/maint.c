/* etcdserverpb.Maintenance in gatewayd: Status, from the status records
 * raftd and stored publish and the db file; Hash and HashKV, computed here
 * from the db (stored/mvcc/mvcc_hash.c); Defragment, done by stored;
 * Snapshot is snapshot.c's, registered here. The other methods answer
 * UNIMPLEMENTED (the gRPC layer does so for a method without a handler)
 * until they are built.
 *
 * A hash reads the whole key bucket (HashKV) or the whole db (Hash): a
 * gigabyte, perhaps. Computed in one go it would hold the event loop, and
 * every connection of this gatewayd, for seconds. So each is a job that
 * takes a step of MAINT_HASH_TURN_BUDGET bytes of work per loop turn
 * (maint_turn), with its read txn kept open between turns (a gw_pin,
 * server.h: a reader entry and a mapping of its own). Jobs run one at a
 * time per gatewayd, in the order they came; a job whose
 * call ends (a cancel, a deadline, its connection closing) is dropped at
 * once. While one runs the loop does not sleep. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/transport/http1.h"
#include "gatewayd/server.h"
#include "cluster/hashkv.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/mvcc.h"

/* Work per loop turn: about a millisecond of hashing. */
#define MAINT_HASH_TURN_BUDGET (1u << 20)

static void maint_status(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	Etcdserverpb__StatusResponse resp;
	Etcdserverpb__ResponseHeader hdr;
	struct status_raftd rs = { 0 };
	struct status_stored st = { 0 };
	char *errors[1] = { "etcdserver: no leader" };

	if (!gw_unpack(s, call, &etcdserverpb__status_request__descriptor, &msg, &len))
		return;
	if (status_raftd_read(s->r, &rs))
		rs = (struct status_raftd){ 0 };
	if (status_stored_read(s->r, &st))
		st = (struct status_stored){ 0 };
	etcdserverpb__response_header__init(&hdr);
	gw_header_pb(s, (int64_t)st.revision, &hdr);

	etcdserverpb__status_response__init(&resp);
	resp.header = &hdr;
	resp.version = (char *)HTTP1_ETCD_VERSION; /* the etcd API level served */
	resp.leader = rs.leader_id;
	resp.raftindex = rs.commit_index;
	resp.raftterm = rs.term;
	resp.raftappliedindex = st.applied_index;
	gw_db_sizes(s, &st, &resp.dbsize, &resp.dbsizeinuse);
	resp.islearner = rs.is_learner;
	/* etcd lists ErrNoLeader and the raised alarms among the errors */
	alarm_status_errors(s, rs.leader_id == 0 ? errors[0] : NULL, &resp.errors, &resp.n_errors);
	gw_answer(s, call, &resp.base);
}

/* Maintenance.Defragment: stored defragments the db while it goes on
 * serving (stored/defrag.h) and answers once the new file is the db. */
static void maint_defragment(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			     size_t len)
{
	if (!gw_unpack(s, call, &etcdserverpb__defragment_request__descriptor, &msg, &len) ||
	    !gw_auth_maint(s, call))
		return;
	gw_ask_stored_defrag(s, call);
}

/* ---- Hash and HashKV ---- */

/* A Hash or HashKV call being answered. The pinned txn and view exist
 * while `running`. */
struct maint_job {
	struct maint_job *next;
	uint64_t call_id;
	void *owner;             /* not NULL: a peer's /members/hashkv for this
				  * connection (maint_hashkv_peer), not a call */
	bool kv;                 /* HashKV, else Hash */
	int64_t rev;             /* HashKV's requested revision */
	bool running;
	struct gw_pin pin;
	union {
		struct mvcc_hashkv kv;
		struct mvcc_hashdb db;
	} h;
};

/* Ends what a job holds and frees it; it must be out of the list. */
static void maint_job_free(struct gw_server *s, struct maint_job *j)
{
	gw_pin_release(s, &j->pin);
	free(j);
}

/* Takes j out of the server's list and frees it. */
static void maint_job_drop(struct gw_server *s, struct maint_job *j)
{
	for (struct maint_job **p = &s->maint_jobs; *p; p = &(*p)->next) {
		if (*p == j) {
			*p = j->next;
			break;
		}
	}
	maint_job_free(s, j);
}

/*
 * Begins j's read at the root stored published last (gw_pin_begin's
 * codes; MVCC_ERR_* of the requested revision). On failure j holds what
 * it took until it is freed.
 */
static int maint_job_start(struct gw_server *s, struct maint_job *j)
{
	int rc = gw_pin_begin(s, &j->pin, true);
	if (rc)
		return rc;
	if (j->kv) {
		rc = mvcc_hashkv_begin(&j->h.kv, &j->pin.v, j->rev);
		if (rc)
			return rc;
	} else {
		mvcc_hashdb_begin(&j->h.db, &j->pin.v);
	}
	j->running = true;
	return 0;
}

static void maint_job_answer(struct gw_server *s, struct grpc_call *call, struct maint_job *j)
{
	Etcdserverpb__ResponseHeader hdr;

	etcdserverpb__response_header__init(&hdr);
	if (j->kv) {
		Etcdserverpb__HashKVResponse resp;
		etcdserverpb__hash_kvresponse__init(&resp);
		gw_header_pb(s, j->h.kv.rev, &hdr);
		resp.header = &hdr;
		resp.hash = j->h.kv.hash;
		resp.compact_revision = j->h.kv.compact_rev;
		gw_answer(s, call, &resp.base);
	} else {
		Etcdserverpb__HashResponse resp;
		etcdserverpb__hash_response__init(&resp);
		gw_header_pb(s, j->h.db.rev, &hdr);
		resp.header = &hdr;
		resp.hash = j->h.db.hash;
		gw_answer(s, call, &resp.base);
	}
}

static void maint_job_refuse(struct gw_server *s, struct grpc_call *call, int rc)
{
	if (mvcc_is_request_error(rc))
		grpc_call_finish(call, (enum grpc_status)mvcc_grpc_code(rc), mvcc_strerror(rc));
	else
		gw_read_refuse(s, call, rc);
}

/* A peer's /members/hashkv is done: its answer, with etcd's mvcc text
 * for a refused revision. */
static void maint_peer_answer(struct gw_server *s, struct maint_job *j, int rc)
{
	struct hashkv_resp r = { .member_id = s->member_id, .revision = j->h.kv.rev,
				 .hash = j->h.kv.hash, .compact_revision = j->h.kv.compact_rev };
	const char *why = NULL;

	if (rc && mvcc_is_request_error(rc)) {
		/* etcd's handler writes mvcc's error, not rpctypes' */
		why = mvcc_strerror(rc);
		if (!strncmp(why, "etcdserver: ", 12))
			why += 12;
	}
	gw_http1_hashkv_done(s, j->owner, rc, &r, why);
}

void maint_turn(struct gw_server *s)
{
	struct maint_job *j = s->maint_jobs;
	bool done = false;
	int rc = 0;

	if (!j)
		return;
	struct grpc_call *call = j->owner ? NULL : grpc_call_find(s->grpc, j->call_id);
	if (!call && !j->owner) {
		maint_job_drop(s, j); /* its cancel frees it first; kept as a safety net */
		s->more_work = s->maint_jobs != NULL;
		return;
	}
	if (!j->running) {
		rc = maint_job_start(s, j);
		if (rc == -ESTALE) {
			gw_pin_end(s, &j->pin); /* a new db file: start over next turn */
			s->more_work = true;
			return;
		}
	}
	if (rc == 0 && j->kv)
		rc = mvcc_hashkv_step(&j->h.kv, MAINT_HASH_TURN_BUDGET, &done);
	else if (rc == 0)
		rc = mvcc_hashdb_step(&j->h.db, MAINT_HASH_TURN_BUDGET, &done);
	if (j->owner && (rc || done))
		maint_peer_answer(s, j, rc);
	else if (rc)
		maint_job_refuse(s, call, rc);
	else if (done)
		maint_job_answer(s, call, j);
	if (rc || done)
		maint_job_drop(s, j);
	s->more_work = s->maint_jobs != NULL;
}

/* Queues a job for call, or for owner when call is NULL. Answers the call
 * when it cannot; -ENOMEM then. */
static int maint_job_add(struct gw_server *s, struct grpc_call *call, void *owner, bool kv,
			 int64_t rev)
{
	struct maint_job *j = calloc(1, sizeof(*j));
	struct maint_job **tail = &s->maint_jobs;

	if (!j) {
		if (call)
			grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return -ENOMEM;
	}
	j->call_id = call ? grpc_call_id(call) : 0;
	j->owner = owner;
	j->kv = kv;
	j->rev = rev;
	while (*tail)
		tail = &(*tail)->next;
	*tail = j;
	s->more_work = true; /* the first step comes with the next turn */
	return 0;
}

int maint_hashkv_peer(struct gw_server *s, void *owner, int64_t rev)
{
	return maint_job_add(s, NULL, owner, true, rev);
}

void maint_hashkv_peer_drop(struct gw_server *s, void *owner)
{
	for (struct maint_job *j = s->maint_jobs; j; j = j->next) {
		if (j->owner == owner) {
			maint_job_drop(s, j);
			return;
		}
	}
}

/* The gRPC handlers of Hash and HashKV: gw_handle_unary's, and a cancel
 * that drops the call's job. */
static void maint_hash_message(struct grpc_call *call, bool kv, const uint8_t *msg, size_t len)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	int64_t rev = 0;

	if (gw_call_of(call)->stage != GW_CALL_AWAITING)
		return; /* a second message of a unary call: ignored, as grpc-go does */
	gw_call_set(call, GW_CALL_HANDLED, 0);
	if (kv) {
		Etcdserverpb__HashKVRequest *r =
			gw_unpack(s, call, &etcdserverpb__hash_kvrequest__descriptor, &msg, &len);
		if (!r)
			return;
		rev = r->revision;
	} else if (!gw_unpack(s, call, &etcdserverpb__hash_request__descriptor, &msg, &len)) {
		return;
	}
	if (gw_auth_maint(s, call)) /* etcd's authMaintenanceServer */
		maint_job_add(s, call, NULL, kv, rev);
}

static void maint_hashkv_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	maint_hash_message(call, true, msg, len);
}

static void maint_hashdb_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	maint_hash_message(call, false, msg, len);
}

static void maint_hash_half_close(struct grpc_call *call)
{
	/* The client ended its side without a request (grpc-go reads EOF). */
	if (gw_call_of(call)->stage == GW_CALL_AWAITING)
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "EOF");
}

static void maint_hash_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	uint64_t id = grpc_call_id(call);

	(void)why;
	for (struct maint_job *j = s->maint_jobs; j; j = j->next) {
		if (j->call_id == id) {
			maint_job_drop(s, j);
			return;
		}
	}
}

static const struct grpc_handler maint_hashkv_handler = {
	.on_message = maint_hashkv_message,
	.on_half_close = maint_hash_half_close,
	.on_cancel = maint_hash_cancel,
};

static const struct grpc_handler maint_hashdb_handler = {
	.on_message = maint_hashdb_message,
	.on_half_close = maint_hash_half_close,
	.on_cancel = maint_hash_cancel,
};

int maint_register(struct gw_server *s)
{
	int rc = gw_handle_unary(s, "/etcdserverpb.Maintenance/Status", maint_status);
	if (!rc)
		rc = gw_handle_unary(s, "/etcdserverpb.Maintenance/Defragment", maint_defragment);
	if (!rc)
		rc = grpc_server_handle(s->grpc, "/etcdserverpb.Maintenance/HashKV",
					&maint_hashkv_handler, s);
	if (!rc)
		rc = grpc_server_handle(s->grpc, "/etcdserverpb.Maintenance/Hash",
					&maint_hashdb_handler, s);
	if (!rc)
		rc = snapshot_register(s);
	return rc;
}
