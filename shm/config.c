/* The member configuration: etcd 3.4's flag table (see config.h).
 *
 * Behaviour follows etcd 3.4's etcdmain/config.go, embed/config.go and
 * pkg/flags, which use Go's flag package; error messages keep their
 * wording so that operators (and scripts) see what etcd would print.
 */
#include "shm/config.h"
#include "shm/errmsg.h"
#include "shm/region.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

enum config_type {
	CT_STRING,    /* char * */
	CT_CHOICE,    /* char *, one of f->choices */
	CT_BOOL,      /* bool */
	CT_UINT,      /* uint64_t (Go uint) */
	CT_UINT32,    /* uint32_t */
	CT_INT,       /* int64_t (Go int, int64) */
	CT_DURATION,  /* int64_t nanoseconds (Go time.Duration) */
	CT_URLS,      /* struct config_urls */
	CT_URLS_STAR, /* struct config_strings: "*" or URLs (--cors) */
	CT_USTRINGS,  /* struct config_strings, unique and sorted */
	CT_STRINGS,   /* struct config_strings, as given */
	CT_IGNORED,   /* no field: etcd accepts and ignores it, with a warning */
};

/* What cetcd does with a flag's value. This column is the one place that
 * knows what is built: flipping an entry to CS_ANY is how a feature is
 * switched on. */
enum config_support {
	CS_ANY,          /* every valid value works */
	CS_DEFAULT_ONLY, /* feature not built: only the default is accepted */
	CS_PARTIAL,      /* some values work; f->check refuses the others */
};

/* Programs that accept a flag. */
#define SCOPE_LAUNCHER (1u << CONFIG_PROG_LAUNCHER)
#define SCOPE_GATEWAYD (1u << CONFIG_PROG_GATEWAYD)
#define SCOPE_ALL                                                        \
	(SCOPE_LAUNCHER | (1u << CONFIG_PROG_RAFTD) | (1u << CONFIG_PROG_STORED) | \
	 SCOPE_GATEWAYD)

struct config_flag;
typedef int (*config_check_fn)(const struct cetcd_config *c, const struct config_flag *f,
			       struct config_error *err);

struct config_flag {
	const char *name;
	enum config_type type;
	size_t off;               /* of the field in struct cetcd_config */
	const char *def;          /* default, parsed like a command-line value */
	enum config_support support;
	unsigned scope;           /* SCOPE_* */
	bool no_env;              /* program-only flags have no ETCD_ variable */
	const char *section;      /* --help heading */
	const char *help_def;     /* default as --help shows it, if not def */
	const char *usage;
	const char *const *choices; /* CT_CHOICE; NULL-terminated */
	const char *same_as_def;  /* another spelling of the default's meaning */
	config_check_fn check;    /* CS_PARTIAL */
};

static int config_check_urls_http(const struct cetcd_config *, const struct config_flag *,
				  struct config_error *);
static int config_check_initial_cluster(const struct cetcd_config *, const struct config_flag *,
					struct config_error *);
static int config_check_cluster_state(const struct cetcd_config *, const struct config_flag *,
				      struct config_error *);
