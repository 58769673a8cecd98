/*
 * Unit tests for config/config.c: etcd's flag table. Defaults against etcd's
 * own help text (Debian's golang-etcd-server-dev) and a list taken from
 * embed.NewConfig, both flag syntaxes, ETCD_ variables and their
 * precedence, refusal of every default-only flag at any other value,
 * rejection of bad values with etcd's messages, the values etcd derives,
 * and the listen helpers.
 */
#include "shm_testlib.h"
#include "log_capture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <unistd.h>

#include "config/config.h"
#include "config/config_int.h"
#include "base/log/log.h"

#define ETCD_HELP_GO "/usr/share/gocode/src/go.etcd.io/etcd/etcdmain/help.go"

#define CHECK_STREQ(a, b)                                                    \
	do {                                                                 \
		const char *check_a_ = (a), *check_b_ = (b);                 \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_)) {  \
			fprintf(stderr, "%s:%d: check failed: %s == %s "     \
				"(\"%s\" != \"%s\")\n", __FILE__, __LINE__,  \
				#a, #b, check_a_ ? check_a_ : "(null)",      \
				check_b_ ? check_b_ : "(null)");             \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define CHECK_CONTAINS(hay, needle)                                          \
	do {                                                                 \
		if (!strstr((hay), (needle))) {                              \
			fprintf(stderr, "%s:%d: \"%s\" does not contain "    \
				"\"%s\"\n", __FILE__, __LINE__, (hay),       \
				(needle));                                   \
			exit(1);                                             \
		}                                                            \
	} while (0)

static char *const no_env[] = { NULL };

/* The log lines config_parse writes go here, to be searched. */
static char log_path[512];
static void log_reset(void)
{
	log_capture_reset(log_path);
}


/* Parses a NULL-terminated argument list (after argv[0]) with env. The
 * configuration is left in *c for the caller to inspect and free. */
static int parse_env(struct cetcd_config *c, struct config_error *err, enum config_program prog,
		     char *const *env, ...)
{
	char *argv[64];
	int argc = 0;
	va_list ap;

	argv[argc++] = "cetcd";
	va_start(ap, env);
	for (char *a; (a = va_arg(ap, char *)) != NULL;) {
		CHECK(argc < 63);
		argv[argc++] = a;
	}
	va_end(ap);
	argv[argc] = NULL;
	CHECK_EQ(config_init(c), 0);
	return config_parse(c, prog, argc, argv, env, err);
}

#define PARSE(c, err, ...) parse_env((c), (err), CONFIG_PROG_LAUNCHER, no_env, __VA_ARGS__, NULL)
#define PARSE_ENV(c, err, env, ...) \
	parse_env((c), (err), CONFIG_PROG_LAUNCHER, (env), __VA_ARGS__ __VA_OPT__(, ) NULL)

/* Expects a parse to fail with rc, exit status and a message containing
 * needle. */
static void expect_fail(int rc, const struct config_error *err, int want_rc, int want_status,
			const char *needle)
{
	if (rc != want_rc || err->exit_status != want_status || !strstr(err->msg, needle)) {
		fprintf(stderr, "expected rc %d status %d with \"%s\", got rc %d status %d: %s\n",
			want_rc, want_status, needle, rc, err->exit_status, err->msg);
		exit(1);
	}
}

static void test_defaults(void)
{
	struct cetcd_config c;
	struct config_error err;

	CHECK_EQ(parse_env(&c, &err, CONFIG_PROG_LAUNCHER, no_env, NULL), 0);
	/* etcd 3.4's embed.NewConfig and etcdmain's flag defaults */
	CHECK_STREQ(c.name, "default");
	CHECK_STREQ(c.data_dir, "default.etcd");
	CHECK_STREQ(c.wal_dir, "");
	CHECK_EQ(c.snapshot_count, 100000);
	CHECK_EQ(c.heartbeat_interval_ms, 100);
	CHECK_EQ(c.election_timeout_ms, 1000);
	CHECK(c.initial_election_tick_advance);
	CHECK_EQ(c.listen_peer_urls.count, 1);
	CHECK_STREQ(c.listen_peer_urls.v[0].text, "http://localhost:2380");
	CHECK_STREQ(c.listen_peer_urls.v[0].host, "localhost");
	CHECK_STREQ(c.listen_peer_urls.v[0].port, "2380");
	CHECK_EQ(c.listen_client_urls.count, 1);
	CHECK_STREQ(c.listen_client_urls.v[0].text, "http://localhost:2379");
	CHECK_STREQ(c.initial_advertise_peer_urls.v[0].text, "http://localhost:2380");
	CHECK_STREQ(c.advertise_client_urls.v[0].text, "http://localhost:2379");
	CHECK_EQ(c.max_snapshots, 5);
	CHECK_EQ(c.max_wals, 5);
	CHECK_EQ(c.quota_backend_bytes, 0);
	CHECK_EQ(c.backend_batch_interval_ns, 0);
	CHECK_EQ(c.backend_batch_limit, 0);
	CHECK_EQ(c.max_txn_ops, 128);
	CHECK_EQ(c.max_request_bytes, 1572864);
	CHECK_EQ(c.max_concurrent_streams, UINT32_MAX);
	CHECK_EQ(c.grpc_keepalive_min_time_ns, 5000000000LL);
	CHECK_EQ(c.grpc_keepalive_interval_ns, 7200000000000LL);
	CHECK_EQ(c.grpc_keepalive_timeout_ns, 20000000000LL);
	CHECK_STREQ(c.initial_cluster, "default=http://localhost:2380");
	CHECK_STREQ(c.initial_cluster_state, "new");
	CHECK_STREQ(c.initial_cluster_token, "etcd-cluster");
	CHECK_STREQ(c.discovery, "");
	CHECK_STREQ(c.discovery_fallback, "proxy");
	CHECK(c.strict_reconfig_check);
	CHECK(!c.enable_v2);
	CHECK(c.pre_vote);
	CHECK_STREQ(c.auto_compaction_retention, "0");
	CHECK_STREQ(c.auto_compaction_mode, "periodic");
	CHECK_STREQ(c.proxy, "off");
	CHECK_EQ(c.proxy_failure_wait_ms, 5000);
	CHECK_EQ(c.proxy_refresh_interval_ms, 30000);
	CHECK_EQ(c.proxy_dial_timeout_ms, 1000);
	CHECK_EQ(c.proxy_write_timeout_ms, 5000);
	CHECK_EQ(c.proxy_read_timeout_ms, 0);
	CHECK(!c.client_cert_auth && !c.auto_tls && !c.peer_auto_tls);
	CHECK_EQ(c.cipher_suites.count, 0);
	CHECK_EQ(c.cors.count, 1);
	CHECK_STREQ(c.cors.v[0], "*");
	CHECK_EQ(c.host_whitelist.count, 1);
	CHECK_STREQ(c.host_whitelist.v[0], "*");
	CHECK_STREQ(c.logger, "capnslog");
	CHECK_EQ(c.log_outputs.count, 1);
	CHECK_STREQ(c.log_outputs.v[0], "default");
	CHECK_STREQ(c.log_level_text, "info");
	CHECK_EQ(c.log_level, LOG_LEVEL_INFO);
	CHECK(!c.debug);
	CHECK_STREQ(c.auth_token, "simple");
	CHECK_EQ(c.bcrypt_cost, 10);
	CHECK_EQ(c.auth_token_ttl_s, 300);
	CHECK_STREQ(c.metrics, "basic");
	CHECK_EQ(c.listen_metrics_urls.count, 0);
	CHECK(c.enable_grpc_gateway);
	CHECK_EQ(c.experimental_warning_apply_duration_ns, 100000000);
	CHECK(!c.unsafe_no_fsync && !c.force_new_cluster);
	/* cetcd's own */
	CHECK_EQ(c.raft_log_mib, 64);
	CHECK_EQ(c.gateways, config_default_gateways(sysconf(_SC_NPROCESSORS_ONLN)));
	CHECK_EQ(config_default_gateways(-1), 1);
	CHECK_EQ(config_default_gateways(1), 1);
	CHECK_EQ(config_default_gateways(2), 1);
	CHECK_EQ(config_default_gateways(3), 3);
	CHECK_EQ(config_default_gateways(8), 8);
	CHECK_EQ(config_default_gateways(1000), 64);
	CHECK(strncmp(c.runtime_dir, "/dev/shm/cetcd-", 15) == 0);
	CHECK_EQ(strlen(c.runtime_dir), 15 + 16);
	CHECK_EQ(c.gateway_index, -1);
	CHECK(!c.prepare_only && !c.print_help && !c.print_version);
	CHECK(!config_is_set(&c, "name"));
	config_free(&c);
}

/* Parses "  --flag 'value'" lines into a NULL-terminated name/value list. */
static size_t help_flags(FILE *f, char names[][64], char values[][96], size_t max)
{
	char line[1024];
	size_t n = 0;
	while (n < max && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "  --", 4) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		char *name = line + 4, *sp = strchr(name, ' ');
		const char *val = "";
		if (sp) {
			*sp = '\0';
			val = sp + 1;
		}
		snprintf(names[n], 64, "%.63s", name);
		snprintf(values[n], 96, "%.95s", val);
		/* drop quotes and cetcd's marker */
		char *v = values[n];
		char *mark = strstr(v, " [default only]");
		if (mark)
			*mark = '\0';
		size_t len = strlen(v);
		if (len >= 2 && v[0] == '\'' && v[len - 1] == '\'') {
			memmove(v, v + 1, len - 2);
			v[len - 2] = '\0';
		}
		n++;
	}
	return n;
}

