/* The peer port until raftd's peer protocol exists: raftd binds the peer
 * URLs (so that the address is taken, as etcd takes it) and answers every
 * connection with a short plain refusal, then closes it. On https URLs the
 * refusal comes after a TLS handshake with the peer TLS flags (etcd's
 * server side: client cert auth, allowed CN or hostname, CRL, client
 * SANs), so the port is real TLS that a peer or openssl s_client can
 * check; with --peer-auto-tls raftd makes (or reuses) the certificate in
 * <data-dir>/fixtures/peer first, as etcd does when it starts its peer
 * listeners.
 *
 * A thread of its own waits on the listeners with poll(2), so raftd's main
 * thread can sleep on its ring doorbell meanwhile. It serves one
 * connection at a time; a TLS client gets PEERSTUB_HANDSHAKE_MS to finish
 * its handshake.
 */
#ifndef CETCD_RAFTD_PEERSTUB_H
#define CETCD_RAFTD_PEERSTUB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/config/config.h"
#include "shm/tls/tls.h"

#define PEERSTUB_TEXT "cetcd: peer communication is not implemented yet"
#define PEERSTUB_MAX_LISTENERS 16
#define PEERSTUB_HANDSHAKE_MS 3000

struct peerstub {
	int fds[PEERSTUB_MAX_LISTENERS]; /* listening sockets, owned */
	bool tls[PEERSTUB_MAX_LISTENERS]; /* an https URL: handshake first */
	uint32_t count;
	struct tls_ctx *tls_ctx;         /* peer TLS server context, or NULL
					    when no URL is https; owned */
	int stop_fd;                     /* eventfd that ends the thread */
	pthread_t thread;
	bool running;
	uint64_t refused;                /* statistic, read after stop */
	uint64_t rejected;               /* TLS handshakes refused, likewise */
};

/* Binds every URL of c's --listen-peer-urls, and for https ones builds
 * the peer TLS context (making the auto TLS certificate if asked), with
 * etcd's log lines ("starting with peer TLS", and its warnings for TLS
 * flags on http URLs). Returns 0, or the negative errno of the first
 * failure after logging what failed (the caller exits with
 * CONFIG_EXIT_FATAL: restarting frees no taken address and fixes no
 * certificate). */
int peerstub_listen(struct peerstub *p, const struct cetcd_config *c);

/* Starts the thread. Returns 0 or a negative errno. */
int peerstub_start(struct peerstub *p);

/* Stops the thread and closes every socket. Safe after a failed start. */
void peerstub_stop(struct peerstub *p);

#endif
