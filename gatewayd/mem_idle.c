/* Purging freed memory when a loop goes quiet (mem_idle.h). */
#include <stddef.h>
#include <string.h>

#include "gatewayd/mem_idle.h"

/* jemalloc's control interface, when the program links jemalloc. */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
	__attribute__((weak));

/* Purges the unused dirty pages of every arena ("arena.<MALLCTL_ARENAS_ALL>.purge"). */
static int mem_idle_jemalloc_purge(void *arg)
{
	(void)arg;
	return mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
}

void mem_idle_init_with(struct mem_idle *m, const uint64_t *allocated,
			const uint64_t *deallocated, int (*purge)(void *arg), void *arg)
{
	memset(m, 0, sizeof(*m));
	m->allocated = allocated;
	m->deallocated = deallocated;
	m->purge = purge;
	m->purge_arg = arg;
}

bool mem_idle_init(struct mem_idle *m)
{
	uint64_t *a = NULL, *d = NULL;
	size_t al = sizeof(a), dl = sizeof(d);

	mem_idle_init_with(m, NULL, NULL, NULL, NULL);
	if (!mallctl || mallctl("thread.allocatedp", &a, &al, NULL, 0) != 0 ||
	    mallctl("thread.deallocatedp", &d, &dl, NULL, 0) != 0 || !a || !d)
		return false;
	mem_idle_init_with(m, a, d, mem_idle_jemalloc_purge, NULL);
	return true;
}

/* The thread's allocations and frees so far, in bytes. */
static uint64_t mem_idle_activity(const struct mem_idle *m)
{
	return *m->allocated + (m->deallocated ? *m->deallocated : 0);
}

int64_t mem_idle_turn(struct mem_idle *m, int64_t now_ns)
{
	uint64_t sum;

	if (!m->allocated || !m->purge)
		return INT64_MAX;
	sum = mem_idle_activity(m);
	if (sum != m->seen) {
		m->seen = sum;
		m->dirty = true;
		m->quiet_since_ns = now_ns;
	}
	if (!m->dirty)
		return INT64_MAX;
	if (now_ns - m->quiet_since_ns < MEM_IDLE_QUIET_NS)
		return m->quiet_since_ns + MEM_IDLE_QUIET_NS;
	m->dirty = false;
	m->purges++;
	(void)m->purge(m->purge_arg);
	/* the purge's own bookkeeping is not the loop's activity */
	m->seen = mem_idle_activity(m);
	return INT64_MAX;
}
