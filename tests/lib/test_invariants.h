/*
 * The invariants of docs/invariants.md, as the checks that guard them
 * name them when they fail: CHECK_INVARIANT(INV7_WAKEUPS, woke) fails
 * with "invariant 7 (wake-ups are never lost): file:line: check failed:
 * woke". Each INV* expands to the invariant's number and its short name.
 *
 * Header-only; included by shm_testlib.h and btree_util.h, so every
 * unit and stress test has it.
 */
#ifndef CETCD_TESTS_TEST_INVARIANTS_H
#define CETCD_TESTS_TEST_INVARIANTS_H

#include <stdio.h>
#include <stdlib.h>

#define INV1_SLOT_LIVENESS 1, "a slot's holder is alive while the kernel holds its lock"
#define INV2_REQUEST_IDENTITY 2, "a result reaches only the request that asked for it"
#define INV3_READERS 3, "a reader never sees a page reused or a file shrunk under it"
#define INV4_STORED_DIES 4, "stored may die at any moment"
#define INV5_COMMITTED_DURABLE 5, "stored applies only entries committed and durable here"
#define INV6_APPLY_NEVER_BLOCKS 6, "nothing blocks the apply loop"
#define INV7_WAKEUPS 7, "wake-ups are never lost"
#define INV8_LEASES 8, "leases stay safe across leader changes"
#define INV9_WATCH_DELIVERED 9, "watches report what they delivered"
#define INV10_AUTH_TWICE 10, "auth is checked twice"
#define INV11_ONE_ROOT 11, "one root per apply batch"
#define INV12_DURABLE 12, "durable means fsynced, directories too"
#define INV13_TOKENS 13, "a token entry is read whole or not at all"

static inline void test_invariant_failed(const char *file, int line, int n, const char *name,
					 const char *cond, const char *values)
{
	fprintf(stderr, "invariant %d (%s): %s:%d: check failed: %s%s\n", n, name, file, line,
		cond, values);
	exit(1);
}

#define CHECK_INVARIANT(inv, cond)                                           \
	do {                                                                 \
		if (!(cond))                                                 \
			test_invariant_failed(__FILE__, __LINE__, inv, #cond, ""); \
	} while (0)

#define CHECK_INVARIANT_EQ(inv, a, b)                                        \
	do {                                                                 \
		long long inv_a_ = (long long)(a);                           \
		long long inv_b_ = (long long)(b);                           \
		char inv_v_[64];                                             \
		if (inv_a_ != inv_b_) {                                      \
			snprintf(inv_v_, sizeof(inv_v_), " (%lld != %lld)",  \
				 inv_a_, inv_b_);                            \
			test_invariant_failed(__FILE__, __LINE__, inv,       \
					      #a " == " #b, inv_v_);         \
		}                                                            \
	} while (0)

#endif
