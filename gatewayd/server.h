/* gatewayd's server: one event loop per process over the client sockets
 * and the slot's rings.
 *
 * The loop (server.c) waits in epoll on:
 *   - the client listeners (SO_REUSEPORT: several gatewayd share a port);
 *   - the accepted connections, in the clear or through TLS
 *     (transport.h's backends, as the listener's mode says): each starts
 *     by telling an HTTP/2 client preface (gRPC, served through
 *     grpc.h/h2.h) from an HTTP/1.x request line (http1.h), unless TLS's
 *     ALPN already said HTTP/1.1;
 *   - the waker's eventfd (shm/waker.h): records arrived on the slot's reply
 *     rings, or stored published the applied index a read waits for;
 *   - a timerfd armed at the nearest deadline (gRPC deadlines, request
 *     timeouts, the backlog's retry);
 *   - descriptors the caller watches (its signalfd).
 * After each turn it publishes the proposals staged on the ring to raftd
 * and flushes every connection that got output, one writev batch each.
 * Nothing polls at idle: an idle gateway sleeps in epoll_wait and its
 * waker thread in the futex.
 *
 * The ring side (rings.c): requests that need raftd or stored go out on
 * SHM_SLOT_TO_RAFTD (MSG_PROPOSE, MSG_READ_INDEX, shm/msg.h) with this
 * process's request identity, and their answers come back on
 * SHM_SLOT_FROM_RAFTD and SHM_SLOT_FROM_STORED; the pending table
 * (pending.h) matches them to calls. The db side (dbread.c): reads run
 * in this process from a read-only mapping of the db at the root stored
 * published, registered in the reader table.
 *
 * Services (kv.c, maint.c, cluster.c) register unary handlers with
 * gw_handle_unary and answer either at once or through gw_propose /
 * gw_read_linearizable.
 *
 * Single-threaded: everything but the waker's has_work runs on the loop's
 * thread.
 */
#ifndef CETCD_GATEWAYD_SERVER_H
#define CETCD_GATEWAYD_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "gatewayd/auth_call.h"
#include "gatewayd/dlist.h"
#include "gatewayd/transport/grpc.h"
#include "gatewayd/transport/h2.h"
#include "gatewayd/transport/http1.h"
#include "gatewayd/pending.h"
#include "base/mem/mem.h"
#include "shm/metrics.h"
#include "shm/slot.h"
#include "shm/status.h"
#include "shm/waker.h"
#include "gatewayd/transport/sendq.h"
#include "base/sock/accept_backoff.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc.h"

struct auth_token_opts;
struct cetcd_config;
struct shm_region;
struct btree_reader;
struct btree_txn;
struct gw_conn;
struct gw_server;

/* What the server needs to know, beside the region and its slot. */
struct gw_params {
	const struct cetcd_config *cfg; /* kept by reference: must outlive the server */
	uint64_t member_id;
	uint64_t cluster_id;
	int64_t request_timeout_ns;     /* 0: etcd's ReqTimeout (5 s + 2 election timeouts) */
	uint32_t pending_cap;           /* requests in flight; 0: GW_DEFAULT_PENDING */
	size_t backlog_bytes;           /* proposals held while the ring to raftd is
					 * full; 0: GW_DEFAULT_BACKLOG_BYTES, at least
					 * two of the largest record */
	const char *db_path;            /* NULL: <data-dir>/member/snap/db */
	/* --auth-token and --auth-token-ttl, parsed (auth/token.h); NULL in
	 * tests that need no tokens. Kept by reference, as cfg. */
	const struct auth_token_opts *auth_tokens;
};

#define GW_DEFAULT_PENDING 16384u
#define GW_DEFAULT_BACKLOG_BYTES (8u << 20)
/* How often a backlog waiting for room on the ring to raftd retries. */
#define GW_BACKLOG_RETRY_NS 1000000
/* While requests wait, how often a quiet gateway looks whether a leader
 * change lost some (rings.c: gw_settle). */
#define GW_SETTLE_POLL_NS 50000000
/* How often an attach hello that found its ring full is sent again. */
#define GW_HELLO_RETRY_NS 100000000
/* Ring records taken per ring and turn, so sockets are served between. */
#define GW_RING_BATCH 4096u

/* A request kept for later, when its answer needs the rings first (a
 * linearizable read). The owner embeds it first in its own struct. */