/* Every flag etcd's --help lists exists in cetcd with the same default. */
static void test_defaults_match_etcd_help(void)
{
	static char en[128][64], ev[128][96], on[128][64], ov[128][96];
	char *buf = NULL;
	size_t blen = 0, ne, no, compared = 0;
	FILE *f = fopen(ETCD_HELP_GO, "r");

	if (!f) {
		printf("note: %s missing (golang-etcd-server-dev); help comparison skipped\n",
		       ETCD_HELP_GO);
		return;
	}
	ne = help_flags(f, en, ev, 128);
	fclose(f);
	f = open_memstream(&buf, &blen);
	CHECK(f);
	config_print_help(f, CONFIG_PROG_LAUNCHER);
	fclose(f);
	f = fmemopen(buf, blen, "r");
	CHECK(f);
	no = help_flags(f, on, ov, 128);
	fclose(f);
	free(buf);

	CHECK(ne > 70);
	for (size_t i = 0; i < ne; i++) {
		size_t j = 0;
		while (j < no && strcmp(en[i], on[j]) != 0)
			j++;
		if (j == no) {
			fprintf(stderr, "etcd flag --%s missing from cetcd's table\n", en[i]);
			exit(1);
		}
		if (strchr(ev[i], '`'))
			continue; /* computed in Go: checked in test_defaults */
		const char *want = strcmp(ev[i], "math.MaxUint32") ? ev[i] : "4294967295";
		/* defaults cetcd chose to differ on, each on purpose */
		static const char *const differ[][2] = {
			{ "pre-vote", "true" }, /* etcd's own default from 3.5 */
		};
		for (size_t k = 0; k < sizeof(differ) / sizeof(differ[0]); k++)
			if (strcmp(en[i], differ[k][0]) == 0)
				want = differ[k][1];
		if (strcmp(want, ov[j]) != 0) {
			fprintf(stderr, "--%s: etcd's default '%s', cetcd's '%s'\n", en[i], want,
				ov[j]);
			exit(1);
		}
		compared++;
	}
	printf("  %zu etcd --help defaults compared\n", compared);
	CHECK(compared > 60);
	/* flags etcd registers without listing them in --help */
	const char *extra[] = { "enable-grpc-gateway", "experimental-enable-lease-checkpoint-persist",
				"log-output", "unsafe-no-fsync" };
	for (size_t i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
		size_t j = 0;
		while (j < no && strcmp(extra[i], on[j]) != 0)
			j++;
		CHECK(j < no);
	}
}

