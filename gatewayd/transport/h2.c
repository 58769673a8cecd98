/* HTTP/2 server connections on nghttp2 (see h2.h). */
#include "gatewayd/transport/h2.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock/clock.h"
#include "gatewayd/transport/transport.h"

/* h2_stream.flags */
#define H2_S_RESPONDED 0x01u /* response HEADERS submitted */
#define H2_S_BODY 0x02u      /* a body is open: the data provider is attached */
#define H2_S_DEFERRED 0x04u  /* the provider is parked: nothing was queued */
#define H2_S_ENDING 0x08u    /* h2_stream_end called: EOF after the queue */
#define H2_S_ENDED 0x10u     /* EOF given to nghttp2 */
#define H2_S_TOO_LARGE 0x20u /* request header list over the limit */

#define H2_MAX_TRAILERS 8
#define H2_FRAME_HEADER_LEN 9
#define H2_MAX_WINDOW 0x7fffffffu
/* Queue capacity a stream keeps once everything queued went out. */
#define H2_IDLE_BODY_KEEP_BYTES 1024u

/* grpc-go's enforcement policy: more strikes than this end the
 * connection; without open streams a ping is early within 2 h. */
#define H2_MAX_PING_STRIKES 2u
#define H2_PING_IDLE_MIN_NS (2 * 3600 * 1000000000LL)
static const char h2_too_many_pings[] = "too_many_pings";

/* Opaque data of the PING that times the final GOAWAY of a drain. */
static const uint8_t h2_drain_ping[8] = { 'c', 'e', 't', 'c', 'd', 'g', 'o', 'a' };

enum h2_drain {
	H2_RUNNING,     /* serving */
	H2_NOTICE_SENT, /* GOAWAY notice and PING queued; streams still accepted */
	H2_GOAWAY_SENT, /* final GOAWAY queued; no stream above it is taken */
};

struct h2_ctx {
	struct h2_config cfg;
	const nghttp2_mem *mem;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	struct h2_buf scratch; /* output batch shared by all connections */
};

struct h2_conn {
	struct h2_ctx *ctx;
	nghttp2_session *session;
	const struct h2_app_ops *ops;
	void *app;
	void *user;
	void (*pending)(struct h2_conn *c, void *user);
	struct dlist streams;      /* open streams (app objects), newest first */
	uint32_t nstreams;
	struct h2_buf out;         /* produced, not yet taken: [out_off, out.len) */
	size_t out_off;
	struct h2_buf *sink;       /* target of the send callbacks during a flush */
	size_t sink_base;          /* sink's length when this flush's batch began */
	enum h2_drain drain;
	int32_t goaway_last_id;    /* after the final GOAWAY: the last stream it names */
	int64_t last_read_ns;      /* when the client last sent bytes */
	int64_t kp_ping_ns;        /* when our keepalive PING went; 0: none out */
	int64_t ping_recv_ns;      /* when the client's last PING came */
	uint32_t ping_strikes;     /* early PINGs in a row (enforcement policy) */
	bool ping_seen;            /* ping_recv_ns is set */
	bool ping_reset;           /* HEADERS or DATA sent since the last PING */
	bool close_when_sent;      /* our too_many_pings GOAWAY is out: end c */
	bool busy;                 /* inside h2_conn_recv or h2_conn_flush */
	bool signalled;            /* pending() called since the last complete flush */
	bool failed;               /* the session failed: only freeing is left */
};

/* ---- allocation ---- */

static void *h2_libc_malloc(size_t size, void *ud)
{
	(void)ud;
	return malloc(size);
}

static void h2_libc_free(void *p, void *ud)
{
	(void)ud;
	free(p);
}

static void *h2_libc_calloc(size_t n, size_t size, void *ud)
{
	(void)ud;
	return calloc(n, size);
}

static void *h2_libc_realloc(void *p, size_t size, void *ud)
{
	(void)ud;
	return realloc(p, size);
}

static const nghttp2_mem h2_libc_mem = {
	.mem_user_data = NULL,
	.malloc = h2_libc_malloc,
	.free = h2_libc_free,
	.calloc = h2_libc_calloc,
	.realloc = h2_libc_realloc,
};

const nghttp2_mem *h2_mem_libc(void)
{
	return &h2_libc_mem;
}

static void *h2_calloc(const nghttp2_mem *mem, size_t size)
{
	return mem->calloc(1, size, mem->mem_user_data);
}

