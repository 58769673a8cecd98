/* gRPC server calls on top of h2.h.
 *
 * A grpc_server owns the method table (every method of cetcd's .proto
 * services, plus any other path registered), the calls of all its
 * connections, their deadlines and an id table. The rest of gatewayd
 * registers a handler per method and answers calls with grpc_call_send
 * and grpc_call_finish, either inside a callback or later, when a result
 * comes back from the rings.
 *
 * What a client sees, following grpc-go (the server etcd 3.4 uses):
 * - content-type not application/grpc[+...|;...]: HTTP 415 with
 *   grpc-status INVALID_ARGUMENT "invalid gRPC request content-type ...";
 *   a :method other than POST: RST_STREAM(PROTOCOL_ERROR).
 * - unknown path: UNIMPLEMENTED "unknown service X" or "unknown method M
 *   for service X"; a path not of the form /service/method: UNIMPLEMENTED
 *   "malformed method name: ...".
 * - grpc-encoding other than identity: UNIMPLEMENTED "grpc: Decompressor
 *   is not installed for grpc-encoding ..."; a message with the compressed
 *   flag: INTERNAL "grpc: compressed flag set with identity or empty
 *   encoding".
 * - a message longer than max_recv_message_bytes: RESOURCE_EXHAUSTED
 *   "grpc: received message larger than max (N vs. M)", decided from the
 *   length prefix before the body is read.
 * - grpc-timeout: on expiry DEADLINE_EXCEEDED "context deadline exceeded";
 *   a malformed one: INTERNAL "malformed grpc-timeout: ...".
 * - a header list over h2_config.max_header_list_bytes: RESOURCE_EXHAUSTED;
 *   so is a message that would take a connection's partially received
 *   messages past max_conn_buffered_bytes (a memory bound etcd lacks).
 * - errors before any response message go as trailers-only responses.
 *
 * Handler contract. For one call the handler sees, in order:
 * on_call_start, then on_message for each request message and
 * on_half_close when the client ended its side, until the handler calls
 * grpc_call_finish; or, at any point before that, on_cancel once (client
 * RST_STREAM, deadline, connection closed, or a bad request message the
 * server answered itself), after which nothing more comes. After
 * grpc_call_finish no callback comes either. Every callback is optional.
 *
 * Lifetimes. A struct grpc_call pointer is valid during a callback for
 * that call and until the handler finishes the call or returns from
 * on_cancel; it must not be kept across event-loop turns. To answer later,
 * keep grpc_call_id(call) and look the call up with grpc_call_find when
 * the answer arrives: a call that was cancelled, finished or whose
 * connection closed is not found (NULL), so a late answer is dropped
 * without touching freed memory. An id comes back only after its slot
 * was reused 2^32 times.
 *
 * Memory. Call objects and their buffers are pooled by the server; a
 * request message that arrives whole in one DATA frame is handed to the
 * handler without a copy. Allocation goes through the h2 config's hook.
 * Single-threaded: everything runs on the event loop's thread.
 */
#ifndef CETCD_GATEWAYD_GRPC_H
#define CETCD_GATEWAYD_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "gatewayd/transport/grpc_wire.h"
#include "gatewayd/transport/h2.h"

struct grpc_server;
struct grpc_call;

enum grpc_cancel_reason {
	GRPC_CANCEL_CLIENT = 1,   /* the client reset the stream */
	GRPC_CANCEL_DEADLINE = 2, /* grpc-timeout passed; DEADLINE_EXCEEDED was sent */
	GRPC_CANCEL_CONN = 3,     /* the connection closed */
	GRPC_CANCEL_BAD_MESSAGE = 4, /* the server refused the request (a bad message, a
					limit); its status was sent */
	GRPC_CANCEL_SERVER = 5,  /* grpc_server_cancel_tagged ended it; its status was sent */
};

struct grpc_handler {
	/* The request headers were accepted. */
	void (*on_call_start)(struct grpc_call *call);
	/* One request message (the protobuf bytes, prefix removed). msg is
	 * valid during the call only: copy what must outlive it. Check it
	 * with proto_check_request (proto/check.h) before unpacking it. */
	void (*on_message)(struct grpc_call *call, const uint8_t *msg, size_t len);
	/* The client sent its last message. */
	void (*on_half_close)(struct grpc_call *call);
	/* The call ended without the handler: stop its work. Sending or
	 * finishing from here is refused (-ECANCELED). */
	void (*on_cancel)(struct grpc_call *call, enum grpc_cancel_reason why);
};

