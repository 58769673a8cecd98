/*
 * raftd's allocation hook: every heap allocation of the raftd component
 * (the Raft core, its log, the WAL) goes through these, so that a test can
 * install hooks that count live allocations (a test fails if any are left
 * at its end) and make the Nth one fail.
 */
#ifndef CETCD_RAFTD_ALLOC_H
#define CETCD_RAFTD_ALLOC_H

#include <stddef.h>

/* Same contracts as malloc/realloc/free; memory is freed with raftd_free.
 * raftd_malloc(0) returns a unique pointer (or NULL on no memory). */
void *raftd_malloc(size_t size);
void *raftd_realloc(void *p, size_t size);
void raftd_free(void *p);
/* A zeroed n * size block, NULL on no memory or overflow. */
void *raftd_calloc(size_t n, size_t size);

/* Makes room for need elements of elem_size bytes in the growable array
 * *v of *cap elements (the array raftd_malloc'd or NULL, freed with
 * raftd_free): when need > *cap, it is reallocated to first_cap elements
 * (when *cap is 0) or to *cap doubled, doubled again until need fit, so
 * that appending one element at a time costs amortized O(1). *v and *cap
 * are left as they were on failure. Returns 0, or -ENOMEM when out of
 * memory or when the size would not fit in a size_t. */
int raftd_reserve(void **v, size_t *cap, size_t need, size_t elem_size, size_t first_cap);

/* Replacement functions. Each must behave like its libc namesake (size 0
 * included); free_fn(NULL) must be a no-op. */
struct raftd_alloc_hooks {
	void *(*malloc_fn)(size_t size);
	void *(*realloc_fn)(void *p, size_t size);
	void (*free_fn)(void *p);
};

/* Installs hooks (copied) process-wide; NULL restores libc. Only call it
 * while nothing allocated through the previous hooks is alive. */
void raftd_alloc_set_hooks(const struct raftd_alloc_hooks *hooks);

#endif
