/*
 * The sending side of the peer transport, as etcd 3.4's rafthttp peer
 * does it: the two stream readers this member dials to each peer
 * (GET /raft/stream/{msgapp,message}/<self>, redialed 100 ms after a
 * failure), the stream writers on the streams peers dialed here (queued
 * frames and link heartbeats), pipeline posts (POST /raft, up to four at
 * once) and snapshot sends (POST /raft/snapshot).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "stored/btree/dbsnap.h"
#include "raftd/peer/msgframe.h"
#include "raftd/peer/peer_int.h"
#include "raftd/raft/raft.h"
#include "base/log/log.h"

/* Bytes of the db file read into a snapshot connection at a time. */
#define PEER_SNAP_CHUNK (256u * 1024)
/* How long a snapshot's receiver may take to answer once it has the
 * body: it writes and syncs the whole file first. */
#define PEER_SNAP_ANSWER_NS (60ull * 1000 * 1000 * 1000)
/* The most of an error answer's body read (its text is all it says). */
#define PEER_SMALL_ANSWER (64u * 1024)

/* A snapshot to send (peer_send_snapshot). */
struct peer_snap_send {
	struct peer_snap_send *next;
	uint64_t to;
	uint64_t index;
	uint8_t *frame;          /* the MsgSnap's frame */
	size_t frame_len;
	char *path;              /* the db file */
	int fd;
	struct dbsnap *ds;       /* or a consistent copy of stored's db */
	uint64_t size;
	uint64_t sent;           /* file bytes put into the connection */
	uint64_t start_ns;
};

void peer_snap_send_free(struct peer_snap_send *s)
{
	while (s) {
		struct peer_snap_send *next = s->next;
		if (s->fd >= 0)
			close(s->fd);
		dbsnap_close(s->ds);
		raftd_free(s->frame);
		raftd_free(s->path);
		raftd_free(s);
		s = next;
	}
}

const char *peer_stream_name(enum peer_stream s)
{
	return s == PEER_STREAM_MSGAPP ? "stream MsgApp v2" : "stream Message";
}

static const char *peer_stream_path(enum peer_stream s)
{
	return s == PEER_STREAM_MSGAPP ? "/raft/stream/msgapp" : "/raft/stream/message";
}

/* The URL of r in use (etcd's urlPicker), parsed. */
static int peer_pick_url(struct peer *p, struct peer_remote *r, struct peer_url *u)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&p->mu);
	if (r->n_urls)
		rc = peer_url_parse(r->urls[r->url_pick % r->n_urls], u);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* A stream reader's dial to r failed with err. Once every one of r's URLs
 * refused a connection since its last stream came up, nothing listens
 * for it any more: its process is gone, not merely slow or cut off (a
 * partition or a stopped process makes a dial time out instead), and
 * PEER_EV_DOWN says so, once until a stream comes up again. Call before
 * url_pick moves on. */
static void peer_client_dial_failed(struct peer *p, struct peer_remote *r, int err)
{
	size_t n;

	if (err != -ECONNREFUSED && err != -ENOENT)
		return;
	pthread_mutex_lock(&p->mu);
	n = r->n_urls;
	pthread_mutex_unlock(&p->mu);
	if (!n)
		return;
	r->refused |= 1ull << (r->url_pick % n % 64);
	uint64_t all = n >= 64 ? ~0ull : (1ull << n) - 1;
	if (r->refused != all || r->down_told)
		return;
	r->down_told = true;
	peer_emit_simple(p, PEER_EV_DOWN, r->id, false);
}