static int config_check_log_outputs(const struct cetcd_config *, const struct config_flag *,
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

static const struct config_flag config_flags[] = {
	/* Member */
	ANY("name", CT_STRING, name, "default", S_MEMBER,
	    "Human-readable name for this member."),
	{ .name = "data-dir", .type = CT_STRING, .off = OFF(data_dir), .def = "",
	  .support = CS_ANY, .scope = SCOPE_ALL, .section = S_MEMBER, .help_def = "${name}.etcd",
	  .usage = "Path to the data directory." },
	DEF_ONLY("wal-dir", CT_STRING, wal_dir, "", S_MEMBER,
		 "Path to the dedicated wal directory."),
	ANY("snapshot-count", CT_UINT, snapshot_count, "100000", S_MEMBER,
	    "Number of committed transactions to trigger a snapshot to disk."),
	ANY("heartbeat-interval", CT_UINT, heartbeat_interval_ms, "100", S_MEMBER,
	    "Time (in milliseconds) of a heartbeat interval."),
	ANY("election-timeout", CT_UINT, election_timeout_ms, "1000", S_MEMBER,
	    "Time (in milliseconds) for an election to timeout. See tuning documentation for details."),
	DEF_ONLY("initial-election-tick-advance", CT_BOOL, initial_election_tick_advance, "true",
		 S_MEMBER, "Whether to fast-forward initial election ticks on boot for faster election."),
	{ .name = "listen-peer-urls", .type = CT_URLS, .off = OFF(listen_peer_urls),
	  .def = "http://localhost:2380", .support = CS_PARTIAL, .scope = SCOPE_ALL,
	  .section = S_MEMBER, .usage = "List of URLs to listen on for peer traffic.",
	  .check = config_check_urls_http },
	{ .name = "listen-client-urls", .type = CT_URLS, .off = OFF(listen_client_urls),
	  .def = "http://localhost:2379", .support = CS_PARTIAL, .scope = SCOPE_ALL,
	  .section = S_MEMBER, .usage = "List of URLs to listen on for client traffic.",
	  .check = config_check_urls_http },
	DEF_ONLY("max-snapshots", CT_UINT, max_snapshots, "5", S_MEMBER,
		 "Maximum number of snapshot files to retain (0 is unlimited)."),
	DEF_ONLY("max-wals", CT_UINT, max_wals, "5", S_MEMBER,
		 "Maximum number of wal files to retain (0 is unlimited)."),
	ANY("quota-backend-bytes", CT_INT, quota_backend_bytes, "0", S_MEMBER,
	    "Raise alarms when backend size exceeds the given quota (0 defaults to low space quota)."),
	{ .name = "backend-batch-interval", .type = CT_DURATION, .off = OFF(backend_batch_interval_ns),
	  .def = "0", .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_MEMBER,
	  .help_def = "",
	  .usage = "BackendBatchInterval is the maximum time before commit the backend transaction." },
	DEF_ONLY("backend-batch-limit", CT_INT, backend_batch_limit, "0", S_MEMBER,
		 "BackendBatchLimit is the maximum operations before commit the backend transaction."),
	ANY("max-txn-ops", CT_UINT, max_txn_ops, "128", S_MEMBER,
	    "Maximum number of operations permitted in a transaction."),
	ANY("max-request-bytes", CT_UINT, max_request_bytes, "1572864", S_MEMBER,
	    "Maximum client request size in bytes the server will accept."),
	DEF_ONLY("max-concurrent-streams", CT_UINT32, max_concurrent_streams, "4294967295", S_MEMBER,
		 "Maximum concurrent streams that each client can open at a time."),
	DEF_ONLY("grpc-keepalive-min-time", CT_DURATION, grpc_keepalive_min_time_ns, "5s", S_MEMBER,
		 "Minimum duration interval that a client should wait before pinging server."),
	DEF_ONLY("grpc-keepalive-interval", CT_DURATION, grpc_keepalive_interval_ns, "2h", S_MEMBER,
		 "Frequency duration of server-to-client ping to check if a connection is alive (0 to disable)."),
	DEF_ONLY("grpc-keepalive-timeout", CT_DURATION, grpc_keepalive_timeout_ns, "20s", S_MEMBER,
		 "Additional duration of wait before closing a non-responsive connection (0 to disable)."),

	/* Clustering */
	{ .name = "initial-advertise-peer-urls", .type = CT_URLS,
	  .off = OFF(initial_advertise_peer_urls), .def = "http://localhost:2380",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "List of this member's peer URLs to advertise to the rest of the cluster.",
	  .check = config_check_urls_http },
	{ .name = "initial-cluster", .type = CT_STRING, .off = OFF(initial_cluster),
	  .def = "default=http://localhost:2380", .support = CS_PARTIAL, .scope = SCOPE_ALL,
	  .section = S_CLUSTER, .usage = "Initial cluster configuration for bootstrapping.",
	  .check = config_check_initial_cluster },
	{ .name = "initial-cluster-state", .type = CT_CHOICE, .off = OFF(initial_cluster_state),
	  .def = "new", .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "Initial cluster state ('new' or 'existing').", .choices = choices_cluster_state,
	  .check = config_check_cluster_state },
	ANY("initial-cluster-token", CT_STRING, initial_cluster_token, "etcd-cluster", S_CLUSTER,
	    "Initial cluster token for the etcd cluster during bootstrap."),
	{ .name = "advertise-client-urls", .type = CT_URLS, .off = OFF(advertise_client_urls),
	  .def = "http://localhost:2379", .support = CS_PARTIAL, .scope = SCOPE_ALL,
	  .section = S_CLUSTER, .usage = "List of this member's client URLs to advertise to the public.",
	  .check = config_check_urls_http },
	DEF_ONLY("discovery", CT_STRING, discovery, "", S_CLUSTER,
		 "Discovery URL used to bootstrap the cluster."),
	{ .name = "discovery-fallback", .type = CT_CHOICE, .off = OFF(discovery_fallback),
	  .def = "proxy", .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_CLUSTER,
	  .usage = "Expected behavior ('exit' or 'proxy') when discovery services fails.",
	  .choices = choices_fallback },
	DEF_ONLY("discovery-proxy", CT_STRING, discovery_proxy, "", S_CLUSTER,
		 "HTTP proxy to use for traffic to discovery service."),
	DEF_ONLY("discovery-srv", CT_STRING, discovery_srv, "", S_CLUSTER,
		 "DNS srv domain used to bootstrap the cluster."),
	DEF_ONLY("discovery-srv-name", CT_STRING, discovery_srv_name, "", S_CLUSTER,
		 "Suffix to the dns srv name queried when bootstrapping."),
	DEF_ONLY("strict-reconfig-check", CT_BOOL, strict_reconfig_check, "true", S_CLUSTER,
		 "Reject reconfiguration requests that would cause quorum loss."),
	DEF_ONLY("pre-vote", CT_BOOL, pre_vote, "false", S_CLUSTER,
		 "Enable to run an additional Raft election phase."),
	DEF_ONLY("auto-compaction-retention", CT_STRING, auto_compaction_retention, "0", S_CLUSTER,
		 "Auto compaction retention length. 0 means disable auto compaction."),
	DEF_ONLY("auto-compaction-mode", CT_STRING, auto_compaction_mode, "periodic", S_CLUSTER,
		 "Interpret 'auto-compaction-retention' one of: periodic|revision."),
	DEF_ONLY("enable-v2", CT_BOOL, enable_v2, "false", S_CLUSTER,
		 "Accept etcd V2 client requests."),

	/* Security */
	DEF_ONLY("cert-file", CT_STRING, cert_file, "", S_SECURITY,
		 "Path to the client server TLS cert file."),
	DEF_ONLY("key-file", CT_STRING, key_file, "", S_SECURITY,
		 "Path to the client server TLS key file."),
	DEF_ONLY("client-cert-auth", CT_BOOL, client_cert_auth, "false", S_SECURITY,
		 "Enable client cert authentication."),
	DEF_ONLY("client-crl-file", CT_STRING, client_crl_file, "", S_SECURITY,
		 "Path to the client certificate revocation list file."),
	DEF_ONLY("client-cert-allowed-hostname", CT_STRING, client_cert_allowed_hostname, "",
		 S_SECURITY, "Allowed TLS hostname for client cert authentication."),
	DEF_ONLY("trusted-ca-file", CT_STRING, trusted_ca_file, "", S_SECURITY,
		 "Path to the client server TLS trusted CA cert file."),
	DEF_ONLY("auto-tls", CT_BOOL, auto_tls, "false", S_SECURITY,
		 "Client TLS using generated certificates."),
	DEF_ONLY("peer-cert-file", CT_STRING, peer_cert_file, "", S_SECURITY,
		 "Path to the peer server TLS cert file."),
	DEF_ONLY("peer-key-file", CT_STRING, peer_key_file, "", S_SECURITY,
		 "Path to the peer server TLS key file."),
	DEF_ONLY("peer-client-cert-auth", CT_BOOL, peer_client_cert_auth, "false", S_SECURITY,
		 "Enable peer client cert authentication."),
	DEF_ONLY("peer-trusted-ca-file", CT_STRING, peer_trusted_ca_file, "", S_SECURITY,
		 "Path to the peer server TLS trusted CA file."),
	DEF_ONLY("peer-cert-allowed-cn", CT_STRING, peer_cert_allowed_cn, "", S_SECURITY,
		 "Required CN for client certs connecting to the peer endpoint."),
	DEF_ONLY("peer-cert-allowed-hostname", CT_STRING, peer_cert_allowed_hostname, "",
		 S_SECURITY, "Allowed TLS hostname for inter peer authentication."),
	DEF_ONLY("peer-auto-tls", CT_BOOL, peer_auto_tls, "false", S_SECURITY,
		 "Peer TLS using self-generated certificates if --peer-key-file and --peer-cert-file are not provided."),
	DEF_ONLY("peer-crl-file", CT_STRING, peer_crl_file, "", S_SECURITY,
		 "Path to the peer certificate revocation list file."),
	DEF_ONLY("cipher-suites", CT_STRINGS, cipher_suites, "", S_SECURITY,
		 "Comma-separated list of supported TLS cipher suites between client/server and peers (empty will be auto-populated by Go)."),
	DEF_ONLY("cors", CT_URLS_STAR, cors, "*", S_SECURITY,
		 "Comma-separated whitelist of origins for CORS, or cross-origin resource sharing, (empty or * means allow all)."),
	DEF_ONLY("host-whitelist", CT_USTRINGS, host_whitelist, "*", S_SECURITY,
		 "Acceptable hostnames from HTTP client requests, if server is not secure (empty or * means allow all)."),
	DEF_ONLY("experimental-peer-skip-client-san-verification", CT_BOOL,
		 experimental_peer_skip_client_san_verification, "false", S_SECURITY,
		 "Skip verification of SAN field in client certificate for peer connections."),

	/* Auth */
	DEF_ONLY("auth-token", CT_STRING, auth_token, "simple", S_AUTH,
		 "Specify a v3 authentication token type and its options ('simple' or 'jwt')."),
	DEF_ONLY("bcrypt-cost", CT_UINT, bcrypt_cost, "10", S_AUTH,
		 "Specify the cost / strength of the bcrypt algorithm for hashing auth passwords. Valid values are between 4 and 31."),
	DEF_ONLY("auth-token-ttl", CT_UINT, auth_token_ttl_s, "300", S_AUTH,
		 "Time (in seconds) of the auth-token-ttl."),

	/* Profiling and Monitoring */
	DEF_ONLY("enable-pprof", CT_BOOL, enable_pprof, "false", S_MONITOR,
		 "Enable runtime profiling data via HTTP server. Address is at client URL + \"/debug/pprof/\""),
	DEF_ONLY("metrics", CT_STRING, metrics, "basic", S_MONITOR,
		 "Set level of detail for exported metrics, specify 'extensive' to include histogram metrics."),
	DEF_ONLY("listen-metrics-urls", CT_URLS, listen_metrics_urls, "", S_MONITOR,
		 "List of URLs to listen on for the metrics and health endpoints."),
	DEF_ONLY("enable-grpc-gateway", CT_BOOL, enable_grpc_gateway, "true", S_MONITOR,
		 "Enable GRPC gateway."),

	/* Logging */
	ANY("logger", CT_STRING, logger, "capnslog", S_LOGGING,
	    "Specify 'zap' for structured logging or 'capnslog'. cetcd always writes zap's JSON lines."),
	{ .name = "log-outputs", .type = CT_USTRINGS, .off = OFF(log_outputs), .def = "default",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_LOGGING,
	  .usage = "Specify 'stdout' or 'stderr' to skip journald logging even when running under systemd, or list of comma separated output targets.",
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
	DEF_ONLY("experimental-initial-corrupt-check", CT_BOOL, experimental_initial_corrupt_check,
		 "false", S_EXPERIMENTAL,
		 "Enable to check data corruption before serving any client/peer traffic."),
	DEF_ONLY("experimental-corrupt-check-time", CT_DURATION, experimental_corrupt_check_time_ns,
		 "0s", S_EXPERIMENTAL, "Duration of time between cluster corruption check passes."),
	DEF_ONLY("experimental-enable-v2v3", CT_STRING, experimental_enable_v2v3, "", S_EXPERIMENTAL,
		 "Serve v2 requests through the v3 backend under a given prefix."),
	{ .name = "experimental-backend-bbolt-freelist-type", .type = CT_STRING,
	  .off = OFF(experimental_backend_bbolt_freelist_type), .def = "",
	  .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_EXPERIMENTAL,
	  .help_def = "array", .same_as_def = "array",
	  .usage = "ExperimentalBackendFreelistType specifies the type of freelist that boltdb backend uses(array and map are supported types)." },
	DEF_ONLY("experimental-enable-lease-checkpoint", CT_BOOL,
		 experimental_enable_lease_checkpoint, "false", S_EXPERIMENTAL,
		 "ExperimentalEnableLeaseCheckpoint enables primary lessor to persist lease remainingTTL to prevent indefinite auto-renewal of long lived leases."),
	DEF_ONLY("experimental-enable-lease-checkpoint-persist", CT_BOOL,
		 experimental_enable_lease_checkpoint_persist, "false", S_EXPERIMENTAL,
		 "Enable persisting remainingTTL to prevent indefinite auto-renewal of long lived leases. Requires experimental-enable-lease-checkpoint to be enabled."),
	{ .name = "experimental-compaction-batch-limit", .type = CT_INT,
	  .off = OFF(experimental_compaction_batch_limit), .def = "0", .support = CS_DEFAULT_ONLY,
	  .scope = SCOPE_ALL, .section = S_EXPERIMENTAL, .help_def = "1000", .same_as_def = "1000",
	  .usage = "ExperimentalCompactionBatchLimit sets the maximum revisions deleted in each compaction batch." },
	{ .name = "experimental-watch-progress-notify-interval", .type = CT_DURATION,
	  .off = OFF(experimental_watch_progress_notify_interval_ns), .def = "0",
	  .support = CS_DEFAULT_ONLY, .scope = SCOPE_ALL, .section = S_EXPERIMENTAL,
	  .help_def = "10m", .same_as_def = "10m",
	  .usage = "Duration of periodical watch progress notification." },
	DEF_ONLY("experimental-warning-apply-duration", CT_DURATION,
		 experimental_warning_apply_duration_ns, "100ms", S_EXPERIMENTAL,
		 "Warning is generated if requests take more than this duration."),

	/* Unsafe */
	DEF_ONLY("unsafe-no-fsync", CT_BOOL, unsafe_no_fsync, "false", S_UNSAFE,
		 "Disables fsync, unsafe, will cause data loss."),
	DEF_ONLY("force-new-cluster", CT_BOOL, force_new_cluster, "false", S_UNSAFE,
		 "Force to create a new one-member cluster."),

	/* To be deprecated */
	ANY("debug", CT_BOOL, debug, "false", S_DEPRECATED,
	    "Enable debug-level logging for etcd. [WARN] Will be deprecated in v3.5. Use '--log-level=debug' instead."),
	{ .name = "log-output", .type = CT_USTRINGS, .off = OFF(log_output), .def = "default",
	  .support = CS_PARTIAL, .scope = SCOPE_ALL, .section = S_DEPRECATED,
	  .usage = "[TO BE DEPRECATED IN v3.5] use '--log-outputs'.",
	  .check = config_check_log_outputs },
	DEF_ONLY("log-package-levels", CT_STRING, log_package_levels, "", S_DEPRECATED,
		 "Specify a particular log level for each etcd package (eg: 'etcdmain=CRITICAL,etcdserver=DEBUG')."),

	/* Commands */
	DEF_ONLY("config-file", CT_STRING, config_file, "", NULL,
		 "Path to the server configuration file."),
	ANY("version", CT_BOOL, print_version, "false", NULL, "Print the version and exit."),

	/* cetcd's own */
	ANY("gateways", CT_UINT32, gateways, "0", S_CETCD,
	    "Number of gatewayd processes serving clients (0: one per online CPU)."),
	ANY("latest-cache-mib", CT_UINT, latest_cache_mib, CONFIG_STR(SHM_CACHE_MIB_DEFAULT), S_CETCD,
	    "MiB of shared memory in which stored records where each key's latest revision sits in the db, so that point reads skip the tree (0: none). The region takes a page more, and starts the cache on a 2 MiB boundary: with --runtime-dir on a tmpfs mounted with huge=within_size the cache gets 2 MiB pages."),
	{ .name = "runtime-dir", .type = CT_STRING, .off = OFF(runtime_dir), .def = "",
	  .support = CS_ANY, .scope = SCOPE_ALL, .section = S_CETCD,
	  .help_def = "/dev/shm/cetcd-<hash of the absolute data dir>",
	  .usage = "Directory (on tmpfs) for the member's shared-memory region." },
	{ .name = "prepare-only", .type = CT_BOOL, .off = OFF(prepare_only), .def = "false",
	  .support = CS_ANY, .scope = SCOPE_LAUNCHER, .no_env = true, .section = S_CETCD,
	  .usage = "Create the data dir, the runtime dir and the region, then exit (for systemd units)." },
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

/* Largest --gateways; the region has 2 * gateways + 2 slots. */
#define CONFIG_MAX_GATEWAYS 64u
/* etcd's maxElectionMs. */
#define CONFIG_MAX_ELECTION_MS 50000u

static void config_errorf(struct config_error *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void config_errorf(struct config_error *err, int status, const char *fmt, ...)
{
	va_list ap;
	if (!err)
		return;
	err->exit_status = status;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

static void *config_field(struct cetcd_config *c, const struct config_flag *f)
{
	return (char *)c + f->off;
}

static const void *config_cfield(const struct cetcd_config *c, const struct config_flag *f)
{
	return (const char *)c + f->off;
}

static const struct config_flag *config_lookup(const char *name, size_t len, unsigned scope)
{
	for (size_t i = 0; i < CONFIG_NFLAGS; i++) {
		const struct config_flag *f = &config_flags[i];
		if (strlen(f->name) == len && memcmp(f->name, name, len) == 0 && (f->scope & scope))
			return f;
	}
	return NULL;
}

static size_t config_index(const struct config_flag *f)
{
	return (size_t)(f - config_flags);
}

/* ---- lists ---- */

static void config_strings_free(struct config_strings *s)
{
	for (size_t i = 0; i < s->count; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->count = 0;
}

static void config_url_free(struct config_url *u)
{
	free(u->text);
	free(u->host);
	free(u->port);
}

static void config_urls_free(struct config_urls *us)
{
	for (size_t i = 0; i < us->count; i++)
		config_url_free(&us->v[i]);
	free(us->v);
	us->v = NULL;
	us->count = 0;
}

static int config_strcmp_p(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int config_url_cmp(const void *a, const void *b)
{
	return strcmp(((const struct config_url *)a)->text, ((const struct config_url *)b)->text);
}

/* Splits s at commas into out (every piece kept, empty ones too, as Go's
 * strings.Split). unique sorts and drops repeats. 0 or -ENOMEM. */
static int config_split(const char *s, bool unique, struct config_strings *out)
{
	struct config_strings res = { 0 };
	size_t n = 1;
	for (const char *p = s; *p; p++)
		n += *p == ',';
	res.v = calloc(n, sizeof(*res.v));
	if (!res.v)
		return -ENOMEM;
	const char *start = s;
	for (size_t i = 0; i < n; i++) {
		const char *end = strchr(start, ',');
		size_t len = end ? (size_t)(end - start) : strlen(start);
		res.v[i] = strndup(start, len);
		if (!res.v[i]) {
			res.count = i;
			config_strings_free(&res);
			return -ENOMEM;
		}
		res.count = i + 1;
		start = end ? end + 1 : start + len;
	}
	if (unique && res.count > 1) {
		size_t w = 1;
		qsort(res.v, res.count, sizeof(*res.v), config_strcmp_p);
		for (size_t r = 1; r < res.count; r++) {
			if (strcmp(res.v[r], res.v[w - 1]) == 0)
				free(res.v[r]);
			else
				res.v[w++] = res.v[r];
		}
		res.count = w;
	}
	*out = res;
	return 0;
}

/* ---- numbers (Go's strconv with base 0) ---- */

/* Parses an unsigned Go integer literal: decimal, 0x, 0o, 0b, or 0-led
 * octal, with '_' allowed between digits. -EINVAL (syntax) or -ERANGE. */
static int config_parse_uint_text(const char *s, uint64_t max, uint64_t *out)
{
	unsigned base = 10;
	const char *p = s;
	bool prefixed = false;
	uint64_t v = 0;
	bool any = false;
	bool last_us = false;

	if (*p == '\0')
		return -EINVAL;
	if (p[0] == '0' && p[1] != '\0') {
		switch (p[1]) {
		case 'x': case 'X': base = 16; p += 2; prefixed = true; break;
		case 'o': case 'O': base = 8; p += 2; prefixed = true; break;
		case 'b': case 'B': base = 2; p += 2; prefixed = true; break;
		default: base = 8; p += 1; any = true; break;
		}
	}
	/* an underscore may follow a base prefix or a digit */
	last_us = false;
	bool prev_digit_or_prefix = prefixed || any;
	for (; *p; p++) {
		unsigned d;
		if (*p == '_') {
			if (!prev_digit_or_prefix)
				return -EINVAL;
			prev_digit_or_prefix = false;
			last_us = true;
			continue;
		}
		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'z')
			d = (unsigned)(*p - 'a') + 10;
		else if (*p >= 'A' && *p <= 'Z')
			d = (unsigned)(*p - 'A') + 10;
		else
			return -EINVAL;
		if (d >= base)
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			return -ERANGE;
		v = v * base + d;
		any = true;
		last_us = false;
		prev_digit_or_prefix = true;
	}
	if (!any || last_us)
		return -EINVAL;
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

static int config_parse_int_text(const char *s, int64_t min, int64_t max, int64_t *out)
{
	bool neg = false;
	uint64_t u;
	if (*s == '+' || *s == '-') {
		neg = *s == '-';
		s++;
	}
	int rc = config_parse_uint_text(s, (uint64_t)INT64_MAX + 1, &u);
	if (rc)
		return rc;
	if (!neg && u > (uint64_t)INT64_MAX)
		return -ERANGE;
	int64_t v = neg ? (int64_t)(0 - u) : (int64_t)u;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Go's time.ParseDuration: "300ms", "1.5h", "2h45m", "-1s", "0". Writes
 * Go's message to why on failure. */
static int config_parse_duration(const char *s0, int64_t *out, char *why, size_t whylen)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{ "ns", 1ull },
		{ "us", 1000ull },
		{ "\xc2\xb5s", 1000ull }, /* U+00B5 */
		{ "\xce\xbcs", 1000ull }, /* U+03BC */
		{ "ms", 1000000ull },
		{ "s", 1000000000ull },
		{ "m", 60000000000ull },
		{ "h", 3600000000000ull },
	};
	const uint64_t limit = (uint64_t)1 << 63;
	const char *s = s0;
	bool neg = false;
	uint64_t d = 0;

	if (*s == '-' || *s == '+') {
		neg = *s == '-';
		s++;
	}
	if (strcmp(s, "0") == 0) {
		*out = 0;
		return 0;
	}
	if (*s == '\0')
		goto invalid;
	while (*s) {
		uint64_t v = 0, f = 0;
		double scale = 1;
		bool pre = false, post = false;

		if (!(*s == '.' || (*s >= '0' && *s <= '9')))
			goto invalid;
		while (*s >= '0' && *s <= '9') {
			if (v > (limit - 1) / 10)
				goto invalid;
			v = v * 10 + (uint64_t)(*s - '0');
			if (v > limit)
				goto invalid;
			s++;
			pre = true;
		}
		if (*s == '.') {
			s++;
			bool overflow = false;
			while (*s >= '0' && *s <= '9') {
				if (!overflow) {
					if (f > (limit - 1) / 10) {
						overflow = true; /* ignore further digits, as Go */
					} else {
						f = f * 10 + (uint64_t)(*s - '0');
						scale *= 10;
					}
				}
				s++;
				post = true;
			}
		}
		if (!pre && !post)
			goto invalid;
		const char *u = s;
		while (*s && *s != '.' && !(*s >= '0' && *s <= '9'))
			s++;
		if (u == s) {
			snprintf(why, whylen, "time: missing unit in duration \"%s\"", s0);
			return -EINVAL;
		}
		uint64_t unit = 0;
		for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			if (strlen(units[i].name) == (size_t)(s - u) &&
			    memcmp(units[i].name, u, (size_t)(s - u)) == 0)
				unit = units[i].ns;
		}
		if (!unit) {
			snprintf(why, whylen, "time: unknown unit \"%.*s\" in duration \"%s\"",
				 (int)(s - u), u, s0);
			return -EINVAL;
		}
		if (v > limit / unit)
			goto invalid;
		v *= unit;
		if (f > 0) {
			v += (uint64_t)((double)f * ((double)unit / scale));
			if (v > limit)
				goto invalid;
		}
		d += v;
		if (d > limit)
			goto invalid;
	}
	if (neg) {
		*out = (int64_t)(0 - d);
		return 0;
	}
	if (d > limit - 1)
		goto invalid;
	*out = (int64_t)d;
	return 0;
invalid:
	snprintf(why, whylen, "time: invalid duration \"%s\"", s0);
	return -EINVAL;
}

/* Formats ns as Go's Duration.String would for whole units ("1h0m0s" is
 * written "1h" here: only used in messages). */
static void config_format_duration(int64_t ns, char *buf, size_t len)
{
	if (ns % 1000000000 == 0)
		snprintf(buf, len, "%llds", (long long)(ns / 1000000000));
	else if (ns % 1000000 == 0)
		snprintf(buf, len, "%lldms", (long long)(ns / 1000000));
	else
		snprintf(buf, len, "%lldns", (long long)ns);
}

/* ---- URLs (etcd's types.NewURLs over Go's url.Parse) ---- */

/* Parses one URL. On failure writes etcd's message to why. */
static int config_parse_url(const char *in, struct config_url *u, char *why, size_t whylen)
{
	const char *s = in;
	size_t len;
	memset(u, 0, sizeof(*u));

	/* strings.TrimSpace */
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f')
		s++;
	len = strlen(s);
	while (len > 0 && strchr(" \t\n\r\v\f", s[len - 1]))
		len--;

	/* scheme: letter, then letters, digits, '+', '-', '.' up to ':' */
	size_t i = 0;
	if (len > 0 && ((s[0] | 0x20) >= 'a' && (s[0] | 0x20) <= 'z')) {
		i = 1;
		while (i < len && (((s[i] | 0x20) >= 'a' && (s[i] | 0x20) <= 'z') ||
				   (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '-' ||
				   s[i] == '.'))
			i++;
	}
	char scheme[sizeof(u->scheme)] = "";
	if (i > 0 && i < len && s[i] == ':' && i < sizeof(scheme)) {
		for (size_t k = 0; k < i; k++)
			scheme[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] + 32 : s[k]);
		scheme[i] = '\0';
	} else {
		i = 0;
	}
	if (strcmp(scheme, "http") && strcmp(scheme, "https") && strcmp(scheme, "unix") &&
	    strcmp(scheme, "unixs")) {
		snprintf(why, whylen, "URL scheme must be http, https, unix, or unixs: %.*s",
			 (int)len, s);
		return -EINVAL;
	}
	const char *rest = s + i + 1;
	size_t rlen = len - i - 1;
	const char *auth = "";
	size_t alen = 0;
	if (rlen >= 2 && rest[0] == '/' && rest[1] == '/') {
		auth = rest + 2;
		alen = strcspn(auth, "/?#");
		if (alen > rlen - 2)
			alen = rlen - 2;
		rest = auth + alen;
		rlen = rlen - 2 - alen;
	}
	if (memchr(auth, '@', alen)) {
		snprintf(why, whylen, "URL must not contain user information: %.*s", (int)len, s);
		return -EINVAL;
	}
	/* net.SplitHostPort */
	const char *host = auth, *port = NULL;
	size_t hlen = 0, plen = 0;
	bool ok = false;
	if (alen > 0 && auth[0] == '[') {
		const char *close = memchr(auth, ']', alen);
		if (close && (size_t)(close - auth) + 1 < alen && close[1] == ':') {
			host = auth + 1;
			hlen = (size_t)(close - auth) - 1;
			port = close + 2;
			plen = alen - (size_t)(port - auth);
			ok = !memchr(port, ':', plen) && !memchr(port, '[', plen) &&
			     !memchr(port, ']', plen);
		}
	} else if (alen > 0) {
		const char *colon = NULL;
		for (size_t k = 0; k < alen; k++)
			if (auth[k] == ':')
				colon = auth + k;
		if (colon) {
			hlen = (size_t)(colon - auth);
			port = colon + 1;
			plen = alen - hlen - 1;
			ok = !memchr(auth, ':', hlen) && !memchr(auth, '[', hlen) &&
			     !memchr(auth, ']', alen);
		}
	}
	if (!ok) {
		snprintf(why, whylen, "URL address does not have the form \"host:port\": %.*s",
			 (int)len, s);
		return -EINVAL;
	}
	if (rlen > 0) {
		snprintf(why, whylen, "URL must not contain a path: %.*s", (int)len, s);
		return -EINVAL;
	}
	snprintf(u->scheme, sizeof(u->scheme), "%s", scheme);
	u->host = strndup(host, hlen);
	u->port = strndup(port, plen);
	if (u->host && u->port &&
	    asprintf(&u->text, "%s://%.*s", scheme, (int)alen, auth) < 0)
		u->text = NULL;
	if (!u->host || !u->port || !u->text) {
		config_url_free(u);
		memset(u, 0, sizeof(*u));
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* A comma-separated URL list into a sorted list without repeats. */
static int config_parse_urls(const char *s, struct config_urls *out, char *why, size_t whylen)
{
	struct config_strings parts;
	struct config_urls res = { 0 };
	int rc = config_split(s, false, &parts);
	if (rc) {
		snprintf(why, whylen, "out of memory");
		return rc;
	}
	res.v = calloc(parts.count, sizeof(*res.v));
	if (!res.v) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out_free_parts;
	}
	for (size_t i = 0; i < parts.count; i++) {
		rc = config_parse_url(parts.v[i], &res.v[res.count], why, whylen);
		if (rc)
			goto out_free_res;
		res.count++;
	}
	qsort(res.v, res.count, sizeof(*res.v), config_url_cmp);
	size_t w = res.count ? 1 : 0;
	for (size_t r = 1; r < res.count; r++) {
		if (strcmp(res.v[r].text, res.v[w - 1].text) == 0)
			config_url_free(&res.v[r]);
		else
			res.v[w++] = res.v[r];
	}
	res.count = w;
	config_strings_free(&parts);
	*out = res;
	return 0;

out_free_res:
	config_urls_free(&res);
out_free_parts:
	config_strings_free(&parts);
	return rc;
}

/* Text of a URL list, comma-joined. */
static void config_urls_text(const struct config_urls *us, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < us->count && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", us->v[i].text);
}

/* ---- setting a value ---- */

static const char *config_want(enum config_type t)
{
	switch (t) {
	case CT_UINT:
	case CT_UINT32:
		return " (want an unsigned integer)";
	case CT_INT:
		return " (want an integer)";
	default:
		return "";
	}
}

/* Sets f's field from text. On failure writes the reason to why (the part
 * after "invalid value ... :" in Go's message) and returns -EINVAL (or
 * -ENOMEM). */
static int config_set(struct cetcd_config *c, const struct config_flag *f, const char *text,
		      char *why, size_t whylen)
{
	void *field = config_field(c, f);
	int rc = 0;

	switch (f->type) {
	case CT_CHOICE: {
		bool found = false;
		for (const char *const *ch = f->choices; *ch; ch++)
			found |= strcmp(*ch, text) == 0;
		if (!found) {
			size_t n = (size_t)snprintf(why, whylen, "invalid value (valid values:");
			for (const char *const *ch = f->choices; *ch && n < whylen; ch++)
				n += (size_t)snprintf(why + n, whylen - n, " %s", *ch);
			if (n < whylen)
				snprintf(why + n, whylen - n, ")");
			return -EINVAL;
		}
	}
		/* fall through */
	case CT_STRING: {
		char *dup = strdup(text);
		if (!dup)
			goto nomem;
		free(*(char **)field);
		*(char **)field = dup;
		return 0;
	}
	case CT_BOOL:
		if (!strcmp(text, "1") || !strcmp(text, "t") || !strcmp(text, "T") ||
		    !strcmp(text, "true") || !strcmp(text, "TRUE") || !strcmp(text, "True")) {
			*(bool *)field = true;
		} else if (!strcmp(text, "0") || !strcmp(text, "f") || !strcmp(text, "F") ||
			   !strcmp(text, "false") || !strcmp(text, "FALSE") ||
			   !strcmp(text, "False")) {
			*(bool *)field = false;
		} else {
			snprintf(why, whylen, "parse error");
			return -EINVAL;
		}
		return 0;
	case CT_UINT:
	case CT_UINT32: {
		uint64_t v;
		rc = config_parse_uint_text(text, f->type == CT_UINT32 ? UINT32_MAX : UINT64_MAX, &v);
		if (rc)
			break;
		if (f->type == CT_UINT32)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = v;
		return 0;
	}
	case CT_INT:
		rc = config_parse_int_text(text, INT64_MIN, INT64_MAX, (int64_t *)field);
		break;
	case CT_DURATION:
		return config_parse_duration(text, (int64_t *)field, why, whylen);
	case CT_URLS: {
		struct config_urls us = { 0 };
		/* etcd lets "" through every URL list flag and keeps the
		 * list it had (its UniqueURLs allows "" as an exception) */
		if (text[0] == '\0')
			return 0;
		rc = config_parse_urls(text, &us, why, whylen);
		if (rc)
			return rc;
		config_urls_free((struct config_urls *)field);
		*(struct config_urls *)field = us;
		return 0;
	}
	case CT_URLS_STAR: {
		struct config_strings ss = { 0 };
		if (strcmp(text, "*") == 0 || text[0] == '\0') {
			rc = text[0] ? config_split(text, true, &ss) : 0;
		} else {
			struct config_urls us;
			rc = config_parse_urls(text, &us, why, whylen);
			if (rc)
				return rc;
			ss.v = calloc(us.count ? us.count : 1, sizeof(*ss.v));
			for (size_t i = 0; ss.v && i < us.count; i++) {
				ss.v[i] = us.v[i].text;
				us.v[i].text = NULL;
				ss.count++;
			}
			rc = ss.v ? 0 : -ENOMEM;
			config_urls_free(&us);
		}
		if (rc)
			goto nomem;
		config_strings_free((struct config_strings *)field);
		*(struct config_strings *)field = ss;
		return 0;
	}
	case CT_USTRINGS:
	case CT_STRINGS: {
		struct config_strings ss = { 0 };
		if (text[0] != '\0' || f->type == CT_USTRINGS) {
			rc = config_split(text, f->type == CT_USTRINGS, &ss);
			if (rc)
				goto nomem;
		}
		config_strings_free((struct config_strings *)field);
		*(struct config_strings *)field = ss;
		return 0;
	}
	case CT_IGNORED:
		return 0;
	}
	if (rc == -ERANGE) {
		snprintf(why, whylen, "value out of range%s", config_want(f->type));
		return -EINVAL;
	}
	if (rc) {
		snprintf(why, whylen, "parse error%s", config_want(f->type));
		return -EINVAL;
	}
	return 0;
nomem:
	snprintf(why, whylen, "out of memory");
	return -ENOMEM;
}

/* Whether f's value in a equals its value in b. */
static bool config_equal(const struct cetcd_config *a, const struct cetcd_config *b,
			 const struct config_flag *f)
{
	const void *x = config_cfield(a, f), *y = config_cfield(b, f);
	switch (f->type) {
	case CT_STRING:
	case CT_CHOICE:
		return strcmp(*(char *const *)x, *(char *const *)y) == 0;
	case CT_BOOL:
		return *(const bool *)x == *(const bool *)y;
	case CT_UINT:
		return *(const uint64_t *)x == *(const uint64_t *)y;
	case CT_UINT32:
		return *(const uint32_t *)x == *(const uint32_t *)y;
	case CT_INT:
	case CT_DURATION:
		return *(const int64_t *)x == *(const int64_t *)y;
	case CT_URLS: {
		const struct config_urls *p = x, *q = y;
		if (p->count != q->count)
			return false;
		for (size_t i = 0; i < p->count; i++)
			if (strcmp(p->v[i].text, q->v[i].text))
				return false;
		return true;
	}
	case CT_URLS_STAR:
	case CT_USTRINGS:
	case CT_STRINGS: {
		const struct config_strings *p = x, *q = y;
		if (p->count != q->count)
			return false;
		for (size_t i = 0; i < p->count; i++)
			if (strcmp(p->v[i], q->v[i]))
				return false;
		return true;
	}
	case CT_IGNORED:
		return true;
	}
	return true;
}

/* ---- init / free ---- */

void config_free(struct cetcd_config *c)
{
	for (size_t i = 0; i < CONFIG_NFLAGS; i++) {
		const struct config_flag *f = &config_flags[i];
		void *field = config_field(c, f);
		switch (f->type) {
		case CT_STRING:
		case CT_CHOICE:
			free(*(char **)field);
			*(char **)field = NULL;
			break;
		case CT_URLS:
			config_urls_free(field);
			break;
		case CT_URLS_STAR:
		case CT_USTRINGS:
		case CT_STRINGS:
			config_strings_free(field);
			break;
		default:
			break;
		}
	}
}

int config_init(struct cetcd_config *c)
{
	char why[256];
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < CONFIG_NFLAGS; i++) {
		int rc = config_set(c, &config_flags[i], config_flags[i].def ? config_flags[i].def : "",
				    why, sizeof(why));
		if (rc) {
			config_free(c);
			return rc == -ENOMEM ? -ENOMEM : -EINVAL;
		}
	}
	c->log_level = LOG_LEVEL_INFO;
	return 0;
}

/* A fresh default configuration to compare against; NULL if out of memory.
 * The result is freed with config_defaults_free. */
static struct cetcd_config *config_defaults(void)
{
	struct cetcd_config *d = malloc(sizeof(*d));
	if (!d)
		return NULL;
	if (config_init(d)) {
		free(d);
		return NULL;
	}
	return d;
}

static void config_defaults_free(struct cetcd_config *d)
{
	if (!d)
		return;
	config_free(d);
	free(d);
}

bool config_is_set(const struct cetcd_config *c, const char *flag)
{
	const struct config_flag *f = config_lookup(flag, strlen(flag), ~0u);
	return f && c->source[config_index(f)] != CONFIG_FROM_DEFAULT;
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

static int config_check_urls_http(const struct cetcd_config *c, const struct config_flag *f,
				  struct config_error *err)
{
	const struct config_urls *us = config_cfield(c, f);
	for (size_t i = 0; i < us->count; i++) {
		const char *scheme = us->v[i].scheme;
		if (strcmp(scheme, "http") == 0)
			continue;
		config_errorf(err, 2,
			      "--%s=%s is not supported by cetcd yet: %s URLs need %s, which is not built yet; use http:// URLs",
			      f->name, us->v[i].text, scheme,
			      scheme[0] == 'h' ? "TLS" : "unix socket listeners");
		return -ENOTSUP;
	}
	return 0;
}

/* One member's entry of --initial-cluster: name=url,name=url. Counts the
 * distinct names, as etcd's types.NewURLsMap groups them. */
static size_t config_cluster_names(const char *cluster, const char **first, size_t *first_len)
{
	size_t names = 0;
	const char *p = cluster;
	*first = NULL;
	*first_len = 0;
	while (*p) {
		size_t len = strcspn(p, ",");
		size_t klen = strcspn(p, "=");
		if (klen > len)
			klen = len;
		if (len > 0) {
			if (!*first) {
				*first = p;
				*first_len = klen;
				names = 1;
			} else if (klen != *first_len || memcmp(p, *first, klen) != 0) {
				/* a second name; more are not counted exactly */
				names++;
			}
		}
		p += len;
		if (*p == ',')
			p++;
	}
	return names;
}

static int config_check_initial_cluster(const struct cetcd_config *c, const struct config_flag *f,
					struct config_error *err)
{
	const char *first;
	size_t first_len;
	(void)f;
	if (config_cluster_names(c->initial_cluster, &first, &first_len) > 1) {
		config_errorf(err, 2,
			      "--initial-cluster=%s is not supported by cetcd yet: it names more than one member, and multi-member clusters are not built yet",
			      c->initial_cluster);
		return -ENOTSUP;
	}
	return 0;
}

static int config_check_cluster_state(const struct cetcd_config *c, const struct config_flag *f,
				      struct config_error *err)
{
	(void)f;
	if (strcmp(c->initial_cluster_state, "new") != 0) {
		config_errorf(err, 2,
			      "--initial-cluster-state=%s is not supported by cetcd yet: joining an existing cluster is not built yet",
			      c->initial_cluster_state);
		return -ENOTSUP;
	}
	return 0;
}

static int config_check_log_outputs(const struct cetcd_config *c, const struct config_flag *f,
				    struct config_error *err)
{
	const struct config_strings *ss = config_cfield(c, f);
	for (size_t i = 0; i < ss->count; i++) {
		const char *o = ss->v[i];
		if (!strcmp(o, "default") || !strcmp(o, "stderr") || !strcmp(o, "stdout"))
			continue;
		config_errorf(err, 2,
			      "--%s=%s is not supported by cetcd yet: only 'default', 'stderr' and 'stdout' are",
			      f->name, o);
		return -ENOTSUP;
	}
	return 0;
}

/* Refuses any value whose feature is not built, naming the flag. */
static int config_check_supported(const struct cetcd_config *c, struct config_error *err)
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
			      "--%s=%s is not supported by cetcd yet (only its default, '%s', is); remove the flag%s",
			      f->name, val, f->help_def ? f->help_def : f->def,
			      f->no_env ? "" : " or its ETCD_ environment variable");
		rc = -ENOTSUP;
	}
	config_defaults_free(d);
	return rc;
}

/* ---- validation (etcd's embed.Config.Validate and bootstrap checks) ---- */

static bool config_is_ip(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

static int config_check_bind_urls(const struct config_urls *us, struct config_error *err)
{
	for (size_t i = 0; i < us->count; i++) {
		const struct config_url *u = &us->v[i];
		if (!strcmp(u->scheme, "unix") || !strcmp(u->scheme, "unixs"))
			continue;
		if (!strcmp(u->host, "localhost") || config_is_ip(u->host))
			continue;
		config_errorf(err, 1, "expected IP in URL for binding (%s)", u->text);
		return -EINVAL;
	}
	return 0;
}

static int config_check_host_urls(const char *flag, const struct config_urls *us,
				  struct config_error *err)
{
	char all[512];
	size_t n = 0;
	const struct config_url *bad = NULL;
	for (size_t i = 0; i < us->count; i++) {
		if (us->v[i].host[0] == '\0' && !bad)
			bad = &us->v[i];
		if (n < sizeof(all))
			n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s", i ? "," : "",
					      us->v[i].text);
	}
	if (!bad)
		return 0;
	config_errorf(err, 1, "--%s \"%s\" must be \"host:port\" (unexpected empty host (%s))", flag,
		      all, bad->text);
	return -EINVAL;
}

/* Joins a URL list as "name=url,name=url" (etcd's InitialClusterFromName). */
static char *config_cluster_from_name(const char *name, const struct config_urls *us)
{
	size_t len = 1;
	for (size_t i = 0; i < us->count; i++)
		len += strlen(name) + strlen(us->v[i].text) + 2;
	char *s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (size_t i = 0; i < us->count; i++) {
		if (i)
			strcat(s, ",");
		strcat(s, name);
		strcat(s, "=");
		strcat(s, us->v[i].text);
	}
	return s;
}

/* Whether two URLs name the same endpoint. etcd resolves host names before
 * comparing; cetcd does not use DNS here and only treats localhost as
 * 127.0.0.1. */
static bool config_url_same(const struct config_url *a, const struct config_url *b)
{
	const char *ha = strcmp(a->host, "localhost") ? a->host : "127.0.0.1";
	const char *hb = strcmp(b->host, "localhost") ? b->host : "127.0.0.1";
	return !strcmp(a->scheme, b->scheme) && !strcmp(ha, hb) && !strcmp(a->port, b->port);
}

static bool config_urls_contain(const struct config_urls *us, const struct config_url *u)
{
	for (size_t i = 0; i < us->count; i++)
		if (config_url_same(&us->v[i], u))
			return true;
	return false;
}

/* Lists "prefix" + the URLs of a that b lacks, comma-joined. Returns how
 * many. */
static size_t config_urls_missing(const struct config_urls *a, const struct config_urls *b,
				  const char *prefix, char *buf, size_t len)
{
	size_t n = 0, count = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < a->count; i++) {
		if (config_urls_contain(b, &a->v[i]))
			continue;
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s%s", count ? "," : "", prefix,
					      a->v[i].text);
		count++;
	}
	return count;
}

/* etcd's VerifyBootstrap for a new cluster: the member's name is in
 * --initial-cluster with the URLs it advertises, and no URL repeats. */
static int config_verify_bootstrap(const struct cetcd_config *c, struct config_error *err)
{
	struct config_strings entries;
	struct config_urls mine = { 0 };
	char why[256], prefix[256], missing[512], list[512];
	int rc;

	if (c->initial_cluster[0] == '\0') {
		config_errorf(err, 1, "initial cluster unset and no discovery URL found");
		return -EINVAL;
	}
	rc = config_split(c->initial_cluster, false, &entries);
	if (rc) {
		config_errorf(err, 1, "out of memory");
		return rc;
	}
	mine.v = calloc(entries.count, sizeof(*mine.v));
	if (!mine.v) {
		rc = -ENOMEM;
		config_errorf(err, 1, "out of memory");
		goto out_free_entries;
	}
	for (size_t i = 0; i < entries.count; i++) {
		char *e = entries.v[i];
		char *eq = strchr(e, '=');
		const char *url = eq ? eq + 1 : "";
		if (e[0] == '\0')
			continue;
		if (eq)
			*eq = '\0';
		if (strcmp(e, c->name) != 0)
			continue;
		rc = config_parse_url(url, &mine.v[mine.count], why, sizeof(why));
		if (rc) {
			config_errorf(err, 1, "--initial-cluster: %s", why);
			goto out_free_mine;
		}
		mine.count++;
	}
	if (mine.count == 0) {
		config_errorf(err, 1,
			      "couldn't find local name \"%s\" in the initial cluster configuration",
			      c->name);
		rc = -EINVAL;
		goto out_free_mine;
	}
	qsort(mine.v, mine.count, sizeof(*mine.v), config_url_cmp);
	for (size_t i = 1; i < mine.count; i++) {
		if (strcmp(mine.v[i].text, mine.v[i - 1].text) == 0) {
			config_errorf(err, 1, "initial cluster %s has duplicate url",
				      c->initial_cluster);
			rc = -EINVAL;
			goto out_free_mine;
		}
	}
	snprintf(prefix, sizeof(prefix), "%s=", c->name);
	if (config_urls_missing(&mine, &c->initial_advertise_peer_urls, prefix, missing,
				sizeof(missing))) {
		config_urls_text(&c->initial_advertise_peer_urls, list, sizeof(list));
		config_errorf(err, 1,
			      "--initial-cluster has %s but missing from --initial-advertise-peer-urls=%s",
			      missing, list);
		rc = -EINVAL;
	} else if (config_urls_missing(&c->initial_advertise_peer_urls, &mine, "", missing,
				       sizeof(missing))) {
		config_errorf(err, 1,
			      "--initial-advertise-peer-urls has %s but missing from --initial-cluster=%s",
			      missing, c->initial_cluster);
		rc = -EINVAL;
	}
out_free_mine:
	config_urls_free(&mine);
out_free_entries:
	config_strings_free(&entries);
	return rc;
}

static int config_validate(struct cetcd_config *c, struct config_error *err)
{
	int rc;

	/* logging (etcd's setupLogging) */
	if (strcmp(c->logger, "zap") != 0 && strcmp(c->logger, "capnslog") != 0) {
		config_errorf(err, 1, "unknown logger option \"%s\"", c->logger);
		return -EINVAL;
	}
	if (config_is_set(c, "log-output") && config_is_set(c, "log-outputs")) {
		config_errorf(err, 1,
			      "'--log-output' and '--log-outputs' are incompatible; only set --log-outputs");
		return -EINVAL;
	}
	if (log_level_parse(c->log_level_text, &c->log_level)) {
		config_errorf(err, 1,
			      "unknown log-level \"%s\" (only supports debug, info, warn, error, panic, or fatal)",
			      c->log_level_text);
		return -EINVAL;
	}
	if (c->debug)
		c->log_level = LOG_LEVEL_DEBUG;

	if ((rc = config_check_bind_urls(&c->listen_peer_urls, err)) ||
	    (rc = config_check_bind_urls(&c->listen_client_urls, err)) ||
	    (rc = config_check_bind_urls(&c->listen_metrics_urls, err)) ||
	    (rc = config_check_host_urls("initial-advertise-peer-urls",
					 &c->initial_advertise_peer_urls, err)) ||
	    (rc = config_check_host_urls("advertise-client-urls", &c->advertise_client_urls, err)))
		return rc;

	int bootstrap = (c->discovery[0] != '\0') + (c->initial_cluster[0] != '\0') +
			(c->discovery_srv[0] != '\0');
	if (bootstrap > 1) {
		config_errorf(err, 1,
			      "multiple discovery or bootstrap flags are set. Choose one of \"initial-cluster\", \"discovery\" or \"discovery-srv\"");
		return -EINVAL;
	}
	if (c->heartbeat_interval_ms == 0) {
		config_errorf(err, 1, "--heartbeat-interval must be >0 (set to %llums)",
			      (unsigned long long)c->heartbeat_interval_ms);
		return -EINVAL;
	}
	if (c->election_timeout_ms == 0) {
		config_errorf(err, 1, "--election-timeout must be >0 (set to %llums)",
			      (unsigned long long)c->election_timeout_ms);
		return -EINVAL;
	}
	if (c->heartbeat_interval_ms > c->election_timeout_ms / 5) { /* 5 * tick > election */
		config_errorf(err, 1,
			      "--election-timeout[%llums] should be at least as 5 times as --heartbeat-interval[%llums]",
			      (unsigned long long)c->election_timeout_ms,
			      (unsigned long long)c->heartbeat_interval_ms);
		return -EINVAL;
	}
	if (c->election_timeout_ms > CONFIG_MAX_ELECTION_MS) {
		config_errorf(err, 1,
			      "--election-timeout[%llums] is too long, and should be set less than %ums",
			      (unsigned long long)c->election_timeout_ms, CONFIG_MAX_ELECTION_MS);
		return -EINVAL;
	}
	if (c->listen_client_urls.count > 0 && c->advertise_client_urls.count == 0) {
		config_errorf(err, 1,
			      "--advertise-client-urls is required when --listen-client-urls is set explicitly");
		return -EINVAL;
	}
	if (strcmp(c->auto_compaction_mode, "") && strcmp(c->auto_compaction_mode, "periodic") &&
	    strcmp(c->auto_compaction_mode, "revision")) {
		config_errorf(err, 1, "unknown auto-compaction-mode \"%s\"", c->auto_compaction_mode);
		return -EINVAL;
	}
	if (c->experimental_enable_lease_checkpoint_persist &&
	    !c->experimental_enable_lease_checkpoint) {
		config_errorf(err, 1,
			      "setting experimental-enable-lease-checkpoint-persist requires experimental-enable-lease-checkpoint");
		return -EINVAL;
	}

	/* cetcd's own */
	if (c->gateways > CONFIG_MAX_GATEWAYS) {
		config_errorf(err, 1, "--gateways=%u is too many (at most %u)", c->gateways,
			      CONFIG_MAX_GATEWAYS);
		return -EINVAL;
	}
	if (c->latest_cache_mib > (SHM_MAX_CACHE_BYTES >> 20)) {
		config_errorf(err, 1, "--latest-cache-mib=%llu is too large (at most %llu)",
			      (unsigned long long)c->latest_cache_mib,
			      (unsigned long long)(SHM_MAX_CACHE_BYTES >> 20));
		return -EINVAL;
	}
	if (c->max_request_bytes == 0 || c->max_request_bytes > SHM_MAX_REQUEST_BYTES_LIMIT) {
		config_errorf(err, 1, "--max-request-bytes=%llu is out of range (1 to %llu)",
			      (unsigned long long)c->max_request_bytes,
			      (unsigned long long)SHM_MAX_REQUEST_BYTES_LIMIT);
		return -EINVAL;
	}
	if (c->name[0] == '\0') {
		config_errorf(err, 1, "--name must not be empty");
		return -EINVAL;
	}
	return 0;
}

/* ---- derived values ---- */

/* Lexically absolute form of path (cwd-relative paths joined to the
 * working directory, "." and ".." and repeated slashes folded), without
 * touching the file system beyond getcwd. Caller frees. */
static char *config_abs_path(const char *path)
{
	char cwd[PATH_MAX];
	char *joined = NULL;
	if (path[0] == '/') {
		joined = strdup(path);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return NULL;
		if (asprintf(&joined, "%s/%s", cwd, path) < 0)
			joined = NULL;
	}
	if (!joined)
		return NULL;
	/* fold components in place */
	char *out = joined;
	size_t w = 0;
	const char *p = joined;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);
		if (len == 1 && p[0] == '.') {
			/* skip */
		} else if (len == 2 && p[0] == '.' && p[1] == '.') {
			while (w > 0 && out[w - 1] != '/')
				w--;
			if (w > 0)
				w--;
		} else {
			out[w++] = '/';
			memmove(out + w, p, len);
			w += len;
		}
		p = e;
	}
	if (w == 0)
		out[w++] = '/';
	out[w] = '\0';
	return out;
}

