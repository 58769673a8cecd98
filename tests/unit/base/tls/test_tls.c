/*
 * Unit tests for base/tls/: TLS as etcd's pkg/transport, with certificates
 * this test makes (a CA, a server, clients, a CRL) in a scratch directory.
 * - a handshake between contexts over a socketpair, driven without
 *   blocking (-EAGAIN and the want bits), data both ways, ALPN h2, the
 *   server's name checked by the client
 * - client cert auth (and a trusted CA alone) requires a client
 *   certificate; the client's CN and verification are reported
 * - allowed CN and allowed hostname accept and refuse; both at once is
 *   etcd's error
 * - a CRL refuses a revoked client by serial, with etcd's message
 * - the peer port's SAN check against the client's address (TCP); DNS
 *   SANs looked up on a thread while the server waits on the check
 * - cipher suites: Go names mapped, unknown refused with etcd's text, the
 *   list applied to TLS 1.2, TLS 1.2 the least version
 * - auto TLS: file modes, P-521 key, SANs, subject, usages, validity, SEC1
 *   key, reuse on a second call, a new pair when one file is missing, a
 *   client that skips verification of the self-signed server
 * - config_tls_info for the peer side, with and without certificates
 * - the blocking helpers, their timeout, and the module's allocations
 * - a session ticket key: servers given one key resume each other's
 *   sessions, a server with OpenSSL's own key does not
 */
#include "shm_testlib.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "base/clock/clock.h"
#include "config/config.h"
#include "config/tls_config.h"
#include "base/log/errmsg.h"
#include "base/tls/tls.h"
#include "base/tls/tls_int.h"

static char dir[256];

/* ---- certificates for the tests ---- */

struct pair {
	X509 *cert;
	EVP_PKEY *key;
	char cert_path[320];
	char key_path[320];
};

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
	X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
	CHECK(e);
	CHECK(X509_add_ext(x, e, -1));
	X509_EXTENSION_free(e);
}

static void write_pem(const char *path, X509 *cert, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");
	CHECK(f);
	if (cert)
		CHECK(PEM_write_X509(f, cert));
	if (key)
		CHECK(PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL));
	CHECK(fclose(f) == 0);
}

/* A P-256 certificate named name, CN cn, signed by issuer (NULL: itself,
 * a CA); san and eku as OpenSSL's config syntax, or NULL. */
static void make_pair(struct pair *p, const char *name, const char *cn, struct pair *issuer,
		      long serial, const char *san, const char *eku)
{
	X509_NAME *n;

	p->key = EVP_EC_gen("P-256");
	CHECK(p->key);
	p->cert = X509_new();
	CHECK(X509_set_version(p->cert, X509_VERSION_3));
	CHECK(ASN1_INTEGER_set(X509_get_serialNumber(p->cert), serial));
	CHECK(X509_gmtime_adj(X509_getm_notBefore(p->cert), -60));
	CHECK(X509_gmtime_adj(X509_getm_notAfter(p->cert), 3600));
	n = X509_get_subject_name(p->cert);
	CHECK(X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1,
					 0));
	CHECK(X509_set_issuer_name(p->cert, issuer ? X509_get_subject_name(issuer->cert) : n));
	CHECK(X509_set_pubkey(p->cert, p->key));
	if (!issuer) {
		add_ext(p->cert, p->cert, NID_basic_constraints, "critical,CA:TRUE");
		add_ext(p->cert, p->cert, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		add_ext(p->cert, issuer->cert, NID_key_usage, "critical,digitalSignature");
	}
	if (eku)
		add_ext(p->cert, issuer ? issuer->cert : p->cert, NID_ext_key_usage, eku);
	if (san)
		add_ext(p->cert, issuer ? issuer->cert : p->cert, NID_subject_alt_name, san);
	CHECK(X509_sign(p->cert, issuer ? issuer->key : p->key, EVP_sha256()));
	snprintf(p->cert_path, sizeof(p->cert_path), "%s/%s.crt", dir, name);
	snprintf(p->key_path, sizeof(p->key_path), "%s/%s.key", dir, name);
	write_pem(p->cert_path, p->cert, NULL);
	write_pem(p->key_path, NULL, p->key);
}

static void free_pair(struct pair *p)
{
	X509_free(p->cert);
	EVP_PKEY_free(p->key);
}

static struct pair ca, other_ca, server, client, client_dns, client_revoked, client_ip,
	client_far, client_localhost, stranger;
static char crl_path[320];

/* A CRL of ca revoking serial. */
static void make_crl(long serial)
{
	X509_CRL *crl = X509_CRL_new();
	X509_REVOKED *r = X509_REVOKED_new();
	ASN1_INTEGER *s = ASN1_INTEGER_new();
	ASN1_TIME *t = ASN1_TIME_new();

	CHECK(crl && r && s && t);
	CHECK(X509_CRL_set_version(crl, 1));
	CHECK(X509_CRL_set_issuer_name(crl, X509_get_subject_name(ca.cert)));
	CHECK(X509_gmtime_adj(t, 0));
	CHECK(X509_CRL_set1_lastUpdate(crl, t));
	CHECK(ASN1_INTEGER_set(s, serial));
	CHECK(X509_REVOKED_set_serialNumber(r, s));
	CHECK(X509_REVOKED_set_revocationDate(r, t));
	CHECK(X509_CRL_add0_revoked(crl, r));
	CHECK(X509_CRL_sign(crl, ca.key, EVP_sha256()));
	snprintf(crl_path, sizeof(crl_path), "%s/revoke.crl", dir);
	FILE *f = fopen(crl_path, "w");
	CHECK(f);
	CHECK(PEM_write_X509_CRL(f, crl));
	CHECK(fclose(f) == 0);
	ASN1_INTEGER_free(s);
	ASN1_TIME_free(t);
	X509_CRL_free(crl);
}

