/*
 * Transactions, the half that reads: error reporting, page access with
 * bounds checks, read txns' begin, and end for both kinds (a write txn's
 * end runs the rollback its begin set, txn_write.c). Write txns' page
 * allocation, begin and commit are txn_write.c.
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

struct btree_txn *bt_txn_new(struct bt_map *m, struct btree_db *db, bool writable,
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

void bt_txn_release(struct btree_txn *t)
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
		t->rollback(t);
	bt_txn_release(t);
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
	struct btree_txn *t = bt_txn_new(m, db, false, at, 0);
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
