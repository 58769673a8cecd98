/*
 * raftd's roster: the membership raftd serves from (its peers, the Raft
 * configuration, GET /members), beside cluster/membership.h (the state
 * machine it applies) and stored/membership_db.h (stored's copy in the
 * db). It applies every committed entry to the membership state as it
 * hands the entry to stored, logs the changes with etcd's wording, and
 * proposes, as etcd 3.4's server does:
 *
 *   publish   this member's attributes (name, client URLs) as a v2 PUT
 *             of /0/members/<id>/attributes, once per start, retried
 *             after a request timeout until it is committed; once
 *             stored applied it, "published local member to cluster
 *             through raft";
 *   version   on the leader, once an entry of its term committed and
 *             while the cluster has no version: the lowest server version
 *             of the members (major.minor), as a v2 PUT of /0/version;
 *             applying it logs "set initial cluster version" and
 *             "enabled capabilities for version".
 *
 * Tooling (etcd's own e2e harness among it) waits for those two lines
 * before it talks to a member.
 */
#ifndef CETCD_RAFTD_ROSTER_H
#define CETCD_RAFTD_ROSTER_H

#include <stdbool.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"
#include "cluster/membership.h"

struct raft;
struct config_urls;

struct roster {
	struct membership ms;
	uint64_t self_id;
	uint64_t cluster_id;
	struct member_info attr;      /* what this member publishes */
	uint64_t timeout_ticks;       /* etcd's request timeout, in ticks */
	uint64_t req_next;            /* request ids, etcd's idutil layout */
	/* publish: pending while publish_req != 0 */
	bool published;
	uint64_t publish_req;
	uint64_t publish_index;       /* where the publish committed; logged
				       * once stored applied it (0: not yet
				       * committed, or logged) */
	uint64_t publish_age;         /* ticks since it was proposed */
	uint64_t publish_timeout_ms;
	/* the cluster version proposal */
	uint64_t version_req;
	uint64_t version_age;
};

/*
 * Sets m up for member self_id of cluster_id, publishing name and the
 * client URLs; timeout_ms is etcd's request timeout and tick_ms the tick.
 * 0 or -ENOMEM.
 */
int roster_init(struct roster *m, uint64_t self_id, uint64_t cluster_id, const char *name,
		const struct config_urls *client_urls, uint64_t timeout_ms, uint64_t tick_ms);

void roster_free(struct roster *m);

/* m->ms was just recovered from a snapshot's v2 store (at a restart, or
 * from the leader): logs what etcd's cluster.Recover logs, the cluster
 * version set from the store and the capabilities it enables. */
void roster_recovered(struct roster *m);

/* Applies a committed entry (logged as etcd logs it), saying in *res
 * (may be NULL) what it did. A conf change that cannot be decoded is
 * logged and skipped (res->change MEMBERSHIP_NONE). Returns 0 or
 * -ENOMEM. */
int roster_apply(struct roster *m, const struct raft_entry *e, struct membership_result *res);

/* stored applied up to index: logs the publish once it is applied, as
 * etcd logs it once its request returns (tooling that waits for the line
 * then finds the member's attributes in the db). True at that moment. */
bool roster_stored_applied(struct roster *m, uint64_t index);

/* One tick: ages pending proposals. */
void roster_tick(struct roster *m);

/* How a follower hands a proposal to the leader (proposals.h's forward);
 * NULL: only a leader proposes. */
typedef int (*roster_forward_fn)(void *arg, uint64_t leader, const struct raft_entry *ents,
				 size_t n);

/* Proposes what is due (see above) through r, or on a follower through
 * forward. Never fails the caller: a proposal refused now is tried again
 * on a later call. */
void roster_propose(struct roster *m, struct raft *r, roster_forward_fn forward,
		    void *forward_arg);

/* The members as etcd's JSON array (json.Marshal of []*Member: a peer's
 * GET /members and a promotion's answer), in *out (raftd_malloc, *len
 * bytes, with room for one more byte after them). 0 or -ENOMEM. */
int roster_json(const struct membership *ms, char **out, size_t *len);

#endif
