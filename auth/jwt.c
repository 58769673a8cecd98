/* JWTs as etcd 3.4 makes and checks them, through OpenSSL (see jwt.h). */
#include "auth/jwt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/decoder.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "auth/alloc.h"
#include "base/log/errmsg.h"
#include "proto/json.h"

enum jwt_family { JWT_RSA, JWT_PSS, JWT_EC, JWT_HMAC };

static const struct {
	const char *name;
	enum jwt_family family;
	const char *digest;
	const char *curve;  /* JWT_EC: the curve's OpenSSL group name */
	size_t coord_bytes; /* JWT_EC: bytes of r and of s */
} jwt_methods[AUTH_JWT_METHOD_COUNT] = {
	[AUTH_JWT_RS256] = { "RS256", JWT_RSA, "SHA256", NULL, 0 },
	[AUTH_JWT_RS384] = { "RS384", JWT_RSA, "SHA384", NULL, 0 },
	[AUTH_JWT_RS512] = { "RS512", JWT_RSA, "SHA512", NULL, 0 },
	[AUTH_JWT_PS256] = { "PS256", JWT_PSS, "SHA256", NULL, 0 },
	[AUTH_JWT_PS384] = { "PS384", JWT_PSS, "SHA384", NULL, 0 },
	[AUTH_JWT_PS512] = { "PS512", JWT_PSS, "SHA512", NULL, 0 },
	[AUTH_JWT_ES256] = { "ES256", JWT_EC, "SHA256", "prime256v1", 32 },
	[AUTH_JWT_ES384] = { "ES384", JWT_EC, "SHA384", "secp384r1", 48 },
	[AUTH_JWT_ES512] = { "ES512", JWT_EC, "SHA512", "secp521r1", 66 },
	[AUTH_JWT_HS256] = { "HS256", JWT_HMAC, "SHA256", NULL, 0 },
	[AUTH_JWT_HS384] = { "HS384", JWT_HMAC, "SHA384", NULL, 0 },
	[AUTH_JWT_HS512] = { "HS512", JWT_HMAC, "SHA512", NULL, 0 },
};

struct auth_jwt_key {
	enum auth_jwt_method method;
	bool verify_only;
	EVP_PKEY *pkey;  /* RS, PS, ES */
	uint8_t *secret; /* HS */
	size_t secret_len;
};

const char *auth_jwt_method_name(enum auth_jwt_method m)
{
	return (unsigned)m < AUTH_JWT_METHOD_COUNT ? jwt_methods[m].name : "?";
}

int auth_jwt_method_parse(const char *name, size_t len)
{
	for (int m = 0; m < AUTH_JWT_METHOD_COUNT; m++)
		if (strlen(jwt_methods[m].name) == len && memcmp(jwt_methods[m].name, name, len) == 0)
			return m;
	/* golang-jwt registers these two, but etcd's Key() has no case for
	 * them: its error names the Go type */
	if (len == 4 && memcmp(name, "none", 4) == 0)
		return errmsg_set(-ENOTSUP, "unsupported signing method: *jwt.signingMethodNone");
	if (len == 5 && memcmp(name, "EdDSA", 5) == 0)
		return errmsg_set(-ENOTSUP, "unsupported signing method: *jwt.SigningMethodEd25519");
	return -ENOENT;
}

enum auth_jwt_method auth_jwt_key_method(const struct auth_jwt_key *k)
{
	return k->method;
}

bool auth_jwt_key_verify_only(const struct auth_jwt_key *k)
{
	return k->verify_only;
}

void auth_jwt_key_free(struct auth_jwt_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	if (k->secret) {
		OPENSSL_cleanse(k->secret, k->secret_len);
		auth_free(k->secret);
	}
	auth_free(k);
}

/* ---- keys ---- */

/* An encrypted PEM key is refused, never prompted for. */
static int jwt_no_passphrase(char *buf, size_t size, size_t *len, const OSSL_PARAM params[],
			     void *arg)
{
	(void)buf; (void)size; (void)params; (void)arg;
	*len = 0;
	return 0;
}

