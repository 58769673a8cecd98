/*
 * The stored component's allocation hook (see alloc.h). Counters are
 * atomic so that reader threads may allocate while the writer does.
 */
#include "stored/alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static atomic_long alloc_live;
static atomic_long alloc_budget = -1; /* allocations left before failing; -1 = unlimited */

/* Consumes one unit of the failure budget; false when this allocation must fail. */
static int alloc_permitted(void)
{
	long b = atomic_load_explicit(&alloc_budget, memory_order_relaxed);
	while (b >= 0) {
		if (b == 0)
			return 0;
		if (atomic_compare_exchange_weak(&alloc_budget, &b, b - 1))
			return 1;
	}
	return 1;
}

void *stored_malloc(size_t size)
{
	if (!alloc_permitted())
		return NULL;
	void *p = malloc(size ? size : 1);
	if (p)
		atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
	return p;
}

void *stored_calloc(size_t n, size_t size)
{
	if (!alloc_permitted())
		return NULL;
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (p)
		atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
	return p;
}

void *stored_realloc(void *p, size_t size)
{
	if (!p)
		return stored_malloc(size);
	if (!alloc_permitted())
		return NULL;
	return realloc(p, size ? size : 1);
}

void stored_free(void *p)
{
	if (!p)
		return;
	atomic_fetch_sub_explicit(&alloc_live, 1, memory_order_relaxed);
	free(p);
}

char *stored_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = stored_malloc(n);
	if (d)
		memcpy(d, s, n);
	return d;
}

int stored_reserve(void **v, size_t *cap, size_t need, size_t elem_size, size_t first_cap)
{
	size_t n = *cap;

	if (need <= n)
		return 0;
	if (n == 0)
		n = first_cap ? first_cap : 1;
	for (; n < need; n *= 2)
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
	if (elem_size > 0 && n > SIZE_MAX / elem_size)
		return -ENOMEM;
	void *p = stored_realloc(*v, n * elem_size);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = n;
	return 0;
}

void stored_alloc_fail_after(long n)
{
	atomic_store(&alloc_budget, n < 0 ? -1 : n);
}

long stored_alloc_live(void)
{
	return atomic_load(&alloc_live);
}
