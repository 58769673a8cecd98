/* TLS connections over a socket, and the checks etcd makes after the
 * handshake: the CRL and the client SANs (see tls.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "base/thread/thread.h"
#include "base/tls/tls_int.h"

struct tls_san_job;
static void tls_san_job_put(struct tls_san_job *j);

int tls_conn_new(struct tls_ctx *ctx, int fd, const char *server_name, struct tls_conn **out)
{
	struct tls_conn *c = tls_zalloc(sizeof(*c));
	unsigned char addr[16];

	*out = NULL;
	if (!c)
		return errmsg_set(-ENOMEM, "tls: out of memory");
	c->ctx = ctx;
	c->fd = fd;
	c->check_fd = -1;
	c->ssl = SSL_new(ctx->ssl);
	if (!c->ssl || SSL_set_fd(c->ssl, fd) != 1) {
		tls_conn_free(c);
		return tls_ssl_error(-ENOMEM, "tls: cannot make a connection");
	}
	SSL_set_app_data(c->ssl, c);
	if (ctx->role == TLS_SERVER) {
		SSL_set_accept_state(c->ssl);
	} else {
		SSL_set_connect_state(c->ssl);
		if (server_name && *server_name) {
			bool ip = inet_pton(AF_INET, server_name, addr) == 1 ||
				  inet_pton(AF_INET6, server_name, addr) == 1;
			int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
								    server_name) :
				      SSL_set1_host(c->ssl, server_name) &&
					      SSL_set_tlsext_host_name(c->ssl, server_name);
			if (ok != 1) {
				tls_conn_free(c);
				return tls_ssl_error(-ENOMEM, "tls: cannot set the server name %s",
						     server_name);
			}
		}
	}
	*out = c;
	return 0;
}

void tls_conn_free(struct tls_conn *c)
{
	if (!c)
		return;
	if (c->job)
		tls_san_job_put(c->job);
	if (c->check_fd >= 0)
		close(c->check_fd);
	SSL_free(c->ssl);
	tls_free_mem(c);
}

uint32_t tls_conn_want(const struct tls_conn *c)
{
	return c->want;
}

int tls_conn_check_fd(const struct tls_conn *c)
{
	return c->check_fd;
}

/* A TLS alert's description as Go's crypto/tls words it. */
static const char *tls_alert_text(int alert)
{
	switch (alert) {
	case SSL_AD_CLOSE_NOTIFY: return "close notify";
	case SSL_AD_UNEXPECTED_MESSAGE: return "unexpected message";
	case SSL_AD_BAD_RECORD_MAC: return "bad record MAC";
	case SSL_AD_HANDSHAKE_FAILURE: return "handshake failure";
	case SSL_AD_BAD_CERTIFICATE: return "bad certificate";
	case SSL_AD_UNSUPPORTED_CERTIFICATE: return "unsupported certificate";
	case SSL_AD_CERTIFICATE_REVOKED: return "revoked certificate";
	case SSL_AD_CERTIFICATE_EXPIRED: return "expired certificate";
	case SSL_AD_CERTIFICATE_UNKNOWN: return "unknown certificate";
	case SSL_AD_ILLEGAL_PARAMETER: return "illegal parameter";
	case SSL_AD_UNKNOWN_CA: return "unknown certificate authority";
	case SSL_AD_ACCESS_DENIED: return "access denied";
	case SSL_AD_DECODE_ERROR: return "error decoding message";
	case SSL_AD_DECRYPT_ERROR: return "error decrypting message";
	case SSL_AD_PROTOCOL_VERSION: return "protocol version not supported";
	case SSL_AD_INSUFFICIENT_SECURITY: return "insufficient security level";
	case SSL_AD_INTERNAL_ERROR: return "internal error";
	case SSL_AD_USER_CANCELLED: return "user canceled";
	case SSL_AD_NO_RENEGOTIATION: return "no renegotiation";
	case SSL_AD_CERTIFICATE_REQUIRED: return "certificate required";
	case SSL_AD_NO_APPLICATION_PROTOCOL: return "no application protocol";
	default: return SSL_alert_desc_string_long(alert);
	}
}

