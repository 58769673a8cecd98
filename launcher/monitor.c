/*
 * The corruption monitor (--experimental-corrupt-check-time): etcd's
 * monitorKVHash and checkHashKV (etcdserver/corrupt.go). The launcher runs
 * it as a process of the member beside the others (itself, re-executed
 * with CORRUPT_MONITOR_ENV set), restarted and stopped like them. Every
 * interval, while this member leads, it takes its own HashKV at its
 * current revision (from its gatewayd, over the local socket), the
 * peers' at that revision (GET /members/hashkv on their peer URLs, as
 * etcd asks), waits until its store has applied what Raft committed (as
 * etcd's linearizable read does), takes its own again, and compares with
 * etcd's rules. On a mismatch it raises the CORRUPT alarm for member 0,
 * as etcd 3.4 does (it cannot tell which member's data is wrong), with
 * Maintenance.Alarm through its gatewayd: the cluster then refuses writes
 * with "etcdserver: corrupt cluster".
 *
 * The peers are the members as this member's gatewayd lists them
 * (Cluster.MemberList over the local socket), or those of
 * --initial-cluster while it cannot be asked.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "shm/metrics.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "config/config.h"
#include "config/tls_config.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "launcher/grpcc.h"
#include "base/sock/gwsock.h"
#include "cluster/hashkv.h"
#include "launcher/corrupt.h"
#include "base/log/log.h"
#include "shm/region.h"
#include "shm/status.h"
#include "base/tls/tls.h"

struct monitor {
	struct cetcd_config cfg;
	struct shm_region *r;
	uint64_t self;
	char self_str[24];
	int timeout_ms;
	struct initial_cluster peers;
	struct tls_ctx *tls;
};

/* This member's HashKV at rev (0: current), from one of its gatewayds. */
static int monitor_local_hash(struct monitor *m, struct hashkv_resp *out)
{
	char err[512] = "";
	uint32_t n = m->cfg.gateways ? m->cfg.gateways : 1;

	for (uint32_t i = 0; i < n; i++) {
		struct gwsock_addr a;
		if (gwsock_addr_of(m->cfg.data_dir, i, &a))
			break;
		if (hashkv_fetch_local(&a, 0, m->timeout_ms, out, err, sizeof(err)) == HASHKV_OK)
			return 0;
	}
	log_warn("cannot get this member's hash from its gateways", LOG_STR("error", err));
	return -EAGAIN;
}

/* etcd's linearizableReadNotify, as far as the leader goes: waits until
 * the store applied what Raft committed when it was called. */
static int monitor_wait_applied(struct monitor *m)
{
	struct status_raftd rs;
	struct status_stored st;
	int waited = 0;

	if (status_raftd_read(m->r, &rs))
		return -EAGAIN;
	while (status_stored_read(m->r, &st) == 0 && st.applied_index < rs.commit_index) {
		if (waited >= m->timeout_ms)
			return -ETIMEDOUT;
		usleep(10 * 1000);
		waited += 10;
	}
	return 0;
}

/* A unary call of path with req on this member's gatewayd. */
static int monitor_call(struct monitor *m, const char *path, const ProtobufCMessage *req,
			uint8_t **resp, size_t *len, char *text, size_t cap)
{
	return grpcc_member_unary(&m->cfg, path, req, m->timeout_ms, resp, len, text, cap);
}

/* Raises CORRUPT for member 0 through this member's gatewayd. */
static void monitor_raise(struct monitor *m)
{
	Etcdserverpb__AlarmRequest req = ETCDSERVERPB__ALARM_REQUEST__INIT;
	uint8_t *resp = NULL;
	size_t len = 0;
	char text[256] = "";
	int rc;

	req.action = ETCDSERVERPB__ALARM_REQUEST__ALARM_ACTION__ACTIVATE;
	req.memberid = 0;
	req.alarm = ETCDSERVERPB__ALARM_TYPE__CORRUPT;
	rc = monitor_call(m, "/etcdserverpb.Maintenance/Alarm", &req.base, &resp, &len, text,
			  sizeof(text));
	free(resp);
	if (rc)
		log_warn("failed to raise the CORRUPT alarm", LOG_STR("local-member-id", m->self_str),
			 LOG_I64("code", rc), LOG_STR("error", rc > 0 ? text : strerror(-rc)));
}