/* A request head as Go's client writes one, with rafthttp's headers. */
static int peer_client_head(struct peer *p, struct peer_conn *c, const struct peer_url *u,
			    const char *method, const char *path, const char *to,
			    const char *ctype, int64_t length)
{
	int rc = peer_buf_printf(&c->out, "%s %s HTTP/1.1\r\nHost: %s%s%s%s%s\r\n"
				 "User-Agent: Go-http-client/1.1\r\n",
				 method, path, strchr(u->host, ':') && !u->unix_socket ? "[" : "",
				 u->host, strchr(u->host, ':') && !u->unix_socket ? "]" : "",
				 u->unix_socket ? "" : ":", u->unix_socket ? "" : u->port);

	if (!rc && length >= 0)
		rc = peer_buf_printf(&c->out, "Content-Length: %" PRId64 "\r\n", length);
	if (!rc && ctype)
		rc = peer_buf_printf(&c->out, "Content-Type: %s\r\n", ctype);
	if (!rc)
		rc = peer_buf_printf(&c->out, "X-Etcd-Cluster-Id: %s\r\nX-Min-Cluster-Version: %s\r\n",
				     p->cid_str, p->min_cluster_version);
	if (!rc && p->peer_urls_hdr[0])
		rc = peer_buf_printf(&c->out, "X-Peerurls: %s\r\n", p->peer_urls_hdr);
	if (!rc && to)
		rc = peer_buf_printf(&c->out, "X-Raft-To: %s\r\n", to);
	if (!rc)
		rc = peer_buf_printf(&c->out, "X-Server-From: %s\r\nX-Server-Version: %s\r\n\r\n",
				     p->self_str, p->server_version);
	return rc;
}

/* ---- reporting ---- */

/* Why a dialed connection failed, for logs and peerStatus. */
static void peer_client_reason(const struct peer_conn *c, int err, char *out, size_t cap)
{
	if (c->status > 0)
		snprintf(out, cap, "unexpected http status %d %s", c->status,
			 http_status_text(c->status));
	else
		snprintf(out, cap, "%s", strerror(err < 0 ? -err : ECONNRESET));
}

