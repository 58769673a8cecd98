/*
 * The MVCC store: opening a db (schema, index check and rebuild), apply
 * batches and the consistent index. Errors and views are in mvcc_view.c,
 * writes in mvcc_write.c, ranges in mvcc_range.c, txns in mvcc_txn.c,
 * compaction in mvcc_compact.c.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/mvcc/schema.h"

#define KEY_LEAF_PAGES 4u  /* the most pages a leaf of appended revisions spans */

/* ---- meta bucket ---- */

static int meta_ci(struct btree_bucket *meta, uint64_t *out)
{
	const uint8_t *v;
	size_t len;
	int rc = btree_get(meta, SCHEMA_META_CONSISTENT_INDEX,
			   SCHEMA_LEN(SCHEMA_META_CONSISTENT_INDEX), &v, &len);
	if (rc == -ENOENT) {
		*out = 0;
		return 0;
	}
	if (rc)
		return rc;
	if (len != 8)
		return kvindex_corrupt("meta consistent_index is %zu bytes long", len);
	*out = rev_get_be64(v);
	return 0;
}

/* ---- opening a db ---- */

static const char *const etcd_buckets[] = {
	SCHEMA_BUCKET_KEY,     SCHEMA_BUCKET_META,            SCHEMA_BUCKET_LEASE,
	SCHEMA_BUCKET_ALARM,   SCHEMA_BUCKET_MEMBERS,         SCHEMA_BUCKET_MEMBERS_REMOVED,
	SCHEMA_BUCKET_CLUSTER, SCHEMA_BUCKET_AUTH,            SCHEMA_BUCKET_AUTH_USERS,
	SCHEMA_BUCKET_AUTH_ROLES,
};

/* etcd's buckets, and the auth revision etcd's auth store commits when it
 * finds it 0 or missing (so 1, 8 bytes big-endian), so that a new db holds
 * what etcd's holds and Maintenance.Hash, which covers every bucket,
 * agrees. */
static int create_etcd_buckets(struct btree_txn *t)
{
	struct btree_bucket *b = NULL, *auth = NULL;
	for (size_t i = 0; i < sizeof(etcd_buckets) / sizeof(etcd_buckets[0]); i++) {
		int rc = btree_bucket_create(t, NULL, etcd_buckets[i], strlen(etcd_buckets[i]), &b);
		if (rc && rc != -EEXIST)
			return rc;
		if (strcmp(etcd_buckets[i], SCHEMA_BUCKET_AUTH) == 0)
			auth = b;
	}
	const uint8_t *v;
	size_t vlen;
	static const uint8_t zero_rev[8], first_rev[8] = { 0, 0, 0, 0, 0, 0, 0, 1 };
	int rc = btree_get(auth, SCHEMA_AUTH_REVISION, strlen(SCHEMA_AUTH_REVISION), &v, &vlen);
	if (rc == -ENOENT || (!rc && vlen == 8 && memcmp(v, zero_rev, 8) == 0))
		rc = btree_put(auth, SCHEMA_AUTH_REVISION, strlen(SCHEMA_AUTH_REVISION), first_rev,
			       sizeof(first_rev));
	return rc;
}

/* The last key of the key bucket (len 0 when empty), copied to out. */
static int last_key(struct btree_bucket *key, uint8_t out[REV_MARKED_BYTES], size_t *len)
{
	struct btree_cursor c;
	struct btree_kv kv;
	btree_cursor_init(&c, key);
	int rc = btree_cursor_last(&c, &kv);
	*len = 0;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (kv.key_len > REV_MARKED_BYTES)
		return kvindex_corrupt("key bucket ends with a %zu-byte key", kv.key_len);
	memcpy(out, kv.key, kv.key_len);
	*len = kv.key_len;
	return 0;
}

/* The covers record for the state of t's key and meta buckets. */
static int covers_now(struct btree_bucket *key, int64_t scheduled, int64_t finished,
		      struct kvindex_meta *m)
{
	uint8_t last[REV_MARKED_BYTES];
	size_t len;
	int rc = last_key(key, last, &len);
	if (!rc)
		kvindex_covers_make(m, scheduled, finished, last, len);
	return rc;
}

