/* HTTP/1.x requests on the client port (see http1.h). */
#include "gatewayd/transport/http1.h"
#include "base/http/http.h"
#include "cluster/hashkv.h"
#include "cluster/leasehttp.h"
#include "base/log/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- parsing ---- */

/* What the answers need of a request head. Pointers point into the
 * parsed bytes. */
struct http1_request {
	const char *method;
	size_t method_len;
	const char *target;      /* request target as sent */
	size_t target_len;
	size_t path_len;         /* target bytes before '?' */
	int minor;               /* HTTP/1.minor */
	bool keep_alive;         /* after the Connection field and the version */
	bool has_host;
	bool chunked;            /* Transfer-Encoding: chunked */
	bool has_length;         /* Content-Length given */
	uint64_t content_length;
	struct http_str host;    /* the Host field's value */
	struct http_str origin;  /* the Origin field's value */
	struct http_str authorization; /* the Authorization field's value (p NULL: none) */
	const char *cors;        /* Access-Control-Allow-Origin of the answer, or NULL */
};

/* Parse results besides a head length. */
#define HTTP1_NEED_MORE 0
#define HTTP1_BAD (-1)        /* malformed: answer 400 */
#define HTTP1_TOO_LARGE (-2)  /* head longer than HTTP1_MAX_HEAD_BYTES: answer 431 */

/* Go's server: one Host field, one framing of a body, any number of
 * header lines within the head's bound. */
#define HTTP1_HEAD_RULES (HTTP_ONE_HOST | HTTP_ONE_FRAMING | HTTP_ANY_HEADERS)

/* Parses the request head at the start of buf[0..len): its length in
 * bytes (request line through the empty line) with req filled,
 * HTTP1_NEED_MORE, HTTP1_BAD or HTTP1_TOO_LARGE. */
static int http1_parse(const uint8_t *buf, size_t len, struct http1_request *req)
{
	struct http_head h;
	int rc = http_parse_request((const char *)buf, len, HTTP1_MAX_HEAD_BYTES,
				    HTTP1_HEAD_RULES, &h);

	if (rc == -EAGAIN)
		return HTTP1_NEED_MORE;
	if (rc)
		return rc == -EMSGSIZE ? HTTP1_TOO_LARGE : HTTP1_BAD;
	*req = (struct http1_request){
		.method = h.method.p, .method_len = h.method.len, .target = h.target.p,
		.target_len = h.target.len, .path_len = h.path.len, .minor = h.minor, .keep_alive = !h.close,
		.has_host = h.has_host, .chunked = h.chunked, .has_length = h.has_length,
		.content_length = h.content_length,
	};
	(void)http_header(&h, "Host", &req->host);
	(void)http_header(&h, "Origin", &req->origin);
	if (!http_header(&h, "Authorization", &req->authorization))
		req->authorization.p = NULL;
	return (int)h.head_len;
}

/* Case-insensitive comparison of s[0..len) with the lower-case word w. */
static bool http1_ieq(const char *s, size_t len, const char *w)
{
	return strlen(w) == len && strncasecmp(s, w, len) == 0;
}

/* ---- answering ---- */

static const nghttp2_mem *http1_mem(void)
{
	return h2_mem_libc();
}

void http1_conn_init(struct http1_conn *c, const struct http1_ops *ops)
{
	memset(c, 0, sizeof(*c));
	c->ops = ops;
}

void http1_conn_fini(struct http1_conn *c)
{
	h2_buf_free(&c->in, http1_mem());
	h2_buf_free(&c->out, http1_mem());
}

void http1_conn_out_done(struct http1_conn *c, size_t n)
{
	c->out_off += n;
	if (c->out_off == c->out.len)
		c->out.len = c->out_off = 0;
}

/* http.TimeFormat of the current second, cached. */
static const char *http1_date(void)
{
	static __thread time_t cached_at = -1;
	static __thread char text[40];
	time_t now = time(NULL);
	if (now != cached_at) {
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		cached_at = now;
	}
	return text;
}

