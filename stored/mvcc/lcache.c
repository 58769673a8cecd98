/*
 * The latest-entry cache (see lcache.h), the readers' half: attaching,
 * hashing, lookups. The writer's puts and deletes are lcache_write.c.
 */
#include <errno.h>
#include <string.h>

#include "shm/barrier.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc_int.h"

/* Tries a reader makes on a set that a writer is changing. */
#define LCACHE_READ_TRIES 4

uint64_t lcache_sets_for(size_t bytes)
{
	uint64_t n = 1;

	if (bytes < lcache_footprint(1))
		return 0;
	while (lcache_footprint(n * 2) <= bytes)
		n *= 2;
	return n;
}

int lcache_attach(struct lcache *c, void *mem, size_t bytes)
{
	struct lcache_hdr *h = mem;
	uint64_t nsets;

	if (bytes < lcache_footprint(1))
		return -EPROTO;
	nsets = atomic_load_explicit(&h->nsets, memory_order_acquire);
	if (nsets == 0)
		return -EAGAIN;
	if ((nsets & (nsets - 1)) || nsets > (bytes - LCACHE_HDR_BYTES) / LCACHE_SET_BYTES)
		return -EPROTO;
	c->hdr = h;
	c->sets = (struct lcache_set *)((uint8_t *)mem + LCACHE_HDR_BYTES);
	c->mask = nsets - 1;
	c->npend = c->pend_head = 0;
	return 0;
}

/* A 64-bit hash of the key's bytes: 8 at a time, each multiplied in, then
 * murmur3's finalizer so that low and high bits both depend on all. */
uint64_t lcache_hash(const void *key, size_t len)
{
	const uint8_t *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (len * 0xff51afd7ed558ccdull);

	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

/* Asks the CPU for both lines of a set at once. */
static inline void set_prefetch(const struct lcache_set *s)
{
	for (unsigned l = 0; l < LCACHE_SET_BYTES; l += 64)
		__builtin_prefetch((const uint8_t *)s + l, 0);
}

void lcache_prefetch(const struct lcache *c, uint64_t h)
{
	set_prefetch(lcache_set_of(c, h));
}

bool lcache_get(const struct lcache *c, uint64_t generation, uint64_t h,
		struct lcache_loc *out)
{
	const struct lcache_hdr *hd = c->hdr;
	struct lcache_set *s = lcache_set_of(c, h);
	uint64_t tag = lcache_tag(h);
	set_prefetch(s);
	uint64_t hq = atomic_load_explicit(&hd->seq, memory_order_acquire);

	if ((hq & 1u) || atomic_load_explicit(&hd->generation, memory_order_relaxed) != generation)
		return false;
	uint64_t base = atomic_load_explicit(&hd->base, memory_order_relaxed);
	for (int tries = 0; tries < LCACHE_READ_TRIES; tries++) {
		uint32_t q = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (q & 1u) {
			shm_cpu_relax();
			continue;
		}
		unsigned w = set_find(s, tag);
		uint64_t v = w < LCACHE_WAYS ? atomic_load_explicit(&s->way[w], memory_order_relaxed) : 0;
		uint32_t txid = atomic_load_explicit(&s->txid, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&s->seq, memory_order_relaxed) != q)
			continue;
		if (atomic_load_explicit(&hd->seq, memory_order_relaxed) != hq)
			return false;
		if (!v || way_tag(v) != tag)
			return false;
		out->pgid = (v >> WAY_PGID_SHIFT) & LCACHE_MAX_PGID;
		out->index = (uint32_t)(v >> WAY_INDEX_SHIFT) & LCACHE_MAX_INDEX;
		out->key_off = (uint32_t)v & LCACHE_MAX_KEY_OFF;
		out->txid = base + txid;
		return true;
	}
	return false;
}
