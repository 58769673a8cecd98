/*
 * Roles, slots and their doorbells and rings (see slot.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "shm/bcast.h"
#include "shm/doorbell.h"
#include "shm/layout.h"
#include "shm/metrics.h"
#include "shm/ring.h"
#include "shm/slot.h"

static const char *const slot_role_names[SHM_ROLE_COUNT] = {
	[SHM_ROLE_RAFTD] = "raftd",
	[SHM_ROLE_STORED] = "stored",
};

static bool slot_role_valid(enum shm_role role)
{
	return (unsigned)role < SHM_ROLE_COUNT;
}

uint32_t shm_slot_count(struct shm_region *r)
{
	return r->hdr->slot_count;
}

struct ring *shm_slot_ring(struct shm_region *r, uint32_t index,
			   enum shm_slot_ring which)
{
	if (index >= r->hdr->slot_count ||
	    (unsigned)which >= SHM_SLOT_RING_COUNT)
		return NULL;
	return shm_ring_at(r, (uint64_t)index * SHM_SLOT_RING_COUNT + which);
}

struct ring *shm_daemon_ring(struct shm_region *r, enum shm_daemon_ring which)
{
	if ((unsigned)which >= SHM_DAEMON_RING_COUNT)
		return NULL;
	return shm_ring_at(r, (uint64_t)r->hdr->slot_count *
			   SHM_SLOT_RING_COUNT + which);
}

struct shm_doorbell *shm_role_doorbell(struct shm_region *r,
				       enum shm_role role)
{
	return slot_role_valid(role) ? &shm_role_block(r, role)->doorbell : NULL;
}

struct shm_doorbell *shm_slot_doorbell(struct shm_region *r, uint32_t index)
{
	return index < r->hdr->slot_count ? &shm_slot_at(r, index)->doorbell :
	       NULL;
}

/* The new holder of a role takes over its side of every ring. */
static void slot_role_takeover(struct shm_region *r, enum shm_role role)
{
	uint32_t i;

	for (i = 0; i < r->hdr->slot_count; i++) {
		if (role == SHM_ROLE_RAFTD) {
			ring_consumer_takeover(shm_slot_ring(r, i, SHM_SLOT_TO_RAFTD));
			ring_producer_takeover(shm_slot_ring(r, i, SHM_SLOT_FROM_RAFTD));
		} else {
			ring_producer_takeover(shm_slot_ring(r, i, SHM_SLOT_FROM_STORED));
			ring_consumer_takeover(shm_slot_ring(r, i, SHM_SLOT_TO_STORED));
		}
	}
	if (role == SHM_ROLE_RAFTD) {
		ring_producer_takeover(shm_daemon_ring(r, SHM_RING_COMMITTED));
		ring_consumer_takeover(shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS));
	} else {
		ring_consumer_takeover(shm_daemon_ring(r, SHM_RING_COMMITTED));
		ring_producer_takeover(shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS));
		bcast_producer_takeover(shm_events(r));
	}
	shm_doorbell_takeover(&shm_role_block(r, role)->doorbell);
}

