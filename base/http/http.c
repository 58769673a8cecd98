/* HTTP/1.1 heads, chunked bodies and answers (see http.h). */
#include "base/http/http.h"
#include "base/hex/hex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* RFC 9110 token characters (method and header names). */
static bool http_is_tchar(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return true;
	if ((ch | 0x20) >= 'a' && (ch | 0x20) <= 'z')
		return true;
	return ch && strchr("!#$%&'*+-.^_`|~", ch) != NULL;
}

bool http_str_eq(struct http_str s, const char *t)
{
	size_t n = strlen(t);
	return s.len == n && memcmp(s.p, t, n) == 0;
}

static bool http_str_ieq(struct http_str s, const char *t)
{
	size_t n = strlen(t);
	return s.len == n && strncasecmp(s.p, t, n) == 0;
}

/* The line at buf[*pos..len): its text without the line end in *line,
 * *pos moved past it. -EAGAIN when no line end is there yet. */
static int http_line(const char *buf, size_t len, size_t *pos, struct http_str *line)
{
	const char *nl = memchr(buf + *pos, '\n', len - *pos);
	size_t end;

	if (!nl)
		return -EAGAIN;
	end = (size_t)(nl - buf);
	line->p = buf + *pos;
	line->len = end - *pos;
	if (line->len && line->p[line->len - 1] == '\r')
		line->len--;
	*pos = end + 1;
	return 0;
}

/* "HTTP/1.x": the minor version, or -1. */
static int http_version(struct http_str v)
{
	if (v.len != 8 || memcmp(v.p, "HTTP/1.", 7) != 0 || v.p[7] < '0' || v.p[7] > '9')
		return -1;
	return v.p[7] - '0';
}

static int http_content_length(struct http_str v, uint64_t *out)
{
	uint64_t n = 0;

	if (v.len == 0 || v.len > 19)
		return -EBADMSG;
	for (size_t i = 0; i < v.len; i++) {
		if (v.p[i] < '0' || v.p[i] > '9')
			return -EBADMSG;
		n = n * 10 + (uint64_t)(v.p[i] - '0');
	}
	*out = n;
	return 0;
}

/* Whether the comma-separated list v holds token t (case-insensitive). */
static bool http_has_token(struct http_str v, const char *t)
{
	size_t i = 0;

	while (i < v.len) {
		size_t start, end;
		while (i < v.len && (v.p[i] == ' ' || v.p[i] == '\t' || v.p[i] == ','))
			i++;
		start = i;
		while (i < v.len && v.p[i] != ',')
			i++;
		end = i;
		while (end > start && (v.p[end - 1] == ' ' || v.p[end - 1] == '\t'))
			end--;
		if (http_str_ieq((struct http_str){ v.p + start, end - start }, t))
			return true;
	}
	return false;
}

/* The line at buf[*pos..len) (len clamped to max_head + 1 by the caller):
 * -EMSGSIZE when it does not end within the bound, -EAGAIN when it may
 * still. */
static int http_line_in(const char *buf, size_t len, size_t max_head, size_t *pos,
			struct http_str *line)
{
	int rc = http_line(buf, len, pos, line);

	return rc && len > max_head ? -EMSGSIZE : rc;
}

/* One "name: value" line and what it says about the body and the
 * connection (*keep_alive: Connection: keep-alive). */
