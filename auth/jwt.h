/*
 * JSON Web Tokens as etcd 3.4 makes and checks them (its auth/jwt.go over
 * golang-jwt), signed and verified through OpenSSL.
 *
 * A token is base64url(header) "." base64url(claims) "." base64url(sig),
 * without padding. cetcd writes the header {"alg":"RS256","typ":"JWT"}
 * and the claims {"exp":E,"revision":R,"username":"U"}, keys in Go's
 * sorted map order, the user name escaped as Go's encoding/json does.
 *
 * Methods: RS256/384/512 (RSA PKCS#1 v1.5), PS256/384/512 (RSA-PSS: the
 * salt as long as the hash when signing, any salt length accepted when
 * verifying, as golang-jwt), ES256/384/512 (ECDSA on P-256, P-384, P-521,
 * the signature as r || s, each as long as the curve's bytes) and
 * HS256/384/512 (HMAC keyed with the priv-key file's bytes, which etcd
 * 3.4 takes too).
 *
 * A token comes from outside: anything malformed is an error with a text
 * (errmsg_get), never a crash.
 */
#ifndef CETCD_AUTH_JWT_H
#define CETCD_AUTH_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum auth_jwt_method {
	AUTH_JWT_RS256,
	AUTH_JWT_RS384,
	AUTH_JWT_RS512,
	AUTH_JWT_PS256,
	AUTH_JWT_PS384,
	AUTH_JWT_PS512,
	AUTH_JWT_ES256,
	AUTH_JWT_ES384,
	AUTH_JWT_ES512,
	AUTH_JWT_HS256,
	AUTH_JWT_HS384,
	AUTH_JWT_HS512,
	AUTH_JWT_METHOD_COUNT
};

/* Longest token auth_jwt_verify reads. */
#define AUTH_JWT_MAX_TOKEN 16384u

/* The method's name ("RS256"). */
const char *auth_jwt_method_name(enum auth_jwt_method m);

/*
 * The method named name[0..len), as golang-jwt's GetSigningMethod knows
 * it. Returns the method (>= 0), or
 *   -ENOTSUP  a name golang-jwt knows but etcd cannot key ("none",
 *             "EdDSA"); errmsg_get says etcd's "unsupported signing
 *             method: ..."
 *   -ENOENT   any other name.
 */
int auth_jwt_method_parse(const char *name, size_t len);

/* A method's key: for RS, PS and ES a private key (sign and verify) or
 * only a public key (verify only); for HS the shared secret. */
struct auth_jwt_key;

/*
 * Makes the key of method m from the PEM text of the pub-key and
 * priv-key files (either may be absent: NULL or length 0), as etcd's
 * jwtOptions.Key does: the private key signs, a public key alone only
 * verifies, both must be the same key. *out is freed with
 * auth_jwt_key_free. Returns 0, or (errmsg_get has etcd's text)
 *   -ENOKEY   neither key given ("auth: missing key data")
 *   -EINVAL   a key that is not PEM, not of the method's kind, or (ES) on
 *             another curve than the method's
 *   -EKEYREJECTED  the two keys differ ("auth: public and private keys
 *             don't match")
 *   -ENOMEM
 */
int auth_jwt_key_new(enum auth_jwt_method m, const void *pub_pem, size_t pub_len,
		     const void *priv_pem, size_t priv_len, struct auth_jwt_key **out);
void auth_jwt_key_free(struct auth_jwt_key *k);
enum auth_jwt_method auth_jwt_key_method(const struct auth_jwt_key *k);
/* True when the key holds only a public key: auth_jwt_sign refuses. */
bool auth_jwt_key_verify_only(const struct auth_jwt_key *k);

/*
 * Signs the claims etcd 3.4 writes: username, revision (the auth store's
 * revision) and exp (Unix seconds; etcd's now + the ttl option). *token
 * (NUL-terminated, *token_len bytes) is freed with auth_free. Returns 0,
 * -EPERM for a verify-only key ("auth: token signing attempted with
 * verify-only key"), -ENOMEM, or -EIO when OpenSSL fails.
 */
int auth_jwt_sign(const struct auth_jwt_key *k, const char *username, size_t username_len,
		  uint64_t revision, int64_t exp, char **token, size_t *token_len);

/* What a verified token says. username is NUL-terminated (it may hold a
 * NUL of its own: username_len counts), freed by auth_jwt_claims_free. */
struct auth_jwt_claims {
	char *username;
	size_t username_len;
	uint64_t revision;
	int64_t exp; /* 0: the token has no exp */
};

/*
 * Checks token[0..len) as etcd's tokenJWT.info does: three base64url
 * segments, a header whose alg is k's method, a signature k verifies, an
 * exp not passed at now (Unix seconds; a token is good through its exp
 * second), an iat and nbf not after now, and a string username and a
 * numeric revision. Returns 0 with *out filled, or (errmsg_get says why)
 *   -EINVAL   malformed: segments, base64, JSON, claims of the wrong type
 *   -EBADMSG  another method, or a signature that does not verify
 *   -ETIME    expired, or not valid yet
 *   -ENOMEM
 * *out is left empty on failure.
 */
int auth_jwt_verify(const struct auth_jwt_key *k, const char *token, size_t len, int64_t now,
		    struct auth_jwt_claims *out);
void auth_jwt_claims_free(struct auth_jwt_claims *c);

#endif
