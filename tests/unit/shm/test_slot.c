/*
 * Unit tests for shm/slot.c: roles and slots, their locks, generations,
 * liveness from the kernel, and what a new holder finds in the rings.
 * Separate handles (separate open file descriptions) stand for separate
 * processes; one test forks a real holder and kills it.
 *
 * test_reclaim_rings and test_killed_holder break invariant 1
 * (docs/invariants.md) on purpose: the holder goes without releasing
 * anything (its handle closed; SIGKILL), and the slot must read as dead at
 * once (the kernel dropped its lock) and be claimed again with its
 * generation bumped and nothing meant for the old holder in its rings
 * (invariant 2).
 */
#include "shm_testlib.h"

#include "shm/doorbell.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

static char dir[256], path[512];

static const struct shm_region_params params = {
	.slot_count = 4,
	.max_request_bytes = 16 * 1024,
};

static void test_claim_release_generation(void)
{
	struct shm_region *l, *a, *b;
	struct shm_slot_ref s0, s1, s;
	uint64_t floor;
	uint32_t i;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(shm_region_attach(path, &b), 0);
	/* a new region starts every slot at one random floor */
	floor = shm_slot_generation(l, 0);
	CHECK(floor > 0 && floor < (1ull << 62));
	for (i = 0; i < 4; i++) {
		CHECK(!shm_slot_is_live(l, i));
		CHECK_EQ(shm_slot_generation(l, i), floor);
	}
	CHECK(!shm_slot_is_live(l, 4)); /* out of range */
	CHECK(shm_slot_ring(l, 4, SHM_SLOT_TO_RAFTD) == NULL);
	CHECK(shm_slot_doorbell(l, 4) == NULL);

	CHECK_EQ(shm_slot_claim(a, &s0), 0);
	CHECK_EQ(s0.index, 0);
	CHECK_EQ(s0.generation, floor + 1);
	CHECK_EQ(shm_slot_holder_pid(b, 0), getpid());
	CHECK_EQ(shm_slot_claim(b, &s1), 0);
	CHECK_EQ(s1.index, 1);
	/* Both the holder and everyone else see the slot live. */
	CHECK(shm_slot_is_live(a, 0));
	CHECK(shm_slot_is_live(b, 0));
	CHECK(shm_slot_is_live(l, 0));
	CHECK(shm_slot_is_live(a, 1));
	CHECK(!shm_slot_is_live(l, 2));

	/* Releasing a stale reference does nothing. */
	s = s0;
	s.generation = floor + 7;
	shm_slot_release(a, &s);
	CHECK(shm_slot_is_live(l, 0));
	shm_slot_release(b, &s0); /* not b's slot */
	CHECK(shm_slot_is_live(l, 0));

	shm_slot_release(a, &s0);
	CHECK(!shm_slot_is_live(l, 0));
	CHECK_EQ(shm_slot_holder_pid(l, 0), 0);
	CHECK_EQ(shm_slot_claim(b, &s), 0);
	CHECK_EQ(s.index, 0);
	CHECK_EQ(s.generation, floor + 2); /* every claim bumps the generation */
	CHECK_EQ(shm_slot_generation(a, 0), floor + 2);

	/* All four taken: -ENOSPC with a message. */
	CHECK_EQ(shm_slot_claim(a, &s), 0);
	CHECK_EQ(shm_slot_claim(a, &s), 0);
	CHECK_EQ(shm_slot_claim(a, &s), -ENOSPC);
	CHECK(strstr(errmsg_get(-ENOSPC), "all 4 gateway slots"));
	/* Detaching drops every lock of the handle. */
	shm_region_detach(b);
	CHECK(!shm_slot_is_live(l, 0));
	CHECK(!shm_slot_is_live(l, 1));
	CHECK(shm_slot_is_live(l, 2));
	shm_region_detach(a);
	CHECK(!shm_slot_is_live(l, 2));
	shm_region_detach(l);
}

