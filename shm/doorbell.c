/*
 * Futex doorbells (see doorbell.h).
 *
 * Ordering: the sleeper reads `seq`, increments `sleeping`, issues a full
 * fence and re-checks for work; a producer publishes its work, issues a
 * full fence (in the caller: ring_publish, ring_release_consumed,
 * shm_doorbell_ring) and reads `sleeping`. Of the two loads after the
 * fences at least one sees the other side's store (barrier.h), so either
 * the sleeper finds the work or the producer finds the sleeper. A producer
 * that finds a sleeper bumps `seq` before FUTEX_WAKE; the sleeper's
 * FUTEX_WAIT compares `seq` with the value read before it announced itself,
 * so a wake that lands between the re-check and the wait is not lost
 * either. The futex is process-shared (no FUTEX_PRIVATE_FLAG): the word
 * lives in the MAP_SHARED region.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "shm/barrier.h"
#include "shm/doorbell.h"
#include "shm/layout.h"

static long doorbell_futex(_Atomic uint32_t *word, int op, uint32_t val,
			   const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

void shm_doorbell_init(void *mem)
{
	struct shm_doorbell *d = mem;

	memset(d, 0, sizeof(*d));
	atomic_init(&d->seq, 0);
	atomic_init(&d->sleeping, 0);
	atomic_init(&d->wants_events, 0);
	atomic_init(&d->wakes, 0);
}

void shm_doorbell_takeover(struct shm_doorbell *d)
{
	atomic_store_explicit(&d->sleeping, 0, memory_order_relaxed);
	atomic_store_explicit(&d->wants_events, 0, memory_order_relaxed);
}

void shm_doorbell_wake(struct shm_doorbell *d)
{
	if (atomic_load_explicit(&d->sleeping, memory_order_relaxed) == 0)
		return;
	atomic_fetch_add_explicit(&d->seq, 1, memory_order_release);
	atomic_fetch_add_explicit(&d->wakes, 1, memory_order_relaxed);
	doorbell_futex(&d->seq, FUTEX_WAKE, INT_MAX, NULL);
}

void shm_doorbell_ring(struct shm_doorbell *d)
{
	shm_full_fence();
	shm_doorbell_wake(d);
}

bool shm_doorbell_is_sleeping(const struct shm_doorbell *d)
{
	return atomic_load_explicit(&d->sleeping, memory_order_relaxed) != 0;
}

void shm_doorbell_want_events(struct shm_doorbell *d, bool want)
{
	atomic_store_explicit(&d->wants_events, want, memory_order_relaxed);
}

uint64_t shm_doorbell_wakes(const struct shm_doorbell *d)
{
	return atomic_load_explicit(&d->wakes, memory_order_relaxed);
}

bool shm_doorbell_announce(struct shm_doorbell *d, bool (*has_work)(void *), void *arg,
			   uint32_t *seq0)
{
	*seq0 = atomic_load_explicit(&d->seq, memory_order_acquire);
	atomic_fetch_add_explicit(&d->sleeping, 1, memory_order_relaxed);
	shm_full_fence();
	if (has_work && has_work(arg)) {
		atomic_fetch_sub_explicit(&d->sleeping, 1, memory_order_relaxed);
		return false;
	}
	return true;
}

void shm_doorbell_unannounce(struct shm_doorbell *d)
{
	atomic_fetch_sub_explicit(&d->sleeping, 1, memory_order_relaxed);
}

_Atomic uint32_t *shm_doorbell_futex_word(struct shm_doorbell *d)
{
	return &d->seq;
}

int shm_doorbell_sleep(struct shm_doorbell *d, bool (*has_work)(void *),
		       void *arg, int timeout_ms)
{
	struct timespec ts;
	uint32_t seq0;
	long rc;
	int err;

	if (!shm_doorbell_announce(d, has_work, arg, &seq0))
		return 0;
	if (timeout_ms <= 0) {
		shm_doorbell_unannounce(d);
		return -ETIMEDOUT;
	}
	ts.tv_sec = timeout_ms / 1000;
	ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000;
	rc = doorbell_futex(&d->seq, FUTEX_WAIT, seq0, &ts);
	err = rc ? errno : 0;
	shm_doorbell_unannounce(d);
	if (err == 0 || err == EAGAIN || err == EINTR)
		return 0; /* woken, seq already moved, or a signal */
	return -err;
}

int shm_doorbell_wait(struct shm_doorbell *d, const struct shm_doorbell *peer,
		      bool (*has_work)(void *), void *arg, unsigned spin_us,
		      int timeout_ms)
{
	int64_t end;
	unsigned i;

	if (has_work && has_work(arg))
		return 0;
	if (spin_us && has_work) {
		end = clock_now_ns() + (int64_t)spin_us * 1000;
		for (i = 1;; i++) {
			shm_cpu_relax();
			if (has_work(arg))
				return 0;
			if ((i & 63) == 0 &&
			    ((peer && shm_doorbell_is_sleeping(peer)) ||
			     clock_now_ns() >= end))
				break;
		}
	}
	return shm_doorbell_sleep(d, has_work, arg, timeout_ms);
}