static const char *http1_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	default: return *http_status_text(status) ? http_status_text(status) : "Unknown";
	}
}

/* What one answer says. */
struct http1_answer {
	int status;
	const char *content_type;
	bool nosniff;        /* X-Content-Type-Options: nosniff (http.Error) */
	bool allow_get;      /* Allow: GET (405) */
	bool type_sniffed;   /* Content-Type after Content-Length, as Go
			      * writes a type it sniffed */
	const char *body;
	size_t body_len;     /* 0: strlen(body) */
	bool chunked;        /* Transfer-Encoding: chunked, the body to come */
	bool body_later;     /* the head only: body_len bytes follow */
	const char *extra;   /* more header lines ("Name: value\r\n"), or NULL */
};

/* Appends a full answer to req. */
static int http1_answer(struct http1_conn *c, const struct http1_request *req,
			const struct http1_answer *a)
{
	char head[1024];
	size_t blen = a->body_len ? a->body_len : strlen(a->body);
	bool head_only = http1_ieq(req->method, req->method_len, "head");
	const char *conn = !req->keep_alive ? "Connection: close\r\n" :
			   req->minor == 0 ? "Connection: keep-alive\r\n" : "";
	char ctype[128] = "", cors[512] = "";
	if (a->content_type)
		snprintf(ctype, sizeof(ctype), "Content-Type: %s\r\n", a->content_type);
	if (req->cors)
		snprintf(cors, sizeof(cors),
			 "Access-Control-Allow-Headers: accept, content-type, authorization\r\n"
			 "Access-Control-Allow-Methods: POST, GET, OPTIONS, PUT, DELETE\r\n"
			 "Access-Control-Allow-Origin: %s\r\n", req->cors);
	char length[48];
	if (a->chunked)
		snprintf(length, sizeof(length), "Transfer-Encoding: chunked\r\n");
	else
		snprintf(length, sizeof(length), "Content-Length: %zu\r\n", blen);
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.%d %d %s\r\n"
			 "%s"
			 "%s%s%s%s"
			 "Date: %s\r\n"
			 "%s"
			 "%s%s\r\n",
			 req->minor == 0 ? 0 : 1, a->status, http1_reason(a->status), cors,
			 a->allow_get ? "Allow: GET\r\n" : "", a->type_sniffed ? "" : ctype,
			 a->extra ? a->extra : "",
			 a->nosniff ? "X-Content-Type-Options: nosniff\r\n" : "", http1_date(), length,
			 a->type_sniffed ? ctype : "", conn);
	if (n < 0 || (size_t)n >= sizeof(head))
		return -ENOMEM;
	if (h2_buf_append(&c->out, http1_mem(), head, (size_t)n))
		return -ENOMEM;
	if (!head_only && !a->chunked && !a->body_later && h2_buf_append(&c->out, http1_mem(), a->body, blen))
		return -ENOMEM;
	if (!req->keep_alive)
		c->closing = true;
	return 0;
}

/* The answer Go's server gives a request it could not parse, then
 * closes: no Date, no length, the text as body. */
static int http1_refuse(struct http1_conn *c, int status, const char *detail)
{
	char msg[256];
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s%s%s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Connection: close\r\n\r\n%d %s%s%s",
			 status, http1_reason(status), detail ? ": " : "", detail ? detail : "",
			 status, http1_reason(status), detail ? ": " : "", detail ? detail : "");
	c->closing = true;
	if (n < 0 || (size_t)n >= sizeof(msg))
		return -ENOMEM;
	return h2_buf_append(&c->out, http1_mem(), msg, (size_t)n) ? -ENOMEM : 0;
}

static bool http1_path_is(const struct http1_request *req, const char *path)
{
	return req->path_len == strlen(path) && memcmp(req->target, path, req->path_len) == 0;
}

static const struct http1_answer http1_not_allowed = {
	.status = 405, .content_type = "text/plain; charset=utf-8", .nosniff = true,
	.allow_get = true, .body = "Method Not Allowed\n",
};