static void make_all(void)
{
	make_pair(&ca, "ca", "test ca", NULL, 1, NULL, NULL);
	make_pair(&other_ca, "other-ca", "other ca", NULL, 2, NULL, NULL);
	make_pair(&server, "server", "server", &ca, 10, "DNS:localhost,IP:127.0.0.1",
		  "serverAuth,clientAuth");
	make_pair(&client, "client", "client", &ca, 11, NULL, "clientAuth");
	make_pair(&client_dns, "client-dns", "peer-a", &ca, 12, "DNS:peer-a.example",
		  "clientAuth");
	make_pair(&client_revoked, "client-revoked", "client", &ca, 0x5eed, NULL, "clientAuth");
	make_pair(&client_ip, "client-ip", "client", &ca, 14, "IP:127.0.0.1", "clientAuth");
	make_pair(&client_far, "client-far", "client", &ca, 15, "IP:10.9.9.9", "clientAuth");
	make_pair(&client_localhost, "client-localhost", "client", &ca, 17, "DNS:localhost",
		  "clientAuth");
	make_pair(&stranger, "stranger", "client", &other_ca, 16, NULL, "clientAuth");
	make_crl(0x5eed);
}

/* ---- driving two connections ---- */

struct ends {
	struct tls_ctx *sctx, *cctx;
	struct tls_conn *s, *c;
	int fds[2];
	int src, crc;       /* handshake results */
	int eagains;        /* -EAGAIN seen */
};

static struct tls_info server_info(void)
{
	return (struct tls_info){ .side = TLS_SIDE_PEER, .cert_file = server.cert_path,
				  .key_file = server.key_path };
}

static void set_nonblock(int fd)
{
	CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

static bool failed(int rc)
{
	return rc != 0 && rc != -EAGAIN;
}

/* Drives both handshakes over fds until neither waits, or one fails (the
 * error slot then holds that side's text). */
static void drive(struct ends *e)
{
	e->src = e->crc = -EAGAIN;
	for (int i = 0; i < 1000 && (e->src == -EAGAIN || e->crc == -EAGAIN); i++) {
		if (e->crc == -EAGAIN) {
			e->crc = tls_conn_handshake(e->c);
			if (e->crc == -EAGAIN) {
				e->eagains++;
				CHECK(tls_conn_want(e->c) & (TLS_WANT_READ | TLS_WANT_WRITE));
			}
			if (failed(e->crc))
				break;
		}
		if (e->src == -EAGAIN) {
			e->src = tls_conn_handshake(e->s);
			e->eagains += e->src == -EAGAIN;
			if (failed(e->src))
				break;
		}
	}
}

/* Makes contexts of infos si (server) and ci (client, offering ALPN
 * protocols alpn when given, at most TLS version client_max when not 0)
 * and connections over a socketpair, not yet handshaking. */
static void open_pair(struct ends *e, const struct tls_info *si, const struct tls_info *ci,
		      const char *sni, int client_max, const char *const *alpn, size_t nalpn)
{
	memset(e, 0, sizeof(*e));
	CHECK_EQ(tls_ctx_new(si, TLS_SERVER, &e->sctx), 0);
	CHECK_EQ(tls_ctx_new(ci, TLS_CLIENT, &e->cctx), 0);
	if (client_max)
		CHECK(SSL_CTX_set_max_proto_version(e->cctx->ssl, client_max));
	if (alpn)
		CHECK_EQ(tls_ctx_set_alpn(e->cctx, alpn, nalpn), 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, e->fds) == 0);
	CHECK_EQ(tls_conn_new(e->sctx, e->fds[0], NULL, &e->s), 0);
	CHECK_EQ(tls_conn_new(e->cctx, e->fds[1], sni, &e->c), 0);
}

/* open_pair with defaults, then both handshakes. */
static void connect_pair(struct ends *e, const struct tls_info *si, const struct tls_info *ci,
			 const char *sni)
{
	open_pair(e, si, ci, sni, 0, NULL, 0);
	drive(e);
}

static void close_pair(struct ends *e)
{
	tls_conn_free(e->s);
	tls_conn_free(e->c);
	tls_ctx_free(e->sctx);
	tls_ctx_free(e->cctx);
	close(e->fds[0]);
	close(e->fds[1]);
}

/* Whether the client learns that the server refused it: at the
 * handshake, or (TLS 1.3: the client finishes first) at its first read. */
static bool client_refused(struct ends *e)
{
	char b[8];
	if (e->crc != 0)
		return true;
	for (int i = 0; i < 100; i++) {
		ssize_t n = tls_conn_read(e->c, b, sizeof(b));
		if (n != -EAGAIN)
			return n < 0 || n == 0;
		usleep(1000);
	}
	return false;
}

