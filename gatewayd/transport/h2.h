/* HTTP/2 server connections on nghttp2, without sockets.
 *
 * An h2_conn is fed the bytes a client sent (h2_conn_recv) and produces
 * the bytes to send back (h2_conn_flush, through a transport.h byte
 * stream, one writev per batch). Requests are handed to the layer above
 * (grpc.c) through struct h2_app_ops; that layer answers through the
 * h2_stream_* functions, at once or later, and the answer goes out at the
 * next flush. Nothing here reads a socket, keeps a timer or blocks.
 *
 * What this layer does for the layer above:
 * - SETTINGS: max concurrent streams (more are refused with
 *   RST_STREAM(REFUSED_STREAM) by nghttp2), initial stream window, max
 *   header list size (advertised and enforced: an oversized request is
 *   flagged to the app, H2_REQ_HEADERS_TOO_LARGE), and a large connection
 *   receive window.
 * - Response bodies of any size under HTTP/2 flow control: the app queues
 *   bytes on the stream; they are framed as the peer's windows allow. A
 *   stream with nothing queued is parked and resumed when the app writes.
 * - Trailers after a body, or a headers-only (trailers-only) response.
 * - RST_STREAM(NO_ERROR) after a complete response when the client was
 *   still sending, so it stops (RFC 9113 section 8.1).
 * - PING answers, flood and rapid-reset protection: nghttp2's own; and
 *   grpc-go's keepalive enforcement policy (ping_min_ns): a client that
 *   pings more often than it allows, more than twice in a row without the
 *   server sending HEADERS or DATA in between, gets GOAWAY
 *   ENHANCE_YOUR_CALM "too_many_pings" and the connection ends.
 * - Keepalive pings of grpc-go's server (h2_conn_keepalive, which the loop
 *   calls): a connection the client sent nothing on for keepalive_ns gets
 *   a PING, and is closed when still nothing came keepalive_timeout_ns
 *   later.
 * - Graceful shutdown: a GOAWAY notice, a PING round trip, then the final
 *   GOAWAY naming the last stream taken; streams above it are ignored
 *   (the client retries them elsewhere) and the ones below run to their
 *   end. The connection is done when the last one closes.
 *
 * Event loop contract (one thread; nothing here is thread-safe):
 *   - bytes read from the transport: h2_conn_recv, then h2_conn_flush;
 *   - the conn's pending callback fired (the app queued output outside a
 *     recv, e.g. a result from the rings): h2_conn_flush after the current
 *     batch of work, so many answers share one writev;
 *   - h2_conn_flush returned -EAGAIN: call it again when the transport
 *     can progress (poll for transport.want);
 *   - h2_conn_is_done: h2_conn_free and close the transport.
 * No h2_* function may be called from inside an h2_app_ops callback except
 * the h2_stream_* functions and h2_conn_shutdown/h2_conn_terminate/
 * h2_conn_user/h2_conn_config.
 *
 * Memory: every allocation (nghttp2's included) goes through the
 * nghttp2_mem hook of the h2_config, so tests can count and fail them.
 * Idle connections hold no output buffer: output is produced into one
 * buffer shared by all connections of an h2_ctx, and only what a
 * transport did not take is copied into the connection.
 */
#ifndef CETCD_GATEWAYD_H2_H
#define CETCD_GATEWAYD_H2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "gatewayd/dlist.h"

struct transport;
struct h2_conn;
struct h2_ctx;

/* Error code given to stream_close for streams still open when their
 * connection is freed; outside HTTP/2's error code space. */
#define H2_CONN_CLOSED 0xffffffffu

/* Bits of on_request's flags. */
#define H2_REQ_END_STREAM 0x1u         /* the request has no body */
#define H2_REQ_HEADERS_TOO_LARGE 0x2u  /* fields past the limit were dropped */

