/* TLS infos, cipher suite names and contexts (see tls.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls_int.h"

/* ---- allocation hook ---- */

static void *(*tls_alloc_fn)(size_t) = malloc;
static void (*tls_free_fn)(void *) = free;

void tls_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *))
{
	tls_alloc_fn = alloc_fn ? alloc_fn : malloc;
	tls_free_fn = free_fn ? free_fn : free;
}

void *tls_zalloc(size_t size)
{
	void *p = tls_alloc_fn(size ? size : 1);
	if (p)
		memset(p, 0, size);
	return p;
}

void tls_free_mem(void *p)
{
	if (p)
		tls_free_fn(p);
}

static char *tls_strdup(const char *s)
{
	size_t len;
	char *d;
	if (!s || !*s)
		return NULL;
	len = strlen(s) + 1;
	d = tls_zalloc(len);
	if (d)
		memcpy(d, s, len);
	return d;
}

/* ---- messages ---- */

const char *tls_flag_name(enum tls_side side, enum tls_flag flag)
{
	static const char *const peer[] = { "--peer-cert-file", "--peer-key-file",
					    "--peer-trusted-ca-file", "--peer-crl-file" };
	static const char *const client[] = { "--cert-file", "--key-file", "--trusted-ca-file",
					      "--client-crl-file" };
	return side == TLS_SIDE_PEER ? peer[flag] : client[flag];
}

int tls_ssl_error(int rc, const char *what, ...)
{
	char head[256], detail[256] = "";
	size_t n = 0;
	unsigned long e;
	va_list ap;

	va_start(ap, what);
	vsnprintf(head, sizeof(head), what, ap);
	va_end(ap);
	while ((e = ERR_get_error()) != 0) {
		const char *r = ERR_reason_error_string(e);
		char buf[128];
		if (!r) {
			ERR_error_string_n(e, buf, sizeof(buf));
			r = buf;
		}
		if (n < sizeof(detail))
			n += (size_t)snprintf(detail + n, sizeof(detail) - n, "%s%s", n ? "; " : "",
					      r);
	}
	return errmsg_set(rc, "%s%s%s", head, n ? ": " : "", detail);
}

/* ---- infos ---- */

void tls_info_free(struct tls_info *info)
{
	tls_free_mem(info->cert_file);
	tls_free_mem(info->key_file);
	tls_free_mem(info->trusted_ca_file);
	tls_free_mem(info->crl_file);
	tls_free_mem(info->allowed_cn);
	tls_free_mem(info->allowed_hostname);
	for (size_t i = 0; i < info->cipher_suite_count; i++)
		tls_free_mem(info->cipher_suites[i]);
	tls_free_mem(info->cipher_suites);
	memset(info, 0, sizeof(*info));
}

static bool tls_given(const char *s)
{
	return s && *s;
}

bool tls_info_is_empty(const struct tls_info *info)
{
	return !tls_given(info->cert_file) && !tls_given(info->key_file);
}

int tls_info_copy(struct tls_info *dst, const struct tls_info *src)
{
	const char *const from[] = { src->cert_file, src->key_file, src->trusted_ca_file,
				     src->crl_file, src->allowed_cn, src->allowed_hostname };
	char **const to[] = { &dst->cert_file, &dst->key_file, &dst->trusted_ca_file,
			      &dst->crl_file, &dst->allowed_cn, &dst->allowed_hostname };

	memset(dst, 0, sizeof(*dst));
	dst->side = src->side;
	dst->client_cert_auth = src->client_cert_auth;
	dst->self_signed = src->self_signed;
	dst->check_client_san = src->check_client_san;
	for (size_t i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
		if (tls_given(from[i]) && !(*to[i] = tls_strdup(from[i])))
			goto nomem;
	}
	if (src->cipher_suite_count) {
		dst->cipher_suites = tls_zalloc(src->cipher_suite_count * sizeof(char *));
		if (!dst->cipher_suites)
			goto nomem;
		for (size_t i = 0; i < src->cipher_suite_count; i++) {
			dst->cipher_suites[i] = tls_strdup(src->cipher_suites[i]);
			if (!dst->cipher_suites[i])
				goto nomem;
			dst->cipher_suite_count++;
		}
	}
	return 0;
nomem:
	tls_info_free(dst);
	return errmsg_set(-ENOMEM, "tls: out of memory");
}

