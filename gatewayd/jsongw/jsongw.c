/* etcd's HTTP/JSON gateway as a gRPC client of this server (see jsongw.h). */
#include "gatewayd/jsongw/jsongw.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "base/http/http.h"
#include "base/log/log.h"
#include "config/config.h"
#include "gatewayd/dlist.h"
#include "gatewayd/server.h"
#include "gatewayd/transport/grpc.h"
#include "gatewayd/transport/transport.h"
#include "proto/json.h"
#include "proto/registry.h"

/* ---- routes: etcd 3.4's generated gw packages (rpc.pb.gw.go and the others) ---- */

enum jsongw_kind {
	JG_UNARY,         /* one request, one answer */
	JG_SERVER_STREAM, /* one request, a stream of answers */
	JG_BIDI,          /* the body is a stream of requests */
};

struct jsongw_route {
	const char *path;
	const char *grpc;
	uint8_t kind;
	bool answer_each; /* half-close only once every request was answered */
};

/* Every route of etcd 3.4's gateway mux, in its registration order: where
 * two share a path (/v3/maintenance/hash: Hash and HashKV) the first one
 * registered serves it, as grpc-gateway 1.6's mux picks. The Auth
 * service's routes go to its gRPC methods like the others. */
static const struct jsongw_route jsongw_routes[] = {
	{ "/v3/kv/range", "/etcdserverpb.KV/Range", JG_UNARY, false },
	{ "/v3/kv/put", "/etcdserverpb.KV/Put", JG_UNARY, false },
	{ "/v3/kv/deleterange", "/etcdserverpb.KV/DeleteRange", JG_UNARY, false },
	{ "/v3/kv/txn", "/etcdserverpb.KV/Txn", JG_UNARY, false },
	{ "/v3/kv/compaction", "/etcdserverpb.KV/Compact", JG_UNARY, false },
	{ "/v3/watch", "/etcdserverpb.Watch/Watch", JG_BIDI, false },
	{ "/v3/lease/grant", "/etcdserverpb.Lease/LeaseGrant", JG_UNARY, false },
	{ "/v3/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke", JG_UNARY, false },
	{ "/v3/kv/lease/revoke", "/etcdserverpb.Lease/LeaseRevoke", JG_UNARY, false },
	{ "/v3/lease/keepalive", "/etcdserverpb.Lease/LeaseKeepAlive", JG_BIDI, true },
	{ "/v3/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive", JG_UNARY, false },
	{ "/v3/kv/lease/timetolive", "/etcdserverpb.Lease/LeaseTimeToLive", JG_UNARY, false },
	{ "/v3/lease/leases", "/etcdserverpb.Lease/LeaseLeases", JG_UNARY, false },
	{ "/v3/kv/lease/leases", "/etcdserverpb.Lease/LeaseLeases", JG_UNARY, false },
	{ "/v3/cluster/member/add", "/etcdserverpb.Cluster/MemberAdd", JG_UNARY, false },
	{ "/v3/cluster/member/remove", "/etcdserverpb.Cluster/MemberRemove", JG_UNARY, false },
	{ "/v3/cluster/member/update", "/etcdserverpb.Cluster/MemberUpdate", JG_UNARY, false },
	{ "/v3/cluster/member/list", "/etcdserverpb.Cluster/MemberList", JG_UNARY, false },
	{ "/v3/cluster/member/promote", "/etcdserverpb.Cluster/MemberPromote", JG_UNARY, false },
	{ "/v3/maintenance/alarm", "/etcdserverpb.Maintenance/Alarm", JG_UNARY, false },
	{ "/v3/maintenance/status", "/etcdserverpb.Maintenance/Status", JG_UNARY, false },
	{ "/v3/maintenance/defragment", "/etcdserverpb.Maintenance/Defragment", JG_UNARY, false },
	{ "/v3/maintenance/hash", "/etcdserverpb.Maintenance/Hash", JG_UNARY, false },
	{ "/v3/maintenance/snapshot", "/etcdserverpb.Maintenance/Snapshot", JG_SERVER_STREAM,
	  false },
	{ "/v3/maintenance/transfer-leadership", "/etcdserverpb.Maintenance/MoveLeader", JG_UNARY,
	  false },
	{ "/v3/auth/enable", "/etcdserverpb.Auth/AuthEnable", JG_UNARY, false },
	{ "/v3/auth/disable", "/etcdserverpb.Auth/AuthDisable", JG_UNARY, false },
	{ "/v3/auth/authenticate", "/etcdserverpb.Auth/Authenticate", JG_UNARY, false },
	{ "/v3/auth/user/add", "/etcdserverpb.Auth/UserAdd", JG_UNARY, false },
	{ "/v3/auth/user/get", "/etcdserverpb.Auth/UserGet", JG_UNARY, false },
	{ "/v3/auth/user/list", "/etcdserverpb.Auth/UserList", JG_UNARY, false },
	{ "/v3/auth/user/delete", "/etcdserverpb.Auth/UserDelete", JG_UNARY, false },
	{ "/v3/auth/user/changepw", "/etcdserverpb.Auth/UserChangePassword", JG_UNARY, false },
	{ "/v3/auth/user/grant", "/etcdserverpb.Auth/UserGrantRole", JG_UNARY, false },
	{ "/v3/auth/user/revoke", "/etcdserverpb.Auth/UserRevokeRole", JG_UNARY, false },
	{ "/v3/auth/role/add", "/etcdserverpb.Auth/RoleAdd", JG_UNARY, false },
	{ "/v3/auth/role/get", "/etcdserverpb.Auth/RoleGet", JG_UNARY, false },
	{ "/v3/auth/role/list", "/etcdserverpb.Auth/RoleList", JG_UNARY, false },
	{ "/v3/auth/role/delete", "/etcdserverpb.Auth/RoleDelete", JG_UNARY, false },
	{ "/v3/auth/role/grant", "/etcdserverpb.Auth/RoleGrantPermission", JG_UNARY, false },
	{ "/v3/auth/role/revoke", "/etcdserverpb.Auth/RoleRevokePermission", JG_UNARY, false },
	{ "/v3/lock/lock", "/v3lockpb.Lock/Lock", JG_UNARY, false },
	{ "/v3/lock/unlock", "/v3lockpb.Lock/Unlock", JG_UNARY, false },
	{ "/v3/election/campaign", "/v3electionpb.Election/Campaign", JG_UNARY, false },
	{ "/v3/election/proclaim", "/v3electionpb.Election/Proclaim", JG_UNARY, false },
	{ "/v3/election/leader", "/v3electionpb.Election/Leader", JG_UNARY, false },
	{ "/v3/election/observe", "/v3electionpb.Election/Observe", JG_SERVER_STREAM, false },
	{ "/v3/election/resign", "/v3electionpb.Election/Resign", JG_UNARY, false },
};
#define JG_NROUTES (sizeof(jsongw_routes) / sizeof(jsongw_routes[0]))

