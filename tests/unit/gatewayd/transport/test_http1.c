/*
 * Unit tests for gatewayd/transport/http1.c: request heads (good ones, every kind of
 * malformed one, the size bound), and connections: /health (200 with a
 * leader, 503 without, etcd's bodies), /version, 404, 405, keep-alive for
 * HTTP/1.1 and HTTP/1.0, pipelined requests answered in order, requests
 * split at every byte, bodies skipped, 400/431 closing the connection.
 */
#include "shm_testlib.h"

#include "gatewayd/transport/http1.h"

static int parse(const char *s, struct http1_request *req)
{
	return http1_parse((const uint8_t *)s, strlen(s), HTTP1_MAX_HEAD_BYTES, req);
}

static void test_parse(void)
{
	struct http1_request r;
	const char *ok = "GET /health?x=1 HTTP/1.1\r\nHost: a\r\nX-Y:  z \r\n\r\nrest";
	int n = parse(ok, &r);
	CHECK_EQ(n, (int)(strlen(ok) - 4));
	CHECK(r.method_len == 3 && memcmp(r.method, "GET", 3) == 0);
	CHECK(r.target_len == 11 && r.path_len == 7);
	CHECK_EQ(r.minor, 1);
	CHECK(r.keep_alive && r.has_host && !r.has_length && !r.chunked);

	/* bare LF line ends, as Go accepts */
	CHECK(parse("GET / HTTP/1.1\nHost: a\n\n", &r) > 0);
	/* incomplete: more needed, at any cut */
	const char *full = "POST /v3/kv/range HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n";
	for (size_t i = 0; i < strlen(full); i++)
		CHECK_EQ(http1_parse((const uint8_t *)full, i, HTTP1_MAX_HEAD_BYTES, &r),
			 HTTP1_NEED_MORE);
	CHECK_EQ(parse(full, &r), (int)strlen(full));
	CHECK(r.has_length && r.content_length == 12);

	/* keep-alive rules */
	CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n", &r) > 0);
	CHECK(!r.keep_alive);
	CHECK(parse("GET / HTTP/1.0\r\n\r\n", &r) > 0);
	CHECK(!r.keep_alive && r.minor == 0);
	CHECK(parse("GET / HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n", &r) > 0);
	CHECK(r.keep_alive);

	/* malformed */
	const char *bad[] = {
		"\r\n\r\n",
		"GET\r\n\r\n",
		"GET /\r\n\r\n",
		"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.x\r\nHost: a\r\n\r\n",
		"GE(T / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a\x01 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
		"GET / HTTP/1.1\r\n: a\r\n\r\n",
		"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &r);
		if (rc != HTTP1_BAD) {
			fprintf(stderr, "bad request %zu parsed as %d\n", i, rc);
			exit(1);
		}
	}
	/* equal Content-Length fields are fine */
	CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n",
		    &r) > 0);

	/* the size bound: a head that does not end within the limit */
	static uint8_t big[3 * HTTP1_MAX_HEAD_BYTES];
	int off = sprintf((char *)big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
	memset(big + off, 'a', sizeof(big) - (size_t)off);
	CHECK_EQ(http1_parse(big, sizeof(big), HTTP1_MAX_HEAD_BYTES, &r), HTTP1_TOO_LARGE);
	CHECK_EQ(http1_parse(big, HTTP1_MAX_HEAD_BYTES, HTTP1_MAX_HEAD_BYTES, &r),
		 HTTP1_NEED_MORE);
	memset(big, 'G', sizeof(big)); /* no line end at all */
	CHECK_EQ(http1_parse(big, sizeof(big), HTTP1_MAX_HEAD_BYTES, &r), HTTP1_TOO_LARGE);
}

static bool leader;

static bool healthy(void *arg)
{
	(void)arg;
	return leader;
}

static const struct http1_ops ops = { .healthy = healthy };

/* The whole output of conn so far, as a string; marks it written. */
static char *take(struct http1_conn *c)
{
	static char buf[1 << 20];
	size_t n = http1_conn_out_len(c);
	CHECK(n < sizeof(buf));
	memcpy(buf, c->out.data + c->out_off, n);
	buf[n] = '\0';
	http1_conn_out_done(c, n);
	return buf;
}

