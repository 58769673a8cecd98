/*
 * Unit tests for the JSON gateway's side of gatewayd/transport/http1.c:
 * which paths go to the gateway (/v3/ and /v3beta/), that it gets the
 * whole body however it arrives (by length, in chunks, split at every
 * byte), bodies over the bound refused with 413, answers given at once
 * or later (a unary answer with its length, a stream in chunks), requests
 * pipelined behind a waiting one answered after it in order, and
 * Connection: close honoured once the answer ended.
 */
#include "shm_testlib.h"

#include "gatewayd/transport/http1.h"
#include "http1_testlib.h"

/* What the gateway stub saw, and how it answers. */
static int calls;
static char last_method[16], last_path[64], last_body[4096];
static size_t last_body_len;
static struct http1_conn *waiting_conn;
static bool answer_now;

static int gateway(void *arg, struct http1_conn *c, const struct http1_gw_req *r,
		   struct http1_gw_answer *now)
{
	(void)arg;
	calls++;
	snprintf(last_method, sizeof(last_method), "%.*s", (int)r->method_len, r->method);
	snprintf(last_path, sizeof(last_path), "%.*s", (int)r->path_len, r->path);
	CHECK(r->body_len < sizeof(last_body));
	memcpy(last_body, r->body, r->body_len);
	last_body_len = r->body_len;
	if (answer_now) {
		*now = (struct http1_gw_answer){ .status = 404, .nosniff = true,
						 .content_type = "text/plain; charset=utf-8",
						 .body = "Not Found\n" };
		return 1;
	}
	waiting_conn = c;
	return 0;
}

static const struct http1_ops ops = { .gateway = gateway,
				      .gateway_max_body = 100 };

static void reset(void)
{
	calls = 0;
	waiting_conn = NULL;
	answer_now = false;
	last_body_len = 0;
}

