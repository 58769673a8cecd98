/* The latest-entry cache (see lcache.h). */
#include <errno.h>
#include <string.h>

#include "shm/barrier.h"
#include "stored/mvcc/lcache.h"

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

void lcache_format(struct lcache *c, void *mem, uint64_t nsets)
{
	c->hdr = mem;
	c->sets = (struct lcache_set *)((uint8_t *)mem + LCACHE_HDR_BYTES);
	c->mask = nsets - 1;
	c->npend = c->pend_head = 0;
	atomic_store_explicit(&c->hdr->seq, 1, memory_order_relaxed);
	atomic_store_explicit(&c->hdr->nsets, nsets, memory_order_release);
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

#define WAY_TAG_SHIFT 48
#define WAY_PGID_SHIFT 20
#define WAY_INDEX_SHIFT 12

static inline uint64_t lcache_tag(uint64_t h)
{
	uint64_t t = h >> WAY_TAG_SHIFT;
	return t ? t : 1;
}

static inline uint64_t way_tag(uint64_t way)
{
	return way >> WAY_TAG_SHIFT;
}

static inline struct lcache_set *lcache_set_of(const struct lcache *c, uint64_t h)
{
	return &c->sets[h & c->mask];
}

/* Asks the CPU for both lines of a set at once. */
static inline void set_prefetch(const struct lcache_set *s)
{
	for (unsigned l = 0; l < LCACHE_SET_BYTES; l += 64)
		__builtin_prefetch((const uint8_t *)s + l, 0);
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

/* Empties every set and makes the entries describe the db file of
 * `generation`, their txids counting from base. */
static void cache_reset(struct lcache *c, uint64_t generation, uint64_t base)
{
	struct lcache_hdr *h = c->hdr;
	uint64_t q = atomic_load_explicit(&h->seq, memory_order_relaxed);

	atomic_store_explicit(&h->seq, q | 1u, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (uint64_t i = 0; i <= c->mask; i++) {
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

/* The way of s holding tag, or LCACHE_WAYS. */
static unsigned set_find(const struct lcache_set *s, uint64_t tag)
{
	for (unsigned w = 0; w < LCACHE_WAYS; w++) {
		uint64_t v = atomic_load_explicit(&s->way[w], memory_order_relaxed);
		if (v && way_tag(v) == tag)
			return w;
	}
	return LCACHE_WAYS;
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
