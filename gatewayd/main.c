/* gatewayd: a member's client-facing process.
 *
 * It claims a slot in the member region, attaches to raftd and stored
 * through the slot's rings (the hello exchange), and serves clients on
 * the client URLs, shared with the other gatewayd through SO_REUSEPORT:
 * gRPC (etcd's KV, Maintenance.Status, Cluster.MemberList) and HTTP/1.1
 * (/health, /version), in the clear on http URLs and over TLS on https
 * ones (both on one address when both schemes name it, as etcd serves
 * them). The event loop is server.h's.
 *
 * SIGTERM, SIGINT or SIGHUP (config_stop_signals): the listeners close,
 * HTTP/2 clients get GOAWAY, requests still waiting are answered "server
 * stopped", and connections get GW_DRAIN_MS to finish.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gatewayd/server.h"
#include "auth/token.h"
#include "config/config.h"
#include "config/tls_config.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "cluster/member.h"
#include "base/sock/gwsock.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "base/tls/tls.h"

/* How long stopping waits for connections to finish. */
#define GW_DRAIN_MS 1500

/* jemalloc's options for this process, read at its first allocation (the
 * MALLOC_CONF environment variable still overrides them). A gateway's
 * buffers come in bursts: a thousand Watch streams each answering a
 * hundred creates, a big range, a slow client's backlog. Pages freed
 * while it works go back to the kernel within about a second; those
 * freed just before it falls idle go back when the loop has been quiet
 * for a second (base/mem/mem.h), not by jemalloc's background thread,
 * which wakes thousands of times a second under load. Exported: the
 * library looks the name up in the executable. */
__attribute__((visibility("default"))) const char *malloc_conf = "dirty_decay_ms:1000";

/* etcd's client TLS set-up (configureClientListeners, ClientSelfCert):
 * the info from the flags (auto TLS makes or reuses the certificate of
 * <data-dir>/fixtures/client, under a lock the other gatewayd share), its
 * log line, and the server context, which offers ALPN "http/1.1" before
 * "h2": gRPC clients offer only "h2", and a client that offers both
 * (curl, a browser) asks for /health, /version, /metrics or /v3/, which
 * this server answers over HTTP/1.1. Its session tickets are sealed with
 * the member's ticket key from the region, which every gatewayd shares:
 * the kernel hands a client's next connection to any of them
 * (SO_REUSEPORT), and etcd, one process, resumes every session. */
_Static_assert(SHM_TICKET_KEY_BYTES == TLS_TICKET_KEY_BYTES, "ticket key size");
static int gw_tls(struct gw_server *s, const struct cetcd_config *cfg)
{
	static const char *const alpn[] = { "http/1.1", "h2" };
	struct tls_info info;
	struct tls_ctx *ctx;
	int rc;

	rc = config_tls_info(cfg, TLS_SIDE_CLIENT, &info);
	if (rc) {
		log_error("failed to get client self-signed certs", LOG_STR("error", errmsg_get(rc)));
		return rc;
	}
	config_tls_log_starting("starting with client TLS", &info, cfg);
	rc = tls_ctx_new(&info, TLS_SERVER, &ctx);
	tls_info_free(&info);
	if (!rc && ((rc = tls_ctx_set_alpn(ctx, alpn, 2)) ||
		    (rc = tls_ctx_set_ticket_key(ctx, shm_region_ticket_key(s->r)))))
		tls_ctx_free(ctx);
	if (rc) {
		log_error("cannot serve TLS on the client port", LOG_STR("error", errmsg_get(rc)));
		return rc;
	}
	gw_server_set_tls(s, ctx);
	return 0;
}

/* Binds the client listeners (shared with the other gatewayd) before
 * anything else, as etcd binds its own before it starts the server, or
 * takes the ones the launcher bound for gatewayd 0 before it started any
 * process (CONFIG_CLIENT_FDS_ENV): a client that connects once the
 * member's ready lines are out (raftd prints them as soon as it leads)
 * waits in the backlog instead of being refused while this process waits
 * for the member's ids. */
