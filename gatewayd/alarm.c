/* etcdserverpb.Maintenance/Alarm in gatewayd: GET, ACTIVATE and
 * DEACTIVATE all go through Raft, as etcd 3.4 sends them
 * (EtcdServer.Alarm), and stored applies them (stored/alarm.h); and
 * whether any alarm is raised, read from the db's alarm bucket, for
 * /health. */
#include <errno.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/server.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"

/* InternalRaftRequest.alarm's field number. */
#define ALARM_IRR_FIELD 10u

static void alarm_rpc(struct gw_server *s, struct grpc_call *call, const uint8_t *msg, size_t len)
{
	if (!gw_unpack(s, call, &etcdserverpb__alarm_request__descriptor, &msg, &len))
		return;
	gw_propose(s, call, ALARM_IRR_FIELD, msg, len);
}

int alarm_register(struct gw_server *s)
{
	return gw_handle_unary(s, "/etcdserverpb.Maintenance/Alarm", alarm_rpc);
}

bool alarm_raised(struct gw_server *s)
{
	struct gw_read rd;
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	bool any = false;

	if (gw_read_begin(s, &rd))
		return false;
	if (btree_bucket_open(rd.txn, NULL, SCHEMA_BUCKET_ALARM, strlen(SCHEMA_BUCKET_ALARM),
			      &b) == 0) {
		btree_cursor_init(&c, b);
		any = btree_cursor_first(&c, &kv) == 0;
	}
	gw_read_end(s, &rd);
	return any;
}