static void h2_free(const nghttp2_mem *mem, void *p)
{
	mem->free(p, mem->mem_user_data);
}

int h2_buf_reserve(struct h2_buf *b, const nghttp2_mem *mem, size_t extra)
{
	if (extra > SIZE_MAX - b->len)
		return -ENOMEM;
	size_t need = b->len + extra;
	if (need <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	uint8_t *p = mem->realloc(b->data, cap, mem->mem_user_data);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

int h2_buf_append(struct h2_buf *b, const nghttp2_mem *mem, const void *p, size_t len)
{
	if (len == 0)
		return 0;
	int rc = h2_buf_reserve(b, mem, len);
	if (rc < 0)
		return rc;
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return 0;
}

void h2_buf_free(struct h2_buf *b, const nghttp2_mem *mem)
{
	if (b->data)
		h2_free(mem, b->data);
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
}

/* ---- helpers ---- */

/* Tells the event loop that c has output, unless it will flush anyway
 * (inside recv or flush) or was told already. */
static void h2_conn_signal(struct h2_conn *c)
{
	if (c->busy || c->signalled || c->failed)
		return;
	c->signalled = true;
	if (c->pending)
		c->pending(c, c->user);
}

static void h2_conn_link(struct h2_conn *c, struct h2_stream *s)
{
	dlist_insert_head(&c->streams, &s->node);
	c->nstreams++;
}

static void h2_conn_unlink(struct h2_conn *c, struct h2_stream *s)
{
	dlist_remove(&s->node);
	c->nstreams--;
}

static struct h2_stream *h2_stream_of(struct h2_conn *c, int32_t id)
{
	return nghttp2_session_get_stream_user_data(c->session, id);
}

static int h2_error_from_ng(int rv)
{
	return rv == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
}

static void h2_send_final_goaway(struct h2_conn *c)
{
	c->goaway_last_id = nghttp2_session_get_last_proc_stream_id(c->session);
	/* Fails only for lack of memory or after a GOAWAY of our own that
	 * already ends the session; either way nothing better is left. */
	(void)nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE, c->goaway_last_id,
				    NGHTTP2_NO_ERROR, NULL, 0);
	c->drain = H2_GOAWAY_SENT;
}

static int64_t h2_now(const struct h2_ctx *ctx)
{
	return ctx->cfg.now_ns ? ctx->cfg.now_ns(ctx->cfg.clock_arg) : clock_now_ns();
}

/* A client's PING under grpc-go's enforcement policy (its handlePing):
 * one that follows the previous too soon (ping_min_ns with open streams,
 * 2 h without) is a strike, unless the server sent HEADERS or DATA since,
 * which clears the strikes; past H2_MAX_PING_STRIKES the client gets
 * GOAWAY ENHANCE_YOUR_CALM "too_many_pings" and the connection ends. */
static void h2_on_ping(struct h2_conn *c)
{
	int64_t now = h2_now(c->ctx), last = c->ping_recv_ns;
	bool seen = c->ping_seen;

	if (!c->ctx->cfg.ping_min_ns)
		return;
	c->ping_seen = true;
	c->ping_recv_ns = now;
	if (c->ping_reset) {
		c->ping_reset = false;
		c->ping_strikes = 0;
		return;
	}
	int64_t least = c->nstreams ? c->ctx->cfg.ping_min_ns : H2_PING_IDLE_MIN_NS;
	if (seen && now - last < least)
		c->ping_strikes++;
	if (c->ping_strikes > H2_MAX_PING_STRIKES && c->drain != H2_GOAWAY_SENT) {
		c->goaway_last_id = nghttp2_session_get_last_proc_stream_id(c->session);
		if (nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE, c->goaway_last_id,
					  NGHTTP2_ENHANCE_YOUR_CALM,
					  (const uint8_t *)h2_too_many_pings,
					  sizeof(h2_too_many_pings) - 1) != 0)
			c->failed = true;
		c->drain = H2_GOAWAY_SENT;
	}
}

/* ---- nghttp2 callbacks ---- */

/* Frames other than DATA bodies (and DATA that nghttp2 copied: empty
 * ones) land in the flush's sink, up to the batch size. */