/* Marks c failed with rc, which every later call returns. */
static int tls_conn_fail(struct tls_conn *c, int rc)
{
	c->failed = rc;
	return rc;
}

/* Turns the result r of an SSL call into the module's codes. */
static int tls_conn_result(struct tls_conn *c, int r, const char *what)
{
	int e = SSL_get_error(c->ssl, r);
	int saved = errno;
	long vr;

	switch (e) {
	case SSL_ERROR_WANT_READ:
		c->want = TLS_WANT_READ;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		c->want = TLS_WANT_WRITE;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ERR_clear_error();
		if (r == 0 || saved == 0)
			return tls_conn_fail(c, errmsg_set(-ECONNRESET,
							   "tls: the peer closed the connection during %s",
							   what));
		return tls_conn_fail(c, errmsg_set(-saved, "tls: %s: %s", what, strerror(saved)));
	default:
		break;
	}
	/* an alert the peer sent: Go's words for it, which etcd logs and
	 * tooling looks for ("remote error: tls: bad certificate") */
	int reason = ERR_GET_REASON(ERR_peek_last_error());
	if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
		ERR_clear_error();
		return tls_conn_fail(c, errmsg_set(-EACCES, "tls: %s failed: remote error: tls: %s",
						   what, tls_alert_text(reason - SSL_AD_REASON_OFFSET)));
	}
	/* OpenSSL 3 reports a peer that hung up without close_notify so */
	if (ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
		ERR_clear_error();
		return tls_conn_fail(c, errmsg_set(-ECONNRESET,
						   "tls: the peer closed the connection during %s",
						   what));
	}
	if (c->refusal[0]) {
		ERR_clear_error();
		return tls_conn_fail(c, errmsg_set(-EACCES, "%s", c->refusal));
	}
	vr = c->verify_error ? c->verify_error : SSL_get_verify_result(c->ssl);
	if (vr != X509_V_OK && SSL_get_verify_mode(c->ssl) != SSL_VERIFY_NONE) {
		ERR_clear_error();
		return tls_conn_fail(c, errmsg_set(-EPROTO, "tls: %s failed: the peer's certificate: %s",
						   what, X509_verify_cert_error_string(vr)));
	}
	return tls_conn_fail(c, tls_ssl_error(-EPROTO, "tls: %s failed", what));
}

/* ---- the checks after the handshake ---- */

/* Reads a CRL in PEM or DER, as Go's x509.ParseCRL takes either. */
static X509_CRL *tls_read_crl(const char *path, int *rc)
{
	X509_CRL *crl = NULL;
	FILE *f = fopen(path, "rb");

	if (!f) {
		*rc = -errno;
		return NULL;
	}
	crl = PEM_read_X509_CRL(f, NULL, NULL, NULL);
	if (!crl) {
		ERR_clear_error();
		rewind(f);
		crl = d2i_X509_CRL_fp(f, NULL);
	}
	fclose(f);
	*rc = crl ? 0 : -EPROTO;
	return crl;
}

/* Whether cert's serial is listed in crl (by serial only, as etcd). */
static bool tls_crl_lists(X509_CRL *crl, X509 *cert)
{
	STACK_OF(X509_REVOKED) *revoked = X509_CRL_get_REVOKED(crl);
	const ASN1_INTEGER *serial = X509_get0_serialNumber(cert);

	for (int i = 0; i < sk_X509_REVOKED_num(revoked); i++) {
		const X509_REVOKED *r = sk_X509_REVOKED_value(revoked, i);
		if (ASN1_INTEGER_cmp(X509_REVOKED_get0_serialNumber(r), serial) == 0)
			return true;
	}
	return false;
}

