/*
 * Unit tests for shm/readers.c: claiming entries, registering at the
 * published txid, the oldest-reader query under a racing publisher, and
 * reaping the entries of a killed process (by lock, not pid).
 *
 * test_registration_race breaks invariant 3 (docs/invariants.md) on
 * purpose: the publisher moves on while the reader registers, and no
 * scan may ever miss the txid a registered reader holds.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "shm/readers.h"
#include "shm/region.h"
#include "shm/status.h"

static char dir[256], path[512];

static const struct shm_region_params params = {
	.slot_count = 4,
	.max_request_bytes = 4096,
};

static void publish(struct shm_region *r, uint64_t txid)
{
	struct status_stored st = { .txid = txid, .root_page = txid * 10 };

	status_stored_write(r, &st);
}

static void test_basic(void)
{
	struct shm_region *l, *stored, *gw, *gw2;
	struct status_stored st;
	uint32_t e1, e2, e3, n, i;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &stored), 0);
	CHECK_EQ(shm_region_attach(path, &gw), 0);
	CHECK_EQ(shm_region_attach(path, &gw2), 0);
	n = readers_count(gw);
	CHECK(n >= 4 * 4);
	CHECK_EQ(readers_oldest(stored), READERS_IDLE);

	publish(stored, 5);
	CHECK_EQ(readers_claim(gw, &e1), 0);
	CHECK_EQ(readers_claim(gw2, &e2), 0);
	CHECK(e1 != e2);
	CHECK_EQ(readers_begin(gw2, e1, &st), -EINVAL); /* not gw2's entry */
	CHECK_EQ(readers_begin(gw, e1, &st), 0);
	CHECK_EQ(st.txid, 5);
	CHECK_EQ(st.root_page, 50);
	CHECK_EQ(readers_txid(stored, e1), 5);
	publish(stored, 6);
	CHECK_EQ(readers_begin(gw2, e2, &st), 0);
	CHECK_EQ(st.txid, 6);
	CHECK_EQ(readers_oldest(stored), 5);
	readers_end(gw, e1);
	CHECK_EQ(readers_txid(stored, e1), READERS_IDLE);
	CHECK_EQ(readers_oldest(stored), 6);
	readers_end(gw2, e2);
	CHECK_EQ(readers_oldest(stored), READERS_IDLE);

	/* Live owners are never reaped, even when reading. */
	CHECK_EQ(readers_begin(gw, e1, &st), 0);
	CHECK_EQ(readers_reap(stored), 0);
	CHECK_EQ(readers_oldest(stored), 6);
	/* An owner that detaches without ending leaves a stale entry, which
	 * stays pinned until reaped. */
	shm_region_detach(gw);
	CHECK_EQ(readers_oldest(stored), 6);
	CHECK_EQ(readers_reap(stored), 1);
	CHECK_EQ(readers_oldest(stored), READERS_IDLE);

	/* Every entry taken: -ENOSPC. */
	for (i = 0; i < n - 1; i++)
		CHECK_EQ(readers_claim(gw2, &e3), 0);
	CHECK_EQ(readers_claim(gw2, &e3), -ENOSPC);
	CHECK(strstr(errmsg_get(-ENOSPC), "reader entries"));
	readers_release(gw2, e2);
	CHECK_EQ(readers_claim(stored, &e3), 0);
	CHECK_EQ(e3, e2);
	shm_region_detach(gw2);
	shm_region_detach(stored);
	shm_region_detach(l);
}

/* A reader process killed mid-transaction pins its txid until reaped; a
 * pid check is never involved (the entry's pid is only informational). */
static void test_killed_reader(void)
{
	struct shm_region *l, *stored;
	int pipefd[2];
	pid_t pid;
	char c;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &stored), 0);
	publish(stored, 40);
	CHECK_EQ(pipe(pipefd), 0);
	pid = test_fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct shm_region *gw;
		struct status_stored st;
		uint32_t e;

		if (shm_region_attach(path, &gw) || readers_claim(gw, &e) ||
		    readers_begin(gw, e, &st) || st.txid != 40)
			_exit(1);
		test_ready_and_pause(pipefd[1]);
	}
	CHECK_EQ(read(pipefd[0], &c, 1), 1);
	publish(stored, 41);
	CHECK_EQ(readers_oldest(stored), 40);
	CHECK_EQ(readers_reap(stored), 0); /* alive */
	kill(pid, SIGKILL);
	CHECK_EQ(test_wait(pid), 128 + SIGKILL);
	CHECK_EQ(readers_oldest(stored), 40);
	CHECK_EQ(readers_reap(stored), 1);
	CHECK_EQ(readers_oldest(stored), READERS_IDLE);
	close(pipefd[0]);
	close(pipefd[1]);
	shm_region_detach(stored);
	shm_region_detach(l);
}

