/*
 * The db file of the writer: creating it, opening it (the meta and the
 * mapping come from dbfile_read.c), loading the freelist (or rebuilding it
 * from the reachable pages when the file has none), growing it, and
 * checkpoints. The read-only handle that readers in other processes use is
 * dbfile_read.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/pagewrite.h"

/* The file grows ahead of the pages it needs by 1/DB_GROW_DIV of them,
 * within [DB_GROW_MIN, DB_GROW_MAX]: one metadata update per 64 pages
 * written at the end or more, and beyond 16 MiB no more than 1/64 of the
 * file past its high-water mark (bbolt under etcd 3.4, which keeps no
 * freelist page, grows its file no further than its last page). */
#define DB_GROW_MIN (256ull << 10)
#define DB_GROW_MAX (16ull << 20)
#define DB_GROW_DIV 64u

/* Writes bbolt's initial layout into the empty file: two metas, an empty
 * freelist (page 2), an empty root leaf (page 3); then syncs it (unless
 * sync is false). */
static int db_init_file(const char *path, struct diskio *io, uint32_t ps, bool sync)
{
	uint8_t *buf = stored_calloc(4, ps);
	if (!buf)
		return bt_error(-ENOMEM, "stored: out of memory");
	for (unsigned i = 0; i < 2; i++) {
		struct page_meta m = {
			.magic = PAGE_MAGIC,
			.version = PAGE_VERSION,
			.page_size = ps,
			.root = 3,
			.freelist = 2,
			.pgid = 4,
			.txid = i,
		};
		page_meta_encode(buf + (size_t)i * ps, ps, i, &m);
	}
	page_set_header(buf + 2 * (size_t)ps, 2, PAGE_FLAG_FREELIST, 0, 0);
	page_set_header(buf + 3 * (size_t)ps, 3, PAGE_FLAG_LEAF, 0, 0);
	struct diskio_write w = { buf, 4 * (size_t)ps, 0 };
	int rc = diskio_write_batch(io, &w, 1, sync);
	stored_free(buf);
	if (rc < 0)
		return bt_error(rc, "stored: db %s: writing the new file: %s", path, strerror(-rc));
	return 0;
}

/* fsyncs the directory holding path, so a new file's entry is durable. */
static int db_sync_dir(const char *path)
{
	int rc = diskio_sync_parent(path);
	if (rc < 0)
		return bt_error(rc, "stored: db %s: syncing its directory: %s", path, strerror(-rc));
	return 0;
}

int bt_db_grow(struct btree_db *db, uint64_t pages)
{
	struct bt_map *m = &db->map;
	uint64_t ps = m->page_size;
	uint64_t size = atomic_load(&m->file_size);
	uint64_t need = pages * ps;
	if (need <= size)
		return 0;
	if (pages > m->map_size / ps)
		return bt_error(-ENOSPC, "stored: db %s: the file would grow past the map size %llu",
				m->path, (unsigned long long)m->map_size);
	/* Grow ahead to spare metadata updates, but never past the mapping. */
	uint64_t step = need / DB_GROW_DIV;
	step = step < DB_GROW_MIN ? DB_GROW_MIN : step > DB_GROW_MAX ? DB_GROW_MAX : step;
	uint64_t target = need + step;
	target = (target + ps - 1) / ps * ps;
	if (target > m->map_size)
		target = m->map_size;
	int rc = diskio_allocate(db->io, size, target - size);
	if (rc == -EOPNOTSUPP)
		rc = diskio_truncate(db->io, target);
	if (rc < 0)
		return bt_error(rc, "stored: db %s: growing the file to %llu bytes: %s", m->path,
				(unsigned long long)target, strerror(-rc));
	atomic_store(&m->file_size, target);
	return 0;
}

/* Reads the durable freelist into db->fl: from the freelist page, or, for
 * a file without one, as every page the tree does not reach. */
