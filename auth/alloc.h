/*
 * The auth component's allocation hook: every heap allocation of auth/
 * goes through auth_alloc and auth_free, so tests can count what is live
 * and fail the Nth allocation.
 */
#ifndef CETCD_AUTH_ALLOC_H
#define CETCD_AUTH_ALLOC_H

#include <stddef.h>

/* malloc's and free's contracts. */
void *auth_alloc(size_t size);
void auth_free(void *p);

/* Replaces the pair (NULL restores malloc and free). Not thread-safe:
 * set it before any auth call. */
void auth_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *));

#endif
