/* protobuf messages as JSON, as etcd's gateway writes and reads them (see
 * json.h). */
#include "proto/json.h"
#include "base/hex/hex.h"
#include "base/log/log.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the buffer ---- */

static void *json_alloc(ProtobufCAllocator *a, size_t n)
{
	return a ? a->alloc(a->allocator_data, n) : malloc(n);
}

static void json_free(ProtobufCAllocator *a, void *p)
{
	if (!p)
		return;
	if (a)
		a->free(a->allocator_data, p);
	else
		free(p);
}

static int json_reserve(struct proto_json_buf *b, size_t extra)
{
	if (b->cap - b->len >= extra)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len < extra) {
		if (cap > SIZE_MAX / 2)
			return -ENOMEM;
		cap *= 2;
	}
	uint8_t *p = json_alloc(b->alloc, cap);
	if (!p)
		return -ENOMEM;
	if (b->len)
		memcpy(p, b->data, b->len);
	json_free(b->alloc, b->data);
	b->data = p;
	b->cap = cap;
	return 0;
}

int proto_json_buf_append(struct proto_json_buf *b, const void *p, size_t n)
{
	if (n == 0)
		return 0;
	if (json_reserve(b, n))
		return -ENOMEM;
	memcpy(b->data + b->len, p, n);
	b->len += n;
	return 0;
}

