/* --config-file: etcd 3.4's YAML configuration file (see config.h).
 *
 * etcd reads the file with sigs.k8s.io/yaml into embed.Config (keys are
 * the fields' json names, matched without regard to case, as
 * encoding/json does), plus the blocks client-transport-security and
 * peer-transport-security and etcdmain's proxy and discovery-fallback.
 * What a value may be follows from the Go field it fills:
 *   string fields   any scalar, as Go text: a plain boolean or number
 *                   becomes "true"/"false" or its digits (so proxy: off
 *                   is "false", and etcd's sample quotes 'off'); null
 *                   keeps the default; URL lists and cors/host-whitelist
 *                   are one comma-separated string
 *   bool fields     a plain YAML 1.1 boolean (true, false, yes, no, on, off)
 *   number fields   a plain integer
 *   durations       a plain integer of nanoseconds (time.Duration in JSON);
 *                   cetcd also takes Go's duration text ("5s")
 *   []string fields a sequence: cipher-suites, log-outputs, log-output
 * Merge keys ("<<: *anchor", or a list of them) merge as yaml.v2 merges:
 * the mapping's own keys win, then earlier merged mappings.
 * etcd ignores keys it does not know and lets a repeated key win; cetcd
 * refuses both, naming the key and its line, so that a misspelt key is not
 * silently without effect. cetcd also reads from the file the flags etcd
 * takes only on its command line (client-crl-file, peer-cert-allowed-cn
 * and the like) and its own, under their flag names.
 *
 * The document is loaded whole with libyaml (anchors resolve to shared
 * nodes, so an alias-heavy document costs no more than its nodes) and
 * walked two levels deep at most.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "config/config_int.h"

/* The TLS flags that etcd's file sets only through its two blocks: a
 * block's key K sets flag K (client side) or "peer-" K (peer side). */
static const char *const file_tls_keys[] = {
	"cert-file", "key-file", "client-cert-auth", "trusted-ca-file", "auto-tls", NULL,
};
#define FILE_CLIENT_BLOCK "client-transport-security"
#define FILE_PEER_BLOCK "peer-transport-security"

/* Keys whose Go field is a []string: YAML sequences. */
static const char *const file_list_keys[] = { "cipher-suites", "log-outputs", "log-output", NULL };

/* Flags that are no key of the file: the file itself and --version. */
static const char *const file_not_keys[] = { "config-file", "version", NULL };

struct file_ctx {
	struct cetcd_config *c;
	const char *name; /* for messages */
	yaml_document_t *doc;
	struct config_error *err;
	/* line (1-based) where each flag was set, 0 if not yet: repeats */
	unsigned line[sizeof(((struct cetcd_config *)0)->source)];
};

static bool file_in(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strcasecmp(*list, s) == 0)
			return true;
	return false;
}

static unsigned file_line(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.line + 1;
}

