/*
 * Roles and slots of the member region.
 *
 * raftd and stored each hold a role lock; every gatewayd holds a slot. Both
 * are OFD locks (F_OFD_SETLK) on a byte of the region file, so the kernel
 * drops them when the holder dies, whatever its pid or pid namespace.
 * Liveness is always asked of the kernel (F_OFD_GETLK), never of a pid.
 *
 * A slot has a generation that every claim bumps; results addressed to an
 * older generation must be dropped by whoever delivers them.
 */
#ifndef CETCD_SHM_SLOT_H
#define CETCD_SHM_SLOT_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/region.h"

enum shm_role { SHM_ROLE_RAFTD, SHM_ROLE_STORED };
#define SHM_ROLE_COUNT 2

/*
 * Takes the role lock. The caller becomes the only producer and consumer
 * of that role's side of every ring (the ring cursors it owns are taken
 * over where the previous holder left them, never reset) and the only
 * sleeper on the role's doorbell. Claiming a role this handle already holds
 * is a no-op. Returns 0, -EBUSY if a live process holds it, -EINVAL, or
 * another -errno from fcntl.
 */
int shm_role_claim(struct shm_region *r, enum shm_role role);
void shm_role_release(struct shm_region *r, enum shm_role role);
/* Whether some process (this one included) holds the role. */
bool shm_role_is_live(struct shm_region *r, enum shm_role role);

struct shm_slot_ref {
	uint32_t index;
	uint64_t generation;
};

/*
 * Claims the lowest free slot (one whose lock no live process holds) and
 * bumps its generation. Results still queued for the slot's previous
 * holder are discarded; requests it had queued stay and are answered to
 * the old generation. Returns 0, -ENOSPC if every slot is held by a live
 * process, or another -errno from fcntl.
 */
int shm_slot_claim(struct shm_region *r, struct shm_slot_ref *out);

/* Gives the slot back. Ignored unless this handle holds s at its
 * generation. */
void shm_slot_release(struct shm_region *r, const struct shm_slot_ref *s);

/* Whether a live process (this one included) holds the slot: the kernel's
 * word, by F_OFD_GETLK. False for an index out of range. */
bool shm_slot_is_live(struct shm_region *r, uint32_t index);

/* The generation of the slot's latest claim (0 for an index out of
 * range). */
uint64_t shm_slot_generation(struct shm_region *r, uint32_t index);

uint32_t shm_slot_count(struct shm_region *r);

/* The process id the holder recorded when claiming, for log messages only:
 * it says nothing about liveness (pids are reused and namespaced). */
int32_t shm_slot_holder_pid(struct shm_region *r, uint32_t index);

/* The rings of a slot; each has one producer and one consumer. */
enum shm_slot_ring {
	SHM_SLOT_TO_RAFTD,    /* gatewayd -> raftd: proposals, read-index asks */
	SHM_SLOT_FROM_RAFTD,  /* raftd -> gatewayd: read indexes, notices */
	SHM_SLOT_FROM_STORED, /* stored -> gatewayd: results */
	SHM_SLOT_TO_STORED,   /* gatewayd -> stored: lease keepalives */
};
#define SHM_SLOT_RING_COUNT 4

/* NULL if index is out of range. The pointer stays valid while the region
 * is attached. */
struct ring *shm_slot_ring(struct shm_region *r, uint32_t index,
			   enum shm_slot_ring which);

enum shm_daemon_ring {
	SHM_RING_COMMITTED,        /* raftd -> stored: committed entries */
	SHM_RING_STORED_PROPOSALS, /* stored -> raftd: revokes, checkpoints */
};
#define SHM_DAEMON_RING_COUNT 2

/* NULL if which is out of range; valid while the region is attached. */
struct ring *shm_daemon_ring(struct shm_region *r, enum shm_daemon_ring which);

/*
 * The region's upkeep at quiet times, by the producer of each ring: gives
 * back the pages of the rings the holder of `role` (or of slot `index`)
 * writes, and for stored the event ring, once each has been quiet for
 * SHM_TRIM_QUIET_NS (ring_trim_idle, bcast_trim_idle). Only from the
 * thread that produces on them, every so often (a tick, a turn); returns
 * the time the next call is wanted (INT64_MAX: after the next record).
 * Does nothing for a role or slot this handle does not hold.
 */
int64_t shm_role_trim(struct shm_region *r, enum shm_role role, int64_t now_ns);
int64_t shm_slot_trim(struct shm_region *r, uint32_t index, int64_t now_ns);

#endif
