/*
 * Fuzz target: a latest entry of cetcd's key index as a db file holds it
 * (stored/mvcc/kvindex.h: 'v' varint references, 'r' fixed ones of
 * format 2, 'i' inline KeyValues), read by kvindex_latest_parse. The
 * first byte is the key's length (up to 15), then the key, then the
 * value. A reference that parses, written again as this build writes
 * one, must parse to the same fields; an inline entry's KeyValue lies
 * inside the value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/wire.h"
#include "stored/mvcc/mvcc_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvindex_entry e, again;
	uint8_t buf[LATEST_REF_VARINT_MAX];

	if (size == 0)
		return 0;
	size_t klen = data[0] % 16;
	if (size < 1 + klen)
		return 0;
	const uint8_t *key = data + 1, *v = data + 1 + klen;
	size_t vlen = size - 1 - klen;
	if (kvindex_latest_parse(key, klen, v, vlen, true, &e) != 0)
		return 0;
	if (e.kv) {
		if (e.kv < v || e.kv + e.kv_len > v + vlen)
			abort();
		return 0;
	}
	const uint64_t f[5] = { (uint64_t)e.mod.main, (uint64_t)e.mod.sub,
				(uint64_t)e.create_rev, (uint64_t)e.version, (uint64_t)e.lease };
	size_t n = 1;
	buf[0] = LATEST_REF_VARINT;
	for (int i = 0; i < 5; i++)
		n += proto_varint_put(buf + n, f[i]);
	if (kvindex_latest_parse(key, klen, buf, n, true, &again) != 0 || again.kv ||
	    memcmp(&again.mod, &e.mod, sizeof(e.mod)) != 0 || again.create_rev != e.create_rev ||
	    again.version != e.version || again.lease != e.lease)
		abort();
	return 0;
}
