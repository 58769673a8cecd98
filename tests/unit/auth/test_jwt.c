/*
 * test_jwt: auth/jwt.c, JWTs as etcd 3.4 makes and checks them. Every
 * method signs and verifies with keys made here; the header and claims
 * are decoded and compared with what etcd's golang-jwt writes; a token
 * changed anywhere, signed by another key or method, expired or not yet
 * valid is refused with its error; a public key alone only verifies;
 * keys of the wrong kind or curve, or not PEM, are refused with
 * golang-jwt's texts; malformed tokens of every shape are errors; a
 * token Debian's etcd 3.4 issued verifies, and cetcd writes its header
 * and claims byte for byte; and
 * every allocation failure is an error that leaks nothing.
 */
#include "shm_testlib.h"
#include "auth_util.h"

#include "auth/alloc.h"
#include "auth/jwt.h"
#include "base/log/errmsg.h"
#include "proto/json.h"

#define NOW 1700000000ll

static struct auth_util_pem rsa, rsa2, p256, p384, p521;

/* The PEM pair a method's keys come from. */
static const struct auth_util_pem *pem_for(enum auth_jwt_method m)
{
	switch (m) {
	case AUTH_JWT_ES256: return &p256;
	case AUTH_JWT_ES384: return &p384;
	case AUTH_JWT_ES512: return &p521;
	default: return &rsa;
	}
}

static struct auth_jwt_key *key_for(enum auth_jwt_method m, bool with_pub, bool with_priv)
{
	const struct auth_util_pem *p = pem_for(m);
	struct auth_jwt_key *k = NULL;
	int rc;

	if (m >= AUTH_JWT_HS256) /* HMAC: the priv-key file's bytes are the secret */
		rc = auth_jwt_key_new(m, NULL, 0, AUTH_UTIL_SECRET, strlen(AUTH_UTIL_SECRET), &k);
	else
		rc = auth_jwt_key_new(m, with_pub ? p->pub : NULL, p->pub_len,
				      with_priv ? p->priv : NULL, p->priv_len, &k);
	if (rc)
		fprintf(stderr, "key for %s: %s\n", auth_jwt_method_name(m), errmsg_get(rc));
	CHECK_EQ(rc, 0);
	return k;
}

/* Decodes the base64url segment seg of token (0, 1, 2) into out. */
static size_t segment(const char *token, int seg, char *out, size_t cap)
{
	const char *s = token, *e;
	size_t n, bad;

	for (int i = 0; i < seg; i++)
		s = strchr(s, '.') + 1;
	e = strchr(s, '.');
	n = e ? (size_t)(e - s) : strlen(s);
	CHECK(n * 3 / 4 + 1 < cap);
	CHECK_EQ(proto_json_base64_decode(s, n, (uint8_t *)out, &n, &bad), 0);
	out[n] = 0;
	return n;
}