struct gw_deferred;
struct gw_deferred_ops {
	/* The wait is over: answer call (live). */
	void (*run)(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d);
	/* Frees d; called once, after run or instead of it. */
	void (*free)(struct gw_deferred *d);
	/* Set for gw_propose_then only: stored's result of the proposal,
	 * handed to its maker instead of being sent (call live; status 0 and
	 * the response bytes, or etcd's status and error text; valid during
	 * the call only). Errors the rings answer themselves (timeouts,
	 * leader changes, refusals) still finish the call, and d is freed
	 * without this. */
	void (*result)(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d,
		       int32_t status, const uint8_t *body, size_t len);
};
struct gw_deferred {
	const struct gw_deferred_ops *ops;
};

/* A read transaction at stored's published root (dbread.c). */
struct gw_read {
	struct btree_txn *txn;
	struct status_stored st; /* the record the txn reads at */
	const struct lcache *cache; /* stored's latest-entry cache, or NULL */
};

/*
 * A unary call's life in gatewayd, kept in the call itself
 * (grpc_call_state, zeroed when the call starts):
 *
 *   GW_CALL_AWAITING --request message--> GW_CALL_HANDLED
 *   GW_CALL_HANDLED  --gw_propose / gw_read_linearizable--> GW_CALL_PENDING
 *   GW_CALL_PENDING  --answer, refusal, timeout or cancel--> GW_CALL_HANDLED
 *
 * AWAITING: no request message yet; a half-close now is grpc-go's EOF.
 * HANDLED: the handler ran; it answered, or will through a later stage;
 * a second request message is ignored, as grpc-go ignores it. PENDING:
 * the call waits for raftd or stored under request id `rid` (pending.h);
 * a cancel frees that request, and its answer, if it comes, finds no call.
 */
enum gw_call_stage {
	GW_CALL_AWAITING = 0,
	GW_CALL_HANDLED,
	GW_CALL_PENDING,
};

struct gw_call {
	uint16_t stage; /* enum gw_call_stage */
	/* A LeaseKeepAlive stream: whether the client has half-closed, and
	 * the renewals asked and not answered yet; the stream then ends with
	 * OK once the last is answered, as etcd's server answers every
	 * request it received before the end of the stream. */
	uint16_t half_closed;
	uint32_t inflight;
	uint64_t rid;   /* the pending request, while PENDING; else 0 */
};
_Static_assert(sizeof(struct gw_call) <= GRPC_CALL_STATE_BYTES, "gw_call fits in a call");

static inline struct gw_call *gw_call_of(struct grpc_call *call)
{
	return grpc_call_state(call);
}

/* Moves a call to stage (rid only for GW_CALL_PENDING). */
static inline void gw_call_set(struct grpc_call *call, enum gw_call_stage stage, uint64_t rid)
{
	struct gw_call *g = gw_call_of(call);

	g->stage = stage;
	g->rid = stage == GW_CALL_PENDING ? rid : 0;
}

/* The handler of a unary method: the one request message (valid during
 * the call only). It answers with grpc_call_send/finish, gw_propose or
 * gw_read_linearizable. */
typedef void (*gw_unary_fn)(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			    size_t len);

/* Counters, for logs and tests. */
struct gw_stats {
	uint64_t accepted;
	uint64_t h2_conns;
	uint64_t http1_conns;
	uint64_t proposals;        /* MSG_PROPOSE sent (ring or backlog) */
	uint64_t read_indexes;     /* MSG_READ_INDEX sent */
	uint64_t results;          /* answers delivered to a call */
	uint64_t interims;         /* interim results that moved a deadline on */
	uint64_t dropped;          /* records from the rings not delivered */
	uint64_t malformed;        /* records whose length did not add up */
	uint64_t timeouts;         /* requests answered "request timed out" */
	uint64_t leader_changed;   /* proposals answered "leader changed" (lost) */
	uint64_t too_many;         /* requests refused: table or backlog full */
	uint64_t no_space;         /* writes refused: stored's db out of space */
	uint64_t backlogged;       /* records that went through the backlog */
	uint64_t turns;
	uint64_t wakes;            /* waits the doorbell's waker ended (in ring
				    * mode, or a signal) */
	uint64_t watch_responses;  /* WatchResponses sent */
	uint64_t watch_events;     /* events they carried */
	uint64_t watch_held;       /* events held while their stream was backlogged */
	uint64_t handed_timeouts;  /* handed connections closed for their silence */
	uint64_t handshake_timeouts; /* TLS clients closed for an unfinished handshake */
};

