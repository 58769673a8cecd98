/* Joining a running cluster (see join.h). */
#include "raftd/join.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/hex/hex.h"
#include "raftd/peer/peer_fetch.h"
#include "config/config.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "cluster/member_json.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"

/* etcd's timeout for each GET /members (GetClusterFromRemotePeers) and,
 * since its getVersion has none, a bound of cetcd's for GET /version. */
#define JOIN_MEMBERS_TIMEOUT_MS 10000
#define JOIN_VERSION_TIMEOUT_MS 10000
/* etcd's MinClusterVersion. */
#define JOIN_MIN_CLUSTER_VERSION "3.0.0"

static int join_strcmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void join_id_str(uint64_t id, char out[17])
{
	snprintf(out, 17, "%" PRIx64, id);
}

/* Step 1: etcd's VerifyJoinExisting. */
static int join_verify(const struct cetcd_config *cfg, const struct initial_cluster *c,
		       char *why, size_t cap)
{
	if (!initial_cluster_find(c, cfg->name)) {
		snprintf(why, cap, "couldn't find local name \"%s\" in the initial cluster configuration",
			 cfg->name);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->count; i++)
		for (size_t j = 0; j < c->v[i].n_peer_urls; j++)
			for (size_t k = i; k < c->count; k++)
				for (size_t l = k == i ? j + 1 : 0; l < c->v[k].n_peer_urls; l++)
					if (!strcmp(c->v[i].peer_urls[j], c->v[k].peer_urls[l])) {
						snprintf(why, cap, "initial cluster %s has duplicate url",
							 cfg->initial_cluster);
						return -EINVAL;
					}
	if (cfg->discovery && cfg->discovery[0]) {
		snprintf(why, cap, "discovery URL should not be set when joining existing initial cluster");
		return -EINVAL;
	}
	return 0;
}

/* The peer URLs of the members other than name, sorted (etcd's
 * getRemotePeerURLs); the array is malloc'ed, its strings are c's. */
static int join_remote_urls(const struct initial_cluster *c, const char *name, const char ***out,
			    size_t *n)
{
	size_t total = 0, k = 0;
	for (size_t i = 0; i < c->count; i++)
		total += c->v[i].n_peer_urls;
	const char **v = malloc((total ? total : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < c->count; i++)
		if (strcmp(c->v[i].name, name) != 0)
			for (size_t j = 0; j < c->v[i].n_peer_urls; j++)
				v[k++] = c->v[i].peer_urls[j];
	qsort(v, k, sizeof(*v), join_strcmp);
	*out = v;
	*n = k;
	return 0;
}

static void join_members_free(struct member_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		member_info_clear(&v[i]);
	free(v);
}

/* Step 2: etcd's getClusterFromRemotePeers. */
static int join_fetch(struct tls_ctx *tls, const char *const *urls, size_t n_urls,
		      struct member_info **members, size_t *n_members, uint64_t *cluster_id,
		      char *why, size_t cap)
{
	char addr[600];

	for (size_t i = 0; i < n_urls; i++) {
		struct peer_fetch_resp resp;
		if (config_stop_pending()) {
			snprintf(why, cap, "stopped by a signal while asking peers for the members");
			return -EINTR;
		}
		snprintf(addr, sizeof(addr), "%s/members", urls[i]);
		int rc = peer_fetch(tls, urls[i], "GET", "/members", JOIN_MEMBERS_TIMEOUT_MS, &resp);
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			log_warn("failed to get cluster response", LOG_STR("address", addr),
				 LOG_STR("error", errmsg_get(rc)));
			continue;
		}
		struct member_info *v = NULL;
		size_t nv = 0;
		rc = member_json_decode_array(resp.body, resp.len, &v, &nv);
		if (rc == -ENOMEM) {
			peer_fetch_free(&resp);
			return rc;
		}
		if (rc) {
			log_warn("failed to unmarshal cluster response", LOG_STR("address", addr),
				 LOG_STR("error", resp.status == 200 ?
							"invalid character in the members' JSON" :
							"the peer did not answer with the members"),
				 LOG_I64("status", resp.status));
			peer_fetch_free(&resp);
			continue;
		}
		peer_fetch_free(&resp);
		uint64_t cid;
		size_t cid_len = strlen(resp.cluster_id);
		if (cid_len > 16 || hex_parse_u64(resp.cluster_id, cid_len, &cid)) {
			log_warn("failed to parse cluster ID", LOG_STR("address", addr),
				 LOG_STR("header", resp.cluster_id),
				 LOG_STR("error", "invalid ID in the X-Etcd-Cluster-ID header"));
			join_members_free(v, nv);
			continue;
		}
		if (nv == 0) {
			snprintf(why, cap, "cannot fetch cluster info from peer urls: failed to get raft cluster member(s) from the given URLs");
			free(v);
			return -EHOSTUNREACH;
		}
		*members = v;
		*n_members = nv;
		*cluster_id = cid;
		return 0;
	}
	snprintf(why, cap, "cannot fetch cluster info from peer urls: could not retrieve cluster information from the given URLs");
	return -EHOSTUNREACH;
}

