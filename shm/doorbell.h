/*
 * Futex doorbells: how a process that consumes rings sleeps without losing
 * a wake-up, and without anyone busy-polling at idle.
 *
 * Each consuming process has one doorbell in the region (raftd, stored,
 * each gatewayd slot). A sleeper announces "sleeping", issues a full fence
 * and re-checks for work before the futex wait; a producer publishes, issues
 * a full fence and wakes only if it sees "sleeping". One of the two always
 * sees the other, so a wake-up is never lost. Every wait carries a timeout
 * as a backstop anyway.
 */
#ifndef CETCD_SHM_DOORBELL_H
#define CETCD_SHM_DOORBELL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/slot.h"

struct shm_doorbell;

/* Backstop for waits that expect to be woken. Only a safety net (wake-ups
 * are not lost), so it is long: on small VMs a timed wake-up costs a few
 * hundred microseconds of CPU, and an idle member should use ~0%. */
#define SHM_DOORBELL_BACKSTOP_MS 2000

/* Bytes of shared memory a doorbell takes (it owns a cache line pair). */
#define SHM_DOORBELL_BYTES 128u

/* NULL for an index or role out of range; valid while the region is
 * attached. */
struct shm_doorbell *shm_role_doorbell(struct shm_region *r,
				       enum shm_role role);
struct shm_doorbell *shm_slot_doorbell(struct shm_region *r, uint32_t index);

/* Lays out a doorbell in SHM_DOORBELL_BYTES of shared memory (8-byte
 * aligned). */
void shm_doorbell_init(void *mem);

/*
 * Sleeps until rung, has_work(arg) is true or timeout_ms passes. Follows the
 * protocol above: announce, full fence, re-check has_work, futex wait.
 * Returns 0 (woken, work found, or interrupted: the caller re-checks its
 * rings in any case), -ETIMEDOUT, or another -errno if the futex call
 * itself fails (not expected). timeout_ms <= 0 checks once and does
 * not wait. has_work may be NULL. Several threads may sleep on one doorbell.
 */
int shm_doorbell_sleep(struct shm_doorbell *d, bool (*has_work)(void *),
		       void *arg, int timeout_ms);

/*
 * shm_doorbell_sleep in two halves, for a sleeper that waits by other
 * means (waker.c's io_uring futex wait inside an epoll loop). announce
 * counts the caller as asleep, issues the full fence and re-checks
 * has_work: if there is work it takes the count back and returns false;
 * otherwise it returns true with the caller still counted, and the caller
 * may wait on shm_doorbell_futex_word() for as long as it holds the value
 * *seq0 (read before announcing), then calls unannounce.
 */
bool shm_doorbell_announce(struct shm_doorbell *d, bool (*has_work)(void *), void *arg,
			   uint32_t *seq0);
void shm_doorbell_unannounce(struct shm_doorbell *d);
/* The process-shared futex word that wakes move and wait on. */
_Atomic uint32_t *shm_doorbell_futex_word(struct shm_doorbell *d);

/*
 * Spins up to spin_us microseconds checking has_work, but only while peer
 * (the producing process's doorbell, may be NULL) is not asleep, then
 * sleeps as shm_doorbell_sleep does. Same returns.
 */
int shm_doorbell_wait(struct shm_doorbell *d, const struct shm_doorbell *peer,
		      bool (*has_work)(void *), void *arg, unsigned spin_us,
		      int timeout_ms);

/* For producers that publish by other means than a ring (status records,
 * the event feed): full fence, then wake the doorbell if someone sleeps on
 * it. */
void shm_doorbell_ring(struct shm_doorbell *d);

/* Whether someone is asleep (or about to sleep) on the doorbell. */
bool shm_doorbell_is_sleeping(const struct shm_doorbell *d);

/* Whether shm_events_notify should wake this doorbell's owner. */
void shm_doorbell_want_events(struct shm_doorbell *d, bool want);

/* Futex wake-ups issued on this doorbell so far (a statistic). */
uint64_t shm_doorbell_wakes(const struct shm_doorbell *d);

#endif
