/*
 * stored's B+tree engine: a copy-on-write store in the bbolt version 2 file
 * format (see page.h), with one writer process and any number of readers in
 * other processes.
 *
 * Writer. btree_db_open gives the one writer of a file (an exclusive flock
 * keeps out a second one). A write txn changes nodes in memory; pages that
 * the txn already owns are changed in place, so a whole apply batch yields
 * one new root. btree_commit pwrites the txn's new pages (readers see them
 * through their mmap at once) and returns the new (root, txid, high-water)
 * triple, which the caller publishes to readers. Nothing is durable until
 * btree_db_checkpoint: it writes the freelist page, fdatasyncs, writes the
 * alternate meta page and fdatasyncs, so the meta on disk only ever points
 * at durable pages. A page still visible to the oldest live reader is never
 * reused, nor is a page of a checkpoint's tree freed since the last durable
 * checkpoint; a page born and freed between two checkpoints belongs to no
 * checkpoint and is reused as soon as no reader sees it (freelist.h).
 *
 * Readers. btree_reader_open maps the file once, read-only, over a large
 * fixed range (MAP_NORESERVE); btree_reader_begin starts a read txn at a
 * published triple and bounds-checks every page id against its high-water
 * mark. The file never shrinks while it is mapped.
 *
 * Errors: functions return 0 or a negative errno:
 *   -ENOENT   key or bucket not found; a cursor is past either end
 *   -EEXIST   the bucket exists
 *   -EISDIR   the key names a nested bucket, not a value
 *   -ENOTDIR  the key names a value, not a bucket
 *   -EINVAL   bad argument (empty or too long key, value too large, a
 *             plain key at the top level, ...)
 *   -EROFS    a write on a read txn
 *   -ECANCELED the write txn failed earlier and refuses further use
 *   -EUCLEAN  the file is corrupt (the message names the file and page)
 *   -EPROTO   the file has another format version
 *   -EBUSY    another process is the writer; a write txn is already open
 *   -ENOSPC   the file would grow past the map size, or the disk is full
 *   -ENOMEM, -EIO and other -errno of the system calls.
 * errmsg_get(rc) (base/log/errmsg.h) describes the failure rc, e.g.
 * "stored: db /x/member/snap/db: page 17 has invalid flags 0x0040; the file
 * is corrupt, restore from a snapshot".
 *
 * Threads: a btree_db and its write txn belong to one thread at a time.
 * Read txns (of a db or a reader) may run in other threads concurrently;
 * each txn, bucket and cursor belongs to one thread.
 */
#ifndef CETCD_STORED_BTREE_H
#define CETCD_STORED_BTREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/diskio/diskio.h"

struct btree_db;      /* the writer of one file */
struct btree_reader;  /* a read-only mapping of one file, in any process */
struct btree_txn;     /* a read or write transaction */
struct btree_bucket;  /* a bucket as seen by one txn; owned by the txn */

/* What a reader needs to read one committed state. */
struct btree_root {
	uint64_t root_pgid;  /* root page of the top-level bucket */
	uint64_t txid;       /* txn that committed it */
	uint64_t hwm_pgid;   /* high-water mark: every page of the tree is below */
};

#define BTREE_DEFAULT_MAP_SIZE (64ull << 30)

struct btree_db_opts {
	bool create;          /* create the file when it does not exist */
	uint32_t page_size;   /* page size of a new file; 0 = the OS page size */
	uint64_t map_size;    /* bytes of address space mapped; 0 = 64 GiB; the
			       * file cannot grow past it */
	/* Smallest txid any live reader in another process reads at, or
	 * UINT64_MAX when there is none. NULL: no such readers. Called at
	 * write txn begin and at checkpoints. */
	uint64_t (*oldest_reader)(void *arg);
	void *oldest_reader_arg;
	/* The last triple published before this open (zeroes if none): txids
	 * continue above resume.txid, and no page below resume.hwm_pgid (nor
	 * any free page) is reused until every reader that predates the open
	 * is gone: until oldest_reader() exceeds resume.txid, or
	 * btree_db_unblock_reuse is called. */
	struct btree_root resume;
	/* Disk I/O backend over the db's fd; NULL = io_uring, or plain
	 * syscalls where io_uring is refused. Tests pass a fault backend. */
	int (*io_open)(int fd, void *arg, struct diskio **out);
	void *io_open_arg;
	/* Leave the mapping's page tables empty at open (they fill as pages
	 * are read) rather than fault the whole file in first: for an open
	 * that must not take long on a large file. */
	bool no_populate;
	/* A new file is not synced when it is created (nor its directory):
	 * a scratch file that its first checkpoint, and its directory's sync
	 * after it is renamed into place, make durable. */
	bool scratch;
};