static void test_syntax(void)
{
	struct cetcd_config c;
	struct config_error err;

	/* --flag=value, --flag value, -flag value, -flag=value */
	CHECK_EQ(PARSE(&c, &err, "--heartbeat-interval=50", "--election-timeout", "500",
		       "-snapshot-count", "7", "-max-txn-ops=9", "--name", "m1"),
		 0);
	CHECK_EQ(c.heartbeat_interval_ms, 50);
	CHECK_EQ(c.election_timeout_ms, 500);
	CHECK_EQ(c.snapshot_count, 7);
	CHECK_EQ(c.max_txn_ops, 9);
	CHECK_STREQ(c.name, "m1");
	CHECK(config_is_set(&c, "heartbeat-interval"));
	CHECK(!config_is_set(&c, "max-request-bytes"));
	/* --name alone renames the data dir and the one-member cluster */
	CHECK_STREQ(c.data_dir, "m1.etcd");
	CHECK_STREQ(c.initial_cluster, "m1=http://localhost:2380");
	config_free(&c);

	/* the last occurrence wins; a boolean alone means true; "--" ends */
	CHECK_EQ(PARSE(&c, &err, "--max-txn-ops=1", "--max-txn-ops=2", "--debug", "--"), 0);
	CHECK_EQ(c.max_txn_ops, 2);
	CHECK(c.debug);
	CHECK_EQ(c.log_level, LOG_LEVEL_DEBUG);
	config_free(&c);

	/* --auth-token's value is the daemons' to check (auth/token.h) */
	CHECK_EQ(PARSE(&c, &err, "--auth-token", "jwt,sign-method=ES256,pub-key=/k.pub",
		       "--auth-token-ttl=7"), 0);
	CHECK_STREQ(c.auth_token, "jwt,sign-method=ES256,pub-key=/k.pub");
	CHECK_EQ(c.auth_token_ttl_s, 7);
	config_free(&c);

	/* a default value given explicitly is accepted, even for a feature
	 * not built yet, in any spelling of that value */
	CHECK_EQ(PARSE(&c, &err, "--enable-v2=false", "--auto-tls=0", "--strict-reconfig-check=T",
		       "--grpc-keepalive-min-time=4s1000ms", "--max-wals=0x5",
		       "--experimental-compaction-batch-limit=1000",
		       "--experimental-watch-progress-notify-interval=600s",
		       "--experimental-backend-bbolt-freelist-type=array", "--cors=*"),
		 0);
	CHECK_EQ(c.grpc_keepalive_min_time_ns, 5000000000LL);
	config_free(&c);

	/* both of bbolt's free-list types; a misspelt one is refused */
	CHECK_EQ(PARSE(&c, &err, "--experimental-backend-bbolt-freelist-type=map",
		       "--experimental-warning-apply-duration=5ms"),
		 0);
	CHECK_STREQ(c.experimental_backend_bbolt_freelist_type, "map");
	CHECK_EQ(c.experimental_warning_apply_duration_ns, 5000000);
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--experimental-backend-bbolt-freelist-type=hash"), &err,
		    -EINVAL, 2, "flag -experimental-backend-bbolt-freelist-type: 'array' or 'map'");
	config_free(&c);

	/* Go integer literals */
	CHECK_EQ(PARSE(&c, &err, "--snapshot-count=0x10", "--max-txn-ops=010",
		       "--max-request-bytes=1_000_000", "--quota-backend-bytes=-0b11"),
		 0);
	CHECK_EQ(c.snapshot_count, 16);
	CHECK_EQ(c.max_txn_ops, 8);
	CHECK_EQ(c.max_request_bytes, 1000000);
	CHECK_EQ(c.quota_backend_bytes, -3);
	config_free(&c);

	/* URL lists: sorted, without repeats, spaces trimmed */
	CHECK_EQ(PARSE(&c, &err, "--listen-client-urls",
		       "http://127.0.0.2:1, http://127.0.0.1:1,http://127.0.0.2:1",
		       "--advertise-client-urls", "http://[::1]:4"),
		 0);
	CHECK_EQ(c.listen_client_urls.count, 2);
	CHECK_STREQ(c.listen_client_urls.v[0].text, "http://127.0.0.1:1");
	CHECK_STREQ(c.listen_client_urls.v[1].text, "http://127.0.0.2:1");
	CHECK_STREQ(c.advertise_client_urls.v[0].host, "::1");
	CHECK_STREQ(c.advertise_client_urls.v[0].port, "4");
	config_free(&c);

	/* etcd's ignored flags are accepted with a warning */
	log_reset();
	CHECK_EQ(PARSE(&c, &err, "--snapshot", "--peer-heartbeat-interval=3"), 0);
	CHECK(log_capture_has("flag is no longer supported - ignoring"));
	config_free(&c);

	/* -h, -help, --help stop parsing at once */
	CHECK_EQ(PARSE(&c, &err, "-h", "--no-such-flag"), 0);
	CHECK(c.print_help);
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, "--help"), 0);
	CHECK(c.print_help);
	config_free(&c);
	/* --version is honoured after the flags parse, before validation */
	CHECK_EQ(PARSE(&c, &err, "--version", "--auto-tls"), 0);
	CHECK(c.print_version);
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--version", "--no-such-flag"), &err, -EINVAL, 2,
		    "flag provided but not defined: -no-such-flag");
	config_free(&c);
}

static void test_env(void)
{
	struct cetcd_config c;
	struct config_error err;
	char *env[] = { "ETCD_HEARTBEAT_INTERVAL=50", "ETCD_ELECTION_TIMEOUT=600",
			"ETCD_NAME=", /* empty: unset */
			"ETCD_LISTEN_PEER_URLS=http://127.0.0.1:12380",
			"ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:12380",
			"ETCD_INITIAL_CLUSTER=default=http://127.0.0.1:12380",
			"ETCD_NO_SUCH_THING=1", "PATH=/bin", "ETCD_GATEWAYS=3",
			"ETCD_RUNTIME_DIR=/dev/shm/x", NULL };

	log_reset();
	CHECK_EQ(PARSE_ENV(&c, &err, env, "--max-txn-ops=5"), 0);
	CHECK_EQ(c.heartbeat_interval_ms, 50);
	CHECK_EQ(c.election_timeout_ms, 600);
	CHECK_EQ(c.max_txn_ops, 5);
	CHECK_STREQ(c.name, "default");
	CHECK_STREQ(c.listen_peer_urls.v[0].text, "http://127.0.0.1:12380");
	CHECK_EQ(c.gateways, 3);
	CHECK_STREQ(c.runtime_dir, "/dev/shm/x");
	CHECK(config_is_set(&c, "heartbeat-interval"));
	CHECK(!config_is_set(&c, "name"));
	CHECK(log_capture_has("recognized and used environment variable"));
	CHECK(log_capture_has("ETCD_HEARTBEAT_INTERVAL"));
	CHECK(log_capture_has("unrecognized environment variable"));
	CHECK(log_capture_has("ETCD_NO_SUCH_THING=1"));
	CHECK(!log_capture_has("PATH=/bin"));
	config_free(&c);

	/* a flag and its variable both given: etcd refuses (exit 1) */
	char *conflict[] = { "ETCD_SNAPSHOT_COUNT=5", NULL };
	expect_fail(PARSE_ENV(&c, &err, conflict, "--snapshot-count=6"), &err, -EINVAL, 1,
		    "conflicting environment variable \"ETCD_SNAPSHOT_COUNT\" is shadowed");
	config_free(&c);
	char *conflict_empty[] = { "ETCD_SNAPSHOT_COUNT=", NULL };
	expect_fail(PARSE_ENV(&c, &err, conflict_empty, "--snapshot-count=6"), &err, -EINVAL, 1,
		    "conflicting environment variable");
	config_free(&c);

	/* a bad value in a variable names the variable (exit 1) */
	char *bad[] = { "ETCD_SNAPSHOT_COUNT=lots", NULL };
	expect_fail(PARSE_ENV(&c, &err, bad), &err, -EINVAL, 1,
		    "invalid value \"lots\" for ETCD_SNAPSHOT_COUNT");
	config_free(&c);

	/* unsupported through the environment too */
	char *unsup[] = { "ETCD_PROXY=on", NULL };
	expect_fail(PARSE_ENV(&c, &err, unsup), &err, -ENOTSUP, 2,
		    "--proxy=on is not supported");
	config_free(&c);

	/* program-only flags have no variable */
	char *internal[] = { "ETCD_GATEWAY_INDEX=4", NULL };
	log_reset();
	CHECK_EQ(parse_env(&c, &err, CONFIG_PROG_GATEWAYD, internal, NULL), 0);
	CHECK_EQ(c.gateway_index, -1);
	CHECK(log_capture_has("unrecognized environment variable"));
	config_free(&c);

	/* listening on chosen client URLs needs advertised ones, from either
	 * source */
	char *lcurl[] = { "ETCD_LISTEN_CLIENT_URLS=http://127.0.0.1:5", NULL };
	expect_fail(PARSE_ENV(&c, &err, lcurl), &err, -EINVAL, 1,
		    "--advertise-client-urls is required when --listen-client-urls is set explicitly");
	config_free(&c);
}

