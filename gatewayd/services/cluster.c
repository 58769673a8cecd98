/* etcdserverpb.Cluster in gatewayd.
 *
 * MemberList reads the members stored keeps in the db (stored/membership_db.h),
 * as of its published root; before stored applied the cluster's first
 * entries, it answers from the configuration (this member: its name,
 * peer and client URLs and the ids etcd derives, cluster/member.h).
 *
 * MemberAdd, MemberRemove and MemberUpdate check the request as etcd's
 * server does before it proposes (URLs, --strict-reconfig-check's count
 * of started members against the db's members), then propose etcd's
 * raftpb.ConfChange; stored answers once it is applied (stored/apply.c),
 * with etcd's error when membership refuses it there. MemberPromote goes
 * to raftd, which promotes a learner only once it caught up with the
 * leader, as etcd does.
 *
 * Maintenance.MoveLeader is here too: raftd serves it (it needs the
 * membership and the leader). */
#include "gatewayd/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "raftpb/raft.pb-c.h"
#include "config/config.h"
#include "cluster/member_json.h"
#include "stored/membership_db.h"

/* The texts of a URL list, in the turn's scratch memory. */
static char **cluster_urls(struct gw_server *s, const struct config_urls *us)
{
	char **v = gw_scratch(s, (us->count ? us->count : 1) * sizeof(*v));
	for (size_t i = 0; v && i < us->count; i++)
		v[i] = us->v[i].text;
	return v;
}

/* The members as stored last published them, into ms (empty when it
 * has published none yet). */
static int cluster_load(struct gw_server *s, struct membership *ms)
{
	struct gw_read rd;
	int rc = gw_read_begin(s, &rd);
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		return rc;
	rc = membership_db_load(rd.txn, ms);
	gw_read_end(s, &rd);
	return rc;
}

/* Loads the members into ms, answering the call on failure. */
static bool cluster_load_or_refuse(struct gw_server *s, struct grpc_call *call,
				   struct membership *ms)
{
	membership_init(ms);
	int rc = cluster_load(s, ms);
	if (rc) {
		membership_free(ms);
		gw_read_refuse(s, call, rc);
		return false;
	}
	return true;
}

static void cluster_member_list(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
				size_t len)
{
	Etcdserverpb__MemberListResponse resp;
	Etcdserverpb__ResponseHeader hdr;
	const struct cetcd_config *c = s->cfg;
	struct membership ms;
	struct member_info me = { 0 };
	const struct member_info *v;
	size_t n;

	if (!gw_unpack(s, call, &etcdserverpb__member_list_request__descriptor, &msg, &len))
		return;
	if (!cluster_load_or_refuse(s, call, &ms))
		return;
	if (ms.count) {
		v = ms.v;
		n = ms.count;
	} else {
		me.id = s->member_id;
		me.name = c->name;
		me.n_peer_urls = c->initial_advertise_peer_urls.count;
		me.peer_urls = cluster_urls(s, &c->initial_advertise_peer_urls);
		me.n_client_urls = c->advertise_client_urls.count;
		me.client_urls = cluster_urls(s, &c->advertise_client_urls);
		v = &me;
		n = 1;
	}
	Etcdserverpb__Member *pbs = gw_scratch(s, n * sizeof(*pbs));
	Etcdserverpb__Member **ptrs = gw_scratch(s, n * sizeof(*ptrs));
	if (!pbs || !ptrs || (v == &me && (!me.peer_urls || !me.client_urls))) {
		membership_free(&ms);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		membership_db_pb(&v[i], &pbs[i]);
		ptrs[i] = &pbs[i];
	}

	etcdserverpb__response_header__init(&hdr);
	gw_header_pb(s, 0, &hdr);
	/* etcd's Cluster service headers carry no revision (cluster id,
	 * member id and raft term only). */
	hdr.revision = 0;
	etcdserverpb__member_list_response__init(&resp);
	resp.header = &hdr;
	resp.n_members = n;
	resp.members = ptrs;
	gw_answer(s, call, &resp.base);
	membership_free(&ms);
}

/* ---- changes ---- */

