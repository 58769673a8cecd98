/* raftd's roster: the membership as raftd applies it (see roster.h). */
#include "raftd/roster.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raftd/alloc.h"
#include "raftd/raft/raft.h"
#include "config/config.h"
#include "cluster/member_json.h"
#include "base/log/log.h"

int roster_init(struct roster *m, uint64_t self_id, uint64_t cluster_id, const char *name,
		const struct config_urls *client_urls, uint64_t timeout_ms, uint64_t tick_ms)
{
	static const struct config_urls no_urls = { 0 };
	struct timespec ts;

	if (!client_urls)
		client_urls = &no_urls;
	memset(m, 0, sizeof(*m));
	membership_init(&m->ms);
	m->self_id = self_id;
	m->cluster_id = cluster_id;
	m->attr.id = self_id;
	m->attr.name = strdup(name ? name : "");
	m->attr.client_urls = calloc(client_urls->count ? client_urls->count : 1,
				     sizeof(*m->attr.client_urls));
	if (!m->attr.name || !m->attr.client_urls)
		goto out_nomem;
	for (size_t i = 0; i < client_urls->count; i++) {
		m->attr.client_urls[i] = strdup(client_urls->v[i].text);
		if (!m->attr.client_urls[i])
			goto out_nomem;
		m->attr.n_client_urls++;
	}
	m->publish_timeout_ms = timeout_ms;
	m->timeout_ticks = tick_ms ? (timeout_ms + tick_ms - 1) / tick_ms : 1;
	/* etcd's idutil: the member id's low 16 bits, then milliseconds
	 * since the epoch shifted left by 8, then a counter */
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	m->req_next = (self_id & 0xffff) << 48 | ((now_ms << 8) & ((UINT64_C(1) << 48) - 1));
	return 0;

out_nomem:
	roster_free(m);
	return -ENOMEM;
}

void roster_free(struct roster *m)
{
	membership_free(&m->ms);
	member_info_clear(&m->attr);
}

/* ---- logging ---- */

static void roster_hex(uint64_t v, char out[24])
{
	snprintf(out, 24, "%" PRIx64, v);
}

static void roster_log_version(struct roster *m, bool initial)
{
	char ver[24], cid[24], id[24];

	snprintf(ver, sizeof(ver), "%u.%u", m->ms.version_major, m->ms.version_minor);
	roster_hex(m->cluster_id, cid);
	roster_hex(m->self_id, id);
	if (initial)
		log_info("set initial cluster version", LOG_STR("cluster-id", cid),
			 LOG_STR("local-member-id", id), LOG_STR("cluster-version", ver));
	else
		log_info("updated cluster version", LOG_STR("cluster-id", cid),
			 LOG_STR("local-member-id", id), LOG_STR("cluster-version", ver));
	log_info("enabled capabilities for version", LOG_STR("cluster-version", ver));
}

void roster_recovered(struct roster *m)
{
	char ver[24], cid[24], id[24];

	if (!m->ms.has_version)
		return;
	snprintf(ver, sizeof(ver), "%u.%u", m->ms.version_major, m->ms.version_minor);
	roster_hex(m->cluster_id, cid);
	roster_hex(m->self_id, id);
	log_info("set cluster version from store", LOG_STR("cluster-id", cid),
		 LOG_STR("local-member-id", id), LOG_STR("cluster-version", ver));
	log_info("enabled capabilities for version", LOG_STR("cluster-version", ver));
}

static void roster_log_published(struct roster *m)
{
	char id[24], cid[24], path[48], urls[512], attr[768], timeout[32];

	roster_hex(m->self_id, id);
	roster_hex(m->cluster_id, cid);
	membership_attributes_path(m->self_id, path);
	member_strings_text(m->attr.client_urls, m->attr.n_client_urls, urls, sizeof(urls));
	snprintf(attr, sizeof(attr), "{Name:%s ClientURLs:%s}", m->attr.name, urls);
	log_duration_text(m->publish_timeout_ms, timeout);
	log_info("published local member to cluster through raft", LOG_STR("local-member-id", id),
		 LOG_STR("local-member-attributes", attr), LOG_STR("request-path", path),
		 LOG_STR("cluster-id", cid), LOG_STR("publish-timeout", timeout));
}

static void roster_log_change(struct roster *m, const struct membership_result *res)
{
	char id[24], cid[24], peer[24], urls[512] = "[]";
	const char *what = NULL;

	roster_hex(m->self_id, id);
	roster_hex(m->cluster_id, cid);
	roster_hex(res->node_id, peer);
	if (res->member)
		member_strings_text(res->member->peer_urls, res->member->n_peer_urls, urls,
				  sizeof(urls));
	switch (res->change) {
	case MEMBERSHIP_ADDED:
		what = res->member && res->member->is_learner ? "added learner member" :
								"added member";
		break;
	case MEMBERSHIP_PROMOTED:
		what = "promote member";
		break;
	case MEMBERSHIP_REMOVED:
		what = "removed member";
		break;
	case MEMBERSHIP_UPDATED:
		what = "updated member";
		break;
	case MEMBERSHIP_REFUSED:
		log_warn("refused a configuration change", LOG_STR("cluster-id", cid),
			 LOG_STR("local-member-id", id), LOG_STR("peer-id", peer),
			 LOG_STR("error", membership_error_text(res->error)));
		return;
	default:
		return;
	}
	log_info(what, LOG_STR("cluster-id", cid), LOG_STR("local-member-id", id),
		 LOG_STR("peer-id", peer), LOG_STR("peer-urls", urls));
}