static int gw_listen_open(const struct cetcd_config *cfg, int **fds)
{
	size_t n = cfg->listen_client_urls.count;
	struct config_error err;
	int rc = config_inherited_client_fds(n, fds);

	if (rc == 0) {
		log_info("took the client listeners the launcher bound", LOG_U64("urls", n));
		/* the launcher's unix sockets, and TCP listeners of our own */
		for (size_t i = 0; i < n && !rc; i++)
			if ((*fds)[i] == CONFIG_FD_BIND &&
			    (rc = config_listen_url(&cfg->listen_client_urls.v[i], true, &(*fds)[i],
						    &err)) != 0)
				(*fds)[i] = -1;
		if (!rc)
			return 0;
		log_error("cannot listen for clients", LOG_STR("reason", err.msg));
		config_close_client_fds(*fds, n);
		*fds = NULL;
		return rc;
	}
	if (rc != -ENOENT)
		log_warn("the client listeners handed down are unusable; binding anew",
			 LOG_ERRNO(rc));
	/* without the launcher (a unit of its own), gatewayd 0 binds the unix
	 * sockets, which one process holds */
	rc = config_listen_client_urls(cfg, cfg->gateway_index > 0 ? CONFIG_LISTEN_TCP
								    : CONFIG_LISTEN_ALL,
				       fds, &err);
	if (rc)
		log_error("cannot listen for clients", LOG_STR("reason", err.msg));
	return rc;
}

/* Serves the listeners gw_listen_open bound: one per address, serving
 * http, https or both, as etcd's serve contexts (it takes them all and
 * frees fds). */
static int gw_listen(struct gw_server *s, const struct cetcd_config *cfg, int *fds)
{
	const struct config_urls *us = &cfg->listen_client_urls;
	bool files = cfg->cert_file[0] || cfg->key_file[0];
	int rc = 0;

	for (size_t i = 0; i < us->count && !rc; i++) {
		const struct config_url *u = &us->v[i];
		bool https = !strcmp(u->scheme, "https") || !strcmp(u->scheme, "unixs");
		if (https && !s->tls && (rc = gw_tls(s, cfg)))
			break;
		if (!https && files)
			log_warn("scheme is HTTP while key and cert files are present; ignoring key and cert files",
				 LOG_STR("client-url", u->text));
		if (!https && cfg->client_cert_auth)
			log_warn("scheme is HTTP while --client-cert-auth is enabled; ignoring client cert auth for this URL",
				 LOG_STR("client-url", u->text));
	}
	for (size_t i = 0; i < us->count && !rc; i++) {
		const struct config_url *u = &us->v[i];
		bool plain = false, secure = false;
		if (fds[i] < 0)
			continue;
		for (size_t j = 0; j < us->count; j++) {
			if (!config_same_address(u, &us->v[j]))
				continue;
			if (!strcmp(us->v[j].scheme, "https") || !strcmp(us->v[j].scheme, "unixs"))
				secure = true;
			else
				plain = true;
		}
		int fd = fds[i];
		fds[i] = -1;
		rc = gw_server_listen(s, fd, !secure ? GW_LISTEN_PLAIN :
					     plain ? GW_LISTEN_BOTH : GW_LISTEN_TLS);
		if (rc) {
			log_error("cannot watch the client listener", LOG_STR("address", u->text),
				  LOG_ERRNO(rc));
			break;
		}
		char addr[300];
		snprintf(addr, sizeof(addr), "%s%s%s:%s", strchr(u->host, ':') ? "[" : "", u->host,
			 strchr(u->host, ':') ? "]" : "", u->port);
		if (plain)
			log_info("serving client traffic insecurely; this is strongly discouraged!",
				 LOG_STR("address", addr));
		if (secure)
			log_info("serving client traffic securely", LOG_STR("address", addr));
	}
	config_close_client_fds(fds, us->count);
	return rc;
}

/* The --listen-metrics-urls listeners (etcd's serveMetrics): /metrics and
 * the health checks over HTTP/1.x, https with the client port's TLS
 * settings. Every gatewayd binds them (SO_REUSEPORT), as the client
 * listeners. */
static int gw_listen_metrics(struct gw_server *s, const struct cetcd_config *cfg)
{
	const struct config_urls *us = &cfg->listen_metrics_urls;
	struct config_error err;
	int rc = 0;

	for (size_t i = 0; i < us->count && !rc; i++) {
		const struct config_url *u = &us->v[i];
		bool https = strcmp(u->scheme, "https") == 0;
		int fd;
		if (https && !s->tls && (rc = gw_tls(s, cfg)))
			break;
		rc = config_listen_url(u, true, &fd, &err);
		if (rc) {
			log_error("cannot listen for metrics", LOG_STR("reason", err.msg));
			break;
		}
		rc = gw_server_listen(s, fd, https ? GW_LISTEN_METRICS_TLS : GW_LISTEN_METRICS_PLAIN);
		if (rc)
			log_error("cannot watch the metrics listener", LOG_STR("address", u->text),
				  LOG_ERRNO(rc));
		else
			log_info("serving metrics", LOG_STR("address", u->text));
	}
	return rc;
}

