/*
 * A consistent db stream read beside stored (see dbsnap.h).
 *
 * The stream is what bbolt's Tx.WriteTo writes for a read txn: meta 0 at
 * the txn's txid and meta 1 at the txid before it, both naming the
 * published root and high-water mark, then the file's pages from page 2
 * up to the high-water mark as they are. The metas record no freelist
 * (PAGE_NO_FREELIST), as etcd 3.4's own files on Linux do (its backend
 * opens bbolt with NoFreelistSync): bbolt, etcd, etcdctl and stored then
 * take every page the tree does not reach as free. So the pages the
 * stream copies but the tree does not reach may be anything, and stored
 * may rewrite them while they are copied; the pages the tree reaches
 * stay as they were at the txid, because the reader entry holds that
 * txid until dbsnap_close.
 *
 * The file at db_path can be replaced. A snapshot install bumps
 * db_generation before it renames a new file over the path, and again
 * when it publishes the new file's root; a defragmentation renames its
 * copy over the path and then publishes the copy's root, generation and
 * inode. So a file opened after the reader registered belongs to the
 * registered record only if the generation has not moved since and its
 * inode is the record's; otherwise the open is retried.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "base/log/errmsg.h"
#include "shm/readers.h"
#include "shm/region.h"
#include "shm/status.h"
#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/dbsnap.h"
#include "stored/btree/page.h"
#include "stored/mvcc/revision.h"
#include "stored/mvcc/schema.h"

/* How often a file replaced under the open is tried again. */
#define DBSNAP_OPEN_TRIES 8

struct dbsnap {
	struct shm_region *r;
	uint32_t reader;          /* our entry in the reader table */
	struct btree_reader *db;  /* the file, as of the registered record */
	struct status_stored st;  /* the registered record */
	uint32_t page_size;
	uint64_t size;            /* high_water_page * page_size */
	uint64_t off;             /* next byte of the stream; off <= size */
	uint64_t index;           /* the copy's consistent index */
	uint8_t *metas;           /* the stream's two meta pages */
};

/* Threads of one process share its OFD locks, so two of them could take
 * the same reader entry at once: claims and releases of dbsnap streams go
 * one at a time. */
static pthread_mutex_t dbsnap_claim_lock = PTHREAD_MUTEX_INITIALIZER;

/* The consistent index in the meta bucket of the txn (0 when there is
 * none, as for a db that applied nothing). */
static int dbsnap_read_index(struct btree_txn *t, uint64_t *out)
{
	struct btree_bucket *meta;
	const uint8_t *v;
	size_t len;
	int rc;

	*out = 0;
	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_META, SCHEMA_LEN(SCHEMA_BUCKET_META), &meta);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rc = btree_get(meta, SCHEMA_META_CONSISTENT_INDEX, SCHEMA_LEN(SCHEMA_META_CONSISTENT_INDEX),
		       &v, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (len != 8)
		return errmsg_set(-EUCLEAN, "dbsnap: meta consistent_index is %zu bytes long, not 8",
				  len);
	*out = rev_get_be64(v);
	return 0;
}

/* Builds the two meta pages of the stream, as bbolt's WriteTo does. */
static void dbsnap_build_metas(struct dbsnap *s)
{
	struct page_meta m = {
		.magic = PAGE_MAGIC,
		.version = PAGE_VERSION,
		.page_size = s->page_size,
		.root = s->st.root_page,
		/* The top-level bucket's sequence: no bbolt API reaches it and
		 * stored never changes it, so it is 0 in every file. */
		.sequence = 0,
		.freelist = PAGE_NO_FREELIST,
		.pgid = s->st.high_water_page,
		.txid = s->st.txid,
	};
	page_meta_encode(s->metas, s->page_size, 0, &m);
	m.txid = m.txid ? m.txid - 1 : 0;
	page_meta_encode(s->metas + s->page_size, s->page_size, 1, &m);
}

/*
 * One try at registering and opening the file of the registered record.
 * -ESTALE when the file was replaced meanwhile (try again); -EAGAIN when
 * nothing is published.
 */
