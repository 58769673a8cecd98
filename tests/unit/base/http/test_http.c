/*
 * Unit tests for base/http/http.c, the HTTP/1.1 codec: request heads
 * with Go's server rules (gatewayd's: good ones, every kind of malformed
 * one, the size bound) and with the peer port's (blank lines skipped,
 * origin-form targets, the header count bound, chunked over a length),
 * response heads, header lookup, the chunked coding (whole, byte by byte,
 * in place, every malformed kind), answers read with http_reader (by
 * length, by chunks, to the end of the stream, interim heads, bodies
 * without content, keep-alive answers in turn, cut short, over the
 * bound), and Go's status texts and dates.
 */
#include "shm_testlib.h"

#include <errno.h>

#include "base/http/http.h"

#define GW_RULES (HTTP_ONE_HOST | HTTP_ONE_FRAMING | HTTP_ANY_HEADERS)
#define PEER_RULES (HTTP_SKIP_BLANK | HTTP_ORIGIN_FORM)

static struct http_head head;

static int gw(const char *s)
{
	return http_parse_request(s, strlen(s), HTTP_MAX_HEAD, GW_RULES, &head);
}

static int peer(const char *s)
{
	return http_parse_request(s, strlen(s), HTTP_MAX_HEAD, PEER_RULES, &head);
}

static bool str_is(struct http_str s, const char *t)
{
	return http_str_eq(s, t);
}

