/*
 * Internals shared by the modules of the B+tree engine: the mapping, txns,
 * buckets and in-memory nodes. Not for use outside stored/.
 *
 * Ownership. A txn owns an arena (arena.h) that holds its bucket handles,
 * nodes, and copies of every key and value put, all freed when it ends.
 * Keys and values of nodes point into the mapping, into inline bucket
 * values, or into the arena; all stay put for the life of the txn because
 * the mapping never moves and pages freed by a txn are not reused before
 * it ends.
 */
#ifndef CETCD_STORED_BTREE_INT_H
#define CETCD_STORED_BTREE_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "stored/btree/arena.h"
#include "base/diskio/diskio.h"
#include "stored/btree/btree.h"
#include "stored/btree/freelist.h"
#include "stored/btree/page.h"
#include "stored/btree/pgmap.h"
#include "base/log/errmsg.h"

#define BT_LAST_GET_KEY_MAX 64u

/* A fixed read-only mapping of a db file. */
struct bt_map {
	char *path;
	int fd;
	const uint8_t *base;       /* map_size bytes, PROT_READ, MAP_SHARED */
	uint64_t map_size;
	uint32_t page_size;
	_Atomic uint64_t file_size;  /* bytes known to be in the file; only grows */
};

/* One element of an in-memory node. */
struct bt_inode {
	const uint8_t *key;
	const uint8_t *val;   /* leaf only */
	uint64_t pgid;        /* branch only: child page */
	uint32_t ksize;
	uint32_t vsize;
	uint32_t flags;       /* leaf: PAGE_LEAF_BUCKET or 0 */
	bool fresh;           /* put by this txn, not read from a page */
};

/*
 * A page materialized for change by a write txn. inodes stay sorted by key.
 * children lists the materialized child nodes (for spilling); parent is
 * NULL for the bucket's root node.
 */
struct bt_node {
	struct btree_bucket *bucket;
	struct bt_node *parent;
	struct bt_node **children;
	uint32_t nchildren, children_cap;
	struct bt_inode *inodes;
	uint32_t ninodes, inodes_cap;
	uint64_t pgid;         /* page it was read from or written to; 0 = none */
	uint32_t overflow;     /* overflow pages of that page */
	const uint8_t *key;    /* first key when read, to find it in the parent */
	uint32_t ksize;
	bool leaf;
	bool unbalanced;       /* lost elements; rebalance at commit */
	bool spilled;
	bool dead;             /* merged away or removed during rebalance */
	bool mid_insert;       /* a key went in before the last element */
	uint32_t appends;      /* keys that went in after the last element */
	struct bt_node *all_next;  /* every node of the txn, to free inode arrays */
};

struct btree_bucket {
	struct btree_txn *txn;
	struct btree_bucket *parent;     /* NULL for the txn's top-level bucket */
	struct btree_bucket *children;   /* opened child buckets (cache) */
	struct btree_bucket *next;       /* sibling in the parent's cache */
	const uint8_t *name;
	uint32_t name_len;
	uint64_t root;                   /* root page; 0 = inline */
	uint64_t sequence;
	const uint8_t *inline_page;      /* root == 0: the leaf page in the value */
	size_t inline_len;
	uint64_t holder_pgid;            /* page that held the bucket's value (messages) */
	uint32_t depth;                  /* nesting: 0 for the top level */
	struct bt_node *root_node;       /* write txns: materialized root */
	struct pgmap nodes;              /* write txns: pgid -> node */
	/* Write txns: the leaf node last changed, and the key range that
	 * seeks route to it ([lo, hi), a NULL bound is open), which stays
	 * valid until commit because branches change only when nodes spill.
	 * Puts, gets and deletes inside the range skip the descent. */
	struct bt_node *finger;
	const uint8_t *finger_lo, *finger_hi;
	uint32_t finger_lo_len, finger_hi_len;
	/* Write txns: the path of the last get that missed the finger, so
	 * that a put of the same key (a read-modify-write) does not descend
	 * again. One use; branch indices hold until commit. */
	struct btree_cursor_frame *lg_frames;  /* BTREE_MAX_DEPTH, txn arena */
	uint32_t lg_depth, lg_klen;
	bool lg_valid;
	uint8_t lg_key[BT_LAST_GET_KEY_MAX];
	double fill;
	uint32_t run_suffix;             /* btree_bucket_set_runs */
	uint32_t append_pages;           /* btree_bucket_set_append_pages */
	uint32_t append_elems;           /* the most elements such a piece holds */
	bool deleted;
	bool observed;                   /* the db's observer hears of its entries */
	struct btree_bucket *all_next;   /* every bucket handle of the txn */
};