/* Flow control of the gateway's client: each call's stream window, and
 * the HTTP/1.1 output a stream may have waiting for its client before the
 * gateway stops giving the server window back. A watch whose HTTP client
 * reads slowly thus holds at most about both, and the server's watch
 * stream sees a slow client as from any gRPC client (it holds events). */
#define JG_STREAM_WINDOW (1u << 20)
#define JG_HTTP_BACKLOG (1u << 20)

/* ---- state ---- */

struct jsongw {
	struct gw_server *s;
	struct h2_conn *srv;       /* the server's side of the loopback connection */
	nghttp2_session *cli;      /* the gateway's side */
	struct transport t;        /* srv's output, fed into cli */
	struct dlist reqs;         /* every request, oldest first */
	const ProtobufCMethodDescriptor *methods[JG_NROUTES];
	bool dirty;                /* bytes may wait in either direction */
	uint64_t fed;              /* bytes of srv's output given to cli */
	bool broken;               /* the loopback failed: connect again */
};

struct jsongw_req {
	struct dlist node;
	struct jsongw *g;
	void *owner;               /* the HTTP/1.1 connection's gw_conn */
	struct http1_conn *h1;
	const struct jsongw_route *route;
	const ProtobufCMethodDescriptor *method;
	int32_t stream_id;         /* 0 until submitted */
	struct proto_json_buf out; /* gRPC-framed requests not yet taken by nghttp2 */
	size_t out_off;
	uint32_t sent, answered;   /* requests framed, answers received */
	size_t held;               /* answer bytes received and not yet given
				    * back as window (the client is slow) */
	struct proto_json_buf in;  /* answer bytes being reassembled */
	struct proto_json_buf unary; /* a unary call's answer, as JSON */
	bool got_message;
	int grpc_status;           /* -1 until the trailers say */
	char grpc_message[GRPC_MESSAGE_MAX + 1];
	bool head_sent;            /* a stream's HTTP head went out */
	bool closed;               /* the HTTP/2 stream is over */
	bool dropped;              /* the HTTP side is gone: nothing more to it */
};