void tls_info_string(const struct tls_info *info, char *buf, size_t len)
{
	snprintf(buf, len, "cert = %s, key = %s, trusted-ca = %s, client-cert-auth = %s, crl-file = %s",
		 info->cert_file ? info->cert_file : "", info->key_file ? info->key_file : "",
		 info->trusted_ca_file ? info->trusted_ca_file : "",
		 info->client_cert_auth ? "true" : "false", info->crl_file ? info->crl_file : "");
}

/* ---- cipher suites ---- */

struct tls_suite {
	const char *go;
	const char *openssl; /* NULL: a TLS 1.3 suite */
};

/* Go's tls.CipherSuites() and tls.InsecureCipherSuites(), and the two
 * names etcd's tlsutil adds. */
static const struct tls_suite tls_suites[] = {
	{ "TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA" },
	{ "TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA" },
	{ "TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256" },
	{ "TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384" },
	{ "TLS_AES_128_GCM_SHA256", NULL },
	{ "TLS_AES_256_GCM_SHA384", NULL },
	{ "TLS_CHACHA20_POLY1305_SHA256", NULL },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256" },
	{ "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305" },
	{ "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "ECDHE-RSA-CHACHA20-POLY1305" },
	{ "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", "ECDHE-ECDSA-CHACHA20-POLY1305" },
	/* insecure ones Go still names */
	{ "TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA" },
	{ "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA" },
	{ "TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256" },
	{ "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA" },
	{ "TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA" },
	{ "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA" },
	{ "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256" },
	{ "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256" },
};

/* Go's default TLS 1.2 suites, in its order, without 3DES. */
static const char tls_default_suites[] =
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
	"ECDHE-ECDSA-AES128-SHA:ECDHE-RSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-RSA-AES256-SHA:"
	"AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA:AES256-SHA";

int tls_cipher_suite(const char *go_name, const char **openssl_name)
{
	for (size_t i = 0; i < sizeof(tls_suites) / sizeof(tls_suites[0]); i++) {
		if (strcmp(tls_suites[i].go, go_name) == 0) {
			*openssl_name = tls_suites[i].openssl;
			return 0;
		}
	}
	*openssl_name = NULL;
	return errmsg_set(-EINVAL, "unexpected TLS cipher suite \"%s\"", go_name);
}

/* The OpenSSL list for info's suites into buf; *tls12 says whether any
 * is a TLS 1.2 suite. */
static int tls_suite_list(const struct tls_info *info, char *buf, size_t len, bool *tls12)
{
	size_t n = 0;

	*tls12 = false;
	buf[0] = '\0';
	for (size_t i = 0; i < info->cipher_suite_count; i++) {
		const char *name;
		int rc = tls_cipher_suite(info->cipher_suites[i], &name);
		if (rc)
			return rc;
		if (!name)
			continue;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ":" : "", name);
		if (n >= len)
			return errmsg_set(-EINVAL, "tls: --cipher-suites is too long");
		*tls12 = true;
	}
	return 0;
}

/* ---- verification ---- */

/* Go's VerifyHostname: IP SANs for an address, DNS SANs (with a
 * left-most wildcard) for a name, never the CN. */
static bool tls_cert_matches_host(X509 *cert, const char *host)
{
	unsigned char addr[16];
	if (inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1)
		return X509_check_ip_asc(cert, host, 0) == 1;
	return X509_check_host(cert, host, 0,
			       X509_CHECK_FLAG_NEVER_CHECK_SUBJECT |
				       X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS,
			       NULL) == 1;
}

/* Called by OpenSSL for each certificate of the peer's chain; the leaf
 * (depth 0) comes last. Adds etcd's allowed CN and hostname checks to a
 * chain that verified. */
