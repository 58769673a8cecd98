/*
 * mvccpb.KeyValue codec (see mvcc_kv.h).
 */
#include "stored/mvcc/mvcc_kv.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "stored/alloc.h"

enum {
	KV_FIELD_KEY = 1,
	KV_FIELD_CREATE = 2,
	KV_FIELD_MOD = 3,
	KV_FIELD_VERSION = 4,
	KV_FIELD_VALUE = 5,
	KV_FIELD_LEASE = 6,
};

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_BYTES = 2, WT_FIXED32 = 5 };

int mvcc_bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

int mvcc_reserve(void **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 64;
	while (n < need)
		n *= 2;
	void *p = stored_realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

size_t mvcc_varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

size_t mvcc_varint_put(uint8_t *out, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

/* Reads a varint at *pos; false when it is truncated or longer than 10 bytes. */
static bool varint_get(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 70; shift += 7) {
		if (*pos >= len)
			return false;
		uint8_t b = buf[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return true;
		}
	}
	return false;
}

/* One field of a message: its number, wire type and where its bytes are. */
struct kv_field {
	uint32_t num;
	uint32_t wt;
	uint64_t varint;        /* WT_VARINT */
	const uint8_t *data;    /* WT_BYTES */
	size_t data_len;
	size_t start, end;      /* the whole field, tag included */
};

/* Reads the field at *pos. 0, or -EBADMSG. */
static int field_next(const uint8_t *buf, size_t len, size_t *pos, struct kv_field *f)
{
	uint64_t tag, n;
	f->start = *pos;
	if (!varint_get(buf, len, pos, &tag) || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
		return -EBADMSG;
	f->num = (uint32_t)(tag >> 3);
	f->wt = (uint32_t)(tag & 7);
	switch (f->wt) {
	case WT_VARINT:
		if (!varint_get(buf, len, pos, &f->varint))
			return -EBADMSG;
		break;
	case WT_FIXED64:
		if (len - *pos < 8)
			return -EBADMSG;
		*pos += 8;
		break;
	case WT_FIXED32:
		if (len - *pos < 4)
			return -EBADMSG;
		*pos += 4;
		break;
	case WT_BYTES:
		if (!varint_get(buf, len, pos, &n) || n > len - *pos)
			return -EBADMSG;
		f->data = buf + *pos;
		f->data_len = (size_t)n;
		*pos += (size_t)n;
		break;
	default:
		return -EBADMSG;  /* groups are not used by etcd's messages */
	}
	f->end = *pos;
	return 0;
}

int mvcc_kv_decode(const uint8_t *buf, size_t len, struct mvcc_kv *out)
{
	size_t pos = 0;
	memset(out, 0, sizeof(*out));
	while (pos < len) {
		struct kv_field f = { 0 };
		int rc = field_next(buf, len, &pos, &f);
		if (rc)
			return rc;
		bool bytes_field = f.num == KV_FIELD_KEY || f.num == KV_FIELD_VALUE;
		if (f.num > KV_FIELD_LEASE)
			continue;
		if (bytes_field != (f.wt == WT_BYTES) || (!bytes_field && f.wt != WT_VARINT))
			return -EBADMSG;
		switch (f.num) {
		case KV_FIELD_KEY:
			out->key = f.data;
			out->key_len = f.data_len;
			break;
		case KV_FIELD_VALUE:
			out->value = f.data;
			out->value_len = f.data_len;
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
	return n ? 1 + mvcc_varint_len(n) + n : 0;
}

static size_t int_field_len(int64_t v)
{
	return v ? 1 + mvcc_varint_len((uint64_t)v) : 0;
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
	size_t w = mvcc_varint_put(out, (uint64_t)num << 3 | WT_BYTES);
	w += mvcc_varint_put(out + w, n);
	memcpy(out + w, p, n);
	return w + n;
}

static size_t put_int_field(uint8_t *out, unsigned num, int64_t v)
{
	if (!v)
		return 0;
	size_t w = mvcc_varint_put(out, (uint64_t)num << 3 | WT_VARINT);
	return w + mvcc_varint_put(out + w, (uint64_t)v);
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
	size_t pos = 0, w = 0;
	while (pos < len) {
		struct kv_field f = { 0 };
		int rc = field_next(kv, len, &pos, &f);
		if (rc)
			return rc;
		if (f.num == KV_FIELD_VALUE)
			continue;
		memcpy(out + w, kv + f.start, f.end - f.start);
		w += f.end - f.start;
	}
	*out_len = w;
	return 0;
}
