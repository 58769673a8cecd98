/* Reads from the db in gatewayd (see server.h): a read-only mapping of
 * <data-dir>/member/snap/db opened once (again when stored replaces the
 * file: a new db generation), and read txns at the root stored published,
 * registered in the reader table for their duration so stored keeps
 * their pages (invariant 3, docs/invariants.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gatewayd/server.h"
#include "base/log/log.h"
#include "base/log/errmsg.h"
#include "shm/readers.h"
#include "shm/region.h"
#include "stored/btree/btree.h"
#include "stored/btree/page.h"

/* The page size a db file's first meta page records, 0 if unreadable. */
static uint32_t gw_db_page_size(const char *path)
{
	uint8_t page[PAGE_HDR_SIZE + PAGE_META_SIZE];
	struct page_meta m;
	uint32_t size = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	if (pread(fd, page, sizeof(page), 0) == (ssize_t)sizeof(page)) {
		page_meta_decode(page, &m);
		if (m.magic == PAGE_MAGIC && page_size_valid(m.page_size))
			size = m.page_size;
	}
	close(fd);
	return size;
}

static void gw_db_unmap(struct gw_server *s)
{
	btree_reader_close(s->db);
	s->db = NULL;
}

void gw_db_close(struct gw_server *s)
{
	gw_db_unmap(s);
	if (s->reader_claimed) {
		readers_release(s->r, s->reader_index);
		s->reader_claimed = false;
	}
}

/* Attaches stored's latest-entry cache once stored has laid it out. */
static void gw_cache_attach(struct gw_server *s)
{
	size_t bytes;
	void *area;

	if (s->cache_attached)
		return;
	area = shm_cache_area(s->r, &bytes);
	if (area && lcache_attach(&s->cache, area, bytes) == 0)
		s->cache_attached = true;
}

/* Whether db, just opened at the db's path, is the file the root st
 * registered is in: the one of its inode (a defragmented db is renamed
 * over the path before its root is published), and of an unchanged
 * generation (an installed one is renamed after its generation is
 * bumped). Not: the file was replaced meanwhile; open it again. */
static bool gw_db_is_published(struct gw_server *s, const struct btree_reader *db,
			       const struct status_stored *st)
{
	struct status_stored now;

	return status_stored_read(s->r, &now) == 0 && now.db_generation == st->db_generation &&
	       (!st->db_ino || btree_reader_ino(db) == st->db_ino);
}

/* One try of gw_read_begin; -ESTALE when the file opened is not the one
 * the registered root is in (replaced meanwhile: try again). */