void proto_json_buf_free(struct proto_json_buf *b)
{
	json_free(b->alloc, b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static int json_put(struct proto_json_buf *b, const char *s)
{
	return proto_json_buf_append(b, s, strlen(s));
}

static int json_putc(struct proto_json_buf *b, char c)
{
	return proto_json_buf_append(b, &c, 1);
}

/* ---- UTF-8, as Go's unicode/utf8 decodes it ---- */

/* The length of the UTF-8 sequence at s[0..len), 0 if it is invalid
 * (base/log/log.h decides as Go's utf8.DecodeRune). */
static size_t json_utf8(const uint8_t *s, size_t len)
{
	return log_utf8_len(s, len);
}

static int json_put_rune(struct proto_json_buf *b, int32_t r)
{
	uint8_t o[4];
	size_t n;

	if (r < 0x80) {
		o[0] = (uint8_t)r;
		n = 1;
	} else if (r < 0x800) {
		o[0] = (uint8_t)(0xc0 | (r >> 6));
		o[1] = (uint8_t)(0x80 | (r & 0x3f));
		n = 2;
	} else if (r < 0x10000) {
		o[0] = (uint8_t)(0xe0 | (r >> 12));
		o[1] = (uint8_t)(0x80 | ((r >> 6) & 0x3f));
		o[2] = (uint8_t)(0x80 | (r & 0x3f));
		n = 3;
	} else {
		o[0] = (uint8_t)(0xf0 | (r >> 18));
		o[1] = (uint8_t)(0x80 | ((r >> 12) & 0x3f));
		o[2] = (uint8_t)(0x80 | ((r >> 6) & 0x3f));
		o[3] = (uint8_t)(0x80 | (r & 0x3f));
		n = 4;
	}
	return proto_json_buf_append(b, o, n);
}

/* ---- writing ---- */

int proto_json_encode_string(struct proto_json_buf *out, const char *str, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = (const uint8_t *)str;
	size_t i = 0, start = 0;

	if (json_reserve(out, len + 2) || json_putc(out, '"'))
		return -ENOMEM;
	while (i < len) {
		uint8_t c = s[i];
		char esc[8];
		size_t elen = 0, n = 1;

		if (c < 0x80) {
			if (c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&') {
				i++;
				continue;
			}
			esc[0] = '\\';
			elen = 2;
			switch (c) {
			case '"': case '\\': esc[1] = (char)c; break;
			case '\n': esc[1] = 'n'; break;
			case '\r': esc[1] = 'r'; break;
			case '\t': esc[1] = 't'; break;
			default:
				memcpy(esc + 1, "u00", 3);
				esc[4] = hex[c >> 4];
				esc[5] = hex[c & 15];
				elen = 6;
			}
		} else {
			n = json_utf8(s + i, len - i);
			if (n == 0) {
				memcpy(esc, "\\ufffd", 6);
				elen = 6;
				n = 1;
			} else if (n == 3 && c == 0xe2 && s[i + 1] == 0x80 &&
				   (s[i + 2] == 0xa8 || s[i + 2] == 0xa9)) {
				memcpy(esc, s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", 6);
				elen = 6;
			} else {
				i += n;
				continue;
			}
		}
		if (proto_json_buf_append(out, s + start, i - start) ||
		    proto_json_buf_append(out, esc, elen))
			return -ENOMEM;
		i += n;
		start = i;
	}
	if (proto_json_buf_append(out, s + start, i - start) || json_putc(out, '"'))
		return -ENOMEM;
	return 0;
}

static int json_put_base64(struct proto_json_buf *b, const uint8_t *p, size_t len)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t olen = (len + 2) / 3 * 4;

	if (json_reserve(b, olen + 2))
		return -ENOMEM;
	char *o = (char *)b->data + b->len;
	*o++ = '"';
	size_t i = 0;
	for (; i + 3 <= len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = tab[(v >> 6) & 63];
		*o++ = tab[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0);
		*o++ = tab[v >> 18];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < len ? tab[(v >> 6) & 63] : '=';
		*o++ = '=';
	}
	*o++ = '"';
	b->len = (size_t)((uint8_t *)o - b->data);
	return 0;
}

static int json_putf(struct proto_json_buf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -ENOMEM;
	return proto_json_buf_append(b, tmp, (size_t)n);
}

static int json_put_double(struct proto_json_buf *b, double v)
{
	if (isnan(v))
		return json_put(b, "\"NaN\"");
	if (isinf(v))
		return json_put(b, v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
	return json_putf(b, "%.17g", v);
}

static int json_encode_message(const ProtobufCMessage *m, struct proto_json_buf *out, int depth);

/* One value of field f at p (an element of a repeated field, or the
 * field itself). */
static int json_encode_value(const ProtobufCFieldDescriptor *f, const void *p,
			     struct proto_json_buf *out, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_putf(out, "%d", *(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_putf(out, "%u", *(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_putf(out, "\"%lld\"", (long long)*(const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_putf(out, "\"%llu\"", (unsigned long long)*(const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return json_put_double(out, *(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_put_double(out, *(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_put(out, *(const protobuf_c_boolean *)p ? "true" : "false");
	case PROTOBUF_C_TYPE_ENUM: {
		int v = *(const int *)p;
		const ProtobufCEnumValue *ev =
			protobuf_c_enum_descriptor_get_value(f->descriptor, v);
		if (!ev)
			return json_putf(out, "%d", v);
		return proto_json_encode_string(out, ev->name, strlen(ev->name));
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return proto_json_encode_string(out, s ? s : "", s ? strlen(s) : 0);
	}
	case PROTOBUF_C_TYPE_BYTES: {
		const ProtobufCBinaryData *bd = p;
		return json_put_base64(out, bd->data, bd->len);
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
		if (!sub)
			return json_put(out, "{}");
		return json_encode_message(sub, out, depth + 1);
	}
	}
	return -EINVAL;
}

/* The size of one element of a repeated field of type t. */
static size_t json_elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	}
	return 0;
}

/* Whether a proto3 field's value at p is its default (jsonpb leaves it
 * out). */
static bool json_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_ENUM:
		return *(const uint32_t *)p == 0;
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
		return *(const uint64_t *)p == 0;
	case PROTOBUF_C_TYPE_FLOAT:
		return *(const float *)p == 0;
	case PROTOBUF_C_TYPE_DOUBLE:
		return *(const double *)p == 0;
	case PROTOBUF_C_TYPE_BOOL:
		return !*(const protobuf_c_boolean *)p;
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)p;
		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)p)->len == 0;
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)p == NULL;
	}
	return true;
}

/* Whether field f of m is written, and for a repeated field how many
 * elements it has. */
static bool json_field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
			       size_t *count)
{
	const char *base = (const char *)m;
	const void *p = base + f->offset;

	if (f->label == PROTOBUF_C_LABEL_REPEATED) {
		*count = *(const size_t *)(base + f->quantifier_offset);
		return *count > 0;
	}
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
		if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING)
			return *(const void *const *)p != NULL;
		return *(const protobuf_c_boolean *)(base + f->quantifier_offset);
	}
	if (f->label == PROTOBUF_C_LABEL_REQUIRED)
		return true;
	return !json_is_default(f, p);
}

static int json_encode_message(const ProtobufCMessage *m, struct proto_json_buf *out, int depth)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	bool first = true;

	if (depth > PROTO_JSON_MAX_DEPTH)
		return -EINVAL;
	if (json_putc(out, '{'))
		return -ENOMEM;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *p = (const char *)m + f->offset;
		size_t count = 0;
		int rc;

		if (!json_field_present(m, f, &count))
			continue;
		if ((!first && json_putc(out, ',')) || json_putc(out, '"') || json_put(out, f->name) ||
		    json_put(out, "\":"))
			return -ENOMEM;
		first = false;
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			rc = json_encode_value(f, p, out, depth);
			if (rc)
				return rc;
			continue;
		}
		const char *arr = *(char *const *)p;
		size_t es = json_elem_size(f->type);
		if (json_putc(out, '['))
			return -ENOMEM;
		for (size_t k = 0; k < count; k++) {
			if ((k && json_putc(out, ',')))
				return -ENOMEM;
			rc = json_encode_value(f, arr + k * es, out, depth);
			if (rc)
				return rc;
		}
		if (json_putc(out, ']'))
			return -ENOMEM;
	}
	return json_putc(out, '}');
}

int proto_json_encode(const ProtobufCMessage *m, struct proto_json_buf *out)
{
	return json_encode_message(m, out, 0);
}

/* ---- reading ---- */

struct jd {
	const char *s;
	size_t len;
	size_t pos;
	int depth;
	struct proto_json_err *err;
	struct proto_json_buf *wire;
	struct proto_json_buf tmp; /* a string's decoded bytes */
};

static int jd_fail(struct jd *j, size_t at, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(j->err->text, sizeof(j->err->text), fmt, ap);
	va_end(ap);
	j->err->offset = at;
	return -EINVAL;
}