static bool jwt_is_pem(const void *pem, size_t len)
{
	return len >= 11 && memmem(pem, len, "-----BEGIN ", 11) != NULL;
}

/* Decodes one PEM key (private, or public: PKIX, PKCS#1 or a
 * certificate's). NULL when it holds none. */
static EVP_PKEY *jwt_decode_pem(const void *pem, size_t len, bool private)
{
	int sel = private ? OSSL_KEYMGMT_SELECT_KEYPAIR : OSSL_KEYMGMT_SELECT_PUBLIC_KEY;
	EVP_PKEY *pk = NULL;
	OSSL_DECODER_CTX *d;
	const unsigned char *p = pem;
	size_t left = len;

	d = OSSL_DECODER_CTX_new_for_pkey(&pk, "PEM", NULL, NULL, sel, NULL, NULL);
	if (d) {
		OSSL_DECODER_CTX_set_passphrase_cb(d, jwt_no_passphrase, NULL);
		if (!OSSL_DECODER_from_data(d, &p, &left)) {
			EVP_PKEY_free(pk);
			pk = NULL;
		}
		OSSL_DECODER_CTX_free(d);
	}
	if (!pk && !private && len <= INT32_MAX) {
		BIO *b = BIO_new_mem_buf(pem, (int)len);
		X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
		if (x)
			pk = X509_get_pubkey(x);
		X509_free(x);
		BIO_free(b);
	}
	ERR_clear_error();
	return pk;
}

/* Whether pk holds its private half (the decoder gives a public key for
 * a key-pair selection when that is all the PEM holds). */
static bool jwt_has_private(EVP_PKEY *pk)
{
	BIGNUM *bn = NULL;
	bool has = EVP_PKEY_get_bn_param(pk, EVP_PKEY_is_a(pk, "EC") ? OSSL_PKEY_PARAM_PRIV_KEY
								      : OSSL_PKEY_PARAM_RSA_D,
					 &bn) == 1;

	BN_clear_free(bn);
	ERR_clear_error();
	return has;
}

/* Whether pk is of the kind method m signs with. */
static bool jwt_key_fits(enum auth_jwt_method m, EVP_PKEY *pk)
{
	if (jwt_methods[m].family == JWT_EC)
		return EVP_PKEY_is_a(pk, "EC");
	return EVP_PKEY_is_a(pk, "RSA") || EVP_PKEY_is_a(pk, "RSA-PSS");
}

static bool jwt_curve_fits(enum auth_jwt_method m, EVP_PKEY *pk)
{
	char group[64];
	size_t glen = 0;

	if (jwt_methods[m].family != JWT_EC)
		return true;
	if (!EVP_PKEY_get_utf8_string_param(pk, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group),
					    &glen))
		return false;
	return strcmp(group, jwt_methods[m].curve) == 0;
}

/* Loads one of the two keys with golang-jwt's errors. */
static int jwt_load(enum auth_jwt_method m, const void *pem, size_t len, bool private,
		    EVP_PKEY **out)
{
	bool ec = jwt_methods[m].family == JWT_EC;
	EVP_PKEY *pk;

	*out = NULL;
	if (!jwt_is_pem(pem, len))
		return errmsg_set(-EINVAL, "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key");
	pk = jwt_decode_pem(pem, len, private);
	if (!pk || !jwt_key_fits(m, pk) || (private && !jwt_has_private(pk))) {
		EVP_PKEY_free(pk);
		return errmsg_set(-EINVAL, "key is not a valid %s %s key", ec ? "ECDSA" : "RSA",
				  private ? "private" : "public");
	}
	if (!jwt_curve_fits(m, pk)) {
		EVP_PKEY_free(pk);
		return errmsg_set(-EINVAL, "key is invalid: %s needs a key on curve %s",
				  jwt_methods[m].name, jwt_methods[m].curve);
	}
	*out = pk;
	return 0;
}

