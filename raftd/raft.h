/*
 * The Raft core: consensus as a pure state machine, with no I/O, no clock
 * and no threads. The caller (raftd's event loop) feeds it messages from
 * peers (raft_step), clock ticks (raft_tick), proposals and read requests,
 * and then collects a "ready" set of work:
 *
 *   entries   to append to the WAL, then the hard state (when changed);
 *   msgs      to send to peers: at once on a leader; on any other node
 *             only after everything handed to the WAL so far, this
 *             ready's entries and state included, is durable
 *             (ready.msgs_after_persist);
 *   committed entries committed in the cluster AND durable in this
 *             member's WAL, in order, to hand to the application;
 *   reads     ReadIndex results: the caller may serve a read with that
 *             context once the application has applied up to index.
 *
 * After taking everything out of a ready (encoding messages, copying
 * entries into the WAL's batch), the caller calls raft_advance. When a WAL
 * batch becomes durable, it reports the last entry of it with
 * raft_persisted; a leader counts its own vote for an entry only then,
 * never at append time.
 *
 * Follows etcd's raft (go.etcd.io/etcd/raft) in behaviour: pre-vote,
 * check-quorum with leader leases for votes, log matching with reject
 * hints, pipelined replication with a per-follower window, heartbeats
 * carrying the commit index, ReadIndex confirmed by one heartbeat round,
 * snapshots to followers that fell behind the compacted log. Membership
 * is fixed by the configuration here (conf change entries are carried
 * but not applied by the core).
 *
 * Functions returning int give 0 or a negative errno. A struct raft is
 * used by one thread at a time.
 */
#ifndef CETCD_RAFTD_RAFT_H
#define CETCD_RAFTD_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raftlog.h"

/* raftpb.MessageType; the values are etcd's. */
enum raft_msg_type {
	RAFT_MSG_HUP = 0,
	RAFT_MSG_BEAT = 1,
	RAFT_MSG_PROP = 2,
	RAFT_MSG_APP = 3,
	RAFT_MSG_APP_RESP = 4,
	RAFT_MSG_VOTE = 5,
	RAFT_MSG_VOTE_RESP = 6,
	RAFT_MSG_SNAP = 7,
	RAFT_MSG_HEARTBEAT = 8,
	RAFT_MSG_HEARTBEAT_RESP = 9,
	RAFT_MSG_UNREACHABLE = 10,
	RAFT_MSG_SNAP_STATUS = 11,
	RAFT_MSG_CHECK_QUORUM = 12,
	RAFT_MSG_TRANSFER_LEADER = 13,
	RAFT_MSG_TIMEOUT_NOW = 14,
	RAFT_MSG_READ_INDEX = 15,
	RAFT_MSG_READ_INDEX_RESP = 16,
	RAFT_MSG_PRE_VOTE = 17,
	RAFT_MSG_PRE_VOTE_RESP = 18,
};

/* One message (raftpb.Message's fields that the core uses). */
struct raft_msg {
	enum raft_msg_type type;
	uint64_t to;
	uint64_t from;
	uint64_t term;
	uint64_t log_term;
	uint64_t index;
	uint64_t commit;
	bool reject;
	uint64_t reject_hint;
	uint64_t context;      /* ReadIndex: the request's id; 0 = none */
	/* MsgApp and MsgProp: the entries. In a message from raft_ready
	 * they point into the core's log, valid until raft_advance; in a
	 * message given to raft_step, they are read during the call only. */
	const struct raft_entry *entries;
	size_t n_entries;
	/* MsgSnap: the snapshot's point (its data travels beside). */
	uint64_t snap_index;
	uint64_t snap_term;
};

enum raft_role {
	RAFT_FOLLOWER,
	RAFT_PRE_CANDIDATE,
	RAFT_CANDIDATE,
	RAFT_LEADER,
};

struct raft_config {
	uint64_t id;              /* this member, not 0 */
	const uint64_t *voters;   /* every voter, this one included; copied */
	size_t n_voters;          /* at most RAFT_MAX_VOTERS */
	unsigned election_ticks;  /* a follower campaigns after a random
				   * [election, 2 * election) ticks without
				   * a leader */
	unsigned heartbeat_ticks; /* a leader sends heartbeats this often */
	bool pre_vote;
	bool check_quorum;
	size_t max_msg_bytes;     /* entry data per MsgApp (at least one entry) */
	unsigned max_inflight;    /* MsgApps in flight per follower */
	uint64_t seed;            /* randomizes election timeouts */
};

#define RAFT_MAX_VOTERS 64

/* etcd's defaults, with the caller ticking once per heartbeat interval
 * (100 ms): election 10 ticks (1000 ms), heartbeat 1 tick, pre-vote and
 * check-quorum on, 1 MiB per MsgApp, 256 MsgApps in flight. */
