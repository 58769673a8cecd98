/*
 * Unit tests for gatewayd/transport/grpc.c over gatewayd/transport/h2.c: a real nghttp2
 * client session talks to a server connection in memory (h2_client.h)
 * and test handlers play the rest of gatewayd. Every test ends by freeing
 * the connection and the server and checking that no allocation is left.
 */
#include "h2_client.h"

/* ---- test handlers ---- */

#define HELD_MAX 64

/* What the handlers saw; reset by fx_init. */
static struct {
	int starts, messages, half_closes, cancels;
	enum grpc_cancel_reason last_reason;
	uint64_t held[HELD_MAX]; /* ids of calls the async handler keeps */
	int nheld;
	int active, max_active;
	uint8_t last_msg[64];
	size_t last_len;
	size_t big_len;          /* size of the big handler's answer */
	int chunks;              /* messages of the streaming handler */
	const char *token;       /* "token" metadata seen by the async handler */
	int64_t deadline;        /* deadline seen by the async handler */
	bool lenient;            /* sending may fail for lack of memory */
} hs;

static char hs_token[64];

/* Unary echo: every message goes back; OK at half-close. */
static void echo_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	hs.messages++;
	int rc = grpc_call_send(call, msg, len);
	if (rc < 0) {
		/* Only the allocation-failure test may see this. */
		CHECK(hs.lenient && rc == -ENOMEM);
		CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "no memory"), 0);
	}
}

static void echo_half_close(struct grpc_call *call)
{
	hs.half_closes++;
	CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
}

static void count_start(struct grpc_call *call)
{
	(void)call;
	hs.starts++;
}

static void count_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	hs.cancels++;
	hs.last_reason = why;
	/* Nothing may be sent from here. */
	CHECK_EQ(grpc_call_send(call, "x", 1), -ECANCELED);
	CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_OK, NULL), -ECANCELED);
}

static const struct grpc_handler echo_handler = {
	.on_call_start = count_start,
	.on_message = echo_message,
	.on_half_close = echo_half_close,
	.on_cancel = count_cancel,
};

/* Async: keeps the call's id; a test answers it later. */
static void async_start(struct grpc_call *call)
{
	hs.starts++;
	CHECK(hs.nheld < HELD_MAX);
	CHECK(grpc_call_id(call) != 0);
	hs.held[hs.nheld++] = grpc_call_id(call);
	hs.active++;
	if (hs.active > hs.max_active)
		hs.max_active = hs.active;
	size_t len;
	const uint8_t *tok = grpc_call_metadata(call, "token", &len);
	if (tok) {
		snprintf(hs_token, sizeof(hs_token), "%.*s", (int)len, tok);
		hs.token = hs_token;
	}
	hs.deadline = grpc_call_deadline_ns(call);
}

static void async_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	(void)call;
	hs.messages++;
	hs.last_len = len;
	memcpy(hs.last_msg, msg, len < sizeof(hs.last_msg) ? len : sizeof(hs.last_msg));
}

static void async_half_close(struct grpc_call *call)
{
	(void)call;
	hs.half_closes++;
}

static void async_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	hs.active--;
	count_cancel(call, why);
}

static const struct grpc_handler async_handler = {
	.on_call_start = async_start,
	.on_message = async_message,
	.on_half_close = async_half_close,
	.on_cancel = async_cancel,
};

/* Answers a held call the way a result from the rings would: by id. */
static int answer(struct grpc_server *srv, uint64_t id, const char *reply, enum grpc_status code,
		  const char *message)
{
	struct grpc_call *call = grpc_call_find(srv, id);
	if (!call)
		return -ENOENT;
	if (reply)
		CHECK_EQ(grpc_call_send(call, reply, strlen(reply)), 0);
	CHECK_EQ(grpc_call_finish(call, code, message), 0);
	hs.active--;
	CHECK(grpc_call_find(srv, id) == NULL);
	return 0;
}

