/* etcd 3.4's flag table: every flag etcd accepts, with its default, its
 * --help text, the programs that take it and what cetcd does with it; and
 * the checks of the values cetcd supports only in part (see config_int.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config_int.h"
#include "shm/region.h" /* SHM_CACHE_MIB_DEFAULT, stringified below */

static int config_check_urls_peer(const struct cetcd_config *, const struct config_flag *,
				  struct config_error *);
static int config_check_log_outputs(const struct cetcd_config *, const struct config_flag *,
				    struct config_error *);
static int config_check_freelist(const struct cetcd_config *, const struct config_flag *,
				 struct config_error *);

static const char *const choices_cluster_state[] = { "existing", "new", NULL };
static const char *const choices_fallback[] = { "exit", "proxy", NULL };
static const char *const choices_proxy[] = { "off", "on", "readonly", NULL };

#define OFF(field) offsetof(struct cetcd_config, field)

/* Sections, in --help order. */
#define S_MEMBER "Member"
#define S_CLUSTER "Clustering"
#define S_SECURITY "Security"
#define S_AUTH "Auth"
#define S_MONITOR "Profiling and Monitoring"
#define S_LOGGING "Logging"
#define S_PROXY "v2 Proxy (to be deprecated in v4)"
#define S_EXPERIMENTAL "Experimental feature"
#define S_UNSAFE "Unsafe feature"
#define S_DEPRECATED "TO BE DEPRECATED"
/* A macro's value as a string literal (a default the table shares). */
#define CONFIG_STR_(x) #x
#define CONFIG_STR(x) CONFIG_STR_(x)
#define S_CETCD "cetcd"
#define S_IGNORED NULL /* not listed */

/* Shorthands for the common rows. */
#define ANY(n, t, fld, d, sec, u) \
	{ .name = n, .type = t, .off = OFF(fld), .def = d, .support = CS_ANY, .scope = SCOPE_ALL, .section = sec, .usage = u }
#define DEF_ONLY(n, t, fld, d, sec, u) \
	{ .name = n, .type = t, .off = OFF(fld), .def = d, .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = sec, .usage = u }
#define IGNORED(n) \
	{ .name = n, .type = CT_IGNORED, .support = CS_ANY, .scope = SCOPE_ALL, .section = S_IGNORED }

