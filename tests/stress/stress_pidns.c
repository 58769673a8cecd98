/*
 * Stress: slot liveness is the kernel's word, not a pid (invariant 1,
 * docs/invariants.md, broken on purpose with pid reuse). Slot holders run
 * as pid 1 of fresh pid namespaces, so every holder has the same pid:
 *  - a holder that died is reclaimed (generation bumped) although another
 *    live process now has the pid it recorded (pid 1), and although pid 1
 *    exists in our own namespace too (a pid check would call it alive);
 *  - a live holder in another pid namespace, whose pid means nothing here,
 *    is never reclaimed.
 * Needs CAP_SYS_ADMIN for CLONE_NEWPID; exits 77 saying why otherwise.
 */
#include <sched.h>

#include "shm_testlib.h"

#include "shm/region.h"
#include "shm/slot.h"

static char dir[256], path[512];

enum { MSG_GLOBAL_PID = 1, MSG_CLAIMED, MSG_FAILED };

struct msg {
	int kind;
	int err;
	int64_t pid;
	uint32_t index;
	uint64_t generation;
};

struct holder {
	pid_t outer;  /* the helper in our namespace */
	pid_t global; /* the holder, as seen from here */
	pid_t ns_pid; /* the holder, as it sees itself */
	uint32_t index;
	uint64_t generation;
};

static void send_msg(int fd, const struct msg *m)
{
	if (write(fd, m, sizeof(*m)) != (ssize_t)sizeof(*m))
		_exit(90);
}

/*
 * Starts a slot holder as pid 1 of a new pid namespace: a helper child
 * unshares the namespace and forks the holder, which attaches, claims a
 * slot, reports, and waits to be killed. Returns 0, or the errno of a
 * refused unshare.
 */
static int holder_start(struct holder *h)
{
	struct msg m;
	int pfd[2], got = 0;

	CHECK_EQ(pipe(pfd), 0);
	h->outer = test_fork();
	CHECK(h->outer >= 0);
	if (h->outer == 0) {
		pid_t inner;

		close(pfd[0]);
		if (unshare(CLONE_NEWPID) != 0) {
			m = (struct msg){ .kind = MSG_FAILED, .err = errno };
			send_msg(pfd[1], &m);
			_exit(0);
		}
		inner = fork();
		if (inner < 0)
			_exit(91);
		if (inner == 0) {
			struct shm_region *r;
			struct shm_slot_ref s;

			if (shm_region_attach(path, &r) ||
			    shm_slot_claim(r, &s)) {
				m = (struct msg){ .kind = MSG_FAILED,
						  .err = 0 };
				send_msg(pfd[1], &m);
				_exit(92);
			}
			m = (struct msg){ .kind = MSG_CLAIMED,
					  .pid = getpid(), .index = s.index,
					  .generation = s.generation };
			send_msg(pfd[1], &m);
			for (;;)
				pause();
		}
		m = (struct msg){ .kind = MSG_GLOBAL_PID, .pid = inner };
		send_msg(pfd[1], &m);
		test_child_exit(test_wait(inner) == 128 + SIGKILL ? 0 : 93);
	}
	close(pfd[1]);
	while (got < 2) {
		CHECK_EQ(read(pfd[0], &m, sizeof(m)), (ssize_t)sizeof(m));
		if (m.kind == MSG_FAILED) {
			close(pfd[0]);
			test_wait(h->outer);
			CHECK(m.err != 0); /* a claim failure is a test failure */
			return m.err;
		}
		if (m.kind == MSG_GLOBAL_PID) {
			h->global = (pid_t)m.pid;
		} else {
			h->ns_pid = (pid_t)m.pid;
			h->index = m.index;
			h->generation = m.generation;
		}
		got++;
	}
	close(pfd[0]);
	return 0;
}

static void holder_kill(struct holder *h)
{
	kill(h->global, SIGKILL);
	CHECK_EQ(test_wait(h->outer), 0);
}

int main(void)
{
	struct shm_region_params p = { .slot_count = 4,
				       .max_request_bytes = 4096 };
	struct holder h1, h2, h3;
	struct shm_region *l, *me;
	struct shm_slot_ref s;
	uint64_t gen0;
	int rc;

	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &p, &l), 0);

	rc = holder_start(&h1);
	if (rc)
		SKIP("the kernel refused unshare(CLONE_NEWPID): %s (needs "
		     "CAP_SYS_ADMIN and pid namespaces)", strerror(rc));
	CHECK_EQ(h1.ns_pid, 1);
	CHECK(h1.global != 1);
	CHECK_EQ(h1.index, 0);
	CHECK_EQ(holder_start(&h2), 0);
	CHECK_EQ(h2.ns_pid, 1);
	CHECK_EQ(h2.index, 1);
	gen0 = shm_slot_generation(l, 0);
	CHECK_EQ(gen0, h1.generation);

	/* Both recorded pid 1; both are live. */
	CHECK_EQ(shm_slot_holder_pid(l, 0), 1);
	CHECK_EQ(shm_slot_holder_pid(l, 1), 1);
	CHECK(shm_slot_is_live(l, 0));
	CHECK(shm_slot_is_live(l, 1));

	holder_kill(&h1);
	/* pid 1 exists here and in h2's namespace: a pid check would keep the
	 * dead holder's slot forever. The kernel knows better. */
	CHECK_EQ(kill(1, 0), 0);
	CHECK_INVARIANT(INV1_SLOT_LIVENESS, !shm_slot_is_live(l, 0));
	CHECK_INVARIANT(INV1_SLOT_LIVENESS, shm_slot_is_live(l, 1));
	CHECK_EQ(shm_slot_generation(l, 0), gen0);

	/* A new holder, pid 1 again, gets the dead holder's slot. */
	CHECK_EQ(holder_start(&h3), 0);
	CHECK_EQ(h3.ns_pid, 1);
	CHECK_EQ(h3.index, 0);
	CHECK_INVARIANT_EQ(INV1_SLOT_LIVENESS, h3.generation, gen0 + 1);
	CHECK_EQ(shm_slot_generation(l, 0), gen0 + 1);

	/* Live holders in other namespaces are never reclaimed: we get the
	 * two free slots and then -ENOSPC. */
	CHECK_EQ(shm_region_attach(path, &me), 0);
	CHECK_EQ(shm_slot_claim(me, &s), 0);
	CHECK_EQ(s.index, 2);
	CHECK_EQ(shm_slot_claim(me, &s), 0);
	CHECK_EQ(s.index, 3);
	CHECK_EQ(shm_slot_claim(me, &s), -ENOSPC);
	CHECK(shm_slot_is_live(me, 0));
	CHECK(shm_slot_is_live(me, 1));
	CHECK_EQ(shm_slot_generation(l, 1), h2.generation);

	holder_kill(&h2);
	holder_kill(&h3);
	CHECK(!shm_slot_is_live(l, 0));
	CHECK(!shm_slot_is_live(l, 1));
	CHECK_EQ(shm_slot_claim(me, &s), 0);
	CHECK_EQ(s.index, 0);
	CHECK_EQ(s.generation, gen0 + 2);
	printf("stress_pidns: holders at pid 1 of three pid namespaces (pids "
	       "%d, %d, %d here); dead one reclaimed, live ones kept\n",
	       (int)h1.global, (int)h2.global, (int)h3.global);
	shm_region_detach(me);
	shm_region_detach(l);
	return 0;
}
