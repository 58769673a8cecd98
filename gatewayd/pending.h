/* The requests of one gatewayd that wait for an answer from the rings.
 *
 * Each entry ties a request id to the gRPC call that made it (by call id,
 * never by pointer: grpc.h) and to a deadline. The table hands out the
 * request ids itself: the low bits of an id are the entry's index and the
 * high bits a sequence number that only grows, so an id is unique within
 * the slot generation, is found in O(1), and an id whose entry was reused
 * is simply not found.
 *
 * Request identity (invariant 2, docs/invariants.md): a record from raftd or stored
 * carries the (member id, slot, generation, request id) of the request it
 * answers. pending_match delivers it only when all four match an entry
 * of this table; anything else (another member's, a predecessor's
 * generation, an unknown or finished id) is reported as not found and
 * the caller drops it.
 *
 * Entries are kept in deadline order on a list, so expiring them is a
 * look at the head. The table is bounded (capacity given at init): when
 * it is full pending_add refuses, and the caller answers etcd's "too many
 * requests".
 *
 * Single-threaded; no allocation after pending_init.
 */
#ifndef CETCD_GATEWAYD_PENDING_H
#define CETCD_GATEWAYD_PENDING_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/msg.h"

/* What an entry waits for. */
enum pending_kind {
	PENDING_PROPOSE = 1,    /* a MSG_RESULT from stored (or a reject from raftd) */
	PENDING_READ_INDEX = 2, /* a MSG_READ_INDEX_REPLY from raftd */
	PENDING_READ_WAIT = 3,  /* stored's applied index to reach read_index */
};

#define PENDING_NONE UINT32_MAX

struct pending_req {
	uint64_t request_id;  /* 0 while the entry is free */
	uint64_t call_id;     /* grpc_call_id of the call to answer */
	int64_t deadline_ns;  /* monotonic; answered "request timed out" then */
	uint64_t read_index;  /* PENDING_READ_WAIT: the index to wait for */
	uint64_t seen_term;   /* PENDING_PROPOSE: raftd's term when it was sent
			       * (0: not subject to the settled-term rule) */
	int64_t lease_id;     /* a lease request's lease (0 otherwise) */
	uint64_t lease_term;  /* a renewal: the term raftd confirmed this member
			       * led in after it came (0: not confirmed yet) */
	void *ctx;            /* the owner's (e.g. a read to do later); the
			       * owner frees it before pending_remove */
	uint32_t prev, next;  /* deadline list (next: free list when free) */
	uint32_t tag;         /* the owner's: which handler made the entry */
	uint8_t kind;         /* enum pending_kind */
};

/* Why pending_match found nothing (for counters and debug logs). */
enum pending_miss {
	PENDING_MISS_NONE = 0,
	PENDING_MISS_MEMBER,     /* another member's request */
	PENDING_MISS_SLOT,       /* another slot's */
	PENDING_MISS_GENERATION, /* an earlier (or later) holder of this slot */
	PENDING_MISS_UNKNOWN,    /* no such request waits: finished, timed out, cancelled */
	PENDING_MISS_COUNT
};

struct pending_table {
	struct pending_req *v;   /* cap entries */
	uint32_t cap;            /* a power of two */
	uint32_t index_bits;     /* log2(cap) */
	uint32_t count;          /* entries in use */
	uint32_t proposals;      /* of them, PENDING_PROPOSE ones */
	uint32_t free_head;      /* free list */
	uint32_t head, tail;     /* deadline list: head is the nearest */
	uint64_t seq;            /* high bits of the next id; only grows */
	struct msg_origin self;  /* member id, slot, generation of this process */
	uint64_t misses[PENDING_MISS_COUNT];
};

/* Prepares a table of cap entries (rounded up to a power of two, at least
 * 2, at most 2^24) for the requests of self (its request_id is ignored).
 * Returns 0, -EINVAL, or -ENOMEM. */
int pending_init(struct pending_table *t, uint32_t cap, const struct msg_origin *self);

/* Frees the entries' array (not their ctx: the owner's). */
void pending_fini(struct pending_table *t);

/* Takes a free entry for kind, call_id and deadline, and gives it a new
 * request id. NULL when the table is full. The entry goes on the deadline
 * list in deadline order (at the tail when deadlines come in order, the
 * usual case). Valid until pending_remove. */
struct pending_req *pending_add(struct pending_table *t, enum pending_kind kind,
				uint64_t call_id, int64_t deadline_ns);

/* The entry with this request id, or NULL. */
struct pending_req *pending_find(struct pending_table *t, uint64_t request_id);

/* The entry an answer addressed to o belongs to, or NULL with the reason
 * counted in t->misses and stored in *why (may be NULL). */
struct pending_req *pending_match(struct pending_table *t, const struct msg_origin *o,
				  enum pending_miss *why);

/* Changes what p waits for (keeps t->proposals right). */
void pending_set_kind(struct pending_table *t, struct pending_req *p, enum pending_kind kind);
/* Gives p another deadline (later or earlier) and moves it to its place
 * in the deadline order. */
void pending_set_deadline(struct pending_table *t, struct pending_req *p, int64_t deadline_ns);
/* Fills o with this table's identity and the entry's request id. */
void pending_origin(const struct pending_table *t, const struct pending_req *p,
		    struct msg_origin *o);

/* Frees the entry; its request id is dead from now on. */
void pending_remove(struct pending_table *t, struct pending_req *p);

/* The entry with the nearest deadline, or NULL when empty. */
struct pending_req *pending_first(struct pending_table *t);

/* The entry after p in deadline order, or NULL. */
struct pending_req *pending_next(struct pending_table *t, const struct pending_req *p);

/* Its deadline, or INT64_MAX when empty. */
int64_t pending_next_deadline(const struct pending_table *t);

static inline bool pending_full(const struct pending_table *t)
{
	return t->count == t->cap;
}

const char *pending_miss_name(enum pending_miss why);

#endif