static int dbsnap_try_open(struct dbsnap *s, const char *db_path)
{
	struct status_stored now;
	struct btree_txn *t;
	int rc;

	rc = readers_begin(s->r, s->reader, &s->st);
	if (rc)
		return rc;
	if (s->st.root_page == 0) {
		rc = -EAGAIN;
		goto out_end;
	}
	const struct btree_reader_opts ro = { .no_populate = true };
	rc = btree_reader_open(db_path, &ro, &s->db);
	if (rc)
		goto out_end;
	if ((status_stored_read(s->r, &now) == 0 && now.db_generation != s->st.db_generation) ||
	    (s->st.db_ino && btree_reader_ino(s->db) != s->st.db_ino)) {
		rc = -ESTALE;
		goto out_close;
	}
	s->page_size = s->db->map.page_size;
	struct btree_root at = {
		.root_pgid = s->st.root_page,
		.txid = s->st.txid,
		.hwm_pgid = s->st.high_water_page,
	};
	rc = btree_reader_begin(s->db, &at, &t);
	if (rc)
		goto out_close;
	rc = dbsnap_read_index(t, &s->index);
	btree_txn_end(t);
	if (rc)
		goto out_close;
	return 0;

out_close:
	btree_reader_close(s->db);
	s->db = NULL;
out_end:
	readers_end(s->r, s->reader);
	return rc;
}

int dbsnap_open(struct shm_region *r, const char *db_path, struct dbsnap **out)
{
	struct dbsnap *s = stored_calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return errmsg_set(-ENOMEM, "dbsnap: out of memory");
	s->r = r;
	pthread_mutex_lock(&dbsnap_claim_lock);
	rc = readers_claim(r, &s->reader);
	pthread_mutex_unlock(&dbsnap_claim_lock);
	if (rc) {
		stored_free(s);
		return rc;
	}
	for (int i = 0;; i++) {
		rc = dbsnap_try_open(s, db_path);
		if (rc != -ESTALE)
			break;
		if (i + 1 == DBSNAP_OPEN_TRIES) {
			rc = errmsg_set(-EAGAIN, "dbsnap: db %s was replaced %d times while it was opened; try again",
					db_path, DBSNAP_OPEN_TRIES);
			break;
		}
	}
	if (rc)
		goto out_release;
	s->size = s->st.high_water_page * s->page_size;
	s->metas = stored_calloc(2, s->page_size);
	if (!s->metas) {
		rc = errmsg_set(-ENOMEM, "dbsnap: out of memory");
		goto out_release;
	}
	dbsnap_build_metas(s);
	*out = s;
	return 0;

out_release:
	dbsnap_close(s);
	return rc;
}

uint64_t dbsnap_size(const struct dbsnap *s)
{
	return s->size;
}

uint64_t dbsnap_index(const struct dbsnap *s)
{
	return s->index;
}

ssize_t dbsnap_read(struct dbsnap *s, void *buf, size_t len)
{
	uint8_t *p = buf;
	size_t done = 0;

	if (len > s->size - s->off)
		len = (size_t)(s->size - s->off);
	while (done < len && s->off < 2ull * s->page_size) {
		size_t n = (size_t)(2ull * s->page_size - s->off);
		if (n > len - done)
			n = len - done;
		memcpy(p + done, s->metas + s->off, n);
		done += n;
		s->off += n;
	}
	while (done < len) {
		ssize_t n = pread(s->db->map.fd, p + done, len - done, (off_t)s->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int rc = n < 0 ? -errno : -EIO;
			return errmsg_set(rc, "dbsnap: db %s: reading %zu bytes at offset %llu: %s",
					  s->db->map.path, len - done, (unsigned long long)s->off,
					  n < 0 ? strerror(-rc) : "the file ends there");
		}
		done += (size_t)n;
		s->off += (uint64_t)n;
	}
	return (ssize_t)done;
}

void dbsnap_close(struct dbsnap *s)
{
	if (!s)
		return;
	btree_reader_close(s->db);
	readers_end(s->r, s->reader);
	pthread_mutex_lock(&dbsnap_claim_lock);
	readers_release(s->r, s->reader);
	pthread_mutex_unlock(&dbsnap_claim_lock);
	stored_free(s->metas);
	stored_free(s);
}