static int http_field(struct http_str line, unsigned flags, struct http_head *h, bool *keep_alive)
{
	struct http_str name, value;
	const char *colon;

	if (line.p[0] == ' ' || line.p[0] == '\t')
		return -EBADMSG; /* obsolete line folding */
	colon = memchr(line.p, ':', line.len);
	if (!colon || colon == line.p)
		return -EBADMSG;
	name = (struct http_str){ line.p, (size_t)(colon - line.p) };
	for (size_t i = 0; i < name.len; i++)
		if (!http_is_tchar((unsigned char)name.p[i]))
			return -EBADMSG; /* a blank before ':' included */
	value.p = colon + 1;
	value.len = line.len - name.len - 1;
	while (value.len && (value.p[0] == ' ' || value.p[0] == '\t')) {
		value.p++;
		value.len--;
	}
	while (value.len && (value.p[value.len - 1] == ' ' || value.p[value.len - 1] == '\t'))
		value.len--;
	for (size_t i = 0; i < value.len; i++) {
		unsigned char ch = (unsigned char)value.p[i];
		if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
			return -EBADMSG;
	}
	if (h->n_headers < HTTP_MAX_HEADERS)
		h->headers[h->n_headers++] = (struct http_header){ name, value };
	else if (!(flags & HTTP_ANY_HEADERS))
		return -EMSGSIZE;
	if (http_str_ieq(name, "Host")) {
		if (h->has_host && (flags & HTTP_ONE_HOST))
			return -EBADMSG;
		h->has_host = true;
	} else if (http_str_ieq(name, "Content-Length")) {
		uint64_t n;
		if (http_content_length(value, &n))
			return -EBADMSG;
		if (h->has_length && n != h->content_length)
			return -EBADMSG;
		h->has_length = true;
		h->content_length = n;
	} else if (http_str_ieq(name, "Transfer-Encoding")) {
		if (!http_str_ieq(value, "chunked") || (h->chunked && (flags & HTTP_ONE_FRAMING)))
			return -EBADMSG;
		h->chunked = true;
	} else if (http_str_ieq(name, "Connection")) {
		if (http_has_token(value, "close"))
			h->close = true;
		if (http_has_token(value, "keep-alive"))
			*keep_alive = true;
	}
	return 0;
}

/* The header lines from *pos to the blank line, and what they say about
 * the body and the connection. */
static int http_headers(const char *buf, size_t len, size_t max_head, size_t pos,
			unsigned flags, struct http_head *h)
{
	bool keep_alive = false;

	for (;;) {
		struct http_str line;
		int rc = http_line_in(buf, len, max_head, &pos, &line);

		if (rc)
			return rc;
		if (line.len == 0)
			break;
		rc = http_field(line, flags, h, &keep_alive);
		if (rc)
			return rc;
	}
	if (pos > max_head)
		return -EMSGSIZE;
	if ((flags & HTTP_ONE_FRAMING) && h->chunked && (h->has_length || h->minor == 0))
		return -EBADMSG; /* both framings, or chunked in HTTP/1.0 */
	if (h->chunked) {
		h->has_length = false;
		h->content_length = 0;
	}
	if (h->minor == 0 && !keep_alive)
		h->close = true;
	h->head_len = pos;
	return 0;
}

int http_parse_request(const char *buf, size_t len, size_t max_head, unsigned flags,
		       struct http_head *h)
{
	struct http_str line, version;
	const char *sp1, *sp2, *q;
	size_t pos = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	if (len > max_head + 1)
		len = max_head + 1; /* a head must end within max_head bytes */
	if (flags & HTTP_SKIP_BLANK)
		while (pos < len && (buf[pos] == '\r' || buf[pos] == '\n'))
			pos++;
	rc = http_line_in(buf, len, max_head, &pos, &line);
	if (rc)
		return rc;
	sp1 = memchr(line.p, ' ', line.len);
	if (!sp1 || sp1 == line.p)
		return -EBADMSG;
	sp2 = memchr(sp1 + 1, ' ', line.len - (size_t)(sp1 + 1 - line.p));
	if (!sp2 || sp2 == sp1 + 1)
		return -EBADMSG;
	h->method = (struct http_str){ line.p, (size_t)(sp1 - line.p) };
	for (size_t i = 0; i < h->method.len; i++)
		if (!http_is_tchar((unsigned char)h->method.p[i]))
			return -EBADMSG;
	h->target = (struct http_str){ sp1 + 1, (size_t)(sp2 - sp1 - 1) };
	for (size_t i = 0; i < h->target.len; i++) {
		unsigned char ch = (unsigned char)h->target.p[i];
		if (ch <= 0x20 || ch == 0x7f)
			return -EBADMSG;
	}
	if ((flags & HTTP_ORIGIN_FORM) && h->target.p[0] != '/')
		return -EBADMSG;
	h->path = h->target;
	q = memchr(h->target.p, '?', h->target.len);
	if (q)
		h->path.len = (size_t)(q - h->target.p);
	version = (struct http_str){ sp2 + 1, line.len - (size_t)(sp2 + 1 - line.p) };
	h->minor = http_version(version);
	if (h->minor < 0)
		return -EBADMSG;
	return http_headers(buf, len, max_head, pos, flags, h);
}