static void test_round_trip(void)
{
	for (int m = 0; m < AUTH_JWT_METHOD_COUNT; m++) {
		struct auth_jwt_key *k = key_for(m, true, true);
		struct auth_jwt_claims c;
		char *tok, text[4096], want[256];
		size_t len;

		CHECK(!auth_jwt_key_verify_only(k));
		CHECK_EQ(auth_jwt_key_method(k), m);
		CHECK_EQ(auth_jwt_sign(k, "root<&>", 7, 42, NOW + 300, &tok, &len), 0);
		CHECK_EQ(strlen(tok), len);
		CHECK(!strchr(tok, '=') && !strchr(tok, '+') && !strchr(tok, '/'));

		/* what golang-jwt writes: sorted keys, Go's escapes */
		segment(tok, 0, text, sizeof(text));
		snprintf(want, sizeof(want), "{\"alg\":\"%s\",\"typ\":\"JWT\"}", auth_jwt_method_name(m));
		CHECK(strcmp(text, want) == 0);
		segment(tok, 1, text, sizeof(text));
		snprintf(want, sizeof(want), "{\"exp\":%lld,\"revision\":42,"
			 "\"username\":\"root\\u003c\\u0026\\u003e\"}", NOW + 300);
		CHECK(strcmp(text, want) == 0);
		size_t sig_len = segment(tok, 2, text, sizeof(text));
		if (m >= AUTH_JWT_ES256 && m <= AUTH_JWT_ES512)
			CHECK_EQ(sig_len, m == AUTH_JWT_ES256 ? 64 : m == AUTH_JWT_ES384 ? 96 : 132);

		CHECK_EQ(auth_jwt_verify(k, tok, len, NOW, &c), 0);
		CHECK_EQ(c.username_len, 7);
		CHECK(memcmp(c.username, "root<&>", 7) == 0);
		CHECK_EQ(c.revision, 42);
		CHECK_EQ(c.exp, NOW + 300);
		auth_jwt_claims_free(&c);

		/* good through its exp second, expired after it */
		CHECK_EQ(auth_jwt_verify(k, tok, len, NOW + 300, &c), 0);
		auth_jwt_claims_free(&c);
		CHECK_EQ(auth_jwt_verify(k, tok, len, NOW + 301, &c), -ETIME);
		CHECK(strcmp(errmsg_get(-ETIME), "token is expired") == 0);
		CHECK(c.username == NULL);

		/* every byte changed is refused (the signature's last
		 * character may carry unused bits: change it wholly) */
		for (size_t i = 0; i < len; i++) {
			char save = tok[i];
			tok[i] = tok[i] == 'A' ? 'B' : 'A';
			int rc = auth_jwt_verify(k, tok, len, NOW, &c);
			if (rc == 0) {
				/* only a base64 character whose changed bits
				 * are the padding bits of the last one */
				CHECK(i == len - 1);
				auth_jwt_claims_free(&c);
			}
			tok[i] = save;
		}
		/* cut short anywhere */
		for (size_t i = 0; i < len; i++)
			CHECK(auth_jwt_verify(k, tok, i, NOW, &c) != 0);
		auth_free(tok);
		auth_jwt_key_free(k);
	}
}

/* A token Debian's etcd 3.4.23 issued to Authenticate (root, auth
 * revision 3), started with --auth-token
 * jwt,pub-key=...,priv-key=...,sign-method=ES256,ttl=5m and this key
 * (made for the test, nothing else). */
static const char etcd_es256_priv[] =
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgrKtiZ4hZbNVDvtI9\n"
	"CVToOLZSJtIZl0l9T23f+fXKDbahRANCAARHus1A4Da4JPtnFElBmsDq9+QLoJPB\n"
	"gr83YWDQmB+JYSWG0Zr1kvBPqDNytnoEeBtA6RLHEVxkqT+rNrK2XV4p\n"
	"-----END PRIVATE KEY-----\n";
static const char etcd_es256_pub[] =
	"-----BEGIN PUBLIC KEY-----\n"
	"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAER7rNQOA2uCT7ZxRJQZrA6vfkC6CT\n"
	"wYK/N2Fg0JgfiWElhtGa9ZLwT6gzcrZ6BHgbQOkSxxFcZKk/qzaytl1eKQ==\n"
	"-----END PUBLIC KEY-----\n";
static const char etcd_token[] =
	"eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9."
	"eyJleHAiOjE3OTY1NjAwNTIsInJldmlzaW9uIjozLCJ1c2VybmFtZSI6InJvb3QifQ."
	"cAfNH8IncMQPAmjEclzlMQ3fbG5ofcP5fMRaLzJSmFGIYRVwOgbYFFoBummMdeJ2h8ZgNhUC4JT8_1B0AnumKA";
#define ETCD_TOKEN_ISSUED 1796559752ll
#define ETCD_TOKEN_EXP 1796560052ll

/* cetcd verifies etcd's token, and signs the same claims with the same
 * key into the same header and claims bytes (an ES256 signature is
 * random, so only those can be compared). */
static void test_etcd_token(void)
{
	struct auth_jwt_key *pub = NULL, *priv = NULL;
	struct auth_jwt_claims c;
	size_t len, head = strrchr(etcd_token, '.') - etcd_token;
	char *tok;

	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES256, etcd_es256_pub, strlen(etcd_es256_pub), NULL, 0,
				  &pub), 0);
	CHECK_EQ(auth_jwt_verify(pub, etcd_token, strlen(etcd_token), ETCD_TOKEN_ISSUED, &c), 0);
	CHECK(strcmp(c.username, "root") == 0);
	CHECK_EQ(c.revision, 3);
	CHECK_EQ(c.exp, ETCD_TOKEN_EXP);
	auth_jwt_claims_free(&c);
	CHECK_EQ(auth_jwt_verify(pub, etcd_token, strlen(etcd_token), ETCD_TOKEN_EXP + 1, &c), -ETIME);

	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES256, etcd_es256_pub, strlen(etcd_es256_pub),
				  etcd_es256_priv, strlen(etcd_es256_priv), &priv), 0);
	CHECK_EQ(auth_jwt_sign(priv, "root", 4, 3, ETCD_TOKEN_EXP, &tok, &len), 0);
	CHECK(len > head && memcmp(tok, etcd_token, head + 1) == 0);
	CHECK_EQ(auth_jwt_verify(pub, tok, len, ETCD_TOKEN_ISSUED, &c), 0);
	auth_jwt_claims_free(&c);
	auth_free(tok);
	auth_jwt_key_free(pub);
	auth_jwt_key_free(priv);
}