#define CLUSTER_ERR_BAD_URLS "etcdserver: given member URLs are invalid"
#define CLUSTER_ERR_NOT_STARTED \
	"etcdserver: re-configuration failed due to not enough started members"

/* etcd's IsReadyToAddVotingMember / IsReadyToRemoveVotingMember: enough
 * voting members have started (published) to keep a quorum after the
 * change. remove_id 0: an addition. */
static bool cluster_ready(const struct gw_server *s, const struct membership *ms,
			  uint64_t remove_id)
{
	size_t members = remove_id ? 0 : 1, started = 0;
	for (size_t i = 0; i < ms->count; i++) {
		const struct member_info *m = &ms->v[i];
		if (m->is_learner || m->id == remove_id)
			continue;
		/* this member serves, so it has started (etcd serves only once
		 * its own publish applied; the db this read sees may be a
		 * little older) */
		started += (m->name && m->name[0]) || m->id == s->member_id;
		members++;
	}
	/* adding a second member to a one-member cluster, as when restoring */
	if (!remove_id && started == 1 && members == 2)
		return true;
	return started >= members / 2 + 1;
}

/* A ConfChange's ID: etcd's idutil layout (the member id's low 16 bits,
 * then time), with this process's slot in place of its counter's high
 * bits so that gateways do not collide. */
static uint64_t cluster_cc_id(struct gw_server *s)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	return (s->member_id & 0xffff) << 48 | (uint64_t)(s->slot.index & 0xff) << 40 |
	       (ms & ((UINT64_C(1) << 40) - 1));
}

/* Proposes a ConfChange; context may be NULL. */
static void cluster_propose(struct gw_server *s, struct grpc_call *call, int type, uint64_t node,
			    const char *context, size_t context_len)
{
	Raftpb__ConfChange cc = RAFTPB__CONF_CHANGE__INIT;
	/* as gogo/protobuf writes it: ID, Type, NodeID always, then Context */
	cc.has_id = cc.has_type = cc.has_node_id = 1;
	cc.id = cluster_cc_id(s);
	cc.type = type;
	cc.node_id = node;
	if (context) {
		cc.has_context = 1;
		cc.context.data = (uint8_t *)context;
		cc.context.len = context_len;
	}
	size_t n = raftpb__conf_change__get_packed_size(&cc);
	uint8_t *buf = gw_scratch(s, n ? n : 1);
	if (!buf) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	raftpb__conf_change__pack(&cc, buf);
	gw_propose_conf_change(s, call, buf, n);
}

/* The request's peer URLs as etcd checks and orders them; answers the
 * call when they are refused. */
static bool cluster_urls_or_refuse(struct grpc_call *call, char **in, size_t n, char ***out)
{
	int rc = member_peer_urls(in, n, out);
	if (rc == -EINVAL)
		grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, CLUSTER_ERR_BAD_URLS);
	else if (rc)
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
	return rc == 0;
}