int http_parse_response(const char *buf, size_t len, size_t max_head, struct http_head *h)
{
	struct http_str line;
	size_t pos = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	if (len > max_head + 1)
		len = max_head + 1;
	rc = http_line_in(buf, len, max_head, &pos, &line);
	if (rc)
		return rc;
	if (line.len < 12 || line.p[8] != ' ')
		return -EBADMSG;
	h->minor = http_version((struct http_str){ line.p, 8 });
	if (h->minor < 0)
		return -EBADMSG;
	for (size_t i = 9; i < 12; i++) {
		if (line.p[i] < '0' || line.p[i] > '9')
			return -EBADMSG;
		h->status = h->status * 10 + (line.p[i] - '0');
	}
	if (h->status < 100 || (line.len > 12 && line.p[12] != ' '))
		return -EBADMSG;
	return http_headers(buf, len, max_head, pos, 0, h);
}

bool http_header(const struct http_head *h, const char *name, struct http_str *v)
{
	for (size_t i = 0; i < h->n_headers; i++) {
		if (http_str_ieq(h->headers[i].name, name)) {
			*v = h->headers[i].value;
			return true;
		}
	}
	*v = (struct http_str){ "", 0 };
	return false;
}

/* States of the chunked decoder. */
enum {
	CHUNK_SIZE = 0,   /* hex digits of a chunk's size */
	CHUNK_EXT,        /* ";ext" up to the line end */
	CHUNK_SIZE_LF,    /* '\n' after the size line's '\r' */
	CHUNK_DATA,
	CHUNK_DATA_CR,    /* the line end after a chunk's data */
	CHUNK_DATA_LF,
	CHUNK_TRAILER,    /* the start of a trailer line (or the blank line) */
	CHUNK_TRAILER_TEXT,
	CHUNK_TRAILER_LF,
	CHUNK_END_LF,     /* '\n' of the blank line that ends the body */
	CHUNK_DONE,
};

int http_chunked_decode(struct http_chunked *c, const uint8_t *in, size_t len,
			     uint8_t *out, size_t *consumed, size_t *produced)
{
	size_t i = 0, o = 0;

	while (i < len && c->state != CHUNK_DONE) {
		unsigned char ch = in[i];
		int d;

		switch (c->state) {
		case CHUNK_SIZE:
			d = hex_digit(ch);
			if (d >= 0) {
				if (++c->digits > 16)
					return -EBADMSG;
				c->left = c->left << 4 | (uint64_t)d;
			} else if (c->digits == 0) {
				return -EBADMSG;
			} else if (ch == ';' || ch == ' ' || ch == '\t') {
				c->state = CHUNK_EXT;
			} else if (ch == '\r') {
				c->state = CHUNK_SIZE_LF;
			} else if (ch == '\n') {
				c->state = c->left ? CHUNK_DATA : CHUNK_TRAILER;
			} else {
				return -EBADMSG;
			}
			i++;
			break;
		case CHUNK_EXT:
			if (ch == '\n')
				c->state = c->left ? CHUNK_DATA : CHUNK_TRAILER;
			else if (ch == '\r')
				c->state = CHUNK_SIZE_LF;
			i++;
			break;
		case CHUNK_SIZE_LF:
			if (ch != '\n')
				return -EBADMSG;
			c->state = c->left ? CHUNK_DATA : CHUNK_TRAILER;
			i++;
			break;
		case CHUNK_DATA: {
			size_t n = len - i;
			if (n > c->left)
				n = (size_t)c->left;
			memmove(out + o, in + i, n);
			o += n;
			i += n;
			c->left -= n;
			if (c->left == 0)
				c->state = CHUNK_DATA_CR;
			break;
		}
		case CHUNK_DATA_CR:
			if (ch == '\r')
				c->state = CHUNK_DATA_LF;
			else if (ch == '\n')
				c->state = CHUNK_SIZE;
			else
				return -EBADMSG;
			c->digits = 0;
			i++;
			break;
		case CHUNK_DATA_LF:
			if (ch != '\n')
				return -EBADMSG;
			c->state = CHUNK_SIZE;
			i++;
			break;
		case CHUNK_TRAILER:
			if (ch == '\r')
				c->state = CHUNK_END_LF;
			else if (ch == '\n')
				c->state = CHUNK_DONE;
			else
				c->state = CHUNK_TRAILER_TEXT;
			i++;
			break;
		case CHUNK_TRAILER_TEXT:
			if (ch == '\n')
				c->state = CHUNK_TRAILER;
			else if (ch == '\r')
				c->state = CHUNK_TRAILER_LF;
			i++;
			break;
		case CHUNK_TRAILER_LF:
			if (ch != '\n')
				return -EBADMSG;
			c->state = CHUNK_TRAILER;
			i++;
			break;
		case CHUNK_END_LF:
			if (ch != '\n')
				return -EBADMSG;
			c->state = CHUNK_DONE;
			i++;
			break;
		default:
			return -EBADMSG;
		}
	}
	*consumed = i;
	*produced = o;
	return c->state == CHUNK_DONE ? 1 : 0;
}