static int tls_verify_cb(int ok, X509_STORE_CTX *store)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct tls_conn *c = ssl ? SSL_get_app_data(ssl) : NULL;
	const struct tls_info *info;
	X509 *leaf;
	char cn[256] = "";

	/* a server tells a client whose chain does not verify "bad
	 * certificate", as Go's servers do, whatever the reason; the reason
	 * is kept for the log */
	if (!ok && c && c->ctx->role == TLS_SERVER) {
		c->verify_error = X509_STORE_CTX_get_error(store);
		X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
		return 0;
	}
	if (!ok || !c || X509_STORE_CTX_get_error_depth(store) != 0)
		return ok;
	info = &c->ctx->info;
	leaf = X509_STORE_CTX_get_current_cert(store);
	if (tls_given(info->allowed_cn)) {
		X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn,
					  sizeof(cn));
		if (strcmp(cn, info->allowed_cn) != 0) {
			snprintf(c->refusal, sizeof(c->refusal),
				 "client certificate authentication failed: CN \"%s\" is not the allowed CN \"%s\"",
				 cn, info->allowed_cn);
			goto refuse;
		}
	}
	if (tls_given(info->allowed_hostname) &&
	    !tls_cert_matches_host(leaf, info->allowed_hostname)) {
		snprintf(c->refusal, sizeof(c->refusal),
			 "client certificate authentication failed: the certificate is not valid for the allowed hostname \"%s\"",
			 info->allowed_hostname);
		goto refuse;
	}
	return 1;
refuse:
	/* the peer gets a bad_certificate alert, as from Go's servers */
	X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED);
	return 0;
}

/* ---- contexts ---- */

