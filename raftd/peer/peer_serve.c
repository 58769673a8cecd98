/*
 * The server side of the peer transport: requests from peers on the peer
 * URLs, answered as etcd 3.4's peer handler answers them (rafthttp's
 * pipeline, stream, snapshot and probing handlers, and etcdhttp's
 * /members and /version), with its checks, status codes and texts.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "base/hex/hex.h"
#include "raftd/alloc.h"
#include "raftd/peer/msgframe.h"
#include "raftd/peer/peer_int.h"
#include "raftd/raft/raft.h"
#include "base/log/log.h"

enum peer_route {
	PEER_R_NOT_FOUND = 0,
	PEER_R_PIPELINE,   /* /raft */
	PEER_R_STREAM,     /* /raft/stream/... */
	PEER_R_SNAPSHOT,   /* /raft/snapshot */
	PEER_R_PROBING,    /* /raft/probing */
	PEER_R_MEMBERS,    /* /members */
	PEER_R_PROMOTE,    /* /members/promote/... */
	PEER_R_VERSION,    /* /version */
};

/* Headers a route sets before its checks, so that its error answers
 * carry them too. */
#define PEER_HDR_CLUSTER_ID 0x1u
#define PEER_HDR_SERVER_VERSION 0x2u

/* The bodies taken: a pipeline message as long as a stream frame, small
 * requests elsewhere; a snapshot's db file goes to disk as it comes. */
#define PEER_SMALL_BODY (64u * 1024)

/* A received db file made durable on a thread of its own: fdatasync of a
 * big file may take seconds, and the transport thread is raftd's loop,
 * which must go on with heartbeats and writes meanwhile. */
struct peer_snap_sync {
	struct peer *p;
	int fd;                   /* the db file, owned */
	bool done;                /* under peer.mu: fdatasync returned */
	int rc;                   /* under peer.mu once done: its result */
	bool orphan;              /* under peer.mu: the connection is gone;
				   * the thread frees this when done */
};

/* A snapshot being received (POST /raft/snapshot). */
struct peer_snap_recv {
	bool have_msg;
	struct raftmsg msg;       /* points into buf */
	uint8_t *buf;
	int fd;                   /* the db file being written */
	char *path;
	uint64_t bytes;
	uint64_t start_ns;
	struct peer_snap_sync *sync; /* once the file is whole: its fdatasync
				      * (fd moved there) */
};

static void peer_snap_sync_free(struct peer_snap_sync *y)
{
	close(y->fd);
	raftd_free(y);
}

void peer_snap_recv_free(struct peer_snap_recv *s)
{
	if (!s)
		return;
	if (s->sync) {
		struct peer *p = s->sync->p;
		bool done;
		pthread_mutex_lock(&p->mu);
		done = s->sync->done;
		s->sync->orphan = !done;
		pthread_mutex_unlock(&p->mu);
		if (done)
			peer_snap_sync_free(s->sync);
	}
	raftmsg_release(&s->msg);
	raftd_free(s->buf);
	if (s->fd >= 0)
		close(s->fd);
	if (s->path) {
		unlink(s->path);
		raftd_free(s->path);
	}
	raftd_free(s);
}

/* ---- answers ---- */

/* Writes an answer's head and body into c->out, as Go's server writes
 * one (the handler's headers sorted, then Date and Content-Length). */
