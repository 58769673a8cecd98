/*
 * TLS for the member's ports, with OpenSSL, behaving as etcd 3.4's
 * pkg/transport: a "TLS info" (etcd's transport.TLSInfo) names the
 * certificate, key, trusted CA, CRL and the checks on the peer's
 * certificate; contexts built from it follow etcd's ServerConfig and
 * ClientConfig; auto TLS makes etcd's self-signed certificate; and a
 * connection wraps a socket for an epoll loop (every call returns -EAGAIN
 * with what it waits for) or for a thread that may block.
 *
 * What etcd does, and so these do:
 * - TLS 1.2 at least. Without --cipher-suites, TLS 1.2 offers Go's
 *   default suites (ECDHE with AES-GCM, ChaCha20-Poly1305 and AES-CBC-SHA,
 *   then RSA key exchange with AES-GCM and AES-CBC-SHA; Go's 3DES is left
 *   out, OpenSSL no longer offers it). --cipher-suites takes Go's names,
 *   in order, and refuses any other with etcd's text; it does not change
 *   TLS 1.3, whose suites Go does not let one choose either.
 * - A server asks for and verifies client certificates when a trusted CA
 *   file is given or client cert auth is on (Go's
 *   RequireAndVerifyClientCert), against that CA (or the system's). A
 *   chain that does not verify gets a bad_certificate alert, as from Go,
 *   whatever the reason; the error text keeps the reason.
 * - An allowed CN is compared with the subject CN of the peer's verified
 *   certificate; an allowed hostname is matched against its DNS and IP
 *   SANs (Go's VerifyHostname, never the CN). Either one needs a verified
 *   certificate from the peer, on both sides of a connection, as Go's
 *   VerifyPeerCertificate does. The two are mutually exclusive.
 * - A CRL file is read at every handshake of a server (as etcd does) and
 *   the serial of every certificate the client presented is looked up in
 *   it; its signature is not checked (nor does etcd).
 * - A server of the peer port checks the client certificate's SANs
 *   against the address the connection comes from (etcd's checkSAN),
 *   unless told to skip it (--experimental-peer-skip-client-san-
 *   verification).
 * - A self-signed (auto TLS) info makes clients skip verifying the
 *   server, as etcd's selfCert sets InsecureSkipVerify.
 * Unlike etcd, the certificate and key are read once, when the context is
 * made, not again at each handshake: replacing them takes a restart.
 *
 * Errors are negative errno values; the text for an operator (what, where
 * and what to do) is in the error slot (errmsg_get(rc)).
 *
 * A connection writes to its socket with write(2): the process must
 * ignore SIGPIPE, as the daemons do (config_daemon_start).
 */
#ifndef CETCD_BASE_TLS_H
#define CETCD_BASE_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>


/* Which port an info is for; it names the flags in messages. */
enum tls_side {
	TLS_SIDE_PEER,   /* --peer-cert-file ... */
	TLS_SIDE_CLIENT, /* --cert-file ... */
};

/* etcd's TLSInfo. Strings are owned (freed by tls_info_free); NULL or ""
 * means not given. */
struct tls_info {
	enum tls_side side;
	char *cert_file;
	char *key_file;
	char *trusted_ca_file;
	char *crl_file;
	char *allowed_cn;
	char *allowed_hostname;
	bool client_cert_auth;
	bool self_signed;          /* auto TLS: clients skip verification */
	bool check_client_san;     /* servers check client SANs (peer port) */
	size_t cipher_suite_count;
	char **cipher_suites;      /* Go names, in order of preference */
};

/* Frees what info owns and zeroes it. */
void tls_info_free(struct tls_info *info);

/* Copies src's strings into dst, which is zeroed first. Returns 0 or
 * -ENOMEM (dst is then empty). */
int tls_info_copy(struct tls_info *dst, const struct tls_info *src);

/* Whether info names no certificate (etcd's TLSInfo.Empty: neither a
 * cert file nor a key file). */
bool tls_info_is_empty(const struct tls_info *info);

/* etcd's TLSInfo.String, which etcd logs as "tls-info": "cert = ..., key
 * = ..., trusted-ca = ..., client-cert-auth = true|false, crl-file = ...",
 * into buf (truncated to len, NUL-terminated). */
void tls_info_string(const struct tls_info *info, char *buf, size_t len);

