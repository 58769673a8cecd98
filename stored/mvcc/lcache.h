/*
 * The latest-entry cache: where each key's latest revision sits in the db
 * file (its entry in the `key` bucket, kvindex.h), so that a reader in any
 * process finds the newest version of a key without descending the
 * B+tree. A lookup costs the cache's set and the leaf's lines of that one
 * entry, where a descent costs a binary search through every level (most
 * of them cache and TLB misses in a file larger than the cache).
 *
 * It lives in shared memory (the member region, or any MAP_SHARED block)
 * and has one writer, stored, which updates it while it commits (kvindex's
 * feed): a revision the commit wrote, or one it moved, records where it
 * now is, tagged with the commit's txid, before the commit is published.
 * A reader at txid T trusts an entry only when its txid is at most T: the
 * entry then says where the key's latest revision was placed at or before
 * T, and since the writer would have replaced it had the key changed or
 * the entry moved later but still at or before T, that place holds the
 * key's latest revision at T. An entry of a later txid is ignored (the
 * reader descends the tree as before), and so is anything the cache does
 * not hold: it is a cache, never the only copy.
 *
 * A key that leaves the bucket (deleted, or the bucket goes inline) loses
 * its entry at once; a commit that fails, a bucket that is dropped, a
 * writer that restarts or a db file that is replaced clears everything.
 *
 * Layout: a header, then a power of two of 128-byte sets (two cache
 * lines of one page, asked for together), each with LCACHE_WAYS 8-byte
 * ways. A key's 64-bit hash picks the set (low bits) and its 16-bit tag
 * (high bits); a set holds at most one entry per tag, and a reader
 * compares the key's bytes in the leaf anyway. A way holds only where
 * the key is (page, element, key offset); the leaf's element gives the
 * rest. Small ways keep the cache small, and a small cache misses the
 * CPU's caches and TLB less: with 250,000 keys, reads took 15% less time
 * from a 16 MiB cache than from a 64 MiB one. A set's txid stands for all its ways (the newest change),
 * so that a reader at txid T uses a set that nothing after T changed; a
 * way is 8 bytes instead of 16 for it. 16 MiB (131,072 sets, 1.97 million
 * ways) holds a million keys with 0.1% turned away, two million with 11%.
 *
 * Ordering: each set, and the header, is a seqlock (barrier.h's pattern):
 * the writer makes the set's seq odd, release fence, changes the entries,
 * then stores seq + 1 with release; a reader loads seq with acquire,
 * copies the entry, acquire fence, and re-reads seq. The writer finishes
 * every update of a commit before it publishes the commit's root with a
 * release store, so a reader that loaded that root with acquire sees
 * them. A writer killed halfway leaves a set odd: readers give up on it
 * after a few tries, and the next writer clears the cache before it
 * publishes anything. The header's seq brackets a whole clear, and its
 * generation names the db file the entries describe.
 */
#ifndef CETCD_STORED_LCACHE_H
#define CETCD_STORED_LCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LCACHE_WAYS 15u
#define LCACHE_SET_BYTES 128u
#define LCACHE_HDR_BYTES 128u
/* What an entry can hold: a place beyond the page id or the index is not
 * cached; a key further in than LCACHE_MAX_KEY_OFF is held as key_off 0
 * (no key sits there), and the reader takes the offset from the element. */
#define LCACHE_MAX_PGID ((1ull << 28) - 1)  /* 1 TiB of 4 KiB pages */
#define LCACHE_MAX_INDEX 0xFFu              /* 4 KiB leaves hold fewer */
#define LCACHE_MAX_KEY_OFF 0xFFFu

struct lcache_hdr {
	_Atomic uint64_t seq;        /* odd while the writer clears, and from
				      * lcache_format until the first clear */
	_Atomic uint64_t generation; /* db file the entries describe */
	_Atomic uint64_t nsets;      /* power of two; 0 until lcache_format */
	_Atomic uint64_t base;       /* the sets' txids count from here */
	uint8_t pad[LCACHE_HDR_BYTES - 32];
};

