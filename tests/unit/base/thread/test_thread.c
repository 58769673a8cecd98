/*
 * Unit tests for base/thread/thread.c: a helper thread starts with every signal
 * blocked whatever its creator's mask, the creator's mask is left as it
 * was, a detached thread runs too, and a process-directed signal waits
 * for the thread that takes it rather than go to a helper.
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/thread/thread.h"

struct probe {
	sigset_t mask;     /* the thread's own mask, as it saw it */
	pthread_t self;
	sem_t ready, go;
	bool wait_for_go;
};

static void *probe_main(void *arg)
{
	struct probe *p = arg;

	bool wait = p->wait_for_go; /* p may be gone once ready is posted */

	pthread_sigmask(SIG_BLOCK, NULL, &p->mask);
	p->self = pthread_self();
	sem_post(&p->ready);
	if (wait)
		while (sem_wait(&p->go) != 0)
			;
	return NULL;
}

static void check_all_blocked(const sigset_t *m)
{
	/* the signals a daemon could be sent; SIGKILL and SIGSTOP can never
	 * be blocked and the kernel drops them from a mask */
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
				    SIGPIPE, SIGCHLD, SIGALRM };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		CHECK(sigismember(m, sigs[i]) == 1);
}

static void test_mask(bool detached)
{
	struct probe p = { .wait_for_go = false };
	sigset_t none, before, after;
	pthread_t t;

	CHECK_EQ(sem_init(&p.ready, 0, 0), 0);
	CHECK_EQ(sem_init(&p.go, 0, 0), 0);
	/* a creator that blocks nothing */
	sigemptyset(&none);
	CHECK_EQ(pthread_sigmask(SIG_SETMASK, &none, &before), 0);
	CHECK_EQ(shm_thread_start(&t, detached, probe_main, &p), 0);
	while (sem_wait(&p.ready) != 0)
		;
	check_all_blocked(&p.mask);
	CHECK_EQ(pthread_sigmask(SIG_BLOCK, NULL, &after), 0);
	CHECK(sigismember(&after, SIGTERM) == 0);
	CHECK(sigismember(&after, SIGUSR1) == 0);
	if (!detached)
		CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK_EQ(pthread_sigmask(SIG_SETMASK, &before, NULL), 0);
	sem_destroy(&p.ready);
	sem_destroy(&p.go);
}

static _Atomic(pthread_t) handled_by;

static void on_usr1(int sig)
{
	(void)sig;
	atomic_store(&handled_by, pthread_self());
}

/* While the main thread blocks SIGUSR1, a SIGUSR1 sent to the process
 * stays pending, however many helpers run (a helper that took signals
 * would run the handler); once the main thread unblocks it, the handler
 * runs there. */
static void test_signal_waits_for_main(void)
{
	struct probe p[3];
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t usr1, pending;
	pthread_t t[3];

	sigemptyset(&sa.sa_mask);
	CHECK_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	for (int i = 0; i < 3; i++) {
		p[i].wait_for_go = true;
		CHECK_EQ(sem_init(&p[i].ready, 0, 0), 0);
		CHECK_EQ(sem_init(&p[i].go, 0, 0), 0);
		CHECK_EQ(shm_thread_start(&t[i], false, probe_main, &p[i]), 0);
		while (sem_wait(&p[i].ready) != 0)
			;
	}
	for (int n = 0; n < 5; n++) {
		CHECK_EQ(pthread_sigmask(SIG_BLOCK, &usr1, NULL), 0);
		atomic_store(&handled_by, (pthread_t)0);
		CHECK_EQ(kill(getpid(), SIGUSR1), 0);
		usleep(20000);
		CHECK(atomic_load(&handled_by) == (pthread_t)0);
		CHECK_EQ(sigpending(&pending), 0);
		CHECK(sigismember(&pending, SIGUSR1) == 1);
		CHECK_EQ(pthread_sigmask(SIG_UNBLOCK, &usr1, NULL), 0);
		CHECK(pthread_equal(atomic_load(&handled_by), pthread_self()));
	}
	for (int i = 0; i < 3; i++) {
		sem_post(&p[i].go);
		CHECK_EQ(pthread_join(t[i], NULL), 0);
		sem_destroy(&p[i].ready);
		sem_destroy(&p[i].go);
	}
}

int main(void)
{
	test_mask(false);
	test_mask(true);
	test_signal_waits_for_main();
	printf("test_thread: ok\n");
	return 0;
}
