/*
 * Unit tests for gatewayd/transport/h2.c with a plain HTTP app (no gRPC), and for
 * the descriptor backend of gatewayd/transport/transport.h over a socketpair.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>

#include "h2_client.h"

/* ---- a small app: answers from a per-test function ---- */

struct app_stream {
	struct h2_stream st;
	char path[64];
	size_t body_len;     /* request body bytes seen */
	bool remote_ended;
	bool closed;
	uint32_t close_code;
};

static struct {
	void (*on_request)(struct app_stream *s, uint32_t flags);
	struct app_stream *last;
	int opened, closed_count;
	uint32_t last_close_code;
	int pending_calls;
	const nghttp2_mem *mem;
} app;

static struct app_stream *app_of(struct h2_stream *s)
{
	return (struct app_stream *)((char *)s - offsetof(struct app_stream, st));
}

static struct h2_stream *app_open(void *a, struct h2_conn *c, int32_t id)
{
	(void)a;
	(void)c;
	(void)id;
	struct app_stream *s = calloc(1, sizeof(*s));
	CHECK(s != NULL);
	app.opened++;
	app.last = s;
	return &s->st;
}

static int app_header(struct h2_stream *st, nghttp2_rcbuf *name, nghttp2_rcbuf *value)
{
	struct app_stream *s = app_of(st);
	nghttp2_vec n = nghttp2_rcbuf_get_buf(name), v = nghttp2_rcbuf_get_buf(value);
	if (n.len == 5 && memcmp(n.base, ":path", 5) == 0)
		snprintf(s->path, sizeof(s->path), "%.*s", (int)v.len, v.base);
	return 0;
}

static void app_request(struct h2_stream *st, uint32_t flags)
{
	if (app.on_request)
		app.on_request(app_of(st), flags);
}

static void app_data(struct h2_stream *st, const uint8_t *d, size_t len)
{
	(void)d;
	app_of(st)->body_len += len;
}

static void app_remote_end(struct h2_stream *st)
{
	app_of(st)->remote_ended = true;
}

static void app_close(struct h2_stream *st, uint32_t code)
{
	struct app_stream *s = app_of(st);
	app.closed_count++;
	app.last_close_code = code;
	if (app.last == s)
		app.last = NULL;
	h2_stream_destroy(&s->st, app.mem);
	free(s);
}

static const struct h2_app_ops app_ops = {
	.stream_open = app_open,
	.on_header = app_header,
	.on_request = app_request,
	.on_data = app_data,
	.on_remote_end = app_remote_end,
	.stream_close = app_close,
};

static void on_pending(struct h2_conn *c, void *user)
{
	(void)c;
	CHECK(user == &app);
	app.pending_calls++;
}

struct hx {
	struct tc_mem mem;
	struct h2_ctx *ctx;
	struct h2_conn *conn;
	struct tc_transport tt;
	struct tc_client tc;
};

static void hx_init(struct hx *x, void (*on_request)(struct app_stream *, uint32_t),
		    void (*tune)(struct h2_config *))
{
	memset(x, 0, sizeof(*x));
	memset(&app, 0, sizeof(app));
	app.on_request = on_request;
	tc_mem_init(&x->mem);
	app.mem = &x->mem.mem;
	struct h2_config cfg;
	h2_config_default(&cfg);
	cfg.mem = &x->mem.mem;
	if (tune)
		tune(&cfg);
	CHECK_EQ(h2_ctx_new(&cfg, &x->ctx), 0);
	CHECK_EQ(h2_conn_new(x->ctx, &app_ops, NULL, &x->conn), 0);
	h2_conn_set_user(x->conn, &app, on_pending);
	CHECK(h2_conn_user(x->conn) == &app);
	tc_transport_init(&x->tt);
	tc_init(&x->tc, 0);
}

static void hx_pump(struct hx *x)
{
	tc_pump(&x->tc, x->conn, &x->tt);
	CHECK_EQ(x->tc.server_rc, 0);
}

static void hx_fini(struct hx *x)
{
	h2_conn_free(x->conn);
	CHECK_EQ(app.opened, app.closed_count);
	h2_ctx_free(x->ctx);
	CHECK_EQ(x->mem.live, 0);
	tc_fini(&x->tc);
	tc_transport_fini(&x->tt);
}

/* ---- tests ---- */

