/*
 * mvccpb.KeyValue codec (see mvcc_kv.h).
 */
#include "stored/mvcc/mvcc_kv.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "proto/wire.h"

enum {
	KV_FIELD_KEY = 1,
	KV_FIELD_CREATE = 2,
	KV_FIELD_MOD = 3,
	KV_FIELD_VERSION = 4,
	KV_FIELD_VALUE = 5,
	KV_FIELD_LEASE = 6,
};

int mvcc_bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

int mvcc_kv_decode(const uint8_t *buf, size_t len, struct mvcc_kv *out)
{
	struct proto_reader r = proto_reader_init(buf, len);
	memset(out, 0, sizeof(*out));
	while (!proto_reader_done(&r)) {
		struct proto_field f;
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		bool bytes_field = f.num == KV_FIELD_KEY || f.num == KV_FIELD_VALUE;
		if (f.num > KV_FIELD_LEASE)
			continue;
		if (f.wire != (bytes_field ? PROTO_WIRE_BYTES : PROTO_WIRE_VARINT))
			return -EBADMSG;
		switch (f.num) {
		case KV_FIELD_KEY:
			out->key = f.data;
			out->key_len = f.len;
			break;
		case KV_FIELD_VALUE:
			out->value = f.data;
			out->value_len = f.len;
			break;
		case KV_FIELD_CREATE:
			out->create_rev = (int64_t)f.varint;
			break;
		case KV_FIELD_MOD:
			out->mod_rev = (int64_t)f.varint;
			break;
		case KV_FIELD_VERSION:
			out->version = (int64_t)f.varint;
			break;
		case KV_FIELD_LEASE:
			out->lease = (int64_t)f.varint;
			break;
		}
	}
	return 0;
}

static size_t bytes_field_len(size_t n)
{
	return n ? 1 + proto_varint_len(n) + n : 0;
}

static size_t int_field_len(int64_t v)
{
	return v ? 1 + proto_varint_len((uint64_t)v) : 0;
}

size_t mvcc_kv_encoded_len(const struct mvcc_kv *kv)
{
	return bytes_field_len(kv->key_len) + int_field_len(kv->create_rev) +
	       int_field_len(kv->mod_rev) + int_field_len(kv->version) +
	       bytes_field_len(kv->value_len) + int_field_len(kv->lease);
}

static size_t put_bytes_field(uint8_t *out, unsigned num, const uint8_t *p, size_t n)
{
	if (!n)
		return 0;
	size_t w = proto_varint_put(out, (uint64_t)num << 3 | PROTO_WIRE_BYTES);
	w += proto_varint_put(out + w, n);
	memcpy(out + w, p, n);
	return w + n;
}

static size_t put_int_field(uint8_t *out, unsigned num, int64_t v)
{
	if (!v)
		return 0;
	size_t w = proto_varint_put(out, (uint64_t)num << 3 | PROTO_WIRE_VARINT);
	return w + proto_varint_put(out + w, (uint64_t)v);
}

size_t mvcc_kv_encode(const struct mvcc_kv *kv, uint8_t *out)
{
	size_t w = 0;
	w += put_bytes_field(out + w, KV_FIELD_KEY, kv->key, kv->key_len);
	w += put_int_field(out + w, KV_FIELD_CREATE, kv->create_rev);
	w += put_int_field(out + w, KV_FIELD_MOD, kv->mod_rev);
	w += put_int_field(out + w, KV_FIELD_VERSION, kv->version);
	w += put_bytes_field(out + w, KV_FIELD_VALUE, kv->value, kv->value_len);
	w += put_int_field(out + w, KV_FIELD_LEASE, kv->lease);
	return w;
}

int mvcc_kv_strip_value(const uint8_t *kv, size_t len, uint8_t *out, size_t *out_len)
{
	struct proto_reader r = proto_reader_init(kv, len);
	size_t w = 0;
	while (!proto_reader_done(&r)) {
		struct proto_field f;
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num == KV_FIELD_VALUE)
			continue;
		memcpy(out + w, f.start, (size_t)(r.p - f.start));
		w += (size_t)(r.p - f.start);
	}
	*out_len = w;
	return 0;
}
