/*
 * Invariant 9 (docs/invariants.md) on the gateway's side: a watch
 * stream's progress answers (to a ProgressRequest, and the interval's
 * notifications) name the revision the gateway has delivered on that
 * stream, never a newer root stored has published. The test plays stored
 * as stored/loop.c does (an MVCC batch, the root published in the
 * status, then the batch's events on the region's event ring), but holds
 * a batch's events back after publishing its root: the window between
 * the two that a real stored also has. gatewayd/services/watch.c runs as
 * gatewayd runs it, with a gRPC client over a socket pair.
 */
#include "gw_harness.h"
#include "base/clock/clock.h"

#define MAX_REQ (64u * 1024u)
/* A progress notification every 100 ms: the test waits for two. */
#define PROGRESS_NS (100ll * 1000000)
/* How long any awaited answer may take on a loaded machine. */
#define WAIT_NS (30ull * 1000000000)

/* ---- the stream ---- */

static void send_watch(struct tc_stream *s, const Etcdserverpb__WatchRequest *req)
{
	uint8_t buf[256];
	CHECK(etcdserverpb__watch_request__get_packed_size(req) <= sizeof(buf));
	size_t len = etcdserverpb__watch_request__pack(req, buf);
	tc_queue_message(&tc, s, 0, buf, len, false);
	spin(1);
}

/* ---- what the stream says ---- */

/* The stream's responses read so far, decoded in order. */
struct seen {
	int n;                      /* responses looked at */
	int64_t last_event_rev;     /* highest event revision received */
	int asked;                  /* answers to ProgressRequests (watch id -1) */
	int64_t asked_rev;          /* the last one's revision */
	int ticks;                  /* the interval's notifications (the watcher's id) */
	int64_t tick_rev;           /* the last one's revision */
};

/* Reads the responses that came since the last call. Every progress
 * answer (no events, neither created nor canceled) must name a revision
 * whose events, as far as they concern the watcher, have come before it:
 * held_rev, when not 0, is a revision whose event for the watcher has
 * not been let out of stored yet. */
static void read_responses(struct tc_stream *s, struct seen *sn, int64_t held_rev)
{
	while (sn->n < tc_message_count(s)) {
		size_t len = 0;
		const uint8_t *m = tc_message(s, sn->n++, &len);
		CHECK(m != NULL);
		Etcdserverpb__WatchResponse *r = etcdserverpb__watch_response__unpack(NULL, len, m);
		CHECK(r != NULL && r->header != NULL);
		for (size_t i = 0; i < r->n_events; i++) {
			int64_t rev = r->events[i]->kv->mod_revision;
			if (rev > sn->last_event_rev)
				sn->last_event_rev = rev;
		}
		if (!r->n_events && !r->created && !r->canceled) {
			if (r->watch_id == -1) {
				sn->asked++;
				sn->asked_rev = r->header->revision;
			} else {
				CHECK_EQ(r->watch_id, 0);
				sn->ticks++;
				sn->tick_rev = r->header->revision;
			}
			CHECK_INVARIANT(INV9_WATCH_DELIVERED,
					!held_rev || r->header->revision < held_rev);
		}
		etcdserverpb__watch_response__free_unpacked(r, NULL);
	}
}

/* Turns until pred(sn) holds, reading the responses (WAIT_NS at most). */
static void wait_for(struct tc_stream *s, struct seen *sn, int64_t held_rev,
		     bool (*pred)(const struct seen *, int64_t), int64_t arg)
{
	int64_t end = clock_now_ns() + WAIT_NS;
	for (;;) {
		read_responses(s, sn, held_rev);
		if (pred(sn, arg))
			return;
		CHECK(!s->closed);
		CHECK(clock_now_ns() < end);
		spin(1);
	}
}

static bool got_event(const struct seen *sn, int64_t rev)
{
	return sn->last_event_rev >= rev;
}

static bool got_answer(const struct seen *sn, int64_t count)
{
	return sn->asked >= count;
}

static bool got_tick(const struct seen *sn, int64_t count)
{
	return sn->ticks >= count;
}

/* ---- the cases ---- */

static void request_progress(struct tc_stream *s)
{
	Etcdserverpb__WatchRequest req;
	Etcdserverpb__WatchProgressRequest pr;

	etcdserverpb__watch_request__init(&req);
	etcdserverpb__watch_progress_request__init(&pr);
	req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST;
	req.progress_request = &pr;
	send_watch(s, &req);
}

/* A watcher on "a" that has every event up to r2 from the ring; a put
 * of "a" at r3 whose root is published but whose events are not on the
 * ring yet. Progress, asked for and by the interval, must say r2 (what
 * the stream got), not r3; once the events go out, r3. */
static void test_progress_names_delivered(void)
{
	Etcdserverpb__WatchRequest req;
	Etcdserverpb__WatchCreateRequest cr;
	struct seen sn = { 0 };

	etcdserverpb__watch_request__init(&req);
	etcdserverpb__watch_create_request__init(&cr);
	cr.key.data = (uint8_t *)"a";
	cr.key.len = 1;
	cr.progress_notify = true;
	req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	req.create_request = &cr;
	struct tc_stream *s = tc_request(&tc, "/etcdserverpb.Watch/Watch", NULL);
	send_watch(s, &req);

	/* an event through the ring: the watcher is live on it */
	int64_t r2 = db_put("a", "2");
	wait_for(s, &sn, 0, got_event, r2);
	request_progress(s);
	wait_for(s, &sn, 0, got_answer, sn.asked + 1);
	CHECK_INVARIANT_EQ(INV9_WATCH_DELIVERED, sn.asked_rev, r2);

	/* the root of r3 is published, its event is not on the ring */
	int64_t r3 = gwh_put_root("a", "3");
	CHECK(r3 > r2);
	request_progress(s);
	wait_for(s, &sn, r3, got_answer, sn.asked + 1);
	CHECK_INVARIANT_EQ(INV9_WATCH_DELIVERED, sn.asked_rev, r2);
	/* the interval's notifications for the watcher (id 0) say the
	 * same: two, as the first after an event may be elided */
	wait_for(s, &sn, r3, got_tick, sn.ticks + 2);
	CHECK_INVARIANT_EQ(INV9_WATCH_DELIVERED, sn.tick_rev, r2);
	CHECK_EQ(sn.last_event_rev, r2);

	/* the events go out: the watcher gets r3, and progress names it */
	gwh_publish_events();
	wait_for(s, &sn, 0, got_event, r3);
	request_progress(s);
	wait_for(s, &sn, 0, got_answer, sn.asked + 1);
	CHECK_INVARIANT_EQ(INV9_WATCH_DELIVERED, sn.asked_rev, r3);
	tc_cancel(&tc, s);
	spin(2);
}

static void tune(struct cetcd_config *c)
{
	c->experimental_watch_progress_notify_interval_ns = PROGRESS_NS;
}

int main(void)
{
	struct gw_params p = { .request_timeout_ns = 5ll * 1000000000, .pending_cap = 8 };

	gwh_start(&p, MAX_REQ, NULL, 0, tune);
	gwh_hello();
	gwh_open_db();
	db_put("a", "1");
	test_progress_names_delivered();
	gwh_stop();
	printf("test_watch_progress: ok\n");
	return 0;
}
