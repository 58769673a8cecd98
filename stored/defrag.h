/*
 * Defragmentation of the live db into a compacted copy beside it, while
 * the db goes on taking writes (Maintenance.Defragment; the apply loop,
 * loop.c, drives it and makes the copy the db).
 *
 * The copy is a new file at tmp_path written bucket by bucket, key by key,
 * in key order at fill 0.9 (as etcd's defragdb writes its db.tmp), from one
 * read txn of the live db: its tree is dense and its file has next to no
 * free pages. The copy is written in steps, each bounded in time, between
 * the live db's write txns: the apply loop takes one step per turn, so a
 * batch of committed entries never waits for more than a step.
 *
 * Writes made meanwhile are carried over. From defrag_begin on, the live
 * db tells this module of every entry its write txns change
 * (btree_db_track): the bucket and key, or a whole bucket. Once the bulk
 * copy is done, rounds of catch-up read each changed entry's current
 * state (at the live db's newest commit when the round begins) and put it
 * into the copy, or delete it there, while the changes of that round are
 * tracked for the next; a changed bucket is copied again whole. When a
 * round leaves few changes (DEFRAG_FINAL_KEYS) and what the bulk copy
 * wrote is synced (on a thread of its own), a step seals the copy: it
 * carries over every change left with no write txn of live in between,
 * so the copy holds what live's newest commit holds (defrag_sealed: the
 * caller notes which commit), and starts the copy's checkpoint in the
 * background, while the rounds go on into the copy's next commits. Once
 * that checkpoint is durable and few changes are left, defrag_step says
 * ready, and defrag_finish, called with no write txn of the live db
 * between that and the switch to the copy, carries over the rest in
 * memory and commits without a sync: the copy then holds exactly what the
 * live db's newest commit holds, and on disk, durably, the sealed commit.
 * The caller takes the copy's open db as its db (defrag_take).
 *
 * Nested buckets (etcd's schema has none) are refused with -ENOTSUP.
 *
 * Ownership: the defrag holds a read txn of the live db (its pages are
 * not reused until the defrag ends: the live file may grow meanwhile, as
 * etcd's does) and the copy's writer; the live db must outlive it. One
 * thread, the live db's writer's.
 */
#ifndef CETCD_STORED_DEFRAG_H
#define CETCD_STORED_DEFRAG_H

#include <stdbool.h>
#include <stdint.h>

struct btree_db;
struct diskio;
struct defrag;

/* Changes left at most for the final step. */
#define DEFRAG_FINAL_KEYS 1024u
/* Catch-up rounds after which the final step comes whatever is left. */
#define DEFRAG_MAX_ROUNDS 16u

struct defrag_opts {
	const char *tmp_path;     /* the copy; must not exist */
	uint64_t map_size;        /* the copy's map size (btree_db_opts) */
	uint32_t commit_bytes;    /* bytes of entries per commit of the copy; 0: 1 MiB */
	uint32_t final_keys;      /* changes left at most for the final step;
				   * 0: DEFRAG_FINAL_KEYS */
	uint32_t writeback_ahead; /* bytes the copy's commits may run ahead of
				   * its writeback; 0: 8 MiB */
	int (*io_open)(int fd, void *arg, struct diskio **out);  /* btree_db_opts' */
	void *io_open_arg;
};

struct defrag_stats {
	uint64_t entries_copied;  /* by the bulk copy */
	uint64_t entries_carried; /* changed entries carried over */
	uint64_t buckets_carried; /* changed buckets copied again */
	uint32_t rounds;          /* catch-up rounds so far */
	uint64_t pending;         /* changes tracked and not carried over yet */
	uint64_t ahead_max;       /* the most bytes the commits were ahead of the
				   * writeback (its thread's; 0 without it) */
	uint64_t steps_held;      /* steps cut short to let the writeback catch up */
	uint64_t commit_max;      /* the most bytes one commit added to it */
};

/*
 * Creates the copy at o->tmp_path (the page size of live), begins the read
 * txn it copies from at live's newest commit, and tracks live's writes.
 * Between write txns of live. 0, -EEXIST (tmp_path exists), -ENOMEM, the
 * errors of creating a db (-ENOSPC ...).
 */
int defrag_begin(struct btree_db *live, const struct defrag_opts *o, struct defrag **out);

/*
 * Copies or carries over for about budget_ns, between write txns of live.
 * *ready: the final step may come (defrag_finish). 0, or -ENOTSUP (a
 * nested bucket), -ENOMEM, -ENOSPC and the errors of reading live and
 * writing the copy; the defrag must then be ended with defrag_abort.
 */
int defrag_step(struct defrag *d, int64_t budget_ns, bool *ready);

/*
 * The final step: carries over every change left, commits the copy, and
 * stops tracking live. Between write txns of live; the copy's db then
 * holds what live's newest commit holds, and its file durably the sealed
 * commit's state (called before ready, it waits for the sealed checkpoint,
 * or when none was sealed checkpoints this commit). Errors as defrag_step
 * (then defrag_abort).
 */
int defrag_finish(struct defrag *d);

/* Whether the copy has been sealed: equal to the commit of live that was
 * the newest when the step that sealed it ran, and being checkpointed
 * (or checkpointed). From then on the copy's durable state is that commit's. */
bool defrag_sealed(const struct defrag *d);

/* After defrag_finish: the copy's open db (path tmp_path), which the
 * caller owns from now on. */
struct btree_db *defrag_take(struct defrag *d);

/* Whether a step has nothing to do but wait for the copy's data to
 * reach the disk: its writeback, a chunk at a time on a thread of its own,
 * is more than writeback_ahead behind the commits (the copy is written at
 * the pace the disk takes it, and the disk's queue never holds much of it
 * ahead of the WAL's writes), or the bulk copy is synced on that thread
 * once it is done (so that the final step has little to sync): the
 * caller may sleep a little instead of stepping at once. */
bool defrag_waits(const struct defrag *d);

void defrag_stats(const struct defrag *d, struct defrag_stats *out);

/* Ends a defrag that did not finish, removes its copy and frees it. */
void defrag_abort(struct defrag *d);
/* Frees a defrag that finished (its file stays; a copy not taken is
 * checkpointed and closed). NULL is accepted. */
void defrag_free(struct defrag *d);

/*
 * Removes what a defragmentation that died left in dir (files named
 * db.tmp.*, as etcd names its own); the number removed, or a negative
 * error of reading dir.
 */
int defrag_remove_leftovers(const char *dir);

#endif