const struct config_flag config_flags[] = {
	/* Member */
	ANY("name", CT_STRING, name, "default", S_MEMBER,
	    "Human-readable name for this member."),
	{ .name = "data-dir", .type = CT_STRING, .off = OFF(data_dir), .def = "",
	  .support = CS_ANY, .scope = SCOPE_ALL, .section = S_MEMBER, .help_def = "${name}.etcd",
	  .usage = "Path to the data directory." },
	ANY("wal-dir", CT_STRING, wal_dir, "", S_MEMBER,
	    "Path to the dedicated wal directory."),
	ANY("snapshot-count", CT_UINT, snapshot_count, "100000", S_MEMBER,
	    "Number of committed transactions to trigger a snapshot to disk."),
	ANY("heartbeat-interval", CT_UINT, heartbeat_interval_ms, "100", S_MEMBER,
	    "Time (in milliseconds) of a heartbeat interval."),
	ANY("election-timeout", CT_UINT, election_timeout_ms, "1000", S_MEMBER,
	    "Time (in milliseconds) for an election to timeout. See tuning documentation for details."),
	/* taken either way; cetcd never fast-forwards (docs/compat.md) */
	ANY("initial-election-tick-advance", CT_BOOL, initial_election_tick_advance, "true",
	    S_MEMBER, "Whether to fast-forward initial election ticks on boot for faster election."),
	{ .name = "listen-peer-urls", .type = CT_URLS, .off = OFF(listen_peer_urls),
	  .def = "http://localhost:2380", .support = CS_PARTIAL, .scope = SCOPE_ALL,
	  .section = S_MEMBER, .usage = "List of URLs to listen on for peer traffic.",
	  .check = config_check_urls_peer },
	{ .name = "listen-client-urls", .type = CT_URLS, .off = OFF(listen_client_urls),
	  .def = "http://localhost:2379", .support = CS_ANY, .scope = SCOPE_ALL,
	  .section = S_MEMBER, .usage = "List of URLs to listen on for client traffic." },
	ANY("max-snapshots", CT_UINT, max_snapshots, "5", S_MEMBER,
	    "Maximum number of snapshot files to retain (0 is unlimited)."),
	ANY("max-wals", CT_UINT, max_wals, "5", S_MEMBER,
	    "Maximum number of wal files to retain (0 is unlimited)."),
	ANY("quota-backend-bytes", CT_INT, quota_backend_bytes, "0", S_MEMBER,
	    "Raise alarms when backend size exceeds the given quota (0 defaults to low space quota)."),
	{ .name = "backend-batch-interval", .type = CT_DURATION, .off = OFF(backend_batch_interval_ns),
	  .def = "0", .support = CS_ANY, .scope = SCOPE_ALL, .section = S_MEMBER,
	  .help_def = "",
	  .usage = "BackendBatchInterval is the maximum time before commit the backend transaction." },
	ANY("backend-batch-limit", CT_INT, backend_batch_limit, "0", S_MEMBER,
	    "BackendBatchLimit is the maximum operations before commit the backend transaction."),
	ANY("max-txn-ops", CT_UINT, max_txn_ops, "128", S_MEMBER,
	    "Maximum number of operations permitted in a transaction."),
	ANY("max-request-bytes", CT_UINT, max_request_bytes, "1572864", S_MEMBER,
	    "Maximum client request size in bytes the server will accept."),
	ANY("max-concurrent-streams", CT_UINT32, max_concurrent_streams, "4294967295", S_MEMBER,
	    "Maximum concurrent streams that each client can open at a time."),
	ANY("grpc-keepalive-min-time", CT_DURATION, grpc_keepalive_min_time_ns, "5s", S_MEMBER,
	    "Minimum duration interval that a client should wait before pinging server."),
	ANY("grpc-keepalive-interval", CT_DURATION, grpc_keepalive_interval_ns, "2h", S_MEMBER,
	    "Frequency duration of server-to-client ping to check if a connection is alive (0 to disable)."),
	ANY("grpc-keepalive-timeout", CT_DURATION, grpc_keepalive_timeout_ns, "20s", S_MEMBER,
	    "Additional duration of wait before closing a non-responsive connection (0 to disable)."),

	/* Clustering */
	{ .name = "initial-advertise-peer-urls", .type = CT_URLS,
	  .off = OFF(initial_advertise_peer_urls), .def = "http://localhost:2380",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "List of this member's peer URLs to advertise to the rest of the cluster.",
	  .check = config_check_urls_peer },
	{ .name = "initial-cluster", .type = CT_STRING, .off = OFF(initial_cluster),
	  .def = "default=http://localhost:2380", .support = CS_ANY, .scope = SCOPE_ALL,
	  .section = S_CLUSTER, .usage = "Initial cluster configuration for bootstrapping." },
	{ .name = "initial-cluster-state", .type = CT_CHOICE, .off = OFF(initial_cluster_state),
	  .def = "new", .support = CS_ANY, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "Initial cluster state ('new' or 'existing').", .choices = choices_cluster_state },
	ANY("initial-cluster-token", CT_STRING, initial_cluster_token, "etcd-cluster", S_CLUSTER,
	    "Initial cluster token for the etcd cluster during bootstrap."),
	{ .name = "advertise-client-urls", .type = CT_URLS, .off = OFF(advertise_client_urls),
	  .def = "http://localhost:2379", .support = CS_ANY, .scope = SCOPE_ALL,
	  .section = S_CLUSTER, .usage = "List of this member's client URLs to advertise to the public." },
	DEF_ONLY("discovery", CT_STRING, discovery, "", S_CLUSTER,
		 "Discovery URL used to bootstrap the cluster."),
	{ .name = "discovery-fallback", .type = CT_CHOICE, .off = OFF(discovery_fallback),
	  .def = "proxy", .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "Expected behavior ('exit' or 'proxy') when discovery services fails.",
	  .choices = choices_fallback },
	DEF_ONLY("discovery-proxy", CT_STRING, discovery_proxy, "", S_CLUSTER,
		 "HTTP proxy to use for traffic to discovery service."),
	ANY("discovery-srv", CT_STRING, discovery_srv, "", S_CLUSTER,
	    "DNS srv domain used to bootstrap the cluster."),
	ANY("discovery-srv-name", CT_STRING, discovery_srv_name, "", S_CLUSTER,
	    "Suffix to the dns srv name queried when bootstrapping."),
	ANY("strict-reconfig-check", CT_BOOL, strict_reconfig_check, "true", S_CLUSTER,
		 "Reject reconfiguration requests that would cause quorum loss."),
	/* on by default, as from etcd 3.5: a member back from a partition
	 * does not depose a healthy leader (etcd 3.4 members answer
	 * pre-votes whatever their own setting); false campaigns at once */
	ANY("pre-vote", CT_BOOL, pre_vote, "true", S_CLUSTER,
		 "Enable a Raft pre-vote phase before an election, so a member back from a partition does not depose a healthy leader."),
	/* run by the launcher's auto-compactor (launcher/compactor.c) */
	ANY("auto-compaction-retention", CT_STRING, auto_compaction_retention, "0", S_CLUSTER,
	    "Auto compaction retention length. 0 means disable auto compaction."),
	ANY("auto-compaction-mode", CT_STRING, auto_compaction_mode, "periodic", S_CLUSTER,
	    "Interpret 'auto-compaction-retention' one of: periodic|revision."),
	/* accepted with a warning: etcd's own sample configuration file
	 * sets it (config_apply_logging) */
	ANY("enable-v2", CT_BOOL, enable_v2, "false", S_CLUSTER,
	    "Accept etcd V2 client requests. cetcd serves the v3 API only: true is accepted with a warning."),

	/* Security */
	ANY("cert-file", CT_STRING, cert_file, "", S_SECURITY,
		 "Path to the client server TLS cert file."),
	ANY("key-file", CT_STRING, key_file, "", S_SECURITY,
		 "Path to the client server TLS key file."),
	ANY("client-cert-auth", CT_BOOL, client_cert_auth, "false", S_SECURITY,
		 "Enable client cert authentication."),
	ANY("client-crl-file", CT_STRING, client_crl_file, "", S_SECURITY,
		 "Path to the client certificate revocation list file."),
	ANY("client-cert-allowed-hostname", CT_STRING, client_cert_allowed_hostname, "",
		 S_SECURITY, "Allowed TLS hostname for client cert authentication."),
	ANY("trusted-ca-file", CT_STRING, trusted_ca_file, "", S_SECURITY,
		 "Path to the client server TLS trusted CA cert file."),
	ANY("auto-tls", CT_BOOL, auto_tls, "false", S_SECURITY,
		 "Client TLS using generated certificates."),
	ANY("peer-cert-file", CT_STRING, peer_cert_file, "", S_SECURITY,
		 "Path to the peer server TLS cert file."),
	ANY("peer-key-file", CT_STRING, peer_key_file, "", S_SECURITY,
		 "Path to the peer server TLS key file."),
	ANY("peer-client-cert-auth", CT_BOOL, peer_client_cert_auth, "false", S_SECURITY,
		 "Enable peer client cert authentication."),
	ANY("peer-trusted-ca-file", CT_STRING, peer_trusted_ca_file, "", S_SECURITY,
		 "Path to the peer server TLS trusted CA file."),
	ANY("peer-cert-allowed-cn", CT_STRING, peer_cert_allowed_cn, "", S_SECURITY,
		 "Required CN for client certs connecting to the peer endpoint."),
	ANY("peer-cert-allowed-hostname", CT_STRING, peer_cert_allowed_hostname, "",
		 S_SECURITY, "Allowed TLS hostname for inter peer authentication."),
	ANY("peer-auto-tls", CT_BOOL, peer_auto_tls, "false", S_SECURITY,
		 "Peer TLS using self-generated certificates if --peer-key-file and --peer-cert-file are not provided."),
	ANY("peer-crl-file", CT_STRING, peer_crl_file, "", S_SECURITY,
		 "Path to the peer certificate revocation list file."),
	ANY("cipher-suites", CT_STRINGS, cipher_suites, "", S_SECURITY,
		 "Comma-separated list of supported TLS cipher suites between client/server and peers (empty will be auto-populated by Go)."),
	ANY("cors", CT_URLS_STAR, cors, "*", S_SECURITY,
	    "Comma-separated whitelist of origins for CORS, or cross-origin resource sharing, (empty or * means allow all)."),
	ANY("host-whitelist", CT_USTRINGS, host_whitelist, "*", S_SECURITY,
	    "Acceptable hostnames from HTTP client requests, if server is not secure (empty or * means allow all)."),
	ANY("experimental-peer-skip-client-san-verification", CT_BOOL,
		 experimental_peer_skip_client_san_verification, "false", S_SECURITY,
		 "Skip verification of SAN field in client certificate for peer connections."),

	/* Auth */
	/* checked by stored and gatewayd at start (auth/token.h), where etcd's
	 * server checks it */
	ANY("auth-token", CT_STRING, auth_token, "simple", S_AUTH,
		 "Specify a v3 authentication token type and its options ('simple' or 'jwt')."),
	ANY("bcrypt-cost", CT_UINT, bcrypt_cost, "10", S_AUTH,
		 "Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid values are between 4 and 31."),
	ANY("auth-token-ttl", CT_UINT, auth_token_ttl_s, "300", S_AUTH,
		 "Time (in seconds) of the auth-token-ttl."),

	/* Profiling and Monitoring */
	ANY("enable-pprof", CT_BOOL, enable_pprof, "false", S_MONITOR,
	    "Enable runtime profiling data via HTTP server. cetcd is no Go program and serves no /debug/pprof/: true is accepted with a warning naming perf instead."),
	ANY("metrics", CT_STRING, metrics, "basic", S_MONITOR,
	    "Set level of detail for exported metrics, specify 'extensive' to include histogram metrics."),
	ANY("listen-metrics-urls", CT_URLS, listen_metrics_urls, "", S_MONITOR,
	    "List of URLs to listen on for the metrics and health endpoints."),
	ANY("enable-grpc-gateway", CT_BOOL, enable_grpc_gateway, "true", S_MONITOR,
	    "Enable GRPC gateway."),

	/* Logging */
	ANY("logger", CT_STRING, logger, "capnslog", S_LOGGING,
	    "Specify 'zap' for structured logging or 'capnslog'. cetcd always writes zap's JSON lines."),
	{ .name = "log-outputs", .type = CT_USTRINGS, .off = OFF(log_outputs), .def = "default",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_LOGGING,
	  .usage = "Specify 'stdout' or 'stderr' to skip journald logging even when running under systemd, or list of comma separated output targets (file paths are appended to).",
	  .check = config_check_log_outputs },
	ANY("log-level", CT_STRING, log_level_text, "info", S_LOGGING,
	    "Configures log level. Only supports debug, info, warn, error, panic, or fatal."),

	/* v2 proxy */
	{ .name = "proxy", .type = CT_CHOICE, .off = OFF(proxy), .def = "off",
	  .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_PROXY,
	  .usage = "Proxy mode setting ('off', 'readonly' or 'on').", .choices = choices_proxy },
	DEF_ONLY("proxy-failure-wait", CT_UINT, proxy_failure_wait_ms, "5000", S_PROXY,
		 "Time (in milliseconds) an endpoint will be held in a failed state."),
	DEF_ONLY("proxy-refresh-interval", CT_UINT, proxy_refresh_interval_ms, "30000", S_PROXY,
		 "Time (in milliseconds) of the endpoints refresh interval."),
	DEF_ONLY("proxy-dial-timeout", CT_UINT, proxy_dial_timeout_ms, "1000", S_PROXY,
		 "Time (in milliseconds) for a dial to timeout."),
	DEF_ONLY("proxy-write-timeout", CT_UINT, proxy_write_timeout_ms, "5000", S_PROXY,
		 "Time (in milliseconds) for a write to timeout."),
	DEF_ONLY("proxy-read-timeout", CT_UINT, proxy_read_timeout_ms, "0", S_PROXY,
		 "Time (in milliseconds) for a read to timeout."),

	/* Experimental */
	ANY("experimental-initial-corrupt-check", CT_BOOL, experimental_initial_corrupt_check,
	    "false", S_EXPERIMENTAL,
	    "Enable to check data corruption before serving any client/peer traffic."),
	ANY("experimental-corrupt-check-time", CT_DURATION, experimental_corrupt_check_time_ns,
	    "0s", S_EXPERIMENTAL, "Duration of time between cluster corruption check passes."),
	DEF_ONLY("experimental-enable-v2v3", CT_STRING, experimental_enable_v2v3, "", S_EXPERIMENTAL,
		 "Serve v2 requests through the v3 backend under a given prefix."),
	{ .name = "experimental-backend-bbolt-freelist-type", .type = CT_STRING,
	  .off = OFF(experimental_backend_bbolt_freelist_type), .def = "",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_EXPERIMENTAL,
	  .help_def = "array", .check = config_check_freelist,
	  .usage = "ExperimentalBackendFreelistType specifies the type of freelist that boltdb backend uses(array and map are supported types)." },
	ANY("experimental-enable-lease-checkpoint", CT_BOOL,
		 experimental_enable_lease_checkpoint, "false", S_EXPERIMENTAL,
		 "ExperimentalEnableLeaseCheckpoint enables primary lessor to persist lease remainingTTL to prevent indefinite auto-renewal of long lived leases."),
	ANY("experimental-enable-lease-checkpoint-persist", CT_BOOL,
		 experimental_enable_lease_checkpoint_persist, "false", S_EXPERIMENTAL,
		 "Enable persisting remainingTTL to prevent indefinite auto-renewal of long lived leases. Requires experimental-enable-lease-checkpoint to be enabled."),
	{ .name = "experimental-compaction-batch-limit", .type = CT_INT,
	  .off = OFF(experimental_compaction_batch_limit), .def = "0", .support = CS_ANY,
	  .scope = SCOPE_ALL, .section = S_EXPERIMENTAL, .help_def = "1000", .same_as_def = "1000",
	  .usage = "ExperimentalCompactionBatchLimit sets the maximum revisions deleted in each compaction batch." },
	ANY("experimental-watch-progress-notify-interval", CT_DURATION,
	    experimental_watch_progress_notify_interval_ns, "10m", S_EXPERIMENTAL,
	    "Duration of periodical watch progress notification."),
	ANY("experimental-warning-apply-duration", CT_DURATION,
		 experimental_warning_apply_duration_ns, "100ms", S_EXPERIMENTAL,
		 "Warning is generated if requests take more than this duration."),

	/* Unsafe */
	ANY("unsafe-no-fsync", CT_BOOL, unsafe_no_fsync, "false", S_UNSAFE,
	    "Disables fsync, unsafe, will cause data loss."),
	ANY("force-new-cluster", CT_BOOL, force_new_cluster, "false", S_UNSAFE,
		 "Force to create a new one-member cluster."),

	/* To be deprecated */
	ANY("debug", CT_BOOL, debug, "false", S_DEPRECATED,
	    "Enable debug-level logging for etcd. [WARN] Will be deprecated in v3.5. Use '--log-level=debug' instead."),
	{ .name = "log-output", .type = CT_USTRINGS, .off = OFF(log_output), .def = "default",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_DEPRECATED,
	  .usage = "[TO BE DEPRECATED IN v3.5] use '--log-outputs'.",
	  .check = config_check_log_outputs },
	ANY("log-package-levels", CT_STRING, log_package_levels, "", S_DEPRECATED,
	    "Specify a particular log level for each etcd package (eg: 'etcdmain=CRITICAL,etcdserver=DEBUG'). cetcd has one level for all lines (--log-level): accepted with a warning."),

	/* Commands */
	ANY("config-file", CT_STRING, config_file, "", NULL,
	    "Path to the server configuration file. Note that if a configuration file is provided, other command line flags and environment variables will be ignored."),
	ANY("version", CT_BOOL, print_version, "false", NULL, "Print the version and exit."),

	/* cetcd's own */
	ANY("gateways", CT_UINT32, gateways, "0", S_CETCD,
	    "Number of gatewayd processes serving clients (0: one per online CPU, but one on a machine of 1 or 2 CPUs)."),
	ANY("lease-checkpoint-interval", CT_DURATION, lease_checkpoint_interval_ns, "5m0s", S_CETCD,
	    "How often the leader checkpoints each lease's remaining TTL through Raft, so that a leader change or a restart does not reset it (cetcd always checkpoints and persists them, as etcd's --experimental-enable-lease-checkpoint and --experimental-enable-lease-checkpoint-persist)."),
	ANY("latest-cache-mib", CT_UINT, latest_cache_mib, CONFIG_STR(SHM_CACHE_MIB_DEFAULT), S_CETCD,
	    "MiB of shared memory in which stored records where each key's latest revision sits in the db, so that point reads skip the tree (0: none). The region takes a page more, and starts the cache on a 2 MiB boundary: with --runtime-dir on a tmpfs mounted with huge=within_size the cache gets 2 MiB pages."),
	ANY("raft-log-mib", CT_UINT, raft_log_mib, "64", S_CETCD,
	    "MiB of applied Raft log entries raftd keeps in memory for followers that lag; a follower further behind gets a snapshot (the db)."),
	{ .name = "runtime-dir", .type = CT_STRING, .off = OFF(runtime_dir), .def = "",
	  .support = CS_ANY, .scope = SCOPE_ALL, .section = S_CETCD,
	  .help_def = "/dev/shm/cetcd-<hash of the absolute data dir>",
	  .usage = "Directory (on tmpfs) for the member's shared-memory region." },
	{ .name = "prepare-only", .type = CT_BOOL, .off = OFF(prepare_only), .def = "false",
	  .support = CS_ANY, .scope = SCOPE_LAUNCHER, .no_env = true, .section = S_CETCD,
	  .usage = "Create the data dir, the runtime dir and the region, then exit (for systemd units)." },
	{ .name = "print-gateways", .type = CT_BOOL, .off = OFF(print_gateways), .def = "false",
	  .support = CS_ANY, .scope = SCOPE_LAUNCHER, .no_env = true, .section = S_CETCD,
	  .usage = "Print how many gatewayd processes the member runs (--gateways, or its default on this machine), then exit (for the systemd generator)." },
	{ .name = "gateway-index", .type = CT_INT, .off = OFF(gateway_index), .def = "-1",
	  .support = CS_ANY, .scope = SCOPE_GATEWAYD, .no_env = true, .section = S_CETCD,
	  .usage = "Which gatewayd of the member this is (set by the launcher or the unit instance)." },

	/* etcd accepts these and only warns (etcdmain's "ignored" list) */
	IGNORED("cluster-active-size"), IGNORED("cluster-remove-delay"),
	IGNORED("cluster-sync-interval"), IGNORED("config"), IGNORED("force"),
	IGNORED("max-result-buffer"), IGNORED("max-retry-attempts"),
	IGNORED("peer-heartbeat-interval"), IGNORED("peer-election-timeout"),
	IGNORED("retry-interval"), IGNORED("snapshot"), IGNORED("v"), IGNORED("vv"),
	IGNORED("test.coverprofile"), IGNORED("test.outputdir"),
};

