/*
 * Unit tests for config/file.c, --config-file: etcd 3.4's own sample
 * (tests/e2e/etcd.conf.yml.sample, from etcd v3.4.23) gives the values
 * its equivalent flags give; YAML's value forms per Go type; each kind of
 * mistake refused with the line that holds it; and etcd's rule that a
 * file makes the other flags and the ETCD_ variables not count.
 */
#include "shm_testlib.h"
#include "log_capture.h"

#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

#include "config/config_int.h"
#include "base/log/log.h"

#ifndef CETCD_SRC_DIR
#error "CETCD_SRC_DIR is set by tests/CMakeLists.txt"
#endif
#define SAMPLE CETCD_SRC_DIR "/tests/e2e/etcd.conf.yml.sample"

static char dir[256];
static char log_path[300];
static void log_reset(void)
{
	log_capture_reset(log_path);
}


static const struct config_flag *flag(const char *name)
{
	for (size_t i = 0; i < config_nflags; i++)
		if (strcmp(config_flags[i].name, name) == 0)
			return &config_flags[i];
	fprintf(stderr, "no flag %s\n", name);
	exit(1);
}

/* Writes text to a file in the scratch directory; its path into path. */
static void write_file(const char *name, const char *text, char *path, size_t cap)
{
	snprintf(path, cap, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	CHECK(f);
	CHECK(fputs(text, f) >= 0);
	CHECK(fclose(f) == 0);
}

/* Loads YAML text into a default configuration. */
static int load_text(struct cetcd_config *c, struct config_error *err, const char *text)
{
	CHECK_EQ(config_init(c), 0);
	err->msg[0] = '\0';
	return config_file_parse(c, "t.yml", text, strlen(text), err);
}

/* etcd's sample, and the same settings as flags (each value set by the
 * parser the command line uses), agree on every flag of the table. */
static void test_sample_equals_flags(void)
{
	static const char *const flags[][2] = {
		{ "name", "default" },
		{ "snapshot-count", "10000" },
		{ "heartbeat-interval", "100" },
		{ "election-timeout", "1000" },
		{ "quota-backend-bytes", "0" },
		{ "listen-peer-urls", "http://localhost:2380" },
		{ "listen-client-urls", "http://localhost:2379" },
		{ "max-snapshots", "5" },
		{ "max-wals", "5" },
		{ "initial-advertise-peer-urls", "http://localhost:2380" },
		{ "advertise-client-urls", "http://localhost:2379" },
		{ "discovery-fallback", "proxy" },
		{ "initial-cluster-token", "etcd-cluster" },
		{ "initial-cluster-state", "new" },
		{ "strict-reconfig-check", "false" },
		{ "enable-v2", "true" },
		{ "enable-pprof", "true" },
		{ "proxy", "off" },
		{ "proxy-failure-wait", "5000" },
		{ "proxy-refresh-interval", "30000" },
		{ "proxy-dial-timeout", "1000" },
		{ "proxy-write-timeout", "5000" },
		{ "proxy-read-timeout", "0" },
		{ "client-cert-auth", "false" },
		{ "auto-tls", "false" },
		{ "peer-client-cert-auth", "false" },
		{ "peer-auto-tls", "false" },
		{ "debug", "false" },
		{ "logger", "zap" },
		{ "log-outputs", "stderr" },
		{ "force-new-cluster", "false" },
		{ "auto-compaction-mode", "periodic" },
		{ "auto-compaction-retention", "1" },
	};
	struct cetcd_config a, b;
	struct config_error err;
	char why[256];
	size_t differ = 0;

	CHECK_EQ(config_init(&a), 0);
	int rc = config_file_load(&a, SAMPLE, &err);
	if (rc) {
		fprintf(stderr, "%s: %s\n", SAMPLE, err.msg);
		exit(1);
	}
	CHECK_EQ(config_init(&b), 0);
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		CHECK_EQ(config_set(&b, flag(flags[i][0]), flags[i][1], why, sizeof(why)), 0);
	for (size_t i = 0; i < config_nflags; i++) {
		if (config_equal(&a, &b, &config_flags[i]))
			continue;
		fprintf(stderr, "--%s differs between the sample and its flags\n",
			config_flags[i].name);
		differ++;
	}
	CHECK_EQ(differ, 0);
	/* and they are not the defaults: the file was read */
	CHECK_EQ(a.snapshot_count, 10000);
	CHECK(a.enable_pprof && a.enable_v2 && !a.strict_reconfig_check);
	CHECK(strcmp(a.auto_compaction_retention, "1") == 0);
	CHECK(a.log_outputs.count == 1 && strcmp(a.log_outputs.v[0], "stderr") == 0);
	CHECK(a.source[flag("snapshot-count") - config_flags] == CONFIG_FROM_FILE);
	/* keys left empty (null) keep the defaults */
	CHECK(strcmp(a.initial_cluster, "default=http://localhost:2380") == 0);
	CHECK(a.cors.count == 1 && strcmp(a.cors.v[0], "*") == 0);
	CHECK(a.data_dir[0] == '\0');
	config_free(&a);
	config_free(&b);
}

/* The value forms each Go type takes. */
static void test_value_forms(void)
{
	struct cetcd_config c;
	struct config_error err;

	CHECK_EQ(load_text(&c, &err,
			   "Name: 12\n"                      /* a number for a string; any case */
			   "auto-compaction-retention: 2\n"  /* plain number, string field */
			   "enable-v2: yes\n"                /* YAML 1.1 boolean */
			   "force-new-cluster: off\n"
			   "max-txn-ops: 0x10\n"             /* Go's base prefixes */
			   "grpc-keepalive-timeout: 1500000000\n" /* nanoseconds, as etcd */
			   "experimental-corrupt-check-time: 3m\n" /* and Go's text */
			   "cipher-suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,\n"
			   "  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\n"
			   "log-outputs:\n  - stdout\n  - /tmp/x.log\n"
			   "listen-client-urls: http://127.0.0.1:1,http://127.0.0.1:2\n"
			   "peer-transport-security:\n  cert-file: /p.crt\n  client-cert-auth: true\n"
			   "client-transport-security:\n  key-file: /c.key\n"
			   "initial-cluster-state: ''\n"
			   "auth-token: jwt,sign-method=RS256,pub-key=/k.pub,ttl=10m\n"
			   "auth-token-ttl: 60\n"),
		 0);
	CHECK(strcmp(c.auth_token, "jwt,sign-method=RS256,pub-key=/k.pub,ttl=10m") == 0);
	CHECK_EQ(c.auth_token_ttl_s, 60);
	CHECK(strcmp(c.name, "12") == 0);
	CHECK(strcmp(c.auto_compaction_retention, "2") == 0);
	CHECK(c.enable_v2 && !c.force_new_cluster);
	CHECK_EQ(c.max_txn_ops, 16);
	CHECK_EQ(c.grpc_keepalive_timeout_ns, 1500000000LL);
	CHECK_EQ(c.experimental_corrupt_check_time_ns, 180000000000LL);
	CHECK_EQ(c.cipher_suites.count, 2);
	CHECK(strcmp(c.cipher_suites.v[1], "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384") == 0);
	CHECK_EQ(c.log_outputs.count, 2);
	CHECK_EQ(c.listen_client_urls.count, 2);
	CHECK(strcmp(c.peer_cert_file, "/p.crt") == 0 && c.peer_client_cert_auth);
	CHECK(strcmp(c.key_file, "/c.key") == 0 && c.cert_file[0] == '\0');
	CHECK(strcmp(c.initial_cluster_state, "new") == 0); /* etcd: "" means new */
	config_free(&c);

	/* a plain scalar for a string field reads as sigs.k8s.io/yaml turns
	 * what yaml.v2 resolves into Go text: etcd's sample quotes 'off' */
	CHECK_EQ(load_text(&c, &err,
			   "name: on\n"
			   "initial-cluster-token: 1.50\n"
			   "auto-compaction-retention: 0x1_0\n"
			   "discovery-srv: 1e7\n"
			   "discovery-proxy: '0x10'\n"
			   "log-outputs: [off]\n"),
		 0);
	CHECK(strcmp(c.name, "true") == 0);
	CHECK(strcmp(c.initial_cluster_token, "1.5") == 0);
	CHECK(strcmp(c.auto_compaction_retention, "16") == 0);
	CHECK(strcmp(c.discovery_srv, "1e+07") == 0);
	CHECK(strcmp(c.discovery_proxy, "0x10") == 0);
	CHECK(c.log_outputs.count == 1 && strcmp(c.log_outputs.v[0], "false") == 0);
	config_free(&c);
	CHECK_EQ(load_text(&c, &err, "auth-token-ttl: -5\n"), -EINVAL);
	CHECK(strstr(err.msg, "line 1: key auth-token-ttl wants an unsigned integer, got \"-5\""));
	config_free(&c);
	CHECK_EQ(load_text(&c, &err, "proxy: off\n"), -EINVAL);
	CHECK(strstr(err.msg, "line 1: invalid value \"false\" for key proxy"));
	config_free(&c);

	/* yaml.v2's merge keys: the mapping's own keys first, then earlier
	 * merged mappings before later ones */
	CHECK_EQ(load_text(&c, &err,
			   "client-transport-security: &tls\n  cert-file: /c.crt\n  key-file: /c.key\n"
			   "peer-transport-security:\n  <<: *tls\n  key-file: /p.key\n"
			   "<<: [{max-wals: 3, name: merged}, {max-wals: 4, max-snapshots: 2}]\n"
			   "name: own\n"),
		 0);
	CHECK(strcmp(c.peer_cert_file, "/c.crt") == 0 && strcmp(c.peer_key_file, "/p.key") == 0);
	CHECK(strcmp(c.cert_file, "/c.crt") == 0);
	CHECK_EQ(c.max_wals, 3);
	CHECK_EQ(c.max_snapshots, 2);
	CHECK(strcmp(c.name, "own") == 0);
	config_free(&c);

	/* an empty file is etcd's defaults */
	CHECK_EQ(load_text(&c, &err, ""), 0);
	CHECK_EQ(c.snapshot_count, 100000);
	config_free(&c);
	CHECK_EQ(load_text(&c, &err, "# nothing\n"), 0);
	config_free(&c);
}

/* Each kind of mistake, with the line that holds it. */
static void test_mistakes(void)
{
	static const struct {
		const char *text, *want;
	} cases[] = {
		{ "name: a\nsnapshot-cont: 5\n", "line 2: unknown key snapshot-cont" },
		{ "name: a\n\nsnapshot-count: lots\n",
		  "line 3: key snapshot-count wants an unsigned integer, got \"lots\"" },
		{ "snapshot-count: '5'\n", "line 1: key snapshot-count wants an unsigned integer" },
		{ "snapshot-count: -5\n", "line 1: key snapshot-count wants an unsigned integer" },
		{ "enable-v2: maybe\n", "line 1: key enable-v2 wants a boolean" },
		{ "enable-v2: \"true\"\n", "line 1: key enable-v2 wants a boolean" },
		{ "name: a\nname: b\n", "line 2: key name is given twice (first at line 1)" },
		{ "name: a\nNAME: b\n", "line 2: key NAME is given twice (first at line 1)" },
		{ "a:\n  - b\n c: d\n", "line 3" },
		{ "name: [a\n", "bad YAML" },
		{ "name: 'a\n", "bad YAML" },
		{ "name: a\n\tdata-dir: b\n", "bad YAML" },
		{ "listen-peer-urls: http://a:1,ftp://b:2\n",
		  "line 1: invalid value \"http://a:1,ftp://b:2\" for key listen-peer-urls" },
		{ "listen-client-urls: 127.0.0.1:2379\n", "line 1: invalid value" },
		{ "\nlog-outputs: stderr\n", "line 2: key log-outputs wants a list, such as [stderr]" },
		{ "log-outputs: [a, [b]]\n", "line 1: key log-outputs wants a list of strings" },
		{ "log-outputs: ['a,b']\n", "has a comma" },
		{ "name: [a]\n", "line 1: key name wants a string, not a list" },
		{ "cert-file: /x\n", "unknown key cert-file: in the file it goes under client-transport-security" },
		{ "peer-key-file: /x\n", "goes under peer-transport-security as key-file" },
		{ "peer-transport-security:\n  allowed-cn: x\n",
		  "line 2: unknown key peer-transport-security.allowed-cn" },
		{ "peer-transport-security: x\n", "line 1: key peer-transport-security wants a mapping" },
		{ "client-transport-security:\n  auto-tls: true\nclient-transport-security: {}\n",
		  "line 3: key client-transport-security is given twice" },
		{ "client-transport-security:\n  cert-file: a\n  cert-file: b\n",
		  "line 3: key client-transport-security.cert-file is given twice" },
		{ "- name\n", "line 1: the file must be a mapping" },
		{ "name: a\n---\nname: b\n", "line 3: a second YAML document" },
		{ "config-file: x.yml\n", "unknown key config-file" },
		{ "gateway-index: 2\n", "unknown key gateway-index" },
		{ "cluster-active-size: 2\n", "unknown key cluster-active-size" },
		{ "initial-cluster-state: maybe\n", "line 1: invalid value \"maybe\" for key initial-cluster-state" },
		{ "backend-batch-interval: soon\n", "line 1: invalid value \"soon\" for key backend-batch-interval" },
		{ "? [a]\n: b\n", "line 1: a key must be a plain name, not a list" },
		{ "<<: 5\n", "line 1: a merge key (<<) wants a mapping or a list of mappings" },
		{ "name: a\n<<: {bogus: 1}\n", "line 2: unknown key bogus" },
		{ "peer-transport-security:\n  <<: {cert-file: a, crl-file: b}\n",
		  "line 2: unknown key peer-transport-security.crl-file" },
	};
	struct cetcd_config c;
	struct config_error err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = load_text(&c, &err, cases[i].text);
		if (rc != -EINVAL || err.exit_status != 1 || !strstr(err.msg, cases[i].want) ||
		    !strstr(err.msg, "config file t.yml: line ")) {
			fprintf(stderr, "case %zu: want \"%s\", got rc %d: %s\n", i, cases[i].want, rc,
				err.msg);
			exit(1);
		}
		config_free(&c);
	}
	printf("  %zu mistakes refused with their line\n", sizeof(cases) / sizeof(cases[0]));
}

