/*
 * The peer transport's insides, shared by its modules:
 *   peer.c        the API, the queues and events between raftd's loop
 *                 thread and the transport thread, members, the thread's
 *                 epoll loop and its timers;
 *   peer_conn.c   connections: buffers, socket and TLS I/O, accepting,
 *                 dialing, closing;
 *   peer_serve.c  the server side: requests from peers and the answers;
 *   peer_client.c the client side: the stream readers this member dials,
 *                 the stream writers peers dialed, pipeline posts and
 *                 snapshot sends;
 *   peer_resolve.c peer host names looked up off the transport thread.
 * HTTP/1.1 heads and chunked bodies are base/http/http.h's.
 *
 * Threads: one thread drives the transport and owns every socket: raftd's
 * loop thread (peer_opts.driven), or the transport's own thread (the unit
 * tests). Other threads (the lease forwarder, promote forwarders, a test
 * calling the API) reach it through what is under peer.mu (the members,
 * their send queues and stream states, the event queue, work to start)
 * and wake it with wake_fd. mu is held only for queue operations, never
 * across I/O. "Transport thread" below means the driving thread.
 */
#ifndef CETCD_RAFTD_PEER_INT_H
#define CETCD_RAFTD_PEER_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "raftd/peer/msgappv2.h"
#include "raftd/peer/peer.h"
#include "base/http/http.h"
#include "base/sock/accept_backoff.h"
#include "base/sock/gwsock.h"
#include "cluster/peer_url.h"
#include "base/thread/thread.h"

/* etcd's ConnReadTimeout and ConnWriteTimeout: a connection that makes
 * no progress for this long is broken. Stream writers send a link
 * heartbeat every third of it. */
#define PEER_IO_TIMEOUT_NS (5ull * 1000 * 1000 * 1000)
#define PEER_HEARTBEAT_NS (PEER_IO_TIMEOUT_NS / 3)
/* Connecting and the TLS handshake (etcd's peer dial timeout, 1 s, plus
 * room for a handshake under load). */
#define PEER_DIAL_TIMEOUT_NS (3ull * 1000 * 1000 * 1000)
/* etcd's DialRetryFrequency: a stream is dialed again 100 ms after a
 * failed attempt. */
#define PEER_REDIAL_NS (100ull * 1000 * 1000)
/* etcd's streamBufSize and pipelineBufSize, and connPerPipeline. */
#define PEER_STREAM_QUEUE 4096u
/* Bytes a stream's queue may hold besides. etcd's channel holds
 * messages that share their entries with the Raft log; ours holds each
 * one encoded, so 4096 MsgApps of up to 1 MiB (a follower catching up,
 * the same entries sent again after each probe) could hold gigabytes.
 * Past this the queue drops as when it is full (the leader probes the
 * follower again). A message alone in an empty queue is always taken. */
#define PEER_STREAM_QUEUE_BYTES (32u << 20)
#define PEER_PIPELINE_QUEUE 64u
#define PEER_PIPELINE_CONNS 4u
/* Bytes a stream writer's connection may hold unwritten before the
 * transport stops moving its queue into it (the queue then fills and
 * drops, as etcd's channel does when its writer is stuck). */
#define PEER_OUT_HIGH_WATER (4u << 20)
/* Messages received and not yet taken by peer_recv before new ones are
 * dropped (etcd's recvBufSize per peer). */
#define PEER_EVENTS_MAX (4096u * 4)
/* Bytes read per read(2) call. */
#define PEER_READ_CHUNK (64u * 1024)

enum peer_stream {
	PEER_STREAM_MSGAPP = 0, /* /raft/stream/msgapp: msgappv2 */
	PEER_STREAM_MESSAGE,    /* /raft/stream/message */
	PEER_N_STREAMS,
};

/* A growable byte buffer: data is p[off..len). */
struct peer_buf {
	uint8_t *p;
	size_t off;
	size_t len;
	size_t cap;
};

/* One encoded message waiting in a queue. */
struct peer_qmsg {
	struct peer_qmsg *next;
	int32_t type;
	uint64_t to;
	size_t len;
	uint8_t data[];
};

struct peer_queue {
	struct peer_qmsg *head;
	struct peer_qmsg **tail;
	size_t n;
	size_t bytes;  /* the sum of the messages' len */
};

struct peer_conn;

/* A member this one talks to. */
struct peer_remote {
	struct peer_remote *next;
	uint64_t id;
	char idstr[17];                   /* lower-case hex, as etcd's types.ID */

