/*
 * Transactions: error reporting, page access with bounds checks, page
 * allocation for write txns, and begin / commit / end.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/pagewrite.h"

int bt_corrupt(const struct bt_map *m, uint64_t pgid, const char *fmt, ...)
{
	char what[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return errmsg_set(-EUCLEAN,
			  "stored: db %s: page %llu %s; the file is corrupt, restore from a snapshot",
			  m->path, (unsigned long long)pgid, what);
}

int bt_txn_fail(struct btree_txn *t, int rc)
{
	switch (rc) {
	case -EINVAL:
	case -ENOENT:
	case -EEXIST:
	case -EISDIR:
	case -ENOTDIR:
	case -EROFS:
	case -ECANCELED:
		break;
	default:
		if (t->writable)
			t->failed = true;
	}
	return rc;
}

int bt_txn_usable(struct btree_txn *t, bool write)
{
	if (t->failed)
		return bt_error(-ECANCELED,
				"stored: db %s: the write txn failed earlier and was not committed",
				t->map->path);
	if (write && !t->writable)
		return bt_error(-EROFS, "stored: db %s: write in a read txn", t->map->path);
	return 0;
}

int bt_page_check(const struct bt_map *m, uint64_t pgid, const uint8_t *p,
		  size_t span, bool inline_page)
{
	if (span < PAGE_HDR_SIZE)
		return bt_corrupt(m, pgid, "has an inline page shorter than a page header");
	uint16_t flags = page_flags(p);
	if (!inline_page && page_id(p) != pgid)
		return bt_corrupt(m, pgid, "has id %llu in its header",
				  (unsigned long long)page_id(p));
	if (inline_page && flags != PAGE_FLAG_LEAF)
		return bt_corrupt(m, pgid, "holds an inline bucket page with invalid flags 0x%04x",
				  flags);
	if (flags != PAGE_FLAG_BRANCH && flags != PAGE_FLAG_LEAF)
		return bt_corrupt(m, pgid, "has invalid flags 0x%04x where a branch or leaf page belongs",
				  flags);
	uint16_t count = page_count(p);
	if (PAGE_HDR_SIZE + (size_t)count * PAGE_ELEM_SIZE > span)
		return bt_corrupt(m, pgid, "has %u elements, more than fit in %zu bytes",
				  count, span);
	if (flags == PAGE_FLAG_BRANCH && count == 0)
		return bt_corrupt(m, pgid, "is a branch page without elements");
	return 0;
}

int bt_txn_page(struct btree_txn *t, uint64_t pgid, const uint8_t **page, size_t *span)
{
	const struct bt_map *m = t->map;
	if (pgid < 2 || pgid >= t->hwm)
		return bt_corrupt(m, pgid, "is referenced but lies outside the tree (high-water mark %llu)",
				  (unsigned long long)t->hwm);
	if (t->writable && t->dirty_map.n > 0) {
		uintptr_t idx = (uintptr_t)pgmap_get(&t->dirty_map, pgid);
		if (idx) {
			struct bt_dirty *d = &t->dirty[idx - 1];
			*page = d->buf;
			*span = d->npages * m->page_size;
			return bt_page_check(m, pgid, d->buf, *span, false);
		}
	}
	const uint8_t *p = m->base + pgid * m->page_size;
	uint64_t overflow = page_overflow(p);
	if (overflow >= t->hwm - pgid)
		return bt_corrupt(m, pgid, "has %llu overflow pages, past the high-water mark %llu",
				  (unsigned long long)overflow, (unsigned long long)t->hwm);
	*page = p;
	*span = (size_t)(overflow + 1) * m->page_size;
	return bt_page_check(m, pgid, p, *span, false);
}

/* Makes room for one more entry in a run vector. */
static int run_reserve(struct bt_run **v, size_t n, size_t *cap)
{
	return stored_reserve((void **)v, cap, n + 1, sizeof(**v), 32);
}