/* Whether the index of t exists and matches the key and meta buckets. */
static int index_matches(struct btree_txn *t, struct btree_bucket *key, int64_t scheduled,
			 int64_t finished, int64_t *rev, uint64_t *format, bool *ok)
{
	struct kvindex x;
	struct kvindex_meta have, want;
	kvindex_init(&x);
	*ok = false;
	int rc = kvindex_open(t, &x);
	if (!rc)
		rc = kvindex_meta_read(&x, &have);
	kvindex_close(&x);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc == -EUCLEAN ? 0 : rc;
	rc = covers_now(key, scheduled, finished, &want);
	if (rc)
		return rc;
	*ok = have.format >= KVINDEX_FORMAT_OLDEST && have.format <= KVINDEX_FORMAT &&
	      have.covers_len == want.covers_len &&
	      memcmp(have.covers, want.covers, want.covers_len) == 0;
	*rev = have.revision;
	*format = have.format;
	return 0;
}

/* Indexes one key-bucket entry. */
static int rebuild_entry(struct kvindex *x, const struct btree_kv *kv, int64_t *last_main)
{
	struct rev r;
	bool tomb;
	struct mvcc_kv f;
	if (kv->flags & BTREE_KV_BUCKET)
		return kvindex_corrupt("key bucket holds a nested bucket");
	if (rev_decode(kv->key, kv->key_len, &r, &tomb))
		return kvindex_corrupt("key bucket key of %zu bytes is not a revision", kv->key_len);
	if (mvcc_kv_decode(kv->val, kv->val_len, &f) || f.key_len == 0)
		return kvindex_corrupt("key bucket value at %lld_%lld is not a KeyValue",
				       (long long)r.main, (long long)r.sub);
	if (r.main < 1)
		return 0;  /* etcd's restore starts at revision 1 */
	*last_main = r.main;
	/* In revision order, as the writes made them: the latest entry so far
	 * is the revision this one supersedes. */
	struct kvindex_entry prev;
	int rc = kvindex_latest_get(x, f.key, f.key_len, &prev);
	if (rc && rc != -ENOENT)
		return rc;
	const struct kvindex_entry *p = rc == 0 ? &prev : NULL;
	if (tomb)
		return kvindex_tombstone(x, f.key, f.key_len, r, p);
	return kvindex_put(x, &f, r, kv->val, kv->val_len, p);
}

/*
 * Builds the index from the key bucket, in commits of `batch` entries (each
 * checkpointed), as etcd's restore reads it. The meta record is written
 * last: an index without it is rebuilt again at the next open.
 */
static int rebuild(struct mvcc_store *s, int64_t scheduled, int64_t finished)
{
	uint8_t pos[REV_MARKED_BYTES];
	size_t pos_len = 0;
	int64_t last_main = 1;
	uint32_t batch = s->o.rebuild_batch ? s->o.rebuild_batch : 10000;
	bool first = true, done = false;
	struct kvindex x;
	kvindex_init(&x);
	int rc = 0;

	while (!done) {
		struct btree_txn *t;
		struct btree_bucket *key;
		struct btree_cursor c;
		struct btree_kv kv;
		rc = btree_write_begin(s->db, &t);
		if (rc)
			break;
		if (first)
			rc = kvindex_drop(t);
		if (!rc)
			rc = kvindex_create(t, &x);
		if (!rc)
			rc = open_bucket(t, SCHEMA_BUCKET_KEY, &key);
		if (rc)
			goto out_end_txn;
		btree_cursor_init(&c, key);
		if (first) {
			rc = btree_cursor_first(&c, &kv);
		} else {
			rc = btree_cursor_seek(&c, pos, pos_len, &kv);
			if (!rc && kv.key_len == pos_len && memcmp(kv.key, pos, pos_len) == 0)
				rc = btree_cursor_next(&c, &kv);
		}
		first = false;
		for (uint32_t i = 0; i < batch && !rc; i++) {
			rc = rebuild_entry(&x, &kv, &last_main);
			if (rc)
				goto out_end_txn;
			memcpy(pos, kv.key, kv.key_len);
			pos_len = kv.key_len;
			rc = btree_cursor_next(&c, &kv);
		}
		if (rc == -ENOENT) {
			struct kvindex_meta m = { .format = KVINDEX_FORMAT_WHOLE };
			m.revision = last_main > finished ? last_main : finished;
			rc = covers_now(key, scheduled, finished, &m);
			if (!rc)
				rc = kvindex_meta_write(&x, &m);
			if (rc)
				goto out_end_txn;
			s->c.rev = m.revision;
			done = true;
		} else if (rc) {
			goto out_end_txn;
		}
		/* freed pages are reused only after a checkpoint: without one per
		 * chunk a big rebuild would grow the file by every chunk's copies */
		rc = btree_commit(t, NULL);
		if (!rc)
			rc = btree_db_checkpoint(s->db, NULL);
		if (rc)
			break;
		continue;
out_end_txn:
		btree_txn_end(t);
		break;
	}
	s->wv.idx.long_keys = x.long_keys;
	kvindex_close(&x);
	return rc;
}