static ssize_t h2_on_send(nghttp2_session *session, const uint8_t *data, size_t length, int flags,
			  void *user_data)
{
	struct h2_conn *c = user_data;
	(void)session;
	(void)flags;
	if (!c->sink || c->sink->len - c->sink_base >= c->ctx->cfg.out_batch_bytes)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (h2_buf_append(c->sink, c->ctx->mem, data, length) < 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return (ssize_t)length;
}

/* A DATA frame of a stream's queued body: its header, then the bytes
 * straight from the stream's queue (no padding is ever chosen). */
static int h2_on_send_data(nghttp2_session *session, nghttp2_frame *frame, const uint8_t *framehd,
			   size_t length, nghttp2_data_source *source, void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *s = source->ptr;
	(void)session;
	if (!c->sink || c->sink->len - c->sink_base >= c->ctx->cfg.out_batch_bytes)
		return NGHTTP2_ERR_WOULDBLOCK;
	if (frame->data.padlen != 0 || length > s->body.len - s->body_off)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	if (h2_buf_reserve(c->sink, c->ctx->mem, H2_FRAME_HEADER_LEN + length) < 0)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	uint8_t *p = c->sink->data + c->sink->len;
	memcpy(p, framehd, H2_FRAME_HEADER_LEN);
	memcpy(p + H2_FRAME_HEADER_LEN, s->body.data + s->body_off, length);
	c->sink->len += H2_FRAME_HEADER_LEN + length;
	s->body_off += length;
	s->body_promised = 0;
	if (s->body_off == s->body.len) {
		s->body.len = s->body_off = 0;
		/* A stream that stays open once its queue went out (a watch
		 * stream after a burst) keeps no burst-sized buffer: with
		 * many idle streams that is most of their memory. */
		if (s->body.cap > H2_IDLE_BODY_KEEP_BYTES && !(s->flags & H2_S_ENDING))
			h2_buf_free(&s->body, c->ctx->mem);
	}
	return 0;
}

/* Rebuilds the trailer fields stored by h2_stream_end and submits them. */
static int h2_submit_trailers(struct h2_conn *c, struct h2_stream *s)
{
	nghttp2_nv nva[H2_MAX_TRAILERS];
	const uint8_t *p = s->trailers.data;
	for (uint32_t i = 0; i < s->ntrailers; i++) {
		uint32_t nlen, vlen;
		memcpy(&nlen, p, 4);
		memcpy(&vlen, p + 4, 4);
		nva[i].name = (uint8_t *)p + 8;
		nva[i].namelen = nlen;
		nva[i].value = (uint8_t *)p + 8 + nlen;
		nva[i].valuelen = vlen;
		nva[i].flags = NGHTTP2_NV_FLAG_NONE;
		p += 8 + nlen + vlen;
	}
	return nghttp2_submit_trailer(c->session, s->id, nva, s->ntrailers);
}

/* The body's data source: as much of the queue as the frame takes,
 * without copying (h2_on_send_data copies it into the batch). An empty
 * queue parks the stream until the app writes or ends it. */
static ssize_t h2_on_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
			  uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *s = source->ptr;
	(void)session;
	(void)stream_id;
	(void)buf;
	size_t avail = s->body.len - s->body_off - s->body_promised;
	if (avail == 0 && !(s->flags & H2_S_ENDING)) {
		s->flags |= H2_S_DEFERRED;
		return NGHTTP2_ERR_DEFERRED;
	}
	size_t n = avail < length ? avail : length;
	if (n > 0) {
		*data_flags |= NGHTTP2_DATA_FLAG_NO_COPY;
		s->body_promised = n;
	}
	if ((s->flags & H2_S_ENDING) && n == avail) {
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
		s->flags |= H2_S_ENDED;
		if (s->ntrailers > 0) {
			*data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
			if (h2_submit_trailers(c, s) != 0)
				return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
	}
	return (ssize_t)n;
}

static int h2_on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2_conn *c = user_data;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	int32_t id = frame->hd.stream_id;
	if (c->drain == H2_GOAWAY_SENT && id > c->goaway_last_id) {
		/* The final GOAWAY is queued but may not be out yet, and
		 * nghttp2 ignores new streams only once it is: refuse them
		 * here, so that no stream the GOAWAY calls unprocessed is
		 * processed (the client retries it elsewhere). */
		(void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	struct h2_stream *s = c->ops->stream_open(c->app, c, id);
	if (!s) {
		/* Later callbacks of this stream find no stream and do nothing. */
		(void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	s->conn = c;
	s->id = id;
	s->flags = 0;
	s->header_bytes = 0;
	s->body.len = 0;
	s->body_off = 0;
	s->body_promised = 0;
	s->trailers.len = 0;
	s->ntrailers = 0;
	if (nghttp2_session_set_stream_user_data(session, id, s) != 0) {
		c->ops->stream_close(s, NGHTTP2_INTERNAL_ERROR);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	h2_conn_link(c, s);
	return 0;
}

static int h2_on_header(nghttp2_session *session, const nghttp2_frame *frame, nghttp2_rcbuf *name,
			nghttp2_rcbuf *value, uint8_t flags, void *user_data)
{
	struct h2_conn *c = user_data;
	(void)session;
	(void)flags;
	/* Trailer fields of a request carry nothing gRPC uses. */
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	struct h2_stream *s = h2_stream_of(c, frame->hd.stream_id);
	if (!s || (s->flags & H2_S_TOO_LARGE))
		return 0;
	uint64_t size = (uint64_t)s->header_bytes + nghttp2_rcbuf_get_buf(name).len +
			nghttp2_rcbuf_get_buf(value).len + 32;
	if (size > c->ctx->cfg.max_header_list_bytes) {
		s->flags |= H2_S_TOO_LARGE;
		return 0;
	}
	s->header_bytes = (uint32_t)size;
	return c->ops->on_header(s, name, value) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
}

/* The peer's initial stream window (its SETTINGS_INITIAL_WINDOW_SIZE). */
static uint32_t h2_peer_stream_window(const struct h2_stream *s)
{
	return nghttp2_session_get_remote_settings(s->conn->session,
						   NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE);
}

/* The peer gave inc bytes of s's window back: its step, as a share of
 * its initial stream window (at most all of it). */
static void h2_stream_acked(struct h2_stream *s, uint32_t inc)
{
	uint32_t w = h2_peer_stream_window(s);
	uint64_t share = w && inc < w ? ((uint64_t)inc << 16) / w : 65536;

	if (share > s->ack_share)
		s->ack_share = (uint32_t)share;
}

static int h2_on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *s;
	bool end = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

	switch (frame->hd.type) {
	case NGHTTP2_HEADERS:
		s = h2_stream_of(c, frame->hd.stream_id);
		if (!s)
			break;
		if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
			uint32_t flags = (end ? H2_REQ_END_STREAM : 0) |
					 ((s->flags & H2_S_TOO_LARGE) ? H2_REQ_HEADERS_TOO_LARGE : 0);
			c->ops->on_request(s, flags);
		} else if (end) {
			c->ops->on_remote_end(s);
		}
		break;
	case NGHTTP2_DATA:
		s = h2_stream_of(c, frame->hd.stream_id);
		if (s && end)
			c->ops->on_remote_end(s);
		break;
	case NGHTTP2_WINDOW_UPDATE:
		s = frame->hd.stream_id ? h2_stream_of(c, frame->hd.stream_id) : NULL;
		if (s)
			h2_stream_acked(s, (uint32_t)frame->window_update.window_size_increment);
		break;
	case NGHTTP2_PING:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
			h2_on_ping(c);
		else if (c->drain == H2_NOTICE_SENT &&
		    memcmp(frame->ping.opaque_data, h2_drain_ping, sizeof(h2_drain_ping)) == 0)
			h2_send_final_goaway(c);
		break;
	default:
		break;
	}
	(void)session;
	return 0;
}

static int h2_on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
			    const uint8_t *data, size_t len, void *user_data)
{
	struct h2_conn *c = user_data;
	(void)session;
	(void)flags;
	struct h2_stream *s = h2_stream_of(c, stream_id);
	if (s && len > 0)
		c->ops->on_data(s, data, len);
	return 0;
}

/* After a complete response, a client still sending is told to stop.
 * HEADERS and DATA clear the client's ping strikes; the too_many_pings
 * GOAWAY ends the connection once it is written. */
static int h2_on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data)
{
	struct h2_conn *c = user_data;
	if (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)
		c->ping_reset = true;
	if (frame->hd.type == NGHTTP2_GOAWAY &&
	    frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM)
		c->close_when_sent = true;
	if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
	    (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
		(void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
						NGHTTP2_NO_ERROR);
	return 0;
}

static int h2_on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
			      void *user_data)
{
	struct h2_conn *c = user_data;
	struct h2_stream *s = h2_stream_of(c, stream_id);
	if (!s)
		return 0;
	(void)nghttp2_session_set_stream_user_data(session, stream_id, NULL);
	h2_conn_unlink(c, s);
	c->ops->stream_close(s, error_code);
	return 0;
}

/* ---- context ---- */

void h2_config_default(struct h2_config *c)
{
	memset(c, 0, sizeof(*c));
	c->max_concurrent_streams = UINT32_MAX;
	c->max_header_list_bytes = 16u << 20;
	c->stream_window_bytes = 1u << 20;
	c->conn_window_bytes = 16u << 20;
	c->out_batch_bytes = 256u << 10;
	c->mem = NULL;
}

int h2_ctx_new(const struct h2_config *cfg, struct h2_ctx **out)
{
	if (cfg->stream_window_bytes > H2_MAX_WINDOW || cfg->conn_window_bytes > H2_MAX_WINDOW ||
	    cfg->out_batch_bytes < 16384 || cfg->max_header_list_bytes < 1024 ||
	    cfg->max_concurrent_streams == 0)
		return -EINVAL;
	const nghttp2_mem *mem = cfg->mem ? cfg->mem : h2_mem_libc();
	struct h2_ctx *ctx = h2_calloc(mem, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->cfg = *cfg;
	ctx->mem = mem;

	if (nghttp2_session_callbacks_new(&ctx->cbs) != 0)
		goto out_free_ctx;
	nghttp2_session_callbacks *cbs = ctx->cbs;
	nghttp2_session_callbacks_set_send_callback(cbs, h2_on_send);
	nghttp2_session_callbacks_set_send_data_callback(cbs, h2_on_send_data);
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, h2_on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback2(cbs, h2_on_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, h2_on_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, h2_on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, h2_on_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, h2_on_stream_close);

	if (nghttp2_option_new(&ctx->opt) != 0)
		goto out_free_cbs;
	/* Closed streams are not kept for RFC 7540 priority bookkeeping. */
	nghttp2_option_set_no_closed_streams(ctx->opt, 1);
	/* nghttp2's HTTP checks reset a stream whose :authority is not an
	 * RFC 3986 authority, and etcd's Go clients send "http://host:port"
	 * there when given an endpoint with a scheme (Go's server takes it).
	 * The gRPC layer checks what it relies on itself: :method POST, a
	 * known :path, gRPC's content-type. */
	nghttp2_option_set_no_http_messaging(ctx->opt, 1);

	*out = ctx;
	return 0;

out_free_cbs:
	nghttp2_session_callbacks_del(ctx->cbs);
out_free_ctx:
	h2_free(mem, ctx);
	return -ENOMEM;
}

void h2_ctx_free(struct h2_ctx *ctx)
{
	if (!ctx)
		return;
	const nghttp2_mem *mem = ctx->mem;
	nghttp2_option_del(ctx->opt);
	nghttp2_session_callbacks_del(ctx->cbs);
	h2_buf_free(&ctx->scratch, mem);
	h2_free(mem, ctx);
}

const struct h2_config *h2_ctx_config(const struct h2_ctx *ctx)
{
	return &ctx->cfg;
}

/* ---- connections ---- */

int h2_conn_new(struct h2_ctx *ctx, const struct h2_app_ops *ops, void *app, struct h2_conn **out)
{
	struct h2_conn *c = h2_calloc(ctx->mem, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->ops = ops;
	c->app = app;
	c->drain = H2_RUNNING;
	c->last_read_ns = h2_now(ctx);
	dlist_init(&c->streams);

	/* nghttp2_mem's members are not const, but nghttp2 only reads them. */
	if (nghttp2_session_server_new3(&c->session, ctx->cbs, c, ctx->opt,
					(nghttp2_mem *)ctx->mem) != 0)
		goto out_free_conn;

	const nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, ctx->cfg.max_concurrent_streams },
		{ NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, ctx->cfg.stream_window_bytes },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, ctx->cfg.max_header_list_bytes },
		{ NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
	};
	if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0])) != 0)
		goto out_del_session;
	if (ctx->cfg.conn_window_bytes > NGHTTP2_INITIAL_CONNECTION_WINDOW_SIZE &&
	    nghttp2_session_set_local_window_size(c->session, NGHTTP2_FLAG_NONE, 0,
						  (int32_t)ctx->cfg.conn_window_bytes) != 0)
		goto out_del_session;
	*out = c;
	return 0;

