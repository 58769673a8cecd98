/*
 * etcd's WAL bytes (see walrec.h): a minimal protobuf wire reader and
 * writer for walpb.Record, raftpb.Entry, raftpb.HardState and
 * walpb.Snapshot. The field order and the always-written fields follow
 * etcd's gogo-generated marshalers, so the encoded bytes, and with them
 * the CRC chain, are etcd's.
 */
#include "raftd/walrec.h"

#include <errno.h>
#include <string.h>

#include "raftd/crc32c.h"

/* ---- wire reader ---- */

struct pb_reader {
	const uint8_t *p;
	const uint8_t *end;
};

/* A varint of at most 10 bytes; bits past 64 are dropped, as gogo does. */
static int pb_varint(struct pb_reader *r, uint64_t *v)
{
	uint64_t x = 0;
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
	return -EBADMSG;
}

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_BYTES = 2, PB_FIXED32 = 5 };

/* The next field key. Field number 0 and group wire types are refused
 * (etcd's messages have neither). */
static int pb_key(struct pb_reader *r, uint64_t *field, unsigned *wire)
{
	uint64_t k;
	if (pb_varint(r, &k))
		return -EBADMSG;
	*field = k >> 3;
	*wire = (unsigned)(k & 7);
	if (*field == 0 || *wire == 3 || *wire == 4 || *wire > 5)
		return -EBADMSG;
	return 0;
}

static int pb_bytes(struct pb_reader *r, const uint8_t **data, size_t *len)
{
	uint64_t n;
	if (pb_varint(r, &n) || n > (uint64_t)(r->end - r->p))
		return -EBADMSG;
	*data = r->p;
	*len = (size_t)n;
	r->p += n;
	return 0;
}

static int pb_skip(struct pb_reader *r, unsigned wire)
{
	uint64_t v;
	const uint8_t *d;
	size_t n;

	switch (wire) {
	case PB_VARINT:
		return pb_varint(r, &v);
	case PB_BYTES:
		return pb_bytes(r, &d, &n);
	case PB_FIXED64:
	case PB_FIXED32:
		n = wire == PB_FIXED64 ? 8 : 4;
		if (n > (size_t)(r->end - r->p))
			return -EBADMSG;
		r->p += n;
		return 0;
	}
	return -EBADMSG;
}

/*
 * Reads a message made of varint fields 1..nv (stored in v[field - 1])
 * and at most one bytes field (number bytes_field, 0 for none). Unknown
 * fields are skipped; a known field of the wrong wire type is an error.
 */
static int pb_decode_simple(const uint8_t *p, size_t len, uint64_t *v, unsigned nv,
			    unsigned bytes_field, bool *has_bytes,
			    const uint8_t **bytes, size_t *bytes_len)
{
	struct pb_reader r = { p, len ? p + len : p };
	uint64_t field;
	unsigned wire;

	memset(v, 0, nv * sizeof(*v));
	if (has_bytes) {
		*has_bytes = false;
		*bytes = NULL;
		*bytes_len = 0;
	}
	while (r.p < r.end) {
		if (pb_key(&r, &field, &wire))
			return -EBADMSG;
		if (field >= 1 && field <= nv) {
			if (wire != PB_VARINT || pb_varint(&r, &v[field - 1]))
				return -EBADMSG;
		} else if (bytes_field && field == bytes_field) {
			if (wire != PB_BYTES || pb_bytes(&r, bytes, bytes_len))
				return -EBADMSG;
			*has_bytes = true;
		} else if (pb_skip(&r, wire)) {
			return -EBADMSG;
		}
	}
	return 0;
}

int walrec_decode(const uint8_t *p, size_t len, struct walrec *out)
{
	uint64_t v[2];
	if (pb_decode_simple(p, len, v, 2, 3, &out->has_data, &out->data, &out->len))
		return -EBADMSG;
	out->type = (int64_t)v[0];
	out->crc = (uint32_t)v[1];
	return 0;
}

int walrec_decode_entry(const uint8_t *p, size_t len, struct raft_entry *out)
{
	uint64_t v[3];
	bool has;
	const uint8_t *d;
	size_t n;

	if (pb_decode_simple(p, len, v, 3, 4, &has, &d, &n) || n > UINT32_MAX)
		return -EBADMSG;
	out->type = (uint32_t)v[0];
	out->term = v[1];
	out->index = v[2];
	out->len = (uint32_t)n;
	out->data = n ? (uint8_t *)d : NULL;
	return 0;
}

int walrec_decode_state(const uint8_t *p, size_t len, struct raft_hardstate *out)
{
	uint64_t v[3];
	if (pb_decode_simple(p, len, v, 3, 0, NULL, NULL, NULL))
		return -EBADMSG;
	out->term = v[0];
	out->vote = v[1];
	out->commit = v[2];
	return 0;
}

