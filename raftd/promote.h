/*
 * MemberPromote as etcd 3.4's server does it (EtcdServer.PromoteMember),
 * on raftd's loop thread:
 *   - on the leader, a learner that caught up (its match at least 90% of
 *     the leader's) is promoted by proposing a ConfChange (AddNode with
 *     "isPromote"); otherwise etcd's errors;
 *   - on a follower, the call is forwarded to the leader over the peer
 *     port (POST /members/promote/<id>, peer_promote_forward) and the
 *     leader's answer relayed, as etcd's promoteMemberHTTP does (while
 *     no leader is known, the call waits for one, up to the request
 *     timeout);
 *   - a peer's POST /members/promote/<id> (PEER_EV_PROMOTE) is served the
 *     same way: checked and proposed on the leader and answered with the
 *     members once applied, forwarded on from a follower.
 * A gateway's call that this leader proposed is answered by stored once
 * applied (the origin rides on the entry); the others are answered here.
 */
#ifndef CETCD_RAFTD_PROMOTE_H
#define CETCD_RAFTD_PROMOTE_H

#include <stddef.h>
#include <stdint.h>

struct membership;
struct roster;
struct msg_promote;
struct peer;
struct peer_event;
struct proposals;
struct raft;
struct shm_region;

/* What the loop lends for one call. */
struct promote_env {
	struct raft *raft;
	struct roster *roster;       /* the membership and request ids */
	struct proposals *props;     /* answers to gateways */
	struct peer *peer;           /* NULL: no peers, nothing to forward */
	struct shm_region *region;   /* stored's status (the revision); may be NULL */
	uint64_t member_id;
	uint64_t cluster_id;
	uint64_t tick_ms;
};

struct promote_wait;

/* The promotions waiting; zeroed to start, promote_free at the end. */
struct promotes {
	struct promote_wait *v;
	size_t n;
	size_t cap;
	uint64_t seq;                /* tokens of forwarded promotions */
};

/* A gateway's MSG_PROMOTE from slot. */
void promote_gateway(struct promotes *ps, const struct promote_env *e, uint32_t slot,
		     const struct msg_promote *req);

/* A peer's POST /members/promote/<id> (PEER_EV_PROMOTE). */
void promote_peer_request(struct promotes *ps, const struct promote_env *e, uint64_t id,
			  uint64_t serve_token);

/* A forwarded promotion ended (PEER_EV_PROMOTE_DONE). */
void promote_forward_done(struct promotes *ps, const struct promote_env *e,
			  const struct peer_event *ev);

/* Learner node_id's promotion was applied. */
void promote_applied(struct promotes *ps, const struct promote_env *e, uint64_t node_id);

/* One tick passed: promotions over etcd's request timeout end with its
 * timeout error. */
void promote_tick(struct promotes *ps, const struct promote_env *e);

void promote_free(struct promotes *ps);

#endif