/* Routes one request (etcd's mux for the client port). */
static int http1_handle(struct http1_conn *c, const struct http1_request *req)
{
	bool get = req->method_len == 3 && memcmp(req->method, "GET", 3) == 0;
	struct http1_answer a;

	if (req->minor >= 1 && !req->has_host)
		return http1_refuse(c, 400, "missing required Host header");
	if (c->ops && c->ops->serve) {
		bool has_query = req->target_len > req->path_len;
		struct http1_req r = {
			.method = req->method, .method_len = req->method_len,
			.path = req->target, .path_len = req->path_len,
			.query = has_query ? req->target + req->path_len + 1 : NULL,
			.query_len = has_query ? req->target_len - req->path_len - 1 : 0,
		};
		c->wait_minor = req->minor;
		c->wait_keep_alive = req->keep_alive;
		c->serving_head = http1_ieq(req->method, req->method_len, "head");
		c->wait_cors = req->cors;
		int rc = c->ops->serve(c->ops->arg, c, &r);
		if (rc)
			return rc < 0 ? rc : 0;
	}
	if (c->ops && c->ops->serve_only)
		goto not_found;
	if (http1_path_is(req, "/version")) {
		if (!get)
			return http1_answer(c, req, &http1_not_allowed);
		a = (struct http1_answer){ .status = 200, .content_type = "application/json",
					   .body = "{\"etcdserver\":\"" HTTP1_ETCD_VERSION
						   "\",\"etcdcluster\":\"" HTTP1_ETCD_CLUSTER_VERSION
						   "\"}" };
		return http1_answer(c, req, &a);
	}
not_found:
	a = (struct http1_answer){ .status = 404, .nosniff = true,
				   .content_type = "text/plain; charset=utf-8",
				   .body = "404 page not found\n" };
	return http1_answer(c, req, &a);
}

/* The largest body of GET /members/hashkv read ({"revision":N} is short). */
#define HTTP1_HASHKV_BODY_MAX 4096u

/* etcd's hashKVHandler: GET only, the body a HashKVRequest's JSON, the
 * answer (http1_conn_hashkv_done) a HashKVResponse's JSON, or 400 with
 * the error's text. */
static int http1_hashkv(struct http1_conn *c, const struct http1_request *req,
			const uint8_t *body, size_t len)
{
	struct http1_answer a = { .status = 400, .nosniff = true,
				  .content_type = "text/plain; charset=utf-8" };
	int64_t rev = 0;

	if (!(req->method_len == 3 && memcmp(req->method, "GET", 3) == 0))
		return http1_answer(c, req, &http1_not_allowed);
	if (hashkv_request_decode(body, len, &rev)) {
		a.body = "error unmarshalling request\n";
		return http1_answer(c, req, &a);
	}
	c->waiting = true;
	c->wait_minor = req->minor;
	c->wait_keep_alive = req->keep_alive;
	c->wait_cors = req->cors;
	if (c->ops->hashkv(c->ops->arg, c, rev) == 0)
		return 0;
	c->waiting = false;
	a = (struct http1_answer){ .status = 500, .nosniff = true,
				   .content_type = "text/plain; charset=utf-8",
				   .body = "cannot compute the hash\n" };
	return http1_answer(c, req, &a);
}

/* etcd's leaseHandler: POST only, the body a LeaseKeepAliveRequest
 * (/leases) or a LeaseInternalRequest (/leases/internal); the answer
 * comes from http1_conn_reply. */