static int jd_eof(struct jd *j)
{
	snprintf(j->err->text, sizeof(j->err->text), "unexpected EOF");
	j->err->offset = j->len;
	return -EAGAIN;
}

/* Go's quoting of a character in its syntax errors. */
static const char *jd_quote_char(char c, char out[8])
{
	if (c == '\'')
		return "'\\''";
	if (c == '"')
		return "'\"'";
	if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
		snprintf(out, 8, "'\\x%02x'", (unsigned char)c);
	else
		snprintf(out, 8, "'%c'", c);
	return out;
}

static int jd_bad_char(struct jd *j, const char *context)
{
	char q[8];
	return jd_fail(j, j->pos, "invalid character %s %s", jd_quote_char(j->s[j->pos], q),
		       context);
}

static void jd_ws(struct jd *j)
{
	while (j->pos < j->len) {
		char c = j->s[j->pos];
		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			break;
		j->pos++;
	}
}

static bool jd_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* One or more digits at *p, or an error naming what they follow. */
static int jd_digits(struct jd *j, size_t *p, const char *context)
{
	if (*p == j->len)
		return jd_eof(j);
	if (!jd_digit(j->s[*p])) {
		j->pos = *p;
		return jd_bad_char(j, context);
	}
	while (*p < j->len && jd_digit(j->s[*p]))
		(*p)++;
	return 0;
}

/* A number token at pos (Go's grammar); at end of input it is cut short
 * (a value inside an object always has something after it). */
static int jd_scan_number(struct jd *j)
{
	size_t p = j->pos;
	const char *s = j->s;
	int rc;

	if (s[p] == '-')
		p++;
	if (p < j->len && s[p] == '0')
		p++;
	else if ((rc = jd_digits(j, &p, "in numeric literal")))
		return rc;
	if (p < j->len && s[p] == '.') {
		p++;
		if ((rc = jd_digits(j, &p, "after decimal point in numeric literal")))
			return rc;
	}
	if (p < j->len && (s[p] == 'e' || s[p] == 'E')) {
		p++;
		if (p < j->len && (s[p] == '+' || s[p] == '-'))
			p++;
		if ((rc = jd_digits(j, &p, "in exponent of numeric literal")))
			return rc;
	}
	if (p == j->len)
		return jd_eof(j);
	j->pos = p;
	return 0;
}

/* The string token at pos (its opening quote): checks it and, with out
 * set, appends its decoded bytes (Go's decoding: a bad surrogate or
 * invalid UTF-8 becomes U+FFFD). */
static int jd_scan_string(struct jd *j, struct proto_json_buf *out)
{
	size_t p = j->pos + 1;
	const uint8_t *s = (const uint8_t *)j->s;

	for (;;) {
		if (p >= j->len)
			return jd_eof(j);
		uint8_t c = s[p];
		if (c == '"')
			break;
		if (c < 0x20) {
			j->pos = p;
			return jd_bad_char(j, "in string literal");
		}
		if (c != '\\') {
			size_t n = c < 0x80 ? 1 : json_utf8(s + p, j->len - p);
			if (out && (n == 0 ? json_put_rune(out, 0xfffd) :
					     proto_json_buf_append(out, s + p, n)))
				return -ENOMEM;
			p += n ? n : 1;
			continue;
		}
		if (p + 1 >= j->len)
			return jd_eof(j);
		char e = (char)s[p + 1];
		int32_t r;
		switch (e) {
		case '"': case '\\': case '/': r = e; break;
		case 'b': r = '\b'; break;
		case 'f': r = '\f'; break;
		case 'n': r = '\n'; break;
		case 'r': r = '\r'; break;
		case 't': r = '\t'; break;
		case 'u': {
			if (p + 6 > j->len)
				return jd_eof(j);
			r = 0;
			for (int k = 0; k < 4; k++) {
				int h = hex_digit(s[p + 2 + k]);
				if (h < 0) {
					j->pos = p + 2 + (size_t)k;
					return jd_bad_char(j, "in \\u hexadecimal character escape");
				}
				r = r * 16 + h;
			}
			p += 6;
			if (r >= 0xd800 && r < 0xdc00) {
				/* a high surrogate: a low one must follow */
				int32_t lo = -1;
				if (p + 6 <= j->len && s[p] == '\\' && s[p + 1] == 'u') {
					lo = 0;
					for (int k = 0; k < 4 && lo >= 0; k++) {
						int h = hex_digit(s[p + 2 + k]);
						lo = h < 0 ? -1 : lo * 16 + h;
					}
				}
				if (lo >= 0xdc00 && lo < 0xe000) {
					r = 0x10000 + ((r - 0xd800) << 10) + (lo - 0xdc00);
					p += 6;
				} else {
					r = 0xfffd;
				}
			} else if (r >= 0xdc00 && r < 0xe000) {
				r = 0xfffd;
			}
			if (out && json_put_rune(out, r))
				return -ENOMEM;
			continue;
		}
		default:
			j->pos = p + 1;
			return jd_bad_char(j, "in string escape code");
		}
		if (out && json_put_rune(out, r))
			return -ENOMEM;
		p += 2;
	}
	j->pos = p + 1;
	return 0;
}