out_del_session:
	nghttp2_session_del(c->session);
out_free_conn:
	h2_free(ctx->mem, c);
	return -ENOMEM;
}

void h2_conn_free(struct h2_conn *c)
{
	struct h2_stream *s;

	if (!c)
		return;
	/* The app may queue output on other streams while they close
	 * (its cancel handlers run): the loop must not hear of c again. */
	c->failed = true;
	while ((s = dlist_entry(dlist_first(&c->streams), struct h2_stream, node))) {
		h2_conn_unlink(c, s);
		(void)nghttp2_session_set_stream_user_data(c->session, s->id, NULL);
		c->ops->stream_close(s, H2_CONN_CLOSED);
	}
	nghttp2_session_del(c->session);
	h2_buf_free(&c->out, c->ctx->mem);
	h2_free(c->ctx->mem, c);
}

void h2_conn_set_user(struct h2_conn *c, void *user, void (*pending)(struct h2_conn *c, void *user))
{
	c->user = user;
	c->pending = pending;
}

void *h2_conn_user(const struct h2_conn *c)
{
	return c->user;
}

void *h2_conn_app(const struct h2_conn *c)
{
	return c->app;
}

const struct h2_config *h2_conn_config(const struct h2_conn *c)
{
	return &c->ctx->cfg;
}

