/* The peer port until raftd's peer protocol exists: raftd binds the peer
 * URLs (so that the address is taken, as etcd takes it) and answers every
 * connection with a short plain refusal, then closes it.
 *
 * A thread of its own waits on the listeners with poll(2), so raftd's main
 * thread can sleep on its ring doorbell meanwhile.
 */
#ifndef CETCD_RAFTD_PEERSTUB_H
#define CETCD_RAFTD_PEERSTUB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/config/config.h"

#define PEERSTUB_TEXT "cetcd: peer communication is not implemented yet"
#define PEERSTUB_MAX_LISTENERS 16

struct peerstub {
	int fds[PEERSTUB_MAX_LISTENERS]; /* listening sockets, owned */
	uint32_t count;
	int stop_fd;                     /* eventfd that ends the thread */
	pthread_t thread;
	bool running;
	uint64_t refused;                /* statistic, read after stop */
};

/* Binds every URL of urls. Returns 0, or the negative errno of the first
 * failure after logging which address failed (the caller exits with
 * CONFIG_EXIT_FATAL: restarting does not free a taken address). */
int peerstub_listen(struct peerstub *p, const struct config_urls *urls);

/* Starts the thread. Returns 0 or a negative errno. */
int peerstub_start(struct peerstub *p);

/* Stops the thread and closes every socket. Safe after a failed start. */
void peerstub_stop(struct peerstub *p);

#endif
