/*
 * Group commit and the WAL's disk requests: batching of everything
 * appended while a write is in flight (through the fault backend, which
 * holds requests until released), write and sync failures that fail the
 * WAL, and power cuts in the middle of a write at random points (seeded;
 * the seed is printed on failure). test_wal_uring runs the WAL over
 * io_uring.
 */
#include "wal_util.h"

#include "raftd/wal/wal.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"

static uint8_t bufs[256][2048];

static struct raft_entry entry(uint64_t index, uint64_t term, uint32_t len, int slot)
{
	return wt_entry(index, term, len, bufs[slot]);
}

static uint32_t len_of(uint64_t index) { return (uint32_t)(index * 53 % 700); }


/* A new WAL in dir over the fault backend with options fo. */
static struct wal *fault_wal(char *dir, size_t len, const char *name,
			     const struct diskio_fault_opts *fo, struct diskio **io)
{
	struct wal *w;
	struct wal_options o = { .segment_bytes = 1 << 20 };
	CHECK_EQ(diskio_fault_open(-1, fo, &o.io), 0);
	*io = o.io;
	wt_path(dir, len, name);
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	return w;
}

static void test_group_commit(void)
{
	char dir[512];
	struct diskio *io;
	struct wal_replay r;
	struct diskio_fault_opts fo = diskio_fault_defaults();

	fo.chain = DISKIO_FAULT_CHAIN_HELD;
	struct wal *w = fault_wal(dir, sizeof(dir), "gc", &fo, &io);
	CHECK(wal_idle(w));

	struct raft_entry e = entry(1, 1, len_of(1), 0);
	struct raft_hardstate hs = { 1, 1, 0 };
	CHECK_EQ(wal_save(w, &hs, &e, 1), 0);
	CHECK_EQ(wal_last_seq(w), 1);
	CHECK_EQ(wal_submit(w), 0);
	CHECK(diskio_fault_is_held(io));
	CHECK_EQ(wal_durable_seq(w), 0);

	/* 100 entries arrive, one at a time, while batch 1 is in flight;
	 * the event loop submits and reaps after each: nothing moves. */
	for (uint64_t i = 2; i <= 101; i++) {
		e = entry(i, 1, len_of(i), 0);
		hs.commit = i - 1;
		CHECK_EQ(wal_save(w, &hs, &e, 1), 0);
		CHECK_EQ(wal_submit(w), 0);
		CHECK_EQ(wal_reap(w), 0);
		CHECK_EQ(wal_last_seq(w), 2);
	}
	CHECK_EQ(io->chains, 1);
	CHECK(diskio_fault_release(io));
	wt_wait_event(w);
	CHECK_EQ(wal_reap(w), 1); /* batch 1 durable, batch 2 submitted */
	CHECK_EQ(wal_durable_seq(w), 1);
	CHECK_EQ(io->chains, 2);
	CHECK(diskio_fault_is_held(io));
	CHECK(diskio_fault_release(io));
	wt_wait_event(w);
	CHECK_EQ(wal_reap(w), 1);
	CHECK_EQ(wal_durable_seq(w), 2);
	CHECK(wal_idle(w));
	CHECK_EQ(io->chains, 2); /* 101 entries, 2 writes + syncs */
	CHECK_EQ(wal_reap(w), 0);
	diskio_fault_set_chain(io, DISKIO_FAULT_CHAIN_AT_SUBMIT);
	CHECK_EQ(wal_close(w), 0);

	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, 101);
	for (uint64_t i = 1; i <= 101; i++)
		CHECK(wt_entry_ok(&r.entries[i - 1], i, 1, len_of(i)));
	CHECK_EQ(r.state.commit, 100);
	wal_replay_free(&r);
}

/* The third request fails (fo says how) with err: the WAL is failed for
 * good, nothing reaches the file after it, and a reopen finds exactly the
 * two durable batches. */
static void sticky_run(const char *name, struct diskio_fault_opts fo, int err)
{
	char dir[512];
	struct diskio *io;
	struct wal_replay r;

	fo.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	fo.fail_errno = -err;
	struct wal *w = fault_wal(dir, sizeof(dir), name, &fo, &io);
	int rc = 0;
	uint64_t i;
	for (i = 1; i <= 10 && rc >= 0; i++) {
		struct raft_entry e = entry(i, 1, len_of(i), 0);
		CHECK_EQ(wal_save(w, NULL, &e, 1), 0);
		rc = wal_submit(w);
		if (rc == 0)
			rc = wal_reap(w);
	}
	CHECK_EQ(rc, err);
	CHECK_EQ(i, 4); /* the third request failed */
	CHECK_EQ(wal_durable_seq(w), 2);
	CHECK_EQ(wal_error(w), err);
	CHECK_EQ(diskio_failed(io), err);
	long ops = diskio_fault_ops(io);
	struct raft_entry e = entry(4, 1, 1, 0);
	CHECK_EQ(wal_save(w, NULL, &e, 1), err);
	CHECK_EQ(wal_sync(w), err);
	CHECK_EQ(diskio_fault_ops(io), ops); /* no write or sync was retried */
	CHECK_EQ(wal_close(w), err);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, 2);
	wal_replay_free(&r);
}

static void test_failure_is_sticky(void)
{
	struct diskio_fault_opts fo = diskio_fault_defaults();

	/* A write the file system refused. */
	fo.fail_write_at = 2;
	sticky_run("fail-write", fo, -ENOSPC);
	/* A sync that failed after its write landed: the fault backend drops
	 * the write, as the kernel may; it is never synced again. */
	fo = diskio_fault_defaults();
	fo.fail_sync_at = 2;
	sticky_run("fail-sync", fo, -EIO);
}