/* ---- answers ---- */

/* grpc-gateway's runtime.HTTPStatusFromCode. */
static int jsongw_http_status(int code)
{
	static const int map[] = {
		[GRPC_STATUS_OK] = 200, [GRPC_STATUS_CANCELLED] = 408,
		[GRPC_STATUS_UNKNOWN] = 500, [GRPC_STATUS_INVALID_ARGUMENT] = 400,
		[GRPC_STATUS_DEADLINE_EXCEEDED] = 504, [GRPC_STATUS_NOT_FOUND] = 404,
		[GRPC_STATUS_ALREADY_EXISTS] = 409, [GRPC_STATUS_PERMISSION_DENIED] = 403,
		[GRPC_STATUS_RESOURCE_EXHAUSTED] = 429, [GRPC_STATUS_FAILED_PRECONDITION] = 412,
		[GRPC_STATUS_ABORTED] = 409, [GRPC_STATUS_OUT_OF_RANGE] = 400,
		[GRPC_STATUS_UNIMPLEMENTED] = 501, [GRPC_STATUS_INTERNAL] = 500,
		[GRPC_STATUS_UNAVAILABLE] = 503, [GRPC_STATUS_DATA_LOSS] = 500,
		[GRPC_STATUS_UNAUTHENTICATED] = 401,
	};
	if (code < 0 || (size_t)code >= sizeof(map) / sizeof(map[0]))
		return 500;
	return map[code];
}

/* grpc-gateway's errorBody as JSONPb writes it:
 * {"error":msg,"message":msg,"code":N}, empty members left out. */
static int jsongw_error_body(struct proto_json_buf *b, int code, const char *msg)
{
	char num[24];
	size_t n = strlen(msg);
	int rc = proto_json_buf_append(b, "{", 1);

	if (n) {
		rc = rc ?: proto_json_buf_append(b, "\"error\":", 8);
		rc = rc ?: proto_json_encode_string(b, msg, n);
		rc = rc ?: proto_json_buf_append(b, ",\"message\":", 11);
		rc = rc ?: proto_json_encode_string(b, msg, n);
	}
	if (code) {
		int k = snprintf(num, sizeof(num), "%s\"code\":%d", n ? "," : "", code);
		rc = rc ?: proto_json_buf_append(b, num, (size_t)k);
	}
	return rc ?: proto_json_buf_append(b, "}", 1);
}

/* The chunk grpc-gateway ends a failed stream with:
 * {"error":{"grpc_code":N,"http_code":H,"message":...,"http_status":...}}. */
static int jsongw_stream_error(struct proto_json_buf *b, int code, const char *msg)
{
	char num[64];
	int http = jsongw_http_status(code);
	const char *text = http_status_text(http);
	int k = snprintf(num, sizeof(num), "{\"error\":{\"grpc_code\":%d,\"http_code\":%d", code,
			 http);
	int rc = proto_json_buf_append(b, num, (size_t)k);

	if (*msg) {
		rc = rc ?: proto_json_buf_append(b, ",\"message\":", 11);
		rc = rc ?: proto_json_encode_string(b, msg, strlen(msg));
	}
	if (*text) {
		rc = rc ?: proto_json_buf_append(b, ",\"http_status\":", 15);
		rc = rc ?: proto_json_encode_string(b, text, strlen(text));
	}
	return rc ?: proto_json_buf_append(b, "}}", 2);
}

/* ---- writing to the HTTP/1.1 connection: 0, or -ENOMEM (the request
 * is then dropped and the connection closes) ---- */

static int jsongw_h1_result(struct jsongw_req *r, int rc)
{
	if (!r->dropped)
		gw_http1_output(r->g->s, r->owner, rc);
	if (rc)
		r->dropped = true;
	return rc;
}

static int jsongw_h1_head(struct jsongw_req *r, int status, bool chunked, size_t len)
{
	return jsongw_h1_result(r, http1_conn_gw_head(r->h1, status, chunked, len));
}

static int jsongw_h1_data(struct jsongw_req *r, const void *p, size_t n)
{
	return jsongw_h1_result(r, http1_conn_gw_data(r->h1, p, n));
}

static int jsongw_h1_end(struct jsongw_req *r)
{
	return jsongw_h1_result(r, http1_conn_gw_end(r->h1));
}

/* ---- requests ---- */