static void test_routing(void)
{
	struct http1_conn c;
	char *out;

	reset();
	http1_conn_init(&c, &ops);
	feed(&c, "POST /v3/kv/range HTTP/1.1\r\nHost: a\r\nContent-Length: 14\r\n\r\n{\"key\":\"Zm9v\"}");
	CHECK_EQ(calls, 1);
	CHECK(strcmp(last_method, "POST") == 0 && strcmp(last_path, "/v3/kv/range") == 0);
	CHECK(last_body_len == 14 && memcmp(last_body, "{\"key\":\"Zm9v\"}", 14) == 0);
	CHECK(c.waiting && waiting_conn == &c);
	CHECK_EQ(http1_conn_out_len(&c), 0);
	/* a unary answer: its length, grpc-gateway's fields, the body */
	CHECK_EQ(http1_conn_gw_head(&c, 200, false, 7), 0);
	CHECK_EQ(http1_conn_gw_data(&c, "{\"a\":1}", 7), 0);
	CHECK_EQ(http1_conn_gw_end(&c), 0);
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(strstr(out, "\r\nContent-Type: application/json\r\n") != NULL);
	CHECK(strstr(out, "\r\nGrpc-Metadata-Content-Type: application/grpc\r\n") != NULL);
	CHECK(strstr(out, "\r\nContent-Length: 7\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n{\"a\":1}") == 0);
	CHECK(!c.waiting && !c.closing);

	/* /v3beta/ too, and GET goes to the gateway (which says 405) */
	feed(&c, "GET /v3beta/kv/put?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
	CHECK_EQ(calls, 2);
	CHECK(strcmp(last_method, "GET") == 0 && strcmp(last_path, "/v3beta/kv/put") == 0);
	CHECK(last_body_len == 0);
	CHECK_EQ(http1_conn_gw_head(&c, 405, false, 0), 0);
	CHECK_EQ(http1_conn_gw_end(&c), 0);
	take(&c);
	/* not the gateway's: /v3 alone, /v3x/, /v2/ */
	feed(&c, "POST /v3 HTTP/1.1\r\nHost: a\r\n\r\nPOST /v3x/kv HTTP/1.1\r\nHost: a\r\n\r\n");
	CHECK_EQ(calls, 2);
	out = take(&c);
	CHECK_EQ(strstr(out, "404 page not found") != NULL, true);
	/* no Host on HTTP/1.1: refused before the gateway */
	feed(&c, "POST /v3/kv/range HTTP/1.1\r\n\r\n");
	CHECK_EQ(calls, 2);
	CHECK(strstr(take(&c), "400 Bad Request: missing required Host header") != NULL);
	http1_conn_fini(&c);
}

static void test_bodies(void)
{
	const char *req = "POST /v3/watch HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789";
	const char *chunked = "POST /v3/watch HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
			      "4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\n";
	const char *reqs[] = { req, chunked };

	/* whole however the bytes come: every split */
	for (int k = 0; k < 2; k++) {
		size_t n = strlen(reqs[k]);
		for (size_t cut = 0; cut <= n; cut++) {
			struct http1_conn c;
			reset();
			http1_conn_init(&c, &ops);
			CHECK_EQ(http1_conn_recv(&c, (const uint8_t *)reqs[k], cut), 0);
			CHECK_EQ(calls, cut == n ? 1 : 0);
			CHECK_EQ(http1_conn_recv(&c, (const uint8_t *)reqs[k] + cut, n - cut), 0);
			CHECK_EQ(calls, 1);
			CHECK(last_body_len == 10 && memcmp(last_body, "0123456789", 10) == 0);
			http1_conn_fini(&c);
		}
	}

	/* over gateway_max_body: 413, closed, the gateway not asked */
	struct http1_conn c;
	reset();
	http1_conn_init(&c, &ops);
	feed(&c, "POST /v3/kv/put HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n");
	CHECK_EQ(calls, 0);
	CHECK(strncmp(take(&c), "HTTP/1.1 413 ", 13) == 0);
	CHECK(c.closing);
	http1_conn_fini(&c);
	/* bad chunked coding: 400, closed */
	http1_conn_init(&c, &ops);
	feed(&c, "POST /v3/kv/put HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
	CHECK_EQ(calls, 0);
	CHECK(strncmp(take(&c), "HTTP/1.1 400 ", 13) == 0);
	CHECK(c.closing);
	http1_conn_fini(&c);
}

static void test_answers(void)
{
	struct http1_conn c;
	char *out;

	/* at once */
	reset();
	answer_now = true;
	http1_conn_init(&c, &ops);
	feed(&c, "POST /v3/nope HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
	CHECK(strstr(out, "\r\nX-Content-Type-Options: nosniff\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\nNot Found\n") == 0);
	CHECK(!c.waiting);
	http1_conn_fini(&c);

	/* later, as a stream, with a pipelined request waiting behind it
	 * and a Connection: close on the second */
	reset();
	http1_conn_init(&c, &ops);
	feed(&c, "POST /v3/watch HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}"
		 "GET /version HTTP/1.1\r\nHost: a\r\n\r\n"
		 "POST /v3/kv/range HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
	CHECK_EQ(calls, 1);
	CHECK_EQ(http1_conn_out_len(&c), 0);
	CHECK_EQ(http1_conn_gw_head(&c, 200, true, 0), 0);
	CHECK_EQ(http1_conn_gw_data(&c, "{\"result\":{}}\n", 14), 0);
	out = take(&c);
	CHECK(strstr(out, "\r\nTransfer-Encoding: chunked\r\n") != NULL);
	CHECK(strstr(out, "Content-Length") == NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\ne\r\n{\"result\":{}}\n\r\n") == 0);
	CHECK_EQ(http1_conn_gw_data(&c, "x", 1), 0);
	CHECK_EQ(http1_conn_gw_end(&c), 0);
	out = take(&c);
	/* the stream's last chunk, then /version, then the second gateway call */
	CHECK(strncmp(out, "1\r\nx\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", 28) == 0);
	CHECK_EQ(calls, 2);
	CHECK(c.waiting && !c.closing);
	CHECK_EQ(http1_conn_gw_head(&c, 503, false, 2), 0);
	CHECK_EQ(http1_conn_gw_data(&c, "{}", 2), 0);
	CHECK_EQ(http1_conn_gw_end(&c), 0);
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
	CHECK(strstr(out, "\r\nConnection: close\r\n") != NULL);
	CHECK(c.closing && http1_conn_is_done(&c));
	/* once over, the answer functions do nothing */
	CHECK_EQ(http1_conn_gw_data(&c, "late", 4), 0);
	CHECK_EQ(http1_conn_out_len(&c), 0);
	http1_conn_fini(&c);
}

int main(void)
{
	test_routing();
	test_bodies();
	test_answers();
	printf("gatewayd/transport/test_http1_gateway: ok\n");
	return 0;
}
