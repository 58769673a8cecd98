/*
 * Fuzz target: arbitrary bytes opened as a db file. They go into a memfd;
 * the reader side maps it, verifies it and walks every bucket (cursors both
 * ways, gets, seeks, nested buckets, entries read by their place); the writer side opens it, changes a
 * few keys, commits, checkpoints and verifies. Any error is fine; a crash,
 * a hang or a sanitizer report is a bug.
 *
 * dbfile_fuzz_one() returns the first error of the reader side (0 when the
 * file is a valid db), for tests that replay known-good inputs.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stored/btree/btree.h"

#define DBFILE_WALK_BUDGET 20000u  /* entries visited per input, against cycles */
#define DBFILE_MAP_SIZE (1ull << 30)

/* The entry under the cursor read by its place, as the latest-entry
 * cache reads it: found there, it is the cursor's own value; places a
 * little off (another element, page, offset or size, or far out) are
 * checked against the page and refused or read without a fault. */
static void dbfile_places(struct btree_bucket *b, const struct btree_cursor *c,
			  const struct btree_kv *kv)
{
	const struct btree_cursor_frame *f = &c->stack[c->depth - 1];
	const uint8_t *v;
	uint32_t vs;
	if (!f->page)
		return;
	uint32_t off = (uint32_t)(kv->key - f->page);
	if (btree_entry_at(b, f->pgid, f->index, off, kv->key, kv->key_len, &v, &vs) == 0 &&
	    (v != kv->val || vs != kv->val_len))
		abort();
	/* without the key's bytes (any key of its length), as the cache's
	 * places in the key bucket are read */
	if (btree_entry_at(b, f->pgid, f->index, off, NULL, kv->key_len, &v, &vs) == 0 &&
	    (v != kv->val || vs != kv->val_len))
		abort();
	const struct { uint64_t pgid; uint32_t index, off; size_t klen; } odd[] = {
		{ f->pgid, f->index + 1, off, kv->key_len },
		{ f->pgid + 1, f->index, off, kv->key_len },
		{ f->pgid, f->index, off + 1, kv->key_len },
		{ f->pgid, f->index, off, kv->key_len + 1 },
		{ f->pgid, 0xFFFF, off, kv->key_len },
		{ f->pgid, f->index, UINT32_MAX, kv->key_len },
		{ UINT64_MAX >> 16, f->index, off, kv->key_len },
		{ 0, 0, 0, 0 },
		{ 1, 0, 16, 0 },
	};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		btree_entry_prefetch(b, odd[i].pgid, odd[i].index, odd[i].off);
		if (odd[i].klen == kv->key_len)
			(void)btree_entry_at(b, odd[i].pgid, odd[i].index, odd[i].off, kv->key,
					     kv->key_len, &v, &vs);
		(void)btree_entry_at(b, odd[i].pgid, odd[i].index, odd[i].off, NULL, odd[i].klen,
				     &v, &vs);
	}
}

static int dbfile_walk_bucket(struct btree_txn *t, struct btree_bucket *b, int depth,
			      unsigned *budget)
{
	struct btree_cursor c;
	struct btree_kv kv;
	const uint8_t *seen[8];
	size_t seen_len[8], nseen = 0;
	struct btree_bucket_stats bs;
	int rc = btree_bucket_stats(b, &bs);
	if (rc < 0)
		return rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0 && *budget > 0;
	     rc = btree_cursor_next(&c, &kv)) {
		(*budget)--;
		if (nseen < 8) {
			seen[nseen] = kv.key;
			seen_len[nseen++] = kv.key_len;
		}
		if (kv.flags & BTREE_KV_BUCKET) {
			struct btree_bucket *child;
			if (depth >= 8)
				continue;
			rc = btree_bucket_open(t, b, kv.key, kv.key_len, &child);
			if (rc == 0)
				rc = dbfile_walk_bucket(t, child, depth + 1, budget);
			if (rc < 0)
				return rc;
			continue;
		}
		const uint8_t *v;
		size_t vl;
		rc = btree_get(b, kv.key, kv.key_len, &v, &vl);
		if (rc < 0)
			return rc;
		if (vl != kv.val_len)
			return -EUCLEAN;
		dbfile_places(b, &c, &kv);
		/* Seek to the key just found: it must come back. */
		struct btree_cursor s;
		struct btree_kv skv;
		btree_cursor_init(&s, b);
		rc = btree_cursor_seek(&s, kv.key, kv.key_len, &skv);
		if (rc < 0)
			return rc;
	}
	if (rc < 0 && rc != -ENOENT)
		return rc;
	/* The keys seen, looked up together: each as btree_get finds it. */
	const uint8_t *vals[8];
	size_t vlens[8];
	int rcs[8];
	rc = btree_get_many(b, nseen, seen, seen_len, vals, vlens, rcs);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < nseen; i++) {
		const uint8_t *v;
		size_t vl;
		if (btree_get(b, seen[i], seen_len[i], &v, &vl) != rcs[i])
			abort();
	}
	for (rc = btree_cursor_last(&c, &kv); rc == 0 && *budget > 0;
	     rc = btree_cursor_prev(&c, &kv))
		(*budget)--;
	return rc == -ENOENT || rc == 0 ? 0 : rc;
}

