/*
 * Fuzz target: HTTP/1.x requests on the client port (gatewayd/transport/http1.c),
 * bytes from outside (their heads are base/http/http.c's, fuzzed alone by
 * fuzz_http.c). The input goes through a connection twice: in one piece
 * and split at a point the first byte chooses. Both connections must give
 * the same answers (splitting must not change what a client sees), and a
 * connection's buffered head stays bounded. GET /members/hashkv (served
 * on the connections raftd relays from the peer port) reads a body: a
 * stub answers it. So do requests under /v3/ (the JSON gateway, whose
 * bodies are read whole, by length or in chunks): a stub answers them
 * later, a unary answer or a stream by the body's length. GET /health is
 * answered by a stub of gatewayd's serve hook with its query string.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/transport/http1.h"
#include "cluster/hashkv.h"

/* http1_ops.serve: /health answered at once (its query read), any
 * other path left to the connection. */
static int fuzz_serve(void *arg, struct http1_conn *c, const struct http1_req *r)
{
	(void)arg;
	if (r->path_len != 7 || memcmp(r->path, "/health", 7) != 0)
		return 0;
	if (r->query && (r->query < r->path || r->query_len > HTTP1_MAX_HEAD_BYTES))
		abort();
	return http1_conn_answer(c, 200, "text/plain", false, r->query ? r->query : "",
				 r->query_len) ? -ENOMEM : 1;
}

/* The peer port's GET /members/hashkv: the stub takes the request, and
 * fuzz_answer gives a hash made of rev, or refuses a future revision,
 * after the bytes were taken (as gatewayd answers in a later turn). */
static struct http1_conn *fuzz_waiting;
static int64_t fuzz_rev;

static int fuzz_hashkv(void *arg, struct http1_conn *c, int64_t rev)
{
	(void)arg;
	if (fuzz_waiting)
		abort(); /* one request at a time per connection */
	fuzz_waiting = c;
	fuzz_rev = rev;
	return 0;
}

static void fuzz_gw_answer(void);

static void fuzz_answer(void)
{
	fuzz_gw_answer();
	while (fuzz_waiting) {
		struct http1_conn *c = fuzz_waiting;
		struct hashkv_resp r = { .revision = fuzz_rev ? fuzz_rev : 1000,
					 .hash = (uint32_t)fuzz_rev * 2654435761u,
					 .compact_revision = -1 };
		fuzz_waiting = NULL;
		if (http1_conn_hashkv_done(c, fuzz_rev > 1000 ? -ERANGE : 0, &r,
					   HASHKV_ERR_FUTURE_REV) != 0)
			abort();
		fuzz_gw_answer();
	}
}

/* The JSON gateway's stub: answers once the bytes were taken, as a
 * stream of the body in two chunks when its length is odd, else as one
 * unary answer of it. */
static struct http1_conn *fuzz_gw_waiting;
static uint8_t fuzz_gw_body[1024];
static size_t fuzz_gw_len;

static int fuzz_gateway(void *arg, struct http1_conn *c, const struct http1_gw_req *r,
			struct http1_gw_answer *now)
{
	(void)arg;
	if (fuzz_gw_waiting || fuzz_waiting)
		abort();
	if (r->path_len > 4 && r->path[r->path_len - 1] == '!') {
		*now = (struct http1_gw_answer){ .status = 404, .content_type = "text/plain",
						 .body = "Not Found\n" };
		return 1;
	}
	fuzz_gw_waiting = c;
	fuzz_gw_len = r->body_len < sizeof(fuzz_gw_body) ? r->body_len : sizeof(fuzz_gw_body);
	memcpy(fuzz_gw_body, r->body, fuzz_gw_len);
	return 0;
}

static void fuzz_gw_answer(void)
{
	while (fuzz_gw_waiting) {
		struct http1_conn *c = fuzz_gw_waiting;
		bool stream = fuzz_gw_len % 2;
		fuzz_gw_waiting = NULL;
		if (http1_conn_gw_head(c, 200, stream, fuzz_gw_len) ||
		    http1_conn_gw_data(c, fuzz_gw_body, fuzz_gw_len / 2) ||
		    http1_conn_gw_data(c, fuzz_gw_body + fuzz_gw_len / 2,
				       fuzz_gw_len - fuzz_gw_len / 2) ||
		    http1_conn_gw_end(c))
			abort();
	}
}

/* an access controller that refuses some hosts and echoes one origin */
static char *fuzz_hosts_v[] = { "127.0.0.1", "localhost", "::1" };
static char *fuzz_cors_v[] = { "http://a:1" };
static const struct config_strings fuzz_hosts = { 3, fuzz_hosts_v };
static const struct config_strings fuzz_cors = { 1, fuzz_cors_v };
static const struct http1_access fuzz_access = { .cors = &fuzz_cors, .hosts = &fuzz_hosts };

static const struct http1_ops fuzz_ops = { .serve = fuzz_serve, .hashkv = fuzz_hashkv,
					   .gateway = fuzz_gateway,
					   .gateway_max_body = 4096, .access = &fuzz_access };

/* The answers without their Date lines (the second may have ticked). */
static size_t fuzz_strip_dates(const uint8_t *in, size_t len, uint8_t *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len;) {
		if (len - i >= 6 && memcmp(in + i, "Date: ", 6) == 0) {
			while (i < len && in[i] != '\n')
				i++;
			i++;
			continue;
		}
		out[n++] = in[i++];
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http1_conn a, b;

	http1_conn_init(&a, &fuzz_ops);
	http1_conn_init(&b, &fuzz_ops);
	if (http1_conn_recv(&a, data, size) != 0)
		abort();
	fuzz_answer();
	size_t cut = size ? data[0] % (size + 1) : 0;
	if (http1_conn_recv(&b, data, cut) != 0)
		abort();
	fuzz_answer();
	if (http1_conn_recv(&b, data + cut, size - cut) != 0)
		abort();
	fuzz_answer();
	if (a.in.len > HTTP1_MAX_HEAD_BYTES + size || a.closing != b.closing)
		abort();
	size_t la = http1_conn_out_len(&a), lb = http1_conn_out_len(&b);
	uint8_t *sa = malloc(la + 1), *sb = malloc(lb + 1);
	if (!sa || !sb)
		abort();
	la = la ? fuzz_strip_dates(a.out.data + a.out_off, la, sa) : 0;
	lb = lb ? fuzz_strip_dates(b.out.data + b.out_off, lb, sb) : 0;
	if (la != lb || memcmp(sa, sb, la) != 0)
		abort();
	free(sa);
	free(sb);
	http1_conn_fini(&a);
	http1_conn_fini(&b);
	return 0;
}