/* Big: one large answer at half-close. */
static void fill_pattern(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static bool check_pattern(const uint8_t *p, size_t len, uint32_t seed)
{
	uint8_t *want = malloc(len ? len : 1);
	CHECK(want != NULL);
	fill_pattern(want, len, seed);
	bool ok = memcmp(p, want, len) == 0;
	free(want);
	return ok;
}

static void big_half_close(struct grpc_call *call)
{
	hs.half_closes++;
	uint8_t *p = grpc_call_send_reserve(call, hs.big_len);
	CHECK(p != NULL);
	fill_pattern(p, hs.big_len, 7);
	CHECK_EQ(grpc_call_pending_bytes(call), hs.big_len + GRPC_PREFIX_LEN);
	CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
}

static const struct grpc_handler big_handler = {
	.on_call_start = count_start,
	.on_half_close = big_half_close,
	.on_cancel = count_cancel,
};

/* Server streaming: hs.chunks messages of 40000 bytes. */
static void stream_half_close(struct grpc_call *call)
{
	uint8_t chunk[40000];
	for (int i = 0; i < hs.chunks; i++) {
		fill_pattern(chunk, sizeof(chunk), (uint32_t)i);
		CHECK_EQ(grpc_call_send(call, chunk, sizeof(chunk)), 0);
	}
	CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
}

static const struct grpc_handler stream_handler = {
	.on_call_start = count_start,
	.on_half_close = stream_half_close,
	.on_cancel = count_cancel,
};

/* ---- fixture ---- */

struct fx {
	struct tc_mem mem;
	struct grpc_server *srv;
	struct h2_conn *conn;
	struct tc_transport tt;
	struct tc_client tc;
	int64_t now;
};

static int64_t fx_clock(void *arg)
{
	return ((struct fx *)arg)->now;
}

#define MAX_REQUEST_BYTES 1000

static void fx_config(struct fx *f, struct grpc_server_config *cfg)
{
	grpc_server_config_default(cfg, MAX_REQUEST_BYTES);
	cfg->h2.mem = &f->mem.mem;
	cfg->now_ns = fx_clock;
	cfg->clock_arg = f;
}

/* A server with the test handlers and one connection; tune, if not NULL,
 * adjusts the configuration first. */
static void fx_init_tuned(struct fx *f, void (*tune)(struct grpc_server_config *))
{
	struct grpc_server_config cfg;
	memset(f, 0, sizeof(*f));
	memset(&hs, 0, sizeof(hs));
	tc_mem_init(&f->mem);
	f->now = 1000000000;
	fx_config(f, &cfg);
	if (tune)
		tune(&cfg);
	CHECK_EQ(grpc_server_new(&cfg, &f->srv), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/etcdserverpb.KV/Range", &echo_handler, NULL), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/etcdserverpb.KV/Put", &async_handler, NULL), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/etcdserverpb.KV/Txn", &big_handler, NULL), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/etcdserverpb.Watch/Watch", &echo_handler, NULL), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/etcdserverpb.Maintenance/Snapshot", &stream_handler,
				    NULL), 0);
	CHECK_EQ(grpc_server_handle(f->srv, "/grpc.health.v1.Health/Check", &echo_handler, NULL), 0);
	CHECK_EQ(grpc_server_conn_new(f->srv, &f->conn), 0);
	tc_transport_init(&f->tt);
	tc_init(&f->tc, 0);
}

static void fx_init(struct fx *f)
{
	fx_init_tuned(f, NULL);
}

static void fx_fini(struct fx *f)
{
	grpc_server_conn_free(f->conn);
	CHECK_EQ(grpc_server_call_count(f->srv), 0);
	grpc_server_free(f->srv);
	CHECK_EQ(f->mem.live, 0);
	tc_fini(&f->tc);
	tc_transport_fini(&f->tt);
}

static void fx_pump(struct fx *f)
{
	tc_pump_mem(&f->tc, f->conn, &f->tt, &f->mem);
	CHECK_EQ(f->tc.server_rc, 0);
}

/* ---- tests ---- */

static void test_unary_echo(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *s = tc_request(&f.tc, "/etcdserverpb.KV/Range", "token", "abc", NULL);
	tc_queue_message(&f.tc, s, 0, "hello", 5, true);
	fx_pump(&f);

	CHECK(s->closed);
	CHECK_EQ(s->close_code, NGHTTP2_NO_ERROR);
	CHECK_EQ(s->http_status, 200);
	CHECK(strcmp(s->content_type, "application/grpc") == 0);
	CHECK_EQ(s->grpc_status, 0);
	CHECK(s->trailers_seen);
	CHECK_EQ(s->grpc_message[0], '\0');
	size_t len;
	const uint8_t *m = tc_message(s, 0, &len);
	CHECK(m && len == 5 && memcmp(m, "hello", 5) == 0);
	CHECK_EQ(tc_message_count(s), 1);
	CHECK_EQ(hs.starts, 1);
	CHECK_EQ(hs.half_closes, 1);
	CHECK_EQ(hs.cancels, 0);
	CHECK_EQ(grpc_server_call_count(f.srv), 0);

	/* A second call on the same connection, an empty message this time,
	 * and a path outside the registry. */
	s = tc_request(&f.tc, "/grpc.health.v1.Health/Check", NULL);
	tc_queue_message(&f.tc, s, 0, "", 0, true);
	fx_pump(&f);
	CHECK_EQ(s->grpc_status, 0);
	m = tc_message(s, 0, &len);
	CHECK(m && len == 0);
	tc_save_corpus(&f.tc, "unary_echo");
	fx_fini(&f);
}

static void test_async_answer_and_metadata(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *s = tc_request(&f.tc, "/etcdserverpb.KV/Put", "token", "secret-token",
					 "grpc-timeout", "5S", NULL);
	tc_queue_message(&f.tc, s, 0, "put", 3, true);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 1);
	CHECK_EQ(hs.messages, 1);
	CHECK_EQ(hs.half_closes, 1);
	CHECK(hs.token && strcmp(hs.token, "secret-token") == 0);
	CHECK_EQ(hs.deadline, f.now + 5000000000LL);
	CHECK(!s->closed);
	CHECK_EQ(grpc_server_timeout_ms(f.srv), 5000);

	/* The answer arrives "from the rings" a loop turn later. */
	CHECK_EQ(answer(f.srv, hs.held[0], "done", GRPC_STATUS_FAILED_PRECONDITION,
			"etcdserver: requested lease not found"), 0);
	CHECK_EQ(grpc_server_timeout_ms(f.srv), -1);
	fx_pump(&f);
	CHECK(s->closed);
	CHECK_EQ(s->grpc_status, GRPC_STATUS_FAILED_PRECONDITION);
	CHECK(strcmp(s->grpc_message, "etcdserver: requested lease not found") == 0);
	size_t len;
	const uint8_t *m = tc_message(s, 0, &len);
	CHECK(m && len == 4 && memcmp(m, "done", 4) == 0);
	/* A second answer for the same id is dropped. */
	CHECK_EQ(answer(f.srv, hs.held[0], "again", GRPC_STATUS_OK, NULL), -ENOENT);
	fx_fini(&f);
}