struct grpc_server_config {
	struct h2_config h2;
	size_t max_recv_message_bytes;   /* largest request message */
	size_t max_conn_buffered_bytes;  /* partial messages held per connection */
	int64_t (*now_ns)(void *arg);    /* monotonic clock; NULL: CLOCK_MONOTONIC */
	void *clock_arg;
	uint32_t call_pool_keep;         /* idle call objects kept for reuse */
};

/* Defaults: h2_config_default, etcd's receive limit max_request_bytes +
 * GRPC_OVERHEAD_BYTES, 64 MiB of partial messages per connection, the
 * monotonic clock, 1024 pooled calls. */
void grpc_server_config_default(struct grpc_server_config *cfg, size_t max_request_bytes);

/* Counts calls as go-grpc-prometheus does, in m (shm/metrics.h; kept by
 * reference): metric_of gives a path's index in m->grpc, or -1 for a
 * method not counted; with handling_hist, also each call's handling time
 * (etcd's --metrics extensive). m NULL stops counting. */
struct shm_metrics;
void grpc_server_set_metrics(struct grpc_server *srv, struct shm_metrics *m,
			     int (*metric_of)(const char *path), bool handling_hist);
/* Creates a server with every method of proto/registry.h known and no
 * handler set. Returns 0, -EINVAL for a bad config, or -ENOMEM. */
int grpc_server_new(const struct grpc_server_config *cfg, struct grpc_server **out);

/* Frees the server. Its connections must have been freed first. */
void grpc_server_free(struct grpc_server *srv);

/* Sets the handler for path ("/etcdserverpb.KV/Range"); a path outside
 * the registry (e.g. "/grpc.health.v1.Health/Check") is added. h and arg
 * must outlive the server. A path without a handler answers
 * UNIMPLEMENTED. Returns 0, -EINVAL for a malformed path, -ENOMEM. */
int grpc_server_handle(struct grpc_server *srv, const char *path, const struct grpc_handler *h,
		       void *arg);

/* A new client connection served by srv (h2_conn_new with this layer).
 * Free it with grpc_server_conn_free, not h2_conn_free. Returns 0 or
 * -ENOMEM. */
int grpc_server_conn_new(struct grpc_server *srv, struct h2_conn **out);

/* Frees a connection of srv: its unfinished calls get on_cancel
 * (GRPC_CANCEL_CONN). */
void grpc_server_conn_free(struct h2_conn *c);

/* The monotonic time of the nearest call deadline, or INT64_MAX. */
int64_t grpc_server_next_deadline_ns(const struct grpc_server *srv);

/* Milliseconds until the nearest deadline (rounded up), 0 if one passed,
 * -1 if none: an epoll_wait timeout. */
int grpc_server_timeout_ms(const struct grpc_server *srv);

/* Ends the calls whose deadline passed: DEADLINE_EXCEEDED to the client,
 * on_cancel(GRPC_CANCEL_DEADLINE) to the handler. Returns how many. */
unsigned grpc_server_expire(struct grpc_server *srv);

/* Sets the check every call with a known path and a handler passes
 * before its handler sees it (what grpc-go calls an interceptor): admit
 * returns GRPC_STATUS_OK to let the call in, or the status to end it with
 * (and *message its text); it may read the call's metadata and tag it.
 * NULL: every call comes in. */
void grpc_server_set_admit(struct grpc_server *srv,
			   enum grpc_status (*admit)(void *arg, struct grpc_call *call,
						     const char *path, const char **message),
			   void *arg);

/* Tags a live call, so that grpc_server_cancel_tagged can end it later;
 * it leaves the tagged set when it ends, whichever way. */
void grpc_call_tag(struct grpc_call *call);
/* Tagged calls still live. */
uint32_t grpc_server_tagged_count(const struct grpc_server *srv);
/* Ends every tagged call: the status (code, message) to the client,
 * on_cancel(GRPC_CANCEL_SERVER) to its handler. Returns how many. */
unsigned grpc_server_cancel_tagged(struct grpc_server *srv, enum grpc_status code,
				   const char *message);