void peer_serve_reply(struct peer_conn *c, int status, const char *ctype, const char *extra,
		      const void *body, size_t len)
{
	struct peer *p = c->p;
	char date[32];
	int rc;

	http_date(date);
	rc = peer_buf_printf(&c->out, "HTTP/1.1 %d %s\r\n%s", status,
			     http_status_text(status), extra ? extra : "");
	if (!rc && ctype)
		rc = peer_buf_printf(&c->out, "Content-Type: %s\r\n", ctype);
	if (!rc && ctype && !strncmp(ctype, "text/plain", 10) && status >= 400)
		rc = peer_buf_printf(&c->out, "X-Content-Type-Options: nosniff\r\n");
	if (!rc && (c->answer_headers & PEER_HDR_CLUSTER_ID))
		rc = peer_buf_printf(&c->out, "X-Etcd-Cluster-Id: %s\r\n", p->cid_str);
	if (!rc && (c->answer_headers & PEER_HDR_SERVER_VERSION))
		rc = peer_buf_printf(&c->out, "X-Server-Version: %s\r\n", p->server_version);
	if (!rc && c->close_after)
		rc = peer_buf_printf(&c->out, "Connection: close\r\n");
	if (!rc && status == 204)
		rc = peer_buf_printf(&c->out, "Date: %s\r\n\r\n", date);
	else if (!rc)
		rc = peer_buf_printf(&c->out, "Date: %s\r\nContent-Length: %zu\r\n\r\n", date, len);
	if (!rc && status != 204)
		rc = peer_buf_append(&c->out, body, len);
	if (rc) {
		log_warn("cannot answer a peer: out of memory", LOG_STR("remote-addr", c->addr));
		c->close_after = true;
	}
	c->state = PEER_ST_RESPOND;
}

/* Go's http.Error: the text and a line end, as plain text. */
static void peer_serve_error(struct peer_conn *c, int status, const char *text)
{
	char body[256];
	int n = snprintf(body, sizeof(body), "%s\n", text);
	const char *extra = NULL;

	if (status == 405) {
		extra = c->route == PEER_R_STREAM || c->route == PEER_R_MEMBERS ||
				c->route == PEER_R_VERSION ? "Allow: GET\r\n" : "Allow: POST\r\n";
	}
	peer_serve_reply(c, status, "text/plain; charset=utf-8", extra, body,
			 (size_t)n < sizeof(body) ? (size_t)n : sizeof(body) - 1);
}

/* Answers now and closes after it: the rest of the body is not read. */
static void peer_serve_refuse(struct peer_conn *c, int status, const char *text)
{
	c->close_after = true;
	peer_serve_error(c, status, text);
}

/* ---- etcd's checks ---- */

/* "major.minor[.patch...]" of a semver; false if it is not one. */
static bool peer_semver(struct http_str v, const char *dflt, unsigned *major,
			unsigned *minor)
{
	char text[64];
	int n;

	if (v.len == 0)
		snprintf(text, sizeof(text), "%s", dflt);
	else if (v.len < sizeof(text))
		snprintf(text, sizeof(text), "%.*s", (int)v.len, v.p);
	else
		return false;
	return sscanf(text, "%u.%u.%*u%n", major, minor, &n) == 2 && n > 0;
}

/* etcd's checkClusterCompatibilityFromHeader: NULL, or the text of the
 * 412 answer, logged with etcd's warning. */
static const char *peer_serve_compat(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct http_str name, sv, mcv, cid;
	unsigned rs_ma, rs_mi, rm_ma, rm_mi, ls_ma = 0, ls_mi = 0, lm_ma = 0, lm_mi = 0;
	bool ok;

	http_header(&c->head, "X-Server-From", &name);
	http_header(&c->head, "X-Server-Version", &sv);
	http_header(&c->head, "X-Min-Cluster-Version", &mcv);
	http_header(&c->head, "X-Etcd-Cluster-ID", &cid);
	peer_semver((struct http_str){ p->server_version, strlen(p->server_version) },
		    "", &ls_ma, &ls_mi);
	peer_semver((struct http_str){ p->min_cluster_version, strlen(p->min_cluster_version) },
		    "", &lm_ma, &lm_mi);
	ok = peer_semver(sv, "2.0.0", &rs_ma, &rs_mi) && peer_semver(mcv, "2.0.0", &rm_ma, &rm_mi);
	/* the remote's server version is not below this member's minimum
	 * cluster version, its minimum not above this member's version */
	ok = ok && !(rs_ma < lm_ma || (rs_ma == lm_ma && rs_mi < lm_mi));
	ok = ok && !(rm_ma > ls_ma || (rm_ma == ls_ma && rm_mi > ls_mi));
	if (!ok) {
		log_warn("failed to check version compatibility",
			 LOG_STR("local-member-id", p->self_str),
			 LOG_STR("local-member-cluster-id", p->cid_str),
			 LOG_STR("local-member-server-version", p->server_version),
			 LOG_STR("local-member-server-minimum-cluster-version", p->min_cluster_version),
			 LOG_BYTES("remote-peer-server-name", name.p, name.len),
			 LOG_BYTES("remote-peer-server-version", sv.p, sv.len),
			 LOG_BYTES("remote-peer-server-minimum-cluster-version", mcv.p, mcv.len));
		return "incompatible version";
	}
	if (!http_str_eq(cid, p->cid_str)) {
		log_warn("request cluster ID mismatch", LOG_STR("local-member-id", p->self_str),
			 LOG_STR("local-member-cluster-id", p->cid_str),
			 LOG_BYTES("remote-peer-server-name", name.p, name.len),
			 LOG_BYTES("remote-peer-server-version", sv.p, sv.len),
			 LOG_BYTES("remote-peer-cluster-id", cid.p, cid.len));
		return "cluster ID mismatch";
	}
	return NULL;
}