int bt_txn_allocate(struct btree_txn *t, uint64_t npages, uint64_t *pgid_out, uint8_t **buf_out)
{
	struct btree_db *db = t->db;
	const struct bt_map *m = t->map;
	uint64_t pgid;
	bool from_free = false;
	int rc;

	rc = stored_reserve((void **)&t->dirty, &t->dirty_cap, t->ndirty + 1, sizeof(*t->dirty), 64);
	if (rc < 0)
		return rc;
	uint8_t *buf;
	if (npages == 1 && db->npool > 0) {
		buf = db->page_pool[--db->npool];  /* the caller writes all of it */
	} else {
		buf = stored_calloc(npages, m->page_size);
		if (!buf)
			return -ENOMEM;
	}
	/* Room to record a run from the freelist, so that it can be given
	 * back if the txn aborts. */
	rc = run_reserve(&t->allocs, t->nallocs, &t->allocs_cap);
	if (rc < 0)
		goto out_free_buf;

	if (!db->reuse_blocked && freelist_alloc(&db->fl, npages, &pgid) == 0) {
		from_free = true;
	} else {
		pgid = t->hwm;
		if (npages > m->map_size / m->page_size - pgid) {
			rc = bt_error(-ENOSPC,
				      "stored: db %s: the file would grow past the map size of %llu bytes",
				      m->path, (unsigned long long)m->map_size);
			goto out_free_buf;
		}
	}
	rc = pgmap_put(&t->dirty_map, pgid, (void *)(uintptr_t)(t->ndirty + 1));
	if (rc < 0) {
		if (from_free)
			freelist_put_free_run(&db->fl, pgid, npages);
		goto out_free_buf;
	}
	if (from_free)
		t->allocs[t->nallocs++] = (struct bt_run){ pgid, npages };
	else
		t->hwm += npages;
	page_set_header(buf, pgid, 0, 0, (uint32_t)(npages - 1));
	t->dirty[t->ndirty++] = (struct bt_dirty){ pgid, npages, buf, false };
	*pgid_out = pgid;
	*buf_out = buf;
	return 0;

out_free_buf:
	stored_free(buf);
	return rc;
}

int bt_txn_free(struct btree_txn *t, uint64_t pgid, uint64_t n)
{
	int rc = run_reserve(&t->freed, t->nfreed, &t->freed_cap);
	if (rc == 0)
		t->freed[t->nfreed++] = (struct bt_run){ pgid, n };
	return rc;
}

/* Registers a read txn of the writer's process so its pages are kept. */
static int local_reader_add(struct btree_db *db, uint64_t txid)
{
	pthread_mutex_lock(&db->readers_lock);
	int rc = stored_reserve((void **)&db->local_readers, &db->local_cap, db->nlocal + 1,
				sizeof(*db->local_readers), 8);
	if (rc == 0)
		db->local_readers[db->nlocal++] = txid;
	pthread_mutex_unlock(&db->readers_lock);
	return rc;
}

static void local_reader_remove(struct btree_db *db, uint64_t txid)
{
	pthread_mutex_lock(&db->readers_lock);
	for (size_t i = 0; i < db->nlocal; i++) {
		if (db->local_readers[i] == txid) {
			db->local_readers[i] = db->local_readers[--db->nlocal];
			break;
		}
	}
	pthread_mutex_unlock(&db->readers_lock);
}

uint64_t bt_db_oldest_reader(struct btree_db *db)
{
	uint64_t oldest = UINT64_MAX;
	if (db->oldest_reader)
		oldest = db->oldest_reader(db->oldest_reader_arg);
	pthread_mutex_lock(&db->readers_lock);
	for (size_t i = 0; i < db->nlocal; i++)
		if (db->local_readers[i] < oldest)
			oldest = db->local_readers[i];
	pthread_mutex_unlock(&db->readers_lock);
	return oldest;
}

static struct btree_txn *txn_new(struct bt_map *m, struct btree_db *db, bool writable,
				 const struct btree_root *at, uint64_t root_sequence)
{
	struct btree_txn *t = stored_calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->map = m;
	t->db = db;
	t->writable = writable;
	t->txid = at->txid;
	t->hwm = at->hwm_pgid;
	arena_init(&t->arena);
	if (writable)
		t->arena.pool = &db->arena_pool;  /* only the writer's thread uses it */
	pgmap_init(&t->dirty_map);
	bt_bucket_init(&t->root, t, at->root_pgid, root_sequence);
	return t;
}

bool btree_db_failed(struct btree_db *db)
{
	if (diskio_failed(db->io))
		db->failed = true;
	return db->failed;
}

int bt_db_usable(struct btree_db *db)
{
	/* The file failed (a write or sync of it failed, maybe on the page
	 * writer's thread): so did the db. */
	if (btree_db_failed(db))
		return bt_error(-EIO, "stored: db %s: an earlier write or sync failed; reopen the db",
				db->map.path);
	return 0;
}

