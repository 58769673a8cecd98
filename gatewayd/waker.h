/* Bridges a region doorbell to an eventfd, so that one epoll loop waits on
 * sockets and rings together.
 *
 * Why a thread: a futex cannot be put in an epoll set, and polling the
 * rings with a short epoll timeout would either spin at idle or add
 * latency. A small thread sleeps on the slot's doorbell (the no-lost-wake-up
 * protocol of shm/doorbell.h, backstop timeout included); when there is
 * work it makes the eventfd readable and then waits until the loop says it
 * drained the rings (waker_drained) before sleeping again, so it never
 * spins while work waits and it never touches the rings itself. An idle
 * gateway thus sleeps in epoll_wait and in the futex, waking only for the
 * backstop.
 */
#ifndef CETCD_GATEWAYD_WAKER_H
#define CETCD_GATEWAYD_WAKER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

struct shm_doorbell;

struct waker {
	struct shm_doorbell *db;
	bool (*has_work)(void *);
	void *arg;
	int efd;              /* readable when there is work; owned */
	sem_t drained;        /* posted by waker_drained */
	atomic_bool stop;
	pthread_t thread;
	bool running;
};

/* Starts the thread. has_work(arg) is called from the thread and must only
 * read ring cursors (ring_has_data). Returns 0, or a negative errno from
 * eventfd or pthread_create. */
int waker_start(struct waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		void *arg);

/* The descriptor to watch for EPOLLIN. */
int waker_fd(const struct waker *w);

/* Called by the loop after the eventfd fired and the rings were drained:
 * reads the eventfd and lets the thread sleep again. */
void waker_drained(struct waker *w);

/* Stops and joins the thread and closes the eventfd. Safe on a waker that
 * failed to start or was stopped already. */
void waker_stop(struct waker *w);

#endif
