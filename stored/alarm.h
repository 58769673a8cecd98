/*
 * Alarms, as etcd 3.4 keeps them (etcdserver/api/v3alarm, etcdserver/
 * apply.go): a set of (member id, alarm type) raised and cleared through
 * Raft by Maintenance.Alarm, kept in the db's "alarm" bucket (the key is
 * the AlarmMember's protobuf bytes, the value empty) so that they outlive
 * restarts and the db is etcd's. While one is raised the applier refuses
 * what etcd's does:
 *   CORRUPT  (applierV3Corrupt) puts, ranges, deletes, txns, compactions,
 *            lease grants and revokes: DataLoss "etcdserver: corrupt
 *            cluster";
 *   NOSPACE  (applierV3Capped) puts, txns with a put in a branch
 *            and lease grants: ResourceExhausted "etcdserver: mvcc:
 *            database space exceeded".
 */
#ifndef CETCD_STORED_ALARM_H
#define CETCD_STORED_ALARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "stored/btree/arena.h"

struct btree_txn;
struct stored_apply_result;

struct stored_alarm {
	uint64_t member_id;
	int32_t type;            /* Etcdserverpb__AlarmType */
};

/* The raised alarms, in the order they were raised (or loaded). */
struct stored_alarms {
	struct stored_alarm *v;
	size_t n, cap;
};

/* Loads the alarm bucket through t (missing: none) into al, which the
 * caller zeroed. An entry that does not decode is skipped with a warning.
 * Returns 0, -ENOMEM, or the B+tree's error. */
int stored_alarms_load(struct btree_txn *t, struct stored_alarms *al);
void stored_alarms_free(struct stored_alarms *al);

/* Whether an alarm of type is raised (ETCDSERVERPB__ALARM_TYPE__NONE:
 * any). */
bool stored_alarms_any(const struct stored_alarms *al, int32_t type);

/* etcd's corrupt and capped appliers: true when a raised alarm refuses
 * req, with etcd's error in out. */
bool stored_alarm_refuses(const struct stored_alarms *al,
			  const Etcdserverpb__InternalRaftRequest *req,
			  struct stored_apply_result *out);

/*
 * Applies an AlarmRequest through the write txn t: GET lists the alarms
 * of its type (NONE: all), ACTIVATE raises (member, type) unless it is
 * raised, DEACTIVATE clears it if it is; logged as etcd logs it ("alarm
 * raised", "alarm disarmed"). *resp (in arena a) lists what GET found, or
 * the alarm raised or cleared (none when nothing changed). Returns 0,
 * -ENOMEM, or the B+tree's error (the batch must then be aborted).
 */
int stored_alarm_apply(struct btree_txn *t, struct stored_alarms *al,
		       const Etcdserverpb__AlarmRequest *r, struct arena *a,
		       Etcdserverpb__AlarmResponse **resp);

#endif
