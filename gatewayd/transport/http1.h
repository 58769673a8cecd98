/* HTTP/1.x on the client port, beside gRPC: /version as etcd 3.4 answers
 * it (etcdserver/api/etcdhttp), what http1_ops.serve takes (/metrics and
 * the health checks), and a 404 for every other path.
 *
 * http1_conn is a connection's state and touches no socket: request heads
 * read by base/http/http.h's codec with Go's server rules (the head
 * bounded, anything malformed an error, never a crash), bytes of a head
 * still incomplete, response bytes not yet written, a request body being
 * skipped, keep-alive (HTTP/1.1 by default, HTTP/1.0 on request) and
 * pipelined requests answered in order. A malformed request gets 400 and
 * the connection closes once the answer is out, as Go's net/http does.
 *
 * Responses carry the header fields etcd's server sends (Date,
 * Content-Length, Content-Type), so clients and probes that look at them
 * see the same thing. On the client port every request first passes etcd's
 * access controller (struct http1_access): --host-whitelist over plain
 * HTTP, then --cors's Access-Control-* fields, and OPTIONS answered 200.
 */
#ifndef CETCD_GATEWAYD_HTTP1_H
#define CETCD_GATEWAYD_HTTP1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/transport/h2.h"
#include "config/config.h"

/* Largest request head (request line and header fields) accepted; a
 * longer one is answered 431 and the connection closed. */
#define HTTP1_MAX_HEAD_BYTES (64u * 1024u)

/* The etcd version /version reports (the API level cetcd speaks). */
#define HTTP1_ETCD_VERSION CETCD_ETCD_SERVER_VERSION
#define HTTP1_ETCD_CLUSTER_VERSION "3.4.0"

struct hashkv_resp;
struct leasehttp_req;
struct http1_conn;

/* A request under /v3/ or /v3beta/, for etcd's JSON gateway. Pointers
 * are valid during the call only. */
struct http1_gw_req {
	const char *method;
	size_t method_len;
	const char *path;        /* the target before '?' */
	size_t path_len;
	const uint8_t *body;     /* whole, the chunked coding removed */
	size_t body_len;
	const char *authorization; /* the Authorization field's value; NULL: none */
	size_t authorization_len;
};

/* An answer the gateway gives at once (a bad path, method or body). */
struct http1_gw_answer {
	int status;
	const char *content_type;
	bool nosniff;            /* X-Content-Type-Options: nosniff (Go's http.Error) */
	const char *body;        /* NUL-terminated */
};

/* A request as http1_ops.serve sees it: pointers into the parsed bytes,
 * valid during the call only. */
struct http1_req {
	const char *method;
	size_t method_len;
	const char *path;   /* before any '?' */
	size_t path_len;
	const char *query;  /* after the '?' (not included); NULL: none */
	size_t query_len;
};

/* etcd's access controller (embed/serve.go accessController) for the
 * client port's HTTP: an empty list or one holding "*" allows all. */
struct http1_access {
	const struct config_strings *cors;  /* --cors: origins answered with
					     * Access-Control-* fields */
	const struct config_strings *hosts; /* --host-whitelist: Host names a
					     * plain HTTP request may give */
};

/* What the connection needs from the rest of gatewayd. */
struct http1_ops {
	/* The paths the rest of gatewayd serves (/metrics, /health, /livez,
	 * /readyz: gatewayd/services/http.c), asked first: 1 if it took r,
	 * answering it with http1_conn_answer now or, after
	 * http1_conn_wait, with http1_conn_reply later; 0 if r is not one
	 * of its paths; -ENOMEM. */
	int (*serve)(void *arg, struct http1_conn *c, const struct http1_req *r);
	/* Nothing but what serve takes: any other path is 404 (the
	 * --listen-metrics-urls listeners' connections). */
	bool serve_only;
	/* GET /members/hashkv (cluster/hashkv.h), served only where this is set
	 * (connections raftd hands over from the peer port): starts the
	 * HashKV at rev for c, which waits (reading no further request) until
	 * http1_conn_hashkv_done gives the answer. 0, or -ENOMEM (answered
	 * 500 at once). */
	int (*hashkv)(void *arg, struct http1_conn *c, int64_t rev);
	/* POST /leases and /leases/internal (cluster/leasehttp.h), served only
	 * where this is set: asks the lessor for c, which waits as for
	 * hashkv until http1_conn_reply gives the answer. 0, or -ENOMEM
	 * (answered 500 at once). */
	int (*lease)(void *arg, struct http1_conn *c, const struct leasehttp_req *r);
	/* A request under /v3/ or /v3beta/ (etcd's JSON gateway), served only
	 * where this is set, once its whole body (at most gateway_max_body
	 * bytes; a longer one is answered 413) is here. Returns 1 with *now
	 * filled to answer at once; 0 when the answer comes later through
	 * http1_conn_gw_head/_data/_end, c waiting meanwhile as for hashkv;
	 * or -ENOMEM. */
	int (*gateway)(void *arg, struct http1_conn *c, const struct http1_gw_req *r,
		       struct http1_gw_answer *now);
	size_t gateway_max_body;
	/* the client port's access controller; NULL where etcd has none (the
	 * peer port's handlers) */
	const struct http1_access *access;
	void *arg;
};