/* A peer to ask: its id and peer URLs (not owned). */
struct monitor_peer {
	uint64_t id;
	char **urls;
	size_t n_urls;
};

/* The members: as the gatewayd lists them (*list holds the response,
 * freed by the caller with etcdserverpb__member_list_response__free_unpacked),
 * else --initial-cluster's. A malloc'ed array in *out. */
static int monitor_members(struct monitor *m, Etcdserverpb__MemberListResponse **list,
			   struct monitor_peer **out, size_t *n)
{
	Etcdserverpb__MemberListRequest req = ETCDSERVERPB__MEMBER_LIST_REQUEST__INIT;
	uint8_t *resp = NULL;
	size_t len = 0, count;
	char text[256];

	*list = NULL;
	if (monitor_call(m, "/etcdserverpb.Cluster/MemberList", &req.base, &resp, &len, text,
			 sizeof(text)) == 0)
		*list = etcdserverpb__member_list_response__unpack(NULL, len, resp);
	free(resp);
	count = *list ? (*list)->n_members : m->peers.count;
	*out = calloc(count ? count : 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		if (*list)
			(*out)[i] = (struct monitor_peer){ (*list)->members[i]->id,
							   (*list)->members[i]->peerurls,
							   (*list)->members[i]->n_peerurls };
		else
			(*out)[i] = (struct monitor_peer){ m->peers.v[i].id, m->peers.v[i].peer_urls,
							   m->peers.v[i].n_peer_urls };
	}
	*n = count;
	return 0;
}

/* etcd's checkHashKV. 0, or why no check could be made. */
static int monitor_check(struct monitor *m)
{
	Etcdserverpb__MemberListResponse *list;
	struct monitor_peer *peers = NULL;
	struct hashkv_resp l1, l2, *got;
	bool *ok, alarmed = false;
	size_t checked = 0, np = 0;
	char peer[24];
	int rc;

	if ((rc = monitor_local_hash(m, &l1)))
		return rc;
	if ((rc = monitor_members(m, &list, &peers, &np)))
		goto out_list;
	got = calloc(np ? np : 1, sizeof(*got));
	ok = calloc(np ? np : 1, sizeof(*ok));
	if (!got || !ok) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < np; i++) {
		const struct monitor_peer *p = &peers[i];
		char err[512];
		if (p->id == m->self)
			continue;
		for (size_t u = 0; u < p->n_urls && !ok[i]; u++) {
			ok[i] = hashkv_fetch(p->urls[u], l1.revision, m->tls, m->timeout_ms, &got[i],
					     err, sizeof(err)) == HASHKV_OK;
			if (!ok[i])
				log_warn("failed hash kv request", LOG_STR("local-member-id", m->self_str),
					 LOG_I64("requested-revision", l1.revision),
					 LOG_STR("remote-peer-endpoint", p->urls[u]),
					 LOG_STR("error", err));
		}
	}
	if ((rc = monitor_wait_applied(m)) || (rc = monitor_local_hash(m, &l2)))
		goto out_free;