/* Go's server rules, as gatewayd reads a request head. */
static void test_request_go_rules(void)
{
	const char *ok = "GET /health?x=1 HTTP/1.1\r\nHost: a\r\nX-Y:  z \r\n\r\nrest";
	struct http_str v;

	CHECK_EQ(gw(ok), 0);
	CHECK_EQ(head.head_len, strlen(ok) - 4);
	CHECK(str_is(head.method, "GET"));
	CHECK(str_is(head.target, "/health?x=1") && str_is(head.path, "/health"));
	CHECK_EQ(head.minor, 1);
	CHECK(!head.close && head.has_host && !head.has_length && !head.chunked);
	CHECK(http_header(&head, "x-y", &v) && str_is(v, "z"));
	CHECK(!http_header(&head, "X-Absent", &v) && v.len == 0);

	/* bare LF line ends, as Go accepts */
	CHECK_EQ(gw("GET / HTTP/1.1\nHost: a\n\n"), 0);
	/* a target that is not a path is Go's to judge later */
	CHECK_EQ(gw("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
	/* incomplete: more needed, at any cut */
	const char *full = "POST /v3/kv/range HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n";
	for (size_t i = 0; i < strlen(full); i++)
		CHECK_EQ(http_parse_request(full, i, HTTP_MAX_HEAD, GW_RULES, &head), -EAGAIN);
	CHECK_EQ(gw(full), 0);
	CHECK_EQ(head.head_len, strlen(full));
	CHECK(head.has_length && head.content_length == 12);

	/* keep-alive rules */
	CHECK_EQ(gw("GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n"), 0);
	CHECK(head.close);
	CHECK_EQ(gw("GET / HTTP/1.0\r\n\r\n"), 0);
	CHECK(head.close && head.minor == 0 && !head.has_host);
	CHECK_EQ(gw("GET / HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n"), 0);
	CHECK(!head.close);

	/* malformed */
	static const char *const bad[] = {
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
		("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		 "Transfer-Encoding: chunked\r\n\r\n"),
		"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = gw(bad[i]);
		if (rc != -EBADMSG) {
			fprintf(stderr, "bad request %zu parsed as %d\n", i, rc);
			exit(1);
		}
	}
	/* equal Content-Length fields are fine */
	CHECK_EQ(gw("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\ncontent-length: 2\r\n\r\n"),
		 0);

	/* any number of header lines, the first HTTP_MAX_HEADERS kept */
	static char many[8192];
	int off = sprintf(many, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < HTTP_MAX_HEADERS + 10; i++)
		off += sprintf(many + off, "X-%d: %d\r\n", i, i);
	sprintf(many + off, "Host: a\r\n\r\n");
	CHECK_EQ(gw(many), 0);
	CHECK_EQ(head.n_headers, HTTP_MAX_HEADERS);
	CHECK(head.has_host);

	/* the size bound: a head that does not end within the limit */
	static char big[3 * HTTP_MAX_HEAD];
	off = sprintf(big, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
	memset(big + off, 'a', sizeof(big) - (size_t)off);
	CHECK_EQ(http_parse_request(big, sizeof(big), HTTP_MAX_HEAD, GW_RULES, &head), -EMSGSIZE);
	CHECK_EQ(http_parse_request(big, HTTP_MAX_HEAD, HTTP_MAX_HEAD, GW_RULES, &head), -EAGAIN);
	/* ending exactly at the bound is fine, one byte more is not */
	memcpy(big + HTTP_MAX_HEAD - 4, "\r\n\r\n", 4);
	CHECK_EQ(http_parse_request(big, sizeof(big), HTTP_MAX_HEAD, GW_RULES, &head), 0);
	CHECK_EQ(head.head_len, HTTP_MAX_HEAD);
	memcpy(big + HTTP_MAX_HEAD - 4, "a\r\n\r\n", 5);
	CHECK_EQ(http_parse_request(big, sizeof(big), HTTP_MAX_HEAD, GW_RULES, &head), -EMSGSIZE);
	memset(big, 'G', sizeof(big)); /* no line end at all */
	CHECK_EQ(http_parse_request(big, sizeof(big), HTTP_MAX_HEAD, GW_RULES, &head), -EMSGSIZE);
}

/* The peer port's rules. */
static void test_request_peer_rules(void)
{
	struct http_str v;

	/* blank lines before a request are skipped, the query is cut off */
	const char *ok = "\r\n\r\nPOST /raft?x=1 HTTP/1.1\r\nX-Raft-To: 2\r\n\r\n";
	CHECK_EQ(peer(ok), 0);
	CHECK_EQ(head.head_len, strlen(ok));
	CHECK(str_is(head.method, "POST") && str_is(head.path, "/raft"));
	CHECK(http_header(&head, "X-RAFT-TO", &v) && str_is(v, "2"));
	CHECK_EQ(gw(ok), -EBADMSG); /* Go's server rules do not skip them */
	CHECK_EQ(peer("\r\n\r\n"), -EAGAIN);

	/* chunked overrides a length, in HTTP/1.0 too; Host may repeat */
	CHECK_EQ(peer("POST /raft HTTP/1.1\r\nContent-Length: 3\r\n"
		      "Transfer-Encoding: chunked\r\n\r\n"), 0);
	CHECK(head.chunked && !head.has_length && head.content_length == 0);
	CHECK_EQ(peer("POST /raft HTTP/1.0\r\nTransfer-Encoding: chunked\r\n"
		      "Transfer-Encoding: chunked\r\n\r\n"), 0);
	CHECK(head.chunked && head.close);
	CHECK_EQ(peer("GET /version HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 0);

	/* origin-form targets only */
	CHECK_EQ(peer("GET * HTTP/1.1\r\n\r\n"), -EBADMSG);
	CHECK_EQ(peer("GET http://a/version HTTP/1.1\r\n\r\n"), -EBADMSG);
	/* a malformed request line is refused before the head is whole */
	CHECK_EQ(peer("GET * HTTP/1.1\r\nX: "), -EBADMSG);

	/* at most HTTP_MAX_HEADERS lines */
	static char many[8192];
	int off = sprintf(many, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < HTTP_MAX_HEADERS; i++)
		off += sprintf(many + off, "X-%d: %d\r\n", i, i);
	strcpy(many + off, "\r\n");
	CHECK_EQ(peer(many), 0);
	CHECK_EQ(head.n_headers, HTTP_MAX_HEADERS);
	strcpy(many + off, "X-more: 1\r\n");
	CHECK_EQ(peer(many), -EMSGSIZE); /* at once, before the head is whole */
}

static int resp(const char *s)
{
	return http_parse_response(s, strlen(s), HTTP_MAX_HEAD, &head);
}

static void test_response(void)
{
	struct http_str v;

	CHECK_EQ(resp("HTTP/1.1 200 OK\r\nX-Etcd-Cluster-Id: 1000\r\nContent-Length: 5\r\n\r\nhello"),
		 0);
	CHECK(head.status == 200 && head.minor == 1 && head.has_length &&
	      head.content_length == 5 && !head.close);
	CHECK(http_header(&head, "X-Etcd-Cluster-ID", &v) && str_is(v, "1000"));
	CHECK_EQ(resp("HTTP/1.1 204\r\n\r\n"), 0);
	CHECK_EQ(head.status, 204);
	CHECK_EQ(resp("HTTP/1.0 200 OK\r\n\r\n"), 0);
	CHECK(head.close);
	CHECK_EQ(resp("HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n"),
		 0);
	CHECK(head.close && head.chunked);
	CHECK_EQ(resp("HTTP/1.1 200 OK\r\nContent-Le"), -EAGAIN);

	static const char *const bad[] = {
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 099 Low\r\n\r\n",
		"HTTP/1.1 2x0 OK\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNo-Colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = resp(bad[i]);
		if (rc != -EBADMSG) {
			fprintf(stderr, "bad response %zu parsed as %d\n", i, rc);
			exit(1);
		}
	}
}

/* Decodes in whole (step 0) or step bytes at a time, in place when
 * in_place; the body goes to out. Returns the last verdict. */
static int chunked(const char *in, size_t step, bool in_place, char *out, size_t *out_len,
		   size_t *used)
{
	static uint8_t buf[4096];
	struct http_chunked c = { 0 };
	size_t len = strlen(in), i = 0, o = 0;
	int rc = 0;

	memcpy(buf, in, len);
	while (i < len && rc == 0) {
		size_t n = step && step < len - i ? step : len - i, got, made;
		uint8_t *dst = in_place ? buf + o : (uint8_t *)out + o;
		rc = http_chunked_decode(&c, buf + i, n, dst, &got, &made);
		if (rc < 0)
			return rc;
		CHECK(got <= n && made <= got);
		i += got;
		o += made;
	}
	if (in_place)
		memcpy(out, buf, o);
	out[o] = '\0';
	*out_len = o;
	*used = i;
	return rc;
}

static void test_chunked(void)
{
	const char *body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
	char out[4096];
	size_t n, used;

	for (size_t step = 0; step < 8; step++) {
		for (int in_place = 0; in_place < 2; in_place++) {
			CHECK_EQ(chunked(body, step, in_place, out, &n, &used), 1);
			CHECK(n == 11 && strcmp(out, "hello world") == 0);
			CHECK_EQ(used, strlen(body) - 4); /* NEXT is the next message's */
		}
	}
	/* bare LF line ends, upper-case hex, an empty body */
	CHECK_EQ(chunked("A\nabcdefghij\n0\n\n", 1, false, out, &n, &used), 1);
	CHECK(strcmp(out, "abcdefghij") == 0);
	CHECK_EQ(chunked("0\r\n\r\n", 0, false, out, &n, &used), 1);
	CHECK_EQ(n, 0);
	CHECK_EQ(chunked("3 ; ext\r\nabc\r\n0\r\n\r\n", 0, false, out, &n, &used), 1);
	CHECK(strcmp(out, "abc") == 0);
	/* not over yet */
	CHECK_EQ(chunked("5\r\nhel", 0, false, out, &n, &used), 0);
	CHECK_EQ(chunked("5\r\nhello\r\n0\r\n", 0, false, out, &n, &used), 0);

	static const char *const bad[] = {
		"\r\n",                          /* no size */
		"x\r\n",                         /* not hex */
		"5\rhello\r\n0\r\n\r\n",         /* CR without LF after the size */
		"5\r\nhelloX\r\n0\r\n\r\n",      /* no line end after the data */
		"5\r\nhelloX0\r\n\r\n",           /* something else in its place */
		"5\r\nhello\rX0\r\n\r\n",        /* CR without LF after the data */
		"11111111111111111\r\n",         /* 17 hex digits */
		"0\r\nT: x\rX",                  /* CR without LF in a trailer */
		"0\r\n\rX",                      /* CR without LF at the end */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = chunked(bad[i], 1, false, out, &n, &used);
		if (rc != -EBADMSG) {
			fprintf(stderr, "chunked case %zu gave %d\n", i, rc);
			exit(1);
		}
	}
}

/* Feeds s to r in pieces of step bytes (0: whole) through buf, then the
 * end of the stream when eof; returns the first nonzero verdict. */
static int read_answer(struct http_reader *r, uint8_t *buf, size_t *len, const char *s, size_t step,
		       bool eof)
{
	size_t total = strlen(s), i = 0;
	int rc = 0;

	while (i < total) {
		size_t n = step && step < total - i ? step : total - i;
		memcpy(buf + *len, s + i, n);
		*len += n;
		i += n;
		rc = http_reader_feed(r, buf, *len, false);
		if (rc)
			return rc;
	}
	return eof ? http_reader_feed(r, buf, *len, true) : rc;
}

static void test_reader(void)
{
	static uint8_t buf[1 << 16];
	struct http_reader r;
	size_t len;

	for (size_t step = 0; step < 6; step++) {
		/* by length, after an interim head; what follows waits (all
		 * of it at once) or comes later (in pieces) */
		memset(&r, 0, sizeof(r));
		len = 0;
		CHECK_EQ(read_answer(&r, buf, &len,
				     step ? "HTTP/1.1 100 Continue\r\n\r\n"
					    "HTTP/1.1 200 OK\r\nX-Etcd-Cluster-ID: 1000\r\n"
					    "Content-Length: 5\r\n\r\nhello" :
					    "HTTP/1.1 100 Continue\r\n\r\n"
					    "HTTP/1.1 200 OK\r\nX-Etcd-Cluster-ID: 1000\r\n"
					    "Content-Length: 5\r\n\r\nhelloHTTP/1.1 204 No Content\r\n\r\n",
				     step, false), 1);
		CHECK(r.status == 200 && !r.close && strcmp(r.cluster_id, "1000") == 0);
		CHECK(r.body_len == 5 && memcmp(buf, "hello", 5) == 0);
		len = http_reader_next(&r, buf, len);
		CHECK_EQ(len, step ? 0 : 27);
		/* the next answer on the connection: no body */
		CHECK_EQ(read_answer(&r, buf, &len, step ? "HTTP/1.1 204 No Content\r\n\r\n" : "",
				     step, false) ||
				 http_reader_feed(&r, buf, len, false),
			 1);
		CHECK(r.status == 204 && r.body_len == 0 && r.cluster_id[0] == '\0');
		CHECK_EQ(http_reader_next(&r, buf, len), 0);

		/* by chunks */
		memset(&r, 0, sizeof(r));
		len = 0;
		CHECK_EQ(read_answer(&r, buf, &len,
				     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
				     "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
				     step, false), 1);
		CHECK(r.body_len == 5 && memcmp(buf, "abcde", 5) == 0 && !r.close);

		/* to the end of the stream */
		memset(&r, 0, sizeof(r));
		len = 0;
		CHECK_EQ(read_answer(&r, buf, &len, "HTTP/1.0 200 OK\r\n\r\nall of it", step, false),
			 0);
		CHECK_EQ(http_reader_feed(&r, buf, len, true), 1);
		CHECK(r.close && r.body_len == 9 && memcmp(buf, "all of it", 9) == 0);
	}

	/* 101 is an answer, not an interim head */
	memset(&r, 0, sizeof(r));
	len = 0;
	CHECK_EQ(read_answer(&r, buf, &len, "HTTP/1.1 101 Switching\r\nContent-Length: 0\r\n\r\n", 0,
			     false), 1);
	CHECK_EQ(r.status, 101);

	/* cut short: in the head, in a body by length, by chunks */
	static const char *const cut[] = {
		"HTTP/1.1 200 OK\r\nContent-",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
		"",
	};
	for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
		memset(&r, 0, sizeof(r));
		len = 0;
		CHECK_EQ(read_answer(&r, buf, &len, cut[i], 0, true), -ECONNRESET);
	}

	/* not HTTP, bad chunks */
	memset(&r, 0, sizeof(r));
	len = 0;
	CHECK_EQ(read_answer(&r, buf, &len, "SSH-2.0-OpenSSH\r\n\r\n", 0, false), -EBADMSG);
	memset(&r, 0, sizeof(r));
	len = 0;
	CHECK_EQ(read_answer(&r, buf, &len,
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0, false),
		 -EBADMSG);

	/* over the bound: announced, chunked, to the end */
	static const char *const big[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n123456789\r\n",
		"HTTP/1.1 200 OK\r\n\r\n123456789",
	};
	for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
		memset(&r, 0, sizeof(r));
		r.max_body = 8;
		len = 0;
		CHECK_EQ(read_answer(&r, buf, &len, big[i], 0, false), -EMSGSIZE);
	}
	/* at the bound is fine */
	memset(&r, 0, sizeof(r));
	r.max_body = 8;
	len = 0;
	CHECK_EQ(read_answer(&r, buf, &len, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n12345678",
			     0, false), 1);

	/* a long cluster id is left out */
	memset(&r, 0, sizeof(r));
	len = 0;
	CHECK_EQ(read_answer(&r, buf, &len,
			     "HTTP/1.1 404 Not Found\r\nX-Etcd-Cluster-ID: "
			     "0123456789abcdef0123456789abcdef\r\nContent-Length: 0\r\n\r\n",
			     0, false), 1);
	CHECK(r.status == 404 && r.cluster_id[0] == '\0');
}

static void test_texts(void)
{
	char date[32];

	CHECK(strcmp(http_status_text(200), "OK") == 0);
	CHECK(strcmp(http_status_text(431), "Request Header Fields Too Large") == 0);
	CHECK(strcmp(http_status_text(599), "") == 0);
	http_date(date);
	/* "Mon, 02 Jan 2006 15:04:05 GMT" */
	CHECK_EQ(strlen(date), 29);
	CHECK(date[3] == ',' && strcmp(date + 25, " GMT") == 0);
}

int main(void)
{
	test_request_go_rules();
	test_request_peer_rules();
	test_response();
	test_chunked();
	test_reader();
	test_texts();
	printf("base/http/test_http: ok\n");
	return 0;
}
