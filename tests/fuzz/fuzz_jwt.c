/*
 * Fuzz target: auth/jwt.c's verifier, which reads tokens that clients
 * send. The first input byte picks the mode:
 *   even  the rest is a token, verified under an HS256, an RS256 and an
 *         ES256 key (made once, at the first input);
 *   odd   the rest is a header and claims split at the first '\n', each
 *         base64url-encoded and signed with the HS256 key, so that every
 *         input reaches the JSON reader and the claims checks behind the
 *         signature.
 * Every answer must be 0 or one of the documented errors with a text; a
 * success must give a NUL-terminated username; nothing may stay
 * allocated. Aborts otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth_util.h"

#include "auth/alloc.h"
#include "auth/jwt.h"
#include "base/log/errmsg.h"

#define FUZZ_NOW 1700000000ll

static struct auth_jwt_key *keys[3];

static void fuzz_keys(void)
{
	struct auth_util_pem rsa, ec;

	if (keys[0])
		return;
	auth_set_allocator(auth_util_alloc, auth_util_free);
	auth_util_keygen("RSA", NULL, &rsa);
	auth_util_keygen("EC", "P-256", &ec);
	if (auth_jwt_key_new(AUTH_JWT_HS256, NULL, 0, AUTH_UTIL_SECRET, strlen(AUTH_UTIL_SECRET),
			     &keys[0]) ||
	    auth_jwt_key_new(AUTH_JWT_RS256, rsa.pub, rsa.pub_len, NULL, 0, &keys[1]) ||
	    auth_jwt_key_new(AUTH_JWT_ES256, ec.pub, ec.pub_len, NULL, 0, &keys[2]))
		abort();
	auth_util_pem_free(&rsa);
	auth_util_pem_free(&ec);
}

static void fuzz_verify(struct auth_jwt_key *k, const char *tok, size_t len)
{
	struct auth_jwt_claims c;
	long live = auth_util_live;
	int rc = auth_jwt_verify(k, tok, len, FUZZ_NOW, &c);

	if (rc == 0) {
		if (!c.username || c.username[c.username_len] != 0)
			abort();
		auth_jwt_claims_free(&c);
	} else {
		if (rc != -EINVAL && rc != -EBADMSG && rc != -ETIME && rc != -ENOMEM)
			abort();
		if (c.username || !errmsg_get(rc)[0])
			abort();
	}
	if (auth_util_live != live)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_keys();
	if (size == 0)
		return 0;
	const char *in = (const char *)data + 1;
	size_t n = size - 1;

	if ((data[0] & 1) == 0) {
		for (int i = 0; i < 3; i++)
			fuzz_verify(keys[i], in, n);
		return 0;
	}
	const char *nl = memchr(in, '\n', n);
	size_t hlen = nl ? (size_t)(nl - in) : n;
	const char *claims = nl ? nl + 1 : "";
	size_t clen = nl ? n - hlen - 1 : 0;
	char *tok = auth_util_forge_hs256(in, hlen, claims, clen);
	fuzz_verify(keys[0], tok, strlen(tok));
	free(tok);
	return 0;
}