uint32_t h2_conn_stream_count(const struct h2_conn *c)
{
	return c->nstreams;
}

int h2_conn_recv(struct h2_conn *c, const uint8_t *data, size_t len)
{
	if (c->failed)
		return -EPROTO;
	if (len && (c->ctx->cfg.keepalive_ns || c->ctx->cfg.ping_min_ns))
		c->last_read_ns = h2_now(c->ctx);
	c->busy = true;
	ssize_t rv = nghttp2_session_mem_recv(c->session, data, len);
	c->busy = false;
	if (rv < 0) {
		/* Only fatal errors come back here (a bad preface, flooding,
		 * no memory): nghttp2 answers lesser protocol errors itself
		 * with a GOAWAY and stops reading. The connection goes now. */
		c->failed = true;
		return h2_error_from_ng((int)rv);
	}
	return 0;
}

/* Writes [out_off, out.len). Returns 0 when all went, -EAGAIN, or the
 * transport's error. */
static int h2_conn_write_out(struct h2_conn *c, struct transport *t)
{
	struct iovec iov = { c->out.data + c->out_off, c->out.len - c->out_off };
	ssize_t w = transport_writev_all(t, &iov, 1);
	if (w < 0)
		return (int)w;
	c->out_off += (size_t)w;
	if (c->out_off < c->out.len)
		return -EAGAIN;
	/* Backlog written: give the memory back, an idle connection holds
	 * no output buffer. */
	h2_buf_free(&c->out, c->ctx->mem);
	c->out_off = 0;
	return 0;
}

