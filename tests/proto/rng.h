/*
 * tests/proto/rng.h: the seeded generator of the proto tests
 * (xorshift64*): small, and the same sequence on every machine, so a
 * printed seed repeats a run.
 */
#ifndef CETCD_TESTS_PROTO_RNG_H
#define CETCD_TESTS_PROTO_RNG_H

#include <stdint.h>

static uint64_t proto_test_state = 1;

static inline void proto_test_seed(uint64_t seed)
{
	proto_test_state = seed * 2 + 1; /* never 0 */
}

static inline uint64_t proto_test_rnd(void)
{
	proto_test_state ^= proto_test_state >> 12;
	proto_test_state ^= proto_test_state << 25;
	proto_test_state ^= proto_test_state >> 27;
	return proto_test_state * 2685821657736338717ull;
}

#endif
