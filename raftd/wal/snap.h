/*
 * .snap files as etcd 3.4 writes and reads them (etcdserver/api/snap), in
 * the member's snap directory (member/snap/):
 *
 *   %016x-%016x.snap   term, index: a snappb.Snapshot {crc, data}, data a
 *                      marshaled raftpb.Snapshot (its Data the v2 store
 *                      JSON, cluster/v2store.h; its metadata the index,
 *                      term and ConfState), crc the CRC-32C of data
 *   %016x.snap.db      index: a db received from a leader (peer_serve.c)
 *
 * A member restarts from the newest .snap file whose point a snapshot
 * record of its WAL names (etcd's LoadNewestAvailable): the WAL is then
 * read from that record on. A file that fails to decode is renamed
 * <name>.broken and the next older one is tried, as etcd does.
 *
 * Functions return 0 or a negative errno; errors that reach the operator
 * are logged here with the path.
 */
#ifndef CETCD_RAFTD_SNAP_H
#define CETCD_RAFTD_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raft.h"
#include "raftd/wal/wal.h"

/* A snapshot as a .snap file holds it. data is raftd_malloc'ed and owned
 * by the struct (snap_clear frees it). */
struct snap {
	uint64_t index;
	uint64_t term;
	struct raft_conf_state conf;
	uint8_t *data;         /* raftpb.Snapshot.Data: the v2 store JSON */
	size_t len;
};

void snap_clear(struct snap *s);

/* "%016x-%016x.snap" of term and index. */
#define SNAP_NAME_BYTES 40
void snap_name(char out[SNAP_NAME_BYTES], uint64_t term, uint64_t index);

/* The file's bytes (snappb.Snapshot) for s, in *out (raftd_malloc, *len
 * bytes). 0 or -ENOMEM. */
int snap_encode(const struct snap *s, uint8_t **out, size_t *len);

/*
 * A .snap file's bytes into out (data copied). 0; -EBADMSG with *why
 * (a static text) for bytes etcd's Read refuses: not a snappb.Snapshot,
 * empty data or a zero crc ("snap: empty snapshot"), a crc mismatch
 * ("snap: crc mismatch"), data that is not a raftpb.Snapshot, or a
 * ConfState of more than RAFT_MAX_MEMBERS; -ENOMEM.
 */
int snap_decode(const uint8_t *p, size_t len, struct snap *out, const char **why);

/* Writes s to dir/<snap_name> and fsyncs it and dir (a failed write
 * removes the file, as etcd's). */
int snap_save(const char *dir, const struct snap *s);

/*
 * The newest .snap file in dir whose (term, index) is among points[0..n),
 * into out; broken files met on the way are renamed <name>.broken.
 * -ENOENT when there is none (or dir does not exist).
 */
int snap_load_newest(const char *dir, const struct wal_snap *points, size_t n,
		     struct snap *out);

/*
 * etcd's purge of the snap directory: of the files ending in .snap, and
 * of those ending in .snap.db, the oldest (by name) are removed until
 * max of each remain (max 0: none is removed). Returns the number of
 * files removed or -errno.
 */
int snap_purge(const char *dir, unsigned max);

/* Removes the .snap.db files of snapshots older than index (etcd's
 * ReleaseSnapDBs). Returns the number removed or -errno. */
int snap_release_dbs(const char *dir, uint64_t index);

#endif