/* What an epoll event's data.ptr points at: the first member of every
 * source the loop watches. */
struct gw_src {
	int kind;
	int fd;
};

struct gw_listener;
struct gw_watch;
struct gw_arena;
struct gw_method;
struct kv_state;
struct maint_job;
struct snap_stream;
struct watch_state;
struct conc_state;
struct gw_offload;
struct jsongw;

struct gw_server {
	struct shm_region *r;
	struct shm_slot_ref slot;
	const struct cetcd_config *cfg;
	uint64_t member_id, cluster_id;
	int64_t request_timeout_ns;
	uint64_t max_request_bytes;
	uint64_t max_txn_ops;
	char *db_path;                  /* owned */

	int epfd;
	int timerfd;
	struct gw_src timer_src, waker_src;
	int64_t timer_armed_ns;         /* what timerfd is set to; INT64_MAX: disarmed */
	int64_t now_ns;                 /* monotonic, taken once per turn */
	struct mem_idle mem;            /* freed pages back once the loop is quiet */
	struct gw_listener *listeners;
	struct tls_ctx *tls;            /* the https listeners' (owned), or NULL */
	struct gw_watch *watches;
	struct dlist conns;             /* every live connection, newest first */
	struct dlist flush;             /* connections with output this turn,
					 * in the order they got it */
	struct sendq sendq;             /* their writes in one system call */
	uint32_t conn_count;
	struct dlist dead;              /* closed, freed at the end of the turn */
	int watch_fired;                /* a watched descriptor, or -1 */
	bool more_work;                 /* a ring batch was cut short: don't sleep */
	uint32_t lingering;             /* connections waiting for the client's close, */
	struct dlist linger;            /* oldest first (server.c) */
	int64_t accept_resume_ns;       /* a paused listener listens again; INT64_MAX: none */
	int64_t keepalive_next_ns;      /* the HTTP/2 connections' earliest keepalive
					 * deadline at most (server.c); INT64_MAX: none */
	struct accept_backoff accept_bo; /* the listeners out of descriptors */
	struct dlist handed;            /* connections from the local socket, the
					 * one read longest ago first (server.c) */
	struct dlist handshaking;       /* TLS connections, the oldest first, until
					 * their handshake is done (server.c) */
	bool draining;
	int64_t noleader_next_ns;       /* the next look for a leader (noleader.h);
					 * INT64_MAX: no stream requires one */
	uint32_t noleader_checks;       /* looks in a row that found none */

	struct grpc_server *grpc;
	struct http1_ops http1;
	struct http1_ops http1_local;   /* GW_LISTEN_LOCAL connections' */
	struct http1_ops http1_metrics; /* GW_LISTEN_METRICS_* connections' */
	struct shm_metrics *metrics;    /* this gateway's block (shm/metrics.h) */
	struct http1_access access;     /* the client port's: --cors, --host-whitelist */
	ProtobufCAllocator pb;          /* unpacks into the turn's arena */
	struct gw_arena *arena;
	struct gw_method *methods;      /* registered unary handlers (owned) */
	struct kv_state *kv;            /* kv.c's (owned) */
	struct maint_job *maint_jobs;   /* maint.c's hashes in progress, first runs
					 * (owned; each freed when its call ends) */
	struct snap_stream *snapshots;  /* snapshot.c's streams (owned, likewise) */
	struct watch_state *watch;      /* watch.c's streams and watchers (owned) */
	struct conc_state *conc;        /* conc.c's locks and elections in progress (owned) */
	struct gw_offload *offload;     /* the worker thread's jobs (offload.h; owned) */
	struct jsongw *jsongw;          /* the JSON gateway (jsongw/), NULL when
					 * --enable-grpc-gateway=false (owned) */

	/* the ring side (rings.c) */
	struct shm_waker waker;
	bool waker_fired;
	struct pending_table pending;
	uint8_t *backlog;               /* records [type u32, len u32, payload,
					 * padding to 8] waiting for the ring */
	size_t backlog_head, backlog_len, backlog_cap;
	bool staged;                    /* records staged on the ring this turn */
	uint64_t *waits;                /* request ids in PENDING_READ_WAIT */
	uint32_t nwaits, waits_cap;
	_Atomic uint64_t wait_index;    /* smallest index a read waits for; 0: none
					 * (read by the waker thread) */
	uint64_t settled_done;          /* the last settled term whose lost
					 * proposals were answered (rings.c) */
	uint64_t propose_term;          /* raftd's term, as this turn stamps
					 * proposals with it (rings.c); 0: unknown */
	bool propose_term_read;         /* propose_term was read this turn, and
					 * raftd has refused nothing since */
	bool hello_sent[SHM_ROLE_COUNT];
	bool attached[SHM_ROLE_COUNT];
	bool ring_failed[SHM_ROLE_COUNT]; /* logged once */
	int64_t hello_retry_ns;