/* Fills the values etcd derives after parsing: data dir from the name, the
 * initial cluster from the name and advertised peer URLs; and cetcd's:
 * runtime dir, gateway count. */
static int config_derive(struct cetcd_config *c, struct config_error *err)
{
	char *s;

	/* etcd's UpdateDefaultClusterFromName: --name alone renames the
	 * default one-member cluster */
	if (strcmp(c->name, "default") != 0 && !config_is_set(c, "initial-cluster") &&
	    c->discovery[0] == '\0' && c->discovery_srv[0] == '\0') {
		s = config_cluster_from_name(c->name, &c->initial_advertise_peer_urls);
		if (!s)
			goto nomem;
		free(c->initial_cluster);
		c->initial_cluster = s;
	}
	if (c->data_dir[0] == '\0') {
		if (asprintf(&s, "%s.etcd", c->name) < 0)
			goto nomem;
		free(c->data_dir);
		c->data_dir = s;
	}
	if (c->runtime_dir[0] == '\0') {
		char *abs = config_abs_path(c->data_dir);
		uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
		if (!abs)
			goto nomem;
		for (const char *p = abs; *p; p++) {
			h ^= (unsigned char)*p;
			h *= 0x100000001b3ull;
		}
		free(abs);
		if (asprintf(&s, "/dev/shm/cetcd-%016llx", (unsigned long long)h) < 0)
			goto nomem;
		free(c->runtime_dir);
		c->runtime_dir = s;
	}
	if (c->gateways == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		if (n < 1)
			n = 1;
		if (n > (long)CONFIG_MAX_GATEWAYS)
			n = CONFIG_MAX_GATEWAYS;
		c->gateways = (uint32_t)n;
	}
	return 0;
nomem:
	config_errorf(err, 1, "out of memory");
	return -ENOMEM;
}

