/* raftd: a member's Raft process.
 *
 * It claims the raftd role in the member region, opens (or creates) the
 * member's WAL, and runs the event loop (loop.h): proposals and read-index
 * requests from the gateways and stored in, committed entries out to
 * stored, attach hellos answered, its status published. The peer port is
 * taken and refuses peers (after a TLS handshake on https URLs) until the
 * peer protocol exists (peerstub.h). SIGTERM, SIGINT or SIGHUP (config_stop_signals) stops it
 * cleanly, after the WAL's last batch is durable.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "raftd/loop.h"
#include "raftd/peerstub.h"
#include "shm/config/config.h"
#include "shm/hello.h"
#include "shm/log/log.h"
#include "shm/config/member.h"
#include "shm/region.h"
#include "shm/slot.h"

/* The WAL directory: --wal-dir, else <data-dir>/member/wal (etcd's). */
static int wal_dir_of(const struct cetcd_config *cfg, char *buf, size_t len)
{
	int n = cfg->wal_dir[0] ? snprintf(buf, len, "%s", cfg->wal_dir) :
				  snprintf(buf, len, "%s/member/wal", cfg->data_dir);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct member_cluster cluster = { 0 };
	struct shm_region *r;
	struct peerstub peers;
	struct loop *loop = NULL;
	uint64_t member_id, cluster_id;
	char wal_dir[4096];
	sigset_t set;
	int status, rc, sfd = -1;

	rc = config_daemon_start(&cfg, CONFIG_PROG_RAFTD, "raftd", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;

	if (hello_claim_role(r, SHM_ROLE_RAFTD))
		goto out_detach;

	rc = member_ids_from_config(&cfg, &member_id, &cluster_id);
	if (!rc)
		rc = member_cluster_parse(cfg.initial_cluster, cfg.initial_cluster_token, &cluster);
	if (rc) {
		log_error("cannot derive the member id from --initial-cluster",
			  LOG_STR("initial-cluster", cfg.initial_cluster), LOG_STR("name", cfg.name),
			  LOG_ERRNO(rc));
		status = CONFIG_EXIT_FATAL;
		goto out_release_role;
	}
	if (wal_dir_of(&cfg, wal_dir, sizeof(wal_dir))) {
		log_error("the WAL directory's path is too long", LOG_STR("data-dir", cfg.data_dir));
		status = CONFIG_EXIT_FATAL;
		goto out_free_cluster;
	}

	rc = peerstub_listen(&peers, &cfg);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_close_peers;
	}
	rc = peerstub_start(&peers);
	if (rc) {
		log_error("cannot start the peer port thread", LOG_ERRNO(rc));
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
		.name = cfg.name,
		.client_urls = &cfg.advertise_client_urls,
		.request_timeout_ms = config_request_timeout_ms(&cfg),
		.tick_ms = cfg.heartbeat_interval_ms,
		.election_ms = cfg.election_timeout_ms,
		.pre_vote = cfg.pre_vote,
		.signal_fd = sfd,
	};
	rc = loop_new(&lo, &loop);
	if (rc) {
		/* a corrupt WAL, or flags that do not fit it, are not fixed by
		 * restarting */
		if (rc == -EBADMSG || rc == -EINVAL)
			status = CONFIG_EXIT_FATAL;
		goto out_close_signals;
	}
	if (shm_region_member_id(r) == 0)
		shm_region_set_member_id(r, loop_member_id(loop));

	rc = loop_run(loop);
	status = rc ? 1 : 0;
	loop_free(loop);

out_close_signals:
	close(sfd);
out_close_peers:
	peerstub_stop(&peers);
out_free_cluster:
	member_cluster_free(&cluster);
out_release_role:
	shm_role_release(r, SHM_ROLE_RAFTD);
out_detach:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
