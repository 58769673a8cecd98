/*
 * A bump allocator for the life of one txn: bucket handles, nodes, copies
 * of keys and values. Everything is freed at once by arena_release.
 */
#ifndef CETCD_STORED_ARENA_H
#define CETCD_STORED_ARENA_H

#include <stddef.h>

struct arena_chunk;

struct arena {
	struct arena_chunk *head;  /* newest chunk first */
};

static inline void arena_init(struct arena *a) { a->head = NULL; }

/* size bytes aligned to 16, valid until arena_release; NULL on no memory. */
void *arena_alloc(struct arena *a, size_t size);
/* Like arena_alloc, zeroed. */
void *arena_zalloc(struct arena *a, size_t size);
void arena_release(struct arena *a);

#endif
