/*
 * Helpers for the auth unit tests: keys made with OpenSSL as PEM text
 * (what etcd's pub-key and priv-key files hold), written to files when a
 * test needs paths, and a counting allocator for auth_set_allocator.
 *
 * Header-only (static functions), as the other test helpers.
 */
#ifndef CETCD_TESTS_AUTH_UTIL_H
#define CETCD_TESTS_AUTH_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>

/* A key pair as PEM: priv is PKCS#8 "PRIVATE KEY", pub is PKIX "PUBLIC
 * KEY". Freed with auth_util_pem_free. */
struct auth_util_pem {
	char *priv, *pub;
	size_t priv_len, pub_len;
};

static inline char *auth_util_bio_text(BIO *b, size_t *len)
{
	char *data;
	long n = BIO_get_mem_data(b, &data);
	char *out = malloc((size_t)n + 1);

	if (!out)
		abort();
	memcpy(out, data, (size_t)n);
	out[n] = 0;
	*len = (size_t)n;
	return out;
}

/* kind "RSA" (2048 bits) or "EC" with curve (e.g. "P-256"). */
static inline void auth_util_keygen(const char *kind, const char *curve, struct auth_util_pem *out)
{
	EVP_PKEY *pk = strcmp(kind, "RSA") == 0 ? EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048)
						: EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve);
	BIO *a = BIO_new(BIO_s_mem()), *b = BIO_new(BIO_s_mem());

	if (!pk || !a || !b || !PEM_write_bio_PrivateKey(a, pk, NULL, NULL, 0, NULL, NULL) ||
	    !PEM_write_bio_PUBKEY(b, pk)) {
		fprintf(stderr, "cannot make a %s key\n", kind);
		abort();
	}
	out->priv = auth_util_bio_text(a, &out->priv_len);
	out->pub = auth_util_bio_text(b, &out->pub_len);
	BIO_free(a);
	BIO_free(b);
	EVP_PKEY_free(pk);
}

static inline void auth_util_pem_free(struct auth_util_pem *p)
{
	free(p->priv);
	free(p->pub);
	memset(p, 0, sizeof(*p));
}

/* Writes len bytes of data to path; aborts on failure. */
static inline void auth_util_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		fprintf(stderr, "cannot write %s\n", path);
		abort();
	}
}

/* The counting allocator: live allocations, and a budget after which
 * every allocation fails (-1: none). */
static long auth_util_live;
static long auth_util_budget = -1;

static inline void *auth_util_alloc(size_t n)
{
	if (auth_util_budget == 0)
		return NULL;
	if (auth_util_budget > 0)
		auth_util_budget--;
	void *p = malloc(n);
	if (p)
		auth_util_live++;
	return p;
}

static inline void auth_util_free(void *p)
{
	if (p)
		auth_util_live--;
	free(p);
}

/* The HMAC secret of the HS keys the tests make. */
#define AUTH_UTIL_SECRET "a shared secret"

/* Appends base64url of s[0..n), unpadded, at out + *o. */
static inline void auth_util_b64url(const uint8_t *s, size_t n, char *out, size_t *o)
{
	static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
			     (i + 2 < n ? s[i + 2] : 0);
		out[(*o)++] = tbl[v >> 18 & 63];
		out[(*o)++] = tbl[v >> 12 & 63];
		if (i + 1 < n)
			out[(*o)++] = tbl[v >> 6 & 63];
		if (i + 2 < n)
			out[(*o)++] = tbl[v & 63];
	}
}

/* An HS256 token of header and claims as given, whatever they hold
 * (tokens no cetcd would write), keyed with AUTH_UTIL_SECRET; its text is
 * NUL-terminated, freed with free. */
static inline char *auth_util_forge_hs256(const char *header, size_t hlen, const char *claims,
					  size_t clen)
{
	char *out = malloc(2 * (hlen + clen) + 128);
	uint8_t mac[64];
	size_t o = 0, mac_len = 0;

	if (!out)
		abort();
	auth_util_b64url((const uint8_t *)header, hlen, out, &o);
	out[o++] = '.';
	auth_util_b64url((const uint8_t *)claims, clen, out, &o);
	if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, AUTH_UTIL_SECRET,
		       strlen(AUTH_UTIL_SECRET), (const uint8_t *)out, o, mac, sizeof(mac), &mac_len))
		abort();
	out[o++] = '.';
	auth_util_b64url(mac, mac_len, out, &o);
	out[o] = 0;
	return out;
}

#endif