int auth_jwt_key_new(enum auth_jwt_method m, const void *pub_pem, size_t pub_len,
		     const void *priv_pem, size_t priv_len, struct auth_jwt_key **out)
{
	EVP_PKEY *pub = NULL, *priv = NULL;
	struct auth_jwt_key *k;
	int rc;

	*out = NULL;
	if ((unsigned)m >= AUTH_JWT_METHOD_COUNT)
		return errmsg_set(-EINVAL, "auth: invalid auth signature method");
	if (!pub_pem)
		pub_len = 0;
	if (!priv_pem)
		priv_len = 0;
	k = auth_alloc(sizeof(*k));
	if (!k)
		return errmsg_set(-ENOMEM, "auth: out of memory for a JWT key");
	memset(k, 0, sizeof(*k));
	k->method = m;
	if (jwt_methods[m].family == JWT_HMAC) {
		if (priv_len == 0) {
			rc = errmsg_set(-ENOKEY, "auth: missing key data");
			goto out_free;
		}
		k->secret = auth_alloc(priv_len);
		if (!k->secret) {
			rc = errmsg_set(-ENOMEM, "auth: out of memory for a JWT key");
			goto out_free;
		}
		memcpy(k->secret, priv_pem, priv_len);
		k->secret_len = priv_len;
		*out = k;
		return 0;
	}
	if (priv_len && (rc = jwt_load(m, priv_pem, priv_len, true, &priv)))
		goto out_free;
	if (pub_len && (rc = jwt_load(m, pub_pem, pub_len, false, &pub)))
		goto out_free;
	if (!priv && !pub) {
		rc = errmsg_set(-ENOKEY, "auth: missing key data");
		goto out_free;
	}
	if (priv && pub && EVP_PKEY_eq(priv, pub) != 1) {
		rc = errmsg_set(-EKEYREJECTED, "auth: public and private keys don't match");
		goto out_free;
	}
	k->verify_only = !priv;
	k->pkey = priv ? priv : pub;
	if (priv)
		EVP_PKEY_free(pub);
	*out = k;
	return 0;

out_free:
	EVP_PKEY_free(priv);
	EVP_PKEY_free(pub);
	auth_jwt_key_free(k);
	return rc;
}

/* ---- signatures ---- */

/* Sets up ctx for a digest sign or verify of k's method. */
static int jwt_digest_init(const struct auth_jwt_key *k, EVP_MD_CTX *ctx, bool sign)
{
	const char *md = jwt_methods[k->method].digest;
	EVP_PKEY_CTX *pctx = NULL;
	int ok;

	ok = sign ? EVP_DigestSignInit_ex(ctx, &pctx, md, NULL, NULL, k->pkey, NULL)
		  : EVP_DigestVerifyInit_ex(ctx, &pctx, md, NULL, NULL, k->pkey, NULL);
	if (ok != 1)
		return -EIO;
	if (jwt_methods[k->method].family == JWT_PSS) {
		if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) != 1 ||
		    EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, sign ? RSA_PSS_SALTLEN_DIGEST
								: RSA_PSS_SALTLEN_AUTO) != 1)
			return -EIO;
	} else if (jwt_methods[k->method].family == JWT_RSA) {
		if (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
			return -EIO;
	}
	return 0;
}

/* The HMAC of data under k's secret into mac (EVP_MAX_MD_SIZE bytes). */
static int jwt_hmac(const struct auth_jwt_key *k, const void *data, size_t len, uint8_t *mac,
		    size_t *mac_len)
{
	if (!EVP_Q_mac(NULL, "HMAC", NULL, jwt_methods[k->method].digest, NULL, k->secret,
		       k->secret_len, data, len, mac, EVP_MAX_MD_SIZE, mac_len))
		return -EIO;
	return 0;
}

/* Signs data into sig (room for EVP_PKEY_get_size or EVP_MAX_MD_SIZE, at
 * least 2 * 66 bytes), as the JWT carries it. */