static void test_handshake(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path };
	static const char *const protos[] = { "http/1.1", "h2" };
	struct ends e;
	char buf[64], cn[64];

	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	CHECK_EQ(e.crc, 0);
	CHECK(e.eagains > 0); /* progress came in steps, never by blocking */
	CHECK(tls_conn_peer_verified(e.c));
	CHECK(!tls_conn_peer_verified(e.s)); /* no client cert asked for */
	CHECK_EQ(tls_conn_peer_cn(e.c, cn, sizeof(cn)), 0);
	CHECK(strcmp(cn, "server") == 0);
	CHECK_EQ(tls_conn_peer_cn(e.c, cn, 3), -ENOSPC);
	CHECK_EQ(tls_conn_peer_cn(e.s, cn, sizeof(cn)), -ENOENT);
	CHECK(strcmp(tls_conn_alpn(e.c), "") == 0); /* the client offered none */
	CHECK_EQ(SSL_CTX_get_min_proto_version(e.sctx->ssl), TLS1_2_VERSION);
	CHECK_EQ(SSL_CTX_get_min_proto_version(e.cctx->ssl), TLS1_2_VERSION);

	/* data both ways; nothing to read is -EAGAIN */
	CHECK_EQ(tls_conn_read(e.s, buf, sizeof(buf)), -EAGAIN);
	CHECK(tls_conn_want(e.s) & TLS_WANT_READ);
	CHECK_EQ(tls_conn_write(e.c, "ping", 4), 4);
	CHECK_EQ(tls_conn_read(e.s, buf, sizeof(buf)), 4);
	CHECK(memcmp(buf, "ping", 4) == 0);
	CHECK_EQ(tls_conn_write(e.s, "pong!", 5), 5);
	CHECK_EQ(tls_conn_read(e.c, buf, sizeof(buf)), 5);
	CHECK(memcmp(buf, "pong!", 5) == 0);
	/* close_notify is a clean end of stream */
	CHECK_EQ(tls_conn_shutdown(e.s), 0);
	CHECK_EQ(tls_conn_read(e.c, buf, sizeof(buf)), 0);
	close_pair(&e);

	/* ALPN: the server's "h2" (etcd's ServerConfig) among the offers */
	open_pair(&e, &si, &ci, "localhost", 0, protos, 2);
	drive(&e);
	CHECK_EQ(e.crc, 0);
	CHECK(strcmp(tls_conn_alpn(e.c), "h2") == 0);
	CHECK(strcmp(tls_conn_alpn(e.s), "h2") == 0);
	close_pair(&e);

	/* the server's certificate must name the server asked for */
	connect_pair(&e, &si, &ci, "other.example");
	CHECK_EQ(e.crc, -EPROTO);
	CHECK(strstr(errmsg_get(-EPROTO), "hostname mismatch") != NULL);
	close_pair(&e);
	/* and chain to the trusted CA */
	ci.trusted_ca_file = other_ca.cert_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.crc, -EPROTO);
	CHECK(strstr(errmsg_get(-EPROTO), "certificate") != NULL);
	close_pair(&e);
}

static void test_client_cert_auth(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path };
	struct ends e;
	char cn[64];

	si.client_cert_auth = true;
	si.trusted_ca_file = ca.cert_path;
	/* no client certificate */
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EPROTO);
	CHECK(strstr(errmsg_get(-EPROTO), "certificate") != NULL);
	CHECK(client_refused(&e));
	close_pair(&e);

	/* a certificate from another CA */
	ci.cert_file = stranger.cert_path;
	ci.key_file = stranger.key_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EPROTO);
	CHECK(client_refused(&e));
	close_pair(&e);

	/* the CA's client */
	ci.cert_file = client.cert_path;
	ci.key_file = client.key_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	CHECK_EQ(e.crc, 0);
	CHECK(tls_conn_peer_verified(e.s));
	CHECK_EQ(tls_conn_peer_cn(e.s, cn, sizeof(cn)), 0);
	CHECK(strcmp(cn, "client") == 0);
	close_pair(&e);

	/* a trusted CA alone asks for a client certificate too (Go's
	 * RequireAndVerifyClientCert) */
	si.client_cert_auth = false;
	ci.cert_file = ci.key_file = NULL;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EPROTO);
	close_pair(&e);
	/* client cert auth without a CA file verifies against the system's
	 * CAs, which do not hold this test's CA */
	si.client_cert_auth = true;
	si.trusted_ca_file = NULL;
	ci.cert_file = client.cert_path;
	ci.key_file = client.key_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EPROTO);
	close_pair(&e);
}

static void test_allowed_cn_hostname(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path,
			       .cert_file = client_dns.cert_path, .key_file = client_dns.key_path };
	struct tls_ctx *ctx;
	struct ends e;

	si.client_cert_auth = true;
	si.trusted_ca_file = ca.cert_path;

	si.allowed_cn = "peer-a";
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	CHECK_EQ(e.crc, 0);
	close_pair(&e);
	si.allowed_cn = "peer-b";
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EACCES);
	CHECK(strstr(errmsg_get(-EACCES), "client certificate authentication failed") != NULL);
	CHECK(strstr(errmsg_get(-EACCES), "peer-b") != NULL);
	CHECK(client_refused(&e));
	close_pair(&e);
	/* an allowed CN needs a client certificate even without client
	 * cert auth */
	si.client_cert_auth = false;
	si.trusted_ca_file = NULL;
	si.allowed_cn = "peer-a";
	ci.cert_file = ci.key_file = NULL;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK(e.src == -EPROTO || e.src == -EACCES);
	close_pair(&e);

	si.client_cert_auth = true;
	si.trusted_ca_file = ca.cert_path;
	si.allowed_cn = NULL;
	ci.cert_file = client_dns.cert_path;
	ci.key_file = client_dns.key_path;
	si.allowed_hostname = "peer-a.example";
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	close_pair(&e);
	/* the hostname is matched against SANs, never the CN */
	si.allowed_hostname = "peer-a";
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EACCES);
	CHECK(strstr(errmsg_get(-EACCES), "allowed hostname \"peer-a\"") != NULL);
	close_pair(&e);

	/* both at once: etcd's error */
	si.allowed_cn = "peer-a";
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL),
		     "AllowedCN and AllowedHostname are mutually exclusive (cn=\"peer-a\", hostname=\"peer-a\")") == 0);
	CHECK(ctx == NULL);
}