/* Through config_parse: etcd's rule for a file, and the program-only flags. */
static void test_parse_rule(void)
{
	struct cetcd_config c;
	struct config_error err;
	char path[400], arg[420], env_arg[420], missing[420];

	write_file("a.yml", "name: filed\nsnapshot-count: 77\nlogger: zap\ngateways: 2\n", path,
		   sizeof(path));
	snprintf(arg, sizeof(arg), "--config-file=%s", path);
	char *argv[] = { "cetcd", "--snapshot-count=5", arg, "--name=flagged", "--gateway-index=3",
			 "--latest-cache-mib=8", NULL };
	char *env[] = { "ETCD_MAX_WALS=9", "ETCD_NO_SUCH=1", "ETCD_RUNTIME_DIR=/run/x",
			"ETCD_GATEWAYS=5", NULL };

	log_reset();
	CHECK_EQ(config_init(&c), 0);
	int rc = config_parse(&c, CONFIG_PROG_GATEWAYD, 6, argv, env, &err);
	if (rc) {
		fprintf(stderr, "parse: %s\n", err.msg);
		exit(1);
	}
	CHECK(strcmp(c.name, "filed") == 0);
	CHECK_EQ(c.snapshot_count, 77);
	CHECK_EQ(c.max_wals, 5);       /* the variable does not count */
	CHECK_EQ(c.gateway_index, 3);  /* the launcher's flag to a gatewayd does */
	/* cetcd's own flags and variables count, under the file's keys */
	CHECK_EQ(c.latest_cache_mib, 8);
	CHECK(strcmp(c.runtime_dir, "/run/x") == 0);
	CHECK_EQ(c.gateways, 2);       /* the file's */
	CHECK(strcmp(c.config_file, path) == 0);
	CHECK(strcmp(c.data_dir, "filed.etcd") == 0);
	CHECK(c.file_ignored[flag("snapshot-count") - config_flags]);
	CHECK(c.file_ignored[flag("name") - config_flags]);
	CHECK(!c.file_ignored[flag("gateway-index") - config_flags]);
	CHECK(!c.file_ignored[flag("latest-cache-mib") - config_flags]);
	CHECK(!log_capture_has("unrecognized environment variable"));
	config_free(&c);

	/* logged once the log goes where the file says (config_load) */
	int status;
	char text[600], lpath[400], larg[420];
	snprintf(text, sizeof(text), "logger: zap\nlog-outputs: [%s]\n", log_path);
	write_file("l.yml", text, lpath, sizeof(lpath));
	snprintf(larg, sizeof(larg), "--config-file=%s", lpath);
	char *argv_load[] = { "cetcd", larg, "--snapshot-count=5", "--name=flagged", NULL };
	log_reset();
	log_set_fd(2);
	CHECK_EQ(config_load(&c, CONFIG_PROG_LAUNCHER, 4, argv_load, &status), 0);
	log_set_fd(log_capture_fd); /* as it was: the file config_load wrote to */
	CHECK(log_capture_has("loaded server configuration, other configuration command line flags and environment variables will be ignored if provided"));
	CHECK(log_capture_has("\"msg\":\"flag ignored: a configuration file is given\",\"flag\":\"snapshot-count\""));
	CHECK(log_capture_has("\"flag\":\"name\""));
	config_free(&c);

	/* ETCD_CONFIG_FILE, as etcd reads it */
	snprintf(env_arg, sizeof(env_arg), "ETCD_CONFIG_FILE=%s", path);
	char *env2[] = { env_arg, "ETCD_SNAPSHOT_COUNT=4", NULL };
	char *argv2[] = { "cetcd", NULL };
	CHECK_EQ(config_init(&c), 0);
	CHECK_EQ(config_parse(&c, CONFIG_PROG_LAUNCHER, 1, argv2, env2, &err), 0);
	CHECK_EQ(c.snapshot_count, 77);
	CHECK(c.source[flag("config-file") - config_flags] == CONFIG_FROM_ENV);
	config_free(&c);

	/* a file whose values cetcd refuses, and a mistake, exit 1 or 2 */
	write_file("b.yml", "proxy: 'on'\n", path, sizeof(path));
	snprintf(arg, sizeof(arg), "--config-file=%s", path);
	char *argv3[] = { "cetcd", arg, NULL };
	CHECK_EQ(config_init(&c), 0);
	rc = config_parse(&c, CONFIG_PROG_LAUNCHER, 2, argv3, env, &err);
	CHECK(rc == -ENOTSUP && err.exit_status == 2);
	CHECK(strstr(err.msg, "--proxy=on is not supported"));
	CHECK(strstr(err.msg, "remove the key from the configuration file"));
	config_free(&c);
	write_file("c.yml", "name: a\nbogus: 1\n", path, sizeof(path));
	snprintf(arg, sizeof(arg), "--config-file=%s", path);
	CHECK_EQ(config_init(&c), 0);
	rc = config_parse(&c, CONFIG_PROG_LAUNCHER, 2, argv3, env, &err);
	CHECK(rc == -EINVAL && err.exit_status == 1);
	CHECK(strstr(err.msg, "c.yml: line 2: unknown key bogus"));
	config_free(&c);
	snprintf(missing, sizeof(missing), "--config-file=%s/none.yml", dir);
	char *argv4[] = { "cetcd", missing, NULL };
	CHECK_EQ(config_init(&c), 0);
	rc = config_parse(&c, CONFIG_PROG_LAUNCHER, 2, argv4, env, &err);
	CHECK(rc == -ENOENT && err.exit_status == 1 && strstr(err.msg, "none.yml"));
	config_free(&c);
	/* a malformed command line is still one */
	char *argv5[] = { "cetcd", arg, "--no-such-flag", NULL };
	CHECK_EQ(config_init(&c), 0);
	rc = config_parse(&c, CONFIG_PROG_LAUNCHER, 3, argv5, env, &err);
	CHECK(rc == -EINVAL && err.exit_status == 2);
	config_free(&c);
}

int main(void)
{
	test_tmpdir(dir, sizeof(dir));
	snprintf(log_path, sizeof(log_path), "%s/log", dir);
	log_reset();

	test_sample_equals_flags();
	test_value_forms();
	test_mistakes();
	test_parse_rule();
	log_capture_end();
	printf("test_file: ok\n");
	return 0;
}