static int jd_scan_literal(struct jd *j, const char *word)
{
	size_t n = strlen(word);
	for (size_t i = 0; i < n; i++) {
		if (j->pos + i >= j->len)
			return jd_eof(j);
		if (j->s[j->pos + i] != word[i]) {
			j->pos += i;
			char ctx[40];
			snprintf(ctx, sizeof(ctx), "in literal %s (expecting '%c')", word, word[i]);
			return jd_bad_char(j, ctx);
		}
	}
	j->pos += n;
	return 0;
}

static int jd_scan_value(struct jd *j);

/* An object or array at pos; checks it whole. */
static int jd_scan_container(struct jd *j)
{
	bool obj = j->s[j->pos] == '{';
	char close = obj ? '}' : ']';
	int rc;

	if (++j->depth > PROTO_JSON_MAX_DEPTH)
		return jd_fail(j, j->pos, "exceeded max depth");
	j->pos++;
	jd_ws(j);
	if (j->pos == j->len)
		return jd_eof(j);
	if (j->s[j->pos] == close) {
		j->pos++;
		j->depth--;
		return 0;
	}
	for (;;) {
		jd_ws(j);
		if (j->pos == j->len)
			return jd_eof(j);
		if (obj) {
			if (j->s[j->pos] != '"')
				return jd_bad_char(j, "looking for beginning of object key string");
			rc = jd_scan_string(j, NULL);
			if (rc)
				return rc;
			jd_ws(j);
			if (j->pos == j->len)
				return jd_eof(j);
			if (j->s[j->pos] != ':')
				return jd_bad_char(j, "after object key");
			j->pos++;
		}
		rc = jd_scan_value(j);
		if (rc)
			return rc;
		jd_ws(j);
		if (j->pos == j->len)
			return jd_eof(j);
		if (j->s[j->pos] == ',') {
			j->pos++;
			continue;
		}
		if (j->s[j->pos] == close) {
			j->pos++;
			j->depth--;
			return 0;
		}
		return jd_bad_char(j, obj ? "after object key:value pair" : "after array element");
	}
}

static int jd_scan_value(struct jd *j)
{
	jd_ws(j);
	if (j->pos == j->len)
		return jd_eof(j);
	switch (j->s[j->pos]) {
	case '{': case '[': return jd_scan_container(j);
	case '"': return jd_scan_string(j, NULL);
	case 't': return jd_scan_literal(j, "true");
	case 'f': return jd_scan_literal(j, "false");
	case 'n': return jd_scan_literal(j, "null");
	default:
		if (j->s[j->pos] == '-' || jd_digit(j->s[j->pos]))
			return jd_scan_number(j);
		return jd_bad_char(j, "looking for beginning of value");
	}
}

/* ---- values to wire bytes ---- */

static int jd_varint(struct proto_json_buf *b, uint64_t v)
{
	uint8_t o[10];
	size_t n = 0;
	do {
		o[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			o[n] |= 0x80;
		n++;
	} while (v);
	return proto_json_buf_append(b, o, n);
}

static int jd_tag(struct jd *j, const ProtobufCFieldDescriptor *f, unsigned wt)
{
	return jd_varint(j->wire, ((uint64_t)f->id << 3) | wt);
}

/* The JSON kind of the value at p, for error texts. */
static const char *jd_kind(char c)
{
	switch (c) {
	case '{': return "object";
	case '[': return "array";
	case '"': return "string";
	case 't': case 'f': return "bool";
	default: return "number";
	}
}

/* Go's name for the type a field's value decodes into. */
static const char *jd_go_type(const ProtobufCFieldDescriptor *f)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
		return "int32";
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: return "uint32";
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
		return "int64";
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: return "uint64";
	case PROTOBUF_C_TYPE_FLOAT: return "float32";
	case PROTOBUF_C_TYPE_DOUBLE: return "float64";
	case PROTOBUF_C_TYPE_BOOL: return "bool";
	case PROTOBUF_C_TYPE_ENUM: return "int32";
	case PROTOBUF_C_TYPE_STRING: return "string";
	case PROTOBUF_C_TYPE_BYTES: return "[]uint8";
	case PROTOBUF_C_TYPE_MESSAGE: return "map[string]json.RawMessage";
	}
	return "?";
}

/* The name Go's protobuf registers an enum under: its package, then its
 * nesting joined with '_' ("etcdserverpb.RangeRequest_SortOrder"). */
static const char *jd_go_enum_name(const ProtobufCEnumDescriptor *ed, char *out, size_t cap)
{
	size_t plen = strlen(ed->package_name);

	snprintf(out, cap, "%s", ed->name);
	for (char *p = out + (plen && plen < strlen(out) ? plen + 1 : 0); *p; p++)
		if (*p == '.')
			*p = '_';
	return out;
}

static int jd_mismatch(struct jd *j, size_t at, const ProtobufCFieldDescriptor *f)
{
	return jd_fail(j, at, "json: cannot unmarshal %s into Go value of type %s",
		       jd_kind(j->s[at]), jd_go_type(f));
}

