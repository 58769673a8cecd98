/* Membership in the db file (see membership_db.h). */
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

static int membership_db_bucket(struct btree_txn *t, const char *name, struct btree_bucket **out)
{
	return btree_bucket_open(t, NULL, name, strlen(name), out);
}

/* An id in etcd's key form (types.ID.String(): hex, no padding). */
static bool membership_db_parse_hex(const uint8_t *p, size_t len, uint64_t *id)
{
	uint64_t v = 0;
	if (len == 0 || len > 16)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned d;
		if (p[i] >= '0' && p[i] <= '9')
			d = p[i] - '0';
		else if (p[i] >= 'a' && p[i] <= 'f')
			d = p[i] - 'a' + 10;
		else
			return false;
		v = v << 4 | d;
	}
	*id = v;
	return true;
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
