/* The doorbell bridge (see waker.h). */
#include "shm/waker.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm/doorbell.h"
#include "shm/thread.h"

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

int shm_waker_start(struct shm_waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		    void *arg, int backstop_ms)
{
	int rc;

	*w = (struct shm_waker){ .db = db, .has_work = has_work, .arg = arg,
				 .backstop_ms = backstop_ms, .efd = -1 };
	atomic_init(&w->stop, false);
	if (backstop_ms <= 0)
		return -EINVAL;
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

int shm_waker_fd(const struct shm_waker *w)
{
	return w->efd;
}

void shm_waker_drained(struct shm_waker *w)
{
	uint64_t v;
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
	if (w->efd >= 0) {
		close(w->efd);
		w->efd = -1;
	}
}
