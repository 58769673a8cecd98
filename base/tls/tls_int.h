/*
 * Internal to base/tls/: the context and connection structures, which the
 * context code (tls.c) and the connection code (conn.c) share, and the
 * module's allocation hook. Other components use tls.h.
 */
#ifndef CETCD_BASE_TLS_INT_H
#define CETCD_BASE_TLS_INT_H

#include <openssl/ssl.h>

#include "base/tls/tls.h"

struct tls_ctx {
	SSL_CTX *ssl;
	enum tls_role role;
	struct tls_info info;       /* a copy; only its checks are used */
	unsigned char *alpn;        /* wire format: length-prefixed names */
	size_t alpn_len;
};

struct tls_conn {
	struct tls_ctx *ctx;
	SSL *ssl;
	int fd;
	uint32_t want;              /* TLS_WANT_* after -EAGAIN */
	int failed;                 /* 0, or the code every call returns */
	bool handshake_done;        /* and the post-handshake checks passed */
	char refusal[256];          /* why the verify callback refused, or "" */
	long verify_error;          /* a server: why the client's chain did not
				     * verify (X509_V_ERR_*), or 0 */
	char alpn[256];             /* the protocol agreed, or "" */
	/* the SAN check's DNS half (conn.c), while and after it runs */
	struct tls_san_job *job;    /* running, or NULL */
	int check_fd;               /* readable once it is done; -1: none */
	char check_ip[56];          /* for the refusal */
	char check_names[256];
};

/* The module's allocation hook (tls_set_allocator). */
void *tls_zalloc(size_t size);
void tls_free_mem(void *p);

/* Which flag of side names a setting, for messages ("--peer-cert-file"). */
enum tls_flag {
	TLS_FLAG_CERT,
	TLS_FLAG_KEY,
	TLS_FLAG_CA,
	TLS_FLAG_CRL,
};
const char *tls_flag_name(enum tls_side side, enum tls_flag flag);

/* Records OpenSSL's queued errors (cleared) after what in the error slot,
 * for code rc; returns rc. */
int tls_ssl_error(int rc, const char *what, ...) __attribute__((format(printf, 2, 3)));

#endif
