/* The auth buckets of the db, the read side (see auth_db.h). */
#include "stored/auth_db.h"

#include <errno.h>
#include <string.h>

#include "stored/mvcc/schema.h"

/* etcd's key of the enabled flag in the auth bucket. */
#define AUTH_DB_ENABLED_KEY "authEnabled"

/* The value of key in the auth bucket b (NULL when absent). */
static int auth_db_value(struct btree_bucket *b, const char *key, const uint8_t **val, size_t *len)
{
	int rc = btree_get(b, key, strlen(key), val, len);
	if (rc == -ENOENT) {
		*val = NULL;
		*len = 0;
		return 0;
	}
	if (rc == -EISDIR)
		return auth_record_corrupt(SCHEMA_BUCKET_AUTH, key, strlen(key), "is a bucket, not a value");
	return rc;
}

/* Gives every entry of the bucket name to add; a missing bucket has none. */
static int auth_db_feed(struct btree_txn *t, struct auth_builder *b, const char *name,
			int (*add)(struct auth_builder *, const void *, size_t, const uint8_t *,
				   size_t))
{
	struct btree_bucket *bk;
	struct btree_cursor cur;
	struct btree_kv kv;
	int rc = btree_bucket_open(t, NULL, name, strlen(name), &bk);

	if (rc == -ENOENT)
		return 0;
	if (rc == -ENOTDIR)
		return auth_record_corrupt("top-level", name, strlen(name), "is a value, not a bucket");
	if (rc)
		return rc;
	btree_cursor_init(&cur, bk);
	for (rc = btree_cursor_first(&cur, &kv); rc == 0; rc = btree_cursor_next(&cur, &kv)) {
		if (kv.flags & BTREE_KV_BUCKET)
			return auth_record_corrupt(name, kv.key, kv.key_len, "is a bucket, not a value");
		if ((rc = add(b, kv.key, kv.key_len, kv.val, kv.val_len)))
			return rc;
	}
	return rc == -ENOENT ? 0 : rc;
}

/* The auth bucket's two values. */
static int auth_db_state(struct btree_txn *t, struct auth_builder *b)
{
	struct btree_bucket *bk;
	const uint8_t *enabled, *rev;
	size_t enabled_len, rev_len;
	int rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_AUTH, SCHEMA_LEN(SCHEMA_BUCKET_AUTH), &bk);

	if (rc == -ENOENT)
		return 0;
	if (rc == -ENOTDIR)
		return auth_record_corrupt("top-level", SCHEMA_BUCKET_AUTH, SCHEMA_LEN(SCHEMA_BUCKET_AUTH),
					   "is a value, not a bucket");
	if (rc || (rc = auth_db_value(bk, AUTH_DB_ENABLED_KEY, &enabled, &enabled_len)) ||
	    (rc = auth_db_value(bk, SCHEMA_AUTH_REVISION, &rev, &rev_len)))
		return rc;
	return auth_builder_state(b, enabled, enabled_len, rev, rev_len);
}

int auth_db_load(struct btree_txn *t, struct auth_cache **out)
{
	struct auth_builder *b;
	int rc = auth_builder_begin(&b);

	if (rc)
		return rc;
	if ((rc = auth_db_state(t, b)) ||
	    (rc = auth_db_feed(t, b, SCHEMA_BUCKET_AUTH_ROLES, auth_builder_role)) ||
	    (rc = auth_db_feed(t, b, SCHEMA_BUCKET_AUTH_USERS, auth_builder_user))) {
		auth_builder_abort(b);
		return rc;
	}
	return auth_builder_finish(b, out);
}
