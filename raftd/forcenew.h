/*
 * --force-new-cluster on a restart, as etcd 3.4's restartAsStandaloneNode:
 * the member keeps its data and becomes the only member of its cluster.
 *
 * The uncommitted tail of the log is dropped, and ConfChange entries are
 * appended at the hard state's term right after its commit index: an
 * AddNode for this member if the log does not already make it one, then a
 * RemoveNode for every other member the snapshot's voters and the log's
 * conf changes name, in id order (etcd's getIDs and
 * createConfigChangeEnts). The caller saves the appended entries to the
 * WAL and treats them as committed; raftd and stored then apply them as
 * any conf change.
 */
#ifndef CETCD_RAFTD_FORCENEW_H
#define CETCD_RAFTD_FORCENEW_H

#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"

struct forcenew_result {
	size_t n_dropped;   /* uncommitted entries dropped */
	size_t first_added; /* index into the entries of the first appended one */
	size_t n_added;     /* entries appended */
};

/*
 * Rewrites *ents (*n of them, array and data from raftd_malloc, the
 * entries after the snapshot point, in index order) for self. snap_voters
 * are the voters of the snapshot the log starts from (none for a log from
 * the start). hs->commit becomes the index of the last entry.
 * Returns 0, -EBADMSG when a conf change entry of the log does not decode
 * (nothing changed), or -ENOMEM (nothing changed).
 */
int forcenew_apply(uint64_t self, const uint64_t *snap_voters, size_t n_snap_voters,
		   uint64_t snap_index, struct raft_hardstate *hs, struct raft_entry **ents,
		   size_t *n, struct forcenew_result *res);

#endif
