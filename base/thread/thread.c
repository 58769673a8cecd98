#include "base/thread/thread.h"

#include <signal.h>

int shm_thread_start(pthread_t *t, bool detached, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	rc = pthread_attr_init(&attr);
	if (rc)
		return -rc;
	if (detached)
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* the new thread inherits the mask in force when it is created */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(t, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc;
}

bool shm_thread_offload(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	if (shm_thread_start(&t, true, fn, arg) == 0)
		return true;
	(void)fn(arg);
	return false;
}
