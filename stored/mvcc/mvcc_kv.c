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

/* An empty key or value is left out. */
static size_t bytes_field_len(unsigned num, size_t n)
{
	return n ? proto_bytes_field_len(num, n) : 0;
}

size_t mvcc_kv_encoded_len(const struct mvcc_kv *kv)
{
	return bytes_field_len(KV_FIELD_KEY, kv->key_len) +
	       proto_varint_field_len(KV_FIELD_CREATE, (uint64_t)kv->create_rev) +
	       proto_varint_field_len(KV_FIELD_MOD, (uint64_t)kv->mod_rev) +
	       proto_varint_field_len(KV_FIELD_VERSION, (uint64_t)kv->version) +
	       bytes_field_len(KV_FIELD_VALUE, kv->value_len) +
	       proto_varint_field_len(KV_FIELD_LEASE, (uint64_t)kv->lease);
}

static size_t put_bytes_field(uint8_t *out, unsigned num, const uint8_t *p, size_t n)
{
	return n ? proto_bytes_put(out, num, p, n) : 0;
}

size_t mvcc_kv_encode(const struct mvcc_kv *kv, uint8_t *out)
{
	size_t w = 0;
	w += put_bytes_field(out + w, KV_FIELD_KEY, kv->key, kv->key_len);
	w += proto_varint_field_put(out + w, KV_FIELD_CREATE, (uint64_t)kv->create_rev);
	w += proto_varint_field_put(out + w, KV_FIELD_MOD, (uint64_t)kv->mod_rev);
	w += proto_varint_field_put(out + w, KV_FIELD_VERSION, (uint64_t)kv->version);
	w += put_bytes_field(out + w, KV_FIELD_VALUE, kv->value, kv->value_len);
	w += proto_varint_field_put(out + w, KV_FIELD_LEASE, (uint64_t)kv->lease);
	return w;
}

/* Walks the fields of kv and copies every one but the value to out (NULL:
 * only counts them); never reads the value's bytes. */
static int strip_value(const uint8_t *kv, size_t len, uint8_t *out, size_t *out_len)
{
	struct proto_reader r = proto_reader_init(kv, len);
	size_t w = 0;
	while (!proto_reader_done(&r)) {
		struct proto_field f;
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num == KV_FIELD_VALUE)
			continue;
		if (out)
			memcpy(out + w, f.start, (size_t)(r.p - f.start));
		w += (size_t)(r.p - f.start);
	}
	*out_len = w;
	return 0;
}

int mvcc_kv_strip_value(const uint8_t *kv, size_t len, uint8_t *out, size_t *out_len)
{
	return strip_value(kv, len, out, out_len);
}

int mvcc_kv_stripped_len(const uint8_t *kv, size_t len, size_t *out_len)
{
	return strip_value(kv, len, NULL, out_len);
}