/* Whether two sets of peer URLs are the same (etcd's URLStringsEqual
 * over URLs that need no resolving: the sorted texts compare equal). */
static bool join_urls_equal(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	const char **sa = malloc((na ? na : 1) * sizeof(*sa));
	const char **sb = malloc((nb ? nb : 1) * sizeof(*sb));
	bool eq = sa && sb;
	if (eq) {
		memcpy(sa, a, na * sizeof(*sa));
		memcpy(sb, b, nb * sizeof(*sb));
		qsort(sa, na, sizeof(*sa), join_strcmp);
		qsort(sb, nb, sizeof(*sb), join_strcmp);
		for (size_t i = 0; i < na && eq; i++)
			eq = strcmp(sa[i], sb[i]) == 0;
	}
	free(sa);
	free(sb);
	return eq;
}

static int join_info_cmp(const void *a, const void *b)
{
	const struct member_info *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The running cluster as etcd's RaftCluster.String writes it, roughly:
 * for the error that says it does not match. */
static void join_cluster_str(const struct member_info *v, size_t n, uint64_t cid, char *out,
			     size_t cap)
{
	char id[17], urls[512];
	size_t off;

	join_id_str(cid, id);
	off = (size_t)snprintf(out, cap, "{ClusterID:%s Members:[", id);
	for (size_t i = 0; i < n && off < cap; i++) {
		join_id_str(v[i].id, id);
		member_strings_text(v[i].peer_urls, v[i].n_peer_urls, urls, sizeof(urls));
		off += (size_t)snprintf(out + off, cap - off,
					"%s&{ID:%s RaftAttributes:{PeerURLs:%s IsLearner:%s} Attributes:{Name:%s}}",
					i ? " " : "", id, urls, v[i].is_learner ? "true" : "false",
					v[i].name ? v[i].name : "");
	}
	if (off < cap)
		snprintf(out + off, cap - off, "] RemovedMemberIDs:[]}");
}

/* Step 3: etcd's ValidateClusterAndAssignIDs. */
static int join_assign_ids(struct initial_cluster *local, const struct member_info *ems, size_t n,
			   uint64_t cid, char *why, size_t cap)
{
	char cl[2048], urls[512], id[17];

	join_cluster_str(ems, n, cid, cl, sizeof(cl));
	if (n != local->count) {
		snprintf(why, cap, "error validating peerURLs %s: member count is unequal", cl);
		return -ENOENT;
	}
	for (size_t i = 0; i < n; i++) {
		bool ok = false;
		for (size_t j = 0; j < local->count && !ok; j++)
			if (join_urls_equal(ems[i].peer_urls, ems[i].n_peer_urls,
					    local->v[j].peer_urls, local->v[j].n_peer_urls)) {
				local->v[j].id = ems[i].id;
				ok = true;
			}
		if (!ok) {
			join_id_str(ems[i].id, id);
			member_strings_text(ems[i].peer_urls, ems[i].n_peer_urls, urls, sizeof(urls));
			snprintf(why, cap,
				 "error validating peerURLs %s: PeerURLs: no match found for existing member (%s, %s), last resolver error (<nil>)",
				 cl, id, urls);
			return -ENOENT;
		}
	}
	qsort(local->v, local->count, sizeof(*local->v), join_info_cmp);
	local->cluster_id = cid;
	return 0;
}

int join_parse_versions(const char *body, size_t len, char *cluster_version, size_t cap)
{
	static const char key[] = "\"etcdcluster\"";
	const char *p = body, *end = body + len;

	while (p < end && strchr(" \t\r\n", *p) && *p)
		p++;
	if (p >= end || *p != '{' || cap == 0)
		return -EBADMSG;
	for (;;) {
		const char *k = p;
		size_t left = (size_t)(end - k);
		/* the key, case-insensitively as Go matches it */
		while (left >= sizeof(key) - 1 && strncasecmp(k, key, sizeof(key) - 1) != 0) {
			k++;
			left--;
		}
		if (left < sizeof(key) - 1)
			return -EBADMSG;
		p = k + sizeof(key) - 1;
		while (p < end && strchr(" \t\r\n", *p) && *p)
			p++;
		if (p >= end || *p != ':')
			continue;
		p++;
		while (p < end && strchr(" \t\r\n", *p) && *p)
			p++;
		if (p >= end || *p != '"')
			return -EBADMSG;
		p++;
		size_t n = 0;
		while (p + n < end && p[n] != '"' && p[n] != '\\')
			n++;
		if (p + n >= end || p[n] != '"' || n >= cap)
			return -EBADMSG;
		memcpy(cluster_version, p, n);
		cluster_version[n] = '\0';
		return 0;
	}
}

int join_parse_semver(const char *text, unsigned v[3])
{
	const char *p = text;
	for (int i = 0; i < 3; i++) {
		unsigned long x = 0;
		const char *start = p;
		while (*p >= '0' && *p <= '9' && x < 100000)
			x = x * 10 + (unsigned long)(*p++ - '0');
		if (p == start || x >= 100000 || (p - start > 1 && *start == '0'))
			return -EINVAL;
		v[i] = (unsigned)x;
		if (i < 2 && *p++ != '.')
			return -EINVAL;
	}
	return *p == '\0' || *p == '-' || *p == '+' ? 0 : -EINVAL;
}

static int join_semver_cmp(const unsigned a[3], const unsigned b[3])
{
	for (int i = 0; i < 3; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

/* Step 4: etcd's isCompatibleWithCluster over the other members' GET
 * /version answers. */
static bool join_compatible(struct tls_ctx *tls, const struct initial_cluster *c, uint64_t self)
{
	unsigned minv[3], maxv[3], cv[3];
	bool ok = false;
	char rid[17], addr[600];

	join_parse_semver(JOIN_MIN_CLUSTER_VERSION, minv);
	join_parse_semver(CETCD_ETCD_SERVER_VERSION, maxv);
	maxv[2] = 0; /* etcd compares major.minor only */
	for (size_t i = 0; i < c->count; i++) {
		const struct member_info *m = &c->v[i];
		char ver[64] = "";
		bool got = false;
		if (m->id == self)
			continue;
		join_id_str(m->id, rid);
		for (size_t j = 0; j < m->n_peer_urls && !got; j++) {
			struct peer_fetch_resp resp;
			snprintf(addr, sizeof(addr), "%s/version", m->peer_urls[j]);
			int rc = peer_fetch(tls, m->peer_urls[j], "GET", "/version",
					    JOIN_VERSION_TIMEOUT_MS, &resp);
			if (rc) {
				log_warn("failed to reach the peer URL", LOG_STR("address", addr),
					 LOG_STR("remote-member-id", rid),
					 LOG_STR("error", errmsg_get(rc)));
				continue;
			}
			if (join_parse_versions(resp.body, resp.len, ver, sizeof(ver)))
				log_warn("failed to unmarshal response", LOG_STR("address", addr),
					 LOG_STR("remote-member-id", rid),
					 LOG_STR("error", "not a version.Versions"));
			else
				got = true;
			peer_fetch_free(&resp);
		}
		if (!got) {
			log_warn("failed to get version", LOG_STR("remote-member-id", rid));
			continue;
		}
		if (join_parse_semver(ver, cv)) {
			log_warn("failed to parse cluster version of remote member",
				 LOG_STR("remote-member-id", rid),
				 LOG_STR("remote-member-cluster-version", ver),
				 LOG_STR("error", "not a semantic version"));
			continue;
		}
		if (join_semver_cmp(cv, minv) < 0) {
			log_warn("cluster version of remote member is not compatible; too low",
				 LOG_STR("remote-member-id", rid),
				 LOG_STR("remote-member-cluster-version", ver),
				 LOG_STR("minimum-cluster-version-supported", JOIN_MIN_CLUSTER_VERSION));
			return false;
		}
		if (join_semver_cmp(maxv, cv) < 0) {
			log_warn("cluster version of remote member is not compatible; too high",
				 LOG_STR("remote-member-id", rid),
				 LOG_STR("remote-member-cluster-version", ver),
				 LOG_STR("minimum-cluster-version-supported", JOIN_MIN_CLUSTER_VERSION));
			return false;
		}
		ok = true;
	}
	return ok;
}

int join_cluster(const struct cetcd_config *cfg, struct tls_ctx *tls,
		 struct initial_cluster *cluster, uint64_t *member_id)
{
	struct member_info *ems = NULL;
	size_t n_ems = 0, n_urls = 0;
	const char **urls = NULL;
	uint64_t cid = 0;
	char why[4096];
	int rc;

	why[0] = '\0';
	rc = join_verify(cfg, cluster, why, sizeof(why));
	if (!rc)
		rc = join_remote_urls(cluster, cfg->name, &urls, &n_urls);
	if (!rc)
		rc = join_fetch(tls, urls, n_urls, &ems, &n_ems, &cid, why, sizeof(why));
	if (!rc)
		rc = join_assign_ids(cluster, ems, n_ems, cid, why, sizeof(why));
	if (!rc) {
		*member_id = initial_cluster_find(cluster, cfg->name)->id;
		if (!join_compatible(tls, cluster, *member_id)) {
			snprintf(why, sizeof(why), "incompatible with current running cluster");
			rc = -EPROTO;
		}
	}
	if (rc == -ENOMEM)
		snprintf(why, sizeof(why), "out of memory");
	if (rc)
		log_error("discovery failed", LOG_STR("error", why));
	else {
		char id[17], c[17];
		join_id_str(*member_id, id);
		join_id_str(cid, c);
		log_info("joining the running cluster", LOG_STR("local-member-id", id),
			 LOG_STR("cluster-id", c), LOG_U64("members", cluster->count));
	}
	join_members_free(ems, n_ems);
	free(urls);
	return rc;
}
