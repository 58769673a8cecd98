/*
 * Compaction with etcd 3.4's semantics (mvcc/kvstore.go updateCompactRev,
 * kvstore_compaction.go, key_index.go compact): asking for it checks the
 * revision and records scheduledCompactRev at once, so reads below it fail
 * from then on; the deletion then walks the key bucket up to the compact
 * revision a few entries per batch, keeping for each key its newest
 * revision at or below it unless that one is a tombstone, and records
 * finishedCompactRev when done.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/mvcc/schema.h"

static int put_meta_rev(struct mvcc_store *s, const char *name, int64_t main)
{
	uint8_t b[REV_BYTES];
	rev_encode((struct rev){ main, 0 }, b);
	return btree_put(s->meta, name, strlen(name), b, sizeof(b));
}

int mvcc_compact(struct mvcc_store *s, const Etcdserverpb__CompactionRequest *r,
		 struct arena *a, Etcdserverpb__CompactionResponse **out)
{
	int rc = mvcc_check_open(s);
	if (rc)
		return rc;
	if (r->revision <= s->c.compact_rev)
		return MVCC_ERR_COMPACTED;
	if (r->revision > s->c.rev)
		return MVCC_ERR_FUTURE_REV;
	Etcdserverpb__CompactionResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return -ENOMEM;
	etcdserverpb__compaction_response__init(resp);
	resp->header = mvcc_header(a, s->c.rev);
	if (!resp->header)
		return -ENOMEM;
	rc = put_meta_rev(s, SCHEMA_META_SCHEDULED_COMPACT, r->revision);
	if (rc)
		return rc;
	s->c.compact_rev = r->revision;
	s->wv.compact_rev = r->revision;
	/* A newer compaction supersedes one under way: start over, since what
	 * the old one kept may go now. */
	s->c.job.active = true;
	s->c.job.target = r->revision;
	s->c.job.next = (struct rev){ 0, 0 };
	s->kv_dirty = true;
	*out = resp;
	return 0;
}

/* Whether the key-bucket entry at r (of key, tombstone or not) survives a
 * compaction at target: it is the key's newest revision there and a put. */
static int keeps(struct mvcc_store *s, const uint8_t *key, size_t len, struct rev r, bool tomb,
		 int64_t target, bool *keep)
{
	struct rev vis;
	bool vis_tomb;
	*keep = false;
	if (tomb)
		return 0;
	int rc = kvindex_history_find(&s->wv.idx, key, len, target, &vis, &vis_tomb);
	if (rc == -ENOENT)
		return kvindex_corrupt("cetcd index lacks revision %lld_%lld of a %zu-byte key",
				       (long long)r.main, (long long)r.sub, len);
	if (rc)
		return rc;
	*keep = !vis_tomb && rev_cmp(vis, r) == 0;
	return 0;
}

int mvcc_compact_step(struct mvcc_store *s, uint32_t max_entries, bool *done)
{
	struct mvcc_compact_job *job = &s->c.job;
	struct btree_cursor c;
	struct btree_kv kv;
	uint8_t pos[REV_BYTES];
	int rc;

	if (done)
		*done = !job->active;
	if (!s->wtxn)
		return -EINVAL;
	if (!job->active)
		return 0;
	btree_cursor_init(&c, s->wv.key);
	rev_encode(job->next, pos);
	rc = btree_cursor_seek(&c, pos, sizeof(pos), &kv);
	for (uint32_t n = 0; n < max_entries; n++) {
		struct rev r = { 0, 0 };
		bool tomb = false, keep;
		struct mvcc_kv f;
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0 && (kv.flags & BTREE_KV_BUCKET))
			return kvindex_corrupt("key bucket holds a nested bucket");
		if (rc == 0 && rev_decode(kv.key, kv.key_len, &r, &tomb))
			return kvindex_corrupt("key bucket key of %zu bytes is not a revision",
					       kv.key_len);
		if (rc == -ENOENT || r.main > job->target) {
			rc = put_meta_rev(s, SCHEMA_META_FINISHED_COMPACT, job->target);
			if (rc)
				return rc;
			s->c.finished_compact = job->target;
			job->active = false;
			s->kv_dirty = true;
			if (done)
				*done = true;
			return 0;
		}
		if (mvcc_kv_decode(kv.val, kv.val_len, &f) || f.key_len == 0)
			return kvindex_corrupt("key bucket value at %lld_%lld is not a KeyValue",
					       (long long)r.main, (long long)r.sub);
		job->next = (struct rev){ r.main, r.sub + 1 };
		rc = keeps(s, f.key, f.key_len, r, tomb, job->target, &keep);
		if (rc)
			return rc;
		if (keep) {
			rc = btree_cursor_next(&c, &kv);
			continue;
		}
		/* The history entry first: f.key points into the key bucket,
		 * which the second delete changes. */
		uint8_t rk[REV_MARKED_BYTES];
		size_t rk_len = kv.key_len;
		memcpy(rk, kv.key, rk_len);
		rc = kvindex_history_del(&s->wv.idx, f.key, f.key_len, r);
		if (rc && rc != -ENOENT)
			return rc;
		rc = btree_del(s->wv.key, rk, rk_len);
		if (rc)
			return rc;
		s->kv_dirty = true;
		rev_encode(job->next, pos);
		rc = btree_cursor_seek(&c, pos, sizeof(pos), &kv);
	}
	return 0;
}
