/* Alarms (see alarm.h). */
#include "stored/alarm.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log/log.h"
#include "stored/alloc.h"
#include "stored/apply.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"

/* etcd's rpctypes errors. */
static const char alarm_err_corrupt[] = "etcdserver: corrupt cluster";
static const char alarm_err_nospace[] = "etcdserver: mvcc: database space exceeded";

/* etcd's AlarmType.String(). */
static const char *alarm_type_name(int32_t type)
{
	switch (type) {
	case ETCDSERVERPB__ALARM_TYPE__NOSPACE:
		return "NOSPACE";
	case ETCDSERVERPB__ALARM_TYPE__CORRUPT:
		return "CORRUPT";
	default:
		return "NONE";
	}
}

/* The bucket key of an alarm: its AlarmMember's bytes. */
static size_t alarm_key(const struct stored_alarm *m, uint8_t buf[32])
{
	Etcdserverpb__AlarmMember pb = ETCDSERVERPB__ALARM_MEMBER__INIT;

	pb.memberid = m->member_id;
	pb.alarm = (Etcdserverpb__AlarmType)m->type;
	return protobuf_c_message_pack(&pb.base, buf);
}

static int alarm_add(struct stored_alarms *al, const struct stored_alarm *m)
{
	int rc = stored_reserve((void **)&al->v, &al->cap, al->n + 1, sizeof(*al->v), 4);
	if (rc < 0)
		return rc;
	al->v[al->n++] = *m;
	return 0;
}

static struct stored_alarm *alarm_find(struct stored_alarms *al, uint64_t member_id, int32_t type)
{
	for (size_t i = 0; i < al->n; i++)
		if (al->v[i].member_id == member_id && al->v[i].type == type)
			return &al->v[i];
	return NULL;
}

int stored_alarms_load(struct btree_txn *t, struct stored_alarms *al)
{
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	int rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_ALARM, strlen(SCHEMA_BUCKET_ALARM), &b);

	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		Etcdserverpb__AlarmMember *pb =
			etcdserverpb__alarm_member__unpack(NULL, kv.key_len, kv.key);
		if (!pb) {
			log_warn("skipped an alarm in the db that cannot be decoded",
				 LOG_BYTES("key", kv.key, kv.key_len));
			continue;
		}
		struct stored_alarm m = { pb->memberid, pb->alarm };
		etcdserverpb__alarm_member__free_unpacked(pb, NULL);
		if (!alarm_find(al, m.member_id, m.type) && alarm_add(al, &m))
			return -ENOMEM;
	}
	return rc == -ENOENT ? 0 : rc;
}

void stored_alarms_free(struct stored_alarms *al)
{
	stored_free(al->v);
	memset(al, 0, sizeof(*al));
}

bool stored_alarms_any(const struct stored_alarms *al, int32_t type)
{
	for (size_t i = 0; al && i < al->n; i++)
		if (type == ETCDSERVERPB__ALARM_TYPE__NONE || al->v[i].type == type)
			return true;
	return false;
}

/* etcd's quota cost of a txn is above 0: a put directly in either branch
 * (etcd 3.4's costTxn does not look into nested txns). */
