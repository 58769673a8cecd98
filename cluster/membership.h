/*
 * The cluster's membership as committed entries change it, applied as
 * etcd 3.4's server applies them (etcdserver/api/membership), so that
 * raftd (peers, the Raft configuration, the log lines tooling waits for)
 * and stored (the members, members_removed and cluster buckets) reach the
 * same state from the same entries:
 *
 *   EntryConfChange  raftpb.ConfChange: AddNode (a new member, or with
 *                    "isPromote" a learner promoted), AddLearnerNode,
 *                    RemoveNode, UpdateNode (new peer URLs), its context
 *                    the member as etcd's JSON. A change etcd's
 *                    ValidateConfigurationChange refuses is refused here
 *                    with the same error and changes nothing.
 *   EntryNormal      etcd's v2 requests, raw (as etcd 3.4 proposes them)
 *                    or in an InternalRaftRequest: "PUT
 *                    /0/members/<id>/attributes" (a member publishes its
 *                    name and client URLs) and "PUT /0/version" (the
 *                    cluster version). Other entries are not membership's.
 *
 * The state is plain memory; its owner persists it where it belongs.
 */
#ifndef CETCD_CLUSTER_MEMBERSHIP_H
#define CETCD_CLUSTER_MEMBERSHIP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/member.h"

/* raftpb.ConfChangeType */
enum membership_cc_type {
	MEMBERSHIP_CC_ADD_NODE = 0,
	MEMBERSHIP_CC_REMOVE_NODE = 1,
	MEMBERSHIP_CC_UPDATE_NODE = 2,
	MEMBERSHIP_CC_ADD_LEARNER_NODE = 3,
};

/* What one entry did. */
enum membership_change {
	MEMBERSHIP_NONE = 0,    /* not a membership entry */
	MEMBERSHIP_ADDED,       /* member joined (a voter or a learner) */
	MEMBERSHIP_PROMOTED,    /* a learner became a voter */
	MEMBERSHIP_REMOVED,
	MEMBERSHIP_UPDATED,     /* new peer URLs */
	MEMBERSHIP_ATTRIBUTES,  /* a member published its name and client URLs */
	MEMBERSHIP_VERSION,     /* the cluster version was set */
	MEMBERSHIP_REFUSED,     /* a conf change refused: error says why */
	MEMBERSHIP_IGNORED,     /* a v2 request of no effect here (logged) */
};

/* etcd's membership errors (the texts are membership_error_text's). */
enum membership_error {
	MEMBERSHIP_OK = 0,
	MEMBERSHIP_ERR_ID_REMOVED,
	MEMBERSHIP_ERR_ID_EXISTS,
	MEMBERSHIP_ERR_ID_NOT_FOUND,
	MEMBERSHIP_ERR_PEER_URL_EXISTS,
	MEMBERSHIP_ERR_NOT_LEARNER,
	MEMBERSHIP_ERR_TOO_MANY_LEARNERS,
};

/* "membership: ID removed", ... ("" for MEMBERSHIP_OK). */
const char *membership_error_text(enum membership_error e);

struct membership {
	struct member_info *v;  /* current members, ascending id */
	size_t count;
	uint64_t *removed;      /* removed ids, ascending */
	size_t n_removed;
	bool has_version;
	unsigned version_major; /* the cluster version, major.minor */
	unsigned version_minor;
};

/* The outcome of membership_apply. Pointers stay valid until the next
 * call that changes m. */
struct membership_result {
	enum membership_change change;
	enum membership_error error;      /* MEMBERSHIP_REFUSED */
	uint64_t node_id;                 /* the member concerned */
	enum membership_cc_type cc_type;  /* conf changes */
	uint64_t cc_id;                   /* ConfChange.ID */
	uint64_t request_id;              /* a v2 request's ID */
	const struct member_info *member; /* its state after the change (not
					   * for REMOVED/REFUSED/VERSION) */
};

void membership_init(struct membership *m);
void membership_free(struct membership *m);

/* The member with this id, or NULL. */
const struct member_info *membership_find(const struct membership *m, uint64_t id);
bool membership_is_removed(const struct membership *m, uint64_t id);

/* Puts a member (a copy) in place, as loaded from storage. 0, -ENOMEM. */
int membership_put(struct membership *m, const struct member_info *mi);
/* Records id as removed (as loaded from storage). 0, -ENOMEM. */
int membership_mark_removed(struct membership *m, uint64_t id);
/* Sets the version from "3.4.0"-like text. 0, -EINVAL. */
int membership_set_version(struct membership *m, const char *text, size_t len);

/*
 * Applies a committed entry (etcd's EntryNormal = 0, EntryConfChange = 1)
 * with data[0..len). Returns 0 with *out filled (MEMBERSHIP_NONE for
 * entries of no concern to membership), -EBADMSG for a conf change that
 * cannot be decoded (etcd panics there; the caller logs and skips it),
 * or -ENOMEM (m unchanged).
 */
int membership_apply(struct membership *m, uint32_t entry_type, const uint8_t *data, size_t len,
		     struct membership_result *out);

/* The path of a member's attributes in etcd's v2 store:
 * "/0/members/<id in hex>/attributes". */
void membership_attributes_path(uint64_t id, char out[48]);

/*
 * etcd's raw v2 PUT request (etcdserverpb.Request as etcd 3.4 proposes
 * one: ID, Method, Path, Val and the always-written zero fields) into
 * *out (malloc'ed, *len bytes). 0 or -ENOMEM.
 */
int membership_v2_put(uint64_t request_id, const char *path, const char *val, uint8_t **out,
		      size_t *len);

#endif