/* A value other than the default for a flag whose --help default is d,
 * candidates in turn until one parses. */
static const char *const other_values[] = { "7s", "http://127.0.0.1:1", "x", NULL };

static int try_non_default(const char *name, const char *def, struct config_error *err,
			   char *arg, size_t len)
{
	struct cetcd_config c;
	int rc = -EINVAL;
	char *endp;

	if (!strcmp(def, "true") || !strcmp(def, "false")) {
		snprintf(arg, len, "--%.100s=%s", name, strcmp(def, "true") ? "true" : "false");
		rc = PARSE(&c, err, arg);
		config_free(&c);
		return rc;
	}
	unsigned long long n = strtoull(def, &endp, 10);
	if (def[0] && !*endp) {
		snprintf(arg, len, "--%.100s=%llu", name, n == 4294967295ULL ? 17ULL : n + 1);
		rc = PARSE(&c, err, arg);
		config_free(&c);
		return rc;
	}
	const char *choices[][2] = { { "proxy", "exit" }, { "off", "on" }, { "simple", "jwt" },
				     { "basic", "extensive" }, { "periodic", "revision" },
				     { "array", "map" } };
	for (size_t i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
		if (strcmp(def, choices[i][0]) == 0) {
			snprintf(arg, len, "--%.100s=%s", name, choices[i][1]);
			rc = PARSE(&c, err, arg);
			config_free(&c);
			return rc;
		}
	}
	for (const char *const *v = other_values; *v && rc == -EINVAL; v++) {
		snprintf(arg, len, "--%.100s=%s", name, *v);
		rc = PARSE(&c, err, arg);
		config_free(&c);
	}
	return rc;
}

/* Every flag --help marks [default only] refuses any other value with
 * exit status 2 and a message naming it: none is silently ignored. */
static void test_refusals(void)
{
	struct cetcd_config c;
	struct config_error err;
	char *buf = NULL, line[1024], arg[256];
	size_t blen = 0;
	int refused = 0;
	FILE *f = open_memstream(&buf, &blen);

	CHECK(f);
	config_print_help(f, CONFIG_PROG_LAUNCHER);
	fclose(f);
	f = fmemopen(buf, blen, "r");
	CHECK(f);
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "  --", 4) != 0 || !strstr(line, "[default only]"))
			continue;
		char *name = line + 4, *sp = strchr(name, ' ');
		*sp = '\0';
		char *def = sp + 2; /* after " '" */
		*strchr(def, '\'') = '\0';
		int rc = try_non_default(name, def, &err, arg, sizeof(arg));
		char want[128];
		snprintf(want, sizeof(want), "--%.100s=", name);
		if (rc != -ENOTSUP || err.exit_status != 2 || !strstr(err.msg, want)) {
			fprintf(stderr, "%s: expected a refusal naming --%s, got rc %d: %s\n", arg,
				name, rc, err.msg);
			exit(1);
		}
		refused++;
	}
	fclose(f);
	free(buf);
	printf("  %d default-only flags refuse other values\n", refused);
	/* as many as the table marks */
	int marked = 0;
	for (size_t i = 0; i < config_nflags; i++)
		marked += config_flags[i].support == CS_DEFAULT_ONLY;
	CHECK(refused > 0 && refused == marked);

	/* values a partly supported flag does not take yet */
	/* unix socket client URLs, as etcd's */
	CHECK(PARSE(&c, &err, "--listen-client-urls=unix://localhost:1,http://127.0.0.1:2",
		    "--advertise-client-urls=unix://localhost:1") == 0);
	config_free(&c);
	/* several members, unix peers: taken */
	CHECK(PARSE(&c, &err, "--initial-cluster=a=unix://x:2,b=http://127.0.0.1:1", "--name=a",
		    "--listen-peer-urls=unix://x:2", "--initial-advertise-peer-urls=unix://x:2") == 0);
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--log-outputs=systemd/journal"), &err, -ENOTSUP, 2,
		    "--log-outputs=systemd/journal");
	config_free(&c);

	/* and what is built is accepted */
	CHECK_EQ(PARSE(&c, &err, "--quota-backend-bytes=8589934592", "--log-level=warn",
		       "--logger=zap", "--log-outputs=stderr", "--gateways=2",
		       "--initial-cluster-token=tok", "--initial-cluster-state=new"),
		 0);
	CHECK_EQ(c.quota_backend_bytes, 8589934592LL);
	CHECK_EQ(c.log_level, LOG_LEVEL_WARN);
	CHECK_EQ(c.gateways, 2);
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, "--initial-cluster-state=existing"), 0);
	CHECK_STREQ(c.initial_cluster_state, "existing");
	config_free(&c);
}

/* Empty files NAME.crt and NAME.key (paths into cert and key, 300 bytes
 * each) beside the log, in main's scratch directory: the flags' checks
 * only open them. */
static void make_tls_files(const char *name, char *cert, char *key)
{
	int dir = (int)(strrchr(log_path, '/') - log_path);

	snprintf(cert, 300, "%.*s/%s.crt", dir, log_path, name);
	snprintf(key, 300, "%.*s/%s.key", dir, log_path, name);
	for (const char *p = cert; p; p = p == cert ? key : NULL) {
		int fd = open(p, O_WRONLY | O_CREAT, 0600);
		CHECK(fd >= 0);
		close(fd);
	}
}

/* A path under a directory that does not exist in main's scratch
 * directory (out: cap bytes), for the flags' "no such file" checks: a
 * fixed path such as /nonexistent/x may exist on the machine. */
static void missing_path(const char *name, char *out, size_t cap)
{
	int dir = (int)(strrchr(log_path, '/') - log_path);

	snprintf(out, cap, "%.*s/missing/%s", dir, log_path, name);
}

/* The peer TLS flags: accepted, and checked as etcd checks them when it
 * starts its peer listeners. */
