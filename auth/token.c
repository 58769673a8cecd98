/* --auth-token's options and simple tokens, as etcd 3.4 (see token.h). */
#include "auth/token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/alloc.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "config/config.h"

#define TOKEN_INVALID_OPTS "auth: invalid auth options"
/* Largest key file read (a PEM key or certificate is a few KiB). */
#define TOKEN_KEY_FILE_MAX (1u << 20)

/* One name=value option of the spec, in place. */
struct token_opt {
	const char *name, *value;
	size_t name_len, value_len;
};

static bool token_opt_is(const struct token_opt *o, const char *name)
{
	return o->name_len == strlen(name) && memcmp(o->name, name, o->name_len) == 0;
}

/* The value of the option named name, or NULL. */
static const struct token_opt *token_opt_find(const struct token_opt *opts, size_t n,
					      const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (token_opt_is(&opts[i], name))
			return &opts[i];
	return NULL;
}

/* errno's text as Go's syscall errors spell it ("no such file or
 * directory"). */
static const char *token_go_errno(int err, char buf[64])
{
	snprintf(buf, 64, "%s", strerror(err));
	if (buf[0] >= 'A' && buf[0] <= 'Z' && buf[1] >= 'a' && buf[1] <= 'z')
		buf[0] = (char)(buf[0] - 'A' + 'a');
	return buf;
}

/* Reads the key file named v[0..n) as Go's ioutil.ReadFile, with its
 * error text. *out is freed with auth_free. */
static int token_read_file(const char *v, size_t n, uint8_t **out, size_t *out_len)
{
	char path[4096], eb[64];
	struct stat st;
	ssize_t got;
	size_t len = 0;
	int fd, rc;

	*out = NULL;
	*out_len = 0;
	if (n >= sizeof(path))
		return errmsg_set(-EINVAL, "open %.*s...: file name too long", 64, v);
	memcpy(path, v, n);
	path[n] = 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return errmsg_set(-EINVAL, "open %s: %s", path, token_go_errno(errno, eb));
	}
	if (fstat(fd, &st) != 0) {
		rc = errmsg_set(-EINVAL, "stat %s: %s", path, token_go_errno(errno, eb));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > TOKEN_KEY_FILE_MAX) {
		rc = errmsg_set(-EINVAL, "read %s: %s", path,
				S_ISDIR(st.st_mode) ? "is a directory" : "not a key file of at most 1 MiB");
		goto out_close;
	}
	*out = auth_alloc((size_t)st.st_size + 1);
	if (!*out) {
		rc = errmsg_set(-ENOMEM, "auth: out of memory reading %s", path);
		goto out_close;
	}
	while (len < (size_t)st.st_size) {
		got = read(fd, *out + len, (size_t)st.st_size - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	if (len < (size_t)st.st_size) {
		rc = errmsg_set(-EINVAL, "read %s: %s", path,
				got < 0 ? token_go_errno(errno, eb) : "short read");
		auth_free(*out);
		*out = NULL;
		goto out_close;
	}
	*out_len = len;
	rc = 0;
out_close:
	close(fd);
	return rc;
}

/* etcd's newTokenProviderJWT over the options. */
static int token_jwt(const struct token_opt *opts, size_t n, struct auth_token_opts *o)
{
	const struct token_opt *ttl = token_opt_find(opts, n, "ttl");
	const struct token_opt *pub = token_opt_find(opts, n, "pub-key");
	const struct token_opt *priv = token_opt_find(opts, n, "priv-key");
	const struct token_opt *sm = token_opt_find(opts, n, "sign-method");
	uint8_t *pub_pem = NULL, *priv_pem = NULL;
	size_t pub_len = 0, priv_len = 0;
	char text[64], why[160];
	int m, rc;

	/* jwtOptions.Parse: ttl, the two files, then the method */
	o->jwt_ttl_ns = AUTH_TOKEN_JWT_TTL_DEFAULT_NS;
	if (ttl && ttl->value_len) {
		snprintf(text, sizeof(text), "%.*s", (int)ttl->value_len, ttl->value);
		if (ttl->value_len >= sizeof(text) ||
		    config_parse_duration(text, &o->jwt_ttl_ns, why, sizeof(why)))
			return errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (problem loading JWT options: %s)",
					  ttl->value_len >= sizeof(text) ? "ttl is too long" : why);
	}
	if (pub && pub->value_len && (rc = token_read_file(pub->value, pub->value_len, &pub_pem,
							   &pub_len)))
		goto out_opts;
	if (priv && priv->value_len && (rc = token_read_file(priv->value, priv->value_len,
							     &priv_pem, &priv_len)))
		goto out_opts;
	m = sm ? auth_jwt_method_parse(sm->value, sm->value_len) : -ENOENT;
	if (m == -ENOENT) {
		rc = errmsg_set(-EINVAL, "auth: invalid auth signature method");
		goto out_opts;
	}
	for (size_t i = 0; i < n; i++)
		if (!token_opt_is(&opts[i], "ttl") && !token_opt_is(&opts[i], "pub-key") &&
		    !token_opt_is(&opts[i], "priv-key") && !token_opt_is(&opts[i], "sign-method")) {
			snprintf(text, sizeof(text), "%.*s", (int)opts[i].name_len, opts[i].name);
			log_warn("unknown JWT options", LOG_STR("key", text));
		}
	if (m < 0) {
		rc = m; /* none, EdDSA: etcd's Key() refuses them with its text */
		goto out;
	}
	rc = auth_jwt_key_new((enum auth_jwt_method)m, pub_pem, pub_len, priv_pem, priv_len,
			      &o->jwt);
	goto out;

out_opts:
	/* a failure of jwtOptions.Parse: etcd logs it and answers this */
	if (rc != -ENOMEM)
		rc = errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (problem loading JWT options: %s)",
				errmsg_get(rc));
