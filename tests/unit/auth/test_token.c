/*
 * test_token: auth/token.c, --auth-token and --auth-token-ttl as etcd 3.4
 * takes them (the options, their defaults, which keys each method needs,
 * and etcd's errors, checked against what Debian's etcd 3.4 prints), and
 * simple tokens: their letters (drawn evenly), their format and the index
 * etcd reads back from them.
 */
#include "shm_testlib.h"
#include "auth_util.h"

#include <limits.h>

#include "auth/alloc.h"
#include "auth/token.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"

static char dir[64], rsa_priv[PATH_MAX], rsa_pub[PATH_MAX], ec_priv[PATH_MAX],
	ec_pub[PATH_MAX], rsa2_pub[PATH_MAX];

/* Parses spec and checks the code and the start of errmsg's text. */
static struct auth_token_opts *parse(const char *spec, uint64_t ttl_s, int want_rc,
				     const char *want_text)
{
	struct auth_token_opts *o = NULL;
	int rc = auth_token_opts_parse(spec, ttl_s, &o);

	if (rc != want_rc || (want_text && strncmp(errmsg_get(rc), want_text, strlen(want_text))))
		fprintf(stderr, "%s: %d %s\n", spec, rc, rc ? errmsg_get(rc) : "");
	CHECK_EQ(rc, want_rc);
	if (want_text)
		CHECK(strncmp(errmsg_get(rc), want_text, strlen(want_text)) == 0);
	CHECK((rc == 0) == (o != NULL));
	return o;
}

static void test_simple_and_none(void)
{
	struct auth_token_opts *o;

	o = parse("simple", 300, 0, NULL);
	CHECK_EQ(o->type, AUTH_TOKEN_SIMPLE);
	CHECK_EQ(o->simple_ttl_ms, 300000);
	CHECK(o->jwt == NULL);
	auth_token_opts_free(o);
	o = parse("simple", 7, 0, NULL);
	CHECK_EQ(o->simple_ttl_ms, 7000);
	auth_token_opts_free(o);
	/* etcd's enable(): a TTL of 0 is the default */
	o = parse("simple", 0, 0, NULL);
	CHECK_EQ(o->simple_ttl_ms, 300000);
	auth_token_opts_free(o);
	/* simple ignores well-formed options */
	o = parse("simple,ttl=1s,x=y", 300, 0, NULL);
	CHECK_EQ(o->type, AUTH_TOKEN_SIMPLE);
	auth_token_opts_free(o);
	o = parse("", 300, 0, NULL);
	CHECK_EQ(o->type, AUTH_TOKEN_NONE);
	auth_token_opts_free(o);
}

/* Each error as Debian's etcd 3.4.23 reports it at start (its final
 * line, then what it logged before). */
