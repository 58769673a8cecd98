/*
 * Unit tests for base/clock/clock.h: its readings are CLOCK_MONOTONIC's
 * (a direct reading falls between two of them), never go back, and the
 * milliseconds are the nanoseconds rounded down.
 */
#include "shm_testlib.h"

#include "base/clock/clock.h"

static int64_t direct_ns(void)
{
	struct timespec ts;

	CHECK_EQ(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void test_is_monotonic_clock(void)
{
	for (int i = 0; i < 1000; i++) {
		int64_t a = clock_now_ns(), d = direct_ns(), b = clock_now_ns();
		CHECK(a <= d && d <= b);
	}
}

static void test_never_goes_back(void)
{
	int64_t prev = clock_now_ns(), start = prev;
	for (int i = 0; i < 100000; i++) {
		int64_t now = clock_now_ns();
		CHECK(now >= prev);
		prev = now;
	}
	/* it moves: 2 ms of sleep show as 2 ms at least */
	usleep(2000);
	CHECK(clock_now_ns() - start >= 2000000);
}

static void test_ms(void)
{
	for (int i = 0; i < 1000; i++) {
		int64_t a = clock_now_ns(), ms = clock_now_ms(), b = clock_now_ns();
		CHECK(a / 1000000 <= ms && ms <= b / 1000000);
	}
}

int main(void)
{
	test_is_monotonic_clock();
	test_never_goes_back();
	test_ms();
	printf("test_clock: ok\n");
	return 0;
}