/* ---- parsing ---- */

static unsigned config_scope(enum config_program prog)
{
	return 1u << prog;
}

/* The ETCD_ variable of a flag: "ETCD_" + upper case, '-' and '.' -> '_'
 * (etcd replaces only '-'; '.' appears in ignored test flags only). */
static void config_env_name(const struct config_flag *f, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "ETCD_");
	for (const char *p = f->name; *p && n + 1 < len; p++)
		buf[n++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
	buf[n] = '\0';
}

/* Applies one command-line value. Returns 0 or -EINVAL/-ENOMEM with err
 * set as Go's flag package words it. */
static int config_apply_flag(struct cetcd_config *c, const struct config_flag *f,
			     const char *text, struct config_error *err)
{
	char why[512];
	int rc;
	if (f->type == CT_IGNORED) {
		log_warn("flag is no longer supported - ignoring", LOG_STR("flag", f->name));
		return 0;
	}
	rc = config_set(c, f, text, why, sizeof(why));
	if (rc == -ENOMEM) {
		config_errorf(err, 1, "out of memory");
		return rc;
	}
	if (rc) {
		if (f->type == CT_BOOL)
			config_errorf(err, 2, "invalid boolean value \"%s\" for -%s: %s", text,
				      f->name, why);
		else
			config_errorf(err, 2, "invalid value \"%s\" for flag -%s: %s", text, f->name,
				      why);
		return rc;
	}
	c->source[config_index(f)] = CONFIG_FROM_FLAG;
	return 0;
}