static void test_errors(void)
{
	char spec[4 * PATH_MAX];

	parse("foo", 300, -EINVAL, "auth: invalid auth options (unknown token type: foo)");
	parse("simple,x", 300, -EINVAL,
	      "auth: invalid auth options (invalid token specific option: simple,x)");
	parse("simple,a=b=c", 300, -EINVAL, "auth: invalid auth options (invalid token specific");
	parse("jwt,sign-method=RS256,,", 300, -EINVAL,
	      "auth: invalid auth options (invalid token specific option: jwt,sign-method=RS256,,)");
	parse("jwt,a=b,a=c", 300, -EINVAL, "auth: invalid auth options (invalid token specific "
	      "option, duplicated parameters (a): jwt,a=b,a=c)");
	parse("jwt", 300, -EINVAL, "auth: invalid auth options (problem loading JWT options: "
	      "auth: invalid auth signature method)");
	parse("jwt,sign-method=XS256,priv-key=/x", 300, -EINVAL, "auth: invalid auth options");
	parse("jwt,sign-method=RS256", 300, -ENOKEY, "auth: missing key data");
	parse("jwt,sign-method=RS256,pub-key=/nonexist", 300, -EINVAL,
	      "auth: invalid auth options (problem loading JWT options: open /nonexist: no such "
	      "file or directory)");
	parse("jwt,sign-method=RS256,pub-key=/", 300, -EINVAL,
	      "auth: invalid auth options (problem loading JWT options: read /: is a directory)");
	snprintf(spec, sizeof(spec), "jwt,sign-method=RS256,pub-key=%s,ttl=5x", rsa_pub);
	parse(spec, 300, -EINVAL, "auth: invalid auth options (problem loading JWT options: "
	      "time: unknown unit \"x\" in duration \"5x\")");
	parse("jwt,sign-method=RS256,priv-key=/etc/hostname", 300, -EINVAL,
	      "invalid key: Key must be a PEM encoded PKCS1 or PKCS8 key");
	parse("jwt,sign-method=none,pub-key=/etc/hostname", 300, -ENOTSUP,
	      "unsupported signing method: *jwt.signingMethodNone");
	parse("jwt,sign-method=EdDSA,pub-key=/etc/hostname", 300, -ENOTSUP,
	      "unsupported signing method: *jwt.SigningMethodEd25519");
	snprintf(spec, sizeof(spec), "jwt,sign-method=ES256,priv-key=%s", rsa_priv);
	parse(spec, 300, -EINVAL, "key is not a valid ECDSA private key");
	snprintf(spec, sizeof(spec), "jwt,sign-method=RS256,priv-key=%s,pub-key=%s", rsa_priv,
		 rsa2_pub);
	parse(spec, 300, -EKEYREJECTED, "auth: public and private keys don't match");
}

static void test_jwt(void)
{
	static const char *const methods[] = { "RS256", "RS384", "RS512", "PS256", "PS384",
					       "PS512", "ES256", "HS512" };
	char spec[4 * PATH_MAX];
	struct auth_token_opts *o;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		bool ec = methods[i][0] == 'E';
		const char *priv = ec ? ec_priv : rsa_priv, *pub = ec ? ec_pub : rsa_pub;

		snprintf(spec, sizeof(spec), "jwt,pub-key=%s,priv-key=%s,sign-method=%s,ttl=1h30m",
			 pub, priv, methods[i]);
		o = parse(spec, 300, 0, NULL);
		CHECK_EQ(o->type, AUTH_TOKEN_JWT);
		CHECK_EQ(o->jwt_ttl_ns, 5400ll * 1000000000);
		CHECK(strcmp(auth_jwt_method_name(auth_jwt_key_method(o->jwt)), methods[i]) == 0);
		CHECK(!auth_jwt_key_verify_only(o->jwt));
		auth_token_opts_free(o);
		if (methods[i][0] == 'H')
			continue;
		/* a public key alone: verify only; ttl defaults to 5m */
		snprintf(spec, sizeof(spec), "jwt,sign-method=%s,pub-key=%s", methods[i], pub);
		o = parse(spec, 300, 0, NULL);
		CHECK(auth_jwt_key_verify_only(o->jwt));
		CHECK_EQ(o->jwt_ttl_ns, AUTH_TOKEN_JWT_TTL_DEFAULT_NS);
		auth_token_opts_free(o);
	}
	/* an unknown option is warned of, not refused; an empty value is as
	 * good as none */
	snprintf(spec, sizeof(spec), "jwt,sign-method=RS256,priv-key=%s,foo=bar,pub-key=,ttl=",
		 rsa_priv);
	o = parse(spec, 300, 0, NULL);
	CHECK_EQ(o->jwt_ttl_ns, AUTH_TOKEN_JWT_TTL_DEFAULT_NS);
	CHECK(!auth_jwt_key_verify_only(o->jwt));
	auth_token_opts_free(o);
	/* HS methods key with priv-key only */
	snprintf(spec, sizeof(spec), "jwt,sign-method=HS256,pub-key=%s", rsa_pub);
	parse(spec, 300, -ENOKEY, "auth: missing key data");
}

/* The spec etcd's e2e suite runs its JWT tests with (tests/e2e's
 * cluster_test.go): a certificate as pub-key and a PKCS#1 "RSA PRIVATE
 * KEY" as priv-key, from Debian's golang-etcd-server-dev (not checked
 * without it); and its ECDSA pair (SEC1 "EC PRIVATE KEY"). */