static int db_load_freelist(struct btree_db *db, const struct page_meta *meta)
{
	struct bt_map *m = &db->map;
	char why[160];
	int rc;
	if (meta->freelist == PAGE_NO_FREELIST) {
		struct btree_txn *t;
		uint8_t *seen = NULL;
		rc = bt_txn_begin_read(m, NULL, &db->durable, &t);
		if (rc < 0)
			return rc;
		uint64_t metas[2] = { 0, 1 };
		struct bt_check_opts o = { .pre_used = metas, .npre_used = 2, .seen_out = &seen };
		rc = bt_check_txn(t, &o);
		btree_txn_end(t);
		if (rc < 0)
			return rc;
		uint64_t *ids = stored_malloc(db->durable.hwm_pgid * sizeof(*ids));
		size_t n = 0;
		rc = ids ? 0 : -ENOMEM;
		for (uint64_t id = 2; rc == 0 && id < db->durable.hwm_pgid; id++)
			if (!(seen[id / 8] & (1u << (id % 8))))
				ids[n++] = id;
		if (rc == 0)
			rc = freelist_put_free(&db->fl, ids, n);
		stored_free(ids);
		stored_free(seen);
		db->durable_fl_pgid = PAGE_NO_FREELIST;
		db->durable_fl_pages = 0;
		return rc < 0 ? bt_error(rc, "stored: out of memory") : 0;
	}

	uint64_t fl = meta->freelist;
	const uint8_t *p = m->base + fl * m->page_size;
	uint64_t overflow = page_overflow(p);
	if (page_flags(p) != PAGE_FLAG_FREELIST)
		return bt_corrupt(m, fl, "has invalid flags 0x%04x where the freelist belongs",
				  page_flags(p));
	if (page_id(p) != fl)
		return bt_corrupt(m, fl, "has id %llu in its header", (unsigned long long)page_id(p));
	if (overflow >= meta->pgid - fl)
		return bt_corrupt(m, fl, "is a freelist with %llu overflow pages, past the high-water mark",
				  (unsigned long long)overflow);
	uint64_t *ids;
	size_t n;
	rc = freelist_decode(p, (overflow + 1) * m->page_size, meta->pgid, &ids, &n, why,
			     sizeof(why));
	if (rc == -EUCLEAN)
		return bt_corrupt(m, fl, "is a freelist that %s", why);
	if (rc < 0)
		return bt_error(rc, "stored: out of memory");
	for (size_t i = 0; i < n; i++) {
		if (ids[i] >= fl && ids[i] <= fl + overflow) {
			stored_free(ids);
			return bt_corrupt(m, fl, "is a freelist that lists itself");
		}
	}
	rc = freelist_put_free(&db->fl, ids, n);
	stored_free(ids);
	if (rc < 0)
		return bt_error(rc, "stored: out of memory");
	db->durable_fl_pgid = fl;
	db->durable_fl_pages = overflow + 1;
	return 0;
}

static int db_open_io(const struct btree_db_opts *o, int fd, struct diskio **io)
{
	if (o->io_open)
		return o->io_open(fd, o->io_open_arg, io);
	return diskio_open_auto(fd, "the db", io);
}

/* Readers that predate this open may read any state published before
 * it (resume): pages past the durable high-water mark, and pages the
 * freelist page lists as free (it lists pending pages too). */
static int db_resume(struct btree_db *db, const struct btree_root *resume)
{
	if (!resume->txid)
		return 0;
	if (resume->txid > db->cur.txid)
		db->cur.txid = resume->txid;
	db->reuse_blocked = true;
	db->resume_txid = resume->txid;
	if (resume->hwm_pgid <= db->cur.hwm_pgid)
		return 0;
	if (resume->hwm_pgid > db->map.map_size / db->map.page_size)
		return bt_error(-ENOSPC, "stored: db %s: resumed high-water mark %llu lies past the map size",
				db->map.path, (unsigned long long)resume->hwm_pgid);
	int rc = freelist_put_free_run(&db->fl, db->cur.hwm_pgid,
				       resume->hwm_pgid - db->cur.hwm_pgid);
	if (rc < 0)
		return bt_error(rc, "stored: db %s: a free page is listed twice; the file is corrupt, restore from a snapshot",
				db->map.path);
	db->cur.hwm_pgid = resume->hwm_pgid;
	return 0;
}