static void jsongw_req_free(struct jsongw_req *r)
{
	if (!r->dropped && r->h1->gw_req == r)
		r->h1->gw_req = NULL;
	dlist_remove(&r->node);
	proto_json_buf_free(&r->out);
	proto_json_buf_free(&r->in);
	proto_json_buf_free(&r->unary);
	free(r);
}

/* The index of path's route (/v3beta/ read as /v3/), or -1. */
static int jsongw_route_find(const char *path, size_t len)
{
	char p[64];

	if (len >= 8 && memcmp(path, "/v3beta/", 8) == 0) {
		if (len - 5 >= sizeof(p))
			return -1;
		memcpy(p, "/v3/", 4);
		memcpy(p + 4, path + 8, len - 8);
		len -= 4;
		path = p;
	}
	for (size_t i = 0; i < JG_NROUTES; i++)
		if (strlen(jsongw_routes[i].path) == len && memcmp(jsongw_routes[i].path, path, len) == 0)
			return (int)i;
	return -1;
}

/* Frames the JSON requests of body into r->out: all of them for a
 * streaming body, the first for the others (grpc-gateway reads no
 * further). Returns 0, or -EINVAL with err (the first request is bad),
 * or -ENOMEM. A bad request after the first ends the stream's requests
 * there, as the gateway stops reading. */
static int jsongw_frame(struct jsongw_req *r, const uint8_t *body, size_t len,
			struct proto_json_err *err)
{
	size_t off = 0;

	for (;;) {
		size_t mark = r->out.len, used = 0;
		uint8_t prefix[GRPC_PREFIX_LEN] = { 0 };
		if (proto_json_buf_append(&r->out, prefix, sizeof(prefix)))
			return -ENOMEM;
		int rc = proto_json_decode(r->method->input, (const char *)body + off, len - off,
					   &used, &r->out, err);
		if (rc == -ENODATA && r->sent == 0 && r->route->kind != JG_BIDI)
			rc = 0; /* an empty body is the empty request */
		if (rc == -ENOMEM)
			return rc;
		if (rc) {
			r->out.len = mark;
			if (rc == -ENODATA || r->sent > 0)
				return 0;
			return -EINVAL; /* -EAGAIN: the body ended inside the value */
		}
		grpc_prefix_write(r->out.data + mark, false,
				  (uint32_t)(r->out.len - mark - GRPC_PREFIX_LEN));
		r->sent++;
		off += used;
		if (r->route->kind != JG_BIDI)
			return 0;
	}
}

