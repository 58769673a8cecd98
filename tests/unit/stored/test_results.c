/*
 * Unit tests for stored/results.c: a result reaches a slot only when its
 * origin names this member, a live slot and that slot's generation; a
 * dead slot, a reclaimed slot (older generation), another member's
 * request and an index out of range are dropped; a full ring drops the
 * result at once instead of blocking; a result too large for the ring
 * becomes an error result; staged results reach the gateway in order at
 * publish. Interim results (MSG_RESULT_INTERIM) follow the same rules:
 * the reclaimed slot's old generation and another member get none.
 * Separate region handles stand for separate processes; one slot
 * holder is a forked child that is killed.
 *
 * Breaks two invariants (docs/invariants.md) on purpose: invariant 2 with
 * results whose origin differs from a live request in one of member,
 * slot or generation (a killed holder, a reclaimed slot), and invariant 6
 * with a result ring nobody drains.
 */
#include "stored_util.h"

#include "base/clock/clock.h"
#include "stored/alloc.h"
#include "stored/results.h"

/* Stages into a full ring, each of which must return at once. */
#define FULL_STAGES 10000

static struct msg_result result(uint32_t slot, uint64_t gen, uint64_t rid, uint32_t len)
{
	struct msg_result h = {
		.origin = tst_origin(slot, gen, rid), .index = rid, .revision = rid + 1,
		.status = 0, .body_len = len,
	};
	return h;
}