struct h2_config {
	uint32_t max_concurrent_streams; /* SETTINGS_MAX_CONCURRENT_STREAMS */
	uint32_t max_header_list_bytes;  /* SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 size:
					    name + value + 32 per field) */
	uint32_t stream_window_bytes;    /* SETTINGS_INITIAL_WINDOW_SIZE, <= 2^31-1 */
	uint32_t conn_window_bytes;      /* connection receive window, <= 2^31-1 */
	size_t out_batch_bytes;          /* output produced per writev, >= 16 KiB */
	const nghttp2_mem *mem;          /* allocation hook; NULL for libc */
	/* grpc-go's keepalive.EnforcementPolicy.MinTime (PermitWithoutStream
	 * false: without open streams the least is 2 h); 0: no policy */
	int64_t ping_min_ns;
	/* grpc-go's keepalive.ServerParameters Time and Timeout, for
	 * h2_conn_keepalive; 0: no keepalive pings */
	int64_t keepalive_ns;
	int64_t keepalive_timeout_ns;
	int64_t (*now_ns)(void *arg);    /* monotonic clock; NULL: CLOCK_MONOTONIC */
	void *clock_arg;
};

/* Fills c with the defaults: streams unlimited (2^32-1, as etcd), header
 * list 16 MiB (grpc-go's server default), stream window 1 MiB, connection
 * window 16 MiB, output batches of 256 KiB, libc allocation. */
void h2_config_default(struct h2_config *c);

/* A growable byte buffer whose memory comes from an nghttp2_mem hook.
 * Used here for queued response bodies and by the layer above for
 * reassembling requests. Zero-initialised is empty and valid. */
struct h2_buf {
	uint8_t *data;
	size_t len; /* bytes held, data[0..len) */
	size_t cap; /* bytes allocated */
};

/* Makes room for extra more bytes after len. Returns 0 or -ENOMEM. */
int h2_buf_reserve(struct h2_buf *b, const nghttp2_mem *mem, size_t extra);
/* Appends len bytes. Returns 0 or -ENOMEM. */
int h2_buf_append(struct h2_buf *b, const nghttp2_mem *mem, const void *p, size_t len);
/* Frees the memory; b is empty afterwards. */
void h2_buf_free(struct h2_buf *b, const nghttp2_mem *mem);

/* The libc allocation hook. */
const nghttp2_mem *h2_mem_libc(void);

/* One HTTP/2 request stream. The layer above embeds it in its own
 * per-stream object (returned from stream_open) and reaches that object
 * with container_of-style arithmetic. The fields are h2.c's; the app only
 * reads them through the functions below. */
struct h2_stream {
	struct h2_conn *conn;
	struct dlist node;             /* the conn's open streams, newest first */
	int32_t id;
	uint32_t flags;                /* H2_S_* in h2.c */
	uint32_t header_bytes;         /* request header list size so far */
	struct h2_buf body;            /* response bytes queued: [body_off, len) not yet framed */
	size_t body_off;
	size_t body_promised;          /* bytes of the DATA frame nghttp2 is sending now */
	struct h2_buf trailers;        /* flattened trailer fields, kept until the body ends */
	uint32_t ntrailers;
	uint32_t ack_share;            /* largest WINDOW_UPDATE the peer sent for the stream,
					* in 65536ths of its initial stream window then */
};

/* Callbacks into the layer above. All are required. s stays valid from
 * stream_open until stream_close returns; h2 never touches it after. */
struct h2_app_ops {
	/* A client opened stream_id. Return the app's stream (its h2_stream
	 * part zeroed or recycled with h2_stream_recycle), or NULL to refuse
	 * it (RST_STREAM REFUSED_STREAM: out of memory). */
	struct h2_stream *(*stream_open)(void *app, struct h2_conn *c, int32_t stream_id);

	/* One request header field, pseudo-headers included, within the
	 * size limit. The rcbufs are nghttp2's: valid during the call; take
	 * a reference (nghttp2_rcbuf_incref) to keep one. Return 0, or a
	 * negative value to reset the stream with INTERNAL_ERROR. */
	int (*on_header)(struct h2_stream *s, nghttp2_rcbuf *name, nghttp2_rcbuf *value);

	/* The request headers are complete. flags: H2_REQ_*. With
	 * H2_REQ_END_STREAM no on_data/on_remote_end follows. */
	void (*on_request)(struct h2_stream *s, uint32_t flags);

	/* A chunk of request body; data is valid during the call only. */
	void (*on_data)(struct h2_stream *s, const uint8_t *data, size_t len);

	/* The client ended its side of the stream (half-close). */
	void (*on_remote_end)(struct h2_stream *s);

	/* The stream is gone: error_code is NGHTTP2_NO_ERROR after a
	 * complete exchange, the HTTP/2 error of a reset by either side
	 * (NGHTTP2_CANCEL when the client cancelled), or H2_CONN_CLOSED from
	 * h2_conn_free. The app may free s now. */
	void (*stream_close)(struct h2_stream *s, uint32_t error_code);
};

