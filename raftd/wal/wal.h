/*
 * raftd's write-ahead log, in etcd 3.4's format: a member's WAL directory
 * (member/wal/) can be read by etcd's wal package and etcd's by this one.
 *
 * Segments are named %016x-%016x.wal (sequence number, index of the first
 * entry they may hold), preallocated to segment_bytes, and hold framed
 * walpb records (walrec.h) chained by CRC32C. Every segment starts with a
 * crc record carrying the chain value, the metadata record and the last
 * hard state. A new segment is cut when the current one has reached
 * segment_bytes: it is written under a temporary name, fdatasynced,
 * renamed, and the directory fsynced.
 *
 * Appends are group-committed: wal_save and wal_save_snapshot encode into
 * the pending batch; wal_submit starts writing it (write + fdatasync, one
 * batch in flight at a time) and whatever is appended meanwhile goes into
 * the next batch. An event loop polls wal_event_fd and calls wal_reap,
 * which never blocks; wal_sync does it all synchronously (tests, tools).
 * Durability is tracked by batch number: everything appended before
 * wal_last_seq() returned s is durable once wal_durable_seq() >= s.
 * Once per segment, wal_reap does a few short blocking steps of the cut
 * (truncating the full segment, renaming the new one, fsyncing the
 * directory, preallocating the next one), as etcd does them inline.
 *
 * Segment cuts follow etcd's rule exactly (after a save that leaves the
 * segment at or over its size, counted as etcd's page writer flushes), so
 * the same saves give the same files as etcd; with several saves in one
 * batch, the cut waits for the end of the batch.
 *
 * After any write or sync error the WAL is failed: every later call
 * returns that error (a log that missed a write cannot go on; the member
 * restarts and replays). Nothing here is thread-safe: one thread uses a
 * struct wal.
 */
#ifndef CETCD_RAFTD_WAL_H
#define CETCD_RAFTD_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"

struct diskio;
struct wal;

/* etcd's wal.SegmentSizeBytes. */
#define WAL_SEGMENT_BYTES (64ull * 1000 * 1000)

struct wal_options {
	uint64_t segment_bytes; /* 0 = WAL_SEGMENT_BYTES */
	struct diskio *io;      /* NULL = diskio_open_auto(); taken over by the
				 * WAL (closed by wal_close, or on failure) */
};

/* A snapshot record's point. */
struct wal_snap {
	uint64_t index;
	uint64_t term;
};

/* What opening a WAL found. Everything in it is owned by the replay and
 * freed by wal_replay_free (fields can be taken over by setting them to
 * NULL first). */
struct wal_replay {
	uint8_t *metadata;       /* the metadata record's data; NULL if none */
	size_t metadata_len;
	struct raft_hardstate state; /* the last hard state record; zero if none */
	struct raft_entry *entries;  /* indexes snap_index + 1 ..., no gaps;
				      * array and data from raftd_malloc */
	size_t n_entries;
	struct raftlog_loc *locs; /* locs[i]: where entries[i] lies (raftd_malloc;
				  * off 0 where the segment's name says no
				  * sequence number) */
	struct wal_snap *snaps;  /* wal_snapshots: the snapshot records, in
				  * WAL order (raftd_malloc) */
	size_t n_snaps;
	uint64_t torn_offset;    /* where a torn tail was cut (0 = none) */
	char torn_segment[40];   /* and in which segment */
	char error[512];         /* on failure: what, where, what to do */
};

void wal_replay_free(struct wal_replay *r);

/* Whether dir holds any segment. */
bool wal_exists(const char *dir);

/*
 * Creates a WAL in dir (which must hold no segment): its first segment,
 * 0000000000000000-0000000000000000.wal, with the crc, metadata (NULL =
 * none) and an empty snapshot record, built under dir.tmp and renamed
 * into place, the parent directory fsynced. The WAL is then ready for
 * appends. 0, -EEXIST, -ENOMEM or the -errno of a file operation (logged
 * with the path).
 */
int wal_create(const char *dir, const uint8_t *metadata, size_t metadata_len,
	       const struct wal_options *o, struct wal **out);

/*
 * Opens dir for appending after replaying every record after the snapshot
 * point (snap_index, snap_term), which must have a snapshot record in the
 * WAL ((0, 0) for one created here or by etcd). Replay follows etcd: an
 * entry replaces those at and after its index; entries at or below
 * snap_index are skipped. A torn tail (a partial last record, the
 * unwritten preallocated space after it) is cut off, logged, and noted in
 * rep; corruption anywhere else is an error naming the segment and offset
 * (in rep->error, also logged). The tail segment is locked (flock) while
 * open.
 * 0; -ENOENT (no segment, no segment for snap_index, snapshot record not
 * found), -EBADMSG (corrupt), -EINVAL (snapshot term mismatch, metadata
 * conflict), -EBUSY (locked by another process), -ENOMEM, -errno.
 */
int wal_open(const char *dir, uint64_t snap_index, uint64_t snap_term,
	     const struct wal_options *o, struct wal **out, struct wal_replay *rep);