int btree_db_open(const char *path, const struct btree_db_opts *o, struct btree_db **out)
{
	static const struct btree_db_opts defaults;
	struct db_meta_pick pick;
	uint64_t size = 0;
	int rc;
	if (!o)
		o = &defaults;

	struct btree_db *db = stored_calloc(1, sizeof(*db));
	if (!db)
		return bt_error(-ENOMEM, "stored: out of memory");
	freelist_init(&db->fl);
	pgmap_init(&db->born);
	pthread_mutex_init(&db->readers_lock, NULL);
	arena_pool_init(&db->arena_pool, BT_ARENA_POOL_MAX);
	db->map.fd = -1;
	db->map.path = stored_strdup(path);
	if (!db->map.path) {
		rc = bt_error(-ENOMEM, "stored: out of memory");
		goto out_free_db;
	}
	int fd = open(path, O_RDWR | O_CLOEXEC | (o->create ? O_CREAT : 0), 0600);
	if (fd < 0) {
		rc = bt_error(-errno, "stored: db %s: open: %s", path, strerror(errno));
		goto out_free_db;
	}
	db->map.fd = fd;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK
			     ? bt_error(-EBUSY, "stored: db %s: another process has it open for writing", path)
			     : bt_error(-errno, "stored: db %s: flock: %s", path, strerror(errno));
		goto out_free_db;
	}
	rc = db_open_io(o, fd, &db->io);
	if (rc < 0) {
		rc = bt_error(rc, "stored: db %s: opening its I/O backend: %s", path, strerror(-rc));
		goto out_free_db;
	}
	/* A live db's pages are rewritten one here and one there (a leaf
	 * copied into a page freed elsewhere): written a page at a time,
	 * its page cache stays in folios of a page, each of which such a
	 * write dirties alone (diskio_set_separate_writes). A scratch file
	 * (a defragmentation's copy) is written front to back once, in
	 * runs. */
	diskio_set_separate_writes(db->io, !o->scratch);

	rc = bt_db_fstat_size(path, fd, &size);
	if (rc < 0)
		goto out_free_db;
	if (size == 0) {
		long os_ps = sysconf(_SC_PAGESIZE);
		uint32_t ps = o->page_size ? o->page_size : (uint32_t)os_ps;
		if (!page_size_valid(ps)) {
			rc = bt_error(-EINVAL, "stored: db %s: page size %u is not a power of two in [%u, %u]",
				      path, ps, PAGE_MIN_SIZE, PAGE_MAX_SIZE);
			goto out_free_db;
		}
		rc = db_init_file(path, db->io, ps, !o->scratch);
		if (rc == 0 && !o->scratch)
			rc = db_sync_dir(path);
		if (rc < 0)
			goto out_free_db;
	}

	rc = bt_db_pick_meta(path, fd, &pick);
	if (rc < 0)
		goto out_free_db;
	rc = bt_map_init(&db->map, path, fd, o->map_size, pick.page_size, pick.file_size,
			 !o->no_populate);
	if (rc < 0)
		goto out_free_db;
	db->durable.root_pgid = pick.meta.root;
	db->durable.txid = pick.meta.txid;
	db->durable.hwm_pgid = pick.meta.pgid;
	db->durable_slot = pick.slot;
	db->cur = db->durable;
	db->root_sequence = pick.meta.sequence;
	db->oldest_reader = o->oldest_reader;
	db->oldest_reader_arg = o->oldest_reader_arg;
	rc = db_load_freelist(db, &pick.meta);
	if (rc < 0)
		goto out_free_db;

	rc = db_resume(db, &o->resume);
	if (rc < 0)
		goto out_free_db;
	/* Without a thread of its own, a commit writes its pages itself. */
	if (db->io->ops->concurrent_writes && pagewrite_start(db->io, &db->pagewrite) < 0)
		db->pagewrite = NULL;
	*out = db;
	return 0;

out_free_db:
	btree_db_close(db);
	return rc;
}

static void ckpt_free(struct bt_ckpt *ck);

