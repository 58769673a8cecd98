/*
 * Fuzz target: the HTTP/1.1 codec (base/http/http.c), which reads what
 * peers and clients send raftd's peer port and gatewayd's client port and
 * what peers answer. The input is parsed as a request head with the peer
 * port's rules and with Go's server rules (gatewayd's), and as a response
 * head; what follows a request head is decoded as a chunked body, once
 * whole and once in pieces whose sizes come from the input. Checked: no
 * read past the input (ASan), a head never claims more bytes than it was
 * given nor more than the bound, every header string lies inside the
 * input, a head that parses is still found when the input is cut
 * anywhere after it, what each caller's rules refuse stays out, and both
 * chunked readings give the same bytes and the same verdict. (Answers
 * read with http_reader are fuzz_peer_fetch's.)
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/http/http.h"

#define PEER_RULES (HTTP_SKIP_BLANK | HTTP_ORIGIN_FORM)
#define GW_RULES (HTTP_ONE_HOST | HTTP_ONE_FRAMING | HTTP_ANY_HEADERS)

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_http: %s\n", what);
		abort();
	}
}

static void inside(struct http_str s, const char *buf, size_t len)
{
	require(s.len == 0 || (s.p >= buf && s.p + s.len <= buf + len), "a string outside the input");
}

static void check_head(int rc, const struct http_head *h, const char *buf, size_t len)
{
	require(rc == 0 || rc == -EAGAIN || rc == -EBADMSG || rc == -EMSGSIZE, "unexpected code");
	if (rc)
		return;
	require(h->head_len > 0 && h->head_len <= len, "a head longer than the input");
	require(h->head_len <= HTTP_MAX_HEAD, "a head over the bound");
	require(h->n_headers <= HTTP_MAX_HEADERS, "more headers kept than room");
	require(!(h->chunked && h->has_length), "both chunked and a length");
	inside(h->method, buf, len);
	inside(h->target, buf, len);
	inside(h->path, buf, len);
	require(h->path.len <= h->target.len, "a path longer than its target");
	for (size_t i = 0; i < h->n_headers; i++) {
		inside(h->headers[i].name, buf, h->head_len);
		inside(h->headers[i].value, buf, h->head_len);
	}
}

/* Decodes in[0..len) as a chunked body in steps of the sizes in steps. */
static int chunked(const uint8_t *in, size_t len, const uint8_t *steps, size_t n_steps,
		   uint8_t *out, size_t *out_len, size_t *used)
{
	struct http_chunked c = { 0 };
	size_t i = 0, o = 0, k = 0;
	int rc = 0;

	while (i < len) {
		size_t step = n_steps ? (size_t)(1 + steps[k++ % n_steps] % 64) : len - i, got, made;
		if (step > len - i)
			step = len - i;
		rc = http_chunked_decode(&c, in + i, step, out + o, &got, &made);
		if (rc < 0)
			break;
		require(got <= step && made <= got, "chunked decoding made bytes from nothing");
		i += got;
		o += made;
		if (rc == 1)
			break;
		require(got == step, "chunked decoding stopped early without an end");
	}
	*out_len = o;
	*used = i;
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct http_head *h = malloc(sizeof(*h));
	int rc;

	require(h != NULL, "out of memory");
	/* Go's server rules (gatewayd): nothing its rules refuse gets in */
	rc = http_parse_request(buf, size, HTTP_MAX_HEAD, GW_RULES, h);
	check_head(rc, h, buf, size);
	if (rc == 0)
		require(!h->chunked || h->minor > 0, "chunked in HTTP/1.0 taken");
	/* the peer port's */
	rc = http_parse_request(buf, size, HTTP_MAX_HEAD, PEER_RULES, h);
	check_head(rc, h, buf, size);
	if (rc == 0) {
		size_t head = h->head_len;
		require(h->path.len && h->path.p[0] == '/', "a target that is not a path");
		/* cut after the head: the same head */
		require(http_parse_request(buf, head, HTTP_MAX_HEAD, PEER_RULES, h) == 0 &&
				h->head_len == head,
			"a head that needs bytes after it");
		if (head < size) {
			uint8_t *a = malloc(size - head + 1), *b = malloc(size - head + 1);
			size_t alen, blen, aused, bused;
			require(a && b, "out of memory");
			int ra = chunked(data + head, size - head, NULL, 0, a, &alen, &aused);
			int rb = chunked(data + head, size - head, data, head, b, &blen, &bused);
			require(ra == rb, "pieces changed the chunked verdict");
			if (ra >= 0)
				require(alen == blen && aused == bused && !memcmp(a, b, alen),
					"pieces changed the chunked bytes");
			free(a);
			free(b);
		}
	}
	rc = http_parse_response(buf, size, HTTP_MAX_HEAD, h);
	check_head(rc, h, buf, size);
	if (rc == 0)
		require(h->status >= 100 && h->status <= 999, "a status out of range");
	free(h);
	return 0;
}