void raft_config_defaults(struct raft_config *c);

/* A ReadIndex result: reads with this context may be served once the
 * application reached index. */
struct raft_read_state {
	uint64_t index;
	uint64_t context;
};

struct raft_ready {
	const struct raft_entry *entries;   /* to append to the WAL, in order */
	size_t n_entries;
	bool has_snapshot;         /* a snapshot from the leader replaced the
				    * log: record it in the WAL (before the
				    * entries), and install it in the
				    * application only once that is durable,
				    * so the application is never ahead of
				    * the WAL's snapshot (as etcd orders it) */
	uint64_t snap_index;
	uint64_t snap_term;
	bool hs_changed;           /* then append hs after the entries */
	struct raft_hardstate hs;
	const struct raft_entry *committed; /* to apply, in order */
	size_t n_committed;
	const struct raft_msg *msgs;
	size_t n_msgs;
	bool msgs_after_persist;
	const struct raft_read_state *reads;
	size_t n_reads;
	bool soft_changed;         /* leader or role changed since the last ready */
	uint64_t leader;           /* 0 = none known */
	enum raft_role role;
};

struct raft;

/*
 * A node with the given hard state and log: ents[0..n) (entries after the
 * snapshot point, all of them durable, as replayed from the WAL; owned by
 * the core from here on, allocated with raftd_malloc) and applied, the
 * index the application has already applied (entries after it up to the
 * commit index come out of the first readies). applied may be past the
 * hard state's commit (the state recording it did not reach the WAL);
 * those entries count as committed, which is right because the
 * application only ever applied committed entries of this log or a
 * snapshot the WAL recorded first. A fresh member passes an empty hard
 * state and log. -EINVAL (bad configuration, entries out of order, commit
 * beyond the log; ents not taken), -ENOMEM.
 */
int raft_new(const struct raft_config *cfg, const struct raft_hardstate *hs,
	     uint64_t snap_index, uint64_t snap_term, struct raft_entry *ents, size_t n,
	     uint64_t applied, struct raft **out);

void raft_free(struct raft *r);

/* One tick of the logical clock. */
void raft_tick(struct raft *r);

/* Feeds a message from a peer. -EINVAL for a message that names another
 * member as recipient or a type peers do not send; -ENOMEM. Messages from
 * stale terms and unknown members are dropped silently (Raft expects
 * that), returning 0. */
int raft_step(struct raft *r, const struct raft_msg *m);

/*
 * Proposes entries (type and data of each; term and index are assigned
 * here), appended to the leader's log at once. -EAGAIN when this node is
 * not the leader (raft_leader says who is, 0 if none is known: the caller
 * forwards or retries), -ENOMEM.
 */
int raft_propose(struct raft *r, const struct raft_entry *ents, size_t n);

/* Asks for a read index with context (not 0, unique among pending
 * requests). The result comes in a later ready's reads. A follower asks
 * its leader. -EAGAIN without a known leader, -ENOMEM. */
int raft_read_index(struct raft *r, uint64_t context);

/* Campaigns now (as an election timeout would). */
int raft_campaign(struct raft *r);

/* Whether raft_ready would return any work. */
bool raft_has_ready(const struct raft *r);

/* Fills rd with the pending work; everything it points to stays valid and
 * unchanged until raft_advance. Call nothing else on r in between. */
void raft_ready(struct raft *r, struct raft_ready *rd);

/* The caller took everything out of rd (the last raft_ready). */
void raft_advance(struct raft *r, const struct raft_ready *rd);

/* The WAL made entries up to index durable, the last of them of term term
 * (and every hard state and snapshot handed to it before them). Stale
 * reports (an entry since replaced) are ignored. */
void raft_persisted(struct raft *r, uint64_t index, uint64_t term);

/* The leader tried to send a snapshot to peer: ok says whether it was
 * received; replication to it resumes either way. */
void raft_report_snapshot(struct raft *r, uint64_t peer, bool ok);

/* The leader could not reach peer: replication to it slows to probing. */
void raft_report_unreachable(struct raft *r, uint64_t peer);

/* Drops log entries up to index (clamped to applied and durable): the
 * application has a snapshot there. Call only right after raft_advance. */
void raft_compact(struct raft *r, uint64_t index);

uint64_t raft_term(const struct raft *r);
uint64_t raft_leader(const struct raft *r);
enum raft_role raft_role(const struct raft *r);
bool raft_is_leader(const struct raft *r);
uint64_t raft_commit_index(const struct raft *r);
uint64_t raft_last_index(const struct raft *r);
/* The log, read-only (tests and the WAL's replay checks). */
const struct raftlog *raft_log(const struct raft *r);

#endif