	/* under peer.mu */
	bool gone;                        /* dropped by peer_set_members */
	char **urls;                      /* its peer URLs, owned */
	size_t n_urls;
	struct peer_queue wq[PEER_N_STREAMS]; /* frames for the stream writers,
					       * encoded for the attached
					       * connection */
	bool working[PEER_N_STREAMS];     /* a writer connection is attached */
	struct msgappv2_encoder enc;      /* of the msgapp writer's connection */
	struct peer_queue pipeq;          /* raftpb bodies for POST /raft */
	bool active;                      /* etcd's peerStatus */
	uint64_t active_since_ns;

	/* transport thread only */
	size_t url_pick;                  /* etcd's urlPicker: the URL in use */
	struct peer_conn *reader[PEER_N_STREAMS];
	uint64_t next_dial_ns[PEER_N_STREAMS];
	struct peer_conn *writer[PEER_N_STREAMS];
	unsigned n_posts;                 /* pipeline connections in flight */
	uint64_t refused;                 /* URLs (bit url_pick % n_urls) that
					   * refused a stream dial since the
					   * last stream came up */
	bool down_told;                   /* PEER_EV_DOWN sent since then */
};

enum peer_conn_kind {
	PEER_CONN_SERVER,        /* accepted: requests from a peer */
	PEER_CONN_READER,        /* dialed: a stream this member reads */
	PEER_CONN_POST,          /* dialed: one POST /raft */
	PEER_CONN_SNAP,          /* dialed: one POST /raft/snapshot */
	PEER_CONN_RELAY,         /* dialed: a gatewayd's local socket, the other
				  * end of a relayed server connection */
};

enum peer_conn_state {
	PEER_ST_CONNECTING,      /* non-blocking connect in progress */
	PEER_ST_HANDSHAKE,       /* TLS handshake */
	PEER_ST_REQUEST,         /* server: reading a request head */
	PEER_ST_BODY,            /* server: reading a request body */
	PEER_ST_RESPOND,         /* server: writing an answer */
	PEER_ST_WAIT,            /* server: waiting for the loop's answer
				  * (peer_promote.c) */
	PEER_ST_SYNC,            /* server: a received snapshot's db file is
				  * being made durable (peer_serve.c) */
	PEER_ST_STREAM_OUT,      /* server: a stream writer's connection */
	PEER_ST_SEND,            /* client: writing the request */
	PEER_ST_RESPONSE,        /* client: reading the response head */
	PEER_ST_RESPONSE_BODY,   /* client: reading the response body */
	PEER_ST_STREAM_IN,       /* client: reading a stream */
	PEER_ST_RELAY,           /* relayed to or from a gatewayd (peer_grpc.c) */
	PEER_ST_CLOSED,          /* to be freed */
};

struct peer_snap_recv;
struct peer_snap_send;

struct peer_conn {
	struct peer_conn *next;           /* peer.conns */
	struct peer *p;
	int fd;
	struct tls_conn *tls;             /* https/unixs, else NULL */
	enum peer_conn_kind kind;
	enum peer_conn_state state;
	uint32_t epoll_events;            /* registered */
	bool want_write;                  /* TLS wants the socket writable */
	bool checking;                    /* server TLS: polling the SAN
					   * check's descriptor, not fd */
	bool eof;                         /* the peer closed its side */
	uint64_t deadline_ns;             /* 0: none */
	uint64_t last_out_ns;             /* stream writers: last write */
	char addr[280];                   /* the other end, for logs */

	struct peer_remote *remote;       /* readers, writers and posts */
	enum peer_stream stream;
	struct peer_buf in;
	struct peer_buf out;

	/* the message being read: head, then the body decoded into body */
	struct http_head head;       /* strings point into in; valid
					   * until in is consumed */
	bool body_chunked;
	bool body_to_eof;                 /* a response without a length */
	uint64_t body_left;               /* with a length */
	struct http_chunked chunk;
	struct peer_buf body;
	bool close_after;                 /* server: close once answered */
	uint64_t body_max;

	/* the request being served, decided from its head */
	int route;
	int answer_status;                /* an answer decided from the head,
					   * sent once the body is read; 0:
					   * none */
	const char *answer_text;
	unsigned answer_headers;          /* PEER_HDR_* the route sets */
	uint64_t req_from;                /* streams: the dialing member */

