/* The launcher's initial corruption check (see corrupt.h). */
#include "launcher/corrupt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "config/tls_config.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "cluster/membership.h"
#include "cluster/hashkv.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls.h"
#include "stored/btree/btree.h"
#include "stored/membership_db.h"
#include "stored/mvcc/mvcc.h"

/* The member's own hash and the members the db knows. */
struct corrupt_local {
	uint32_t hash;
	int64_t rev;
	int64_t compact_rev;
	struct membership members;
};

/* etcd's memberInitialized: the WAL dir holds a segment. */
static bool corrupt_member_initialized(const struct cetcd_config *cfg)
{
	char dir[PATH_MAX];
	struct dirent *e;
	bool found = false;
	DIR *d;

	if (cfg->wal_dir[0])
		snprintf(dir, sizeof(dir), "%s", cfg->wal_dir);
	else
		snprintf(dir, sizeof(dir), "%s/member/wal", cfg->data_dir);
	d = opendir(dir);
	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		found = n > 4 && !strcmp(e->d_name + n - 4, ".wal");
	}
	closedir(d);
	return found;
}

/* The HashKV of the db at its durable state (no process of the member
 * runs yet), at its current revision, and its members. */
static int corrupt_local_hash(const struct cetcd_config *cfg, struct corrupt_local *out)
{
	char path[PATH_MAX];
	struct btree_reader *r;
	struct btree_root root;
	struct btree_txn *t;
	struct mvcc_view v;
	struct mvcc_hashkv h;
	int rc;

	membership_init(&out->members);
	snprintf(path, sizeof(path), "%s/member/snap/db", cfg->data_dir);
	rc = btree_reader_open(path, NULL, &r);
	if (rc)
		return rc;
	rc = btree_reader_durable(r, &root);
	if (rc)
		goto out_close;
	rc = btree_reader_begin(r, &root, &t);
	if (rc)
		goto out_close;
	rc = mvcc_view_open(t, &v);
	if (rc)
		goto out_end;
	rc = mvcc_hashkv(&v, 0, &h);
	if (!rc)
		rc = membership_db_load(t, &out->members);
	if (!rc) {
		out->hash = h.hash;
		out->rev = h.rev;
		out->compact_rev = h.compact_rev;
	}
	mvcc_view_close(&v);
out_end:
	btree_txn_end(t);
out_close:
	btree_reader_close(r);
	return rc;
}

/* The peer client context, as raftd makes it (NULL without peer TLS). */
static int corrupt_peer_tls(const struct cetcd_config *c, struct tls_ctx **out)
{
	struct tls_info info;
	bool https = false;
	int rc;

	*out = NULL;
	for (size_t i = 0; i < c->listen_peer_urls.count; i++)
		https |= !strcmp(c->listen_peer_urls.v[i].scheme, "https") ||
			 !strcmp(c->listen_peer_urls.v[i].scheme, "unixs");
	if (!https && !c->peer_cert_file[0] && !c->peer_auto_tls)
		return 0;
	rc = config_tls_info(c, TLS_SIDE_PEER, &info);
	if (rc)
		return rc;
	if (!tls_info_is_empty(&info))
		rc = tls_ctx_new(&info, TLS_CLIENT, out);
	tls_info_free(&info);
	return rc;
}

/* The peers to ask: the members in the db, or, when it has none yet,
 * --initial-cluster. */
static int corrupt_peers(const struct cetcd_config *cfg, struct corrupt_local *l)
{
	struct initial_cluster mc;
	int rc;

	if (l->members.count)
		return 0;
	rc = initial_cluster_parse(cfg->initial_cluster, cfg->initial_cluster_token, &mc);
	if (rc)
		return rc;
	for (size_t i = 0; i < mc.count && !rc; i++)
		rc = membership_put(&l->members, &mc.v[i]);
	initial_cluster_free(&mc);
	return rc;
}

/* A peer's endpoints as etcd logs them: a JSON array's text. */
static void corrupt_eps(const struct member_info *m, char *buf, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, cap - n, "[");
	for (size_t i = 0; i < m->n_peer_urls && n < cap; i++)
		n += (size_t)snprintf(buf + n, cap - n, "%s\"%s\"", i ? "," : "", m->peer_urls[i]);
	if (n < cap)
		snprintf(buf + n, cap - n, "]");
}

/* Compares with one peer, as etcd's CheckInitialHashKV; true on a
 * mismatch. */
static bool corrupt_check_peer(const struct cetcd_config *cfg, const char *self,
			       const struct corrupt_local *l, const struct member_info *m,
			       struct tls_ctx *tls)
{
	int timeout_ms = (int)config_request_timeout_ms(cfg);
	enum hashkv_outcome oc = HASHKV_FAILED;
	struct hashkv_resp resp;
	char eps[1024], peer[24], err[512] = "", remote[24];