	/* the db side (dbread.c) */
	struct btree_reader *db;
	uint64_t db_generation;
	bool db_mapped_before;   /* a mapping was replaced: map the next lazily */
	uint32_t db_page_size;
	uint32_t reader_index;
	bool reader_claimed;
	struct lcache cache;      /* attached once stored has laid it out */
	bool cache_attached;

	struct gw_stats stats;

	/* auth (auth_call.c) */
	const struct auth_token_opts *auth_tokens; /* gw_params', by reference; may be NULL */
	struct gw_authz authz;
};

/* Whether auth is enabled, as of this turn: the one test a call makes
 * while it is not (auth_call.h). */
static inline bool gw_auth_enabled(const struct gw_server *s)
{
	return s->authz.enabled;
}

/* Makes a server for slot s of region r (both the caller's, kept by
 * reference), with every service registered. Returns 0 or a negative
 * errno (-ENOMEM, or what epoll/timerfd/the waker thread returned). */
int gw_server_new(struct shm_region *r, const struct shm_slot_ref *slot,
		  const struct gw_params *p, struct gw_server **out);

/* Closes every connection and listener, answers what still waits with
 * "etcdserver: server stopped", and frees the server. NULL is allowed. */
void gw_server_free(struct gw_server *s);

/* What a client listener serves (etcd's insecure and secure serve
 * contexts of one address). */
enum gw_listen_mode {
	GW_LISTEN_PLAIN, /* http: gRPC and HTTP/1.1 in the clear */
	GW_LISTEN_TLS,   /* https: TLS with the server's context first */
	GW_LISTEN_BOTH,  /* http and https on one address: the client's first
			  * byte tells which (transport_sniff_init) */
	GW_LISTEN_METRICS_PLAIN, /* a --listen-metrics-urls http URL: HTTP/1.x,
				  * /metrics and the health checks only */
	GW_LISTEN_METRICS_TLS,   /* the same over TLS (an https URL) */
	GW_LISTEN_LOCAL, /* this gatewayd's local socket (base/sock/gwsock.h): what
			  * raftd hands over from the peer port, in the clear,
			  * from processes of this user only; HTTP/1 serves
			  * the peer port's GET /members/hashkv there */
};

/* Takes ownership of a listening, non-blocking socket, served as mode
 * says (TLS modes need gw_server_set_tls first). Returns 0, -EINVAL (a
 * TLS mode without a context), or a negative errno. */
int gw_server_listen(struct gw_server *s, int fd, enum gw_listen_mode mode);

/* The TLS context of the https listeners; the server takes it (freed with
 * the server, after its connections). */
struct tls_ctx;
void gw_server_set_tls(struct gw_server *s, struct tls_ctx *ctx);

/* Takes ownership of a connected socket (made non-blocking here) as a new
 * client connection. Returns 0 or a negative errno. */
int gw_server_adopt(struct gw_server *s, int fd);

/* Watches fd (not owned): gw_server_run returns when it is readable. */
int gw_server_watch(struct gw_server *s, int fd);

/* Sends the attach hellos (retried on later turns when a ring is full). */
void gw_server_hello(struct gw_server *s);

/* One turn of the loop: waits up to timeout_ms (-1: until something
 * happens; the server's own deadlines shorten it), handles what came.
 * Returns the watched descriptor that fired, or -1. */
int gw_server_turn(struct gw_server *s, int timeout_ms);

/* Turns until a watched descriptor fires; returns it. */
int gw_server_run(struct gw_server *s);

/* Graceful stop: listeners close, waiting requests are answered "server
 * stopped", HTTP/2 clients get GOAWAY, and turns run until every
 * connection is gone or drain_ms passes. */
void gw_server_drain(struct gw_server *s, int drain_ms);

/* ---- for the services ---- */

/* Registers fn for a unary method path ("/etcdserverpb.KV/Range").
 * Returns 0 or the error of grpc_server_handle. */
