/*
 * Unit tests for stored/events.c: a batch's events reach a consumer of
 * the ring in order, the last of a revision marked; a batch whose
 * records would take more than the ring holds is not collected past that
 * (its buffer stays within the ring's size) and publishes RESYNC alone,
 * after which the next batch's events go out again.
 */
#include "shm_testlib.h"

#include "shm/bcast.h"
#include "stored/events.h"
#include "stored/mvcc/mvcc_kv.h"

#define RING_BYTES (64u * 1024u)
#define MAXREC 4096u

static struct bcast *ring_new(void)
{
	size_t bytes = bcast_footprint(RING_BYTES);
	void *mem = NULL;

	CHECK(posix_memalign(&mem, 128, bytes) == 0);
	CHECK_EQ(bcast_init(mem, bytes, MAXREC), 0);
	return mem;
}

/* A delete of key at rev whose previous version had a value of vlen. */
static void delete_event(struct stored_events *e, int64_t rev, int64_t sub, const char *key,
			 size_t vlen)
{
	static uint8_t value[2048], prev[2400];
	struct mvcc_kv kv = { .key = (const uint8_t *)key, .key_len = strlen(key),
			      .value = value, .value_len = vlen, .create_rev = 1,
			      .mod_rev = rev - 1, .version = 1 };
	size_t plen = mvcc_kv_encoded_len(&kv);

	CHECK(plen <= sizeof(prev));
	mvcc_kv_encode(&kv, prev);
	struct mvcc_event ev = { .type = MVCC_EVENT_DELETE, .rev = { rev, sub },
				 .key = kv.key, .key_len = kv.key_len,
				 .prev_kv = prev, .prev_kv_len = plen };
	events_on_event(e, &ev);
}

/* Reads the next record: its type, and the decoded event for an EVENT. */
static uint32_t next_record(struct bcast *b, struct bcast_cursor *c, struct events_ev *ev)
{
	static uint8_t buf[MAXREC];
	struct bcast_rec rec;

	CHECK_EQ(bcast_read(b, c, &rec, buf, sizeof(buf)), 0);
	if (rec.type == EVENTS_REC_EVENT)
		CHECK_EQ(events_decode(buf, rec.len, ev), 0);
	return rec.type;
}

static void test_batch_within_the_ring(struct bcast *b, struct stored_events *e,
				       struct bcast_cursor *c)
{
	struct events_ev ev;

	delete_event(e, 5, 0, "a", 100);
	delete_event(e, 5, 1, "b", 100);
	delete_event(e, 6, 0, "c", 100);
	events_publish(e);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(next_record(b, c, &ev), EVENTS_REC_EVENT);
		CHECK(ev.is_delete);
		CHECK_EQ(ev.key_len, 1);
		CHECK_EQ(ev.key[0], "abc"[i]);
		CHECK_EQ(ev.main, i < 2 ? 5 : 6);
		CHECK_EQ(ev.last, i != 0);
		CHECK(ev.prev != NULL);
	}
	struct bcast_rec rec;
	uint8_t buf[16];
	CHECK_EQ(bcast_read(b, c, &rec, buf, sizeof(buf)), -EAGAIN);
}

/* Events of about 1 KiB each, four times what the ring holds, in one
 * batch: the consumer gets RESYNC and nothing else, never a lap. */
static void test_batch_larger_than_the_ring(struct bcast *b, struct stored_events *e,
					    struct bcast_cursor *c)
{
	struct events_ev ev;
	char key[32];
	size_t n = 4 * RING_BYTES / 1024;

	for (size_t i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "k%06zu", i);
		delete_event(e, 10, (int64_t)i, key, 1000);
		CHECK(e->len <= bcast_capacity(b));
	}
	CHECK(e->overflow);
	CHECK(e->cap <= 2 * bcast_capacity(b));
	uint64_t resyncs = e->resyncs;
	events_publish(e);
	CHECK_EQ(e->resyncs, resyncs + 1);
	CHECK_EQ(next_record(b, c, &ev), EVENTS_REC_RESYNC);
	struct bcast_rec rec;
	uint8_t buf[16];
	CHECK_EQ(bcast_read(b, c, &rec, buf, sizeof(buf)), -EAGAIN);
	CHECK_EQ(c->laps, 0);
	/* the next batch is collected and published again */
	delete_event(e, 11, 0, "z", 10);
	events_publish(e);
	CHECK_EQ(next_record(b, c, &ev), EVENTS_REC_EVENT);
	CHECK_EQ(ev.main, 11);
	CHECK(ev.last);
}

int main(void)
{
	struct bcast *b = ring_new();
	struct stored_events e;
	struct bcast_cursor c = { 0 };
	struct events_ev ev;

	events_init(&e, b);
	bcast_cursor_init(b, &c);
	events_publish(&e); /* a new producer's RESYNC first */
	CHECK_EQ(next_record(b, &c, &ev), EVENTS_REC_RESYNC);
	test_batch_within_the_ring(b, &e, &c);
	test_batch_larger_than_the_ring(b, &e, &c);
	events_fini(&e);
	free(b);
	printf("test_events: ok\n");
	return 0;
}