static void test_peer_tls(void)
{
	struct cetcd_config c;
	struct config_error err;
	char cert[300], key[300];
	char *env[] = { "ETCD_PEER_AUTO_TLS=true", "ETCD_CIPHER_SUITES=TLS_AES_128_GCM_SHA256",
			NULL };
	const char *https[] = { "--listen-peer-urls=https://127.0.0.1:12380",
				"--initial-advertise-peer-urls=https://127.0.0.1:12380",
				"--initial-cluster=default=https://127.0.0.1:12380" };

	make_tls_files("peer", cert, key);

	/* https peer URLs need certificates or auto TLS */
	expect_fail(PARSE(&c, &err, https[0], https[1], https[2]), &err, -EINVAL, 1,
		    "cannot listen on TLS for 127.0.0.1:12380: KeyFile and CertFile are not presented");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--listen-peer-urls=https://localhost:12380,https://[::1]:12381"),
		    &err, -EINVAL, 1, "cannot listen on TLS for [::1]:12381");
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, https[0], https[1], https[2], "--peer-auto-tls"), 0);
	CHECK(c.peer_auto_tls);
	CHECK_STREQ(c.listen_peer_urls.v[0].scheme, "https");
	config_free(&c);
	CHECK_EQ(PARSE_ENV(&c, &err, env, https[0], https[1], https[2]), 0);
	CHECK(c.peer_auto_tls);
	CHECK_EQ(c.cipher_suites.count, 1);
	CHECK_STREQ(c.cipher_suites.v[0], "TLS_AES_128_GCM_SHA256");
	config_free(&c);

	/* every peer flag set; the files are only opened, not parsed, here */
	CHECK_EQ(PARSE(&c, &err, https[0], https[1], https[2], "--peer-cert-file", cert,
		       "--peer-key-file", key, "--peer-trusted-ca-file", cert,
		       "--peer-client-cert-auth", "--peer-crl-file=/any/crl",
		       "--peer-cert-allowed-cn=member", "--experimental-peer-skip-client-san-verification",
		       "--cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"),
		 0);
	CHECK_STREQ(c.peer_cert_file, cert);
	CHECK_STREQ(c.peer_key_file, key);
	CHECK_STREQ(c.peer_trusted_ca_file, cert);
	CHECK_STREQ(c.peer_crl_file, "/any/crl");
	CHECK_STREQ(c.peer_cert_allowed_cn, "member");
	CHECK(c.peer_client_cert_auth && c.experimental_peer_skip_client_san_verification);
	CHECK_EQ(c.cipher_suites.count, 2);
	CHECK_STREQ(c.cipher_suites.v[1], "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305");
	config_free(&c);
	/* also on http peer URLs (etcd warns and ignores them there) */
	CHECK_EQ(PARSE(&c, &err, "--peer-cert-file", cert, "--peer-key-file", key,
		       "--peer-cert-allowed-hostname=member.example"),
		 0);
	config_free(&c);

	/* etcd's refusals */
	expect_fail(PARSE(&c, &err, "--cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,AES128-SHA"),
		    &err, -EINVAL, 1, "unexpected TLS cipher suite \"AES128-SHA\"");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--peer-cert-file", cert), &err, -EINVAL, 1, "");
	CHECK(strcmp(err.msg, "KeyFile and CertFile must both be present[key: , cert: ") > 0);
	CHECK(strstr(err.msg, cert) != NULL);
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--peer-cert-allowed-cn=a", "--peer-cert-allowed-hostname=b"),
		    &err, -EINVAL, 1,
		    "AllowedCN and AllowedHostname are mutually exclusive (cn=\"a\", hostname=\"b\")");
	config_free(&c);
	char missing[340], flag[400], want[400];
	missing_path("ca.crt", missing, sizeof(missing));
	snprintf(flag, sizeof(flag), "--peer-trusted-ca-file=%s", missing);
	snprintf(want, sizeof(want), "open %s: no such file or directory", missing);
	expect_fail(PARSE(&c, &err, https[0], https[1], https[2], "--peer-cert-file", cert,
			  "--peer-key-file", key, flag),
		    &err, -EINVAL, 1, want);
	config_free(&c);

	/* etcd 3.4 has no --self-signed-cert-validity (3.5 added it) */
	expect_fail(PARSE(&c, &err, "--self-signed-cert-validity=2"), &err, -EINVAL, 2,
		    "flag provided but not defined: -self-signed-cert-validity");
	config_free(&c);
}

/* The client TLS flags: accepted with their ETCD_ variables, and checked
 * as etcd's configureClientListeners checks them. */
static void test_client_tls(void)
{
	struct cetcd_config c;
	struct config_error err;
	char cert[300], key[300];
	char *env[] = { "ETCD_AUTO_TLS=true", "ETCD_CLIENT_CERT_AUTH=true", NULL };
	char *env_files[] = { NULL, NULL, NULL, NULL };
	char env_cert[340], env_key[340], env_ca[340];
	const char *https[] = { "--listen-client-urls=https://127.0.0.1:12379",
				"--advertise-client-urls=https://127.0.0.1:12379" };

	make_tls_files("client", cert, key);

	/* https client URLs need certificates or auto TLS, in etcd's words */
	expect_fail(PARSE(&c, &err, https[0], https[1]), &err, -EINVAL, 1,
		    "TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:12379 with HTTPS scheme");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--listen-client-urls=http://127.0.0.1:12379,https://localhost:12380",
			  https[1]),
		    &err, -EINVAL, 1,
		    "TLS key/cert (--cert-file, --key-file) must be provided for client url https://localhost:12380 with HTTPS scheme");
	config_free(&c);
	/* auto TLS (here by its variable) makes the certificate */
	CHECK_EQ(PARSE_ENV(&c, &err, env, https[0], https[1]), 0);
	CHECK(c.auto_tls && c.client_cert_auth);
	CHECK_STREQ(c.listen_client_urls.v[0].scheme, "https");
	CHECK_STREQ(c.advertise_client_urls.v[0].scheme, "https");
	config_free(&c);

	/* every client flag; the files are only opened, not parsed, here */
	CHECK_EQ(PARSE(&c, &err, https[0], https[1], "--cert-file", cert, "--key-file", key,
		       "--trusted-ca-file", cert, "--client-cert-auth", "--client-crl-file=/any/crl",
		       "--client-cert-allowed-hostname=client.example"),
		 0);
	CHECK_STREQ(c.cert_file, cert);
	CHECK_STREQ(c.key_file, key);
	CHECK_STREQ(c.trusted_ca_file, cert);
	CHECK_STREQ(c.client_crl_file, "/any/crl");
	CHECK_STREQ(c.client_cert_allowed_hostname, "client.example");
	CHECK(c.client_cert_auth && !c.auto_tls);
	config_free(&c);
	/* by ETCD_ variables */
	snprintf(env_cert, sizeof(env_cert), "ETCD_CERT_FILE=%s", cert);
	snprintf(env_key, sizeof(env_key), "ETCD_KEY_FILE=%s", key);
	snprintf(env_ca, sizeof(env_ca), "ETCD_TRUSTED_CA_FILE=%s", cert);
	env_files[0] = env_cert;
	env_files[1] = env_key;
	env_files[2] = env_ca;
	CHECK_EQ(PARSE_ENV(&c, &err, env_files, https[0], https[1]), 0);
	CHECK_STREQ(c.cert_file, cert);
	CHECK_STREQ(c.key_file, key);
	CHECK_STREQ(c.trusted_ca_file, cert);
	config_free(&c);
	/* http and https at once, on one port or two */
	CHECK_EQ(PARSE(&c, &err,
		       "--listen-client-urls=http://127.0.0.1:12379,https://127.0.0.1:12379,https://127.0.0.1:12381",
		       "--advertise-client-urls=https://127.0.0.1:12379", "--cert-file", cert,
		       "--key-file", key),
		 0);
	CHECK_EQ(c.listen_client_urls.count, 3);
	config_free(&c);
	/* certificates beside http URLs only: etcd warns and ignores them */
	CHECK_EQ(PARSE(&c, &err, "--cert-file", cert, "--key-file", key, "--client-cert-auth"), 0);
	config_free(&c);

	/* etcd's refusals */
	expect_fail(PARSE(&c, &err, https[0], https[1], "--key-file", key), &err, -EINVAL, 1, "");
	CHECK(strncmp(err.msg, "KeyFile and CertFile must both be present[key: ", 47) == 0);
	CHECK(strstr(err.msg, key) != NULL);
	config_free(&c);
	char missing[340], flag[400], want[400];
	missing_path("client.key", missing, sizeof(missing));
	snprintf(want, sizeof(want), "open %s: no such file or directory", missing);
	expect_fail(PARSE(&c, &err, https[0], https[1], "--cert-file", cert, "--key-file",
			  missing),
		    &err, -EINVAL, 1, want);
	config_free(&c);
	missing_path("ca.crt", missing, sizeof(missing));
	snprintf(flag, sizeof(flag), "--trusted-ca-file=%s", missing);
	snprintf(want, sizeof(want), "open %s: no such file or directory", missing);
	expect_fail(PARSE(&c, &err, https[0], https[1], "--auto-tls", flag),
		    &err, -EINVAL, 1, want);
	config_free(&c);
	/* a unixs listener takes TLS as an https one does */
	CHECK(PARSE(&c, &err, "--listen-client-urls=unixs://127.0.0.1:1",
		    "--advertise-client-urls=http://127.0.0.1:1", "--auto-tls") == 0);
	config_free(&c);
}