/* A page written by the current write txn, not yet on disk. */
struct bt_dirty {
	uint64_t pgid;
	uint64_t npages;
	uint8_t *buf;   /* npages * page_size bytes */
	bool queued;    /* handed to db->pagewrite by the spill */
};

/* A run of pages. */
struct bt_run {
	uint64_t pgid;
	uint64_t n;
};

struct btree_txn {
	struct bt_map *map;
	struct btree_db *db;      /* the writer's db, NULL for a reader's txn */
	bool writable;
	bool failed;              /* a write failed halfway: refuse further use */
	bool local_reader;        /* registered among db's local readers */
	uint64_t txid;
	uint64_t hwm;             /* pages below it exist; grows as a write txn allocates */
	struct btree_bucket root;
	struct btree_bucket *all_buckets;  /* handles other than root */
	struct arena arena;
	/* write txns only */
	struct bt_node *all_nodes;
	struct bt_dirty *dirty;
	size_t ndirty, dirty_cap;
	struct pgmap dirty_map;   /* pgid -> struct bt_dirty index + 1 */
	struct bt_run *freed;     /* pages this txn freed */
	size_t nfreed, freed_cap;
	struct bt_run *allocs;    /* pages taken from the freelist (undone on abort) */
	size_t nallocs, allocs_cap;
	/* Gives allocs back to the freelist; btree_txn_end runs it. Set by
	 * btree_write_begin (txn_write.c), so that ending a txn, which the
	 * read side does, does not reach the freelist's writes. */
	void (*rollback)(struct btree_txn *t);
};

/* A checkpoint prepared and, with a background chain, being written. */
struct bt_ckpt {
	struct btree_root state;     /* what becomes durable */
	unsigned slot;               /* meta page written */
	uint64_t fl_pgid, fl_pages;  /* its freelist page run */
	uint8_t *fl_buf, *meta_page;
	struct diskio_write w[2];    /* freelist, then meta */
	bool inflight;
};

struct btree_db {
	struct bt_map map;
	struct diskio *io;
	/* writes the pages of a commit as its spill finishes them; NULL:
	 * they are written after the spill (see pagewrite.h) */
	struct pagewrite *pagewrite;
	struct freelist fl;
	struct btree_root cur;       /* newest commit */
	struct btree_root durable;   /* last durable checkpoint */
	uint64_t root_sequence;      /* top-level bucket sequence from the meta */
	unsigned durable_slot;       /* meta page (0 or 1) holding durable */
	uint64_t durable_fl_pgid;    /* its freelist page, or PAGE_NO_FREELIST */
	uint64_t durable_fl_pages;
	bool failed;                 /* I/O failed in a way that needs a reopen */
	bool writing;                /* a write txn is open */
	bool reuse_blocked;          /* opts.resume holds pages back */
	uint64_t resume_txid;
	/* Runs committed since the last checkpoint began (its tree was
	 * fixed), by first page: the value is the run's page count, NULL once
	 * freed again. A run freed with its whole count here goes to the
	 * freelist's young spans (freelist.h). */
	struct pgmap born;
	uint64_t (*oldest_reader)(void *arg);
	void *oldest_reader_arg;
	pthread_mutex_t readers_lock;  /* guards local_readers */
	uint64_t *local_readers;       /* txids of this process's read txns */
	size_t nlocal, local_cap;
	uint64_t commits, checkpoints;
	uint64_t young_freed;          /* pages, since open */
	struct bt_ckpt ck;
	/* One-page buffers of ended write txns, kept for the next ones so
	 * that every commit does not fault in fresh memory (at most
	 * BT_PAGE_POOL_MAX). */
	uint8_t **page_pool;
	size_t npool, pool_cap;
	struct arena_pool arena_pool;  /* chunks of ended write txns' arenas */
	/* btree_db_observe: the observed top-level bucket's name, or none. */
	struct btree_observer obs;
	uint8_t *obs_name;
	size_t obs_name_len;
	/* btree_db_observe_warm: the next key to tell of (none: start) */
	uint8_t *warm_key;
	size_t warm_len, warm_cap;
	bool warm_done;
	struct btree_tracker track;    /* btree_db_track: none when wrote is NULL */
};