static void test_roles(void)
{
	struct shm_region *l, *a, *b;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(shm_region_attach(path, &b), 0);
	CHECK(!shm_role_is_live(l, SHM_ROLE_RAFTD));
	CHECK_EQ(shm_role_claim(a, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_role_claim(a, SHM_ROLE_RAFTD), 0); /* idempotent */
	CHECK_EQ(shm_role_claim(b, SHM_ROLE_RAFTD), -EBUSY);
	CHECK(strstr(errmsg_get(-EBUSY), "live raftd"));
	CHECK_EQ(shm_role_claim(b, SHM_ROLE_STORED), 0);
	CHECK(shm_role_is_live(l, SHM_ROLE_RAFTD));
	CHECK(shm_role_is_live(a, SHM_ROLE_RAFTD));
	CHECK(shm_role_is_live(l, SHM_ROLE_STORED));
	CHECK_EQ(shm_role_claim(a, (enum shm_role)5), -EINVAL);
	CHECK(shm_role_doorbell(a, (enum shm_role)5) == NULL);
	shm_role_release(a, SHM_ROLE_RAFTD);
	CHECK(!shm_role_is_live(l, SHM_ROLE_RAFTD));
	CHECK_EQ(shm_role_claim(b, SHM_ROLE_RAFTD), 0);
	shm_region_detach(b);
	CHECK(!shm_role_is_live(l, SHM_ROLE_RAFTD));
	CHECK(!shm_role_is_live(l, SHM_ROLE_STORED));
	CHECK_EQ(shm_role_claim(a, SHM_ROLE_STORED), 0);
	shm_region_detach(a);
	shm_region_detach(l);
}

/* A new holder of a slot finds the results meant for its predecessor gone,
 * while the requests its predecessor queued stay for raftd. */
static void test_reclaim_rings(void)
{
	struct shm_region *l, *gw, *gw2, *raftd, *stored;
	struct shm_slot_ref s, s2;
	struct ring_rec rec;
	struct ring *r;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &gw), 0);
	CHECK_EQ(shm_region_attach(path, &gw2), 0);
	CHECK_EQ(shm_region_attach(path, &raftd), 0);
	CHECK_EQ(shm_region_attach(path, &stored), 0);
	CHECK_EQ(shm_role_claim(raftd, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_role_claim(stored, SHM_ROLE_STORED), 0);
	CHECK_EQ(shm_slot_claim(gw, &s), 0);

	CHECK_EQ(ring_push(shm_slot_ring(gw, s.index, SHM_SLOT_TO_RAFTD), 1,
			   "proposal", 8), 0);
	CHECK_EQ(ring_push(shm_slot_ring(stored, s.index, SHM_SLOT_FROM_STORED),
			   2, "result-a", 8), 0);
	CHECK_EQ(ring_push(shm_slot_ring(stored, s.index, SHM_SLOT_FROM_STORED),
			   2, "result-b", 8), 0);
	CHECK_EQ(ring_push(shm_slot_ring(raftd, s.index, SHM_SLOT_FROM_RAFTD),
			   3, "notice", 6), 0);
	/* The gateway reads one result without releasing it, and dies. */
	r = shm_slot_ring(gw, s.index, SHM_SLOT_FROM_STORED);
	CHECK_EQ(ring_peek(r, &rec), 0);
	ring_consume(r, &rec);
	shm_region_detach(gw);

	CHECK_EQ(shm_slot_claim(gw2, &s2), 0);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, s2.index, s.index);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, s2.generation, s.generation + 1);
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY,
			   ring_peek(shm_slot_ring(gw2, s2.index, SHM_SLOT_FROM_STORED), &rec),
			   -EAGAIN);
	CHECK_EQ(ring_peek(shm_slot_ring(gw2, s2.index, SHM_SLOT_FROM_RAFTD),
			   &rec), -EAGAIN);
	/* The old request is still there for raftd. */
	r = shm_slot_ring(raftd, s.index, SHM_SLOT_TO_RAFTD);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 1);
	ring_release(r, &rec);
	/* And the rings keep working in both directions for the new holder. */
	CHECK_EQ(ring_push(shm_slot_ring(stored, s2.index, SHM_SLOT_FROM_STORED),
			   4, "new", 3), 0);
	r = shm_slot_ring(gw2, s2.index, SHM_SLOT_FROM_STORED);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 4);
	ring_release(r, &rec);
	CHECK_EQ(ring_push(shm_slot_ring(gw2, s2.index, SHM_SLOT_TO_STORED), 5,
			   "keepalive", 9), 0);
	r = shm_slot_ring(stored, s2.index, SHM_SLOT_TO_STORED);
	CHECK_EQ(ring_peek(r, &rec), 0);
	CHECK_EQ(rec.type, 5);
	ring_release(r, &rec);

	shm_region_detach(gw2);
	shm_region_detach(raftd);
	shm_region_detach(stored);
	shm_region_detach(l);
}

/* A real process holds a slot and is killed: the kernel drops its lock. */
static void test_killed_holder(void)
{
	struct shm_region *l, *a;
	struct shm_slot_ref s;
	uint64_t child_gen;
	int pipefd[2];
	pid_t pid;
	char c;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(pipe(pipefd), 0);
	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct shm_region *child;
		struct shm_slot_ref cs;

		if (shm_region_attach(path, &child) || shm_slot_claim(child, &cs))
			_exit(1);
		test_ready_and_pause(pipefd[1]);
	}
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	CHECK(shm_slot_is_live(l, 0));
	CHECK_EQ(shm_slot_holder_pid(l, 0), pid);
	child_gen = shm_slot_generation(l, 0);
	CHECK(child_gen > 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(shm_slot_claim(a, &s), 0);
	CHECK_EQ(s.index, 1); /* slot 0 is taken by the live child */
	kill(pid, SIGKILL);
	CHECK_EQ(test_wait(pid), 128 + SIGKILL);
	CHECK_INVARIANT(INV1_SLOT_LIVENESS, !shm_slot_is_live(l, 0));
	CHECK_EQ(shm_slot_claim(a, &s), 0);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, s.index, 0);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, s.generation, child_gen + 1);
	close(pipefd[0]);
	close(pipefd[1]);
	shm_region_detach(a);
	shm_region_detach(l);
}

int main(void)
{
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	test_claim_release_generation();
	test_roles();
	test_reclaim_rings();
	test_killed_holder();
	printf("test_slot: ok\n");
	return 0;
}
