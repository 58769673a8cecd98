/*
 * raftd's peer transport: etcd 3.4's rafthttp, so that cetcd and etcd
 * members form one cluster.
 *
 * Served on the peer URLs (http, https, unix, unixs):
 *   GET  /raft/stream/msgapp/<from>    a long-lived stream of MsgApp to
 *                                      that peer, msgappv2 coded
 *                                      (msgappv2.h; etcd's endpoint
 *                                      keeps the old name)
 *   GET  /raft/stream/message/<from>   a long-lived stream of the other
 *                                      messages to that peer (msgframe.h)
 *   POST /raft                         one message (the pipeline)
 *   POST /raft/snapshot                a MsgSnap and the db file after it
 *   GET  /raft/probing                 liveness probe
 *   GET  /version                      {"etcdserver":..,"etcdcluster":..}
 *   GET  /members                      the members as etcd's JSON array
 * with etcd's headers (X-Etcd-Cluster-ID, X-Server-From, X-Server-Version,
 * X-Min-Cluster-Version, X-Raft-To, X-PeerURLs) and its checks (a cluster
 * id mismatch, a removed member, a request for another member), answered
 * with etcd's status codes and texts.
 *
 * Dialed: to each peer, the two streams (the peer writes the messages it
 * has for this member on them), reconnected with backoff; messages to a
 * peer go on its stream from this member when that peer has dialed it,
 * MsgApp on msgappv2, others on message, and otherwise through the
 * pipeline.
 *
 * Threads: raftd's loop thread drives the transport (peer_opts.driven):
 * it polls the sockets when peer_poll_fd is readable (peer_poll), takes
 * what arrived with peer_recv, queues messages with peer_send (never
 * blocks: a full queue drops the message and reports the peer
 * unreachable, as etcd does) and writes them out, with the transport's
 * timers, at the end of its turn (peer_run). Nothing the transport does
 * there waits long: sockets are non-blocking, a peer's host name is
 * looked up on a resolver thread (addresses need no lookup), a received
 * snapshot's db file is made durable on a thread of its own, and a
 * snapshot's db file is read 256 KiB at a time as its socket drains
 * (from the page cache, where stored keeps it). Without
 * driven, the transport runs the same turns on a thread of its own and
 * peer_event_fd tells when events wait. Lease and promote forwarding run
 * on threads of their own either way.
 *
 * All functions return 0 or a negative errno unless said otherwise.
 */
#ifndef CETCD_RAFTD_PEER_H
#define CETCD_RAFTD_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftmsg.h"

struct config_urls;
struct tls_ctx;

struct peer_opts {
	uint64_t self_id;
	uint64_t cluster_id;
	const struct config_urls *listen;   /* --listen-peer-urls, bound here */
	const char *const *self_urls;       /* this member's advertised peer
					     * URLs (X-PeerURLs) */
	size_t n_self_urls;
	struct tls_ctx *server_tls;         /* for https/unixs listeners; NULL
					     * without peer TLS */
	struct tls_ctx *client_tls;         /* for dialing https/unixs peers */
	const char *server_version;         /* "3.4.0" */
	const char *min_cluster_version;    /* "3.0.0" */
	size_t queue_msgs;                  /* per peer; 0 = etcd's 4096 */
	size_t queue_bytes;                 /* per stream of a peer; 0 =
					     * PEER_STREAM_QUEUE_BYTES */
	const char *snap_dir;               /* where a received snapshot's db
					     * file is written (member/snap);
					     * NULL: snapshots are refused */
	const char *data_dir;               /* with gateways: HTTP/2 (gRPC) and
					     * GET /members/hashkv on the peer
					     * port go to this member's gatewayds
					     * (peer_grpc.c); NULL: not served */
	uint32_t gateways;                  /* gatewayd instances (--gateways) */
	bool driven;                        /* no thread of the transport's own:
					     * the caller's thread drives it
					     * with peer_poll and peer_run */
};