static void test_crl(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path,
			       .cert_file = client_revoked.cert_path,
			       .key_file = client_revoked.key_path };
	struct ends e;

	si.client_cert_auth = true;
	si.trusted_ca_file = ca.cert_path;
	si.crl_file = crl_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -EACCES);
	CHECK(strcmp(errmsg_get(-EACCES), "transport: certificate serial 5eed revoked") == 0);
	close_pair(&e);

	ci.cert_file = client.cert_path;
	ci.key_file = client.key_path;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	close_pair(&e);

	/* an unreadable CRL refuses every client, saying which flag (a
	 * path under a directory that does not exist in the scratch
	 * directory: a fixed /nonexistent/x may exist on the machine) */
	char missing[300], want[340];
	snprintf(missing, sizeof(missing), "%s/missing/revoke.crl", dir);
	snprintf(want, sizeof(want), "--peer-crl-file %s", missing);
	si.crl_file = missing;
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, -ENOENT);
	CHECK(strstr(errmsg_get(-ENOENT), want) != NULL);
	close_pair(&e);
}

/* A TCP connection on loopback (the SAN check needs the client's
 * address), not yet handshaking; connect_tcp handshakes too. */
static void open_tcp(struct ends *e, const struct tls_info *si, const struct tls_info *ci)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	memset(e, 0, sizeof(*e));
	CHECK(l >= 0);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0);
	CHECK(listen(l, 1) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	e->fds[1] = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(e->fds[1], (struct sockaddr *)&a, sizeof(a)) == 0);
	e->fds[0] = accept(l, NULL, NULL);
	CHECK(e->fds[0] >= 0);
	close(l);
	set_nonblock(e->fds[0]);
	set_nonblock(e->fds[1]);
	CHECK_EQ(tls_ctx_new(si, TLS_SERVER, &e->sctx), 0);
	CHECK_EQ(tls_ctx_new(ci, TLS_CLIENT, &e->cctx), 0);
	CHECK_EQ(tls_conn_new(e->sctx, e->fds[0], NULL, &e->s), 0);
	CHECK_EQ(tls_conn_new(e->cctx, e->fds[1], "127.0.0.1", &e->c), 0);
}

static void connect_tcp(struct ends *e, const struct tls_info *si, const struct tls_info *ci)
{
	open_tcp(e, si, ci);
	drive(e);
}

/* The peer port's server: client cert auth with the CA, and the SAN
 * check of the client's address. */
static struct tls_info san_server_info(void)
{
	struct tls_info si = server_info();

	si.client_cert_auth = true;
	si.trusted_ca_file = ca.cert_path;
	si.check_client_san = true;
	return si;
}

static void test_client_san(void)
{
	struct tls_info si = san_server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path,
			       .cert_file = client_ip.cert_path, .key_file = client_ip.key_path };
	struct ends e;

	connect_tcp(&e, &si, &ci);
	CHECK_EQ(e.src, 0);
	close_pair(&e);

	ci.cert_file = client_far.cert_path;
	ci.key_file = client_far.key_path;
	connect_tcp(&e, &si, &ci);
	CHECK_EQ(e.src, -EACCES);
	CHECK(strstr(errmsg_get(-EACCES), "not 127.0.0.1") != NULL);
	close_pair(&e);
	/* skipped as --experimental-peer-skip-client-san-verification does */
	si.check_client_san = false;
	connect_tcp(&e, &si, &ci);
	CHECK_EQ(e.src, 0);
	close_pair(&e);
	/* a certificate without SANs passes, as in etcd */
	si.check_client_san = true;
	ci.cert_file = client.cert_path;
	ci.key_file = client.key_path;
	connect_tcp(&e, &si, &ci);
	CHECK_EQ(e.src, 0);
	close_pair(&e);
}

/* Drives both ends of e (made by open_tcp) until the server's handshake
 * waits on its SAN check; returns whether it does. */
static bool until_check(struct ends *e)
{
	e->src = e->crc = -EAGAIN;
	for (int i = 0; i < 1000; i++) {
		if (e->crc == -EAGAIN)
			e->crc = tls_conn_handshake(e->c);
		e->src = tls_conn_handshake(e->s);
		if (e->src != -EAGAIN || (tls_conn_want(e->s) & TLS_WANT_CHECK))
			break;
	}
	return e->src == -EAGAIN && (tls_conn_want(e->s) & TLS_WANT_CHECK);
}

/* A certificate with only DNS SANs: the server looks the names up on a
 * thread of the module and waits on the check's descriptor, not on the
 * socket; a connection freed while its lookup runs leaves nothing behind
 * (ASan and LSan watch this test). "localhost" resolves from /etc/hosts. */
