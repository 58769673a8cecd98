/*
 * Giving freed memory back to the kernel once a daemon's loop goes quiet.
 *
 * jemalloc purges the pages a program frees as the program goes on
 * allocating and freeing (dirty_decay_ms); a loop that falls idle after a
 * burst (a thousand Watch streams opened, a big range answered) keeps
 * them resident, as nothing drives the decay any more. jemalloc's
 * background thread would purge them, but under load it wakes thousands
 * of times a second, each wake-up a context switch taken from the loops
 * that serve. Here the loop itself purges: one turn after
 * MEM_IDLE_QUIET_NS without any allocation or free on its thread, once,
 * and not again until it allocates or frees.
 *
 * Without jemalloc (the sanitizer build) it does nothing.
 */
#ifndef CETCD_GATEWAYD_MEM_IDLE_H
#define CETCD_GATEWAYD_MEM_IDLE_H

#include <stdbool.h>
#include <stdint.h>

#define MEM_IDLE_QUIET_NS 1000000000ll

struct mem_idle {
	const uint64_t *allocated;   /* the thread's counters of bytes */
	const uint64_t *deallocated; /* allocated and freed, or NULL */
	int (*purge)(void *arg);
	void *purge_arg;
	uint64_t seen;               /* their sum at the last turn */
	int64_t quiet_since_ns;      /* when it last changed */
	bool dirty;                  /* changed since the last purge */
	uint64_t purges;             /* purges done */
};

/* For the calling thread (the loop's), with jemalloc's counters and its
 * purge of every arena. Returns whether jemalloc is there (else every
 * call is a no-op). */
bool mem_idle_init(struct mem_idle *m);

/* The same over the given counters and purge (tests). */
void mem_idle_init_with(struct mem_idle *m, const uint64_t *allocated,
			const uint64_t *deallocated, int (*purge)(void *arg), void *arg);

/* Once per turn of the loop, at now_ns: purges when the loop has been
 * quiet long enough. Returns the time it wants the next turn at (for
 * the loop's timer), or INT64_MAX. */
int64_t mem_idle_turn(struct mem_idle *m, int64_t now_ns);

#endif
