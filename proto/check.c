/*
 * proto/check.c: wire-level checks (see check.h), on proto/wire.h's reader.
 *
 * proto_check_request follows the gogo-generated Unmarshal and skipRpc
 * functions of etcd 3.4 (etcdserver/etcdserverpb/rpc.pb.go) step by step,
 * so that it fails on the same field, in the same way, with the same text.
 */
#include "proto/check.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/wire.h"

/* gogo's error texts (rpc.pb.go's ErrIntOverflowRpc, ErrInvalidLengthRpc,
 * and io.ErrUnexpectedEOF). */
#define TXT_EOF "unexpected EOF"
#define TXT_OVERFLOW "proto: integer overflow"
#define TXT_NEGATIVE "proto: negative length found during unmarshaling"

struct check_ctx {
	char *text;      /* PROTO_CHECK_TEXT_MAX bytes or NULL */
	bool canonical;  /* protobuf-c reads it as gogo does */
	bool nul;        /* a string field holds a NUL */
};

static int fail(struct check_ctx *c, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct check_ctx *c, int rc, const char *fmt, ...)
{
	va_list ap;

	if (c->text) {
		va_start(ap, fmt);
		vsnprintf(c->text, PROTO_CHECK_TEXT_MAX, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* A reader error (-EBADMSG cut short, -EOVERFLOW too long) as gogo says it. */
static int fail_read(struct check_ctx *c, int rc)
{
	return fail(c, -EBADMSG, "%s", rc == -EOVERFLOW ? TXT_OVERFLOW : TXT_EOF);
}

/* The Go type name gogo gives desc: its full name without the package,
 * nested names joined by '_' ("etcdserverpb.PutRequest" -> "PutRequest"). */
static const char *go_message_name(const ProtobufCMessageDescriptor *desc, char *buf, size_t cap)
{
	const char *n = desc->name;
	size_t pl = desc->package_name ? strlen(desc->package_name) : 0;
	size_t i = 0;

	if (pl && strncmp(n, desc->package_name, pl) == 0 && n[pl] == '.')
		n += pl + 1;
	for (; *n && i + 1 < cap; n++)
		buf[i++] = *n == '.' ? '_' : *n;
	buf[i] = '\0';
	return buf;
}

/* The Go field name gogo's generator.CamelCase makes of a .proto field
 * name ("prev_kv" -> "PrevKv", "ID" -> "ID", "isLearner" -> "IsLearner"). */
static const char *go_field_name(const char *s, char *buf, size_t cap)
{
	size_t i = 0, o = 0, n = strlen(s);

#define PUT(ch) do { if (o + 1 < cap) buf[o++] = (char)(ch); } while (0)
#define LOWER(ch) ((ch) >= 'a' && (ch) <= 'z')
	if (n && s[0] == '_') {
		PUT('X');
		i++;
	}
	for (; i < n; i++) {
		char ch = s[i];

		if (ch == '_' && i + 1 < n && LOWER(s[i + 1]))
			continue;
		if (ch >= '0' && ch <= '9') {
			PUT(ch);
			continue;
		}
		/* a word: its first letter upper case, then the lower case
		 * letters that follow ("peerURLs" -> "PeerURLs") */
		if (LOWER(ch))
			ch = (char)(ch - 'a' + 'A');
		PUT(ch);
		while (i + 1 < n && LOWER(s[i + 1]))
			PUT(s[++i]);
	}
#undef PUT
#undef LOWER
	buf[o] = '\0';
	return buf;
}

unsigned proto_check_declared_wire(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_BOOL:
	case PROTOBUF_C_TYPE_ENUM:
		return PROTO_WIRE_VARINT;
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return PROTO_WIRE_FIXED64;
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_FLOAT:
		return PROTO_WIRE_FIXED32;
	default: /* string, bytes, message */
		return PROTO_WIRE_BYTES;
	}
}

/* A repeated scalar, which gogo also takes packed (wire type 2). */
static bool packable(const ProtobufCFieldDescriptor *f)
{
	return f->label == PROTOBUF_C_LABEL_REPEATED && proto_check_declared_wire(f->type) != PROTO_WIRE_BYTES;
}

/* Reads a varint and notes whether it took more bytes than needed. */
static int read_varint(struct check_ctx *c, struct proto_reader *r, uint64_t *v)
{
	const uint8_t *s = r->p;
	int rc = proto_read_varint(r, v);

	if (rc == 0 && (size_t)(r->p - s) != proto_varint_len(*v))
		c->canonical = false;
	return rc;
}

/* Whether gogo's sum, in an int, of an offset at and a length n goes
 * past the largest int (and so is negative). */
static bool int_sum_wraps(size_t at, uint64_t n)
{
	return n > (uint64_t)INT64_MAX - at;
}

/*
 * Reads a length prefix as gogo does: an int, so a value with bit 63 set
 * is negative; the bytes it announces must be there.
 */
static int read_len(struct check_ctx *c, struct proto_reader *r, uint64_t *n)
{
	int rc = read_varint(c, r, n);

	if (rc)
		return fail_read(c, rc);
	if ((int64_t)*n < 0)
		return fail(c, -EBADMSG, TXT_NEGATIVE);
	if (*n > proto_reader_left(r))
		return fail(c, -EBADMSG, TXT_EOF);
	return 0;
}

/*
 * Skips the value of an unknown field of wire type wire whose key starts
 * at start, as skipRpc does. A group runs to the end-group key that
 * balances it; gogo does not match their field numbers, and neither does
 * this. gogo adds a length to the field's offset in an int: a length that
 * makes it overflow is "negative" (inside a group, gogo then indexes out
 * of range and panics; this says the bytes end first).
 */
static int skip_unknown(struct check_ctx *c, struct proto_reader *r, unsigned wire,
			const uint8_t *start)
{
	unsigned depth = 0;
	uint64_t v;
	int rc;

	c->canonical = false;
	for (;;) {
		switch (wire) {
		case PROTO_WIRE_VARINT:
			rc = proto_read_varint(r, &v);
			if (rc)
				return fail_read(c, rc);
			break;
		case PROTO_WIRE_FIXED64:
		case PROTO_WIRE_FIXED32:
			v = wire == PROTO_WIRE_FIXED64 ? 8 : 4;
			if (v > proto_reader_left(r))
				return fail(c, -EBADMSG, TXT_EOF);
			r->p += v;
			break;
		case PROTO_WIRE_BYTES:
			if (depth == 0) {
				const uint8_t *at = r->p;
				rc = proto_read_varint(r, &v);
				if (rc == 0 && int_sum_wraps((size_t)(r->p - start), v))
					return fail(c, -EBADMSG, TXT_NEGATIVE);
				r->p = at;
			}
			rc = read_len(c, r, &v);
			if (rc)
				return rc;
			r->p += v;
			break;
		case PROTO_WIRE_START_GROUP:
			depth++;
			break;
		case PROTO_WIRE_END_GROUP:
			depth--;
			break;
		default:
			return fail(c, -EBADMSG, "proto: illegal wireType %u", wire);
		}
		if (depth == 0)
			return 0;
		int32_t num;
		rc = proto_read_key(r, &num, &wire);
		if (rc)
			return fail_read(c, rc);
	}
}

static int check_message(struct check_ctx *c, const ProtobufCMessageDescriptor *desc,
			 const uint8_t *data, size_t len, unsigned depth);

/* A singular message field, not of a oneof: gogo merges its occurrences
 * into one message. (Only the first 64 fields of a message are followed;
 * etcd's have fewer.) */
static bool merged_field(const ProtobufCMessageDescriptor *desc, const ProtobufCFieldDescriptor *f)
{
	return f->type == PROTOBUF_C_TYPE_MESSAGE && f->label != PROTOBUF_C_LABEL_REPEATED &&
	       !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f - desc->fields < 64;
}

/* Reads a varint, fixed64 or fixed32 value (wire type wire). */
static int check_scalar(struct check_ctx *c, struct proto_reader *r, unsigned wire)
{
	uint64_t v;
	int rc;

	if (wire == PROTO_WIRE_VARINT) {
		rc = read_varint(c, r, &v);
		return rc ? fail_read(c, rc) : 0;
	}
	v = wire == PROTO_WIRE_FIXED64 ? 8 : 4;
	if (v > proto_reader_left(r))
		return fail(c, -EBADMSG, TXT_EOF);
	r->p += v;
	return 0;
}

/*
 * Reads a packed run of the repeated scalar f, in the message that starts
 * at msg, as gogo does. gogo adds the run's length to the run's offset in
 * the message in an int, and checks the sum against the message's end: a
 * sum that goes past the largest int is negative, so it passes, and gogo
 * reads no element and takes the bytes after the length for the next
 * field. Otherwise gogo reads elements while it is short of the run's
 * end, each bounded by the message, not by the run.
 */
static int check_packed(struct check_ctx *c, struct proto_reader *r, const uint8_t *msg,
			const ProtobufCFieldDescriptor *f)
{
	unsigned ew = proto_check_declared_wire(f->type);
	uint64_t v;
	int rc = read_varint(c, r, &v);

	if (rc)
		return fail_read(c, rc);
	if ((int64_t)v < 0)
		return fail(c, -EBADMSG, TXT_NEGATIVE);
	if (int_sum_wraps((size_t)(r->p - msg), v)) {
		c->canonical = false;
		return 0;
	}
	if (v > proto_reader_left(r))
		return fail(c, -EBADMSG, TXT_EOF);
	const uint8_t *post = r->p + v;
	while (r->p < post) {
		rc = check_scalar(c, r, ew);
		if (rc)
			return rc;
	}
	if (r->p != post)
		c->canonical = false;
	return 0;
}

/* Reads the value of known field f, of wire type wire (already checked
 * against its declaration), in the message that starts at msg. */
static int check_value(struct check_ctx *c, struct proto_reader *r, const uint8_t *msg,
		       const ProtobufCFieldDescriptor *f, unsigned wire, unsigned depth)
{
	uint64_t v;
	int rc;

	if (wire != PROTO_WIRE_BYTES)
		return check_scalar(c, r, wire);
	if (packable(f))
		return check_packed(c, r, msg, f);
	rc = read_len(c, r, &v);
	if (rc)
		return rc;
	const uint8_t *p = r->p;
	r->p += v;
	if (f->type == PROTOBUF_C_TYPE_STRING && memchr(p, '\0', v) != NULL)
		c->nul = true;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return check_message(c, f->descriptor, p, v, depth + 1);
	return 0;
}

static int check_message(struct check_ctx *c, const ProtobufCMessageDescriptor *desc,
			 const uint8_t *data, size_t len, unsigned depth)
{
	struct proto_reader r = proto_reader_init(data, len);
	uint64_t messages_seen = 0; /* singular message fields, by index */
	char name[96];

	if (depth > PROTO_CHECK_MAX_DEPTH)
		return fail(c, -ELOOP, "proto: messages nest deeper than %d levels",
			    PROTO_CHECK_MAX_DEPTH);
	while (!proto_reader_done(&r)) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key;
		int32_t num;
		unsigned wire;
		const uint8_t *field_start = r.p;
		int rc = read_varint(c, &r, &key);

		if (rc)
			return fail_read(c, rc);
		num = (int32_t)(uint32_t)(key >> 3);
		wire = (unsigned)(key & 7);
		if (wire == PROTO_WIRE_END_GROUP)
			return fail(c, -EBADMSG, "proto: %s: wiretype end group for non-group",
				    go_message_name(desc, name, sizeof(name)));
		if (num <= 0)
			return fail(c, -EBADMSG, "proto: %s: illegal tag %" PRId32 " (wire type %" PRIu64 ")",
				    go_message_name(desc, name, sizeof(name)), num, key);
		if ((key >> 3) != (uint64_t)num)
			c->canonical = false;
		f = protobuf_c_message_descriptor_get_field(desc, (unsigned)num);
		if (f == NULL) {
			rc = skip_unknown(c, &r, wire, field_start);
		} else if (wire != proto_check_declared_wire(f->type) &&
			   !(wire == PROTO_WIRE_BYTES && packable(f))) {
			return fail(c, -EBADMSG, "proto: wrong wireType = %u for field %s", wire,
				    go_field_name(f->name, name, sizeof(name)));
		} else {
			/* a second occurrence is merged (canonical form) */
			if (merged_field(desc, f)) {
				uint64_t bit = UINT64_C(1) << (f - desc->fields);
				if (messages_seen & bit)
					c->canonical = false;
				messages_seen |= bit;
			}
			rc = check_value(c, &r, data, f, wire, depth);
		}
		if (rc)
			return rc;
	}
	return 0;
}

int proto_check_request(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
			size_t len, char *text, bool *canonical)
{
	struct check_ctx c = { .text = text, .canonical = true, .nul = false };
	int rc;

	if (text)
		text[0] = '\0';
	if (desc == NULL || (data == NULL && len > 0))
		return fail(&c, -EINVAL, "no message type or no bytes");
	rc = check_message(&c, desc, data, len, 0);
	if (rc == 0 && c.nul)
		rc = fail(&c, -EILSEQ, "a string field holds a NUL byte");
	if (rc == 0 && canonical)
		*canonical = c.canonical;
	return rc;
}

/* ---- canonical re-encoding ---- */

/* A sub-message's length, in five bytes whatever its value (< 2^35). */
static uint8_t *put_len5(uint8_t *o, uint64_t n)
{
	for (int i = 0; i < 4; i++)
		*o++ = (uint8_t)((n >> (7 * i)) & 0x7f) | 0x80;
	*o++ = (uint8_t)((n >> 28) & 0x7f);
	return o;
}

/*
 * Where the fields of one message are, in checked bytes: one span (no
 * parent), or every occurrence of field num in the message parent
 * describes. gogo reads a singular message field (not one of a oneof)
 * that comes more than once into the same struct, so that its
 * occurrences make one message, the one their concatenation encodes;
 * protobuf-c would merge them otherwise (an occurrence that leaves a
 * scalar unset clears it). The canonical form writes such a field once,
 * where it first comes, with the fields of every occurrence.
 */
struct canon_src {
	const struct canon_src *parent;
	const uint8_t *data;
	size_t len;
	int32_t num;
};

typedef void (*canon_span_fn)(void *arg, const uint8_t *data, size_t len);

struct canon_find {
	int32_t num;
	canon_span_fn fn;
	void *arg;
};

/* Calls f->fn on the body of every field f->num of one span. */
static void canon_find_span(void *arg, const uint8_t *data, size_t len)
{
	struct canon_find *f = arg;
	struct check_ctx c = { 0 };
	struct proto_reader r = proto_reader_init(data, len);

	while (!proto_reader_done(&r)) {
		const uint8_t *field_start = r.p;
		int32_t num = 0;
		unsigned wire = 0;
		uint64_t v = 0;

		(void)proto_read_key(&r, &num, &wire);
		if (wire != PROTO_WIRE_BYTES) {
			(void)skip_unknown(&c, &r, wire, field_start);
			continue;
		}
		(void)proto_read_varint(&r, &v);
		if (int_sum_wraps((size_t)(r.p - data), v))
			continue; /* a packed run gogo reads no element of (check_packed) */
		if (num == f->num)
			f->fn(f->arg, r.p, (size_t)v);
		r.p += v;
	}
}

/* Calls fn on every span of src, in their order. */
static void canon_src_each(const struct canon_src *src, canon_span_fn fn, void *arg)
{
	struct canon_find f = { .fn = fn, .arg = arg };

	if (!src->parent) {
		fn(arg, src->data, src->len);
		return;
	}
	f.num = src->num;
	canon_src_each(src->parent, canon_find_span, &f);
}

/* A message being written: its fields come span by span. */
struct canon_out {
	const ProtobufCMessageDescriptor *desc;
	const struct canon_src *src;
	uint64_t written;  /* merged fields written, by index (the first 64) */
	uint8_t *o;
};

static uint8_t *canon_message(const ProtobufCMessageDescriptor *desc,
			      const struct canon_src *src, uint8_t *o);

/* Writes the fields of one span of m (checked) canonically. */
static void canon_span(void *arg, const uint8_t *data, size_t len)
{
	struct canon_out *m = arg;
	struct check_ctx c = { 0 };
	struct proto_reader r = proto_reader_init(data, len);
	uint8_t *o = m->o;

	while (!proto_reader_done(&r)) {
		int32_t num = 0;
		unsigned wire = 0;
		uint64_t v = 0;

		const uint8_t *field_start = r.p;

		(void)proto_read_key(&r, &num, &wire);
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(m->desc, (unsigned)num);
		if (f == NULL) {
			(void)skip_unknown(&c, &r, wire, field_start);
			continue;
		}
		unsigned ew = proto_check_declared_wire(f->type);
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			bool merges = merged_field(m->desc, f);
			uint64_t bit = merges ? UINT64_C(1) << (f - m->desc->fields) : 0;
			(void)proto_read_varint(&r, &v);
			if (!(m->written & bit)) {
				struct canon_src sub = { .data = r.p, .len = (size_t)v };
				if (merges)
					sub = (struct canon_src){ .parent = m->src, .num = num };
				o += proto_varint_put(o, (uint64_t)num << 3 | ew);
				uint8_t *end = canon_message(f->descriptor, &sub, o + 5);
				o = put_len5(o, (uint64_t)(end - (o + 5)));
				o = end;
				m->written |= bit;
			}
			r.p += v;
			continue;
		}
		bool packed = wire == PROTO_WIRE_BYTES && ew != PROTO_WIRE_BYTES;
		const uint8_t *post = r.end;
		if (packed) {
			(void)proto_read_varint(&r, &v); /* packed: written unpacked */
			post = int_sum_wraps((size_t)(r.p - data), v) ? r.p : r.p + v;
		}
		/* the value, or each element of a packed run (an empty run has none) */
		for (bool more = !packed || r.p < post; more; more = packed && r.p < post) {
			o += proto_varint_put(o, (uint64_t)num << 3 | ew);
			if (ew == PROTO_WIRE_VARINT) {
				(void)proto_read_varint(&r, &v);
				o += proto_varint_put(o, v);
			} else if (ew != PROTO_WIRE_BYTES) {
				v = ew == PROTO_WIRE_FIXED64 ? 8 : 4;
				memcpy(o, r.p, v);
				o += v;
				r.p += v;
			} else {
				(void)proto_read_varint(&r, &v);
				o += proto_varint_put(o, v);
				memcpy(o, r.p, v);
				o += v;
				r.p += v;
			}
		}
	}
	m->o = o;
}

