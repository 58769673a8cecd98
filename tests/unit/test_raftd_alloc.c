/*
 * raftd/alloc.c: raftd_reserve grows an array to its first capacity, then
 * by doubling until the asked count fits, leaves it alone when it already
 * fits, and on no memory or a size past size_t leaves it as it was.
 */
#include "test_wal_util.h"

static void test_grows_by_doubling(void)
{
	uint32_t *v = NULL;
	size_t cap = 0;

	CHECK_EQ(raftd_reserve((void **)&v, &cap, 0, sizeof(*v), 8), 0);
	CHECK(v == NULL && cap == 0);
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 1, sizeof(*v), 8), 0);
	CHECK(v != NULL);
	CHECK_EQ(cap, 8);
	for (uint32_t i = 0; i < 100; i++) {
		CHECK_EQ(raftd_reserve((void **)&v, &cap, i + 1, sizeof(*v), 8), 0);
		v[i] = i * 7;
	}
	CHECK_EQ(cap, 128);
	for (uint32_t i = 0; i < 100; i++)
		CHECK_EQ(v[i], i * 7);
	/* enough room: the same array */
	uint32_t *same = v;
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 128, sizeof(*v), 8), 0);
	CHECK(v == same && cap == 128);
	/* far more than twice: doubled until it fits */
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 1000, sizeof(*v), 8), 0);
	CHECK_EQ(cap, 1024);
	CHECK_EQ(v[99], 99 * 7);
	raftd_free(v);

	/* a first count beyond the first capacity; no first capacity */
	v = NULL;
	cap = 0;
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 20, sizeof(*v), 4), 0);
	CHECK_EQ(cap, 32);
	raftd_free(v);
	v = NULL;
	cap = 0;
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 3, sizeof(*v), 0), 0);
	CHECK_EQ(cap, 4);
	raftd_free(v);
}

static void test_refusals_keep_the_array(void)
{
	uint64_t *v = NULL;
	size_t cap = 0;

	wt_fail_after(0);
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 1, sizeof(*v), 4), -ENOMEM);
	wt_fail_after(-1);
	CHECK(v == NULL && cap == 0);
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 4, sizeof(*v), 4), 0);
	for (uint64_t i = 0; i < 4; i++)
		v[i] = i + 1;
	uint64_t *old = v;
	wt_fail_after(0);
	CHECK_EQ(raftd_reserve((void **)&v, &cap, 5, sizeof(*v), 4), -ENOMEM);
	wt_fail_after(-1);
	CHECK(v == old && cap == 4 && v[3] == 4);
	/* sizes past size_t: refused without asking for memory */
	long live = wt_live_allocs();
	CHECK_EQ(raftd_reserve((void **)&v, &cap, SIZE_MAX / 2, sizeof(*v), 4), -ENOMEM);
	CHECK_EQ(raftd_reserve((void **)&v, &cap, SIZE_MAX, 1, 4), -ENOMEM);
	CHECK(v == old && cap == 4 && v[0] == 1);
	CHECK_EQ(wt_live_allocs(), live);
	raftd_free(v);
}

int main(void)
{
	wt_count_allocs();
	test_grows_by_doubling();
	test_refusals_keep_the_array();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_raftd_alloc: ok\n");
	return 0;
}
