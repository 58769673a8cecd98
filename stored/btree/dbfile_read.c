/*
 * The db file, the half that reads: choosing the current meta page,
 * mapping the file read-only, and the read-only handle that readers in
 * other processes use, with its check. Creating, growing and
 * checkpointing the file, and the writer's db, are dbfile.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/thread/thread.h"
#include "stored/alloc.h"
#include "stored/btree/btree_int.h"

#define DB_META_PROBE (2u * PAGE_MAX_SIZE)

int bt_db_fstat_size(const char *path, int fd, uint64_t *size)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return bt_error(-errno, "stored: db %s: fstat: %s", path, strerror(errno));
	*size = (uint64_t)st.st_size;
	return 0;
}

/*
 * Finds the page size and the current meta of the file open at fd: the
 * newest meta page that verifies, whose state lies inside the file.
 */
int bt_db_pick_meta(const char *path, int fd, struct db_meta_pick *out)
{
	uint64_t size = 0;
	int rc = bt_db_fstat_size(path, fd, &size);
	if (rc < 0)
		return rc;
	size_t probe = size < DB_META_PROBE ? (size_t)size : DB_META_PROBE;
	uint8_t *buf = stored_calloc(1, DB_META_PROBE);
	if (!buf)
		return bt_error(-ENOMEM, "stored: out of memory");
	rc = diskio_pread_all(fd, buf, probe, 0);
	if (rc < 0) {
		rc = bt_error(rc, "stored: db %s: reading the meta pages: %s", path, strerror(-rc));
		goto out_free;
	}
	/* The size again, now that the metas are read: a writer extends the
	 * file with a commit's pages before it writes the meta naming them,
	 * and never shrinks it, so the size seen after a meta was read holds
	 * every page it names. The size seen before may not (a reader that
	 * opens while a commit grows the file). */
	uint64_t size_after = 0;
	rc = bt_db_fstat_size(path, fd, &size_after);
	if (rc < 0)
		goto out_free;
	if (size_after > size)
		size = size_after;

	/* The page size: from meta 0, or from a valid meta 1 at some size. */
	char why0[128] = "is missing", why1[128] = "is missing";
	int rc0 = -EUCLEAN, rc1 = -EUCLEAN;
	uint32_t ps = 0;
	if (probe >= PAGE_HDR_SIZE + PAGE_META_SIZE) {
		rc0 = page_meta_verify(buf, why0, sizeof(why0));
		if (rc0 == 0)
			ps = page_ld32(buf + PAGE_HDR_SIZE + 8);
	}
	for (uint32_t cand = PAGE_MIN_SIZE; ps == 0 && cand <= PAGE_MAX_SIZE; cand *= 2) {
		char why[128];
		if (probe < (size_t)cand + PAGE_HDR_SIZE + PAGE_META_SIZE)
			break;
		if (page_meta_verify(buf + cand, why, sizeof(why)) == 0 &&
		    page_ld32(buf + cand + PAGE_HDR_SIZE + 8) == cand)
			ps = cand;
	}
	/* Both unverifiable: meta 0's magic may still tell the page size, so
	 * that both metas can be reported on. */
	if (ps == 0 && probe >= PAGE_HDR_SIZE + PAGE_META_SIZE &&
	    page_ld32(buf + PAGE_HDR_SIZE) == PAGE_MAGIC &&
	    page_size_valid(page_ld32(buf + PAGE_HDR_SIZE + 8)))
		ps = page_ld32(buf + PAGE_HDR_SIZE + 8);
	if (ps == 0) {
		rc = bt_error(rc0 == -EPROTO ? -EPROTO : -EUCLEAN,
			      "stored: db %s: no valid meta page (meta 0 %s); the file is not a bbolt db or is corrupt, restore from a snapshot",
			      path, why0);
		goto out_free;
	}
	if (size < 2ull * ps) {
		rc = bt_error(-EUCLEAN, "stored: db %s: the file has %llu bytes, less than two %u-byte meta pages; the file is truncated, restore from a snapshot",
			      path, (unsigned long long)size, ps);
		goto out_free;
	}

	struct page_meta m0, m1;
	rc0 = page_meta_verify(buf, why0, sizeof(why0));
	rc1 = page_meta_verify(buf + ps, why1, sizeof(why1));
	page_meta_decode(buf, &m0);
	page_meta_decode(buf + ps, &m1);
	if (rc0 == 0 && m0.page_size != ps) {
		rc0 = -EUCLEAN;
		snprintf(why0, sizeof(why0), "has page size %u, not %u", m0.page_size, ps);
	}
	if (rc1 == 0 && m1.page_size != ps) {
		rc1 = -EUCLEAN;
		snprintf(why1, sizeof(why1), "has page size %u, not %u", m1.page_size, ps);
	}
	unsigned slot;
	if (rc0 == 0 && rc1 == 0)
		slot = m1.txid > m0.txid ? 1 : 0;
	else if (rc0 == 0)
		slot = 0;
	else if (rc1 == 0)
		slot = 1;
	else {
		rc = bt_error(rc0 == -EPROTO || rc1 == -EPROTO ? -EPROTO : -EUCLEAN,
			      "stored: db %s: both meta pages are invalid (meta 0 %s, meta 1 %s); the file is corrupt, restore from a snapshot",
			      path, why0, why1);
		goto out_free;
	}
	struct page_meta *m = slot ? &m1 : &m0;
	if (m->pgid < 3 || m->pgid > size / ps) {
		rc = bt_error(-EUCLEAN, "stored: db %s: meta %u (txid %llu) has high-water mark %llu but the file holds %llu pages; the file is truncated or corrupt, restore from a snapshot",
			      path, slot, (unsigned long long)m->txid, (unsigned long long)m->pgid,
			      (unsigned long long)(size / ps));
		goto out_free;
	}
	if (m->root < 2 || m->root >= m->pgid ||
	    (m->freelist != PAGE_NO_FREELIST && (m->freelist < 2 || m->freelist >= m->pgid))) {
		rc = bt_error(-EUCLEAN, "stored: db %s: meta %u (txid %llu) points at root page %llu and freelist page %llu outside [2, %llu); the file is corrupt, restore from a snapshot",
			      path, slot, (unsigned long long)m->txid, (unsigned long long)m->root,
			      (unsigned long long)m->freelist, (unsigned long long)m->pgid);
		goto out_free;
	}
	out->page_size = ps;
	out->slot = slot;
	out->meta = *m;
	out->file_size = size;
	rc = 0;
out_free:
	stored_free(buf);
	return rc;
}