#define CONFIG_NFLAGS (sizeof(config_flags) / sizeof(config_flags[0]))
_Static_assert(CONFIG_NFLAGS <= sizeof(((struct cetcd_config *)0)->source),
	       "struct cetcd_config.source must have an entry per flag");
_Static_assert(CONFIG_NFLAGS <= sizeof(((struct cetcd_config *)0)->file_ignored),
	       "struct cetcd_config.file_ignored must have an entry per flag");
const size_t config_nflags = CONFIG_NFLAGS;

bool config_flag_is_cetcds(const struct config_flag *f)
{
	return f->section && strcmp(f->section, S_CETCD) == 0;
}

/* ---- supported values ---- */

/* The value of f as text, for messages. */
static void config_value_text(const struct cetcd_config *c, const struct config_flag *f,
			      char *buf, size_t len)
{
	const void *x = config_cfield(c, f);
	size_t n = 0;
	buf[0] = '\0';
	switch (f->type) {
	case CT_STRING:
	case CT_CHOICE:
		snprintf(buf, len, "%s", *(char *const *)x);
		break;
	case CT_BOOL:
		snprintf(buf, len, "%s", *(const bool *)x ? "true" : "false");
		break;
	case CT_UINT:
		snprintf(buf, len, "%llu", (unsigned long long)*(const uint64_t *)x);
		break;
	case CT_UINT32:
		snprintf(buf, len, "%u", *(const uint32_t *)x);
		break;
	case CT_INT:
		snprintf(buf, len, "%lld", (long long)*(const int64_t *)x);
		break;
	case CT_DURATION:
		config_format_duration(*(const int64_t *)x, buf, len);
		break;
	case CT_URLS:
		config_urls_text(x, buf, len);
		break;
	case CT_URLS_STAR:
	case CT_USTRINGS:
	case CT_STRINGS: {
		const struct config_strings *ss = x;
		for (size_t i = 0; i < ss->count && n < len; i++)
			n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", ss->v[i]);
		break;
	}
	case CT_IGNORED:
		break;
	}
}