/* etcd's transport.SelfCert: in dir (made with mode 0700 if missing),
 * cert.pem and key.pem are kept if both exist; otherwise a new pair is
 * made: an ECDSA key on P-521 (as etcd 3.4), a random 128-bit serial,
 * subject O=etcd, valid from now for TLS_SELF_CERT_VALIDITY_DAYS, key
 * usage digital signature and key encipherment, extended key usage server
 * auth, basic constraints CA:FALSE, and SANs from hosts ("host" or
 * "host:port"; IP SANs for addresses, DNS SANs otherwise), signed by its
 * own key. cert.pem is mode 0666 less the umask, key.pem (SEC1 "EC
 * PRIVATE KEY", as Go's MarshalECPrivateKey) 0600. Both are written
 * aside, fsynced and renamed into place, and the directory fsynced, under
 * a lock on the directory, so daemons of one member calling this at once
 * end with one pair. Logs etcd's "created cert file" and "created key
 * file". Fills out's cert_file and key_file (replacing them) and sets
 * self_signed. Returns 0, -ENOMEM, -ENAMETOOLONG, -EPROTO (OpenSSL
 * failed), or -errno of the file system. */
#define TLS_SELF_CERT_VALIDITY_DAYS 365
int tls_self_cert(const char *dir, const char *const *hosts, size_t host_count,
		  struct tls_info *out);

/* The OpenSSL name of a TLS 1.2 suite given by Go's name (tls.CipherSuites
 * and tls.InsecureCipherSuites, and etcd's two short ChaCha20 names), in
 * *openssl_name, a static string; NULL for Go's TLS 1.3 names, which are
 * accepted and change nothing. Returns 0, or -EINVAL with etcd's message
 * (unexpected TLS cipher suite "NAME"). */
int tls_cipher_suite(const char *go_name, const char **openssl_name);

/* ---- contexts ---- */

enum tls_role {
	TLS_SERVER,
	TLS_CLIENT,
};

struct tls_ctx;

/* Builds a context for role from info (see the top of this file). The
 * files are read now; info is copied, so the caller may free it. A server
 * needs a cert and key (etcd's "KeyFile and CertFile must both be
 * present"); a client presents them if given. A server offers ALPN "h2",
 * as etcd's ServerConfig, until tls_ctx_set_alpn says otherwise. Returns
 * 0 with *out (freed with tls_ctx_free), or -EINVAL (a missing or
 * inconsistent setting, unknown cipher suite), -ENOENT/-EACCES (a file
 * that cannot be read), -EPROTO (a file OpenSSL refuses: not PEM, key
 * not matching the certificate), -ENOMEM. */
int tls_ctx_new(const struct tls_info *info, enum tls_role role, struct tls_ctx **out);

/* ALPN protocols, in order of preference ("h2", "http/1.1"): what a
 * client offers, or what a server picks from (the first of its own list
 * that the client offers; none picked when there is no overlap). Each
 * name is 1 to 255 bytes. Only before connections are made. Returns 0,
 * -EINVAL or -ENOMEM. */
int tls_ctx_set_alpn(struct tls_ctx *ctx, const char *const *protos, size_t count);

/* Bytes of a session ticket key, in OpenSSL's order
 * (SSL_CTX_set_tlsext_ticket_keys): a 16-byte key name, which tickets
 * carry, a 32-byte HMAC-SHA256 key and a 32-byte AES-256-CBC key. */
#define TLS_TICKET_KEY_BYTES 80

/* Makes server ctx encrypt and decrypt its session tickets (TLS 1.3's and
 * 1.2's) with key, TLS_TICKET_KEY_BYTES random bytes, instead of the key
 * OpenSSL draws for each context: servers in several processes that are
 * given one key resume each other's sessions. The key is copied and used
 * for the life of ctx, never rotated (as OpenSSL's own key is not); a
 * ticket still expires with its session's timeout. Only before
 * connections are made. Returns 0, or -EINVAL (a client context, or
 * OpenSSL refused the key). */
int tls_ctx_set_ticket_key(struct tls_ctx *ctx, const uint8_t *key);

/* Frees ctx; connections made from it must be freed first. NULL is
 * allowed. */
void tls_ctx_free(struct tls_ctx *ctx);

/* ---- connections ---- */

