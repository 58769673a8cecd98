/*
 * Lease renewals and remaining times asked at a follower, as etcd 3.4's
 * EtcdServer.LeaseRenew and LeaseTimeToLive do them: only the leader's
 * lessor knows when a lease expires, so a follower's gateway hands the
 * call to raftd (MSG_LEASE_FORWARD), which asks the leader over the peer
 * port (POST /leases or /leases/internal, peer_lease_forward) and answers
 * the gateway with the leader's response under this member's header.
 *
 * As etcd does, the call is tried again, with whoever leads then, until
 * the request timeout: while no leader is known, and after an answer
 * other than 200 or 404 (the leader's lessor not primary yet, a leader
 * that lost its term, no answer at all). An unknown lease is answered as
 * etcd's v3rpc answers it (a renewal's TTL 0, a remaining time's TTL -1).
 * When another leader becomes known, requests in flight to the old one
 * are given up and asked of the new one at once.
 * Runs on raftd's loop thread.
 */
#ifndef CETCD_RAFTD_LEASE_FWD_H
#define CETCD_RAFTD_LEASE_FWD_H

#include <stddef.h>
#include <stdint.h>

struct msg_keepalive;
struct peer_event;
struct promote_env;

struct lease_fwd_wait;

/* Requests in flight to the leader at once (each on a keep-alive
 * connection of the peer module's until it ends, at most the request
 * timeout): the others wait their turn, as etcd's HTTP client queues for
 * a connection. */
#define LEASE_FWD_MAX_FLIGHT 16
/* Calls waiting at once, in flight or not; past it a call is refused
 * with etcd's "etcdserver: too many requests". */
#define LEASE_FWD_MAX_WAITING 4096

/* The calls waiting; zeroed to start, lease_fwd_free at the end. */
struct lease_fwds {
	struct lease_fwd_wait *v;
	size_t n;
	size_t cap;
	uint64_t seq;                /* tokens of requests in flight */
	size_t flight;               /* entries with a token; <= LEASE_FWD_MAX_FLIGHT */
	uint64_t leader;             /* the leader last known (0: none yet) */
};

/* A gateway's MSG_LEASE_FORWARD from slot. */
void lease_fwd_gateway(struct lease_fwds *ls, const struct promote_env *e, uint32_t slot,
		       const struct msg_keepalive *m);

/* A forwarded request ended (PEER_EV_LEASE_DONE). */
void lease_fwd_done(struct lease_fwds *ls, const struct promote_env *e,
		    const struct peer_event *ev);

/* Once a tick: calls waiting to be tried again are, or end in a timeout. */
void lease_fwd_tick(struct lease_fwds *ls, const struct promote_env *e);

void lease_fwd_free(struct lease_fwds *ls);

#endif