static int http1_lease(struct http1_conn *c, const struct http1_request *req,
		       const uint8_t *body, size_t len)
{
	struct http1_answer a = { .status = 400, .nosniff = true,
				  .content_type = "text/plain; charset=utf-8" };
	struct leasehttp_req lr;

	if (!(req->method_len == 4 && memcmp(req->method, "POST", 4) == 0)) {
		a.status = 405;
		a.body = "Method Not Allowed\n";
		return http1_answer(c, req, &a);
	}
	if (leasehttp_request_decode(http1_path_is(req, LEASEHTTP_INTERNAL_PATH), body, len, &lr)) {
		a.body = LEASEHTTP_ERR_UNMARSHAL "\n";
		return http1_answer(c, req, &a);
	}
	c->waiting = true;
	c->wait_minor = req->minor;
	c->wait_keep_alive = req->keep_alive;
	c->wait_cors = req->cors;
	if (c->ops->lease(c->ops->arg, c, &lr) == 0)
		return 0;
	c->waiting = false;
	a = (struct http1_answer){ .status = 500, .nosniff = true,
				   .content_type = "text/plain; charset=utf-8",
				   .body = "out of memory\n" };
	return http1_answer(c, req, &a);
}

/* ---- etcd's access controller ---- */

/* The entry of l that allows v (etcd's OriginAllowed and
 * IsHostWhitelisted): "*" when l is empty or holds "*", else the entry
 * equal to v; NULL when none does. */
static const char *http1_allowed(const struct config_strings *l, struct http_str v)
{
	if (!l || l->count == 0)
		return "*";
	for (size_t i = 0; i < l->count; i++)
		if (strcmp(l->v[i], "*") == 0)
			return l->v[i];
	for (size_t i = 0; i < l->count; i++)
		if (strlen(l->v[i]) == v.len && memcmp(l->v[i], v.p, v.len) == 0)
			return l->v[i];
	return NULL;
}

/* The host of a Host field as Go's net.SplitHostPort gives it, or the
 * whole field where that fails (etcd's httputil.GetHostname). */
static struct http_str http1_hostname(struct http_str h)
{
	const char *colon = memchr(h.p, ':', h.len);
	if (h.len > 0 && h.p[0] == '[') {
		const char *end = memchr(h.p, ']', h.len);
		if (end && end + 1 < h.p + h.len && end[1] == ':' &&
		    !memchr(end + 2, ':', (size_t)(h.p + h.len - end - 2)))
			return (struct http_str){ h.p + 1, (size_t)(end - h.p - 1) };
		return h;
	}
	if (colon && !memchr(colon + 1, ':', (size_t)(h.p + h.len - colon - 1)))
		return (struct http_str){ h.p, (size_t)(colon - h.p) };
	return h;
}

/* etcd's refusal of a Host not in --host-whitelist (http.Error, status
 * 421, the text of its errCVE20185702). */
static int http1_refuse_host(struct http1_conn *c, const struct http1_request *req,
			     struct http_str host)
{
	char body[1024];
	snprintf(body, sizeof(body),
		 "\netcd received your request, but the Host header was unrecognized.\n\n"
		 "To fix this, choose one of the following options:\n"
		 "- Enable TLS, then any HTTPS request will be allowed.\n"
		 "- Add the hostname you want to use to the whitelist in settings.\n"
		 "  - e.g. etcd --host-whitelist \"%.*s\"\n\n"
		 "This requirement has been added to help prevent \"DNS Rebinding\" attacks (CVE-2018-5702).\n\n",
		 (int)(host.len > 256 ? 256 : host.len), host.p);
	char name[257];
	snprintf(name, sizeof(name), "%.*s", (int)(host.len > 256 ? 256 : host.len), host.p);
	log_warn("rejecting HTTP request to prevent DNS rebinding attacks", LOG_STR("host", name));
	struct http1_answer a = { .status = 421, .nosniff = true,
				  .content_type = "text/plain; charset=utf-8", .body = body };
	return http1_answer(c, req, &a);
}

/* etcd's accessController before the mux, for one request: over plain
 * HTTP a Host not whitelisted is answered 421; then the answer's CORS
 * origin is chosen ("*" when every origin is allowed, else the request's
 * Origin when listed), and OPTIONS is answered 200 there. 1 when the
 * request was answered, 0 to go on, -ENOMEM. */
