/*
 * Unit tests for launcher/compactor.c's schedule: etcd 3.4's periodic
 * compactor (etcdserver/api/v3compactor/periodic.go) samples the revision
 * every min(P, 1h)/10, compacts first P after its start at the revision
 * sampled P ago, then every min(P, 1h) at the oldest of the last
 * P/interval + 1 samples, retries a failure a round later, and while
 * paused keeps sampling; the revision compactor (revision.go) compacts
 * every round at the current revision minus N, when above 0 and new.
 * Times are made up: one round is one interval.
 */
#include "shm_testlib.h"

#include "launcher/compactor.h"

#define MS 1000000LL
#define HOUR (3600LL * 1000 * MS)

/* The store's revision sampled at round k of the periodic tests. */
static int64_t rev_at(int64_t k)
{
	return 100 + 10 * k;
}

static void test_periodic_short(void)
{
	struct compactor c;
	int64_t iv = 200 * MS, compacted[8], at[8];
	size_t n = 0;

	CHECK_EQ(compactor_init(&c, "periodic", 2000 * MS, 0, 0), 0);
	CHECK_EQ(c.interval_ns, iv);
	CHECK_EQ(c.keep, 11);
	/* rounds 0..19 leading, 20..39 not, 40..45 leading again */
	for (int64_t k = 0; k < 46; k++) {
		compactor_sample(&c, rev_at(k));
		int64_t now = (k + 1) * iv;
		int64_t rev = compactor_due(&c, now, k < 20 || k >= 40, rev_at(k));
		if (rev) {
			CHECK(n < 8);
			compacted[n] = rev;
			at[n++] = k;
			compactor_done(&c, now, rev, true);
		}
	}
	compactor_free(&c);
	/* first at 2 s (round 9) at the revision of the start; then 2 s
	 * later (round 19) at the oldest of the 11 samples (round 9's); then
	 * paused; leading again at round 40, at once, at round 30's */
	CHECK_EQ(n, 3);
	CHECK_EQ(at[0], 9);
	CHECK_EQ(compacted[0], rev_at(0));
	CHECK_EQ(at[1], 19);
	CHECK_EQ(compacted[1], rev_at(19 - 10));
	CHECK_EQ(at[2], 40);
	CHECK_EQ(compacted[2], rev_at(40 - 10));
}

static void test_periodic_retry(void)
{
	struct compactor c;
	int64_t iv = 100 * MS;

	CHECK_EQ(compactor_init(&c, "periodic", 1000 * MS, 0, 0), 0);
	int64_t k = 0, rev = 0;
	for (; !rev; k++) {
		compactor_sample(&c, rev_at(k));
		rev = compactor_due(&c, (k + 1) * iv, true, rev_at(k));
	}
	CHECK_EQ(rev, rev_at(0));
	compactor_done(&c, k * iv, rev, false);
	/* failed: due again the next round, at the window's new oldest */
	compactor_sample(&c, rev_at(k));
	CHECK_EQ(compactor_due(&c, (k + 1) * iv, true, rev_at(k)), rev_at(k - 10));
	compactor_done(&c, (k + 1) * iv, rev_at(k - 10), true);
	k++;
	compactor_sample(&c, rev_at(k));
	CHECK_EQ(compactor_due(&c, (k + 1) * iv, true, rev_at(k)), 0);
	compactor_free(&c);
}

/* P over an hour: samples every 6 minutes, first compaction after P,
 * then hourly. */
static void test_periodic_long(void)
{
	struct compactor c;
	int64_t iv = 6 * 60 * 1000 * MS, last = -1;
	int count = 0;

	CHECK_EQ(compactor_init(&c, "periodic", 24 * HOUR, 0, 0), 0);
	CHECK_EQ(c.interval_ns, iv);
	CHECK_EQ(c.keep, 241);
	for (int64_t k = 0; k < 300; k++) { /* 30 hours */
		compactor_sample(&c, rev_at(k));
		int64_t now = (k + 1) * iv;
		int64_t rev = compactor_due(&c, now, true, rev_at(k));
		if (!rev)
			continue;
		CHECK_EQ(rev, rev_at(k >= 240 ? k - 240 : 0));
		CHECK(last < 0 ? now == 24 * HOUR : now - last == HOUR);
		last = now;
		count++;
		compactor_done(&c, now, rev, true);
	}
	CHECK_EQ(count, 7);
	compactor_free(&c);
}

static void test_revision(void)
{
	struct compactor c;

	CHECK_EQ(compactor_init(&c, "revision", 5, 0, COMPACTOR_REVISION_INTERVAL_NS), 0);
	CHECK_EQ(c.interval_ns, 5LL * 60 * 1000 * MS);
	compactor_sample(&c, 3); /* nothing to record */
	CHECK_EQ(compactor_due(&c, 0, true, 3), 0);   /* 3 - 5 <= 0 */
	CHECK_EQ(compactor_due(&c, 0, true, 5), 0);
	CHECK_EQ(compactor_due(&c, 0, true, 10), 5);
	compactor_done(&c, 0, 5, true);
	CHECK_EQ(compactor_due(&c, 0, true, 10), 0);  /* compacted already */
	CHECK_EQ(compactor_due(&c, 0, false, 12), 0); /* not leading */
	CHECK_EQ(compactor_due(&c, 0, true, 12), 7);
	compactor_done(&c, 0, 7, false);
	CHECK_EQ(compactor_due(&c, 0, true, 12), 7);  /* failed: again */
	compactor_free(&c);
}

static void test_init(void)
{
	struct compactor c;

	CHECK_EQ(compactor_init(&c, "", 5, 0, MS), -EINVAL);
	CHECK_EQ(compactor_init(&c, "periodic", 0, 0, MS), -EINVAL);
	CHECK_EQ(compactor_init(&c, "periodic", 9, 0, MS), -EINVAL); /* no interval */
	CHECK_EQ(compactor_init(&c, "revision", 5, 0, 0), -EINVAL);
	CHECK_EQ(compactor_init(&c, "periodic", HOUR, 0, 0), 0);
	CHECK_EQ(c.interval_ns, 6 * 60 * 1000 * MS);
	CHECK_EQ(c.keep, 11);
	compactor_free(&c);
}

int main(void)
{
	test_periodic_short();
	test_periodic_retry();
	test_periodic_long();
	test_revision();
	test_init();
	printf("test_compactor: ok\n");
	return 0;
}