/* Go's types.IDFromString: hex, at most 16 digits. */
static bool peer_parse_id(struct http_str s, uint64_t *id)
{
	return s.len <= 16 && hex_parse_u64(s.p, s.len, id) == 0;
}

/* The stream handler's checks, in etcd's order. On success, c->stream
 * and c->req_from say which stream of which member. */
static void peer_serve_stream_head(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct http_str path = c->head.path, dir, base, to;
	const char *slash = path.p + path.len;
	struct peer_remote *r;
	bool removed;

	if (!http_str_eq(c->head.method, "GET")) {
		c->answer_status = 405;
		c->answer_text = "Method Not Allowed";
		return;
	}
	c->answer_headers = PEER_HDR_CLUSTER_ID | PEER_HDR_SERVER_VERSION;
	if ((c->answer_text = peer_serve_compat(c))) {
		c->answer_status = 412;
		return;
	}
	while (slash > path.p && slash[-1] != '/')
		slash--;
	dir = (struct http_str){ path.p, (size_t)(slash - path.p) - 1 };
	base = (struct http_str){ slash, (size_t)(path.p + path.len - slash) };
	if (http_str_eq(dir, "/raft/stream/msgapp")) {
		c->stream = PEER_STREAM_MSGAPP;
	} else if (http_str_eq(dir, "/raft/stream/message")) {
		c->stream = PEER_STREAM_MESSAGE;
	} else {
		log_debug("ignored unexpected streaming request path",
			  LOG_STR("local-member-id", p->self_str), LOG_BYTES("path", path.p, path.len));
		c->answer_status = 404;
		c->answer_text = "invalid path";
		return;
	}
	if (!peer_parse_id(base, &c->req_from)) {
		log_warn("failed to parse path into ID", LOG_STR("local-member-id", p->self_str),
			 LOG_BYTES("path", base.p, base.len));
		c->answer_status = 404;
		c->answer_text = "invalid from";
		return;
	}
	pthread_mutex_lock(&p->mu);
	removed = peer_is_removed(p, c->req_from);
	r = peer_remote_find(p, c->req_from);
	pthread_mutex_unlock(&p->mu);
	if (removed) {
		log_warn("rejected stream from remote peer because it was removed",
			 LOG_STR("local-member-id", p->self_str),
			 LOG_BYTES("remote-peer-id-from", base.p, base.len));
		c->answer_status = 410;
		c->answer_text = "removed member";
		return;
	}
	if (!r) {
		log_warn("failed to find remote peer in cluster", LOG_STR("local-member-id", p->self_str),
			 LOG_BYTES("remote-peer-id-from", base.p, base.len),
			 LOG_STR("cluster-id", p->cid_str));
		c->answer_status = 404;
		c->answer_text = "error sender not found";
		return;
	}
	http_header(&c->head, "X-Raft-To", &to);
	if (!http_str_eq(to, p->self_str)) {
		log_warn("ignored streaming request; ID mismatch", LOG_STR("local-member-id", p->self_str),
			 LOG_BYTES("remote-peer-id-header", to.p, to.len),
			 LOG_BYTES("remote-peer-id-from", base.p, base.len),
			 LOG_STR("cluster-id", p->cid_str));
		c->answer_status = 412;
		c->answer_text = "to field mismatch";
	}
}