int btree_write_begin(struct btree_db *db, struct btree_txn **out)
{
	int rc = bt_db_usable(db);

	if (rc)
		return rc;
	if (db->writing)
		return bt_error(-EBUSY, "stored: db %s: a write txn is already open", db->map.path);

	uint64_t oldest = bt_db_oldest_reader(db);
	if (db->reuse_blocked && db->oldest_reader &&
	    db->oldest_reader(db->oldest_reader_arg) > db->resume_txid)
		db->reuse_blocked = false;
	uint64_t upto = db->durable.txid < oldest ? db->durable.txid : oldest;
	rc = freelist_release(&db->fl, upto, oldest);
	if (rc == -EEXIST)
		return bt_error(-EUCLEAN, "stored: db %s: a page was freed twice; the db state is corrupt, reopen it",
				db->map.path);
	if (rc < 0)
		return bt_error(rc, "stored: db %s: cannot release free pages: %s",
				db->map.path, strerror(-rc));

	struct btree_root at = db->cur;
	at.txid = db->cur.txid + 1;
	struct btree_txn *t = txn_new(&db->map, db, true, &at, db->root_sequence);
	if (!t)
		return bt_error(-ENOMEM, "stored: out of memory");
	db->writing = true;
	*out = t;
	return 0;
}

/* Gives pages taken from the freelist back after an aborted write txn. */
static void txn_rollback(struct btree_txn *t)
{
	struct btree_db *db = t->db;
	for (size_t i = 0; i < t->nallocs; i++) {
		if (freelist_put_free_run(&db->fl, t->allocs[i].pgid, t->allocs[i].n) < 0) {
			/* The pages would be lost from the accounting. */
			db->failed = true;
			break;
		}
	}
	t->nallocs = 0;
	db->writing = false;
}

/* Keeps a one-page dirty buffer for the db's next txns, or frees it. */
static void txn_drop_buf(struct btree_txn *t, struct bt_dirty *d)
{
	struct btree_db *db = t->db;
	if (db && d->npages == 1 && db->npool < BT_PAGE_POOL_MAX) {
		if (stored_reserve((void **)&db->page_pool, &db->pool_cap, db->npool + 1,
				   sizeof(*db->page_pool), 256) == 0) {
			db->page_pool[db->npool++] = d->buf;
			return;
		}
	}
	stored_free(d->buf);
}

static void txn_free(struct btree_txn *t)
{
	if (t->local_reader)
		local_reader_remove(t->db, t->txid);
	bt_node_release_all(t);
	pgmap_free(&t->root.nodes);
	for (struct btree_bucket *b = t->all_buckets; b; b = b->all_next)
		pgmap_free(&b->nodes);
	for (size_t i = 0; i < t->ndirty; i++)
		txn_drop_buf(t, &t->dirty[i]);
	stored_free(t->dirty);
	pgmap_free(&t->dirty_map);
	stored_free(t->freed);
	stored_free(t->allocs);
	arena_release(&t->arena);
	stored_free(t);
}

void btree_txn_end(struct btree_txn *t)
{
	if (!t)
		return;
	if (t->writable)
		txn_rollback(t);
	txn_free(t);
}