static int jwt_sign_raw(const struct auth_jwt_key *k, const void *data, size_t len,
			uint8_t *sig, size_t cap, size_t *sig_len)
{
	enum jwt_family fam = jwt_methods[k->method].family;
	EVP_MD_CTX *ctx;
	uint8_t *der = NULL;
	size_t der_len = 0;
	int rc = -EIO;

	if (fam == JWT_HMAC)
		return jwt_hmac(k, data, len, sig, sig_len);
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	if (jwt_digest_init(k, ctx, true))
		goto out;
	if (fam != JWT_EC) {
		*sig_len = cap;
		if (EVP_DigestSign(ctx, sig, sig_len, data, len) == 1)
			rc = 0;
		goto out;
	}
	/* ECDSA: OpenSSL gives DER; the JWT carries r || s */
	if (EVP_DigestSign(ctx, NULL, &der_len, data, len) != 1)
		goto out;
	der = OPENSSL_malloc(der_len);
	if (!der || EVP_DigestSign(ctx, der, &der_len, data, len) != 1)
		goto out;
	const unsigned char *p = der;
	ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
	size_t n = jwt_methods[k->method].coord_bytes;
	if (es && 2 * n <= cap && BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, (int)n) == (int)n &&
	    BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + n, (int)n) == (int)n) {
		*sig_len = 2 * n;
		rc = 0;
	}
	ECDSA_SIG_free(es);
out:
	OPENSSL_free(der);
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

/* 0 when sig verifies over data under k; -EBADMSG when it does not. */
static int jwt_verify_raw(const struct auth_jwt_key *k, const void *data, size_t len,
			  const uint8_t *sig, size_t sig_len)
{
	enum jwt_family fam = jwt_methods[k->method].family;
	uint8_t mac[EVP_MAX_MD_SIZE], *der = NULL;
	EVP_MD_CTX *ctx;
	int der_len = 0, rc = -EBADMSG;

	if (fam == JWT_HMAC) {
		size_t mac_len;
		if (jwt_hmac(k, data, len, mac, &mac_len))
			return -EIO;
		return mac_len == sig_len && CRYPTO_memcmp(mac, sig, sig_len) == 0 ? 0 : -EBADMSG;
	}
	if (fam == JWT_EC) {
		size_t n = jwt_methods[k->method].coord_bytes;
		if (sig_len != 2 * n)
			return -EBADMSG;
		ECDSA_SIG *es = ECDSA_SIG_new();
		BIGNUM *r = BN_bin2bn(sig, (int)n, NULL), *s = BN_bin2bn(sig + n, (int)n, NULL);
		if (!es || !r || !s || ECDSA_SIG_set0(es, r, s) != 1) {
			BN_free(r);
			BN_free(s);
			ECDSA_SIG_free(es);
			return -ENOMEM;
		}
		der_len = i2d_ECDSA_SIG(es, &der);
		ECDSA_SIG_free(es);
		if (der_len <= 0)
			return -ENOMEM;
		sig = der;
		sig_len = (size_t)der_len;
	}
	ctx = EVP_MD_CTX_new();
	if (!ctx) {
		rc = -ENOMEM;
		goto out;
	}
	if (jwt_digest_init(k, ctx, false) == 0 && EVP_DigestVerify(ctx, sig, sig_len, data, len) == 1)
		rc = 0;
	EVP_MD_CTX_free(ctx);
out:
	OPENSSL_free(der);
	ERR_clear_error();
	return rc;
}

/* ---- base64url ---- */

/* Appends base64url of p[0..n), without padding. */
static int jwt_put_b64(struct proto_json_buf *b, const void *p, size_t n)
{
	size_t need = 4 * ((n + 2) / 3) + 1;
	uint8_t *tmp = auth_alloc(need);
	int len, rc;

	if (!tmp)
		return -ENOMEM;
	len = EVP_EncodeBlock(tmp, p, (int)n);
	while (len > 0 && tmp[len - 1] == '=')
		len--;
	for (int i = 0; i < len; i++)
		tmp[i] = tmp[i] == '+' ? '-' : tmp[i] == '/' ? '_' : tmp[i];
	rc = proto_json_buf_append(b, tmp, (size_t)len);
	auth_free(tmp);
	return rc;
}

/* Decodes the base64url segment s[0..n) (no padding, as golang-jwt's
 * RawURLEncoding) into out (room for n bytes). */