/* etcd's words for a revoked certificate: its serial's bytes in hex. */
static int tls_refuse_serial(X509 *cert)
{
	BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
	unsigned char bytes[64];
	char hex[2 * sizeof(bytes) + 1] = "";
	int n = bn && BN_num_bytes(bn) <= (int)sizeof(bytes) ? BN_bn2bin(bn, bytes) : 0;

	for (int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
	BN_free(bn);
	return errmsg_set(-EACCES, "transport: certificate serial %s revoked", hex);
}

/* etcd's checkCRL: every certificate the client presented, looked up by
 * serial in the CRL file, read again for each connection. */
static int tls_check_crl(struct tls_conn *c)
{
	const char *path = c->ctx->info.crl_file;
	STACK_OF(X509) *chain = SSL_get_peer_cert_chain(c->ssl);
	X509 *leaf = SSL_get0_peer_certificate(c->ssl);
	X509_CRL *crl;
	int rc;

	if (!path || !leaf)
		return 0;
	crl = tls_read_crl(path, &rc);
	if (!crl)
		return errmsg_set(rc, "tls: cannot read the CRL %s %s: %s; check the file or the flag",
				  tls_flag_name(c->ctx->info.side, TLS_FLAG_CRL), path,
				  rc == -EPROTO ? "not a PEM or DER CRL" : strerror(-rc));
	rc = tls_crl_lists(crl, leaf) ? tls_refuse_serial(leaf) : 0;
	/* a server's peer chain leaves out the leaf */
	for (int i = 0; rc == 0 && i < sk_X509_num(chain); i++) {
		if (tls_crl_lists(crl, sk_X509_value(chain, i)))
			rc = tls_refuse_serial(sk_X509_value(chain, i));
	}
	X509_CRL_free(crl);
	return rc;
}

/* The peer's address as text, or -ENOTSUP for a socket that is not IP
 * (a socketpair in tests). */
static int tls_peer_ip(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return -errno;
	if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6)
		return -ENOTSUP;
	if (getnameinfo((struct sockaddr *)&ss, sl, buf, (socklen_t)len, NULL, 0, NI_NUMERICHOST))
		return -EINVAL;
	/* an IPv4 client of a dual-stack socket */
	if (ss.ss_family == AF_INET6 && strncmp(buf, "::ffff:", 7) == 0 && strchr(buf + 7, '.'))
		memmove(buf, buf + 7, strlen(buf + 7) + 1);
	return 0;
}

/* Whether the DNS name resolves to ip (etcd's isHostInDNS, forward half). */
static bool tls_dns_has(const char *name, const char *ip)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *a;
	bool found = false;

	if (strncmp(name, "*.", 2) != 0 && getaddrinfo(name, NULL, &hints, &res) == 0) {
		for (a = res; a && !found; a = a->ai_next) {
			char host[INET6_ADDRSTRLEN];
			found = getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof(host), NULL, 0,
					    NI_NUMERICHOST) == 0 &&
				strcmp(host, ip) == 0;
		}
		freeaddrinfo(res);
	}
	return found;
}

/* Whether ip's reverse name is one of the n names (NUL-separated, one
 * after the other), a "*." name matching any name under it. */
static bool tls_reverse_matches(const char *ip, const char *names, size_t n)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *res;
	char name[NI_MAXHOST];
	bool found = false;

	if (getaddrinfo(ip, NULL, &hints, &res) != 0)
		return false;
	if (getnameinfo(res->ai_addr, res->ai_addrlen, name, sizeof(name), NULL, 0,
			NI_NAMEREQD) == 0) {
		size_t nl = strlen(name);
		for (const char *dns = names; n-- && !found; dns += strlen(dns) + 1) {
			size_t dl = strlen(dns);
			if (dns[0] == '*' && dns[1] == '.')
				found = nl >= dl - 1 && strcmp(name + nl - (dl - 1), dns + 1) == 0;
			else
				found = strcmp(name, dns) == 0;
		}
	}
	freeaddrinfo(res);
	return found;
}

/*
 * The DNS half of the SAN check runs on a thread of its own: a lookup
 * may wait seconds on a slow or dead resolver, and the caller's thread
 * is an event loop (raftd's, whose heartbeats must go on). The
 * connection waits with TLS_WANT_CHECK on one end of a socket pair; the
 * thread writes a byte to the other end when it is done. Whichever of
 * the two lets go of the job last frees it, so a connection freed while
 * its lookup runs leaves the thread nothing to touch but the job (the
 * job is plain malloc memory for that reason, not the module's hook).
 * At most TLS_SAN_MAX_PENDING lookups run at once in a process; a
 * connection beyond that is refused, and the peer dials again.
 */
