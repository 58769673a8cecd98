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
 * snapshots to followers that fell behind the compacted log, single-step
 * membership changes (raftpb.ConfChange, applied by the application
 * through raft_apply_conf_change, as etcd's node.ApplyConfChange),
 * learners, and leadership transfer.
 *
 * Membership. The configuration (voters and learners) changes only when
 * the application applies a committed EntryConfChange entry and calls
 * raft_apply_conf_change. As in etcd, a leader accepts one conf change at
 * a time: one proposed while an earlier one may be unapplied is replaced
 * by an empty EntryNormal entry (raft_propose still returns 0). A member
 * not in the configuration, or a learner, never campaigns. A leader that
 * applies its own removal stays leader (etcd 3.4 does the same) but no
 * longer counts itself and drops proposals; the application is expected
 * to stop such a member, as etcd's server does.
 *
 * Wire mapping (a codec translates struct raft_msg to raftpb.Message):
 *   context   MsgReadIndex and MsgReadIndexResp: Entries[0].Data holds
 *             the context as 8 bytes big-endian (etcd's servers use
 *             exactly that for their read request ids; n_entries is 0
 *             here). MsgHeartbeat and MsgHeartbeatResp: Context holds the
 *             8 bytes big-endian, or is empty for 0. Any other length
 *             from a peer is decoded as 0.
 *   transfer  MsgVote and MsgPreVote: Context = "CampaignTransfer"
 *             (etcd's campaignTransfer) when set, empty otherwise.
 *   snap_*    MsgSnap: Snapshot.Metadata.{Index,Term,ConfState}.
 *   term      0 on MsgProp and MsgReadIndex (etcd sends them without).
 *
 * Functions returning int give 0 or a negative errno. A struct raft is
 * used by one thread at a time.
 */
#ifndef CETCD_RAFTD_RAFT_H
#define CETCD_RAFTD_RAFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"

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

/* At most this many members (voters and learners together). */
#define RAFT_MAX_MEMBERS 64
/* The former name of the bound; voters are members too. */
#define RAFT_MAX_VOTERS RAFT_MAX_MEMBERS

/* raftpb.ConfState: the members, each id once across both lists. */
struct raft_conf_state {
	uint64_t voters[RAFT_MAX_MEMBERS];
	size_t n_voters;
	uint64_t learners[RAFT_MAX_MEMBERS];
	size_t n_learners;
};

/* raftpb.ConfChangeType; the values are etcd's. */
enum raft_conf_change_type {
	RAFT_CONF_ADD_NODE = 0,
	RAFT_CONF_REMOVE_NODE = 1,
	RAFT_CONF_UPDATE_NODE = 2,
	RAFT_CONF_ADD_LEARNER_NODE = 3,
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
	bool transfer;         /* MsgVote of a leadership transfer: granted
				* even while a leader's lease holds */
	/* MsgApp and MsgProp: the entries. In a message from raft_ready
	 * they point into the core's log, valid until raft_advance; in a
	 * message given to raft_step, they are read during the call only. */
	const struct raft_entry *entries;
	size_t n_entries;
	/* MsgSnap: the snapshot's point and the configuration there (its
	 * data travels beside). snap_conf from raft_ready points into the
	 * core, valid until raft_advance; given to raft_step it is read
	 * during the call only, and NULL means "the receiver's current
	 * configuration" (callers without membership changes). From
	 * raft_ready it names the core's snapshot point; the transport
	 * sends the application's newest state instead, as etcd's server
	 * does (its applied index and term, and the configuration in force
	 * there: raft_conf_state): a member added after the core's
	 * snapshot point refuses a snapshot that does not name it. */
	uint64_t snap_index;
	uint64_t snap_term;
	const struct raft_conf_state *snap_conf;
};

enum raft_role {
	RAFT_FOLLOWER,
	RAFT_PRE_CANDIDATE,
	RAFT_CANDIDATE,
	RAFT_LEADER,
};

/* The configuration given to raft_new is the ConfState as of the
 * snapshot point (snap_index): voters and learners, copied, ids not 0 and
 * each named once, at most RAFT_MAX_MEMBERS in all. This member may be
 * in neither list (a member joining an existing cluster learns its
 * configuration from the leader's log or snapshot); then it never
 * campaigns. */
struct raft_config {
	uint64_t id;              /* this member, not 0 */
	const uint64_t *voters;
	size_t n_voters;
	const uint64_t *learners;
	size_t n_learners;
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
	struct raftlog_loc *entry_locs; /* n_entries places beside them, for
				    * the WAL to fill in (wal_save_locs) so
				    * that their data can leave memory later */
	bool has_snapshot;         /* a snapshot from the leader replaced the
				    * log: record it in the WAL (before the
				    * entries), and install it in the
				    * application only once that is durable,
				    * so the application is never ahead of
				    * the WAL's snapshot (as etcd orders it) */
	uint64_t snap_index;
	uint64_t snap_term;
	const struct raft_conf_state *snap_conf; /* with has_snapshot: the
				    * configuration at the snapshot, already
				    * in force in the core */
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
 * member as recipient, claims to come from this member, or has a type
 * peers do not send; -ENOMEM. Messages from stale terms are dropped
 * silently (Raft expects that), returning 0. Messages from members not
 * in this node's configuration are taken (a configuration may lag the
 * sender's), as etcd does. A follower forwards MsgReadIndex and
 * MsgTransferLeader to its leader as its own (etcd's stepFollower); a
 * MsgProp is not forwarded (etcd's DisableProposalForwarding: callers
 * forward proposals themselves). */
int raft_step(struct raft *r, const struct raft_msg *m);

/*
 * Proposes entries (type and data of each; term and index are assigned
 * here), appended to the leader's log at once. An EntryConfChange while
 * an earlier one may be unapplied is replaced by an empty EntryNormal
 * (etcd's pendingConfIndex rule); the call still succeeds. -EAGAIN when
 * this node is not the leader (raft_leader says who is, 0 if none is
 * known: the caller forwards or retries), -EBUSY while a leadership
 * transfer is in progress (retry after it: the new leader takes it),
 * -EPERM on a leader removed from the configuration, -ENOMEM.
 */
int raft_propose(struct raft *r, const struct raft_entry *ents, size_t n);

/* Asks for a read index with context (not 0, unique among pending
 * requests). The result comes in a later ready's reads. A follower asks
 * its leader. -EAGAIN without a known leader, -ENOMEM. */
int raft_read_index(struct raft *r, uint64_t context);

/* Campaigns now (as an election timeout would). Does nothing on a
 * member that may not campaign (a learner, a member outside the
 * configuration, or one with committed conf changes not yet applied). */
int raft_campaign(struct raft *r);

/*
 * Moves leadership to member to (etcd's MsgTransferLeader): the leader
 * catches to up, then sends it MsgTimeoutNow, on which it campaigns at
 * once without pre-vote, its votes granted despite leader leases. While
 * the transfer runs, proposals fail with -EBUSY; it is abandoned after an
 * election timeout, or when to leaves the configuration or the leader
 * steps down. Asking for the transfer already in progress does nothing;
 * asking for another one replaces it. On a follower, only to == this
 * member is possible: the request goes to the leader naming the sender
 * as transferee (the wire names the transferee by From). -EINVAL (to is
 * not a voter this leader knows, or a follower asks for another member),
 * -EALREADY (this node already leads), -EAGAIN (no leader known).
 */
int raft_transfer_leader(struct raft *r, uint64_t to);

/*
 * Applies a committed EntryConfChange (entry index index, decoded by the
 * caller from raftpb.ConfChange) to the configuration, as etcd's
 * node.ApplyConfChange: AddNode adds a voter or promotes a learner,
 * AddLearnerNode adds a learner (or demotes a voter), RemoveNode removes
 * a member, UpdateNode changes nothing here; node 0 changes nothing (etcd
 * zeroes the node of a change it decided not to apply). Changing an
 * existing member's role into its own role, or removing a member that is
 * not there, changes nothing. Fills out (may be NULL) with the
 * configuration now in force.
 *
 * Call it for each conf change entry taken from ready.committed, in
 * order, before raft_advance of that ready (the core then knows the
 * entry applied; it refuses to campaign while one is committed but not
 * applied), and before compacting past it (the configuration at a
 * snapshot point is taken from these calls). After a restart, the caller
 * applies again the conf changes of entries after snap_index that the
 * application had already applied. -EINVAL (unknown type, or the change
 * would leave no voter: nothing changed), -ENOMEM (nothing changed).
 */
int raft_apply_conf_change(struct raft *r, uint64_t index, enum raft_conf_change_type type,
			   uint64_t node, struct raft_conf_state *out);

/* The configuration in force. */
void raft_conf_state(const struct raft *r, struct raft_conf_state *out);

enum raft_progress_state {
	RAFT_PROGRESS_PROBE,
	RAFT_PROGRESS_REPLICATE,
	RAFT_PROGRESS_SNAPSHOT,  /* needs the snapshot being sent (MsgSnap) */
};

/* What a leader knows of one member (etcd's tracker.Progress). */
struct raft_progress {
	uint64_t id;
	bool learner;
	uint64_t match;            /* highest index known replicated there */
	uint64_t next;             /* next index to send */
	enum raft_progress_state state;
	uint64_t pending_snapshot; /* RAFT_PROGRESS_SNAPSHOT: its index */
	bool recent_active;        /* heard from since the last quorum check */
};

/* etcd's raft.Status: progress is filled on a leader only (n_progress 0
 * elsewhere), one per member, this one included while it is a member. */
struct raft_status {
	uint64_t id;
	uint64_t term;
	uint64_t vote;
	uint64_t commit;
	uint64_t applied;          /* last index handed to the application */
	uint64_t leader;
	enum raft_role role;
	uint64_t lead_transferee;  /* 0: no transfer in progress */
	size_t n_progress;
	struct raft_progress progress[RAFT_MAX_MEMBERS];
};

void raft_status(const struct raft *r, struct raft_status *st);

/* One member's progress on a leader (for a transport: whether it waits
 * for a snapshot; for MemberPromote: a learner's match). -EAGAIN when
 * this node does not lead, -ENOENT for a member it does not track. */
int raft_progress(const struct raft *r, uint64_t id, struct raft_progress *out);

/* Whether raft_ready would return any work. */
bool raft_has_ready(const struct raft *r);

/* Fills rd with the pending work; everything it points to stays valid and
 * unchanged until raft_advance. Call nothing else on r in between but
 * raft_apply_conf_change (its messages come in the next ready). */
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

/* A follower learned that its leader peer is down (nothing listens at
 * its peer URLs any more: the process is gone), not merely silent: the
 * leader's lease ends at once, so this member votes for a successor, and
 * it campaigns within a few ticks, ranked by id among the voters so that
 * those who saw the same crash do not split the vote. Pre-vote and the
 * other voters' leases still decide: a leader that is in fact alive
 * keeps its followers. Ignored unless peer is this follower's leader. */
void raft_report_leader_down(struct raft *r, uint64_t peer);

/* Drops log entries up to index (clamped to applied and durable): the
 * application has a snapshot there. Call only right after raft_advance. */
void raft_compact(struct raft *r, uint64_t index);

uint64_t raft_term(const struct raft *r);
uint64_t raft_leader(const struct raft *r);
enum raft_role raft_role(const struct raft *r);
bool raft_is_leader(const struct raft *r);
/* Whether this member is a learner of the configuration in force. */
bool raft_is_learner(const struct raft *r);
uint64_t raft_commit_index(const struct raft *r);
uint64_t raft_last_index(const struct raft *r);
/* The log, read-only (tests and the WAL's replay checks). */
const struct raftlog *raft_log(const struct raft *r);

/* Entry data on disk only (raftlog.h): how it is read back, and when it
 * leaves memory. A MsgApp that needs entries the loader cannot read is
 * dropped (the follower asks again), and raft_take_load_failure names
 * the highest such entry: compacting past it makes the follower take a
 * snapshot. Right after raft_advance, as raft_compact. */
void raft_set_loader(struct raft *r, raftlog_load_fn load, void *ctx);
void raft_evict(struct raft *r, uint64_t hi, uint64_t keep);
/* Where restored entries lie in the WAL (raftlog_set_locs). */
void raft_set_locs(struct raft *r, uint64_t from, const struct raftlog_loc *locs, size_t n);
uint64_t raft_take_load_failure(struct raft *r);

#endif
