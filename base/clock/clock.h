/*
 * The monotonic clock (CLOCK_MONOTONIC), the one every deadline, timeout,
 * back-off and measured duration of a member is taken with. It never goes
 * back and does not jump with the wall clock; its zero is some point
 * before the machine started, so only differences between its readings
 * mean anything. Wall time (CLOCK_REALTIME, for log lines and what etcd
 * shows as a date) is not this.
 *
 * Inline: it is read on hot paths (the histograms of shm/metrics.h) and
 * costs no more than the vDSO call it wraps. Thread-safe.
 */
#ifndef CETCD_BASE_CLOCK_H
#define CETCD_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

/* The monotonic clock now, in nanoseconds. */
static inline int64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The same reading in whole milliseconds (rounded down). */
static inline int64_t clock_now_ms(void)
{
	return clock_now_ns() / 1000000;
}

#endif