/* Shared state of the connections of one event loop: configuration,
 * nghttp2 callbacks and options, the output batch buffer.
 * Returns 0, -EINVAL for a bad config, or -ENOMEM. */
int h2_ctx_new(const struct h2_config *cfg, struct h2_ctx **out);
/* Frees ctx; its connections must have been freed. */
void h2_ctx_free(struct h2_ctx *ctx);
const struct h2_config *h2_ctx_config(const struct h2_ctx *ctx);

/* A server connection whose client preface has not been read yet. Queues
 * the server's SETTINGS and connection WINDOW_UPDATE (sent at the first
 * flush). app is passed to ops->stream_open. Returns 0 or -ENOMEM. */
int h2_conn_new(struct h2_ctx *ctx, const struct h2_app_ops *ops, void *app,
		struct h2_conn **out);

/* Frees c: open streams get stream_close(H2_CONN_CLOSED), then nghttp2's
 * session and any unsent output go. The pending callback is not called
 * from here on, so the loop may drop c from its lists first. The
 * transport is the caller's. */
void h2_conn_free(struct h2_conn *c);

/* The event loop's own pointer for c, and a function called (at most once
 * between flushes) when c gets output to send outside h2_conn_recv, so
 * the loop can put c on its list of connections to flush. */
void h2_conn_set_user(struct h2_conn *c, void *user, void (*pending)(struct h2_conn *c, void *user));
void *h2_conn_user(const struct h2_conn *c);
/* The app pointer given to h2_conn_new. */
void *h2_conn_app(const struct h2_conn *c);
const struct h2_config *h2_conn_config(const struct h2_conn *c);

/* Processes bytes the client sent, calling the app's callbacks. Returns
 * 0 (protocol errors nghttp2 can answer are answered with a GOAWAY at the
 * next flush); -EPROTO when the peer broke the protocol so badly that the
 * connection must go at once (bad preface, flooding), or -ENOMEM: c is
 * then done and only h2_conn_free is left. */
int h2_conn_recv(struct h2_conn *c, const uint8_t *data, size_t len);

/* Produces pending output and writes it to t, batch after batch, until
 * nothing is left or t cannot take more. Returns 0 when all is written,
 * -EAGAIN when t is full (call again when t->want allows), -EPROTO or
 * -ENOMEM when the session failed, or the transport's negative errno. */
int h2_conn_flush(struct h2_conn *c, struct transport *t);

/*
 * Output of several connections sent by one system call (a batch): the
 * loop has each connection produce into its h2_ctx's shared buffer, sends
 * the pieces together, and then tells each how much of its piece went.
 *   - h2_conn_produce appends c's pending frames (at most one
 *     out_batch_bytes) to the buffer and says where they lie: [*off,
 *     *off + *len). *len may be 0. -EAGAIN (nothing produced) when c
 *     still holds bytes an earlier write did not take: those go first,
 *     through h2_conn_flush. -EPROTO or -ENOMEM when the session failed.
 *   - h2_ctx_batch: the buffer's bytes, valid until the next produce of
 *     any connection of the ctx (which may move them).
 *   - h2_conn_produced: sent of c's len bytes at off went out; c keeps
 *     the rest and writes it first at its next h2_conn_flush. -ENOMEM
 *     (c failed) when it cannot keep them.
 *   - h2_ctx_batch_reset empties the buffer once every piece is settled.
 * The loop then calls h2_conn_flush as usual: it writes what was kept,
 * produces what did not fit in one batch, and says whether c is blocked.
 * No h2_conn_flush of the ctx may run between a produce and the reset.
 */
int h2_conn_produce(struct h2_conn *c, size_t *off, size_t *len);
int h2_conn_produced(struct h2_conn *c, size_t off, size_t len, size_t sent);
const uint8_t *h2_ctx_batch(const struct h2_ctx *ctx, size_t *len);
void h2_ctx_batch_reset(struct h2_ctx *ctx);
struct h2_ctx *h2_conn_ctx(const struct h2_conn *c);

/* Whether c has output to produce or unwritten bytes. */
bool h2_conn_want_write(const struct h2_conn *c);

/* Whether c is finished: nothing more to read or write (after a GOAWAY
 * and the last stream's end, or a failure). Free it then. */