static ssize_t jsongw_read_body(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
				size_t length, uint32_t *data_flags, nghttp2_data_source *source,
				void *user)
{
	struct jsongw_req *r = source->ptr;
	size_t n = r->out.len - r->out_off;
	(void)session;
	(void)stream_id;
	(void)user;

	if (n > length)
		n = length;
	memcpy(buf, r->out.data + r->out_off, n);
	r->out_off += n;
	if (r->out_off < r->out.len)
		return (ssize_t)n;
	if (r->route->answer_each && r->answered < r->sent && !r->dropped) {
		if (n == 0)
			return NGHTTP2_ERR_DEFERRED;
		return (ssize_t)n;
	}
	*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

/* Submits r's call; auth (len bytes, NULL: none) goes as its
 * authorization metadata, as grpc-gateway forwards the Authorization
 * field (etcd reads it as the token). nghttp2 copies the fields. */
static int jsongw_submit(struct jsongw *g, struct jsongw_req *r, const char *auth, size_t len)
{
	const char *path = r->route->grpc;
	nghttp2_nv nva[] = {
#define NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE }
		NV(":method", "POST"),
		NV(":scheme", "http"),
		NV(":authority", "jsongw"),
		NV(":path", path),
		NV("content-type", "application/grpc"),
		NV("te", "trailers"),
		NV("authorization", ""),
#undef NV
	};
	size_t n = sizeof(nva) / sizeof(nva[0]);
	nghttp2_data_provider prd = { .source.ptr = r, .read_callback = jsongw_read_body };

	if (auth) {
		nva[n - 1].value = (uint8_t *)auth;
		nva[n - 1].valuelen = len;
	} else {
		n--;
	}
	int32_t id = nghttp2_submit_request(g->cli, NULL, nva, n, &prd, r);

	if (id < 0)
		return -ENOMEM;
	r->stream_id = id;
	g->dirty = true;
	return 0;
}

/* Fills *now with grpc-gateway's error answer, in body (kept by the caller). */
static void jsongw_now_error(struct http1_gw_answer *now, struct proto_json_buf *body, int code,
			     const char *msg)
{
	*now = (struct http1_gw_answer){ .status = jsongw_http_status(code),
					 .content_type = "application/json" };
	if (jsongw_error_body(body, code, msg) || proto_json_buf_append(body, "", 1))
		now->body = "{\"error\": \"failed to marshal error message\"}";
	else
		now->body = (const char *)body->data;
}

int jsongw_http1(struct jsongw *g, void *owner, struct http1_conn *h1,
		 const struct http1_gw_req *req, struct http1_gw_answer *now)
{
	static __thread struct proto_json_buf errbody;
	struct proto_json_err err;
	int i = jsongw_route_find(req->path, req->path_len);

	if (i < 0) {
		*now = (struct http1_gw_answer){ .status = 404, .nosniff = true,
						 .content_type = "text/plain; charset=utf-8",
						 .body = "Not Found\n" };
		return 1;
	}
	if (!(req->method_len == 4 && memcmp(req->method, "POST", 4) == 0)) {
		*now = (struct http1_gw_answer){ .status = 405, .nosniff = true,
						 .content_type = "text/plain; charset=utf-8",
						 .body = "Method Not Allowed\n" };
		return 1;
	}
	if (!g->methods[i]) {
		errbody.len = 0;
		jsongw_now_error(now, &errbody, GRPC_STATUS_UNIMPLEMENTED, "unknown method");
		return 1;
	}
	if (!g->cli) {
		/* the loopback could not be opened again (memory): grpc-go's
		 * answer while its connection is down */
		errbody.len = 0;
		jsongw_now_error(now, &errbody, GRPC_STATUS_UNAVAILABLE, "transport is closing");
		return 1;
	}
	struct jsongw_req *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	*r = (struct jsongw_req){ .g = g, .owner = owner, .h1 = h1,
				  .route = &jsongw_routes[i], .method = g->methods[i],
				  .grpc_status = -1 };
	dlist_insert_tail(&g->reqs, &r->node);
	h1->gw_req = r;
	int rc = jsongw_frame(r, req->body, req->body_len, &err);
	if (rc == -EINVAL) {
		/* a unary request's body: INVALID_ARGUMENT; the first request of
		 * a stream: the decoder's error as it is (UNKNOWN) */
		errbody.len = 0;
		jsongw_now_error(now, &errbody,
				 r->route->kind == JG_BIDI ? GRPC_STATUS_UNKNOWN :
							     GRPC_STATUS_INVALID_ARGUMENT,
				 err.text);
		jsongw_req_free(r);
		return 1;
	}
	if (rc == 0)
		rc = jsongw_submit(g, r, req->authorization, req->authorization_len);
	if (rc) {
		jsongw_req_free(r);
		return rc;
	}
	return 0;
}

/* Cancels r's call; r goes once its stream is over. */
static void jsongw_req_drop(struct jsongw *g, struct jsongw_req *r)
{
	if (!r->dropped && r->h1->gw_req == r)
		r->h1->gw_req = NULL;
	r->dropped = true;
	if (r->stream_id > 0 && !r->closed)
		nghttp2_submit_rst_stream(g->cli, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
	g->dirty = true;
}

void jsongw_http1_drop(struct jsongw *g, struct http1_conn *h1)
{
	if (g && h1->gw_req)
		jsongw_req_drop(g, h1->gw_req);
}

/* Gives the server back the window of what r received, unless r's HTTP
 * client is behind by more than JG_HTTP_BACKLOG. Returns whether it did. */
static bool jsongw_consume(struct jsongw *g, struct jsongw_req *r)
{
	if (!r->held || !g->cli)
		return false;
	if (!r->dropped && !r->closed && http1_conn_out_len(r->h1) >= JG_HTTP_BACKLOG)
		return false;
	if (r->closed) /* only the connection's window is left to give */
		nghttp2_session_consume_connection(g->cli, r->held);
	else
		nghttp2_session_consume(g->cli, r->stream_id, r->held);
	r->held = 0;
	g->dirty = true;
	return true;
}

bool jsongw_http1_drained(struct jsongw *g, struct http1_conn *h1)
{
	return g && h1->gw_req && jsongw_consume(g, h1->gw_req);
}

/* ---- the client session's callbacks ---- */

/* One answer message of r: a unary call keeps it for the end, a stream
 * sends it as a {"result":...} line. */
static void jsongw_answer(struct jsongw *g, struct jsongw_req *r, const uint8_t *msg, size_t len)
{
	ProtobufCMessage *m = protobuf_c_message_unpack(r->method->output, NULL, len, msg);
	int rc;

	r->answered++;
	if (r->route->answer_each && r->answered >= r->sent && r->stream_id > 0)
		nghttp2_session_resume_data(g->cli, r->stream_id);
	if (r->dropped)
		goto out;
	if (!m) {
		/* grpc-go's client fails the call on an answer it cannot read */
		r->grpc_status = GRPC_STATUS_INTERNAL;
		snprintf(r->grpc_message, sizeof(r->grpc_message),
			 "grpc: failed to unmarshal the received message");
		nghttp2_submit_rst_stream(g->cli, NGHTTP2_FLAG_NONE, r->stream_id, NGHTTP2_CANCEL);
		return;
	}
	if (r->route->kind != JG_BIDI && r->route->kind != JG_SERVER_STREAM) {
		r->unary.len = 0;
		if (proto_json_encode(m, &r->unary))
			goto fail;
		r->got_message = true;
		goto out;
	}
	r->unary.len = 0;
	rc = proto_json_buf_append(&r->unary, "{\"result\":", 10);
	rc = rc ?: proto_json_encode(m, &r->unary);
	rc = rc ?: proto_json_buf_append(&r->unary, "}\n", 2);
	if (rc)
		goto fail;
	if (!r->head_sent) {
		r->head_sent = true;
		if (jsongw_h1_head(r, 200, true, 0))
			goto fail;
	}
	if (jsongw_h1_data(r, r->unary.data, r->unary.len))
		goto fail;
	goto out;
fail:
	jsongw_req_drop(g, r);
out:
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}

static int jsongw_on_data(nghttp2_session *session, uint8_t flags, int32_t stream_id,
			  const uint8_t *data, size_t len, void *user)
{
	struct jsongw *g = user;
	struct jsongw_req *r = nghttp2_session_get_stream_user_data(session, stream_id);
	size_t off = 0;
	(void)flags;

	if (!r) {
		nghttp2_session_consume_connection(session, len);
		return 0;
	}
	if (proto_json_buf_append(&r->in, data, len)) {
		jsongw_req_drop(g, r);
		nghttp2_session_consume(session, stream_id, len);
		return 0;
	}
	while (r->in.len - off >= GRPC_PREFIX_LEN) {
		size_t n = grpc_prefix_len(r->in.data + off);
		if (r->in.len - off - GRPC_PREFIX_LEN < n)
			break;
		jsongw_answer(g, r, r->in.data + off + GRPC_PREFIX_LEN, n);
		off += GRPC_PREFIX_LEN + n;
	}
	memmove(r->in.data, r->in.data + off, r->in.len - off);
	r->in.len -= off;
	r->held += len;
	jsongw_consume(g, r);
	return 0;
}

static int jsongw_on_header(nghttp2_session *session, const nghttp2_frame *frame,
			    const uint8_t *name, size_t namelen, const uint8_t *value,
			    size_t valuelen, uint8_t flags, void *user)
{
	struct jsongw_req *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
	(void)flags;
	(void)user;

	if (!r)
		return 0;
	if (namelen == 11 && memcmp(name, "grpc-status", 11) == 0) {
		int code = 0;
		for (size_t i = 0; i < valuelen && i < 4; i++)
			code = code * 10 + (value[i] - '0');
		r->grpc_status = code;
	} else if (namelen == 12 && memcmp(name, "grpc-message", 12) == 0) {
		char tmp[GRPC_MESSAGE_MAX * 3 + 1];
		size_t n = valuelen < sizeof(tmp) ? valuelen : sizeof(tmp) - 1;
		n = grpc_message_decode((const char *)value, n, tmp);
		if (n > GRPC_MESSAGE_MAX)
			n = GRPC_MESSAGE_MAX;
		memcpy(r->grpc_message, tmp, n);
		r->grpc_message[n] = 0;
	}
	return 0;
}

static int jsongw_on_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
			   void *user)
{
	struct jsongw_req *r = nghttp2_session_get_stream_user_data(session, stream_id);
	(void)user;

	if (!r)
		return 0;
	r->closed = true;
	jsongw_consume(user, r);
	if (r->grpc_status < 0) {
		/* grpc-go's client, for a stream reset without a status */
		r->grpc_status = error_code == NGHTTP2_REFUSED_STREAM ? GRPC_STATUS_UNAVAILABLE :
				 error_code == NGHTTP2_CANCEL ? GRPC_STATUS_CANCELLED :
								GRPC_STATUS_INTERNAL;
		snprintf(r->grpc_message, sizeof(r->grpc_message),
			 "stream terminated by RST_STREAM with error code: %s",
			 nghttp2_http2_strerror(error_code));
	}
	return 0;
}

/* ---- the loopback connection ---- */

static ssize_t jsongw_t_read(struct transport *t, void *buf, size_t len)
{
	(void)buf;
	(void)len;
	t->want = TRANSPORT_WANT_READ;
	return -EAGAIN;
}

/* srv's output: straight into the client session. */
static ssize_t jsongw_t_writev(struct transport *t, const struct iovec *iov, int iovcnt)
{
	struct jsongw *g = t->impl;
	size_t total = 0;

	for (int i = 0; i < iovcnt; i++) {
		ssize_t n = nghttp2_session_mem_recv(g->cli, iov[i].iov_base, iov[i].iov_len);
		if (n < 0) {
			log_error("json gateway: its client refused the server's bytes",
				  LOG_STR("error", nghttp2_strerror((int)n)));
			g->broken = true;
			return -EPROTO;
		}
		total += iov[i].iov_len;
	}
	g->fed += total;
	return (ssize_t)total;
}

static int jsongw_t_shutdown(struct transport *t)
{
	(void)t;
	return 0;
}

static void jsongw_t_close(struct transport *t)
{
	(void)t;
}

static const struct transport_ops jsongw_transport_ops = {
	.read = jsongw_t_read, .writev = jsongw_t_writev, .shutdown = jsongw_t_shutdown,
	.close = jsongw_t_close,
};

static void jsongw_pending(struct h2_conn *c, void *user)
{
	struct jsongw *g = user;
	(void)c;
	g->dirty = true;
}

static void jsongw_disconnect(struct jsongw *g)
{
	if (g->srv)
		grpc_server_conn_free(g->srv);
	g->srv = NULL;
	if (g->cli)
		nghttp2_session_del(g->cli);
	g->cli = NULL;
}

/* Opens the loopback connection: the server's side, and a client that
 * keeps to the server's stream limit from its first request on. */
static int jsongw_connect(struct jsongw *g)
{
	nghttp2_session_callbacks *cb;
	nghttp2_option *opt;
	int rc = -ENOMEM;

	if (grpc_server_conn_new(g->s->grpc, &g->srv))
		return -ENOMEM;
	h2_conn_set_user(g->srv, g, jsongw_pending);
	if (nghttp2_session_callbacks_new(&cb))
		goto out;
	if (nghttp2_option_new(&opt)) {
		nghttp2_session_callbacks_del(cb);
		goto out;
	}
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, jsongw_on_data);
	nghttp2_session_callbacks_set_on_header_callback(cb, jsongw_on_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cb, jsongw_on_close);
	nghttp2_option_set_peer_max_concurrent_streams(opt, g->s->cfg->max_concurrent_streams);
	nghttp2_option_set_no_auto_window_update(opt, 1);
	rc = nghttp2_session_client_new2(&g->cli, cb, g, opt) ? -ENOMEM : 0;
	nghttp2_option_del(opt);
	nghttp2_session_callbacks_del(cb);
	if (rc)
		goto out;
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, JG_STREAM_WINDOW },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 1u << 20 },
	};
	if (nghttp2_submit_settings(g->cli, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) ||
	    nghttp2_session_set_local_window_size(g->cli, NGHTTP2_FLAG_NONE, 0, 1 << 30)) {
		rc = -ENOMEM;
		goto out;
	}
	g->broken = false;
	g->dirty = true;
	return 0;
