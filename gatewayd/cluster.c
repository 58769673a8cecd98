/* etcdserverpb.Cluster in gatewayd: MemberList from the members stored
 * keeps in the db (stored/members.h), as of its published root; before
 * stored applied the cluster's first entries, from the configuration
 * (this member: its name, peer and client URLs and the ids etcd derives,
 * shm/config/member.h). The changes (MemberAdd, ...) answer UNIMPLEMENTED
 * until membership changes are built. */
#include "gatewayd/server.h"

#include <errno.h>
#include <stdlib.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "shm/config/config.h"
#include "stored/members.h"

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
	rc = stored_members_load(rd.txn, ms);
	gw_read_end(s, &rd);
	return rc;
}

/* A member as etcd's Cluster service answers it (pointing into m). */
static void cluster_member_pb(const struct member_info *m, Etcdserverpb__Member *out)
{
	etcdserverpb__member__init(out);
	out->id = m->id;
	out->name = m->name ? m->name : "";
	out->n_peerurls = m->n_peer_urls;
	out->peerurls = m->peer_urls;
	out->n_clienturls = m->n_client_urls;
	out->clienturls = m->client_urls;
	out->islearner = m->is_learner;
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
	membership_init(&ms);
	int rc = cluster_load(s, &ms);
	if (rc) {
		membership_free(&ms);
		gw_read_refuse(s, call, rc);
		return;
	}
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
		cluster_member_pb(&v[i], &pbs[i]);
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

int cluster_register(struct gw_server *s)
{
	return gw_handle_unary(s, "/etcdserverpb.Cluster/MemberList", cluster_member_list);
}