int gw_handle_unary(struct gw_server *s, const char *path, gw_unary_fn fn);
/* The same, with cancel called too when a call of the method ends
 * without its handler (a cancel, a deadline, its connection closing),
 * for a method whose answer outlives the handler (a streamed Range). */
int gw_handle_unary_cancel(struct gw_server *s, const char *path, gw_unary_fn fn,
			   void (*cancel)(struct gw_server *s, struct grpc_call *call));

/* protobuf-c's allocator for unpacking requests: memory lives until the
 * end of the loop turn (free is a no-op). */
static inline ProtobufCAllocator *gw_pb_alloc(struct gw_server *s)
{
	return &s->pb;
}

/* Scratch memory valid until the end of the turn; NULL when out of
 * memory. */
void *gw_scratch(struct gw_server *s, size_t len);

/* What grpc-go puts before a decoder's error text in the INTERNAL status
 * it answers a request it cannot unmarshal: a unary call's, and a stream's
 * message (Watch, LeaseKeepAlive, Snapshot, Observe). */
#define GW_UNMARSHAL_PREFIX "grpc: error unmarshalling request: "
#define GW_STREAM_UNMARSHAL_PREFIX "grpc: failed to unmarshal the received message "

/*
 * Unpacks a request the way etcd's gRPC server does: bytes etcd's decoder
 * refuses are answered INTERNAL with its text (proto_check_request);
 * bytes protobuf-c would read differently are re-encoded first, and then
 * *msg and *len name those bytes (scratch memory, valid for the turn), so
 * that what is proposed is what was decoded, as etcd proposes its own
 * re-encoding. Returns the message (valid until the turn ends), or NULL
 * after answering the call. gw_unpack is for a unary call's request,
 * gw_unpack_stream for a message of a streaming call (its refusal says
 * what grpc-go says there).
 */
void *gw_unpack(struct gw_server *s, struct grpc_call *call, const ProtobufCMessageDescriptor *desc,
		const uint8_t **msg, size_t *len);
void *gw_unpack_stream(struct gw_server *s, struct grpc_call *call,
		       const ProtobufCMessageDescriptor *desc, const uint8_t **msg, size_t *len);

/* Packs m (a response) and finishes the call OK; INTERNAL when out of
 * memory. */
void gw_answer(struct gw_server *s, struct grpc_call *call, const ProtobufCMessage *m);

/* The response header etcd fills in: cluster and member id, raftd's term,
 * and revision (when 0: stored's current one). */
struct gw_header {
	uint64_t cluster_id;
	uint64_t member_id;
	int64_t revision;
	uint64_t raft_term;
};
void gw_header_fill(struct gw_server *s, int64_t revision, struct gw_header *h);
/* The same, into a protobuf-c ResponseHeader (its other state untouched). */
struct Etcdserverpb__ResponseHeader;
void gw_header_pb(struct gw_server *s, int64_t revision, struct Etcdserverpb__ResponseHeader *hdr);

/*
 * Proposes an InternalRaftRequest made of a header (id = the request id)
 * and field `field` holding body (the client's request bytes as they
 * came), with this process's origin appended, and answers the call when
 * stored's result, raftd's rejection or the request timeout comes.
 * Answers the call itself when it cannot be sent: InvalidArgument
 * "etcdserver: request is too large" over --max-request-bytes,
 * ResourceExhausted "etcdserver: too many requests" when the pending
 * table or the backlog is full. call NULL: proposed for nobody, as etcd's
 * server proposes from a goroutine of its own; the answer is dropped.
 */
void gw_propose(struct gw_server *s, struct grpc_call *call, uint32_t field, const uint8_t *body,
		size_t len);
/* gw_propose whose result goes to d->ops->result rather than to the
 * client, so that a service can take further steps (v3lock.c,
 * v3election.c). Takes d in every case: freed with d->ops->free once the
 * result came, or at once when the call was answered (too large, too
 * many requests). call NULL: proposed for nobody; d is freed at once. */
void gw_propose_then(struct gw_server *s, struct grpc_call *call, uint32_t field,
		     const uint8_t *body, size_t len, struct gw_deferred *d);
/* Answers a unary call with stored's result as gw_propose would have:
 * status 0 and the response bytes, or etcd's status and error text. */
void gw_answer_result(struct grpc_call *call, int32_t status, const uint8_t *body, size_t len);
/* Proposes cc[0..len), a raftpb.ConfChange, as an EntryConfChange with the
 * call's origin appended; stored answers the call once it is applied
 * (MemberAdd, MemberRemove, MemberUpdate, MemberPromote). */