/* Bits of tls_conn_want: what the last -EAGAIN waits for: the socket, or
 * (TLS_WANT_CHECK) the end of the SAN check's DNS lookups, which run on a
 * thread of their own and make tls_conn_check_fd readable when done.
 * Only a server whose info checks client SANs waits on a check. */
#define TLS_WANT_READ 0x1u
#define TLS_WANT_WRITE 0x2u
#define TLS_WANT_CHECK 0x4u

struct tls_conn;

/* A connection over the connected socket fd (non-blocking for an event
 * loop; the _timed helpers poll). fd stays the caller's: tls_conn_free
 * does not close it. A client names the server it expects in server_name
 * (a DNS name, sent as SNI, or an IP address), checked against the
 * server's certificate unless the info is self-signed; NULL checks no
 * name. A server ignores server_name. Returns 0 with *out, or -ENOMEM. */
int tls_conn_new(struct tls_ctx *ctx, int fd, const char *server_name, struct tls_conn **out);

/* Advances the handshake. Returns 0 once it is done and the peer's
 * certificate passed every check of the info, -EAGAIN (see
 * tls_conn_want), -EPROTO (the TLS handshake failed: bad or missing
 * certificate, no common suite or version; the slot says which),
 * -EACCES (the certificate was refused by the allowed CN or hostname, the
 * CRL or the SAN check), -ECONNRESET (the peer closed), or -errno of the
 * socket. After a failure the connection can only be freed. */
int tls_conn_handshake(struct tls_conn *c);

/* Reads up to len decrypted bytes (handshaking first if needed). Returns
 * the count (> 0), 0 when the peer closed the TLS session cleanly,
 * -EAGAIN, -ECONNRESET (closed without close_notify), -EPROTO (a TLS
 * error, also a certificate the server refused after a TLS 1.3 client
 * finished its side of the handshake), -EACCES, or -errno. */
ssize_t tls_conn_read(struct tls_conn *c, void *buf, size_t len);

/* Writes up to len bytes; returns the count written (> 0; len unless the
 * socket is full), -EAGAIN, -EPIPE/-ECONNRESET, -EPROTO, -EACCES, or
 * -errno. After -EAGAIN the same bytes must be offered again. */
ssize_t tls_conn_write(struct tls_conn *c, const void *buf, size_t len);

/* Sends close_notify. Returns 0, -EAGAIN, or a negative errno (which the
 * caller may ignore before closing the socket). */
int tls_conn_shutdown(struct tls_conn *c);

/* TLS_WANT_* after an -EAGAIN. */
uint32_t tls_conn_want(const struct tls_conn *c);

/* The descriptor that turns readable when the check that TLS_WANT_CHECK
 * waits for is done, and stays readable; -1 before any check started.
 * It is the connection's (closed by tls_conn_free, which also lets a
 * running check go on without it): a caller that polls it stops once
 * the handshake is past the check. While it waits, the socket needs no
 * polling. */
int tls_conn_check_fd(const struct tls_conn *c);

/* Blocking helpers for simple callers: tls_conn_handshake and a write of
 * all len bytes, polling the socket for what each step waits for, giving
 * up after timeout_ms in all (-ETIMEDOUT). Same codes otherwise. */
int tls_conn_handshake_timed(struct tls_conn *c, int timeout_ms);
int tls_conn_write_all_timed(struct tls_conn *c, const void *buf, size_t len, int timeout_ms);

/* Whether the peer presented a certificate that verified against the
 * trusted CAs (false when it presented none or it was not verified, as a
 * self-signed server's is not). */
bool tls_conn_peer_verified(const struct tls_conn *c);

/* The subject CN of the peer's certificate, copied into buf. Returns 0,
 * -ENOENT (no certificate, or one without a CN), -ENOSPC (buf too
 * small). */
int tls_conn_peer_cn(const struct tls_conn *c, char *buf, size_t len);

/* The ALPN protocol agreed, or "" when none; valid until tls_conn_free. */
const char *tls_conn_alpn(const struct tls_conn *c);

/* Frees c (not its socket). NULL is allowed. */
void tls_conn_free(struct tls_conn *c);

/* Allocation hook for the structures of this module (not OpenSSL's own),
 * so tests can count them; NULL restores malloc/free. Only while none is
 * alive. */
void tls_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *));

#endif