static void test_trailers_only_error_and_encoding(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *s = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_end(&f.tc, s);
	fx_pump(&f);
	/* Non-ASCII and '%' are percent-encoded, and decode back. */
	const char *msg = "etcdserver: 100% sure \xc3\xa9\n";
	CHECK_EQ(answer(f.srv, hs.held[0], NULL, GRPC_STATUS_INVALID_ARGUMENT, msg), 0);
	fx_pump(&f);
	CHECK(s->closed);
	CHECK_EQ(s->http_status, 200);
	CHECK_EQ(s->grpc_status, GRPC_STATUS_INVALID_ARGUMENT);
	CHECK(!s->trailers_seen); /* trailers-only: status in the first HEADERS */
	CHECK(strcmp(s->grpc_message, msg) == 0);
	CHECK_EQ(s->data_len, 0);
	fx_fini(&f);
}

/* A response far larger than the client's 64 KiB window. */
static void test_big_response_flow_control(void)
{
	struct fx f;
	fx_init(&f);
	hs.big_len = 3u << 20;
	struct tc_stream *s = tc_request(&f.tc, "/etcdserverpb.KV/Txn", NULL);
	tc_queue_message(&f.tc, s, 0, "q", 1, true);
	fx_pump(&f);
	CHECK(s->closed);
	CHECK_EQ(s->grpc_status, 0);
	size_t len;
	const uint8_t *m = tc_message(s, 0, &len);
	CHECK(m && len == hs.big_len);
	CHECK(check_pattern(m, len, 7));
	fx_fini(&f);
}

/* The same through a transport that takes 1000 bytes per round: the
 * unwritten rest waits in the connection and goes out in order. */
static void test_partial_writes(void)
{
	struct fx f;
	fx_init(&f);
	f.tt.round_limit = 1000;
	hs.big_len = 300000;
	hs.chunks = 5;
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Txn", NULL);
	tc_queue_message(&f.tc, a, 0, "q", 1, true);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.Maintenance/Snapshot", NULL);
	tc_end(&f.tc, b);
	fx_pump(&f);
	CHECK(a->closed && b->closed);
	CHECK_EQ(a->grpc_status, 0);
	CHECK_EQ(b->grpc_status, 0);
	size_t len;
	const uint8_t *m = tc_message(a, 0, &len);
	CHECK(m && len == hs.big_len && check_pattern(m, len, 7));
	CHECK_EQ(tc_message_count(b), 5);
	for (int i = 0; i < 5; i++) {
		m = tc_message(b, i, &len);
		CHECK(m && len == 40000 && check_pattern(m, len, (uint32_t)i));
	}
	fx_fini(&f);
}

static void tune_big_messages(struct grpc_server_config *cfg)
{
	cfg->max_recv_message_bytes = 1u << 20;
}

/* A 200 KB request in 7-byte DATA frames (the prefix itself split), and
 * several small messages packed in one frame. */
static void test_split_message(void)
{
	struct fx f;
	fx_init_tuned(&f, tune_big_messages);

	/* A small message in 7-byte frames first. */
	f.tc.chunk = 7;
	struct tc_stream *s = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	uint8_t small[300];
	fill_pattern(small, sizeof(small), 5);
	tc_queue_message(&f.tc, s, 0, small, sizeof(small), true);
	fx_pump(&f);
	CHECK_EQ(s->grpc_status, 0);
	size_t len;
	const uint8_t *m = tc_message(s, 0, &len);
	CHECK(m && len == sizeof(small) && memcmp(m, small, len) == 0);

	/* Several messages packed in one frame. */
	f.tc.chunk = 0;
	s = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	tc_queue_message(&f.tc, s, 0, "a", 1, false);
	tc_queue_message(&f.tc, s, 0, "bb", 2, false);
	tc_queue_message(&f.tc, s, 0, "ccc", 3, true);
	fx_pump(&f);
	CHECK_EQ(s->grpc_status, 0);
	CHECK_EQ(tc_message_count(s), 3);
	m = tc_message(s, 2, &len);
	CHECK(m && len == 3 && memcmp(m, "ccc", 3) == 0);
	tc_save_corpus(&f.tc, "split_message");

	/* 200 KB in 7-byte frames. */
	size_t big = 200000;
	uint8_t *msg = malloc(big);
	CHECK(msg != NULL);
	fill_pattern(msg, big, 3);
	f.tc.chunk = 7;
	s = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	tc_queue_message(&f.tc, s, 0, msg, big, true);
	fx_pump(&f);
	CHECK(s->closed);
	CHECK_EQ(s->grpc_status, 0);
	m = tc_message(s, 0, &len);
	CHECK(m && len == big && memcmp(m, msg, big) == 0);
	CHECK_EQ(hs.messages, 5);
	free(msg);
	fx_fini(&f);
}