out:
	auth_free(pub_pem);
	auth_free(priv_pem);
	return rc;
}

int auth_token_opts_parse(const char *spec, uint64_t ttl_s, struct auth_token_opts **out)
{
	struct token_opt opts[32];
	struct auth_token_opts *o;
	const char *p, *comma, *eq;
	size_t n = 0, type_len;
	int rc;

	*out = NULL;
	o = auth_alloc(sizeof(*o));
	if (!o)
		return errmsg_set(-ENOMEM, "auth: out of memory for the token options");
	memset(o, 0, sizeof(*o));
	o->simple_ttl_ms = (ttl_s ? ttl_s : AUTH_TOKEN_TTL_DEFAULT_S) * 1000;
	if (ttl_s > UINT64_MAX / 1000)
		o->simple_ttl_ms = UINT64_MAX;

	/* decomposeOpts: the type, then name=value pieces */
	comma = strchr(spec, ',');
	type_len = comma ? (size_t)(comma - spec) : strlen(spec);
	for (p = comma; p; p = comma) {
		const char *piece = p + 1;
		comma = strchr(piece, ',');
		size_t len = comma ? (size_t)(comma - piece) : strlen(piece);
		eq = memchr(piece, '=', len);
		if (!eq || memchr(eq + 1, '=', len - (size_t)(eq + 1 - piece))) {
			rc = errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (invalid token specific option: %s)",
					spec);
			goto out_free;
		}
		struct token_opt t = { piece, eq + 1, (size_t)(eq - piece), len - (size_t)(eq + 1 - piece) };
		for (size_t i = 0; i < n; i++)
			if (opts[i].name_len == t.name_len && memcmp(opts[i].name, t.name, t.name_len) == 0) {
				rc = errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (invalid token specific "
						"option, duplicated parameters (%.*s): %s)",
						(int)t.name_len, t.name, spec);
				goto out_free;
			}
		if (n == sizeof(opts) / sizeof(opts[0])) {
			rc = errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (more than %zu token options: %s)",
					n, spec);
			goto out_free;
		}
		opts[n++] = t;
	}

	if (type_len == 0) {
		o->type = AUTH_TOKEN_NONE;
	} else if (type_len == 6 && memcmp(spec, "simple", 6) == 0) {
		o->type = AUTH_TOKEN_SIMPLE;
		log_warn("simple token is not cryptographically signed");
	} else if (type_len == 3 && memcmp(spec, "jwt", 3) == 0) {
		o->type = AUTH_TOKEN_JWT;
		if ((rc = token_jwt(opts, n, o)))
			goto out_free;
	} else {
		rc = errmsg_set(-EINVAL, TOKEN_INVALID_OPTS " (unknown token type: %.*s)",
				(int)type_len, spec);
		goto out_free;
	}
	*out = o;
	return 0;

out_free:
	auth_token_opts_free(o);
	return rc;
}

void auth_token_opts_free(struct auth_token_opts *o)
{
	if (!o)
		return;
	auth_jwt_key_free(o->jwt);
	auth_free(o);
}

int auth_token_opts_from_config(const struct cetcd_config *c, struct auth_token_opts **out)
{
	int rc = auth_token_opts_parse(c->auth_token ? c->auth_token : "", c->auth_token_ttl_s, out);

	if (rc)
		log_error(errmsg_get(rc), LOG_STR("auth-token", c->auth_token));
	return rc;
}

int auth_token_simple_prefix(char prefix[AUTH_TOKEN_SIMPLE_PREFIX_LEN + 1])
{
	static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
	uint8_t rnd[64];
	size_t have = 0, used = 0, i = 0;

	/* a byte below 208 (4 * 52) picks a letter evenly; others are drawn
	 * again, so that no letter is likelier than another */
	while (i < AUTH_TOKEN_SIMPLE_PREFIX_LEN) {
		if (used == have) {
			ssize_t got = getrandom(rnd, sizeof(rnd), 0);
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0)
				return errmsg_set(-EIO, "auth: no random bytes for a simple token: %s",
						  got < 0 ? strerror(errno) : "none given");
			have = (size_t)got;
			used = 0;
		}
		uint8_t b = rnd[used++];
		if (b < 4 * 52)
			prefix[i++] = letters[b % 52];
	}
	prefix[i] = 0;
	return 0;
}

size_t auth_token_simple_format(const char *prefix, uint64_t index,
				char out[AUTH_TOKEN_SIMPLE_MAX + 1])
{
	int n = snprintf(out, AUTH_TOKEN_SIMPLE_MAX + 1, "%.16s.%llu", prefix,
			 (unsigned long long)index);
	return n < 0 ? 0 : (size_t)n;
}

bool auth_token_simple_index(const char *token, size_t len, uint64_t *index)
{
	const char *dot = memchr(token, '.', len);
	const char *p, *end = token + len;
	uint64_t v = 0;
	bool neg = false;

	if (!dot || memchr(dot + 1, '.', (size_t)(end - dot - 1)))
		return false;
	/* strconv.Atoi: a sign, then decimal digits, within int64; a
	 * negative index is one etcd waits for in vain */
	p = dot + 1;
	if (p < end && (*p == '+' || *p == '-'))
		neg = *p++ == '-';
	if (p == end)
		return false;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (v > (uint64_t)INT64_MAX / 10)
			return false;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > (uint64_t)INT64_MAX)
			return false;
	}
	if (neg && v)
		return false;
	*index = v;
	return true;
}