struct http1_conn {
	struct h2_buf in;       /* an incomplete head, kept across reads */
	struct h2_buf out;      /* response bytes not yet written: [out_off, len) */
	size_t out_off;
	uint64_t body_skip;     /* request body bytes still to drop */
	bool closing;           /* no more requests: close once out is written */
	bool waiting;           /* a /members/hashkv or /leases answer is
				 * being computed:
				 * what comes waits in `in` */
	int wait_minor;         /* that request's HTTP/1.minor and keep-alive */
	bool wait_keep_alive;
	bool wait_chunked;      /* the gateway's answer goes in chunks */
	bool serving_head;      /* the request serve has is a HEAD */
	const char *wait_cors;  /* that request's Access-Control-Allow-Origin, or NULL */
	bool secure;            /* over TLS: no Host check (set after init) */
	void *gw_req;           /* the gateway's own state for the request
				 * waited for, or NULL (set and cleared by it) */
	const struct http1_ops *ops;
};

/* A connection with nothing received yet. */
void http1_conn_init(struct http1_conn *c, const struct http1_ops *ops);

/* Frees its buffers. */
void http1_conn_fini(struct http1_conn *c);

/*
 * Takes bytes the client sent: parses and answers every complete request
 * (the answers are appended to c->out in order). Once closing is set the
 * rest is ignored. Returns 0, or -ENOMEM (the connection must go).
 */
int http1_conn_recv(struct http1_conn *c, const uint8_t *data, size_t len);

/* The answer to the /members/hashkv request c waits for: rc 0 with r, or
 * an error whose text is why (etcd's mvcc error; NULL: a generic one).
 * Then the requests that came meanwhile are answered. 0 or -ENOMEM. */
int http1_conn_hashkv_done(struct http1_conn *c, int rc, const struct hashkv_resp *r,
			   const char *why);

/* The answer to the request c waits for (a /leases one): status, the
 * content type and len bytes of body. Then the requests that came
 * meanwhile are answered. 0 or -ENOMEM. */
int http1_conn_reply(struct http1_conn *c, int status, const char *content_type,
		     const void *body, size_t len);

/* The answer of the gateway request c waits for: its head (status,
 * application/json, grpc-gateway's header fields; chunked, for a stream,
 * or content_length bytes), its body bytes (one chunk per call when
 * chunked), then its end, after which the requests that came meanwhile
 * are answered. Each returns 0 or -ENOMEM; called when c does not wait,
 * they do nothing. */
int http1_conn_gw_head(struct http1_conn *c, int status, bool chunked, size_t content_length);
int http1_conn_gw_data(struct http1_conn *c, const void *p, size_t n);
int http1_conn_gw_end(struct http1_conn *c);
/* From inside http1_ops.serve: answers its request now (status, content
 * type, len bytes of body; nosniff adds X-Content-Type-Options as Go's
 * http.Error does). 0 or -ENOMEM. */
int http1_conn_answer(struct http1_conn *c, int status, const char *content_type, bool nosniff,
		      const void *body, size_t len);

/* From inside http1_ops.serve: its request is answered later, by
 * http1_conn_reply; what comes meanwhile waits. */
void http1_conn_wait(struct http1_conn *c);

/* Response bytes waiting to be written, and marking n of them written. */
static inline size_t http1_conn_out_len(const struct http1_conn *c)
{
	return c->out.len - c->out_off;
}
void http1_conn_out_done(struct http1_conn *c, size_t n);

/* Whether the connection is over: closing, with nothing left to write
 * and no answer still being computed. */
static inline bool http1_conn_is_done(const struct http1_conn *c)
{
	return c->closing && !c->waiting && http1_conn_out_len(c) == 0;
}

#endif