int bt_map_init(struct bt_map *m, const char *path, int fd, uint64_t map_size,
		uint32_t ps, uint64_t file_size, bool populate)
{
	if (map_size == 0)
		map_size = BTREE_DEFAULT_MAP_SIZE;
	map_size = (map_size + ps - 1) / ps * ps;
	if (file_size > map_size)
		return bt_error(-ENOSPC, "stored: db %s: the file (%llu bytes) is larger than the map size %llu",
				path, (unsigned long long)file_size, (unsigned long long)map_size);
	void *base = mmap(NULL, map_size, PROT_READ, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (base == MAP_FAILED)
		return bt_error(-errno, "stored: db %s: mapping %llu bytes: %s", path,
				(unsigned long long)map_size, strerror(errno));
	/* Fill the page tables for the file as it is now (as etcd maps bbolt
	 * with MAP_POPULATE), so that a long-lived reader does not take its
	 * first read of each page as a fault. Best effort: kernels before
	 * 5.14 refuse the advice, and a page that cannot be read now is read
	 * (and its error met) when it is used. */
	if (file_size && populate)
		(void)madvise(base, file_size, MADV_POPULATE_READ);
	m->fd = fd;
	m->base = base;
	m->map_size = map_size;
	m->page_size = ps;
	atomic_store(&m->file_size, file_size);
	return 0;
}

/* A mapping and its file, let go of on a thread of their own. */
struct bt_unmap {
	void *base;
	uint64_t map_size;
	int fd;
};

static _Atomic uint64_t bt_detached_releases;

static void bt_unmap_now(void *base, uint64_t map_size, int fd)
{
	if (base)
		munmap(base, map_size);
	if (fd >= 0)
		close(fd);
}

static void *bt_unmapper(void *arg)
{
	struct bt_unmap u = *(struct bt_unmap *)arg;

	free(arg);
	bt_unmap_now(u.base, u.map_size, u.fd);
	return NULL;
}

/*
 * A file that has been unlinked (another renamed over it: a defragmented
 * or installed db) is let go of on a detached thread: if this is its last
 * user, close(2) frees the file's page cache and its blocks, and munmap
 * tears down the page tables, in time that grows with the file (about
 * 0.25 s for a 600 MB db), which an event loop or stored's writer must
 * not wait for. Inline when the file is still linked or no thread can be
 * started.
 */
void bt_map_release(struct bt_map *m)
{
	struct stat sb;
	struct bt_unmap *u = NULL;

	/* libc's malloc, not stored_malloc: the thread frees it after the
	 * caller has gone on, past any count of live allocations it makes */
	if (m->fd >= 0 && fstat(m->fd, &sb) == 0 && sb.st_nlink == 0)
		u = malloc(sizeof(*u));
	if (u) {
		*u = (struct bt_unmap){ (void *)m->base, m->map_size, m->fd };
		if (shm_thread_offload(bt_unmapper, u))
			atomic_fetch_add(&bt_detached_releases, 1);
	} else {
		bt_unmap_now((void *)m->base, m->map_size, m->fd);
	}
	m->base = NULL;
	m->fd = -1;
	stored_free(m->path);
	m->path = NULL;
}

uint64_t btree_detached_releases(void)
{
	return atomic_load(&bt_detached_releases);
}

int bt_map_cover(struct bt_map *m, uint64_t pages)
{
	if (pages > m->map_size / m->page_size)
		return bt_error(-ENOSPC, "stored: db %s: high-water mark %llu lies past the map size %llu",
				m->path, (unsigned long long)pages, (unsigned long long)m->map_size);
	uint64_t need = pages * m->page_size;
	if (need <= atomic_load(&m->file_size))
		return 0;
	uint64_t size = 0;
	int rc = bt_db_fstat_size(m->path, m->fd, &size);
	if (rc < 0)
		return rc;
	if (size < need)
		return bt_error(-EUCLEAN, "stored: db %s: high-water mark %llu needs %llu bytes but the file has %llu; the file is truncated or was replaced",
				m->path, (unsigned long long)pages, (unsigned long long)need,
				(unsigned long long)size);
	uint64_t known = atomic_load(&m->file_size);
	while (known < size && !atomic_compare_exchange_weak(&m->file_size, &known, size))
		;
	return 0;
}

int btree_reader_open(const char *path, const struct btree_reader_opts *o,
		      struct btree_reader **out)
{
	struct db_meta_pick pick;
	int rc;
	struct btree_reader *r = stored_calloc(1, sizeof(*r));
	if (!r)
		return bt_error(-ENOMEM, "stored: out of memory");
	r->map.fd = -1;
	r->map.path = stored_strdup(path);
	if (!r->map.path) {
		rc = bt_error(-ENOMEM, "stored: out of memory");
		goto out_free_reader;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = bt_error(-errno, "stored: db %s: open: %s", path, strerror(errno));
		goto out_free_reader;
	}
	r->map.fd = fd;
	rc = bt_db_pick_meta(path, fd, &pick);
	if (rc < 0)
		goto out_free_reader;
	rc = bt_map_init(&r->map, path, fd, o ? o->map_size : 0, pick.page_size, pick.file_size,
		      !(o && o->no_populate));
	if (rc < 0)
		goto out_free_reader;
	*out = r;
	return 0;

out_free_reader:
	btree_reader_close(r);
	return rc;
}

uint64_t btree_reader_ino(const struct btree_reader *r)
{
	struct stat sb;

	return fstat(r->map.fd, &sb) == 0 ? (uint64_t)sb.st_ino : 0;
}

void btree_reader_forget(struct btree_reader *r)
{
	uint64_t len = atomic_load(&r->map.file_size);

	/* Best effort: advice on a read-only shared mapping loses nothing */
	if (len)
		(void)madvise((void *)r->map.base, len, MADV_DONTNEED);
}

void btree_reader_close(struct btree_reader *r)
{
	if (!r)
		return;
	bt_map_release(&r->map);
	stored_free(r);
}

int btree_reader_durable(struct btree_reader *r, struct btree_root *out)
{
	struct db_meta_pick pick;
	int rc = bt_db_pick_meta(r->map.path, r->map.fd, &pick);
	if (rc < 0)
		return rc;
	if (pick.page_size != r->map.page_size)
		return bt_error(-EUCLEAN, "stored: db %s: the page size changed from %u to %u under the mapping",
				r->map.path, r->map.page_size, pick.page_size);
	out->root_pgid = pick.meta.root;
	out->txid = pick.meta.txid;
	out->hwm_pgid = pick.meta.pgid;
	return 0;
}

int btree_reader_check(struct btree_reader *r)
{
	struct db_meta_pick pick;
	struct bt_map *m = &r->map;
	int rc = bt_db_pick_meta(m->path, m->fd, &pick);
	if (rc < 0)
		return rc;
	struct btree_root at = { pick.meta.root, pick.meta.txid, pick.meta.pgid };
	struct btree_txn *t;
	rc = bt_txn_begin_read(m, NULL, &at, &t);
	if (rc < 0)
		return rc;

	uint64_t *used = NULL, *ids = NULL;
	size_t nused = 2, nids = 0;
	struct bt_check_opts o = { 0 };
	uint64_t fl = pick.meta.freelist;
	if (fl != PAGE_NO_FREELIST) {
		const uint8_t *p = m->base + fl * m->page_size;
		uint64_t overflow = page_overflow(p);
		char why[160];
		if (page_flags(p) != PAGE_FLAG_FREELIST || page_id(p) != fl) {
			rc = bt_corrupt(m, fl, "has flags 0x%04x and id %llu where the freelist belongs",
					page_flags(p), (unsigned long long)page_id(p));
			goto out_end;
		}
		if (overflow >= at.hwm_pgid - fl) {
			rc = bt_corrupt(m, fl, "is a freelist with %llu overflow pages, past the high-water mark",
					(unsigned long long)overflow);
			goto out_end;
		}
		rc = freelist_decode(p, (overflow + 1) * m->page_size, at.hwm_pgid, &ids, &nids, why,
				     sizeof(why));
		if (rc == -EUCLEAN)
			rc = bt_corrupt(m, fl, "is a freelist that %s", why);
		if (rc < 0)
			goto out_end;
		nused = 2 + overflow + 1;
		used = stored_malloc(nused * sizeof(*used));
		if (!used) {
			rc = bt_error(-ENOMEM, "stored: out of memory");
			goto out_end;
		}
		for (uint64_t i = 0; i <= overflow; i++)
			used[2 + i] = fl + i;
		o.free_ids = ids;
		o.nfree = nids;
		o.account_all = true;
	} else {
		used = stored_malloc(nused * sizeof(*used));
		if (!used) {
			rc = bt_error(-ENOMEM, "stored: out of memory");
			goto out_end;
		}
	}
	used[0] = 0;
	used[1] = 1;
	o.pre_used = used;
	o.npre_used = nused;
	rc = bt_check_txn(t, &o);
out_end:
	stored_free(used);
	stored_free(ids);
	btree_txn_end(t);
	return rc;
}
