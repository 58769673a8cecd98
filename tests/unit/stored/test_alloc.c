/*
 * stored/alloc.c: stored_reserve keeps the growable-array contract
 * (reserve_util.h) with stored's own allocation hook, and grows byte
 * buffers (element size 1) the same way; nothing is left allocated.
 */
#include "stored/alloc.h"
#include "reserve_util.h"

static void test_byte_buffer(void)
{
	uint8_t *b = NULL;
	size_t cap = 0;

	CHECK_EQ(stored_reserve((void **)&b, &cap, 65, 1, 64), 0);
	CHECK_EQ(cap, 128);
	memset(b, 0xab, cap);
	CHECK_EQ(stored_reserve((void **)&b, &cap, 129, 1, 64), 0);
	CHECK_EQ(cap, 256);
	CHECK_EQ(b[127], 0xab);
	stored_free(b);
}

int main(void)
{
	const struct reserve_under_test r = {
		.reserve = stored_reserve,
		.free = stored_free,
		.fail_after = stored_alloc_fail_after,
		.live = stored_alloc_live,
	};

	reserve_check_growth(&r);
	reserve_check_refusals(&r);
	test_byte_buffer();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_alloc: ok\n");
	return 0;
}