/*
 * A way: 0 when empty, else tag << 48 | pgid << 20 | index << 12 | key_off
 * (the tag is 16 bits of the key's hash, never 0). A set's txid is the
 * newest commit (less the header's base) that changed any of its ways.
 */
struct lcache_set {
	_Atomic uint32_t seq;  /* odd while the writer changes it */
	_Atomic uint32_t txid; /* newest change, relative to hdr->base */
	_Atomic uint64_t way[LCACHE_WAYS];
};
_Static_assert(sizeof(struct lcache_set) == LCACHE_SET_BYTES, "lcache set size");

/* Where a key's entry is: element `index` of the leaf page run at `pgid`,
 * its key `key_off` bytes from the run's start (0 from lcache_get: see the
 * element); placed there by commit `txid` (lcache_get: at or before it). */
struct lcache_loc {
	uint64_t pgid;
	uint64_t txid;
	uint32_t index;
	uint32_t key_off;
};

#define LCACHE_PENDING 32

/* A process's handle on a cache block (no allocation). The writer's
 * handle also holds the puts it has queued (lcache_put_queued). */
struct lcache {
	struct lcache_hdr *hdr;
	struct lcache_set *sets;
	uint64_t mask;          /* nsets - 1 */
	uint32_t npend, pend_head;
	struct lcache_pending {
		uint64_t h;
		struct lcache_loc loc;
	} pend[LCACHE_PENDING];
};

/* The bytes a cache of nsets sets takes (nsets a power of two). */
static inline size_t lcache_footprint(uint64_t nsets)
{
	return LCACHE_HDR_BYTES + (size_t)nsets * LCACHE_SET_BYTES;
}

/* The largest power of two of sets that fits in bytes (0 if none). */
uint64_t lcache_sets_for(size_t bytes);

/* Lays a cache of nsets sets out in mem (zeroed, lcache_footprint bytes,
 * 64-byte aligned) and attaches c to it. It answers no lookup until the
 * first lcache_clear. Writer or creator only. */
void lcache_format(struct lcache *c, void *mem, uint64_t nsets);

/* Attaches c to a block of `bytes` bytes that lcache_format laid out.
 * -EAGAIN when it has not been laid out yet (all zeroes); -EPROTO when
 * its header does not describe a cache that fits. */
int lcache_attach(struct lcache *c, void *mem, size_t bytes);

/* The hash a key is filed under. */
uint64_t lcache_hash(const void *key, size_t len);

/* Writer: empties every set (and drops the queued puts) and makes the
 * entries describe the db file of `generation` from now on. */
void lcache_clear(struct lcache *c, uint64_t generation);

/* Writer: records where the key of hash h is (replacing its entry, or
 * another key's when the set is full). Locations that do not fit an entry
 * drop the key's entry instead. loc->txid is at least every txid put
 * before (a commit's); one 2^32 or more past the header's base clears
 * the cache first, counting from it. */
void lcache_put(struct lcache *c, uint64_t h, const struct lcache_loc *loc);

/* Writer: lcache_put, later: the set is asked for now and written once
 * LCACHE_PENDING more puts have been queued (so that the misses of many
 * sets overlap), or at lcache_flush. Queued puts are not visible to
 * readers: flush before publishing the commit they belong to. */
void lcache_put_queued(struct lcache *c, uint64_t h, const struct lcache_loc *loc);
void lcache_flush(struct lcache *c);

/* Writer: drops the entry of hash h, if any (after the queued puts). */
void lcache_del(struct lcache *c, uint64_t h);

/* Reader: asks the CPU for the set of hash h, ahead of lcache_get. */
void lcache_prefetch(const struct lcache *c, uint64_t h);

/*
 * Reader: the entry of hash h, when the cache describes the db file of
 * `generation`, holds one and no writer is changing its set or clearing
 * the cache meanwhile; out->txid is the newest commit that changed its set
 * (the entry was placed at or before it). Whether the entry may be used
 * at a reader's txid, and whether it really is the key's (the tag is 16
 * bits), is the caller's to check.
 */
bool lcache_get(const struct lcache *c, uint64_t generation, uint64_t h,
		struct lcache_loc *out);

#endif