void gw_propose_conf_change(struct gw_server *s, struct grpc_call *call, const uint8_t *cc,
			    size_t len);
/* Asks raftd to hand leadership to target (Maintenance.MoveLeader); raftd
 * answers the call when the transferee leads, or with etcd's error. */
void gw_move_leader(struct gw_server *s, struct grpc_call *call, uint64_t target);
/* Asks raftd to promote a learner (Cluster.MemberPromote): raftd refuses
 * it with etcd's error, or proposes it and stored answers. */
void gw_promote(struct gw_server *s, struct grpc_call *call, uint64_t member_id);

/* pending_req.tag of a request whose answer is one message of a stream
 * (the call goes on after it) rather than the end of a unary call. */
#define GW_PENDING_TAG_STREAM 1u
/* pending_req.tag of a peer's POST /leases (_PEER) or /leases/internal
 * (_PEER_TTL, _PEER_TTL_KEYS when the keys are asked for): ctx is the
 * gw_conn that waits (NULL once it closed), call_id unused. */
#define GW_PENDING_TAG_PEER 2u
#define GW_PENDING_TAG_PEER_TTL 3u
#define GW_PENDING_TAG_PEER_TTL_KEYS 4u
static inline bool gw_pending_is_peer(uint32_t tag)
{
	return tag >= GW_PENDING_TAG_PEER && tag <= GW_PENDING_TAG_PEER_TTL_KEYS;
}
/*
 * A peer's lease request (cluster/leasehttp.h), asked of this member's stored
 * for the local-socket connection owner (a gw_conn), which gets the
 * answer through gw_http1_reply. 0, or -ENOMEM (the table or the
 * ring is full).
 */
struct leasehttp_req;
int gw_lease_peer(struct gw_server *s, void *owner, const struct leasehttp_req *r);
/* The connection owner closes: its lease request is answered to nobody. */
void gw_lease_peer_drop(struct gw_server *s, void *owner);
/* Answers the HTTP/1 request the connection owner waits on (server.c):
 * a peer's lease request, a health check's read. Nothing if it closed. */
void gw_http1_reply(struct gw_server *s, void *owner, int status, const char *ctype,
		    const void *body, size_t len);
/* pending_req.tag of a linearizable read an HTTP/1 request waits for (a
 * health check): ctx is its struct gw_http_read. */
#define GW_PENDING_TAG_HTTP_READ 5u
/*
 * A linearizable read's wait for an HTTP/1 request (etcd's health checks
 * Range with Serializable false): a read index from raftd, then stored's
 * applied index reaching it. done is called once, with err NULL when the
 * read could be served, or etcd's error text (a timeout, a leader
 * change); done frees r. owner is the waiting gw_conn, set to NULL by
 * gw_read_index_http_drop when it closes.
 */
struct gw_http_read {
	void (*done)(struct gw_server *s, struct gw_http_read *r, const char *err);
	void *owner;
};
/* 0, or -ENOMEM (table or ring full: done is not called). */
int gw_read_index_http(struct gw_server *s, struct gw_http_read *r);
void gw_read_index_http_drop(struct gw_server *s, void *owner);
/* services/http.c: GET /metrics, /health, /livez and /readyz, for the
 * connection owner (a gw_conn) whose HTTP/1 side is h1 (http1_ops.serve). */
int http_serve(struct gw_server *s, void *owner, struct http1_conn *h1, const struct http1_req *r);
/* The JSON gateway wrote to the HTTP/1.1 connection owner (a gw_conn):
 * rc 0, it is flushed with the turn; an error, it closes (server.c). */
void gw_http1_output(struct gw_server *s, void *owner, int rc);
/*
 * Asks stored's lessor (a MSG_KEEPALIVE: m's origin is filled here) and
 * answers the call with what it says: as a unary call's answer, or with
 * stream set as one message of a stream that goes on. Answers the call
 * itself ("too many requests") when the request cannot be sent.
 */
struct msg_keepalive;
void gw_ask_stored(struct gw_server *s, struct grpc_call *call, const struct msg_keepalive *m,
		   bool stream);

/*
 * Asks stored to defragment the db (a MSG_DEFRAG) and answers the call
 * with stored's answer, once the new file is the db. The call waits up
 * to GW_DEFRAG_TIMEOUT_NS (etcd sets none: the client's deadline ends it
 * sooner). Answers the call itself when the request cannot be sent.
 */
