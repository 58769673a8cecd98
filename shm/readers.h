/*
 * Reader table, after LMDB's: every process that reads the db from its
 * mapping owns reader entries and records in them the transaction id it
 * reads at. stored never reuses a page freed after the oldest live
 * reader's transaction.
 *
 * An entry is owned through an OFD lock on a byte of the region file, so
 * the entries of a dead process are known for certain and reaped
 * (readers_reap); pids are never consulted.
 */
#ifndef CETCD_SHM_READERS_H
#define CETCD_SHM_READERS_H

#include <stdint.h>

#include "shm/status.h"

struct shm_region;

/* txid of an entry that reads nothing; also readers_oldest with no reader. */
#define READERS_IDLE UINT64_MAX

/* Number of entries in the region's table. */
uint32_t readers_count(struct shm_region *r);

/* Takes a free entry (lock held until readers_release or detach). Returns
 * 0, -ENOSPC, or another -errno from fcntl. */
int readers_claim(struct shm_region *r, uint32_t *out_index);
void readers_release(struct shm_region *r, uint32_t index);

/*
 * Starts a read transaction on the entry: registers the txid of stored's
 * published record (write it into the entry, full fence, re-read the
 * record, retry if it changed) and returns that record in *out. The pages
 * reachable from out->root_page stay intact until readers_end.
 * Returns 0, -EINVAL if this handle does not own the entry, or -EAGAIN
 * (status_stored_read).
 */
int readers_begin(struct shm_region *r, uint32_t index,
		  struct status_stored *out);
void readers_end(struct shm_region *r, uint32_t index);

/* The txid an entry reads at, READERS_IDLE if none. */
uint64_t readers_txid(struct shm_region *r, uint32_t index);

/*
 * Oldest txid any entry reads at (READERS_IDLE if none). For stored: call
 * it after publishing a new record; it issues the full fence the
 * registration protocol pairs with. Entries of dead processes count until
 * reaped.
 */
uint64_t readers_oldest(struct shm_region *r);

/* Clears the entries whose owner is dead (by OFD lock). Returns how many
 * were cleared, or a -errno from fcntl. */
int readers_reap(struct shm_region *r);

#endif