static void peer_report_removed(struct peer *p, uint64_t by)
{
	char id[17];

	snprintf(id, sizeof(id), "%" PRIx64, by);
	if (p->removed_reported) {
		log_debug("the member has been permanently removed from the cluster",
			  LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", id));
		return;
	}
	log_error("the member has been permanently removed from the cluster",
		  LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", id));
	p->removed_reported = true;
	peer_emit_simple(p, PEER_EV_REMOVED, by, false);
}

/* A 412 answer's text, as etcd's dialers tell them apart. */
static void peer_client_precondition(struct peer_conn *c)
{
	struct peer *p = c->p;
	size_t n = peer_buf_size(&c->body);
	const char *b = (const char *)peer_buf_data(&c->body);

	if (n && b[n - 1] == '\n')
		n--;
	if (n == 20 && !memcmp(b, "incompatible version", 20))
		log_warn("request sent was ignored by remote peer due to server version incompatibility",
			 LOG_STR("local-member-id", p->self_str),
			 LOG_STR("remote-peer-id", c->remote->idstr));
	else if (n == 19 && !memcmp(b, "cluster ID mismatch", 19))
		log_warn("request sent was ignored by remote peer due to cluster ID mismatch",
			 LOG_STR("remote-peer-id", c->remote->idstr),
			 LOG_STR("local-member-id", p->self_str),
			 LOG_STR("local-member-cluster-id", p->cid_str));
	else
		log_warn("unhandled error when precondition failed",
			 LOG_STR("remote-peer-id", c->remote->idstr), LOG_BYTES("error", b, n));
}

/* A response to a dialed request is whole: judge it and close. */
static void peer_client_done(struct peer_conn *c)
{
	struct peer *p = c->p;

	switch (c->status) {
	case 204:
		c->done_ok = c->kind != PEER_CONN_READER;
		break;
	case 410:
		if (c->kind == PEER_CONN_READER)
			peer_report_removed(p, c->remote->id);
		break;
	case 403:
		if (c->kind != PEER_CONN_READER)
			peer_report_removed(p, c->remote->id);
		break;
	case 404:
		if (c->kind == PEER_CONN_READER)
			log_debug("peer failed to find local node", LOG_STR("remote-peer-id", c->remote->idstr),
				  LOG_STR("local-member-id", p->self_str));
		break;
	case 412:
		peer_client_precondition(c);
		break;
	default:
		break;
	}
	peer_conn_close(c);
}

void peer_client_closed(struct peer_conn *c, int err)
{
	struct peer *p = c->p;
	struct peer_remote *r = c->remote;
	char reason[128];
	uint64_t to = c->kind == PEER_CONN_SNAP ? c->snap_out->to : c->post_to;

	if (!r)
		return;
	peer_client_reason(c, err, reason, sizeof(reason));
	switch (c->kind) {
	case PEER_CONN_READER:
		if (r->reader[c->stream] == c)
			r->reader[c->stream] = NULL;
		r->next_dial_ns[c->stream] = clock_now_ns() + PEER_REDIAL_NS;
		if (p->closing)
			return;
		if (c->state == PEER_ST_STREAM_IN) {
			/* dialed again at once: a refusal tells a crash apart
			 * from a peer that closed the stream */
			r->next_dial_ns[c->stream] = clock_now_ns();
			log_warn("lost TCP streaming connection with remote peer",
				 LOG_STR("stream-reader-type", peer_stream_name(c->stream)),
				 LOG_STR("local-member-id", p->self_str),
				 LOG_STR("remote-peer-id", r->idstr), LOG_STR("error", reason));
			if (err != -ECONNRESET)
				peer_status_deactivate(p, r, peer_stream_name(c->stream), "read", reason);
		} else {
			peer_client_dial_failed(p, r, err);
			r->url_pick++;
			peer_status_deactivate(p, r, peer_stream_name(c->stream), "dial", reason);
		}
		break;
	case PEER_CONN_POST:
		r->n_posts--;
		if (p->closing)
			return;
		if (c->done_ok) {
			peer_status_activate(p, r);
		} else {
			r->url_pick++;
			peer_status_deactivate(p, r, "pipeline", "write", reason);
			peer_emit_simple(p, PEER_EV_UNREACHABLE, to, false);
		}
		if (c->post_type == RAFT_MSG_SNAP)
			peer_emit_simple(p, PEER_EV_SNAPSHOT_DONE, to, c->done_ok);
		break;
	case PEER_CONN_SNAP:
		if (p->closing)
			return;
		if (c->done_ok) {
			log_info("sent database snapshot", LOG_STR("snapshot-receiver-id", r->idstr),
				 LOG_U64("snapshot-index", c->snap_out->index),
				 LOG_U64("snapshot-size-bytes", c->snap_out->size));
			peer_status_activate(p, r);
		} else {
			log_warn("failed to send database snapshot", LOG_STR("snapshot-receiver-id", r->idstr),
				 LOG_U64("snapshot-index", c->snap_out->index), LOG_STR("error", reason));
			r->url_pick++;
			peer_status_deactivate(p, r, "sendMsgSnap", "post", reason);
			peer_emit_simple(p, PEER_EV_UNREACHABLE, to, false);
		}
		peer_emit_simple(p, PEER_EV_SNAPSHOT_DONE, to, c->done_ok);
		break;
	default:
		break;
	}
}

/* ---- dialing ---- */

static void peer_client_dial_reader(struct peer *p, struct peer_remote *r, enum peer_stream s)
{
	struct peer_url u;
	struct peer_conn *c;
	char path[64];
	int rc = peer_pick_url(p, r, &u);

	if (!rc)
		rc = peer_conn_dial(p, &u, PEER_CONN_READER, r, &c);
	if (!rc) {
		c->stream = s;
		snprintf(path, sizeof(path), "%s/%s", peer_stream_path(s), p->self_str);
		rc = peer_client_head(p, c, &u, "GET", path, r->idstr, NULL, -1);
		if (rc) {
			c->status = rc;
			peer_conn_close(c);
			return;
		}
		r->reader[s] = c;
		return;
	}
	r->next_dial_ns[s] = clock_now_ns() + PEER_REDIAL_NS;
	if (rc == -EAGAIN)
		return; /* its host name is being looked up: not a failure */
	peer_client_dial_failed(p, r, rc);
	r->url_pick++;
	peer_status_deactivate(p, r, peer_stream_name(s), "dial", strerror(-rc));
}

/* Starts a POST /raft of m to r; reports it unreachable if it cannot. */
static void peer_client_post(struct peer *p, struct peer_remote *r, struct peer_qmsg *m)
{
	struct peer_url u;
	struct peer_conn *c = NULL;
	int rc = peer_pick_url(p, r, &u);

	if (!rc)
		rc = peer_conn_dial(p, &u, PEER_CONN_POST, r, &c);
	if (!rc) {
		c->post_type = m->type;
		c->post_to = m->to;
		r->n_posts++;
		rc = peer_client_head(p, c, &u, "POST", "/raft", NULL, "application/protobuf",
				      (int64_t)m->len);
		if (!rc)
			rc = peer_buf_append(&c->out, m->data, m->len);
		if (rc) {
			c->status = rc;
			peer_conn_close(c);
		}
		raftd_free(m);
		return;
	}
	r->url_pick++;
	peer_status_deactivate(p, r, "pipeline", "write", strerror(-rc));
	peer_emit_simple(p, PEER_EV_UNREACHABLE, m->to, false);
	if (m->type == RAFT_MSG_SNAP)
		peer_emit_simple(p, PEER_EV_SNAPSHOT_DONE, m->to, false);
	raftd_free(m);
}

int peer_client_request(struct peer_conn *c)
{
	c->state = PEER_ST_SEND;
	c->deadline_ns = clock_now_ns() + PEER_IO_TIMEOUT_NS;
	if (peer_conn_flush(c))
		return -EPIPE;
	if (!peer_buf_size(&c->out))
		peer_client_written(c);
	return c->state == PEER_ST_CLOSED ? -EPIPE : 0;
}

/* Moves more of a snapshot's db file into its connection. */
static int peer_snap_refill(struct peer_conn *c)
{
	struct peer_snap_send *s = c->snap_out;

	while (s->sent < s->size && peer_buf_size(&c->out) < PEER_SNAP_CHUNK) {
		size_t want = PEER_SNAP_CHUNK;
		ssize_t n;
		int rc;

		if (want > s->size - s->sent)
			want = (size_t)(s->size - s->sent);
		rc = peer_buf_reserve(&c->out, want);
		if (rc)
			return rc;
		n = s->ds ? dbsnap_read(s->ds, c->out.p + c->out.len, want) :
			    pread(s->fd, c->out.p + c->out.len, want, (off_t)s->sent);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO; /* the file shrank under us */
		c->out.len += (size_t)n;
		s->sent += (uint64_t)n;
	}
	return 0;
}

void peer_client_written(struct peer_conn *c)
{
	if (c->state != PEER_ST_SEND)
		return;
	while (c->kind == PEER_CONN_SNAP && c->snap_out->sent < c->snap_out->size) {
		int rc = peer_snap_refill(c);
		if (rc) {
			log_warn("cannot read the snapshot's db file", LOG_STR("path", c->snap_out->path),
				 LOG_ERRNO(rc));
			c->status = rc;
			peer_conn_close(c);
			return;
		}
		if (peer_conn_flush(c) || peer_buf_size(&c->out))
			return;
	}
	if (peer_buf_size(&c->out))
		return;
	c->state = PEER_ST_RESPONSE;
	c->deadline_ns = clock_now_ns() +
			 (c->kind == PEER_CONN_SNAP ? PEER_SNAP_ANSWER_NS : PEER_IO_TIMEOUT_NS);
	peer_conn_arm(c);
}

/* ---- streams read ---- */

/* Copies a decoded message's bytes out of the stream buffer so that it
 * lives on its own (the buffer is reused), and hands it over. */
static int peer_stream_deliver(struct peer *p, struct peer_remote *r, struct raftmsg *m,
			       const uint8_t *frame, size_t len)
{
	uint8_t *buf = raftd_malloc(len ? len : 1);
	struct peer_event ev = { .kind = PEER_EV_MESSAGE };

	if (!buf) {
		raftmsg_release(m);
		return -ENOMEM;
	}
	memcpy(buf, frame, len);
	/* every bytes field points into the frame: move it to the copy */
	for (size_t i = 0; i < m->n_entries; i++)
		if (m->entries[i].data)
			m->entries[i].data = buf + (m->entries[i].data - frame);
	if (m->snapshot.data)
		m->snapshot.data = buf + (m->snapshot.data - frame);
	if (m->context)
		m->context = buf + (m->context - frame);
	ev.id = r->id;
	ev.msg = *m;
	ev.buf = buf;
	memset(m, 0, sizeof(*m));
	pthread_mutex_lock(&p->mu);
	if (peer_is_removed(p, ev.msg.from)) {
		pthread_mutex_unlock(&p->mu);
		log_warn("rejected Raft message from removed member",
			 LOG_STR("local-member-id", p->self_str), LOG_STR("removed-member-id", r->idstr));
		peer_event_release(&ev);
		return 0;
	}
	peer_emit_locked(p, &ev);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Takes the whole frames the stream's body holds. 0, or the error that
 * ends the stream. */
static int peer_stream_frames(struct peer_conn *c)
{
	for (;;) {
		const uint8_t *d = peer_buf_data(&c->body);
		size_t n = peer_buf_size(&c->body), flen;
		struct raftmsg m;
		int rc;

		if (!n)
			return 0;
		if (c->stream == PEER_STREAM_MSGAPP)
			rc = msgappv2_decode(&c->dec, d, n, &m, &flen);
		else
			rc = msgframe_decode(d, n, MSGFRAME_STREAM_MAX, &m, &flen);
		if (rc == -EAGAIN) {
			/* room for the rest of the frame, read in big steps */
			return peer_buf_reserve(&c->body, flen - n);
		}
		if (rc)
			return rc;
		if (msgframe_is_link_heartbeat(&m))
			raftmsg_release(&m);
		else if ((rc = peer_stream_deliver(c->p, c->remote, &m, d, flen)))
			return rc;
		peer_buf_consume(&c->body, flen);
	}
}

/* A stream reader's response said 200: the stream is up. */
static void peer_stream_established(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct peer_remote *r = c->remote;

	c->state = PEER_ST_STREAM_IN;
	r->refused = 0;
	r->down_told = false;
	msgappv2_decoder_init(&c->dec, p->self_id, r->id);
	peer_status_activate(p, r);
	log_info("established TCP streaming connection with remote peer",
		 LOG_STR("stream-reader-type", peer_stream_name(c->stream)),
		 LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", r->idstr));
}

void peer_client_input(struct peer_conn *c)
{
	int rc;

	for (;;) {
		switch (c->state) {
		case PEER_ST_SEND:
		case PEER_ST_RESPONSE:
			rc = http_parse_response((const char *)peer_buf_data(&c->in),
						 peer_buf_size(&c->in), HTTP_MAX_HEAD, &c->head);
			if (rc == -EAGAIN && !c->eof)
				return;
			if (rc) {
				log_warn("closed a peer connection: malformed HTTP response",
					 LOG_STR("address", c->addr), LOG_ERRNO(rc == -EAGAIN ? -EPIPE : rc));
				c->status = rc == -EAGAIN ? -ECONNRESET : rc;
				peer_conn_close(c);
				return;
			}
			peer_buf_consume(&c->in, c->head.head_len);
			if (c->head.status < 200)
				continue; /* 100 Continue and the like */
			c->status = c->head.status;
			if (c->kind == PEER_CONN_READER && c->status == 200) {
				peer_conn_body_begin(c, true, MSGFRAME_STREAM_MAX + 4096);
				peer_stream_established(c);
			} else {
				peer_conn_body_begin(c, true, PEER_SMALL_ANSWER);
				if (c->status == 204 || c->status == 304) {
					peer_client_done(c);
					return;
				}
				c->state = PEER_ST_RESPONSE_BODY;
			}
			c->head.n_headers = 0;
			break;
		case PEER_ST_RESPONSE_BODY:
			rc = peer_conn_pull_body(c);
			if (rc < 0) {
				c->status = rc;
				peer_conn_close(c);
				return;
			}
			if (rc == 0 && !c->eof)
				return;
			peer_client_done(c);
			return;
		case PEER_ST_STREAM_IN:
			rc = peer_conn_pull_body(c);
			if (rc >= 0) {
				int frc = peer_stream_frames(c);
				if (frc)
					rc = frc;
			}
			if (rc < 0) {
				log_warn("closed a stream from a peer: bad frame",
					 LOG_STR("stream-reader-type", peer_stream_name(c->stream)),
					 LOG_STR("remote-peer-id", c->remote->idstr), LOG_ERRNO(rc));
				c->status = rc;
				peer_conn_close(c);
				return;
			}
			if (rc == 1 || c->eof) {
				c->status = -ECONNRESET;
				peer_conn_close(c);
			}
			return;
		default:
			return;
		}
	}
}

/* ---- streams written ---- */

void peer_writer_attach(struct peer *p, struct peer_remote *r, enum peer_stream s,
			struct peer_conn *c)
{
	struct peer_conn *old = r->writer[s];

	if (old) {
		log_warn("closed TCP streaming connection with remote peer",
			 LOG_STR("stream-writer-type", peer_stream_name(s)),
			 LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", r->idstr));
		peer_conn_close(old);
	}
	pthread_mutex_lock(&p->mu);
	peer_queue_free(&r->wq[s]);
	if (s == PEER_STREAM_MSGAPP)
		msgappv2_encoder_init(&r->enc);
	r->working[s] = true;
	pthread_mutex_unlock(&p->mu);
	r->writer[s] = c;
	c->remote = r;
	c->stream = s;
	c->state = PEER_ST_STREAM_OUT;
	c->last_out_ns = clock_now_ns();
	log_info("established TCP streaming connection with remote peer",
		 LOG_STR("stream-writer-type", peer_stream_name(s)),
		 LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", r->idstr));
	peer_status_activate(p, r);
	peer_conn_flush(c);
}

void peer_writer_closed(struct peer_conn *c)
{
	struct peer *p = c->p;
	struct peer_remote *r = c->remote;
	size_t dropped;

	if (c->state != PEER_ST_STREAM_OUT || !r || r->writer[c->stream] != c)
		return;
	r->writer[c->stream] = NULL;
	pthread_mutex_lock(&p->mu);
	r->working[c->stream] = false;
	dropped = r->wq[c->stream].n;
	peer_queue_free(&r->wq[c->stream]);
	if (dropped && !p->closing) {
		struct peer_event ev = { .kind = PEER_EV_UNREACHABLE, .id = r->id };
		peer_emit_locked(p, &ev);
	}
	pthread_mutex_unlock(&p->mu);
	if (p->closing)
		return;
	log_warn("lost TCP streaming connection with remote peer",
		 LOG_STR("stream-writer-type", peer_stream_name(c->stream)),
		 LOG_STR("local-member-id", p->self_str), LOG_STR("remote-peer-id", r->idstr));
	peer_status_deactivate(p, r, peer_stream_name(c->stream), "write", "connection closed");
}

/* Takes the frames at the head of q, up to room bytes (the first one
 * whatever its size), off it: the list of them, their bytes in *total.
 * Under p->mu. */
static struct peer_qmsg *peer_queue_take(struct peer_queue *q, size_t room, size_t *total)
{
	struct peer_qmsg *head = q->head, **link = &q->head;
	size_t n = 0, bytes = 0;

	while (*link && (!n || bytes + (*link)->len <= room)) {
		bytes += (*link)->len;
		n++;
		link = &(*link)->next;
	}
	q->head = *link;
	*link = NULL;
	if (!q->head)
		q->tail = &q->head;
	q->n -= n;
	q->bytes -= bytes;
	*total = bytes;
	return n ? head : NULL;
}

/* Moves r's queued frames for stream s into its connection as one chunk,
 * as many as keep it under PEER_OUT_HIGH_WATER (the rest stay queued,
 * where the queue's limits hold them), and a link heartbeat when the
 * stream has been quiet. */
static void peer_writer_fill(struct peer *p, struct peer_remote *r, enum peer_stream s,
			     uint64_t now)
{
	struct peer_conn *c = r->writer[s];
	struct peer_qmsg *m, *head = NULL;
	size_t total = 0, held = peer_buf_size(&c->out);
	int rc = 0;

	if (held < PEER_OUT_HIGH_WATER) {
		pthread_mutex_lock(&p->mu);
		head = peer_queue_take(&r->wq[s], PEER_OUT_HIGH_WATER - held, &total);
		pthread_mutex_unlock(&p->mu);
	}
	if (head)
		rc = peer_buf_chunk_head(&c->out, total);
	while (head) {
		m = head;
		head = m->next;
		if (!rc)
			rc = peer_buf_append(&c->out, m->data, m->len);
		raftd_free(m);
	}
	if (total && !rc)
		rc = peer_buf_append(&c->out, "\r\n", 2);
	if (!rc && !total && !peer_buf_size(&c->out) && now - c->last_out_ns >= PEER_HEARTBEAT_NS) {
		struct raftmsg hb;
		size_t n;
		msgframe_link_heartbeat(&hb);
		n = s == PEER_STREAM_MSGAPP ? 1 : msgframe_size(&hb);
		rc = peer_buf_chunk_head(&c->out, n);
		if (!rc)
			rc = peer_buf_reserve(&c->out, n + 2);
		if (!rc) {
			if (s == PEER_STREAM_MSGAPP)
				c->out.p[c->out.len] = MSGAPPV2_LINK_HEARTBEAT;
			else
				msgframe_encode(&hb, c->out.p + c->out.len);
			c->out.len += n;
			rc = peer_buf_append(&c->out, "\r\n", 2);
		}
	}
	if (rc) {
		/* the stream lost bytes: it cannot go on */
		log_warn("lost TCP streaming connection with remote peer: out of memory",
			 LOG_STR("remote-peer-id", r->idstr));
		peer_conn_close(c);
		return;
	}
	if (peer_buf_size(&c->out))
		peer_conn_flush(c);
}

uint64_t peer_client_tick(struct peer *p, struct peer_remote *r, uint64_t now)
{
	uint64_t next = 0;

	for (int s = 0; s < PEER_N_STREAMS; s++) {
		uint64_t t;
		if (!r->reader[s] && now >= r->next_dial_ns[s])
			peer_client_dial_reader(p, r, (enum peer_stream)s);
		if (!r->reader[s] && (!next || r->next_dial_ns[s] < next))
			next = r->next_dial_ns[s];
		if (r->writer[s]) {
			peer_writer_fill(p, r, (enum peer_stream)s, now);
			if (r->writer[s]) {
				t = r->writer[s]->last_out_ns + PEER_HEARTBEAT_NS;
				if (!next || t < next)
					next = t;
			}
		}
	}
	while (r->n_posts < PEER_PIPELINE_CONNS) {
		struct peer_qmsg *m;
		pthread_mutex_lock(&p->mu);
		m = r->pipeq.head;
		if (m) {
			r->pipeq.head = m->next;
			if (!r->pipeq.head)
				r->pipeq.tail = &r->pipeq.head;
			r->pipeq.n--;
			r->pipeq.bytes -= m->len;
		}
		pthread_mutex_unlock(&p->mu);
		if (!m)
			break;
		peer_client_post(p, r, m);
	}
	return next;
}

void peer_client_drop(struct peer *p, struct peer_remote *r)
{
	for (struct peer_conn *c = p->conns; c; c = c->next) {
		if (c->remote != r || c->state == PEER_ST_CLOSED)
			continue;
		peer_conn_close(c);
		c->remote = NULL;
	}
}

/* ---- snapshots ---- */

/* Queues a snapshot whose db comes from the file at db_path or from ds
 * (taken over, closed even on failure). */
static int peer_snap_queue(struct peer *p, const struct raftmsg *m, const char *db_path,
			   struct dbsnap *ds)
{
	struct peer_snap_send *s = raftd_calloc(1, sizeof(*s));
	int rc = -ENOMEM;

	if (!s) {
		dbsnap_close(ds);
		return -ENOMEM;
	}
	s->fd = -1;
	s->ds = ds;
	s->to = m->to;
	s->index = m->snapshot.index;
	s->frame_len = msgframe_size(m);
	s->frame = raftd_malloc(s->frame_len);
	s->path = raftd_malloc(strlen(db_path) + 1);
	if (!s->frame || !s->path)
		goto out_free;
	msgframe_encode(m, s->frame);
	strcpy(s->path, db_path);
	pthread_mutex_lock(&p->mu);
	if (!peer_remote_find(p, m->to)) {
		pthread_mutex_unlock(&p->mu);
		rc = -ENOENT;
		goto out_free;
	}
	s->next = p->snaps;
	p->snaps = s;
	peer_wake_locked(p);
	pthread_mutex_unlock(&p->mu);
	return 0;

out_free:
	peer_snap_send_free(s);
	return rc;
}

int peer_send_snapshot(struct peer *p, const struct raftmsg *m, const char *db_path)
{
	return peer_snap_queue(p, m, db_path, NULL);
}

int peer_send_snapshot_db(struct peer *p, const struct raftmsg *m, struct dbsnap *ds)
{
	return peer_snap_queue(p, m, "(a copy of the db)", ds);
}

/* Dials the receiver of s and queues the request head and the message's
 * frame; the db file follows as the socket takes it. */
static int peer_snap_start(struct peer *p, struct peer_snap_send *s)
{
	struct peer_remote *r;
	struct peer_url u;
	struct peer_conn *c;
	struct stat st;
	int rc;

	pthread_mutex_lock(&p->mu);
	r = peer_remote_find(p, s->to);
	pthread_mutex_unlock(&p->mu);
	if (!r)
		return -ENOENT;
	if (s->ds) {
		s->size = dbsnap_size(s->ds);
	} else {
		s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0 || fstat(s->fd, &st) < 0) {
			rc = -errno;
			log_warn("cannot open the snapshot's db file", LOG_STR("path", s->path),
				 LOG_ERRNO(rc));
			return rc;
		}
		s->size = (uint64_t)st.st_size;
	}
	rc = peer_pick_url(p, r, &u);
	if (!rc)
		rc = peer_conn_dial(p, &u, PEER_CONN_SNAP, r, &c);
	if (rc)
		return rc;
	c->snap_out = s;
	s->start_ns = clock_now_ns();
	rc = peer_client_head(p, c, &u, "POST", "/raft/snapshot", NULL, "application/octet-stream",
			      (int64_t)(s->frame_len + s->size));
	if (!rc)
		rc = peer_buf_append(&c->out, s->frame, s->frame_len);
	log_info("sending database snapshot", LOG_STR("snapshot-receiver-id", r->idstr),
		 LOG_U64("snapshot-index", s->index), LOG_U64("snapshot-size-bytes", s->size));
	if (rc) {
		c->status = rc;
		peer_conn_close(c); /* reports the failure */
	}
	return 0;
}

void peer_snap_start_all(struct peer *p)
{
	struct peer_snap_send *list;

	pthread_mutex_lock(&p->mu);
	list = p->snaps;
	p->snaps = NULL;
	pthread_mutex_unlock(&p->mu);
	while (list) {
		struct peer_snap_send *s = list;
		int rc;
		list = s->next;
		s->next = NULL;
		rc = peer_snap_start(p, s);
		if (rc) {
			log_warn("failed to send database snapshot", LOG_U64("snapshot-index", s->index),
				 LOG_ERRNO(rc));
			peer_emit_simple(p, PEER_EV_UNREACHABLE, s->to, false);
			peer_emit_simple(p, PEER_EV_SNAPSHOT_DONE, s->to, false);
			peer_snap_send_free(s);
		}
	}
}