/*
 * Opens (or, with o->create, creates) the db file at path as its one
 * writer. A new file gets bbolt's initial layout (two metas, an empty
 * freelist, an empty root leaf) and is fsynced with its directory. The
 * state opened is the newest meta that verifies. The db owns its fd,
 * mapping and backend until btree_db_close. o may be NULL (defaults).
 */
int btree_db_open(const char *path, const struct btree_db_opts *o,
		  struct btree_db **out);

/* Closes the db without writing anything: commits after the last
 * checkpoint are lost unless btree_db_checkpoint is called first. Open
 * read txns of the db must have ended. NULL is accepted. */
void btree_db_close(struct btree_db *db);

/* Makes an open db continue another's published states, as an open with
 * o->resume and o->oldest_reader would have: a defragmented copy, written
 * with no readers, taken over as the db (txids continue above
 * resume->txid, and no page is reused until the readers that predate this
 * call are gone). Not during a write txn or a checkpoint (-EBUSY);
 * -ENOSPC as the open's. */
int btree_db_resume(struct btree_db *db, const struct btree_root *resume,
		    uint64_t (*oldest_reader)(void *arg), void *arg);

/* The state of the newest commit (what to publish) and of the last durable
 * checkpoint. */
void btree_db_current(const struct btree_db *db, struct btree_root *out);
void btree_db_durable(const struct btree_db *db, struct btree_root *out);

/*
 * Makes the newest commit durable: freelist page, fdatasync, the alternate
 * meta page, fdatasync (io_uring: linked write+fsync each). Nothing to do
 * when nothing was committed since the last one. The meta's txid must have
 * the parity of its slot, as bbolt writes it; when the newest txid has the
 * other parity the checkpoint takes the next txid for the same tree. *out
 * (may be NULL) receives the current triple afterwards. An I/O failure
 * leaves the db failed (every later write returns -EIO): reopen it.
 * -EBUSY while a write txn is open.
 */
int btree_db_checkpoint(struct btree_db *db, struct btree_root *out);

/*
 * The same checkpoint in the background, where the disk backend can chain
 * ops (io_uring): begin prepares it and starts the chain (freelist page,
 * sync, meta page, sync, in order), and write txns may go on meanwhile;
 * poll reaps it (wait: blocks until it ends) and, once it has ended, makes
 * it the durable state. Elsewhere begin writes it before returning.
 * *started tells whether there was anything to write. One at a time:
 * begin gives -EBUSY while one is being written; btree_db_checkpoint and
 * btree_db_close wait for it first. Errors as btree_db_checkpoint.
 */
int btree_db_checkpoint_begin(struct btree_db *db, bool *started);
int btree_db_checkpoint_poll(struct btree_db *db, bool wait, bool *done);
/* Whether a checkpoint is being written. */
bool btree_db_checkpoint_busy(const struct btree_db *db);

/*
 * Where the entries of one top-level bucket are, told to an observer as
 * the writer's commits place them (the latest-entry cache, lcache.h, is
 * kept this way). While a commit spills, `placed` hears of the entries of
 * every leaf page run of the bucket it writes, n at a time, in key order:
 * for each, its key and value (valid during the call), its element index
 * in the run at pgid, its key's offset from the run's start, its value's
 * size, and whether this commit put it (`fresh`; otherwise it moved,
 * unchanged, from the page it was read from), placed by commit `txid`;
 * nothing of the commit is visible to readers yet. `gone` hears of a key
 * that left the bucket's pages (deleted, or the bucket is written inline
 * into its parent), with the value it had; `reset` that anything heard
 * before may be wrong (the bucket was dropped, or a commit failed after it
 * had begun placing entries, and its txid will be used again). An entry
 * never moves without one of the three. Callbacks run on the writer's
 * thread and must not call into the db other than btree_db_entry_key. One
 * observer per db; o NULL removes it. -EINVAL on an empty name.
 */
