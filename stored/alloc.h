/*
 * stored's allocation hook: every heap allocation of the stored component
 * goes through these, so tests can count live allocations (a test fails if
 * any are left at its end) and make the Nth one fail.
 */
#ifndef CETCD_STORED_ALLOC_H
#define CETCD_STORED_ALLOC_H

#include <stddef.h>

/* Same contracts as malloc/calloc/realloc/free. Freed with stored_free. */
void *stored_malloc(size_t size);
void *stored_calloc(size_t n, size_t size);
void *stored_realloc(void *p, size_t size);
void stored_free(void *p);
/* Copy of s (NUL-terminated), freed with stored_free; NULL on no memory. */
char *stored_strdup(const char *s);

/* Makes room for need elements of elem_size bytes in the growable array
 * *v of *cap elements (allocated by stored_malloc/stored_realloc, or NULL
 * with *cap 0; freed with stored_free). When need > *cap the array is
 * reallocated to first_cap elements (when *cap is 0), or *cap doubled,
 * doubled again until need fits, so that appending one at a time costs
 * amortized O(1). On failure *v and *cap are left as they were.
 * Returns 0, or -ENOMEM when out of memory or when the byte size would
 * not fit in a size_t. */
int stored_reserve(void **v, size_t *cap, size_t need, size_t elem_size, size_t first_cap);

/* Test hooks. After stored_alloc_fail_after(n), n more allocations succeed
 * and every later one fails until stored_alloc_fail_after(-1). */
void stored_alloc_fail_after(long n);
/* Number of allocations not yet freed, over the whole process. */
long stored_alloc_live(void);

#endif
