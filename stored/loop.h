/*
 * stored's apply loop: committed entries in from raftd, the MVCC store
 * changed in batches, one published root per batch, results out to the
 * gateways, checkpoints.
 *
 * One turn drains up to a batch of MSG_COMMITTED records from
 * SHM_RING_COMMITTED into one B+tree write txn (invariant 11, docs/invariants.md). An
 * entry is applied only when its index follows the applied index; one at
 * or below it is a replayed duplicate and skipped; one past the next index
 * is a gap: it is dropped, and raftd, having seen this process's new epoch,
 * hands everything from the durable index on again. A pending compaction
 * runs a step in each batch. After the batch commits, the new root is
 * published (status_stored_write) with the batch's events, and only then
 * are the results pushed, so a client that sees its answer reads its write
 * from any gateway; the delivered index that says they are in the rings
 * (status_stored_deliver) follows them. Gateways are woken only after all
 * of it (results, then shm_events_notify): one woken earlier may take
 * stored's CPU before the rest is out. The status record is thus written
 * once per batch.
 *
 * Checkpoints (btree_db_checkpoint) run every checkpoint_ms or
 * checkpoint_entries applied entries, whichever comes first, and publish the
 * index they cover as the durable index. Stale reader entries are reaped
 * every reap_ms; the oldest live reader bounds page reuse.
 *
 * A MSG_SNAPSHOT_INSTALL (shm/msg.h) ends the batch before it; the db
 * received is then checked and prepared beside the db (install.h), and
 * made the db: readers are told to stop beginning on the old file (the
 * published root withdrawn and db_generation bumped, so a file opened
 * from then on is known to be the new one), the copy is renamed over the
 * db and the directory fsynced, and the db, the store, the membership
 * and the latest-entry cache are opened on it as at start. Its txids
 * continue above every txid published for the old file, and pages are
 * reused only once the readers that registered before it are done
 * (those read the old file, which stays whole for them). The applied and
 * durable index become the db's consistent index, so the entries at or
 * below it are skipped. A snapshot at or below the applied index is
 * skipped (a resend after a restart); a file that is not valid is refused
 * with an error line, and the entries after it are then gaps: nothing is
 * applied until raftd sends a valid one. A failure of this side (memory,
 * disk space, I/O) fails the turn instead: stored restarts, and raftd,
 * seeing the new epoch, sends the install again.
 *
 * Out of space. A batch, checkpoint, open or install that fails with
 * ENOSPC or EDQUOT publishes db_no_space in the status record (one log
 * line per episode) before the process restarts, and gatewayd refuses
 * new writes with etcd's NoSpace while it is set; requests already
 * proposed wait for their results. The next batch that commits (or a
 * received db installed) clears it, with a line. A restarted stored keeps
 * it while raftd has committed entries past the db's consistent index
 * (its replay finds out whether there is room) and clears it at its open
 * otherwise, since the refused writes would never make a batch.
 *
 * Restart (invariant 4, docs/invariants.md). stored_loop_open starts from the db's last
 * checkpoint and the last record published in the region: the epoch is the
 * previous one plus one; txids continue above the published one; pages are
 * allocated only past the published high-water mark until every reader that
 * predates the restart is done (btree_db_opts.resume); and the previous
 * root stays published until the applied index is back at the one published
 * last, so neither a revision nor an applied index ever goes backwards for
 * a reader.
 *
 * Ownership: the caller holds the stored role (shm_role_claim) for as long
 * as the loop lives; the loop owns the db and the store. One thread.
 */
#ifndef CETCD_STORED_LOOP_H
#define CETCD_STORED_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/region.h"
#include "shm/status.h"
#include "stored/lessor.h"
#include "stored/results.h"

struct auth_token_opts;
struct diskio;
struct stored_loop;

