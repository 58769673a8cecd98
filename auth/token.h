/*
 * Auth tokens as etcd 3.4 configures and makes them: the --auth-token
 * options (etcd's auth/store.go decomposeOpts and NewTokenProvider,
 * auth/options.go) and --auth-token-ttl, and simple tokens (etcd's
 * auth/simple_token.go).
 *
 * --auth-token is a type and options, comma-separated:
 *   simple
 *   jwt,pub-key=PATH,priv-key=PATH,sign-method=RS256,ttl=5m
 * Every option is name=value (exactly one '='), none twice. "jwt" needs
 * sign-method (one of jwt.h's methods) and a key: priv-key signs and
 * verifies, pub-key alone only verifies, both must be one key; HS
 * methods take their secret from priv-key. ttl is a Go duration, 5m when
 * absent; unknown options are warned of and ignored. "simple" ignores its
 * options; an empty type means no tokens at all (etcd's nop provider).
 *
 * A simple token is 16 letters drawn uniformly from [a-zA-Z] by the
 * member that takes the Authenticate request, then '.' and the Raft index
 * its InternalAuthenticateRequest is applied at, e.g.
 * "NXkgQsLLrRYaBnvP.23". Its TTL is --auth-token-ttl seconds (0: 300, as
 * etcd), reset on each use; the table of live simple tokens is
 * shm/tokens.h.
 */
#ifndef CETCD_AUTH_TOKEN_H
#define CETCD_AUTH_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/jwt.h"

enum auth_token_type {
	AUTH_TOKEN_NONE,   /* --auth-token "": Authenticate gives no token */
	AUTH_TOKEN_SIMPLE,
	AUTH_TOKEN_JWT,
};

/* Simple tokens: the random prefix's length, and the longest token
 * ("<16 letters>.<uint64 index>"). */
#define AUTH_TOKEN_SIMPLE_PREFIX_LEN 16u
#define AUTH_TOKEN_SIMPLE_MAX (AUTH_TOKEN_SIMPLE_PREFIX_LEN + 1 + 20)

/* etcd's defaults: a simple token's TTL, a JWT's ttl option. */
#define AUTH_TOKEN_TTL_DEFAULT_S 300u
#define AUTH_TOKEN_JWT_TTL_DEFAULT_NS (5ll * 60 * 1000000000)

struct auth_token_opts {
	enum auth_token_type type;
	uint64_t simple_ttl_ms;  /* a simple token's TTL, reset on use */
	struct auth_jwt_key *jwt; /* AUTH_TOKEN_JWT: the key and its method */
	int64_t jwt_ttl_ns;      /* AUTH_TOKEN_JWT: exp is signing time + this */
};

/*
 * Parses --auth-token spec and --auth-token-ttl ttl_s, reading the key
 * files a jwt spec names. *out is freed with auth_token_opts_free.
 * Returns 0, or the error etcd's server refuses to start with; errmsg_get
 * gives etcd's final text first and what etcd logs before it after, e.g.
 * "auth: invalid auth options (auth: unknown token type: foo)":
 *   -EINVAL   "auth: invalid auth options": a malformed or repeated
 *             option, an unknown type, no or an unknown sign-method, a
 *             bad ttl, a key file that cannot be read; or a key that is
 *             not PEM or not of the method's kind (golang-jwt's text)
 *   -ENOTSUP  sign-method none or EdDSA ("unsupported signing method")
 *   -ENOKEY   "auth: missing key data"
 *   -EKEYREJECTED "auth: public and private keys don't match"
 *   -ENOMEM
 */
int auth_token_opts_parse(const char *spec, uint64_t ttl_s, struct auth_token_opts **out);
void auth_token_opts_free(struct auth_token_opts *o);

/* auth_token_opts_parse of a daemon's --auth-token and --auth-token-ttl;
 * a failure is logged with etcd's text, and the daemon stops the member
 * (CONFIG_EXIT_FATAL), as etcd's server refuses to start. */
struct cetcd_config;
int auth_token_opts_from_config(const struct cetcd_config *c, struct auth_token_opts **out);

/*
 * Fills prefix[0..16) with letters drawn uniformly from [a-zA-Z] out of
 * the kernel's random source (getrandom), and a NUL. Returns 0, or -EIO
 * when the kernel gives no random bytes.
 */
int auth_token_simple_prefix(char prefix[AUTH_TOKEN_SIMPLE_PREFIX_LEN + 1]);

/* Writes "<prefix>.<index>" and a NUL into out (AUTH_TOKEN_SIMPLE_MAX + 1
 * bytes) and returns its length. */
size_t auth_token_simple_format(const char *prefix, uint64_t index,
				char out[AUTH_TOKEN_SIMPLE_MAX + 1]);

/* Whether token[0..len) has a simple token's shape as etcd checks it
 * (isValidSimpleToken: two '.'-separated parts, the second a decimal
 * index), and that index. */
bool auth_token_simple_index(const char *token, size_t len, uint64_t *index);

#endif
