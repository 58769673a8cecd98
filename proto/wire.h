/*
 * proto/wire.h: cetcd's one protobuf wire reader and varint writer.
 *
 * Every hand-written decoder in cetcd (WAL records, stored KeyValues, the
 * origin of a proposal, the key index, the request checks of check.h)
 * reads fields through these functions, so they all agree with etcd's
 * gogo-generated decoders on what a field is:
 *   - a varint has at most 10 bytes; bits past the 64th are dropped
 *     (gogo's "shift >= 64" loop), an 11th byte is an overflow;
 *   - a key's field number is int32(key >> 3), as gogo computes it, and
 *     must be positive;
 *   - wire types 0 (varint), 1 (64-bit), 2 (length-delimited) and
 *     5 (32-bit) carry values; 3 and 4 (groups) and 6, 7 are refused by
 *     proto_read_field (no etcd message has groups; check.c handles the
 *     groups gogo skips in unknown fields of client requests).
 *
 * Everything is inline and allocation-free: stored's read path decodes a
 * KeyValue per key it returns. A reader never reads at or past end.
 */
#ifndef CETCD_PROTO_WIRE_H
#define CETCD_PROTO_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum proto_wire_type {
	PROTO_WIRE_VARINT = 0,
	PROTO_WIRE_FIXED64 = 1,
	PROTO_WIRE_BYTES = 2,
	PROTO_WIRE_START_GROUP = 3,
	PROTO_WIRE_END_GROUP = 4,
	PROTO_WIRE_FIXED32 = 5,
};

/* Longest varint gogo reads (64 bits in 7-bit groups). */
#define PROTO_VARINT_MAX_BYTES 10

/* A cursor over encoded bytes: p <= end, p only grows. */
struct proto_reader {
	const uint8_t *p;
	const uint8_t *end;
};

static inline struct proto_reader proto_reader_init(const uint8_t *data, size_t len)
{
	return (struct proto_reader){ data, len ? data + len : data };
}

static inline int proto_reader_done(const struct proto_reader *r)
{
	return r->p >= r->end;
}

static inline size_t proto_reader_left(const struct proto_reader *r)
{
	return (size_t)(r->end - r->p);
}

/*
 * Reads a varint. Returns 0; -EBADMSG if the bytes end inside it (gogo's
 * "unexpected EOF"); -EOVERFLOW if it runs past 10 bytes (gogo's
 * "integer overflow"). On error the cursor is left inside the varint.
 */
static inline int proto_read_varint(struct proto_reader *r, uint64_t *v)
{
	uint64_t x = 0;

	if (r->p < r->end && *r->p < 0x80) {
		*v = *r->p++;
		return 0;
	}
	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (r->p >= r->end)
			return -EBADMSG;
		uint8_t b = *r->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (b < 0x80) {
			*v = x;
			return 0;
		}
	}
	return -EOVERFLOW;
}

/* One field as read by proto_read_field. */
struct proto_field {
	int32_t num;          /* > 0 */
	unsigned wire;        /* enum proto_wire_type: 0, 1, 2 or 5 */
	uint64_t varint;      /* PROTO_WIRE_VARINT: the value */
	const uint8_t *data;  /* 1, 2, 5: the value's bytes (8, len, 4 of them) */
	size_t len;
	const uint8_t *start; /* the whole field, key included: [start, r->p) */
};

/*
 * Reads the key of the next field: field number as gogo sees it
 * (int32(key >> 3), may be <= 0) and wire type. Returns 0, -EBADMSG or
 * -EOVERFLOW as proto_read_varint.
 */
static inline int proto_read_key(struct proto_reader *r, int32_t *num, unsigned *wire)
{
	uint64_t k;
	int rc = proto_read_varint(r, &k);

	if (rc)
		return rc;
	*num = (int32_t)(uint32_t)(k >> 3);
	*wire = (unsigned)(k & 7);
	return 0;
}

/*
 * Reads a length-delimited value (after its key): *data points at its
 * bytes, *len is their count. Returns 0; -EBADMSG if the length is cut
 * short or runs past end; -EOVERFLOW for an over-long length varint.
 */
static inline int proto_read_bytes(struct proto_reader *r, const uint8_t **data, size_t *len)
{
	uint64_t n;
	int rc = proto_read_varint(r, &n);

	if (rc)
		return rc;
	if (n > proto_reader_left(r))
		return -EBADMSG;
	*data = r->p;
	*len = (size_t)n;
	r->p += n;
	return 0;
}

