/* The member configuration: etcd 3.4's server flags and their ETCD_*
 * environment variables, with etcd's defaults and etcd's parsing rules,
 * plus cetcd's own flags. Every cetcd process (the launcher and each
 * daemon) parses the same argument list and environment the same way, so
 * the launcher passes its own arguments to the daemons it starts and a
 * daemon started alone (by systemd) sees what the launcher would.
 *
 * Parsing follows Go's flag package as etcd uses it: "--flag=value",
 * "--flag value", one or two dashes, "--bool" meaning true (a boolean takes
 * its value only after '='), the last occurrence wins, "--" ends the flags,
 * and a positional argument is an error. Each flag NAME may also come from
 * the environment as ETCD_NAME (upper case, '-' -> '_'); an empty variable
 * counts as unset. A variable for a flag also given on the command line is
 * an error, as in etcd ("conflicting environment variable ... is shadowed").
 * With --config-file (or ETCD_CONFIG_FILE) the values come from etcd's
 * YAML file instead (config/file.c), and, as in etcd, the other flags and
 * variables are ignored: only the program-only flags (--gateway-index,
 * --prepare-only, --print-gateways) still count.
 *
 * Which values cetcd supports is kept in one table in config.c: a flag
 * whose feature is not built yet is accepted only at its default value, and
 * any other value is refused with exit status 2 and a message naming the
 * flag, never silently ignored.
 */
#ifndef CETCD_CONFIG_CONFIG_H
#define CETCD_CONFIG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>

#include "base/log/log.h"

#ifndef CETCD_VERSION
#define CETCD_VERSION "0.1.0"
#endif
/* The etcd API this version speaks. */
#define CETCD_ETCD_API_VERSION "3.4"
/* The etcd server version a member reports to clients and peers (/version,
 * Maintenance.Status, etcd_server_version) and from which the cluster
 * version is decided: that of the etcd 3.4 release whose behaviour cetcd
 * follows (Debian 12's, which the tests run beside it). */
#define CETCD_ETCD_SERVER_VERSION "3.4.23"

/* Which program parses: decides which program-only flags exist. */
enum config_program {
	CONFIG_PROG_LAUNCHER, /* cetcd */
	CONFIG_PROG_RAFTD,
	CONFIG_PROG_STORED,
	CONFIG_PROG_GATEWAYD,
};

/* One URL of a URL list flag, as etcd's types.NewURLs accepts it:
 * scheme http, https, unix or unixs, "host:port", no path. */
struct config_url {
	char *text;     /* canonical: "scheme://host:port" */
	char scheme[8]; /* lower case */
	char *host;     /* IPv6 without brackets; "" allowed by the syntax */
	char *port;     /* digits as given, may be empty */
};

/* A URL list, sorted by text and without duplicates (etcd's UniqueURLs). */
struct config_urls {
	size_t count;
	struct config_url *v;
};

/* A comma-separated string list. Unique lists (etcd's UniqueStrings) are
 * sorted and deduplicated; plain lists (cipher suites) keep their order. */
struct config_strings {
	size_t count;
	char **v;
};

/* Parsed configuration. Strings and lists are owned by the struct and
 * freed by config_free. Durations are in nanoseconds (Go's time.Duration),
 * other times carry their unit in the field name. Field comments give
 * etcd's default. */
struct cetcd_config {
	/* member */
	char *name;                     /* "default" */
	char *data_dir;                 /* "" -> "<name>.etcd" after parsing */
	char *wal_dir;                  /* "" */
	uint64_t snapshot_count;        /* 100000 */
	uint64_t heartbeat_interval_ms; /* 100 */
	uint64_t election_timeout_ms;   /* 1000 */
	bool initial_election_tick_advance; /* true */
	struct config_urls listen_peer_urls;   /* http://localhost:2380 */
	struct config_urls listen_client_urls; /* http://localhost:2379 */
	uint64_t max_snapshots;         /* 5 */
	uint64_t max_wals;              /* 5 */
	int64_t quota_backend_bytes;    /* 0: 2 GiB; negative: no quota */
	int64_t backend_batch_interval_ns; /* 0 */
	int64_t backend_batch_limit;    /* 0 */
	uint64_t max_txn_ops;           /* 128 */
	uint64_t max_request_bytes;     /* 1572864 */
	uint32_t max_concurrent_streams; /* UINT32_MAX */
	int64_t grpc_keepalive_min_time_ns; /* 5s */
	int64_t grpc_keepalive_interval_ns; /* 2h */
	int64_t grpc_keepalive_timeout_ns;  /* 20s */