/* Has nghttp2 put c's pending frames (up to one batch) after the end of
 * sink. 0, or the session's failure (c is failed then). */
static int h2_conn_send(struct h2_conn *c, struct h2_buf *sink)
{
	c->sink = sink;
	c->sink_base = sink->len;
	int rv = nghttp2_session_send(c->session);
	c->sink = NULL;
	if (rv != 0) {
		c->failed = true;
		return h2_error_from_ng(rv);
	}
	return 0;
}

int h2_conn_flush(struct h2_conn *c, struct transport *t)
{
	struct h2_buf *scratch = &c->ctx->scratch;
	int rc = 0;

	if (c->failed)
		return -EPROTO;
	c->busy = true;
	for (;;) {
		if (c->out_off < c->out.len) {
			rc = h2_conn_write_out(c, t);
			if (rc < 0)
				break;
		}
		scratch->len = 0;
		rc = h2_conn_send(c, scratch);
		if (rc < 0 || scratch->len == 0)
			break;
		struct iovec iov = { scratch->data, scratch->len };
		ssize_t w = transport_writev_all(t, &iov, 1);
		if (w < 0) {
			rc = (int)w;
			break;
		}
		if ((size_t)w < scratch->len) {
			/* Keep what the transport did not take. */
			rc = h2_conn_produced(c, 0, scratch->len, (size_t)w);
			if (rc == 0)
				rc = -EAGAIN;
			break;
		}
	}
	scratch->len = 0;
	c->busy = false;
	if (rc == 0)
		c->signalled = false;
	return rc;
}

int h2_conn_produce(struct h2_conn *c, size_t *off, size_t *len)
{
	struct h2_buf *batch = &c->ctx->scratch;

	*off = batch->len;
	*len = 0;
	if (c->failed)
		return -EPROTO;
	if (c->out_off < c->out.len)
		return -EAGAIN;
	c->busy = true;
	int rc = h2_conn_send(c, batch);
	c->busy = false;
	*len = batch->len - *off;
	return rc;
}