/* Two bidi streams, messages interleaved, each echo on its own stream. */
static void test_bidi_interleaved(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	char m[32];
	for (int i = 0; i < 10; i++) {
		snprintf(m, sizeof(m), "a%d", i);
		tc_queue_message(&f.tc, a, 0, m, strlen(m), false);
		snprintf(m, sizeof(m), "b%d", i);
		tc_queue_message(&f.tc, b, 0, m, strlen(m), false);
		fx_pump(&f);
		CHECK_EQ(tc_message_count(a), i + 1);
		CHECK_EQ(tc_message_count(b), i + 1);
		size_t len;
		const uint8_t *r = tc_message(b, i, &len);
		CHECK(r && len == strlen(m) && memcmp(r, m, len) == 0);
		CHECK(!a->closed && !b->closed);
	}
	/* Headers came once, before the first message. */
	CHECK_EQ(a->http_status, 200);
	tc_end(&f.tc, a);
	fx_pump(&f);
	CHECK(a->closed && !b->closed);
	CHECK_EQ(a->grpc_status, 0);
	tc_queue_message(&f.tc, b, 0, "last", 4, true);
	fx_pump(&f);
	CHECK(b->closed);
	CHECK_EQ(tc_message_count(b), 11);
	CHECK_EQ(hs.messages, 21);
	tc_save_corpus(&f.tc, "bidi");
	fx_fini(&f);
}

static void expect_status(struct tc_stream *s, int http, int code, const char *message)
{
	CHECK(s->closed);
	CHECK_EQ(s->http_status, http);
	CHECK_EQ(s->grpc_status, code);
	if (strcmp(s->grpc_message, message) != 0) {
		fprintf(stderr, "grpc-message \"%s\", want \"%s\"\n", s->grpc_message, message);
		exit(1);
	}
}

static void test_unknown_paths(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Nope", NULL);
	tc_queue_message(&f.tc, a, 0, "x", 1, true);
	struct tc_stream *b = tc_request(&f.tc, "/foo.Bar/Baz", NULL);
	tc_end(&f.tc, b);
	/* In the registry, but no handler set. */
	struct tc_stream *c = tc_request(&f.tc, "/etcdserverpb.Lease/LeaseGrant", NULL);
	tc_end(&f.tc, c);
	struct tc_stream *d = tc_request(&f.tc, "/nopath", NULL);
	tc_end(&f.tc, d);
	fx_pump(&f);
	expect_status(a, 200, GRPC_STATUS_UNIMPLEMENTED, "unknown method Nope for service etcdserverpb.KV");
	expect_status(b, 200, GRPC_STATUS_UNIMPLEMENTED, "unknown service foo.Bar");
	expect_status(c, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "unknown method LeaseGrant for service etcdserverpb.Lease");
	expect_status(d, 200, GRPC_STATUS_UNIMPLEMENTED, "malformed method name: \"/nopath\"");
	CHECK(!a->trailers_seen);
	CHECK_EQ(hs.starts, 0);
	tc_save_corpus(&f.tc, "unknown_paths");
	fx_fini(&f);
}

