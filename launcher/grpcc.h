/*
 * A small gRPC client: one unary call over HTTP/2 (nghttp2's client
 * session) on a connected socket, in the clear or through TLS, waiting at
 * most a deadline. The launcher's corruption check raises the CORRUPT
 * alarm with it (Maintenance.Alarm on its own gatewayd's local socket).
 *
 * Two layers: a call that neither reads nor writes a socket (bytes for
 * the server come out of grpcc_call_send's buffer, bytes from it go into
 * grpcc_call_recv, so a fuzz target can drive the response side), and
 * grpcc_unary, which runs one over a socket. What the server sends is
 * outside input: every frame and message length is checked, a response
 * over GRPCC_MAX_RESPONSE bytes is refused, and bad input is an error,
 * never a crash (tests/fuzz/fuzz_grpcc.c).
 */
#ifndef CETCD_LAUNCHER_GRPCC_H
#define CETCD_LAUNCHER_GRPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest response message taken. */
#define GRPCC_MAX_RESPONSE (4u << 20)

struct tls_conn;
struct nghttp2_session;

struct grpcc_call {
	struct nghttp2_session *sess;
	int32_t stream_id;
	uint8_t *req;            /* the request: gRPC's 5-byte prefix and message */
	size_t req_len, req_off;
	uint8_t *body;           /* response DATA, as received */
	size_t body_len, body_cap;
	uint8_t *out;            /* bytes for the server, not yet written */
	size_t out_len, out_cap;
	int http_status;         /* :status, 0 until it came */
	int grpc_status;         /* grpc-status, -1 until it came */
	char message[256];       /* grpc-message, as sent (percent-encoded) */
	bool closed;             /* the stream ended (or the session failed) */
	int error;               /* a failure of the session itself, or 0 */
};

/* Starts a call of path ("/etcdserverpb.Maintenance/Alarm") with the
 * request message msg[0..len) to authority. Returns 0 or -ENOMEM; on
 * failure nothing is left to end. */
int grpcc_call_begin(struct grpcc_call *c, const char *authority, const char *path,
		     const void *msg, size_t len);

/* Moves what the session has to send into c->out (the caller writes it
 * and drops what it wrote with grpcc_call_sent). 0 or a negative errno. */
int grpcc_call_send(struct grpcc_call *c);
void grpcc_call_sent(struct grpcc_call *c, size_t n);

/* Takes bytes the server sent. 0, or -EPROTO (not HTTP/2 as a server
 * speaks it, or a response too large): the call is over. */
int grpcc_call_recv(struct grpcc_call *c, const uint8_t *data, size_t len);

/* Once c->closed: the response message. Returns 0 with *msg and *len
 * (valid until grpcc_call_end), -EPROTO (no status, an HTTP status other
 * than 200, a malformed message), or the call's gRPC status as a positive
 * number, with its text in c->message. */
int grpcc_call_result(struct grpcc_call *c, const uint8_t **msg, size_t *len);

/* Frees what the call holds. */
void grpcc_call_end(struct grpcc_call *c);

/* gRPC's length-prefixed message in data[0..len): exactly one, not
 * compressed. Returns 0 with *msg and *mlen, or -EPROTO. */
int grpcc_message(const uint8_t *data, size_t len, const uint8_t **msg, size_t *mlen);

/*
 * One unary call over the connected socket fd (through tls when it is not
 * NULL, its handshake done), within timeout_ms. On 0, *resp (malloc'ed,
 * the caller frees it) and *resp_len hold the response message. Returns
 * 0, -ETIMEDOUT, -EPROTO, the gRPC status (> 0, its text in status_text,
 * cap bytes), or -errno of the socket.
 */
int grpcc_unary(int fd, struct tls_conn *tls, const char *authority, const char *path,
		const void *msg, size_t len, int timeout_ms, uint8_t **resp, size_t *resp_len,
		char *status_text, size_t cap);

struct cetcd_config;
struct ProtobufCMessage;

/*
 * One unary call of path with req on this member's own gatewayd (its
 * local socket, in the data dir), trying each gatewayd in turn until one
 * answers; as grpcc_unary otherwise. The launcher's helper processes (the
 * corruption monitor, the auto-compactor) ask their member this way.
 */
int grpcc_member_unary(const struct cetcd_config *cfg, const char *path,
		       const struct ProtobufCMessage *req, int timeout_ms, uint8_t **resp,
		       size_t *resp_len, char *status_text, size_t cap);

#endif