	/* clustering */
	struct config_urls initial_advertise_peer_urls; /* http://localhost:2380 */
	char *initial_cluster;          /* "default=http://localhost:2380";
					   follows --name and the advertised
					   peer URLs when not set */
	char *initial_cluster_state;    /* "new" | "existing" */
	char *initial_cluster_token;    /* "etcd-cluster" */
	struct config_urls advertise_client_urls; /* http://localhost:2379; empty
						     if only --listen-client-urls
						     was set (an error) */
	char *discovery;
	char *discovery_fallback;       /* "proxy" | "exit" */
	char *discovery_proxy;
	char *discovery_srv;
	char *discovery_srv_name;
	bool strict_reconfig_check;     /* true */
	bool enable_v2;                 /* false */
	bool pre_vote;                  /* false */
	char *auto_compaction_retention; /* "0" */
	char *auto_compaction_mode;     /* "periodic" | "revision" */
	int64_t auto_compaction_retention_value; /* the retention as etcd reads it
						    (parseCompactionRetention): ns in
						    periodic mode, revisions in
						    revision mode; 0: no compaction */

	/* v2 proxy */
	char *proxy;                    /* "off" | "readonly" | "on" */
	uint64_t proxy_failure_wait_ms;     /* 5000 */
	uint64_t proxy_refresh_interval_ms; /* 30000 */
	uint64_t proxy_dial_timeout_ms;     /* 1000 */
	uint64_t proxy_write_timeout_ms;    /* 5000 */
	uint64_t proxy_read_timeout_ms;     /* 0 */

	/* security */
	char *cert_file;
	char *key_file;
	bool client_cert_auth;
	char *client_crl_file;
	char *client_cert_allowed_hostname;
	char *trusted_ca_file;
	bool auto_tls;
	char *peer_cert_file;
	char *peer_key_file;
	bool peer_client_cert_auth;
	char *peer_trusted_ca_file;
	bool peer_auto_tls;
	char *peer_crl_file;
	char *peer_cert_allowed_cn;
	char *peer_cert_allowed_hostname;
	struct config_strings cipher_suites;
	bool experimental_peer_skip_client_san_verification;
	struct config_strings cors;           /* "*" */
	struct config_strings host_whitelist; /* "*" */

	/* logging */
	char *logger;                   /* "capnslog" (logged as JSON anyway) */
	struct config_strings log_output;  /* "default" (deprecated) */
	struct config_strings log_outputs; /* "default" */
	bool debug;                     /* false */
	char *log_level_text;           /* "info" */
	char *log_package_levels;       /* "" */
	enum log_level log_level;       /* from log_level_text and debug */

	/* auth */
	char *auth_token;               /* "simple" */
	uint64_t bcrypt_cost;           /* 10 */
	uint64_t auth_token_ttl_s;      /* 300 */

	/* profiling and monitoring */
	bool enable_pprof;
	char *metrics;                  /* "basic" */
	struct config_urls listen_metrics_urls;
	bool enable_grpc_gateway;       /* true */

	/* experimental */
	bool experimental_initial_corrupt_check;
	int64_t experimental_corrupt_check_time_ns;
	char *experimental_enable_v2v3;
	char *experimental_backend_bbolt_freelist_type; /* "" (array) */
	bool experimental_enable_lease_checkpoint;
	bool experimental_enable_lease_checkpoint_persist;
	int64_t experimental_compaction_batch_limit;    /* 0 (1000 in etcd's help) */
	int64_t experimental_watch_progress_notify_interval_ns; /* 10m */
	int64_t experimental_warning_apply_duration_ns; /* 100ms */

	/* unsafe */
	bool unsafe_no_fsync;
	bool force_new_cluster;

	/* command */
	char *config_file;
	bool print_version;             /* --version */
	bool print_help;                /* -h / --help */

	/* cetcd */
	uint32_t gateways;              /* 0 on the command line: one per
					   online CPU, resolved by parsing */
	char *runtime_dir;              /* "" -> /dev/shm/cetcd-<hash of the
					   absolute data dir> after parsing */
	bool prepare_only;              /* launcher only */
	bool print_gateways;            /* launcher only */
	int64_t gateway_index;          /* gatewayd only; -1 when not given */
	int64_t lease_checkpoint_interval_ns; /* 5m: how often the leader checkpoints remaining TTLs */
	uint64_t latest_cache_mib;      /* 64; 0: no latest-entry cache */
	uint64_t raft_log_mib;          /* 64: applied Raft log raftd keeps
					   for followers (raftd/retain.h) */

	/* Where each table entry's value came from (enum config_source),
	 * indexed like the table in config.c. */
	uint8_t source[128];
	/* The entries given on the command line that --config-file made
	 * ignored, logged (with etcd's line) once the log goes where the file
	 * says. */
	bool file_ignored[128];
};

enum config_source {
	CONFIG_FROM_DEFAULT = 0,
	CONFIG_FROM_FLAG,
	CONFIG_FROM_ENV,
	CONFIG_FROM_FILE, /* --config-file */
};