void btree_db_close(struct btree_db *db)
{
	if (!db)
		return;
	if (db->ck.inflight && db->io)
		(void)btree_db_checkpoint_poll(db, true, NULL);
	ckpt_free(&db->ck);
	pagewrite_stop(db->pagewrite);
	diskio_close(db->io);
	/* The writer's lock goes now, not with the last reference to the
	 * file: an io_uring instance is torn down after its close returns
	 * and holds the file until then, and a writer that opens the db
	 * right after this one closed it (a tool run after another, a
	 * restarted stored) would find it still locked. */
	if (db->map.fd >= 0)
		(void)flock(db->map.fd, LOCK_UN);
	bt_map_release(&db->map);
	freelist_destroy(&db->fl);
	pgmap_free(&db->born);
	for (size_t i = 0; i < db->npool; i++)
		stored_free(db->page_pool[i]);
	stored_free(db->page_pool);
	arena_pool_destroy(&db->arena_pool);
	stored_free(db->local_readers);
	stored_free(db->obs_name);
	stored_free(db->warm_key);
	pthread_mutex_destroy(&db->readers_lock);
	stored_free(db);
}

int btree_db_resume(struct btree_db *db, const struct btree_root *resume,
		    uint64_t (*oldest_reader)(void *arg), void *arg)
{
	if (db->writing || db->ck.inflight)
		return bt_error(-EBUSY, "stored: db %s: resumed during a write txn or a checkpoint",
				db->map.path);
	db->oldest_reader = oldest_reader;
	db->oldest_reader_arg = arg;
	return db_resume(db, resume);
}

void btree_db_current(const struct btree_db *db, struct btree_root *out)
{
	*out = db->cur;
}

void btree_db_durable(const struct btree_db *db, struct btree_root *out)
{
	*out = db->durable;
}

int btree_db_observe(struct btree_db *db, const void *bucket_name, size_t len,
		     const struct btree_observer *o)
{
	uint8_t *name = NULL;

	if (o) {
		if (len == 0)
			return bt_error(-EINVAL, "stored: an observed bucket needs a name");
		name = stored_malloc(len);
		if (!name)
			return bt_error(-ENOMEM, "stored: out of memory");
		memcpy(name, bucket_name, len);
	}
	stored_free(db->obs_name);
	db->obs_name = name;
	db->obs_name_len = o ? len : 0;
	memset(&db->obs, 0, sizeof(db->obs));
	if (o)
		db->obs = *o;
	db->warm_len = 0;
	db->warm_done = false;
	return 0;
}

int btree_db_set_path(struct btree_db *db, const char *path)
{
	char *p = stored_strdup(path);

	if (!p)
		return bt_error(-ENOMEM, "stored: out of memory");
	stored_free(db->map.path);
	db->map.path = p;
	return 0;
}

void btree_db_track(struct btree_db *db, const struct btree_tracker *t)
{
	memset(&db->track, 0, sizeof(db->track));
	if (t)
		db->track = *t;
}

void bt_track(struct btree_bucket *b, const void *key, size_t key_len, bool child)
{
	struct btree_db *db = b->txn->db;

	if (!db || !db->track.wrote || !b->txn->writable)
		return;
	if (b->depth == 0) {
		/* a bucket of the file itself: created or deleted */
		if (child)
			db->track.wrote(db->track.arg, key, key_len, NULL, 0);
		return;
	}
	struct btree_bucket *top = b;
	while (top->depth > 1)
		top = top->parent;
	if (top == b && !child)
		db->track.wrote(db->track.arg, b->name, b->name_len, key, key_len);
	else
		db->track.wrote(db->track.arg, top->name, top->name_len, NULL, 0);
}

void bt_db_observe_reset(struct btree_db *db)
{
	if (db->obs.reset)
		db->obs.reset(db->obs.arg);
	db->warm_len = 0;
	db->warm_done = false;
}

/* Keeps key as the place where warming resumes. */
static int warm_remember(struct btree_db *db, const uint8_t *key, size_t len)
{
	if (len > db->warm_cap) {
		uint8_t *k = stored_realloc(db->warm_key, len);
		if (!k)
			return bt_error(-ENOMEM, "stored: out of memory");
		db->warm_key = k;
		db->warm_cap = len;
	}
	memcpy(db->warm_key, key, len);
	db->warm_len = len;
	return 0;
}