static void test_bad_values(void)
{
	static const struct {
		const char *args[4];
		int status;
		const char *msg;
	} cases[] = {
		{ { "--heartbeat-interval=abc" }, 2,
		  "invalid value \"abc\" for flag -heartbeat-interval: parse error (want an unsigned integer)" },
		{ { "--snapshot-count=-1" }, 2, "invalid value \"-1\" for flag -snapshot-count" },
		{ { "--auth-token-ttl=-1" }, 2, "invalid value \"-1\" for flag -auth-token-ttl" },
		{ { "--auth-token-ttl=5m" }, 2, "invalid value \"5m\" for flag -auth-token-ttl" },
		{ { "--max-concurrent-streams=4294967296" }, 2, "value out of range" },
		{ { "--quota-backend-bytes=1x" }, 2, "invalid value \"1x\" for flag -quota-backend-bytes" },
		{ { "--max-txn-ops=1__0" }, 2, "parse error" },
		{ { "--max-txn-ops=_1" }, 2, "parse error" },
		{ { "--max-txn-ops=" }, 2, "parse error" },
		{ { "--debug=maybe" }, 2, "invalid boolean value \"maybe\" for -debug" },
		{ { "--grpc-keepalive-min-time=5" }, 2, "time: missing unit in duration \"5\"" },
		{ { "--grpc-keepalive-min-time=5x" }, 2, "time: unknown unit \"x\" in duration \"5x\"" },
		{ { "--grpc-keepalive-min-time=s" }, 2, "time: invalid duration \"s\"" },
		{ { "--initial-cluster-state=bogus" }, 2, "invalid value (valid values: existing new)" },
		{ { "--listen-peer-urls=localhost:2380" }, 2, "URL scheme must be http, https, unix, or unixs" },
		{ { "--listen-peer-urls=http://127.0.0.1" }, 2, "URL address does not have the form \"host:port\"" },
		{ { "--listen-peer-urls=http://127.0.0.1:1/x" }, 2, "URL must not contain a path" },
		{ { "--name" }, 2, "flag needs an argument: -name" },
		{ { "---name=x" }, 2, "bad flag syntax: ---name=x" },
		{ { "--no-such-flag=1" }, 2, "flag provided but not defined: -no-such-flag" },
		{ { "--pre-vote", "false" }, 1, "'false' is not a valid flag" },
		{ { "--", "x" }, 1, "'x' is not a valid flag" },
		{ { "--prepare-only=maybe" }, 2, "invalid boolean value" },
		{ { "--election-timeout=400" }, 1,
		  "--election-timeout[400ms] should be at least as 5 times as --heartbeat-interval[100ms]" },
		{ { "--heartbeat-interval=0" }, 1, "--heartbeat-interval must be >0" },
		{ { "--election-timeout=60000" }, 1, "is too long, and should be set less than 50000ms" },
		{ { "--listen-client-urls=http://example.com:1", "--advertise-client-urls=http://a:1" }, 1,
		  "expected IP in URL for binding (http://example.com:1)" },
		{ { "--listen-client-urls=http://127.0.0.1:1" }, 1,
		  "--advertise-client-urls is required when --listen-client-urls is set explicitly" },
		{ { "--advertise-client-urls=http://:1" }, 1, "must be \"host:port\" (unexpected empty host" },
		{ { "--log-level=loud" }, 1, "unknown log-level \"loud\"" },
		{ { "--logger=syslog" }, 1, "unknown logger option \"syslog\"" },
		{ { "--log-output=stderr", "--log-outputs=stderr" }, 1, "are incompatible" },
		{ { "--gateways=1000" }, 1, "--gateways=1000 is too many" },
		{ { "--raft-log-mib=0" }, 1, "--raft-log-mib=0 is out of range (1 to 1048576)" },
		{ { "--raft-log-mib=1048577" }, 1, "--raft-log-mib=1048577 is out of range" },
		{ { "--backend-batch-interval=-1s" }, 1, "--backend-batch-interval must not be negative" },
		{ { "--experimental-compaction-batch-limit=-1" }, 1,
		  "--experimental-compaction-batch-limit must not be negative" },
		{ { "--max-request-bytes=0" }, 1, "--max-request-bytes=0 is out of range" },
		{ { "--name=" }, 1, "--name must not be empty" },
		{ { "--initial-cluster=other=http://localhost:2380" }, 1,
		  "couldn't find local name \"default\" in the initial cluster configuration" },
		{ { "--initial-advertise-peer-urls=http://127.0.0.1:12380" }, 1,
		  "--initial-cluster has default=http://localhost:2380 but missing from --initial-advertise-peer-urls=http://127.0.0.1:12380" },
		{ { "--initial-cluster=default=http://localhost:2380,default=http://localhost:2380" }, 1,
		  "has duplicate url" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cetcd_config c;
		struct config_error err;
		const char *const *a = cases[i].args;
		int rc = parse_env(&c, &err, CONFIG_PROG_LAUNCHER, no_env, a[0], a[1], a[2], a[3],
				   NULL);
		expect_fail(rc, &err, -EINVAL, cases[i].status, cases[i].msg);
		config_free(&c);
	}

	/* localhost and 127.0.0.1 are the same peer, as etcd resolves them */
	struct cetcd_config c;
	struct config_error err;
	CHECK_EQ(PARSE(&c, &err, "--initial-cluster=default=http://127.0.0.1:2380"), 0);
	config_free(&c);
}

static void test_scopes(void)
{
	struct cetcd_config c;
	struct config_error err;

	CHECK_EQ(parse_env(&c, &err, CONFIG_PROG_GATEWAYD, no_env, "--gateway-index=3", NULL), 0);
	CHECK_EQ(c.gateway_index, 3);
	config_free(&c);
	expect_fail(parse_env(&c, &err, CONFIG_PROG_LAUNCHER, no_env, "--gateway-index=3", NULL),
		    &err, -EINVAL, 2, "flag provided but not defined: -gateway-index");
	config_free(&c);
	expect_fail(parse_env(&c, &err, CONFIG_PROG_RAFTD, no_env, "--prepare-only", NULL), &err,
		    -EINVAL, 2, "flag provided but not defined: -prepare-only");
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, "--prepare-only"), 0);
	CHECK(c.prepare_only);
	config_free(&c);
}