static void test_content_type_and_method(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request_ct(&f.tc, "/etcdserverpb.KV/Range", false, "text/plain", NULL);
	tc_queue_raw(&f.tc, a, "hello", 5, false); /* still sending: RST(NO_ERROR) follows */
	struct tc_stream *b = tc_request_ct(&f.tc, "/etcdserverpb.KV/Range", true, NULL, NULL);
	struct tc_stream *c = tc_request_ct(&f.tc, "/etcdserverpb.KV/Range", true, "application/grpcx",
					    NULL);
	struct tc_stream *d = tc_request_ct(&f.tc, "/etcdserverpb.KV/Range", false,
					    "application/grpc+proto", NULL);
	tc_queue_message(&f.tc, d, 0, "ok", 2, true);
	fx_pump(&f);
	expect_status(a, 415, GRPC_STATUS_INVALID_ARGUMENT,
		      "invalid gRPC request content-type \"text/plain\"");
	CHECK_EQ(a->close_code, NGHTTP2_NO_ERROR);
	expect_status(b, 415, GRPC_STATUS_INVALID_ARGUMENT, "invalid gRPC request content-type \"\"");
	expect_status(c, 415, GRPC_STATUS_INVALID_ARGUMENT,
		      "invalid gRPC request content-type \"application/grpcx\"");
	expect_status(d, 200, 0, "");
	CHECK_EQ(hs.starts, 1);

	/* A GET is reset, as grpc-go does. */
	nghttp2_nv nva[] = {
		{ (uint8_t *)":method", (uint8_t *)"GET", 7, 3, 0 },
		{ (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, 0 },
		{ (uint8_t *)":path", (uint8_t *)"/etcdserverpb.KV/Range", 5, 22, 0 },
		{ (uint8_t *)":authority", (uint8_t *)"x", 10, 1, 0 },
		{ (uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, 0 },
	};
	struct tc_stream *e = &f.tc.st[f.tc.nst++];
	memset(e, 0, sizeof(*e));
	e->http_status = e->grpc_status = -1;
	e->id = nghttp2_submit_request(f.tc.session, NULL, nva, 5, NULL, NULL);
	CHECK(e->id > 0);
	fx_pump(&f);
	CHECK(e->closed);
	CHECK_EQ(e->close_code, NGHTTP2_PROTOCOL_ERROR);
	CHECK_EQ(hs.starts, 1);
	tc_save_corpus(&f.tc, "content_type");
	fx_fini(&f);
}

static void test_compression_refused(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	tc_queue_message(&f.tc, a, 0, "fine", 4, false);
	tc_queue_message(&f.tc, a, 1, "squeezed", 8, false);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Range", "grpc-encoding", "gzip", NULL);
	tc_queue_message(&f.tc, b, 1, "squeezed", 8, true);
	struct tc_stream *c = tc_request(&f.tc, "/etcdserverpb.KV/Range", "grpc-encoding", "identity",
					 NULL);
	tc_queue_message(&f.tc, c, 0, "plain", 5, true);
	struct tc_stream *d = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	tc_queue_message(&f.tc, d, 7, "odd", 3, true);
	fx_pump(&f);
	/* The first message was answered before the bad one ended the call. */
	CHECK_EQ(tc_message_count(a), 1);
	expect_status(a, 200, GRPC_STATUS_INTERNAL,
		      "grpc: compressed flag set with identity or empty encoding");
	CHECK(a->trailers_seen);
	CHECK_EQ(a->close_code, NGHTTP2_NO_ERROR);
	expect_status(b, 200, GRPC_STATUS_UNIMPLEMENTED,
		      "grpc: Decompressor is not installed for grpc-encoding \"gzip\"");
	expect_status(c, 200, 0, "");
	expect_status(d, 200, GRPC_STATUS_INTERNAL, "grpc: received unexpected payload format 7");
	CHECK_EQ(hs.cancels, 2);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_BAD_MESSAGE);
	tc_save_corpus(&f.tc, "compressed");
	fx_fini(&f);
}

/* Refused from the length prefix alone, before the body arrives. */
static void test_oversize_message(void)
{
	struct fx f;
	fx_init(&f);
	size_t max = MAX_REQUEST_BYTES + GRPC_OVERHEAD_BYTES;
	uint8_t prefix[GRPC_PREFIX_LEN];
	grpc_prefix_write(prefix, false, (uint32_t)max + 1);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_queue_raw(&f.tc, a, prefix, sizeof(prefix), false);
	tc_queue_raw(&f.tc, a, "some", 4, false);
	fx_pump(&f);
	char want[128];
	snprintf(want, sizeof(want), "grpc: received message larger than max (%zu vs. %zu)", max + 1,
		 max);
	expect_status(a, 200, GRPC_STATUS_RESOURCE_EXHAUSTED, want);
	CHECK_EQ(hs.cancels, 1);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_BAD_MESSAGE);
	CHECK(grpc_call_find(f.srv, hs.held[0]) == NULL);
	tc_save_corpus(&f.tc, "oversize");

	/* Exactly the limit is accepted. */
	uint8_t *msg = calloc(1, max);
	CHECK(msg != NULL);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	tc_queue_message(&f.tc, b, 0, msg, max, true);
	fx_pump(&f);
	expect_status(b, 200, 0, "");
	size_t len;
	CHECK(tc_message(b, 0, &len) && len == max);
	free(msg);
	fx_fini(&f);
}

static void tune_conn_buffer(struct grpc_server_config *cfg)
{
	cfg->max_conn_buffered_bytes = 5000;
}

/* Partial messages of one connection share a memory budget: the stream
 * that would overrun it is refused, the others go on. */
static void test_conn_buffer_limit(void)
{
	struct fx f;
	fx_init_tuned(&f, tune_conn_buffer);
	uint8_t body[4000];
	fill_pattern(body, sizeof(body), 9);
	uint8_t prefix[GRPC_PREFIX_LEN];
	grpc_prefix_write(prefix, false, sizeof(body));
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	tc_queue_raw(&f.tc, a, prefix, sizeof(prefix), false);
	tc_queue_raw(&f.tc, a, body, 3000, false);
	fx_pump(&f);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	tc_queue_raw(&f.tc, b, prefix, sizeof(prefix), false);
	tc_queue_raw(&f.tc, b, body, 3000, false);
	fx_pump(&f);
	expect_status(b, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
		      "grpc: too many partial messages on this connection (limit 5000 bytes)");
	CHECK(!a->closed);
	tc_queue_raw(&f.tc, a, body + 3000, sizeof(body) - 3000, true);
	fx_pump(&f);
	expect_status(a, 200, 0, "");
	size_t len;
	const uint8_t *m = tc_message(a, 0, &len);
	CHECK(m && len == sizeof(body) && memcmp(m, body, len) == 0);
	/* The budget was given back: the same again fits, in pieces. */
	f.tc.chunk = 1000;
	struct tc_stream *c = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", NULL);
	tc_queue_message(&f.tc, c, 0, body, sizeof(body), true);
	fx_pump(&f);
	expect_status(c, 200, 0, "");
	fx_fini(&f);
}

