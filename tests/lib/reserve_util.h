/*
 * The contract of a component's growable-array helper (raftd_reserve,
 * stored_reserve), checked the same way for each: it grows an array to
 * its first capacity, then by doubling until the asked count fits, leaves
 * it alone when it already fits, and on no memory or a size past size_t
 * leaves the array as it was. Each test passes its component's functions.
 */
#ifndef CETCD_TEST_RESERVE_UTIL_H
#define CETCD_TEST_RESERVE_UTIL_H

#include <errno.h>
#include <stdint.h>

#include "shm_testlib.h"

struct reserve_under_test {
	int (*reserve)(void **v, size_t *cap, size_t need, size_t elem_size, size_t first_cap);
	void (*free)(void *p);
	/* n more allocations succeed, then all fail; -1 lifts it */
	void (*fail_after)(long n);
	long (*live)(void); /* allocations not yet freed */
};

static void reserve_check_growth(const struct reserve_under_test *r)
{
	uint32_t *v = NULL;
	size_t cap = 0;
	long live = r->live();

	CHECK_EQ(r->reserve((void **)&v, &cap, 0, sizeof(*v), 8), 0);
	CHECK(v == NULL && cap == 0);
	CHECK_EQ(r->reserve((void **)&v, &cap, 1, sizeof(*v), 8), 0);
	CHECK(v != NULL);
	CHECK_EQ(cap, 8);
	for (uint32_t i = 0; i < 100; i++) {
		CHECK_EQ(r->reserve((void **)&v, &cap, i + 1, sizeof(*v), 8), 0);
		v[i] = i * 7;
	}
	CHECK_EQ(cap, 128);
	CHECK_EQ(r->live(), live + 1);
	for (uint32_t i = 0; i < 100; i++)
		CHECK_EQ(v[i], i * 7);

	/* enough room: the same array, without asking for memory */
	uint32_t *same = v;
	r->fail_after(0);
	CHECK_EQ(r->reserve((void **)&v, &cap, 128, sizeof(*v), 8), 0);
	r->fail_after(-1);
	CHECK(v == same && cap == 128);

	/* far more than twice: doubled until it fits */
	CHECK_EQ(r->reserve((void **)&v, &cap, 1000, sizeof(*v), 8), 0);
	CHECK_EQ(cap, 1024);
	CHECK_EQ(v[99], 99 * 7);
	r->free(v);

	/* a first count beyond the first capacity; no first capacity */
	v = NULL;
	cap = 0;
	CHECK_EQ(r->reserve((void **)&v, &cap, 20, sizeof(*v), 4), 0);
	CHECK_EQ(cap, 32);
	r->free(v);
	v = NULL;
	cap = 0;
	CHECK_EQ(r->reserve((void **)&v, &cap, 3, sizeof(*v), 0), 0);
	CHECK_EQ(cap, 4);
	r->free(v);
	CHECK_EQ(r->live(), live);
}

static void reserve_check_refusals(const struct reserve_under_test *r)
{
	uint64_t *v = NULL;
	size_t cap = 0;
	long live = r->live();

	r->fail_after(0);
	CHECK_EQ(r->reserve((void **)&v, &cap, 1, sizeof(*v), 4), -ENOMEM);
	r->fail_after(-1);
	CHECK(v == NULL && cap == 0);
	CHECK_EQ(r->reserve((void **)&v, &cap, 4, sizeof(*v), 4), 0);
	for (uint64_t i = 0; i < 4; i++)
		v[i] = i + 1;
	uint64_t *old = v;
	r->fail_after(0);
	CHECK_EQ(r->reserve((void **)&v, &cap, 5, sizeof(*v), 4), -ENOMEM);
	r->fail_after(-1);
	CHECK(v == old && cap == 4 && v[3] == 4);

	/* sizes past size_t are refused, not wrapped (64-bit size_t):
	 * unchecked, the first would ask for 2^66 bytes wrapped to 0 (and
	 * get them), the other two would double the count to 0 for ever */
	CHECK_EQ(r->reserve((void **)&v, &cap, SIZE_MAX / 2, sizeof(*v), 4), -ENOMEM);
	CHECK_EQ(r->reserve((void **)&v, &cap, SIZE_MAX, 1, 4), -ENOMEM);
	CHECK_EQ(r->reserve((void **)&v, &cap, (SIZE_MAX >> 1) + 2, 1, 4), -ENOMEM);
	CHECK(v == old && cap == 4 && v[0] == 1);
	CHECK_EQ(r->live(), live + 1);

	/* and it still grows afterwards */
	CHECK_EQ(r->reserve((void **)&v, &cap, 5, sizeof(*v), 4), 0);
	CHECK_EQ(cap, 8);
	CHECK_EQ(v[3], 4);
	r->free(v);
	CHECK_EQ(r->live(), live);
}

#endif