struct stored_loop_opts {
	const char *data_dir;          /* the member's --data-dir */
	uint64_t member_id;            /* this member (results go to its slots) */
	uint64_t cluster_id;           /* for response headers */
	uint32_t batch_entries;        /* most entries per batch; 0: 1024 */
	uint64_t batch_bytes;          /* most entry bytes per batch; 0: 16 MiB */
	uint32_t checkpoint_ms;        /* 0: 100 (--backend-batch-interval) */
	uint32_t checkpoint_entries;   /* 0: 10000 (--backend-batch-limit) */
	uint32_t compact_step;         /* key bucket entries (revisions) per
					* compaction step, one step a batch; 0: 1000
					* (--experimental-compaction-batch-limit) */
	uint32_t reap_ms;              /* reader reaping period; 0: 1000 */
	int64_t warn_apply_ns;         /* an entry applied slower is logged and
					* counted; 0: 100 ms
					* (--experimental-warning-apply-duration) */
	uint64_t map_size;             /* db address space; 0: btree's default */
	struct lessor_opts lease;      /* the lessor's (minimum TTL, checkpoints) */
	int64_t request_timeout_ns;    /* gatewayd's: a keepalive waits for an
					* expired lease's revoke no longer; 0:
					* LESSOR_WAITER_LIFE_NS */
	/* --auth-token and --auth-token-ttl, parsed (auth/token.h); NULL in
	 * tests that need no tokens. Kept by reference: outlives the loop. */
	const struct auth_token_opts *auth_tokens;
	int bcrypt_cost;               /* passwords hashed at apply (auth/bcrypt.h);
					* out of range: etcd's default 10 */
	/* Tests only: opens the db's disk I/O (btree_db_opts.io_open), e.g.
	 * the fault backend; NULL: io_uring where permitted, else plain. */
	int (*io_open)(int fd, void *arg, struct diskio **out);
	void *io_open_arg;
};

struct stored_loop_stats {
	uint64_t applied_index;       /* last index applied (maybe not committed yet) */
	uint64_t committed_index;     /* last index in a committed batch */
	uint64_t durable_index;       /* last index a checkpoint covers */
	uint64_t hold_index;          /* no own root is published below it */
	uint64_t epoch;
	int64_t revision;
	bool publishing;              /* a root of this process is published */
	uint64_t entries;             /* applied since open */
	uint64_t duplicates;          /* skipped: at or below the applied index */
	uint64_t gaps;                /* dropped: past the next index */
	uint64_t malformed;           /* records that were neither MSG_COMMITTED
				       * nor a well-formed MSG_SNAPSHOT_INSTALL */
	uint64_t installs;            /* received dbs made the db */
	uint64_t installs_skipped;    /* snapshots at or below the applied index */
	uint64_t installs_refused;    /* received dbs that were not valid */
	uint64_t batches;
	uint64_t checkpoints;
	uint64_t results[STORED_RESULT_VERDICTS];
};

/*
 * Opens (creating <data_dir>/member/snap/db, directories 0700 and fsynced)
 * the db and the MVCC store, and publishes this process's new epoch as
 * above. r must stay attached while the loop lives. Returns 0, or -ENOMEM,
 * a db or store error (errmsg_get(rc) says more), or
 * -errno of mkdir/open.
 */
int stored_loop_open(struct shm_region *r, const struct stored_loop_opts *o,
		     struct stored_loop **out);

/*
 * One turn: answers attach hellos, applies one batch (and a compaction
 * step), checkpoints when due, reaps stale readers when due. *more (may be
 * NULL) tells whether work is left that should not wait for a wake-up.
 * Returns 0, or an error after which the process must restart (the db or a
 * ring failed; what was not checkpointed is redone from raftd's log).
 */
int stored_loop_turn(struct stored_loop *l, bool *more);

/*
 * Runs turns until *stop is set, sleeping on the stored role's doorbell
 * while idle (until a checkpoint is due, or the doorbell's backstop). A
 * signal handler that sets *stop should ring that doorbell
 * (shm_role_doorbell, shm_doorbell_ring). Returns 0 when stopped, or the
 * error of stored_loop_turn.
 */
int stored_loop_run(struct stored_loop *l, const volatile sig_atomic_t *stop);

/* Makes everything applied durable now and publishes the durable index.
 * Returns 0 or the error of btree_db_checkpoint. */
int stored_loop_checkpoint(struct stored_loop *l);

/* Waits for the checkpoint a turn started in the background, if one is
 * being written, and publishes the durable index it reached. */
int stored_loop_checkpoint_wait(struct stored_loop *l);

/* Closes the store and the db without writing (call
 * stored_loop_checkpoint first for a clean stop). NULL is accepted. */
void stored_loop_free(struct stored_loop *l);

void stored_loop_stats(const struct stored_loop *l, struct stored_loop_stats *out);

/* The db file's path (<data_dir>/member/snap/db); valid while l lives. */
const char *stored_loop_db_path(const struct stored_loop *l);

#endif