static const nghttp2_nv nv_ok[] = {
	{ (uint8_t *)":status", (uint8_t *)"200", 7, 3, NGHTTP2_NV_FLAG_NONE },
	{ (uint8_t *)"content-type", (uint8_t *)"text/plain", 12, 10, NGHTTP2_NV_FLAG_NONE },
};

static void tune_settings(struct h2_config *c)
{
	c->max_concurrent_streams = 7;
	c->max_header_list_bytes = 4096;
	c->stream_window_bytes = 200000;
	c->conn_window_bytes = 3000000;
}

static void test_settings(void)
{
	struct hx x;
	hx_init(&x, NULL, tune_settings);
	CHECK(h2_conn_want_write(x.conn));
	hx_pump(&x);
	nghttp2_session *cl = x.tc.session;
	CHECK_EQ(nghttp2_session_get_remote_settings(cl, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 7);
	CHECK_EQ(nghttp2_session_get_remote_settings(cl, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 200000);
	CHECK_EQ(nghttp2_session_get_remote_settings(cl, NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE), 4096);
	CHECK_EQ(nghttp2_session_get_remote_window_size(cl), 3000000);
	CHECK(!h2_conn_want_write(x.conn));
	CHECK(!h2_conn_is_done(x.conn));
	CHECK_EQ(h2_conn_stream_count(x.conn), 0);
	/* Output was produced inside recv/flush only: no pending call. */
	CHECK_EQ(app.pending_calls, 0);
	CHECK(h2_conn_config(x.conn)->max_concurrent_streams == 7);
	/* PINGs (keepalive) are answered by nghttp2. */
	CHECK_EQ(nghttp2_submit_ping(x.tc.session, NGHTTP2_FLAG_NONE, NULL), 0);
	hx_pump(&x);
	CHECK_EQ(x.tc.pings_acked, 1);
	hx_fini(&x);

	/* Bad configurations are refused. */
	struct h2_config cfg;
	struct h2_ctx *ctx;
	h2_config_default(&cfg);
	cfg.stream_window_bytes = 1u << 31;
	CHECK_EQ(h2_ctx_new(&cfg, &ctx), -EINVAL);
	h2_config_default(&cfg);
	cfg.max_concurrent_streams = 0;
	CHECK_EQ(h2_ctx_new(&cfg, &ctx), -EINVAL);
}

static void respond_body_now(struct app_stream *s, uint32_t flags)
{
	(void)flags;
	CHECK_EQ(h2_stream_respond(&s->st, nv_ok, 2, false), 0);
	CHECK_EQ(h2_stream_respond(&s->st, nv_ok, 2, false), -EALREADY);
	CHECK(h2_stream_responded(&s->st));
	CHECK_EQ(h2_stream_write(&s->st, "hello ", 6), 0);
	uint8_t *p = h2_stream_write_reserve(&s->st, 5);
	CHECK(p != NULL);
	memcpy(p, "world", 5);
	CHECK_EQ(h2_stream_pending(&s->st), 11);
	CHECK_EQ(h2_stream_end(&s->st, NULL, 0), 0);
	CHECK_EQ(h2_stream_write(&s->st, "x", 1), -EINVAL);
	CHECK(h2_stream_write_reserve(&s->st, 1) == NULL);
	CHECK_EQ(h2_stream_end(&s->st, NULL, 0), -EINVAL);
}

/* A plain HTTP/2 response, END_STREAM on its last DATA frame. */
static void test_plain_response(void)
{
	struct hx x;
	hx_init(&x, respond_body_now, NULL);
	struct tc_stream *s = tc_request_ct(&x.tc, "/health", true, NULL, NULL);
	hx_pump(&x);
	CHECK(s->closed);
	CHECK_EQ(s->close_code, NGHTTP2_NO_ERROR);
	CHECK_EQ(s->http_status, 200);
	CHECK(strcmp(s->content_type, "text/plain") == 0);
	CHECK_EQ(s->grpc_status, -1);
	CHECK_EQ(s->data_len, 11);
	CHECK(memcmp(s->data, "hello world", 11) == 0);
	CHECK_EQ(app.opened, 1);
	CHECK_EQ(app.closed_count, 1);
	CHECK_EQ(app.last_close_code, NGHTTP2_NO_ERROR);
	hx_fini(&x);
}

static void respond_headers_only(struct app_stream *s, uint32_t flags)
{
	(void)flags;
	CHECK_EQ(h2_stream_respond(&s->st, nv_ok, 2, false), 0);
}

/* The body comes later, outside any recv or flush: the loop is told once
 * per flush, and everything queued goes out in order. */
static void test_async_body_and_pending(void)
{
	struct hx x;
	hx_init(&x, respond_headers_only, NULL);
	struct tc_stream *s = tc_request_ct(&x.tc, "/slow", true, NULL, NULL);
	hx_pump(&x);
	CHECK_EQ(s->http_status, 200);
	CHECK(!s->closed);
	CHECK(!h2_conn_want_write(x.conn));
	struct app_stream *as = app.last;
	CHECK(as != NULL);
	CHECK_EQ(app.pending_calls, 0);

	CHECK_EQ(h2_stream_write(&as->st, "a", 1), 0);
	CHECK_EQ(app.pending_calls, 1);
	CHECK_EQ(h2_stream_write(&as->st, "b", 1), 0);
	CHECK_EQ(app.pending_calls, 1);
	CHECK(h2_conn_want_write(x.conn));
	hx_pump(&x);
	CHECK_EQ(s->data_len, 2);
	CHECK_EQ(h2_stream_write(&as->st, "c", 1), 0);
	CHECK_EQ(app.pending_calls, 2);

	/* Trailers: at most 8. */
	nghttp2_nv tr[9];
	for (int i = 0; i < 9; i++)
		tr[i] = (nghttp2_nv){ (uint8_t *)"x-t", (uint8_t *)"v", 3, 1, NGHTTP2_NV_FLAG_NONE };
	CHECK_EQ(h2_stream_end(&as->st, tr, 9), -EINVAL);
	tr[0] = (nghttp2_nv){ (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE };
	CHECK_EQ(h2_stream_end(&as->st, tr, 1), 0);
	hx_pump(&x);
	CHECK(s->closed);
	CHECK_EQ(s->data_len, 3);
	CHECK(memcmp(s->data, "abc", 3) == 0);
	CHECK_EQ(s->grpc_status, 0);
	CHECK(s->trailers_seen);
	hx_fini(&x);
}

/* A stream that stays open after a burst (a watch stream after its
 * created answers) gives the burst's buffer back once it has gone out,
 * keeps a small one, and still sends everything in order. */
static void test_idle_stream_releases_burst_buffer(void)
{
	struct hx x;
	hx_init(&x, respond_headers_only, NULL);
	struct tc_stream *s = tc_request_ct(&x.tc, "/watch", true, NULL, NULL);
	hx_pump(&x);
	struct app_stream *as = app.last;
	CHECK(as != NULL);

	uint8_t burst[4000];
	for (size_t i = 0; i < sizeof(burst); i++)
		burst[i] = (uint8_t)(i * 7);
	CHECK_EQ(h2_stream_write(&as->st, burst, sizeof(burst)), 0);
	CHECK(as->st.body.cap >= sizeof(burst));
	hx_pump(&x);
	CHECK_EQ(s->data_len, sizeof(burst));
	CHECK(memcmp(s->data, burst, sizeof(burst)) == 0);
	CHECK_EQ(as->st.body.cap, 0);
	CHECK(as->st.body.data == NULL);

	CHECK_EQ(h2_stream_write(&as->st, "tail", 4), 0);
	hx_pump(&x);
	CHECK_EQ(s->data_len, sizeof(burst) + 4);
	CHECK(memcmp(s->data + sizeof(burst), "tail", 4) == 0);
	CHECK(as->st.body.cap > 0 && as->st.body.cap <= 1024); /* small: kept */

	nghttp2_nv tr = { (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE };
	CHECK_EQ(h2_stream_end(&as->st, &tr, 1), 0);
	hx_pump(&x);
	CHECK(s->closed);
	CHECK_EQ(s->grpc_status, 0);
	hx_fini(&x);
}

static void tune_small_batch(struct h2_config *c)
{
	c->out_batch_bytes = 16384;
}

/* Hands the client [off, off + n) of the ctx's batch, as a socket that
 * took n bytes of it would. */
static void give(struct hx *x, size_t off, size_t n)
{
	size_t total;
	const uint8_t *b = h2_ctx_batch(x->ctx, &total);
	CHECK(off + n <= total);
	struct iovec iov = { (void *)(b + off), n };
	CHECK_EQ(tc_transport_writev(&x->tt.t, &iov, 1), (ssize_t)n);
}

/* The batched output path (h2_conn_produce / h2_conn_produced): each
 * produce appends at most one out_batch_bytes after what the batch
 * already holds (the limit counts from where this produce began); a
 * piece the socket took only in part is kept and goes first at the next
 * flush; while it is kept, produce refuses; the client gets every byte
 * once, in order. */
static void test_batch_produce(void)
{
	struct hx x;
	hx_init(&x, respond_headers_only, tune_small_batch);
	struct tc_stream *s = tc_request_ct(&x.tc, "/watch", true, NULL, NULL);
	hx_pump(&x);
	struct app_stream *as = app.last;
	CHECK(as != NULL);

	static uint8_t burst[20000]; /* within the client's 64 KiB window */
	for (size_t i = 0; i < sizeof(burst); i++)
		burst[i] = (uint8_t)(i * 13 + 5);
	CHECK_EQ(h2_stream_write(&as->st, burst, sizeof(burst)), 0);
	size_t off1, len1, off2, len2, off3, len3;
	CHECK_EQ(h2_conn_produce(x.conn, &off1, &len1), 0);
	CHECK_EQ(off1, 0);
	CHECK(len1 >= 16384 && len1 < sizeof(burst)); /* one batch's worth */
	CHECK_EQ(h2_conn_produce(x.conn, &off2, &len2), 0);
	CHECK_EQ(off2, len1);
	CHECK(len2 > 0); /* the rest: the limit counts from off2 */
	CHECK_EQ(h2_conn_produce(x.conn, &off3, &len3), 0);
	CHECK_EQ(len3, 0);
	give(&x, off1, len1);
	CHECK_EQ(h2_conn_produced(x.conn, off1, len1, len1), 0);
	give(&x, off2, len2);
	CHECK_EQ(h2_conn_produced(x.conn, off2, len2, len2), 0);
	h2_ctx_batch_reset(x.ctx);
	hx_pump(&x);
	CHECK_EQ(s->data_len, sizeof(burst));
	CHECK(memcmp(s->data, burst, sizeof(burst)) == 0);

	/* The socket takes a third: the rest is kept and goes first. */
	CHECK_EQ(h2_stream_write(&as->st, burst, 4000), 0);
	CHECK_EQ(h2_conn_produce(x.conn, &off1, &len1), 0);
	CHECK(len1 > 4000);
	give(&x, off1, len1 / 3);
	CHECK_EQ(h2_conn_produced(x.conn, off1, len1, len1 / 3), 0);
	CHECK(h2_conn_want_write(x.conn));
	CHECK_EQ(h2_stream_write(&as->st, "tail", 4), 0);
	CHECK_EQ(h2_conn_produce(x.conn, &off2, &len2), -EAGAIN);
	CHECK_EQ(len2, 0);
	h2_ctx_batch_reset(x.ctx);
	hx_pump(&x);
	CHECK_EQ(s->data_len, sizeof(burst) + 4004);
	CHECK(memcmp(s->data + sizeof(burst), burst, 4000) == 0);
	CHECK(memcmp(s->data + sizeof(burst) + 4000, "tail", 4) == 0);
	CHECK(!h2_conn_want_write(x.conn));

	nghttp2_nv tr = { (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE };
	CHECK_EQ(h2_stream_end(&as->st, &tr, 1), 0);
	hx_pump(&x);
	CHECK(s->closed);
	hx_fini(&x);
}

/* h2_stream_unacked: the bytes a stream framed that the client has not
 * given window back for (nghttp2's client gives it back once it has
 * taken half its window), not counting what waits unframed. */
static void test_stream_unacked(void)
{
	struct hx x;
	static uint8_t buf[70000];
	size_t window = 0, step = 0;
	hx_init(&x, respond_headers_only, NULL);
	struct tc_stream *s = tc_request_ct(&x.tc, "/watch", true, NULL, NULL);
	hx_pump(&x);
	struct app_stream *as = app.last;
	CHECK(as != NULL);
	CHECK_EQ(h2_stream_unacked(&as->st, &window, &step), 0);
	CHECK_EQ(window, 65535);
	CHECK_EQ(step, 65535 / 2); /* no WINDOW_UPDATE yet: half the window */

	CHECK_EQ(h2_stream_write(&as->st, buf, 20000), 0);
	CHECK_EQ(h2_stream_unacked(&as->st, &window, &step), 0); /* queued, not framed */
	hx_pump(&x);
	CHECK_EQ(s->data_len, 20000);
	CHECK_EQ(h2_stream_unacked(&as->st, &window, &step), 20000);
	CHECK_EQ(h2_stream_write(&as->st, buf, 20000), 0);
	hx_pump(&x);
	CHECK_EQ(s->data_len, 40000);
	size_t owed = h2_stream_unacked(&as->st, &window, &step);
	CHECK(owed < 20000); /* past half: given back */
	/* nghttp2's client gave back what it had consumed, at least half
	 * its window, in one WINDOW_UPDATE: that is the step now. */
	CHECK(step >= 40000 - owed && step <= 40000 - owed + 1); /* as a share, rounded up */
	CHECK(step >= 65535 / 2);

	/* A client that does not read: framed up to its window, the rest
	 * waits unframed. */
	x.tc.hold = true;
	CHECK_EQ(h2_stream_write(&as->st, buf, sizeof(buf)), 0);
	hx_pump(&x);
	CHECK_EQ(h2_stream_unacked(&as->st, &window, &step), 65535);
	CHECK_EQ(h2_stream_pending(&as->st), sizeof(buf) - (65535 - owed));
	x.tc.hold = false;
	hx_pump(&x);
	CHECK_EQ(s->data_len, 40000 + sizeof(buf));
	CHECK_EQ(h2_stream_pending(&as->st), 0);
	CHECK(h2_stream_unacked(&as->st, &window, &step) < 65535 / 2);

	/* The client doubles its window (as gRPC's Go client does under
	 * load): its step, a share of the window, doubles with it. */
	size_t step64k = step;
	nghttp2_settings_entry iws = { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 131070 };
	CHECK_EQ(nghttp2_submit_settings(x.tc.session, NGHTTP2_FLAG_NONE, &iws, 1), 0);
	hx_pump(&x);
	(void)h2_stream_unacked(&as->st, &window, &step);
	CHECK_EQ(window, 131070);
	CHECK(step >= 2 * step64k - 2 && step <= 2 * step64k);

	nghttp2_nv tr = { (uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE };
	CHECK_EQ(h2_stream_end(&as->st, &tr, 1), 0);
	hx_pump(&x);
	CHECK(s->closed);
	hx_fini(&x);
}

static void respond_reset(struct app_stream *s, uint32_t flags)
{
	(void)flags;
	CHECK_EQ(h2_stream_reset(&s->st, NGHTTP2_ENHANCE_YOUR_CALM), 0);
}

static void respond_nothing(struct app_stream *s, uint32_t flags)
{
	(void)s;
	(void)flags;
}

static void test_reset_and_terminate(void)
{
	struct hx x;
	hx_init(&x, respond_reset, NULL);
	struct tc_stream *s = tc_request_ct(&x.tc, "/r", true, NULL, NULL);
	hx_pump(&x);
	CHECK(s->closed);
	CHECK_EQ(s->close_code, NGHTTP2_ENHANCE_YOUR_CALM);
	CHECK_EQ(app.last_close_code, NGHTTP2_ENHANCE_YOUR_CALM);
	hx_fini(&x);

	/* terminate: GOAWAY with the code, then done; the open stream is
	 * closed by h2_conn_free. */
	hx_init(&x, respond_nothing, NULL);
	s = tc_request_ct(&x.tc, "/t", false, NULL, NULL);
	tc_queue_raw(&x.tc, s, "abc", 3, false);
	hx_pump(&x);
	CHECK_EQ(app.opened, 1);
	CHECK_EQ(app.last->body_len, 3);
	CHECK(!app.last->remote_ended);
	CHECK_EQ(h2_conn_stream_count(x.conn), 1);
	h2_conn_terminate(x.conn, NGHTTP2_INTERNAL_ERROR);
	CHECK_EQ(app.pending_calls, 1);
	hx_pump(&x);
	CHECK(h2_conn_is_done(x.conn));
	CHECK_EQ(x.tc.ngoaway, 1);
	CHECK_EQ(x.tc.goaway_code[0], NGHTTP2_INTERNAL_ERROR);
	CHECK_EQ(app.closed_count, 0);
	h2_conn_free(x.conn);
	x.conn = NULL;
	CHECK_EQ(app.closed_count, 1);
	CHECK_EQ(app.last_close_code, H2_CONN_CLOSED);
	hx_fini(&x);
}

/* A connection-level protocol error: nghttp2 answers with GOAWAY
 * (PROTOCOL_ERROR) and the connection ends after the flush. */
static void test_protocol_error(void)
{
	struct hx x;
	hx_init(&x, NULL, NULL);
	static const uint8_t bytes[] =
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
		"\x00\x00\x00\x04\x00\x00\x00\x00\x00"      /* SETTINGS, empty */
		"\x00\x00\x02\x00\x00\x00\x00\x00\x00hi"; /* DATA on stream 0 */
	CHECK_EQ(h2_conn_recv(x.conn, bytes, sizeof(bytes) - 1), 0);
	CHECK_EQ(h2_conn_flush(x.conn, &x.tt.t), 0);
	CHECK(h2_conn_is_done(x.conn));
	/* The server's last frame is GOAWAY(PROTOCOL_ERROR). */
	const uint8_t *last = NULL;
	for (size_t off = 0; off + 9 <= x.tt.len;) {
		size_t len = (size_t)x.tt.buf[off] << 16 | x.tt.buf[off + 1] << 8 | x.tt.buf[off + 2];
		CHECK(off + 9 + len <= x.tt.len);
		last = x.tt.buf + off;
		off += 9 + len;
	}
	CHECK(last != NULL);
	CHECK_EQ(last[3], NGHTTP2_GOAWAY);
	CHECK_EQ(last[9 + 7], NGHTTP2_PROTOCOL_ERROR);
	hx_fini(&x);
}

/* ---- keepalive ---- */

static int64_t fake_now_ns;

static int64_t fake_clock(void *arg)
{
	(void)arg;
	return fake_now_ns;
}

static void tune_keepalive(struct h2_config *c)
{
	c->ping_min_ns = 1000;
	c->keepalive_ns = 100;
	c->keepalive_timeout_ns = 50;
	c->now_ns = fake_clock;
}

static void client_ping(struct hx *x)
{
	CHECK_EQ(nghttp2_submit_ping(x->tc.session, NGHTTP2_FLAG_NONE, NULL), 0);
	hx_pump(x);
}

/* grpc-go's enforcement policy: without a stream every PING after the
 * first is early; the third early one in a row gets GOAWAY
 * ENHANCE_YOUR_CALM and the connection ends. With a stream open, PINGs
 * the min time apart are fine, and a response sent in between clears the
 * strikes. */
static void test_ping_policy(void)
{
	struct hx x;
	fake_now_ns = 1;
	hx_init(&x, NULL, tune_keepalive);
	hx_pump(&x);
	for (int i = 0; i < 3; i++) {
		client_ping(&x);
		fake_now_ns += 10;
	}
	CHECK_EQ(x.tc.ngoaway, 0);
	CHECK(!h2_conn_is_done(x.conn));
	client_ping(&x);
	CHECK_EQ(x.tc.pings_acked, 4);
	CHECK_EQ(x.tc.ngoaway, 1);
	CHECK_EQ(x.tc.goaway_code[0], NGHTTP2_ENHANCE_YOUR_CALM);
	CHECK(h2_conn_is_done(x.conn));
	hx_fini(&x);

	/* a stream open: 1000 apart is fine for ever; 10 apart strikes */
	hx_init(&x, respond_nothing, tune_keepalive);
	(void)tc_request_ct(&x.tc, "/s", false, NULL, NULL);
	hx_pump(&x);
	for (int i = 0; i < 6; i++) {
		client_ping(&x);
		fake_now_ns += 1000;
	}
	CHECK_EQ(x.tc.ngoaway, 0);
	for (int i = 0; i < 3; i++) {
		client_ping(&x);
		fake_now_ns += 10;
	}
	CHECK_EQ(x.tc.ngoaway, 0);
	CHECK_EQ(h2_stream_respond(&app.last->st, nv_ok, 2, false), 0); /* HEADERS: strikes cleared */
	hx_pump(&x);
	for (int i = 0; i < 3; i++) {
		client_ping(&x);
		fake_now_ns += 10;
	}
	CHECK_EQ(x.tc.ngoaway, 0);
	client_ping(&x);
	CHECK_EQ(x.tc.ngoaway, 1);
	CHECK_EQ(x.tc.goaway_code[0], NGHTTP2_ENHANCE_YOUR_CALM);
	hx_fini(&x);
}

/* grpc-go's server keepalive: a PING after keepalive_ns without bytes
 * from the client; anything the client sends answers it; none within
 * keepalive_timeout_ns after it ends the connection. */
static void test_keepalive(void)
{
	struct hx x;
	int64_t next;
	fake_now_ns = 1000;
	hx_init(&x, NULL, tune_keepalive);
	hx_pump(&x);
	int64_t t0 = fake_now_ns;
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 99, &next), 0);
	CHECK_EQ(next, t0 + 100);
	CHECK_EQ(x.tc.pings_received, 0);
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 100, &next), 0);
	CHECK_EQ(next, t0 + 150);
	CHECK_EQ(app.pending_calls, 1);
	fake_now_ns = t0 + 120;
	hx_pump(&x); /* the client gets the PING and answers it */
	CHECK_EQ(x.tc.pings_received, 1);
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 200, &next), 0);
	CHECK_EQ(next, t0 + 220);
	/* the next PING goes unanswered */
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 220, &next), 0);
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 269, &next), 0);
	CHECK_EQ(h2_conn_keepalive(x.conn, t0 + 270, &next), -ETIMEDOUT);
	hx_fini(&x);

	/* without keepalive_ns: nothing, ever */
	hx_init(&x, NULL, NULL);
	CHECK_EQ(h2_conn_keepalive(x.conn, INT64_MAX / 2, &next), 0);
	CHECK_EQ(next, INT64_MAX);
	hx_fini(&x);
}

