/* gatewayd: a member's client-facing process.
 *
 * It claims a slot in the member region, attaches to raftd and stored
 * through the slot's rings (the hello exchange), and serves clients on
 * the client URLs, shared with the other gatewayd through SO_REUSEPORT:
 * gRPC (etcd's KV, Maintenance.Status, Cluster.MemberList) and HTTP/1.1
 * (/health, /version). The event loop is server.h's.
 *
 * SIGTERM, SIGINT or SIGHUP (config_stop_signals): the listeners close,
 * HTTP/2 clients get GOAWAY, requests still waiting are answered "server
 * stopped", and connections get GW_DRAIN_MS to finish.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "gatewayd/server.h"
#include "shm/config/config.h"
#include "shm/log/log.h"
#include "shm/config/member.h"
#include "shm/region.h"
#include "shm/slot.h"

/* How long stopping waits for connections to finish. */
#define GW_DRAIN_MS 1500

/* Opens the client listeners (shared with the other gatewayd). */
static int gw_listen(struct gw_server *s, const struct cetcd_config *cfg)
{
	const struct config_urls *us = &cfg->listen_client_urls;
	for (size_t i = 0; i < us->count; i++) {
		struct config_error err;
		int fd, rc = config_listen_url(&us->v[i], true, &fd, &err);
		if (rc) {
			log_error("cannot listen for clients", LOG_STR("address", us->v[i].text),
				  LOG_STR("reason", err.msg));
			return rc;
		}
		rc = gw_server_listen(s, fd);
		if (rc) {
			log_error("cannot watch the client listener", LOG_STR("address", us->v[i].text),
				  LOG_ERRNO(rc));
			return rc;
		}
		log_info("serving client traffic insecurely", LOG_STR("address", us->v[i].text));
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct shm_region *r;
	struct shm_slot_ref slot;
	struct gw_server *s = NULL;
	struct gw_params params = { .cfg = &cfg };
	struct signalfd_siginfo si;
	sigset_t set;
	int status, rc, sfd = -1;

	rc = config_daemon_start(&cfg, CONFIG_PROG_GATEWAYD, "gatewayd", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;

	if (member_ids_load(&cfg, r, &params.member_id, &params.cluster_id)) {
		status = CONFIG_EXIT_FATAL;
		goto out_detach;
	}

	rc = shm_slot_claim(r, &slot);
	if (rc) {
		log_error("cannot claim a gateway slot in the member region",
			  LOG_U64("slots", shm_slot_count(r)), LOG_ERRNO(rc));
		goto out_detach;
	}
	log_info("claimed a gateway slot", LOG_U64("slot", slot.index),
		 LOG_U64("generation", slot.generation), LOG_I64("pid", getpid()));

	rc = gw_server_new(r, &slot, &params, &s);
	if (rc) {
		log_error("cannot start the client server", LOG_ERRNO(rc));
		goto out_release_slot;
	}
	config_stop_signals(&set);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || gw_server_watch(s, sfd)) {
		log_error("cannot watch signals", LOG_ERRNO(-errno));
		goto out_free_server;
	}
	rc = gw_listen(s, &cfg);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_free_server;
	}
	gw_server_hello(s);
	log_info("ready to serve client requests", LOG_U64("member-id", params.member_id),
		 LOG_U64("cluster-id", params.cluster_id));

	gw_server_run(s);
	if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		si.ssi_signo = SIGTERM;
	log_info("stopping", LOG_STR("signal", strsignal((int)si.ssi_signo)),
		 LOG_U64("connections", s->conn_count), LOG_U64("accepted", s->stats.accepted),
		 LOG_U64("proposals", s->stats.proposals), LOG_U64("results", s->stats.results),
		 LOG_U64("dropped", s->stats.dropped), LOG_U64("timeouts", s->stats.timeouts));
	gw_server_drain(s, GW_DRAIN_MS);
	status = 0;

out_free_server:
	gw_server_free(s);
	if (sfd >= 0)
		close(sfd);
out_release_slot:
	shm_slot_release(r, &slot);
out_detach:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