#define BT_PAGE_POOL_MAX 32768u
#define BT_ARENA_POOL_MAX 1024u   /* 64 MiB of arena chunks */

struct btree_reader {
	struct bt_map map;
};

/* Errors: record the message in the thread's error slot (base/log/errmsg.h)
 * and return rc. */
#define bt_error(rc, ...) errmsg_set((rc), __VA_ARGS__)
/* "stored: db PATH: page N <what>; the file is corrupt, restore from a
 * snapshot" and -EUCLEAN. */
int bt_corrupt(const struct bt_map *m, uint64_t pgid, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Whether the db may still write: 0, or -EIO once a write or sync of its
 * file failed (db->failed is then set for good; txn_read.c). */
int bt_db_usable(struct btree_db *db);

/* A txn over m at *at (txn_read.c; write txns: db is the writer's). NULL
 * when out of memory. */
struct btree_txn *bt_txn_new(struct bt_map *m, struct btree_db *db, bool writable,
			     const struct btree_root *at, uint64_t root_sequence);
/* Frees t and all it holds, ending it without a rollback. */
void bt_txn_release(struct btree_txn *t);

/* Marks a write txn failed (if rc is not a refused argument) and returns rc. */
int bt_txn_fail(struct btree_txn *t, int rc);

/* Checks that a txn may be used (-ECANCELED if failed) and, if write, that
 * it is a write txn (-EROFS). */
int bt_txn_usable(struct btree_txn *t, bool write);

/*
 * A branch or leaf page of txn t: validated header (id, type, overflow and
 * element array inside [0, t->hwm)). A write txn sees its own dirty pages.
 * 0 or -EUCLEAN.
 */
int bt_txn_page(struct btree_txn *t, uint64_t pgid, const uint8_t **page, size_t *span);

/* Validates the header of a page already located (shared by bt_txn_page
 * and inline pages). inline_page: id is not checked. */
int bt_page_check(const struct bt_map *m, uint64_t pgid, const uint8_t *p,
		  size_t span, bool inline_page);

/* A write txn's new page run: *buf (owned by the txn) holds stale bytes
 * but for the header's id and overflow; the caller writes every byte. */
int bt_txn_allocate(struct btree_txn *t, uint64_t npages, uint64_t *pgid, uint8_t **buf);
/* Records that the txn frees [pgid, pgid+n). */
int bt_txn_free(struct btree_txn *t, uint64_t pgid, uint64_t n);

/* nodes (node_write.c; bt_node_lookup and bt_node_release_all: node_read.c) */
/* Index of the first inode whose key is >= key; *exact if it equals key. */
static inline uint32_t node_find(const struct bt_node *n, const uint8_t *key,
				 uint32_t ksize, bool *exact)
{
	uint32_t lo = 0, hi = n->ninodes;
	/* Keys written in order land after the last element: one compare. */
	if (hi > 0) {
		const struct bt_inode *last = &n->inodes[hi - 1];
		int c = page_keycmp(last->key, last->ksize, key, ksize);
		if (c < 0) {
			*exact = false;
			return hi;
		}
		if (c == 0) {
			*exact = true;
			return hi - 1;
		}
		hi--;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		const struct bt_inode *in = &n->inodes[mid];
		if (page_keycmp(in->key, in->ksize, key, ksize) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*exact = lo < n->ninodes &&
		 page_keycmp(n->inodes[lo].key, n->inodes[lo].ksize, key, ksize) == 0;
	return lo;
}

int bt_node_get(struct btree_bucket *b, uint64_t pgid, struct bt_node *parent,
		struct bt_node **out);
int bt_node_put(struct bt_node *n, const uint8_t *old_key, uint32_t old_ksize,
		const uint8_t *key, uint32_t ksize, const uint8_t *val, uint32_t vsize,
		uint64_t pgid, uint32_t flags);
bool bt_node_del(struct bt_node *n, const uint8_t *key, uint32_t ksize);
/* The element of n whose key is key, or NULL. */
const struct bt_inode *bt_node_lookup(const struct bt_node *n, const uint8_t *key,
				      uint32_t ksize);
size_t bt_node_size(const struct bt_node *n);
void bt_node_write(const struct bt_node *n, uint8_t *page, uint64_t id, uint32_t overflow);
int bt_node_spill(struct bt_node *n);
int bt_node_rebalance(struct bt_node *n);
void bt_node_release_all(struct btree_txn *t);

/* buckets (bucket_write.c; bt_bucket_init: bucket_read.c) */
void bt_bucket_init(struct btree_bucket *b, struct btree_txn *t, uint64_t root,
		    uint64_t sequence);
int bt_bucket_rebalance(struct btree_bucket *b);
int bt_bucket_spill(struct btree_bucket *b);
/* Frees every page of the bucket's tree (not nested buckets'). */
int bt_bucket_free_pages(struct btree_bucket *b, bool via_nodes);
/* Tells the db's observer to forget everything, and warming to start over. */
void bt_db_observe_reset(struct btree_db *db);
/* Tells db's tracker (btree_db_track) that b's key (NULL: b itself, or
 * the named child bucket `child` of b) is about to change. */
void bt_track(struct btree_bucket *b, const void *key, size_t key_len, bool child);
/* Tells the db's observer that every key of the node left its pages. */
void bt_bucket_observe_gone(const struct btree_bucket *b, const struct bt_node *n);

#define BT_MAX_NESTING 64   /* buckets nested deeper than this are refused */

/* cursors (cursor_read.c; bt_cursor_node: cursor_write.c) */
/* Positions at the first key >= key; *exact tells whether it is key. On
 * -ENOENT the cursor sits past the end (a put then appends there). */
int bt_cursor_seek(struct btree_cursor *c, const uint8_t *key, size_t klen,
		   struct btree_kv *kv, bool *exact);
/* The cursor's deepest frame. */
static inline struct btree_cursor_frame *cursor_top(struct btree_cursor *c)
{
	return &c->stack[c->depth - 1];
}
/* Makes n, the leaf under c, its bucket's finger, with the key range that
 * routes to it (cursor_read.c, for bt_cursor_node). */
void bt_cursor_set_finger(struct btree_cursor *c, struct bt_node *n);
/* btree_get_many for a read txn's bucket that has pages (root != 0). */
int bt_get_many_pages(struct btree_bucket *b, size_t n, const uint8_t *const *keys,
		      const size_t *key_lens, const uint8_t **vals, size_t *val_lens, int *rcs);
/* The leaf node under the cursor, materialized for change; it becomes the
 * bucket's finger. */
int bt_cursor_node(struct btree_cursor *c, struct bt_node **out);

/* buckets: shared by bucket_read.c and bucket_write.c */

static inline struct btree_bucket *bucket_or_root(struct btree_txn *t,
						  struct btree_bucket *b)
{
	return b ? b : &t->root;
}

static inline int bucket_usable(struct btree_txn *t, struct btree_bucket *b, bool write)
{
	int rc = bt_txn_usable(t, write);
	if (rc < 0)
		return rc;
	if (b->txn != t)
		return bt_error(-EINVAL, "stored: bucket handle of another txn");
	if (b->deleted)
		return bt_error(-ENOENT, "stored: the bucket was deleted in this txn");
	return 0;
}

static inline int key_valid(const char *what, size_t len)
{
	if (len == 0 || len > PAGE_MAX_KEY)
		return bt_error(-EINVAL, "stored: %s of %zu bytes (must be 1 to %u)", what, len,
				PAGE_MAX_KEY);
	return 0;
}

/*
 * The common start of the entry points: checks that the txn and bucket may
 * be used (for a change, when write), that key is a valid key (what names
 * it in messages), and positions c at key. 0 with *exact telling whether
 * key is there (kv then holds it); errors of a change fail the txn.
 */
static inline int bucket_seek(struct btree_bucket *b, bool write, const char *what,
			      const void *key, size_t klen, struct btree_cursor *c,
			      struct btree_kv *kv, bool *exact)
{
	int rc = bucket_usable(b->txn, b, write);
	if (rc < 0)
		return rc;
	rc = key_valid(what, klen);
	if (rc < 0)
		return rc;
	btree_cursor_init(c, b);
	rc = bt_cursor_seek(c, key, klen, kv, exact);
	if (rc == -ENOENT)
		return 0;
	return rc < 0 && write ? bt_txn_fail(b->txn, rc) : rc;
}

/* The bucket's finger leaf when key lies in its range, else NULL. */
static inline struct bt_node *bucket_finger(const struct btree_bucket *b, const uint8_t *key,
					    size_t klen)
{
	const struct bt_node *n = b->finger;
	if (!n || n->dead || klen == 0 || klen > PAGE_MAX_KEY)
		return NULL;
	if (b->finger_lo && page_keycmp(key, (uint32_t)klen, b->finger_lo, b->finger_lo_len) < 0)
		return NULL;
	if (b->finger_hi && page_keycmp(key, (uint32_t)klen, b->finger_hi, b->finger_hi_len) >= 0)
		return NULL;
	return b->finger;
}

/* A read txn at *at over m (db: the writer, or NULL), after checking that
 * the state lies inside the file and the mapping. */
int bt_txn_begin_read(struct bt_map *m, struct btree_db *db, const struct btree_root *at,
		      struct btree_txn **out);

/* mapping and file (dbfile_read.c: the meta, the mapping, readers; dbfile.c:
 * the writer's file) */

/* The meta chosen at open. */
struct db_meta_pick {
	uint32_t page_size;
	unsigned slot;
	struct page_meta meta;
	uint64_t file_size;
};

/* The size of the file open at fd (path for messages). */
int bt_db_fstat_size(const char *path, int fd, uint64_t *size);
/* Finds the page size and the current meta of the file open at fd: the
 * newest meta page that verifies, whose state lies inside the file. */
int bt_db_pick_meta(const char *path, int fd, struct db_meta_pick *out);
/* Maps map_size bytes (0: the default) of the file open at fd read-only
 * into m (populate: fills the page tables for the file as it is). */
int bt_map_init(struct bt_map *m, const char *path, int fd, uint64_t map_size,
		uint32_t ps, uint64_t file_size, bool populate);
/* Unmaps, closes the file and frees the path; on a detached thread when
 * the file has been unlinked (btree_detached_releases). */
void bt_map_release(struct bt_map *m);
/* Checks that [0, pages * page_size) lies in the file and the mapping
 * (-EUCLEAN, -ENOSPC otherwise). */
int bt_map_cover(struct bt_map *m, uint64_t pages);
/* Grows the writer's file so that it holds pages pages. */
int bt_db_grow(struct btree_db *db, uint64_t pages);

/* the oldest txid still read in this process or (callback) elsewhere */
uint64_t bt_db_oldest_reader(struct btree_db *db);

/* free pages (freelist.c; freelist_decode: freelist_read.c): page ids in
 * ascending order, for qsort */
static inline int cmp_asc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* checks (check.c) */
struct bt_check_opts {
	const uint64_t *pre_used;  /* pages in use outside the tree (metas, freelist) */
	size_t npre_used;
	const uint64_t *free_ids;  /* free pages (any order) */
	size_t nfree;
	bool account_all;          /* every page below the hwm is used or free */
	uint8_t **seen_out;        /* if set: receives the bitmap of used pages
				    * (hwm bits, freed with stored_free) */
};
int bt_check_txn(struct btree_txn *t, const struct bt_check_opts *o);

#endif
