/* The attach exchange of a gatewayd slot.
 *
 * A gatewayd that claimed a slot sends a hello on the slot's rings to
 * raftd and to stored (SHM_SLOT_TO_RAFTD, SHM_SLOT_TO_STORED); each daemon
 * answers with an ack on the matching reply ring (SHM_SLOT_FROM_RAFTD,
 * SHM_SLOT_FROM_STORED) carrying the same slot generation, after checking
 * that the generation is the slot's current one (a hello of a dead
 * predecessor is dropped, never answered to its successor). Both sides log
 * "attached" with the slot and generation.
 *
 * This is the first protocol on the slot rings and the one every gatewayd
 * speaks at start-up; its record types sit at the top of the type space so
 * that the request protocols can number theirs from 1.
 *
 * Both ends of the format live here, in the library every process links:
 * gatewayd sends hellos, raftd and stored serve them.
 */
#ifndef CETCD_SHM_HELLO_H
#define CETCD_SHM_HELLO_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/region.h"
#include "shm/slot.h"

struct ring_rec;

#define HELLO_TYPE_HELLO 0x7fff0001u
#define HELLO_TYPE_ACK 0x7fff0002u
#define HELLO_VERSION 1u

/* The payload of both record types; host byte order (same host). */
struct hello_msg {
	uint32_t version;    /* HELLO_VERSION */
	uint32_t slot;       /* slot index */
	uint64_t generation; /* the slot generation the sender means */
	int32_t pid;         /* sender's pid, for log messages only */
	int32_t role;        /* ack: enum shm_role of the sender; hello: -1 */
	int64_t gateway_index; /* hello: the gatewayd's --gateway-index */
};

/* Gateway side: pushes a hello for s to the daemon of role. Returns 0,
 * -EAGAIN if that ring is full now (retry later), or another ring_push
 * error. */
int hello_send(struct shm_region *r, const struct shm_slot_ref *s, enum shm_role role,
	       int64_t gateway_index);

/* Gateway side: consumes the records waiting on s's reply ring from role.
 * Sets *acked when an ack for s's generation came; drops everything else
 * (acks to an older generation, records this skeleton does not know).
 * Returns the number of records consumed, or -EIO for a failed ring. */
int hello_take_acks(struct shm_region *r, const struct shm_slot_ref *s, enum shm_role role,
		    bool *acked);

/* Gateway side: whether a reply from raftd or stored waits on s. */
bool hello_replies_waiting(struct shm_region *r, const struct shm_slot_ref *s);

/* Daemon side: takes the role lock for role (shm_role_claim) and logs the
 * outcome, saying plainly when another live process holds the role.
 * Returns 0 or the error of shm_role_claim. */
int hello_claim_role(struct shm_region *r, enum shm_role role);

/* Daemon side: whether any slot has a record waiting for role. */
bool hello_requests_waiting(struct shm_region *r, enum shm_role role);

/* Daemon side: answers every hello waiting for role on every slot, and
 * drops what it does not serve (logged at debug level). Never blocks: an
 * ack that does not fit is dropped with a warning. Returns the number of
 * records consumed. */
int hello_serve(struct shm_region *r, enum shm_role role);

/* Daemon side, for a loop that drains a slot's request ring itself: if rec
 * (taken from slot's ring to role) is a hello, answers it as hello_serve
 * does (or drops it, logged, when malformed or from a previous holder of
 * the slot) and returns true; returns false for any other record, which
 * the caller handles. Never blocks; the caller releases the record. */
bool hello_serve_record(struct shm_region *r, enum shm_role role, uint32_t slot,
			const struct ring_rec *rec);

/* "raftd" or "stored". */
const char *hello_role_name(enum shm_role role);

#endif