/* Reads dir without changing or locking anything (tools): as wal_open,
 * but a torn tail is only reported, and a missing snapshot record is not
 * an error. */
int wal_read(const char *dir, uint64_t snap_index, uint64_t snap_term,
	     struct wal_replay *rep);

/*
 * etcd's ValidSnapshotEntries: the snapshot records of every segment in
 * dir, oldest first, whose index is at most the commit index of the last
 * hard state (a snapshot past it cannot be one the member reached), into
 * rep->snaps (rep also gets the hard state and metadata; no entries).
 * Reads without locking. 0; -ENOENT (no segment), -EBADMSG (corrupt
 * before the tail, rep->error says where), -ENOMEM, -errno.
 */
int wal_snapshots(const char *dir, struct wal_replay *rep);

/*
 * etcd's purge of the WAL directory (--max-wals), with its rule that a
 * segment still needed is kept: removes the oldest segments while more
 * than max_wals remain, stopping at the segment that holds snap_index
 * (the newest snapshot the WAL has durably recorded: replay starts in
 * that segment) and never touching the tail. max_wals 0 removes nothing.
 * Returns the number removed, or -errno of a removal (logged).
 */
int wal_purge(struct wal *w, uint64_t snap_index, unsigned max_wals);

/* Appends entries then, when not empty, the hard state, as etcd's
 * WAL.Save. Nothing is written until wal_submit. -EMSGSIZE if an entry's
 * record would reach WALREC_MAX_RECORD (nothing appended), -ENOMEM, or the
 * failure error. */
int wal_save(struct wal *w, const struct raft_hardstate *hs,
	     const struct raft_entry *ents, size_t n);

/* wal_save, and locs[i] gets the place of ents[i] (for wal_read_entry). */
int wal_save_locs(struct wal *w, const struct raft_hardstate *hs,
		  const struct raft_entry *ents, size_t n, struct raftlog_loc *locs);

/*
 * Reads back the data of entry e (its index, term, type and len) from the
 * place wal_save_locs or a replay gave it, once durable: the record is checked as a replay
 * checks it (its CRC continues loc->crc) and must be e's. *data
 * (raftd_malloc, e->len bytes; NULL when 0). -ENOENT (its segment was
 * purged, or no place), -EBADMSG (not that entry, or corrupt), -ENOMEM,
 * -errno of the read. Blocks on the read (the page cache's, mostly).
 */
int wal_read_entry(struct wal *w, const struct raft_entry *e, const struct raftlog_loc *loc,
		   uint8_t **data);

/* Appends a snapshot record (a snapshot at index/term was saved). */
int wal_save_snapshot(struct wal *w, uint64_t index, uint64_t term);

/* Starts writing the pending batch if nothing is in flight (also cuts a
 * full segment). 0 or the failure error. */
int wal_submit(struct wal *w);

/* Whether a small batch is written and synced by the caller's own pwrite
 * and fdatasync at submit rather than by io_uring's worker
 * (diskio_set_inline_chain): no thread hand-off on either side of the
 * sync, while the caller waits for it; off at open. While on, wal_reap
 * submits nothing (the next batch's sync would hold the caller before it
 * handed on what the last one made durable): it owes the submit, and so
 * does wal_submit_later; wal_submit_owed pays it, where the caller has
 * nothing left to do first. */
void wal_set_inline_writes(struct wal *w, bool on);
void wal_submit_later(struct wal *w);
int wal_submit_owed(struct wal *w);

/* Collects a finished batch, if any, without blocking, and submits the
 * next one. Returns the number of batches that became durable (0 or 1),
 * or the failure error. */
int wal_reap(struct wal *w);

/* Submits and waits until everything appended so far is durable. */
int wal_sync(struct wal *w);

/* Readable when a batch finished (then call wal_reap). */
int wal_event_fd(const struct wal *w);

/* The batch number of the last thing appended, and the last batch known
 * durable. */
uint64_t wal_last_seq(const struct wal *w);
uint64_t wal_durable_seq(const struct wal *w);

/* Whether nothing is pending or in flight. */
bool wal_idle(const struct wal *w);

/* The failure error, or 0. */
int wal_error(const struct wal *w);

/* Index of the last entry appended (etcd's enti). */
uint64_t wal_last_index(const struct wal *w);

/* The I/O backend in use ("io_uring", "plain", "fault"). */
const char *wal_io_name(const struct wal *w);

/* Writes and syncs what is pending, then closes everything (the unused
 * preallocated segment is removed). Returns 0 or the error that kept
 * something from being durable. NULL is accepted. */
int wal_close(struct wal *w);

/* Counts each batch's write and fdatasync time and bytes in m (raftd's
 * metrics block, shm/metrics.h): etcd's wal_fsync_duration_seconds and
 * wal_write_bytes_total. */
struct shm_metrics;
void wal_set_metrics(struct wal *w, struct shm_metrics *m);

#endif
