/* stored's apply loop (see loop.h). */
#include "base/clock/clock.h"
#include "shm/metrics.h"
#include "stored/loop.h"
#include "stored/alarm.h"
#include "stored/auth.h"
#include "stored/auth_check.h"
#include "auth/bcrypt.h"
#include "stored/membership_db.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/thread/thread.h"
#include "shm/bcast.h"
#include "base/diskio/diskio.h"
#include "config/config.h"
#include "shm/doorbell.h"
#include "base/log/errmsg.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "shm/msg.h"
#include "shm/readers.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/tokens.h"
#include "stored/alloc.h"
#include "stored/apply.h"
#include "stored/defrag.h"
#include "stored/events.h"
#include "stored/install.h"
#include "stored/lessor_loop.h"
#include "stored/btree/arena.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/kvindex.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc.h"
#include "raftpb/raft.pb-c.h"

/* How long spinning for raftd's next entries is worth it before sleeping. */
#define LOOP_SPIN_US 50
/* How long a restart waits for a dead predecessor's lock on the db. */
#define LOOP_DB_BUSY_MS 10000
/* How long a restart waits for the readers of a half-written status record. */
#define LOOP_TORN_WAIT_MS 5000
/* Keys of the file told to the latest-entry cache per idle turn at most
 * (each a lookup of its revision in the key bucket), and the time such a
 * step takes at most. */
#define LOOP_CACHE_WARM_STEP 4096
#define LOOP_CACHE_WARM_STEP_NS 1000000
/* The loop arena's chunks (64 KiB each) kept for the next batch instead
 * of going back to malloc at every batch's end: a small batch's decoding
 * then allocates nothing. */
#define LOOP_ARENA_POOL_MAX 16
/* Time a defragmentation's step takes per turn. */
#define LOOP_DEFRAG_STEP_NS 1000000

/* How often the requests of physical compactions under way hear that
 * their answer is still coming (MSG_RESULT_INTERIM): well within the
 * gateways' request timeout, which each one starts again. */
#define LOOP_INTERIM_NS 1000000000ll

struct stored_loop {
	struct shm_region *r;
	struct shm_metrics *metrics;     /* stored's block (shm/metrics.h), or NULL */
	struct stored_loop_opts o;
	char *db_path;
	char *install_path;              /* a received db is prepared there */
	struct btree_db *db;
	struct mvcc_store *store;
	struct stored_apply_ids ids;
	struct membership membership;    /* as of the store's consistent index */
	struct stored_alarms alarms;     /* likewise */
	struct stored_auth auth;         /* likewise */
	struct stored_auth_check auth_check; /* its permission cache, likewise */
	struct stored_results results;
	struct lessor *lessor;           /* the leases, as of the consistent index */
	struct lessor_loop lease;        /* its requests and timekeeping */
	struct ring *committed;
	struct shm_doorbell *bell;       /* the stored role's */
	struct shm_doorbell *raftd_bell; /* the producer's, for spinning */
	const volatile sig_atomic_t *stop;

	struct arena arena;              /* the open batch's requests and answers */
	struct arena_pool arena_pool;    /* its chunks, kept from batch to batch */
	struct stored_apply_result *res; /* the batch's answers to deliver */
	size_t nres, res_cap;
	/* physical compactions whose answer waits for the deletion to
	 * finish, in index order; the region keeps a copy for the next
	 * stored (status_waiting_write) */
	struct status_waiting *waiting;
	size_t nwaiting, waiting_cap;
	int64_t interim_ns;              /* when they were last told (or began) */

	struct status_stored pub;        /* the record as last published */
	uint64_t delivered;              /* the delivered index as last published */
	uint64_t applied;                /* last index applied */
	uint64_t committed_index;        /* last index of a committed batch */
	uint64_t hold;                   /* publish no own root below it */
	bool publishing;                 /* pub holds a root of this process */
	bool dirty;                      /* committed since the last checkpoint */
	uint64_t since_checkpoint;       /* entries committed since then */
	uint64_t compact_batches;        /* batches of the compaction under way */
	int64_t checkpoint_ns;           /* time of the last checkpoint */
	uint64_t checkpoint_index;       /* applied index the one being written covers */
	int64_t reap_ns;                 /* time of the last reap */
	int64_t trim_ns;                 /* when shm_role_trim wants a look */
	uint64_t gap_logged;             /* applied index the last gap was logged at */
	struct lcache cache;             /* the latest-entry cache in the region */
	struct kvindex_feed cache_feed;  /* what keeps it, and its warming */
	bool cache_on;                   /* kept up to date by the db */
	bool cache_warm_failed;          /* warming stopped on an error */
	int64_t cache_warm_next_ns;      /* no warming step before (the last
					  * one's rest) */
	struct stored_loop_stats st;
	struct stored_events events;     /* the batch's watch events (events.h) */
	uint64_t db_ino;                 /* inode of the db file open */
	/* Defragmentation (defrag.h): the one under way and its copy, the
	 * requests it answers, and those that wait for the next one. */
	struct defrag *defrag;
	char *defrag_path;
	struct msg_origin *defrag_serving, *defrag_waiting;
	size_t ndefrag_serving, defrag_serving_cap, ndefrag_waiting, defrag_waiting_cap;
	int64_t defrag_start_ns;
	uint64_t defrag_size, defrag_in_use;  /* before it */
	int64_t defrag_longest_ns;       /* the longest step of it so far */
	int64_t defrag_longest_cpu_ns;   /* and in this thread's CPU time */
	/* The copy was sealed (defrag_sealed) when the applied index was
	 * defrag_seal_index: its file holds that index durably once the
	 * rename is, so no checkpoint of the db starts from then on (the
	 * durable index published stays at or below it). */
	bool defrag_sealed;
	uint64_t defrag_seal_index;
	bool defrag_put_off;             /* ready, its switch put off this turn */
	/* The file a defragmentation or an install replaced, held open (-1:
	 * none) until no reader can read it any more, then given back a step
	 * at a time (loop_replaced_poll); old_txid is the last txid published
	 * for it. */
	int old_fd;
	uint64_t old_txid;
	/* The directory's sync after a defragmented db was renamed into
	 * place, on a thread of its own: 0 none, 1 running, 2 done, else
	 * -errno. Until it is done no durable index is published (raftd
	 * keeps its log until the rename is durable); the index of the last
	 * checkpoint that ended meanwhile waits in durable_later. */
	pthread_t dir_syncer;
	bool dir_sync_thread;            /* dir_syncer runs (to be joined) */
	_Atomic int dir_sync;
	uint64_t durable_later;
	uint64_t defrag_seq;
};

static void loop_defrag_request(void *arg, uint32_t slot, const struct ring_rec *rec);
static int loop_dir_sync_poll(struct stored_loop *l, bool wait);

/* This thread's CPU time: what a step costs the loop, apart from the
 * time the machine gives other processes meanwhile. */
static int64_t loop_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* This thread's time off the CPU waiting for it (the run queue), from
 * /proc/thread-self/schedstat; 0 where it cannot be read. With the CPU
 * time, what is left of a stretch of wall-clock time is the time the
 * thread was blocked: in syscalls (a sync, a lock), page faults that
 * read the disk, a sleep. */
static int64_t loop_queued_ns(void)
{
	long long run = 0, queued = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (!f)
		return 0;
	if (fscanf(f, "%lld %lld", &run, &queued) != 2)
		queued = 0;
	fclose(f);
	return queued;
}

/* ---- start ---- */

/* Whether rc says the db found no room: a full disk (or quota), or, as
 * the error's text then says, the db's map size reached. */
static bool loop_no_space(int rc)
{
	return rc == -ENOSPC || rc == -EDQUOT;
}

/* The line an operator needs when the db found no room, or NULL. */
static const char *loop_no_space_hint(int rc)
{
	return loop_no_space(rc) ? "no space left for the db: free space on the disk that holds it; "
				   "stored restarts and applies again from its last checkpoint"
				 : NULL;
}

/* mkdir -p with mode 0700 for what it creates; the parent of every
 * directory it creates is fsynced (invariant 12, docs/invariants.md). */
static int loop_mkdir_p(const char *path)
{
	int rc = diskio_mkdir_all(path, 0700);
	if (rc)
		log_error("cannot create the db directory", LOG_STR("path", path), LOG_ERRNO(rc));
	return rc;
}

/* The oldest txid anyone may read at: that of every registered reader,
 * and that of the published root, at which a reader may begin any moment.
 * After a restart, while the previous process's root stays published, the
 * latter keeps the pages it reaches from reuse. */
static uint64_t loop_oldest_reader(void *arg)
{
	struct stored_loop *l = arg;
	uint64_t oldest = readers_oldest(l->r);

	if (l->pub.root_page && l->pub.txid < oldest)
		oldest = l->pub.txid;
	return oldest;
}

/*
 * The record the previous stored published, into *prev. When a stored died
 * in the middle of writing it, nothing of it can be trusted: wait (bounded)
 * until the readers that predate it are done (no new one can start while
 * the record is torn), and start as if nothing had been published, with an
 * epoch no earlier one can have had and a hold at raftd's commit index
 * (which bounds any applied index published before). Returns whether the
 * record was readable.
 */
static bool loop_previous(struct stored_loop *l, struct status_stored *prev)
{
	struct status_raftd rs;
	struct timespec ts;
	int64_t give_up;

	if (status_stored_read(l->r, prev) == 0)
		return true;
	log_warn("stored's status record was left half written by a process that died; "
		 "waiting for the readers that predate it");
	give_up = clock_now_ns() + (int64_t)LOOP_TORN_WAIT_MS * 1000000;
	for (;;) {
		readers_reap(l->r);
		if (readers_oldest(l->r) == READERS_IDLE)
			break;
		if (clock_now_ns() > give_up) {
			log_warn("readers of the torn status record are still active; starting anyway");
			break;
		}
		usleep(10000);
	}
	memset(prev, 0, sizeof(*prev));
	clock_gettime(CLOCK_REALTIME, &ts);
	prev->epoch = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (status_raftd_read(l->r, &rs) == 0)
		prev->applied_index = rs.commit_index;
	return false;
}