static void tune_header_list(struct grpc_server_config *cfg)
{
	cfg->h2.max_header_list_bytes = 2048;
}

static void test_header_list_limit(void)
{
	struct fx f;
	fx_init_tuned(&f, tune_header_list);
	char big[3000];
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Range", "x-big", big, NULL);
	tc_end(&f.tc, a);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Range", NULL);
	tc_queue_message(&f.tc, b, 0, "ok", 2, true);
	fx_pump(&f);
	expect_status(a, 200, GRPC_STATUS_RESOURCE_EXHAUSTED,
		      "grpc: request header list larger than max (2048 bytes)");
	expect_status(b, 200, 0, "");
	CHECK_EQ(hs.starts, 1);
	fx_fini(&f);
}

static void test_deadline(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", "grpc-timeout", "100m", NULL);
	tc_queue_message(&f.tc, a, 0, "x", 1, false); /* the client keeps its side open */
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Put", "grpc-timeout", "1S", NULL);
	tc_end(&f.tc, b);
	struct tc_stream *c = tc_request(&f.tc, "/etcdserverpb.KV/Put", "grpc-timeout", "soon", NULL);
	tc_end(&f.tc, c);
	struct tc_stream *d = tc_request(&f.tc, "/etcdserverpb.KV/Put", "grpc-timeout", "123456789S",
					 NULL);
	tc_end(&f.tc, d);
	fx_pump(&f);
	expect_status(c, 200, GRPC_STATUS_INTERNAL, "malformed grpc-timeout: \"soon\"");
	expect_status(d, 200, GRPC_STATUS_INTERNAL, "malformed grpc-timeout: \"123456789S\"");
	CHECK_EQ(hs.starts, 2);
	CHECK_EQ(grpc_server_next_deadline_ns(f.srv), f.now + 100000000LL);
	CHECK_EQ(grpc_server_timeout_ms(f.srv), 100);

	f.now += 99999999;
	CHECK_EQ(grpc_server_expire(f.srv), 0);
	CHECK_EQ(grpc_server_timeout_ms(f.srv), 1);
	f.now += 1;
	CHECK_EQ(grpc_server_timeout_ms(f.srv), 0);
	CHECK_EQ(grpc_server_expire(f.srv), 1);
	CHECK_EQ(hs.cancels, 1);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_DEADLINE);
	CHECK(grpc_call_find(f.srv, hs.held[0]) == NULL);
	CHECK(grpc_call_find(f.srv, hs.held[1]) != NULL);
	fx_pump(&f);
	expect_status(a, 200, GRPC_STATUS_DEADLINE_EXCEEDED, "context deadline exceeded");
	/* The client was still sending: the stream was reset after the
	 * status, with NO_ERROR. */
	CHECK_EQ(a->close_code, NGHTTP2_NO_ERROR);
	/* A late answer is dropped. */
	CHECK_EQ(answer(f.srv, hs.held[0], "late", GRPC_STATUS_OK, NULL), -ENOENT);

	f.now += 900000000;
	CHECK_EQ(grpc_server_expire(f.srv), 1);
	fx_pump(&f);
	expect_status(b, 200, GRPC_STATUS_DEADLINE_EXCEEDED, "context deadline exceeded");
	CHECK_EQ(grpc_server_timeout_ms(f.srv), -1);
	tc_save_corpus(&f.tc, "deadline");
	fx_fini(&f);
}

static void test_client_cancel(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", "grpc-timeout", "10S", NULL);
	tc_queue_message(&f.tc, a, 0, "x", 1, false);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 1);
	uint64_t id = hs.held[0];
	CHECK(grpc_call_find(f.srv, id) != NULL);
	tc_cancel(&f.tc, a);
	fx_pump(&f);
	CHECK_EQ(hs.cancels, 1);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_CLIENT);
	CHECK(grpc_call_find(f.srv, id) == NULL);
	CHECK_EQ(grpc_server_timeout_ms(f.srv), -1);
	CHECK_EQ(answer(f.srv, id, "late", GRPC_STATUS_OK, NULL), -ENOENT);
	CHECK_EQ(grpc_server_call_count(f.srv), 0);

	/* The connection going away cancels what is left. */
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_end(&f.tc, b);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 2);
	grpc_server_conn_free(f.conn);
	f.conn = NULL;
	CHECK_EQ(hs.cancels, 2);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_CONN);
	CHECK(grpc_call_find(f.srv, hs.held[1]) == NULL);
	tc_save_corpus(&f.tc, "cancel");
	fx_fini(&f);
}

/* The admission check (grpc_server_set_admit): a call with "refuse"
 * metadata is refused before its handler sees it; one with "tag" is
 * tagged, and grpc_server_cancel_tagged ends exactly the tagged calls
 * still live, with the status given and on_cancel(GRPC_CANCEL_SERVER). */
static int admit_paths;

static enum grpc_status test_admit(void *arg, struct grpc_call *call, const char *path,
				   const char **message)
{
	size_t len;

	CHECK(arg == &admit_paths);
	if (strcmp(path, "/etcdserverpb.KV/Put") == 0)
		admit_paths++;
	if (grpc_call_metadata(call, "refuse", &len)) {
		*message = "etcdserver: no leader";
		return GRPC_STATUS_UNAVAILABLE;
	}
	if (grpc_call_metadata(call, "tag", &len))
		grpc_call_tag(call);
	return GRPC_STATUS_OK;
}