#define GW_DEFRAG_TIMEOUT_NS (3600ll * 1000000000)
void gw_ask_stored_defrag(struct gw_server *s, struct grpc_call *call);

/*
 * A linearizable read: asks raftd for a read index, waits until stored's
 * applied index reaches it, then runs d (d->ops->run) with the call.
 * Takes d in every case (it is freed with d->ops->free); errors and
 * timeouts are answered here.
 */
void gw_read_linearizable(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d);

/*
 * Begins a read txn at the root stored published last, registered in
 * the reader table until gw_read_end. Returns 0; -EAGAIN when stored has
 * published nothing yet (or its record is being rewritten by a restart);
 * or the error of opening the db. End it before returning to the loop.
 */
int gw_read_begin(struct gw_server *s, struct gw_read *rd);
void gw_read_end(struct gw_server *s, struct gw_read *rd);

/*
 * A read txn, and an MVCC view of it, that last across loop turns (a
 * Hash, a streamed Range): a reader entry and a mapping of their own,
 * since gw_read_begin ends and reuses the server's entry, and moves the
 * server's mapping to a new db file, between its reads; neither may
 * happen under a txn that spans turns. Zeroed before first use.
 *   gw_pin_begin: a read and a view at the root stored published last
 *     (the view without the latest-entry cache). 0; -EAGAIN
 *     when stored has published nothing yet; -ESTALE when the db file
 *     was replaced meanwhile (gw_pin_end, then try again); the errors of
 *     claiming an entry, mapping and reading. On failure p keeps what it
 *     took until gw_pin_end or gw_pin_release; the view's errors too.
 *     populate: fill the page tables of the whole file at once (a reader
 *     of all of it).
 *   gw_pin_end: closes the view, ends the txn and the read, unmaps; the
 *     entry stays claimed for the next begin.
 *   gw_pin_release: gw_pin_end, and gives the entry back.
 */
struct gw_pin {
	bool claimed;            /* reader_index is ours */
	bool reading;            /* its txid is registered */
	uint32_t reader_index;
	struct btree_reader *db;
	struct btree_txn *txn;   /* while begun */
	struct status_stored st; /* the record the txn reads at */
	bool view_open;
	struct mvcc_view v;      /* of txn, while view_open */
};
int gw_pin_begin(struct gw_server *s, struct gw_pin *p, bool populate);
void gw_pin_end(struct gw_server *s, struct gw_pin *p);
void gw_pin_release(struct gw_server *s, struct gw_pin *p);

/* The TLS session the call came over (its client certificate), NULL in
 * the clear (and for the JSON gateway's calls). */
struct tls_conn *gw_call_tls(const struct gw_server *s, const struct grpc_call *call);

/* Finishes the call with the status etcd answers while it cannot read
 * yet (Unavailable "etcdserver: not capable", which clients retry), or
 * for another error of gw_read_begin. */
void gw_read_refuse(struct gw_server *s, struct grpc_call *call, int rc);

/* Bytes up to the db's high-water mark: what gw_db_sizes reports in use
 * before capping it at the file's size. Costs no system call (the page
 * size is read once). */
int64_t gw_db_high_water_bytes(struct gw_server *s, const struct status_stored *st);

/* The db's size as etcd's Status and metrics give it (bytes: etcd's
 * dbSize, the pages up to the high-water mark, at most the file) and its
 * part in use (etcd's dbSizeInUse, those pages less the free pages stored
 * published), 0 when unknown. */
void gw_db_sizes(struct gw_server *s, const struct status_stored *st, int64_t *size,
		 int64_t *in_use);

/* ---- internal to the gatewayd sources ---- */

/* rings.c */
int gw_rings_init(struct gw_server *s, uint32_t pending_cap, size_t backlog_bytes);
void gw_rings_fini(struct gw_server *s);
void gw_rings_turn(struct gw_server *s);       /* drain replies, serve waits, expire */
void gw_rings_publish(struct gw_server *s);    /* backlog into the ring, publish */
int64_t gw_rings_next_deadline(struct gw_server *s);
void gw_rings_cancel(struct gw_server *s, struct grpc_call *call);
void gw_rings_stop(struct gw_server *s);       /* answer everything "server stopped" */
bool gw_rings_has_work(void *server);          /* the waker's has_work */

/* dbread.c */
void gw_db_close(struct gw_server *s);

/* Services. */
int kv_register(struct gw_server *s);
/* Answers the point reads kv.c gathered during the turn; the turn calls it
 * once its events are handled, before anything of the turn's arena goes. */