static int64_t slot_min(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

int64_t shm_role_trim(struct shm_region *r, enum shm_role role, int64_t now_ns)
{
	int64_t next = INT64_MAX;
	uint32_t i;

	if (!slot_role_valid(role) || !r->role_held[role])
		return INT64_MAX;
	for (i = 0; i < r->hdr->slot_count; i++)
		next = slot_min(next, ring_trim_idle(shm_slot_ring(r, i, role == SHM_ROLE_RAFTD ?
								   SHM_SLOT_FROM_RAFTD :
								   SHM_SLOT_FROM_STORED),
						     now_ns));
	if (role == SHM_ROLE_RAFTD)
		return slot_min(next, ring_trim_idle(shm_daemon_ring(r, SHM_RING_COMMITTED), now_ns));
	next = slot_min(next, ring_trim_idle(shm_daemon_ring(r, SHM_RING_STORED_PROPOSALS), now_ns));
	return slot_min(next, bcast_trim_idle(shm_events(r), now_ns));
}

int64_t shm_slot_trim(struct shm_region *r, uint32_t index, int64_t now_ns)
{
	if (index >= r->hdr->slot_count || !r->slot_held[index])
		return INT64_MAX;
	return slot_min(ring_trim_idle(shm_slot_ring(r, index, SHM_SLOT_TO_RAFTD), now_ns),
			ring_trim_idle(shm_slot_ring(r, index, SHM_SLOT_TO_STORED), now_ns));
}

int shm_role_claim(struct shm_region *r, enum shm_role role)
{
	int rc;

	if (!slot_role_valid(role))
		return shm_set_error(-EINVAL, "shm: no role %d", (int)role);
	if (r->role_held[role])
		return 0;
	rc = ofdlock_try(r->fd, SHM_LOCK_ROLE(role));
	if (rc == -EBUSY)
		return shm_set_error(rc, "shm: a live %s (pid %d, as it recorded) already "
				     "runs for this member",
				     slot_role_names[role],
				     atomic_load_explicit(&shm_role_block(r, role)->holder_pid,
							  memory_order_relaxed));
	if (rc)
		return shm_set_error(rc, "shm: cannot lock the %s role: %s",
				     slot_role_names[role], strerror(-rc));
	r->role_held[role] = true;
	atomic_store_explicit(&shm_role_block(r, role)->holder_pid,
			      (int32_t)getpid(), memory_order_relaxed);
	slot_role_takeover(r, role);
	shm_metrics_own(shm_metrics_block(r, role == SHM_ROLE_RAFTD ? SHM_METRICS_RAFTD :
								      SHM_METRICS_STORED));
	return 0;
}

void shm_role_release(struct shm_region *r, enum shm_role role)
{
	if (!slot_role_valid(role) || !r->role_held[role])
		return;
	atomic_store_explicit(&shm_role_block(r, role)->holder_pid, 0,
			      memory_order_relaxed);
	r->role_held[role] = false;
	ofdlock_release(r->fd, SHM_LOCK_ROLE(role));
}

bool shm_role_is_live(struct shm_region *r, enum shm_role role)
{
	if (!slot_role_valid(role))
		return false;
	if (r->role_held[role])
		return true;
	/* An error counts as live: never treat a holder as dead unless the
	 * kernel says so. */
	return ofdlock_is_held(r->fd, SHM_LOCK_ROLE(role)) != 0;
}

/* Raises the region's generation floor to at least gen. */
static void slot_raise_floor(struct shm_region *r, uint64_t gen)
{
	uint64_t cur = atomic_load_explicit(&r->hdr->generation_floor,
					    memory_order_relaxed);

	while (cur < gen &&
	       !atomic_compare_exchange_weak_explicit(
		       &r->hdr->generation_floor, &cur, gen,
		       memory_order_relaxed, memory_order_relaxed))
		;
}

/* The new holder of slot i takes over the gateway side of its rings: it
 * continues the request rings where the last holder published, and drops
 * the results queued for the last holder. */
static void slot_takeover(struct shm_region *r, uint32_t i)
{
	struct ring *from_raftd = shm_slot_ring(r, i, SHM_SLOT_FROM_RAFTD);
	struct ring *from_stored = shm_slot_ring(r, i, SHM_SLOT_FROM_STORED);

	shm_doorbell_takeover(&shm_slot_at(r, i)->doorbell);
	ring_producer_takeover(shm_slot_ring(r, i, SHM_SLOT_TO_RAFTD));
	ring_producer_takeover(shm_slot_ring(r, i, SHM_SLOT_TO_STORED));
	ring_consumer_takeover(from_raftd);
	ring_consumer_takeover(from_stored);
	(void)ring_drain(from_raftd);
	(void)ring_drain(from_stored);
}

int shm_slot_claim(struct shm_region *r, struct shm_slot_ref *out)
{
	struct shm_slot *s;
	uint64_t gen;
	uint32_t i;
	int rc;

	for (i = 0; i < r->hdr->slot_count; i++) {
		if (r->slot_held[i])
			continue;
		rc = ofdlock_try(r->fd, SHM_LOCK_SLOT(i));
		if (rc == -EBUSY)
			continue;
		if (rc)
			return shm_set_error(rc, "shm: cannot lock slot %u: %s", i,
					     strerror(-rc));
		s = shm_slot_at(r, i);
		gen = atomic_fetch_add_explicit(&s->generation, 1,
						memory_order_acq_rel) + 1;
		slot_raise_floor(r, gen);
		atomic_store_explicit(&s->holder_pid, (int32_t)getpid(),
				      memory_order_relaxed);
		slot_takeover(r, i);
		shm_metrics_own(shm_metrics_block(r, SHM_METRICS_GATEWAY + i));
		r->slot_held[i] = true;
		out->index = i;
		out->generation = gen;
		return 0;
	}
	return shm_set_error(-ENOSPC, "shm: all %u gateway slots are held by live processes",
			     r->hdr->slot_count);
}

void shm_slot_release(struct shm_region *r, const struct shm_slot_ref *ref)
{
	struct shm_slot *s;

	if (ref->index >= r->hdr->slot_count || !r->slot_held[ref->index])
		return;
	s = shm_slot_at(r, ref->index);
	if (atomic_load_explicit(&s->generation, memory_order_relaxed) !=
	    ref->generation)
		return;
	atomic_store_explicit(&s->holder_pid, 0, memory_order_relaxed);
	shm_doorbell_takeover(&s->doorbell);
	r->slot_held[ref->index] = false;
	ofdlock_release(r->fd, SHM_LOCK_SLOT(ref->index));
}

bool shm_slot_is_live(struct shm_region *r, uint32_t index)
{
	if (index >= r->hdr->slot_count)
		return false;
	if (r->slot_held[index])
		return true;
	/* An error counts as live (see shm_role_is_live). */
	return ofdlock_is_held(r->fd, SHM_LOCK_SLOT(index)) != 0;
}

uint64_t shm_slot_generation(struct shm_region *r, uint32_t index)
{
	if (index >= r->hdr->slot_count)
		return 0;
	return atomic_load_explicit(&shm_slot_at(r, index)->generation,
				    memory_order_acquire);
}

int32_t shm_slot_holder_pid(struct shm_region *r, uint32_t index)
{
	if (index >= r->hdr->slot_count)
		return 0;
	return atomic_load_explicit(&shm_slot_at(r, index)->holder_pid,
				    memory_order_relaxed);
}