int h2_conn_produced(struct h2_conn *c, size_t off, size_t len, size_t sent)
{
	const uint8_t *p = c->ctx->scratch.data + off;

	if (sent >= len)
		return 0;
	/* Kept as c's backlog, which its next flush writes first. */
	if (h2_buf_append(&c->out, c->ctx->mem, p + sent, len - sent) < 0) {
		c->failed = true;
		return -ENOMEM;
	}
	return 0;
}

const uint8_t *h2_ctx_batch(const struct h2_ctx *ctx, size_t *len)
{
	*len = ctx->scratch.len;
	return ctx->scratch.data;
}

void h2_ctx_batch_reset(struct h2_ctx *ctx)
{
	ctx->scratch.len = 0;
}

struct h2_ctx *h2_conn_ctx(const struct h2_conn *c)
{
	return c->ctx;
}

bool h2_conn_want_write(const struct h2_conn *c)
{
	if (c->failed)
		return false;
	return c->out_off < c->out.len || nghttp2_session_want_write(c->session);
}

bool h2_conn_is_done(const struct h2_conn *c)
{
	if (c->failed)
		return true;
	if (c->close_when_sent && c->out_off == c->out.len)
		return true;
	return c->out_off == c->out.len && !nghttp2_session_want_read(c->session) &&
	       !nghttp2_session_want_write(c->session);
}

void h2_conn_shutdown(struct h2_conn *c)
{
	if (c->failed)
		return;
	if (c->drain == H2_RUNNING) {
		if (nghttp2_submit_shutdown_notice(c->session) == 0 &&
		    nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, h2_drain_ping) == 0)
			c->drain = H2_NOTICE_SENT;
		else
			h2_send_final_goaway(c);
	} else if (c->drain == H2_NOTICE_SENT) {
		h2_send_final_goaway(c);
	}
	h2_conn_signal(c);
}

void h2_conn_terminate(struct h2_conn *c, uint32_t error_code)
{
	if (c->failed)
		return;
	c->goaway_last_id = nghttp2_session_get_last_proc_stream_id(c->session);
	if (nghttp2_session_terminate_session(c->session, error_code) != 0)
		c->failed = true;
	c->drain = H2_GOAWAY_SENT;
	h2_conn_signal(c);
}

int h2_conn_keepalive(struct h2_conn *c, int64_t now_ns, int64_t *next_ns)
{
	static const uint8_t zeros[8];
	const struct h2_config *cfg = &c->ctx->cfg;

	*next_ns = INT64_MAX;
	if (!cfg->keepalive_ns || c->failed)
		return 0;
	/* anything the client sent since our PING answers it, as in
	 * grpc-go's server */
	if (c->kp_ping_ns && c->last_read_ns >= c->kp_ping_ns)
		c->kp_ping_ns = 0;
	if (c->kp_ping_ns) {
		if (now_ns - c->kp_ping_ns >= cfg->keepalive_timeout_ns)
			return -ETIMEDOUT;
		*next_ns = c->kp_ping_ns + cfg->keepalive_timeout_ns;
		return 0;
	}
	if (now_ns - c->last_read_ns < cfg->keepalive_ns) {
		*next_ns = c->last_read_ns + cfg->keepalive_ns;
		return 0;
	}
	if (nghttp2_submit_ping(c->session, NGHTTP2_FLAG_NONE, zeros) != 0)
		return -ENOMEM;
	c->kp_ping_ns = now_ns;
	*next_ns = now_ns + cfg->keepalive_timeout_ns;
	h2_conn_signal(c);
	return 0;
}

/* ---- streams ---- */

void h2_stream_recycle(struct h2_stream *s, const nghttp2_mem *mem, size_t keep_bytes)
{
	if (s->body.cap > keep_bytes)
		h2_buf_free(&s->body, mem);
	if (s->trailers.cap > keep_bytes)
		h2_buf_free(&s->trailers, mem);
	s->body.len = 0;
	s->trailers.len = 0;
	s->body_off = 0;
	s->body_promised = 0;
	s->ntrailers = 0;
	s->ack_share = 0;
	s->flags = 0;
	s->conn = NULL;
	dlist_init(&s->node);
}

void h2_stream_destroy(struct h2_stream *s, const nghttp2_mem *mem)
{
	h2_buf_free(&s->body, mem);
	h2_buf_free(&s->trailers, mem);
}

