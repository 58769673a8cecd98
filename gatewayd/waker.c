/* Doorbell -> eventfd bridge (see waker.h). */
#include "gatewayd/waker.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "shm/doorbell.h"

static bool waker_has_work(void *arg)
{
	struct waker *w = arg;
	return atomic_load(&w->stop) || w->has_work(w->arg);
}

static void *waker_main(void *arg)
{
	struct waker *w = arg;
	const uint64_t one = 1;

	while (!atomic_load(&w->stop)) {
		shm_doorbell_sleep(w->db, waker_has_work, w, SHM_DOORBELL_BACKSTOP_MS);
		if (atomic_load(&w->stop))
			break;
		if (!w->has_work(w->arg))
			continue; /* backstop timeout, nothing arrived */
		if (write(w->efd, &one, sizeof(one)) < 0)
			continue; /* counter overflow only; cannot happen at 1 per wait */
		while (sem_wait(&w->drained) < 0 && errno == EINTR)
			;
	}
	return NULL;
}

int waker_start(struct waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		void *arg)
{
	sigset_t all, old;
	int rc;

	*w = (struct waker){ .db = db, .has_work = has_work, .arg = arg, .efd = -1 };
	atomic_init(&w->stop, false);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0)
		return -errno;
	if (sem_init(&w->drained, 0, 0) < 0) {
		rc = -errno;
		goto out_close_efd;
	}
	/* the thread takes no signals: the loop reads them from a signalfd */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&w->thread, NULL, waker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
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

int waker_fd(const struct waker *w)
{
	return w->efd;
}

void waker_drained(struct waker *w)
{
	uint64_t v;
	if (read(w->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		sem_post(&w->drained);
}

void waker_stop(struct waker *w)
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