/* The peer transport (raftd/peer/peer.h) serves http, https, and etcd's unix
 * and unixs peers. */
static int config_check_urls_peer(const struct cetcd_config *c, const struct config_flag *f,
				  struct config_error *err)
{
	(void)c;
	(void)f;
	(void)err;
	return 0;
}

/* Log outputs: default, stderr, stdout and file paths (config_validate
 * holds etcd's rules for their combinations); zap's systemd/journal
 * writer is not built. */
static int config_check_log_outputs(const struct cetcd_config *c, const struct config_flag *f,
				    struct config_error *err)
{
	const struct config_strings *ss = config_cfield(c, f);
	for (size_t i = 0; i < ss->count; i++) {
		const char *o = ss->v[i];
		if (strcmp(o, "systemd/journal") != 0)
			continue;
		config_errorf(err, 2,
			      "--%s=%s is not supported by cetcd yet: use 'default', 'stderr', 'stdout' or file paths (under a systemd unit, stderr goes to the journal)",
			      f->name, o);
		return -ENOTSUP;
	}
	return 0;
}

/* bbolt's two free-list types differ only in how bbolt keeps the free
 * pages in memory; the page on disk is the same, and cetcd's writer keeps
 * its own. Both are taken; anything else is a mistake (etcd would use
 * "array" for it silently). */