static int jwt_b64_segment(const char *s, size_t n, uint8_t *out, size_t *out_len,
			   const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return errmsg_set(-EINVAL, "token is malformed: %s: illegal base64 data at "
					  "input byte %zu", what, i);
	}
	if (proto_json_base64_decode(s, n, out, out_len, &bad))
		return errmsg_set(-EINVAL, "token is malformed: %s: illegal base64 data at input "
				  "byte %zu", what, bad);
	return 0;
}

/* ---- signing ---- */

int auth_jwt_sign(const struct auth_jwt_key *k, const char *username, size_t username_len,
		  uint64_t revision, int64_t exp, char **token, size_t *token_len)
{
	struct proto_json_buf hdr = { 0 }, claims = { 0 }, out = { 0 };
	uint8_t sig[1024];
	size_t sig_len = 0;
	char num[64];
	int rc;

	*token = NULL;
	*token_len = 0;
	if (k->verify_only)
		return errmsg_set(-EPERM, "auth: token signing attempted with verify-only key");
	if (k->pkey && (size_t)EVP_PKEY_get_size(k->pkey) > sizeof(sig))
		return errmsg_set(-EIO, "auth: the %d-byte signatures of this key are too large",
				  EVP_PKEY_get_size(k->pkey));
	snprintf(num, sizeof(num), "{\"exp\":%lld,\"revision\":%llu,\"username\":",
		 (long long)exp, (unsigned long long)revision);
	rc = proto_json_buf_append(&hdr, "{\"alg\":\"", 8);
	rc = rc ?: proto_json_buf_append(&hdr, jwt_methods[k->method].name,
					 strlen(jwt_methods[k->method].name));
	rc = rc ?: proto_json_buf_append(&hdr, "\",\"typ\":\"JWT\"}", 14);
	rc = rc ?: proto_json_buf_append(&claims, num, strlen(num));
	rc = rc ?: proto_json_encode_string(&claims, username, username_len);
	rc = rc ?: proto_json_buf_append(&claims, "}", 1);
	rc = rc ?: jwt_put_b64(&out, hdr.data, hdr.len);
	rc = rc ?: proto_json_buf_append(&out, ".", 1);
	rc = rc ?: jwt_put_b64(&out, claims.data, claims.len);
	if (rc) {
		rc = errmsg_set(-ENOMEM, "auth: out of memory signing a JWT");
		goto out;
	}
	rc = jwt_sign_raw(k, out.data, out.len, sig, sizeof(sig), &sig_len);
	if (rc) {
		rc = errmsg_set(rc, "auth: signing a %s JWT failed in OpenSSL",
				jwt_methods[k->method].name);
		goto out;
	}
	rc = proto_json_buf_append(&out, ".", 1);
	rc = rc ?: jwt_put_b64(&out, sig, sig_len);
	if (rc) {
		rc = errmsg_set(-ENOMEM, "auth: out of memory signing a JWT");
		goto out;
	}
	*token = auth_alloc(out.len + 1);
	if (!*token) {
		rc = errmsg_set(-ENOMEM, "auth: out of memory signing a JWT");
		goto out;
	}
	memcpy(*token, out.data, out.len);
	(*token)[out.len] = 0;
	*token_len = out.len;
out:
	proto_json_buf_free(&hdr);
	proto_json_buf_free(&claims);
	proto_json_buf_free(&out);
	return rc;
}

/* ---- verifying ---- */

/* What the header and the claims hold, as the JSON walk finds them (the
 * last of a repeated key counts, as Go's map decoding). */
struct jwt_read {
	/* header */
	bool alg_seen, alg_string;
	char alg[16];
	size_t alg_len;
	/* claims */
	int user_kind, rev_kind, exp_kind, iat_kind, nbf_kind; /* -1: absent */
	char *user;
	size_t user_len;
	double rev, exp, iat, nbf;
};