out:
	jsongw_disconnect(g);
	return rc;
}

int jsongw_new(struct gw_server *s, struct jsongw **out)
{
	struct jsongw *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return -ENOMEM;
	g->s = s;
	dlist_init(&g->reqs);
	g->t = (struct transport){ .ops = &jsongw_transport_ops, .fd = -1, .impl = g };
	for (size_t i = 0; i < JG_NROUTES; i++) {
		const char *p = jsongw_routes[i].grpc;
		if (proto_method_find(p, strlen(p), NULL, &g->methods[i]))
			g->methods[i] = NULL;
	}
	rc = jsongw_connect(g);
	if (rc) {
		free(g);
		return rc;
	}
	*out = g;
	return 0;
}

void jsongw_free(struct jsongw *g)
{
	struct jsongw_req *r;

	if (!g)
		return;
	jsongw_disconnect(g);
	while ((r = dlist_entry(dlist_first(&g->reqs), struct jsongw_req, node)))
		jsongw_req_free(r);
	free(g);
}

/* Ends r's HTTP answer from its call's end. */
static void jsongw_finish(struct jsongw_req *r)
{
	struct proto_json_buf *b = &r->unary;
	int code = r->grpc_status;

	if (r->route->kind == JG_UNARY) {
		if (code == GRPC_STATUS_OK && !r->got_message) {
			code = GRPC_STATUS_INTERNAL;
			snprintf(r->grpc_message, sizeof(r->grpc_message),
				 "grpc: the server ended the call without an answer");
		}
		if (code != GRPC_STATUS_OK) {
			b->len = 0;
			if (jsongw_error_body(b, code, r->grpc_message))
				return;
		}
		if (jsongw_h1_head(r, jsongw_http_status(code), false, b->len) == 0 &&
		    jsongw_h1_data(r, b->data, b->len) == 0)
			jsongw_h1_end(r);
		return;
	}
	if (code != GRPC_STATUS_OK) {
		b->len = 0;
		if (jsongw_stream_error(b, code, r->grpc_message))
			return;
		if (!r->head_sent && jsongw_h1_head(r, jsongw_http_status(code), true, 0))
			return;
		r->head_sent = true;
		if (jsongw_h1_data(r, b->data, b->len))
			return;
	} else if (!r->head_sent) {
		r->head_sent = true;
		if (jsongw_h1_head(r, 200, true, 0))
			return;
	}
	jsongw_h1_end(r);
}