/* Calls alive in srv (started and not yet released): for tests and
 * metrics. */
uint32_t grpc_server_call_count(const struct grpc_server *srv);

/* The call named id, or NULL if it finished, was cancelled or is gone. */
struct grpc_call *grpc_call_find(struct grpc_server *srv, uint64_t id);

/* The call's id: names it across event-loop turns; never 0 for a call
 * the handler was given. */
uint64_t grpc_call_id(const struct grpc_call *call);

/* The method descriptor, or NULL for a path outside the registry. */
const ProtobufCMethodDescriptor *grpc_call_method(const struct grpc_call *call);

/* The handler's arg given to grpc_server_handle. */
void *grpc_call_handler_arg(const struct grpc_call *call);

/* Room in every call for its handler's own state (gatewayd keeps its
 * struct gw_call there): GRPC_CALL_STATE_BYTES, 8-byte aligned, zeroed
 * when the call starts, valid until the call is freed. */
#define GRPC_CALL_STATE_BYTES 16
void *grpc_call_state(struct grpc_call *call);

/* The connection the call arrived on. */
struct h2_conn *grpc_call_conn(const struct grpc_call *call);

/* The call's deadline (monotonic ns, the server's clock), INT64_MAX if
 * the client set none. */
int64_t grpc_call_deadline_ns(const struct grpc_call *call);

/* The value of request metadata field name (lower case, e.g. "token"),
 * or NULL; *len gets its length. Points into nghttp2's header buffers,
 * valid as long as the call pointer is. */
const uint8_t *grpc_call_metadata(const struct grpc_call *call, const char *name, size_t *len);

/* Sends the response headers now (they otherwise go with the first
 * message). Returns 0, -ECANCELED if the call is over, -ENOMEM. */
int grpc_call_send_headers(struct grpc_call *call);

/* Queues one response message (len bytes of protobuf, copied).
 * Returns 0; -ECANCELED if the call is over; -EMSGSIZE over 4 GiB;
 * -ENOMEM. */
int grpc_call_send(struct grpc_call *call, const void *msg, size_t len);

/* Queues a response message of len bytes to be encoded in place: returns
 * where to write them, to be filled before returning to the event loop;
 * NULL if the call is over or out of memory. */
uint8_t *grpc_call_send_reserve(struct grpc_call *call, size_t len);

/*
 * A response message written in parts, for one too large to hold whole:
 * grpc_call_send_begin queues the headers (if not sent yet) and the
 * message's prefix for len bytes; grpc_call_send_part then queues the
 * next len bytes of its body and returns where to write them (filled
 * before returning to the event loop), NULL if the call is over, out of
 * memory, or the parts would pass the length begun. Until the parts add
 * up to len no other message may be sent, and a grpc_call_finish resets
 * the stream (RST_STREAM INTERNAL_ERROR) instead of sending the status,
 * so that a client never takes the part it got for the whole.
 * grpc_call_send_begin returns 0; -ECANCELED if the call is over;
 * -EMSGSIZE over 4 GiB; -EINVAL inside a message begun; -ENOMEM.
 */
int grpc_call_send_begin(struct grpc_call *call, size_t len);
uint8_t *grpc_call_send_part(struct grpc_call *call, size_t len);

/* Response bytes queued on the call and not yet handed to the connection
 * (for a stream's producer to bound its backlog). */
size_t grpc_call_pending_bytes(const struct grpc_call *call);
/* Response bytes sent on the call that the client has not given window
 * back for, its initial stream window and the step in which it gives
 * window back (h2_stream_unacked). */
size_t grpc_call_unacked_bytes(const struct grpc_call *call, size_t *window, size_t *step);

/* Ends the call with a status and message (message may be NULL; it is
 * percent-encoded, and cut at GRPC_MESSAGE_MAX bytes), after the messages
 * queued. The call pointer and id are dead afterwards. Returns 0, or
 * -ECANCELED if the call was over already. Should the status not fit in
 * memory, the stream is reset instead (the client sees it end either
 * way). */
int grpc_call_finish(struct grpc_call *call, enum grpc_status code, const char *message);

/* Longest grpc-message sent, in bytes before encoding. */
#define GRPC_MESSAGE_MAX 1024

#endif
