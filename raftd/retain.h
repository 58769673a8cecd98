/*
 * How much of the Raft log raftd keeps in memory once entries are
 * applied and durable (loop_maybe_compact in raftd/loop_snap.c asks
 * retain_compact_to, then compacts the core's log there).
 *
 * An applied entry that stored has made durable is needed again only by
 * a follower that has not got it yet; a follower further behind than
 * the log reaches takes a snapshot instead (the db, loop_send_snapshot).
 * So the log keeps, below the first entry stored may still need:
 *
 *   - with other members, a catch-up margin (etcd's
 *     SnapshotCatchUpEntries, 5000 entries) for a follower that lags a
 *     little, or that a new leader finds a little behind; a member alone
 *     keeps none (one added later takes a snapshot);
 *   - on a leader, back to the lowest match of its followers (learners
 *     included; one being sent a snapshot does not count), but at most
 *     --snapshot-count entries beyond the margin, as much as etcd ever
 *     keeps;
 *   - all of it within a byte budget (--raft-log-mib): past it the oldest
 *     entries go, the margin's too, down to a floor of a few entries, and
 *     a follower that needed them gets a snapshot. Over the budget the log
 *     is cut to three quarters of it, so that the entries it walks to
 *     decide are, in time, the ones it drops.
 *
 * A member alone thus keeps next to nothing it has applied, where etcd
 * keeps 5000 to 105,000 entries (--snapshot-count's default). Compaction
 * goes a step at a time, except to meet the budget.
 */
#ifndef CETCD_RAFTD_RETAIN_H
#define CETCD_RAFTD_RETAIN_H

#include <stdint.h>

#include "raftd/raft/raftlog.h"

/* etcd's SnapshotCatchUpEntries. */
#define RETAIN_MARGIN_ENTRIES 5000u
/* Entries below the first one stored may need that even the budget keeps
 * (a snapshot's point, and the db sent to a follower, sit there). */
#define RETAIN_FLOOR_ENTRIES 16u
/* The data of entries kept only for followers (below the first one
 * stored may still need) leaves memory past this many bytes, down to
 * three quarters of it, and is read back from the WAL for a follower
 * that needs it (raftlog_evict); the entries stay. So a follower far
 * behind costs the leader the entries' slots, not their data. */
#define RETAIN_RESIDENT_BYTES (4u << 20)
/* Compact only when this many entries, or about this many bytes, can go
 * at once (but for the budget). */
#define RETAIN_STEP_ENTRIES 1024u
#define RETAIN_STEP_BYTES (4u << 20)

struct retain {
	uint64_t keep_from; /* the first entry stored may still need */
	uint64_t margin;    /* entries kept below it: RETAIN_MARGIN_ENTRIES,
			     * 0 for a member alone in its cluster */
	uint64_t limit;     /* nothing past it may go (followers that just
			     * took a snapshot); UINT64_MAX: none */
	uint64_t followers; /* the lowest match of the followers a leader
			     * replicates to; UINT64_MAX: none (not a leader,
			     * or alone) */
	uint64_t max_extra; /* entries kept for followers beyond the margin
			     * (--snapshot-count) */
	uint64_t budget;    /* bytes the log may hold (raftlog.bytes) */
};

/* The index to compact log to, or log->snap_index when nothing should go
 * now. Never past log->applying or log->stabled. */
uint64_t retain_compact_to(const struct raftlog *log, const struct retain *r);

#endif