#define TLS_SAN_MAX_PENDING 64

static atomic_int tls_san_pending;

struct tls_san_job {
	atomic_int refs;            /* the connection's and the thread's */
	atomic_bool done;           /* ok is final */
	bool ok;
	int wfd;                    /* the thread's end of the pair */
	char ip[INET6_ADDRSTRLEN + 8];
	size_t n_names;
	char names[];               /* n_names DNS SANs, NUL after each */
};

static void tls_san_job_put(struct tls_san_job *j)
{
	if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) == 1)
		free(j);
}

/* etcd's isHostInDNS with its reverse lookup first, then each name. */
static void *tls_san_lookup(void *arg)
{
	struct tls_san_job *j = arg;
	bool ok = tls_reverse_matches(j->ip, j->names, j->n_names);
	const char *dns = j->names;

	for (size_t i = 0; i < j->n_names && !ok; i++, dns += strlen(dns) + 1)
		ok = tls_dns_has(dns, j->ip);
	j->ok = ok;
	atomic_store_explicit(&j->done, true, memory_order_release);
	/* the connection may be gone: then nobody reads, and the send fails */
	(void)!send(j->wfd, "", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(j->wfd);
	atomic_fetch_sub_explicit(&tls_san_pending, 1, memory_order_relaxed);
	tls_san_job_put(j);
	return NULL;
}

/* Starts the lookups for c of the n DNS SANs in sans, len bytes with a
 * NUL after each: returns -EINPROGRESS (c->job set), or an error. */
static int tls_san_start(struct tls_conn *c, const char *ip, GENERAL_NAMES *sans, size_t n,
			 size_t len)
{
	struct tls_san_job *j;
	size_t off = 0;
	int sv[2], rc;

	if (atomic_fetch_add_explicit(&tls_san_pending, 1, memory_order_relaxed) >=
	    TLS_SAN_MAX_PENDING) {
		atomic_fetch_sub_explicit(&tls_san_pending, 1, memory_order_relaxed);
		return errmsg_set(-EACCES,
				  "tls: %d lookups of client addresses are already running; refused \"%s\" until one ends",
				  TLS_SAN_MAX_PENDING, ip);
	}
	j = calloc(1, sizeof(*j) + len);
	if (!j) {
		rc = errmsg_set(-ENOMEM, "tls: out of memory");
		goto out_pending;
	}
	snprintf(j->ip, sizeof(j->ip), "%s", ip);
	for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		if (g->type == GEN_DNS) {
			const char *d = (const char *)ASN1_STRING_get0_data(g->d.dNSName);
			size_t dl = strlen(d) + 1;
			memcpy(j->names + off, d, dl);
			off += dl;
		}
	}
	j->n_names = n;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
		rc = errmsg_set(-errno, "tls: cannot make a socket pair: %s", strerror(errno));
		free(j);
		goto out_pending;
	}
	j->wfd = sv[1];
	atomic_init(&j->refs, 2);
	rc = shm_thread_start(&(pthread_t){ 0 }, true, tls_san_lookup, j);
	if (rc) {
		close(sv[0]);
		close(sv[1]);
		free(j);
		rc = errmsg_set(rc, "tls: cannot start a lookup of the client's address: %s",
				strerror(-rc));
		goto out_pending;
	}
	c->job = j;
	c->check_fd = sv[0];
	return -EINPROGRESS;
out_pending:
	atomic_fetch_sub_explicit(&tls_san_pending, 1, memory_order_relaxed);
	return rc;
}

/* The lookups' answer once they are done: 0, -EACCES, or -EAGAIN. */
static int tls_san_collect(struct tls_conn *c)
{
	struct tls_san_job *j = c->job;
	bool ok;

	if (!atomic_load_explicit(&j->done, memory_order_acquire))
		return -EAGAIN;
	ok = j->ok;
	tls_san_job_put(j);
	c->job = NULL;
	if (ok)
		return 0;
	return errmsg_set(-EACCES, "tls: \"%s\" does not match any of DNSNames [%s]", c->check_ip,
			  c->check_names);
}