/* The integer written at s[0..n) (a JSON number, or what a string holds),
 * within [min, max] for signed fields or [0, umax] for unsigned ones. */
static int jd_integer(struct jd *j, size_t at, const ProtobufCFieldDescriptor *f, const char *s,
		      size_t n, bool is_signed, int64_t max, uint64_t umax,
		      uint64_t *out)
{
	size_t i = 0;
	bool neg = false;
	uint64_t v = 0, lim;

	if (i < n && s[i] == '-') {
		neg = true;
		i++;
	}
	if (i == n)
		goto bad;
	if (s[i] == '0' && i + 1 < n)
		goto bad;
	lim = is_signed ? (neg ? (uint64_t)max + 1 : (uint64_t)max) : umax;
	if (neg && !is_signed)
		goto bad;
	for (; i < n; i++) {
		if (!jd_digit(s[i]))
			goto bad;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (lim - d) / 10)
			goto bad;
		v = v * 10 + d;
	}
	*out = neg ? (uint64_t)-v : v;
	return 0;
bad:
	return jd_fail(j, at, "json: cannot unmarshal number %.*s into Go value of type %s",
		       (int)(n > 64 ? 64 : n), s, jd_go_type(f));
}

/* The text of a numeric value: the number itself, or a string's
 * contents (jsonpb drops the quotes of a quoted number). */
static int jd_number_text(struct jd *j, size_t at, size_t end, const ProtobufCFieldDescriptor *f,
			  const char **s, size_t *n)
{
	char c = j->s[at];
	if (c == '"') {
		*s = j->s + at + 1;
		*n = end - at - 2;
		return 0;
	}
	if (c == '-' || jd_digit(c)) {
		*s = j->s + at;
		*n = end - at;
		return 0;
	}
	return jd_mismatch(j, at, f);
}

static int jd_base64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int proto_json_base64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len,
			     size_t *bad_at)
{
	const uint8_t *s = (const uint8_t *)in;
	uint32_t acc = 0;
	unsigned bits = 0;
	size_t i = 0, o = 0;

	while (n > 0 && s[n - 1] == '=')
		n--;
	if (n % 4 == 1)
		goto bad;
	for (; i < n; i++) {
		int v = jd_base64_val((char)s[i]);
		if (v < 0)
			goto bad;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (uint8_t)(acc >> bits);
		}
	}
	*out_len = o;
	return 0;
bad:
	*bad_at = i;
	return -EINVAL;
}

/* Decodes base64 (standard or URL-safe, padded or not) of s[0..n) into
 * out, which has room for it (s may lie in out's own bytes). */
static int jd_base64(struct jd *j, size_t at, const uint8_t *s, size_t n,
		     struct proto_json_buf *out)
{
	size_t got, bad;

	if (proto_json_base64_decode((const char *)s, n, out->data + out->len, &got, &bad))
		return jd_fail(j, at, "illegal base64 data at input byte %zu", bad);
	out->len += got;
	return 0;
}

static int jd_message(struct jd *j, const ProtobufCMessageDescriptor *d, size_t at);

/* Writes length-prefixed bytes of a field: tag, length, data. */
static int jd_put_len(struct jd *j, const ProtobufCFieldDescriptor *f, const void *p, size_t n)
{
	if (jd_tag(j, f, 2) || jd_varint(j->wire, n) || proto_json_buf_append(j->wire, p, n))
		return -ENOMEM;
	return 0;
}