struct btree_placed {
	const uint8_t *key;
	const uint8_t *val;
	uint32_t ksize;
	uint32_t index;
	uint32_t key_off;
	uint32_t vsize;
	bool fresh;
};
#define BTREE_PLACED_MAX 64   /* entries per call of placed */
struct btree_observer {
	void (*placed)(void *arg, uint64_t pgid, uint64_t txid, const struct btree_placed *e,
		       size_t n);
	void (*gone)(void *arg, const uint8_t *key, uint32_t ksize, const uint8_t *val,
		     uint32_t vsize);
	void (*reset)(void *arg);
	/* Everything placed so far has been told: after a commit's spill
	 * (before its pages are written and it returns) and a warming step. */
	void (*flush)(void *arg);
	void *arg;
};
int btree_db_observe(struct btree_db *db, const void *bucket_name, size_t len,
		     const struct btree_observer *o);

/*
 * Tells the observer where up to max further entries of the observed
 * bucket are in the newest commit, as `placed` with that commit's txid
 * (none of them fresh),
 * resuming where the last call stopped (at the start after
 * btree_db_observe or a reset): an observer that starts with a db that
 * has entries learns of those no commit moves. Call it between write
 * txns, as often as convenient, until *done. -EBUSY while a write txn is
 * open; -EUCLEAN and other read errors.
 */
int btree_db_observe_warm(struct btree_db *db, size_t max, bool *done);

/*
 * The key of element `index` of the leaf page run at pgid in the writer's
 * newest tree (for an observer's callbacks, which may also ask of a page
 * that the commit being written has just freed): 0 with *key (valid until
 * the page is reused) and *ksize, or -ENOENT when pgid is not a leaf
 * below the high-water mark or has no such element.
 */
int btree_db_entry_key(const struct btree_db *db, uint64_t pgid, uint32_t index,
		       const uint8_t **key, uint32_t *ksize);

/*
 * Tells a tracker of every change a write txn of db makes, as it is asked
 * for: `wrote` gets the top-level bucket and the key (valid during the
 * call) of each put and delete in it, and key NULL when the bucket itself
 * changed another way (created, deleted, its sequence set, a nested
 * bucket in it changed). A change asked for and then refused, or whose
 * txn ends without a commit, is told too: a tracker learns which entries
 * may differ, and reads them. Runs on the writer's thread; it must not
 * call into db. One tracker per db; t NULL removes it.
 */
struct btree_tracker {
	void (*wrote)(void *arg, const uint8_t *bucket, size_t bucket_len, const uint8_t *key,
		      size_t key_len);
	void *arg;
};
void btree_db_track(struct btree_db *db, const struct btree_tracker *t);

/* The db's file was renamed to path (for messages). 0 or -ENOMEM. */
int btree_db_set_path(struct btree_db *db, const char *path);

/* A descriptor of the db's file of the caller's own (close-on-exec), which
 * stays valid after btree_db_close; or -errno. */
int btree_db_dup_fd(const struct btree_db *db);

/* Allows reuse of pages held back by btree_db_opts.resume. */
void btree_db_unblock_reuse(struct btree_db *db);

struct btree_db_stats {
	uint32_t page_size;
	uint64_t hwm_pgid;        /* pages in use or free below it */
	uint64_t free_pages;      /* reusable now */
	uint64_t pending_pages;   /* freed, waiting for a checkpoint or readers */
	uint64_t young_freed;     /* pages freed young (freelist.h) since open */
	uint64_t file_bytes;      /* size of the file */
	uint64_t commits;         /* since open */
	uint64_t checkpoints;     /* since open */
	const char *io_backend;   /* "io_uring", "plain", "fault" */
};
void btree_db_stats(const struct btree_db *db, struct btree_db_stats *out);

