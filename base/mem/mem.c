/* Giving freed memory back to the kernel (mem.h). */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "base/mem/mem.h"
#include "base/thread/thread.h"

/* jemalloc's control interface, when the program links jemalloc. */
extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
	__attribute__((weak));

int mem_purge(void)
{
	if (!mallctl)
		return ENOENT;
	/* "arena.<MALLCTL_ARENAS_ALL>.purge" */
	return mallctl("arena.4096.purge", NULL, NULL, NULL, 0);
}

int mem_freed_bytes(size_t *bytes)
{
	uint64_t epoch = 1;
	size_t el = sizeof(epoch), dirty = 0, muzzy = 0, page = 0;
	size_t dl = sizeof(dirty), ml = sizeof(muzzy), pl = sizeof(page);
	int rc;

	if (!mallctl)
		return ENOENT;
	/* the statistics are a snapshot taken at the last "epoch" */
	rc = mallctl("epoch", &epoch, &el, &epoch, sizeof(epoch));
	if (!rc)
		rc = mallctl("stats.arenas.4096.pdirty", &dirty, &dl, NULL, 0);
	if (!rc)
		rc = mallctl("stats.arenas.4096.pmuzzy", &muzzy, &ml, NULL, 0);
	if (!rc)
		rc = mallctl("arenas.page", &page, &pl, NULL, 0);
	if (!rc)
		*bytes = (dirty + muzzy) * page;
	return rc;
}

/* ---- mem_idle ---- */

static int mem_idle_jemalloc_purge(void *arg)
{
	(void)arg;
	return mem_purge();
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

/* ---- mem_dirty ---- */

/* A purge on its thread is under way. Process-wide, as the purge is: the
 * thread outlives nothing of its caller's. */
static atomic_bool mem_dirty_purging;

static int mem_dirty_jemalloc_freed(void *arg, size_t *bytes)
{
	(void)arg;
	return mem_freed_bytes(bytes);
}

static void *mem_dirty_purge_main(void *arg)
{
	(void)arg;
	(void)mem_purge();
	atomic_store_explicit(&mem_dirty_purging, false, memory_order_release);
	return NULL;
}

void mem_dirty_init_with(struct mem_dirty *m, int (*freed)(void *arg, size_t *bytes),
			 int (*purge)(void *arg), void *arg)
{
	memset(m, 0, sizeof(*m));
	m->freed = freed;
	m->purge = purge;
	m->arg = arg;
}

bool mem_dirty_init(struct mem_dirty *m)
{
	size_t b;

	mem_dirty_init_with(m, NULL, NULL, NULL);
	if (mem_freed_bytes(&b) != 0)
		return false;
	mem_dirty_init_with(m, mem_dirty_jemalloc_freed, mem_idle_jemalloc_purge, NULL);
	m->offload = true;
	return true;
}

bool mem_dirty_turn(struct mem_dirty *m, int64_t now_ns)
{
	size_t freed = 0;

	if (!m->freed || now_ns < m->next_ns)
		return false;
	m->next_ns = now_ns + MEM_DIRTY_CHECK_NS;
	if (m->offload && atomic_load_explicit(&mem_dirty_purging, memory_order_acquire))
		return false;
	if (m->freed(m->arg, &freed) != 0)
		return false;
	m->last_freed = freed;
	if (freed <= MEM_DIRTY_MAX_BYTES)
		return false;
	m->purges++;
	m->purged_bytes += freed;
	if (!m->offload) {
		(void)m->purge(m->arg);
		return true;
	}
	atomic_store_explicit(&mem_dirty_purging, true, memory_order_relaxed);
	/* where no thread can be started, it purges here */
	(void)shm_thread_offload(mem_dirty_purge_main, NULL);
	return true;
}