static int write_cmp(const void *a, const void *b)
{
	const struct diskio_write *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/* Writes every dirty page of t (sorted by page id, no sync). */
static int txn_write_pages(struct btree_txn *t)
{
	struct btree_db *db = t->db;
	if (t->ndirty == 0)
		return 0;
	/* the pages the page writer took are written (or failed) already */
	int rc = db->pagewrite ? pagewrite_drain(db->pagewrite) : 0;
	if (rc < 0)
		return rc;
	struct diskio_write *w = stored_malloc(t->ndirty * sizeof(*w));
	if (!w)
		return -ENOMEM;
	size_t n = 0;
	for (size_t i = 0; i < t->ndirty; i++) {
		if (t->dirty[i].queued)
			continue;
		w[n].buf = t->dirty[i].buf;
		w[n].len = t->dirty[i].npages * db->map.page_size;
		w[n++].off = t->dirty[i].pgid * db->map.page_size;
	}
	/* in file order, so that adjacent pages go out in one pwritev */
	qsort(w, n, sizeof(*w), write_cmp);
	rc = n ? diskio_write_batch(db->io, w, n, false) : 0;
	stored_free(w);
	return rc;
}

/* After t's pages are written: its allocations count as born since the
 * last checkpoint began (a run the map cannot take is simply not young
 * when freed), and each run it freed goes to young if it was born so,
 * else to pending. The freelist has room for the runs reserved. */
static void txn_settle_pages(struct btree_txn *t)
{
	struct btree_db *db = t->db;
	for (size_t i = 0; i < t->ndirty; i++)
		(void)pgmap_put(&db->born, t->dirty[i].pgid, (void *)(uintptr_t)t->dirty[i].npages);
	for (size_t i = 0; i < t->nfreed; i++) {
		const struct bt_run *r = &t->freed[i];
		if ((uintptr_t)pgmap_get(&db->born, r->pgid) == r->n) {
			pgmap_replace(&db->born, r->pgid, NULL);
			freelist_add_young(&db->fl, t->txid, r->pgid, r->n);
			db->young_freed += r->n;
		} else {
			freelist_add_pending(&db->fl, t->txid, r->pgid, r->n);
		}
	}
}

int btree_commit(struct btree_txn *t, struct btree_root *out)
{
	int rc;
	if (!t->writable) {
		btree_txn_end(t);
		return bt_error(-EROFS, "stored: commit of a read txn");
	}
	struct btree_db *db = t->db;
	const char *path = db->map.path;
	if (t->failed) {
		rc = bt_error(-ECANCELED, "stored: db %s: the write txn failed earlier; nothing was committed",
			      path);
		goto out_abort;
	}
	rc = bt_bucket_rebalance(&t->root);
	if (rc < 0)
		goto out_abort;
	rc = bt_bucket_spill(&t->root);
	if (rc < 0)
		goto out_abort;
	if (db->obs.flush)
		db->obs.flush(db->obs.arg);
	rc = freelist_reserve_pending(&db->fl, t->nfreed);
	if (rc < 0)
		goto out_nomem;
	rc = bt_db_grow(db, t->hwm);
	if (rc < 0)
		goto out_abort;
	rc = txn_write_pages(t);
	if (rc < 0) {
		if (rc != -ENOSPC && rc != -EDQUOT && rc != -EFBIG && rc != -ENOMEM)
			db->failed = true;
		rc = bt_error(rc, "stored: db %s: writing the pages of txn %llu failed: %s",
			      path, (unsigned long long)t->txid, strerror(-rc));
		goto out_abort;
	}

	txn_settle_pages(t);
	db->cur.root_pgid = t->root.root;
	db->cur.txid = t->txid;
	db->cur.hwm_pgid = t->hwm;
	db->root_sequence = t->root.sequence;
	db->commits++;
	if (out)
		*out = db->cur;
	t->nallocs = 0;  /* the allocations are now the db's */
	db->writing = false;
	txn_free(t);
	return 0;

out_nomem:
	rc = bt_error(rc, "stored: out of memory");
out_abort:
	/* The page writer may still be writing this txn's buffers. */
	if (db->pagewrite)
		(void)pagewrite_drain(db->pagewrite);
	/* Entries placed by the spill name pages and a txid that the next
	 * txn will use again. */
	bt_db_observe_reset(db);
	btree_txn_end(t);
	return rc;
}

int bt_txn_begin_read(struct bt_map *m, struct btree_db *db, const struct btree_root *at,
		      struct btree_txn **out)
{
	if (at->hwm_pgid < 3 || at->root_pgid < 2 || at->root_pgid >= at->hwm_pgid)
		return bt_error(-EUCLEAN,
				"stored: db %s: read txn at root %llu with high-water mark %llu is not a valid state",
				m->path, (unsigned long long)at->root_pgid,
				(unsigned long long)at->hwm_pgid);
	int rc = bt_map_cover(m, at->hwm_pgid);
	if (rc < 0)
		return rc;
	struct btree_txn *t = txn_new(m, db, false, at, 0);
	if (!t)
		return bt_error(-ENOMEM, "stored: out of memory");
	*out = t;
	return 0;
}

int btree_db_read_begin(struct btree_db *db, const struct btree_root *at,
			struct btree_txn **out)
{
	struct btree_root state = at ? *at : db->cur;
	int rc = local_reader_add(db, state.txid);
	if (rc < 0)
		return bt_error(rc, "stored: out of memory");
	rc = bt_txn_begin_read(&db->map, db, &state, out);
	if (rc < 0) {
		local_reader_remove(db, state.txid);
		return rc;
	}
	(*out)->local_reader = true;
	return 0;
}

int btree_reader_begin(struct btree_reader *r, const struct btree_root *at,
		       struct btree_txn **out)
{
	return bt_txn_begin_read(&r->map, NULL, at, out);
}

uint64_t btree_txn_id(const struct btree_txn *t)
{
	return t->txid;
}

bool btree_txn_writable(const struct btree_txn *t)
{
	return t->writable;
}

struct btree_bucket *btree_txn_root(struct btree_txn *t)
{
	return &t->root;
}
