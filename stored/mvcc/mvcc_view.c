/*
 * The MVCC layer, the half that reads: errors, and views (etcd's read
 * txns over a B+tree txn: the key bucket, the index, the compaction they
 * obey), and whether a lease exists (the check of a put). Opening a
 * store, apply batches and the consistent index are mvcc.c.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/mvcc/schema.h"

enum {
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_NOT_FOUND = 5,
	GRPC_OUT_OF_RANGE = 11,
};

static const struct {
	int err;
	int code;
	const char *msg;
} mvcc_errors[] = {
	{ MVCC_ERR_COMPACTED, GRPC_OUT_OF_RANGE,
	  "etcdserver: mvcc: required revision has been compacted" },
	{ MVCC_ERR_FUTURE_REV, GRPC_OUT_OF_RANGE,
	  "etcdserver: mvcc: required revision is a future revision" },
	{ MVCC_ERR_KEY_NOT_FOUND, GRPC_INVALID_ARGUMENT, "etcdserver: key not found" },
	{ MVCC_ERR_LEASE_NOT_FOUND, GRPC_NOT_FOUND, "etcdserver: requested lease not found" },
	{ MVCC_ERR_EMPTY_KEY, GRPC_INVALID_ARGUMENT, "etcdserver: key is not provided" },
	{ MVCC_ERR_VALUE_PROVIDED, GRPC_INVALID_ARGUMENT, "etcdserver: value is provided" },
	{ MVCC_ERR_LEASE_PROVIDED, GRPC_INVALID_ARGUMENT, "etcdserver: lease is provided" },
	{ MVCC_ERR_TOO_MANY_OPS, GRPC_INVALID_ARGUMENT,
	  "etcdserver: too many operations in txn request" },
	{ MVCC_ERR_DUPLICATE_KEY, GRPC_INVALID_ARGUMENT,
	  "etcdserver: duplicate key given in txn request" },
};

#define N_ERRORS (sizeof(mvcc_errors) / sizeof(mvcc_errors[0]))

bool mvcc_is_request_error(int err)
{
	return err <= MVCC_ERR_COMPACTED && err >= MVCC_ERR_DUPLICATE_KEY;
}

const char *mvcc_strerror(int err)
{
	for (size_t i = 0; i < N_ERRORS; i++)
		if (mvcc_errors[i].err == err)
			return mvcc_errors[i].msg;
	return strerror(err < 0 ? -err : err);
}

int mvcc_grpc_code(int err)
{
	for (size_t i = 0; i < N_ERRORS; i++)
		if (mvcc_errors[i].err == err)
			return mvcc_errors[i].code;
	return GRPC_UNKNOWN;
}

/* ---- views ---- */

int mvcc_view_bind(struct btree_txn *t, struct mvcc_view *v)
{
	v->txn = t;
	int rc = open_bucket(t, SCHEMA_BUCKET_KEY, &v->key);
	if (rc)
		return rc;
	return kvindex_open(t, &v->idx);
}

int mvcc_view_prefetch(struct mvcc_view *v, size_t n, const uint8_t *const *keys,
		       const size_t *lens)
{
	return kvindex_latest_prefetch(&v->idx, n, keys, lens);
}

void mvcc_view_use_cache(struct mvcc_view *v, const struct lcache *lc, uint64_t generation)
{
	kvindex_use_cache(&v->idx, lc, generation);
}

int mvcc_view_open(struct btree_txn *t, struct mvcc_view *v)
{
	struct btree_bucket *meta;
	struct kvindex_meta m;
	int64_t scheduled = 0, finished = 0;
	memset(v, 0, sizeof(*v));
	kvindex_init(&v->idx);
	int rc = mvcc_view_bind(t, v);
	if (!rc)
		rc = open_bucket(t, SCHEMA_BUCKET_META, &meta);
	if (!rc)
		rc = kvindex_meta_read(&v->idx, &m);
	if (!rc)
		rc = meta_rev(meta, SCHEMA_META_SCHEDULED_COMPACT, &scheduled);
	if (!rc)
		rc = meta_rev(meta, SCHEMA_META_FINISHED_COMPACT, &finished);
	if (rc) {
		kvindex_close(&v->idx);
		return rc;
	}
	if (m.format < KVINDEX_FORMAT_OLDEST || m.format > KVINDEX_FORMAT) {
		kvindex_close(&v->idx);
		return kvindex_corrupt("cetcd index has format %llu, this build reads %u to %u",
				       (unsigned long long)m.format, KVINDEX_FORMAT_OLDEST,
				       KVINDEX_FORMAT);
	}
	v->rev = m.revision;
	v->compact_rev = effective_compact(scheduled, finished);
	return 0;
}

void mvcc_view_close(struct mvcc_view *v)
{
	if (v)
		kvindex_close(&v->idx);
}

int mvcc_view_kv_at(struct mvcc_view *v, struct rev r, const uint8_t **kv, size_t *len)
{
	uint8_t k[REV_BYTES];
	rev_encode(r, k);
	int rc = btree_get(v->key, k, sizeof(k), kv, len);
	if (rc == -ENOENT || rc == -EISDIR)
		return kvindex_corrupt("key bucket has no revision %lld_%lld, which the cetcd "
				       "index names; rebuild the index (drop the cetcd_kv_* buckets)",
				       (long long)r.main, (long long)r.sub);
	return rc;
}

int mvcc_lease_exists(struct mvcc_store *s, int64_t id)
{
	struct btree_bucket *b;
	const uint8_t *v;
	size_t len;
	uint8_t k[8];
	if (s->o.lease_exists)
		return s->o.lease_exists(s->o.lease_arg, s->wtxn, id);
	int rc = open_bucket(s->wtxn, SCHEMA_BUCKET_LEASE, &b);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	rev_put_be64(k, (uint64_t)id);
	rc = btree_get(b, k, sizeof(k), &v, &len);
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : 1;
}
