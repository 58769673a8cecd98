/*
 * One HTTP/1.1 request to a peer URL, made and answered in the calling
 * thread: for the few calls outside the transport's streams that etcd
 * makes with a plain http.Client on the peer round tripper: GET /members
 * and GET /version when a member joins a running cluster (etcd's
 * GetClusterFromRemotePeers and getVersion), POST /members/promote/<id>
 * forwarded to the leader (promoteMemberHTTP), POST /leases and
 * /leases/internal forwarded to the leader (leasehttp's RenewHTTP and
 * TimeToLiveHTTP).
 *
 * http and unix URLs are dialed in the clear, https and unixs with the
 * peer TLS client context, as the transport dials them
 * (cluster/peer_request.h makes the request).
 */
#ifndef CETCD_RAFTD_PEER_FETCH_H
#define CETCD_RAFTD_PEER_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/peer/peer_int.h"

struct tls_ctx;

/* Most bytes of a body taken (a /members answer of a big cluster is a
 * few KiB). */
#define PEER_FETCH_MAX_BODY (1u << 20)

struct peer_fetch_resp {
	int status;              /* the HTTP status */
	char cluster_id[32];     /* X-Etcd-Cluster-ID, "" when absent or
				  * longer */
	char *body;              /* NUL-terminated, len bytes before the NUL;
				  * raftd_malloc, peer_fetch_free frees it */
	size_t len;
	bool close;              /* the connection carries no other request:
				  * the server said so, or the body ran to
				  * the end of the stream */
};

/*
 * An answer read off a connection as its bytes come (base/http/http.h's
 * http_reader over a buffer of raftd's): the head (1xx heads are
 * skipped, as Go's client skips them), then the body by its length, by
 * chunks or to the end of the stream. Pure: no I/O, so that the fuzz
 * target (tests/fuzz/fuzz_peer_fetch.c) reaches all of it. Zeroed to
 * start; one reader reads the answers of one keep-alive connection in
 * turn; peer_fetch_reader_free at the end.
 */
struct peer_fetch_reader {
	struct peer_buf in;          /* in.p[0..in.len): the answer's body
				      * so far, then what is not yet taken */
	struct http_reader hr;       /* where the body and the rest are */
};

/* Room for up to want bytes to read into, at the returned pointer (valid
 * until the next call on r), or NULL when out of memory. */
uint8_t *peer_fetch_reader_space(struct peer_fetch_reader *r, size_t want);

/*
 * Takes n bytes written at peer_fetch_reader_space's pointer (0: none,
 * to look again at what is pending); eof: the stream ended after them.
 * Returns 1 with an answer in *out (its body is out's own, free it with
 * peer_fetch_free; r is ready for the next answer, with what followed
 * this one still pending: call again to read it), 0 while more is
 * needed, or -EBADMSG (not an HTTP answer), -EMSGSIZE (a head over
 * HTTP_MAX_HEAD or a body over PEER_FETCH_MAX_BODY), -ECONNRESET
 * (the stream ended before an answer did), -ENOMEM. After an error the
 * connection must be closed.
 */
int peer_fetch_reader_feed(struct peer_fetch_reader *r, size_t n, bool eof,
			   struct peer_fetch_resp *out);

/* Bytes read past the answers taken (none on a connection that carries
 * one request at a time). */
static inline size_t peer_fetch_reader_pending(const struct peer_fetch_reader *r)
{
	return r->in.len;
}

void peer_fetch_reader_free(struct peer_fetch_reader *r);

/*
 * Sends method (GET or POST, an empty body) for path to the peer at url
 * ("http://10.0.0.1:2380") and reads the whole answer, giving up after
 * timeout_ms in all. tls: the peer client context for https/unixs URLs
 * (NULL: such URLs fail with -EPROTONOSUPPORT). Returns 0 with *out set
 * (any status), or a negative errno: -EINVAL (the URL), -ETIMEDOUT,
 * -ECONNREFUSED and other socket errors, -EPROTO/-EACCES (TLS),
 * -EBADMSG (not an HTTP answer), -EMSGSIZE (a body over
 * PEER_FETCH_MAX_BODY), -ENOMEM; the error slot (errmsg_get) holds the
 * text, worded as Go's http.Client words it ("Get \"URL\": ...").
 */
int peer_fetch(struct tls_ctx *tls, const char *url, const char *method, const char *path,
	       int timeout_ms, struct peer_fetch_resp *out);

/* POST path with len bytes of body, of type ctype, as peer_fetch sends
 * its requests; the same results. */
int peer_fetch_post(struct tls_ctx *tls, const char *url, const char *path, const char *ctype,
		    const void *body, size_t len, int timeout_ms, struct peer_fetch_resp *out);

/* Frees what a response holds. */
void peer_fetch_free(struct peer_fetch_resp *r);

#endif
