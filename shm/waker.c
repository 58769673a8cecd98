/* The doorbell bridge (see waker.h). */
#include "shm/waker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm/doorbell.h"
#include "base/log/log.h"
#include "base/thread/thread.h"

/* io_uring's futex wait (Linux 6.7), spelled out: liburing before 2.5 has
 * no helper and its headers may not name the opcode. The SQE carries the
 * futex2 flags in fd, the word in addr, the expected value in addr2 and
 * the wake mask in addr3. Without FUTEX2_PRIVATE the wait is
 * process-shared, as the doorbell's FUTEX_WAKE is. */
#define WAKER_OP_FUTEX_WAIT 51
#define WAKER_FUTEX2_SIZE_U32 0x02
#define WAKER_FUTEX_MATCH_ANY 0xffffffffu
#define WAKER_RING_ENTRIES 4

/* ---- thread mode ---- */

/* What the thread re-checks after announcing itself asleep: a stop
 * request counts as work so that shm_waker_stop's ring is never missed. */
static bool waker_has_work(void *arg)
{
	struct shm_waker *w = arg;
	return atomic_load(&w->stop) || w->has_work(w->arg);
}

static void *waker_main(void *arg)
{
	struct shm_waker *w = arg;
	const uint64_t one = 1;

	while (!atomic_load(&w->stop)) {
		shm_doorbell_sleep(w->db, waker_has_work, w, w->backstop_ms);
		if (atomic_load(&w->stop))
			break;
		if (!w->has_work(w->arg))
			continue; /* the backstop, or work the loop took meanwhile */
		if (write(w->efd, &one, sizeof(one)) < 0)
			continue; /* counter overflow only; cannot happen at 1 per wait */
		while (sem_wait(&w->drained) < 0 && errno == EINTR)
			;
	}
	return NULL;
}

static int waker_start_thread(struct shm_waker *w)
{
	int rc;

	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		return -errno;
	if (sem_init(&w->drained, 0, 0) < 0) {
		rc = -errno;
		goto out_close_efd;
	}
	rc = shm_thread_start(&w->thread, false, waker_main, w);
	if (rc)
		goto out_destroy_sem;
	w->running = true;
	return 0;

out_destroy_sem:
	sem_destroy(&w->drained);
out_close_efd:
	close(w->efd);
	w->efd = -1;
	return rc;
}

/* ---- ring mode ---- */

/* Queues and submits a FUTEX_WAIT on word for as long as it holds val. */
static int waker_submit_wait(struct io_uring *ring, _Atomic uint32_t *word, uint32_t val)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	int rc;

	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = WAKER_OP_FUTEX_WAIT;
	sqe->fd = WAKER_FUTEX2_SIZE_U32;
	sqe->addr = (uint64_t)(uintptr_t)word;
	sqe->addr2 = val;
	sqe->addr3 = WAKER_FUTEX_MATCH_ANY;
	rc = io_uring_submit(ring);
	if (rc < 0)
		return rc;
	return rc == 1 ? 0 : -EAGAIN;
}

/* Takes every completion; a wait that completed is no longer armed. A
 * completion that is neither a wake (0), a changed value (-EAGAIN) nor a
 * cancellation is a failed wait: counted, logged (the first and then at
 * powers of two), and the next prepare does not arm. */
static void waker_reap(struct shm_waker *w)
{
	struct io_uring_cqe *cqe;

	while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
		int res = cqe->res;

		io_uring_cqe_seen(&w->ring, cqe);
		w->armed = false;
		if (res != 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED) {
			w->arm_failures++;
			w->wait_failed = true;
			if ((w->arm_failures & (w->arm_failures - 1)) == 0)
				log_warn("the doorbell's io_uring futex wait failed; the loop polls every "
					 "millisecond until one succeeds",
					 LOG_ERRNO(res), LOG_U64("failures", w->arm_failures));
		}
	}
}

/* Whether this kernel runs io_uring futex waits: one on a word that does
 * not hold the expected value must complete at once with -EAGAIN (a
 * kernel without the opcode answers -EINVAL). */
static bool waker_ring_probe(struct io_uring *ring)
{
	_Atomic uint32_t word = 0;
	struct io_uring_cqe *cqe;
	int res;

	if (waker_submit_wait(ring, &word, 1) < 0)
		return false;
	if (io_uring_wait_cqe(ring, &cqe) < 0)
		return false;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res == -EAGAIN;
}