/* What went wrong, for the caller to print, and the exit status etcd uses
 * for it: 2 for a malformed command line (as Go's flag package) and for an
 * unsupported value, 1 for an invalid configuration. */
struct config_error {
	int exit_status;
	char msg[1024];
};

/* Fills c with etcd's defaults; nothing else is valid to call on c before.
 * Returns 0 or -ENOMEM. */
int config_init(struct cetcd_config *c);

/* Frees what c owns; c may be partly filled. */
void config_free(struct cetcd_config *c);

/* Parses argv[1..argc-1] and then envp (NULL-terminated "K=V" strings,
 * usually environ) into c, which config_init filled. Stops early with
 * c->print_help or c->print_version set (and nothing validated) when
 * asked for. Otherwise validates as etcd does and refuses unsupported
 * values. Returns 0, or:
 *   -EINVAL   malformed command line or bad value (err->exit_status 2, or 1
 *             for a bad environment value or a failed validation)
 *   -ENOTSUP  a value of a feature cetcd has not built yet (exit status 2)
 *   -ENOMEM
 * Warnings (ignored flags, unrecognized ETCD_ variables) are logged. */
int config_parse(struct cetcd_config *c, enum config_program prog, int argc,
		 char *const argv[], char *const envp[], struct config_error *err);

/* A program's start-up in one call: config_init + config_parse with
 * environ, printing --help or --version to stdout, reporting errors on
 * stderr, then applying the logging flags (level, outputs, the
 * capnslog warning). Returns 0 to go on; otherwise the program exits with
 * *exit_status (0 after --help or --version). The caller owns c after a 0
 * return and frees it with config_free; on any other return c is freed. */
int config_load(struct cetcd_config *c, enum config_program prog, int argc,
		char *const argv[], int *exit_status);

/* Exit status of a daemon for an error that restarting it cannot fix (bad
 * configuration, no region or one of another layout, address in use): the
 * launcher stops the member instead of restarting the daemon, and systemd
 * units list it in RestartPreventExitStatus=. */
#define CONFIG_EXIT_FATAL 78
/* A daemon's exit status when its member was removed from the cluster:
 * the launcher stops the member and exits 0, as etcd exits then. */
#define CONFIG_EXIT_REMOVED 79

struct shm_region;

/* The environment variable through which the launcher tells a daemon the
 * descriptor of the member's region (which has no name); a daemon without
 * it attaches to "<runtime_dir>/region" instead. */
#define CONFIG_REGION_FD_ENV "CETCD_REGION_FD"

/* The signals that stop a daemon cleanly: SIGTERM, SIGINT and SIGHUP (a
 * closed terminal), unless SIGHUP was ignored when the process started, as
 * nohup and the launcher start it. */
void config_stop_signals(sigset_t *set);

/* Whether one of those signals is pending (blocked, as the daemons block
 * them until their loop runs): for start-up steps that wait, so that a
 * stopped daemon does not finish them first. */
bool config_stop_pending(void);

/* The start-up every daemon shares: blocks the stop signals (the
 * daemon's loop unblocks or reads them, so none is lost before it is
 * ready), ignores SIGPIPE, runs config_load, names the log lines log_name
 * (with "-<index>" for a gatewayd given --gateway-index), and attaches to
 * the member's region (the descriptor CONFIG_REGION_FD_ENV names, or the
 * region file in the runtime dir), saying clearly what to do if there is
 * none or it has another layout. Returns 0 with *region attached (the
 * caller detaches it) and c loaded (the caller frees it); otherwise the
 * program exits with *exit_status and owns nothing. */
int config_daemon_start(struct cetcd_config *c, enum config_program prog, const char *log_name,
			int argc, char *const argv[], struct shm_region **region,
			int *exit_status);

/* Under a systemd unit of Type=notify: tells the service manager that the
 * daemon now serves (READY=1), so that units ordered after it start and
 * `systemctl start` returns only then; or that it is stopping (STOPPING=1).
 * Nothing happens when the daemon was not started that way. */
void config_daemon_ready(void);
void config_daemon_stopping(void);

/*
 * systemd's watchdog (WatchdogSec= in the daemon's unit), fed from the
 * daemon's event loop, so that a loop stuck for the unit's whole watchdog
 * time gets the daemon killed and restarted. Every turn calls
 * config_watchdog_turn with the loop's clock; it sends WATCHDOG=1 when
 * half the watchdog time passed since the last one and returns the
 * milliseconds until the next one is due, which the loop's wait must not
 * exceed (-1 when systemd asked for no watchdog: nothing to send, ever).
 */
struct config_watchdog {
	int64_t every_ns; /* half of WatchdogSec; 0: no watchdog */
	int64_t next_ns;  /* when WATCHDOG=1 is due next */
};
void config_watchdog_init(struct config_watchdog *w, int64_t now_ns);
int config_watchdog_turn(struct config_watchdog *w, int64_t now_ns);