static void test_admit_and_cancel_tagged(void)
{
	struct fx f;
	fx_init(&f);
	admit_paths = 0;
	grpc_server_set_admit(f.srv, test_admit, &admit_paths);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", "tag", "1", NULL);
	tc_queue_message(&f.tc, a, 0, "x", 1, false);
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_queue_message(&f.tc, b, 0, "x", 1, false);
	struct tc_stream *c = tc_request(&f.tc, "/etcdserverpb.KV/Put", "refuse", "1", NULL);
	tc_end(&f.tc, c);
	struct tc_stream *d = tc_request(&f.tc, "/etcdserverpb.KV/Put", "tag", "1", NULL);
	tc_queue_message(&f.tc, d, 0, "x", 1, false);
	fx_pump(&f);
	CHECK_EQ(admit_paths, 4);
	expect_status(c, 200, GRPC_STATUS_UNAVAILABLE, "etcdserver: no leader");
	CHECK_EQ(hs.starts, 3); /* the refused call never reached its handler */
	CHECK_EQ(grpc_server_tagged_count(f.srv), 2);

	/* A tagged call that ends otherwise leaves the set. */
	tc_cancel(&f.tc, d);
	fx_pump(&f);
	CHECK_EQ(hs.cancels, 1);
	CHECK_EQ(grpc_server_tagged_count(f.srv), 1);

	CHECK_EQ(grpc_server_cancel_tagged(f.srv, GRPC_STATUS_UNAVAILABLE, "etcdserver: no leader"),
		 1);
	CHECK_EQ(hs.cancels, 2);
	CHECK_EQ(hs.last_reason, GRPC_CANCEL_SERVER);
	CHECK_EQ(grpc_server_tagged_count(f.srv), 0);
	CHECK(grpc_call_find(f.srv, hs.held[0]) == NULL);
	fx_pump(&f);
	expect_status(a, 200, GRPC_STATUS_UNAVAILABLE, "etcdserver: no leader");
	CHECK(!b->closed);
	CHECK_EQ(grpc_server_cancel_tagged(f.srv, GRPC_STATUS_UNAVAILABLE, "x"), 0);
	CHECK_EQ(answer(f.srv, hs.held[1], "done", GRPC_STATUS_OK, NULL), 0);
	fx_pump(&f);
	expect_status(b, 200, GRPC_STATUS_OK, "");
	fx_fini(&f);
}

/* Graceful shutdown: notice, PING round trip, final GOAWAY naming the
 * last stream taken; the call in flight completes. */
static void test_goaway_drain(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_end(&f.tc, a);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 1);

	h2_conn_shutdown(f.conn);
	fx_pump(&f);
	CHECK_EQ(f.tc.ngoaway, 2);
	CHECK_EQ(f.tc.goaway_last[0], INT32_MAX); /* the notice */
	CHECK_EQ(f.tc.goaway_last[1], a->id);
	CHECK_EQ(f.tc.goaway_code[1], NGHTTP2_NO_ERROR);
	CHECK(!h2_conn_is_done(f.conn));
	CHECK(!a->closed);

	CHECK_EQ(answer(f.srv, hs.held[0], "bye", GRPC_STATUS_OK, NULL), 0);
	fx_pump(&f);
	expect_status(a, 200, 0, "");
	CHECK(h2_conn_is_done(f.conn));
	fx_fini(&f);
}

/* New streams after the final GOAWAY are not served; the client learns
 * from the GOAWAY that they were not processed. */
static void test_goaway_refuses_new_streams(void)
{
	struct fx f;
	fx_init(&f);
	struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_end(&f.tc, a);
	fx_pump(&f);

	/* Twice: the final GOAWAY goes at once. The client does not see it
	 * before sending its next request. */
	h2_conn_shutdown(f.conn);
	h2_conn_shutdown(f.conn);
	f.tc.hold = true;
	struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
	tc_end(&f.tc, b);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 1);
	f.tc.hold = false;
	fx_pump(&f);
	CHECK_EQ(f.tc.goaway_last[f.tc.ngoaway - 1], a->id);
	CHECK(b->closed);
	CHECK_EQ(b->close_code, NGHTTP2_REFUSED_STREAM);
	CHECK(!a->closed);
	CHECK_EQ(answer(f.srv, hs.held[0], NULL, GRPC_STATUS_OK, NULL), 0);
	fx_pump(&f);
	expect_status(a, 200, 0, "");
	CHECK(h2_conn_is_done(f.conn));
	tc_save_corpus(&f.tc, "goaway");
	fx_fini(&f);
}

static void tune_stream_limit(struct grpc_server_config *cfg)
{
	cfg->h2.max_concurrent_streams = 16;
}

