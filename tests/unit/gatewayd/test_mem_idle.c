/*
 * Unit tests for gatewayd/mem_idle.c:
 * - over counters of the test's own: no purge while the loop allocates,
 *   nor before a second of quiet; one purge after it, and none again
 *   until the counters move; the wanted turn time tells the loop when to
 *   come back; frees alone count as activity
 * - with jemalloc linked (the normal build): the dirty pages a burst
 *   leaves in jemalloc's arenas are gone after the quiet turn purges
 *   (jemalloc's own statistics); the sanitizer build has no jemalloc and
 *   mem_idle_init says so
 */
#include <stdlib.h>

#include "shm_testlib.h"

#include "gatewayd/mem_idle.h"

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

static void test_jemalloc(void)
{
	struct mem_idle m;
	enum { N = 4096, SZ = 16384 };
	static void *blocks[N];
	bool have = mem_idle_init(&m);

	CHECK_EQ(have, mallctl != NULL);
	if (!have) {
		printf("test_mem_idle: no jemalloc in this build; its part is skipped\n");
		CHECK_EQ(mem_idle_turn(&m, 100 * S), INT64_MAX);
		return;
	}
	free(malloc(64)); /* the thread has allocated: the first turn sees it */
	CHECK_EQ(mem_idle_turn(&m, 0), MEM_IDLE_QUIET_NS);
	for (int i = 0; i < N; i++) {
		blocks[i] = malloc(SZ);
		CHECK(blocks[i]);
		((volatile char *)blocks[i])[0] = 1;
	}
	for (int i = 0; i < N; i++)
		free(blocks[i]);
	size_t before = dirty_pages();
	printf("test_mem_idle: %zu dirty pages after a 64 MiB burst\n", before);
	CHECK(before >= 1000); /* 64 MiB freed stay dirty (decay of seconds) */
	CHECK_EQ(mem_idle_turn(&m, 1 * S), 2 * S);
	CHECK_EQ(m.purges, 0u);
	CHECK_EQ(mem_idle_turn(&m, 2 * S), INT64_MAX);
	CHECK_EQ(m.purges, 1u);
	size_t after = dirty_pages();
	printf("test_mem_idle: %zu dirty pages after the quiet turn\n", after);
	CHECK(after < before / 10);
}

int main(void)
{
	test_model();
	test_jemalloc();
	printf("test_mem_idle: ok\n");
	return 0;
}