/*
 * Reads the value of a field of wire type wire (after its key) into f.
 * Returns 0; -EBADMSG if it is cut short; -EOVERFLOW for an over-long
 * varint; -EPROTO for a wire type that carries no value (3, 4, 6, 7).
 */
static inline int proto_read_value(struct proto_reader *r, unsigned wire, struct proto_field *f)
{
	size_t n;

	f->wire = wire;
	switch (wire) {
	case PROTO_WIRE_VARINT:
		return proto_read_varint(r, &f->varint);
	case PROTO_WIRE_BYTES:
		return proto_read_bytes(r, &f->data, &f->len);
	case PROTO_WIRE_FIXED64:
	case PROTO_WIRE_FIXED32:
		n = wire == PROTO_WIRE_FIXED64 ? 8 : 4;
		if (n > proto_reader_left(r))
			return -EBADMSG;
		f->data = r->p;
		f->len = n;
		r->p += n;
		return 0;
	default:
		return -EPROTO;
	}
}

/*
 * Reads the next field, key and value. Returns 0; -EBADMSG if the bytes
 * end inside it; -EOVERFLOW for a varint over 10 bytes; -EINVAL for a
 * field number <= 0 (gogo's "illegal tag"); -EPROTO for a group or an
 * invalid wire type.
 */
static inline int proto_read_field(struct proto_reader *r, struct proto_field *f)
{
	int rc;

	f->start = r->p;
	f->varint = 0;
	f->data = NULL;
	f->len = 0;
	if (r->p < r->end && *r->p < 0x80) { /* one-byte key: fields 1..15 */
		uint8_t k = *r->p++;
		f->num = k >> 3;
		f->wire = k & 7;
	} else if ((rc = proto_read_key(r, &f->num, &f->wire)) != 0) {
		return rc;
	}
	if (f->num <= 0)
		return -EINVAL;
	return proto_read_value(r, f->wire, f);
}

/* Bytes the varint encoding of v takes (1..10). */
static inline size_t proto_varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Writes v as a varint at out (room for proto_varint_len(v) bytes);
 * returns the bytes written. */
static inline size_t proto_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

/* Writes the key of field num with wire type wire; returns the bytes
 * written. */
static inline size_t proto_key_put(uint8_t *out, uint32_t num, unsigned wire)
{
	return proto_varint_put(out, (uint64_t)num << 3 | wire);
}

/* Writes the key and length of field num as a length-delimited field of
 * len bytes, which the caller writes after them (at once or piece by
 * piece); returns the bytes written. */
static inline size_t proto_bytes_head_put(uint8_t *out, uint32_t num, size_t len)
{
	size_t n = proto_key_put(out, num, PROTO_WIRE_BYTES);

	return n + proto_varint_put(out + n, len);
}

/* Bytes of field num as a length-delimited field of len bytes: key,
 * length and the bytes (written whole even when empty). */
static inline size_t proto_bytes_field_len(uint32_t num, size_t len)
{
	return proto_varint_len((uint64_t)num << 3 | PROTO_WIRE_BYTES) + proto_varint_len(len) + len;
}

/* Writes field num as a length-delimited field holding data[0..len);
 * returns the bytes written. */
static inline size_t proto_bytes_put(uint8_t *out, uint32_t num, const uint8_t *data, size_t len)
{
	size_t n = proto_bytes_head_put(out, num, len);

	if (len)
		memcpy(out + n, data, len);
	return n + len;
}

/* Bytes of field num as a varint field holding v, or 0 when v is 0 (a
 * proto3 scalar at its default is left out, as every etcd marshaller
 * leaves it). */
static inline size_t proto_varint_field_len(uint32_t num, uint64_t v)
{
	return v ? proto_varint_len((uint64_t)num << 3 | PROTO_WIRE_VARINT) + proto_varint_len(v) : 0;
}

/* Writes that field (nothing when v is 0); returns the bytes written. */
static inline size_t proto_varint_field_put(uint8_t *out, uint32_t num, uint64_t v)
{
	if (!v)
		return 0;
	size_t n = proto_key_put(out, num, PROTO_WIRE_VARINT);

	return n + proto_varint_put(out + n, v);
}

#endif
