/* HTTP/1.1 heads and chunked bodies for the peer transport (http.h). */
#include "base/http/http.h"

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

/* The header lines from *pos to the blank line, and what they say about
 * the body and the connection. */
static int http_headers(const char *buf, size_t len, size_t pos, struct http_head *h)
{
	bool keep_alive = false;

	for (;;) {
		struct http_str line, name, value;
		const char *colon;
		int rc = http_line(buf, len, &pos, &line);

		if (rc)
			return pos > HTTP_MAX_HEAD || len > HTTP_MAX_HEAD ? -EMSGSIZE : rc;
		if (pos > HTTP_MAX_HEAD)
			return -EMSGSIZE;
		if (line.len == 0)
			break;
		if (line.p[0] == ' ' || line.p[0] == '\t')
			return -EBADMSG; /* obsolete line folding */
		colon = memchr(line.p, ':', line.len);
		if (!colon || colon == line.p)
			return -EBADMSG;
		name = (struct http_str){ line.p, (size_t)(colon - line.p) };
		for (size_t i = 0; i < name.len; i++)
			if (!http_is_tchar((unsigned char)name.p[i]))
				return -EBADMSG;
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
		if (h->n_headers == HTTP_MAX_HEADERS)
			return -EMSGSIZE;
		h->headers[h->n_headers++] = (struct http_header){ name, value };
		if (http_str_ieq(name, "Content-Length")) {
			uint64_t n;
			if (http_content_length(value, &n))
				return -EBADMSG;
			if (h->has_length && n != h->content_length)
				return -EBADMSG;
			h->has_length = true;
			h->content_length = n;
		} else if (http_str_ieq(name, "Transfer-Encoding")) {
			if (!http_str_ieq(value, "chunked"))
				return -EBADMSG;
			h->chunked = true;
		} else if (http_str_ieq(name, "Connection")) {
			if (http_has_token(value, "close"))
				h->close = true;
			if (http_has_token(value, "keep-alive"))
				keep_alive = true;
		}
	}
	if (h->chunked) {
		h->has_length = false;
		h->content_length = 0;
	}
	if (h->minor == 0 && !keep_alive)
		h->close = true;
	h->head_len = pos;
	return 0;
}

int http_parse_request(const char *buf, size_t len, struct http_head *h)
{
	struct http_str line, version;
	const char *sp1, *sp2, *q;
	size_t pos = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	/* Go skips nothing before the request line, but a client may send a
	 * blank line between keep-alive requests (RFC 9112 2.2) */
	while (pos < len && (buf[pos] == '\r' || buf[pos] == '\n'))
		pos++;
	rc = http_line(buf, len, &pos, &line);
	if (rc)
		return len > HTTP_MAX_HEAD ? -EMSGSIZE : rc;
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
	if (h->target.p[0] != '/')
		return -EBADMSG; /* the transport serves origin-form targets only */
	q = memchr(h->target.p, '?', h->target.len);
	if (q)
		h->target.len = (size_t)(q - h->target.p);
	version = (struct http_str){ sp2 + 1, line.len - (size_t)(sp2 + 1 - line.p) };
	h->minor = http_version(version);
	if (h->minor < 0)
		return -EBADMSG;
	return http_headers(buf, len, pos, h);
}

int http_parse_response(const char *buf, size_t len, struct http_head *h)
{
	struct http_str line;
	size_t pos = 0;
	int rc;

	memset(h, 0, sizeof(*h));
	rc = http_line(buf, len, &pos, &line);
	if (rc)
		return len > HTTP_MAX_HEAD ? -EMSGSIZE : rc;
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
	return http_headers(buf, len, pos, h);
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

static int http_hex(unsigned char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	ch |= 0x20;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int http_chunked_decode(struct http_chunked *c, const uint8_t *in, size_t len, uint8_t *out,
			size_t *consumed, size_t *produced)
{
	size_t i = 0, o = 0;

	while (i < len && c->state != CHUNK_DONE) {
		unsigned char ch = in[i];
		int d;

		switch (c->state) {
		case CHUNK_SIZE:
			d = http_hex(ch);
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

const char *http_status_text(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 410: return "Gone";
	case 412: return "Precondition Failed";
	case 413: return "Request Entity Too Large";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
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