/*
 * Verifies the newest commit as bbolt's Check does, and more: every page
 * below the high-water mark is reachable exactly once or free (metas,
 * the durable freelist page, the tree, free and pending pages), page
 * types and element bounds are sound, keys are sorted within pages and
 * within the key ranges of their parents, buckets are well formed.
 * 0, -EUCLEAN with the first problem in errmsg_get(-EUCLEAN), -ENOMEM.
 */
int btree_db_check(struct btree_db *db);

/* Whether the db failed (a write or sync of its file failed, or its
 * accounting broke): it refuses every later write; reopen it. */
bool btree_db_failed(struct btree_db *db);

/* Begins the write txn (only one at a time: -EBUSY). Its txid is the
 * newest one plus one. -EIO when the db failed. */
int btree_write_begin(struct btree_db *db, struct btree_txn **out);

/*
 * Commits a write txn: rebalances and spills its nodes, writes its new
 * pages, and returns the new triple in *out (may be NULL). The txn is
 * freed either way. On failure nothing of the txn is visible and the db
 * keeps its previous state (-ECANCELED if the txn had failed before).
 */
int btree_commit(struct btree_txn *t, struct btree_root *out);

/* Ends any txn: a write txn's changes are dropped, a read txn ends. Every
 * byte and handle the txn returned becomes invalid. NULL is accepted. */
void btree_txn_end(struct btree_txn *t);

/* Begins a read txn of the writer's own process, at the given state or
 * (at == NULL, from the writer's thread only) at the newest commit. It
 * holds back reuse of the pages it can see until it ends. It must end
 * before btree_db_close. */
int btree_db_read_begin(struct btree_db *db, const struct btree_root *at,
			struct btree_txn **out);

struct btree_reader_opts {
	uint64_t map_size;   /* 0 = 64 GiB */
	/* Leave the page tables empty at open: for a reader that touches few
	 * pages through the mapping (dbsnap copies the file with pread), so
	 * that opening a large file does not fault it all in first. */
	bool no_populate;
};

/* Maps the db file at path read-only for reading in this process. The
 * file must already be a db (its meta pages give the page size). o may be
 * NULL. */
int btree_reader_open(const char *path, const struct btree_reader_opts *o,
		      struct btree_reader **out);
void btree_reader_close(struct btree_reader *r);
/* The times this process let go of a db file (a reader's or the
 * writer's, at its close) on a thread of its own because the file had
 * been unlinked (a defragmented or installed db renamed over it): its
 * last close frees the file's page cache and blocks, and its munmap tears
 * down the page tables, in time that grows with the file (about 0.25 s
 * for a 600 MB db), which no event loop waits for. */
uint64_t btree_detached_releases(void);
/* The inode number of the file r maps (0 if fstat fails). */
uint64_t btree_reader_ino(const struct btree_reader *r);

/* Lets the kernel take back this process's page tables of the mapping
 * (MADV_DONTNEED): the file's pages stay in the page cache and map again
 * when read. A reader that walks much of a large file over a long time
 * (a streamed Range) calls it now and then between reads, so that the
 * file does not stay resident in its process; its txns stay valid. */
void btree_reader_forget(struct btree_reader *r);

/* The state of the newest valid meta page on disk (the last durable
 * checkpoint), e.g. for tools or a reader that has nothing published. */
int btree_reader_durable(struct btree_reader *r, struct btree_root *out);

/*
 * Begins a read txn at a published triple. Checks it against the file:
 * -EUCLEAN when the root or high-water mark lies past the end of the file
 * or the mapping. Registration in the reader table (so that the writer
 * keeps these pages) is the caller's business and must come first.
 */
int btree_reader_begin(struct btree_reader *r, const struct btree_root *at,
		       struct btree_txn **out);

/* Verifies the durable state of the file like btree_db_check, using the
 * freelist page when there is one and the reachable pages otherwise. Meant
 * for tools and tests on a file that no writer is changing. */
int btree_reader_check(struct btree_reader *r);

/* Verifies the tree of any txn: structure, bounds, sorted keys, every page
 * referenced once (without the free-page accounting). A write txn is
 * checked as it was when it began. */