/* One value of field f, the JSON value at [at, end). */
static int jd_value(struct jd *j, const ProtobufCFieldDescriptor *f, size_t at, size_t end)
{
	char c = j->s[at];
	const char *t = NULL;
	size_t n = 0;
	uint64_t v;
	int rc;

	if (c == 'n' && f->type != PROTOBUF_C_TYPE_MESSAGE)
		return 0; /* null: the default (inside a list too: json.Unmarshal leaves it) */
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: {
		bool is32 = f->type == PROTOBUF_C_TYPE_INT32 || f->type == PROTOBUF_C_TYPE_SINT32 ||
			    f->type == PROTOBUF_C_TYPE_SFIXED32 || f->type == PROTOBUF_C_TYPE_UINT32 ||
			    f->type == PROTOBUF_C_TYPE_FIXED32;
		bool sgn = f->type != PROTOBUF_C_TYPE_UINT32 && f->type != PROTOBUF_C_TYPE_FIXED32 &&
			   f->type != PROTOBUF_C_TYPE_UINT64 && f->type != PROTOBUF_C_TYPE_FIXED64;
		rc = jd_number_text(j, at, end, f, &t, &n);
		if (rc)
			return rc;
		rc = jd_integer(j, at, f, t, n, sgn,
				is32 ? INT32_MAX : INT64_MAX, is32 ? UINT32_MAX : UINT64_MAX, &v);
		if (rc)
			return rc;
		switch (f->type) {
		case PROTOBUF_C_TYPE_SINT32:
			v = (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)((int32_t)v >> 31));
			break;
		case PROTOBUF_C_TYPE_SINT64:
			v = (v << 1) ^ (uint64_t)((int64_t)v >> 63);
			break;
		case PROTOBUF_C_TYPE_SFIXED32: case PROTOBUF_C_TYPE_FIXED32: {
			uint32_t le = (uint32_t)v;
			uint8_t b[4] = { (uint8_t)le, (uint8_t)(le >> 8), (uint8_t)(le >> 16),
					 (uint8_t)(le >> 24) };
			return jd_tag(j, f, 5) || proto_json_buf_append(j->wire, b, 4) ? -ENOMEM : 0;
		}
		case PROTOBUF_C_TYPE_SFIXED64: case PROTOBUF_C_TYPE_FIXED64: {
			uint8_t b[8];
			for (int k = 0; k < 8; k++)
				b[k] = (uint8_t)(v >> (8 * k));
			return jd_tag(j, f, 1) || proto_json_buf_append(j->wire, b, 8) ? -ENOMEM : 0;
		}
		default:
			break;
		}
		return jd_tag(j, f, 0) || jd_varint(j->wire, v) ? -ENOMEM : 0;
	}
	case PROTOBUF_C_TYPE_FLOAT: case PROTOBUF_C_TYPE_DOUBLE: {
		char tmp[80];
		double dv;
		rc = jd_number_text(j, at, end, f, &t, &n);
		if (rc)
			return rc;
		if (n >= sizeof(tmp))
			return jd_fail(j, at, "json: cannot unmarshal number into Go value of type %s",
				       jd_go_type(f));
		memcpy(tmp, t, n);
		tmp[n] = 0;
		if (!strcmp(tmp, "NaN"))
			dv = NAN;
		else if (!strcmp(tmp, "Infinity"))
			dv = INFINITY;
		else if (!strcmp(tmp, "-Infinity"))
			dv = -INFINITY;
		else {
			char *e;
			dv = strtod(tmp, &e);
			if (e == tmp || *e || (c == '"' && (tmp[0] == ' ' || tmp[0] == '+')))
				return jd_fail(j, at, "invalid character in numeric literal");
		}
		if (f->type == PROTOBUF_C_TYPE_FLOAT) {
			float fv = (float)dv;
			uint32_t u;
			memcpy(&u, &fv, 4);
			uint8_t b[4] = { (uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16),
					 (uint8_t)(u >> 24) };
			return jd_tag(j, f, 5) || proto_json_buf_append(j->wire, b, 4) ? -ENOMEM : 0;
		}
		uint64_t u;
		memcpy(&u, &dv, 8);
		uint8_t b[8];
		for (int k = 0; k < 8; k++)
			b[k] = (uint8_t)(u >> (8 * k));
		return jd_tag(j, f, 1) || proto_json_buf_append(j->wire, b, 8) ? -ENOMEM : 0;
	}
	case PROTOBUF_C_TYPE_BOOL:
		if (c != 't' && c != 'f')
			return jd_mismatch(j, at, f);
		return jd_tag(j, f, 0) || jd_varint(j->wire, c == 't') ? -ENOMEM : 0;
	case PROTOBUF_C_TYPE_ENUM: {
		char name[128];
		if (c == '"') {
			j->tmp.len = 0;
			size_t save = j->pos;
			j->pos = at;
			rc = jd_scan_string(j, &j->tmp);
			j->pos = save;
			if (rc)
				return rc;
			if (json_putc(&j->tmp, 0))
				return -ENOMEM;
			const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value_by_name(
				f->descriptor, (const char *)j->tmp.data);
			if (!ev)
				return jd_fail(j, at, "unknown value %.*s for enum %s",
					       (int)(end - at > 64 ? 64 : end - at), j->s + at,
					       jd_go_enum_name(f->descriptor, name, sizeof(name)));
			v = (uint64_t)(int64_t)ev->value;
		} else {
			rc = jd_number_text(j, at, end, f, &t, &n);
			if (!rc)
				rc = jd_integer(j, at, f, t, n, true, INT32_MAX, 0, &v);
			if (rc)
				return rc;
		}
		return jd_tag(j, f, 0) || jd_varint(j->wire, v) ? -ENOMEM : 0;
	}
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_BYTES: {
		if (c != '"')
			return jd_mismatch(j, at, f);
		j->tmp.len = 0;
		size_t save = j->pos;
		j->pos = at;
		rc = jd_scan_string(j, &j->tmp);
		j->pos = save;
		if (rc)
			return rc;
		if (f->type == PROTOBUF_C_TYPE_STRING)
			return jd_put_len(j, f, j->tmp.data, j->tmp.len);
		/* bytes: decode the base64 after the string's text, then move it */
		size_t slen = j->tmp.len;
		if (json_reserve(&j->tmp, slen / 4 * 3 + 3))
			return -ENOMEM;
		rc = jd_base64(j, at, j->tmp.data, slen, &j->tmp);
		if (rc)
			return rc;
		return jd_put_len(j, f, j->tmp.data + slen, j->tmp.len - slen);
	}
	case PROTOBUF_C_TYPE_MESSAGE: {
		if (c != '{' && c != 'n')
			return jd_mismatch(j, at, f);
		if (jd_tag(j, f, 2))
			return -ENOMEM;
		/* room for the longest length prefix, closed up afterwards */
		size_t mark = j->wire->len;
		if (json_reserve(j->wire, 5))
			return -ENOMEM;
		j->wire->len += 5;
		if (c == '{') {
			rc = jd_message(j, f->descriptor, at);
			if (rc)
				return rc;
		}
		size_t body = j->wire->len - mark - 5;
		uint8_t pre[10];
		size_t pn = 0;
		uint64_t bl = body;
		do {
			pre[pn] = (uint8_t)(bl & 0x7f);
			bl >>= 7;
			if (bl)
				pre[pn] |= 0x80;
			pn++;
		} while (bl);
		if (pn > 5)
			return -ENOMEM;
		memmove(j->wire->data + mark + pn, j->wire->data + mark + 5, body);
		memcpy(j->wire->data + mark, pre, pn);
		j->wire->len = mark + pn + body;
		return 0;
	}
	}
	return jd_fail(j, at, "unsupported field type");
}