/* Creates the schema, reads the state, and checks (or rebuilds) the index. */
static int store_load(struct mvcc_store *s)
{
	struct btree_txn *t;
	struct btree_bucket *key, *meta;
	int64_t scheduled = 0, finished = 0, rev = 1;
	uint64_t format = KVINDEX_FORMAT_WHOLE;
	bool ok;
	int rc = btree_write_begin(s->db, &t);
	if (rc)
		return rc;
	rc = create_etcd_buckets(t);
	if (!rc)
		rc = open_bucket(t, SCHEMA_BUCKET_KEY, &key);
	if (!rc)
		rc = open_bucket(t, SCHEMA_BUCKET_META, &meta);
	if (!rc)
		rc = meta_ci(meta, &s->c.consistent_index);
	if (!rc)
		rc = meta_rev(meta, SCHEMA_META_SCHEDULED_COMPACT, &scheduled);
	if (!rc)
		rc = meta_rev(meta, SCHEMA_META_FINISHED_COMPACT, &finished);
	if (!rc)
		rc = index_matches(t, key, scheduled, finished, &rev, &format, &ok);
	if (rc) {
		btree_txn_end(t);
		return rc;
	}
	rc = btree_commit(t, NULL);
	if (rc)
		return rc;
	if (!ok) {
		rc = rebuild(s, scheduled, finished);
		if (rc)
			return rc;
		s->rebuilt = true;
	} else {
		s->c.rev = rev;
		/* its next commits keep the format that reads its entries */
		s->wv.idx.long_keys = format >= KVINDEX_FORMAT;
	}
	s->c.finished_compact = finished;
	s->c.compact_rev = effective_compact(scheduled, finished);
	if (scheduled > finished && scheduled != 0) {
		/* A compaction was asked for and not finished: resume it. */
		s->c.job.active = true;
		s->c.job.target = scheduled;
		s->c.job.next = (struct rev){ 0, 0 };
	}
	s->saved = s->c;
	return 0;
}