/* A peer to talk to. */
struct peer_member {
	uint64_t id;
	const char *const *urls;            /* its peer URLs */
	size_t n_urls;
};

/* What peer_recv hands over. */
enum peer_event_kind {
	PEER_EV_MESSAGE = 1,     /* msg: a message for this member */
	PEER_EV_UNREACHABLE,     /* id: a message to it could not be sent */
	PEER_EV_SNAPSHOT_DONE,   /* id, ok: a snapshot send ended */
	PEER_EV_REMOVED,         /* a peer answered that this member was
				  * removed from the cluster */
	PEER_EV_PROMOTE,         /* a peer's POST /members/promote/<id>: id
				  * the learner; answer it with
				  * peer_promote_answer(token) */
	PEER_EV_PROMOTE_DONE,    /* a peer_promote_forward ended: token as
				  * given, status the leader's HTTP status
				  * (or a negative errno: no answer), buf
				  * its body (len bytes, NUL-terminated) */
	PEER_EV_LEASE_DONE,      /* a peer_lease_forward ended: as
				  * PEER_EV_PROMOTE_DONE */
	PEER_EV_DOWN,            /* id: every URL of that peer refused a
				  * connection since its streams were last
				  * up (its process is gone); once until
				  * they are up again */
};

struct peer_event {
	enum peer_event_kind kind;
	uint64_t id;
	bool ok;
	struct raftmsg msg;      /* PEER_EV_MESSAGE: decoded, pointing into
				  * buf */
	uint8_t *buf;            /* owned by the event */
	/* PEER_EV_MESSAGE of type MsgSnap: the db file received after it,
	 * written to this path (owned by the event; the receiver renames it
	 * into place), or NULL */
	char *snap_db_path;
	uint64_t token;          /* PEER_EV_PROMOTE, PEER_EV_PROMOTE_DONE */
	int status;              /* PEER_EV_PROMOTE_DONE */
	size_t len;              /* PEER_EV_PROMOTE_DONE: bytes of buf */
};

struct peer;

/* Binds the listeners and starts the transport. -EADDRINUSE and the like
 * for a listener (logged with the address), -ENOMEM. */
int peer_start(const struct peer_opts *o, struct peer **out);

/* Stops every thread, closes every connection and frees p. NULL is fine. */
void peer_stop(struct peer *p);

/* The peers to talk to (this member not among them), replacing the last
 * set: new ones are dialed, gone ones dropped. removed: members removed
 * from the cluster, answered "removed member" when they call. */
int peer_set_members(struct peer *p, const struct peer_member *v, size_t n,
		     const uint64_t *removed, size_t n_removed);

/* The JSON GET /members answers (etcd's []Member as json.Marshal writes
 * it); copied. */
int peer_set_members_json(struct peer *p, const char *json, size_t len);

/* Queues m (encoded here; m's bytes are not kept) for its recipient m->to.
 * -ENOENT for an unknown peer; a full queue drops it (0 is returned and
 * PEER_EV_UNREACHABLE follows). */
int peer_send(struct peer *p, const struct raftmsg *m);

/*
 * Driving the transport (peer_opts.driven), all on one thread:
 * peer_poll_fd is readable (level-triggered) while socket events or
 * wake-ups from other threads wait; peer_poll handles them without
 * waiting. peer_run does the transport's work when it is due (after a
 * poll, a peer_send or other queued work, or when a timer expires):
 * queued messages are written out, streams dialed, heartbeats sent,
 * stalled connections closed; it returns the milliseconds until it is
 * due again (0: at once, -1: only when something happens), which the
 * caller's wait must not exceed. Events queued on this thread are
 * signaled on peer_event_fd by peer_run unless peer_recv took them
 * before.
 */
int peer_poll_fd(const struct peer *p);
void peer_poll(struct peer *p);
int peer_run(struct peer *p);