/* Decides a request from its head: the route, an early answer if a check
 * fails, and how much body is taken. */
static void peer_serve_head(struct peer_conn *c)
{
	struct http_str path = c->head.path, m = c->head.method;
	uint64_t max = PEER_SMALL_BODY;

	c->answer_status = 0;
	c->answer_text = NULL;
	c->answer_headers = 0;
	c->close_after = c->head.close;
	if (http_str_eq(path, "/raft")) {
		c->route = PEER_R_PIPELINE;
		max = MSGFRAME_STREAM_MAX;
	} else if (path.len > 13 && !memcmp(path.p, "/raft/stream/", 13)) {
		c->route = PEER_R_STREAM;
	} else if (http_str_eq(path, "/raft/snapshot")) {
		c->route = PEER_R_SNAPSHOT;
		max = MSGFRAME_STREAM_MAX + MSGFRAME_LEN_BYTES + PEER_READ_CHUNK;
	} else if (http_str_eq(path, "/raft/probing")) {
		c->route = PEER_R_PROBING;
	} else if (http_str_eq(path, "/members")) {
		c->route = PEER_R_MEMBERS;
	} else if (path.len > 17 && !memcmp(path.p, "/members/promote/", 17)) {
		c->route = PEER_R_PROMOTE;
	} else if (http_str_eq(path, "/version")) {
		c->route = PEER_R_VERSION;
	} else {
		c->route = PEER_R_NOT_FOUND;
	}
	switch (c->route) {
	case PEER_R_PIPELINE:
	case PEER_R_SNAPSHOT:
		if (!http_str_eq(m, "POST")) {
			c->answer_status = 405;
			c->answer_text = "Method Not Allowed";
			break;
		}
		c->answer_headers = PEER_HDR_CLUSTER_ID;
		if ((c->answer_text = peer_serve_compat(c)))
			c->answer_status = 412;
		break;
	case PEER_R_STREAM:
		peer_serve_stream_head(c);
		break;
	case PEER_R_MEMBERS:
	case PEER_R_VERSION:
		if (!http_str_eq(m, "GET")) {
			c->answer_status = 405;
			c->answer_text = "Method Not Allowed";
		}
		break;
	case PEER_R_PROMOTE:
		if (!http_str_eq(m, "POST")) {
			c->answer_status = 405;
			c->answer_text = "Method Not Allowed";
		} else {
			c->answer_headers = PEER_HDR_CLUSTER_ID;
		}
		break;
	default:
		break;
	}
	if (c->route == PEER_R_STREAM && c->answer_status)
		atomic_fetch_add(&c->p->stream_refusals, 1);
	/* a refused request's body is read only when it is small */
	if (c->answer_status)
		max = PEER_SMALL_BODY;
	peer_buf_consume(&c->in, c->head.head_len);
	memset(&c->head.headers, 0, sizeof(c->head.headers));
	c->head.n_headers = 0;
	peer_conn_body_begin(c, false, max);
	c->state = PEER_ST_BODY;
	c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
}

/* ---- handlers ---- */

/* Hands a message to the loop thread unless its sender was removed
 * (etcd's EtcdServer.Process); false if it was. Takes m and buf. */
static bool peer_serve_deliver(struct peer *p, struct raftmsg *m, uint8_t *buf, char *snap_path)
{
	struct peer_event ev = { .kind = PEER_EV_MESSAGE, .id = m->from, .msg = *m, .buf = buf,
				 .snap_db_path = snap_path };
	char from[17];

	memset(m, 0, sizeof(*m));
	pthread_mutex_lock(&p->mu);
	if (peer_is_removed(p, ev.msg.from)) {
		pthread_mutex_unlock(&p->mu);
		snprintf(from, sizeof(from), "%" PRIx64, ev.msg.from);
		log_warn("rejected Raft message from removed member",
			 LOG_STR("local-member-id", p->self_str), LOG_STR("removed-member-id", from));
		peer_event_release(&ev);
		return false;
	}
	peer_emit_locked(p, &ev);
	pthread_mutex_unlock(&p->mu);
	return true;
}

