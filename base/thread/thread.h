/*
 * Starting the helper threads of a daemon.
 *
 * Every cetcd daemon takes its signals in its main thread (a signalfd in
 * the event loop), so a helper thread must never be the one the kernel
 * picks for a process-directed signal: shm_thread_start starts it with
 * every signal blocked, whatever the caller's mask is, and leaves the
 * caller's mask as it was.
 */
#ifndef CETCD_BASE_THREAD_H
#define CETCD_BASE_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* Starts fn(arg) on a new thread with all signals blocked; detached if
 * asked (then *t is only informative). Returns 0 or -errno. */
int shm_thread_start(pthread_t *t, bool detached, void *(*fn)(void *), void *arg);

#endif
