/*
 * The doorbell bridge: makes a region doorbell (doorbell.h) wake an epoll
 * loop, so that one loop waits on sockets, timers and rings together.
 * raftd and every gatewayd use it.
 *
 * Why a thread: a futex cannot be put in an epoll set, and polling the
 * rings with a short epoll timeout would either spin at idle or add
 * latency. A small thread sleeps on the doorbell (the no-lost-wake-up
 * protocol of doorbell.h); when has_work says there is work it makes the
 * eventfd readable and then waits until the loop says it drained
 * (shm_waker_drained) before sleeping again, so it never spins while work
 * waits and it never touches the rings itself. An idle process thus sleeps
 * in epoll_wait and in the futex, waking only for the backstop.
 *
 * Ordering: has_work must read only what producers publish before the full
 * fence that precedes their doorbell check (ring_publish, shm_doorbell_ring
 * and the like). Then a producer either finds the thread asleep and wakes
 * it, or the thread's re-check after it announced itself finds the work.
 */
#ifndef CETCD_SHM_WAKER_H
#define CETCD_SHM_WAKER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

struct shm_doorbell;

struct shm_waker {
	struct shm_doorbell *db;
	bool (*has_work)(void *);
	void *arg;
	int backstop_ms;      /* each futex wait's timeout; > 0 */
	int efd;              /* readable when there is work; owned, -1 when closed */
	sem_t drained;        /* posted by shm_waker_drained */
	atomic_bool stop;
	pthread_t thread;
	bool running;         /* thread, drained and efd are live */
};

/*
 * Starts the thread on doorbell db. has_work(arg) is called from the
 * thread and must only read what producers publish (ring cursors, status
 * records). backstop_ms bounds each futex wait (SHM_DOORBELL_BACKSTOP_MS in
 * the daemons): a safety net only, since wake-ups are not lost. On failure
 * w is left stopped (shm_waker_stop is a no-op on it). Returns 0,
 * -EINVAL (backstop_ms <= 0), or a negative errno from eventfd, sem_init
 * or pthread_create.
 */
int shm_waker_start(struct shm_waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		    void *arg, int backstop_ms);

/* The descriptor to watch for EPOLLIN; -1 before a successful start. */
int shm_waker_fd(const struct shm_waker *w);

/* Called by the loop after the eventfd fired and it took the work: reads
 * the eventfd and lets the thread sleep again. Does nothing if the eventfd
 * was not readable. */
void shm_waker_drained(struct shm_waker *w);

/* Stops and joins the thread and closes the eventfd. Safe on a waker that
 * failed to start, was stopped already, or is zeroed with efd = -1. */
void shm_waker_stop(struct shm_waker *w);

#endif