/* Go's FlagSet.Parse over argv[1..]. Sets c->print_help and returns 0 on
 * -h/-help. */
static int config_parse_args(struct cetcd_config *c, unsigned scope, int argc,
			     char *const argv[], struct config_error *err)
{
	int i = 1;
	for (; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || a[1] == '\0')
			break; /* first positional argument */
		const char *name = a + 1;
		if (name[0] == '-') {
			name++;
			if (name[0] == '\0') {
				i++; /* "--" ends the flags */
				break;
			}
		}
		if (name[0] == '-' || name[0] == '=') {
			config_errorf(err, 2, "bad flag syntax: %s", a);
			return -EINVAL;
		}
		const char *eq = strchr(name, '=');
		size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
		const struct config_flag *f = config_lookup(name, nlen, scope);
		if (!f) {
			if ((nlen == 1 && name[0] == 'h') || (nlen == 4 && !memcmp(name, "help", 4))) {
				c->print_help = true;
				return 0;
			}
			config_errorf(err, 2, "flag provided but not defined: -%.*s", (int)nlen, name);
			return -EINVAL;
		}
		const char *val;
		if (eq) {
			val = eq + 1;
		} else if (f->type == CT_BOOL || f->type == CT_IGNORED) {
			val = "true";
		} else {
			if (i + 1 >= argc) {
				config_errorf(err, 2, "flag needs an argument: -%s", f->name);
				return -EINVAL;
			}
			val = argv[++i];
		}
		int rc = config_apply_flag(c, f, val, err);
		if (rc)
			return rc;
	}
	if (i < argc) {
		config_errorf(err, 1, "'%s' is not a valid flag", argv[i]);
		return -EINVAL;
	}
	return 0;
}