/* A JSON number token as Go's float64 (strconv.ParseFloat). */
static double jwt_number(const struct proto_json_member *m)
{
	char buf[64];
	size_t n = m->value_len < sizeof(buf) - 1 ? m->value_len : sizeof(buf) - 1;

	if (m->value_len >= sizeof(buf)) {
		/* a longer token: strtod reads it whole from a copy */
		char *big = auth_alloc(m->value_len + 1);
		double v;
		if (!big)
			return NAN;
		memcpy(big, m->value, m->value_len);
		big[m->value_len] = 0;
		v = strtod(big, NULL);
		auth_free(big);
		return v;
	}
	memcpy(buf, m->value, n);
	buf[n] = 0;
	return strtod(buf, NULL);
}

static bool jwt_key_is(const struct proto_json_member *m, const char *k)
{
	return m->key_len == strlen(k) && memcmp(m->key, k, m->key_len) == 0;
}

static int jwt_header_member(void *arg, const struct proto_json_member *m)
{
	struct jwt_read *r = arg;

	if (!jwt_key_is(m, "alg"))
		return 0;
	r->alg_seen = true;
	r->alg_string = m->kind == PROTO_JSON_STRING;
	r->alg_len = 0;
	if (r->alg_string && m->value_len < sizeof(r->alg)) {
		memcpy(r->alg, m->value, m->value_len);
		r->alg_len = m->value_len;
	} else if (r->alg_string) {
		r->alg_len = sizeof(r->alg); /* no method's name is this long */
	}
	return 0;
}

static int jwt_claims_member(void *arg, const struct proto_json_member *m)
{
	struct jwt_read *r = arg;
	double v = m->kind == PROTO_JSON_NUMBER ? jwt_number(m) : 0;

	if (jwt_key_is(m, "username")) {
		r->user_kind = (int)m->kind;
		auth_free(r->user);
		r->user = NULL;
		r->user_len = 0;
		if (m->kind == PROTO_JSON_STRING) {
			r->user = auth_alloc(m->value_len + 1);
			if (!r->user)
				return -ENOMEM;
			memcpy(r->user, m->value, m->value_len);
			r->user[m->value_len] = 0;
			r->user_len = m->value_len;
		}
	} else if (jwt_key_is(m, "revision")) {
		r->rev_kind = (int)m->kind;
		r->rev = v;
	} else if (jwt_key_is(m, "exp")) {
		r->exp_kind = (int)m->kind;
		r->exp = v;
	} else if (jwt_key_is(m, "iat")) {
		r->iat_kind = (int)m->kind;
		r->iat = v;
	} else if (jwt_key_is(m, "nbf")) {
		r->nbf_kind = (int)m->kind;
		r->nbf = v;
	}
	return 0;
}

/* A time claim (exp, iat, nbf) as golang-jwt v3 reads it: absent or 0 is
 * no claim; otherwise a number, truncated to whole seconds. */
static int jwt_time_claim(int kind, double v, const char *name, int64_t *out)
{
	*out = 0;
	if (kind < 0)
		return 0;
	if (kind != PROTO_JSON_NUMBER || !isfinite(v) || v >= 9.2e18 || v <= -9.2e18)
		return errmsg_set(-EINVAL, "token has invalid claims: %s is not a number of seconds",
				  name);
	*out = (int64_t)v;
	return 0;
}

/* The JSON reader's buffers (a member's key and string value) come from
 * auth's allocator too, as every allocation of auth/ does. */
static void *jwt_json_alloc(void *data, size_t size)
{
	(void)data;
	return auth_alloc(size);
}

static void jwt_json_free(void *data, void *p)
{
	(void)data;
	auth_free(p);
}

static ProtobufCAllocator jwt_json_allocator = { .alloc = jwt_json_alloc, .free = jwt_json_free };