static void test_client_san_dns(void)
{
	struct tls_info si = san_server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path,
			       .cert_file = client_localhost.cert_path,
			       .key_file = client_localhost.key_path };
	struct ends e;

	open_tcp(&e, &si, &ci);
	CHECK_EQ(tls_conn_check_fd(e.s), -1);
	CHECK(until_check(&e));
	CHECK(tls_conn_check_fd(e.s) >= 0);
	{
		struct pollfd p = { .fd = tls_conn_check_fd(e.s), .events = POLLIN };
		CHECK_EQ(poll(&p, 1, 30000), 1);
	}
	CHECK_EQ(tls_conn_handshake(e.s), 0);
	CHECK_EQ(e.crc, 0);
	/* the session works past the check */
	CHECK_EQ(tls_conn_write_all_timed(e.c, "ping", 4, 5000), 0);
	{
		char b[8];
		ssize_t n = -EAGAIN;
		for (int i = 0; i < 5000 && n == -EAGAIN; i++) {
			n = tls_conn_read(e.s, b, sizeof(b));
			if (n == -EAGAIN)
				usleep(1000);
		}
		CHECK_EQ(n, 4);
		CHECK(memcmp(b, "ping", 4) == 0);
	}
	close_pair(&e);

	/* the blocking helper waits on the check too */
	open_tcp(&e, &si, &ci);
	CHECK(until_check(&e));
	CHECK_EQ(tls_conn_handshake_timed(e.s, 30000), 0);
	close_pair(&e);

	/* freed while the lookup runs (most of them are still running) */
	for (int i = 0; i < 20; i++) {
		open_tcp(&e, &si, &ci);
		CHECK(until_check(&e));
		close_pair(&e);
	}
	/* let the detached lookups end before the leak check at exit */
	usleep(300 * 1000);
}

static void test_cipher_suites(void)
{
	const char *name;
	char *ecdsa_only[] = { "TLS_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" };
	char *rsa_only[] = { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" };
	char *tls13_only[] = { "TLS_CHACHA20_POLY1305_SHA256" };
	char *unknown[] = { "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_FOO" };
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path };
	struct tls_ctx *ctx;
	struct ends e;

	CHECK_EQ(tls_cipher_suite("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", &name), 0);
	CHECK(strcmp(name, "ECDHE-RSA-AES128-GCM-SHA256") == 0);
	CHECK_EQ(tls_cipher_suite("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", &name), 0);
	CHECK(strcmp(name, "ECDHE-ECDSA-CHACHA20-POLY1305") == 0);
	CHECK_EQ(tls_cipher_suite("TLS_RSA_WITH_AES_256_CBC_SHA", &name), 0);
	CHECK(strcmp(name, "AES256-SHA") == 0);
	CHECK_EQ(tls_cipher_suite("TLS_AES_256_GCM_SHA384", &name), 0);
	CHECK(name == NULL);
	CHECK_EQ(tls_cipher_suite("ECDHE-RSA-AES128-GCM-SHA256", &name), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL),
		     "unexpected TLS cipher suite \"ECDHE-RSA-AES128-GCM-SHA256\"") == 0);

	si.cipher_suites = unknown;
	si.cipher_suite_count = 2;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -EINVAL);
	CHECK(strcmp(errmsg_get(-EINVAL), "unexpected TLS cipher suite \"TLS_FOO\"") == 0);

	/* the list decides TLS 1.2's suite */
	si.cipher_suites = ecdsa_only;
	si.cipher_suite_count = 2;
	open_pair(&e, &si, &ci, "localhost", TLS1_2_VERSION, NULL, 0);
	drive(&e);
	CHECK_EQ(e.src, 0);
	CHECK(strcmp(SSL_CIPHER_get_name(SSL_get_current_cipher(e.s->ssl)),
		     "ECDHE-ECDSA-AES256-GCM-SHA384") == 0);
	close_pair(&e);

	/* an RSA suite for an ECDSA certificate: nothing in common */
	si.cipher_suites = rsa_only;
	si.cipher_suite_count = 1;
	open_pair(&e, &si, &ci, "localhost", TLS1_2_VERSION, NULL, 0);
	drive(&e);
	CHECK_EQ(e.src, -EPROTO);
	close_pair(&e);
	/* TLS 1.3 is unaffected, as in Go */
	connect_pair(&e, &si, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	CHECK_EQ(SSL_version(e.s->ssl), TLS1_3_VERSION);
	close_pair(&e);
	/* only TLS 1.3 names: TLS 1.3 only */
	si.cipher_suites = tls13_only;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), 0);
	CHECK_EQ(SSL_CTX_get_min_proto_version(ctx->ssl), TLS1_3_VERSION);
	tls_ctx_free(ctx);
}

static void test_ctx_errors(void)
{
	struct tls_info si = server_info();
	struct tls_info empty = { .side = TLS_SIDE_PEER };
	struct tls_ctx *ctx;

	CHECK_EQ(tls_ctx_new(&empty, TLS_SERVER, &ctx), -EINVAL);
	CHECK(strstr(errmsg_get(-EINVAL), "KeyFile and CertFile are not presented") != NULL);
	si.key_file = NULL;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -EINVAL);
	CHECK(strstr(errmsg_get(-EINVAL), "KeyFile and CertFile must both be present[key: , cert: ") !=
	      NULL);
	char missing[300], want[340];
	snprintf(missing, sizeof(missing), "%s/missing/server.key", dir);
	si.key_file = missing;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -ENOENT);
	snprintf(want, sizeof(want), "--peer-key-file %s", missing);
	CHECK(strstr(errmsg_get(-ENOENT), want) != NULL);
	si.side = TLS_SIDE_CLIENT;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -ENOENT);
	snprintf(want, sizeof(want), "--key-file %s", missing);
	CHECK(strstr(errmsg_get(-ENOENT), want) != NULL);
	/* a key of another certificate */
	si.key_file = client.key_path;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -EPROTO);
	CHECK(strstr(errmsg_get(-EPROTO), "does not match") != NULL);
	/* a file that is not PEM */
	si.key_file = server.key_path;
	si.cert_file = crl_path;
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &ctx), -EPROTO);
	CHECK(ctx == NULL);
	/* a client needs no certificate */
	CHECK_EQ(tls_ctx_new(&empty, TLS_CLIENT, &ctx), 0);
	tls_ctx_free(ctx);
}

