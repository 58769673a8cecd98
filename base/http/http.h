/*
 * The HTTP/1.1 the peer transport speaks (raftd/peer/): the
 * head of a request or a response, parsed as Go's net/http reads it, and
 * the chunked transfer coding that Go uses for stream responses and for
 * request bodies of unknown length (a snapshot).
 *
 * Pure functions on buffers, no I/O and no allocation, so that the fuzz
 * target (tests/fuzz/fuzz_http.c) reaches all of it. Strings in a
 * parsed head point into the caller's buffer and are valid while it is.
 */
#ifndef CETCD_RAFTD_HTTP_H
#define CETCD_RAFTD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest head taken (Go's DefaultMaxHeaderBytes is 1 MiB; peers
 * send a few hundred bytes) and the most header lines. */
#define HTTP_MAX_HEAD (64u * 1024)
#define HTTP_MAX_HEADERS 64

struct http_str {
	const char *p;
	size_t len;
};

struct http_header {
	struct http_str name;
	struct http_str value; /* without surrounding blanks */
};

struct http_head {
	struct http_str method; /* requests */
	struct http_str target; /* requests: the path (query cut off) */
	int status;                  /* responses: 100..999 */
	int minor;                   /* HTTP/1.<minor> */
	size_t n_headers;
	struct http_header headers[HTTP_MAX_HEADERS];
	bool chunked;                /* Transfer-Encoding: chunked */
	bool has_length;             /* Content-Length given (and no chunked) */
	uint64_t content_length;
	bool close;                  /* the connection ends after this message */
	size_t head_len;             /* bytes up to and with the blank line */
};

/*
 * Parses the head of a request (or a response) at buf[0..len).
 *   0         h is filled, h->head_len bytes are the head;
 *   -EAGAIN   the head is not complete yet (len < HTTP_MAX_HEAD);
 *   -EMSGSIZE the head is longer than HTTP_MAX_HEAD, or has more
 *             than HTTP_MAX_HEADERS lines;
 *   -EBADMSG  not HTTP/1.x: a bad request or status line, a header line
 *             without a colon or a name with blanks, folded lines, a
 *             Content-Length that is not one decimal number, a
 *             Transfer-Encoding other than chunked.
 */
int http_parse_request(const char *buf, size_t len, struct http_head *h);
int http_parse_response(const char *buf, size_t len, struct http_head *h);

/* The value of header name (case-insensitive), the first if repeated; an
 * absent header gives false and an empty value. */
bool http_header(const struct http_head *h, const char *name, struct http_str *v);

/* Whether s equals the NUL-terminated text t. */
bool http_str_eq(struct http_str s, const char *t);

/* A chunked body being decoded; zeroed to start. */
struct http_chunked {
	int state;
	unsigned digits;   /* hex digits of the size line so far */
	uint64_t left;     /* bytes left of the current chunk's data */
};

/*
 * Decodes the chunked body bytes in[0..len) into out (room for len bytes
 * at least; out may be in itself, the data never moves forward).
 * *consumed and *produced say how much was taken and written.
 *   0         all of in was taken, the body goes on;
 *   1         the last chunk and its trailer ended the body at
 *             *consumed (bytes after it belong to the next message);
 *   -EBADMSG  not chunked coding (a size over 16 hex digits, a missing
 *             line end after data), the connection must be closed.
 */
int http_chunked_decode(struct http_chunked *c, const uint8_t *in, size_t len, uint8_t *out,
			size_t *consumed, size_t *produced);

/* Go's http.StatusText for the codes the transport answers with ("" for
 * others). */
const char *http_status_text(int status);

/* "Mon, 02 Jan 2006 15:04:05 GMT" for now (Go's Date header), in out. */
void http_date(char out[32]);

#endif