static void feed(struct http1_conn *c, const char *s)
{
	CHECK_EQ(http1_conn_recv(c, (const uint8_t *)s, strlen(s)), 0);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

static void test_conn(void)
{
	struct http1_conn c;
	char *out;

	/* /health without and with a leader, kept alive */
	http1_conn_init(&c, &ops);
	leader = false;
	feed(&c, "GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
	CHECK(strstr(out, "\r\nContent-Length: 19\r\n") != NULL);
	CHECK(strstr(out, "\r\nX-Content-Type-Options: nosniff\r\n") != NULL);
	CHECK(strstr(out, "\r\nDate: ") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n{\"health\":\"false\"}\n") == 0);
	CHECK(!c.closing);
	leader = true;
	feed(&c, "GET /health HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(strstr(out, "\r\nContent-Type: text/plain; charset=utf-8\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n{\"health\":\"true\"}") == 0);

	/* /version, 404, 405 with Allow, HEAD without a body */
	feed(&c, "GET /version HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strstr(out, "\r\nContent-Type: application/json\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"),
		     "\r\n\r\n{\"etcdserver\":\"3.4.0\",\"etcdcluster\":\"3.4.0\"}") == 0);
	feed(&c, "GET /metricsx HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n404 page not found\n") == 0);
	feed(&c, "POST /health HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 405 Method Not Allowed\r\n", 33) == 0);
	CHECK(strstr(out, "\r\nAllow: GET\r\n") != NULL);
	feed(&c, "HEAD /version HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strstr(out, "\r\nContent-Length: 19\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n") == 0);
	CHECK(!c.closing);

	/* pipelined, split at every byte, body skipped in pieces */
	const char *pipe = "GET /version HTTP/1.1\r\nHost: a\r\n\r\n"
			   "PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789"
			   "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
			   "GET /version HTTP/1.1\r\nHost: a\r\n\r\n";
	for (size_t i = 0; i < strlen(pipe); i++)
		CHECK_EQ(http1_conn_recv(&c, (const uint8_t *)pipe + i, 1), 0);
	out = take(&c);
	CHECK_EQ(count(out, "HTTP/1.1 "), 3); /* the one after the close is not answered */
	CHECK(strstr(out, "HTTP/1.1 200 OK") < strstr(out, "HTTP/1.1 404"));
	CHECK(strstr(out, "HTTP/1.1 404") < strstr(out, "{\"health\":\"true\"}"));
	CHECK(strstr(out, "\r\nConnection: close\r\n") != NULL);
	CHECK(c.closing && http1_conn_is_done(&c));
	http1_conn_fini(&c);

	/* HTTP/1.0: closes unless asked to keep alive; the answer says so */
	http1_conn_init(&c, &ops);
	feed(&c, "GET /version HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.0 200 OK\r\n", 17) == 0);
	CHECK(strstr(out, "\r\nConnection: keep-alive\r\n") != NULL);
	CHECK(!c.closing);
	feed(&c, "GET /version HTTP/1.0\r\n\r\n");
	out = take(&c);
	CHECK(strstr(out, "\r\nConnection: close\r\n") != NULL);
	CHECK(c.closing);
	http1_conn_fini(&c);

	/* malformed: 400 as Go answers it, then nothing more */
	http1_conn_init(&c, &ops);
	feed(&c, "GARBAGE\r\n\r\nGET /version HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strcmp(out, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
			  "Connection: close\r\n\r\n400 Bad Request") == 0);
	CHECK(http1_conn_is_done(&c));
	feed(&c, "GET /version HTTP/1.1\r\nHost: a\r\n\r\n");
	CHECK_EQ(http1_conn_out_len(&c), 0);
	http1_conn_fini(&c);

	/* HTTP/1.1 without Host */
	http1_conn_init(&c, &ops);
	feed(&c, "GET /health HTTP/1.1\r\n\r\n");
	out = take(&c);
	CHECK(strstr(out, "HTTP/1.1 400 Bad Request: missing required Host header\r\n") == out);
	CHECK(c.closing);
	http1_conn_fini(&c);

	/* a head that never ends: 431, closed, bounded memory */
	http1_conn_init(&c, &ops);
	feed(&c, "GET / HTTP/1.1\r\nHost: a\r\nX-Long: ");
	char chunk[4096];
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < 64 && !c.closing; i++)
		CHECK_EQ(http1_conn_recv(&c, (const uint8_t *)chunk, sizeof(chunk)), 0);
	CHECK(c.closing);
	CHECK(c.in.len <= HTTP1_MAX_HEAD_BYTES + sizeof(chunk));
	out = take(&c);
	CHECK(strstr(out, "HTTP/1.1 431 Request Header Fields Too Large\r\n") == out);
	http1_conn_fini(&c);

	/* chunked bodies are not read: answered, then closed */
	http1_conn_init(&c, &ops);
	feed(&c, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	out = take(&c);
	CHECK_EQ(count(out, "HTTP/1.1 404"), 1);
	CHECK(c.closing);
	http1_conn_fini(&c);
}

int main(void)
{
	test_parse();
	test_conn();
	printf("gatewayd/transport/test_http1: ok\n");
	return 0;
}