static int gw_read_try(struct gw_server *s, struct gw_read *rd)
{
	struct btree_reader *old = NULL;
	int rc;

	rd->txn = NULL;
	rd->cache = NULL;
	if (!s->reader_claimed) {
		rc = readers_claim(s->r, &s->reader_index);
		if (rc)
			return rc;
		s->reader_claimed = true;
	}
	rc = readers_begin(s->r, s->reader_index, &rd->st);
	if (rc)
		return rc;
	if (rd->st.root_page == 0) {
		rc = -EAGAIN; /* stored has published nothing yet */
		goto out_end;
	}
	if (s->db && s->db_generation != rd->st.db_generation) {
		/* a new file: move over now that no txn is open. The old one
		 * (unlinked: let go of on a thread, btree.h) goes once the new
		 * one is mapped, so that this loop's mmap does not wait for
		 * that thread's munmap: both take the process's mmap lock */
		old = s->db;
		s->db = NULL;
		s->db_mapped_before = true;
	}
	if (!s->db) {
		/* The first mapping is filled at once, so that reads take no
		 * page faults; one that replaces it (a defragmented or installed
		 * db) fills as it is read, so that moving over does not hold
		 * this loop for the time it takes to fault a large file in. */
		const struct btree_reader_opts ro = { .no_populate = s->db_mapped_before };
		rc = btree_reader_open(s->db_path, &ro, &s->db);
		if (rc) {
			log_warn("cannot map the db for reading", LOG_STR("path", s->db_path),
				 LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
			s->db = NULL;
			goto out_end;
		}
		if (!gw_db_is_published(s, s->db, &rd->st)) {
			gw_db_unmap(s);
			rc = -ESTALE;
			goto out_end;
		}
		s->db_generation = rd->st.db_generation;
		s->db_page_size = gw_db_page_size(s->db_path);
	}
	btree_reader_close(old);
	old = NULL;
	struct btree_root root = {
		.root_pgid = rd->st.root_page,
		.txid = rd->st.txid,
		.hwm_pgid = rd->st.high_water_page,
	};
	rc = btree_reader_begin(s->db, &root, &rd->txn);
	if (rc) {
		log_warn("cannot begin a read at the published root",
			 LOG_STR("reason", errmsg_get(rc)), LOG_U64("root", root.root_pgid),
			 LOG_U64("txid", root.txid), LOG_ERRNO(rc));
		rd->txn = NULL;
		goto out_end;
	}
	gw_cache_attach(s);
	if (s->cache_attached)
		rd->cache = &s->cache;
	return 0;

out_end:
	btree_reader_close(old);
	readers_end(s->r, s->reader_index);
	return rc;
}

int gw_read_begin(struct gw_server *s, struct gw_read *rd)
{
	int rc = -ESTALE;

	/* a file replaced between the registration and the open is published
	 * at once after its rename: the next try finds it */
	for (int i = 0; i < 4 && rc == -ESTALE; i++)
		rc = gw_read_try(s, rd);
	return rc == -ESTALE ? -EAGAIN : rc;
}

void gw_read_end(struct gw_server *s, struct gw_read *rd)
{
	btree_txn_end(rd->txn);
	rd->txn = NULL;
	readers_end(s->r, s->reader_index);
}

int gw_pin_begin(struct gw_server *s, struct gw_pin *p, bool populate)
{
	const struct btree_reader_opts ro = { .no_populate = !populate };
	int rc;

	if (!p->claimed) {
		rc = readers_claim(s->r, &p->reader_index);
		if (rc)
			return rc;
		p->claimed = true;
	}
	rc = readers_begin(s->r, p->reader_index, &p->st);
	if (rc)
		return rc;
	p->reading = true;
	if (p->st.root_page == 0)
		return -EAGAIN;
	rc = btree_reader_open(s->db_path, &ro, &p->db);
	if (rc) {
		p->db = NULL;
		return rc;
	}
	if (!gw_db_is_published(s, p->db, &p->st))
		return -ESTALE;
	struct btree_root root = {
		.root_pgid = p->st.root_page,
		.txid = p->st.txid,
		.hwm_pgid = p->st.high_water_page,
	};
	rc = btree_reader_begin(p->db, &root, &p->txn);
	if (rc) {
		p->txn = NULL;
		return rc;
	}
	rc = mvcc_view_open(p->txn, &p->v);
	p->view_open = rc == 0;
	return rc;
}

void gw_pin_end(struct gw_server *s, struct gw_pin *p)
{
	if (p->view_open)
		mvcc_view_close(&p->v);
	p->view_open = false;
	btree_txn_end(p->txn);
	p->txn = NULL;
	if (p->reading)
		readers_end(s->r, p->reader_index);
	p->reading = false;
	btree_reader_close(p->db);
	p->db = NULL;
}

void gw_pin_release(struct gw_server *s, struct gw_pin *p)
{
	gw_pin_end(s, p);
	if (p->claimed)
		readers_release(s->r, p->reader_index);
	p->claimed = false;
}

void gw_read_refuse(struct gw_server *s, struct grpc_call *call, int rc)
{
	(void)s;
	if (rc == -EAGAIN || rc == -ENOENT || rc == -ENOMEM || rc == -ENOSPC)
		grpc_call_finish(call, GRPC_STATUS_UNAVAILABLE, "etcdserver: not capable");
	else
		grpc_call_finish(call, GRPC_STATUS_INTERNAL, errmsg_get(rc));
}

int64_t gw_db_high_water_bytes(struct gw_server *s, const struct status_stored *st)
{
	if (s->db_page_size == 0)
		s->db_page_size = gw_db_page_size(s->db_path);
	/* pages up to the high-water mark are in use or free; free ones are not
	 * known here, so this is an upper bound of etcd's figure */
	return (int64_t)(st->high_water_page * s->db_page_size);
}

void gw_db_sizes(struct gw_server *s, const struct status_stored *st, int64_t *size,
		 int64_t *in_use)
{
	struct stat sb;
	int64_t file = stat(s->db_path, &sb) == 0 ? (int64_t)sb.st_size : 0;
	int64_t high = gw_db_high_water_bytes(s, st);

	/* etcd's Size(): bbolt's Tx.Size(), the pages up to the high-water
	 * mark, not the file, which grows ahead of them (capped at the file,
	 * which a read of an older status may find shorter) */
	*size = high < file ? high : file;
	/* etcd's SizeInUse: the high-water mark's pages less the free ones */
	*in_use = high - (int64_t)(st->free_pages * s->db_page_size);
	if (*in_use > *size)
		*in_use = *size;
	if (*in_use < 0)
		*in_use = 0;
}
