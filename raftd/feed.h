/*
 * The feed of committed entries from raftd to stored (invariant 5, docs/invariants.md).
 *
 * The Raft core hands over entries that are committed and durable in this
 * member's WAL (ready.committed); the feed pushes them on
 * SHM_RING_COMMITTED as MSG_COMMITTED records, in index order, never
 * skipping one. It does not copy them: it keeps a cursor (the next index
 * to push) and reads the entries from the core's log, which is therefore
 * kept back to feed_keep_from. When the ring is full the entries stay
 * where they are and go out as stored frees room; the loop never waits.
 *
 * Replay: stored publishes its epoch (bumped at each start) and its
 * durable index in its status record. When the epoch changes, stored has
 * restarted from its last checkpoint and lost what it applied after it:
 * the cursor moves back to durable_index + 1 and everything from there is
 * pushed again, in order. Ring cursors are never reset; what was already
 * in the ring arrives first, and stored drops entries beyond its
 * applied + 1 until the replay reaches it.
 *
 * Where a feed starts: a raftd that restarts while stored runs goes on from
 * stored's applied index; entries it had pushed before it died and that
 * stored had not consumed yet then come a second time (stored skips an
 * index it already applied). Without a live stored it starts from stored's
 * durable index.
 */
#ifndef CETCD_RAFTD_FEED_H
#define CETCD_RAFTD_FEED_H

#include <stdbool.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"
#include "shm/status.h"

struct ring;

struct feed {
	struct ring *ring;   /* SHM_RING_COMMITTED, producer side held */
	uint64_t next;       /* next index to push: moves forward one entry at
			      * a time, or back to a replay point */
	uint64_t handed;     /* last index the core handed over (committed
			      * and durable here); only grows */
	uint64_t epoch;      /* stored's epoch last seen (0: never started) */
	uint64_t durable;    /* stored's durable index last seen */
	bool blocked;        /* the last pump found the ring full */
	bool wake_due;       /* pushed records stored was not woken for */
	bool stalled;        /* an entry cannot be pushed (gone from the log,
			      * or too large for the ring); logged once */
	/* a db received from the leader (MSG_SNAPSHOT_INSTALL): pushed
	 * before the entries after install_index, and again after a stored
	 * restart that left its durable index below it */
	bool install_active;
	bool install_pushed;
	bool install_held;   /* its snapshot is not durable in the WAL yet:
			      * nothing is pushed until feed_install_release */
	uint64_t install_index;
	uint64_t install_term;
	char install_path[512];
	uint64_t pushed;     /* statistics: records pushed */
	uint64_t replays;    /* replays started */
	uint64_t full;       /* pumps that found the ring full */
};

/*
 * A feed on ring that starts after stored's state st: after its
 * durable_index, whether stored runs or not. The epoch in st counts as
 * seen (no replay for it).
 */
void feed_init(struct feed *f, struct ring *ring, const struct status_stored *st);

/* The index before the first one the feed will push (the core's
 * "applied" at start). */
uint64_t feed_start_after(const struct feed *f);

/* Starts the feed after index instead, when it would start before it
 * (a member restarted from a snapshot at index while stored's state is
 * not known yet). */
void feed_skip_to(struct feed *f, uint64_t index);

/*
 * Hands stored the db at path (complete and fsynced, its snapshot at
 * index and term durable in the WAL) before any entry after index;
 * entries at or below index not pushed yet are dropped (the db holds
 * them). The install is pushed again when stored restarts with its
 * durable index below index, and forgotten once stored's durable index
 * reaches it. While stored's state is unknown (epoch 0) nothing is pushed:
 * a stored whose db is already past index must not get it. -ENAMETOOLONG.
 */
int feed_install(struct feed *f, uint64_t index, uint64_t term, const char *path);

/* Holds the feed: an install whose WAL record is not durable yet waits,
 * and nothing after it goes first. feed_install_release lets it go. */
void feed_install_hold(struct feed *f);
void feed_install_release(struct feed *f);

/* The core handed over entries up to index. */
void feed_handed(struct feed *f, uint64_t index);

/* Looks at stored's status: on an epoch change, starts a replay from its
 * durable index + 1 (logged). Returns whether a replay started. */
bool feed_observe(struct feed *f, const struct status_stored *st);

/*
 * Pushes entries from log, from the cursor up to what was handed over, as
 * many as fit in the ring now (at most max_records; then the caller comes
 * back). Returns the number pushed, or -EIO if the ring has failed. An
 * entry missing from log or too large for a record stalls the feed (logged
 * once): 0 from then on. The records are visible to stored at once, but
 * stored is not woken: feed_wake must follow (in the same turn), after
 * whatever else the turn has to send first.
 */
int feed_pump(struct feed *f, const struct raftlog *log, unsigned max_records);

/*
 * Wakes stored if it sleeps and records were pushed since the last wake.
 * Kept apart from feed_pump because a woken stored may take raftd's CPU
 * at once, and what raftd still has to do in its turn (the peer sockets:
 * the new commit index and entries for the followers) would wait for
 * stored's batch and the gateway's answers.
 */
void feed_wake(struct feed *f);

/* Whether handed-over entries wait to be pushed. */
bool feed_pending(const struct feed *f);

/* The lowest index the core's log must keep: the cursor's, or stored's
 * durable index + 1 (a replay point), whichever is lower. */
uint64_t feed_keep_from(const struct feed *f);

#endif