void kv_turn(struct gw_server *s);
/* kv.c's Ranges streamed over several turns: kv_jobs_turn takes a bounded
 * step of each, with the turn's reads; kv_jobs_flushed, after the turn's
 * flush, keeps the loop awake while one has room for more. */
void kv_jobs_turn(struct gw_server *s);
void kv_jobs_flushed(struct gw_server *s);
int maint_register(struct gw_server *s);
/* The peer port's GET /members/hashkv (http1.h): the HashKV at rev for
 * owner (a connection), computed over loop turns as a HashKV call's is,
 * and handed to gw_http1_hashkv_done. 0 or -ENOMEM. A closing connection
 * drops its job with maint_hashkv_peer_drop. */
struct hashkv_resp;
int maint_hashkv_peer(struct gw_server *s, void *owner, int64_t rev);
void maint_hashkv_peer_drop(struct gw_server *s, void *owner);
/* server.c: a /members/hashkv answer for owner (rc 0 with r, or an error
 * with etcd's text why). */
void gw_http1_hashkv_done(struct gw_server *s, void *owner, int rc, const struct hashkv_resp *r,
			  const char *why);
/* Takes the next step of the Hash or HashKV being computed (maint.c), and
 * keeps the loop from sleeping while one is; once per turn, with the
 * turn's reads. */
void maint_turn(struct gw_server *s);
int cluster_register(struct gw_server *s);
/* lease.c: the Lease service; lease_next_id picks the ID of a lease
 * granted without one (this gateway's, never another's). */
int lease_register(struct gw_server *s);
int64_t lease_next_id(struct gw_server *s);
/* conc.c: the v3lock and v3election services (v3lock.c, v3election.c)
 * and the waits they run; conc_turn rechecks the waits once stored
 * published a new revision. */
int conc_register(struct gw_server *s);
void conc_turn(struct gw_server *s);
void conc_free(struct gw_server *s);
/* auth.c: the Auth service's management RPCs, proposed through Raft
 * (passwords hashed on the worker, offload.h); authenticate.c:
 * Auth.Authenticate (passwords checked there too). */
int auth_service_register(struct gw_server *s);
int authn_register(struct gw_server *s);
/* alarm.c: Maintenance.Alarm, and whether the db holds a raised alarm. */
int alarm_register(struct gw_server *s);
bool alarm_raised(struct gw_server *s);
/* --quota-backend-bytes, etcd's 2 GiB for 0 (negative: no quota). */
int64_t alarm_quota_bytes(struct gw_server *s);
/* The types of the alarms raised (bit 1 << AlarmType), from the db. */
unsigned alarm_types_raised(struct gw_server *s);
/* StatusResponse.errors as etcd fills them: first (when not NULL), then
 * each raised alarm as its AlarmMember's text; scratch memory. */
void alarm_status_errors(struct gw_server *s, const char *first, char ***errs, size_t *n);
/* etcd's quota check of a Put, Txn or LeaseGrant req (unpacked): true
 * when it would take the db to --quota-backend-bytes; then this member's
 * NOSPACE alarm is proposed and call answered with etcd's NoSpace. */
bool alarm_quota_refuses(struct gw_server *s, struct grpc_call *call, const ProtobufCMessage *req);
/* etcd's NoSpace text, which the refusals below answer with. */
#define ALARM_NO_SPACE_TEXT "etcdserver: mvcc: database space exceeded"
/* Whether stored published that its db is out of space (status_stored's
 * db_no_space): this member cannot apply a proposal until there is room,
 * so a new write is refused rather than left to time out. */
bool alarm_db_no_space(struct gw_server *s);
/* The same for a write about to be proposed for call: when the db is out
 * of space, call is answered ResourceExhausted ALARM_NO_SPACE_TEXT (etcd's
 * ErrGRPCNoSpace) and true is returned; nothing is proposed and no alarm
 * is raised (raising one is a proposal this member cannot apply either). */
bool alarm_no_space_refuses(struct gw_server *s, struct grpc_call *call);
/* Maintenance.Snapshot (snapshot.c): registered by maint_register;
 * snapshot_turn queues a bounded step of each stream, with the turn's
 * reads; snapshot_flushed, after the turn's flush, keeps the loop awake
 * while a stream has room for more. */
int snapshot_register(struct gw_server *s);
void snapshot_turn(struct gw_server *s);
void snapshot_flushed(struct gw_server *s);

#endif