#define MONITOR_MISMATCH()                \
	do {                              \
		if (!alarmed)             \
			monitor_raise(m); \
		alarmed = true;           \
	} while (0)
	if (l2.hash != l1.hash && l2.revision == l1.revision &&
	    l2.compact_revision == l1.compact_revision) {
		log_warn("found hash mismatch", LOG_I64("revision-1", l1.revision),
			 LOG_I64("compact-revision-1", l1.compact_revision), LOG_U64("hash-1", l1.hash),
			 LOG_I64("revision-2", l2.revision),
			 LOG_I64("compact-revision-2", l2.compact_revision), LOG_U64("hash-2", l2.hash));
		MONITOR_MISMATCH();
	}
	for (size_t i = 0; i < np; i++) {
		if (!ok[i])
			continue;
		checked++;
		snprintf(peer, sizeof(peer), "%" PRIx64, peers[i].id);
		if (got[i].revision > l2.revision) {
			log_warn("revision from follower must be less than or equal to leader's",
				 LOG_I64("leader-revision", l2.revision),
				 LOG_I64("follower-revision", got[i].revision),
				 LOG_STR("follower-peer-id", peer));
			MONITOR_MISMATCH();
		}
		if (got[i].compact_revision > l2.compact_revision) {
			log_warn("compact revision from follower must be less than or equal to leader's",
				 LOG_I64("leader-compact-revision", l2.compact_revision),
				 LOG_I64("follower-compact-revision", got[i].compact_revision),
				 LOG_STR("follower-peer-id", peer));
			MONITOR_MISMATCH();
		}
		if (got[i].compact_revision == l1.compact_revision && got[i].hash != l1.hash) {
			log_warn("same compact revision then hashes must match",
				 LOG_I64("leader-compact-revision", l2.compact_revision),
				 LOG_U64("leader-hash", l1.hash),
				 LOG_I64("follower-compact-revision", got[i].compact_revision),
				 LOG_U64("follower-hash", got[i].hash), LOG_STR("follower-peer-id", peer));
			MONITOR_MISMATCH();
		}
	}
#undef MONITOR_MISMATCH
	log_info("finished peer corruption check", LOG_U64("number-of-peers-checked", checked));
out_free:
	free(got);
	free(ok);
out_list:
	free(peers);
	if (list)
		etcdserverpb__member_list_response__free_unpacked(list, NULL);
	return rc;
}

static int monitor_open(struct monitor *m)
{
	struct tls_info info;
	uint64_t cid;
	int rc = member_ids_load(&m->cfg, m->r, &m->self, &cid);

	if (rc)
		return rc;
	snprintf(m->self_str, sizeof(m->self_str), "%" PRIx64, m->self);
	m->timeout_ms = (int)config_request_timeout_ms(&m->cfg);
	rc = initial_cluster_parse(m->cfg.initial_cluster, m->cfg.initial_cluster_token, &m->peers);
	if (rc)
		return rc;
	rc = config_tls_info(&m->cfg, TLS_SIDE_PEER, &info);
	if (!rc && !tls_info_is_empty(&info))
		rc = tls_ctx_new(&info, TLS_CLIENT, &m->tls);
	tls_info_free(&info);
	return rc;
}

int corrupt_monitor_main(int argc, char **argv)
{
	static struct monitor m;
	struct signalfd_siginfo si;
	sigset_t set;
	char interval[32];
	int status, sfd;
	uint64_t every_ms;

	if (config_daemon_start(&m.cfg, CONFIG_PROG_LAUNCHER, "corrupt-check", argc, argv, &m.r,
				&status))
		return status;
	shm_metrics_own(shm_metrics_block(m.r, SHM_METRICS_MONITOR));
	status = CONFIG_EXIT_FATAL;
	every_ms = (uint64_t)m.cfg.experimental_corrupt_check_time_ns / 1000000;
	if (every_ms == 0) {
		log_info("corruption checking is off (--experimental-corrupt-check-time is 0)");
		status = 0;
		sfd = -1;
		goto out;
	}
	config_stop_signals(&set);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0 || monitor_open(&m)) {
		log_error("cannot start the corruption monitor", LOG_U64("interval-ms", every_ms));
		goto out;
	}
	log_duration_text(every_ms, interval);
	log_info("enabled corruption checking", LOG_STR("local-member-id", m.self_str),
		 LOG_STR("interval", interval));
	for (;;) {
		struct pollfd pfd = { .fd = sfd, .events = POLLIN };
		struct status_raftd rs;
		int n = poll(&pfd, 1, every_ms > INT32_MAX ? INT32_MAX : (int)every_ms);
		if (n > 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			break;
		if (n != 0 || status_raftd_read(m.r, &rs) || !rs.is_leader)
			continue;
		int rc = monitor_check(&m);
		if (rc)
			log_warn("failed to check hash KV", LOG_STR("error", strerror(-rc)));
	}
	status = 0;
out:
	if (sfd >= 0)
		close(sfd);
	tls_ctx_free(m.tls);
	initial_cluster_free(&m.peers);
	shm_region_detach(m.r);
	config_free(&m.cfg);
	return status;
}
