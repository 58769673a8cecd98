/*
 * How a member's Raft state comes to be: a new member creates its WAL as
 * etcd 3.4's startNode does, a restarted one replays it as restartNode
 * does.
 *
 * New: the WAL's metadata record is etcdserverpb.Metadata{NodeID,
 * ClusterID}, and the log starts with etcd's bootstrap entries (raft's
 * Bootstrap): one ConfChange AddNode per member of the initial cluster,
 * in id order, at term 1 and indexes 1..n, its context the member as
 * etcd's JSON ({"id":...,"peerURLs":[...],"name":"..."}), with the hard
 * state {term 1, vote 0, commit n}. Both are durable before the core is
 * built, so they reach the application (stored) as the first committed
 * entries, as in etcd.
 *
 * Joining a running cluster (join.h): the same metadata record with the
 * ids the cluster gave, and nothing else; the leader sends the log.
 *
 * Restart: as etcd's, from the newest .snap file in the snap directory
 * whose point a snapshot record of the WAL names (and whose index the
 * WAL's hard state has committed), when there is one; the hard state and
 * the entries after that point come from the WAL; the member and cluster
 * ids from its metadata record (etcd trusts the WAL over the flags).
 */
#ifndef CETCD_RAFTD_BOOTSTRAP_H
#define CETCD_RAFTD_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"
#include "raftd/wal/snap.h"
#include "raftd/wal/wal.h"

struct initial_cluster;
struct member_info;

struct bootstrap_params {
	const char *wal_dir;
	uint64_t member_id;   /* this member, from the configuration */
	const struct initial_cluster *cluster; /* the initial cluster: the
					        * bootstrap entries and the
					        * cluster id of a new WAL */
	struct wal_options wal; /* handed to wal_create / wal_open (which
				 * take over wal.io, even on failure) */
	const char *snap_dir;   /* member/snap: a restart starts from the
				 * newest .snap file the WAL records; NULL:
				 * from the WAL's start */
	bool force_new_cluster; /* --force-new-cluster: a restart leaves this
				 * member alone in its cluster (forcenew.h) */
	bool join;              /* --initial-cluster-state existing: a new WAL
				 * gets no bootstrap entries (member_id and
				 * cluster->cluster_id are the running
				 * cluster's, join.h) */
};

/* What the member starts from. Owned by the struct; bootstrap_state_free
 * frees what is left in it (fields taken over are set to NULL first). */
struct bootstrap_state {
	struct wal *wal;            /* open for appends */
	struct raft_hardstate hs;
	bool has_snap;              /* restarted from a .snap file: */
	struct snap snap;           /* its point, configuration and v2 store */
	struct raft_entry *entries; /* after the snapshot point; array
				     * and data from raftd_malloc, as raft_new
				     * takes them */
	size_t n_entries;
	struct raftlog_loc *locs;   /* where the first n_locs entries lie in
				     * the WAL (raftd_malloc; raft_set_locs) */
	size_t n_locs;
	uint64_t member_id;         /* the WAL's, or params' when it has none */
	uint64_t cluster_id;
	bool created;               /* this call made the WAL */
};

/*
 * Opens the WAL in p->wal_dir, creating it (with its parent directories)
 * when it holds no segment. Logs what it did, and on failure what went
 * wrong and where (a corrupt WAL names the segment and offset).
 * 0; -EBADMSG (corrupt WAL or metadata), -EBUSY (another process holds
 * the WAL), -EINVAL (the WAL does not continue from the snapshot, or bad
 * parameters), -ENOENT (the WAL does not reach back to its snapshot),
 * -ENOMEM, or the -errno of a file operation.
 */
int bootstrap_open(const struct bootstrap_params *p, struct bootstrap_state *out);

/* Closes the WAL (syncing what is pending) and frees the entries. */
void bootstrap_state_free(struct bootstrap_state *s);

/* The member and cluster ids of the WAL in dir, from the metadata record
 * that starts its last segment (every segment starts with it), without
 * locking or replaying it: what a member serves with once it has a WAL.
 * 0; -ENOENT (no segment, or no metadata record in it), -EBADMSG (not an
 * etcdserverpb.Metadata), -ENOMEM, or the -errno of reading it. */
int bootstrap_wal_ids(const char *dir, uint64_t *member_id, uint64_t *cluster_id);

/* Most bytes of an encoded Metadata. */
#define BOOTSTRAP_METADATA_MAX 22u

/* etcdserverpb.Metadata as etcd encodes it (both fields always written). */
size_t bootstrap_metadata_encode(uint64_t node_id, uint64_t cluster_id,
				 uint8_t buf[BOOTSTRAP_METADATA_MAX]);

/* Decodes a Metadata (unknown fields skipped, as gogo/protobuf does).
 * 0, -EBADMSG, -ENOMEM. */
int bootstrap_metadata_decode(const uint8_t *p, size_t len, uint64_t *node_id,
			      uint64_t *cluster_id);

/* The bootstrap ConfChange (AddNode, the member as etcd's JSON for its
 * context) for m, in *data (raftd_malloc, *len bytes). 0 or -ENOMEM. */
int bootstrap_conf_change(const struct member_info *m, uint8_t **data, uint32_t *len);

#endif
