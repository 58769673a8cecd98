/* raftd: a member's Raft process.
 *
 * It claims the raftd role in the member region, resolves the member and
 * cluster ids (its WAL's; a new member's from the flags, or from the
 * running cluster it joins: join.h) and publishes them in the region for
 * stored and gatewayd, opens (or creates) the member's WAL, and runs the
 * event loop (loop.h): proposals and read-index
 * requests from the gateways and stored in, committed entries out to
 * stored, attach hellos answered, its status published; peers speak
 * etcd's rafthttp with it on the peer URLs (peer.h), over TLS on https
 * ones. SIGTERM, SIGINT or SIGHUP (config_stop_signals) stops it
 * cleanly, after the WAL's last batch is durable.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "raftd/bootstrap.h"
#include "raftd/join.h"
#include "raftd/loop.h"
#include "raftd/peer/peer.h"
#include "config/config.h"
#include "config/tls_config.h"
#include "base/diskio/diskio.h"
#include "shm/hello.h"
#include "base/log/log.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "base/log/errmsg.h"
#include "base/tls/tls.h"

/* etcd's peer TLS set-up (configurePeerListeners and the peer
 * transport's client side): the info from the flags, its log line, and
 * the server and client contexts. Without https peer URLs and peer TLS
 * files, both stay NULL. */
static int peer_tls(const struct cetcd_config *c, struct tls_ctx **server, struct tls_ctx **client)
{
	struct tls_info info;
	bool https = false;
	int rc;

	*server = *client = NULL;
	for (size_t i = 0; i < c->listen_peer_urls.count; i++)
		https |= strcmp(c->listen_peer_urls.v[i].scheme, "https") == 0 ||
			 strcmp(c->listen_peer_urls.v[i].scheme, "unixs") == 0;
	if (!https && !c->peer_cert_file[0] && !c->peer_auto_tls)
		return 0;
	rc = config_tls_info(c, TLS_SIDE_PEER, &info);
	if (rc) {
		log_error("failed to get peer self-signed certs", LOG_STR("error", errmsg_get(rc)));
		return rc;
	}
	if (tls_info_is_empty(&info)) {
		tls_info_free(&info);
		return 0;
	}
	config_tls_log_starting("starting with peer TLS", &info, c);
	rc = tls_ctx_new(&info, TLS_SERVER, server);
	if (!rc)
		rc = tls_ctx_new(&info, TLS_CLIENT, client);
	tls_info_free(&info);
	if (rc) {
		log_error("cannot set up peer TLS", LOG_STR("error", errmsg_get(rc)));
		tls_ctx_free(*server);
		*server = NULL;
	}
	return rc;
}

