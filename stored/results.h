/*
 * Delivery of applied requests' results to the gatewayd slots that asked,
 * on each slot's SHM_SLOT_FROM_STORED ring (invariants 2 and 6, docs/invariants.md).
 *
 * A result goes out only when its origin names this member, a slot that a
 * live process holds (the kernel's word: shm_slot_is_live) and that slot's
 * current generation; anything else is dropped and counted, silently.
 * stored never waits on a result ring: a result that does not fit now is
 * dropped, counted and logged at warn (once per slot and publish), and the
 * gateway's request timeout answers the client. A result larger than the
 * ring's largest record is replaced by an error result that says so.
 *
 * Results are staged during a round and published per slot at its end, so
 * each gateway is woken once per apply batch. A slot's liveness and
 * generation are asked once per round.
 *
 * One thread (stored's loop) owns a stored_results.
 */
#ifndef CETCD_STORED_RESULTS_H
#define CETCD_STORED_RESULTS_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/msg.h"
#include "shm/region.h"

/* What became of one result. */
enum stored_results_verdict {
	STORED_RESULT_STAGED = 0,      /* will go out at the next publish */
	STORED_RESULT_FOREIGN,         /* another member's request */
	STORED_RESULT_NO_SLOT,         /* slot index out of range */
	STORED_RESULT_DEAD_SLOT,       /* no live process holds the slot */
	STORED_RESULT_OLD_GENERATION,  /* the slot was claimed again since */
	STORED_RESULT_RING_FULL,       /* no room now: dropped */
	STORED_RESULT_RING_FAILED,     /* the ring is corrupt: dropped */
	STORED_RESULT_TOO_LARGE,       /* an error result went instead */
	STORED_RESULT_VERDICTS
};

/* Per-slot state of a round; private. */
struct stored_results_slot {
	bool checked;            /* live and generation asked this round */
	bool live;
	bool staged;             /* records staged, then published and not yet woken for */
	uint64_t generation;
	uint32_t dropped_full;   /* this round */
};

struct stored_results {
	struct shm_region *r;
	uint64_t member_id;
	uint32_t nslots;
	struct stored_results_slot *slots; /* nslots entries */
	uint32_t *touched;                 /* slots checked this round */
	uint32_t ntouched;
	uint64_t counts[STORED_RESULT_VERDICTS]; /* since init */
};

/* Prepares delivery for this member's slots of region r. Returns 0 or
 * -ENOMEM. */
int stored_results_init(struct stored_results *rs, struct shm_region *r, uint64_t member_id);
void stored_results_fini(struct stored_results *rs);

/*
 * Stages the result h (its origin, index, revision, status, body_len) with
 * body_len bytes at body for the slot it names. Never blocks. Returns the
 * verdict, which is also counted.
 */
enum stored_results_verdict stored_results_stage(struct stored_results *rs,
						 const struct msg_result *h, const void *body);

/*
 * Stages a MSG_RESULT_INTERIM for the request o names (applied as entry
 * index, its answer still to come), under the same rules as a result.
 * Never blocks. Returns the verdict, which is also counted.
 */
enum stored_results_verdict stored_results_stage_interim(struct stored_results *rs,
							 const struct msg_origin *o,
							 uint64_t index);

/*
 * Ends a round in two steps. stored_results_publish makes what was staged
 * visible to the gateways and logs the round's drops for full rings;
 * stored_results_wake, which must follow before the next round stages
 * anything, wakes each gateway that got results and sleeps. Between the
 * two the caller publishes whatever else goes with the results, so that
 * no gateway wakes (and, on a busy CPU, takes it from stored) before
 * everything of the round is out.
 */
void stored_results_publish(struct stored_results *rs);
void stored_results_wake(struct stored_results *rs);

/* "staged", "foreign", ... Static storage. */
const char *stored_results_verdict_name(enum stored_results_verdict v);

#endif
