/*
 * mvccpb.KeyValue bytes, read and written without protobuf-c: the key
 * bucket stores them, ranges hand them out as they are, and gatewayd copies
 * them into responses (docs/design.md: stored bytes are encoded once).
 *
 * Wire format (etcd's kv.proto): 1 key (bytes), 2 create_revision,
 * 3 mod_revision, 4 version (int64 varints), 5 value (bytes), 6 lease
 * (int64 varint). mvcc_kv_encode writes what etcd's gogo marshaller
 * writes: fields in number order, zero values and empty bytes left out.
 */
#ifndef CETCD_STORED_MVCC_KV_H
#define CETCD_STORED_MVCC_KV_H

#include <stddef.h>
#include <stdint.h>

/* A KeyValue's fields; key and value point into the bytes it was decoded
 * from (or wherever the caller keeps them for encoding). */
struct mvcc_kv {
	const uint8_t *key;
	size_t key_len;
	const uint8_t *value;
	size_t value_len;
	int64_t create_rev;
	int64_t mod_rev;
	int64_t version;
	int64_t lease;
};

/*
 * Decodes KeyValue bytes as protobuf does (any field order, the last of a
 * repeated field wins, unknown fields skipped). Missing fields read as
 * zero/empty. -EBADMSG when the bytes are not a well-formed KeyValue.
 */
int mvcc_kv_decode(const uint8_t *buf, size_t len, struct mvcc_kv *out);

/* Bytes mvcc_kv_encode writes for kv. */
size_t mvcc_kv_encoded_len(const struct mvcc_kv *kv);

/* Writes kv to out (room for mvcc_kv_encoded_len bytes); returns the
 * number of bytes written. */
size_t mvcc_kv_encode(const struct mvcc_kv *kv, uint8_t *out);

/*
 * keys_only: copies the KeyValue bytes kv (len bytes) to out without the
 * value field (5), as etcd answers a keys_only range. out has room for len
 * bytes and must not overlap kv. *out_len receives the bytes written.
 * -EBADMSG when kv is not well formed.
 */
int mvcc_kv_strip_value(const uint8_t *kv, size_t len, uint8_t *out, size_t *out_len);
/* The bytes mvcc_kv_strip_value would write, found without reading the
 * value's bytes (only the fields' keys and lengths). -EBADMSG. */
int mvcc_kv_stripped_len(const uint8_t *kv, size_t len, size_t *out_len);

/* Byte-string order (memcmp, then the shorter first), as Go's
 * bytes.Compare: <0, 0, >0. */
int mvcc_bytes_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

#endif