bool h2_stream_responded(const struct h2_stream *s)
{
	return s->flags & H2_S_RESPONDED;
}

int h2_stream_respond(struct h2_stream *s, const nghttp2_nv *nva, size_t nvlen, bool end_stream)
{
	struct h2_conn *c = s->conn;
	if (s->flags & H2_S_RESPONDED)
		return -EALREADY;
	nghttp2_data_provider prd = { .source.ptr = s, .read_callback = h2_on_read };
	int rv = nghttp2_submit_response(c->session, s->id, nva, nvlen, end_stream ? NULL : &prd);
	if (rv != 0)
		return h2_error_from_ng(rv);
	s->flags |= H2_S_RESPONDED | (end_stream ? 0 : H2_S_BODY);
	h2_conn_signal(c);
	return 0;
}

/* Puts a parked body back in nghttp2's queue. */
static void h2_stream_wake(struct h2_stream *s)
{
	if (!(s->flags & H2_S_DEFERRED))
		return;
	s->flags &= ~H2_S_DEFERRED;
	/* Fails only if the stream is already gone from nghttp2 (reset and
	 * about to close): nothing is left to send then. */
	(void)nghttp2_session_resume_data(s->conn->session, s->id);
}

size_t h2_stream_unacked(const struct h2_stream *s, size_t *window, size_t *step)
{
	uint32_t w = h2_peer_stream_window(s);
	int32_t left = nghttp2_session_get_stream_remote_window_size(s->conn->session, s->id);

	*window = w;
	*step = !s->ack_share ? w / 2 : (size_t)(((uint64_t)w * s->ack_share + 65535) >> 16);
	return left < 0 || (uint32_t)left >= w ? 0 : w - (uint32_t)left;
}

uint8_t *h2_stream_write_reserve(struct h2_stream *s, size_t len)
{
	if ((s->flags & (H2_S_BODY | H2_S_ENDING)) != H2_S_BODY)
		return NULL;
	const nghttp2_mem *mem = s->conn->ctx->mem;
	/* Reclaim the sent prefix before growing: offsets, not pointers,
	 * name the bytes in flight, so moving them is safe. */
	if (s->body_off > 0 && s->body.len + len > s->body.cap) {
		memmove(s->body.data, s->body.data + s->body_off, s->body.len - s->body_off);
		s->body.len -= s->body_off;
		s->body_off = 0;
	}
	if (h2_buf_reserve(&s->body, mem, len) < 0)
		return NULL;
	uint8_t *p = s->body.data + s->body.len;
	s->body.len += len;
	h2_stream_wake(s);
	h2_conn_signal(s->conn);
	return p;
}

int h2_stream_write(struct h2_stream *s, const void *data, size_t len)
{
	if ((s->flags & (H2_S_BODY | H2_S_ENDING)) != H2_S_BODY)
		return -EINVAL;
	if (len == 0)
		return 0;
	uint8_t *p = h2_stream_write_reserve(s, len);
	if (!p)
		return -ENOMEM;
	memcpy(p, data, len);
	return 0;
}

int h2_stream_end(struct h2_stream *s, const nghttp2_nv *trailers, size_t nvlen)
{
	if ((s->flags & (H2_S_BODY | H2_S_ENDING)) != H2_S_BODY || nvlen > H2_MAX_TRAILERS)
		return -EINVAL;
	const nghttp2_mem *mem = s->conn->ctx->mem;
	s->trailers.len = 0;
	for (size_t i = 0; i < nvlen; i++) {
		uint32_t lens[2] = { (uint32_t)trailers[i].namelen, (uint32_t)trailers[i].valuelen };
		if (h2_buf_append(&s->trailers, mem, lens, sizeof(lens)) < 0 ||
		    h2_buf_append(&s->trailers, mem, trailers[i].name, trailers[i].namelen) < 0 ||
		    h2_buf_append(&s->trailers, mem, trailers[i].value, trailers[i].valuelen) < 0)
			return -ENOMEM;
	}
	s->ntrailers = (uint32_t)nvlen;
	s->flags |= H2_S_ENDING;
	h2_stream_wake(s);
	h2_conn_signal(s->conn);
	return 0;
}

int h2_stream_reset(struct h2_stream *s, uint32_t error_code)
{
	int rv = nghttp2_submit_rst_stream(s->conn->session, NGHTTP2_FLAG_NONE, s->id, error_code);
	if (rv != 0)
		return h2_error_from_ng(rv);
	h2_conn_signal(s->conn);
	return 0;
}
