/*
 * etcd's WAL bytes (see walrec.h): decoders (on proto/wire.h's reader) and a
 * writer for walpb.Record, raftpb.Entry, raftpb.HardState and
 * walpb.Snapshot. The field order and the always-written fields follow
 * etcd's gogo-generated marshalers, so the encoded bytes, and with them
 * the CRC chain, are etcd's.
 */
#include "raftd/wal/walrec.h"

#include <errno.h>
#include <string.h>

#include "proto/wire.h"
#include "base/crc32c/crc32c.h"

/* ---- wire reader ---- */

/*
 * Reads a message made of varint fields 1..nv (stored in v[field - 1])
 * and at most one bytes field (number bytes_field, 0 for none). Unknown
 * fields are skipped; a known field of the wrong wire type is an error.
 */
static int pb_decode_simple(const uint8_t *p, size_t len, uint64_t *v, unsigned nv,
			    unsigned bytes_field, bool *has_bytes,
			    const uint8_t **bytes, size_t *bytes_len)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;

	memset(v, 0, nv * sizeof(*v));
	if (has_bytes) {
		*has_bytes = false;
		*bytes = NULL;
		*bytes_len = 0;
	}
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if ((unsigned)f.num <= nv) {
			if (f.wire != PROTO_WIRE_VARINT)
				return -EBADMSG;
			v[f.num - 1] = f.varint;
		} else if (bytes_field && (unsigned)f.num == bytes_field) {
			if (f.wire != PROTO_WIRE_BYTES)
				return -EBADMSG;
			*bytes = f.data;
			*bytes_len = f.len;
			*has_bytes = true;
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

/* Bytes of a record of type whose data (when has_data) is dlen bytes,
 * with the largest crc varint: frames are sized before the crc is known. */
static size_t frame_size_max(int64_t type, bool has_data, size_t dlen)
{
	size_t rec = 1 + proto_varint_len((uint64_t)type) + 1 + 5;
	if (has_data)
		rec += 1 + proto_varint_len(dlen) + dlen;
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
	size_t rec = 1 + proto_varint_len((uint64_t)type) + 1 + proto_varint_len(crc);
	if (has_data)
		rec += 1 + proto_varint_len(dlen) + dlen;
	unsigned pad;
	uint64_t word = walrec_frame_word(rec, &pad);
	for (int i = 0; i < 8; i++)
		dst[i] = (uint8_t)(word >> (8 * i));
	uint8_t *p = dst + WALREC_FRAME_BYTES;
	*p++ = 0x08;
	p += proto_varint_put(p, (uint64_t)type);
	*p++ = 0x10;
	p += proto_varint_put(p, crc);
	if (has_data) {
		*p++ = 0x1a;
		p += proto_varint_put(p, dlen);
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
		p += proto_varint_put(p, v[i]);
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
		n += proto_varint_put(buf + n, e->len);
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