static const char peer_removed_json[] = "{\"message\":\"cannot process message from removed member\"}";

static void peer_serve_pipeline(struct peer_conn *c)
{
	struct peer *p = c->p;
	size_t n = peer_buf_size(&c->body);
	uint8_t *buf = raftd_malloc(n ? n : 1);
	struct raftmsg m;
	int rc;

	if (!buf) {
		peer_serve_refuse(c, 500, "error processing raft message");
		return;
	}
	memcpy(buf, peer_buf_data(&c->body), n);
	rc = raftmsg_decode(buf, n, &m);
	if (rc) {
		log_warn("failed to unmarshal Raft message", LOG_STR("local-member-id", p->self_str),
			 LOG_ERRNO(rc));
		raftd_free(buf);
		peer_serve_error(c, 400, "error unmarshalling raft message");
		return;
	}
	if (!peer_serve_deliver(p, &m, buf, NULL)) {
		peer_serve_reply(c, 403, "application/json", NULL, peer_removed_json,
				 sizeof(peer_removed_json) - 1);
		return;
	}
	peer_serve_reply(c, 204, NULL, NULL, NULL, 0);
}

static void peer_serve_stream(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct peer_remote *r;
	char date[32];

	pthread_mutex_lock(&p->mu);
	r = peer_remote_find(p, c->req_from);
	pthread_mutex_unlock(&p->mu);
	if (!r) {
		peer_serve_error(c, 404, "error sender not found");
		return;
	}
	http_date(date);
	if (peer_buf_printf(&c->out,
			    "HTTP/1.1 200 OK\r\nX-Etcd-Cluster-Id: %s\r\nX-Server-Version: %s\r\n"
			    "Date: %s\r\nTransfer-Encoding: chunked\r\n\r\n",
			    p->cid_str, p->server_version, date)) {
		peer_conn_close(c);
		return;
	}
	peer_writer_attach(p, r, c->stream, c);
}

/* Go's time.Time in JSON: RFC 3339 with nanoseconds, trailing zeros cut,
 * in local time. */
static void peer_json_now(char *out, size_t cap)
{
	struct timespec ts;
	struct tm tm;
	char frac[16], zone[40];
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	snprintf(frac, sizeof(frac), ".%09ld", ts.tv_nsec);
	for (n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
		frac[n - 1] = '\0';
	if (n == 1)
		frac[0] = '\0';
	if (tm.tm_gmtoff == 0)
		strcpy(zone, "Z");
	else
		snprintf(zone, sizeof(zone), "%c%02ld:%02ld", tm.tm_gmtoff < 0 ? '-' : '+',
			 labs(tm.tm_gmtoff) / 3600, labs(tm.tm_gmtoff) % 3600 / 60);
	n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, "%s%s", frac, zone);
}

static void peer_serve_small(struct peer_conn *c)
{
	struct peer *p = c->p;
	char body[160];
	int n;

	switch (c->route) {
	case PEER_R_PROBING: {
		char now[64];
		peer_json_now(now, sizeof(now));
		n = snprintf(body, sizeof(body), "{\"OK\":true,\"Now\":\"%s\"}\n", now);
		peer_serve_reply(c, 200, "text/plain; charset=utf-8", NULL, body, (size_t)n);
		break;
	}
	case PEER_R_VERSION:
		pthread_mutex_lock(&p->mu);
		n = snprintf(body, sizeof(body), "{\"etcdserver\":\"%s\",\"etcdcluster\":\"%s\"}",
			     p->server_version, p->cluster_version);
		pthread_mutex_unlock(&p->mu);
		peer_serve_reply(c, 200, "application/json", NULL, body, (size_t)n);
		break;
	case PEER_R_MEMBERS: {
		struct peer_buf json = { 0 };
		int rc;
		c->answer_headers = PEER_HDR_CLUSTER_ID;
		pthread_mutex_lock(&p->mu);
		rc = p->members_json ? peer_buf_append(&json, p->members_json, p->members_json_len) :
				       peer_buf_append(&json, "[]", 2);
		pthread_mutex_unlock(&p->mu);
		/* json.Encoder ends the value with a line end */
		if (!rc && (!peer_buf_size(&json) || json.p[json.len - 1] != '\n'))
			rc = peer_buf_append(&json, "\n", 1);
		if (rc)
			peer_serve_refuse(c, 500, "Internal Server Error");
		else
			peer_serve_reply(c, 200, "application/json", NULL, peer_buf_data(&json),
					 peer_buf_size(&json));
		peer_buf_free(&json);
		break;
	}
	case PEER_R_PROMOTE:
		peer_promote_serve(c);
		break;
	default:
		peer_serve_error(c, 404, "404 page not found");
		break;
	}
}

