/*
 * tests/proto/expect.h: the failure counter and CHECK macro shared by the
 * proto unit tests (tests/unit/proto/test_*.c). A failed CHECK prints
 * where and what, counts, and lets the test go on; main() returns nonzero
 * if expect_failures is not zero.
 */
#ifndef CETCD_TESTS_PROTO_EXPECT_H
#define CETCD_TESTS_PROTO_EXPECT_H

#include <stdio.h>

static int expect_failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			expect_failures++;                                   \
		}                                                            \
	} while (0)

#endif
