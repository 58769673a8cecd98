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

/* Test hooks. After stored_alloc_fail_after(n), n more allocations succeed
 * and every later one fails until stored_alloc_fail_after(-1). */
void stored_alloc_fail_after(long n);
/* Number of allocations not yet freed, over the whole process. */
long stored_alloc_live(void);

#endif