static int http1_access(struct http1_conn *c, struct http1_request *req)
{
	const struct http1_access *ac = c->ops ? c->ops->access : NULL;

	if (!ac)
		return 0;
	if (!c->secure) {
		struct http_str host = http1_hostname(req->host);
		if (!http1_allowed(ac->hosts, host))
			return http1_refuse_host(c, req, host) ? -ENOMEM : 1;
	}
	req->cors = http1_allowed(ac->cors, (struct http_str){ "*", 1 });
	if (!req->cors || strcmp(req->cors, "*") != 0)
		req->cors = http1_allowed(ac->cors, req->origin);
	if (http1_ieq(req->method, req->method_len, "options")) {
		struct http1_answer a = { .status = 200, .body = "" };
		return http1_answer(c, req, &a) ? -ENOMEM : 1;
	}
	return 0;
}

/* Whether req goes to the JSON gateway: a path under /v3/ or /v3beta/. */
static bool http1_is_gateway(const struct http1_conn *c, const struct http1_request *req)
{
	if (!c->ops || !c->ops->gateway)
		return false;
	return (req->path_len >= 4 && memcmp(req->target, "/v3/", 4) == 0) ||
	       (req->path_len >= 8 && memcmp(req->target, "/v3beta/", 8) == 0);
}

/* A gateway request whose head is buf[0..head) and whose body follows:
 * hands it over once the body is whole. Returns the bytes used (head and
 * body), 0 while the body is incomplete, or -ENOMEM. */
static long http1_gateway(struct http1_conn *c, const struct http1_request *req,
			  const uint8_t *buf, size_t head, size_t len)
{
	struct http1_gw_answer now = { 0 };
	struct http1_gw_req r = { .method = req->method, .method_len = req->method_len,
				  .path = req->target, .path_len = req->path_len,
				  .authorization = req->authorization.p,
				  .authorization_len = req->authorization.len };
	uint8_t *copy = NULL;
	size_t used;
	int rc;

	if (req->chunked) {
		struct http_chunked ch = { 0 };
		size_t consumed = 0, produced = 0;
		copy = malloc(len - head + 1);
		if (!copy)
			return -ENOMEM;
		rc = http_chunked_decode(&ch, buf + head, len - head, copy, &consumed, &produced);
		if (rc == -EBADMSG) {
			free(copy);
			return http1_refuse(c, 400, "malformed chunked encoding") ? -ENOMEM : (long)len;
		}
		if (rc == 0) {
			free(copy);
			if (len - head > c->ops->gateway_max_body + 4096)
				goto too_large;
			return 0;
		}
		r.body = copy;
		r.body_len = produced;
		used = head + consumed;
	} else {
		size_t blen = req->has_length ? (size_t)req->content_length : 0;
		if (blen > c->ops->gateway_max_body)
			goto too_large;
		if (len - head < blen)
			return 0;
		r.body = buf + head;
		r.body_len = blen;
		used = head + blen;
	}
	if (r.body_len > c->ops->gateway_max_body) {
		free(copy);
		goto too_large;
	}
	c->waiting = true;
	c->wait_minor = req->minor;
	c->wait_keep_alive = req->keep_alive;
	c->wait_cors = req->cors;
	c->wait_chunked = false;
	rc = c->ops->gateway(c->ops->arg, c, &r, &now);
	free(copy);
	if (rc < 0)
		return -ENOMEM;
	if (rc == 0)
		return (long)used;
	c->waiting = false;
	struct http1_answer a = { .status = now.status, .content_type = now.content_type,
				  .nosniff = now.nosniff, .body = now.body };
	return http1_answer(c, req, &a) ? -ENOMEM : (long)used;
too_large:
	return http1_refuse(c, 413, NULL) ? -ENOMEM : (long)len;
}

/* Whether req is one of the requests whose body is read, and which. */
static bool http1_reads_body(const struct http1_conn *c, const struct http1_request *req,
			     bool *lease)
{
	if (!c->ops || req->chunked)
		return false;
	*lease = false;
	if (c->ops->hashkv && http1_path_is(req, HASHKV_PATH))
		return req->content_length <= HTTP1_HASHKV_BODY_MAX;
	if (c->ops->lease &&
	    (http1_path_is(req, LEASEHTTP_PATH) || http1_path_is(req, LEASEHTTP_INTERNAL_PATH))) {
		*lease = true;
		return req->content_length <= LEASEHTTP_MAX_REQUEST;
	}
	return false;
}

