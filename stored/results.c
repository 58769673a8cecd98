/* Result delivery to the gatewayd slots (see results.h). */
#include "shm/metrics.h"
#include "stored/results.h"

#include <errno.h>
#include <string.h>

#include "base/log/log.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "stored/alloc.h"
#include "stored/apply.h"

static const char results_msg_too_large[] =
	"etcdserver: the response is larger than the result ring carries";

int stored_results_init(struct stored_results *rs, struct shm_region *r, uint64_t member_id)
{
	memset(rs, 0, sizeof(*rs));
	rs->r = r;
	rs->member_id = member_id;
	rs->nslots = shm_slot_count(r);
	rs->slots = stored_calloc(rs->nslots ? rs->nslots : 1, sizeof(*rs->slots));
	rs->touched = stored_calloc(rs->nslots ? rs->nslots : 1, sizeof(*rs->touched));
	if (!rs->slots || !rs->touched) {
		stored_results_fini(rs);
		return -ENOMEM;
	}
	return 0;
}

void stored_results_fini(struct stored_results *rs)
{
	stored_free(rs->slots);
	stored_free(rs->touched);
	rs->slots = NULL;
	rs->touched = NULL;
}

const char *stored_results_verdict_name(enum stored_results_verdict v)
{
	static const char *const names[STORED_RESULT_VERDICTS] = {
		[STORED_RESULT_STAGED] = "staged",
		[STORED_RESULT_FOREIGN] = "foreign",
		[STORED_RESULT_NO_SLOT] = "no-slot",
		[STORED_RESULT_DEAD_SLOT] = "dead-slot",
		[STORED_RESULT_OLD_GENERATION] = "old-generation",
		[STORED_RESULT_RING_FULL] = "ring-full",
		[STORED_RESULT_RING_FAILED] = "ring-failed",
		[STORED_RESULT_TOO_LARGE] = "too-large",
	};
	return (unsigned)v < STORED_RESULT_VERDICTS ? names[v] : "unknown";
}

/* The slot's state for this round, asking the kernel the first time. */
static struct stored_results_slot *results_slot(struct stored_results *rs, uint32_t i)
{
	struct stored_results_slot *sl = &rs->slots[i];

	if (!sl->checked) {
		sl->checked = true;
		sl->live = shm_slot_is_live(rs->r, i);
		sl->generation = shm_slot_generation(rs->r, i);
		sl->staged = false;
		sl->dropped_full = 0;
		rs->touched[rs->ntouched++] = i;
	}
	return sl;
}

/* Stages one record on the slot's ring; 0, -EAGAIN (full), -EMSGSIZE, or
 * -EIO (failed ring). */
static int results_push(struct ring *ring, const struct msg_result *h, const void *body)
{
	uint32_t len = (uint32_t)sizeof(*h) + h->body_len;
	void *p;
	int rc = ring_reserve(ring, len, &p);

	if (rc)
		return rc;
	memcpy(p, h, sizeof(*h));
	if (h->body_len)
		memcpy((uint8_t *)p + sizeof(*h), body, h->body_len);
	return ring_commit(ring, MSG_RESULT, len);
}

static enum stored_results_verdict results_count(struct stored_results *rs,
						 enum stored_results_verdict v)
{
	rs->counts[v]++;
	return v;
}

/* The result ring of the slot o names, or NULL with the verdict that
 * drops a record for it (counted). */
static struct ring *results_ring(struct stored_results *rs, const struct msg_origin *o,
				 struct stored_results_slot **out, enum stored_results_verdict *v)
{
	struct stored_results_slot *sl;

	*v = STORED_RESULT_STAGED;
	if (o->member_id != rs->member_id)
		*v = STORED_RESULT_FOREIGN;
	else if (o->slot >= rs->nslots)
		*v = STORED_RESULT_NO_SLOT;
	if (*v != STORED_RESULT_STAGED) {
		results_count(rs, *v);
		return NULL;
	}
	sl = results_slot(rs, o->slot);
	if (!sl->live)
		*v = STORED_RESULT_DEAD_SLOT;
	else if (o->generation != sl->generation)
		*v = STORED_RESULT_OLD_GENERATION;
	if (*v != STORED_RESULT_STAGED) {
		results_count(rs, *v);
		return NULL;
	}
	*out = sl;
	return shm_slot_ring(rs->r, o->slot, SHM_SLOT_FROM_STORED);
}

