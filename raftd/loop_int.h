/*
 * raftd's loop insides, shared by its two files:
 *   loop.c       the loop: its turn, the WAL bookkeeping, readies,
 *                peers, membership, MoveLeader, status and setting up;
 *   loop_snap.c  snapshots: the .snap files (etcd's triggerSnapshot),
 *                log compaction and WAL purging, and snapshots between
 *                members (sending the db, taking and installing a
 *                leader's).
 * Everything here runs on the loop's thread.
 */
#ifndef CETCD_RAFTD_LOOP_INT_H
#define CETCD_RAFTD_LOOP_INT_H

#include "base/mem/mem.h"
#include "shm/metrics.h"
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/feed.h"
#include "raftd/lease_fwd.h"
#include "raftd/loop.h"
#include "raftd/roster.h"
#include "raftd/outbox.h"
#include "raftd/promote.h"
#include "raftd/proposals.h"
#include "raftd/raft/msgconv.h"
#include "raftd/raft/raft.h"
#include "shm/msg.h"
#include "shm/status.h"
#include "shm/waker.h"

struct initial_cluster;
struct peer;
struct peer_event;
struct shm_region;
struct snapwrite;
struct wal;

/* A MoveLeader call waiting for the transferee to lead. */
struct loop_move {
	uint32_t slot;
	struct msg_origin origin;
	uint64_t target;
	uint64_t from;            /* the leader when it was asked */
	uint64_t ticks;           /* ticks waited */
};

/* A follower that received a snapshot lately (snap_acks_cap). */
struct loop_snap_ack {
	uint64_t id;
	uint64_t ticks;           /* since */
};

/* The last entry of a ready saved into WAL batch seq. */
struct loop_persist {
	uint64_t seq;
	uint64_t index;
	uint64_t term;
};

struct loop {
	struct shm_region *r;
	struct shm_metrics *metrics;  /* raftd's block (shm/metrics.h), or NULL */
	uint64_t full_counted;        /* feed.full already counted in it */
	int64_t snap_sent_ns[SHM_METRICS_PEERS]; /* when a db copy began to go to
						  * metrics->peer[i]; 0: none */
	struct raft *raft;
	struct wal *wal;
	struct feed feed;
	struct proposals props;
	struct roster roster;
	struct peer *peer;            /* the transport, driven by this loop;
				       * NULL: no peers */
	int peer_run_ms;              /* peer_run's last answer: when it is
				       * due again (-1: not by time) */
	struct outbox outbox;         /* messages to peers */
	struct msgconv_scratch conv;  /* messages from peers */
	bool removed;                 /* this member left the cluster */
	uint64_t snapshot_count;      /* --snapshot-count */
	uint64_t raft_log_bytes;      /* --raft-log-mib (raftd/retain.h) */
	uint64_t load_failed_logged;  /* the last entry the WAL could not give
				       * back that was logged */
	char *snap_dir;               /* member/snap; NULL: no .snap files */
	struct snapwrite *snapw;      /* writes them off the loop */
	unsigned max_snapshots;       /* --max-snapshots */
	unsigned max_wals;            /* --max-wals */
	uint64_t snap_index;          /* the newest .snap file's point */
	uint64_t members_changed_at;  /* the last entry that changed membership:
				       * a snapshot at or after it holds the
				       * membership in force now */
	uint64_t purge_seq;           /* WAL batch of the newest snapshot
				       * record: once durable, segments
				       * before purge_index may go */
	uint64_t purge_index;
	unsigned snaps_inflight;      /* snapshot sends not ended yet: the log
				       * is not compacted meanwhile (etcd's
				       * inflightSnapshots) */
	uint64_t snaps_inflight_ticks; /* ticks since the count last moved */
	struct loop_snap_ack snap_acks[RAFT_MAX_MEMBERS];
	size_t n_snap_acks;
	/* the last MsgSnap stepped into the core: its v2 store and db */
	uint64_t rx_index;
	uint64_t rx_term;
	uint8_t *rx_data;             /* raftd_malloc */
	size_t rx_len;
	/* a snapshot recorded in the WAL batch install_seq: stored gets its
	 * db once that batch is durable */
	uint64_t install_seq;
	const struct initial_cluster *initial; /* --initial-cluster: the peers
					        * until membership is applied */
	bool join_seed;               /* joined a running cluster and has not
				       * replayed its own addition yet: the
				       * initial members stay peers */
	struct loop_move *moves;      /* MoveLeader calls waiting */
	size_t n_moves;
	size_t cap_moves;
	struct promotes promotes;     /* promotions waiting (promote.h) */
	struct lease_fwds lease_fwds; /* lease calls at the leader (lease_fwd.h) */
	struct shm_waker waker;        /* raftd's doorbell, bridged to epfd */
	_Atomic uint64_t waker_epoch;  /* stored's epoch as the loop last saw it */
	int epfd;
	int timer_fd;
	int stop_fd;
	int signal_fd;
	uint64_t member_id;
	uint64_t cluster_id;
	uint64_t election_ticks;
	uint64_t tick_ms;
	struct loop_persist *persist; /* saves not yet durable, in seq order */
	size_t n_persist;
	size_t cap_persist;
	struct status_raftd published;
	bool has_published;
	uint64_t lead_seen;           /* the leader as last logged */
	enum raft_role role_seen;     /* as last logged */
	uint64_t late_logged;         /* late ticks warned about */
	uint64_t term_seen;           /* and the term then */
	struct raft_hardstate saved;  /* the last hard state given to the WAL */
	unsigned retry_ms;            /* backoff while COMMITTED is full */
	bool stopping;
	bool lone;                    /* the only member: campaigns at start */
	int stop_signal;
	int fatal;                    /* the error that ends the loop */
	struct mem_dirty mem;         /* freed pages back after a burst */
	struct loop_stats stats;
};