static int tls_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
			   const unsigned char *in, unsigned int inlen, void *arg)
{
	struct tls_ctx *ctx = arg;
	unsigned char *sel;
	(void)ssl;
	if (!ctx->alpn_len ||
	    SSL_select_next_proto(&sel, outlen, ctx->alpn, (unsigned)ctx->alpn_len, in, inlen) !=
		    OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_NOACK;
	*out = sel;
	return SSL_TLSEXT_ERR_OK;
}

int tls_ctx_set_alpn(struct tls_ctx *ctx, const char *const *protos, size_t count)
{
	size_t len = 0, n = 0;
	unsigned char *wire;

	for (size_t i = 0; i < count; i++) {
		size_t l = strlen(protos[i]);
		if (l == 0 || l > 255)
			return errmsg_set(-EINVAL, "tls: ALPN protocol name of %zu bytes", l);
		len += 1 + l;
	}
	wire = tls_zalloc(len);
	if (!wire)
		return errmsg_set(-ENOMEM, "tls: out of memory");
	for (size_t i = 0; i < count; i++) {
		size_t l = strlen(protos[i]);
		wire[n++] = (unsigned char)l;
		memcpy(wire + n, protos[i], l);
		n += l;
	}
	if (ctx->role == TLS_CLIENT && SSL_CTX_set_alpn_protos(ctx->ssl, wire, (unsigned)len)) {
		tls_free_mem(wire);
		return tls_ssl_error(-ENOMEM, "tls: cannot set the ALPN protocols");
	}
	tls_free_mem(ctx->alpn);
	ctx->alpn = wire;
	ctx->alpn_len = len;
	return 0;
}

/* Whether path can be read; otherwise the slot says which flag to fix. */
static int tls_check_file(const struct tls_info *info, enum tls_flag flag, const char *path)
{
	if (access(path, R_OK) == 0)
		return 0;
	int rc = -errno;
	return errmsg_set(rc, "tls: cannot read %s %s: %s; check the file or the flag",
			  tls_flag_name(info->side, flag), path, strerror(-rc));
}

/* The certificate (with its chain) and key of info into ctx. */
static int tls_ctx_load_pair(struct tls_ctx *ctx, const struct tls_info *info)
{
	int rc;
	if ((rc = tls_check_file(info, TLS_FLAG_CERT, info->cert_file)) ||
	    (rc = tls_check_file(info, TLS_FLAG_KEY, info->key_file)))
		return rc;
	if (SSL_CTX_use_certificate_chain_file(ctx->ssl, info->cert_file) != 1)
		return tls_ssl_error(-EPROTO, "tls: %s %s is not a PEM certificate",
				     tls_flag_name(info->side, TLS_FLAG_CERT), info->cert_file);
	if (SSL_CTX_use_PrivateKey_file(ctx->ssl, info->key_file, SSL_FILETYPE_PEM) != 1 &&
	    ERR_GET_REASON(ERR_peek_last_error()) != X509_R_KEY_VALUES_MISMATCH)
		return tls_ssl_error(-EPROTO, "tls: %s %s is not a PEM private key",
				     tls_flag_name(info->side, TLS_FLAG_KEY), info->key_file);
	if (SSL_CTX_check_private_key(ctx->ssl) != 1)
		return tls_ssl_error(-EPROTO, "tls: the key %s does not match the certificate %s",
				     info->key_file, info->cert_file);
	return 0;
}

/* Trusted CAs: the file if given, else the system's. For a server, the
 * file's names are also sent in the certificate request, as Go does. */
static int tls_ctx_load_ca(struct tls_ctx *ctx, const struct tls_info *info)
{
	int rc;
	if (!tls_given(info->trusted_ca_file)) {
		SSL_CTX_set_default_verify_paths(ctx->ssl);
		return 0;
	}
	if ((rc = tls_check_file(info, TLS_FLAG_CA, info->trusted_ca_file)))
		return rc;
	if (SSL_CTX_load_verify_locations(ctx->ssl, info->trusted_ca_file, NULL) != 1)
		return tls_ssl_error(-EPROTO, "tls: %s %s holds no PEM certificate",
				     tls_flag_name(info->side, TLS_FLAG_CA), info->trusted_ca_file);
	if (ctx->role == TLS_SERVER) {
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(info->trusted_ca_file);
		if (names)
			SSL_CTX_set_client_CA_list(ctx->ssl, names);
	}
	return 0;
}

static int tls_ctx_setup(struct tls_ctx *ctx, const struct tls_info *info)
{
	static const char *const h2[] = { "h2" };
	char suites[1024];
	bool tls12;
	int mode = SSL_VERIFY_NONE;
	int rc;

	if (tls_given(info->allowed_cn) && tls_given(info->allowed_hostname))
		return errmsg_set(-EINVAL,
				  "AllowedCN and AllowedHostname are mutually exclusive (cn=\"%s\", hostname=\"%s\")",
				  info->allowed_cn, info->allowed_hostname);
	if (!tls_info_is_empty(info) &&
	    (!tls_given(info->cert_file) || !tls_given(info->key_file)))
		return errmsg_set(-EINVAL,
				  "KeyFile and CertFile must both be present[key: %s, cert: %s]; set both %s and %s",
				  tls_given(info->key_file) ? info->key_file : "",
				  tls_given(info->cert_file) ? info->cert_file : "",
				  tls_flag_name(info->side, TLS_FLAG_CERT),
				  tls_flag_name(info->side, TLS_FLAG_KEY));
	if (ctx->role == TLS_SERVER && tls_info_is_empty(info))
		return errmsg_set(-EINVAL,
				  "tls: KeyFile and CertFile are not presented; set %s and %s, or auto TLS",
				  tls_flag_name(info->side, TLS_FLAG_CERT),
				  tls_flag_name(info->side, TLS_FLAG_KEY));
	if ((rc = tls_suite_list(info, suites, sizeof(suites), &tls12)))
		return rc;

	SSL_CTX_set_min_proto_version(ctx->ssl, TLS1_2_VERSION);
	if (info->cipher_suite_count && !tls12)
		SSL_CTX_set_min_proto_version(ctx->ssl, TLS1_3_VERSION);
	if (SSL_CTX_set_cipher_list(ctx->ssl, tls12 ? suites : tls_default_suites) != 1)
		return tls_ssl_error(-EINVAL,
				     "tls: none of --cipher-suites is available in this OpenSSL");
	if (SSL_CTX_set1_groups_list(ctx->ssl, "X25519:P-256:P-384:P-521") != 1)
		return tls_ssl_error(-EPROTO, "tls: cannot set the key exchange groups");
	SSL_CTX_set_options(ctx->ssl, SSL_OP_NO_RENEGOTIATION);
	SSL_CTX_set_mode(ctx->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
					   SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);

	if (!tls_info_is_empty(info) && (rc = tls_ctx_load_pair(ctx, info)))
		return rc;
	if ((rc = tls_ctx_load_ca(ctx, info)))
		return rc;

	if (ctx->role == TLS_SERVER) {
		/* The certificate file's chain as it is, as Go sends it: without
		 * this OpenSSL completes the chain from the trusted store in
		 * every handshake, and with the system's store that reads all of
		 * /etc/ssl/certs for each new connection. */
		SSL_CTX_set_mode(ctx->ssl, SSL_MODE_NO_AUTO_CHAIN);
		/* As Go's server: one TLS 1.3 ticket (OpenSSL sends two), and
		 * resumption by tickets only, with no server-side cache of
		 * sessions for OpenSSL to keep, look up and sweep */
		SSL_CTX_set_num_tickets(ctx->ssl, 1);
		SSL_CTX_set_session_cache_mode(ctx->ssl, SSL_SESS_CACHE_OFF);
		/* A session is bound to the context that made it; OpenSSL
		 * refuses, with a fatal alert, to resume a session on a server
		 * that verifies peers and names no context. */
		static const unsigned char sid_ctx[] = "cetcd";
		if (SSL_CTX_set_session_id_context(ctx->ssl, sid_ctx, sizeof(sid_ctx) - 1) != 1)
			return tls_ssl_error(-EPROTO, "tls: cannot set the session id context");
		/* Go's RequireAndVerifyClientCert; an allowed CN or hostname
		 * needs a verified client certificate too */
		if (tls_given(info->trusted_ca_file) || info->client_cert_auth ||
		    tls_given(info->allowed_cn) || tls_given(info->allowed_hostname))
			mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
		SSL_CTX_set_alpn_select_cb(ctx->ssl, tls_alpn_select, ctx);
		if ((rc = tls_ctx_set_alpn(ctx, h2, 1)))
			return rc;
	} else if (!info->self_signed) {
		mode = SSL_VERIFY_PEER;
	}
	SSL_CTX_set_verify(ctx->ssl, mode, tls_verify_cb);
	return 0;
}

int tls_ctx_new(const struct tls_info *info, enum tls_role role, struct tls_ctx **out)
{
	struct tls_ctx *ctx = tls_zalloc(sizeof(*ctx));
	int rc;

	*out = NULL;
	if (!ctx)
		return errmsg_set(-ENOMEM, "tls: out of memory");
	ctx->role = role;
	rc = tls_info_copy(&ctx->info, info);
	if (rc)
		goto out_free;
	ctx->ssl = SSL_CTX_new(role == TLS_SERVER ? TLS_server_method() : TLS_client_method());
	if (!ctx->ssl) {
		rc = tls_ssl_error(-ENOMEM, "tls: cannot make an OpenSSL context");
		goto out_free;
	}
	rc = tls_ctx_setup(ctx, info);
	if (rc)
		goto out_free;
	*out = ctx;
	return 0;
out_free:
	tls_ctx_free(ctx);
	return rc;
}

int tls_ctx_set_ticket_key(struct tls_ctx *ctx, const uint8_t *key)
{
	unsigned char copy[TLS_TICKET_KEY_BYTES];
	long ok;

	if (ctx->role != TLS_SERVER)
		return errmsg_set(-EINVAL, "tls: only a server context takes a session ticket key");
	/* OpenSSL's control takes a pointer it may write through; it copies
	 * the bytes into the context */
	memcpy(copy, key, sizeof(copy));
	ok = SSL_CTX_set_tlsext_ticket_keys(ctx->ssl, copy, sizeof(copy));
	OPENSSL_cleanse(copy, sizeof(copy));
	if (ok != 1)
		return tls_ssl_error(-EINVAL, "tls: OpenSSL refused the session ticket key");
	return 0;
}

void tls_ctx_free(struct tls_ctx *ctx)
{
	if (!ctx)
		return;
	SSL_CTX_free(ctx->ssl);
	tls_info_free(&ctx->info);
	tls_free_mem(ctx->alpn);
	tls_free_mem(ctx);
}