/* ---- applying ---- */

int roster_apply(struct roster *m, const struct raft_entry *e, struct membership_result *out)
{
	struct membership_result local, *resp = out ? out : &local;
	bool had_version = m->ms.has_version;
	int rc = membership_apply(&m->ms, e->type, e->data, e->len, resp);
	const struct membership_result res = *resp;

	if (rc == -EBADMSG) {
		memset(resp, 0, sizeof(*resp));
		log_error("skipped a configuration change that cannot be decoded",
			  LOG_U64("index", e->index), LOG_U64("len", e->len));
		return 0;
	}
	if (rc)
		return rc;
	switch (res.change) {
	case MEMBERSHIP_VERSION:
		if (res.request_id == m->version_req)
			m->version_req = 0;
		roster_log_version(m, !had_version);
		break;
	case MEMBERSHIP_ATTRIBUTES:
		if (res.node_id == m->self_id && m->publish_req &&
		    res.request_id == m->publish_req) {
			m->publish_req = 0;
			m->published = true;
			m->publish_index = e->index;
		}
		break;
	default:
		roster_log_change(m, &res);
		break;
	}
	return 0;
}

bool roster_stored_applied(struct roster *m, uint64_t index)
{
	if (m->publish_index && index >= m->publish_index) {
		m->publish_index = 0;
		roster_log_published(m);
		return true;
	}
	return false;
}

/* ---- proposing ---- */

void roster_tick(struct roster *m)
{
	m->publish_age++;
	m->version_age++;
}

/* Proposes a v2 PUT; returns its request id, or 0 if the core refused it
 * (not the leader, out of memory: tried again later). */
static uint64_t roster_propose_put(struct roster *m, struct raft *r, roster_forward_fn fwd,
				   void *fwd_arg, const char *path, const char *val)
{
	uint64_t id = m->req_next++;
	struct raft_entry e = { .type = 0 };
	size_t len;

	if (membership_v2_put(id, path, val, &e.data, &len))
		return 0;
	e.len = (uint32_t)len;
	int rc = raft_propose(r, &e, 1);
	if (rc == -EAGAIN && fwd && raft_leader(r))
		rc = fwd(fwd_arg, raft_leader(r), &e, 1);
	free(e.data);
	return rc ? 0 : id;
}

/* The cluster version the leader decides: the lowest server version of
 * the members, as major.minor.0. Every member of a cetcd cluster runs
 * this version; peers of other versions report theirs over the peer
 * protocol. */
static void roster_decide_version(char out[16])
{
	unsigned major = 0, minor = 0;
	sscanf(CETCD_ETCD_SERVER_VERSION, "%u.%u", &major, &minor);
	snprintf(out, 16, "%u.%u.0", major, minor);
}

void roster_propose(struct roster *m, struct raft *r, roster_forward_fn forward,
		    void *forward_arg)
{
	if (!raft_leader(r))
		return;
	if (!m->published && (!m->publish_req || m->publish_age >= m->timeout_ticks)) {
		char path[48], *val;
		size_t len;
		membership_attributes_path(m->self_id, path);
		if (member_json_encode_attributes(&m->attr, &val, &len) == 0) {
			uint64_t id = roster_propose_put(m, r, forward, forward_arg, path, val);
			free(val);
			if (id) {
				m->publish_req = id;
				m->publish_age = 0;
			}
		}
	}
	if (!raft_is_leader(r) || m->ms.has_version)
		return;
	if (m->version_req && m->version_age < m->timeout_ticks)
		return;
	/* etcd decides once the leader's first entry of its term committed */
	const struct raftlog *log = raft_log(r);
	uint64_t commit = raft_commit_index(r);
	if (commit <= log->snap_index || raftlog_term(log, commit) != raft_term(r))
		return;
	char ver[16];
	roster_decide_version(ver);
	uint64_t id = roster_propose_put(m, r, NULL, NULL, "/0/version", ver);
	if (id) {
		m->version_req = id;
		m->version_age = 0;
	}
}

int roster_json(const struct membership *ms, char **out, size_t *len)
{
	size_t n = 1;
	char *json = raftd_malloc(3); /* room for a line end after it */

	if (!json)
		return -ENOMEM;
	json[0] = '[';
	for (size_t i = 0; i < ms->count; i++) {
		char *one;
		size_t n1;
		if (member_json_encode(&ms->v[i], &one, &n1))
			goto out_nomem;
		char *j = raftd_realloc(json, n + n1 + 3);
		if (!j) {
			free(one);
			goto out_nomem;
		}
		json = j;
		if (i)
			json[n++] = ',';
		memcpy(json + n, one, n1);
		n += n1;
		free(one);
	}
	json[n++] = ']';
	*out = json;
	*len = n;
	return 0;

out_nomem:
	raftd_free(json);
	return -ENOMEM;
}
