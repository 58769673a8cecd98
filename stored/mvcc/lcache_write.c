/*
 * The latest-entry cache (see lcache.h), the writer's half: formatting the
 * region, and the puts, deletes and clears stored makes as it commits.
 * Attaching, hashing and lookups, which the gateways use, are lcache.c.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "shm/barrier.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc_int.h"

void lcache_format(struct lcache *c, void *mem, uint64_t nsets)
{
	c->hdr = mem;
	c->sets = (struct lcache_set *)((uint8_t *)mem + LCACHE_HDR_BYTES);
	c->mask = nsets - 1;
	c->npend = c->pend_head = 0;
	atomic_store_explicit(&c->hdr->seq, 1, memory_order_relaxed);
	atomic_store_explicit(&c->hdr->nsets, nsets, memory_order_release);
}

static inline void set_prefetch_write(const struct lcache_set *s)
{
	for (unsigned l = 0; l < LCACHE_SET_BYTES; l += 64)
		__builtin_prefetch((const uint8_t *)s + l, 1);
}

/* Writer: the set's seqlock. */
static inline void set_write_begin(struct lcache_set *s)
{
	uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, (q | 1u), memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void set_write_end(struct lcache_set *s)
{
	uint32_t q = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, q + 1, memory_order_release);
}

/* The page of the cache's mapping: the region's (shm/layout.h). */
#define CACHE_PAGE 4096u

/* Empties every set and makes the entries describe the db file of
 * `generation`, their txids counting from base. */