/* The WAL directory: --wal-dir, else <data-dir>/member/wal (etcd's). */
static int wal_dir_of(const struct cetcd_config *cfg, char *buf, size_t len)
{
	int n = cfg->wal_dir[0] ? snprintf(buf, len, "%s", cfg->wal_dir) :
				  snprintf(buf, len, "%s/member/wal", cfg->data_dir);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * This member's id and its cluster's, resolved once for all its daemons,
 * as etcd 3.4's NewServer does: a member with a WAL is the WAL's (the
 * flags are not looked at, as etcd ignores them on a restart); a new one
 * joining a running cluster (--initial-cluster-state existing) gets them
 * from that cluster (join.h), which also gives cluster the running
 * members' ids; a new cluster's are derived from the flags (member.h).
 * Logged when they cannot be had. 0, or -EINVAL, -ENOENT (flags),
 * -EBADMSG (a WAL without good metadata), -EHOSTUNREACH, -EPROTO
 * (joining), -ENOMEM.
 */
static int resolve_ids(const struct cetcd_config *cfg, const char *wal_dir, struct tls_ctx *tls,
		       bool join, struct initial_cluster *cluster, uint64_t *member_id,
		       uint64_t *cluster_id)
{
	int rc;

	if (wal_exists(wal_dir)) {
		rc = bootstrap_wal_ids(wal_dir, member_id, cluster_id);
		if (rc)
			log_error("cannot read the member and cluster ids from the WAL's metadata",
				  LOG_STR("wal-dir", wal_dir), LOG_ERRNO(rc));
		return rc == -ENOMEM ? rc : rc ? -EBADMSG : 0;
	}
	if (join) {
		rc = join_cluster(cfg, tls, cluster, member_id);
		*cluster_id = cluster->cluster_id;
		return rc;
	}
	rc = member_ids_from_config(cfg, member_id, cluster_id);
	if (rc)
		log_error("cannot derive the member id from --initial-cluster",
			  LOG_STR("initial-cluster", cfg->initial_cluster), LOG_STR("name", cfg->name),
			  LOG_ERRNO(rc));
	return rc;
}

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct initial_cluster cluster = { 0 };
	struct shm_region *r;
	struct peer *peers = NULL;
	struct tls_ctx *server_tls = NULL, *client_tls = NULL;
	struct loop *loop = NULL;
	struct diskio_fault_opts wal_fault;
	bool wal_fault_on;
	uint64_t member_id, cluster_id;
	char wal_dir[4096], snap_dir[4096];
	bool join;
	sigset_t set;
	int status, rc, sfd = -1;

	rc = config_daemon_start(&cfg, CONFIG_PROG_RAFTD, "raftd", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;

	if (hello_claim_role(r, SHM_ROLE_RAFTD))
		goto out_detach;

	rc = initial_cluster_parse(cfg.initial_cluster, cfg.initial_cluster_token, &cluster);
	if (rc) {
		log_error("cannot parse --initial-cluster", LOG_STR("initial-cluster", cfg.initial_cluster),
			  LOG_ERRNO(rc));
		status = CONFIG_EXIT_FATAL;
		goto out_release_role;
	}
	if (wal_dir_of(&cfg, wal_dir, sizeof(wal_dir))) {
		log_error("the WAL directory's path is too long", LOG_STR("data-dir", cfg.data_dir));
		status = CONFIG_EXIT_FATAL;
		goto out_free_cluster;
	}

	/* etcd's snap directory is the data dir's whatever --wal-dir says */
	int n_snap = snprintf(snap_dir, sizeof(snap_dir), "%s/member/snap", cfg.data_dir);
	if (n_snap < 0 || (size_t)n_snap >= sizeof(snap_dir) ||
	    (rc = diskio_mkdir_all(snap_dir, 0700)) != 0) {
		log_error("cannot create the snap directory", LOG_STR("data-dir", cfg.data_dir),
			  LOG_ERRNO(n_snap < 0 || (size_t)n_snap >= sizeof(snap_dir) ? -ENAMETOOLONG : rc));
		status = CONFIG_EXIT_FATAL;
		goto out_free_cluster;
	}

	rc = peer_tls(&cfg, &server_tls, &client_tls);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_close_peers;
	}
	join = strcmp(cfg.initial_cluster_state, "existing") == 0;
	rc = resolve_ids(&cfg, wal_dir, client_tls, join, &cluster, &member_id, &cluster_id);
	if (rc) {
		/* flags that do not fit, a corrupt WAL or a cluster that did
		 * not take this member are not fixed by restarting */
		if (rc == -EINTR)
			status = 0;
		else if (rc != -ENOMEM)
			status = CONFIG_EXIT_FATAL;
		goto out_close_peers;
	}
	/* stored and gatewayd serve with these (member_ids_wait) */
	shm_region_set_ids(r, member_id, cluster_id);

	const char *self_urls[64];
	size_t n_self = 0;
	for (size_t i = 0; i < cfg.initial_advertise_peer_urls.count && n_self < 64; i++)
		self_urls[n_self++] = cfg.initial_advertise_peer_urls.v[i].text;
	struct peer_opts po = {
		.self_id = member_id,
		.cluster_id = cluster_id,
		.listen = &cfg.listen_peer_urls,
		.self_urls = self_urls,
		.n_self_urls = n_self,
		.server_tls = server_tls,
		.client_tls = client_tls,
		.server_version = CETCD_ETCD_SERVER_VERSION,
		.min_cluster_version = "3.0.0",
		.data_dir = cfg.data_dir,
		.gateways = cfg.gateways,
		.snap_dir = snap_dir,
		.driven = true, /* by the loop thread (loop.c) */
	};
	rc = peer_start(&po, &peers);
	if (rc) {
		/* a taken address is not freed by restarting */
		if (rc == -EADDRINUSE || rc == -EACCES || rc == -EADDRNOTAVAIL)
			status = CONFIG_EXIT_FATAL;
		goto out_close_peers;
	}
	config_stop_signals(&set);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_error("cannot watch signals", LOG_ERRNO(-errno));
		goto out_close_peers;
	}

	struct loop_options lo = {
		.region = r,
		.wal_dir = wal_dir,
		.cluster = &cluster,
		.member_id = member_id,
		.join = join,
		.force_new_cluster = cfg.force_new_cluster,
		.name = cfg.name,
		.client_urls = &cfg.advertise_client_urls,
		.request_timeout_ms = config_request_timeout_ms(&cfg),
		.tick_ms = cfg.heartbeat_interval_ms,
		.election_ms = cfg.election_timeout_ms,
		.pre_vote = cfg.pre_vote,
		.signal_fd = sfd,
		.peer = peers,
		.snapshot_count = cfg.snapshot_count,
		.raft_log_bytes = cfg.raft_log_mib << 20,
		.snap_dir = snap_dir,
		.max_snapshots = (unsigned)cfg.max_snapshots,
		.max_wals = (unsigned)cfg.max_wals,
	};
	/* tests only (diskio.h): a WAL that fails as the test asks */
	if (diskio_test_fault("wal", &wal_fault, &wal_fault_on)) {
		status = CONFIG_EXIT_FATAL;
		goto out_close_signals;
	}
	if (wal_fault_on && diskio_fault_open(-1, &wal_fault, &lo.wal.io))
		goto out_close_signals;
	rc = loop_new(&lo, &loop);
	if (rc) {
		/* a corrupt WAL, or flags that do not fit it, are not fixed by
		 * restarting */
		if (rc == -EBADMSG || rc == -EINVAL)
			status = CONFIG_EXIT_FATAL;
		goto out_close_signals;
	}

	/* the WAL is replayed and the peer listeners take connections */
	config_daemon_ready();
	rc = loop_run(loop);
	config_daemon_stopping();
	/* a member removed from the cluster stays stopped, as etcd's */
	status = rc == -EIDRM ? CONFIG_EXIT_REMOVED : rc ? 1 : 0;
	loop_free(loop);

out_close_signals:
	close(sfd);
out_close_peers:
	peer_stop(peers);
	tls_ctx_free(server_tls);
	tls_ctx_free(client_tls);
out_free_cluster:
	initial_cluster_free(&cluster);
out_release_role:
	shm_role_release(r, SHM_ROLE_RAFTD);
out_detach:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
