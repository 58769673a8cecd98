/*
 * Fuzz target: the lease and alarm buckets of an installed db (a db comes
 * from the leader's snapshot or from disk: outside input), as stored
 * loads them (stored/lessor.c's lessor_load: 8-byte id -> leasepb.Lease;
 * stored/alarm.c's stored_alarms_load: an AlarmMember's bytes -> empty).
 * The input is a list of entries, each a flags byte (bit 0: the alarm
 * bucket, else the lease bucket), a key length byte, a value length byte,
 * then the key and the value (cut short at the input's end). They are
 * put in a write txn of a scratch db, loaded, and then used as stored
 * uses them: the lessor becomes primary (every lease extended), renews,
 * answers time-to-live, checkpoints, finds expired leases and due
 * checkpoints, steps down; the alarms refuse requests and answer an
 * Alarm GET, ACTIVATE and DEACTIVATE. The txn is then dropped.
 * Checked besides the sanitizers: the lessor's table and heaps agree
 * (lessor_verify) after each step, a lease id is loaded once, and no
 * alarm is loaded twice.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log/log.h"
#include "stored/alarm.h"
#include "stored/apply.h"
#include "stored/lessor.h"
#include "stored/mvcc/schema.h"
#include "fuzz_db.h"

#define SEC 1000000000LL

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_leasealarm: %s\n", what);
		abort();
	}
}

/* The entries of the input into the two buckets of t. */
static void fill(struct btree_txn *t, const uint8_t *data, size_t size)
{
	struct btree_bucket *lease, *alarm;

	require(btree_bucket_create(t, NULL, SCHEMA_BUCKET_LEASE, strlen(SCHEMA_BUCKET_LEASE),
				    &lease) == 0 &&
			btree_bucket_create(t, NULL, SCHEMA_BUCKET_ALARM,
					    strlen(SCHEMA_BUCKET_ALARM), &alarm) == 0,
		"cannot create the buckets");
	struct fuzz_rec r;
	while (fuzz_db_record(&data, &size, &r))
		(void)btree_put(r.tag & 1 ? alarm : lease, r.key, r.klen, r.val, r.vlen);
}

static void verify(const struct lessor *l, const char *after)
{
	if (lessor_verify(l) != 0) {
		fprintf(stderr, "fuzz_leasealarm: lessor_verify fails after %s\n", after);
		abort();
	}
}

static void leases(struct btree_txn *t)
{
	struct lessor_opts o = { .min_ttl = 3, .extend_ns = 2 * SEC, .checkpoint = true };
	struct lessor *l;
	struct arena a;
	int64_t *ids, now = 1000 * SEC, ttl, remaining, granted, expired[16];
	size_t n, nkeys;
	ProtobufCBinaryData *keys;
	struct lessor_cp cps[16];
	bool clear;

	arena_init(&a);
	require(lessor_new(&o, &l) == 0, "lessor_new");
	require(lessor_load(l, t) == 0, "lessor_load");
	verify(l, "lessor_load");
	require(lessor_ids(l, &a, &ids, &n) == 0 && n == lessor_count(l), "lessor_ids");
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			require(ids[i] != ids[j], "a lease id loaded twice");
	(void)lessor_set_primary(l, true, 2, now);
	verify(l, "promotion");
	for (size_t i = 0; i < n; i++) {
		(void)lessor_renew(l, ids[i], now + SEC, &ttl, &clear);
		(void)lessor_time_to_live(l, ids[i], now + 2 * SEC, i % 2, &a, &remaining,
					  &granted, &keys, &nkeys);
		if (i % 3 == 0)
			(void)lessor_checkpoint(l, t, ids[i], ids[i] % 1000, now + 3 * SEC);
	}
	verify(l, "renewals and checkpoints");
	(void)lessor_next_deadline(l);
	(void)lessor_due_checkpoints(l, INT64_MAX / 2, cps, 16);
	(void)lessor_expired(l, INT64_MAX / 2, expired, 16);
	verify(l, "expiry");
	if (n > 0)
		(void)lessor_remove(l, t, ids[0]);
	(void)lessor_set_primary(l, false, 3, now);
	verify(l, "demotion");
	lessor_free(l);
	arena_release(&a);
}

static void alarms(struct btree_txn *t)
{
	struct stored_alarms al = { 0 };
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__AlarmRequest r = ETCDSERVERPB__ALARM_REQUEST__INIT;
	Etcdserverpb__AlarmResponse *resp;
	struct stored_apply_result res;
	struct arena a;

	arena_init(&a);
	require(stored_alarms_load(t, &al) == 0, "stored_alarms_load");
	for (size_t i = 0; i < al.n; i++)
		for (size_t j = i + 1; j < al.n; j++)
			require(al.v[i].member_id != al.v[j].member_id || al.v[i].type != al.v[j].type,
				"an alarm loaded twice");
	req.put = &put;
	memset(&res, 0, sizeof(res));
	(void)stored_alarm_refuses(&al, &req, &res);
	require(stored_alarm_apply(t, &al, &r, &a, &resp) == 0, "an Alarm GET");
	require(resp->n_alarms == al.n, "an Alarm GET of every type lists every alarm");
	if (al.n > 0) {
		r.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__DEACTIVATE;
		r.memberid = al.v[0].member_id;
		r.alarm = (Etcdserverpb__AlarmType)al.v[0].type;
		(void)stored_alarm_apply(t, &al, &r, &a, &resp);
		r.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE;
		(void)stored_alarm_apply(t, &al, &r, &a, &resp);
	}
	stored_alarms_free(&al);
	arena_release(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct btree_txn *t;

	require(btree_write_begin(fuzz_scratch_db(), &t) == 0, "btree_write_begin");
	fill(t, data, size);
	leases(t);
	alarms(t);
	btree_txn_end(t);
	return 0;
}