int btree_db_observe_warm(struct btree_db *db, size_t max, bool *done)
{
	struct btree_placed e[BTREE_PLACED_MAX];
	struct btree_txn *t;
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	uint64_t pgid = 0;
	size_t k = 0;
	int rc;

	*done = true;
	if (!db->obs_name || !db->obs.placed || db->warm_done)
		return 0;
	if (db->writing)
		return bt_error(-EBUSY, "stored: warming an observer during a write txn");
	rc = btree_db_read_begin(db, NULL, &t);
	if (rc)
		return rc;
	rc = btree_bucket_open(t, NULL, db->obs_name, db->obs_name_len, &b);
	if (rc == -ENOENT || rc == -ENOTDIR || (rc == 0 && b->root == 0)) {
		db->warm_done = true;  /* nothing with pages to tell of */
		rc = 0;
		goto out_end;
	}
	if (rc)
		goto out_end;
	btree_cursor_init(&c, b);
	rc = db->warm_len ? btree_cursor_seek(&c, db->warm_key, db->warm_len, &kv)
			  : btree_cursor_first(&c, &kv);
	for (size_t n = 0; rc == 0 && n < max; n++) {
		const struct btree_cursor_frame *f = &c.stack[c.depth - 1];
		if (k && (f->pgid != pgid || k == BTREE_PLACED_MAX)) {
			db->obs.placed(db->obs.arg, pgid, t->txid, e, k);
			k = 0;
		}
		pgid = f->pgid;
		if (f->page && !(kv.flags & BTREE_KV_BUCKET))
			e[k++] = (struct btree_placed){ kv.key, kv.val, (uint32_t)kv.key_len,
							f->index, (uint32_t)(kv.key - f->page),
							(uint32_t)kv.val_len, false };
		rc = btree_cursor_next(&c, &kv);
	}
	if (k)
		db->obs.placed(db->obs.arg, pgid, t->txid, e, k);
	if (db->obs.flush)
		db->obs.flush(db->obs.arg);
	if (rc == -ENOENT) {
		db->warm_done = true;
		rc = 0;
	} else if (rc == 0) {
		rc = warm_remember(db, kv.key, kv.key_len);
		*done = false;
	}
out_end:
	btree_txn_end(t);
	return rc;
}

void btree_db_unblock_reuse(struct btree_db *db)
{
	db->reuse_blocked = false;
}

int btree_db_dup_fd(const struct btree_db *db)
{
	int fd = fcntl(db->map.fd, F_DUPFD_CLOEXEC, 0);

	return fd < 0 ? -errno : fd;
}

void btree_db_stats(const struct btree_db *db, struct btree_db_stats *out)
{
	out->page_size = db->map.page_size;
	out->hwm_pgid = db->cur.hwm_pgid;
	out->free_pages = db->fl.nfree;
	out->pending_pages = freelist_waiting(&db->fl);
	out->file_bytes = atomic_load(&db->map.file_size);
	out->commits = db->commits;
	out->checkpoints = db->checkpoints;
	out->young_freed = db->young_freed;
	out->io_backend = diskio_name(db->io);
}

/* Marks the db failed after an I/O error the caller cannot undo. */
static int db_fail(struct btree_db *db, int rc, const char *what)
{
	db->failed = true;
	return bt_error(rc, "stored: db %s: %s failed: %s; the db must be reopened",
			db->map.path, what, strerror(-rc));
}

/* Prepares the checkpoint of db->cur into db->ck: releases pages, takes
 * the freelist page, encodes it and the meta page, grows the file. */
