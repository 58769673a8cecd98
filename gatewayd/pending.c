/* The in-flight request table of a gatewayd (see pending.h). */
#include "gatewayd/pending.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PENDING_MAX_CAP (1u << 24)

int pending_init(struct pending_table *t, uint32_t cap, const struct msg_origin *self)
{
	uint32_t bits = 1;

	memset(t, 0, sizeof(*t));
	if (cap == 0 || cap > PENDING_MAX_CAP)
		return -EINVAL;
	while ((1u << bits) < cap)
		bits++;
	t->cap = 1u << bits;
	t->index_bits = bits;
	t->v = calloc(t->cap, sizeof(*t->v));
	if (!t->v)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->cap; i++)
		t->v[i].next = i + 1 < t->cap ? i + 1 : PENDING_NONE;
	t->free_head = 0;
	t->head = t->tail = PENDING_NONE;
	t->seq = 1;
	t->self = *self;
	t->self.request_id = 0;
	return 0;
}

void pending_fini(struct pending_table *t)
{
	free(t->v);
	t->v = NULL;
	t->cap = 0;
	t->count = 0;
}

/* Links entry i into the deadline list after entry `after` (PENDING_NONE:
 * at the head). */
static void pending_link_after(struct pending_table *t, uint32_t i, uint32_t after)
{
	struct pending_req *p = &t->v[i];
	p->prev = after;
	p->next = after == PENDING_NONE ? t->head : t->v[after].next;
	if (p->next == PENDING_NONE)
		t->tail = i;
	else
		t->v[p->next].prev = i;
	if (after == PENDING_NONE)
		t->head = i;
	else
		t->v[after].next = i;
}

/* Links entry i into the deadline list by its deadline: from the tail
 * back to the last entry due no later than it (at the tail when deadlines
 * come in order, the usual case). */
static void pending_link_sorted(struct pending_table *t, uint32_t i)
{
	uint32_t after = t->tail;
	while (after != PENDING_NONE && t->v[after].deadline_ns > t->v[i].deadline_ns)
		after = t->v[after].prev;
	pending_link_after(t, i, after);
}

/* Takes entry p off the deadline list. */
static void pending_unlink(struct pending_table *t, struct pending_req *p)
{
	if (p->prev == PENDING_NONE)
		t->head = p->next;
	else
		t->v[p->prev].next = p->next;
	if (p->next == PENDING_NONE)
		t->tail = p->prev;
	else
		t->v[p->next].prev = p->prev;
}

struct pending_req *pending_add(struct pending_table *t, enum pending_kind kind,
				uint64_t call_id, int64_t deadline_ns)
{
	uint32_t i = t->free_head;
	struct pending_req *p;

	if (i == PENDING_NONE)
		return NULL;
	p = &t->v[i];
	t->free_head = p->next;
	p->request_id = t->seq++ << t->index_bits | i;
	p->call_id = call_id;
	p->deadline_ns = deadline_ns;
	p->read_index = 0;
	p->seen_term = 0;
	p->lease_id = 0;
	p->lease_term = 0;
	p->ctx = NULL;
	p->tag = 0;
	p->kind = (uint8_t)kind;
	if (kind == PENDING_PROPOSE)
		t->proposals++;
	pending_link_sorted(t, i);
	t->count++;
	return p;
}

struct pending_req *pending_find(struct pending_table *t, uint64_t request_id)
{
	uint32_t i = (uint32_t)(request_id & (t->cap - 1));
	if (request_id == 0 || t->v[i].request_id != request_id)
		return NULL;
	return &t->v[i];
}

struct pending_req *pending_match(struct pending_table *t, const struct msg_origin *o,
				  enum pending_miss *why)
{
	enum pending_miss miss = PENDING_MISS_NONE;
	struct pending_req *p = NULL;

	if (o->member_id != t->self.member_id)
		miss = PENDING_MISS_MEMBER;
	else if (o->slot != t->self.slot)
		miss = PENDING_MISS_SLOT;
	else if (o->generation != t->self.generation)
		miss = PENDING_MISS_GENERATION;
	else if (!(p = pending_find(t, o->request_id)))
		miss = PENDING_MISS_UNKNOWN;
	if (miss != PENDING_MISS_NONE)
		t->misses[miss]++;
	if (why)
		*why = miss;
	return p;
}

void pending_set_kind(struct pending_table *t, struct pending_req *p, enum pending_kind kind)
{
	t->proposals += (kind == PENDING_PROPOSE) - (p->kind == PENDING_PROPOSE);
	p->kind = (uint8_t)kind;
}

void pending_set_deadline(struct pending_table *t, struct pending_req *p, int64_t deadline_ns)
{
	pending_unlink(t, p);
	p->deadline_ns = deadline_ns;
	pending_link_sorted(t, (uint32_t)(p - t->v));
}

void pending_origin(const struct pending_table *t, const struct pending_req *p,
		    struct msg_origin *o)
{
	*o = t->self;
	o->request_id = p->request_id;
}

void pending_remove(struct pending_table *t, struct pending_req *p)
{
	uint32_t i = (uint32_t)(p - t->v);

	pending_unlink(t, p);
	if (p->kind == PENDING_PROPOSE)
		t->proposals--;
	p->kind = 0;
	p->request_id = 0;
	p->ctx = NULL;
	p->prev = PENDING_NONE;
	p->next = t->free_head;
	t->free_head = i;
	t->count--;
}

struct pending_req *pending_first(struct pending_table *t)
{
	return t->head == PENDING_NONE ? NULL : &t->v[t->head];
}

struct pending_req *pending_next(struct pending_table *t, const struct pending_req *p)
{
	return p->next == PENDING_NONE ? NULL : &t->v[p->next];
}

int64_t pending_next_deadline(const struct pending_table *t)
{
	return t->head == PENDING_NONE ? INT64_MAX : t->v[t->head].deadline_ns;
}

const char *pending_miss_name(enum pending_miss why)
{
	switch (why) {
	case PENDING_MISS_MEMBER:
		return "another member";
	case PENDING_MISS_SLOT:
		return "another slot";
	case PENDING_MISS_GENERATION:
		return "another slot generation";
	case PENDING_MISS_UNKNOWN:
		return "no such request waits";
	default:
		return "none";
	}
}
