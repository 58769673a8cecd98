/*
 * The doorbell bridge: makes a region doorbell (doorbell.h) wake an epoll
 * loop, so that one loop waits on sockets, timers and rings together.
 * raftd and every gatewayd use it. A futex cannot be put in an epoll set,
 * and polling the rings with a short epoll timeout would either spin at
 * idle or add latency, so the bridge works in one of two ways.
 *
 * Ring mode (kernels with io_uring's FUTEX_WAIT, 6.7 and later): the loop
 * itself is the sleeper. Just before epoll_wait it calls
 * shm_waker_prepare, which announces it asleep, re-checks has_work (the
 * no-lost-wake-up protocol of doorbell.h) and keeps one FUTEX_WAIT on the
 * doorbell in flight on a private io_uring whose descriptor is in the
 * epoll set. A producer's wake completes the wait: the loop's epoll_wait
 * returns (with the ring readable, or with EINTR when the completion's
 * task work interrupts it) and shm_waker_done takes the completion. The
 * loop counts as asleep only inside epoll_wait, so producers issue no
 * wake while it is busy, and a wake costs one switch into the loop.
 *
 * Thread mode (older kernels, io_uring refused, or CETCD_WAKER=thread): a
 * small thread sleeps on the doorbell; when has_work says there is work it
 * makes an eventfd readable and then waits until the loop says it drained
 * (shm_waker_drained) before sleeping again, so it never spins while work
 * waits and it never touches the rings itself.
 *
 * Either way an idle process sleeps in epoll_wait (and the futex), waking
 * only for the backstop, and the loop's calls are the same: prepare and
 * done around every epoll_wait, drained after the descriptor fired and the
 * work was taken.
 *
 * Ordering: has_work must read only what producers publish before the full
 * fence that precedes their doorbell check (ring_publish, shm_doorbell_ring
 * and the like). Then a producer either finds the sleeper announced and
 * wakes it, or the sleeper's re-check after it announced itself finds the
 * work. In ring mode has_work runs on the loop's thread, in thread mode on
 * the bridge's.
 */
#ifndef CETCD_SHM_WAKER_H
#define CETCD_SHM_WAKER_H

#include <liburing.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct shm_doorbell;

enum shm_waker_mode {
	SHM_WAKER_AUTO,   /* ring mode where the kernel has it, unless CETCD_WAKER=thread */
	SHM_WAKER_THREAD,
	SHM_WAKER_RING,   /* ring mode or fail with -EOPNOTSUPP */
};

/* How long the loop may wait at most while ring mode cannot arm its wait,
 * or on the turn after an armed wait failed (neither is expected once the
 * start-up probe passed): the loop polls, and a wait that keeps failing
 * is re-armed at most once a turn of this length, never in a spin. */
#define SHM_WAKER_DEGRADED_MS 1

struct shm_waker {
	struct shm_doorbell *db;
	bool (*has_work)(void *);
	void *arg;
	int backstop_ms;      /* each futex wait's timeout; > 0 */
	int efd;              /* readable when there is work; -1 when closed */
	/* thread mode */
	sem_t drained;        /* posted by shm_waker_drained */
	atomic_bool stop;
	pthread_t thread;
	bool running;         /* thread, drained and efd are live */
	/* ring mode: efd is the ring's descriptor */
	struct io_uring ring;
	bool ring_live;
	bool armed;           /* a FUTEX_WAIT is in flight */
	bool announced;       /* counted asleep by prepare, until done */
	uint64_t arm_failures; /* waits that could not be armed or failed */
	bool wait_failed;     /* the last wait completed with an error */
};

/*
 * Starts the bridge on doorbell db in the mode shm_waker_start_mode picks
 * for SHM_WAKER_AUTO. has_work(arg) must only read what producers publish
 * (ring cursors, status records). backstop_ms bounds each wait in thread
 * mode (SHM_DOORBELL_BACKSTOP_MS in the daemons): a safety net only,
 * since wake-ups are not lost; in ring mode the loop's own timeouts bound
 * its waits. On failure w is left stopped (shm_waker_stop is a no-op on
 * it). Returns 0, -EINVAL (backstop_ms <= 0), or a negative errno from
 * eventfd, sem_init or pthread_create.
 */
int shm_waker_start(struct shm_waker *w, struct shm_doorbell *db, bool (*has_work)(void *),
		    void *arg, int backstop_ms);

/* As shm_waker_start in the mode asked for. SHM_WAKER_AUTO takes ring
 * mode when io_uring is permitted and runs a FUTEX_WAIT (probed once per
 * call) and the environment does not say CETCD_WAKER=thread, thread mode
 * otherwise; SHM_WAKER_RING returns -EOPNOTSUPP where ring mode is not
 * available. */
int shm_waker_start_mode(struct shm_waker *w, struct shm_doorbell *db,
			 bool (*has_work)(void *), void *arg, int backstop_ms,
			 enum shm_waker_mode mode);

/* The descriptor to watch for EPOLLIN; -1 before a successful start. */
int shm_waker_fd(const struct shm_waker *w);

/* "ring" or "thread": the mode a started bridge runs in, for logs. */
const char *shm_waker_mode_name(const struct shm_waker *w);

/*
 * Called by the loop just before it waits, with the timeout it means to
 * give epoll_wait (ms, -1 for none). Returns the timeout to give it: 0
 * when work is already waiting, at most SHM_WAKER_DEGRADED_MS when ring
 * mode could not arm its wait, timeout_ms otherwise (thread mode always).
 * A timeout_ms of 0 is returned at once: a loop that does not wait needs
 * no wake. In ring mode the loop counts as asleep from here until
 * shm_waker_done, which must follow every prepare.
 */
int shm_waker_prepare(struct shm_waker *w, int timeout_ms);

/* Called by the loop after its wait returned, whatever woke it. */
void shm_waker_done(struct shm_waker *w);

/* Called by the loop after the descriptor fired and it took the work. In
 * thread mode it reads the eventfd and lets the thread sleep again, and
 * does nothing if the eventfd was not readable; in ring mode, nothing. */
void shm_waker_drained(struct shm_waker *w);

/* Stops the bridge: joins the thread, or cancels the wait in flight, and
 * closes the descriptor. Safe on a bridge that failed to start, was
 * stopped already, or is zeroed with efd = -1. */
void shm_waker_stop(struct shm_waker *w);

#endif
