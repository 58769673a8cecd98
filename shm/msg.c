/*
 * Origin field of proposal bytes (see msg.h): encode, and find it among
 * the top-level fields of an encoded message without decoding the rest.
 * The bytes come from the WAL and from other members, so the walker
 * checks every length against what is left.
 */
#include <errno.h>
#include <string.h>

#include "shm/msg.h"

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Reads a varint at *pos; 0, or -EBADMSG if it is cut short or longer than
 * ten bytes. */
static int get_varint(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
	uint64_t x = 0;
	unsigned shift;

	for (shift = 0; shift < 70; shift += 7) {
		if (*pos >= len)
			return -EBADMSG;
		uint8_t b = p[(*pos)++];
		if (shift == 63 && b > 1)
			return -EBADMSG;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return -EBADMSG;
}

size_t msg_origin_encode(const struct msg_origin *o, uint8_t *buf)
{
	uint8_t body[MSG_ORIGIN_MAX_BYTES];
	size_t n = 0, out = 0;

	body[n++] = 1 << 3 | WIRE_VARINT;
	n += put_varint(body + n, o->member_id);
	body[n++] = 2 << 3 | WIRE_VARINT;
	n += put_varint(body + n, o->slot);
	body[n++] = 3 << 3 | WIRE_VARINT;
	n += put_varint(body + n, o->generation);
	body[n++] = 4 << 3 | WIRE_VARINT;
	n += put_varint(body + n, o->request_id);

	out += put_varint(buf, (uint64_t)MSG_ORIGIN_FIELD << 3 | WIRE_LEN);
	out += put_varint(buf + out, n);
	memcpy(buf + out, body, n);
	return out + n;
}

/* Skips the value of a field of wire type `wt` at *pos. */
static int skip_value(const uint8_t *p, size_t len, size_t *pos, unsigned wt)
{
	uint64_t v;

	switch (wt) {
	case WIRE_VARINT:
		return get_varint(p, len, pos, &v);
	case WIRE_FIXED64:
		if (len - *pos < 8)
			return -EBADMSG;
		*pos += 8;
		return 0;
	case WIRE_FIXED32:
		if (len - *pos < 4)
			return -EBADMSG;
		*pos += 4;
		return 0;
	case WIRE_LEN:
		if (get_varint(p, len, pos, &v) || v > len - *pos)
			return -EBADMSG;
		*pos += (size_t)v;
		return 0;
	default:
		return -EBADMSG; /* groups are not used by any of our messages */
	}
}

static int parse_origin(const uint8_t *p, size_t len, struct msg_origin *o)
{
	size_t pos = 0;
	uint64_t key, v;

	memset(o, 0, sizeof(*o));
	while (pos < len) {
		if (get_varint(p, len, &pos, &key) || (key >> 3) == 0)
			return -EBADMSG;
		if ((key & 7) != WIRE_VARINT) {
			if (skip_value(p, len, &pos, (unsigned)(key & 7)))
				return -EBADMSG;
			continue;
		}
		if (get_varint(p, len, &pos, &v))
			return -EBADMSG;
		switch (key >> 3) {
		case 1: o->member_id = v; break;
		case 2:
			if (v > UINT32_MAX)
				return -EBADMSG;
			o->slot = (uint32_t)v;
			break;
		case 3: o->generation = v; break;
		case 4: o->request_id = v; break;
		default: break;
		}
	}
	return 0;
}

int msg_origin_find(const uint8_t *data, size_t len, struct msg_origin *o)
{
	size_t pos = 0;
	uint64_t key, flen;
	int found = 0;

	while (pos < len) {
		if (get_varint(data, len, &pos, &key) || (key >> 3) == 0)
			return -EBADMSG;
		if ((key >> 3) != MSG_ORIGIN_FIELD || (key & 7) != WIRE_LEN) {
			if (skip_value(data, len, &pos, (unsigned)(key & 7)))
				return -EBADMSG;
			continue;
		}
		if (get_varint(data, len, &pos, &flen) || flen > len - pos)
			return -EBADMSG;
		if (parse_origin(data + pos, (size_t)flen, o))
			return -EBADMSG;
		pos += (size_t)flen;
		found = 1;
	}
	return found ? 0 : -ENOENT;
}