int btree_txn_check(struct btree_txn *t);

/* The txn's txid and whether it can write. */
uint64_t btree_txn_id(const struct btree_txn *t);
bool btree_txn_writable(const struct btree_txn *t);
/* The txn a bucket handle belongs to. */
struct btree_txn *btree_bucket_txn(const struct btree_bucket *b);

/* The top-level bucket, whose entries are the buckets of the file. */
struct btree_bucket *btree_txn_root(struct btree_txn *t);

/*
 * Opens the bucket name inside parent (NULL = the top level). The handle is
 * owned by the txn and valid until it ends or the bucket is deleted; the
 * same handle comes back for the same bucket. -ENOENT, -ENOTDIR, -EUCLEAN.
 */
int btree_bucket_open(struct btree_txn *t, struct btree_bucket *parent,
		      const void *name, size_t name_len, struct btree_bucket **out);

/* Creates the bucket name inside parent (NULL = top level); -EEXIST if it
 * exists (*out is then set to it as well), -ENOTDIR if name is a value. */
int btree_bucket_create(struct btree_txn *t, struct btree_bucket *parent,
			const void *name, size_t name_len, struct btree_bucket **out);

/* Deletes the bucket name, everything in it and its nested buckets.
 * Handles to them become invalid. -ENOENT, -ENOTDIR. */
int btree_bucket_delete(struct btree_txn *t, struct btree_bucket *parent,
			const void *name, size_t name_len);

/* Fill percent used when this txn splits the bucket's pages: 0.5 by
 * default; 0.9 suits append-mostly buckets. Clamped to [0.1, 1.0]. */
void btree_bucket_set_fill(struct btree_bucket *b, double fill);

/* Tells this txn's splits of the bucket's leaves that keys which differ
 * only in their last `suffix` bytes form a run, and that new keys go in at
 * a run's front (each key's revisions, newest first). A leaf that must
 * split is then cut right after the newest element of a run when at least
 * half a page of that run's older elements follows it: those go to a page
 * of their own that no later insert reaches, while the front of the run
 * keeps the room. 0 (the default) splits at the fill alone. */
void btree_bucket_set_runs(struct btree_bucket *b, uint32_t suffix);

/* Lets this txn write a leaf of the bucket that only grew at its end (keys
 * put in order) as pieces of up to `pages` pages each (a leaf page and its
 * overflow pages, which bbolt reads as one node), of at most max_elems
 * elements, where a page a piece would leave every page's tail unused: 12
 * elements of 323 bytes fill a 4 KiB page to 0.95, 50 fill four pages to
 * 0.99. A piece spans only the whole pages its elements fill, so a txn
 * that appends less than two pages' worth still writes single pages. 0
 * or 1 (the default): one page a piece. */
void btree_bucket_set_append_pages(struct btree_bucket *b, uint32_t pages, uint32_t max_elems);

uint64_t btree_bucket_sequence(const struct btree_bucket *b);

/* The pages of a bucket's own tree as its txn last wrote them (nested
 * buckets not counted; a write txn's changes not yet committed neither),
 * as bbolt's Bucket.Stats counts them: the fill of the leaves is
 * leaf_inuse / (leaf_pages * page size), overflow pages not counted in. */
struct btree_bucket_stats {
	uint64_t keys;
	uint64_t leaf_pages;
	uint64_t branch_pages;
	uint64_t overflow_pages;  /* the further pages of big leaves and branches */
	uint64_t leaf_inuse;      /* header, elements, keys and values: bytes */
	uint64_t branch_inuse;
};
/* 0, or -EUCLEAN for a page that is not sound. An inline bucket has no
 * pages. */
int btree_bucket_stats(struct btree_bucket *b, struct btree_bucket_stats *out);
int btree_bucket_set_sequence(struct btree_bucket *b, uint64_t seq);

/*
 * Looks key up. On success *val and *val_len point at the value inside the
 * mapping or the txn; they stay valid until the txn ends (for a write txn:
 * until its next change). -ENOENT, -EISDIR (a nested bucket), -EUCLEAN.
 */
