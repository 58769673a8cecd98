/* etcdserverpb.Cluster in gatewayd: MemberList from the configuration
 * (a single member for now: its name, peer and client URLs and the ids
 * etcd derives, shm/config/member.h). The changes (MemberAdd, ...) answer
 * UNIMPLEMENTED until membership changes are built. */
#include "gatewayd/server.h"

#include <stdlib.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "shm/config/config.h"

/* The texts of a URL list, in the turn's scratch memory. */
static char **cluster_urls(struct gw_server *s, const struct config_urls *us)
{
	char **v = gw_scratch(s, (us->count ? us->count : 1) * sizeof(*v));
	for (size_t i = 0; v && i < us->count; i++)
		v[i] = us->v[i].text;
	return v;
}

static void cluster_member_list(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
				size_t len)
{
	Etcdserverpb__MemberListResponse resp;
	Etcdserverpb__ResponseHeader hdr;
	Etcdserverpb__Member me, *members[1] = { &me };
	const struct cetcd_config *c = s->cfg;

	if (!gw_unpack(s, call, &etcdserverpb__member_list_request__descriptor, &msg, &len))
		return;
	etcdserverpb__response_header__init(&hdr);
	gw_header_pb(s, 0, &hdr);
	/* etcd's Cluster service headers carry no revision (cluster id,
	 * member id and raft term only). */
	hdr.revision = 0;

	etcdserverpb__member__init(&me);
	me.id = s->member_id;
	me.name = c->name;
	me.n_peerurls = c->initial_advertise_peer_urls.count;
	me.peerurls = cluster_urls(s, &c->initial_advertise_peer_urls);
	me.n_clienturls = c->advertise_client_urls.count;
	me.clienturls = cluster_urls(s, &c->advertise_client_urls);
	if (!me.peerurls || !me.clienturls) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}

	etcdserverpb__member_list_response__init(&resp);
	resp.header = &hdr;
	resp.n_members = 1;
	resp.members = members;
	gw_answer(s, call, &resp.base);
}

int cluster_register(struct gw_server *s)
{
	return gw_handle_unary(s, "/etcdserverpb.Cluster/MemberList", cluster_member_list);
}