	snprintf(peer, sizeof(peer), "%" PRIx64, m->id);
	corrupt_eps(m, eps, sizeof(eps));
	for (size_t i = 0; i < m->n_peer_urls; i++) {
		oc = hashkv_fetch(m->peer_urls[i], l->rev, tls, timeout_ms, &resp, err, sizeof(err));
		if (oc == HASHKV_OK)
			break;
		log_warn("failed hash kv request", LOG_STR("local-member-id", self),
			 LOG_I64("requested-revision", l->rev),
			 LOG_STR("remote-peer-endpoint", m->peer_urls[i]), LOG_STR("error", err));
	}
	if (oc == HASHKV_COMPACTED || oc == HASHKV_FUTURE_REV) {
		log_warn(oc == HASHKV_FUTURE_REV ?
				 "cannot fetch hash from slow remote peer" :
				 "cannot fetch hash from remote peer; local member is behind",
			 LOG_STR("local-member-id", self), LOG_I64("local-member-revision", l->rev),
			 LOG_I64("local-member-compact-revision", l->compact_rev),
			 LOG_U64("local-member-hash", l->hash), LOG_STR("remote-peer-id", peer),
			 LOG_STR("remote-peer-endpoints", eps), LOG_STR("error", err));
		return false;
	}
	if (oc != HASHKV_OK || resp.hash == l->hash)
		return false;
	/* etcd's handler leaves the header's member id 0, and etcd logs it */
	snprintf(remote, sizeof(remote), "%" PRIx64, resp.member_id);
#define CORRUPT_FIELDS                                                                    \
	LOG_STR("local-member-id", self), LOG_I64("local-member-revision", l->rev),       \
		LOG_I64("local-member-compact-revision", l->compact_rev),                  \
		LOG_U64("local-member-hash", l->hash), LOG_STR("remote-peer-id", remote),  \
		LOG_STR("remote-peer-endpoints", eps),                                      \
		LOG_I64("remote-peer-revision", resp.revision),                             \
		LOG_I64("remote-peer-compact-revision", resp.compact_revision),             \
		LOG_U64("remote-peer-hash", resp.hash)
	if (l->compact_rev == resp.compact_revision) {
		log_warn("found different hash values from remote peer", CORRUPT_FIELDS);
		return true;
	}
	log_warn("found different compact revision values from remote peer", CORRUPT_FIELDS);
#undef CORRUPT_FIELDS
	return false;
}

int corrupt_initial_check(const struct cetcd_config *cfg)
{
	char self[24], timeout[32], text[128];
	uint64_t member_id, cluster_id;
	struct corrupt_local l;
	struct tls_ctx *tls = NULL;
	int mismatch = 0, rc;

	if (!corrupt_member_initialized(cfg))
		return 0; /* a new member has nothing to check (etcd's memberInitialized) */
	rc = member_ids_load(cfg, NULL, &member_id, &cluster_id);
	if (rc)
		return rc;
	snprintf(self, sizeof(self), "%" PRIx64, member_id);
	log_duration_text(config_request_timeout_ms(cfg), timeout);
	log_info("starting initial corruption check", LOG_STR("local-member-id", self),
		 LOG_STR("timeout", timeout));
	rc = corrupt_local_hash(cfg, &l);
	if (rc) {
		log_error("etcdmain: failed to fetch hash", LOG_STR("local-member-id", self),
			  LOG_STR("error", errmsg_get(rc)));
		membership_free(&l.members);
		return rc;
	}
	rc = corrupt_peers(cfg, &l);
	if (!rc)
		rc = corrupt_peer_tls(cfg, &tls);
	if (rc) {
		log_error("cannot ask peers for their hashes", LOG_STR("local-member-id", self),
			  LOG_STR("error", errmsg_get(rc)));
		membership_free(&l.members);
		return rc;
	}
	for (size_t i = 0; i < l.members.count; i++) {
		const struct member_info *m = &l.members.v[i];
		if (m->id != member_id && m->n_peer_urls)
			mismatch += corrupt_check_peer(cfg, self, &l, m, tls);
	}
	tls_ctx_free(tls);
	membership_free(&l.members);
	if (mismatch) {
		/* etcd's error as etcdmain prints it, with the id as the e2e
		 * suite expects it */
		snprintf(text, sizeof(text), "etcdmain: %016" PRIx64 " found data inconsistency with peers",
			 member_id);
		LOG_AT(LOG_LEVEL_FATAL, text, LOG_STR("local-member-id", self),
		       LOG_I64("mismatches", mismatch));
		return -EUCLEAN;
	}
	log_info("initial corruption checking passed; no corruption", LOG_STR("local-member-id", self));
	return 0;
}