/* Sends a MsgSnap m followed by the db file at db_path (a file the
 * transport may read until the send ends; PEER_EV_SNAPSHOT_DONE says how
 * it ended). */
int peer_send_snapshot(struct peer *p, const struct raftmsg *m, const char *db_path);

/* As peer_send_snapshot, the db read from ds (a consistent copy of
 * stored's db, stored/btree/dbsnap.h) on the thread that drives the
 * transport; ds is taken over and closed when the send ends, or at once
 * on failure. */
struct dbsnap;
int peer_send_snapshot_db(struct peer *p, const struct raftmsg *m, struct dbsnap *ds);

/* The cluster version GET /version reports ("3.4.0"); copied. Until it
 * is set, "not_decided", as etcd answers before the cluster agrees. */
int peer_set_cluster_version(struct peer *p, const char *version);

/* The port listener i (in --listen-peer-urls order) is bound to, so that
 * a URL with port 0 can be told to others; 0 for a unix socket or an
 * index out of range. */
uint16_t peer_listen_port(const struct peer *p, size_t i);

/*
 * Answers the peer's POST /members/promote/<id> of PEER_EV_PROMOTE token
 * (etcd's peerMemberPromoteHandler): status, Content-Type and body as
 * etcd writes them; the transport adds its headers (X-Etcd-Cluster-ID).
 * An answer to a request whose connection is gone is dropped. 0 or
 * -ENOMEM. (raftd/peer/peer_promote.c)
 */
int peer_promote_answer(struct peer *p, uint64_t token, int status, const char *ctype,
			const char *body, size_t len);

/*
 * Forwards a promotion to the leader, as etcd's promoteMemberHTTP: POST
 * /members/promote/<member_id> to each of its peer URLs in turn until
 * one answers, within timeout_ms in all, on a thread of its own; then
 * PEER_EV_PROMOTE_DONE with token. 0, -ENOMEM or -EAGAIN (a thread could
 * not be started).
 */
int peer_promote_forward(struct peer *p, const char *const *urls, size_t n, uint64_t member_id,
			 uint64_t token, int timeout_ms);

/*
 * Asks the leader to renew a lease or tell its remaining time, as etcd's
 * leasehttp client: POST /leases or /leases/internal with r's body to
 * the leader's peer URLs (the first that answers), over a pool of
 * keep-alive connections that a forwarding thread drives, giving up
 * after timeout_ms; then PEER_EV_LEASE_DONE with token. urls are copied.
 * 0, -ENOMEM, -EAGAIN (the thread could not be started).
 * (raftd/peer/peer_lease.c)
 */
struct leasehttp_req;
int peer_lease_forward(struct peer *p, const char *const *urls, size_t n,
		       const struct leasehttp_req *r, uint64_t token, int timeout_ms);

/* Gives up the peer_lease_forward of token: no PEER_EV_LEASE_DONE comes
 * for it (its connection, if it was sent, is closed). */
void peer_lease_cancel(struct peer *p, uint64_t token);

/* Readable (level-triggered) while events wait that peer_recv has not
 * taken yet. */
int peer_event_fd(const struct peer *p);

/* Takes the next event: 0, or -EAGAIN when none waits. The first call
 * takes every waiting event at once and the next ones hand them out, so
 * events may be left taken and not handed out yet: peer_has_events. */
int peer_recv(struct peer *p, struct peer_event *ev);

/* Whether peer_recv holds taken events (event_fd says nothing of them). */
bool peer_has_events(const struct peer *p);

/* Frees what an event owns. */
void peer_event_release(struct peer_event *ev);

/* Since when peer id is active (CLOCK_MONOTONIC ns; 0 when not): etcd's
 * ActiveSince, for the --strict-reconfig-check health checks. As etcd's
 * peerStatus, a peer becomes active when a stream to or from it is
 * connected or a pipeline post succeeds, and inactive when a send or a
 * stream fails. */
uint64_t peer_active_since(struct peer *p, uint64_t id);

#endif