/* ---- power cuts at random points ---- */

struct model {
	uint32_t lens[4096]; /* of index i at [i - 1] */
	uint64_t terms[4096];
	uint64_t last;
};

static void model_apply(struct model *m, uint64_t index, uint64_t term, uint32_t len)
{
	m->terms[index - 1] = term;
	m->lens[index - 1] = len;
	m->last = index;
}

static bool model_matches(const struct model *m, const struct wal_replay *r)
{
	if (r->n_entries != m->last)
		return false;
	for (uint64_t i = 1; i <= m->last; i++)
		if (!wt_entry_ok(&r->entries[i - 1], i, m->terms[i - 1], m->lens[i - 1]))
			return false;
	return true;
}

struct batch_rec {
	uint64_t first, n, term; /* entries first..first+n-1 in term */
	uint64_t seq;
};

static uint64_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* One run: batches through a fault backend that tears its nth request,
 * then a reopen that must show every durable batch and a prefix of the
 * torn one. */
static void crash_run(uint64_t seed, unsigned *saw_partial)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct diskio_fault_opts fo = diskio_fault_defaults();
	uint64_t s = seed * 2654435761u + 1;
	struct wal_options o = { .segment_bytes = 4096 + rnd(&s) % 8192 };
	static struct model durable, cand;
	static struct batch_rec batches[512];
	size_t nb = 0;

	fo.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	fo.tear_write_at = (long)(rnd(&s) % 40);
	fo.seed = seed;
	CHECK_EQ(diskio_fault_open(-1, &fo, &o.io), 0);
	wt_path(dir, sizeof(dir), "crash");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	memset(&durable, 0, sizeof(durable));
	uint64_t last = 0, term = 1;
	int rc = 0;
	while (rc == 0 && nb < 200) {
		struct raft_entry ents[8];
		uint64_t n = 1 + rnd(&s) % 8, first = last + 1;
		if (last > 3 && rnd(&s) % 6 == 0) {
			first = last - 1 - rnd(&s) % 2; /* replace a suffix */
			term++;
		}
		for (uint64_t k = 0; k < n; k++) {
			uint64_t i = first + k;
			ents[k] = entry(i, term, (uint32_t)(rnd(&s) % 3 ? len_of(i) % 300 : len_of(i)),
					(int)k);
		}
		/* lengths must be reproducible: keep them in the batch record */
		struct raft_hardstate hs = { term, 1, first - 1 };
		CHECK_EQ(wal_save(w, &hs, ents, n), 0);
		batches[nb] = (struct batch_rec){ first, n, term, wal_last_seq(w) };
		static uint32_t lens[512][8];
		for (uint64_t k = 0; k < n; k++)
			lens[nb][k] = ents[k].len;
		nb++;
		last = first + n - 1;
		rc = wal_submit(w);
		while (rc == 0 && !wal_idle(w))
			rc = wal_reap(w) < 0 ? wal_error(w) : 0;
		/* the durable model: every batch up to durable_seq */
		memset(&durable, 0, sizeof(durable));
		for (size_t b = 0; b < nb; b++) {
			if (batches[b].seq > wal_durable_seq(w))
				break;
			for (uint64_t k = 0; k < batches[b].n; k++)
				model_apply(&durable, batches[b].first + k, batches[b].term, lens[b][k]);
		}
		if (rc) {
			/* The torn batch is the first one not durable (none:
			 * the tear hit a segment cut's header). */
			size_t tb = 0;
			while (tb < nb && batches[tb].seq <= wal_durable_seq(w))
				tb++;
			uint64_t tn = tb < nb ? batches[tb].n : 0;
			CHECK_EQ(wal_close(w), -EIO);
			CHECK_EQ(wal_open(dir, 0, 0, NULL, &w, &r), 0);
			bool ok = false;
			for (uint64_t p = 0; p <= tn && !ok; p++) {
				cand = durable;
				for (uint64_t k = 0; k < p; k++)
					model_apply(&cand, batches[tb].first + k, batches[tb].term,
						    lens[tb][k]);
				ok = model_matches(&cand, &r);
				if (ok && p > 0)
					(*saw_partial)++;
			}
			if (!ok)
				fprintf(stderr, "crash seed %llu: replay of %zu entries matches no "
					"prefix of the torn batch %zu\n", (unsigned long long)seed,
					r.n_entries, tb);
			CHECK(ok);
			wal_replay_free(&r);
			CHECK_EQ(wal_close(w), 0);
			wt_rm_tree(dir);
			return;
		}
	}
	/* tear_write_at beyond the run: nothing failed */
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK(model_matches(&durable, &r));
	wal_replay_free(&r);
	wt_rm_tree(dir);
}

static void test_power_cuts(void)
{
	unsigned partial = 0, runs = 300;
	const char *env = getenv("CETCD_WAL_CRASH_SEED");
	if (env) {
		crash_run(strtoull(env, NULL, 0), &partial);
		return;
	}
	for (uint64_t seed = 1; seed <= runs; seed++)
		crash_run(seed, &partial);
	printf("power cuts: %u runs, %u kept part of the torn batch\n", runs, partial);
	CHECK(partial > 0);
}

int main(void)
{
	log_set_level(LOG_LEVEL_FATAL); /* failures under test are logged too */
	wt_count_allocs();
	test_group_commit();
	test_failure_is_sticky();
	test_power_cuts();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_wal_commit: ok\n");
	return 0;
}