/* etcd's SetFlagsFromEnv + verifyEnv. */
static int config_parse_env(struct cetcd_config *c, unsigned scope, char *const envp[],
			    struct config_error *err)
{
	char key[96];
	char why[512];

	for (size_t i = 0; i < CONFIG_NFLAGS; i++) {
		const struct config_flag *f = &config_flags[i];
		if (f->no_env || !(f->scope & scope) || c->source[i] != CONFIG_FROM_DEFAULT)
			continue;
		config_env_name(f, key, sizeof(key));
		size_t klen = strlen(key);
		for (char *const *e = envp; *e; e++) {
			if (strncmp(*e, key, klen) != 0 || (*e)[klen] != '=' || (*e)[klen + 1] == '\0')
				continue;
			const char *val = *e + klen + 1;
			if (f->type == CT_IGNORED) {
				log_warn("flag is no longer supported - ignoring", LOG_STR("flag", f->name));
			} else {
				int rc = config_set(c, f, val, why, sizeof(why));
				if (rc) {
					config_errorf(err, 1, "invalid value \"%s\" for %s: %s", val, key,
						      why);
					return rc;
				}
			}
			c->source[i] = CONFIG_FROM_ENV;
			log_info("recognized and used environment variable",
				 LOG_STR("variable-name", key), LOG_STR("variable-value", val));
		}
	}
	/* variables that were not used: shadowed by a flag, or unknown */
	for (char *const *e = envp; *e; e++) {
		if (strncmp(*e, "ETCD_", 5) != 0)
			continue;
		const char *eq = strchr(*e, '=');
		size_t klen = eq ? (size_t)(eq - *e) : strlen(*e);
		bool known = false;
		for (size_t i = 0; i < CONFIG_NFLAGS && !known; i++) {
			const struct config_flag *f = &config_flags[i];
			if (f->no_env || !(f->scope & scope))
				continue;
			config_env_name(f, key, sizeof(key));
			if (strlen(key) != klen || strncmp(*e, key, klen) != 0)
				continue;
			known = true;
			if (c->source[i] == CONFIG_FROM_FLAG) {
				config_errorf(err, 1,
					      "conflicting environment variable \"%.*s\" is shadowed by corresponding command-line flag (either unset environment variable or disable flag)",
					      (int)klen, *e);
				return -EINVAL;
			}
		}
		if (!known)
			log_warn("unrecognized environment variable", LOG_STR("environment-variable", *e));
	}
	return 0;
}