static int ckpt_prepare(struct btree_db *db)
{
	struct bt_map *m = &db->map;
	struct bt_ckpt *ck = &db->ck;
	uint32_t ps = m->page_size;
	int rc;

	/* bbolt keeps meta txid T in page T % 2: write the other slot with a
	 * txid of its parity. */
	unsigned slot = 1 - db->durable_slot;
	uint64_t txid = db->cur.txid;
	if (txid % 2 != slot)
		txid++;

	uint64_t oldest = bt_db_oldest_reader(db);
	rc = freelist_release(&db->fl, db->durable.txid < oldest ? db->durable.txid : oldest,
			      oldest);
	if (rc < 0)
		return db_fail(db, rc, "releasing free pages");
	/* This checkpoint's tree is fixed: a page committed so far is in it
	 * unless freed already, so only later births may go young. */
	pgmap_free(&db->born);
	if (db->durable_fl_pgid != PAGE_NO_FREELIST) {
		rc = freelist_add_pending(&db->fl, txid, db->durable_fl_pgid, db->durable_fl_pages);
		if (rc < 0)
			return db_fail(db, rc, "recording the old freelist page");
	}

	/* Room for the list; taking pages from the free set only shrinks it. */
	uint64_t npages = (freelist_page_bytes(freelist_count(&db->fl)) + ps - 1) / ps;
	uint64_t fl_pgid;
	uint64_t hwm = db->cur.hwm_pgid;
	if (db->reuse_blocked || freelist_alloc(&db->fl, npages, &fl_pgid) < 0) {
		fl_pgid = hwm;
		if (npages > m->map_size / ps - hwm)
			return db_fail(db, -ENOSPC, "allocating the freelist page");
		hwm += npages;
	}
	ck->fl_buf = stored_calloc(npages, ps);
	ck->meta_page = stored_malloc(ps);
	if (!ck->fl_buf || !ck->meta_page)
		return db_fail(db, -ENOMEM, "checkpoint");
	rc = freelist_encode(&db->fl, ck->fl_buf, npages * ps, fl_pgid, (uint32_t)(npages - 1));
	if (rc < 0)
		return db_fail(db, rc, "encoding the freelist");
	rc = bt_db_grow(db, hwm);
	if (rc < 0)
		return db_fail(db, rc, "growing the file");
	struct page_meta meta = {
		.magic = PAGE_MAGIC,
		.version = PAGE_VERSION,
		.page_size = ps,
		.root = db->cur.root_pgid,
		.sequence = db->root_sequence,
		.freelist = fl_pgid,
		.pgid = hwm,
		.txid = txid,
	};
	page_meta_encode(ck->meta_page, ps, slot, &meta);
	ck->w[0] = (struct diskio_write){ ck->fl_buf, npages * ps, fl_pgid * ps };
	ck->w[1] = (struct diskio_write){ ck->meta_page, ps, (uint64_t)slot * ps };
	ck->slot = slot;
	ck->fl_pgid = fl_pgid;
	ck->fl_pages = npages;

	/* The commits after this one build on the checkpointed triple. */
	db->cur.txid = txid;
	db->cur.hwm_pgid = hwm;
	ck->state = db->cur;
	return 0;
}

static void ckpt_free(struct bt_ckpt *ck)
{
	stored_free(ck->fl_buf);
	stored_free(ck->meta_page);
	ck->fl_buf = ck->meta_page = NULL;
	ck->inflight = false;
}

/* Writes the prepared checkpoint synchronously: the freelist page and a
 * sync, then the meta page and a sync. */
static int ckpt_write(struct btree_db *db)
{
	struct bt_ckpt *ck = &db->ck;
	int rc = diskio_write_batch(db->io, &ck->w[0], 1, true);
	if (rc < 0)
		return db_fail(db, rc, "writing and syncing the freelist");
	rc = diskio_write_batch(db->io, &ck->w[1], 1, true);
	if (rc < 0)
		return db_fail(db, rc, "writing and syncing the meta page");
	return 0;
}

/* The prepared checkpoint is on disk: it is the durable state now. */
static void ckpt_done(struct btree_db *db)
{
	struct bt_ckpt *ck = &db->ck;
	db->durable = ck->state;
	db->durable_slot = ck->slot;
	db->durable_fl_pgid = ck->fl_pgid;
	db->durable_fl_pages = ck->fl_pages;
	db->checkpoints++;
	ckpt_free(ck);
}

static bool ckpt_needed(const struct btree_db *db)
{
	return db->cur.txid != db->durable.txid || db->cur.root_pgid != db->durable.root_pgid ||
	       db->cur.hwm_pgid != db->durable.hwm_pgid;
}

static int ckpt_usable(struct btree_db *db)
{
	int rc = bt_db_usable(db);

	if (rc)
		return rc;
	if (db->writing)
		return bt_error(-EBUSY, "stored: db %s: checkpoint while a write txn is open",
				db->map.path);
	return 0;
}

