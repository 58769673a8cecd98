/*
 * What raftd takes in: the requests of every gatewayd slot
 * (SHM_SLOT_TO_RAFTD: attach hellos, MSG_PROPOSE, MSG_READ_INDEX) and
 * stored's own proposals (SHM_RING_STORED_PROPOSALS: lease revokes,
 * checkpoints, compactions), drained in batches each turn of the loop.
 *
 * Proposals: the entry data of each MSG_PROPOSE goes to raft_propose as
 * it is (opaque here), a ring's batch in one call, straight from the ring
 * (released once the core copied it). A proposal carrying a term (stored's
 * lease revokes and checkpoints, invariant 8, docs/invariants.md) is dropped unless
 * this member leads in that term and has confirmed it since (an entry of
 * the term is committed). When the core refuses (no leader, not the
 * leader, stopping, no memory), a gatewayd's proposal is answered with
 * MSG_PROPOSE_REJECT carrying etcd's status code and message; stored's are
 * dropped (it proposes them again).
 *
 * Held proposals: a gatewayd's proposal that comes while this member knows
 * no leader waits for one, as in etcd, whose raft node takes no proposal
 * then, so that the request waits until its deadline. It is copied
 * into a queue bounded by count and bytes (past the bound it is refused
 * "no leader" as before); the first drain that knows a leader proposes
 * (or forwards) the queue in arrival order before anything newer. One held
 * longer than the request timeout is answered "etcdserver: request timed
 * out" (gatewayd has answered it at its own deadline by then; the late
 * reply finds no pending request and is dropped: invariant 2,
 * docs/invariants.md). A held proposal stamped with a term (MSG_PROPOSE_F_SEEN_TERM) is refused
 * "leader changed" on release if the term has moved on, as when it comes;
 * gatewayd does not stamp what it sends while raftd reports no leader.
 *
 * Reads: the MSG_READ_INDEX records of a turn share one ReadIndex round
 * (one context). They are asked only once the leader has committed an
 * entry of its term (before that its commit index may be behind what an
 * earlier leader acknowledged). The read state answers them all with
 * MSG_READ_INDEX_REPLY; a round that dies with a leadership change, or
 * waits too long, is answered with status Unavailable (the gateway's
 * "leader changed", which clients retry).
 *
 * Replies go only to the slot generation that asked: a reply for an older
 * generation is dropped, never given to the slot's next holder. Replies
 * are staged during the turn and published once (proposals_flush); a
 * reply that finds its slot's ring full is dropped and counted (the
 * gateway's own timeout answers the call).
 */
#ifndef CETCD_RAFTD_PROPOSALS_H
#define CETCD_RAFTD_PROPOSALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raft.h"
#include "shm/msg.h"

struct shm_region;

/* gRPC status codes raftd answers with. */
#define PROPOSALS_GRPC_UNKNOWN 2
#define PROPOSALS_GRPC_INVALID_ARGUMENT 3
#define PROPOSALS_GRPC_NOT_FOUND 5
#define PROPOSALS_GRPC_RESOURCE_EXHAUSTED 8
#define PROPOSALS_GRPC_FAILED_PRECONDITION 9
#define PROPOSALS_GRPC_UNIMPLEMENTED 12
#define PROPOSALS_GRPC_UNAVAILABLE 14

/* etcd's messages (rpctypes) for them. */
#define PROPOSALS_MSG_NO_LEADER "etcdserver: no leader"
#define PROPOSALS_MSG_NOT_LEADER "etcdserver: not leader"
#define PROPOSALS_MSG_STOPPED "etcdserver: server stopped"
#define PROPOSALS_MSG_TOO_LARGE "etcdserver: request is too large"
#define PROPOSALS_MSG_TOO_MANY "etcdserver: too many requests"
#define PROPOSALS_MSG_LEADER_CHANGED "etcdserver: leader changed"
#define PROPOSALS_MSG_TIMEOUT "etcdserver: request timed out"

/* Bounds of the proposals held while no leader is known. */
#define PROPOSALS_HOLD_MAX 4096u
#define PROPOSALS_HOLD_BYTES (16u << 20)

/* Records taken from one ring per drain, at most. */
#define PROPOSALS_BATCH 512u

struct proposals_stats {
	uint64_t proposed;       /* entries handed to the core */
	uint64_t forwarded;      /* entries sent to the leader (a follower) */
	uint64_t rejected;       /* MSG_PROPOSE_REJECT sent (proposals and reads) */
	uint64_t dropped_term;   /* term-carrying proposals dropped */
	uint64_t stale_term;     /* gateway requests sent in an earlier term */
	uint64_t dropped_stored; /* stored proposals the core refused */
	uint64_t malformed;      /* records that were not what their type says */
	uint64_t hellos;         /* attach hellos served */
	uint64_t reads;          /* MSG_READ_INDEX taken */
	uint64_t read_rounds;    /* ReadIndex rounds asked of the core */
	uint64_t reads_answered; /* MSG_READ_INDEX_REPLY with an index */
	uint64_t reads_failed;   /* MSG_READ_INDEX_REPLY with a status */
	uint64_t replies_stale;  /* replies for a previous slot generation */
	uint64_t replies_full;   /* replies dropped on a full ring */
	uint64_t held;           /* proposals held while no leader was known */
	uint64_t held_released;  /* held proposals released to a leader */
	uint64_t held_expired;   /* held proposals answered "request timed out" */
	uint64_t held_full;      /* refused "no leader": the hold queue was full */
};