/* The verdict of a push that returned rc (0 staged). */
static enum stored_results_verdict results_pushed(struct stored_results *rs,
						  struct stored_results_slot *sl,
						  const struct msg_origin *o, uint64_t index,
						  enum stored_results_verdict v, int rc)
{
	if (rc == -EAGAIN) {
		sl->dropped_full++;
		shm_metric_add(shm_metrics_block(rs->r, SHM_METRICS_STORED), SHM_M_RESULTS_FULL, 1);
		return results_count(rs, STORED_RESULT_RING_FULL);
	}
	if (rc) {
		log_warn("dropped a result: the slot's result ring failed",
			 LOG_U64("slot", o->slot), LOG_U64("index", index), LOG_ERRNO(rc));
		return results_count(rs, STORED_RESULT_RING_FAILED);
	}
	sl->staged = true;
	return results_count(rs, v);
}

enum stored_results_verdict stored_results_stage(struct stored_results *rs,
						 const struct msg_result *h, const void *body)
{
	enum stored_results_verdict v;
	struct stored_results_slot *sl;
	struct ring *ring = results_ring(rs, &h->origin, &sl, &v);
	int rc;

	if (!ring)
		return v;
	rc = results_push(ring, h, body);
	if (rc == -EMSGSIZE) {
		struct msg_result e = *h;
		e.status = STORED_GRPC_RESOURCE_EXHAUSTED;
		e.body_len = (uint32_t)strlen(results_msg_too_large);
		log_warn("a result is larger than the slot's ring carries; answered with an error",
			 LOG_U64("slot", h->origin.slot), LOG_U64("index", h->index),
			 LOG_U64("len", sizeof(*h) + (uint64_t)h->body_len),
			 LOG_U64("max-record", ring_max_record(ring)));
		v = STORED_RESULT_TOO_LARGE;
		rc = results_push(ring, &e, results_msg_too_large);
	}
	return results_pushed(rs, sl, &h->origin, h->index, v, rc);
}

enum stored_results_verdict stored_results_stage_interim(struct stored_results *rs,
							 const struct msg_origin *o,
							 uint64_t index)
{
	struct msg_result_interim m = { .origin = *o, .index = index };
	enum stored_results_verdict v;
	struct stored_results_slot *sl;
	struct ring *ring = results_ring(rs, o, &sl, &v);

	if (!ring)
		return v;
	return results_pushed(rs, sl, o, index, v,
			      ring_stage(ring, MSG_RESULT_INTERIM, &m, sizeof(m)));
}

void stored_results_publish(struct stored_results *rs)
{
	for (uint32_t k = 0; k < rs->ntouched; k++) {
		uint32_t i = rs->touched[k];
		struct stored_results_slot *sl = &rs->slots[i];

		if (sl->staged)
			sl->staged = ring_publish_quiet(shm_slot_ring(rs->r, i, SHM_SLOT_FROM_STORED));
		if (sl->dropped_full)
			log_warn("dropped results: the slot's result ring is full; its requests "
				 "will time out",
				 LOG_U64("slot", i), LOG_U64("generation", sl->generation),
				 LOG_U64("dropped", sl->dropped_full));
	}
}

void stored_results_wake(struct stored_results *rs)
{
	for (uint32_t k = 0; k < rs->ntouched; k++) {
		uint32_t i = rs->touched[k];
		struct stored_results_slot *sl = &rs->slots[i];

		if (sl->staged)
			ring_wake_consumer(shm_slot_ring(rs->r, i, SHM_SLOT_FROM_STORED));
		sl->checked = false;
		sl->staged = false;
		sl->dropped_full = 0;
	}
	rs->ntouched = 0;
}