int config_parse(struct cetcd_config *c, enum config_program prog, int argc,
		 char *const argv[], char *const envp[], struct config_error *err)
{
	unsigned scope = config_scope(prog);
	int rc;

	err->exit_status = 0;
	err->msg[0] = '\0';
	rc = config_parse_args(c, scope, argc, argv, err);
	if (rc || c->print_help || c->print_version)
		return rc;
	rc = config_parse_env(c, scope, envp ? envp : environ, err);
	if (rc)
		return rc;
	/* etcd: listening on chosen client URLs without advertising any is an
	 * error, not a fallback to the default advertise URL */
	if (config_is_set(c, "listen-client-urls") && !config_is_set(c, "advertise-client-urls"))
		config_urls_free(&c->advertise_client_urls);
	rc = config_check_supported(c, err);
	if (rc)
		return rc;
	rc = config_validate(c, err);
	if (rc)
		return rc;
	rc = config_derive(c, err);
	if (rc)
		return rc;
	return config_verify_bootstrap(c, err);
}

/* ---- help and version ---- */

static const char *config_prog_name(enum config_program prog)
{
	switch (prog) {
	case CONFIG_PROG_RAFTD: return "raftd";
	case CONFIG_PROG_STORED: return "stored";
	case CONFIG_PROG_GATEWAYD: return "gatewayd";
	default: return "cetcd";
	}
}