	struct msgappv2_decoder dec;      /* readers of the msgapp stream */
	int status;                       /* client: the response status */
	bool done_ok;                     /* client: the peer took it */
	int32_t post_type;                /* pipeline: the message's type */
	uint64_t post_to;
	struct peer_snap_recv *snap_in;   /* server: POST /raft/snapshot */
	struct peer_snap_send *snap_out;  /* client: a snapshot being sent */
	uint64_t promote_token;           /* server, PEER_ST_WAIT: the answer
					   * awaited */
	struct peer_conn *relay;          /* state RELAY: the other end; NULL
					   * once it is gone */
};

struct peer_evnode {
	struct peer_evnode *next;
	struct peer_event ev;
};

struct peer {
	uint64_t self_id;
	uint64_t cluster_id;
	char self_str[17];
	char cid_str[17];
	char *peer_urls_hdr;              /* X-PeerURLs, owned */
	char server_version[32];
	char min_cluster_version[32];
	char snap_dir[256];               /* where received db files go */
	struct tls_ctx *server_tls;
	struct tls_ctx *client_tls;
	size_t queue_msgs;
	size_t queue_bytes;

	int lfds[16];                     /* listeners */
	bool ltls[16];
	uint16_t lports[16];
	size_t n_listeners;

	int epfd;                         /* the sockets, listeners and wake_fd
					   * (peer_poll_fd) */
	int wake_fd;                      /* eventfd: other threads -> transport */
	int event_fd;                     /* eventfd: transport -> loop thread */
	pthread_t thread;
	bool running;                     /* thread runs (not driven) */
	bool run_due;                     /* transport thread: peer_run has
					   * work now (a poll handled events,
					   * a send or wake was queued) */
	uint64_t next_run_ns;             /* transport thread: when peer_run is
					   * due next for its timers; 0: none */
	_Atomic uint64_t stream_refusals; /* stream requests answered with an
					   * error; only grows (tests wait on it) */

	pthread_mutex_t mu;
	bool stop;                        /* under mu */
	bool wake_pending;                /* under mu: wake_fd was written */
	struct peer_remote *remotes;      /* under mu (list links and shared
					   * fields) */
	uint64_t *removed;                /* under mu */
	size_t n_removed;
	char *members_json;               /* under mu */
	size_t members_json_len;
	char cluster_version[32];         /* under mu */
	struct peer_evnode *ev_head;      /* under mu */
	struct peer_evnode **ev_tail;
	size_t n_events;
	bool ev_signaled;                 /* under mu: event_fd was written
					   * and not read since */
	bool ev_unsignaled;               /* transport thread: it queued
					   * events and has not signaled
					   * them yet (peer_publish_events) */
	struct peer_evnode *taken;        /* loop thread: the batch peer_recv
					   * took and hands out one by one */
	struct peer_snap_send *snaps;     /* under mu: snapshots to start */
	unsigned snap_syncs;              /* under mu: received db files being
					   * made durable by threads */
	bool snap_synced;                 /* under mu: one of them ended */
	pthread_cond_t snap_synced_cond;  /* with mu: snap_syncs fell to 0 */

	struct peer_promote *promote;     /* peer_promote.c's, made on first
					   * use under mu */
	struct peer_lease *lease;         /* peer_lease.c's forwarder, started
					   * on first use by the loop thread */
	struct peer_resolver *resolver;   /* peer_resolve.c's, started on first
					   * use by the transport thread */
	struct gwsock_addr *gw_addrs;     /* the gatewayds' local sockets */
	uint32_t n_gw;                    /* 0: the peer port relays nothing */
	uint32_t gw_next;                 /* transport thread: the next to try */

	struct peer_conn *conns;          /* transport thread only */
	size_t n_conns;                   /* transport thread: on conns */
	struct accept_backoff accept_bo;  /* transport thread: the listeners
					   * out of descriptors */
	struct accept_backoff relay_warn; /* transport thread: the warnings of
					   * failed hand-offs (peer_grpc.c),
					   * rate-limited */
	uint64_t accept_resume_ns;        /* transport thread: the listeners
					   * are out of the poll until then;
					   * 0: they are polled */
	bool removed_reported;            /* transport thread: PEER_EV_REMOVED
					   * was sent (once is enough) */
	bool closing;                     /* peer_stop, after the thread ended:
					   * nothing more is reported */
};

/* ---- peer.c ---- */
/* Queues an event for the loop thread (takes ev's buffers; frees them if
 * the queue is over PEER_EVENTS_MAX and the event is a message). Locks
 * mu. On the transport thread the loop is signaled once per run
 * (peer_run), so that a burst of messages costs the loop one wake-up;
 * other threads signal at once. */
