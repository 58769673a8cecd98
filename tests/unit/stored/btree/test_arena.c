/*
 * The txn arena (stored/btree/arena.c): aligned bump allocations that
 * never overlap, requests larger than a quarter chunk on chunks of their
 * own behind the head (which keeps its room), zeroed allocations, and a
 * pool that takes released chunks up to its limit and hands them out
 * again before malloc is asked, so that a long-lived owner's arena
 * allocates nothing from one release to the next.
 */
#include "btree_util.h"

#include "stored/btree/arena.h"

#define CHUNK 65536u

/* Every allocation is 16-aligned, and none overlaps another: each is
 * filled with its own byte and checked after all are made. */
static void test_bump(void)
{
	struct arena a;
	uint8_t *p[600];
	size_t len[600];

	arena_init(&a);
	for (size_t i = 0; i < 600; i++) {
		len[i] = (i * 37) % 300 + (i % 50 == 0 ? CHUNK / 4 + 1 : 0);
		p[i] = arena_alloc(&a, len[i]);
		T_CHECK(p[i] != NULL);
		T_CHECK(((uintptr_t)p[i] & 15) == 0);
		memset(p[i], (int)(i & 0xff), len[i]);
	}
	for (size_t i = 0; i < 600; i++)
		for (size_t j = 0; j < len[i]; j++)
			T_CHECK(p[i][j] == (uint8_t)(i & 0xff));
	arena_release(&a);
	T_CHECK(a.head == NULL);
	t_no_leaks();
}

/* A large request does not take the head's room: the next small one
 * comes right after the small one before it. */
static void test_large_behind_head(void)
{
	struct arena a;

	arena_init(&a);
	uint8_t *s1 = arena_alloc(&a, 32);
	uint8_t *big = arena_alloc(&a, CHUNK);
	uint8_t *s2 = arena_alloc(&a, 32);
	T_CHECK(s1 && big && s2);
	T_CHECK(s2 == s1 + 32);
	memset(big, 0xab, CHUNK);
	uint8_t *z = arena_zalloc(&a, 100);
	T_CHECK(z != NULL);
	for (size_t i = 0; i < 100; i++)
		T_CHECK(z[i] == 0);
	arena_release(&a);
	t_no_leaks();
}

/* Released chunks go to the pool up to its limit (the rest, and large
 * ones, back to malloc), and the next allocations take them from it:
 * the first chunk handed out again is the last one pooled, and a second
 * round over the same sizes allocates nothing new. */
static void test_pool(void)
{
	struct arena_pool pool;
	struct arena a;
	uint8_t *first[5];

	arena_pool_init(&pool, 3);
	arena_init(&a);
	a.pool = &pool;
	for (int i = 0; i < 5; i++) {
		first[i] = arena_alloc(&a, CHUNK / 4); /* a chunk each: a quarter fits, then no more */
		T_CHECK(first[i] != NULL);
		T_CHECK(arena_alloc(&a, CHUNK - CHUNK / 4) != NULL);
	}
	T_CHECK(arena_alloc(&a, 2 * CHUNK) != NULL); /* a chunk of its own, not a pool's size */
	long live = stored_alloc_live();
	arena_release(&a);
	T_CHECK(pool.n == 3);
	T_CHECK(stored_alloc_live() == live - 3); /* 2 chunks and the large one freed */

	/* Released newest first (first[4], the large one, first[3], first[2]
	 * pooled; the rest freed), the pool hands out the one pooled last. */
	T_CHECK(arena_alloc(&a, 16) == first[2]);
	T_CHECK(pool.n == 2);
	T_CHECK(arena_alloc(&a, CHUNK - 16) != NULL);
	T_CHECK(arena_alloc(&a, 16) != NULL);
	T_CHECK(arena_alloc(&a, CHUNK - 16) != NULL);
	T_CHECK(arena_alloc(&a, 16) != NULL);
	T_CHECK(pool.n == 0);
	T_CHECK(stored_alloc_live() == live - 3); /* three chunks, all from the pool */
	arena_release(&a);
	T_CHECK(pool.n == 3);
	arena_pool_destroy(&pool);
	T_CHECK(pool.n == 0 && pool.free == NULL);
	t_no_leaks();
}

int main(void)
{
	test_bump();
	test_large_behind_head();
	test_pool();
	printf("stored/btree/test_arena: ok\n");
	return 0;
}