/*
 * The registration protocol against a publisher that keeps moving: once a
 * reader's begin returned txid T and the reader says so, every oldest-
 * reader scan the publisher makes after it publishes is <= T, until the
 * reader ends. And the other side of it: a scan made after publishing a
 * txid above T that missed the reader (found nothing <= T) must have made
 * the reader's re-check see the newer txid and retry, so no begin returns
 * T once such a scan is done. The publisher leaves each scan's txid and
 * result in `last_scan` for the reader to look at after its begin.
 */
struct race {
	struct shm_region *stored, *gw;
	uint32_t entry;
	_Atomic uint64_t pinned; /* txid the reader holds */
	_Atomic uint64_t phase;  /* odd while the reader holds `pinned` */
	_Atomic uint64_t last_scan; /* published txid << 32 | its scan's oldest */
	atomic_int stop;
	uint64_t scans;
	_Atomic uint64_t begins;
};

static void *race_reader(void *arg)
{
	struct race *ra = arg;
	struct status_stored st;

	while (!atomic_load(&ra->stop)) {
		CHECK_EQ(readers_begin(ra->gw, ra->entry, &st), 0);
		uint64_t scan = atomic_load(&ra->last_scan);
		if (scan >> 32 > st.txid && (scan & 0xffffffffu) > st.txid) {
			fprintf(stderr, "begin returned txid %llu after the scan that followed the "
				"publish of %llu found oldest %llu\n", (unsigned long long)st.txid,
				(unsigned long long)(scan >> 32),
				(unsigned long long)(scan & 0xffffffffu));
			CHECK_INVARIANT(INV3_READERS, !"a scan missed a registered reader");
		}
		atomic_store(&ra->pinned, st.txid);
		atomic_fetch_add(&ra->phase, 1);
		sched_yield();
		atomic_fetch_add(&ra->phase, 1);
		readers_end(ra->gw, ra->entry);
		atomic_fetch_add(&ra->begins, 1);
	}
	return NULL;
}

static void test_registration_race(void)
{
	struct shm_region *l;
	static struct race ra;
	uint64_t txid = 100, start, pinned, oldest, phase, checked = 0;
	pthread_t t;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &ra.stored), 0);
	CHECK_EQ(shm_region_attach(path, &ra.gw), 0);
	CHECK_EQ(readers_claim(ra.gw, &ra.entry), 0);
	publish(ra.stored, txid);
	atomic_init(&ra.pinned, 0);
	atomic_init(&ra.phase, 0);
	atomic_init(&ra.last_scan, 0);
	atomic_init(&ra.stop, 0);
	CHECK_EQ(pthread_create(&t, NULL, race_reader, &ra), 0);
	/* At least 300 ms, 100 checked scans and 5000 registrations (the
	 * chances to catch a begin that returned too early), at most 20 s;
	 * only the checked scans are required. */
	start = clock_now_ns();
	while (clock_now_ns() - start < 300 * 1000000ull || checked < 100 ||
	       atomic_load(&ra.begins) < 5000) {
		if (clock_now_ns() - start > 20000 * 1000000ull)
			break;
		publish(ra.stored, ++txid);
		phase = atomic_load(&ra.phase);
		pinned = atomic_load(&ra.pinned);
		oldest = readers_oldest(ra.stored);
		atomic_store(&ra.last_scan,
			     txid << 32 | (oldest < 0xffffffffu ? oldest : 0xffffffffu));
		/* The reader held `pinned` through the whole scan. */
		if ((phase & 1) && atomic_load(&ra.phase) == phase) {
			CHECK_INVARIANT(INV3_READERS, oldest <= pinned);
			checked++;
		}
		ra.scans++;
	}
	atomic_store(&ra.stop, 1);
	pthread_join(t, NULL);
	printf("readers race: %llu publishes, %llu registrations, %llu scans "
	       "during a registration\n", (unsigned long long)ra.scans,
	       (unsigned long long)atomic_load(&ra.begins), (unsigned long long)checked);
	CHECK(checked >= 100);
	CHECK(atomic_load(&ra.begins) > 0);
	shm_region_detach(ra.gw);
	shm_region_detach(ra.stored);
	shm_region_detach(l);
}

int main(void)
{
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	test_basic();
	test_killed_reader();
	test_registration_race();
	printf("test_readers: ok\n");
	return 0;
}