/* Answers and frees the requests whose calls are over. */
static void jsongw_sweep(struct jsongw *g)
{
	struct jsongw_req *r, *next;

	dlist_for_each_safe(r, next, &g->reqs, node) {
		if (!r->closed && !(r->dropped && r->stream_id == 0))
			continue;
		if (!r->dropped)
			jsongw_finish(r);
		/* a pipelined request the end let in may sit after r */
		next = dlist_entry(dlist_after(&g->reqs, &r->node), struct jsongw_req, node);
		jsongw_req_free(r);
	}
}

/* The loopback failed (a bug, or memory): its calls end UNAVAILABLE and a
 * new one opens. It goes first, so that requests the answers let in (a
 * pipelined one) are refused at once rather than sent to it. */
static void jsongw_reconnect(struct jsongw *g)
{
	struct jsongw_req *r;

	jsongw_disconnect(g);
	dlist_for_each(r, &g->reqs, node) {
		if (r->closed)
			continue;
		r->closed = true;
		r->held = 0; /* the old session's window */
		r->grpc_status = GRPC_STATUS_UNAVAILABLE;
		snprintf(r->grpc_message, sizeof(r->grpc_message), "transport is closing");
	}
	jsongw_sweep(g);
	if (jsongw_connect(g))
		g->broken = true;
}

