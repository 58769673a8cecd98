/*
 * Messages from the Raft core to peers, through the transport (peer.h).
 *
 * A leader's messages go out at once; a follower's (votes, append
 * responses) only once everything handed to the WAL before them is
 * durable (raft.h: ready.msgs_after_persist), so they are copied and held
 * until the WAL's durable sequence reaches the one they wait for.
 */
#ifndef CETCD_RAFTD_OUTBOX_H
#define CETCD_RAFTD_OUTBOX_H

#include "shm/metrics.h"
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/msgconv.h"
#include "raftd/raft/raft.h"

struct peer;

/* A held message: a deep copy (entries and their data in one block). */
struct outbox_msg {
	uint64_t seq;           /* WAL sequence it waits for */
	struct raft_msg m;
	void *block;            /* entries and data, raftd_malloc */
};

struct outbox {
	struct peer *peer;
	struct msgconv_scratch conv;
	struct outbox_msg *held;  /* in seq order */
	size_t n_held;
	size_t cap_held;
	uint64_t sent;            /* statistics */
	uint64_t failed;          /* refused by the transport (unknown peer) */
	uint64_t superseded;      /* held MsgAppResp not sent: a later one
				   * released with it acknowledged as much */
	/* raftd's metrics block (shm/metrics.h), or NULL: bytes sent to each
	 * peer, heartbeats that could not be sent, and round trips timed
	 * from a heartbeat to its answer */
	struct shm_metrics *metrics;
	int64_t heartbeat_ns[SHM_METRICS_PEERS]; /* when the last heartbeat went to
						  * metrics->peer[i]; 0: none out */
};

/* A peer's MsgHeartbeatResp came: the round trip since the heartbeat
 * is observed (etcd_network_peer_round_trip_time_seconds). */
void outbox_heartbeat_answered(struct outbox *o, uint64_t from);

void outbox_init(struct outbox *o, struct peer *peer);
void outbox_free(struct outbox *o);

/* Sends m now. -ENOTSUP for a MsgSnap (the caller reports the snapshot
 * failed: snapshots go through peer_send_snapshot with the db), -ENOENT
 * for a peer the transport does not know, -ENOMEM. */
int outbox_send(struct outbox *o, const struct raft_msg *m);

/* Holds a copy of m until WAL sequence seq is durable. 0 or -ENOMEM. */
int outbox_hold(struct outbox *o, const struct raft_msg *m, uint64_t seq);

/* Sends the held messages whose sequence is at or below durable, in
 * order, leaving out an accepted MsgAppResp when a later one released
 * with it, to the same peer in the same term, acknowledges as much. */
void outbox_release(struct outbox *o, uint64_t durable);

#endif
