/*
 * Write transactions: page allocation and freeing, begin, the rollback
 * that btree_txn_end runs, and commit (spill, page writes, the new root).
 * The read half, which write txns share, is txn_read.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/pagewrite.h"

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
	struct btree_txn *t = bt_txn_new(&db->map, db, true, &at, db->root_sequence);
	if (!t)
		return bt_error(-ENOMEM, "stored: out of memory");
	t->rollback = txn_rollback;
	db->writing = true;
	*out = t;
	return 0;
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
	bt_txn_release(t);
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
