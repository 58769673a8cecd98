/*
 * Unit tests for base/mem/mem.c:
 * - mem_idle over counters of the test's own: no purge while the loop
 *   allocates, nor before a second of quiet; one purge after it, and none
 *   again until the counters move; the wanted turn time tells the loop
 *   when to come back; frees alone count as activity
 * - mem_dirty over figures of the test's own: one look every
 *   MEM_DIRTY_CHECK_NS however often the loop turns; a purge only above
 *   MEM_DIRTY_MAX_BYTES (not at it); a failed look purges nothing; the
 *   counts of purges and bytes
 * - with jemalloc linked (the normal build): the freed pages a burst
 *   leaves in jemalloc's arenas (its own statistics, read independently
 *   of mem_freed_bytes) are gone after mem_idle's quiet turn, and after
 *   mem_dirty's purge on its own thread, while the test's thread goes on
 *   allocating; a look right after that purges nothing. The sanitizer
 *   build has no jemalloc and both inits say so.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "shm_testlib.h"

#include "base/mem/mem.h"

extern int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen)
	__attribute__((weak));

static int purges;

static int count_purge(void *arg)
{
	(void)arg;
	purges++;
	return 0;
}

#define S 1000000000ll

static void test_model(void)
{
	uint64_t a = 0, d = 0;
	struct mem_idle m;

	mem_idle_init_with(&m, &a, &d, count_purge, NULL);
	/* nothing happened yet: nothing to purge, no turn wanted */
	CHECK_EQ(mem_idle_turn(&m, 5 * S), INT64_MAX);
	CHECK_EQ(purges, 0);
	/* busy: every turn allocates; the purge waits for a quiet second */
	for (int64_t t = 10 * S; t < 12 * S; t += S / 10) {
		a += 4096;
		CHECK_EQ(mem_idle_turn(&m, t), t + MEM_IDLE_QUIET_NS);
	}
	CHECK_EQ(purges, 0);
	int64_t last = 12 * S - S / 10;
	CHECK_EQ(mem_idle_turn(&m, last + S - 1), last + S);
	CHECK_EQ(purges, 0);
	CHECK_EQ(mem_idle_turn(&m, last + S), INT64_MAX);
	CHECK_EQ(purges, 1);
	CHECK_EQ(m.purges, 1u);
	/* quiet on: no second purge */
	CHECK_EQ(mem_idle_turn(&m, last + 5 * S), INT64_MAX);
	CHECK_EQ(purges, 1);
	/* frees alone are activity too */
	d += 1 << 20;
	CHECK_EQ(mem_idle_turn(&m, 20 * S), 21 * S);
	CHECK_EQ(mem_idle_turn(&m, 21 * S), INT64_MAX);
	CHECK_EQ(purges, 2);
}

static size_t dirty_pages(void)
{
	uint64_t epoch = 1;
	size_t el = sizeof(epoch), pd = 0, pl = sizeof(pd);

	CHECK_EQ(mallctl("epoch", &epoch, &el, &epoch, sizeof(epoch)), 0);
	CHECK_EQ(mallctl("stats.arenas.4096.pdirty", &pd, &pl, NULL, 0), 0);
	return pd;
}

static size_t fake_freed;
static int fake_freed_rc;

static int fake_freed_fn(void *arg, size_t *bytes)
{
	CHECK_EQ(arg, &fake_freed);
	if (fake_freed_rc)
		return fake_freed_rc;
	*bytes = fake_freed;
	return 0;
}

