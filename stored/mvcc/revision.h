/*
 * MVCC revisions as etcd 3.4 writes them in the key bucket.
 *
 * A revision is (main, sub): every change of one write (a Put, a
 * DeleteRange, a whole Txn) shares one main revision and takes increasing
 * sub revisions from 0. The key bucket's key is 17 bytes: main as 8 bytes
 * big-endian, '_', sub as 8 bytes big-endian, so that byte order is
 * revision order; a tombstone (a deleted key) appends an 18th byte 't'.
 */
#ifndef CETCD_STORED_REVISION_H
#define CETCD_STORED_REVISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REV_BYTES 17u
#define REV_MARKED_BYTES 18u
#define REV_TOMBSTONE_MARK 't'

struct rev {
	int64_t main;
	int64_t sub;
};

/* -1, 0, 1 as a is before, equal to or after b. */
static inline int rev_cmp(struct rev a, struct rev b)
{
	if (a.main != b.main)
		return a.main < b.main ? -1 : 1;
	if (a.sub != b.sub)
		return a.sub < b.sub ? -1 : 1;
	return 0;
}

/* Writes r as 17 bytes to out. */
void rev_encode(struct rev r, uint8_t out[REV_BYTES]);

/* Writes r as 18 bytes with the tombstone mark to out. */
void rev_encode_tombstone(struct rev r, uint8_t out[REV_MARKED_BYTES]);

/*
 * Reads a key of the key bucket. *tombstone (may be NULL) tells whether it
 * carries the tombstone mark. -EINVAL when the bytes are not a revision
 * etcd writes (other length, no '_', an unknown mark).
 */
int rev_decode(const uint8_t *b, size_t len, struct rev *out, bool *tombstone);

/* 8-byte big-endian helpers, as etcd stores integers. */
void rev_put_be64(uint8_t out[8], uint64_t v);
uint64_t rev_get_be64(const uint8_t in[8]);

#endif
