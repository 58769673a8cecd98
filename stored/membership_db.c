/* Membership in the db file, the write side: applying the committed
 * entries that change it (see membership_db.h; the loader is in
 * membership_db_read.c). */
#include "stored/membership_db.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/member_json.h"
#include "base/log/log.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"

static int membership_db_put(struct btree_txn *t, const char *bucket, const char *key,
			     const void *val, size_t len)
{
	struct btree_bucket *b;
	int rc = membership_db_bucket(t, bucket, &b);
	if (rc == -ENOENT)
		rc = btree_bucket_create(t, NULL, bucket, strlen(bucket), &b);
	return rc ? rc : btree_put(b, key, strlen(key), val, len);
}

int membership_db_apply(struct btree_txn *t, struct membership *m, uint32_t type,
			const uint8_t *data, size_t len, struct membership_result *out)
{
	char key[24];
	int rc = membership_apply(m, type, data, len, out);

	if (rc == -EBADMSG) {
		log_warn("skipped a configuration change that cannot be decoded",
			 LOG_U64("len", len));
		memset(out, 0, sizeof(*out));
		out->change = MEMBERSHIP_REFUSED;
		out->error = MEMBERSHIP_ERR_ID_NOT_FOUND;
		return 0;
	}
	if (rc)
		return rc;
	const struct membership_result res = *out;
	/* Most entries are client requests (MEMBERSHIP_NONE): no key for them. */
	if (res.change == MEMBERSHIP_NONE)
		return 0;
	snprintf(key, sizeof(key), "%" PRIx64, res.node_id);
	switch (res.change) {
	case MEMBERSHIP_ADDED:
	case MEMBERSHIP_PROMOTED:
	case MEMBERSHIP_UPDATED:
	case MEMBERSHIP_ATTRIBUTES: {
		char *json;
		size_t jlen;
		if (member_json_encode(res.member, &json, &jlen))
			return -ENOMEM;
		rc = membership_db_put(t, SCHEMA_BUCKET_MEMBERS, key, json, jlen);
		free(json);
		return rc;
	}
	case MEMBERSHIP_REMOVED: {
		struct btree_bucket *b;
		rc = membership_db_bucket(t, SCHEMA_BUCKET_MEMBERS, &b);
		if (rc == 0) {
			rc = btree_del(b, key, strlen(key));
			if (rc == -ENOENT)
				rc = 0;
		} else if (rc == -ENOENT) {
			rc = 0;
		}
		return rc ? rc : membership_db_put(t, SCHEMA_BUCKET_MEMBERS_REMOVED, key, "removed", 7);
	}
	case MEMBERSHIP_VERSION: {
		char ver[32];
		int n = snprintf(ver, sizeof(ver), "%u.%u.0", m->version_major, m->version_minor);
		return membership_db_put(t, SCHEMA_BUCKET_CLUSTER, MEMBERSHIP_DB_VERSION_KEY, ver,
					 (size_t)n);
	}
	default:
		return 0;
	}
}
