/* One blocking HTTP/1.1 request to a peer, made by cluster/peer_request.c
 * and worded as Go's client words its errors, and the answer reader of
 * the lease forwarder's connections (see peer_fetch.h). */
#include "raftd/peer/peer_fetch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/peer/peer_int.h"
#include "base/log/errmsg.h"
#include "cluster/peer_request.h"

uint8_t *peer_fetch_reader_space(struct peer_fetch_reader *r, size_t want)
{
	return peer_buf_reserve(&r->in, want) ? NULL : r->in.p + r->in.len;
}

int peer_fetch_reader_feed(struct peer_fetch_reader *r, size_t n, bool eof,
			   struct peer_fetch_resp *out)
{
	struct http_reader *hr = &r->hr;
	int rc;

	r->in.len += n;
	hr->max_body = PEER_FETCH_MAX_BODY;
	rc = http_reader_feed(hr, r->in.p, r->in.len, eof);
	if (rc <= 0)
		return rc;
	memset(out, 0, sizeof(*out));
	out->len = hr->body_len;
	out->body = raftd_malloc(out->len + 1);
	if (!out->body)
		return -ENOMEM;
	if (out->len)
		memcpy(out->body, r->in.p, out->len);
	out->body[out->len] = '\0';
	out->status = hr->status;
	out->close = hr->close;
	memcpy(out->cluster_id, hr->cluster_id, sizeof(out->cluster_id));
	r->in.len = http_reader_next(hr, r->in.p, r->in.len);
	return 1;
}

void peer_fetch_reader_free(struct peer_fetch_reader *r)
{
	peer_buf_free(&r->in);
	memset(r, 0, sizeof(*r));
}

/* Why a request to what failed, worded as Go's http.Client words it, in
 * the error slot. */
static int pf_error(int rc, enum peer_request_stage stage, const char *what,
		    const struct peer_url *u)
{
	const char *net = u->unix_socket ? "unix" : "tcp", *colon = u->unix_socket ? "" : ":";
	const char *port = u->unix_socket ? "" : u->port;
	char why[256];

	switch (stage) {
	case PEER_REQUEST_ADDRESS:
		return errmsg_set(rc, "%s: dial %s %s%s%s: %s", what, net, u->host, colon, port,
				  rc == -EHOSTUNREACH ? "no such host" : "path too long");
	case PEER_REQUEST_SOCKET:
		return errmsg_set(rc, "%s: socket: %s", what, strerror(-rc));
	case PEER_REQUEST_CONNECT:
		return errmsg_set(rc, "%s: dial %s %s%s%s: connect: %s", what, net, u->host, colon,
				  port, rc == -ETIMEDOUT ? "i/o timeout" : strerror(-rc));
	case PEER_REQUEST_TLS:
		snprintf(why, sizeof(why), "%s", errmsg_get(rc));
		return errmsg_set(rc, "%s: %s", what, why);
	case PEER_REQUEST_HEAD:
		return errmsg_set(rc, "%s: the request is too long", what);
	default:
		return errmsg_set(rc, "%s: %s", what,
				  rc == -ETIMEDOUT ? "context deadline exceeded (Client.Timeout exceeded while awaiting headers)" :
				  rc == -EBADMSG ? "malformed HTTP response" :
				  rc == -ECONNRESET ? "EOF" : strerror(-rc));
	}
}

static int pf_request(struct tls_ctx *tls, const char *url, const struct peer_request *rq,
		      int timeout_ms, struct peer_fetch_resp *out)
{
	enum peer_request_stage stage;
	struct peer_answer ans;
	struct peer_url u;
	char what[600];
	int rc;

	memset(out, 0, sizeof(*out));
	/* Go's url.Error: the method with its first letter only in capitals */
	snprintf(what, sizeof(what), "%c%s \"%s%s\"", rq->method[0],
		 strcmp(rq->method, "GET") ? "ost" : "et", url, rq->path);
	if (peer_url_parse(url, &u))
		return errmsg_set(-EINVAL, "%s: unsupported URL", what);
	if (u.tls && !tls)
		return errmsg_set(-EPROTONOSUPPORT, "%s: no peer TLS is configured for this URL",
				  what);
	rc = peer_request_url(&u, tls, rq, timeout_ms, &ans, &stage);
	if (rc)
		return pf_error(rc, stage, what, &u);
	out->body = raftd_malloc(ans.len + 1);
	if (!out->body) {
		peer_answer_free(&ans);
		return pf_error(-ENOMEM, PEER_REQUEST_EXCHANGE, what, &u);
	}
	memcpy(out->body, ans.body, ans.len + 1);
	out->len = ans.len;
	out->status = ans.status;
	out->close = ans.close;
	memcpy(out->cluster_id, ans.cluster_id, sizeof(out->cluster_id));
	peer_answer_free(&ans);
	return 0;
}

int peer_fetch(struct tls_ctx *tls, const char *url, const char *method, const char *path,
	       int timeout_ms, struct peer_fetch_resp *out)
{
	const struct peer_request rq = { .method = method, .path = path,
					 .max_body = PEER_FETCH_MAX_BODY };

	return pf_request(tls, url, &rq, timeout_ms, out);
}

int peer_fetch_post(struct tls_ctx *tls, const char *url, const char *path, const char *ctype,
		    const void *body, size_t len, int timeout_ms, struct peer_fetch_resp *out)
{
	const struct peer_request rq = { .method = "POST", .path = path, .content_type = ctype,
					 .body = body, .body_len = len,
					 .max_body = PEER_FETCH_MAX_BODY };

	return pf_request(tls, url, &rq, timeout_ms, out);
}

void peer_fetch_free(struct peer_fetch_resp *r)
{
	raftd_free(r->body);
	r->body = NULL;
	r->len = 0;
}