int btree_get(struct btree_bucket *b, const void *key, size_t key_len,
	      const uint8_t **val, size_t *val_len);

/*
 * Looks n keys up at once, as btree_get would one by one: rcs[i] gets its
 * result and, on 0, vals[i] and val_lens[i] the value. In a read txn the
 * lookups go down the tree together, level by level, asking for every
 * page of a level before searching any, so that their cache misses
 * overlap instead of following each other. Returns 0, or an error that
 * ends the call (-EUCLEAN: a corrupt page; rcs of keys not reached are
 * then that error too).
 */
#define BTREE_GET_MANY_MAX 64
int btree_get_many(struct btree_bucket *b, size_t n, const uint8_t *const *keys,
		   const size_t *key_lens, const uint8_t **vals, size_t *val_lens, int *rcs);

/*
 * Reads the entry that a btree_observer heard placed: the value of key
 * (*val, *vsize bytes, valid like btree_get's), when element `index` of the
 * leaf page run at pgid holds exactly key at key_off (0: wherever the
 * element puts it); with key NULL, any key of key_len bytes (at *val -
 * key_len). Read
 * txns of a bucket with pages only. The place is checked against the page
 * (bounds, type, element, key bytes), not trusted; whether the txn's tree
 * still has the entry there is the caller's to know. -ENOENT when the
 * place does not hold the key (or the txn cannot read places).
 */
int btree_entry_at(struct btree_bucket *b, uint64_t pgid, uint32_t index, uint32_t key_off,
		   const void *key, size_t key_len, const uint8_t **val, uint32_t *vsize);
/* Asks the CPU for the lines btree_entry_at will read. */
void btree_entry_prefetch(struct btree_bucket *b, uint64_t pgid, uint32_t index,
			  uint32_t key_off);

/* Sets key to val (both copied). -EINVAL (empty key, key over 32768 bytes,
 * value over 2^31-2 bytes), -EISDIR, -EROFS, -ECANCELED, -ENOMEM. Any
 * failure other than a refused argument marks the txn failed. */
int btree_put(struct btree_bucket *b, const void *key, size_t key_len,
	      const void *val, size_t val_len);

/* Deletes key. -ENOENT if absent, -EISDIR for a nested bucket. */
int btree_del(struct btree_bucket *b, const void *key, size_t key_len);

/* One entry seen by a cursor. A nested bucket has flags
 * BTREE_KV_BUCKET and no value. Bytes are valid like btree_get's. */
#define BTREE_KV_BUCKET 0x01u
struct btree_kv {
	const uint8_t *key;
	size_t key_len;
	const uint8_t *val;
	size_t val_len;
	uint32_t flags;
};

/*
 * A cursor over one bucket. It lives wherever the caller puts it (no
 * allocation); the fields are private. After a change to the bucket through
 * btree_put/del/bucket_* a cursor must be repositioned (first/last/seek).
 */
#define BTREE_MAX_DEPTH 48
struct btree_cursor_frame {
	const uint8_t *page;      /* page in the mapping, or NULL for a node */
	struct bt_node *node;     /* in-memory node of a write txn */
	size_t span;              /* readable bytes of page */
	uint64_t pgid;
	uint32_t index;
	uint32_t count;
	bool leaf;
};
struct btree_cursor {
	struct btree_bucket *bucket;
	int state;           /* unpositioned, on an entry, past either end */
	uint32_t depth;
	struct btree_cursor_frame stack[BTREE_MAX_DEPTH];
};

void btree_cursor_init(struct btree_cursor *c, struct btree_bucket *b);
/* Each returns 0 with *kv filled, -ENOENT past the end, or an error. */
int btree_cursor_first(struct btree_cursor *c, struct btree_kv *kv);
int btree_cursor_last(struct btree_cursor *c, struct btree_kv *kv);
int btree_cursor_next(struct btree_cursor *c, struct btree_kv *kv);
int btree_cursor_prev(struct btree_cursor *c, struct btree_kv *kv);
/* Positions at the first key >= key. */
int btree_cursor_seek(struct btree_cursor *c, const void *key, size_t key_len,
		      struct btree_kv *kv);

#endif