bool h2_conn_is_done(const struct h2_conn *c);

/* Starts a graceful shutdown (GOAWAY notice, then a final GOAWAY after a
 * PING round trip); open streams run to their end. Calling it again
 * while the PING is unanswered sends the final GOAWAY at once. */
void h2_conn_shutdown(struct h2_conn *c);

/* Ends c now: GOAWAY with error_code (NGHTTP2_NO_ERROR for a drain
 * timeout); after the next flush c is done. */
void h2_conn_terminate(struct h2_conn *c, uint32_t error_code);

/* Open streams. */
uint32_t h2_conn_stream_count(const struct h2_conn *c);

/* The server's keepalive at time now_ns (the clock of the config): when
 * the client sent nothing for keepalive_ns, a PING is queued (c signals
 * its pending output); when nothing came keepalive_timeout_ns after that
 * PING either, -ETIMEDOUT: close c now. Otherwise 0. *next_ns is when to
 * call again at the latest (INT64_MAX: without keepalive). */
int h2_conn_keepalive(struct h2_conn *c, int64_t now_ns, int64_t *next_ns);

/* Prepares the h2 part of an app stream object that is being reused,
 * keeping queue memory up to keep_bytes per buffer (freeing larger ones).
 * A zeroed h2_stream needs no call. mem is the ctx's hook. */
void h2_stream_recycle(struct h2_stream *s, const nghttp2_mem *mem, size_t keep_bytes);

/* Frees the queue memory of an h2_stream that will not be reused. */
void h2_stream_destroy(struct h2_stream *s, const nghttp2_mem *mem);

static inline int32_t h2_stream_id(const struct h2_stream *s)
{
	return s->id;
}

static inline struct h2_conn *h2_stream_conn(const struct h2_stream *s)
{
	return s->conn;
}

/* Sends the response HEADERS (nva is copied; pseudo-header ":status"
 * first). With end_stream the response is complete (a headers-only or
 * gRPC trailers-only answer); otherwise a body follows from
 * h2_stream_write, closed by h2_stream_end. Returns 0; -EALREADY if a
 * response was started; -ENOMEM; -EPROTO if nghttp2 refused it. */
int h2_stream_respond(struct h2_stream *s, const nghttp2_nv *nva, size_t nvlen, bool end_stream);

/* Queues len bytes of response body (after h2_stream_respond without
 * end_stream). Returns 0; -EINVAL if no body is open; -ENOMEM. */
int h2_stream_write(struct h2_stream *s, const void *data, size_t len);

/* Queues len bytes of body and returns where to put them; the caller
 * fills them before returning to the event loop (nothing is framed
 * before the next flush). NULL when no body is open or out of memory. */
uint8_t *h2_stream_write_reserve(struct h2_stream *s, size_t len);

/* Ends the body after what is queued: with trailer fields (copied; no
 * pseudo-headers; at most 8) or, with nvlen 0, END_STREAM on the last
 * DATA frame. Returns 0; -EINVAL if no body is open or too many
 * trailers; -ENOMEM. */
int h2_stream_end(struct h2_stream *s, const nghttp2_nv *trailers, size_t nvlen);

/* Resets the stream with error_code (RST_STREAM). stream_close follows
 * when the frame goes out. Returns 0 or -EPROTO. */
int h2_stream_reset(struct h2_stream *s, uint32_t error_code);

/* Whether the response was started (h2_stream_respond called). */
bool h2_stream_responded(const struct h2_stream *s);

/* Response body bytes queued and not yet framed. */
static inline size_t h2_stream_pending(const struct h2_stream *s)
{
	return s->body.len - s->body_off;
}

/* Bytes framed on s that the peer has not given window back for: its
 * initial stream window (SETTINGS_INITIAL_WINDOW_SIZE, into *window)
 * less what is left of the stream's. A peer gives window back as its
 * application reads, in steps of its own choosing, so this is what the
 * application has not read yet plus less than one step. *step is the
 * largest step the peer has taken on s, as a share of the window then
 * applied to the window now (a peer's window may grow under load, and
 * its steps with it), at most *window; or half the window before its
 * first (gRPC's Go client gives back a quarter of the window at a time,
 * nghttp2 half). */
size_t h2_stream_unacked(const struct h2_stream *s, size_t *window, size_t *step);

#endif