bool jsongw_turn(struct jsongw *g)
{
	bool delivered = false;

	if (!g || !g->dirty)
		return false;
	if (g->broken || !g->srv) {
		jsongw_reconnect(g);
		if (g->broken)
			return false;
	}
	for (int round = 0; round < 64; round++) {
		bool progress = false;
		const uint8_t *data;
		ssize_t n;

		g->dirty = false;
		while ((n = nghttp2_session_mem_send(g->cli, &data)) > 0) {
			if (h2_conn_recv(g->srv, data, (size_t)n)) {
				g->broken = true;
				break;
			}
			progress = delivered = true;
		}
		if (n < 0)
			g->broken = true;
		/* flushed whether or not it has output: a flush also re-arms
		 * srv's pending callback (once per flush), which output that
		 * could not go (a stream out of window) would otherwise keep
		 * spent, leaving later answers unannounced */
		if (!g->broken) {
			uint64_t fed = g->fed;
			int rc = h2_conn_flush(g->srv, &g->t);
			if (rc < 0 && rc != -EAGAIN)
				g->broken = true;
			if (g->fed != fed)
				progress = true;
		}
		jsongw_sweep(g);
		if (g->broken) {
			log_error("json gateway: the loopback connection failed; opening another");
			jsongw_reconnect(g);
			break;
		}
		if (!progress && !g->dirty)
			break;
	}
	/* work left (a long exchange): the loop goes round again at once */
	return delivered || g->dirty;
}
