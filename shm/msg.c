/*
 * Origin field of proposal bytes (see msg.h): encode, and find it among
 * the top-level fields of an encoded message without decoding the rest.
 * The bytes come from the WAL and from other members, so the walker
 * checks every length against what is left.
 */
#include <errno.h>
#include <string.h>

#include "proto/wire.h"
#include "shm/msg.h"

size_t msg_origin_encode(const struct msg_origin *o, uint8_t *buf)
{
	uint8_t body[MSG_ORIGIN_MAX_BYTES];
	size_t n = 0;

	body[n++] = 1 << 3 | PROTO_WIRE_VARINT;
	n += proto_varint_put(body + n, o->member_id);
	body[n++] = 2 << 3 | PROTO_WIRE_VARINT;
	n += proto_varint_put(body + n, o->slot);
	body[n++] = 3 << 3 | PROTO_WIRE_VARINT;
	n += proto_varint_put(body + n, o->generation);
	body[n++] = 4 << 3 | PROTO_WIRE_VARINT;
	n += proto_varint_put(body + n, o->request_id);

	return proto_bytes_put(buf, MSG_ORIGIN_FIELD, body, n);
}

/* The fields of the origin message: any order, unknown ones skipped; a
 * known field of another wire type is skipped too. */
static int parse_origin(const uint8_t *p, size_t len, struct msg_origin *o)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	memset(o, 0, sizeof(*o));
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.wire != PROTO_WIRE_VARINT)
			continue;
		switch (f.num) {
		case 1: o->member_id = f.varint; break;
		case 2:
			if (f.varint > UINT32_MAX)
				return -EBADMSG;
			o->slot = (uint32_t)f.varint;
			break;
		case 3: o->generation = f.varint; break;
		case 4: o->request_id = f.varint; break;
		default: break;
		}
	}
	return 0;
}

int msg_origin_find(const uint8_t *data, size_t len, struct msg_origin *o)
{
	struct proto_reader r = proto_reader_init(data, len);
	struct proto_field f;
	int found = 0;

	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if ((uint32_t)f.num != MSG_ORIGIN_FIELD || f.wire != PROTO_WIRE_BYTES)
			continue;
		if (parse_origin(f.data, f.len, o))
			return -EBADMSG;
		found = 1;
	}
	return found ? 0 : -ENOENT;
}