/* One gateway proposal waiting for a leader: its record's entry, copied. */
struct proposals_held {
	struct msg_origin origin;
	uint32_t slot;
	uint32_t flags;    /* its msg_propose flags */
	uint64_t term;     /* its msg_propose term */
	uint64_t held_at;  /* tick count when held */
	uint8_t *data;
	uint32_t len;
};

/* One read waiting for its index. */
struct proposals_read {
	struct msg_origin origin;
	uint32_t slot;     /* the ring it came on */
	uint64_t ctx;      /* its ReadIndex round, 0 while not asked */
	uint64_t asked_at; /* tick count when asked */
};

struct proposals {
	struct shm_region *r;
	uint32_t n_slots;
	uint32_t max_data;             /* largest entry data taken */
	struct raft_entry *ents;       /* the batch: data points into a ring */
	struct msg_origin *origins;    /* the batch's origins (for rejects) */
	struct proposals_read *reads;  /* in arrival order */
	size_t n_reads;
	size_t cap_reads;
	uint64_t next_ctx;             /* the last context handed out */
	uint64_t ticks;                /* proposals_tick calls */
	uint64_t *staged;              /* bitmap of slots with staged replies */
	bool more;                     /* a ring held more than one batch */
	struct proposals_held *held;   /* waiting for a leader, arrival order */
	size_t n_held;
	size_t cap_held;
	size_t held_bytes;             /* their data's bytes */
	uint64_t hold_ticks;           /* the request timeout in ticks; 0: no
					* holding (refused "no leader") */
	/* on a follower, proposals go to the leader through this (0: sent;
	 * the result comes from stored once they commit); NULL: refused
	 * with "not leader" */
	int (*forward)(void *arg, uint64_t leader, const struct raft_entry *ents, size_t n);
	void *forward_arg;
	/* a MSG_MOVE_LEADER from slot; NULL: refused as unsupported. The
	 * handler answers with proposals_answer, now or later. */
	void (*move_leader)(void *arg, uint32_t slot, const struct msg_move_leader *m);
	void *move_leader_arg;
	/* a MSG_PROMOTE from slot; NULL: refused as unsupported. The handler
	 * answers a refusal with proposals_answer, or proposes the change
	 * (stored answers it once applied). */
	void (*promote)(void *arg, uint32_t slot, const struct msg_promote *m);
	void *promote_arg;
	/* a MSG_LEASE_FORWARD from slot; NULL: refused as unsupported. The
	 * handler answers with proposals_answer, now or later. */
	void (*lease_forward)(void *arg, uint32_t slot, const struct msg_keepalive *m);
	void *lease_forward_arg;
	struct proposals_stats stats;
};

/* Answers a gateway's request (origin o on slot): status 0 sends body as
 * the call's response (a MSG_RESULT), otherwise a gRPC status code and
 * etcd's text (a MSG_PROPOSE_REJECT). Staged: proposals_flush sends. */
void proposals_answer(struct proposals *p, uint32_t slot, const struct msg_origin *o,
		      int32_t status, const char *text, const void *body, size_t body_len);

/* Sets p up for region r (the raftd role held). 0 or -ENOMEM. */
int proposals_init(struct proposals *p, struct shm_region *r);
void proposals_free(struct proposals *p);

/*
 * Drains every slot's request ring and stored's proposal ring, one batch
 * each, then asks for the reads it can (proposals_ask_reads). When
 * stopping, proposals and reads are refused with etcd's "server stopped".
 * Returns the number of records taken, or -EIO if a ring has failed (the
 * others are still drained; the failure is logged).
 */
int proposals_drain(struct proposals *p, struct raft *raft, bool stopping);

/* Asks the core for one ReadIndex round covering every read not asked
 * yet, if it can answer now and the last round was answered (or is a
 * tick old); refuses them without a leader. */
void proposals_ask_reads(struct proposals *p, struct raft *raft);

/* A read state from the core: answers the reads of its round, with term,
 * the core's term when it handed the state over (a lease renewal is
 * made only by the lessor primary in that term: invariant 8). */
void proposals_read_state(struct proposals *p, const struct raft_read_state *rs, uint64_t term);

/* Answers every asked read with status (and every read not asked yet too
 * when all): the rounds were lost with a leadership change, or raftd
 * stops. */
void proposals_fail_reads(struct proposals *p, int32_t status, bool all);

/* One tick: asked reads older than expire_ticks are answered Unavailable,
 * held proposals older than hold_ticks "request timed out". */
void proposals_tick(struct proposals *p, uint64_t expire_ticks);

/* Publishes the replies staged since the last flush. */
void proposals_flush(struct proposals *p);

/* Whether a request waits on any ring raftd drains. It only reads ring
 * cursors, so the loop's doorbell bridge asks it from its own thread
 * while the loop may be draining (an answer made stale by the drain costs
 * at most one spurious wake-up). */
bool proposals_waiting(struct shm_region *r);

/* Whether the last drain left records behind (the loop turns again at
 * once). */
static inline bool proposals_more(const struct proposals *p)
{
	return p->more;
}

/* Whether the leader may serve reads and term-carrying proposals: it has
 * committed an entry of its current term. */
bool proposals_leader_confirmed(const struct raft *raft);

#endif
