/*
 * A bump allocator for the life of one txn: bucket handles, nodes, copies
 * of keys and values. Everything is freed at once by arena_release.
 */
#ifndef CETCD_STORED_ARENA_H
#define CETCD_STORED_ARENA_H

#include <stddef.h>

struct arena_chunk;

/* Spare chunks that arenas hand back on release and take again before
 * asking malloc, so that a long-lived owner (the db's writer) does not
 * fault in fresh memory for every txn. Holds at most max chunks. */
struct arena_pool {
	struct arena_chunk *free;
	size_t n, max;
};

struct arena {
	struct arena_chunk *head;  /* newest chunk first */
	struct arena_pool *pool;   /* NULL: none */
};

static inline void arena_init(struct arena *a) { a->head = NULL; a->pool = NULL; }
static inline void arena_pool_init(struct arena_pool *p, size_t max)
{
	p->free = NULL;
	p->n = 0;
	p->max = max;
}
/* Frees the pool's chunks. */
void arena_pool_destroy(struct arena_pool *p);

/* size bytes aligned to 16, valid until arena_release; NULL on no memory. */
void *arena_alloc(struct arena *a, size_t size);
/* Like arena_alloc, zeroed. */
void *arena_zalloc(struct arena *a, size_t size);
void arena_release(struct arena *a);

#endif