/* Answers the complete requests in buf[0..len); returns the bytes used
 * (all of them once the connection is closing) or -ENOMEM. */
static long http1_process(struct http1_conn *c, const uint8_t *buf, size_t len)
{
	size_t off = 0;
	struct http1_request req;

	while (off < len && !c->closing && !c->waiting) {
		if (c->body_skip > 0) {
			size_t n = len - off < c->body_skip ? len - off : (size_t)c->body_skip;
			off += n;
			c->body_skip -= n;
			continue;
		}
		int rc = http1_parse(buf + off, len - off, &req);
		if (rc == HTTP1_NEED_MORE)
			break;
		if (rc == HTTP1_BAD || rc == HTTP1_TOO_LARGE) {
			if (http1_refuse(c, rc == HTTP1_BAD ? 400 : 431, NULL))
				return -ENOMEM;
			break;
		}
		int acc = req.minor >= 1 && !req.has_host ? 0 : http1_access(c, &req);
		if (acc < 0)
			return -ENOMEM;
		if (acc > 0) {
			/* answered: its body, if any, is skipped */
			off += (size_t)rc;
			if (req.chunked)
				c->closing = true;
			else if (req.has_length)
				c->body_skip = req.content_length;
			continue;
		}
		if (http1_is_gateway(c, &req)) {
			if (req.minor >= 1 && !req.has_host) {
				if (http1_refuse(c, 400, "missing required Host header"))
					return -ENOMEM;
				break;
			}
			long n = http1_gateway(c, &req, buf + off, (size_t)rc, len - off);
			if (n < 0)
				return -ENOMEM;
			if (n == 0)
				break;
			off += (size_t)n;
			continue;
		}
		bool lease;
		if (http1_reads_body(c, &req, &lease)) {
			/* a request whose body is read: wait for all of it */
			size_t blen = req.has_length ? (size_t)req.content_length : 0;
			if (len - off - (size_t)rc < blen)
				break;
			if (lease ? http1_lease(c, &req, buf + off + rc, blen) :
				    http1_hashkv(c, &req, buf + off + rc, blen))
				return -ENOMEM;
			off += (size_t)rc + blen;
			continue;
		}
		off += (size_t)rc;
		if (http1_handle(c, &req))
			return -ENOMEM;
		if (req.chunked)
			c->closing = true; /* chunked bodies are not read: answer, then close */
		else if (req.has_length)
			c->body_skip = req.content_length;
	}
	return c->closing ? (long)len : (long)off;
}

/* Answers what waits in c->in. */
static int http1_conn_drain_in(struct http1_conn *c)
{
	long used;

	if (c->in.len == 0)
		return 0;
	used = http1_process(c, c->in.data, c->in.len);
	if (used < 0)
		return (int)used;
	memmove(c->in.data, c->in.data + used, c->in.len - (size_t)used);
	c->in.len -= (size_t)used;
	return 0;
}

int http1_conn_hashkv_done(struct http1_conn *c, int rc, const struct hashkv_resp *r,
			   const char *why)
{
	struct http1_request req = { .method = "GET", .method_len = 3, .minor = c->wait_minor,
				     .keep_alive = c->wait_keep_alive, .cors = c->wait_cors };
	struct http1_answer a = { .status = 400, .nosniff = true,
				  .content_type = "text/plain; charset=utf-8" };
	char text[256];

	if (!c->waiting)
		return 0;
	c->waiting = false;
	if (rc) {
		snprintf(text, sizeof(text), "%s\n", why ? why : "cannot compute the hash");
	} else if (hashkv_response_encode(text, sizeof(text), r) < 0) {
		return -ENOMEM;
	} else {
		a = (struct http1_answer){ .status = 200, .content_type = "application/json" };
	}
	a.body = text;
	if (http1_answer(c, &req, &a))
		return -ENOMEM;
	return c->closing ? 0 : http1_conn_drain_in(c);
}