int btree_db_checkpoint_poll(struct btree_db *db, bool wait, bool *done)
{
	struct bt_ckpt *ck = &db->ck;
	bool ended = true;
	if (!ck->inflight) {
		if (done)
			*done = true;
		return 0;
	}
	int rc = diskio_chain_reap(db->io, wait);
	ended = rc != -EINPROGRESS;
	if (done)
		*done = ended;
	if (!ended)
		return 0;
	if (rc < 0) {
		/* Never written again: after a failed fdatasync the kernel may
		 * have dropped the dirty pages of this chain and of the commits
		 * before it, so a later sync that succeeds proves nothing. The
		 * db is failed; its owner restarts from the durable meta. */
		ckpt_free(ck);
		return db_fail(db, rc, "writing and syncing the checkpoint");
	}
	ckpt_done(db);
	return 0;
}

int btree_db_checkpoint_begin(struct btree_db *db, bool *started)
{
	*started = false;
	int rc = ckpt_usable(db);
	if (rc < 0)
		return rc;
	if (db->ck.inflight)
		return bt_error(-EBUSY, "stored: db %s: a checkpoint is still being written",
				db->map.path);
	if (!ckpt_needed(db))
		return 0;
	rc = ckpt_prepare(db);
	if (rc < 0) {
		ckpt_free(&db->ck);
		return rc;
	}
	*started = true;
	rc = diskio_chain_submit(db->io, db->ck.w, 2);
	if (rc == 0) {
		db->ck.inflight = true;
		return 0;
	}
	if (rc == -EOPNOTSUPP)  /* no background chain here: write it now */
		rc = ckpt_write(db);
	else
		rc = db_fail(db, rc, "starting the checkpoint chain");
	if (rc < 0) {
		ckpt_free(&db->ck);
		return rc;
	}
	ckpt_done(db);
	return 0;
}

int btree_db_checkpoint(struct btree_db *db, struct btree_root *out)
{
	int rc = ckpt_usable(db);
	if (rc < 0)
		return rc;
	rc = btree_db_checkpoint_poll(db, true, NULL);
	if (rc < 0)
		return rc;
	if (ckpt_needed(db)) {
		bool started;
		rc = btree_db_checkpoint_begin(db, &started);
		if (rc == 0)
			rc = btree_db_checkpoint_poll(db, true, NULL);
		if (rc < 0)
			return rc;
	}
	if (out)
		*out = db->cur;
	return 0;
}

int btree_db_check(struct btree_db *db)
{
	struct btree_txn *t;
	/* A checkpoint being written holds a freelist page outside the count. */
	int rc = btree_db_checkpoint_poll(db, true, NULL);
	if (rc < 0)
		return rc;
	rc = bt_txn_begin_read(&db->map, NULL, &db->cur, &t);
	if (rc < 0)
		return rc;
	uint64_t nfree = freelist_count(&db->fl);
	size_t nused = 2 + (db->durable_fl_pgid == PAGE_NO_FREELIST ? 0 : db->durable_fl_pages);
	uint64_t *ids = stored_malloc((nfree ? nfree : 1) * sizeof(*ids));
	uint64_t *used = stored_malloc(nused * sizeof(*used));
	if (!ids || !used) {
		rc = bt_error(-ENOMEM, "stored: out of memory");
		goto out_free;
	}
	size_t k = 0;
	for (size_t i = 0; i < db->fl.nfree; i++)
		ids[k++] = db->fl.free[i];
	freelist_list_waiting(&db->fl, ids, &k);
	used[0] = 0;
	used[1] = 1;
	for (size_t i = 2; i < nused; i++)
		used[i] = db->durable_fl_pgid + (i - 2);
	struct bt_check_opts o = {
		.pre_used = used,
		.npre_used = nused,
		.free_ids = ids,
		.nfree = k,
		.account_all = true,
	};
	rc = bt_check_txn(t, &o);
out_free:
	stored_free(ids);
	stored_free(used);
	btree_txn_end(t);
	return rc;
}

bool btree_db_checkpoint_busy(const struct btree_db *db)
{
	return db->ck.inflight;
}
