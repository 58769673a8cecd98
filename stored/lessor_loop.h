/*
 * The lessor's part of stored's loop: the requests of the gateways on
 * their SHM_SLOT_TO_STORED rings (attach hellos, and MSG_KEEPALIVE:
 * renewals, remaining times, lease lists, answered on the slot's result
 * ring), and the leader's timekeeping: it follows raftd's published
 * leadership (promoting the lessor in each new term it leads), and every
 * 500 ms proposes revokes of expired leases (LESSOR_REVOKE_BATCH at most)
 * and due checkpoints through SHM_RING_STORED_PROPOSALS, each carrying the
 * term (invariant 8, docs/invariants.md; raftd drops it in any other term, and the
 * lessor asks again after its retry interval).
 */
#ifndef CETCD_STORED_LESSOR_LOOP_H
#define CETCD_STORED_LESSOR_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/region.h"
#include "stored/btree/arena.h"
#include "stored/lessor.h"
#include "stored/results.h"

struct ring_rec;

/* How often the leader looks for expired leases (etcd's runLoop). */
#define LESSOR_TICK_NS 500000000LL

struct stored_auth_check;

/* Keepalives that wait for an expired lease's revoke, at most. */
#define LESSOR_WAITERS_MAX 256
/* How long a keepalive waits at most when lessor_loop.waiter_life_ns is
 * 0: etcd's request timeout with its default election timeout (5 s + 2 *
 * 1 s), gatewayd's (config_request_timeout_ms). */
#define LESSOR_WAITER_LIFE_NS 7000000000LL

/* A keepalive of a lease that expired and waits for its revoke
 * (LESSOR_ERR_EXPIRED). */
struct lessor_waiter {
	struct msg_origin origin;
	int64_t id;
	uint64_t term;  /* the lessor's term when it was parked: only the
			 * primary of that term revokes the lease for it */
	int64_t parked_ns; /* when it was parked */
};

struct lessor_loop {
	struct shm_region *r;
	struct lessor *lessor;          /* not owned */
	struct stored_results *results; /* not owned */
	uint64_t member_id, cluster_id;
	int64_t tick_ns;                /* time of the last tick */
	uint64_t proposal_id;           /* request ids of own proposals */
	struct arena arena;
	/* Takes the slots' records that are not the lessor's (MSG_DEFRAG, to
	 * the apply loop); NULL: they are dropped. */
	void (*other)(void *arg, uint32_t slot, const struct ring_rec *rec);
	void *other_arg;
	/* The auth store's state, for the header of the revokes of expired
	 * leases (stored/auth_check.h); NULL: no user in it. */
	const struct stored_auth_check *auth;
	/* Answered as etcd's Renew answers once it stops waiting: TTL 0 once
	 * the lease is gone, "not leader" once the lessor is demoted or has
	 * moved to another term (a new term's promotion extended the lease,
	 * so no revoke comes for the waiter). Past
	 * LESSOR_WAITERS_MAX, a keepalive is answered TTL 0 at once.
	 * A waiter does not outlive its request (invariant 2,
	 * docs/invariants.md): one whose slot was claimed again (a new
	 * generation) is dropped, and one that waited waiter_life_ns, after
	 * which its gateway has answered the client "request timed out", is
	 * answered so too, so that stale ones do not fill the table. */
	struct lessor_waiter waiters[LESSOR_WAITERS_MAX];
	size_t nwaiters;
	int64_t waiter_life_ns;         /* gatewayd's request timeout; 0:
					 * LESSOR_WAITER_LIFE_NS */
	/* Tests only: the monotonic clock, in ns; NULL: clock_now_ns. */
	int64_t (*clock)(void);
};

void lessor_loop_init(struct lessor_loop *ll, struct shm_region *r, struct lessor *l,
		      struct stored_results *results, uint64_t member_id, uint64_t cluster_id);
void lessor_loop_fini(struct lessor_loop *ll);

/* Serves the slots' requests (revision: the store's, for headers), and
 * hands `other` those that are not the lessor's. */
void lessor_loop_requests(struct lessor_loop *ll, int64_t revision);

/* Follows raftd's leadership, and when a tick is due proposes revokes and
 * checkpoints. */
void lessor_loop_tick(struct lessor_loop *ll);

/* Milliseconds until the next tick that has work, or -1: none. */
int lessor_loop_timeout_ms(const struct lessor_loop *ll);

/* Loads the lessor from db (its lease bucket, and which live key holds
 * which lease) after the store opened it. 0 or an error. */
int lessor_loop_load(struct lessor *l, struct mvcc_store *s);

#endif