int http1_conn_reply(struct http1_conn *c, int status, const char *content_type,
		     const void *body, size_t len)
{
	struct http1_request req = { .method = "POST", .method_len = 4, .minor = c->wait_minor,
				     .keep_alive = c->wait_keep_alive, .cors = c->wait_cors };
	struct http1_answer a = { .status = status, .content_type = content_type,
				  .nosniff = status != 200, .body = body, .body_len = len };

	if (!c->waiting)
		return 0;
	c->waiting = false;
	if (len == 0)
		a.body = "";
	if (http1_answer(c, &req, &a))
		return -ENOMEM;
	return c->closing ? 0 : http1_conn_drain_in(c);
}

int http1_conn_gw_head(struct http1_conn *c, int status, bool chunked, size_t content_length)
{
	struct http1_request req = { .method = "POST", .method_len = 4, .minor = c->wait_minor,
				     .keep_alive = c->wait_keep_alive, .cors = c->wait_cors };
	struct http1_answer a = { .status = status, .content_type = "application/json",
				  .body = "", .body_len = content_length, .chunked = chunked,
				  .body_later = true,
				  .extra = "Grpc-Metadata-Content-Type: application/grpc\r\n" };
	bool closing = c->closing;

	if (!c->waiting)
		return 0;
	c->wait_chunked = chunked;
	if (http1_answer(c, &req, &a))
		return -ENOMEM;
	/* a Connection: close answer closes once the body ended (gw_end) */
	c->closing = closing;
	return 0;
}

int http1_conn_gw_data(struct http1_conn *c, const void *p, size_t n)
{
	char size[24];

	if (!c->waiting || n == 0)
		return 0;
	if (!c->wait_chunked)
		return h2_buf_append(&c->out, http1_mem(), p, n) ? -ENOMEM : 0;
	int k = snprintf(size, sizeof(size), "%zx\r\n", n);
	if (h2_buf_append(&c->out, http1_mem(), size, (size_t)k) ||
	    h2_buf_append(&c->out, http1_mem(), p, n) ||
	    h2_buf_append(&c->out, http1_mem(), "\r\n", 2))
		return -ENOMEM;
	return 0;
}

int http1_conn_gw_end(struct http1_conn *c)
{
	if (!c->waiting)
		return 0;
	if (c->wait_chunked && h2_buf_append(&c->out, http1_mem(), "0\r\n\r\n", 5))
		return -ENOMEM;
	c->waiting = false;
	if (!c->wait_keep_alive)
		c->closing = true;
	return c->closing ? 0 : http1_conn_drain_in(c);
}

int http1_conn_answer(struct http1_conn *c, int status, const char *content_type, bool nosniff,
		      const void *body, size_t len)
{
	struct http1_request req = { .method = c->serving_head ? "HEAD" : "GET",
				     .method_len = c->serving_head ? 4 : 3, .minor = c->wait_minor,
				     .keep_alive = c->wait_keep_alive, .cors = c->wait_cors };
	struct http1_answer a = { .status = status, .content_type = content_type,
				  .nosniff = nosniff, .allow_get = status == 405,
				  .body = len ? body : "", .body_len = len };

	return http1_answer(c, &req, &a);
}

void http1_conn_wait(struct http1_conn *c)
{
	c->waiting = true;
}

int http1_conn_recv(struct http1_conn *c, const uint8_t *data, size_t len)
{
	long used;

	if (c->closing && !c->waiting)
		return 0;
	if (c->in.len == 0) {
		used = http1_process(c, data, len);
		if (used < 0)
			return (int)used;
		if ((size_t)used < len &&
		    h2_buf_append(&c->in, http1_mem(), data + used, len - (size_t)used))
			return -ENOMEM;
		return 0;
	}
	if (h2_buf_append(&c->in, http1_mem(), data, len))
		return -ENOMEM;
	return http1_conn_drain_in(c);
}