static int config_check_freelist(const struct cetcd_config *c, const struct config_flag *f,
				 struct config_error *err)
{
	const char *v = *(char *const *)config_cfield(c, f);
	if (!v || !*v || strcmp(v, "array") == 0 || strcmp(v, "map") == 0)
		return 0;
	config_errorf(err, 2, "invalid value \"%s\" for flag -%s: 'array' or 'map'", v, f->name);
	return -EINVAL;
}

/* Refuses any value whose feature is not built, naming the flag. */
int config_check_supported(const struct cetcd_config *c, struct config_error *err)
{
	struct cetcd_config *d = config_defaults();
	char val[512];
	int rc = 0;

	if (!d) {
		config_errorf(err, 1, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < CONFIG_NFLAGS && rc == 0; i++) {
		const struct config_flag *f = &config_flags[i];
		if (f->support == CS_PARTIAL) {
			rc = f->check(c, f, err);
			continue;
		}
		if (f->support != CS_DEFAULT_ONLY || config_equal(c, d, f))
			continue;
		if (f->same_as_def) {
			char why[64];
			if (config_set(d, f, f->same_as_def, why, sizeof(why)) == 0 &&
			    config_equal(c, d, f))
				continue;
		}
		config_value_text(c, f, val, sizeof(val));
		config_errorf(err, 2,
			      "--%s=%s is not supported by cetcd yet (only its default, '%s', is); %s",
			      f->name, val, f->help_def ? f->help_def : f->def,
			      c->source[i] == CONFIG_FROM_FILE ? "remove the key from the configuration file"
			      : f->no_env ? "remove the flag"
					  : "remove the flag or its ETCD_ environment variable");
		rc = -ENOTSUP;
	}
	config_defaults_free(d);
	return rc;
}
