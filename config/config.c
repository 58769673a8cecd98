/* The member configuration (see config.h): flags from the command line
 * and ETCD_ variables set into struct cetcd_config, defaults, etcd's
 * validation and bootstrap checks, derived values, --help and --version.
 *
 * Behaviour follows etcd 3.4's etcdmain/config.go, embed/config.go and
 * pkg/flags, which use Go's flag package; error messages keep their
 * wording so that operators (and scripts) see what etcd would print.
 */
#include <arpa/inet.h>
#include <ctype.h>
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

#include "shm/region.h"
#include "base/tls/tls.h"

extern char **environ;

void config_errorf(struct config_error *err, int status, const char *fmt, ...)
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

const void *config_cfield(const struct cetcd_config *c, const struct config_flag *f)
{
	return (const char *)c + f->off;
}

static const struct config_flag *config_lookup(const char *name, size_t len, unsigned scope)
{
	for (size_t i = 0; i < config_nflags; i++) {
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
int config_set(struct cetcd_config *c, const struct config_flag *f, const char *text,
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
bool config_equal(const struct cetcd_config *a, const struct cetcd_config *b,
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
	for (size_t i = 0; i < config_nflags; i++) {
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
	for (size_t i = 0; i < config_nflags; i++) {
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
struct cetcd_config *config_defaults(void)
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

void config_defaults_free(struct cetcd_config *d)
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

/* Whether path can be read; otherwise Go's text for the failed open. */
static int config_check_readable(const char *path, struct config_error *err)
{
	if (path[0] == '\0' || access(path, R_OK) == 0)
		return 0;
	char text[128];
	/* Go's error text is in lower case */
	snprintf(text, sizeof(text), "%s", strerror(errno));
	text[0] = (char)tolower((unsigned char)text[0]);
	config_errorf(err, 1, "open %s: %s", path, text);
	return -EINVAL;
}

/* One port's TLS flags, as config_validate_tls checks them. */
struct config_tls_flags {
	bool peer;
	const char *cert, *key, *ca, *allowed_cn, *allowed_hostname;
	bool auto_tls;
	const struct config_urls *listen;
};

/* One port's TLS flags, checked as etcd's configurePeerListeners and
 * configureClientListeners, its TLS listeners and its transports find
 * them at start-up, so that the launcher refuses them before any daemon
 * starts. */
static int config_validate_tls(const struct config_tls_flags *f, struct config_error *err)
{
	bool empty = f->cert[0] == '\0' && f->key[0] == '\0';
	int rc;

	if (!empty && (f->cert[0] == '\0' || f->key[0] == '\0')) {
		config_errorf(err, 1, "KeyFile and CertFile must both be present[key: %s, cert: %s]",
			      f->key, f->cert);
		return -EINVAL;
	}
	if (f->allowed_cn[0] && f->allowed_hostname[0]) {
		config_errorf(err, 1,
			      "AllowedCN and AllowedHostname are mutually exclusive (cn=\"%s\", hostname=\"%s\")",
			      f->allowed_cn, f->allowed_hostname);
		return -EINVAL;
	}
	if ((rc = config_check_readable(f->cert, err)) || (rc = config_check_readable(f->key, err)) ||
	    (rc = config_check_readable(f->ca, err)))
		return rc;
	/* auto TLS makes the certificate before the listeners are checked */
	for (size_t i = 0; i < f->listen->count && empty && !f->auto_tls; i++) {
		const struct config_url *u = &f->listen->v[i];
		const char *host = strcmp(u->host, "localhost") ? u->host : "127.0.0.1";
		if (strcmp(u->scheme, "https") != 0 && strcmp(u->scheme, "unixs") != 0)
			continue;
		if (f->peer)
			config_errorf(err, 1,
				      "cannot listen on TLS for %s%s%s:%s: KeyFile and CertFile are not presented",
				      strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "",
				      u->port);
		else
			config_errorf(err, 1,
				      "TLS key/cert (--cert-file, --key-file) must be provided for client url %s with HTTPS scheme",
				      u->text);
		return -EINVAL;
	}
	return 0;
}

/* The TLS flags of both ports and --cipher-suites. */
static int config_validate_tls_all(const struct cetcd_config *c, struct config_error *err)
{
	const struct config_tls_flags peer = {
		.peer = true, .cert = c->peer_cert_file, .key = c->peer_key_file,
		.ca = c->peer_trusted_ca_file, .allowed_cn = c->peer_cert_allowed_cn,
		.allowed_hostname = c->peer_cert_allowed_hostname, .auto_tls = c->peer_auto_tls,
		.listen = &c->listen_peer_urls,
	};
	const struct config_tls_flags client = {
		.peer = false, .cert = c->cert_file, .key = c->key_file, .ca = c->trusted_ca_file,
		.allowed_cn = "", .allowed_hostname = c->client_cert_allowed_hostname,
		.auto_tls = c->auto_tls, .listen = &c->listen_client_urls,
	};
	int rc;

	for (size_t i = 0; i < c->cipher_suites.count; i++) {
		const char *name;
		if (tls_cipher_suite(c->cipher_suites.v[i], &name)) {
			config_errorf(err, 1, "unexpected TLS cipher suite \"%s\"",
				      c->cipher_suites.v[i]);
			return -EINVAL;
		}
	}
	/* etcd configures the peer listeners first */
	if ((rc = config_validate_tls(&peer, err)) || (rc = config_validate_tls(&client, err)))
		return rc;
	return 0;
}

/* The log outputs in effect: --log-output (deprecated) when set, as
 * etcd 3.4 takes it over --log-outputs, else --log-outputs. */
static const struct config_strings *config_log_outputs(const struct cetcd_config *c)
{
	return config_is_set(c, "log-output") ? &c->log_output : &c->log_outputs;
}

/* etcd's setupLogging rules for the outputs: capnslog (3.4's default
 * logger) writes to one of default, stderr and stdout; zap to any set of
 * stderr, stdout and files, with "default" only alone. cetcd writes zap's
 * lines either way but keeps what each logger setting accepts. */
static int config_validate_log_outputs(const struct cetcd_config *c, struct config_error *err)
{
	const struct config_strings *outs = config_log_outputs(c);
	char list[256] = "";
	size_t n = 0;

	for (size_t i = 0; i < outs->count && n < sizeof(list); i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s\"%s\"", i ? " " : "",
				      outs->v[i]);
	if (strcmp(c->logger, "capnslog") == 0) {
		if (outs->count != 1) {
			config_errorf(err, 1,
				      "--logger=capnslog supports only 1 value in '--log-outputs', got [%s]",
				      list);
			return -EINVAL;
		}
		const char *o = outs->v[0];
		if (strcmp(o, "default") && strcmp(o, "stderr") && strcmp(o, "stdout")) {
			config_errorf(err, 1,
				      "unknown log-output \"%s\" (only supports \"default\", \"stderr\", \"stdout\")",
				      o);
			return -EINVAL;
		}
		return 0;
	}
	for (size_t i = 0; i < outs->count; i++) {
		if (outs->count > 1 && strcmp(outs->v[i], "default") == 0) {
			config_errorf(err, 1, "multi logoutput for \"default\" is not supported yet");
			return -EINVAL;
		}
		if (outs->v[i][0] == '\0') {
			config_errorf(err, 1, "an empty '--log-outputs' value names no output");
			return -EINVAL;
		}
	}
	if (outs->count > LOG_MAX_FDS) {
		config_errorf(err, 1, "--log-outputs names %zu outputs; cetcd writes to at most %d",
			      outs->count, LOG_MAX_FDS);
		return -EINVAL;
	}
	return 0;
}

/* etcd's parseCompactionRetention: a decimal count (hours in periodic
 * mode, revisions in revision mode; nothing in another mode) or else a Go
 * duration, whatever the mode (so "5m" in revision mode is 3e11
 * revisions, as in etcd). */
static int config_compaction_retention(struct cetcd_config *c, struct config_error *err)
{
	const char *s = c->auto_compaction_retention[0] ? c->auto_compaction_retention : "0";
	const char *d = s + (*s == '+' || *s == '-');
	char why[256];
	bool digits = *d != '\0';

	for (const char *p = d; *p; p++)
		digits &= *p >= '0' && *p <= '9';
	if (digits && *s != '-' && strlen(d) <= 18) {
		int64_t h = strtoll(d, NULL, 10);
		c->auto_compaction_retention_value = 0;
		if (strcmp(c->auto_compaction_mode, "revision") == 0)
			c->auto_compaction_retention_value = h;
		else if (strcmp(c->auto_compaction_mode, "periodic") == 0) {
			if (h > INT64_MAX / 3600000000000LL) {
				config_errorf(err, 1, "auto-compaction-retention %s is too long", s);
				return -EINVAL;
			}
			c->auto_compaction_retention_value = h * 3600000000000LL;
		}
		return 0;
	}
	if (config_parse_duration(s, &c->auto_compaction_retention_value, why, sizeof(why))) {
		config_errorf(err, 1, "error parsing CompactionRetention: %s", why);
		return -EINVAL;
	}
	if (c->auto_compaction_retention_value < 0) {
		config_errorf(err, 1, "auto-compaction-retention %s is negative", s);
		return -EINVAL;
	}
	return 0;
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
	rc = config_validate_log_outputs(c, err);
	if (rc)
		return rc;
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
	rc = config_compaction_retention(c, err);
	if (rc)
		return rc;
	if (c->experimental_enable_lease_checkpoint_persist &&
	    !c->experimental_enable_lease_checkpoint) {
		config_errorf(err, 1,
			      "setting experimental-enable-lease-checkpoint-persist requires experimental-enable-lease-checkpoint");
		return -EINVAL;
	}

	rc = config_validate_tls_all(c, err);
	if (rc)
		return rc;

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
	if (c->raft_log_mib == 0 || c->raft_log_mib > CONFIG_MAX_RAFT_LOG_MIB) {
		config_errorf(err, 1, "--raft-log-mib=%llu is out of range (1 to %u)",
			      (unsigned long long)c->raft_log_mib, CONFIG_MAX_RAFT_LOG_MIB);
		return -EINVAL;
	}
	if (c->max_request_bytes == 0 || c->max_request_bytes > SHM_MAX_REQUEST_BYTES_LIMIT) {
		config_errorf(err, 1, "--max-request-bytes=%llu is out of range (1 to %llu)",
			      (unsigned long long)c->max_request_bytes,
			      (unsigned long long)SHM_MAX_REQUEST_BYTES_LIMIT);
		return -EINVAL;
	}
	/* etcd's ticker panics on a negative interval, and its compaction
	 * never ends with a negative limit */
	if (c->backend_batch_interval_ns < 0 || c->experimental_compaction_batch_limit < 0) {
		config_errorf(err, 1, "--%s must not be negative",
			      c->backend_batch_interval_ns < 0 ? "backend-batch-interval"
							       : "experimental-compaction-batch-limit");
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
	if (c->gateways == 0)
		c->gateways = config_default_gateways(sysconf(_SC_NPROCESSORS_ONLN));
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

uint32_t config_default_gateways(long ncpu)
{
	/* On two CPUs raftd, stored and the clients of the machine want the
	 * second one: a gateway there only competes with them, and one
	 * event's watchers wait for two processes to wake instead of one. */
	if (ncpu <= 2)
		return 1;
	return ncpu > (long)CONFIG_MAX_GATEWAYS ? CONFIG_MAX_GATEWAYS : (uint32_t)ncpu;
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

	for (size_t i = 0; i < config_nflags; i++) {
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
		for (size_t i = 0; i < config_nflags && !known; i++) {
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

/* The value of f's ETCD_ variable in envp (the last one given), or NULL
 * when unset or empty; its name into key. */
static const char *config_env_value(const struct config_flag *f, char *const envp[], char *key,
				    size_t keylen)
{
	const char *val = NULL;

	config_env_name(f, key, keylen);
	size_t klen = strlen(key);
	for (char *const *e = envp; *e; e++)
		if (strncmp(*e, key, klen) == 0 && (*e)[klen] == '=' && (*e)[klen + 1] != '\0')
			val = *e + klen + 1;
	return val;
}

/* etcd reads ETCD_CONFIG_FILE on its own, before it decides whether the
 * other variables count (they do not when a file is given). */
static int config_file_from_env(struct cetcd_config *c, unsigned scope, char *const envp[],
				struct config_error *err)
{
	const struct config_flag *f = config_lookup("config-file", strlen("config-file"), scope);
	char key[96], why[128];
	const char *val;

	if (!f || c->source[config_index(f)] != CONFIG_FROM_DEFAULT ||
	    !(val = config_env_value(f, envp, key, sizeof(key))))
		return 0;
	if (config_set(c, f, val, why, sizeof(why))) {
		config_errorf(err, 1, "out of memory");
		return -ENOMEM;
	}
	c->source[config_index(f)] = CONFIG_FROM_ENV;
	return 0;
}

/* The bytes a flag's field takes, to move it between two configurations. */
static size_t config_field_size(const struct config_flag *f)
{
	switch (f->type) {
	case CT_STRING:
	case CT_CHOICE: return sizeof(char *);
	case CT_BOOL: return sizeof(bool);
	case CT_UINT32: return sizeof(uint32_t);
	case CT_UINT:
	case CT_INT:
	case CT_DURATION: return sizeof(int64_t);
	case CT_URLS: return sizeof(struct config_urls);
	case CT_URLS_STAR:
	case CT_USTRINGS:
	case CT_STRINGS: return sizeof(struct config_strings);
	case CT_IGNORED: return 0;
	}
	return 0;
}

/* etcd's rule for --config-file: the file's keys over the defaults, and
 * etcd's other flags and ETCD_ variables ignored (logged, as etcd logs
 * it). What still counts: the file's path; the flags that belong to one
 * program (the launcher's --gateway-index to a gatewayd, --prepare-only,
 * --print-gateways), which no file sets; and cetcd's own flags (etcd has
 * none such to ignore), from the command line or their ETCD_ variables,
 * under what the file sets (the systemd units set ETCD_RUNTIME_DIR). */
static int config_from_file(struct cetcd_config *c, unsigned scope, char *const envp[],
			    struct config_error *err)
{
	struct cetcd_config *d = config_defaults();
	int rc;

	if (!d) {
		config_errorf(err, 1, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < config_nflags; i++) {
		const struct config_flag *f = &config_flags[i];
		bool keep = f->no_env || f->off == offsetof(struct cetcd_config, config_file) ||
			    config_flag_is_cetcds(f);
		if (c->source[i] == CONFIG_FROM_DEFAULT)
			continue;
		if (!keep) {
			d->file_ignored[i] = true;
			continue;
		}
		char tmp[sizeof(struct config_urls) > sizeof(struct config_strings)
				 ? sizeof(struct config_urls)
				 : sizeof(struct config_strings)];
		size_t n = config_field_size(f);
		memcpy(tmp, config_field(d, f), n);
		memcpy(config_field(d, f), config_field(c, f), n);
		memcpy(config_field(c, f), tmp, n);
		d->source[i] = c->source[i];
	}
	config_free(c);
	*c = *d;
	free(d);
	for (size_t i = 0; i < config_nflags; i++) {
		const struct config_flag *f = &config_flags[i];
		char key[96], why[256];
		const char *val;
		if (!config_flag_is_cetcds(f) || f->no_env || !(f->scope & scope) ||
		    c->source[i] != CONFIG_FROM_DEFAULT ||
		    !(val = config_env_value(f, envp, key, sizeof(key))))
			continue;
		rc = config_set(c, f, val, why, sizeof(why));
		if (rc) {
			config_errorf(err, 1, "invalid value \"%s\" for %s: %s", val, key, why);
			return rc;
		}
		c->source[i] = CONFIG_FROM_ENV;
	}
	return config_file_load(c, c->config_file, err);
}

/* etcd's line for a loaded file, and a warning per flag it made ignored:
 * logged where the file's log outputs say, as etcd logs them. */
static void config_log_file_rule(const struct cetcd_config *c)
{
	if (c->config_file[0] == '\0')
		return;
	for (size_t i = 0; i < config_nflags; i++)
		if (c->file_ignored[i])
			log_warn("flag ignored: a configuration file is given",
				 LOG_STR("flag", config_flags[i].name), LOG_STR("path", c->config_file));
	log_info("loaded server configuration, other configuration command line flags and environment variables will be ignored if provided",
		 LOG_STR("path", c->config_file));
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
	if (!envp)
		envp = environ;
	rc = config_file_from_env(c, scope, envp, err);
	if (rc)
		return rc;
	if (c->config_file[0] != '\0') {
		rc = config_from_file(c, scope, envp, err);
	} else {
		rc = config_parse_env(c, scope, envp, err);
		/* etcd: listening on chosen client URLs without advertising
		 * any is an error, not a fallback to the default advertise
		 * URL (its file keeps the default) */
		if (rc == 0 && config_is_set(c, "listen-client-urls") &&
		    !config_is_set(c, "advertise-client-urls"))
			config_urls_free(&c->advertise_client_urls);
	}
	if (rc)
		return rc;
	rc = config_check_supported(c, err);
	if (rc)
		return rc;
	/* etcd: discovery replaces the default initial cluster */
	if (c->discovery_srv[0] && !config_is_set(c, "initial-cluster")) {
		free(c->initial_cluster);
		c->initial_cluster = strdup("");
		if (!c->initial_cluster) {
			config_errorf(err, 1, "out of memory");
			return -ENOMEM;
		}
	}
	rc = config_validate(c, err);
	if (rc)
		return rc;
	rc = config_derive(c, err);
	if (rc)
		return rc;
	if (c->discovery_srv[0] && (rc = config_srv_cluster(c, err)) != 0)
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
	fprintf(out, "\n  %s --config-file\n    Path to the server configuration file (etcd's YAML,"
		     " as etcd.conf.yml.sample).\n    Note that if a configuration file is provided,"
		     " other command line flags\n    and environment variables will be ignored.\n", name);
	fprintf(out, "\nEvery flag can also be set by its ETCD_ environment variable, e.g.\n"
		     "ETCD_DATA_DIR for --data-dir. Flags marked [default only] belong to\n"
		     "features not built yet: any other value is refused.\n");
	for (size_t i = 0; i < config_nflags; i++) {
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

/* Applies --log-level, --debug, --logger and --log-outputs (files opened
 * for appending, created as zap creates them, and kept open for the
 * process's life), then warns of the flags that are accepted without
 * effect. Returns 0, or the negative errno of a file that does not open
 * (err says which). */
static int config_apply_logging(const struct cetcd_config *c, struct config_error *err)
{
	const struct config_strings *outs = config_log_outputs(c);
	int fds[LOG_MAX_FDS];
	size_t n = 0;

	for (size_t i = 0; i < outs->count && n < LOG_MAX_FDS; i++) {
		const char *o = outs->v[i];
		int fd;
		if (!strcmp(o, "default") || !strcmp(o, "stderr"))
			fd = 2;
		else if (!strcmp(o, "stdout"))
			fd = 1;
		else
			fd = open(o, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
		if (fd < 0) {
			int rc = -errno;
			config_errorf(err, 1, "open %s: %s", o, strerror(errno));
			for (size_t j = 0; j < n; j++)
				if (fds[j] > 2)
					close(fds[j]);
			return rc;
		}
		bool dup = false;
		for (size_t j = 0; j < n; j++)
			dup |= fds[j] == fd;
		if (!dup)
			fds[n++] = fd;
	}
	if (n > 0)
		log_set_fds(fds, n);
	log_set_level(c->log_level);
	config_log_file_rule(c);
	if (config_is_set(c, "logger") && strcmp(c->logger, "capnslog") == 0)
		log_warn("'--logger=capnslog' is deprecated; cetcd writes zap's JSON lines anyway, use '--logger=zap'");
	if (c->debug)
		log_warn("deprecated '--debug' flag is set (use '--log-level=debug' instead)");
	if (c->log_package_levels[0])
		log_warn("deprecated '--log-package-levels' flag has no effect: cetcd has one level for all its lines; use '--log-level'",
			 LOG_STR("log-package-levels", c->log_package_levels));
	if (c->enable_pprof)
		log_warn("'--enable-pprof' has no effect: cetcd is no Go program and serves no /debug/pprof/; profile its processes with perf instead (perf record -g -p <pid of raftd, stored or a gatewayd>)");
	if (c->enable_v2)
		log_warn("'--enable-v2' has no effect: cetcd serves etcd's v3 API only; v2 requests are not served");
	return 0;
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
	} else if (rc == 0 && c->print_gateways) {
		printf("%u\n", c->gateways);
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
	rc = config_apply_logging(c, &err);
	if (rc) {
		log_error("failed to verify flags", LOG_STR("error", err.msg));
		*exit_status = err.exit_status;
		config_free(c);
		return rc;
	}
	*exit_status = 0;
	return 0;
}
