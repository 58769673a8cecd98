/*
 * HTTP/1.1 as the member's ports and their clients speak it: the head of
 * a request or a response (request line or status line, header fields),
 * parsed as Go's net/http reads them, the chunked transfer coding Go uses
 * for stream responses and for bodies of unknown length (a snapshot), and
 * an answer read off a connection as its bytes come (heads, then the body
 * by its length, by chunks or to the end of the stream).
 *
 * Callers: raftd's peer transport (raftd/peer/), gatewayd's HTTP/1.x on
 * the client port (gatewayd/transport/http1.c), the peer request client
 * (cluster/peer_request.c).
 *
 * Pure functions on buffers, no I/O and no allocation, so that the fuzz
 * target (tests/fuzz/fuzz_http.c) reaches all of it. Strings in a parsed
 * head point into the caller's buffer and are valid while it is.
 */
#ifndef CETCD_BASE_HTTP_H
#define CETCD_BASE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest head the peer port takes (Go's DefaultMaxHeaderBytes is 1
 * MiB; peers send a few hundred bytes) and the most header lines kept. */
#define HTTP_MAX_HEAD (64u * 1024)
#define HTTP_MAX_HEADERS 64

/* What a caller asks of a request head beside what every head must be
 * (http_parse_request):
 *   HTTP_SKIP_BLANK    blank lines before the request line are skipped
 *                      (a client may send one between keep-alive
 *                      requests, RFC 9112 2.2);
 *   HTTP_ORIGIN_FORM   the target must be a path ("/..."); the peer port
 *                      serves no other form;
 *   HTTP_ONE_HOST      a second Host field is malformed (Go's server:
 *                      "too many Host headers");
 *   HTTP_ONE_FRAMING   Transfer-Encoding given twice, with a
 *                      Content-Length, or in HTTP/1.0 is malformed
 *                      (otherwise chunked overrides the length);
 *   HTTP_ANY_HEADERS   any number of header lines, the first
 *                      HTTP_MAX_HEADERS kept (otherwise more is
 *                      -EMSGSIZE). */
#define HTTP_SKIP_BLANK 0x01u
#define HTTP_ORIGIN_FORM 0x02u
#define HTTP_ONE_HOST 0x04u
#define HTTP_ONE_FRAMING 0x08u
#define HTTP_ANY_HEADERS 0x10u

struct http_str {
	const char *p;
	size_t len;
};

struct http_header {
	struct http_str name;
	struct http_str value; /* without surrounding blanks */
};

struct http_head {
	struct http_str method;   /* requests */
	struct http_str target;   /* requests: as sent */
	struct http_str path;     /* requests: target before '?' */
	int status;               /* responses: 100..999 */
	int minor;                /* HTTP/1.<minor> */
	size_t n_headers;         /* kept: <= HTTP_MAX_HEADERS */
	struct http_header headers[HTTP_MAX_HEADERS];
	bool has_host;            /* a Host field was given */
	bool chunked;             /* Transfer-Encoding: chunked */
	bool has_length;          /* Content-Length given (and no chunked) */
	uint64_t content_length;
	bool close;               /* the connection ends after this message */
	size_t head_len;          /* bytes up to and with the blank line */
};

/*
 * Parses the head of a request at buf[0..len), which must end within
 * max_head bytes, with the rules flags (HTTP_*) adds.
 *   0         h is filled, h->head_len bytes are the head;
 *   -EAGAIN   the head is not complete yet (len <= max_head);
 *   -EMSGSIZE the head does not end within max_head bytes, or has more
 *             than HTTP_MAX_HEADERS lines (without HTTP_ANY_HEADERS);
 *   -EBADMSG  not HTTP/1.x: a bad request line, a header line without a
 *             colon or a name with blanks, folded lines, a control
 *             character in a value, a Content-Length that is not one
 *             decimal number (or two that differ), a Transfer-Encoding
 *             other than chunked, what flags refuses.
 */
int http_parse_request(const char *buf, size_t len, size_t max_head, unsigned flags,
		       struct http_head *h);

/* The head of a response, as http_parse_request reads a request's (its
 * flags do not apply): the same results, -EBADMSG for a bad status
 * line. */
int http_parse_response(const char *buf, size_t len, size_t max_head, struct http_head *h);

/* The value of header name (case-insensitive), the first if repeated,
 * among the kept ones; an absent header gives false and an empty value. */
bool http_header(const struct http_head *h, const char *name, struct http_str *v);

/* Whether s equals the NUL-terminated text t (case-sensitive). */
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

/*
 * An answer read off a client's connection as its bytes come: its head
 * (1xx heads are skipped, as Go's client skips them), then its body by
 * its length, by chunks or to the end of the stream. It works in the
 * caller's buffer: the caller appends what it reads at buf[len) and calls
 * http_reader_feed with all of buf[0..len); the body is decoded in place
 * to buf[0..body_len). Zeroed to start; one reader reads the answers of
 * one keep-alive connection in turn.
 */
struct http_reader {
	size_t max_body;          /* the longest body taken; 0: no bound */
	size_t raw;               /* buf[raw..len): bytes not yet taken */
	size_t body_len;          /* buf[0..body_len): the body so far */
	bool in_body;             /* the head was taken */
	bool chunked;
	bool by_length;
	bool no_body;             /* 204 and 304 */
	uint64_t left;            /* by_length: body bytes still to come */
	struct http_chunked ch;
	/* the answer's head, once in_body */
	int status;
	bool close;               /* the connection carries no other
				   * request: the server said so, or the
				   * body runs to the end of the stream */
	char cluster_id[32];      /* X-Etcd-Cluster-ID, "" when absent or
				   * longer */
};

/*
 * Takes buf[0..len) (what the reader took before, and new bytes after
 * it); eof: the stream ended after them. Returns 1 when an answer is
 * whole: r->status, r->close, r->cluster_id and the body buf[0..
 * r->body_len) hold it until http_reader_next; 0 while more is needed;
 * -EBADMSG (not an HTTP answer), -EMSGSIZE (a head over HTTP_MAX_HEAD or
 * a body over max_body), -ECONNRESET (the stream ended before an answer
 * did). After an error the connection must be closed.
 */
int http_reader_feed(struct http_reader *r, uint8_t *buf, size_t len, bool eof);

/* After an answer: moves the bytes that followed it to the front of buf
 * and readies r for the next answer. Returns how many there are (the new
 * len of buf). */
size_t http_reader_next(struct http_reader *r, uint8_t *buf, size_t len);

/* Go's http.StatusText for the codes the peer transport answers with (""
 * for others). */
const char *http_status_text(int status);

/* "Mon, 02 Jan 2006 15:04:05 GMT" for now (Go's Date header), in out. */
void http_date(char out[32]);

#endif