#define ETCD_FIXTURES "/usr/share/gocode/src/go.etcd.io/etcd/integration/fixtures/"
static void test_etcd_fixtures(void)
{
	static const char *const specs[] = {
		"jwt,pub-key=" ETCD_FIXTURES "server.crt,priv-key=" ETCD_FIXTURES
		"server.key.insecure,sign-method=RS256,ttl=1s",
		"jwt,pub-key=" ETCD_FIXTURES "server-ecdsa.crt,priv-key=" ETCD_FIXTURES
		"server-ecdsa.key.insecure,sign-method=ES256",
	};
	struct auth_token_opts *o, *v;
	struct auth_jwt_claims c;
	char *tok;
	size_t len;

	if (access(ETCD_FIXTURES "server.crt", R_OK) != 0) {
		printf("etcd's fixtures are not installed (golang-etcd-server-dev): not checked\n");
		return;
	}
	for (size_t i = 0; i < 2; i++) {
		o = parse(specs[i], 300, 0, NULL);
		CHECK(!auth_jwt_key_verify_only(o->jwt));
		CHECK_EQ(o->jwt_ttl_ns, i == 0 ? 1000000000ll : AUTH_TOKEN_JWT_TTL_DEFAULT_NS);
		CHECK_EQ(auth_jwt_sign(o->jwt, "root", 4, 2, 1700000001, &tok, &len), 0);
		/* the certificate alone verifies it */
		char spec[512];
		int pub_len = (int)(strstr(specs[i], ",priv-key") - specs[i]);
		snprintf(spec, sizeof(spec), "%.*s,sign-method=%s", pub_len, specs[i],
			 i == 0 ? "RS256" : "ES256");
		v = parse(spec, 300, 0, NULL);
		CHECK(auth_jwt_key_verify_only(v->jwt));
		CHECK_EQ(auth_jwt_verify(v->jwt, tok, len, 1700000000, &c), 0);
		CHECK(strcmp(c.username, "root") == 0);
		auth_jwt_claims_free(&c);
		auth_free(tok);
		auth_token_opts_free(v);
		auth_token_opts_free(o);
	}
	/* another certificate's key beside server.key: refused */
	parse("jwt,pub-key=" ETCD_FIXTURES "server2.crt,priv-key=" ETCD_FIXTURES
	      "server.key.insecure,sign-method=RS256", 300, -EKEYREJECTED,
	      "auth: public and private keys don't match");
}

/* No leak on any path, and every allocation failure is -ENOMEM. */
static void test_alloc_failures(void)
{
	char spec[4 * PATH_MAX];

	snprintf(spec, sizeof(spec), "jwt,pub-key=%s,priv-key=%s,sign-method=ES256", ec_pub, ec_priv);
	auth_set_allocator(auth_util_alloc, auth_util_free);
	for (long n = 0;; n++) {
		struct auth_token_opts *o = NULL;
		auth_util_budget = n;
		int rc = auth_token_opts_parse(spec, 300, &o);
		auth_util_budget = -1;
		auth_token_opts_free(o);
		CHECK_EQ(auth_util_live, 0);
		if (!rc)
			break;
		CHECK_EQ(rc, -ENOMEM);
	}
	parse("jwt,sign-method=RS256", 300, -ENOKEY, NULL);
	parse("foo", 300, -EINVAL, NULL);
	CHECK_EQ(auth_util_live, 0);
	auth_set_allocator(NULL, NULL);
}