/* A public key alone verifies what its private half signed, and signs
 * nothing. */
static void test_verify_only(void)
{
	for (int m = AUTH_JWT_RS256; m <= AUTH_JWT_ES512; m++) {
		struct auth_jwt_key *signer = key_for(m, false, true), *verifier = key_for(m, true, false);
		struct auth_jwt_claims c;
		char *tok;
		size_t len;

		CHECK(auth_jwt_key_verify_only(verifier));
		CHECK(!auth_jwt_key_verify_only(signer));
		CHECK_EQ(auth_jwt_sign(signer, "u", 1, 1, NOW + 5, &tok, &len), 0);
		CHECK_EQ(auth_jwt_verify(verifier, tok, len, NOW, &c), 0);
		auth_jwt_claims_free(&c);
		auth_free(tok);
		CHECK_EQ(auth_jwt_sign(verifier, "u", 1, 1, NOW + 5, &tok, &len), -EPERM);
		CHECK(strcmp(errmsg_get(-EPERM),
			     "auth: token signing attempted with verify-only key") == 0);
		CHECK(tok == NULL);
		auth_jwt_key_free(signer);
		auth_jwt_key_free(verifier);
	}
}

/* Another key, or another method on the same key, is refused. */
static void test_wrong_key_and_method(void)
{
	struct auth_jwt_key *a = NULL, *b = NULL, *ps = NULL, *rs512 = NULL;
	struct auth_jwt_claims c;
	char *tok;
	size_t len;

	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, NULL, 0, rsa.priv, rsa.priv_len, &a), 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, NULL, 0, rsa2.priv, rsa2.priv_len, &b), 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_PS256, NULL, 0, rsa.priv, rsa.priv_len, &ps), 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS512, NULL, 0, rsa.priv, rsa.priv_len, &rs512), 0);
	CHECK_EQ(auth_jwt_sign(a, "u", 1, 1, 0, &tok, &len), 0);
	CHECK_EQ(auth_jwt_verify(a, tok, len, NOW, &c), 0); /* exp 0: none */
	CHECK_EQ(c.exp, 0);
	auth_jwt_claims_free(&c);
	CHECK_EQ(auth_jwt_verify(b, tok, len, NOW, &c), -EBADMSG);
	CHECK(strcmp(errmsg_get(-EBADMSG), "token signature is invalid") == 0);
	CHECK_EQ(auth_jwt_verify(ps, tok, len, NOW, &c), -EBADMSG);
	CHECK(strcmp(errmsg_get(-EBADMSG), "invalid signing method") == 0);
	CHECK_EQ(auth_jwt_verify(rs512, tok, len, NOW, &c), -EBADMSG);
	auth_free(tok);
	auth_jwt_key_free(a);
	auth_jwt_key_free(b);
	auth_jwt_key_free(ps);
	auth_jwt_key_free(rs512);
}

/* Well signed, but claims and headers etcd would not take (or would
 * crash on: etcd's info asserts username's and revision's types). */