/* Publishes l->pub as it stands. */
static void loop_write_status(struct stored_loop *l)
{
	status_stored_write(l->r, &l->pub);
}

/*
 * A write of the db failed with rc: when for want of room, publishes
 * db_no_space (shm/status.h) so that gatewayd refuses new writes at once
 * rather than letting them wait for a stored that cannot apply them. One
 * line per episode: a stored restarted during it finds the flag in the
 * record it took over and says nothing more here (each failure still
 * logs its own cause).
 */
static void loop_no_space_set(struct stored_loop *l, int rc)
{
	if (!loop_no_space(rc) || l->pub.db_no_space)
		return;
	log_warn("the db is out of space: gateways refuse new writes with \"etcdserver: mvcc: "
		 "database space exceeded\" until a batch commits again; free space on the disk "
		 "that holds the db", LOG_STR("path", l->db_path),
		 LOG_U64("applied-index", l->pub.applied_index), LOG_ERRNO(rc));
	l->pub.db_no_space = true;
	loop_write_status(l);
}

/* A write of the db found room again (a batch committed, a received db
 * was installed): clears db_no_space, published with the new root. */
static void loop_no_space_clear(struct stored_loop *l, const char *why)
{
	if (!l->pub.db_no_space)
		return;
	log_info("the db has space again: gateways take new writes", LOG_STR("path", l->db_path),
		 LOG_STR("reason", why), LOG_U64("applied-index", l->committed_index));
	l->pub.db_no_space = false;
}

/* Publishes index as the delivered index (status_stored_deliver), when it
 * is past the one published: every result up to it is in its ring by now
 * (not past a compaction whose answer still waits). */
static void loop_deliver_index(struct stored_loop *l, uint64_t index)
{
	if (index <= l->delivered)
		return;
	l->delivered = index;
	status_stored_deliver(l->r, index);
}

/* Publishes the newest commit as the root readers use, unless the applied
 * index is still below the one published before this process started. */
static void loop_publish_root(struct stored_loop *l)
{
	struct mvcc_state ms;
	struct btree_root root;

	if (l->committed_index < l->hold) {
		loop_write_status(l);
		events_discard(&l->events); /* the db gives them, after a RESYNC */
		events_resync(&l->events);
		return;
	}
	btree_db_current(l->db, &root);
	mvcc_store_state(l->store, &ms);
	struct btree_db_stats bs;
	btree_db_stats(l->db, &bs);
	l->pub.free_pages = bs.free_pages;
	l->pub.db_ino = l->db_ino;
	l->pub.root_page = root.root_pgid;
	l->pub.txid = root.txid;
	l->pub.high_water_page = root.hwm_pgid;
	l->pub.applied_index = l->committed_index;
	l->pub.revision = (uint64_t)ms.rev;
	l->pub.auth_enabled = l->auth.enabled;
	l->pub.auth_revision = l->auth.revision;
	if (!l->publishing)
		log_info("publishing the store to readers", LOG_U64("applied-index", l->committed_index),
			 LOG_I64("revision", ms.rev), LOG_U64("txid", root.txid));
	l->publishing = true;
	loop_write_status(l);
	events_publish(&l->events); /* after the root that holds them */
}

/*
 * Lays the region's latest-entry cache out (the first stored of a region
 * does) and has the db keep it, cleared first: entries of a predecessor
 * may name pages and txids of commits it never published. Before any root
 * of this process is published. Without an area (or with one that is not
 * a cache) reads go down the tree.
 */
static void loop_cache_open(struct stored_loop *l)
{
	size_t bytes;
	void *area = shm_cache_area(l->r, &bytes);
	int rc;

	if (!area)
		return;
	rc = lcache_attach(&l->cache, area, bytes);
	if (rc == -EAGAIN) {
		lcache_format(&l->cache, area, lcache_sets_for(bytes));
		rc = 0;
	}
	if (rc == 0)
		rc = kvindex_feed_cache(l->db, &l->cache_feed, &l->cache, l->pub.db_generation);
	if (rc) {
		log_warn("cannot use the latest-entry cache; point reads go down the tree",
			 LOG_U64("bytes", bytes), LOG_ERRNO(rc));
		return;
	}
	l->cache_on = true;
}

/* Whether the cache still has keys of the file to hear of (those of the
 * file as stored opened it, or all after the cache was cleared). */
static bool loop_cache_cold(const struct stored_loop *l)
{
	return l->cache_on && !l->cache_feed.warm_done && !l->cache_warm_failed;
}

/* Tells the cache of a chunk of the keys it has not heard of, between
 * batches. A failure only stops the warming: the cache then fills as keys
 * are written. Each step is followed by a rest as long as it took, so
 * that warming (after a start, a defragmentation or an install, seconds
 * of a CPU at a million keys) takes at most half of a CPU from the
 * member's other processes and its clients; point reads go down the tree
 * meanwhile. A step ends after LOOP_CACHE_WARM_STEP_NS, so that a batch
 * committed meanwhile waits no longer than that: in a file just mapped
 * (after a defragmentation) 4096 keys took 25-30 ms, a put's whole wait. */
