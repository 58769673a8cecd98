/* etcdserverpb.Maintenance in gatewayd: Status, from the status records
 * raftd and stored publish and the db file. The other methods answer
 * UNIMPLEMENTED (the gRPC layer does so for a method without a handler)
 * until they are built. */
#include "gatewayd/server.h"

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/http1.h"

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
	resp.islearner = false;
	if (rs.leader_id == 0) {
		/* etcd lists ErrNoLeader among the errors */
		resp.n_errors = 1;
		resp.errors = errors;
	}
	gw_answer(s, call, &resp.base);
}

int maint_register(struct gw_server *s)
{
	return gw_handle_unary(s, "/etcdserverpb.Maintenance/Status", maint_status);
}