/* Whether key (k[0..n)) is the lowerCamelCase JSON name of the .proto
 * name (protoc's ToJsonName: an underscore drops out and the next letter
 * goes upper case). */
static bool jd_json_name_is(const char *name, const char *k, size_t n)
{
	size_t i = 0;
	bool up = false;

	for (; *name; name++) {
		char c = *name;
		if (c == '_') {
			up = true;
			continue;
		}
		if (up && c >= 'a' && c <= 'z')
			c = (char)(c - 'a' + 'A');
		up = false;
		if (i >= n || k[i] != c)
			return false;
		i++;
	}
	return i == n;
}

/* Where a field's value lies, and under which name it came. */
struct jd_span {
	size_t at, end;
	uint8_t by; /* 0 absent, 1 the JSON name, 2 the .proto name */
};

#define JD_MAX_FIELDS 128

/* The object at `at` as a message of type d, appended to j->wire. Keys are
 * collected first so the last of a repeated key wins and a .proto name
 * beats a JSON name, as jsonpb reads them. */
static int jd_message(struct jd *j, const ProtobufCMessageDescriptor *d, size_t at)
{
	struct jd_span spans[JD_MAX_FIELDS];
	size_t save = j->pos;
	int rc;

	if (d->n_fields > JD_MAX_FIELDS)
		return jd_fail(j, at, "message %s has too many fields for JSON", d->name);
	if (++j->depth > PROTO_JSON_MAX_DEPTH)
		return jd_fail(j, at, "exceeded max depth");
	memset(spans, 0, sizeof(spans[0]) * d->n_fields);
	j->pos = at + 1;
	jd_ws(j);
	while (j->s[j->pos] != '}') {
		/* the object was checked whole: no syntax error can come here */
		size_t kat = j->pos;
		rc = jd_scan_string(j, NULL);
		if (rc)
			return rc;
		const char *k = j->s + kat + 1;
		size_t kn = j->pos - kat - 2;
		if (memchr(k, '\\', kn)) {
			/* an escaped key: compare its decoded text */
			j->tmp.len = 0;
			size_t p2 = j->pos;
			j->pos = kat;
			rc = jd_scan_string(j, &j->tmp);
			j->pos = p2;
			if (rc)
				return rc;
			k = (const char *)j->tmp.data;
			kn = j->tmp.len;
		}
		unsigned fi = d->n_fields;
		uint8_t by = 0;
		for (unsigned i = 0; i < d->n_fields; i++) {
			const char *nm = d->fields[i].name;
			if (strlen(nm) == kn && memcmp(nm, k, kn) == 0) {
				fi = i;
				by = 2;
				break;
			}
			if (jd_json_name_is(nm, k, kn)) {
				fi = i;
				by = 1;
			}
		}
		jd_ws(j);
		j->pos++; /* ':' */
		jd_ws(j);
		size_t vat = j->pos;
		rc = jd_scan_value(j);
		if (rc)
			return rc;
		if (fi < d->n_fields && by >= spans[fi].by)
			spans[fi] = (struct jd_span){ .at = vat, .end = j->pos, .by = by };
		jd_ws(j);
		if (j->s[j->pos] == ',') {
			j->pos++;
			jd_ws(j);
		}
	}
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const struct jd_span *sp = &spans[i];
		if (!sp->by || j->s[sp->at] == 'n')
			continue;
		if (f->label != PROTOBUF_C_LABEL_REPEATED) {
			rc = jd_value(j, f, sp->at, sp->end);
			if (rc)
				return rc;
			continue;
		}
		if (j->s[sp->at] != '[')
			return jd_fail(j, sp->at, "json: cannot unmarshal %s into Go value of type []%s",
				       jd_kind(j->s[sp->at]), f->type == PROTOBUF_C_TYPE_MESSAGE ?
				       "*struct" : jd_go_type(f));
		j->pos = sp->at + 1;
		jd_ws(j);
		while (j->s[j->pos] != ']') {
			size_t eat = j->pos;
			rc = jd_scan_value(j);
			if (rc)
				return rc;
			size_t eend = j->pos;
			rc = jd_value(j, f, eat, eend);
			if (rc)
				return rc;
			j->pos = eend;
			jd_ws(j);
			if (j->s[j->pos] == ',') {
				j->pos++;
				jd_ws(j);
			}
		}
	}
	j->depth--;
	j->pos = save;
	return 0;
}

