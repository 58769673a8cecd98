/* The auth component's allocation hook (alloc.h). */
#include "auth/alloc.h"

#include <stdlib.h>

static void *(*auth_alloc_fn)(size_t) = malloc;
static void (*auth_free_fn)(void *) = free;

void *auth_alloc(size_t size)
{
	return auth_alloc_fn(size ? size : 1);
}

void auth_free(void *p)
{
	if (p)
		auth_free_fn(p);
}

void auth_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *))
{
	auth_alloc_fn = alloc_fn ? alloc_fn : malloc;
	auth_free_fn = free_fn ? free_fn : free;
}