/* Writes message desc (its spans src, checked) canonically at o; returns
 * the end. */
static uint8_t *canon_message(const ProtobufCMessageDescriptor *desc,
			      const struct canon_src *src, uint8_t *o)
{
	struct canon_out m = { .desc = desc, .src = src, .o = o };

	canon_src_each(src, canon_span, &m);
	return m.o;
}

int proto_check_canonicalize(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
			     size_t len, uint8_t *out, size_t *out_len)
{
	int rc = proto_check_request(desc, data, len, NULL, NULL);

	if (rc && rc != -EILSEQ)
		return -EBADMSG;
	struct canon_src src = { .data = data, .len = len };
	*out_len = len ? (size_t)(canon_message(desc, &src, out) - out) : 0;
	return 0;
}

/* ---- strings ---- */

static int check_strings(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
			 size_t len, unsigned depth)
{
	struct proto_reader r = proto_reader_init(data, len);
	struct proto_field fl;

	if (depth > PROTO_CHECK_MAX_DEPTH)
		return -EBADMSG;
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &fl))
			return -EBADMSG;
		if (fl.wire != PROTO_WIRE_BYTES)
			continue;
		const ProtobufCFieldDescriptor *f =
			protobuf_c_message_descriptor_get_field(desc, (unsigned)fl.num);
		if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING && memchr(fl.data, '\0', fl.len))
			return -EILSEQ;
		if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
			int rc = check_strings(f->descriptor, fl.data, fl.len, depth + 1);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

int proto_check_strings(const ProtobufCMessageDescriptor *desc,
                        const uint8_t *data, size_t len)
{
	if (desc == NULL || (data == NULL && len > 0))
		return -EBADMSG;
	return check_strings(desc, data, len, 0);
}
