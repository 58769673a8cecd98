/* Membership in the db file, the read side: loading the buckets and a
 * member as etcd's Cluster service answers it (see membership_db.h).
 * The applier is in membership_db.c. */
#include "base/hex/hex.h"
#include "stored/membership_db.h"

#include <errno.h>
#include <string.h>

#include "cluster/member_json.h"
#include "base/log/log.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/schema.h"

int membership_db_bucket(struct btree_txn *t, const char *name, struct btree_bucket **out)
{
	return btree_bucket_open(t, NULL, name, strlen(name), out);
}

/* An id in etcd's key form (types.ID.String(): hex, no padding). */
static bool membership_db_parse_hex(const uint8_t *p, size_t len, uint64_t *id)
{
	return len <= 16 && hex_parse_u64((const char *)p, len, id) == 0;
}

int membership_db_load(struct btree_txn *t, struct membership *m)
{
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	int rc;

	rc = membership_db_bucket(t, SCHEMA_BUCKET_MEMBERS, &b);
	if (rc == 0) {
		btree_cursor_init(&c, b);
		for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
			struct member_info mi = { 0 };
			uint64_t id;
			int drc = member_json_decode(kv.val, kv.val_len, &mi);
			if (drc == -ENOMEM)
				return drc;
			if (drc || !membership_db_parse_hex(kv.key, kv.key_len, &id) || id != mi.id) {
				log_warn("skipped a member in the db that cannot be decoded",
					 LOG_BYTES("key", kv.key, kv.key_len));
				member_info_clear(&mi);
				continue;
			}
			drc = membership_put(m, &mi);
			member_info_clear(&mi);
			if (drc)
				return drc;
		}
		if (rc != -ENOENT)
			return rc;
	} else if (rc != -ENOENT) {
		return rc;
	}

	rc = membership_db_bucket(t, SCHEMA_BUCKET_MEMBERS_REMOVED, &b);
	if (rc == 0) {
		btree_cursor_init(&c, b);
		for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
			uint64_t id;
			if (membership_db_parse_hex(kv.key, kv.key_len, &id) &&
			    membership_mark_removed(m, id))
				return -ENOMEM;
		}
		if (rc != -ENOENT)
			return rc;
	} else if (rc != -ENOENT) {
		return rc;
	}

	rc = membership_db_bucket(t, SCHEMA_BUCKET_CLUSTER, &b);
	if (rc == 0) {
		const uint8_t *v;
		size_t len;
		rc = btree_get(b, MEMBERSHIP_DB_VERSION_KEY, strlen(MEMBERSHIP_DB_VERSION_KEY), &v,
			       &len);
		if (rc == 0)
			(void)membership_set_version(m, (const char *)v, len);
	}
	return rc == -ENOENT ? 0 : rc;
}

void membership_db_pb(const struct member_info *m, Etcdserverpb__Member *out)
{
	etcdserverpb__member__init(out);
	out->id = m->id;
	out->name = m->name ? m->name : "";
	out->n_peerurls = m->n_peer_urls;
	out->peerurls = m->peer_urls;
	out->n_clienturls = m->n_client_urls;
	out->clienturls = m->client_urls;
	out->islearner = m->is_learner;
}