static void test_runtime_dir(void)
{
	struct cetcd_config a, b, d;
	struct config_error err;
	char cwd[PATH_MAX], abs[PATH_MAX + 32];

	CHECK(getcwd(cwd, sizeof(cwd)));
	snprintf(abs, sizeof(abs), "--data-dir=%s/x/", cwd);
	CHECK_EQ(PARSE(&a, &err, "--data-dir=x"), 0);
	CHECK_EQ(PARSE(&b, &err, abs), 0);
	CHECK_EQ(PARSE(&d, &err, "--data-dir=./y/../x/."), 0);
	/* one data dir, however spelled, one runtime dir */
	CHECK_STREQ(a.runtime_dir, b.runtime_dir);
	CHECK_STREQ(a.runtime_dir, d.runtime_dir);
	config_free(&b);
	CHECK_EQ(PARSE(&b, &err, "--data-dir=z"), 0);
	CHECK(strcmp(a.runtime_dir, b.runtime_dir) != 0);

	char path[PATH_MAX];
	CHECK_EQ(config_region_path(&a, path, sizeof(path)), 0);
	CHECK(strncmp(path, a.runtime_dir, strlen(a.runtime_dir)) == 0);
	CHECK_STREQ(path + strlen(a.runtime_dir), "/region");
	CHECK_EQ(config_region_path(&a, path, 8), -ENAMETOOLONG);
	config_free(&a);
	config_free(&b);
	config_free(&d);
}

static void test_listen(void)
{
	struct cetcd_config c;
	struct config_error err;
	struct sockaddr_storage ss;
	socklen_t len;
	int fd1, fd2, fd3;

	CHECK_EQ(PARSE(&c, &err, "--listen-client-urls=http://localhost:0,http://127.0.0.1:x",
		       "--advertise-client-urls=http://127.0.0.1:1"),
		 0);
	/* sorted: http://127.0.0.1:x before http://localhost:0 */
	CHECK_EQ(config_url_sockaddr(&c.listen_client_urls.v[1], &ss, &len, &err), 0);
	CHECK_EQ(ss.ss_family, AF_INET);
	CHECK_EQ(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	CHECK_EQ(config_url_sockaddr(&c.listen_client_urls.v[0], &ss, &len, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "bad port");
	config_free(&c);

	/* two listeners share a port with SO_REUSEPORT, a third without
	 * cannot take it */
	CHECK_EQ(PARSE(&c, &err, "--listen-peer-urls=http://127.0.0.1:0",
		       "--initial-advertise-peer-urls=http://127.0.0.1:0",
		       "--initial-cluster=default=http://127.0.0.1:0"),
		 0);
	CHECK_EQ(config_listen_url(&c.listen_peer_urls.v[0], true, &fd1, &err), 0);
	CHECK_EQ(getsockname(fd1, (struct sockaddr *)&ss, &(socklen_t){ sizeof(ss) }), 0);
	char url[64], port[16];
	snprintf(port, sizeof(port), "%u", ntohs(((struct sockaddr_in *)&ss)->sin_port));
	snprintf(url, sizeof(url), "--listen-client-urls=http://127.0.0.1:%s", port);
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, url, "--advertise-client-urls=http://127.0.0.1:1"), 0);
	CHECK_EQ(config_listen_url(&c.listen_client_urls.v[0], true, &fd2, &err), 0);
	CHECK_EQ(config_listen_url(&c.listen_client_urls.v[0], false, &fd3, &err), -EADDRINUSE);
	CHECK_CONTAINS(err.msg, "bind: Address already in use");
	CHECK(fcntl(fd2, F_GETFD) & FD_CLOEXEC);
	CHECK(fcntl(fd2, F_GETFL) & O_NONBLOCK);
	close(fd1);
	close(fd2);
	config_free(&c);
}

/* The client listeners the launcher binds for gatewayd 0 and hands down
 * in CONFIG_CLIENT_FDS_ENV: one per address (an http and an https URL of
 * one address share it), and what the gateway accepts of the variable. */
static void test_client_fds(void)
{
	struct cetcd_config c;
	struct config_error err;
	int *fds, *got;
	char env[64];

	CHECK_EQ(PARSE(&c, &err,
		       "--listen-client-urls=http://127.0.0.1:0,http://127.0.0.2:0,https://127.0.0.1:0",
		       "--advertise-client-urls=http://127.0.0.1:1", "--auto-tls"),
		 0);
	CHECK_EQ(c.listen_client_urls.count, 3);
	CHECK_EQ(config_listen_client_urls(&c, CONFIG_LISTEN_ALL, &fds, &err), 0);
	/* sorted: http://127.0.0.1:0, http://127.0.0.2:0, https://127.0.0.1:0 */
	CHECK(fds[0] >= 0 && fds[1] >= 0);
	CHECK_EQ(fds[2], -1);
	CHECK(config_same_address(&c.listen_client_urls.v[0], &c.listen_client_urls.v[2]));
	CHECK(!config_same_address(&c.listen_client_urls.v[0], &c.listen_client_urls.v[1]));

	unsetenv(CONFIG_CLIENT_FDS_ENV);
	CHECK_EQ(config_inherited_client_fds(3, &got), -ENOENT);
	snprintf(env, sizeof(env), "%d,%d,-1", fds[0], fds[1]);
	setenv(CONFIG_CLIENT_FDS_ENV, env, 1);
	CHECK_EQ(config_inherited_client_fds(3, &got), 0);
	CHECK(got[0] == fds[0] && got[1] == fds[1] && got[2] == -1);
	free(got);
	CHECK(getenv(CONFIG_CLIENT_FDS_ENV) == NULL);
	CHECK(fcntl(fds[0], F_GETFD) & FD_CLOEXEC);
	/* a count that does not match, garbage, a descriptor that does not
	 * listen: refused, and the caller binds anew; the listeners it named
	 * are closed (they would hold connections nobody accepts), anything
	 * else it named is left alone */
	setenv(CONFIG_CLIENT_FDS_ENV, env, 1);
	CHECK_EQ(config_inherited_client_fds(2, &got), -EINVAL);
	CHECK(fcntl(fds[0], F_GETFD) == -1 && errno == EBADF);
	CHECK(fcntl(fds[1], F_GETFD) == -1 && errno == EBADF);
	free(fds);
	CHECK_EQ(config_listen_client_urls(&c, CONFIG_LISTEN_ALL, &fds, &err), 0);
	setenv(CONFIG_CLIENT_FDS_ENV, "-1,x,-1", 1);
	CHECK_EQ(config_inherited_client_fds(3, &got), -EINVAL);
	int plain = socket(AF_INET, SOCK_STREAM, 0);
	snprintf(env, sizeof(env), "%d,%d,-1", plain, fds[0]);
	setenv(CONFIG_CLIENT_FDS_ENV, env, 1);
	CHECK_EQ(config_inherited_client_fds(3, &got), -EINVAL);
	CHECK(fcntl(plain, F_GETFD) >= 0);
	CHECK(fcntl(fds[0], F_GETFD) == -1 && errno == EBADF);
	CHECK(fcntl(fds[1], F_GETFD) >= 0);
	fds[0] = -1;
	setenv(CONFIG_CLIENT_FDS_ENV, "-7", 1);
	CHECK_EQ(config_inherited_client_fds(1, &got), -EINVAL);
	close(plain);
	config_close_client_fds(fds, 3);
	config_free(&c);
}

