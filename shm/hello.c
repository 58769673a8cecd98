/* The attach exchange of a gatewayd slot (see hello.h). */
#include "shm/hello.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "shm/doorbell.h"
#include "base/log/log.h"
#include "shm/ring.h"

const char *hello_role_name(enum shm_role role)
{
	return role == SHM_ROLE_RAFTD ? "raftd" : "stored";
}

/* The slot ring carrying requests to role, and the one carrying its
 * replies. */
static enum shm_slot_ring hello_to(enum shm_role role)
{
	return role == SHM_ROLE_RAFTD ? SHM_SLOT_TO_RAFTD : SHM_SLOT_TO_STORED;
}

static enum shm_slot_ring hello_from(enum shm_role role)
{
	return role == SHM_ROLE_RAFTD ? SHM_SLOT_FROM_RAFTD : SHM_SLOT_FROM_STORED;
}

/* Copies a record's payload into m if it is a well-formed hello_msg. */
static bool hello_decode(const struct ring_rec *rec, struct hello_msg *m)
{
	if (rec->len != sizeof(*m))
		return false;
	memcpy(m, rec->data, sizeof(*m));
	return m->version == HELLO_VERSION;
}

int hello_send(struct shm_region *r, const struct shm_slot_ref *s, enum shm_role role,
	       int64_t gateway_index)
{
	struct ring *ring = shm_slot_ring(r, s->index, hello_to(role));
	struct hello_msg m = {
		.version = HELLO_VERSION,
		.slot = s->index,
		.generation = s->generation,
		.pid = (int32_t)getpid(),
		.role = -1,
		.gateway_index = gateway_index,
	};
	if (!ring)
		return -EINVAL;
	return ring_push(ring, HELLO_TYPE_HELLO, &m, sizeof(m));
}

int hello_take_acks(struct shm_region *r, const struct shm_slot_ref *s, enum shm_role role,
		    bool *acked)
{
	struct ring *ring = shm_slot_ring(r, s->index, hello_from(role));
	struct ring_rec rec;
	struct hello_msg m;
	int n = 0, rc;

	if (!ring)
		return -EINVAL;
	while ((rc = ring_peek(ring, &rec)) == 0) {
		bool ok = rec.type == HELLO_TYPE_ACK && hello_decode(&rec, &m);
		if (ok && m.slot == s->index && m.generation == s->generation) {
			*acked = true;
			log_info("attached", LOG_STR("peer", hello_role_name(role)),
				 LOG_U64("slot", s->index), LOG_U64("generation", s->generation),
				 LOG_I64("peer-pid", m.pid));
		} else {
			log_debug("dropped a record on the slot's reply ring",
				  LOG_STR("peer", hello_role_name(role)), LOG_U64("type", rec.type),
				  LOG_U64("slot", s->index), LOG_U64("generation", s->generation));
		}
		ring_release(ring, &rec);
		n++;
	}
	return rc == -EAGAIN ? n : rc;
}

bool hello_replies_waiting(struct shm_region *r, const struct shm_slot_ref *s)
{
	struct ring *a = shm_slot_ring(r, s->index, SHM_SLOT_FROM_RAFTD);
	struct ring *b = shm_slot_ring(r, s->index, SHM_SLOT_FROM_STORED);
	return (a && ring_has_data(a)) || (b && ring_has_data(b));
}

int hello_claim_role(struct shm_region *r, enum shm_role role)
{
	int rc = shm_role_claim(r, role);
	if (rc == -EBUSY)
		log_error("another live process holds this role in the member region",
			  LOG_STR("role", hello_role_name(role)), LOG_ERRNO(rc));
	else if (rc)
		log_error("cannot claim the role", LOG_STR("role", hello_role_name(role)),
			  LOG_ERRNO(rc));
	else
		log_info("claimed role", LOG_STR("role", hello_role_name(role)),
			 LOG_I64("pid", getpid()));
	return rc;
}

bool hello_requests_waiting(struct shm_region *r, enum shm_role role)
{
	uint32_t n = shm_slot_count(r);
	for (uint32_t i = 0; i < n; i++) {
		struct ring *ring = shm_slot_ring(r, i, hello_to(role));
		if (ring && ring_has_data(ring))
			return true;
	}
	return false;
}

/* Answers one hello on slot i, if it comes from the slot's live holder at
 * its current generation. */
static void hello_answer(struct shm_region *r, enum shm_role role, uint32_t i,
			 const struct hello_msg *m)
{
	uint64_t gen = shm_slot_generation(r, i);
	struct ring *out = shm_slot_ring(r, i, hello_from(role));
	struct hello_msg ack;
	int rc;

	if (m->slot != i || m->generation != gen || !shm_slot_is_live(r, i)) {
		log_info("dropped a hello from a previous holder of the slot", LOG_U64("slot", i),
			 LOG_U64("generation", m->generation), LOG_U64("current-generation", gen));
		return;
	}
	ack = (struct hello_msg){
		.version = HELLO_VERSION,
		.slot = i,
		.generation = m->generation,
		.pid = (int32_t)getpid(),
		.role = (int32_t)role,
		.gateway_index = m->gateway_index,
	};
	rc = ring_push(out, HELLO_TYPE_ACK, &ack, sizeof(ack));
	if (rc) {
		log_warn("dropped the ack of a hello", LOG_U64("slot", i),
			 LOG_U64("generation", m->generation), LOG_ERRNO(rc));
		return;
	}
	log_info("attached", LOG_STR("peer", "gatewayd"), LOG_U64("slot", i),
		 LOG_U64("generation", m->generation), LOG_I64("gateway-index", m->gateway_index),
		 LOG_I64("peer-pid", m->pid));
}

bool hello_serve_record(struct shm_region *r, enum shm_role role, uint32_t slot,
			const struct ring_rec *rec)
{
	struct hello_msg m;

	if (rec->type != HELLO_TYPE_HELLO)
		return false;
	if (hello_decode(rec, &m))
		hello_answer(r, role, slot, &m);
	else
		log_warn("dropped a malformed hello", LOG_U64("slot", slot),
			 LOG_U64("len", rec->len));
	return true;
}

int hello_serve(struct shm_region *r, enum shm_role role)
{
	uint32_t n = shm_slot_count(r);
	int handled = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct ring *in = shm_slot_ring(r, i, hello_to(role));
		struct ring_rec rec;

		while (in && ring_peek(in, &rec) == 0) {
			if (!hello_serve_record(r, role, i, &rec))
				log_debug("dropped a record this build does not serve yet",
					  LOG_U64("slot", i), LOG_U64("type", rec.type),
					  LOG_U64("len", rec.len));
			ring_release(in, &rec);
			handled++;
		}
	}
	return handled;
}