void config_print_version(FILE *out)
{
	fprintf(out, "cetcd Version: %s\n", CETCD_VERSION);
	fprintf(out, "etcd API Version: %s\n", CETCD_ETCD_API_VERSION);
}

void config_print_help(FILE *out, enum config_program prog)
{
	const char *name = config_prog_name(prog);
	const char *section = NULL;
	unsigned scope = config_scope(prog);

	fprintf(out, "Usage:\n\n  %s [flags]\n", name);
	if (prog == CONFIG_PROG_LAUNCHER)
		fprintf(out, "    Start a cetcd member: raftd, stored and the gatewayd processes.\n");
	else
		fprintf(out, "    Start the %s process of a member whose region the launcher (or\n"
			     "    'cetcd --prepare-only') created; takes the launcher's flags.\n", name);
	fprintf(out, "\n  %s --version\n    Show the version of cetcd.\n", name);
	fprintf(out, "\n  %s -h | --help\n    Show the help information about %s.\n", name, name);
	fprintf(out, "\n  %s --config-file\n    Path to the server configuration file"
		     " (etcd's; not supported by cetcd yet).\n", name);
	fprintf(out, "\nEvery flag can also be set by its ETCD_ environment variable, e.g.\n"
		     "ETCD_DATA_DIR for --data-dir. Flags marked [default only] belong to\n"
		     "features not built yet: any other value is refused.\n");
	for (size_t i = 0; i < CONFIG_NFLAGS; i++) {
		const struct config_flag *f = &config_flags[i];
		if (!f->section || !(f->scope & scope))
			continue;
		if (!section || strcmp(section, f->section) != 0) {
			section = f->section;
			fprintf(out, "\n%s:\n", section);
		}
		fprintf(out, "  --%s '%s'%s\n    %s\n", f->name, f->help_def ? f->help_def : f->def,
			f->support == CS_DEFAULT_ONLY ? " [default only]" : "", f->usage);
	}
}

/* ---- start-up in one call ---- */

/* Applies --log-level, --debug, --logger and --log-outputs. */
static void config_apply_logging(const struct cetcd_config *c)
{
	bool to_stdout = false;
	for (size_t i = 0; i < c->log_outputs.count; i++)
		to_stdout |= strcmp(c->log_outputs.v[i], "stdout") == 0;
	for (size_t i = 0; i < c->log_output.count; i++)
		to_stdout |= strcmp(c->log_output.v[i], "stdout") == 0;
	if (to_stdout)
		log_set_fd(1);
	log_set_level(c->log_level);
	if (config_is_set(c, "logger") && strcmp(c->logger, "capnslog") == 0)
		log_warn("'--logger=capnslog' is deprecated; cetcd writes zap's JSON lines anyway, use '--logger=zap'");
	if (c->debug)
		log_warn("deprecated '--debug' flag is set (use '--log-level=debug' instead)");
}

int config_load(struct cetcd_config *c, enum config_program prog, int argc,
		char *const argv[], int *exit_status)
{
	struct config_error err;
	int rc = config_init(c);
	if (rc) {
		fprintf(stderr, "%s: out of memory\n", config_prog_name(prog));
		*exit_status = 1;
		return rc;
	}
	rc = config_parse(c, prog, argc, argv, environ, &err);
	if (rc == 0 && c->print_help) {
		config_print_help(stdout, prog);
		rc = -ECANCELED;
		err.exit_status = 0;
	} else if (rc == 0 && c->print_version) {
		config_print_version(stdout);
		rc = -ECANCELED;
		err.exit_status = 0;
	} else if (rc && err.exit_status == 2 && rc == -EINVAL) {
		/* a malformed command line, reported as Go's flag package does */
		fprintf(stderr, "%s\nSee '%s --help'.\n", err.msg, config_prog_name(prog));
	} else if (rc == -ENOTSUP) {
		log_error("unsupported configuration", LOG_STR("error", err.msg));
	} else if (rc) {
		log_error("failed to verify flags", LOG_STR("error", err.msg));
	}
	if (rc) {
		*exit_status = err.exit_status;
		config_free(c);
		return rc;
	}
	config_apply_logging(c);
	*exit_status = 0;
	return 0;
}

/* ---- daemons ---- */

void config_stop_signals(sigset_t *set)
{
	struct sigaction old;

	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	if (sigaction(SIGHUP, NULL, &old) != 0 || old.sa_handler != SIG_IGN)
		sigaddset(set, SIGHUP);
}

int config_daemon_start(struct cetcd_config *c, enum config_program prog, const char *log_name,
			int argc, char *const argv[], struct shm_region **region,
			int *exit_status)
{
	char path[PATH_MAX];
	const char *inherited;
	sigset_t set;
	int rc;

	config_stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = config_load(c, prog, argc, argv, exit_status);
	if (rc)
		return rc;
	if (prog == CONFIG_PROG_GATEWAYD && c->gateway_index >= 0) {
		char name[64];
		snprintf(name, sizeof(name), "%s-%lld", log_name, (long long)c->gateway_index);
		log_set_name(name);
	} else {
		log_set_name(log_name);
	}
	rc = config_region_path(c, path, sizeof(path));
	if (rc) {
		log_error("runtime dir path is too long", LOG_STR("runtime-dir", c->runtime_dir));
		goto out_fatal;
	}
	inherited = getenv(CONFIG_REGION_FD_ENV);
	if (inherited) {
		/* started by the launcher: the region has no name, only the
		 * descriptor this process inherited */
		char *end;
		long fd;
		errno = 0;
		fd = strtol(inherited, &end, 10);
		rc = errno || *end || end == inherited || fd < 0 || fd > INT_MAX ? -EBADF
			: shm_region_attach_fd((int)fd, region);
		unsetenv(CONFIG_REGION_FD_ENV);
		snprintf(path, sizeof(path), "descriptor %s from the launcher", inherited);
	} else {
		/* -EAGAIN: a launcher is creating the region right now */
		for (int tries = 0; tries < 100; tries++) {
			rc = shm_region_attach(path, region);
			if (rc != -EAGAIN)
				break;
			usleep(50 * 1000);
		}
	}
	switch (rc) {
	case 0:
		log_info("attached to the member region", LOG_STR("region", path),
			 LOG_I64("pid", getpid()));
		return 0;
	case -ENOENT:
		log_error("no member region; start the cetcd launcher (or 'cetcd --prepare-only', cetcd-region.service) with the same --data-dir and --runtime-dir first",
			  LOG_STR("region", path));
		break;
	case -EPROTO:
		log_error("refusing to attach to the member region: it was made by another cetcd version; stop every process of the member and start it again with one version",
			  LOG_STR("region", path), LOG_STR("reason", errmsg_get(rc)));
		break;
	default:
		log_error("cannot attach to the member region", LOG_STR("region", path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		break;
	}
out_fatal:
	config_free(c);
	*exit_status = CONFIG_EXIT_FATAL;
	return rc ? rc : -EINVAL;
}

/* ---- addresses ---- */

int config_region_path(const struct cetcd_config *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/region", c->runtime_dir);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

int config_url_sockaddr(const struct config_url *u, struct sockaddr_storage *ss,
			socklen_t *len, struct config_error *err)
{
	unsigned long port = 0;
	size_t digits = strspn(u->port, "0123456789");
	memset(ss, 0, sizeof(*ss));
	if (strcmp(u->scheme, "http") && strcmp(u->scheme, "https")) {
		config_errorf(err, 1, "cannot listen on %s: not a TCP URL", u->text);
		return -EINVAL;
	}
	/* a decimal port, as net.Listen takes it */
	if (digits > 0 && digits <= 5 && u->port[digits] == '\0')
		port = strtoul(u->port, NULL, 10);
	if (digits == 0 || digits > 5 || u->port[digits] != '\0' || port > 65535) {
		config_errorf(err, 1, "cannot listen on %s: bad port \"%s\"", u->text, u->port);
		return -EINVAL;
	}
	const char *host = strcmp(u->host, "localhost") == 0 ? "127.0.0.1" : u->host;
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	config_errorf(err, 1, "cannot listen on %s: expected IP in URL for binding", u->text);
	return -EINVAL;
}

int config_listen_url(const struct config_url *u, bool reuseport, int *fd_out,
		      struct config_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	int fd, rc;

	rc = config_url_sockaddr(u, &ss, &len, err);
	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen %s: socket: %s", u->text, strerror(errno));
		return rc;
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
		rc = -errno;
		config_errorf(err, 1, "listen %s: setsockopt: %s", u->text, strerror(errno));
		goto out_close_fd;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen tcp %s:%s: bind: %s", u->host, u->port, strerror(errno));
		goto out_close_fd;
	}
	if (listen(fd, 1024) < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen tcp %s:%s: %s", u->host, u->port, strerror(errno));
		goto out_close_fd;
	}
	*fd_out = fd;
	return 0;

out_close_fd:
	close(fd);
	return rc;
}