static void test_simple_tokens(void)
{
	char prefix[AUTH_TOKEN_SIMPLE_PREFIX_LEN + 1], tok[AUTH_TOKEN_SIMPLE_MAX + 1], other[17];
	long counts[128] = { 0 };
	const int draws = 20000;
	uint64_t index;

	for (int i = 0; i < draws; i++) {
		CHECK_EQ(auth_token_simple_prefix(prefix), 0);
		CHECK_EQ(strlen(prefix), AUTH_TOKEN_SIMPLE_PREFIX_LEN);
		for (int j = 0; j < 16; j++) {
			char c = prefix[j];
			CHECK((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
			counts[(int)c]++;
		}
	}
	/* 320000 letters over 52: each about 6154; a chi-square over 51
	 * degrees of freedom beyond 120 has odds far below one in a
	 * million for an even draw */
	double expect = draws * 16.0 / 52, chi = 0;
	for (int c = 0; c < 128; c++)
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			chi += (counts[c] - expect) * (counts[c] - expect) / expect;
	CHECK(chi < 120);
	CHECK_EQ(auth_token_simple_prefix(other), 0);
	CHECK(strcmp(other, prefix) != 0);

	CHECK_EQ(auth_token_simple_format("NXkgQsLLrRYaBnvP", 23, tok), 19);
	CHECK(strcmp(tok, "NXkgQsLLrRYaBnvP.23") == 0);
	CHECK_EQ(auth_token_simple_format("NXkgQsLLrRYaBnvP", UINT64_MAX, tok), AUTH_TOKEN_SIMPLE_MAX);
	CHECK(strcmp(tok, "NXkgQsLLrRYaBnvP.18446744073709551615") == 0);

	static const struct {
		const char *tok;
		bool ok;
		uint64_t index;
	} cases[] = {
		{ "NXkgQsLLrRYaBnvP.23", true, 23 }, { "a.0", true, 0 }, { ".7", true, 7 },
		{ "a.+7", true, 7 }, { "a.-0", true, 0 }, { "a.007", true, 7 },
		{ "a.9223372036854775807", true, 9223372036854775807ull },
		{ "a.9223372036854775808", false, 0 }, { "a.-1", false, 0 }, { "a.", false, 0 },
		{ "a", false, 0 }, { "a.1.2", false, 0 }, { "a.1x", false, 0 }, { "a. 1", false, 0 },
		{ "a.+", false, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		index = 99;
		CHECK_EQ(auth_token_simple_index(cases[i].tok, strlen(cases[i].tok), &index),
			 cases[i].ok);
		if (cases[i].ok)
			CHECK_EQ(index, cases[i].index);
	}
}

int main(void)
{
	struct auth_util_pem rsa, rsa2, ec;

	log_set_level(LOG_LEVEL_ERROR);
	snprintf(dir, sizeof(dir), "/tmp/cetcd-test-token-XXXXXX");
	CHECK(mkdtemp(dir) != NULL);
	auth_util_keygen("RSA", NULL, &rsa);
	auth_util_keygen("RSA", NULL, &rsa2);
	auth_util_keygen("EC", "P-256", &ec);
	snprintf(rsa_priv, sizeof(rsa_priv), "%s/rsa.key", dir);
	snprintf(rsa_pub, sizeof(rsa_pub), "%s/rsa.pub", dir);
	snprintf(rsa2_pub, sizeof(rsa2_pub), "%s/rsa2.pub", dir);
	snprintf(ec_priv, sizeof(ec_priv), "%s/ec.key", dir);
	snprintf(ec_pub, sizeof(ec_pub), "%s/ec.pub", dir);
	auth_util_write_file(rsa_priv, rsa.priv, rsa.priv_len);
	auth_util_write_file(rsa_pub, rsa.pub, rsa.pub_len);
	auth_util_write_file(rsa2_pub, rsa2.pub, rsa2.pub_len);
	auth_util_write_file(ec_priv, ec.priv, ec.priv_len);
	auth_util_write_file(ec_pub, ec.pub, ec.pub_len);

	test_simple_and_none();
	test_errors();
	test_jwt();
	test_etcd_fixtures();
	test_alloc_failures();
	test_simple_tokens();

	const char *files[] = { rsa_priv, rsa_pub, rsa2_pub, ec_priv, ec_pub };
	for (size_t i = 0; i < 5; i++)
		unlink(files[i]);
	rmdir(dir);
	auth_util_pem_free(&rsa);
	auth_util_pem_free(&rsa2);
	auth_util_pem_free(&ec);
	printf("test_token: ok\n");
	return 0;
}