int proto_json_decode(const ProtobufCMessageDescriptor *d, const char *in, size_t len,
		      size_t *used, struct proto_json_buf *wire, struct proto_json_err *err)
{
	struct jd j = { .s = in, .len = len, .err = err, .wire = wire,
			.tmp = { .alloc = wire->alloc } };
	int rc;

	err->text[0] = 0;
	err->offset = 0;
	*used = 0;
	jd_ws(&j);
	if (j.pos == len)
		return -ENODATA;
	size_t at = j.pos;
	char c = in[at];
	if (c == '{' || c == '[') {
		rc = jd_scan_container(&j);
	} else if (c == '"') {
		rc = jd_scan_string(&j, NULL);
	} else if (c == 't' || c == 'f' || c == 'n') {
		rc = jd_scan_literal(&j, c == 't' ? "true" : c == 'f' ? "false" : "null");
	} else if (c == '-' || jd_digit(c)) {
		/* a number at the very end of a stream is whole; Go's decoder
		 * then reports the type, as below */
		rc = jd_scan_number(&j);
		if (rc == -EAGAIN) {
			j.pos = len;
			rc = 0;
		}
	} else {
		rc = jd_bad_char(&j, "looking for beginning of value");
	}
	if (rc)
		goto out;
	*used = j.pos;
	if (c == 'n')
		goto out; /* null: the empty message */
	if (c != '{') {
		rc = jd_fail(&j, at, "json: cannot unmarshal %s into Go value of type "
			     "map[string]json.RawMessage", jd_kind(c));
		goto out;
	}
	j.depth = 0;
	rc = jd_message(&j, d, at);
out:
	proto_json_buf_free(&j.tmp);
	return rc;
}

/* ---- a flat object, member by member ---- */

int proto_json_object_each(const char *in, size_t len, proto_json_member_fn fn, void *arg,
			   ProtobufCAllocator *alloc, struct proto_json_err *err)
{
	struct proto_json_buf key = { .alloc = alloc }, val = { .alloc = alloc };
	struct jd j = { .s = in, .len = len, .err = err };
	struct proto_json_member m;
	int rc;

	err->text[0] = 0;
	err->offset = 0;
	jd_ws(&j);
	if (j.pos == len)
		return jd_eof(&j);
	if (in[j.pos] != '{') {
		size_t at = j.pos;
		rc = jd_scan_value(&j);
		if (rc == 0 || rc == -EAGAIN)
			rc = jd_fail(&j, at, "json: cannot unmarshal %s into Go value of type "
				     "map[string]interface {}", jd_kind(in[at]));
		return rc;
	}
	j.pos++;
	j.depth = 1;
	jd_ws(&j);
	if (j.pos < len && in[j.pos] == '}') {
		j.pos++;
		goto tail;
	}
	for (;;) {
		jd_ws(&j);
		if (j.pos == len) {
			rc = jd_eof(&j); /* after a member: its buffers go too */
			goto out;
		}
		if (in[j.pos] != '"') {
			rc = jd_bad_char(&j, "looking for beginning of object key string");
			goto out;
		}
		key.len = 0;
		if ((rc = jd_scan_string(&j, &key)))
			goto out;
		jd_ws(&j);
		if (j.pos == len) {
			rc = jd_eof(&j);
			goto out;
		}
		if (in[j.pos] != ':') {
			rc = jd_bad_char(&j, "after object key");
			goto out;
		}
		j.pos++;
		jd_ws(&j);
		if (j.pos == len) {
			rc = jd_eof(&j);
			goto out;
		}
		size_t at = j.pos;
		char c = in[at];
		val.len = 0;
		if (c == '"')
			rc = jd_scan_string(&j, &val);
		else
			rc = jd_scan_value(&j);
		if (rc)
			goto out;
		m.key = (const char *)key.data;
		m.key_len = key.len;
		m.kind = c == '"' ? PROTO_JSON_STRING : c == '{' ? PROTO_JSON_OBJECT :
			 c == '[' ? PROTO_JSON_ARRAY : c == 't' || c == 'f' ? PROTO_JSON_BOOL :
			 c == 'n' ? PROTO_JSON_NULL : PROTO_JSON_NUMBER;
		m.value = c == '"' ? (const char *)val.data : in + at;
		m.value_len = c == '"' ? val.len : j.pos - at;
		if (!m.key)
			m.key = "";
		if (!m.value)
			m.value = "";
		m.offset = at;
		if ((rc = fn(arg, &m)))
			goto out;
		jd_ws(&j);
		if (j.pos == len) {
			rc = jd_eof(&j);
			goto out;
		}
		if (in[j.pos] == ',') {
			j.pos++;
			continue;
		}
		if (in[j.pos] == '}') {
			j.pos++;
			break;
		}
		rc = jd_bad_char(&j, "after object key:value pair");
		goto out;
	}
tail:
	jd_ws(&j);
	rc = j.pos == len ? 0 : jd_bad_char(&j, "after top-level value");
out:
	proto_json_buf_free(&key);
	proto_json_buf_free(&val);
	return rc;
}
