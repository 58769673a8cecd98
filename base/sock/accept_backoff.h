/*
 * A listener that ran out of descriptors backs off (raftd's peer
 * listeners, gatewayd's client listeners and local socket).
 *
 * accept4 failing with EMFILE or ENFILE (or ENOBUFS, ENOMEM) leaves the
 * connection in the listen queue, so a level-triggered epoll reports the
 * listener again at once: a loop that only logs and returns spins on it,
 * writing the same warning as fast as it can. Here the caller stops
 * polling its listeners for a pause that doubles, from
 * ACCEPT_BACKOFF_MIN_NS up to ACCEPT_BACKOFF_MAX_NS, while accepting goes
 * on failing (net/http's Serve sleeps the same way after an accept error,
 * 5 ms doubling to 1 s), and that starts short again after an accept
 * succeeds. The warning is written at most once per ACCEPT_BACKOFF_LOG_NS,
 * with the count of failures left unwritten since the last one.
 *
 * Pure bookkeeping over times the caller passes in (CLOCK_MONOTONIC
 * nanoseconds), so the schedule is tested without sockets or clocks.
 */
#ifndef CETCD_BASE_ACCEPT_BACKOFF_H
#define CETCD_BASE_ACCEPT_BACKOFF_H

#include <stdbool.h>
#include <stdint.h>

#define ACCEPT_BACKOFF_MIN_NS (100ull * 1000 * 1000)
#define ACCEPT_BACKOFF_MAX_NS (1000ull * 1000 * 1000)
#define ACCEPT_BACKOFF_LOG_NS (10ull * 1000 * 1000 * 1000)

/* Zeroed to start. */
struct accept_backoff {
	uint64_t pause_ns;      /* the last pause; 0: none since the last
				 * accept that succeeded */
	uint64_t logged_ns;     /* when the warning was last written */
	bool logged;            /* it was written at all */
	uint64_t suppressed;    /* failures not written since then */
	uint64_t failures;      /* every failure counted (for tests) */
};

/* Whether accept4's error err (a negative errno) says the process or the
 * system is out of descriptors or memory: the connection stays queued,
 * and accepting again at once fails the same way. */
bool accept_backoff_exhausted(int err);

/*
 * Counts a failure err (negative errno) at now_ns and returns how long
 * the listeners stay out of the poll (ns). Writes the warning what (with
 * the error, the pause, the count suppressed and conns, the connections
 * the caller holds) unless one was written less than
 * ACCEPT_BACKOFF_LOG_NS ago; then it only counts it.
 */
uint64_t accept_backoff_fail(struct accept_backoff *b, uint64_t now_ns, int err, const char *what,
			     uint64_t conns);

/* The warning of accept_backoff_fail alone, rate-limited the same way,
 * for a failure that does not pause the listeners (a connection accepted
 * and then dropped). */
void accept_backoff_warn(struct accept_backoff *b, uint64_t now_ns, int err, const char *what,
			 uint64_t conns);

/* An accept succeeded: the next pause is the shortest again. */
void accept_backoff_ok(struct accept_backoff *b);

#endif