/* ---- snapshots ---- */

/* The snapshot's message once its frame is in; then the db file's bytes
 * go to a temp file in the snap dir as they come. 0 to go on; otherwise
 * the request was answered. */
static int peer_serve_snap_body(struct peer_conn *c, bool whole)
{
	struct peer *p = c->p;
	struct peer_snap_recv *s = c->snap_in;
	char text[320];

	if (!s) {
		struct raftmsg m;
		size_t flen;
		int rc = msgframe_decode(peer_buf_data(&c->body), peer_buf_size(&c->body),
					 MSGFRAME_STREAM_MAX, &m, &flen);
		if (rc == -EAGAIN && !whole)
			return 0;
		if (rc) {
			snprintf(text, sizeof(text), "failed to decode raft message (%s)",
				 rc == -EAGAIN ? "unexpected EOF" : strerror(-rc));
			log_warn("failed to decode Raft message", LOG_STR("local-member-id", p->self_str),
				 LOG_ERRNO(rc == -EAGAIN ? -EPIPE : rc));
			peer_serve_refuse(c, 400, text);
			return 1;
		}
		int32_t type = m.type;
		raftmsg_release(&m);
		if (type != RAFT_MSG_SNAP) {
			log_warn("unexpected Raft message type", LOG_STR("local-member-id", p->self_str),
				 LOG_I64("message-type", type));
			peer_serve_refuse(c, 400, "wrong raft message type");
			return 1;
		}
		if (!p->snap_dir[0]) {
			peer_serve_refuse(c, 500,
					  "failed to save KV snapshot (this member takes no snapshots)");
			return 1;
		}
		s = raftd_calloc(1, sizeof(*s));
		if (s) {
			s->fd = -1;
			s->buf = raftd_malloc(flen - MSGFRAME_LEN_BYTES + 1);
		}
		if (!s || !s->buf ||
		    (memcpy(s->buf, peer_buf_data(&c->body) + MSGFRAME_LEN_BYTES,
			    flen - MSGFRAME_LEN_BYTES),
		     raftmsg_decode(s->buf, flen - MSGFRAME_LEN_BYTES, &s->msg))) {
			peer_snap_recv_free(s);
			peer_serve_refuse(c, 500, "failed to save KV snapshot (out of memory)");
			return 1;
		}
		c->snap_in = s;
		peer_buf_consume(&c->body, flen);
		s->start_ns = clock_now_ns();
		snprintf(text, sizeof(text), "%s/%016" PRIx64 ".snap.db.tmp.XXXXXX", p->snap_dir,
			 s->msg.snapshot.index);
		s->path = raftd_malloc(strlen(text) + 1);
		if (s->path) {
			strcpy(s->path, text);
			s->fd = mkostemp(s->path, O_CLOEXEC);
		}
		if (s->fd < 0) {
			int rc2 = s->path ? -errno : -ENOMEM;
			raftd_free(s->path);
			s->path = NULL;
			snprintf(text, sizeof(text), "failed to save KV snapshot (%s)", strerror(-rc2));
			log_warn("failed to save incoming database snapshot",
				 LOG_STR("local-member-id", p->self_str), LOG_ERRNO(rc2));
			peer_serve_refuse(c, 500, text);
			return 1;
		}
		log_info("receiving database snapshot", LOG_STR("local-member-id", p->self_str),
			 LOG_U64("incoming-snapshot-index", s->msg.snapshot.index),
			 LOG_U64("incoming-snapshot-message-size-bytes", flen - MSGFRAME_LEN_BYTES));
	}
	while (peer_buf_size(&c->body)) {
		ssize_t w = write(s->fd, peer_buf_data(&c->body), peer_buf_size(&c->body));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int rc = w < 0 ? -errno : -EIO;
			snprintf(text, sizeof(text), "failed to save KV snapshot (%s)", strerror(-rc));
			log_warn("failed to save incoming database snapshot",
				 LOG_STR("local-member-id", p->self_str), LOG_ERRNO(rc));
			peer_serve_refuse(c, 500, text);
			return 1;
		}
		s->bytes += (uint64_t)w;
		peer_buf_consume(&c->body, (size_t)w);
	}
	return 0;
}