/* Takes the head at buf[r->raw..len): 1 when taken, 0 when it is not
 * whole yet, or an error. */
static int http_reader_head(struct http_reader *r, const uint8_t *buf, size_t len, bool eof)
{
	struct http_head h;
	struct http_str cid;
	int rc;

	for (;;) {
		rc = http_parse_response((const char *)buf + r->raw, len - r->raw, HTTP_MAX_HEAD, &h);
		if (rc == -EAGAIN)
			return eof ? -ECONNRESET : 0;
		if (rc)
			return rc;
		r->raw += h.head_len;
		if (h.status >= 200 || h.status == 101)
			break;
		/* 100 Continue and other interim answers: the real one follows */
	}
	r->in_body = true;
	r->status = h.status;
	r->cluster_id[0] = '\0';
	if (http_header(&h, "X-Etcd-Cluster-ID", &cid) && cid.len < sizeof(r->cluster_id)) {
		memcpy(r->cluster_id, cid.p, cid.len);
		r->cluster_id[cid.len] = '\0';
	}
	r->no_body = h.status == 204 || h.status == 304;
	r->chunked = !r->no_body && h.chunked;
	r->by_length = !r->no_body && !h.chunked && h.has_length;
	r->left = h.content_length;
	r->close = h.close || (!r->no_body && !r->chunked && !r->by_length);
	memset(&r->ch, 0, sizeof(r->ch));
	r->body_len = 0;
	if (r->by_length && r->max_body && r->left > r->max_body)
		return -EMSGSIZE;
	return 1;
}

/* Decodes body bytes from buf[r->raw..len) to buf[r->body_len..): 1 once
 * the body is whole, 0 while it goes on, or an error. */
static int http_reader_body(struct http_reader *r, uint8_t *buf, size_t len, bool eof)
{
	size_t have = len - r->raw;
	int rc;

	if (r->no_body)
		return 1;
	if (r->chunked) {
		size_t used, made;
		rc = http_chunked_decode(&r->ch, buf + r->raw, have, buf + r->body_len, &used,
					 &made);
		r->body_len += made;
		r->raw += used;
		if (rc < 0)
			return rc;
		if (rc == 0 && eof)
			return -ECONNRESET;
	} else {
		size_t take = r->by_length && have > r->left ? (size_t)r->left : have;
		memmove(buf + r->body_len, buf + r->raw, take);
		r->body_len += take;
		r->raw += take;
		if (r->by_length) {
			r->left -= take;
			rc = r->left == 0;
			if (!rc && eof)
				return -ECONNRESET; /* the body was cut short */
		} else {
			rc = eof;
		}
	}
	if (r->max_body && r->body_len > r->max_body)
		return -EMSGSIZE;
	return rc;
}

int http_reader_feed(struct http_reader *r, uint8_t *buf, size_t len, bool eof)
{
	int rc;

	if (!r->in_body) {
		rc = http_reader_head(r, buf, len, eof);
		if (rc <= 0)
			return rc;
	}
	return http_reader_body(r, buf, len, eof);
}

size_t http_reader_next(struct http_reader *r, uint8_t *buf, size_t len)
{
	size_t n = len - r->raw;

	memmove(buf, buf + r->raw, n);
	r->raw = 0;
	r->body_len = 0;
	r->in_body = false;
	return n;
}

const char *http_status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 413: return "Request Entity Too Large";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "";
	}
}

void http_date(char out[32])
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, 32, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}