static bool alarm_txn_has_put(const Etcdserverpb__TxnRequest *r)
{
	for (size_t i = 0; i < r->n_success; i++)
		if (r->success[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
			return true;
	for (size_t i = 0; i < r->n_failure; i++)
		if (r->failure[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
			return true;
	return false;
}

static bool alarm_refuse(struct stored_apply_result *out, int32_t status, const char *text)
{
	out->status = status;
	out->body = (const uint8_t *)text;
	out->body_len = (uint32_t)strlen(text);
	return true;
}

bool stored_alarm_refuses(const struct stored_alarms *al,
			  const Etcdserverpb__InternalRaftRequest *req,
			  struct stored_apply_result *out)
{
	if (stored_alarms_any(al, ETCDSERVERPB__ALARM_TYPE__CORRUPT) &&
	    (req->put || req->range || req->delete_range || req->txn || req->compaction ||
	     req->lease_grant || req->lease_revoke))
		return alarm_refuse(out, STORED_GRPC_DATA_LOSS, alarm_err_corrupt);
	if (stored_alarms_any(al, ETCDSERVERPB__ALARM_TYPE__NOSPACE) &&
	    (req->put || req->lease_grant || (req->txn && alarm_txn_has_put(req->txn))))
		return alarm_refuse(out, STORED_GRPC_RESOURCE_EXHAUSTED, alarm_err_nospace);
	return false;
}

/* The response's list: n alarms from v, copied into the arena. */
static int alarm_list(struct arena *a, const struct stored_alarm *v, size_t n, int32_t type,
		      Etcdserverpb__AlarmResponse *resp)
{
	resp->alarms = arena_alloc(a, (n ? n : 1) * sizeof(*resp->alarms));
	if (!resp->alarms)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		Etcdserverpb__AlarmMember *m;
		if (type != ETCDSERVERPB__ALARM_TYPE__NONE && v[i].type != type)
			continue;
		m = arena_alloc(a, sizeof(*m));
		if (!m)
			return -ENOMEM;
		etcdserverpb__alarm_member__init(m);
		m->memberid = v[i].member_id;
		m->alarm = (Etcdserverpb__AlarmType)v[i].type;
		resp->alarms[resp->n_alarms++] = m;
	}
	return 0;
}

/* Opens the alarm bucket of a write txn, creating it if need be. */
static int alarm_bucket(struct btree_txn *t, struct btree_bucket **b)
{
	int rc = btree_bucket_create(t, NULL, SCHEMA_BUCKET_ALARM, strlen(SCHEMA_BUCKET_ALARM), b);

	return rc == -EEXIST ? 0 : rc;
}

int stored_alarm_apply(struct btree_txn *t, struct stored_alarms *al,
		       const Etcdserverpb__AlarmRequest *r, struct arena *a,
		       Etcdserverpb__AlarmResponse **resp)
{
	struct stored_alarm m = { r->memberid, r->alarm };
	struct btree_bucket *b;
	struct stored_alarm *have = alarm_find(al, m.member_id, m.type);
	bool first, last;
	char from[24];
	uint8_t key[32];
	size_t klen;
	int rc;

	*resp = arena_alloc(a, sizeof(**resp));
	if (!*resp)
		return -ENOMEM;
	etcdserverpb__alarm_response__init(*resp);
	snprintf(from, sizeof(from), "%" PRIx64, m.member_id);
	switch (r->action) {
	case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__GET:
		return alarm_list(a, al->v, al->n, m.type, *resp);
	case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE:
		if (have || m.type == ETCDSERVERPB__ALARM_TYPE__NONE)
			return 0;
		first = !stored_alarms_any(al, m.type);
		klen = alarm_key(&m, key);
		if ((rc = alarm_bucket(t, &b)) || (rc = btree_put(b, key, klen, "", 0)) ||
		    (rc = alarm_add(al, &m)))
			return rc;
		if (first)
			log_warn("alarm raised", LOG_STR("alarm", alarm_type_name(m.type)),
				 LOG_STR("from", from));
		return alarm_list(a, &m, 1, ETCDSERVERPB__ALARM_TYPE__NONE, *resp);
	case ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE:
		if (!have)
			return 0;
		klen = alarm_key(&m, key);
		if ((rc = alarm_bucket(t, &b)) || ((rc = btree_del(b, key, klen)) && rc != -ENOENT))
			return rc;
		*have = al->v[--al->n];
		last = !stored_alarms_any(al, m.type);
		if (last)
			log_warn("alarm disarmed", LOG_STR("alarm", alarm_type_name(m.type)),
				 LOG_STR("from", from));
		return alarm_list(a, &m, 1, ETCDSERVERPB__ALARM_TYPE__NONE, *resp);
	default:
		return 0;
	}
}