static int waker_start_ring(struct shm_waker *w)
{
	int rc = io_uring_queue_init(WAKER_RING_ENTRIES, &w->ring, 0);

	if (rc < 0)
		return -EOPNOTSUPP;
	if (!waker_ring_probe(&w->ring)) {
		io_uring_queue_exit(&w->ring);
		return -EOPNOTSUPP;
	}
	w->ring_live = true;
	w->efd = w->ring.ring_fd;
	return 0;
}

/* ---- the bridge ---- */

int shm_waker_start_mode(struct shm_waker *w, struct shm_doorbell *db,
			 bool (*has_work)(void *), void *arg, int backstop_ms,
			 enum shm_waker_mode mode)
{
	const char *env;

	*w = (struct shm_waker){ .db = db, .has_work = has_work, .arg = arg,
				 .backstop_ms = backstop_ms, .efd = -1 };
	atomic_init(&w->stop, false);
	if (backstop_ms <= 0)
		return -EINVAL;
	if (mode == SHM_WAKER_AUTO) {
		env = getenv("CETCD_WAKER");
		if (env && strcmp(env, "thread") == 0)
			mode = SHM_WAKER_THREAD;
	}
	if (mode != SHM_WAKER_THREAD) {
		int rc = waker_start_ring(w);
		if (rc == 0 || mode == SHM_WAKER_RING)
			return rc;
	}
	return waker_start_thread(w);
}

int shm_waker_start(struct shm_waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		    void *arg, int backstop_ms)
{
	return shm_waker_start_mode(w, db, has_work, arg, backstop_ms, SHM_WAKER_AUTO);
}

int shm_waker_fd(const struct shm_waker *w)
{
	return w->efd;
}

const char *shm_waker_mode_name(const struct shm_waker *w)
{
	return w->ring_live ? "ring" : "thread";
}

/* A turn that polls instead of waiting on the ring: at most
 * SHM_WAKER_DEGRADED_MS, or the loop's own shorter timeout. */
static int degraded_timeout(int timeout_ms)
{
	return timeout_ms < 0 || timeout_ms > SHM_WAKER_DEGRADED_MS ? SHM_WAKER_DEGRADED_MS
								    : timeout_ms;
}

int shm_waker_prepare(struct shm_waker *w, int timeout_ms)
{
	uint32_t seq0;

	if (!w->ring_live || timeout_ms == 0)
		return timeout_ms;
	waker_reap(w);
	if (!shm_doorbell_announce(w->db, w->has_work, w->arg, &seq0))
		return 0;
	w->announced = true;
	/*
	 * A wait still in flight was armed with an older or the same value.
	 * The word only moves in a wake that is followed by FUTEX_WAKE, which
	 * completes it, so it need not be armed again; one armed now with a
	 * value the word no longer holds completes at once with -EAGAIN.
	 */
	if (!w->armed) {
		if (w->wait_failed) { /* a turn of polling before the next try */
			w->wait_failed = false;
			return degraded_timeout(timeout_ms);
		}
		if (waker_submit_wait(&w->ring, shm_doorbell_futex_word(w->db), seq0) < 0) {
			w->arm_failures++;
			return degraded_timeout(timeout_ms);
		}
		w->armed = true;
	}
	return timeout_ms;
}

void shm_waker_done(struct shm_waker *w)
{
	if (!w->ring_live)
		return;
	if (w->announced) {
		shm_doorbell_unannounce(w->db);
		w->announced = false;
	}
	waker_reap(w);
}

void shm_waker_drained(struct shm_waker *w)
{
	uint64_t v;

	if (!w->running)
		return;
	if (read(w->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		sem_post(&w->drained);
}

void shm_waker_stop(struct shm_waker *w)
{
	if (w->running) {
		atomic_store(&w->stop, true);
		shm_doorbell_ring(w->db);
		sem_post(&w->drained);
		pthread_join(w->thread, NULL);
		sem_destroy(&w->drained);
		w->running = false;
	}
	if (w->ring_live) {
		if (w->announced) {
			shm_doorbell_unannounce(w->db);
			w->announced = false;
		}
		io_uring_queue_exit(&w->ring); /* cancels the wait in flight */
		w->ring_live = false;
		w->armed = false;
		w->efd = -1;
	}
	if (w->efd >= 0) {
		close(w->efd);
		w->efd = -1;
	}
}