/* ---- auto TLS ---- */

static void read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	ssize_t n = read(fd, buf, len - 1);
	CHECK(n > 0);
	buf[n] = '\0';
	close(fd);
}

static X509 *load_cert(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECK(f);
	X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
	fclose(f);
	CHECK(x);
	return x;
}

static void check_self_cert(const char *cert_path)
{
	X509 *x = load_cert(cert_path);
	EVP_PKEY *pub = X509_get0_pubkey(x);
	char curve[64], org[64];
	size_t cl;
	int days, secs;
	GENERAL_NAMES *sans;
	bool ip4 = false, ip6 = false, dns = false;
	const BIGNUM *serial;
	BIGNUM *bn;

	CHECK(EVP_PKEY_get_base_id(pub) == EVP_PKEY_EC);
	CHECK(EVP_PKEY_get_utf8_string_param(pub, "group", curve, sizeof(curve), &cl));
	CHECK(strcmp(curve, "P-521") == 0 || strcmp(curve, "secp521r1") == 0);
	CHECK(X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_organizationName, org,
					sizeof(org)) > 0);
	CHECK(strcmp(org, "etcd") == 0);
	CHECK(X509_NAME_cmp(X509_get_subject_name(x), X509_get_issuer_name(x)) == 0);
	CHECK(X509_verify(x, pub) == 1);
	CHECK(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(x), X509_get0_notAfter(x)));
	CHECK_EQ(days, TLS_SELF_CERT_VALIDITY_DAYS);
	CHECK_EQ(secs, 0);
	CHECK(X509_cmp_current_time(X509_get0_notBefore(x)) <= 0);
	CHECK_EQ(X509_get_key_usage(x), KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT);
	CHECK_EQ(X509_get_extended_key_usage(x), XKU_SSL_SERVER);
	CHECK_EQ(X509_check_ca(x), 0);
	CHECK(X509_get_extension_flags(x) & EXFLAG_BCONS);
	bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x), NULL);
	serial = bn;
	CHECK(BN_num_bits(serial) <= 128 && BN_num_bits(serial) > 64);
	BN_free(bn);
	sans = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
	CHECK(sans);
	for (int i = 0; i < sk_GENERAL_NAME_num(sans); i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.iPAddress) == 4)
			ip4 = memcmp(ASN1_STRING_get0_data(g->d.iPAddress), "\x7f\0\0\x01", 4) == 0;
		if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.iPAddress) == 16)
			ip6 = ASN1_STRING_get0_data(g->d.iPAddress)[15] == 1;
		if (g->type == GEN_DNS)
			dns = strcmp((const char *)ASN1_STRING_get0_data(g->d.dNSName),
				     "localhost") == 0;
	}
	CHECK(ip4 && ip6 && dns);
	CHECK_EQ(sk_GENERAL_NAME_num(sans), 3);
	GENERAL_NAMES_free(sans);
	X509_free(x);
}

static void test_self_cert(void)
{
	const char *hosts[] = { "127.0.0.1:2380", "localhost:12380", "::1" };
	struct tls_info info = { .side = TLS_SIDE_PEER };
	char adir[320], cert1[8192], cert2[8192], key[4096];
	struct stat st, st2;
	struct ends e;

	umask(022);
	snprintf(adir, sizeof(adir), "%s/data/fixtures/peer", dir);
	CHECK_EQ(tls_self_cert(adir, hosts, 3, &info), 0);
	CHECK(info.self_signed);
	CHECK(strstr(info.cert_file, "/data/fixtures/peer/cert.pem") != NULL);
	CHECK(strstr(info.key_file, "/data/fixtures/peer/key.pem") != NULL);
	CHECK(stat(adir, &st) == 0 && (st.st_mode & 0777) == 0700);
	CHECK(stat(info.cert_file, &st) == 0 && (st.st_mode & 0777) == 0644);
	CHECK(stat(info.key_file, &st) == 0 && (st.st_mode & 0777) == 0600);
	read_file(info.key_file, key, sizeof(key));
	CHECK(strncmp(key, "-----BEGIN EC PRIVATE KEY-----\n", 31) == 0);
	check_self_cert(info.cert_file);

	/* a second call keeps the pair */
	read_file(info.cert_file, cert1, sizeof(cert1));
	CHECK(stat(info.cert_file, &st) == 0);
	CHECK_EQ(tls_self_cert(adir, hosts, 3, &info), 0);
	read_file(info.cert_file, cert2, sizeof(cert2));
	CHECK(stat(info.cert_file, &st2) == 0);
	CHECK(strcmp(cert1, cert2) == 0 && st.st_ino == st2.st_ino);
	/* one file missing: a new pair */
	CHECK(unlink(info.key_file) == 0);
	CHECK_EQ(tls_self_cert(adir, hosts, 3, &info), 0);
	read_file(info.cert_file, cert2, sizeof(cert2));
	CHECK(strcmp(cert1, cert2) != 0);
	CHECK(access(info.key_file, R_OK) == 0);

	/* a self-signed server; a self-signed client skips verifying it */
	struct tls_info ci = { .side = TLS_SIDE_PEER, .cert_file = info.cert_file,
			       .key_file = info.key_file, .self_signed = true };
	connect_pair(&e, &info, &ci, "localhost");
	CHECK_EQ(e.src, 0);
	CHECK_EQ(e.crc, 0);
	CHECK(!tls_conn_peer_verified(e.c));
	close_pair(&e);
	/* without skipping, the client refuses it */
	ci.self_signed = false;
	connect_pair(&e, &info, &ci, "localhost");
	CHECK_EQ(e.crc, -EPROTO);
	close_pair(&e);
	/* an allowed CN needs a verified peer, also on the client side */
	ci.self_signed = true;
	ci.allowed_cn = "etcd";
	connect_pair(&e, &info, &ci, "localhost");
	CHECK_EQ(e.crc, -EACCES);
	close_pair(&e);
	tls_info_free(&info);

	/* a directory that cannot be made */
	CHECK_EQ(tls_self_cert("/proc/cetcd-no/fixtures", hosts, 1, &info), -ENOENT);
	CHECK(strstr(errmsg_get(-ENOENT), "/proc/cetcd-no/fixtures") != NULL);
}

