/*
 * A consistent copy of the db as a byte stream, read by a process other
 * than stored while stored goes on writing: what raftd sends after a
 * MsgSnap (etcd's merged snapshot: the raft message, then the db) and what
 * Maintenance.Snapshot streams.
 *
 * dbsnap_open registers a read transaction in the region's reader table at
 * the root stored published (invariant 3, docs/invariants.md), so the pages it reaches
 * stay intact until dbsnap_close. The stream is a complete bbolt file that
 * bbolt and etcd open as they open any db: two meta pages naming that
 * root and txid, then the pages up to the published high-water mark. Its
 * meta bucket holds the consistent index dbsnap_index reports.
 *
 * One stream is used by one thread at a time; separate streams may run in
 * separate threads of one process.
 */
#ifndef CETCD_STORED_BTREE_DBSNAP_H
#define CETCD_STORED_BTREE_DBSNAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct shm_region;
struct dbsnap;

/*
 * Opens a stream of the db at db_path (<data-dir>/member/snap/db) at the
 * root stored last published in region r. Returns 0 and *out, -EAGAIN if
 * stored has published nothing yet (or its status is mid-write), -ENOSPC
 * if the reader table is full, or another -errno.
 */
int dbsnap_open(struct shm_region *r, const char *db_path, struct dbsnap **out);

/* Total bytes of the stream. */
uint64_t dbsnap_size(const struct dbsnap *s);

/* The Raft index the copied db has applied (its consistent index). */
uint64_t dbsnap_index(const struct dbsnap *s);

/* Copies the next bytes into buf. Returns how many (0 at the end), or a
 * -errno if the db file could not be read. */
ssize_t dbsnap_read(struct dbsnap *s, void *buf, size_t len);

/* Ends the read transaction and frees the stream. NULL is a no-op. */
void dbsnap_close(struct dbsnap *s);

#endif
