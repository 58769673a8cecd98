/* etcdserverpb.Lease in gatewayd, as etcd 3.4's v3rpc serves it.
 *
 * LeaseGrant and LeaseRevoke go through Raft (gw_propose) and stored
 * applies them (stored/lessor_apply.h); a grant without an ID gets one
 * here. LeaseKeepAlive (a bidirectional stream: one answer per request,
 * carrying the ID and the new TTL, 0 for an unknown lease), LeaseTimeToLive
 * and LeaseLeases ask stored's lessor on the slot's SHM_SLOT_TO_STORED
 * ring (gw_ask_stored). */
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/server.h"
#include "shm/msg.h"

/* Fields of InternalRaftRequest the lease writes go in. */
enum {
	LEASE_IRR_GRANT = 8,
	LEASE_IRR_REVOKE = 9,
};

/*
 * Server-chosen lease IDs, after etcd's idutil: the member id's low 16
 * bits, then this gateway's slot (6 bits, so gateways of one member never
 * collide: invariant 2, docs/invariants.md), then a suffix that starts at the time in
 * milliseconds shifted by 8 and counts up from there; the top bit is
 * cleared as etcd clears it. One gatewayd process serves one server, so
 * the suffix is per process.
 */
static uint64_t lease_id_suffix;

#define LEASE_ID_SUFFIX_BITS 42

int64_t lease_next_id(struct gw_server *s)
{
	uint64_t mask = (UINT64_C(1) << LEASE_ID_SUFFIX_BITS) - 1;

	if (lease_id_suffix == 0) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
		lease_id_suffix = ms << 8;
	}
	lease_id_suffix++;
	uint64_t id = (s->member_id & 0xffff) << 48 | (uint64_t)(s->slot.index & 0x3f) << 42 |
		      (lease_id_suffix & mask);
	id &= ~(UINT64_C(1) << 63);
	if (id == 0)
		id = 1;
	return (int64_t)id;
}

static void lease_grant(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			size_t len)
{
	Etcdserverpb__LeaseGrantRequest *r =
		gw_unpack(s, call, &etcdserverpb__lease_grant_request__descriptor, &msg, &len);

	if (!r || alarm_quota_refuses(s, call, &r->base) || alarm_no_space_refuses(s, call))
		return;
	if (r->id == 0)
		r->id = lease_next_id(s);
	size_t n = etcdserverpb__lease_grant_request__get_packed_size(r);
	uint8_t *body = gw_scratch(s, n ? n : 1);
	if (!body) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	etcdserverpb__lease_grant_request__pack(r, body);
	gw_propose(s, call, LEASE_IRR_GRANT, body, n);
}

static void lease_revoke(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	if (!gw_unpack(s, call, &etcdserverpb__lease_revoke_request__descriptor, &msg, &len) ||
	    alarm_no_space_refuses(s, call))
		return;
	gw_propose(s, call, LEASE_IRR_REVOKE, msg, len);
}

static void lease_time_to_live(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			       size_t len)
{
	Etcdserverpb__LeaseTimeToLiveRequest *r =
		gw_unpack(s, call, &etcdserverpb__lease_time_to_live_request__descriptor, &msg, &len);
	struct msg_keepalive m = { .op = MSG_LEASE_TIME_TO_LIVE };

	if (!r)
		return;
	m.lease_id = r->id;
	m.flags = r->keys ? MSG_LEASE_F_KEYS : 0;
	gw_ask_stored(s, call, &m, false);
}

static void lease_leases(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			 size_t len)
{
	struct msg_keepalive m = { .op = MSG_LEASE_LEASES };

	if (!gw_unpack(s, call, &etcdserverpb__lease_leases_request__descriptor, &msg, &len))
		return;
	gw_ask_stored(s, call, &m, false);
}

/* ---- LeaseKeepAlive: a stream of requests, one answer each ---- */

static void lease_keepalive_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	Etcdserverpb__LeaseKeepAliveRequest *r =
		gw_unpack_stream(s, call, &etcdserverpb__lease_keep_alive_request__descriptor, &msg, &len);
	struct msg_keepalive m = { .op = MSG_LEASE_KEEPALIVE };

	if (!r)
		return;
	gw_call_set(call, GW_CALL_HANDLED, 0);
	m.lease_id = r->id;
	gw_ask_stored(s, call, &m, true);
}

/* The client closed its side: etcd's server ends the stream with OK once
 * it has answered every renewal it received (gw_stream_answered). */
static void lease_keepalive_half_close(struct grpc_call *call)
{
	struct gw_call *g = gw_call_of(call);

	if (g->inflight == 0)
		grpc_call_finish(call, GRPC_STATUS_OK, NULL);
	else
		g->half_closed = 1;
}

static const struct grpc_handler lease_keepalive_handler = {
	.on_message = lease_keepalive_message,
	.on_half_close = lease_keepalive_half_close,
};

int lease_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		gw_unary_fn fn;
	} methods[] = {
		{ "/etcdserverpb.Lease/LeaseGrant", lease_grant },
		{ "/etcdserverpb.Lease/LeaseRevoke", lease_revoke },
		{ "/etcdserverpb.Lease/LeaseTimeToLive", lease_time_to_live },
		{ "/etcdserverpb.Lease/LeaseLeases", lease_leases },
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		int rc = gw_handle_unary(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return grpc_server_handle(s->grpc, "/etcdserverpb.Lease/LeaseKeepAlive",
				  &lease_keepalive_handler, s);
}