static void test_info_from_config(void)
{
	struct cetcd_config c;
	struct config_error err;
	struct tls_info info;
	char data[320], purl[64], cluster[128];
	char *env[] = { NULL };

	snprintf(data, sizeof(data), "%s/member.etcd", dir);
	snprintf(purl, sizeof(purl), "https://127.0.0.1:12380");
	snprintf(cluster, sizeof(cluster), "default=%s", purl);
	char *argv[] = { "cetcd", "--data-dir", data, "--peer-auto-tls", "--listen-peer-urls", purl,
			 "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
			 "--cipher-suites", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", NULL };
	CHECK_EQ(config_init(&c), 0);
	CHECK_EQ(config_parse(&c, CONFIG_PROG_LAUNCHER, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv, env, &err), 0);
	CHECK_EQ(config_tls_info(&c, TLS_SIDE_PEER, &info), 0);
	CHECK(info.self_signed && info.check_client_san);
	CHECK(strstr(info.cert_file, "member.etcd/fixtures/peer/cert.pem") != NULL);
	CHECK_EQ(info.cipher_suite_count, 1);
	CHECK(strcmp(info.cipher_suites[0], "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256") == 0);
	X509 *x = load_cert(info.cert_file);
	CHECK(X509_check_ip_asc(x, "127.0.0.1", 0) == 1);
	X509_free(x);
	tls_info_free(&info);
	/* the client side is its own: nothing asked there */
	CHECK_EQ(config_tls_info(&c, TLS_SIDE_CLIENT, &info), 0);
	CHECK(tls_info_is_empty(&info) && !info.self_signed && !info.check_client_san);
	tls_info_free(&info);
	config_free(&c);

	/* certificates given: auto TLS is ignored */
	char *argv2[] = { "cetcd", "--data-dir", data, "--peer-auto-tls", "--listen-peer-urls", purl,
			  "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
			  "--peer-cert-file", server.cert_path, "--peer-key-file", server.key_path,
			  "--peer-trusted-ca-file", ca.cert_path, "--peer-client-cert-auth",
			  "--peer-cert-allowed-cn", "peer-a",
			  "--experimental-peer-skip-client-san-verification", NULL };
	CHECK_EQ(config_init(&c), 0);
	CHECK_EQ(config_parse(&c, CONFIG_PROG_LAUNCHER, (int)(sizeof(argv2) / sizeof(argv2[0])) - 1, argv2, env, &err), 0);
	CHECK_EQ(config_tls_info(&c, TLS_SIDE_PEER, &info), 0);
	CHECK(!info.self_signed && !info.check_client_san && info.client_cert_auth);
	CHECK(strcmp(info.cert_file, server.cert_path) == 0);
	CHECK(strcmp(info.trusted_ca_file, ca.cert_path) == 0);
	CHECK(strcmp(info.allowed_cn, "peer-a") == 0);
	tls_info_free(&info);
	config_free(&c);
}

/* ---- blocking helpers ---- */

struct server_arg {
	struct tls_conn *conn;
	int rc;
};

static void *server_thread(void *arg)
{
	struct server_arg *a = arg;
	a->rc = tls_conn_handshake_timed(a->conn, 5000);
	if (a->rc == 0)
		a->rc = tls_conn_write_all_timed(a->conn, "hello", 5, 5000);
	return NULL;
}

static void test_timed(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path };
	struct server_arg a;
	struct ends e;
	pthread_t t;
	char buf[8];
	uint64_t t0;

	open_pair(&e, &si, &ci, "localhost", 0, NULL, 0);
	a.conn = e.s;
	CHECK(pthread_create(&t, NULL, server_thread, &a) == 0);
	CHECK_EQ(tls_conn_handshake_timed(e.c, 5000), 0);
	size_t got = 0;
	while (got < 5) {
		ssize_t n = tls_conn_read(e.c, buf + got, sizeof(buf) - got);
		if (n == -EAGAIN) {
			usleep(1000);
			continue;
		}
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK(memcmp(buf, "hello", 5) == 0);
	pthread_join(t, NULL);
	CHECK_EQ(a.rc, 0);
	tls_conn_free(e.c);
	e.c = NULL;

	/* a client that never speaks: the server gives up in time */
	tls_conn_free(e.s);
	close(e.fds[0]);
	close(e.fds[1]);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, e.fds) == 0);
	CHECK_EQ(tls_conn_new(e.sctx, e.fds[0], NULL, &e.s), 0);
	t0 = clock_now_ns();
	CHECK_EQ(tls_conn_handshake_timed(e.s, 100), -ETIMEDOUT);
	CHECK(clock_now_ns() - t0 >= 90000000ull);
	/* a client that hangs up */
	close(e.fds[1]);
	e.fds[1] = -1;
	tls_conn_free(e.s);
	CHECK_EQ(tls_conn_new(e.sctx, e.fds[0], NULL, &e.s), 0);
	CHECK_EQ(tls_conn_handshake_timed(e.s, 1000), -ECONNRESET);
	CHECK_EQ(tls_conn_handshake(e.s), -ECONNRESET); /* failed for good */
	close_pair(&e);
}

