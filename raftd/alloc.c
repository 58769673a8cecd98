/*
 * raftd's allocation hook (see alloc.h). The hooks are set once before use
 * (tests) and read on every call; no locking is needed for that pattern.
 */
#include "raftd/alloc.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct raftd_alloc_hooks alloc_hooks = { malloc, realloc, free };

void raftd_alloc_set_hooks(const struct raftd_alloc_hooks *hooks)
{
	if (hooks) {
		alloc_hooks = *hooks;
	} else {
		alloc_hooks.malloc_fn = malloc;
		alloc_hooks.realloc_fn = realloc;
		alloc_hooks.free_fn = free;
	}
}

void *raftd_malloc(size_t size)
{
	return alloc_hooks.malloc_fn(size ? size : 1);
}

void *raftd_realloc(void *p, size_t size)
{
	if (!p)
		return raftd_malloc(size);
	return alloc_hooks.realloc_fn(p, size ? size : 1);
}

void raftd_free(void *p)
{
	if (p)
		alloc_hooks.free_fn(p);
}

void *raftd_calloc(size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	void *p = raftd_malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

int raftd_reserve(void **v, size_t *cap, size_t need, size_t elem_size, size_t first_cap)
{
	if (need <= *cap)
		return 0;
	size_t c = *cap ? *cap : (first_cap ? first_cap : 1);
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return -ENOMEM;
		c *= 2;
	}
	if (elem_size && c > SIZE_MAX / elem_size)
		return -ENOMEM;
	void *p = raftd_realloc(*v, c * elem_size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}