static void cluster_member_add(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			       size_t len)
{
	Etcdserverpb__MemberAddRequest *r =
		gw_unpack(s, call, &etcdserverpb__member_add_request__descriptor, &msg, &len);
	struct member_info m = { 0 };
	struct membership ms;
	char *ctx;
	size_t ctx_len;

	if (!r || !cluster_urls_or_refuse(call, r->peerurls, r->n_peerurls, &m.peer_urls))
		return;
	m.n_peer_urls = r->n_peerurls;
	if (!gw_auth_admin(s, call)) { /* etcd's checkMembershipOperationPermission */
		member_info_clear(&m);
		return;
	}
	m.is_learner = r->islearner;
	if (member_id_added(m.peer_urls, m.n_peer_urls, (int64_t)time(NULL), &m.id)) {
		member_info_clear(&m);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	if (s->cfg->strict_reconfig_check && !m.is_learner) {
		if (!cluster_load_or_refuse(s, call, &ms)) {
			member_info_clear(&m);
			return;
		}
		bool ready = cluster_ready(s, &ms, 0);
		membership_free(&ms);
		if (!ready) {
			member_info_clear(&m);
			grpc_call_finish(call, GRPC_STATUS_FAILED_PRECONDITION, CLUSTER_ERR_NOT_STARTED);
			return;
		}
	}
	if (member_json_encode_context(&m, false, &ctx, &ctx_len)) {
		member_info_clear(&m);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	cluster_propose(s, call,
			m.is_learner ? RAFTPB__CONF_CHANGE_TYPE__ConfChangeAddLearnerNode :
				       RAFTPB__CONF_CHANGE_TYPE__ConfChangeAddNode,
			m.id, ctx, ctx_len);
	free(ctx);
	member_info_clear(&m);
}

static void cluster_member_remove(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
				  size_t len)
{
	Etcdserverpb__MemberRemoveRequest *r =
		gw_unpack(s, call, &etcdserverpb__member_remove_request__descriptor, &msg, &len);
	struct membership ms;

	if (!r || !gw_auth_admin(s, call))
		return;
	if (s->cfg->strict_reconfig_check) {
		if (!cluster_load_or_refuse(s, call, &ms))
			return;
		const struct member_info *m = membership_find(&ms, r->id);
		bool ready = (m && m->is_learner) || cluster_ready(s, &ms, r->id);
		membership_free(&ms);
		if (!ready) {
			grpc_call_finish(call, GRPC_STATUS_FAILED_PRECONDITION, CLUSTER_ERR_NOT_STARTED);
			return;
		}
	}
	cluster_propose(s, call, RAFTPB__CONF_CHANGE_TYPE__ConfChangeRemoveNode, r->id, NULL, 0);
}

static void cluster_member_update(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
				  size_t len)
{
	Etcdserverpb__MemberUpdateRequest *r =
		gw_unpack(s, call, &etcdserverpb__member_update_request__descriptor, &msg, &len);
	struct member_info m = { 0 };
	char *ctx;
	size_t ctx_len;

	if (!r || !cluster_urls_or_refuse(call, r->peerurls, r->n_peerurls, &m.peer_urls))
		return;
	m.n_peer_urls = r->n_peerurls;
	if (!gw_auth_admin(s, call)) { /* etcd's checkMembershipOperationPermission */
		member_info_clear(&m);
		return;
	}
	m.id = r->id;
	/* etcd's context here is the Member alone: id and peer URLs */
	if (member_json_encode(&m, &ctx, &ctx_len)) {
		member_info_clear(&m);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	cluster_propose(s, call, RAFTPB__CONF_CHANGE_TYPE__ConfChangeUpdateNode, m.id, ctx, ctx_len);
	free(ctx);
	member_info_clear(&m);
}

/* Cluster.MemberPromote: raftd checks the learner and proposes. */
static void cluster_member_promote(struct gw_server *s, struct grpc_call *call,
				   const uint8_t *msg, size_t len)
{
	Etcdserverpb__MemberPromoteRequest *r =
		gw_unpack(s, call, &etcdserverpb__member_promote_request__descriptor, &msg, &len);
	if (r && gw_auth_admin(s, call))
		gw_promote(s, call, r->id);
}

/* Maintenance.MoveLeader: raftd hands leadership over (it answers). */
static void cluster_move_leader(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
				size_t len)
{
	Etcdserverpb__MoveLeaderRequest *r =
		gw_unpack(s, call, &etcdserverpb__move_leader_request__descriptor, &msg, &len);
	if (r)
		gw_move_leader(s, call, r->targetid);
}

int cluster_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		void (*fn)(struct gw_server *, struct grpc_call *, const uint8_t *, size_t);
	} methods[] = {
		{ "/etcdserverpb.Cluster/MemberList", cluster_member_list },
		{ "/etcdserverpb.Cluster/MemberAdd", cluster_member_add },
		{ "/etcdserverpb.Cluster/MemberRemove", cluster_member_remove },
		{ "/etcdserverpb.Cluster/MemberUpdate", cluster_member_update },
		{ "/etcdserverpb.Cluster/MemberPromote", cluster_member_promote },
		/* leadership is membership's too: raftd serves it */
		{ "/etcdserverpb.Maintenance/MoveLeader", cluster_move_leader },
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		int rc = gw_handle_unary(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return 0;
}
