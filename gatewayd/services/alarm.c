/* etcdserverpb.Maintenance/Alarm in gatewayd: GET, ACTIVATE and
 * DEACTIVATE all go through Raft, as etcd 3.4 sends them
 * (EtcdServer.Alarm), and stored applies them (stored/alarm.h); whether
 * any alarm is raised, read from the db's alarm bucket, for /health; and
 * etcd's backend quota (etcdserver/quota.go, v3rpc/quota.go): a put or txn
 * that would take the db to --quota-backend-bytes is refused with
 * NoSpace and raises this member's NOSPACE alarm; and while stored's db
 * is out of space (a full disk), new writes are refused with the same
 * NoSpace. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "config/config.h"
#include "base/log/log.h"
#include "shm/status.h"
#include "gatewayd/server.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"

/* InternalRaftRequest.alarm's field number. */
#define ALARM_IRR_FIELD 10u
/* etcd's quota: its default, and the costs it counts a request at. */
#define ALARM_DEFAULT_QUOTA_BYTES (2ll << 30)
#define ALARM_KV_OVERHEAD 256
#define ALARM_LEASE_OVERHEAD 64

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

/* etcd's AlarmMember.String(): proto's compact text, zero fields left
 * out, each field followed by a space. */
static char *alarm_text(struct gw_server *s, const uint8_t *key, size_t len)
{
	Etcdserverpb__AlarmMember *m = etcdserverpb__alarm_member__unpack(gw_pb_alloc(s), len, key);
	const char *names[] = { "NONE", "NOSPACE", "CORRUPT" };
	char *t = gw_scratch(s, 64);

	if (!m || !t)
		return NULL;
	t[0] = '\0';
	if (m->memberid)
		snprintf(t, 64, "memberID:%llu ", (unsigned long long)m->memberid);
	if (m->alarm > 0 && m->alarm < 3)
		snprintf(t + strlen(t), 64 - strlen(t), "alarm:%s ", names[m->alarm]);
	return t;
}

void alarm_status_errors(struct gw_server *s, const char *first, char ***errs, size_t *n)
{
	struct gw_read rd;
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	size_t cap = 1;
	char **v;

	*errs = NULL;
	*n = 0;
	if (gw_read_begin(s, &rd) == 0) {
		if (btree_bucket_open(rd.txn, NULL, SCHEMA_BUCKET_ALARM,
				      strlen(SCHEMA_BUCKET_ALARM), &b) == 0) {
			btree_cursor_init(&c, b);
			for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv))
				cap++;
		} else {
			b = NULL;
		}
	} else {
		b = NULL;
		rd.txn = NULL;
	}
	v = gw_scratch(s, cap * sizeof(*v));
	if (v && first)
		v[(*n)++] = (char *)first;
	if (v && b) {
		btree_cursor_init(&c, b);
		for (int rc = btree_cursor_first(&c, &kv); rc == 0 && *n < cap;
		     rc = btree_cursor_next(&c, &kv)) {
			char *t = alarm_text(s, kv.key, kv.key_len);
			if (t)
				v[(*n)++] = t;
		}
	}
	if (rd.txn)
		gw_read_end(s, &rd);
	*errs = v;
}

int64_t alarm_quota_bytes(struct gw_server *s)
{
	return s->cfg->quota_backend_bytes ? s->cfg->quota_backend_bytes : ALARM_DEFAULT_QUOTA_BYTES;
}

unsigned alarm_types_raised(struct gw_server *s)
{
	struct gw_read rd;
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	unsigned mask = 0;

	if (gw_read_begin(s, &rd))
		return 0;
	if (btree_bucket_open(rd.txn, NULL, SCHEMA_BUCKET_ALARM, strlen(SCHEMA_BUCKET_ALARM),
			      &b) == 0) {
		btree_cursor_init(&c, b);
		for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
			Etcdserverpb__AlarmMember *m =
				etcdserverpb__alarm_member__unpack(gw_pb_alloc(s), kv.key_len, kv.key);
			if (m && m->alarm > 0 && m->alarm < 32)
				mask |= 1u << m->alarm;
		}
	}
	gw_read_end(s, &rd);
	return mask;
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

static int64_t alarm_cost_put(const Etcdserverpb__PutRequest *r)
{
	return ALARM_KV_OVERHEAD + (int64_t)r->key.len + (int64_t)r->value.len;
}

/* etcd's costTxn: the larger branch's direct puts. */
static int64_t alarm_cost_ops(Etcdserverpb__RequestOp **ops, size_t n)
{
	int64_t c = 0;

	for (size_t i = 0; i < n; i++)
		if (ops[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
			c += alarm_cost_put(ops[i]->request_put);
	return c;
}

/* etcd's backendQuota.Cost. */
static int64_t alarm_cost(const ProtobufCMessage *m)
{
	if (m->descriptor == &etcdserverpb__put_request__descriptor)
		return alarm_cost_put((const Etcdserverpb__PutRequest *)m);
	if (m->descriptor == &etcdserverpb__txn_request__descriptor) {
		const Etcdserverpb__TxnRequest *t = (const Etcdserverpb__TxnRequest *)m;
		int64_t ok = alarm_cost_ops(t->success, t->n_success);
		int64_t fail = alarm_cost_ops(t->failure, t->n_failure);
		return fail > ok ? fail : ok;
	}
	if (m->descriptor == &etcdserverpb__lease_grant_request__descriptor)
		return ALARM_LEASE_OVERHEAD;
	return 0;
}

bool alarm_quota_refuses(struct gw_server *s, struct grpc_call *call, const ProtobufCMessage *req)
{
	Etcdserverpb__AlarmRequest a = ETCDSERVERPB__ALARM_REQUEST__INIT;
	int64_t quota = s->cfg->quota_backend_bytes, cost = alarm_cost(req), size, in_use;
	struct status_stored st;
	uint8_t buf[32];

	if (quota < 0 || cost == 0 || status_stored_read(s->r, &st))
		return false;
	quota = alarm_quota_bytes(s);
	/* etcd's Backend().Size(): the pages up to the high-water mark, capped
	 * at the file's size; the cap only lowers it, so the stat it takes is
	 * needed only near the quota, not on every put */
	if (gw_db_high_water_bytes(s, &st) + cost < quota)
		return false;
	gw_db_sizes(s, &st, &size, &in_use);
	/* etcd 3.4 checks Size(), not SizeInUse(): pages freed by a
	 * compaction count until a defragmentation gives them back */
	int64_t used = gw_db_high_water_bytes(s, &st);
	if ((used < size ? used : size) + cost < quota)
		return false;
	/* etcd's quotaAlarmer: raise NOSPACE for this member, then refuse */
	a.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE;
	a.memberid = s->member_id;
	a.alarm = ETCDSERVERPB__ALARM_TYPE__NOSPACE;
	gw_propose(s, NULL, ALARM_IRR_FIELD, buf, protobuf_c_message_pack(&a.base, buf));
	grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, ALARM_NO_SPACE_TEXT);
	return true;
}

bool alarm_db_no_space(struct gw_server *s)
{
	struct status_stored st;

	return status_stored_read(s->r, &st) == 0 && st.db_no_space;
}

bool alarm_no_space_refuses(struct gw_server *s, struct grpc_call *call)
{
	if (!alarm_db_no_space(s))
		return false;
	s->stats.no_space++;
	grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, ALARM_NO_SPACE_TEXT);
	return true;
}
