/*
 * Giving freed memory back to the kernel sooner than jemalloc would.
 *
 * jemalloc keeps the pages a program frees for reuse and gives them back
 * over dirty_decay_ms (10 s by default), as the program goes on
 * allocating and freeing (the decay). Its background thread would do it
 * on time, but under load it wakes thousands of times a second, each
 * wake-up a context switch taken from the loops that serve. Two policies
 * here, each driven by a daemon's loop:
 *
 * - mem_idle (gatewayd): a loop that falls idle after a burst (a thousand
 *   Watch streams opened, a big range answered) keeps the pages freed
 *   last, as nothing drives the decay any more. The loop itself purges,
 *   one turn after MEM_IDLE_QUIET_NS without any allocation or free on
 *   its thread, once, and not again until it allocates or frees.
 *
 * - mem_dirty (raftd): a loop that is never quiet (heartbeats, a steady
 *   load) but whose allocations come in bursts: a follower back from a
 *   pause or a restart is sent what it missed, and the messages and the
 *   entries read back for it churn through tens of MiB within a second.
 *   Those pages stay resident through the whole decay, and a member
 *   whose followers come and go holds several bursts' worth at once. At
 *   most once every MEM_DIRTY_CHECK_NS the loop reads how many freed
 *   pages jemalloc holds (its statistics, refreshed by the "epoch"
 *   control: microseconds);
 *   above MEM_DIRTY_MAX_BYTES, a thread of its own purges them all, so
 *   that the loop never waits for the kernel's page-table work, and at
 *   most one such purge runs at a time.
 *
 * Without jemalloc (the sanitizer build) both do nothing.
 */
#ifndef CETCD_BASE_MEM_H
#define CETCD_BASE_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_IDLE_QUIET_NS 1000000000ll
/* A catch-up frees tens of MiB within a second: looked at every tenth of
 * one, the peak is little more than the live memory (a look is a few
 * microseconds). */
#define MEM_DIRTY_CHECK_NS 100000000ll
#define MEM_DIRTY_MAX_BYTES ((size_t)4 << 20)

/* Purges the freed pages of every jemalloc arena: 0, or an error number
 * (ENOENT without jemalloc). */
int mem_purge(void);

/* The bytes of freed pages jemalloc holds in all its arenas (dirty and
 * muzzy), in *bytes: 0, or an error number (ENOENT without jemalloc). */
int mem_freed_bytes(size_t *bytes);

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

struct mem_dirty {
	int (*freed)(void *arg, size_t *bytes); /* mem_freed_bytes's contract */
	int (*purge)(void *arg);                /* mem_purge's */
	void *arg;
	bool offload;             /* purge on a thread of its own */
	int64_t next_ns;          /* no look before this */
	size_t last_freed;        /* what the last look found */
	uint64_t purges;          /* purges started */
	uint64_t purged_bytes;    /* the freed bytes found when they started */
};

/* With jemalloc's figures and purge, purging on a thread. Returns whether
 * jemalloc is there (else every call is a no-op). */
bool mem_dirty_init(struct mem_dirty *m);

/* The same over the given figures and purge, run in the caller's thread
 * (tests). */
void mem_dirty_init_with(struct mem_dirty *m, int (*freed)(void *arg, size_t *bytes),
			 int (*purge)(void *arg), void *arg);

/* From the loop, as often as it likes, at now_ns: at most once every
 * MEM_DIRTY_CHECK_NS reads the freed bytes held and, above
 * MEM_DIRTY_MAX_BYTES, starts a purge unless one is under way. Returns
 * whether it started one. */
bool mem_dirty_turn(struct mem_dirty *m, int64_t now_ns);

#endif