/* ---- the descriptor transport ---- */

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0);
	CHECK_EQ(fcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
}

static void test_transport_fd(void)
{
	int sv[2];
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	set_nonblock(sv[0]);
	set_nonblock(sv[1]);
	struct transport a, b;
	transport_fd_init(&a, sv[0]);
	transport_fd_init(&b, sv[1]);
	CHECK_EQ(a.proto, TRANSPORT_PROTO_UNKNOWN);

	char buf[64];
	CHECK_EQ(transport_read(&b, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(b.want, TRANSPORT_WANT_READ);

	struct iovec iov[3] = { { "ab", 2 }, { "", 0 }, { "cdef", 4 } };
	CHECK_EQ(transport_writev_all(&a, iov, 3), 6);
	CHECK_EQ(transport_read(&b, buf, sizeof(buf)), 6);
	CHECK(memcmp(buf, "abcdef", 6) == 0);

	/* Fill the socket: a short count, then want WRITE. */
	int small = 4096;
	CHECK_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	static uint8_t big[1 << 20];
	struct iovec bi[2] = { { big, sizeof(big) / 2 }, { big + sizeof(big) / 2, sizeof(big) / 2 } };
	ssize_t w = transport_writev_all(&a, bi, 2);
	CHECK(w > 0 && (size_t)w < sizeof(big));
	CHECK_EQ(a.want, TRANSPORT_WANT_WRITE);
	size_t got = 0;
	for (;;) {
		static uint8_t sink[65536];
		ssize_t n = transport_read(&b, sink, sizeof(sink));
		if (n == -EAGAIN)
			break;
		CHECK(n > 0);
		got += (size_t)n;
	}
	CHECK_EQ(got, (size_t)w);

	/* The peer goes: end of stream one way, -EPIPE (no SIGPIPE) the other. */
	transport_close(&b);
	CHECK_EQ(b.fd, -1);
	CHECK_EQ(transport_read(&a, buf, sizeof(buf)), 0);
	struct iovec one = { "x", 1 };
	CHECK_EQ(transport_writev(&a, &one, 1), -EPIPE);
	transport_close(&a);
	transport_close(&a); /* harmless twice */
}

int main(void)
{
	signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test */
	test_settings();
	test_plain_response();
	test_async_body_and_pending();
	test_idle_stream_releases_burst_buffer();
	test_stream_unacked();
	test_batch_produce();
	test_reset_and_terminate();
	test_protocol_error();
	test_ping_policy();
	test_keepalive();
	test_transport_fd();
	printf("test_h2: all passed\n");
	return 0;
}
