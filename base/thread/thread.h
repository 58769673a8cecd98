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

/* Runs fn(arg) on a detached thread of its own (as shm_thread_start), so
 * that the caller does not wait for it, or in the caller's thread where
 * none can be started: work that must be done either way (closing a file,
 * unmapping). Returns whether it went to a thread. */
bool shm_thread_offload(void *(*fn)(void *), void *arg);

#endif
