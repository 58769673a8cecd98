/* The bodies of etcd's lease calls between members (see leasehttp.h). */
#include "cluster/leasehttp.h"

#include <errno.h>
#include <string.h>

#include "proto/wire.h"

/* Field numbers: LeaseKeepAliveRequest and LeaseTimeToLiveRequest have
 * ID = 1 (and Keys = 2); both responses have header = 1, ID = 2, TTL = 3;
 * the internal messages wrap theirs in field 1. */
enum {
	LH_REQ_ID = 1,
	LH_REQ_KEYS = 2,
	LH_WRAP = 1,
	LH_RESP_HEADER = 1,
	LH_RESP_ID = 2,
	LH_RESP_TTL = 3,
};

size_t leasehttp_request_encode(const struct leasehttp_req *r, uint8_t *buf)
{
	uint8_t inner[32];
	size_t n = 0;

	if (r->id) {
		n += proto_key_put(inner + n, LH_REQ_ID, PROTO_WIRE_VARINT);
		n += proto_varint_put(inner + n, (uint64_t)r->id);
	}
	if (r->internal && r->keys) {
		n += proto_key_put(inner + n, LH_REQ_KEYS, PROTO_WIRE_VARINT);
		inner[n++] = 1;
	}
	if (!r->internal) {
		memcpy(buf, inner, n);
		return n;
	}
	/* gogo writes the wrapped message even when it is empty */
	return proto_bytes_put(buf, LH_WRAP, inner, n);
}

/* Reads the varint fields of a request message (ID, Keys); other fields
 * are skipped as gogo skips unknown ones. A field of a known number with
 * another wire type is an error, as gogo refuses it. */
static int lh_read_req(const uint8_t *b, size_t len, struct leasehttp_req *out)
{
	struct proto_reader r = proto_reader_init(b, len);
	struct proto_field f;

	while (proto_reader_left(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num != LH_REQ_ID && f.num != LH_REQ_KEYS)
			continue;
		if (f.wire != PROTO_WIRE_VARINT)
			return -EBADMSG;
		if (f.num == LH_REQ_ID)
			out->id = (int64_t)f.varint;
		else if (out->internal)
			out->keys = f.varint != 0;
	}
	return 0;
}

int leasehttp_request_decode(bool internal, const uint8_t *body, size_t len,
			     struct leasehttp_req *out)
{
	struct proto_reader r = proto_reader_init(body, len);
	struct proto_field f;
	int rc;

	memset(out, 0, sizeof(*out));
	out->internal = internal;
	if (!internal)
		return lh_read_req(body, len, out);
	/* protobuf merges repeated occurrences of a message field */
	while (proto_reader_left(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num != LH_WRAP)
			continue;
		if (f.wire != PROTO_WIRE_BYTES)
			return -EBADMSG;
		if ((rc = lh_read_req(f.data, f.len, out)) != 0)
			return rc;
	}
	return 0;
}

/* The last varint of field num in msg (0 when absent). */
static int lh_varint(const uint8_t *msg, size_t len, int32_t num, int64_t *v)
{
	struct proto_reader r = proto_reader_init(msg, len);
	struct proto_field f;

	*v = 0;
	while (proto_reader_left(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num != num)
			continue;
		if (f.wire != PROTO_WIRE_VARINT)
			return -EBADMSG;
		*v = (int64_t)f.varint;
	}
	return 0;
}

int leasehttp_response_ttl(const uint8_t *resp, size_t len, int64_t *ttl)
{
	return lh_varint(resp, len, LH_RESP_TTL, ttl);
}

int leasehttp_response_decode(const struct leasehttp_req *r, const uint8_t *body, size_t len,
			      const uint8_t **resp, size_t *resp_len)
{
	int64_t id;

	*resp = body;
	*resp_len = len;
	if (r->internal) {
		struct proto_reader rd = proto_reader_init(body, len);
		struct proto_field f;
		bool found = false;
		while (proto_reader_left(&rd)) {
			if (proto_read_field(&rd, &f))
				return -EBADMSG;
			if (f.num != LH_WRAP)
				continue;
			if (f.wire != PROTO_WIRE_BYTES)
				return -EBADMSG;
			*resp = f.data;
			*resp_len = f.len;
			found = true;
		}
		if (!found)
			return -EBADMSG; /* etcd's client would dereference nil */
	}
	if (lh_varint(*resp, *resp_len, LH_RESP_ID, &id))
		return -EBADMSG;
	if (lh_varint(*resp, *resp_len, LH_RESP_TTL, &(int64_t){ 0 }))
		return -EBADMSG;
	return id == r->id ? 0 : -ESRCH;
}

long leasehttp_reheader(const uint8_t *resp, size_t resp_len, const uint8_t *hdr, size_t hdr_len,
			uint8_t *out)
{
	struct proto_reader r = proto_reader_init(resp, resp_len);
	struct proto_field f;
	size_t w = proto_bytes_put(out, LH_RESP_HEADER, hdr, hdr_len);

	while (proto_reader_left(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num == LH_RESP_HEADER)
			continue;
		size_t n = (size_t)(r.p - f.start);
		memcpy(out + w, f.start, n);
		w += n;
	}
	return (long)w;
}