static void test_claims(void)
{
	static const struct {
		const char *header, *claims;
		int rc;
		const char *text;
	} cases[] = {
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3}", 0, NULL },
		{ "{\"typ\":\"JWT\",\"alg\":\"HS256\",\"kid\":[1,{}]}",
		  "{\"username\":\"u\",\"revision\":3.0,\"other\":{\"a\":[true,null]}}", 0, NULL },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3,\"exp\":1699999999}",
		  -ETIME, "token is expired" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3,\"nbf\":1700000001}",
		  -ETIME, "token is not valid yet" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3,\"iat\":1700000001}",
		  -ETIME, "token used before issued" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3,\"iat\":1700000000,"
		  "\"nbf\":1700000000,\"exp\":1700000000}", 0, NULL },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3,\"exp\":\"soon\"}",
		  -EINVAL, "token has invalid claims: exp is not a number of seconds" },
		{ "{\"alg\":\"HS256\"}", "{\"revision\":3}", -EINVAL,
		  "token has invalid claims: no string username" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":7,\"revision\":3}", -EINVAL,
		  "token has invalid claims: no string username" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\"}", -EINVAL,
		  "token has invalid claims: no revision number" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":-1}", -EINVAL,
		  "token has invalid claims: no revision number" },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":\"3\"}", -EINVAL,
		  "token has invalid claims: no revision number" },
		{ "{\"alg\":\"HS256\"}", "[1]", -EINVAL, NULL },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3} x", -EINVAL, NULL },
		{ "{\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3", -EINVAL, NULL },
		{ "{\"alg\":\"HS256\"} ", "{\"username\":\"u\",\"revision\":3}", 0, NULL },
		{ "{\"alg\":\"HS384\"}", "{\"username\":\"u\",\"revision\":3}", -EBADMSG,
		  "invalid signing method" },
		{ "{\"alg\":\"none\"}", "{\"username\":\"u\",\"revision\":3}", -EBADMSG,
		  "invalid signing method" },
		{ "{\"alg\":\"XX999\"}", "{\"username\":\"u\",\"revision\":3}", -EINVAL,
		  "signing method (alg) is unavailable." },
		{ "{\"alg\":5}", "{\"username\":\"u\",\"revision\":3}", -EINVAL,
		  "signing method (alg) is unspecified." },
		{ "{}", "{\"username\":\"u\",\"revision\":3}", -EINVAL,
		  "signing method (alg) is unspecified." },
		{ "{\"alg\":\"HS256\",\"alg\":\"RS256\"}", "{\"username\":\"u\",\"revision\":3}",
		  -EBADMSG, "invalid signing method" },
		{ "{\"alg\":\"RS256\",\"alg\":\"HS256\"}", "{\"username\":\"u\",\"revision\":3}",
		  0, NULL },
	};
	struct auth_jwt_key *k = key_for(AUTH_JWT_HS256, false, true);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct auth_jwt_claims c;
		char *tok = auth_util_forge_hs256(cases[i].header, strlen(cases[i].header),
						 cases[i].claims, strlen(cases[i].claims));
		int rc = auth_jwt_verify(k, tok, strlen(tok), NOW, &c);

		if (rc != cases[i].rc || (cases[i].text && strcmp(errmsg_get(rc), cases[i].text)))
			fprintf(stderr, "case %zu: %d %s\n", i, rc, rc ? errmsg_get(rc) : "");
		CHECK_EQ(rc, cases[i].rc);
		if (cases[i].text)
			CHECK(strcmp(errmsg_get(rc), cases[i].text) == 0);
		if (rc == 0) {
			CHECK(strcmp(c.username, "u") == 0);
			CHECK_EQ(c.revision, 3);
		}
		auth_jwt_claims_free(&c);
		free(tok);
	}
	auth_jwt_key_free(k);
}

/* Shapes that are not tokens at all. */
static void test_malformed(void)
{
	static const char *const bad[] = {
		"", ".", "..", "...", "a.b", "a.b.c.d", "eyJhbGciOiJIUzI1NiJ9..",
		"eyJhbGciOiJIUzI1NiJ9.e30.", "e30.e30.e30", "!!.e30.e30", "eyJhbGciOiJIUzI1NiJ9=.e30.AA",
		"eyJhbGciOiJIUzI1NiJ9.e30.A", "eyJhbGciOiJIUzI1NiJ9.e30.AA+/", "\xff\xfe.\x00.x",
		"bearer eyJhbGciOiJIUzI1NiJ9.e30.AA",
	};
	struct auth_jwt_key *k = key_for(AUTH_JWT_HS256, false, true);
	struct auth_jwt_claims c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = auth_jwt_verify(k, bad[i], strlen(bad[i]) + (i == 13 ? 2 : 0), NOW, &c);
		CHECK(rc == -EINVAL || rc == -EBADMSG);
		CHECK(c.username == NULL);
	}
	char *big = malloc(AUTH_JWT_MAX_TOKEN + 2);
	memset(big, 'A', AUTH_JWT_MAX_TOKEN + 1);
	big[10] = big[20] = '.';
	CHECK_EQ(auth_jwt_verify(k, big, AUTH_JWT_MAX_TOKEN + 1, NOW, &c), -EINVAL);
	free(big);
	auth_jwt_key_free(k);
}