void peer_emit(struct peer *p, struct peer_event *ev);
void peer_emit_locked(struct peer *p, struct peer_event *ev);
void peer_emit_simple(struct peer *p, enum peer_event_kind kind, uint64_t id, bool ok);
/* Wakes the transport thread for new work (on that thread: makes its
 * next run due); under mu. */
void peer_wake_locked(struct peer *p);
/* Writes 1 to eventfd fd unless *pending says a wake-up is already
 * unread (the reader clears it); what names the woken thread in logs.
 * Under the lock that guards *pending. */
void peer_eventfd_wake(int fd, bool *pending, const char *what);
/* The remote with id among the live ones, or NULL; under mu. */
struct peer_remote *peer_remote_find(struct peer *p, uint64_t id);
/* Whether id was removed from the cluster; under mu. */
bool peer_is_removed(struct peer *p, uint64_t id);
/* etcd's peerStatus activate / deactivate (logged as etcd does). */
void peer_status_activate(struct peer *p, struct peer_remote *r);
void peer_status_deactivate(struct peer *p, struct peer_remote *r, const char *source,
			    const char *action, const char *reason);
void peer_queue_free(struct peer_queue *q);
void peer_queue_push(struct peer_queue *q, struct peer_qmsg *m);

/* ---- peer_conn.c ---- */
int peer_buf_reserve(struct peer_buf *b, size_t more);
int peer_buf_append(struct peer_buf *b, const void *d, size_t n);
/* Appends a chunk's head in HTTP/1.1 chunked coding: size in hex, CRLF. */
int peer_buf_chunk_head(struct peer_buf *b, size_t size);
int peer_buf_printf(struct peer_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void peer_buf_consume(struct peer_buf *b, size_t n);
void peer_buf_free(struct peer_buf *b);
static inline size_t peer_buf_size(const struct peer_buf *b) { return b->len - b->off; }
static inline uint8_t *peer_buf_data(const struct peer_buf *b) { return b->p + b->off; }

/* A connection on fd (taken) of the given kind, watched for input. NULL
 * when out of memory (fd is the caller's then). */
struct peer_conn *peer_conn_new(struct peer *p, int fd, enum peer_conn_kind kind);
/* Accepts what waits on listener i. */
void peer_conn_accept(struct peer *p, size_t i);
/* The process ran out of descriptors (err, accept_backoff_exhausted):
 * the listeners leave the poll for the back-off's next pause, and what
 * is logged as the warning what (rate-limited). */
void peer_accept_pause(struct peer *p, int err, const char *what);
/* Puts paused listeners back in the poll once their pause is over;
 * returns when it is (0: none is paused). */
uint64_t peer_accept_resume(struct peer *p, uint64_t now);
/* Starts a connection to u of the given kind (connect in progress). 0,
 * or a negative errno (nothing was made): -EAGAIN while u's host name is
 * being looked up (peer_resolve). */
int peer_conn_dial(struct peer *p, const struct peer_url *u, enum peer_conn_kind kind,
		   struct peer_remote *r, struct peer_conn **out);
/* Handles epoll events on c. */
void peer_conn_io(struct peer_conn *c, uint32_t events);
/* Writes what out holds as far as the socket takes it; then updates the
 * epoll registration. 0, or a negative errno (c is closed then). */
int peer_conn_flush(struct peer_conn *c);
/* Closes c now (its state becomes CLOSED; freed by peer_conn_reap). */
void peer_conn_close(struct peer_conn *c);
/* Frees closed connections. */
void peer_conn_reap(struct peer *p);
/* Starts reading the body c->head announces into c->body (emptied);
 * to_eof: a response without a length runs to the end of the
 * connection. */
void peer_conn_body_begin(struct peer_conn *c, bool to_eof, uint64_t max);
/* Moves body bytes from in to body: 1 once the body is whole, 0 while it
 * goes on, -EBADMSG (bad chunked coding), -EMSGSIZE (over max bytes
 * wait in body), -ENOMEM. */
int peer_conn_pull_body(struct peer_conn *c);
/* Re-registers c with epoll for what its state waits for. */
void peer_conn_arm(struct peer_conn *c);

/* ---- peer_serve.c ---- */
/* A server connection got bytes (or EOF): parse and answer requests. */
void peer_serve_input(struct peer_conn *c);
/* A server connection's answer was written out. */
void peer_serve_written(struct peer_conn *c);

/* Answers the snapshots whose db files were made durable since the last
 * call (peer_turn, after snap_synced). */
void peer_serve_snap_synced(struct peer *p);
/* Waits until no db file is being made durable (peer_stop). */
void peer_serve_snap_wait(struct peer *p);

/* Writes an answer (head and body) on a server connection. */
void peer_serve_reply(struct peer_conn *c, int status, const char *ctype, const char *extra,
		      const void *body, size_t len);

/* ---- peer_promote.c ---- */
/* A whole POST /members/promote/<id>: handed to the loop thread, c waits
 * for its answer. */
void peer_promote_serve(struct peer_conn *c);
/* Writes the answers the loop thread gave (transport thread). */
void peer_promote_flush(struct peer *p);
/* Waits for forwarding threads to end and frees what is left (peer_stop,
 * after the transport thread ended). */
void peer_promote_free(struct peer *p);
/* ---- peer_lease.c ---- */
/* Stops the lease forwarder and frees it (peer_stop). */
void peer_lease_free(struct peer *p);
/* ---- peer_resolve.c ---- */
/* u's address without waiting (transport thread): a unix path or an
 * address at once, a host name from the cache a resolver thread fills
 * (asked for the first time, or again once old: the old address is used
 * meanwhile). 0, -EAGAIN while a name's first lookup runs, -EHOSTUNREACH
 * (the last lookup failed), -ENAMETOOLONG, -ENOMEM. */
int peer_resolve(struct peer *p, const struct peer_url *u, struct sockaddr_storage *ss,
		 socklen_t *sl);
/* Stops the resolver thread (after the lookup in hand) and frees it. */
void peer_resolve_free(struct peer *p);
/* ---- peer_grpc.c ---- */
/* The gatewayds' sockets of the member whose data dir is data_dir (none:
 * nothing is relayed). 0, -ENOMEM, or -errno of the data dir's stat. */
int peer_grpc_init(struct peer *p, const char *data_dir, uint32_t gateways);
void peer_grpc_fini(struct peer *p);
/* A server connection's first bytes: 1 when they are HTTP/2's preface
 * and the connection was relayed (or closed), -EAGAIN when they may be
 * and more must come, 0 when they are not. */
int peer_grpc_sniff(struct peer_conn *c);
/* A request head was parsed: true when it is one a gatewayd answers and
 * the connection was relayed (or closed). */
bool peer_grpc_route(struct peer_conn *c);
/* A relayed connection got bytes (or EOF). */
void peer_grpc_input(struct peer_conn *c);
/* A relayed connection's output was written as far as the socket took. */
void peer_grpc_written(struct peer_conn *c);
/* A relayed connection is being closed: its other end follows once its
 * output is written. */
void peer_grpc_closed(struct peer_conn *c);

/* ---- peer_client.c ---- */
/* The request of a dialed connection, once connected. */
int peer_client_request(struct peer_conn *c);
/* A dialed connection's output was written as far as the socket took. */
void peer_client_written(struct peer_conn *c);
/* A dialed connection got bytes (or EOF). */
void peer_client_input(struct peer_conn *c);
/* A dialed connection failed or was closed before it was done: what it
 * carried is reported. Called by peer_conn_close. */
void peer_client_closed(struct peer_conn *c, int err);
/* A writer connection is being closed: detach it from its remote. */
void peer_writer_closed(struct peer_conn *c);
/* Attaches server connection c as remote r's writer of stream s. */
void peer_writer_attach(struct peer *p, struct peer_remote *r, enum peer_stream s,
			struct peer_conn *c);
/* Per remote work of one loop turn: dials, queues into writers, pipeline
 * posts, heartbeats. Returns the next time it wants a turn (0: none). */
uint64_t peer_client_tick(struct peer *p, struct peer_remote *r, uint64_t now);
/* Stops what r has in flight (its connections are closed). */
void peer_client_drop(struct peer *p, struct peer_remote *r);
/* Snapshot sends queued by peer_send_snapshot start here. */
void peer_snap_start_all(struct peer *p);
/* Frees s and the sends linked after it. */
void peer_snap_send_free(struct peer_snap_send *s);
void peer_snap_recv_free(struct peer_snap_recv *s);
/* The stream type's name in etcd's logs ("stream MsgApp v2"). */
const char *peer_stream_name(enum peer_stream s);

#endif