static void *peer_snap_sync_main(void *arg)
{
	struct peer_snap_sync *y = arg;
	struct peer *p = y->p;
	int rc = fdatasync(y->fd) < 0 ? -errno : 0;

	pthread_mutex_lock(&p->mu);
	y->done = true;
	y->rc = rc;
	if (y->orphan) {
		peer_snap_sync_free(y);
	} else {
		p->snap_synced = true;
		peer_wake_locked(p);
	}
	if (--p->snap_syncs == 0)
		pthread_cond_broadcast(&p->snap_synced_cond);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* The whole snapshot is in: its db file is made durable on a thread, and
 * the connection waits for it (peer_serve_snap_synced). */
static void peer_serve_snap_done(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct peer_snap_recv *s = c->snap_in;
	struct peer_snap_sync *y = raftd_calloc(1, sizeof(*y));
	pthread_t t;
	int rc;

	if (!y) {
		peer_serve_refuse(c, 500, "failed to save KV snapshot (out of memory)");
		return;
	}
	y->p = p;
	y->fd = s->fd;
	pthread_mutex_lock(&p->mu);
	p->snap_syncs++;
	pthread_mutex_unlock(&p->mu);
	rc = shm_thread_start(&t, true, peer_snap_sync_main, y);
	if (rc) {
		pthread_mutex_lock(&p->mu);
		p->snap_syncs--;
		pthread_mutex_unlock(&p->mu);
		raftd_free(y);
		log_warn("failed to save incoming database snapshot",
			 LOG_STR("local-member-id", p->self_str), LOG_ERRNO(rc));
		peer_serve_refuse(c, 500, "failed to save KV snapshot (cannot start a thread)");
		return;
	}
	s->fd = -1;
	s->sync = y;
	c->state = PEER_ST_SYNC;
	c->deadline_ns = 0; /* as long as the disk takes */
}

/* c's db file is durable (or failed to be): the snapshot is handed over
 * and answered. */
static void peer_serve_snap_answer(struct peer_conn *c, int sync_rc)
{
	struct peer *p = c->p;
	struct peer_snap_recv *s = c->snap_in;
	char *path;

	if (sync_rc) {
		log_warn("failed to save incoming database snapshot",
			 LOG_STR("local-member-id", p->self_str), LOG_ERRNO(sync_rc));
		peer_serve_refuse(c, 500, "failed to save KV snapshot (fsync failed)");
		return;
	}
	log_info("received and saved database snapshot", LOG_STR("local-member-id", p->self_str),
		 LOG_U64("incoming-snapshot-index", s->msg.snapshot.index),
		 LOG_U64("incoming-snapshot-size-bytes", s->bytes),
		 LOG_U64("download-took-ms", (clock_now_ns() - s->start_ns) / 1000000));
	path = s->path;
	s->path = NULL;
	if (!peer_serve_deliver(p, &s->msg, s->buf, path)) {
		s->buf = NULL;
		peer_serve_reply(c, 403, "application/json", NULL, peer_removed_json,
				 sizeof(peer_removed_json) - 1);
		return;
	}
	s->buf = NULL;
	peer_serve_reply(c, 204, NULL, NULL, NULL, 0);
}

void peer_serve_snap_synced(struct peer *p)
{
	for (struct peer_conn *c = p->conns; c; c = c->next) {
		struct peer_snap_sync *y;
		bool done;
		int rc;
		if (c->state != PEER_ST_SYNC)
			continue;
		y = c->snap_in->sync;
		pthread_mutex_lock(&p->mu);
		done = y->done;
		rc = y->rc;
		pthread_mutex_unlock(&p->mu);
		if (!done)
			continue;
		c->snap_in->sync = NULL;
		peer_snap_sync_free(y);
		c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
		peer_serve_snap_answer(c, rc);
		/* written out, then closed or ready for the next request */
		peer_serve_input(c);
	}
}

void peer_serve_snap_wait(struct peer *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->snap_syncs)
		pthread_cond_wait(&p->snap_synced_cond, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

/* A request is whole: answer it. */
static void peer_serve_request(struct peer_conn *c)
{
	if (c->answer_status) {
		peer_serve_error(c, c->answer_status, c->answer_text);
		return;
	}
	switch (c->route) {
	case PEER_R_PIPELINE:
		peer_serve_pipeline(c);
		break;
	case PEER_R_STREAM:
		peer_serve_stream(c);
		break;
	case PEER_R_SNAPSHOT:
		if (c->state == PEER_ST_BODY && !peer_serve_snap_body(c, true))
			peer_serve_snap_done(c);
		break;
	default:
		peer_serve_small(c);
		break;
	}
}

void peer_serve_input(struct peer_conn *c)
{
	struct peer *p = c->p;
	int rc;

	for (;;) {
		switch (c->state) {
		case PEER_ST_REQUEST:
			if (!peer_buf_size(&c->in) || peer_grpc_sniff(c))
				return;
			rc = http_parse_request((const char *)peer_buf_data(&c->in),
						peer_buf_size(&c->in), HTTP_MAX_HEAD,
						HTTP_SKIP_BLANK | HTTP_ORIGIN_FORM, &c->head);
			if (rc == -EAGAIN)
				return;
			if (rc) {
				log_warn("refused a malformed HTTP request from a peer",
					 LOG_STR("local-member-id", p->self_str),
					 LOG_STR("remote-addr", c->addr), LOG_ERRNO(rc));
				c->route = PEER_R_NOT_FOUND;
				c->answer_headers = 0;
				if (rc == -EMSGSIZE)
					peer_serve_refuse(c, 431, "431 Request Header Fields Too Large");
				else
					peer_serve_refuse(c, 400, "400 Bad Request");
				break;
			}
			if (peer_grpc_route(c))
				return;
			peer_serve_head(c);
			break;
		case PEER_ST_BODY:
			rc = peer_conn_pull_body(c);
			if (rc == -EMSGSIZE && c->answer_status) {
				/* a refused request's big body is not read */
				peer_serve_refuse(c, c->answer_status, c->answer_text);
				break;
			}
			if (rc < 0) {
				log_warn("refused the body of a peer's request",
					 LOG_STR("local-member-id", p->self_str),
					 LOG_STR("remote-addr", c->addr), LOG_ERRNO(rc));
				if (rc == -EMSGSIZE)
					peer_serve_refuse(c, 413, "request body too large");
				else
					peer_serve_refuse(c, 400, "error reading raft message");
				break;
			}
			if (c->route == PEER_R_SNAPSHOT && !c->answer_status && rc == 0 &&
			    peer_serve_snap_body(c, false))
				break;
			if (rc == 0)
				return;
			peer_serve_request(c);
			break;
		case PEER_ST_RESPOND:
			if (peer_conn_flush(c) || peer_buf_size(&c->out))
				return;
			if (c->close_after) {
				peer_conn_close(c);
				return;
			}
			c->state = PEER_ST_REQUEST;
			c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
			break;
		case PEER_ST_STREAM_OUT:
			/* a stream's client sends nothing more; what comes is
			 * dropped, its end ends the stream */
			peer_buf_consume(&c->in, peer_buf_size(&c->in));
			if (peer_buf_size(&c->out))
				peer_conn_flush(c);
			return;
		default:
			return;
		}
	}
}

void peer_serve_written(struct peer_conn *c)
{
	peer_serve_input(c);
}