int auth_jwt_verify(const struct auth_jwt_key *k, const char *token, size_t len, int64_t now,
		    struct auth_jwt_claims *out)
{
	struct jwt_read r = { .user_kind = -1, .rev_kind = -1, .exp_kind = -1, .iat_kind = -1,
			      .nbf_kind = -1 };
	struct proto_json_err jerr;
	const char *dot1, *dot2;
	uint8_t *buf = NULL;
	size_t n;
	int64_t exp, iat, nbf;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > AUTH_JWT_MAX_TOKEN)
		return errmsg_set(-EINVAL, "token is malformed: %zu bytes, more than %u", len,
				  AUTH_JWT_MAX_TOKEN);
	dot1 = memchr(token, '.', len);
	dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
	if (!dot2 || memchr(dot2 + 1, '.', len - (size_t)(dot2 + 1 - token)))
		return errmsg_set(-EINVAL, "token contains an invalid number of segments");
	buf = auth_alloc(len + 1);
	if (!buf)
		return errmsg_set(-ENOMEM, "auth: out of memory verifying a JWT");

	/* the header: which method signed it */
	if ((rc = jwt_b64_segment(token, (size_t)(dot1 - token), buf, &n, "header")))
		goto out;
	rc = proto_json_object_each((const char *)buf, n, jwt_header_member, &r,
				    &jwt_json_allocator, &jerr);
	if (rc) {
		rc = errmsg_set(rc == -ENOMEM ? -ENOMEM : -EINVAL, "token is malformed: header: %s",
				rc == -ENOMEM ? "out of memory" : jerr.text);
		goto out;
	}
	if (!r.alg_seen || !r.alg_string) {
		rc = errmsg_set(-EINVAL, "signing method (alg) is unspecified.");
		goto out;
	}
	int m = auth_jwt_method_parse(r.alg, r.alg_len);
	if (m == -ENOENT) {
		rc = errmsg_set(-EINVAL, "signing method (alg) is unavailable.");
		goto out;
	}
	if (m != (int)k->method) {
		rc = errmsg_set(-EBADMSG, "invalid signing method");
		goto out;
	}

	/* the signature, over the first two segments as they were sent */
	const char *sig = dot2 + 1;
	if ((rc = jwt_b64_segment(sig, len - (size_t)(sig - token), buf, &n, "signature")))
		goto out;
	rc = jwt_verify_raw(k, token, (size_t)(dot2 - token), buf, n);
	if (rc) {
		rc = errmsg_set(rc, rc == -EBADMSG ? "token signature is invalid"
						   : "auth: verifying a JWT failed in OpenSSL");
		goto out;
	}

	/* the claims */
	if ((rc = jwt_b64_segment(dot1 + 1, (size_t)(dot2 - dot1 - 1), buf, &n, "claims")))
		goto out;
	rc = proto_json_object_each((const char *)buf, n, jwt_claims_member, &r,
				    &jwt_json_allocator, &jerr);
	if (rc) {
		rc = errmsg_set(rc == -ENOMEM ? -ENOMEM : -EINVAL, "token is malformed: claims: %s",
				rc == -ENOMEM ? "out of memory" : jerr.text);
		goto out;
	}
	if ((rc = jwt_time_claim(r.exp_kind, r.exp, "exp", &exp)) ||
	    (rc = jwt_time_claim(r.iat_kind, r.iat, "iat", &iat)) ||
	    (rc = jwt_time_claim(r.nbf_kind, r.nbf, "nbf", &nbf)))
		goto out;
	if (exp && now > exp) {
		rc = errmsg_set(-ETIME, "token is expired");
		goto out;
	}
	if (iat && now < iat) {
		rc = errmsg_set(-ETIME, "token used before issued");
		goto out;
	}
	if (nbf && now < nbf) {
		rc = errmsg_set(-ETIME, "token is not valid yet");
		goto out;
	}
	if (r.user_kind != PROTO_JSON_STRING) {
		rc = errmsg_set(-EINVAL, "token has invalid claims: no string username");
		goto out;
	}
	if (r.rev_kind != PROTO_JSON_NUMBER || !(r.rev >= 0) || r.rev >= 18446744073709551616.0) {
		rc = errmsg_set(-EINVAL, "token has invalid claims: no revision number");
		goto out;
	}
	out->username = r.user;
	out->username_len = r.user_len;
	out->revision = (uint64_t)r.rev;
	out->exp = exp;
	r.user = NULL;
	rc = 0;
out:
	auth_free(r.user);
	auth_free(buf);
	return rc;
}

void auth_jwt_claims_free(struct auth_jwt_claims *c)
{
	auth_free(c->username);
	memset(c, 0, sizeof(*c));
}
