/*
 * The randomized model test of the MVCC layer (test_mvcc_model.c) over
 * keys around and far above the 32,750 bytes the index keeps whole
 * (kvindex.h, "Long keys"): most of them share their first 32 KiB or more
 * (runs of 'L' of lengths on both sides of the limits, then a few edge
 * bytes), some are runs of 0x00 whose escaped form straddles the
 * history's limit, some are short keys among them. Puts, deletes, txns,
 * ranges (one key, ranges, prefixes, from key; latest and at old
 * revisions), compactions, leases, reopening and rebuilding the index are
 * checked against the model, responses byte for byte, as there.
 */
#define MODEL_KEY_MAX 70000
#define MODEL_OPS 5000
#include <stddef.h>
#include <stdint.h>
static void pool_key(uint8_t *k, size_t *len);
#include "test_mvcc_model.c"

#include "stored/mvcc/mvcc_int.h"

/* One key of the pool's kinds. */
static size_t one_key(uint8_t *k)
{
	static const uint8_t alphabet[] = { 0x00, 0x01, 'L', 'a', 0xfe, 0xff };
	static const size_t runs[] = { 1, 2, 32745, 32749, 32750, 32751, 32752,
				       32766, 32768, 40000, 65000 };
	unsigned r = (unsigned)t_below(10);
	size_t n;
	if (r < 2) {
		n = 16370 + t_below(12);  /* esc: 32740 to 32762 bytes */
		memset(k, 0, n);
	} else {
		n = runs[t_below(sizeof(runs) / sizeof(runs[0]))];
		memset(k, 'L', n);
		if (n > 32740 && t_below(4) == 0)
			k[32740 + t_below(12)] = 0;  /* the escaped prefix ends mid-pair */
	}
	for (size_t extra = t_below(4); extra; extra--)
		k[n++] = alphabet[t_below(sizeof(alphabet))];
	return n;
}

/*
 * Two long keys that share the prefix their entries are filed under and
 * their tag (mvcc_int.h), so that lookups must tell them apart by the
 * KeyValues: a stem and three random bytes, tried until two tags meet.
 */
static uint8_t sibling[MODEL_KEY_MAX];
static size_t sibling_len;

static size_t tag_pair(uint8_t *k)
{
	static uint16_t tags[4096];
	static uint8_t sfx[4096][3];
	size_t n = t_below(3) == 0 ? 16376 + t_below(4) : 32751 + t_below(20000);
	memset(k, t_below(3) == 0 ? 0 : 'L', n);
	for (size_t i = 0; i < 4096; i++) {
		for (int j = 0; j < 3; j++)
			k[n + j] = sfx[i][j] = (uint8_t)t_rand();
		tags[i] = long_tag(k, n + 3);
		for (size_t h = 0; h < i; h++) {
			if (tags[h] != tags[i] || memcmp(sfx[h], sfx[i], 3) == 0)
				continue;
			memcpy(sibling, k, n);
			memcpy(sibling + n, sfx[h], 3);
			sibling_len = n + 3;
			return n + 3;
		}
	}
	T_FAIL("no two of 4096 keys share a 15-bit tag");
	return 0;
}

static void pool_key(uint8_t *k, size_t *len)
{
	if (sibling_len) {
		memcpy(k, sibling, sibling_len);
		*len = sibling_len;
		sibling_len = 0;
	} else {
		*len = t_below(3) == 0 ? tag_pair(k) : one_key(k);
	}
}