/* ---- loop.c ---- */

/* Ends the loop with rc (the first error only; logged with what). */
void loop_fail(struct loop *l, int rc, const char *what);

/* Starts writing what the WAL holds: with peers now, through io_uring's
 * worker; alone, at the end of the turn (wal_submit_later), where raftd
 * writes and syncs a small batch itself. 0, or the WAL's error, with
 * which the loop failed. */
int loop_submit_wal(struct loop *l);

/* ---- loop_snap.c ---- */

/* A .snap file once --snapshot-count entries were applied since the last
 * one. Right after raft_advance only. */
void loop_maybe_snapshot(struct loop *l);

/* The snapshot writer finished a .snap file: the WAL records it. */
void loop_on_snapshot_written(struct loop *l);

/* WAL segments before the newest durable snapshot record go
 * (--max-wals). */
void loop_maybe_purge_wal(struct loop *l);

/* A snapshot send to id ended well. */
void loop_snap_ack_wait(struct loop *l, uint64_t id);

/* Drops log entries nobody needs any more. Right after raft_advance
 * only. */
void loop_maybe_compact(struct loop *l);

/* Sends a MsgSnap with the db. Returns 0, -ENOTSUP (no snap dir), -EAGAIN
 * (the db's index does not fit the membership or the log yet), -ENOMEM,
 * or the db's or the transport's error. */
int loop_send_snapshot(struct loop *l, const struct raft_msg *m);
/* A db copy sent to peer `to` ended (ok: delivered): its time since
 * loop_send_snapshot is observed in etcd_disk_backend_snapshot_duration_seconds. */
void loop_snap_timed(struct loop *l, uint64_t to, bool ok);

/* Keeps a received MsgSnap's db and v2 store before the core takes the
 * message. Returns 0, or why the message is dropped (-ENOTSUP without a
 * db, -ENOMEM, or the rename's or fsync's -errno). */
int loop_take_snapshot_msg(struct loop *l, struct peer_event *ev);

/* Records the snapshot a ready installed: .snap file, WAL record, the
 * membership. Returns 0 or a fatal error (logged). */
int loop_record_snapshot(struct loop *l, const struct raft_ready *rd, bool *peers_changed);

/* Hands stored the snapshot's db once the WAL holds it durably. */
void loop_maybe_install(struct loop *l);

#endif