static int file_fail(struct file_ctx *x, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int file_fail(struct file_ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	config_errorf(x->err, 1, "config file %s: line %u: %s", x->name, file_line(n), msg);
	return -EINVAL;
}

static const char *file_text(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

static bool file_plain(const yaml_node_t *n)
{
	return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML 1.1's null, as yaml.v2 resolves a plain scalar. */
static bool file_is_null(const yaml_node_t *n)
{
	static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
	if (n->type != YAML_SCALAR_NODE || !file_plain(n))
		return false;
	for (const char *const *p = nulls; *p; p++)
		if (strcmp(*p, file_text(n)) == 0)
			return true;
	return false;
}

/* YAML 1.1's booleans (yaml.v2's table): 1 true, 0 false, -1 neither. */
static int file_bool(const char *s)
{
	static const char *const yes[] = { "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
					   "on", "On", "ON", NULL };
	static const char *const no[] = { "n", "N", "no", "No", "NO", "false", "False", "FALSE",
					  "off", "Off", "OFF", NULL };
	for (const char *const *p = yes; *p; p++)
		if (strcmp(*p, s) == 0)
			return 1;
	for (const char *const *p = no; *p; p++)
		if (strcmp(*p, s) == 0)
			return 0;
	return -1;
}

/* yaml.v2's float syntax (YAML 1.1), '_' removed. */
static bool file_is_float(const char *s)
{
	static const char *const special[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
					       "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
					       NULL };
	const char *p = s + (*s == '+' || *s == '-');
	bool digits = false;

	for (const char *const *q = special; *q; q++)
		if (strcmp(*q, s) == 0)
			return true;
	while (*p >= '0' && *p <= '9')
		p++, digits = true;
	if (*p == '.') {
		p++;
		bool frac = false;
		while (*p >= '0' && *p <= '9')
			p++, frac = true;
		if (!digits && !frac)
			return false;
		digits = true;
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		p += 1 + (p[1] == '+' || p[1] == '-');
		if (!(*p >= '0' && *p <= '9'))
			return false;
		while (*p >= '0' && *p <= '9')
			p++;
	}
	return *p == '\0';
}

/* A float as Go's strconv.FormatFloat(f, 'g', -1, 32) writes it: the
 * fewest digits that read back as the same float32, in exponent form
 * when the exponent is below -4 or 6 and above. */
static void file_float_text(const char *s, char *out, size_t cap)
{
	float f = strtof(s[0] == '+' ? s + 1 : s, NULL);
	char e[48];
	int p = 1;

	if (f != f) {
		snprintf(out, cap, "NaN");
		return;
	}
	if (f == __builtin_inff() || f == -__builtin_inff()) {
		snprintf(out, cap, "%sInf", f > 0 ? "+" : "-");
		return;
	}
	for (; p < 9; p++) {
		snprintf(e, sizeof(e), "%.*e", p - 1, (double)f);
		if (strtof(e, NULL) == f)
			break;
	}
	int exp = atoi(strchr(e, 'e') + 1);
	if (exp < -4 || exp >= 6) {
		snprintf(out, cap, "%.*e", p - 1, (double)f);
		return;
	}
	snprintf(out, cap, "%.*f", p - 1 - exp > 0 ? p - 1 - exp : 0, (double)f);
}

/* The text a Go string field gets from a plain scalar: sigs.k8s.io/yaml
 * turns what yaml.v2 resolves as a boolean or a number into its Go text
 * ("on" -> "true", "0x10" -> "16", "1.50" -> "1.5"); the rest is as
 * written. out holds cap bytes. */
static const char *file_go_string(const yaml_node_t *n, char *out, size_t cap)
{
	const char *s = file_text(n);
	char plain[128];
	size_t j = 0;
	int64_t i64;
	uint64_t u64;

	if (!file_plain(n))
		return s;
	int b = file_bool(s);
	if (b >= 0)
		return b ? "true" : "false";
	for (const char *p = s; *p && j + 1 < sizeof(plain); p++)
		if (*p != '_')
			plain[j++] = *p;
	plain[j] = '\0';
	if (j + 1 >= sizeof(plain) || j == 0)
		return s;
	const char *digits = plain + (plain[0] == '+' || plain[0] == '-');
	if (config_parse_int_text(plain[0] == '+' ? plain + 1 : plain, INT64_MIN, INT64_MAX,
				  &i64) == 0 && *digits >= '0' && *digits <= '9') {
		snprintf(out, cap, "%lld", (long long)i64);
		return out;
	}
	if (plain[0] != '-' && config_parse_uint_text(digits, UINT64_MAX, &u64) == 0 &&
	    *digits >= '0' && *digits <= '9') {
		snprintf(out, cap, "%llu", (unsigned long long)u64);
		return out;
	}
	if (file_is_float(plain)) {
		file_float_text(plain, out, cap);
		return out;
	}
	return s;
}

static const char *file_want(enum config_type t)
{
	switch (t) {
	case CT_BOOL: return "a boolean (true or false)";
	case CT_UINT:
	case CT_UINT32: return "an unsigned integer";
	case CT_INT: return "an integer";
	case CT_DURATION: return "a duration (nanoseconds, or Go's form such as 5s)";
	default: return "a string";
	}
}

/* Sets flag f from the text a value node gives, reporting on node n. */
static int file_set(struct file_ctx *x, const struct config_flag *f, const char *key,
		    const char *text, const yaml_node_t *n)
{
	char why[512];
	int rc;

	/* etcd keeps the default for an empty choice, state or URL list */
	if (text[0] == '\0' && f->type == CT_CHOICE)
		return 0;
	rc = config_set(x->c, f, text, why, sizeof(why));
	if (rc == -ENOMEM) {
		config_errorf(x->err, 1, "out of memory");
		return rc;
	}
	if (rc)
		return file_fail(x, n, "invalid value \"%s\" for key %s: %s", text, key, why);
	return 0;
}

/* Checks a scalar against f's Go type and sets it. */
static int file_scalar(struct file_ctx *x, const struct config_flag *f, const char *key,
		       const yaml_node_t *n)
{
	const char *s = file_text(n);
	int64_t i64;
	uint64_t u64;

	switch (f->type) {
	case CT_BOOL: {
		int b = file_plain(n) ? file_bool(s) : -1;
		if (b < 0)
			break;
		return file_set(x, f, key, b ? "true" : "false", n);
	}
	case CT_UINT:
	case CT_UINT32:
		if (!file_plain(n) || config_parse_uint_text(s, UINT64_MAX, &u64) != 0)
			break;
		return file_set(x, f, key, s, n);
	case CT_INT:
		if (!file_plain(n) || config_parse_int_text(s, INT64_MIN, INT64_MAX, &i64) != 0)
			break;
		return file_set(x, f, key, s, n);
	case CT_DURATION:
		if (file_plain(n) && config_parse_int_text(s, INT64_MIN, INT64_MAX, &i64) == 0) {
			char ns[32];
			snprintf(ns, sizeof(ns), "%lldns", (long long)i64);
			return file_set(x, f, key, ns, n);
		}
		return file_set(x, f, key, s, n);
	default: {
		char text[64];
		return file_set(x, f, key, file_go_string(n, text, sizeof(text)), n);
	}
	}
	return file_fail(x, n, "key %s wants %s, got \"%s\"", key, file_want(f->type), s);
}

/* A sequence of scalars into a list flag: its items joined by commas. */
static int file_list(struct file_ctx *x, const struct config_flag *f, const char *key,
		     const yaml_node_t *n)
{
	char *joined = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&joined, &len);
	int rc;

	if (!m) {
		config_errorf(x->err, 1, "out of memory");
		return -ENOMEM;
	}
	for (yaml_node_item_t *it = n->data.sequence.items.start;
	     it < n->data.sequence.items.top; it++) {
		const yaml_node_t *item = yaml_document_get_node(x->doc, *it);
		if (!item || item->type != YAML_SCALAR_NODE) {
			fclose(m);
			free(joined);
			return file_fail(x, item ? item : n, "key %s wants a list of strings", key);
		}
		if (strchr(file_text(item), ',')) {
			fclose(m);
			free(joined);
			return file_fail(x, item,
					 "key %s: \"%s\" has a comma; give each value as its own list item",
					 key, file_text(item));
		}
		char text[64];
		fprintf(m, "%s%s", it == n->data.sequence.items.start ? "" : ",",
			file_go_string(item, text, sizeof(text)));
	}
	if (fclose(m) != 0) {
		free(joined);
		config_errorf(x->err, 1, "out of memory");
		return -ENOMEM;
	}
	rc = file_set(x, f, key, joined, n);
	free(joined);
	return rc;
}

/* One key's value into flag f. */
static int file_value(struct file_ctx *x, const struct config_flag *f, const char *key,
		      const yaml_node_t *k, const yaml_node_t *v, bool merged)
{
	size_t i = (size_t)(f - config_flags);
	int rc;

	if (x->line[i] && merged)
		return 0; /* set by the mapping itself or an earlier merge */
	if (x->line[i])
		return file_fail(x, k, "key %s is given twice (first at line %u)", key, x->line[i]);
	x->line[i] = file_line(k);
	if (file_is_null(v))
		return 0; /* JSON null: the field keeps its default */
	if (file_in(file_list_keys, f->name)) {
		if (v->type != YAML_SEQUENCE_NODE)
			return file_fail(x, v, "key %s wants a list, such as [%s]", key,
					 v->type == YAML_SCALAR_NODE ? file_text(v) : "...");
		rc = file_list(x, f, key, v);
	} else if (v->type != YAML_SCALAR_NODE) {
		return file_fail(x, v, "key %s wants %s, not a %s", key, file_want(f->type),
				 v->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
	} else {
		rc = file_scalar(x, f, key, v);
	}
	if (rc == 0)
		x->c->source[i] = CONFIG_FROM_FILE;
	return rc;
}

static const struct config_flag *file_flag(const char *name)
{
	for (size_t i = 0; i < config_nflags; i++) {
		const struct config_flag *f = &config_flags[i];
		if (strcasecmp(f->name, name) == 0 && f->scope == SCOPE_ALL && f->type != CT_IGNORED &&
		    !file_in(file_not_keys, f->name))
			return f;
	}
	return NULL;
}

/* A key node's text, or NULL (reported) if it is not a scalar. */
static const char *file_key(struct file_ctx *x, const yaml_node_t *k)
{
	if (k->type != YAML_SCALAR_NODE) {
		file_fail(x, k, "a key must be a plain name, not a %s",
			  k->type == YAML_SEQUENCE_NODE ? "list" : "mapping");
		return NULL;
	}
	return file_text(k);
}

/* One key and its value, from a mapping itself or (merged) from the
 * mapping of one of its "<<" merge keys. */
typedef int (*file_pair_fn)(struct file_ctx *x, const void *arg, const yaml_node_t *kn,
			    const yaml_node_t *vn, bool merged);

static bool file_is_merge(const yaml_node_t *kn)
{
	return kn->type == YAML_SCALAR_NODE && file_plain(kn) && strcmp(file_text(kn), "<<") == 0;
}

/* Walks mapping m: its own pairs, then those its "<<" merge keys bring (a
 * mapping or a list of them, as yaml.v2 merges): a key the mapping or an
 * earlier merged mapping set keeps that value. */
static int file_mapping(struct file_ctx *x, const yaml_node_t *m, file_pair_fn fn,
			const void *arg, bool merged, int depth)
{
	int rc;

	if (depth > 8)
		return file_fail(x, m, "merge keys (<<) nested too deep");
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const yaml_node_t *kn = yaml_document_get_node(x->doc, p->key);
		const yaml_node_t *vn = yaml_document_get_node(x->doc, p->value);
		if (!kn || !vn)
			return file_fail(x, m, "a broken mapping");
		if (!file_is_merge(kn) && (rc = fn(x, arg, kn, vn, merged)))
			return rc;
	}
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const yaml_node_t *kn = yaml_document_get_node(x->doc, p->key);
		const yaml_node_t *vn = yaml_document_get_node(x->doc, p->value);
		if (!file_is_merge(kn))
			continue;
		if (vn->type == YAML_MAPPING_NODE) {
			if ((rc = file_mapping(x, vn, fn, arg, true, depth + 1)))
				return rc;
			continue;
		}
		if (vn->type != YAML_SEQUENCE_NODE)
			return file_fail(x, vn, "a merge key (<<) wants a mapping or a list of mappings");
		for (yaml_node_item_t *it = vn->data.sequence.items.start;
		     it < vn->data.sequence.items.top; it++) {
			const yaml_node_t *mn = yaml_document_get_node(x->doc, *it);
			if (!mn || mn->type != YAML_MAPPING_NODE)
				return file_fail(x, mn ? mn : vn,
						 "a merge key (<<) wants a mapping or a list of mappings");
			if ((rc = file_mapping(x, mn, fn, arg, true, depth + 1)))
				return rc;
		}
	}
	return 0;
}

/* A key of client-transport-security (arg "") or peer-transport-security
 * (arg "peer-"). */
static int file_tls_pair(struct file_ctx *x, const void *arg, const yaml_node_t *kn,
			 const yaml_node_t *vn, bool merged)
{
	const char *prefix = arg;
	const char *block = prefix[0] ? FILE_PEER_BLOCK : FILE_CLIENT_BLOCK;
	const char *key = file_key(x, kn);
	char flag[64], full[128];

	if (!key)
		return -EINVAL;
	snprintf(full, sizeof(full), "%s.%s", block, key);
	if (!file_in(file_tls_keys, key))
		return file_fail(x, kn, "unknown key %s (a TLS block takes %s, %s, %s, %s and %s)",
				 full, file_tls_keys[0], file_tls_keys[1], file_tls_keys[2],
				 file_tls_keys[3], file_tls_keys[4]);
	snprintf(flag, sizeof(flag), "%s%s", prefix, key);
	const struct config_flag *f = file_flag(flag);
	if (!f)
		return file_fail(x, kn, "unknown key %s", full);
	return file_value(x, f, full, kn, vn, merged);
}

/* A key of the top-level mapping. */
static int file_root_pair(struct file_ctx *x, const void *arg, const yaml_node_t *kn,
			  const yaml_node_t *vn, bool merged)
{
	unsigned *block_line = (unsigned *)arg;
	const char *key = file_key(x, kn);

	if (!key)
		return -EINVAL;
	bool client = strcasecmp(key, FILE_CLIENT_BLOCK) == 0;
	if (client || strcasecmp(key, FILE_PEER_BLOCK) == 0) {
		unsigned *seen = &block_line[client ? 0 : 1];
		if (*seen && merged)
			return 0;
		if (*seen)
			return file_fail(x, kn, "key %s is given twice (first at line %u)", key, *seen);
		*seen = file_line(kn);
		if (file_is_null(vn))
			return 0;
		if (vn->type != YAML_MAPPING_NODE)
			return file_fail(x, vn, "key %s wants a mapping of %s, %s, ...", key,
					 file_tls_keys[0], file_tls_keys[1]);
		return file_mapping(x, vn, file_tls_pair, client ? "" : "peer-", false, 0);
	}
	if (file_in(file_tls_keys, key) ||
	    (strncasecmp(key, "peer-", 5) == 0 && file_in(file_tls_keys, key + 5))) {
		bool peer = strncasecmp(key, "peer-", 5) == 0;
		return file_fail(x, kn, "unknown key %s: in the file it goes under %s as %s", key,
				 peer ? FILE_PEER_BLOCK : FILE_CLIENT_BLOCK, peer ? key + 5 : key);
	}
	const struct config_flag *f = file_flag(key);
	if (!f)
		return file_fail(x, kn, "unknown key %s", key);
	return file_value(x, f, key, kn, vn, merged);
}

/* The top-level mapping. */
static int file_root(struct file_ctx *x, const yaml_node_t *root)
{
	unsigned block_line[2] = { 0, 0 };
	int rc;

	if (file_is_null(root))
		return 0; /* an empty file: etcd's defaults */
	if (root->type != YAML_MAPPING_NODE)
		return file_fail(x, root, "the file must be a mapping of keys to values (key: value)");
	if ((rc = file_mapping(x, root, file_root_pair, block_line, false, 0)))
		return rc;
	/* etcd: a discovery setting clears the default initial cluster */
	if ((x->c->discovery[0] || x->c->discovery_srv[0]) && !config_is_set(x->c, "initial-cluster")) {
		x->c->initial_cluster[0] = '\0';
	}
	return 0;
}

int config_file_parse(struct cetcd_config *c, const char *name, const void *buf, size_t len,
		      struct config_error *err)
{
	struct file_ctx *x;
	yaml_parser_t parser;
	yaml_document_t doc, next;
	int rc;

	x = calloc(1, sizeof(*x));
	if (!x || !yaml_parser_initialize(&parser)) {
		free(x);
		config_errorf(err, 1, "out of memory");
		return -ENOMEM;
	}
	x->c = c;
	x->name = name;
	x->doc = &doc;
	x->err = err;
	yaml_parser_set_input_string(&parser, buf, len);
	if (!yaml_parser_load(&parser, &doc)) {
		config_errorf(err, 1, "config file %s: line %zu, column %zu: bad YAML: %s%s%s", name,
			      parser.problem_mark.line + 1, parser.problem_mark.column + 1,
			      parser.problem ? parser.problem : "unreadable",
			      parser.context ? " " : "", parser.context ? parser.context : "");
		rc = parser.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL;
		goto out_parser;
	}
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	rc = root ? file_root(x, root) : 0;
	if (rc == 0 && root) {
		/* etcd reads the first document only; a second is refused
		 * rather than dropped */
		if (!yaml_parser_load(&parser, &next)) {
			config_errorf(err, 1, "config file %s: line %zu, column %zu: bad YAML: %s",
				      name, parser.problem_mark.line + 1,
				      parser.problem_mark.column + 1,
				      parser.problem ? parser.problem : "unreadable");
			rc = -EINVAL;
		} else {
			yaml_node_t *r2 = yaml_document_get_root_node(&next);
			if (r2)
				rc = file_fail(x, r2,
					       "a second YAML document; the file holds one");
			yaml_document_delete(&next);
		}
	}
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&parser);
	free(x);
	return rc;
}

int config_file_load(struct cetcd_config *c, const char *path, struct config_error *err)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc;

	if (!f) {
		rc = -errno;
		config_errorf(err, 1, "open %s: %s", path, strerror(errno));
		return rc;
	}
	for (;;) {
		if (len == cap) {
			size_t ncap = cap ? 2 * cap : 4096;
			char *nb = ncap > CONFIG_FILE_MAX_BYTES + 1 ? NULL : realloc(buf, ncap);
			if (!nb) {
				rc = cap > CONFIG_FILE_MAX_BYTES ? -EFBIG : -ENOMEM;
				config_errorf(err, 1, "config file %s: %s", path,
					      rc == -EFBIG ? "larger than 1 MiB" : "out of memory");
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		size_t n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		config_errorf(err, 1, "read %s: %s", path, strerror(errno));
		rc = -EIO;
		goto out;
	}
	if (len > CONFIG_FILE_MAX_BYTES) {
		config_errorf(err, 1, "config file %s: larger than 1 MiB", path);
		rc = -EFBIG;
		goto out;
	}
	rc = config_file_parse(c, path, buf, len, err);
out:
	free(buf);
	fclose(f);
	return rc;
}