int mvcc_store_open(struct btree_db *db, const struct mvcc_store_opts *o,
		    struct mvcc_store **out)
{
	struct mvcc_store *s = stored_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->db = db;
	if (o)
		s->o = *o;
	kvindex_init(&s->wv.idx);
	mvcc_range_result_init(&s->rr);
	s->c.compact_rev = s->c.finished_compact = -1;
	int rc = store_load(s);
	if (rc) {
		mvcc_store_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void mvcc_store_close(struct mvcc_store *s)
{
	if (!s)
		return;
	if (s->wtxn)
		btree_txn_end(s->wtxn);
	mvcc_view_close(&s->wv);
	mvcc_range_result_free(&s->rr);
	stored_free(s->kvbuf);
	stored_free(s->keys);
	stored_free(s->key_offs);
	stored_free(s);
}

void mvcc_store_state(const struct mvcc_store *s, struct mvcc_state *out)
{
	out->rev = s->c.rev;
	out->compact_rev = s->c.compact_rev;
	out->finished_compact_rev = s->c.finished_compact;
	out->consistent_index = s->c.consistent_index;
	out->compacting = s->c.job.active;
	out->rebuilt = s->rebuilt;
}

/* ---- batches ---- */

int mvcc_batch_begin(struct mvcc_store *s)
{
	struct btree_txn *t;
	if (s->wtxn)
		return -EBUSY;
	int rc = btree_write_begin(s->db, &t);
	if (rc)
		return rc;
	rc = mvcc_view_bind(t, &s->wv);
	if (!rc)
		rc = open_bucket(t, SCHEMA_BUCKET_META, &s->meta);
	if (rc) {
		btree_txn_end(t);
		return rc;
	}
	/* The key bucket only grows at its end, as bbolt's sequential puts,
	 * and a batch's appends go to leaves of up to 4 pages, which leave
	 * less of each page unused than single pages (at most as many
	 * elements as the latest-entry cache can point at); the history's
	 * keys go in at the front of their key's run. */
	btree_bucket_set_fill(s->wv.key, 0.9);
	btree_bucket_set_append_pages(s->wv.key, KEY_LEAF_PAGES, LCACHE_MAX_INDEX + 1);
	btree_bucket_set_runs(s->wv.idx.history, HIST_SUFFIX);
	s->wtxn = t;
	s->wv.rev = s->c.rev;
	s->wv.compact_rev = s->c.compact_rev;
	s->entry_open = s->ci_dirty = s->kv_dirty = false;
	s->changes = 0;
	return 0;
}

struct btree_txn *mvcc_batch_txn(struct mvcc_store *s)
{
	return s->wtxn;
}

struct mvcc_view *mvcc_batch_view(struct mvcc_store *s)
{
	return s->wtxn ? &s->wv : NULL;
}

int mvcc_apply_begin(struct mvcc_store *s, uint64_t index)
{
	if (!s->wtxn)
		return -EINVAL;
	s->entry_open = false;
	if (index <= s->c.consistent_index)
		return -EALREADY;
	s->c.consistent_index = index;
	s->ci_dirty = true;
	s->entry_open = true;
	return 0;
}

int mvcc_check_open(struct mvcc_store *s)
{
	return s->wtxn && s->entry_open ? 0 : -EINVAL;
}

/* Writes the meta records a batch changed. */
static int batch_finish(struct mvcc_store *s)
{
	int rc = 0;
	if (s->ci_dirty) {
		uint8_t b[8];
		rev_put_be64(b, s->c.consistent_index);
		rc = btree_put(s->meta, SCHEMA_META_CONSISTENT_INDEX,
			       SCHEMA_LEN(SCHEMA_META_CONSISTENT_INDEX), b, sizeof(b));
	}
	if (!rc && s->kv_dirty) {
		int64_t scheduled = 0, finished = 0;
		struct kvindex_meta m = { .format = KVINDEX_FORMAT_WHOLE, .revision = s->c.rev };
		rc = meta_rev(s->meta, SCHEMA_META_SCHEDULED_COMPACT, &scheduled);
		if (!rc)
			rc = meta_rev(s->meta, SCHEMA_META_FINISHED_COMPACT, &finished);
		if (!rc)
			rc = covers_now(s->wv.key, scheduled, finished, &m);
		if (!rc)
			rc = kvindex_meta_write(&s->wv.idx, &m);
	}
	return rc;
}

int mvcc_batch_commit(struct mvcc_store *s, struct btree_root *out)
{
	if (!s->wtxn)
		return -EINVAL;
	int rc = batch_finish(s);
	if (rc) {
		mvcc_batch_abort(s);
		return rc;
	}
	rc = btree_commit(s->wtxn, out);
	s->wtxn = NULL;
	s->entry_open = false;
	if (rc) {
		s->c = s->saved;
		return rc;
	}
	s->saved = s->c;
	return 0;
}

void mvcc_batch_abort(struct mvcc_store *s)
{
	if (s->wtxn)
		btree_txn_end(s->wtxn);
	s->wtxn = NULL;
	s->entry_open = false;
	s->c = s->saved;
}

/* ---- write ops ---- */

void mvcc_op_begin(struct mvcc_store *s)
{
	s->begin_rev = s->c.rev;
	s->changes = 0;
	s->wv.rev = s->c.rev;
}

void mvcc_op_end(struct mvcc_store *s)
{
	if (s->changes) {
		s->c.rev = s->begin_rev + 1;
		s->kv_dirty = true;
	}
	s->changes = 0;
	s->wv.rev = s->c.rev;
}