/* The reader side: check and walk the durable state. */
static int dbfile_read(const char *path)
{
	struct btree_reader_opts o = { .map_size = DBFILE_MAP_SIZE };
	struct btree_reader *r;
	struct btree_root at;
	struct btree_txn *t;
	unsigned budget = DBFILE_WALK_BUDGET;
	int rc = btree_reader_open(path, &o, &r);
	if (rc < 0)
		return rc;
	int check_rc = btree_reader_check(r);
	rc = btree_reader_durable(r, &at);
	if (rc == 0)
		rc = btree_reader_begin(r, &at, &t);
	if (rc == 0) {
		rc = dbfile_walk_bucket(t, btree_txn_root(t), 0, &budget);
		int trc = btree_txn_check(t);
		if (rc == 0)
			rc = trc;
		btree_txn_end(t);
	}
	btree_reader_close(r);
	return check_rc < 0 ? check_rc : rc;
}

/* The writer side: open, change the first bucket a little, commit. */
static void dbfile_write(const char *path)
{
	struct btree_db_opts o = { .map_size = DBFILE_MAP_SIZE };
	struct btree_db *db;
	struct btree_txn *t;
	if (btree_db_open(path, &o, &db) < 0)
		return;
	/* the writer's own look at a place (kvindex's feed reads the key at
	 * the cache's place): any page, element or none, without a fault */
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	for (uint64_t pg = 0; pg < st.hwm_pgid + 2 && pg < 256; pg++)
		for (uint32_t i = 0; i < 4; i++) {
			const uint8_t *k;
			uint32_t ks;
			if (btree_db_entry_key(db, pg, i * 7, &k, &ks) == 0 && ks > 0)
				(void)*(volatile const uint8_t *)(k + ks - 1);
		}
	if (btree_write_begin(db, &t) == 0) {
		struct btree_cursor c;
		struct btree_kv kv;
		struct btree_bucket *b = NULL;
		btree_cursor_init(&c, btree_txn_root(t));
		if (btree_cursor_first(&c, &kv) == 0 && (kv.flags & BTREE_KV_BUCKET))
			btree_bucket_open(t, NULL, kv.key, kv.key_len, &b);
		if (b) {
			btree_cursor_init(&c, b);
			if (btree_cursor_first(&c, &kv) == 0 && !(kv.flags & BTREE_KV_BUCKET)) {
				uint8_t key[64];
				size_t kl = kv.key_len < sizeof(key) ? kv.key_len : sizeof(key);
				memcpy(key, kv.key, kl);
				btree_del(b, key, kl);
			}
			static const uint8_t val[700];
			for (int i = 0; i < 40; i++) {
				char k[16];
				int kl = snprintf(k, sizeof(k), "fuzz%02d", i);
				btree_put(b, k, (size_t)kl, val, (size_t)(i * 37 % 700));
			}
		}
		btree_bucket_delete(t, NULL, "fuzz-gone", 9);
		if (btree_commit(t, NULL) == 0 && btree_db_checkpoint(db, NULL) == 0)
			btree_db_check(db);
	}
	btree_db_close(db);
}

int dbfile_fuzz_one(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-dbfile", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t off = 0;
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0) {
			close(fd);
			return -EIO;
		}
		off += (size_t)n;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	int rc = dbfile_read(path);
	if (size > 0)
		dbfile_write(path);
	close(fd);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	dbfile_fuzz_one(data, size);
	return 0;
}