int walrec_decode_snapshot(const uint8_t *p, size_t len, uint64_t *index, uint64_t *term)
{
	uint64_t v[2];
	if (pb_decode_simple(p, len, v, 2, 0, NULL, NULL, NULL))
		return -EBADMSG;
	*index = v[0];
	*term = v[1];
	return 0;
}

/* ---- wire writer ---- */

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *varint_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Bytes of a record of type whose data (when has_data) is dlen bytes,
 * with the largest crc varint: frames are sized before the crc is known. */
static size_t frame_size_max(int64_t type, bool has_data, size_t dlen)
{
	size_t rec = 1 + varint_len((uint64_t)type) + 1 + 5;
	if (has_data)
		rec += 1 + varint_len(dlen) + dlen;
	return WALREC_FRAME_BYTES + rec + 7;
}

/*
 * Writes a frame whose record data (when has_data) is head[0..hlen) then
 * body[0..blen), with crc as given. Returns the frame's size.
 */
static size_t frame_put(uint8_t *dst, int64_t type, uint32_t crc, bool has_data,
			const uint8_t *head, size_t hlen, const uint8_t *body, size_t blen)
{
	size_t dlen = hlen + blen;
	size_t rec = 1 + varint_len((uint64_t)type) + 1 + varint_len(crc);
	if (has_data)
		rec += 1 + varint_len(dlen) + dlen;
	unsigned pad;
	uint64_t word = walrec_frame_word(rec, &pad);
	for (int i = 0; i < 8; i++)
		dst[i] = (uint8_t)(word >> (8 * i));
	uint8_t *p = dst + WALREC_FRAME_BYTES;
	*p++ = 0x08;
	p = varint_put(p, (uint64_t)type);
	*p++ = 0x10;
	p = varint_put(p, crc);
	if (has_data) {
		*p++ = 0x1a;
		p = varint_put(p, dlen);
		if (hlen)
			memcpy(p, head, hlen);
		p += hlen;
		if (blen)
			memcpy(p, body, blen);
		p += blen;
	}
	memset(p, 0, pad);
	return WALREC_FRAME_BYTES + rec + pad;
}

/* A message of varint fields 1..n, all written. Returns its length. */
static size_t put_varint_fields(uint8_t *buf, const uint64_t *v, unsigned n)
{
	uint8_t *p = buf;
	for (unsigned i = 0; i < n; i++) {
		*p++ = (uint8_t)((i + 1) << 3);
		p = varint_put(p, v[i]);
	}
	return (size_t)(p - buf);
}

/* raftpb.Entry up to (and with) the key and length of Data; the data
 * bytes themselves follow it. At most 3 * 11 + 1 + 5 bytes. */
static size_t entry_head(uint8_t *buf, const struct raft_entry *e)
{
	uint64_t v[3] = { e->type, e->term, e->index };
	size_t n = put_varint_fields(buf, v, 3);
	if (e->data) {
		buf[n++] = 0x22;
		n = (size_t)(varint_put(buf + n, e->len) - buf);
	}
	return n;
}

size_t walrec_entry_size(const struct raft_entry *e)
{
	uint8_t head[48];
	return frame_size_max(WALREC_ENTRY, true, entry_head(head, e) + e->len);
}

size_t walrec_encode_entry(uint8_t *dst, uint32_t *crc, const struct raft_entry *e)
{
	uint8_t head[48];
	size_t hlen = entry_head(head, e);
	*crc = crc32c_update(*crc, head, hlen);
	*crc = crc32c_update(*crc, e->data, e->len);
	return frame_put(dst, WALREC_ENTRY, *crc, true, head, hlen, e->data, e->len);
}

size_t walrec_encode_state(uint8_t *dst, uint32_t *crc, const struct raft_hardstate *hs)
{
	uint8_t buf[33];
	uint64_t v[3] = { hs->term, hs->vote, hs->commit };
	size_t n = put_varint_fields(buf, v, 3);
	*crc = crc32c_update(*crc, buf, n);
	return frame_put(dst, WALREC_STATE, *crc, true, buf, n, NULL, 0);
}

size_t walrec_encode_snapshot(uint8_t *dst, uint32_t *crc, uint64_t index, uint64_t term)
{
	uint8_t buf[22];
	uint64_t v[2] = { index, term };
	size_t n = put_varint_fields(buf, v, 2);
	*crc = crc32c_update(*crc, buf, n);
	return frame_put(dst, WALREC_SNAPSHOT, *crc, true, buf, n, NULL, 0);
}

size_t walrec_metadata_size(const uint8_t *data, size_t len)
{
	return frame_size_max(WALREC_METADATA, data != NULL, len);
}

size_t walrec_encode_metadata(uint8_t *dst, uint32_t *crc, const uint8_t *data, size_t len)
{
	*crc = crc32c_update(*crc, data, len);
	return frame_put(dst, WALREC_METADATA, *crc, data != NULL, NULL, 0, data, len);
}

size_t walrec_encode_crc(uint8_t *dst, uint32_t crc)
{
	return frame_put(dst, WALREC_CRC, crc, false, NULL, 0, NULL, 0);
}
