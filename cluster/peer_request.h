/*
 * One HTTP/1.1 request to a member, made and answered in the calling
 * thread before a deadline: the way cetcd's programs call the peer
 * endpoints outside raftd's transport streams (the launcher's GET
 * /members/hashkv, raftd's GET /members and /version when joining, POST
 * /members/promote/<id> and /leases forwarded to the leader). http and
 * unix peer URLs are dialed in the clear, https and unixs with a TLS
 * client context, as the transport dials them; a member's own gatewayd
 * is asked over a socket the caller connected.
 *
 * The request asks the server to close after its answer; the answer is
 * read with base/http/http.h's reader (interim heads skipped, the body by
 * its length, by chunks or to the end of the stream).
 *
 * Errors are negative errno values with the stage that failed, so that
 * each caller words them as the etcd code it stands for does; nothing
 * here writes the error slot (TLS failures leave their text in it,
 * errmsg_get(rc)).
 */
#ifndef CETCD_CLUSTER_PEER_REQUEST_H
#define CETCD_CLUSTER_PEER_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct peer_url;
struct tls_ctx;

/* What is sent. Strings are the caller's, read during the call. */
struct peer_request {
	const char *method;          /* "GET" or "POST" */
	const char *path;
	const char *user_agent;      /* NULL: Go's client's */
	const char *content_type;    /* NULL: none */
	const void *body;            /* body_len bytes; a Content-Length is
				      * sent for a body or a POST */
	size_t body_len;
	size_t max_body;             /* the longest answer body taken */
};

/* The answer. */
struct peer_answer {
	int status;                  /* the HTTP status */
	char cluster_id[32];         /* X-Etcd-Cluster-ID, "" when absent or
				      * longer */
	char *body;                  /* NUL-terminated, len bytes before the
				      * NUL; malloc'd, peer_answer_free */
	size_t len;
	bool close;                  /* the server ends the connection */
};

/* Where a request failed. */
enum peer_request_stage {
	PEER_REQUEST_ADDRESS,        /* the URL's address: -EHOSTUNREACH (no
				      * such host), -ENAMETOOLONG */
	PEER_REQUEST_SOCKET,         /* socket(2) */
	PEER_REQUEST_CONNECT,        /* connect(2), -ETIMEDOUT included */
	PEER_REQUEST_TLS,            /* the TLS handshake (its text is in the
				      * error slot) */
	PEER_REQUEST_HEAD,           /* the request's head is too long:
				      * -EINVAL */
	PEER_REQUEST_EXCHANGE,       /* writing the request or reading the
				      * answer: -ETIMEDOUT, socket and TLS
				      * errors, -ENOMEM */
	PEER_REQUEST_ANSWER,         /* what was read is not an answer:
				      * -EBADMSG, -EMSGSIZE (over max_body),
				      * -ECONNRESET (the stream ended first) */
};

/*
 * Sends rq to the member at peer URL u and reads the whole answer, all
 * within timeout_ms. tls is the client context for https and unixs URLs
 * (the caller checks there is one). Returns 0 with *out set (any
 * status), or a negative errno with *stage saying where it failed.
 */
int peer_request_url(const struct peer_url *u, struct tls_ctx *tls, const struct peer_request *rq,
		     int timeout_ms, struct peer_answer *out, enum peer_request_stage *stage);

/* The same on fd, a connected socket of the caller's (left open), in the
 * clear, with host as the Host header. */
int peer_request_fd(int fd, const char *host, const struct peer_request *rq, int timeout_ms,
		    struct peer_answer *out, enum peer_request_stage *stage);

/* The Host header of a request to u, as Go's client writes it:
 * "host:port", an IPv6 address in brackets, "localhost" for a unix URL
 * (the lease forwarder's keep-alive requests carry the same). Returns its
 * length; PEER_REQUEST_HOST_MAX bytes of buf hold any peer_url's. */
#define PEER_REQUEST_HOST_MAX 300
int peer_request_host(const struct peer_url *u, char *buf, size_t cap);

/* Frees what an answer holds. */
void peer_answer_free(struct peer_answer *a);

#endif
