/* Plain refusals on the client port, until the gRPC server exists.
 *
 * Every accepted connection gets one answer and is closed: a client that
 * opens with the HTTP/2 preface (gRPC) gets a SETTINGS frame and a GOAWAY
 * with REFUSED_STREAM and the text below as debug data; anything else
 * (HTTP/1.x, or silence for REFUSE_READ_MS) gets "HTTP/1.1 503 Service
 * Unavailable" with the text as body. After answering, the connection's
 * write side is shut and what the client still sends is read and dropped
 * for up to REFUSE_LINGER_MS, so the answer is not lost to a reset.
 *
 * The table of connections is driven by the caller's epoll loop: the
 * caller adds listeners, passes each event's data.ptr to refuse_event, and
 * calls refuse_expire when the timeout refuse_next_timeout_ms gave passes.
 */
#ifndef CETCD_GATEWAYD_REFUSE_H
#define CETCD_GATEWAYD_REFUSE_H

#include <stdbool.h>
#include <stdint.h>

#define REFUSE_TEXT "cetcd: not serving client requests yet"
#define REFUSE_READ_MS 1000
#define REFUSE_LINGER_MS 1000
#define REFUSE_MAX_CONNS 256

struct refuse_conn;

/* What an epoll event's data.ptr points at in a refuse table: a listener
 * or a connection. Callers put their own sources beside these by giving
 * them other kinds. */
enum refuse_kind { REFUSE_LISTENER = 1, REFUSE_CONN = 2 };

struct refuse_source {
	int kind; /* enum refuse_kind, or a caller's own value */
	int fd;
};

struct refuse {
	int epfd;
	struct refuse_source *listeners; /* owned, with their descriptors */
	uint32_t listener_count;
	struct refuse_conn *conns[REFUSE_MAX_CONNS];
	uint32_t conn_count;
	uint64_t refused;                /* statistic */
};

/* Prepares an empty table that registers its sockets with epfd. */
void refuse_init(struct refuse *t, int epfd);

/* Takes ownership of a listening, non-blocking socket and watches it.
 * Returns 0, -ENOMEM, or a negative errno from epoll_ctl. */
int refuse_add_listener(struct refuse *t, int fd);

/* Handles one epoll event whose data.ptr is a struct refuse_source of
 * this table. */
void refuse_event(struct refuse *t, struct refuse_source *src, uint32_t events);

/* Milliseconds until the nearest deadline, or -1 if none. */
int refuse_next_timeout_ms(const struct refuse *t);

/* Answers or closes the connections whose deadline passed. */
void refuse_expire(struct refuse *t);

/* Closes every connection and listener. */
void refuse_close(struct refuse *t);

#endif