static void loop_cache_warm(struct stored_loop *l, int64_t now)
{
	bool done;
	int rc;

	if (!loop_cache_cold(l) || now < l->cache_warm_next_ns)
		return;
	int64_t start = clock_now_ns();
	rc = kvindex_feed_warm(&l->cache_feed, LOOP_CACHE_WARM_STEP, start + LOOP_CACHE_WARM_STEP_NS,
			       &done);
	int64_t end = clock_now_ns();
	l->cache_warm_next_ns = end + (end - start);
	if (rc) {
		log_warn("cannot fill the latest-entry cache from the db; it fills as keys are written",
			 LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		l->cache_warm_failed = true;
	} else if (done) {
		log_info("the latest-entry cache holds every key of the db");
	}
}

static void loop_opts_defaults(struct stored_loop_opts *o)
{
	if (!o->batch_entries)
		o->batch_entries = 1024;
	if (!o->batch_bytes)
		o->batch_bytes = 16u << 20;
	if (!o->checkpoint_ms)
		o->checkpoint_ms = 100;
	if (!o->checkpoint_entries)
		o->checkpoint_entries = 10000;
	if (!o->compact_step)
		o->compact_step = 1000;
	if (o->warn_apply_ns <= 0)
		o->warn_apply_ns = 100000000;
	if (!o->reap_ms)
		o->reap_ms = 1000;
	o->bcrypt_cost = bcrypt_cost_or_default((unsigned long long)o->bcrypt_cost);
}

/* The store's changes, for what follows them: the keys of each lease,
 * and the batch's watch events. */
static void loop_on_event(void *arg, const struct mvcc_event *ev)
{
	struct stored_loop *l = arg;
	lessor_on_event(l->lessor, ev);
	events_on_event(&l->events, ev);
}

/* Opens the store on the db. */
static int loop_store_open(struct stored_loop *l)
{
	struct mvcc_store_opts so = { .on_event = loop_on_event, .event_arg = l };
	int rc = mvcc_store_open(l->db, &so, &l->store);

	if (rc)
		log_error("cannot open the key-value store in the db", LOG_STR("path", l->db_path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
	return rc;
}

/* Opens the db at path (resuming after the previous record) and the
 * store on it, and makes what the open wrote durable. */
static int loop_open_store(struct stored_loop *l, const char *path,
			   const struct status_stored *prev, bool known)
{
	struct btree_db_opts bo = {
		.create = true,
		.map_size = l->o.map_size,
		.oldest_reader = loop_oldest_reader,
		.oldest_reader_arg = l,
		.io_open = l->o.io_open,
		.io_open_arg = l->o.io_open_arg,
	};
	int rc;

	if (known && prev->txid) {
		bo.resume.root_pgid = prev->root_page;
		bo.resume.txid = prev->txid;
		bo.resume.hwm_pgid = prev->high_water_page;
	}
	/* The lock of a killed predecessor can outlive it briefly: its
	 * io_uring instance, torn down after its exit, still holds the file. */
	int64_t start = clock_now_ns();
	for (;;) {
		rc = btree_db_open(path, &bo, &l->db);
		if (rc != -EBUSY || clock_now_ns() - start > (int64_t)LOOP_DB_BUSY_MS * 1000000)
			break;
		usleep(2000);
	}
	if (rc == 0 && clock_now_ns() - start > 2000000)
		log_info("waited for the db's lock to go with a previous writer",
			 LOG_STR("path", l->db_path), LOG_I64("waited-ms", (clock_now_ns() - start) / 1000000));
	if (rc) {
		log_error("cannot open the db", LOG_STR("path", path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		return rc;
	}
	struct stat sb;
	l->db_ino = stat(path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
	rc = loop_store_open(l);
	if (rc)
		return rc;
	rc = btree_db_checkpoint(l->db, NULL);
	if (rc) {
		const char *hint = loop_no_space_hint(rc);
		log_error(hint ? hint : "cannot checkpoint the db", LOG_STR("path", l->db_path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		return rc;
	}
	return 0;
}

/* Opens the db and the store (loop_open_store), and loads the members,
 * alarms and leases it holds. */
static int loop_open_db(struct stored_loop *l, const char *path, const struct status_stored *prev,
			bool known)
{
	int rc = loop_open_store(l, path, prev, known);

	if (rc)
		return rc;
	struct btree_txn *t;
	rc = btree_db_read_begin(l->db, NULL, &t);
	if (!rc) {
		rc = membership_db_load(t, &l->membership);
		if (!rc)
			rc = stored_alarms_load(t, &l->alarms);
		if (!rc)
			rc = stored_auth_load(t, &l->auth);
		if (!rc)
			rc = stored_auth_check_load(&l->auth_check, t);
		btree_txn_end(t);
	}
	if (!rc)
		rc = lessor_loop_load(l->lessor, l->store);
	if (rc)
		log_error("cannot read the cluster's members from the db", LOG_STR("path", l->db_path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
	l->ids.membership = &l->membership;
	l->ids.alarms = &l->alarms;
	l->ids.lessor = l->lessor;
	l->ids.auth = &l->auth;
	l->auth_check.lessor = l->lessor;
	l->ids.auth_check = &l->auth_check;
	l->auth.check = &l->auth_check;
	return rc;
}

/*
 * Whether raftd has committed entries past what the db holds, which this
 * stored applies next. A db_no_space carried over from the previous
 * stored stays until they commit (or fail again); with none of them, no
 * batch would ever come to clear it, as gateways refuse the writes that
 * would make one, so the flag goes at the open. Unknown (raftd's record
 * unreadable): false, for the same reason.
 */
static bool loop_has_replay(struct stored_loop *l)
{
	struct status_raftd rs;

	return status_raftd_read(l->r, &rs) == 0 && rs.commit_index > l->committed_index;
}

static int loop_answer_waiting(struct stored_loop *l, int64_t rev);

/*
 * Takes over the physical compactions that a stored killed during their
 * deletion left waiting (the region's copy): those applied before the
 * db's last checkpoint, whose entries this stored does not apply again
 * (the later ones come back with their entries). The deletion resumes
 * from the db (scheduledCompactRev) and they are answered when it is
 * done, or now if it was done already; the interim results go on at the
 * next step. The slots' identity rules drop the answer of a request
 * whose gateway is gone.
 */
static int loop_waiting_restore(struct stored_loop *l, const struct mvcc_state *ms)
{
	struct status_waiting w[STATUS_WAITING_MAX];
	int n = status_waiting_read(l->r, w, STATUS_WAITING_MAX);
	size_t kept = 0;
	int rc;

	if (n < 0) {
		log_warn("the compactions that waited cannot be taken over; their clients get the "
			 "request timeout", LOG_STR("reason", errmsg_get(n)));
		n = 0;
	}
	for (int i = 0; i < n; i++)
		if (w[i].index && w[i].index <= ms->consistent_index &&
		    w[i].origin.member_id == l->ids.member_id)
			w[kept++] = w[i];
	if (kept) {
		rc = stored_reserve((void **)&l->waiting, &l->waiting_cap, kept,
				    sizeof(*l->waiting), 64);
		if (rc)
			return rc;
		memcpy(l->waiting, w, kept * sizeof(*w));
		l->nwaiting = kept;
	}
	/* the record keeps those taken over until they are answered (at once
	 * when their deletion is done: loop_answer_waiting empties it) */
	if (!kept || ms->compacting)
		status_waiting_write(l->r, l->waiting, (unsigned)l->nwaiting);
	if (!kept)
		return 0;
	log_info("took over the physical compactions the previous stored had not answered",
		 LOG_U64("count", kept), LOG_BOOL("compacting", ms->compacting));
	if (ms->compacting) {
		l->interim_ns = clock_now_ns() - LOOP_INTERIM_NS; /* told at the next step */
		return 0;
	}
	rc = loop_answer_waiting(l, ms->rev);
	stored_results_publish(&l->results);
	stored_results_wake(&l->results);
	arena_release(&l->arena);
	return rc;
}

int stored_loop_open(struct shm_region *r, const struct stored_loop_opts *o,
		     struct stored_loop **out)
{
	struct status_stored prev;
	struct mvcc_state ms;
	size_t dlen = strlen(o->data_dir);
	struct stored_loop *l = stored_calloc(1, sizeof(*l));
	bool known;
	int rc;

	if (!l)
		return -ENOMEM;
	l->r = r;
	l->o = *o;
	loop_opts_defaults(&l->o);
	l->ids.member_id = o->member_id;
	l->ids.cluster_id = o->cluster_id;
	l->auth.bcrypt_cost = l->o.bcrypt_cost;
	l->auth.tokens = o->auth_tokens;
	l->auth.region = r;
	l->metrics = shm_metrics_block(r, SHM_METRICS_STORED);
	l->ids.metrics = l->metrics;
	l->committed = shm_daemon_ring(r, SHM_RING_COMMITTED);
	l->bell = shm_role_doorbell(r, SHM_ROLE_STORED);
	l->raftd_bell = shm_role_doorbell(r, SHM_ROLE_RAFTD);
	arena_init(&l->arena);
	arena_pool_init(&l->arena_pool, LOOP_ARENA_POOL_MAX);
	l->arena.pool = &l->arena_pool;
	events_init(&l->events, shm_events(r));
	bcast_producer_takeover(shm_events(r));
	rc = stored_results_init(&l->results, r, o->member_id);
	if (rc)
		goto out_free;
	rc = lessor_new(&o->lease, &l->lessor);
	if (rc)
		goto out_free;
	lessor_loop_init(&l->lease, r, l->lessor, &l->results, o->member_id, o->cluster_id);
	l->lease.auth = &l->auth_check;
	l->lease.waiter_life_ns = o->request_timeout_ns;
	l->lease.other = loop_defrag_request;
	l->lease.other_arg = l;
	l->db_path = stored_malloc(dlen + sizeof("/member/snap/db"));
	if (!l->db_path) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(l->db_path, o->data_dir, dlen);
	memcpy(l->db_path + dlen, "/member/snap", sizeof("/member/snap"));
	rc = loop_mkdir_p(l->db_path);
	if (rc)
		goto out_free;
	memcpy(l->db_path + dlen, "/member/snap/db", sizeof("/member/snap/db"));
	l->install_path = stored_malloc(dlen + sizeof("/member/snap/db.installing"));
	if (!l->install_path) {
		rc = -ENOMEM;
		goto out_free;
	}
	memcpy(l->install_path, l->db_path, dlen + sizeof("/member/snap/db") - 1);
	memcpy(l->install_path + dlen + sizeof("/member/snap/db") - 1, ".installing",
	       sizeof(".installing"));
	(void)unlink(l->install_path); /* left by an install that died */
	l->db_path[dlen + sizeof("/member/snap") - 1] = '\0';
	rc = defrag_remove_leftovers(l->db_path);
	if (rc > 0)
		log_info("removed what a defragmentation that died left", LOG_STR("dir", l->db_path),
			 LOG_I64("files", rc));
	l->db_path[dlen + sizeof("/member/snap") - 1] = '/';

	known = loop_previous(l, &prev);
	if (known)
		l->pub = prev; /* still what readers use, until replaced */
	l->delivered = status_stored_delivered(r);
	readers_reap(r);
	rc = loop_open_db(l, l->db_path, &prev, known);
	if (rc) {
		if (known)
			loop_no_space_set(l, rc); /* l->pub is still prev */
		goto out_free;
	}
	loop_cache_open(l);

	mvcc_store_state(l->store, &ms);
	l->applied = l->committed_index = ms.consistent_index;
	l->hold = prev.applied_index;
	l->checkpoint_ns = l->reap_ns = clock_now_ns();
	l->trim_ns = INT64_MAX;
	l->old_fd = -1;
	l->pub.epoch = prev.epoch + 1;
	l->pub.durable_index = l->committed_index;
	log_info("opened the db", LOG_STR("path", l->db_path),
		 LOG_U64("consistent-index", ms.consistent_index), LOG_I64("revision", ms.rev),
		 LOG_I64("compact-revision", ms.compact_rev), LOG_BOOL("compacting", ms.compacting),
		 LOG_BOOL("index-rebuilt", ms.rebuilt), LOG_U64("epoch", l->pub.epoch),
		 LOG_U64("published-applied-index", prev.applied_index));
	if (l->committed_index < l->hold)
		log_info("keeping the previous root published until the applied index catches up",
			 LOG_U64("applied-index", l->committed_index), LOG_U64("hold-index", l->hold));
	if (l->pub.db_no_space && !loop_has_replay(l))
		loop_no_space_clear(l, "the db opened with nothing left to apply; the next write "
				       "finds out whether there is room");
	loop_publish_root(l);
	shm_events_notify(l->r);
	rc = loop_waiting_restore(l, &ms);
	if (rc)
		goto out_free;
	*out = l;
	return 0;

out_free:
	stored_loop_free(l);
	return rc;
}

void stored_loop_free(struct stored_loop *l)
{
	if (!l)
		return;
	defrag_abort(l->defrag);
	if (l->old_fd >= 0)
		close(l->old_fd);
	(void)loop_dir_sync_poll(l, true);
	mvcc_store_close(l->store);
	btree_db_close(l->db);
	membership_free(&l->membership);
	stored_alarms_free(&l->alarms);
	stored_auth_check_fini(&l->auth_check);
	kvindex_feed_close(&l->cache_feed);
	stored_results_fini(&l->results);
	lessor_loop_fini(&l->lease);
	lessor_free(l->lessor);
	events_fini(&l->events);
	arena_release(&l->arena);
	arena_pool_destroy(&l->arena_pool);
	stored_free(l->res);
	stored_free(l->waiting);
	stored_free(l->db_path);
	stored_free(l->install_path);
	stored_free(l->defrag_path);
	stored_free(l->defrag_serving);
	stored_free(l->defrag_waiting);
	stored_free(l);
}

const char *stored_loop_db_path(const struct stored_loop *l)
{
	return l->db_path;
}

void stored_loop_stats(const struct stored_loop *l, struct stored_loop_stats *out)
{
	struct mvcc_state ms;

	*out = l->st;
	mvcc_store_state(l->store, &ms);
	out->applied_index = l->applied;
	out->committed_index = l->committed_index;
	out->durable_index = l->pub.durable_index;
	out->hold_index = l->hold;
	out->epoch = l->pub.epoch;
	out->revision = ms.rev;
	out->publishing = l->publishing;
	memcpy(out->results, l->results.counts, sizeof(out->results));
}

/* ---- checkpoints ---- */

/*
 * After the db's file failed, the pages of commits since the last durable
 * checkpoint may never reach the disk: the kernel may drop them from its
 * cache after a failed sync, and a reader would then find the old bytes.
 * So the root that reaches them is withdrawn: readers begin no new
 * transaction (gatewayd answers UNAVAILABLE) until the next stored has
 * replayed to the applied index published here (invariant 4, docs/invariants.md; the
 * record keeps that index, the epoch and the high-water mark).
 */
static void loop_withdraw_root(struct stored_loop *l)
{
	if (!btree_db_failed(l->db) || l->pub.root_page == 0)
		return;
	log_warn("withdrew the published root: the db file failed, so pages it reaches may be "
		 "lost; reads wait until stored has restarted and replayed",
		 LOG_U64("applied-index", l->pub.applied_index),
		 LOG_U64("durable-index", l->pub.durable_index));
	l->pub.root_page = 0;
	l->publishing = false;
	loop_write_status(l);
}

static int loop_checkpoint_failed(struct stored_loop *l, int rc)
{
	const char *hint = loop_no_space_hint(rc);
	log_error(hint ? hint : "checkpoint failed; restart stored to recover from the last one",
		  LOG_STR("path", l->db_path), LOG_STR("reason", errmsg_get(rc)),
		  LOG_ERRNO(rc));
	loop_no_space_set(l, rc);
	loop_withdraw_root(l);
	return rc;
}

/* A checkpoint has ended: what it covered is durable. */
static void loop_checkpoint_done(struct stored_loop *l, uint64_t index)
{
	l->st.checkpoints++;
	/* With a sealed copy that may become the db, no more than the sealed
	 * index may be called durable (a checkpoint of the old file made
	 * anyway: a compaction's, or at a stop) */
	if (l->defrag_sealed && index > l->defrag_seal_index)
		index = l->defrag_seal_index;
	if (index < l->pub.durable_index)
		index = l->pub.durable_index;
	if (atomic_load_explicit(&l->dir_sync, memory_order_acquire) != 0) {
		if (index > l->durable_later)
			l->durable_later = index;
		return;
	}
	l->pub.durable_index = index;
	loop_write_status(l);
}

/* Reaps the checkpoint being written, if any (wait: until it ends). */
static int loop_checkpoint_poll(struct stored_loop *l, bool wait)
{
	bool done;
	if (!btree_db_checkpoint_busy(l->db))
		return 0;
	int rc = btree_db_checkpoint_poll(l->db, wait, &done);
	if (rc)
		return loop_checkpoint_failed(l, rc);
	if (done)
		loop_checkpoint_done(l, l->checkpoint_index);
	return 0;
}

int stored_loop_checkpoint_wait(struct stored_loop *l)
{
	return loop_checkpoint_poll(l, true);
}

int stored_loop_checkpoint(struct stored_loop *l)
{
	int rc = loop_checkpoint_poll(l, true);
	if (rc || !l->dirty)
		return rc;
	rc = btree_db_checkpoint(l->db, NULL);
	if (rc)
		return loop_checkpoint_failed(l, rc);
	l->dirty = false;
	l->since_checkpoint = 0;
	l->checkpoint_ns = clock_now_ns();
	loop_checkpoint_done(l, l->committed_index);
	return 0;
}

/* Starts a checkpoint in the background (io_uring chains its writes and
 * syncs while the next batches apply); done at once where it cannot. */
static int loop_checkpoint_begin(struct stored_loop *l)
{
	bool started;
	int rc = btree_db_checkpoint_begin(l->db, &started);
	if (rc)
		return loop_checkpoint_failed(l, rc);
	l->dirty = false;
	l->since_checkpoint = 0;
	l->checkpoint_ns = clock_now_ns();
	l->checkpoint_index = l->committed_index;
	if (started && !btree_db_checkpoint_busy(l->db))
		loop_checkpoint_done(l, l->checkpoint_index);
	return 0;
}

static bool loop_checkpoint_due(const struct stored_loop *l, int64_t now)
{
	return l->dirty && !btree_db_checkpoint_busy(l->db) && !l->defrag_sealed &&
	       (l->since_checkpoint >= l->o.checkpoint_entries ||
		now - l->checkpoint_ns >= (int64_t)l->o.checkpoint_ms * 1000000);
}

/* ---- one batch ---- */

/* Handles one record of the committed ring: applies it, skips it, or
 * drops it. 0 or a batch-failing error. */
/* etcd's warnOfExpensiveRequest for an applied entry: one that took longer
 * than --experimental-warning-apply-duration is logged with etcd's line
 * and counted in etcd_server_slow_apply_total. */
static void loop_warn_slow_apply(struct stored_loop *l, const struct msg_committed *h,
				 const struct ring_rec *rec, const struct stored_apply_result *res,
				 int rc, int64_t took_ns)
{
	char took[32], expected[32], req[384], resp[32] = "";

	if (took_ns <= l->o.warn_apply_ns)
		return;
	shm_metric_add(l->metrics, SHM_M_SLOW_APPLY, 1);
	if (h->entry_type != RAFTPB__ENTRY_TYPE__EntryNormal)
		return; /* etcd warns of requests only */
	log_go_duration_text(took_ns, took);
	log_go_duration_text(l->o.warn_apply_ns, expected);
	stored_apply_describe((const uint8_t *)rec->data + sizeof(*h), h->data_len, req,
			      sizeof(req));
	if (rc == 0 && res->deliver && res->status == 0)
		snprintf(resp, sizeof(resp), "size:%u", res->body_len);
	log_warn("apply request took too long", LOG_STR("took", took),
		 LOG_STR("expected-duration", expected), LOG_STR("prefix", ""),
		 LOG_STR("request", req), LOG_STR("response", resp));
}

static int loop_entry(struct stored_loop *l, const struct ring_rec *rec)
{
	struct stored_apply_result *res;
	struct msg_committed h;
	int rc;

	if (rec->type != MSG_COMMITTED || rec->len < sizeof(h)) {
		l->st.malformed++;
		log_warn("dropped a record that is not a committed entry", LOG_U64("type", rec->type),
			 LOG_U64("len", rec->len));
		return 0;
	}
	memcpy(&h, rec->data, sizeof(h));
	if ((uint64_t)h.data_len + sizeof(h) != rec->len) {
		l->st.malformed++;
		log_warn("dropped a committed entry whose length disagrees with its record",
			 LOG_U64("index", h.index), LOG_U64("data-len", h.data_len),
			 LOG_U64("len", rec->len));
		return 0;
	}
	if (h.index <= l->applied) {
		l->st.duplicates++;
		return 0;
	}
	if (h.index != l->applied + 1) {
		l->st.gaps++;
		if (l->gap_logged != l->applied) {
			l->gap_logged = l->applied;
			log_info("dropped committed entries past a gap; waiting for raftd to replay",
				 LOG_U64("applied-index", l->applied), LOG_U64("index", h.index),
				 LOG_U64("durable-index", l->pub.durable_index),
				 LOG_U64("epoch", l->pub.epoch));
		}
		return 0;
	}

	rc = stored_reserve((void **)&l->res, &l->res_cap, l->nres + 1, sizeof(*l->res), 64);
	if (rc)
		return rc;
	res = &l->res[l->nres];
	int64_t t0 = clock_now_ns();
	rc = stored_apply_entry(l->store, &l->ids, &h, (const uint8_t *)rec->data + sizeof(h),
				&l->arena, res);
	loop_warn_slow_apply(l, &h, rec, res, rc, clock_now_ns() - t0);
	if (rc == -EALREADY) {
		l->st.duplicates++; /* the store is ahead of the loop's count */
		return 0;
	}
	if (rc)
		return rc;
	l->applied = h.index;
	l->st.entries++;
	if (!res->deliver)
		return 0;
	if (res->after_compaction) {
		rc = stored_reserve((void **)&l->waiting, &l->waiting_cap, l->nwaiting + 1,
				    sizeof(*l->waiting), 64);
		if (rc)
			return rc;
		if (l->nwaiting == 0)
			l->interim_ns = clock_now_ns();
		l->waiting[l->nwaiting++] = (struct status_waiting){
			.origin = res->origin, .index = res->index, .term = res->term,
		};
		status_waiting_write(l->r, l->waiting, (unsigned)l->nwaiting);
		return 0;
	}
	l->nres++;
	return 0;
}

static void loop_stage(struct stored_loop *l, const struct msg_origin *o, uint64_t index,
		       uint64_t revision, int32_t status, const uint8_t *body, uint32_t len)
{
	struct msg_result h = {
		.origin = *o, .index = index, .revision = revision,
		.status = status, .body_len = len,
	};
	stored_results_stage(&l->results, &h, body);
}

/* Stages the answers of the physical compactions that waited, whose
 * deletion is done and durable, at revision rev; none waits after it. */
static int loop_answer_waiting(struct stored_loop *l, int64_t rev)
{
	for (size_t i = 0; i < l->nwaiting; i++) {
		const struct status_waiting *w = &l->waiting[i];
		const uint8_t *body;
		uint32_t len;
		int rc = stored_apply_compaction_body(&l->ids, rev, w->term, &l->arena, &body,
						      &len);
		if (rc)
			return rc;
		loop_stage(l, &w->origin, w->index, (uint64_t)rev, 0, body, len);
	}
	l->nwaiting = 0;
	status_waiting_write(l->r, l->waiting, 0);
	return 0;
}

/* Sends the batch's answers, and those of physical compactions that are
 * done now (after a checkpoint, as etcd commits a finished compaction
 * before answering); to those still under way, an interim result about
 * every LOOP_INTERIM_NS. */
static int loop_deliver(struct stored_loop *l)
{
	struct mvcc_state ms;
	int rc;

	for (size_t i = 0; i < l->nres; i++) {
		const struct stored_apply_result *res = &l->res[i];
		loop_stage(l, &res->origin, res->index, res->revision, res->status, res->body,
			   res->body_len);
	}
	l->nres = 0;
	mvcc_store_state(l->store, &ms);
	if (l->nwaiting && !ms.compacting) {
		rc = stored_loop_checkpoint(l);
		if (!rc)
			rc = loop_answer_waiting(l, ms.rev);
		if (rc)
			return rc;
	}
	/* the deletion goes on: the requests' deadlines move on with it */
	if (l->nwaiting && clock_now_ns() - l->interim_ns >= LOOP_INTERIM_NS) {
		for (size_t i = 0; i < l->nwaiting; i++)
			stored_results_stage_interim(&l->results, &l->waiting[i].origin,
						     l->waiting[i].index);
		l->interim_ns = clock_now_ns();
	}
	stored_results_publish(&l->results);
	/* after the results: a gateway that sees the index has them all
	 * (not past a compaction whose answer still waits) */
	loop_deliver_index(l, l->nwaiting ? l->waiting[0].index - 1 : l->committed_index);
	/* Wakes last, once the root, the events, the answers and the index
	 * are all out: a gateway woken earlier can take this CPU before the
	 * rest is published, and then answers a turn (or a client's time
	 * slice) late. The event notice follows (loop_batch). */
	stored_results_wake(&l->results);
	return 0;
}

/* Drops what a batch built besides the db: its events (the watchers
 * catch up from the db after a RESYNC), its answers, its arena. */
static void loop_batch_drop(struct stored_loop *l)
{
	events_discard(&l->events);
	events_resync(&l->events);
	l->nres = 0;
	arena_release(&l->arena);
}

/* Ends a batch that failed: nothing of it is kept, and the records it
 * consumed are left for whoever applies them next. */
static int loop_batch_failed(struct stored_loop *l, int rc)
{
	const char *hint = loop_no_space_hint(rc);
	char why[512];

	/* kept first: what undoes the batch must not replace the reason */
	snprintf(why, sizeof(why), "%s", errmsg_get(rc));
	mvcc_batch_abort(l->store);
	loop_batch_drop(l);
	/* A checkpoint being written may have failed its sync meanwhile, and
	 * the kernel may then have dropped the pages of the commits since the
	 * last one: the batch read the old bytes, and what looks corrupt is
	 * only lost. That failure is the cause (logged by the poll, the root
	 * withdrawn): say so rather than blame the file. */
	int ck = loop_checkpoint_poll(l, true);
	if (ck) {
		log_warn("the batch read pages the failed checkpoint's sync may have dropped; "
			 "they come back from the last checkpoint when stored restarts",
			 LOG_STR("path", l->db_path), LOG_U64("next-index", l->applied + 1),
			 LOG_STR("batch-error", why));
		return ck;
	}
	log_error(hint ? hint : "applying a batch of committed entries failed; restart stored "
				"to recover from the last checkpoint",
		  LOG_STR("path", l->db_path),
		  LOG_U64("applied-index", l->committed_index), LOG_U64("next-index", l->applied + 1),
		  LOG_STR("reason", why), LOG_ERRNO(rc));
	loop_no_space_set(l, rc);
	loop_withdraw_root(l);
	return rc;
}

/* ---- snapshot install ---- */

/* Decodes a MSG_SNAPSHOT_INSTALL record into *m and path (NUL-ended,
 * path_cap bytes). False for a record that is not one. */
static bool loop_install_decode(const struct ring_rec *rec, struct msg_snapshot_install *m,
				char *path, size_t path_cap)
{
	if (rec->len < sizeof(*m))
		return false;
	memcpy(m, rec->data, sizeof(*m));
	if ((uint64_t)m->path_len + sizeof(*m) != rec->len || m->path_len == 0 ||
	    m->path_len >= path_cap)
		return false;
	memcpy(path, (const uint8_t *)rec->data + sizeof(*m), m->path_len);
	path[m->path_len] = '\0';
	return strlen(path) == m->path_len;
}

static void loop_replaced_poll(struct stored_loop *l);

/*
 * Keeps a descriptor of old's file, which another file has just replaced
 * (renamed over it), whose last published txid is txid: its space goes
 * back a step at a time once no reader can read it (loop_replaced_poll),
 * not all at once at its last close. A file still held for an earlier
 * replacement is first given back as the loop would give it back, if its
 * readers left since the loop last looked; if some still read it, it is
 * closed, and they free it at their last close. Without a descriptor
 * (none left), the file goes with old's close, as it would anyway.
 */
static void loop_replaced_hold(struct stored_loop *l, const struct btree_db *old, uint64_t txid)
{
	loop_replaced_poll(l);
	if (l->old_fd >= 0)
		close(l->old_fd);
	l->old_fd = btree_db_dup_fd(old);
	l->old_txid = txid;
}

/* The txid a db that replaces db's file continues above: the last one
 * db committed or published, whichever is later. */
static uint64_t loop_resume_txid(const struct stored_loop *l, const struct btree_db *db)
{
	struct btree_root cur;

	btree_db_current(db, &cur);
	return cur.txid > l->pub.txid ? cur.txid : l->pub.txid;
}

/* Closes the store and the db, whose file a received one has replaced;
 * *resume gets the txid to continue above (every one published for the
 * old file). The old file's space is held for its readers
 * (loop_replaced_hold), so the close here frees none of it and takes what
 * unmapping the file takes. */
static void loop_close_db(struct stored_loop *l, struct status_stored *resume)
{
	resume->txid = loop_resume_txid(l, l->db);
	loop_replaced_hold(l, l->db, resume->txid);
	mvcc_store_close(l->store);
	l->store = NULL;
	btree_db_close(l->db);
	l->db = NULL;
}

/*
 * Makes the prepared copy the db: withdraws the root and bumps the
 * generation (so that readers open no file they cannot tell from the new
 * one), renames the copy over the db, fsyncs the directory, and opens
 * the db, the store and the membership on it again, resuming above every
 * txid the old file published. Readers still on the old file read on;
 * its space goes back once they are gone (loop_close_db). 0, or an error
 * after which the process must restart (it then opens whichever file the
 * rename left).
 */
static int loop_install_switch(struct stored_loop *l)
{
	struct status_stored resume = { 0 };
	int rc;

	l->pub.root_page = 0;
	l->pub.db_generation++;
	l->publishing = false;
	loop_write_status(l);

	if (rename(l->install_path, l->db_path) < 0) {
		rc = -errno;
		log_error("cannot rename the received db over the db", LOG_STR("from", l->install_path),
			  LOG_STR("to", l->db_path), LOG_ERRNO(rc));
		(void)unlink(l->install_path);
		return rc;
	}
	rc = diskio_sync_parent(l->db_path);
	if (rc) {
		log_error("cannot sync the db's directory after the install", LOG_STR("path", l->db_path),
			  LOG_ERRNO(rc));
		return rc;
	}

	loop_close_db(l, &resume);
	membership_free(&l->membership);
	stored_alarms_free(&l->alarms);
	stored_auth_check_fini(&l->auth_check);
	events_resync(&l->events); /* watchers catch up from the new file */
	rc = loop_open_db(l, l->db_path, &resume, true);
	if (rc)
		return rc;
	if (l->cache_on) {
		rc = kvindex_feed_cache(l->db, &l->cache_feed, &l->cache, l->pub.db_generation);
		l->cache_warm_failed = rc != 0;
		if (rc)
			log_warn("cannot use the latest-entry cache with the installed db; point reads go down the tree",
				 LOG_ERRNO(rc));
	}
	return 0;
}

/* Whether install_prepare failed for want of something here (memory,
 * disk, descriptors) rather than for the file: then stored restarts and
 * raftd sends the install again, where a bad file is refused for good. */
static bool loop_install_retry(int rc)
{
	return rc == -ENOMEM || rc == -ENOSPC || rc == -EDQUOT || rc == -EIO || rc == -EROFS ||
	       rc == -EMFILE || rc == -ENFILE || rc == -EACCES || rc == -EPERM;
}

/* Handles a MSG_SNAPSHOT_INSTALL record (see loop.h). 0, or an error after
 * which the process must restart. */
static int loop_install(struct stored_loop *l, const struct ring_rec *rec)
{
	struct msg_snapshot_install m;
	struct install_info info;
	struct mvcc_state ms;
	char path[4096];
	int rc;

	if (!loop_install_decode(rec, &m, path, sizeof(path))) {
		l->st.malformed++;
		log_warn("dropped a snapshot install record that is not well formed",
			 LOG_U64("len", rec->len));
		return 0;
	}
	if (m.index <= l->applied) {
		l->st.installs_skipped++;
		log_info("skipped a received snapshot: the store is already at or past it",
			 LOG_U64("snapshot-index", m.index), LOG_U64("applied-index", l->applied));
		return 0;
	}
	rc = loop_checkpoint_poll(l, true);
	if (!rc)
		rc = loop_dir_sync_poll(l, true);
	if (rc)
		return rc;
	log_info("installing a received snapshot db", LOG_STR("path", path),
		 LOG_U64("snapshot-index", m.index), LOG_U64("snapshot-term", m.term),
		 LOG_U64("applied-index", l->applied));
	int64_t start = clock_now_ns();
	rc = install_prepare_io(path, l->install_path, m.index, l->o.map_size, l->o.io_open,
				l->o.io_open_arg, &info);
	if (loop_install_retry(rc)) {
		log_error(loop_no_space(rc) ? "no space left to prepare the received snapshot db: free "
					      "space on the disk that holds the db; stored restarts "
					      "and raftd sends it again"
					    : "cannot prepare the received snapshot db here; restart "
					      "stored to try again",
			  LOG_STR("path", path), LOG_U64("snapshot-index", m.index),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		loop_no_space_set(l, rc);
		return rc;
	}
	if (rc) {
		l->st.installs_refused++;
		log_error("refused the received snapshot db; nothing is applied until a valid one comes",
			  LOG_STR("path", path), LOG_U64("snapshot-index", m.index),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		return 0;
	}
	rc = loop_install_switch(l);
	if (rc)
		return rc;

	mvcc_store_state(l->store, &ms);
	l->applied = l->committed_index = ms.consistent_index;
	l->pub.durable_index = l->committed_index;
	l->dirty = false;
	l->since_checkpoint = 0;
	l->checkpoint_ns = clock_now_ns();
	l->nres = 0;
	if (l->nwaiting)
		log_warn("dropped the answers of compactions the installed db replaced",
			 LOG_U64("count", l->nwaiting));
	l->nwaiting = 0;
	status_waiting_write(l->r, l->waiting, 0);
	l->st.installs++;
	loop_no_space_clear(l, "a received db was installed");
	loop_publish_root(l);
	loop_deliver_index(l, l->committed_index);
	shm_events_notify(l->r);
	log_info("installed the received snapshot db", LOG_STR("path", l->db_path),
		 LOG_U64("snapshot-index", m.index), LOG_U64("consistent-index", ms.consistent_index),
		 LOG_I64("revision", ms.rev), LOG_U64("bytes", info.bytes),
		 LOG_BOOL("index-rebuilt", info.index_rebuilt),
		 LOG_U64("db-generation", l->pub.db_generation),
		 LOG_I64("took-ms", (clock_now_ns() - start) / 1000000));
	return 0;
}

/* Applies up to a batch of entries and a compaction step in one write
 * txn, commits, publishes and answers. */
static int loop_batch(struct stored_loop *l)
{
	struct mvcc_state ms;
	uint64_t bytes = 0, first = l->applied;
	uint32_t n;
	int rc;

	mvcc_store_state(l->store, &ms);
	if (!ring_has_data(l->committed) && !ms.compacting)
		return 0;
	rc = mvcc_batch_begin(l->store);
	if (rc)
		return loop_batch_failed(l, rc);
	for (n = 0; n < l->o.batch_entries && bytes < l->o.batch_bytes; n++) {
		struct ring_rec rec;
		rc = ring_peek(l->committed, &rec);
		if (rc == -EAGAIN)
			break;
		if (rc) {
			log_error("the ring of committed entries is corrupt");
			return loop_batch_failed(l, rc);
		}
		if (rec.type == MSG_SNAPSHOT_INSTALL) {
			if (n > 0)
				break; /* the entries before it go first */
			mvcc_batch_abort(l->store);
			arena_release(&l->arena);
			rc = loop_install(l, &rec);
			if (rc)
				return rc;
			ring_consume(l->committed, &rec);
			ring_release_consumed(l->committed);
			return 0;
		}
		rc = loop_entry(l, &rec);
		if (rc) {
			l->applied = first;
			return loop_batch_failed(l, rc);
		}
		bytes += rec.len;
		ring_consume(l->committed, &rec);
	}
	mvcc_store_state(l->store, &ms);
	if (ms.compacting) {
		bool done;
		rc = mvcc_compact_step(l->store, l->o.compact_step, &done);
		if (rc) {
			l->applied = first;
			return loop_batch_failed(l, rc);
		}
		l->compact_batches++;
		if (done) {
			log_info("finished compaction", LOG_I64("compact-revision", ms.compact_rev),
				 LOG_U64("batches", l->compact_batches),
				 LOG_U64("batch-limit", l->o.compact_step));
			l->compact_batches = 0;
		}
	}
	if (l->applied == first && !ms.compacting) {
		/* only duplicates and gaps: nothing to write */
		mvcc_batch_abort(l->store);
		events_discard(&l->events);
		ring_release_consumed(l->committed);
		arena_release(&l->arena);
		return 0;
	}
	int64_t commit_ns = clock_now_ns();
	rc = mvcc_batch_commit(l->store, NULL);
	shm_metric_observe(l->metrics, SHM_H_BACKEND_COMMIT, (uint64_t)(clock_now_ns() - commit_ns));
	if (rc) {
		l->applied = first;
		return loop_batch_failed(l, rc);
	}
	/* A checkpoint whose sync failed before this batch read its pages may
	 * have had them dropped, and the batch then built on old bytes:
	 * nothing of it is published or answered (invariant 12). A sync that
	 * fails later left the batch good pages to read, and the restart
	 * applies it again the same way. */
	rc = loop_checkpoint_poll(l, false);
	if (rc) {
		log_warn("dropped an applied batch: it may have read pages the failed checkpoint's sync dropped",
			 LOG_STR("path", l->db_path), LOG_U64("first-index", first + 1),
			 LOG_U64("last-index", l->applied));
		l->applied = first;
		loop_batch_drop(l);
		return rc;
	}
	l->st.batches++;
	l->since_checkpoint += l->applied - first;
	l->committed_index = l->applied;
	l->dirty = true;
	loop_no_space_clear(l, "a batch committed");
	loop_publish_root(l);
	rc = loop_deliver(l);
	shm_events_notify(l->r); /* the events are out even if the answers failed */
	ring_release_consumed(l->committed);
	arena_release(&l->arena);
	return rc;
}

/* ---- defragmentation ---- */

/* A MSG_DEFRAG from slot (lessor_loop.other): waits for the next
 * defragmentation. */
static void loop_defrag_request(void *arg, uint32_t slot, const struct ring_rec *rec)
{
	struct stored_loop *l = arg;
	struct msg_defrag m;

	if (rec->len != sizeof(m)) {
		l->st.malformed++;
		return;
	}
	memcpy(&m, rec->data, sizeof(m));
	if (m.origin.slot != slot)
		return;
	if (stored_reserve((void **)&l->defrag_waiting, &l->defrag_waiting_cap,
			   l->ndefrag_waiting + 1, sizeof(*l->defrag_waiting), 4)) {
		loop_stage(l, &m.origin, 0, 0, STORED_GRPC_RESOURCE_EXHAUSTED, (const uint8_t *)"",
			   0);
		return;
	}
	if (!l->defrag && !l->ndefrag_waiting)
		log_info("starting defragment");
	l->defrag_waiting[l->ndefrag_waiting++] = m.origin;
}

/* Answers every request the defragmentation under way serves: status 0
 * (an empty DefragmentResponse, as etcd's) or a gRPC code and text. */
static void loop_defrag_answer(struct stored_loop *l, int32_t status, const char *text)
{
	uint32_t len = text ? (uint32_t)strlen(text) : 0;

	for (size_t i = 0; i < l->ndefrag_serving; i++)
		loop_stage(l, &l->defrag_serving[i], l->committed_index, l->pub.revision, status,
			   (const uint8_t *)(text ? text : ""), len);
	l->ndefrag_serving = 0;
	stored_results_publish(&l->results);
	stored_results_wake(&l->results);
}

/* The db's sizes as etcd's backend gives them: Size() is the high-water
 * mark's bytes, SizeInUse() that less the free pages. */
static void loop_db_sizes(struct stored_loop *l, uint64_t *size, uint64_t *in_use)
{
	struct btree_db_stats bs;

	btree_db_stats(l->db, &bs);
	*size = bs.hwm_pgid * bs.page_size;
	*in_use = *size - bs.free_pages * bs.page_size;
}

/* A defragmentation failed with rc before its copy became the db: the
 * copy goes, the db stays as it was, and the requests get etcd's
 * answer to a failed Defrag (the error's text, code Unknown). */
static void loop_defrag_fail(struct stored_loop *l, int rc)
{
	char why[512];

	snprintf(why, sizeof(why), "%s", errmsg_get(rc));
	defrag_abort(l->defrag);
	l->defrag = NULL;
	l->defrag_sealed = false;
	log_warn("failed to defragment", LOG_STR("path", l->db_path), LOG_STR("error", why),
		 LOG_ERRNO(rc));
	loop_defrag_answer(l, STORED_GRPC_UNKNOWN, why);
}

/* Starts a defragmentation for the requests waiting. */
static void loop_defrag_start(struct stored_loop *l)
{
	struct msg_origin *t = l->defrag_serving;
	size_t tcap = l->defrag_serving_cap;
	char a[16], b[16];
	int rc;

	l->defrag_serving = l->defrag_waiting;
	l->defrag_serving_cap = l->defrag_waiting_cap;
	l->ndefrag_serving = l->ndefrag_waiting;
	l->defrag_waiting = t;
	l->defrag_waiting_cap = tcap;
	l->ndefrag_waiting = 0;

	size_t dlen = strlen(l->db_path);
	stored_free(l->defrag_path);
	l->defrag_path = stored_malloc(dlen + 64);
	if (!l->defrag_path) {
		loop_defrag_answer(l, STORED_GRPC_RESOURCE_EXHAUSTED, "etcdserver: out of memory");
		return;
	}
	snprintf(l->defrag_path, dlen + 64, "%s.tmp.%ld.%llu", l->db_path, (long)getpid(),
		 (unsigned long long)++l->defrag_seq);
	l->defrag_start_ns = clock_now_ns();
	l->defrag_longest_ns = l->defrag_longest_cpu_ns = 0;
	loop_db_sizes(l, &l->defrag_size, &l->defrag_in_use);
	log_bytes_text(l->defrag_size, a);
	log_bytes_text(l->defrag_in_use, b);
	log_info("defragmenting", LOG_STR("path", l->db_path),
		 LOG_I64("current-db-size-bytes", l->defrag_size), LOG_STR("current-db-size", a),
		 LOG_I64("current-db-size-in-use-bytes", l->defrag_in_use),
		 LOG_STR("current-db-size-in-use", b));
	const struct defrag_opts o = {
		.tmp_path = l->defrag_path, .map_size = l->o.map_size,
		.io_open = l->o.io_open, .io_open_arg = l->o.io_open_arg,
	};
	rc = defrag_begin(l->db, &o, &l->defrag);
	if (rc) {
		char why[512];
		snprintf(why, sizeof(why), "%s", errmsg_get(rc));
		(void)unlink(l->defrag_path);
		log_warn("failed to defragment", LOG_STR("path", l->db_path), LOG_STR("error", why),
			 LOG_ERRNO(rc));
		loop_defrag_answer(l, STORED_GRPC_UNKNOWN, why);
	}
}

static void *loop_dir_syncer(void *arg)
{
	struct stored_loop *l = arg;
	int rc = diskio_sync_parent(l->db_path);

	atomic_store_explicit(&l->dir_sync, rc < 0 ? rc : 2, memory_order_release);
	return NULL;
}

/* Syncs the db's directory after a rename into it, on a thread of its
 * own (in this one where none can be started). 0 or the sync's error. */
static int loop_dir_sync_start(struct stored_loop *l)
{
	atomic_store_explicit(&l->dir_sync, 1, memory_order_relaxed);
	l->dir_sync_thread = shm_thread_start(&l->dir_syncer, false, loop_dir_syncer, l) == 0;
	if (!l->dir_sync_thread)
		loop_dir_syncer(l);
	return 0;
}

/* Reaps the directory's sync (wait: until it ends): publishes the
 * durable index held back meanwhile. 0, or the sync's error, after which
 * the process must restart. */
static int loop_dir_sync_poll(struct stored_loop *l, bool wait)
{
	int st = atomic_load_explicit(&l->dir_sync, memory_order_acquire);

	if (st == 0 || (st == 1 && !wait))
		return 0;
	if (l->dir_sync_thread)
		pthread_join(l->dir_syncer, NULL);
	l->dir_sync_thread = false;
	st = atomic_load_explicit(&l->dir_sync, memory_order_acquire);
	if (st < 0) {
		log_error("cannot sync the db's directory after the defragmentation",
			  LOG_STR("path", l->db_path), LOG_ERRNO(st));
		return st;
	}
	atomic_store_explicit(&l->dir_sync, 0, memory_order_relaxed);
	l->pub.durable_index = l->durable_later;
	loop_write_status(l);
	return 0;
}

/* A replaced db file's space goes back to the file system in steps of
 * LOOP_RELEASE_STEP bytes, each followed by a rest as long as it took, at
 * least LOOP_RELEASE_REST_NS. */
#define LOOP_RELEASE_STEP (4ll << 20)
#define LOOP_RELEASE_REST_NS 2000000ll

/*
 * Gives the space of the unlinked file fd back a step at a time, then
 * closes it. Freed at once, at the last close, a file of hundreds of
 * megabytes is discarded by the file system in one go on a disk mounted
 * with discard (ext4 issues the discards when the blocks are freed), and
 * the WAL's syncs wait behind them: a 680 MB file's last close took 127
 * ms and a 4 KiB write and fdatasync beside it up to 35 ms, against at
 * most 1.5 ms with the file cut 4 MiB at a time. A file that still has a
 * name is only closed.
 */
static void *loop_file_releaser(void *arg)
{
	int fd = (int)(intptr_t)arg;
	struct stat sb;

	if (fstat(fd, &sb) == 0 && sb.st_nlink == 0 && S_ISREG(sb.st_mode)) {
		int64_t t0 = clock_now_ns();
		off_t size = sb.st_size;
		uint64_t steps = 0;
		while (size > 0) {
			off_t next = size > LOOP_RELEASE_STEP ? size - LOOP_RELEASE_STEP : 0;
			int64_t s0 = clock_now_ns();
			if (ftruncate(fd, next) != 0)
				break;
			size = next;
			steps++;
			int64_t took = clock_now_ns() - s0;
			int64_t rest = took > LOOP_RELEASE_REST_NS ? took : LOOP_RELEASE_REST_NS;
			struct timespec ts = { rest / 1000000000, rest % 1000000000 };
			nanosleep(&ts, NULL);
		}
		log_info("gave the replaced db file's space back", LOG_I64("bytes", sb.st_size),
			 LOG_I64("left-bytes", size), LOG_U64("steps", steps),
			 LOG_I64("took-ms", (clock_now_ns() - t0) / 1000000));
	}
	close(fd);
	return NULL;
}

/* Once no reader can read the file a defragmentation or an install
 * replaced (every reader registered at or below its last txid is gone,
 * and the root published is the new file's), its space is given back on
 * a thread of its own (or at once, by closing it, where none can be
 * started). */
static void loop_replaced_poll(struct stored_loop *l)
{
	pthread_t t;

	if (l->old_fd < 0 || loop_oldest_reader(l) <= l->old_txid)
		return;
	if (shm_thread_start(&t, true, loop_file_releaser, (void *)(intptr_t)l->old_fd) != 0)
		close(l->old_fd);
	l->old_fd = -1;
}

/* Closes a db that nothing here uses any more (the old file, replaced by
 * a defragmented one), run on a thread of its own (shm_thread_offload): its
 * I/O backend and page writer are stopped and its mapping of the whole
 * file torn down, which the loop does not wait for. */
static void *loop_db_closer(void *arg)
{
	btree_db_close(arg);
	return NULL;
}

/*
 * Makes the finished copy the db, with readers reading on throughout.
 * The copy's open db becomes the db (no file is opened again): the last
 * changes are carried over in memory, its txids continue above every one
 * published for the old file, and it is renamed over the db: that rename
 * is the commit point. The copy's file then holds, durably, the state
 * sealed before (defrag_sealed), whose checkpoint was written in the
 * background; no checkpoint of the db started since, so the durable
 * index published is at most the sealed index. Before the rename, a
 * process killed anywhere leaves the old db, whole, and a copy that the
 * next stored removes; after it, the new db at the sealed index at least,
 * which raftd's log continues. Readers that have the old file mapped go
 * on reading it at the root still published until the new root is, with
 * a new generation and inode: a reader that opens the path in between
 * finds an inode other than the one published and tries again
 * (invariant 3). The directory is synced after the new root is
 * published, and the durable index (the sealed one) follows the sync, so
 * that raftd keeps its log until the rename is durable. Nothing here
 * waits for the disk: a checkpoint of the old db or a directory sync
 * still being written puts the switch off to a later turn. 0 (done, or
 * put off), or an error after which the process must restart.
 */
static int loop_defrag_switch(struct stored_loop *l)
{
	struct status_stored resume = { 0 };
	struct defrag_stats ds;
	char a[16], b[16], took[32];
	uint64_t size, in_use;
	int rc;

	rc = loop_checkpoint_poll(l, false);
	if (rc)
		return rc;
	rc = loop_dir_sync_poll(l, false);
	if (rc)
		return rc;
	l->defrag_put_off = btree_db_checkpoint_busy(l->db) ||
			    atomic_load_explicit(&l->dir_sync, memory_order_acquire);
	if (l->defrag_put_off)
		return 0;
	int64_t t0 = clock_now_ns(), c0 = loop_cpu_ns(), q0 = loop_queued_ns();
	uint64_t syncs0 = diskio_thread_syncs();
	rc = defrag_finish(l->defrag);
	if (rc) {
		loop_defrag_fail(l, rc);
		return 0;
	}
	int64_t t_finish = clock_now_ns();
	defrag_stats(l->defrag, &ds);
	struct btree_db *old = l->db, *copy = defrag_take(l->defrag);
	defrag_free(l->defrag);
	l->defrag = NULL;
	l->defrag_sealed = false;

	/* the members, alarms and leases loaded from the old file are the
	 * copy's too: only the store is opened again, on the copy's db */
	kvindex_feed_close(&l->cache_feed);
	mvcc_store_close(l->store);
	l->store = NULL;
	resume.txid = loop_resume_txid(l, old);
	const struct btree_root from = { .txid = resume.txid };
	l->db = copy;
	rc = btree_db_resume(copy, &from, loop_oldest_reader, l);
	if (!rc)
		rc = loop_store_open(l);
	if (rc) {
		btree_db_close(old);
		return rc; /* restarted, stored opens the old db and removes the copy */
	}
	struct stat sb;
	l->db_ino = stat(l->defrag_path, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
	int64_t t_open = clock_now_ns();
	/* the cache is cleared for the new generation before the rename:
	 * readers of the old one find nothing of theirs in it and go down
	 * their tree, and the time between rename and publish stays short */
	uint64_t gen = l->pub.db_generation + 1;
	if (l->cache_on) {
		rc = kvindex_feed_cache(l->db, &l->cache_feed, &l->cache, gen);
		l->cache_warm_failed = rc != 0;
		if (rc)
			log_warn("cannot use the latest-entry cache with the defragmented db; point reads go down the tree",
				 LOG_ERRNO(rc));
	}
	if (rename(l->defrag_path, l->db_path) < 0) {
		rc = -errno;
		log_error("cannot rename the defragmented db over the db",
			  LOG_STR("from", l->defrag_path), LOG_STR("to", l->db_path), LOG_ERRNO(rc));
		btree_db_close(old);
		return rc;
	}
	rc = btree_db_set_path(l->db, l->db_path);
	if (rc) {
		btree_db_close(old);
		return rc;
	}
	l->pub.db_generation = gen;
	int64_t ns = clock_now_ns() - l->defrag_start_ns;
	l->pub.defrag_count++;
	l->pub.defrag_last_ns = (uint64_t)ns;
	shm_metric_observe(l->metrics, SHM_H_BACKEND_DEFRAG, (uint64_t)ns);
	l->pub.defrag_total_ns += (uint64_t)ns;
	loop_publish_root(l);
	int64_t t_pub = clock_now_ns();
	loop_replaced_hold(l, old, resume.txid);
	(void)shm_thread_offload(loop_db_closer, old);
	/* the copy's file holds the sealed index durably once the rename
	 * is: the directory's sync makes that the durable index
	 * (loop_dir_sync_poll); a checkpoint of the commits since follows as
	 * usual */
	l->durable_later = l->defrag_seal_index;
	l->dirty = true;
	rc = loop_dir_sync_start(l);
	if (rc)
		return rc;
	int64_t t_end = clock_now_ns(), cpu = loop_cpu_ns() - c0;
	uint64_t syncs = diskio_thread_syncs() - syncs0;
	int64_t blocked = (t_end - t0) - cpu - (loop_queued_ns() - q0);

	loop_db_sizes(l, &size, &in_use);
	log_bytes_text(size, a);
	log_bytes_text(in_use, b);
	log_duration_text((uint64_t)ns / 1000000, took);
	log_info("defragmented", LOG_STR("path", l->db_path),
		 LOG_I64("current-db-size-bytes-diff", (int64_t)size - (int64_t)l->defrag_size),
		 LOG_I64("current-db-size-bytes", size), LOG_STR("current-db-size", a),
		 LOG_I64("current-db-size-in-use-bytes-diff",
			 (int64_t)in_use - (int64_t)l->defrag_in_use),
		 LOG_I64("current-db-size-in-use-bytes", in_use), LOG_STR("current-db-size-in-use", b),
		 LOG_STR("took", took), LOG_U64("entries-copied", ds.entries_copied),
		 LOG_U64("entries-carried-over", ds.entries_carried), LOG_U64("rounds", ds.rounds),
		 LOG_U64("writeback-ahead-max-bytes", ds.ahead_max),
		 LOG_U64("steps-held-for-writeback", ds.steps_held),
		 LOG_U64("db-generation", l->pub.db_generation),
		 LOG_I64("longest-step-us", l->defrag_longest_ns / 1000),
		 LOG_I64("longest-step-cpu-us", l->defrag_longest_cpu_ns / 1000),
		 LOG_I64("final-step-us", (t_end - t0) / 1000),
		 LOG_I64("final-step-cpu-us", cpu / 1000),
		 LOG_I64("final-step-blocked-us", (blocked > 0 ? blocked : 0) / 1000),
		 LOG_U64("final-step-syncs", syncs),
		 LOG_I64("last-carry-over-us", (t_finish - t0) / 1000),
		 LOG_I64("handover-us", (t_open - t_finish) / 1000),
		 LOG_I64("publish-us", (t_pub - t_open) / 1000),
		 LOG_I64("close-old-us", (t_end - t_pub) / 1000));
	log_info("finished defragment");
	loop_defrag_answer(l, 0, NULL);
	return 0;
}

/* A turn's share of defragmentation: starts one for the requests waiting,
 * or takes a step of the one under way (a batch never waits for more than
 * a step: LOOP_DEFRAG_STEP_NS), and switches to its copy once it is
 * ready. The copy is written on this thread, between batches, rather than
 * on a thread of its own: the db's writer and its txns belong to one
 * thread (btree.h), the changes to carry over are then exactly those of
 * the batches between steps, and an idle loop runs the steps back to back
 * (stored_loop_turn reports more work), so the copy goes at the disk's
 * pace when nothing else is asked of stored. 0, or an error after which
 * the process must restart. */
static int loop_defrag_turn(struct stored_loop *l)
{
	bool ready;
	int rc;

	if (!l->defrag) {
		if (l->ndefrag_waiting)
			loop_defrag_start(l);
		return 0;
	}
	int64_t t0 = clock_now_ns(), c0 = loop_cpu_ns();
	rc = defrag_step(l->defrag, LOOP_DEFRAG_STEP_NS, &ready);
	if (rc) {
		loop_defrag_fail(l, rc);
		return 0;
	}
	int64_t took = clock_now_ns() - t0, cpu = loop_cpu_ns() - c0;
	if (!l->defrag_sealed && defrag_sealed(l->defrag)) {
		l->defrag_sealed = true;
		l->defrag_seal_index = l->committed_index;
	}
	if (took > l->defrag_longest_ns)
		l->defrag_longest_ns = took;
	if (cpu > l->defrag_longest_cpu_ns)
		l->defrag_longest_cpu_ns = cpu;
	return ready ? loop_defrag_switch(l) : 0;
}

/* ---- the loop ---- */

int stored_loop_turn(struct stored_loop *l, bool *more)
{
	shm_metric_add(l->metrics, SHM_M_LOOP_TURNS, 1);
	struct mvcc_state ms;
	int64_t now;
	int rc;

	lessor_loop_tick(&l->lease);
	rc = loop_batch(l);
	if (rc)
		return rc;
	mvcc_store_state(l->store, &ms);
	lessor_loop_requests(&l->lease, ms.rev);
	rc = loop_defrag_turn(l);
	shm_metric_set(l->metrics, SHM_M_DEFRAGS_INFLIGHT, l->defrag != NULL);
	if (!rc)
		rc = loop_dir_sync_poll(l, false);
	if (rc)
		return rc;
	rc = loop_checkpoint_poll(l, false);
	if (rc)
		return rc;
	loop_replaced_poll(l);
	now = clock_now_ns();
	if (loop_checkpoint_due(l, now)) {
		rc = loop_checkpoint_begin(l);
		if (rc)
			return rc;
	}
	if (!ring_has_data(l->committed))
		loop_cache_warm(l, now);
	/* rings and the event ring quiet for a second give their pages back */
	l->trim_ns = shm_role_trim(l->r, SHM_ROLE_STORED, now);
	if (now - l->reap_ns >= (int64_t)l->o.reap_ms * 1000000) {
		int n = readers_reap(l->r);
		if (n > 0)
			log_info("reaped the reader entries of dead processes", LOG_I64("count", n));
		/* expired simple tokens, on the period of etcd's TTL keeper */
		shm_tokens_reap(l->r, (uint64_t)(now / 1000000));
		l->reap_ns = now;
	}
	if (more) {
		mvcc_store_state(l->store, &ms);
		*more = ms.compacting || ring_has_data(l->committed) ||
			(l->defrag && !defrag_waits(l->defrag) && !l->defrag_put_off) ||
			l->ndefrag_waiting;
	}
	return 0;
}

static bool loop_has_work(void *arg)
{
	struct stored_loop *l = arg;
	return (l->stop && *l->stop) || ring_has_data(l->committed) ||
	       hello_requests_waiting(l->r, SHM_ROLE_STORED);
}

/* The wait that wakes the loop by due_ns (in ms, rounded up, at least 1),
 * or timeout_ms if that comes first. */
static int loop_wait_until(int64_t due_ns, int timeout_ms)
{
	int64_t left = (due_ns - clock_now_ns()) / 1000000 + 1;

	return left < 1 ? 1 : left < timeout_ms ? (int)left : timeout_ms;
}

int stored_loop_run(struct stored_loop *l, const volatile sig_atomic_t *stop)
{
	int rc;

	struct config_watchdog wd;

	l->stop = stop;
	config_watchdog_init(&wd, clock_now_ns());
	while (!*stop) {
		bool more = false;
		int timeout_ms = SHM_DOORBELL_BACKSTOP_MS;
		/* systemd's watchdog is fed here, by the loop itself */
		int wd_ms = config_watchdog_turn(&wd, clock_now_ns());

		rc = stored_loop_turn(l, &more);
		if (rc)
			return rc;
		if (more)
			continue;
		if (btree_db_checkpoint_busy(l->db) || l->defrag ||
		    atomic_load_explicit(&l->dir_sync, memory_order_relaxed) == 1) {
			timeout_ms = 1;  /* its end is polled, not rung */
		} else if (l->dirty) {
			timeout_ms = loop_wait_until(l->checkpoint_ns +
							     (int64_t)l->o.checkpoint_ms * 1000000,
						     timeout_ms);
		}
		if (l->trim_ns != INT64_MAX)
			timeout_ms = loop_wait_until(l->trim_ns, timeout_ms);
		int lease_ms = lessor_loop_timeout_ms(&l->lease);
		if (lease_ms >= 0 && lease_ms < timeout_ms)
			timeout_ms = lease_ms;
		if (wd_ms >= 0 && wd_ms < timeout_ms)
			timeout_ms = wd_ms;
		if (loop_cache_cold(l))  /* the next warming step after its rest */
			timeout_ms = loop_wait_until(l->cache_warm_next_ns, timeout_ms);
		shm_doorbell_wait(l->bell, l->raftd_bell, loop_has_work, l, LOOP_SPIN_US,
				  timeout_ms);
	}
	return 0;
}
