/*
 * Status records: what raftd and stored publish for the other processes,
 * each as one seqlocked record in the region. There is one writer per
 * record (the holder of the role); readers never block it and retry when
 * they catch a write in progress.
 */
#ifndef CETCD_SHM_STATUS_H
#define CETCD_SHM_STATUS_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/msg.h"

struct shm_region;

/* Published by raftd. */
struct status_raftd {
	uint64_t leader_id;    /* 0 when no leader is known */
	uint64_t term;
	uint64_t commit_index;
	bool is_leader;
	/* The newest term with a committed entry in this member's log, and
	 * the index of that term's first entry (a later committed index when
	 * the log no longer holds it). Every entry of an earlier term that
	 * will ever commit lies below settled_index: a proposal made before
	 * settled_term that stored has not answered once it applied
	 * settled_index was lost in the leader change. 0 until known. */
	uint64_t settled_term;
	uint64_t settled_index;
	bool is_learner;       /* this member is a learner (etcd's Status.isLearner) */
};

/* Published by stored: once per apply batch (its new root), and when a
 * checkpoint ends, the root is withdrawn or the db file replaced. */
struct status_stored {
	uint64_t root_page;       /* root of the key bucket's B+tree */
	uint64_t txid;            /* db transaction id of that root */
	uint64_t applied_index;   /* last Raft index applied */
	uint64_t revision;        /* current MVCC revision */
	uint64_t high_water_page; /* every page id below it is in the file */
	uint64_t epoch;           /* bumped each time stored starts */
	uint64_t durable_index;   /* last index covered by a durable checkpoint */
	uint64_t db_generation;   /* bumped when the db file is replaced */
	/* The db's last write found no room (ENOSPC or EDQUOT: a batch, a
	 * checkpoint, the open or a received db's copy): gatewayd refuses
	 * new writes. Cleared when a batch commits or a received db is
	 * installed. A restarted stored keeps it while raftd has committed
	 * entries for it to apply (they tell whether there is room again)
	 * and clears it at its open otherwise, as no batch would come. */
	bool db_no_space;
	/* The inode of the db file the root is in: a reader that opens the
	 * db by path reads it at this root only if the file it opened is
	 * this one (the path may name a newer file already). 0: unknown. */
	uint64_t db_ino;
	/* Free pages below the high-water mark (bbolt's FreePageN): etcd's
	 * dbSizeInUse is the high-water mark's bytes less these. */
	uint64_t free_pages;
	/* Defragmentations done by this member since its region was made,
	 * and their durations: the last, and the sum (the _count and _sum of
	 * etcd's etcd_disk_backend_defrag_duration_seconds). */
	uint64_t defrag_count;
	uint64_t defrag_last_ns;
	uint64_t defrag_total_ns;
	/* The auth store as of applied_index (stored/auth.h): whether auth
	 * is enabled and its revision, which every change of users, roles
	 * or the flag moves; a gatewayd whose permission cache was built at
	 * another revision builds it again. */
	bool auth_enabled;
	uint64_t auth_revision;
};

/* Seqlock on an array of 64-bit words, the building block of the above.
 * Lives in shared memory; STATUS_SEQLOCK_BYTES long, 8-byte aligned. */
struct status_seqlock;
#define STATUS_SEQLOCK_WORDS 15
#define STATUS_SEQLOCK_BYTES 128u

void status_seqlock_init(void *mem);
/* Single writer. A write left half done by a dead writer is finished over
 * by the next one. */
void status_seqlock_write(struct status_seqlock *s, const uint64_t *words,
			  unsigned n);
/*
 * Copies a consistent snapshot of the first n words. Retries on a torn
 * read; returns 0, or -EAGAIN if a write stayed in progress for too long
 * (its writer died mid-write and has not been replaced yet).
 */
int status_seqlock_read(const struct status_seqlock *s, uint64_t *words,
			unsigned n);
/* Number of completed writes so far. */
uint64_t status_seqlock_version(const struct status_seqlock *s);

/* Writers: only the holder of the role (shm_role_claim). */
void status_raftd_write(struct shm_region *r, const struct status_raftd *st);
void status_stored_write(struct shm_region *r, const struct status_stored *st);

/* Readers: 0, or -EAGAIN as status_seqlock_read. Before the first write
 * every field reads as 0. */
int status_raftd_read(struct shm_region *r, struct status_raftd *out);
int status_stored_read(struct shm_region *r, struct status_stored *out);
/* Number of completed writes of stored's record (status_seqlock_version). */
uint64_t status_stored_version(struct shm_region *r);

/*
 * stored's delivered index: the results of the entries up to it are in
 * the slots' rings (or were dropped). A gateway that reads it and then
 * drains its ring has them all (gatewayd/rings.c: gw_settle).
 *
 * It is one word beside the seqlocked record, not in it, because it is
 * published at another moment of the batch: the record goes out before
 * the batch's results (a gateway answers a write only once the root that
 * holds it is published), this index after them. Ordering: stored
 * publishes the results (ring_publish, release), then stores the index
 * with release; a reader loads it with acquire before it loads the
 * ring's tail (acquire), so it sees every result the index covers.
 * Single writer (the stored role's holder); it never goes down. 0 until
 * the first store.
 */
void status_delivered_init(void *mem);
void status_stored_deliver(struct shm_region *r, uint64_t index);
uint64_t status_stored_delivered(struct shm_region *r);

/*
 * stored's physical compactions whose answers wait for their deletion
 * (stored/loop.c), kept in the region so that a stored restarted in the
 * middle of one still answers the requests its predecessor applied. The
 * first STATUS_WAITING_MAX of them are kept; the rest, as before, get the
 * gateway's request timeout.
 *
 * Written by the stored role's holder, read only by its next holder once
 * the writer is gone, under the seqlock protocol of the status records:
 * a write the writer died in reads as -EAGAIN (after the same wait). The
 * record sits beside the status records, in STATUS_WAITING_BYTES of its
 * own; 0 waiting until the first write.
 */
#define STATUS_WAITING_MAX 16u
#define STATUS_WAITING_BYTES 832u
struct status_waiting {
	struct msg_origin origin;
	uint64_t index; /* the compaction's entry */
	uint64_t term;  /* of that entry */
};
void status_waiting_init(void *mem);
/* Keeps the first n (at most STATUS_WAITING_MAX) of w. */
void status_waiting_write(struct shm_region *r, const struct status_waiting *w, unsigned n);
/* How many it copied into w (at most max), or -EAGAIN when the last write
 * was left half done. */
int status_waiting_read(struct shm_region *r, struct status_waiting *w, unsigned max);

#endif