/* Whether the file at path holds needle. */
static bool file_has(const char *path, const char *needle)
{
	char buf[65536];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* --log-outputs to files and several outputs, etcd's rules on their
 * combinations per logger, and the flags accepted with a warning. */
static void test_log_outputs(void)
{
	struct cetcd_config c;
	struct config_error err;
	char a[400], b[400], outs[900], bad[400];
	int dir = (int)(strrchr(log_path, '/') - log_path);
	int status;

	snprintf(a, sizeof(a), "%.*s/a.log", dir, log_path);
	snprintf(b, sizeof(b), "%.*s/b.log", dir, log_path);
	snprintf(outs, sizeof(outs), "--log-outputs=%s,%s", a, b);
	char *argv[] = { "cetcd", "--logger=zap", outs, "--log-package-levels=etcdmain=DEBUG",
			 "--enable-pprof", "--data-dir=/nonexistent/x", "--enable-v2", NULL };
	CHECK_EQ(config_load(&c, CONFIG_PROG_LAUNCHER, 7, argv, &status), 0);
	CHECK_EQ(status, 0);
	CHECK_EQ(c.log_outputs.count, 2);
	log_info("a line for every output");
	for (const char *p = a; p; p = p == a ? b : NULL) {
		CHECK(file_has(p, "a line for every output"));
		CHECK(file_has(p, "'--log-package-levels' flag has no effect"));
		CHECK(file_has(p, "etcdmain=DEBUG"));
		CHECK(file_has(p, "perf record"));
		CHECK(file_has(p, "'--enable-pprof' has no effect"));
		CHECK(file_has(p, "'--enable-v2' has no effect"));
	}
	config_free(&c);
	log_reset();
	CHECK(!file_has(log_path, "a line for every output"));

	/* appended to, not truncated */
	char *again[] = { "cetcd", "--logger=zap", outs, NULL };
	CHECK_EQ(config_load(&c, CONFIG_PROG_LAUNCHER, 3, again, &status), 0);
	log_info("a second run");
	CHECK(file_has(a, "a line for every output") && file_has(a, "a second run"));
	config_free(&c);
	log_reset();

	/* an output that does not open stops the start, naming it */
	snprintf(bad, sizeof(bad), "--log-outputs=%.*s/missing/x.log", dir, log_path);
	char *argv_bad[] = { "cetcd", "--logger=zap", bad, NULL };
	CHECK(config_load(&c, CONFIG_PROG_LAUNCHER, 3, argv_bad, &status) == -ENOENT);
	CHECK_EQ(status, 1);
	CHECK(log_capture_has("missing/x.log"));
	log_reset();

	/* etcd's rules: capnslog (3.4's default) takes one of default,
	 * stderr, stdout; zap takes "default" alone only */
	expect_fail(PARSE(&c, &err, "--log-outputs=/tmp/x.log"), &err, -EINVAL, 1,
		    "unknown log-output \"/tmp/x.log\"");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--log-outputs=stderr,stdout"), &err, -EINVAL, 1,
		    "--logger=capnslog supports only 1 value in '--log-outputs'");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--logger=zap", "--log-outputs=default,stdout"), &err, -EINVAL,
		    1, "multi logoutput for \"default\" is not supported yet");
	config_free(&c);
	CHECK_EQ(PARSE(&c, &err, "--logger=zap", "--log-outputs=stderr,stdout,/tmp/x.log"), 0);
	config_free(&c);
	/* the deprecated --log-output, when set, is the one that counts */
	expect_fail(PARSE(&c, &err, "--log-output=/tmp/y.log"), &err, -EINVAL, 1,
		    "unknown log-output \"/tmp/y.log\"");
	config_free(&c);
}

/* --auto-compaction-retention as etcd's parseCompactionRetention reads it. */
static void test_compaction_retention(void)
{
	static const struct {
		const char *mode, *retention;
		long long want;
	} ok[] = {
		{ "periodic", "0", 0 },
		{ "periodic", "1", 3600000000000LL },      /* hours */
		{ "periodic", "+2", 7200000000000LL },
		{ "periodic", "2s", 2000000000LL },        /* or a Go duration */
		{ "periodic", "1h30m", 5400000000000LL },
		{ "revision", "1000", 1000 },              /* revisions */
		{ "revision", "5m", 300000000000LL },      /* etcd's quirk: a duration's ns */
	};
	struct cetcd_config c;
	struct config_error err;
	char mode[64], ret[64];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(mode, sizeof(mode), "--auto-compaction-mode=%s", ok[i].mode);
		snprintf(ret, sizeof(ret), "--auto-compaction-retention=%s", ok[i].retention);
		CHECK_EQ(PARSE(&c, &err, mode, ret), 0);
		CHECK_EQ(c.auto_compaction_retention_value, ok[i].want);
		config_free(&c);
	}
	expect_fail(PARSE(&c, &err, "--auto-compaction-retention=soon"), &err, -EINVAL, 1,
		    "error parsing CompactionRetention: time: invalid duration");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--auto-compaction-retention=-1"), &err, -EINVAL, 1,
		    "error parsing CompactionRetention");
	config_free(&c);
	expect_fail(PARSE(&c, &err, "--auto-compaction-mode=daily"), &err, -EINVAL, 1,
		    "unknown auto-compaction-mode \"daily\"");
	config_free(&c);
}

int main(void)
{
	char dir[256];

	test_tmpdir(dir, sizeof(dir));
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	log_reset();

	test_defaults();
	test_defaults_match_etcd_help();
	test_syntax();
	test_env();
	test_refusals();
	test_peer_tls();
	test_client_tls();
	test_bad_values();
	test_scopes();
	test_runtime_dir();
	test_listen();
	test_client_fds();
	test_log_outputs();
	test_compaction_retention();
	log_capture_end();
	printf("test_config: ok\n");
	return 0;
}