/* One connection of a client of cctx to a server of sctx over a
 * socketpair, offering sess when given. Returns whether the session was
 * resumed; *out (when given) gets the session the client holds once it
 * read the server's ticket (freed with SSL_SESSION_free). */
static bool resume_once(struct tls_ctx *sctx, struct tls_ctx *cctx, SSL_SESSION *sess,
			SSL_SESSION **out)
{
	struct ends e;
	bool reused;
	char b[8];

	memset(&e, 0, sizeof(e));
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, e.fds) == 0);
	CHECK_EQ(tls_conn_new(sctx, e.fds[0], NULL, &e.s), 0);
	CHECK_EQ(tls_conn_new(cctx, e.fds[1], "localhost", &e.c), 0);
	if (sess)
		CHECK(SSL_set_session(e.c->ssl, sess) == 1);
	drive(&e);
	CHECK_EQ(e.src, 0);
	CHECK_EQ(e.crc, 0);
	/* a TLS 1.3 ticket follows the handshake: the client reads it
	 * before the server's first byte */
	CHECK_EQ(tls_conn_write(e.s, "x", 1), 1);
	CHECK_EQ(tls_conn_read(e.c, b, sizeof(b)), 1);
	reused = SSL_session_reused(e.c->ssl) == 1;
	if (out)
		*out = SSL_get1_session(e.c->ssl);
	/* closed cleanly: OpenSSL marks a session not resumable when its
	 * connection is freed without close_notify */
	CHECK_EQ(tls_conn_shutdown(e.c), 0);
	if (out)
		CHECK(*out && SSL_SESSION_is_resumable(*out));
	tls_conn_free(e.s);
	tls_conn_free(e.c);
	close(e.fds[0]);
	close(e.fds[1]);
	return reused;
}

static void test_ticket_key(void)
{
	struct tls_info si = server_info();
	struct tls_info ci = { .side = TLS_SIDE_PEER, .trusted_ca_file = ca.cert_path };
	struct tls_ctx *one, *two, *own, *cctx;
	uint8_t key[TLS_TICKET_KEY_BYTES];
	SSL_SESSION *sess;

	for (size_t i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 37 + 11);
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &one), 0);
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &two), 0);
	CHECK_EQ(tls_ctx_new(&si, TLS_SERVER, &own), 0);
	CHECK_EQ(tls_ctx_new(&ci, TLS_CLIENT, &cctx), 0);
	CHECK_EQ(tls_ctx_set_ticket_key(one, key), 0);
	CHECK_EQ(tls_ctx_set_ticket_key(two, key), 0);
	CHECK_EQ(tls_ctx_set_ticket_key(cctx, key), -EINVAL);

	CHECK(!resume_once(one, cctx, NULL, &sess));
	CHECK(resume_once(one, cctx, sess, NULL));
	/* another process's server, given the same key */
	CHECK(resume_once(two, cctx, sess, NULL));
	CHECK(resume_once(two, cctx, sess, NULL));
	/* a server with a key of its own makes a full handshake */
	CHECK(!resume_once(own, cctx, sess, NULL));
	SSL_SESSION_free(sess);
	/* and its own tickets do not resume on the others */
	CHECK(!resume_once(own, cctx, NULL, &sess));
	CHECK(resume_once(own, cctx, sess, NULL));
	CHECK(!resume_once(one, cctx, sess, NULL));
	SSL_SESSION_free(sess);

	tls_ctx_free(one);
	tls_ctx_free(two);
	tls_ctx_free(own);
	tls_ctx_free(cctx);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_tmpdir(dir, sizeof(dir));
	tls_set_allocator(test_alloc, test_free);
	make_all();

	test_handshake();
	test_client_cert_auth();
	test_allowed_cn_hostname();
	test_crl();
	test_client_san();
	test_client_san_dns();
	test_cipher_suites();
	test_ctx_errors();
	test_self_cert();
	test_info_from_config();
	test_timed();
	test_ticket_key();

	CHECK_EQ(test_alloc_live, 0);
	tls_set_allocator(NULL, NULL);
	free_pair(&ca);
	free_pair(&other_ca);
	free_pair(&server);
	free_pair(&client);
	free_pair(&client_dns);
	free_pair(&client_revoked);
	free_pair(&client_ip);
	free_pair(&client_far);
	free_pair(&client_localhost);
	free_pair(&stranger);
	printf("test_tls: ok\n");
	return 0;
}
