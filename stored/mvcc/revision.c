/*
 * Revision bytes of the key bucket (see revision.h).
 */
#include "stored/mvcc/revision.h"

#include <errno.h>

void rev_put_be64(uint8_t out[8], uint64_t v)
{
	for (int i = 7; i >= 0; i--) {
		out[i] = (uint8_t)v;
		v >>= 8;
	}
}

uint64_t rev_get_be64(const uint8_t in[8])
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | in[i];
	return v;
}

void rev_encode(struct rev r, uint8_t out[REV_BYTES])
{
	rev_put_be64(out, (uint64_t)r.main);
	out[8] = '_';
	rev_put_be64(out + 9, (uint64_t)r.sub);
}

void rev_encode_tombstone(struct rev r, uint8_t out[REV_MARKED_BYTES])
{
	rev_encode(r, out);
	out[REV_BYTES] = REV_TOMBSTONE_MARK;
}

int rev_decode(const uint8_t *b, size_t len, struct rev *out, bool *tombstone)
{
	if (len != REV_BYTES && len != REV_MARKED_BYTES)
		return -EINVAL;
	if (b[8] != '_')
		return -EINVAL;
	if (len == REV_MARKED_BYTES && b[REV_BYTES] != REV_TOMBSTONE_MARK)
		return -EINVAL;
	out->main = (int64_t)rev_get_be64(b);
	out->sub = (int64_t)rev_get_be64(b + 9);
	if (tombstone)
		*tombstone = len == REV_MARKED_BYTES;
	return 0;
}