/* A child that claims a slot, reports it, and waits to be killed. */
static pid_t hold_slot_in_child(const char *region_path, struct shm_slot_ref *out)
{
	int fds[2];
	pid_t pid;

	CHECK_EQ(pipe(fds), 0);
	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct shm_region *r;
		struct shm_slot_ref s;
		close(fds[0]);
		if (shm_region_attach(region_path, &r) || shm_slot_claim(r, &s))
			test_child_exit(1);
		if (write(fds[1], &s, sizeof(s)) != (ssize_t)sizeof(s))
			test_child_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	CHECK_EQ(read(fds[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(fds[0]);
	return pid;
}

static void test_routing(void)
{
	struct tst_member m;
	struct shm_region *st, *gw;
	struct shm_slot_ref s0, dead;
	struct stored_results rs;
	struct tst_result got = { 0 };
	struct msg_result h;
	struct ring *ring;
	const char body[] = "response-bytes";
	uint32_t staged = 0;
	pid_t child;

	tst_member_init(&m, 16 * 1024);
	st = tst_attach(&m);
	gw = tst_attach(&m);
	CHECK_EQ(shm_role_claim(st, SHM_ROLE_STORED), 0);
	CHECK_EQ(shm_slot_claim(gw, &s0), 0);
	child = hold_slot_in_child(m.region_path, &dead);
	CHECK(dead.index != s0.index);
	CHECK(shm_slot_is_live(st, dead.index));
	kill(child, SIGKILL);
	CHECK_EQ(test_wait(child), 128 + SIGKILL);
	CHECK(!shm_slot_is_live(st, dead.index));

	CHECK_EQ(stored_results_init(&rs, st, TST_MEMBER), 0);
	ring = shm_slot_ring(gw, s0.index, SHM_SLOT_FROM_STORED);

	h = result(s0.index, s0.generation, 1, sizeof(body));
	CHECK_EQ(stored_results_stage(&rs, &h, body), STORED_RESULT_STAGED);
	/* nothing is visible before publish */
	CHECK(!ring_has_data(ring));

	h = result(s0.index, s0.generation, 2, sizeof(body));
	h.origin.member_id++;
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage(&rs, &h, body),
			   STORED_RESULT_FOREIGN);
	h = result(s0.index, s0.generation - 1, 3, sizeof(body));
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage(&rs, &h, body),
			   STORED_RESULT_OLD_GENERATION);
	h = result(s0.index, s0.generation + 1, 4, sizeof(body));
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage(&rs, &h, body),
			   STORED_RESULT_OLD_GENERATION);
	h = result(dead.index, dead.generation, 5, sizeof(body));
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage(&rs, &h, body),
			   STORED_RESULT_DEAD_SLOT);
	h = result(shm_slot_count(st), 1, 6, sizeof(body));
	CHECK_EQ(stored_results_stage(&rs, &h, body), STORED_RESULT_NO_SLOT);
	h = result(s0.index, s0.generation, 7, 0);
	h.status = 5;
	CHECK_EQ(stored_results_stage(&rs, &h, NULL), STORED_RESULT_STAGED);
	stored_results_publish(&rs);
	stored_results_wake(&rs);

	CHECK_EQ(tst_take_result(ring, &got), 0);
	CHECK_EQ(got.h.origin.request_id, 1);
	CHECK_EQ(got.h.origin.member_id, TST_MEMBER);
	CHECK_EQ(got.h.origin.slot, s0.index);
	CHECK_EQ(got.h.origin.generation, s0.generation);
	CHECK_EQ(got.h.index, 1);
	CHECK_EQ(got.h.revision, 2);
	CHECK_EQ(got.h.status, 0);
	CHECK(got.body.len == sizeof(body) && memcmp(got.body.p, body, sizeof(body)) == 0);
	CHECK_EQ(tst_take_result(ring, &got), 0);
	CHECK_EQ(got.h.origin.request_id, 7);
	CHECK_EQ(got.h.status, 5);
	CHECK_EQ(got.body.len, 0);
	CHECK_EQ(tst_take_result(ring, &got), -EAGAIN);

	/* the dead slot is claimed again: its old generation gets nothing, the
	 * new one does */
	{
		struct shm_region *gw2 = tst_attach(&m);
		struct shm_slot_ref again;
		CHECK_EQ(shm_slot_claim(gw2, &again), 0);
		CHECK_EQ(again.index, dead.index);
		CHECK(again.generation > dead.generation);
		h = result(dead.index, dead.generation, 8, sizeof(body));
		CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage(&rs, &h, body),
				   STORED_RESULT_OLD_GENERATION);
		h = result(again.index, again.generation, 9, sizeof(body));
		CHECK_EQ(stored_results_stage(&rs, &h, body), STORED_RESULT_STAGED);
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		CHECK_EQ(tst_take_result(shm_slot_ring(gw2, again.index, SHM_SLOT_FROM_STORED), &got),
			 0);
		CHECK_EQ(got.h.origin.request_id, 9);
		CHECK_EQ(tst_take_result(shm_slot_ring(gw2, again.index, SHM_SLOT_FROM_STORED), &got),
			 -EAGAIN);
		/* interim results: the old generation and another member get
		 * none, the new holder its own, as it was staged */
		struct msg_origin io = tst_origin(dead.index, dead.generation, 10);
		CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage_interim(&rs, &io, 10),
				   STORED_RESULT_OLD_GENERATION);
		io = tst_origin(again.index, again.generation, 11);
		io.member_id++;
		CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, stored_results_stage_interim(&rs, &io, 11),
				   STORED_RESULT_FOREIGN);
		io = tst_origin(again.index, again.generation, 12);
		CHECK_EQ(stored_results_stage_interim(&rs, &io, 12), STORED_RESULT_STAGED);
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		struct ring *r2 = shm_slot_ring(gw2, again.index, SHM_SLOT_FROM_STORED);
		struct ring_rec rec;
		struct msg_result_interim im;
		CHECK_EQ(ring_peek(r2, &rec), 0);
		CHECK_EQ(rec.type, MSG_RESULT_INTERIM);
		CHECK_EQ(rec.len, sizeof(im));
		memcpy(&im, rec.data, sizeof(im));
		CHECK(memcmp(&im.origin, &io, sizeof(io)) == 0);
		CHECK_EQ(im.index, 12);
		ring_release(r2, &rec);
		CHECK_EQ(ring_peek(r2, &rec), -EAGAIN);
		shm_region_detach(gw2);
	}

	/* a full ring drops at once; what was staged arrives in order */
	{
		uint32_t len = 1000;
		char *big = calloc(1, len);
		enum stored_results_verdict v;
		uint64_t rid = 100;
		CHECK(big != NULL);
		for (;;) {
			h = result(s0.index, s0.generation, rid, len);
			memcpy(big, &rid, sizeof(rid));
			v = stored_results_stage(&rs, &h, big);
			if (v != STORED_RESULT_STAGED)
				break;
			staged++;
			rid++;
		}
		CHECK_INVARIANT_EQ(INV6_APPLY_NEVER_BLOCKS, v, STORED_RESULT_RING_FULL);
		CHECK(staged > 10);
		/* Nobody drains, and a full ring answers at once every time:
		 * 10000 stages take far less than the 30 s that a wait of 3 ms
		 * each would (a wait for room would never end). */
		int64_t t0 = clock_now_ns();
		for (int i = 0; i < FULL_STAGES; i++) {
			CHECK_INVARIANT_EQ(INV6_APPLY_NEVER_BLOCKS, stored_results_stage(&rs, &h, big),
					   STORED_RESULT_RING_FULL);
			CHECK_INVARIANT(INV6_APPLY_NEVER_BLOCKS,
					clock_now_ns() - t0 < 30000000000ll);
		}
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		for (uint32_t i = 0; i < staged; i++) {
			uint64_t first;
			CHECK_EQ(tst_take_result(ring, &got), 0);
			CHECK_EQ(got.h.origin.request_id, 100 + i);
			memcpy(&first, got.body.p, sizeof(first));
			CHECK_EQ(first, 100 + i);
		}
		CHECK_EQ(tst_take_result(ring, &got), -EAGAIN);
		/* room again */
		CHECK_EQ(stored_results_stage(&rs, &h, big), STORED_RESULT_STAGED);
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		CHECK_EQ(tst_take_result(ring, &got), 0);
		free(big);
	}

	/* larger than the ring's largest record: an error result instead */
	{
		uint32_t len = ring_max_record(ring) + 1;
		char *huge = calloc(1, len);
		CHECK(huge != NULL);
		h = result(s0.index, s0.generation, 500, len);
		CHECK_EQ(stored_results_stage(&rs, &h, huge), STORED_RESULT_TOO_LARGE);
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		CHECK_EQ(tst_take_result(ring, &got), 0);
		CHECK_EQ(got.h.origin.request_id, 500);
		CHECK_EQ(got.h.status, 8);
		CHECK(tst_body_is(&got, "etcdserver: the response is larger than the result ring carries"));
		free(huge);
	}

	/* publish makes the round visible without waking anyone; wake then
	 * rings the doorbell of a gateway that sleeps */
	{
		struct test_sleeper sl;
		test_sleeper_start(&sl, shm_slot_doorbell(gw, s0.index));
		h = result(s0.index, s0.generation, 600, 0);
		CHECK_EQ(stored_results_stage(&rs, &h, NULL), STORED_RESULT_STAGED);
		stored_results_publish(&rs);
		CHECK(ring_has_data(ring));
		CHECK_EQ(test_sleeper_wakes(&sl), 0);
		CHECK(!test_sleeper_rung(&sl));
		stored_results_wake(&rs);
		CHECK_EQ(test_sleeper_wakes(&sl), 1);
		CHECK(test_sleeper_rung(&sl));
		/* a round with nothing for the slot wakes nobody (the gateway
		 * still counted asleep) */
		stored_results_publish(&rs);
		stored_results_wake(&rs);
		CHECK_EQ(test_sleeper_wakes(&sl), 1);
		test_sleeper_stop(&sl);
		CHECK_EQ(tst_take_result(ring, &got), 0);
		CHECK_EQ(got.h.origin.request_id, 600);
	}

	/* with the interim results' */
	CHECK_EQ(rs.counts[STORED_RESULT_FOREIGN], 1 + 1);
	CHECK_EQ(rs.counts[STORED_RESULT_OLD_GENERATION], 3 + 1);
	CHECK_EQ(rs.counts[STORED_RESULT_DEAD_SLOT], 1);
	CHECK_EQ(rs.counts[STORED_RESULT_NO_SLOT], 1);
	CHECK_EQ(rs.counts[STORED_RESULT_RING_FULL], 1 + FULL_STAGES);
	CHECK_EQ(rs.counts[STORED_RESULT_TOO_LARGE], 1);
	CHECK_EQ(rs.counts[STORED_RESULT_STAGED], 3 + staged + 2 + 1);
	CHECK(strcmp(stored_results_verdict_name(STORED_RESULT_RING_FULL), "ring-full") == 0);

	stored_results_fini(&rs);
	tbuf_free(&got.body);
	shm_region_detach(gw);
	shm_region_detach(st);
	shm_region_detach(m.launcher);
	tst_member_clean(&m);
}

int main(void)
{
	test_routing();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_results: ok\n");
	return 0;
}