/* Writes the flag list (--help) for prog. */
void config_print_help(FILE *out, enum config_program prog);
/* Writes the version lines (--version). */
void config_print_version(FILE *out);

/* Looks up a flag by name (without dashes). True if it was given on the
 * command line or in the environment. */
bool config_is_set(const struct cetcd_config *c, const char *flag);

/* The region file of this member: "<runtime_dir>/region". Returns 0, or
 * -ENAMETOOLONG if it does not fit in len bytes. */
int config_region_path(const struct cetcd_config *c, char *buf, size_t len);

/* etcd's ReqTimeout, in ms: how long a request may wait (5 s and two
 * election timeouts). */
uint64_t config_request_timeout_ms(const struct cetcd_config *c);

/* The number of gatewayd processes --gateways=0 means on a machine with
 * ncpu online CPUs: one per CPU (at most 64), but one on a machine of one
 * or two CPUs, where a second gateway measured no faster and slower for
 * watchers (README, "--gateways"). */
uint32_t config_default_gateways(long ncpu);

/* The socket address a listen URL names (an IP address, or localhost as
 * 127.0.0.1, and a numeric port). Returns 0, or -EINVAL (with a message in
 * err) if it does not name one. */
int config_url_sockaddr(const struct config_url *u, struct sockaddr_storage *ss,
			socklen_t *len, struct config_error *err);

/* Whether u is a unix socket URL (unix:// or unixs://: the socket file is
 * its host:port, as etcd's). */
bool config_url_is_unix(const struct config_url *u);

/* Opens a non-blocking, close-on-exec listener on u: TCP, with SO_REUSEPORT
 * when reuseport is set (so several processes share the address), or a
 * unix socket (one listener the gatewayd processes share; a stale socket
 * file nobody listens on is removed first, as etcd's peer listener
 * removes one). Stores
 * the descriptor, which the caller closes. Returns 0, -EINVAL for a URL
 * that is not bindable, or the negative errno of socket/bind/listen; err
 * says which. */
int config_listen_url(const struct config_url *u, bool reuseport, int *fd_out,
		      struct config_error *err);

/* Whether two listen URLs name one socket address (etcd serves both
 * schemes of one address on one listener). */
bool config_same_address(const struct config_url *u, const struct config_url *v);

/* Binds one gatewayd's client listeners (which of them), TCP ones with
 * SO_REUSEPORT, into *out (listen_client_urls.count entries, malloc'd):
 * URL i's descriptor, -1 where an earlier URL of the same address serves
 * it or which leaves it out. Returns 0, -ENOMEM,
 * or config_listen_url's error for the first URL that failed (err says
 * which), with nothing left open. */
enum config_listen_which {
	CONFIG_LISTEN_ALL,
	CONFIG_LISTEN_TCP,  /* unix socket URLs get -1 */
	CONFIG_LISTEN_UNIX, /* TCP URLs get -1 */
};
int config_listen_client_urls(const struct cetcd_config *c, enum config_listen_which which,
			      int **out, struct config_error *err);

/* Closes the descriptors of such an array (count entries; -1 skipped) and
 * frees it. NULL is accepted. */
void config_close_client_fds(int *fds, size_t count);

/* The launcher binds gatewayd 0's client listeners before it starts any
 * process, so that the port takes connections (into its backlog) before
 * raftd can print the member's ready lines, as etcd's port does, and
 * hands them down in this variable: the descriptors, comma-separated,
 * -1 where config_listen_client_urls gives -1. Unix socket listeners
 * cannot be bound once per process: the launcher binds them once and
 * hands the same ones to every gatewayd it starts, the TCP entries then
 * CONFIG_FD_BIND (the gatewayd binds those itself). */
#define CONFIG_CLIENT_FDS_ENV "CETCD_CLIENT_FDS"
#define CONFIG_FD_BIND (-2)

/* Takes the listeners of CONFIG_CLIENT_FDS_ENV into *out (count entries,
 * malloc'd, close-on-exec again; CONFIG_FD_BIND where the caller binds)
 * and unsets it. 0 when it names count entries and each descriptor given
 * is a listening stream socket; -ENOENT
 * when unset; -ENOMEM; -EINVAL otherwise (nothing taken: bind anew; the
 * listening sockets it named are closed, as nobody would accept from them). */
int config_inherited_client_fds(size_t count, int **out);

/* Go's time.ParseDuration ("300ms", "1.5h", "2h45m", "-1s", "0") into
 * nanoseconds: 0, or -EINVAL with Go's message in why. For every reader
 * of etcd's duration options (flags, the config file, --auth-token's
 * ttl). */
int config_parse_duration(const char *s0, int64_t *out, char *why, size_t whylen);

#endif