/* The local socket raftd hands the peer port's gRPC connections to
 * (base/sock/gwsock.h). Without it the member still serves its clients, so a
 * failure is a warning. */
static void gw_listen_local(struct gw_server *s, const struct cetcd_config *cfg)
{
	uint32_t index = cfg->gateway_index < 0 ? 0 : (uint32_t)cfg->gateway_index;
	struct gwsock_addr a;
	int fd, rc = gwsock_addr_of(cfg->data_dir, index, &a);

	if (!rc)
		rc = gwsock_listen(&a, &fd);
	if (!rc)
		rc = gw_server_listen(s, fd, GW_LISTEN_LOCAL);
	if (rc)
		log_warn("cannot listen on the local socket; the peer port will not serve gRPC through this gateway",
			 LOG_U64("gateway-index", index), LOG_ERRNO(rc));
}

int main(int argc, char **argv)
{
	struct cetcd_config cfg;
	struct shm_region *r;
	struct shm_slot_ref slot;
	struct gw_server *s = NULL;
	struct gw_params params = { .cfg = &cfg };
	struct auth_token_opts *tokens = NULL;
	int *client_fds = NULL;
	struct signalfd_siginfo si;
	sigset_t set;
	int status, rc, sfd = -1;

	rc = config_daemon_start(&cfg, CONFIG_PROG_GATEWAYD, "gatewayd", argc, argv, &r, &status);
	if (rc)
		return status;
	status = 1;
	if (auth_token_opts_from_config(&cfg, &tokens)) {
		status = CONFIG_EXIT_FATAL;
		goto out_detach;
	}
	params.auth_tokens = tokens;
	if (gw_listen_open(&cfg, &client_fds)) {
		status = CONFIG_EXIT_FATAL;
		goto out_detach;
	}

	/* stopped while raftd had not resolved the ids yet: a clean stop */
	if (member_ids_wait(&cfg, r, &params.member_id, &params.cluster_id)) {
		status = 0;
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
	rc = gw_listen(s, &cfg, client_fds);
	client_fds = NULL;
	if (!rc)
		rc = gw_listen_metrics(s, &cfg);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_free_server;
	}
	gw_listen_local(s, &cfg);
	gw_server_hello(s);
	log_info("ready to serve client requests", LOG_U64("member-id", params.member_id),
		 LOG_U64("cluster-id", params.cluster_id),
		 LOG_STR("ring-wake", shm_waker_mode_name(&s->waker)),
		 LOG_STR("socket-writes", s->sendq.on ? "batched" : "one by one"));
	config_daemon_ready();

	gw_server_run(s);
	config_daemon_stopping();
	if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		si.ssi_signo = SIGTERM;
	log_info("stopping", LOG_STR("signal", strsignal((int)si.ssi_signo)),
		 LOG_U64("connections", s->conn_count), LOG_U64("accepted", s->stats.accepted),
		 LOG_U64("proposals", s->stats.proposals), LOG_U64("results", s->stats.results),
		 LOG_U64("dropped", s->stats.dropped), LOG_U64("timeouts", s->stats.timeouts),
		 LOG_U64("leader-changed", s->stats.leader_changed),
		 LOG_U64("watch-responses", s->stats.watch_responses),
		 LOG_U64("watch-events", s->stats.watch_events),
		 LOG_U64("watch-events-held", s->stats.watch_held),
		 LOG_U64("write-batches", s->sendq.batches), LOG_U64("batched-writes", s->sendq.sends));
	gw_server_drain(s, GW_DRAIN_MS);
	status = 0;

out_free_server:
	gw_server_free(s);
	if (sfd >= 0)
		close(sfd);
out_release_slot:
	shm_slot_release(r, &slot);
out_detach:
	config_close_client_fds(client_fds, cfg.listen_client_urls.count);
	shm_region_detach(r);
	auth_token_opts_free(tokens);
	config_free(&cfg);
	return status;
}
