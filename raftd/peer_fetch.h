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
 * peer TLS client context, as the transport dials them.
 */
#ifndef CETCD_RAFTD_PEER_FETCH_H
#define CETCD_RAFTD_PEER_FETCH_H

#include <stddef.h>
#include <stdint.h>

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
};

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
