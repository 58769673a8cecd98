/*
 * Unit tests for gatewayd/transport/http1.c's connections: the serve
 * hook (asked first, given path and query apart, answering at once with
 * etcd's fields or later, nothing but its paths on a serve_only
 * connection), /version, 404, 405,
 * keep-alive for HTTP/1.1 and HTTP/1.0, pipelined requests answered in
 * order, requests split at every byte, bodies skipped, 400/431 closing
 * the connection, heads read with Go's server rules. (How the codec reads
 * a head is tests/unit/base/http/test_http.c's.)
 */
#include "shm_testlib.h"

#include "gatewayd/transport/http1.h"
#include "http1_testlib.h"

static bool leader;
static char seen_query[64];
static struct http1_conn *waiting;

/* A stand-in for gatewayd's serve hook (services/http.c): /health as
 * etcd answers it, /wait answered later. */
static int serve(void *arg, struct http1_conn *c, const struct http1_req *r)
{
	static const char ct[] = "text/plain; charset=utf-8";
	(void)arg;
	if (r->path_len == 5 && memcmp(r->path, "/wait", 5) == 0) {
		http1_conn_wait(c);
		waiting = c;
		return 1;
	}
	if (r->path_len != 7 || memcmp(r->path, "/health", 7) != 0)
		return 0;
	if (r->query)
		snprintf(seen_query, sizeof(seen_query), "%.*s", (int)r->query_len, r->query);
	else
		strcpy(seen_query, "-"); /* no '?' at all */
	if (!(r->method_len == 3 && memcmp(r->method, "GET", 3) == 0))
		return http1_conn_answer(c, 405, ct, true, "Method Not Allowed\n", 19) ? -ENOMEM : 1;
	if (leader)
		return http1_conn_answer(c, 200, ct, false, "{\"health\":\"true\"}", 17) ? -ENOMEM : 1;
	return http1_conn_answer(c, 503, ct, true, "{\"health\":\"false\"}\n", 19) ? -ENOMEM : 1;
}

static const struct http1_ops ops = { .serve = serve };
static const struct http1_ops ops_only = { .serve = serve, .serve_only = true };

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
	CHECK(strcmp(seen_query, "-") == 0);
	leader = true;
	feed(&c, "GET /health?exclude=NOSPACE&x HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(strstr(out, "\r\nContent-Type: text/plain; charset=utf-8\r\n") != NULL);
	CHECK(strstr(out, "nosniff") == NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"), "\r\n\r\n{\"health\":\"true\"}") == 0);
	CHECK(strcmp(seen_query, "exclude=NOSPACE&x") == 0);
	feed(&c, "GET /health? HTTP/1.1\r\nHost: a\r\n\r\n");
	(void)take(&c);
	CHECK(strcmp(seen_query, "") == 0);

	/* an answer given later: what comes meanwhile waits behind it */
	feed(&c, "GET /wait HTTP/1.1\r\nHost: a\r\n\r\nGET /version HTTP/1.1\r\nHost: a\r\n\r\n");
	CHECK(waiting == &c && c.waiting);
	CHECK_EQ(http1_conn_out_len(&c), 0);
	CHECK_EQ(http1_conn_reply(&c, 503, "text/plain; charset=utf-8", "later\n", 6), 0);
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 503 Service Unavailable\r\n", 34) == 0);
	CHECK(strstr(out, "later\nHTTP/1.1 200 OK\r\n") != NULL);
	CHECK(!c.waiting);

	/* /version, 404, 405 with Allow, HEAD without a body */
	feed(&c, "GET /version HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strstr(out, "\r\nContent-Type: application/json\r\n") != NULL);
	CHECK(strcmp(strstr(out, "\r\n\r\n"),
		     "\r\n\r\n{\"etcdserver\":\"3.4.23\",\"etcdcluster\":\"3.4.0\"}") == 0);
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

	/* serve_only (a metrics listener's): the serve hook's paths, 404 else */
	http1_conn_init(&c, &ops_only);
	feed(&c, "GET /version HTTP/1.1\r\nHost: a\r\n\r\nGET /health HTTP/1.1\r\nHost: a\r\n\r\n");
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
	CHECK(strstr(out, "{\"health\":\"true\"}") != NULL);
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

	/* what Go's server rules refuse and the peer port's take: 400 */
	static const char *const go_refuses[] = {
		"GET /version HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"\r\nGET /version HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
		"POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(go_refuses) / sizeof(go_refuses[0]); i++) {
		http1_conn_init(&c, &ops);
		feed(&c, go_refuses[i]);
		out = take(&c);
		if (strncmp(out, "HTTP/1.1 400 Bad Request\r\n", 26) != 0) {
			fprintf(stderr, "request %zu answered: %s\n", i, out);
			exit(1);
		}
		CHECK(http1_conn_is_done(&c));
		http1_conn_fini(&c);
	}
	/* a target that is not a path and many header lines are fine */
	http1_conn_init(&c, &ops);
	static char many[8192];
	int off = sprintf(many, "GET * HTTP/1.1\r\nHost: a\r\n");
	for (int i = 0; i < 100; i++)
		off += sprintf(many + off, "X-%d: %d\r\n", i, i);
	strcpy(many + off, "\r\n");
	feed(&c, many);
	out = take(&c);
	CHECK(strncmp(out, "HTTP/1.1 404 Not Found\r\n", 24) == 0);
	CHECK(!c.closing);
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
	test_conn();
	printf("gatewayd/transport/test_http1: ok\n");
	return 0;
}