static void test_keys(void)
{
	struct auth_jwt_key *k = (struct auth_jwt_key *)1;

	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, NULL, 0, NULL, 0, &k), -ENOKEY);
	CHECK(k == NULL);
	CHECK(strcmp(errmsg_get(-ENOKEY), "auth: missing key data") == 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_HS256, rsa.pub, rsa.pub_len, NULL, 0, &k), -ENOKEY);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, "hello", 5, NULL, 0, &k), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL),
		     "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key") == 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, NULL, 0, p256.priv, p256.priv_len, &k), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL), "key is not a valid RSA private key") == 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES256, rsa.pub, rsa.pub_len, NULL, 0, &k), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL), "key is not a valid ECDSA public key") == 0);
	/* a public key given as the private one */
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, NULL, 0, rsa.pub, rsa.pub_len, &k), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL), "key is not a valid RSA private key") == 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES256, NULL, 0, p384.priv, p384.priv_len, &k), -EINVAL);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES512, p256.pub, p256.pub_len, NULL, 0, &k), -EINVAL);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_RS256, rsa2.pub, rsa2.pub_len, rsa.priv, rsa.priv_len, &k),
		 -EKEYREJECTED);
	CHECK(strcmp(errmsg_get(-EKEYREJECTED), "auth: public and private keys don't match") == 0);
	CHECK_EQ(auth_jwt_key_new(AUTH_JWT_ES256, p256.pub, p256.pub_len, p256.priv, p256.priv_len,
				  &k), 0);
	auth_jwt_key_free(k);

	CHECK_EQ(auth_jwt_method_parse("PS384", 5), AUTH_JWT_PS384);
	CHECK_EQ(auth_jwt_method_parse("PS38", 4), -ENOENT);
	CHECK_EQ(auth_jwt_method_parse("none", 4), -ENOTSUP);
	CHECK(strcmp(errmsg_get(-ENOTSUP), "unsupported signing method: *jwt.signingMethodNone") == 0);
	CHECK_EQ(auth_jwt_method_parse("EdDSA", 5), -ENOTSUP);
}

/* Every allocation failure in key making, signing and verifying is
 * -ENOMEM (or, inside OpenSSL, -EIO) and leaks nothing. */
static void test_alloc_failures(void)
{
	auth_set_allocator(auth_util_alloc, auth_util_free);
	for (int m = AUTH_JWT_RS256; m < AUTH_JWT_METHOD_COUNT; m += 3) {
		for (long n = 0;; n++) {
			struct auth_jwt_key *k = NULL;
			struct auth_jwt_claims c;
			char *tok = NULL;
			size_t len;
			int rc;

			auth_util_budget = n;
			const struct auth_util_pem *p = pem_for(m);
			rc = m >= AUTH_JWT_HS256 ? auth_jwt_key_new(m, NULL, 0, "s", 1, &k)
						 : auth_jwt_key_new(m, NULL, 0, p->priv, p->priv_len, &k);
			if (!rc)
				rc = auth_jwt_sign(k, "user", 4, 9, NOW + 1, &tok, &len);
			if (!rc) {
				rc = auth_jwt_verify(k, tok, len, NOW, &c);
				if (!rc)
					auth_jwt_claims_free(&c);
			}
			auth_util_budget = -1;
			auth_free(tok);
			auth_jwt_key_free(k);
			CHECK_EQ(auth_util_live, 0);
			if (rc == 0)
				break;
			CHECK(rc == -ENOMEM || rc == -EIO);
		}
	}
	auth_set_allocator(NULL, NULL);
}

int main(void)
{
	auth_util_keygen("RSA", NULL, &rsa);
	auth_util_keygen("RSA", NULL, &rsa2);
	auth_util_keygen("EC", "P-256", &p256);
	auth_util_keygen("EC", "P-384", &p384);
	auth_util_keygen("EC", "P-521", &p521);
	test_round_trip();
	test_etcd_token();
	test_verify_only();
	test_wrong_key_and_method();
	test_claims();
	test_malformed();
	test_keys();
	test_alloc_failures();
	auth_util_pem_free(&rsa);
	auth_util_pem_free(&rsa2);
	auth_util_pem_free(&p256);
	auth_util_pem_free(&p384);
	auth_util_pem_free(&p521);
	printf("test_jwt: ok\n");
	return 0;
}
