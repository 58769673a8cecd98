/*
 * raftd/alloc.c: raftd_reserve keeps the growable-array contract
 * (reserve_util.h) with raftd's allocation hooks; nothing is left
 * allocated.
 */
#include "reserve_util.h"
#include "wal_util.h"

int main(void)
{
	const struct reserve_under_test r = {
		.reserve = raftd_reserve,
		.free = raftd_free,
		.fail_after = wt_fail_after,
		.live = wt_live_allocs,
	};

	wt_count_allocs();
	reserve_check_growth(&r);
	reserve_check_refusals(&r);
	CHECK_EQ(wt_live_allocs(), 0);
	printf("raftd/test_alloc: ok\n");
	return 0;
}