/* etcd's checkCertSAN: a client certificate with SANs must name the
 * address the connection comes from, by IP SAN or by a DNS SAN that
 * resolves to it. Returns 0, an error, or -EINPROGRESS when the DNS
 * half was started (tls_san_collect ends it). */
static int tls_check_san(struct tls_conn *c)
{
	X509 *leaf = SSL_get0_peer_certificate(c->ssl);
	GENERAL_NAMES *sans;
	char ip[INET6_ADDRSTRLEN + 8];
	bool has_ip = false;
	size_t n = 0, n_dns = 0, dns_bytes = 0;
	int rc;

	if (!c->ctx->info.check_client_san || !leaf)
		return 0;
	sans = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
	if (!sans)
		return 0;
	rc = tls_peer_ip(c->fd, ip, sizeof(ip));
	if (rc) {
		GENERAL_NAMES_free(sans);
		return rc == -ENOTSUP ? 0 : errmsg_set(rc, "tls: cannot tell the client's address");
	}
	for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		has_ip |= g->type == GEN_IPADD;
		if (g->type == GEN_DNS) {
			const char *d = (const char *)ASN1_STRING_get0_data(g->d.dNSName);
			size_t cap = sizeof(c->check_names);
			n_dns++;
			dns_bytes += strlen(d) + 1;
			if (n < cap)
				n += (size_t)snprintf(c->check_names + n, cap - n, "%s\"%s\"",
						      n ? " " : "", d);
		}
	}
	if (!has_ip && !n_dns)
		rc = 0;
	else if (has_ip && X509_check_ip_asc(leaf, ip, 0) == 1)
		rc = 0;
	else if (has_ip && !n_dns)
		rc = errmsg_set(-EACCES,
				"x509: certificate is valid for other IPs, not %s (the client's address)",
				ip);
	else {
		snprintf(c->check_ip, sizeof(c->check_ip), "%s", ip);
		rc = tls_san_start(c, ip, sans, n_dns, dns_bytes);
	}
	GENERAL_NAMES_free(sans);
	return rc;
}

/* Checks of the peer's certificate once the TLS handshake is done. */
static int tls_conn_check_peer(struct tls_conn *c)
{
	const struct tls_info *info = &c->ctx->info;
	int rc;

	/* Go's VerifyPeerCertificate runs on both sides and fails without a
	 * verified chain (a self-signed server seen by a client that skips
	 * verification) */
	if ((info->allowed_cn || info->allowed_hostname) && !tls_conn_peer_verified(c))
		return errmsg_set(-EACCES,
				  "client certificate authentication failed: the peer's certificate was not verified");
	if (c->ctx->role != TLS_SERVER)
		return 0;
	if ((rc = tls_check_crl(c)) || (rc = tls_check_san(c)))
		return rc;
	return 0;
}

int tls_conn_handshake(struct tls_conn *c)
{
	const unsigned char *proto;
	unsigned int n;
	int r, rc;

	if (c->failed)
		return c->failed;
	if (c->handshake_done)
		return 0;
	c->want = 0;
	if (c->job) {
		rc = tls_san_collect(c);
		if (rc == -EAGAIN) {
			c->want = TLS_WANT_CHECK;
			return rc;
		}
		if (rc)
			return tls_conn_fail(c, rc);
		goto done;
	}
	ERR_clear_error();
	r = SSL_do_handshake(c->ssl);
	if (r != 1) {
		rc = tls_conn_result(c, r, "the TLS handshake");
		if (rc == 0) /* close_notify before the handshake ended */
			rc = tls_conn_fail(c, errmsg_set(-ECONNRESET,
							 "tls: the peer closed the connection during the TLS handshake"));
		return rc;
	}
	rc = tls_conn_check_peer(c);
	if (rc == -EINPROGRESS) {
		c->want = TLS_WANT_CHECK;
		return -EAGAIN;
	}
	if (rc)
		return tls_conn_fail(c, rc);
done:
	SSL_get0_alpn_selected(c->ssl, &proto, &n);
	if (proto) {
		memcpy(c->alpn, proto, n);
		c->alpn[n] = '\0';
	}
	c->handshake_done = true;
	return 0;
}

ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t len)
{
	size_t got = 0;
	int r, rc;

	if ((rc = tls_conn_handshake(c)))
		return rc;
	c->want = 0;
	ERR_clear_error();
	r = SSL_read_ex(c->ssl, buf, len, &got);
	if (r == 1)
		return (ssize_t)got;
	return tls_conn_result(c, r, "a TLS read");
}

