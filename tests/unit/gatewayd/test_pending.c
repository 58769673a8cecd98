/*
 * Unit tests for gatewayd/pending.c: request ids (unique, never reused,
 * found in O(1), dead once removed), request identity (an answer is
 * matched only when member id, slot, generation and request id all
 * match), the deadline order (also after pending_set_deadline moves an
 * entry later or earlier), the bound, and a randomized run against a
 * plain model.
 */
#include "shm_testlib.h"

#include "gatewayd/pending.h"

static const struct msg_origin self = { .member_id = 0x1234, .slot = 3, .generation = 7 };

static void test_identity(void)
{
	struct pending_table t;
	struct msg_origin o;
	enum pending_miss why;

	CHECK_EQ(pending_init(&t, 8, &self), 0);
	struct pending_req *p = pending_add(&t, PENDING_PROPOSE, 99, 1000);
	CHECK(p != NULL);
	CHECK(p->request_id != 0 && p->request_id != 1);
	pending_origin(&t, p, &o);
	CHECK(o.member_id == 0x1234 && o.slot == 3 && o.generation == 7);
	CHECK(o.request_id == p->request_id);

	CHECK(pending_match(&t, &o, &why) == p);
	CHECK_EQ(why, PENDING_MISS_NONE);

	struct msg_origin bad = o;
	bad.member_id = 0x9999;
	CHECK(pending_match(&t, &bad, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_MEMBER);
	bad = o;
	bad.slot = 4;
	CHECK(pending_match(&t, &bad, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_SLOT);
	bad = o;
	bad.generation = 6; /* the slot's previous holder */
	CHECK(pending_match(&t, &bad, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_GENERATION);
	bad = o;
	bad.request_id = o.request_id + (1u << t.index_bits); /* same index, other id */
	CHECK(pending_match(&t, &bad, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_UNKNOWN);
	bad.request_id = 0;
	CHECK(pending_match(&t, &bad, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_UNKNOWN);
	CHECK_EQ(t.misses[PENDING_MISS_MEMBER], 1);
	CHECK_EQ(t.misses[PENDING_MISS_SLOT], 1);
	CHECK_EQ(t.misses[PENDING_MISS_GENERATION], 1);
	CHECK_EQ(t.misses[PENDING_MISS_UNKNOWN], 2);

	/* once removed, its id is dead, even when the entry is reused */
	pending_remove(&t, p);
	CHECK(pending_match(&t, &o, &why) == NULL);
	CHECK_EQ(why, PENDING_MISS_UNKNOWN);
	struct pending_req *q = pending_add(&t, PENDING_PROPOSE, 100, 1000);
	CHECK(q == p); /* same entry ... */
	CHECK(q->request_id != o.request_id); /* ... new id */
	CHECK(pending_match(&t, &o, NULL) == NULL);
	pending_fini(&t);
}

static void test_bound_and_order(void)
{
	struct pending_table t;
	struct pending_req *v[16];

	CHECK_EQ(pending_init(&t, 5, &self), 0); /* rounded up to 8 */
	CHECK_EQ(t.cap, 8);
	CHECK(pending_first(&t) == NULL);
	CHECK(pending_next_deadline(&t) == INT64_MAX);
	for (int i = 0; i < 8; i++) {
		v[i] = pending_add(&t, PENDING_READ_INDEX, (uint64_t)i, 100 + 10 * i);
		CHECK(v[i] != NULL);
	}
	CHECK(pending_full(&t));
	CHECK(pending_add(&t, PENDING_PROPOSE, 9, 500) == NULL);
	CHECK(pending_first(&t) == v[0]);
	CHECK_EQ(pending_next_deadline(&t), 100);
	/* removing from the middle and the head keeps the order */
	pending_remove(&t, v[3]);
	pending_remove(&t, v[0]);
	CHECK(pending_first(&t) == v[1]);
	/* an earlier deadline goes before later ones */
	struct pending_req *early = pending_add(&t, PENDING_PROPOSE, 50, 105);
	CHECK(early != NULL);
	CHECK(pending_first(&t) == early); /* 105 before v[1]'s 110 */
	pending_remove(&t, early);
	CHECK(pending_first(&t) == v[1]);
	pending_remove(&t, v[1]);
	CHECK(pending_first(&t) == v[2]);
	/* a deadline moved on: the head goes to the tail, its id stays */
	uint64_t id2 = v[2]->request_id;
	pending_set_deadline(&t, v[2], 1000);
	CHECK(v[2]->request_id == id2 && pending_find(&t, id2) == v[2]);
	CHECK(pending_first(&t) == v[4]);
	CHECK_EQ(pending_next_deadline(&t), 140);
	{
		struct pending_req *p = pending_first(&t), *prev = NULL;
		int n = 0;
		for (; p; prev = p, p = pending_next(&t, p), n++)
			CHECK(!prev || prev->deadline_ns <= p->deadline_ns);
		CHECK(prev == v[2]);
		CHECK_EQ(n, 5); /* v[4..7] and v[2] */
	}
	/* moved into the middle, then to the head */
	pending_set_deadline(&t, v[2], 155);
	CHECK(pending_next(&t, v[5]) == v[2] && pending_next(&t, v[2]) == v[6]);
	pending_set_deadline(&t, v[2], 1);
	CHECK(pending_first(&t) == v[2]);
	CHECK(pending_next(&t, v[2]) == v[4]);
	pending_remove(&t, v[2]);
	CHECK(pending_first(&t) == v[4]);
	CHECK_EQ(t.count, 4);
	pending_fini(&t);

	/* ids stay unique across many reuses */
	CHECK_EQ(pending_init(&t, 2, &self), 0);
	uint64_t last = 0;
	for (int i = 0; i < 10000; i++) {
		struct pending_req *p = pending_add(&t, PENDING_PROPOSE, (uint64_t)i, i);
		CHECK(p != NULL);
		CHECK(p->request_id > last); /* the sequence only grows */
		last = p->request_id;
		pending_remove(&t, p);
	}
	pending_fini(&t);
	CHECK_EQ(pending_init(&t, 0, &self), -EINVAL);
}

/* Deadline order against a model, with random adds, removes and expiries. */
static void test_model(void)
{
	struct pending_table t;
	enum { CAP = 64 };
	static struct {
		uint64_t id;
		int64_t deadline;
		bool live;
	} m[100000];
	int n = 0, live = 0;
	uint64_t seed = 12345;

	CHECK_EQ(pending_init(&t, CAP, &self), 0);
	int64_t now = 0;
	for (int step = 0; step < 100000; step++) {
		seed = test_mix(seed + 1);
		int op = (int)(seed % 10);
		if (op < 5) {
			now += (int64_t)(seed >> 8) % 3;
			int64_t dl = now + 50 + (op == 0 ? -(int64_t)((seed >> 16) % 40) : 0);
			struct pending_req *p = pending_add(&t, PENDING_PROPOSE, (uint64_t)n, dl);
			if (live == CAP) {
				CHECK(p == NULL);
				continue;
			}
			CHECK(p != NULL);
			CHECK(n < 100000);
			m[n].id = p->request_id;
			m[n].deadline = dl;
			m[n].live = true;
			n++;
			live++;
		} else if (op == 5 && n > 0) {
			/* a deadline moved on (or back) */
			int i = (int)((seed >> 12) % (uint64_t)n);
			struct pending_req *p = pending_find(&t, m[i].id);
			CHECK((p != NULL) == m[i].live);
			if (p) {
				int64_t dl = now + (int64_t)((seed >> 20) % 100);
				pending_set_deadline(&t, p, dl);
				m[i].deadline = dl;
				CHECK(pending_find(&t, m[i].id) == p);
			}
		} else if (op < 8 && n > 0) {
			int i = (int)((seed >> 12) % (uint64_t)n);
			struct pending_req *p = pending_find(&t, m[i].id);
			CHECK((p != NULL) == m[i].live);
			if (p) {
				pending_remove(&t, p);
				m[i].live = false;
				live--;
			}
		} else {
			/* expire: the head is always the live entry with the smallest deadline */
			struct pending_req *p = pending_first(&t);
			int64_t best = INT64_MAX;
			for (int i = 0; i < n; i++)
				if (m[i].live && m[i].deadline < best)
					best = m[i].deadline;
			if (!p) {
				CHECK(best == INT64_MAX);
				continue;
			}
			CHECK_EQ(p->deadline_ns, best);
			/* and the whole list is in order, every live entry on it */
			int on = 0;
			for (const struct pending_req *q = p, *prev = NULL; q;
			     prev = q, q = pending_next(&t, q), on++)
				CHECK(!prev || prev->deadline_ns <= q->deadline_ns);
			CHECK_EQ(on, live);
			for (int i = 0; i < n; i++)
				if (m[i].id == p->request_id && m[i].live) {
					m[i].live = false;
					live--;
				}
			pending_remove(&t, p);
		}
	}
	pending_fini(&t);
}

int main(void)
{
	test_identity();
	test_bound_and_order();
	test_model();
	printf("gatewayd/test_pending: ok\n");
	return 0;
}
