/*
 * Reader table (see readers.h).
 *
 * Registration follows LMDB: a reader stores the txid it is about to read
 * at into its entry, issues a full fence, and re-reads stored's published
 * record; if the txid changed in between it tries again. stored publishes a
 * new record, then (readers_oldest) issues a full fence and scans the
 * entries. By the Dekker argument in barrier.h, either stored's scan sees
 * the reader's txid, or the reader's re-read sees the newer record and
 * retries: stored never frees pages a registered reader still uses.
 *
 * Ownership of an entry is an OFD lock on its byte of the region file. To
 * reap an entry, the reaper takes that same lock (non-blocking): holding it
 * proves the owner is dead, and keeps a new owner out while the entry is
 * cleared.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "shm/barrier.h"
#include "shm/layout.h"
#include "shm/readers.h"

uint32_t readers_count(struct shm_region *r)
{
	return r->hdr->reader_count;
}

int readers_claim(struct shm_region *r, uint32_t *out_index)
{
	struct shm_reader_entry *e;
	uint32_t j;
	int rc;

	for (j = 0; j < r->hdr->reader_count; j++) {
		if (r->reader_held[j])
			continue;
		rc = ofdlock_try(r->fd, SHM_LOCK_READER(r->hdr, j));
		if (rc == -EBUSY)
			continue;
		if (rc)
			return shm_set_error(rc, "readers: cannot lock entry %u: %s", j,
					     strerror(-rc));
		e = shm_reader_at(r, j);
		atomic_store_explicit(&e->txid, READERS_IDLE,
				      memory_order_relaxed);
		atomic_store_explicit(&e->holder_pid, (int32_t)getpid(),
				      memory_order_relaxed);
		r->reader_held[j] = true;
		*out_index = j;
		return 0;
	}
	return shm_set_error(-ENOSPC, "readers: all %u reader entries are held by live "
			     "processes", r->hdr->reader_count);
}

void readers_release(struct shm_region *r, uint32_t index)
{
	struct shm_reader_entry *e;

	if (index >= r->hdr->reader_count || !r->reader_held[index])
		return;
	e = shm_reader_at(r, index);
	atomic_store_explicit(&e->txid, READERS_IDLE, memory_order_release);
	atomic_store_explicit(&e->holder_pid, 0, memory_order_relaxed);
	r->reader_held[index] = false;
	ofdlock_release(r->fd, SHM_LOCK_READER(r->hdr, index));
}

int readers_begin(struct shm_region *r, uint32_t index,
		  struct status_stored *out)
{
	struct shm_reader_entry *e;
	struct status_stored again;
	int rc;

	if (index >= r->hdr->reader_count || !r->reader_held[index])
		return -EINVAL;
	e = shm_reader_at(r, index);
	rc = status_stored_read(r, out);
	for (; rc == 0; *out = again) {
		atomic_store_explicit(&e->txid, out->txid,
				      memory_order_relaxed);
		shm_full_fence();
		rc = status_stored_read(r, &again);
		if (rc == 0 && again.txid == out->txid &&
		    again.root_page == out->root_page &&
		    again.db_generation == out->db_generation) {
			*out = again;
			return 0;
		}
	}
	atomic_store_explicit(&e->txid, READERS_IDLE, memory_order_release);
	return rc;
}

void readers_end(struct shm_region *r, uint32_t index)
{
	if (index >= r->hdr->reader_count || !r->reader_held[index])
		return;
	/* Release: the reads of the transaction happen before the pages
	 * may be reused. */
	atomic_store_explicit(&shm_reader_at(r, index)->txid, READERS_IDLE,
			      memory_order_release);
}

uint64_t readers_txid(struct shm_region *r, uint32_t index)
{
	if (index >= r->hdr->reader_count)
		return READERS_IDLE;
	return atomic_load_explicit(&shm_reader_at(r, index)->txid,
				    memory_order_acquire);
}

uint64_t readers_oldest(struct shm_region *r)
{
	uint64_t oldest = READERS_IDLE, t;
	uint32_t j;

	shm_full_fence();
	for (j = 0; j < r->hdr->reader_count; j++) {
		t = atomic_load_explicit(&shm_reader_at(r, j)->txid,
					 memory_order_acquire);
		if (t < oldest)
			oldest = t;
	}
	return oldest;
}

int readers_reap(struct shm_region *r)
{
	struct shm_reader_entry *e;
	int reaped = 0, rc;
	uint32_t j;

	for (j = 0; j < r->hdr->reader_count; j++) {
		e = shm_reader_at(r, j);
		if (r->reader_held[j] ||
		    atomic_load_explicit(&e->txid, memory_order_relaxed) ==
		    READERS_IDLE)
			continue;
		rc = ofdlock_try(r->fd, SHM_LOCK_READER(r->hdr, j));
		if (rc == -EBUSY)
			continue; /* its owner is alive */
		if (rc)
			return shm_set_error(rc, "readers: cannot lock entry %u: %s", j,
					     strerror(-rc));
		atomic_store_explicit(&e->txid, READERS_IDLE,
				      memory_order_release);
		atomic_store_explicit(&e->holder_pid, 0, memory_order_relaxed);
		ofdlock_release(r->fd, SHM_LOCK_READER(r->hdr, j));
		reaped++;
	}
	return reaped;
}