static void test_dirty_model(void)
{
	struct mem_dirty m;
	int64_t t = 7 * S;

	purges = 0;
	mem_dirty_init_with(&m, fake_freed_fn, count_purge, &fake_freed);
	/* little held: looked at, nothing purged */
	fake_freed = 1 << 20;
	CHECK(!mem_dirty_turn(&m, t));
	CHECK_EQ(m.last_freed, (size_t)1 << 20);
	/* much held, but the next look is MEM_DIRTY_CHECK_NS after the last */
	fake_freed = 64 << 20;
	for (int64_t u = t; u < t + MEM_DIRTY_CHECK_NS; u += MEM_DIRTY_CHECK_NS / 10)
		CHECK(!mem_dirty_turn(&m, u));
	CHECK_EQ(purges, 0);
	CHECK_EQ(m.last_freed, (size_t)1 << 20);
	t += MEM_DIRTY_CHECK_NS;
	CHECK(mem_dirty_turn(&m, t));
	CHECK_EQ(purges, 1);
	CHECK_EQ(m.purges, 1u);
	CHECK_EQ(m.purged_bytes, (uint64_t)64 << 20);
	/* exactly the bound: kept */
	fake_freed = MEM_DIRTY_MAX_BYTES;
	t += MEM_DIRTY_CHECK_NS;
	CHECK(!mem_dirty_turn(&m, t));
	CHECK_EQ(purges, 1);
	/* one byte over: purged */
	fake_freed = MEM_DIRTY_MAX_BYTES + 1;
	t += MEM_DIRTY_CHECK_NS;
	CHECK(mem_dirty_turn(&m, t));
	CHECK_EQ(purges, 2);
	CHECK_EQ(m.purged_bytes, ((uint64_t)64 << 20) + MEM_DIRTY_MAX_BYTES + 1);
	/* the figures cannot be read: nothing purged, looked at again later */
	fake_freed = 64 << 20;
	fake_freed_rc = EIO;
	t += MEM_DIRTY_CHECK_NS;
	CHECK(!mem_dirty_turn(&m, t));
	CHECK_EQ(purges, 2);
	fake_freed_rc = 0;
	CHECK(!mem_dirty_turn(&m, t + MEM_DIRTY_CHECK_NS - 1));
	CHECK(mem_dirty_turn(&m, t + MEM_DIRTY_CHECK_NS));
	CHECK_EQ(purges, 3);
	CHECK_EQ(m.purges, 3u);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* A 64 MiB burst freed: pages jemalloc holds. */
static void burst(void)
{
	enum { N = 4096, SZ = 16384 };
	static void *blocks[N];

	for (int i = 0; i < N; i++) {
		blocks[i] = malloc(SZ);
		CHECK(blocks[i]);
		((volatile char *)blocks[i])[0] = 1;
	}
	for (int i = 0; i < N; i++)
		free(blocks[i]);
}

static void test_dirty_jemalloc(void)
{
	struct mem_dirty m;
	bool have = mem_dirty_init(&m);
	size_t freed = 0, before, after = 0;
	int64_t t = 100 * S;

	CHECK_EQ(have, mallctl != NULL);
	if (!have) {
		CHECK(!mem_dirty_turn(&m, t));
		CHECK_EQ(mem_freed_bytes(&freed), ENOENT);
		CHECK_EQ(mem_purge(), ENOENT);
		return;
	}
	CHECK(m.offload);
	CHECK_EQ(mem_purge(), 0);
	burst();
	before = dirty_pages();
	CHECK_EQ(mem_freed_bytes(&freed), 0);
	printf("test_mem: %zu dirty pages, %zu freed bytes after a 64 MiB burst\n", before, freed);
	CHECK(before >= 1000);
	CHECK(freed >= before * 4096);
	CHECK(mem_dirty_turn(&m, t));
	CHECK_EQ(m.purges, 1u);
	CHECK(m.purged_bytes >= (uint64_t)before * 4096);
	/* the purge runs on its own thread while this one allocates on */
	for (int i = 0; i < 500; i++) {
		void *p = malloc(4096);
		CHECK(p);
		free(p);
		after = dirty_pages();
		if (after < before / 10)
			break;
		sleep_ms(10);
	}
	printf("test_mem: %zu dirty pages after mem_dirty's purge\n", after);
	CHECK(after < before / 10);
	/* looks after it (skipped while its thread has not yet finished):
	 * under the bound, nothing to purge */
	for (int i = 0; i < 500 && m.last_freed > MEM_DIRTY_MAX_BYTES; i++) {
		t += MEM_DIRTY_CHECK_NS;
		CHECK(!mem_dirty_turn(&m, t));
		sleep_ms(10);
	}
	CHECK(m.last_freed <= MEM_DIRTY_MAX_BYTES);
	CHECK_EQ(m.purges, 1u);
}

static void test_jemalloc(void)
{
	struct mem_idle m;
	bool have = mem_idle_init(&m);

	CHECK_EQ(have, mallctl != NULL);
	if (!have) {
		printf("test_mem: no jemalloc in this build; its part is skipped\n");
		CHECK_EQ(mem_idle_turn(&m, 100 * S), INT64_MAX);
		return;
	}
	free(malloc(64)); /* the thread has allocated: the first turn sees it */
	CHECK_EQ(mem_idle_turn(&m, 0), MEM_IDLE_QUIET_NS);
	burst();
	size_t before = dirty_pages();
	printf("test_mem: %zu dirty pages after a 64 MiB burst\n", before);
	CHECK(before >= 1000); /* 64 MiB freed stay dirty (decay of seconds) */
	CHECK_EQ(mem_idle_turn(&m, 1 * S), 2 * S);
	CHECK_EQ(m.purges, 0u);
	CHECK_EQ(mem_idle_turn(&m, 2 * S), INT64_MAX);
	CHECK_EQ(m.purges, 1u);
	size_t after = dirty_pages();
	printf("test_mem: %zu dirty pages after the quiet turn\n", after);
	CHECK(after < before / 10);
}

int main(void)
{
	test_model();
	test_jemalloc();
	test_dirty_model();
	test_dirty_jemalloc();
	printf("test_mem: ok\n");
	return 0;
}