/* max_concurrent_streams is honoured and enforced. */
static void test_concurrent_stream_limit(void)
{
	struct fx f;
	fx_init_tuned(&f, tune_stream_limit);

	/* Sent before the client has the server's SETTINGS: the 17th is
	 * refused by the server itself. */
	struct tc_stream *s[20];
	for (int i = 0; i < 17; i++) {
		s[i] = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
		tc_end(&f.tc, s[i]);
	}
	fx_pump(&f);
	CHECK_EQ(hs.starts, 16);
	CHECK_EQ(hs.max_active, 16);
	CHECK(s[16]->closed);
	CHECK_EQ(s[16]->close_code, NGHTTP2_REFUSED_STREAM);

	/* Now the client knows the limit: three more wait in the client
	 * until calls finish. */
	for (int i = 17; i < 20; i++) {
		s[i] = tc_request(&f.tc, "/etcdserverpb.KV/Put", NULL);
		tc_end(&f.tc, s[i]);
	}
	fx_pump(&f);
	CHECK_EQ(hs.starts, 16);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(answer(f.srv, hs.held[i], "r", GRPC_STATUS_OK, NULL), 0);
	fx_pump(&f);
	CHECK_EQ(hs.starts, 19);
	CHECK_EQ(hs.max_active, 16);
	for (int i = 3; i < 19; i++)
		CHECK_EQ(answer(f.srv, hs.held[i], "r", GRPC_STATUS_OK, NULL), 0);
	fx_pump(&f);
	for (int i = 0; i < 20; i++) {
		CHECK(s[i]->closed);
		if (i != 16)
			CHECK_EQ(s[i]->grpc_status, 0);
	}
	CHECK_EQ(grpc_server_call_count(f.srv), 0);
	fx_fini(&f);
}

/* Garbage instead of the preface: the connection is dropped, no leak. */
static void test_bad_preface(void)
{
	struct fx f;
	fx_init(&f);
	static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK_EQ(h2_conn_recv(f.conn, (const uint8_t *)junk, sizeof(junk) - 1), -EPROTO);
	CHECK(h2_conn_is_done(f.conn));
	CHECK_EQ(h2_conn_flush(f.conn, &f.tt.t), -EPROTO);
	fx_fini(&f);
}

/* Every allocation failing in turn: each run ends cleanly, nothing
 * leaks, and the run without failure still works. */
static void test_allocation_failures(void)
{
	long total = 0;
	for (long n = 1;; n++) {
		struct fx f;
		struct grpc_server_config cfg;
		memset(&f, 0, sizeof(f));
		memset(&hs, 0, sizeof(hs));
		tc_mem_init(&f.mem);
		f.mem.fail_at = n;
		hs.lenient = true;
		fx_config(&f, &cfg);
		if (grpc_server_new(&cfg, &f.srv) < 0) {
			CHECK_EQ(f.mem.live, 0);
			continue;
		}
		bool ok = grpc_server_handle(f.srv, "/etcdserverpb.Watch/Watch", &echo_handler, NULL) == 0 &&
			  grpc_server_handle(f.srv, "/etcdserverpb.KV/Put", &async_handler, NULL) == 0 &&
			  grpc_server_conn_new(f.srv, &f.conn) == 0;
		if (ok) {
			tc_transport_init(&f.tt);
			tc_init(&f.tc, 0);
			struct tc_stream *a = tc_request(&f.tc, "/etcdserverpb.Watch/Watch", "token", "t",
							 NULL);
			tc_queue_message(&f.tc, a, 0, "one", 3, false);
			struct tc_stream *b = tc_request(&f.tc, "/etcdserverpb.KV/Put",
							 "grpc-timeout", "1S", NULL);
			tc_end(&f.tc, b);
			tc_pump_mem(&f.tc, f.conn, &f.tt, &f.mem);
			tc_queue_message(&f.tc, a, 0, "two", 3, true);
			tc_pump_mem(&f.tc, f.conn, &f.tt, &f.mem);
			f.now += 2000000000;
			grpc_server_expire(f.srv);
			tc_pump_mem(&f.tc, f.conn, &f.tt, &f.mem);
			if (f.mem.failed == 0) {
				expect_status(a, 200, 0, "");
				CHECK_EQ(tc_message_count(a), 2);
				expect_status(b, 200, GRPC_STATUS_DEADLINE_EXCEEDED,
					      "context deadline exceeded");
			}
			tc_fini(&f.tc);
			tc_transport_fini(&f.tt);
		}
		grpc_server_conn_free(f.conn);
		CHECK_EQ(grpc_server_call_count(f.srv), 0);
		grpc_server_free(f.srv);
		CHECK_EQ(f.mem.live, 0);
		if (f.mem.failed == 0) {
			total = n - 1;
			break;
		}
	}
	printf("allocation failures: %ld points tried\n", total);
	CHECK(total > 20);
}

int main(void)
{
	test_unary_echo();
	test_async_answer_and_metadata();
	test_trailers_only_error_and_encoding();
	test_big_response_flow_control();
	test_partial_writes();
	test_split_message();
	test_bidi_interleaved();
	test_unknown_paths();
	test_content_type_and_method();
	test_compression_refused();
	test_oversize_message();
	test_header_list_limit();
	test_conn_buffer_limit();
	test_deadline();
	test_client_cancel();
	test_admit_and_cancel_tagged();
	test_goaway_drain();
	test_goaway_refuses_new_streams();
	test_concurrent_stream_limit();
	test_bad_preface();
	test_allocation_failures();
	printf("test_grpc: all passed\n");
	return 0;
}