ssize_t tls_conn_write(struct tls_conn *c, const void *buf, size_t len)
{
	size_t put = 0;
	int r, rc;

	if ((rc = tls_conn_handshake(c)))
		return rc;
	c->want = 0;
	ERR_clear_error();
	r = SSL_write_ex(c->ssl, buf, len, &put);
	if (r == 1)
		return (ssize_t)put;
	rc = tls_conn_result(c, r, "a TLS write");
	return rc == 0 ? tls_conn_fail(c, errmsg_set(-EPIPE, "tls: the peer closed the session"))
		       : rc;
}

int tls_conn_shutdown(struct tls_conn *c)
{
	int r;

	if (c->failed || !c->handshake_done)
		return c->failed ? c->failed : -ENOTCONN;
	c->want = 0;
	ERR_clear_error();
	r = SSL_shutdown(c->ssl);
	if (r >= 0)
		return 0; /* sent; the peer's close_notify is not awaited */
	return tls_conn_result(c, r, "the TLS shutdown");
}

/* ---- blocking helpers ---- */

/* Waits until the socket allows what c wants, or the deadline. */
static int tls_conn_wait(struct tls_conn *c, int64_t deadline_ms)
{
	struct pollfd p = { .fd = c->want & TLS_WANT_CHECK ? c->check_fd : c->fd };
	int64_t left;

	p.events = (short)(((c->want & (TLS_WANT_READ | TLS_WANT_CHECK)) ? POLLIN : 0) |
			   ((c->want & TLS_WANT_WRITE) ? POLLOUT : 0));
	for (;;) {
		left = deadline_ms - clock_now_ms();
		if (left <= 0)
			return errmsg_set(-ETIMEDOUT, "tls: the peer did not answer in time");
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int tls_conn_handshake_timed(struct tls_conn *c, int timeout_ms)
{
	int64_t deadline = clock_now_ms() + timeout_ms;
	int rc;

	while ((rc = tls_conn_handshake(c)) == -EAGAIN) {
		if ((rc = tls_conn_wait(c, deadline)))
			return rc;
	}
	return rc;
}

int tls_conn_write_all_timed(struct tls_conn *c, const void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = clock_now_ms() + timeout_ms;
	const char *p = buf;

	while (len > 0) {
		ssize_t n = tls_conn_write(c, p, len);
		if (n == -EAGAIN) {
			int rc = tls_conn_wait(c, deadline);
			if (rc)
				return rc;
			continue;
		}
		if (n < 0)
			return (int)n;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* ---- what the peer showed ---- */

bool tls_conn_peer_verified(const struct tls_conn *c)
{
	return SSL_get0_peer_certificate(c->ssl) && SSL_get_verify_result(c->ssl) == X509_V_OK &&
	       SSL_get_verify_mode(c->ssl) != SSL_VERIFY_NONE;
}

int tls_conn_peer_cn(const struct tls_conn *c, char *buf, size_t len)
{
	X509 *cert = SSL_get0_peer_certificate(c->ssl);
	int n;

	if (!cert)
		return -ENOENT;
	n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, NULL, 0);
	if (n < 0)
		return -ENOENT;
	if ((size_t)n >= len)
		return -ENOSPC;
	X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, (int)len);
	return 0;
}

const char *tls_conn_alpn(const struct tls_conn *c)
{
	return c->alpn;
}