static void cache_reset(struct lcache *c, uint64_t generation, uint64_t base)
{
	struct lcache_hdr *h = c->hdr;
	uint64_t q = atomic_load_explicit(&h->seq, memory_order_relaxed);

	atomic_store_explicit(&h->seq, q | 1u, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	/* The whole pages of sets go back to the region's file system, which
	 * reads them as zeroes: empty sets, as in a new region (a reader that
	 * overlaps sees the header's seq move). So a cleared cache holds no
	 * memory until keys come; the sets around them, or all of them where
	 * the memory is not a shared file's, are emptied one by one. */
	uint64_t lo = (LCACHE_HDR_BYTES + CACHE_PAGE - 1) / CACHE_PAGE * CACHE_PAGE;
	uint64_t hi = lcache_footprint(c->mask + 1) / CACHE_PAGE * CACHE_PAGE;
	uint64_t skip_lo = 0, skip_hi = 0;
	if (hi > lo && madvise((uint8_t *)h + lo, hi - lo, MADV_REMOVE) == 0) {
		skip_lo = (lo - LCACHE_HDR_BYTES) / LCACHE_SET_BYTES;
		skip_hi = (hi - LCACHE_HDR_BYTES) / LCACHE_SET_BYTES;
	}
	for (uint64_t i = 0; i <= c->mask; i++) {
		if (i == skip_lo)
			i = skip_hi;
		if (i > c->mask)
			break;
		struct lcache_set *s = &c->sets[i];
		set_write_begin(s);
		for (unsigned w = 0; w < LCACHE_WAYS; w++)
			atomic_store_explicit(&s->way[w], 0, memory_order_relaxed);
		atomic_store_explicit(&s->txid, 0, memory_order_relaxed);
		set_write_end(s);
	}
	atomic_store_explicit(&h->generation, generation, memory_order_relaxed);
	atomic_store_explicit(&h->base, base, memory_order_relaxed);
	atomic_store_explicit(&h->seq, (q | 1u) + 1, memory_order_release);
}

void lcache_clear(struct lcache *c, uint64_t generation)
{
	c->npend = 0;
	cache_reset(c, generation, 0);
}

static unsigned set_find_empty(const struct lcache_set *s)
{
	for (unsigned w = 0; w < LCACHE_WAYS; w++)
		if (atomic_load_explicit(&s->way[w], memory_order_relaxed) == 0)
			return w;
	return LCACHE_WAYS;
}

/* The set's txid for a change made by commit txid: never lowered (a set's
 * txid stands for its newest change). */
static uint32_t set_txid_after(const struct lcache_set *s, uint64_t rel)
{
	uint32_t cur = atomic_load_explicit(&s->txid, memory_order_relaxed);
	return rel > cur ? (uint32_t)rel : cur;
}

/* The txid of commit txid relative to the header's base, clearing the
 * cache to count from txid when it lies 2^32 or more past the base. One
 * before the base counts as the base: a later txid than the true one only
 * keeps more readers off the set. */
static uint64_t rel_txid(struct lcache *c, uint64_t txid)
{
	struct lcache_hdr *h = c->hdr;
	uint64_t base = atomic_load_explicit(&h->base, memory_order_relaxed);
	if (txid < base)
		return 0;
	if (txid - base > UINT32_MAX) {
		cache_reset(c, atomic_load_explicit(&h->generation, memory_order_relaxed), txid);
		return 0;
	}
	return txid - base;
}

static void del_at(struct lcache_set *s, uint64_t tag, uint64_t rel)
{
	unsigned w = set_find(s, tag);
	if (w == LCACHE_WAYS)
		return;
	set_write_begin(s);
	atomic_store_explicit(&s->way[w], 0, memory_order_relaxed);
	atomic_store_explicit(&s->txid, set_txid_after(s, rel), memory_order_relaxed);
	set_write_end(s);
}

void lcache_del(struct lcache *c, uint64_t h)
{
	lcache_flush(c);
	/* a delete changes the set too: it needs no txid of its own, since
	 * a reader that finds no entry descends the tree anyway */
	del_at(lcache_set_of(c, h), lcache_tag(h), 0);
}

void lcache_put(struct lcache *c, uint64_t h, const struct lcache_loc *loc)
{
	struct lcache_set *s = lcache_set_of(c, h);
	uint64_t tag = lcache_tag(h);
	uint64_t rel = rel_txid(c, loc->txid);
	unsigned w;

	if (loc->pgid > LCACHE_MAX_PGID || loc->index > LCACHE_MAX_INDEX) {
		del_at(s, tag, rel);
		return;
	}
	/* a key further in than a way holds: 0, the element tells */
	uint64_t key_off = loc->key_off <= LCACHE_MAX_KEY_OFF ? loc->key_off : 0;
	w = set_find(s, tag);
	if (w == LCACHE_WAYS)
		w = set_find_empty(s);
	if (w == LCACHE_WAYS) /* full: a way picked by the set's seq, which every change moves */
		w = (atomic_load_explicit(&s->seq, memory_order_relaxed) >> 1) % LCACHE_WAYS;
	set_write_begin(s);
	atomic_store_explicit(&s->way[w],
			      tag << WAY_TAG_SHIFT | loc->pgid << WAY_PGID_SHIFT |
				      (uint64_t)loc->index << WAY_INDEX_SHIFT | key_off,
			      memory_order_relaxed);
	atomic_store_explicit(&s->txid, set_txid_after(s, rel), memory_order_relaxed);
	set_write_end(s);
}

void lcache_put_queued(struct lcache *c, uint64_t h, const struct lcache_loc *loc)
{
	if (c->npend == LCACHE_PENDING) {
		struct lcache_pending *p = &c->pend[c->pend_head];
		lcache_put(c, p->h, &p->loc);
		c->pend_head = (c->pend_head + 1) % LCACHE_PENDING;
		c->npend--;
	}
	set_prefetch_write(lcache_set_of(c, h));
	c->pend[(c->pend_head + c->npend) % LCACHE_PENDING] = (struct lcache_pending){ h, *loc };
	c->npend++;
}

void lcache_flush(struct lcache *c)
{
	while (c->npend) {
		struct lcache_pending *p = &c->pend[c->pend_head];
		c->pend_head = (c->pend_head + 1) % LCACHE_PENDING;
		c->npend--;
		lcache_put(c, p->h, &p->loc);
	}
}
