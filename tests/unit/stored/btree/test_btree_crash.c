/*
 * Crash test of the B+tree engine: the db writes through the fault backend,
 * whose device is cut after a random number of operations (inside a commit,
 * between a checkpoint's freelist write and its sync, between the meta
 * write and its sync, ...). The file is then made into what a power cut
 * leaves: either every write since the last fdatasync is lost, or each is
 * kept, lost or torn at random. After reopening, the db must pass its check
 * and hold exactly the last durable checkpoint (or, when writes may
 * survive, the checkpoint that was in flight); at each op of a checkpoint
 * exactly, which of the two it is follows from whether its meta page was
 * written. Also: an I/O error in a commit or a sync leaves the db refusing
 * writes until it is reopened.
 * BTREE_SEED=n runs one seed; BTREE_SEEDS=n changes how many.
 */
#include "btree_util.h"

static char dir[256];
static char path[300];
static unsigned cut_in_checkpoint, inflight_survived;
static struct diskio *fault_io;
static struct diskio_fault_opts fault_opts;

static int open_fault(int fd, void *arg, struct diskio **out)
{
	(void)arg;
	int rc = diskio_fault_open(fd, &fault_opts, out);
	if (rc == 0)
		fault_io = *out;
	return rc;
}

static struct btree_db *open_db(uint32_t page_size, bool fault)
{
	struct btree_db_opts o = { .create = true, .page_size = page_size, .map_size = 1ull << 30 };
	if (fault)
		o.io_open = open_fault;
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	return db;
}

/* A name for model bucket bi's handle in t. */
static struct btree_bucket *open_path(struct btree_txn *t, const struct model *m, int bi)
{
	if (bi == 0)
		return btree_txn_root(t);
	struct btree_bucket *p = open_path(t, m, m->b[bi].parent), *b;
	T_OK(btree_bucket_open(t, p, m->b[bi].name, m->b[bi].nlen, &b));
	return b;
}

/* One random txn against db and model; returns the commit's result (the
 * model is changed only if it succeeded). Failures before the commit are
 * I/O-free, so only commit can fail here. */
static int random_txn(struct btree_db *db, struct model *m)
{
	struct btree_txn *t;
	int rc = btree_write_begin(db, &t);
	if (rc < 0)
		return rc;
	struct model work;
	m_clone(&work, m);
	static uint8_t val[20000];
	int nops = 1 + (int)t_below(40);
	for (int i = 0; i < nops; i++) {
		uint64_t p = t_below(100);
		int bi = 1 + (int)t_below(work.nb - 1);
		if (!work.b[bi].live)
			continue;
		struct btree_bucket *b = open_path(t, &work, bi);
		char key[32];
		int kl = snprintf(key, sizeof(key), "key%05u", (unsigned)t_below(800));
		if (p < 60) {
			size_t vl = t_chance(50) ? 2000 + t_below(15000) : t_below(200);
			for (size_t j = 0; j < vl; j++)
				val[j] = (uint8_t)t_rand();
			if (m_put(&work, bi, key, (size_t)kl, val, vl))
				T_OK(btree_put(b, key, (size_t)kl, val, vl));
		} else if (p < 90) {
			T_RC(btree_del(b, key, (size_t)kl), m_del(&work, bi, key, (size_t)kl));
		} else if (p < 95) {
			char name[16];
			int nl = snprintf(name, sizeof(name), "n%u", (unsigned)t_below(5));
			struct btree_bucket *nb;
			int want = m_create(&work, bi, name, (size_t)nl);
			T_RC(btree_bucket_create(t, b, name, (size_t)nl, &nb), want < 0 ? want : 0);
		} else if (bi > 2) {
			int parent = work.b[bi].parent;
			uint8_t name[64];
			uint32_t nl = work.b[bi].nlen;
			memcpy(name, work.b[bi].name, nl);
			T_OK(btree_bucket_delete(t, open_path(t, &work, parent), name, nl));
			T_OK(m_drop(&work, parent, name, nl));
		}
	}
	rc = btree_commit(t, NULL);
	if (rc == 0) {
		m_free(m);
		*m = work;
	} else {
		m_free(&work);
	}
	return rc;
}

static void setup(struct btree_db *db, struct model *m)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	for (int i = 0; i < 3; i++) {
		char name[8];
		snprintf(name, sizeof(name), "top%d", i);
		T_OK(btree_bucket_create(t, NULL, name, 4, &b));
		m_create(m, 0, name, 4);
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
}

/* One crash run; returns whether the cut happened before the end. */
static bool crash_run(uint64_t seed, enum diskio_crash_mode mode)
{
	t_set_seed(seed);
	t_phase = mode == DISKIO_CRASH_DROP_ALL ? "crash, drop all" : "crash, random keep/tear";
	remove(path);
	uint32_t ps = t_chance(500) ? 1024 : 4096;
	struct model committed, durable, inflight;
	m_init(&committed);
	fault_opts = diskio_fault_defaults();
	struct btree_db *db = open_db(ps, true);
	setup(db, &committed);
	m_clone(&durable, &committed);
	m_init(&inflight);
	struct btree_root dur;
	btree_db_durable(db, &dur);
	uint64_t durable_txid = dur.txid;

	/* Reopen with the device cut somewhere in the next few hundred
	 * operations. Checkpoints are written synchronously, or in the
	 * background (begun, more txns committed, reaped later) with the
	 * chain's ops run as it is submitted or only when it is reaped. */
	btree_db_close(db);
	fault_opts.cut_at_op = 1 + (long)t_below(1200);
	fault_opts.chain = (int)t_below(3);
	db = open_db(ps, true);
	bool in_checkpoint = false;  /* a synchronous one was under way */
	bool in_background = false;  /* one was begun and not yet reaped */
	for (int i = 0; i < 80; i++) {
		if (random_txn(db, &committed) < 0)
			break;
		if (in_background && t_chance(400)) {
			if (btree_db_checkpoint_poll(db, true, NULL) < 0)
				break;
			in_background = false;
			m_free(&durable);
			m_clone(&durable, &inflight);
			btree_db_durable(db, &dur);
			durable_txid = dur.txid;
		}
		if (!in_background && t_chance(300)) {
			m_free(&inflight);
			m_clone(&inflight, &committed);
			if (t_chance(500)) {
				bool started;
				in_background = true;
				if (btree_db_checkpoint_begin(db, &started) < 0)
					break;
				T_CHECK(started);
				if (btree_db_checkpoint_busy(db))
					continue;
				in_background = false;  /* written at once */
			} else {
				in_checkpoint = true;
				if (btree_db_checkpoint(db, NULL) < 0)
					break;
				in_checkpoint = false;
			}
			m_free(&durable);
			m_clone(&durable, &committed);
			btree_db_durable(db, &dur);
			durable_txid = dur.txid;
		}
	}
	bool cut = diskio_fault_is_cut(fault_io);
	cut_in_checkpoint += cut && (in_checkpoint || in_background);
	T_OK(diskio_fault_crash(fault_io, mode, seed));
	btree_db_close(db);

	db = open_db(ps, false);
	T_OK(btree_db_check(db));
	btree_db_durable(db, &dur);
	if (dur.txid == durable_txid) {
		m_compare_db(db, &durable);
	} else {
		/* Only the checkpoint in flight may have become durable: a
		 * synchronous one when unsynced writes can survive, one in the
		 * background also when its chain ended before the cut. */
		T_CHECK(((mode == DISKIO_CRASH_RANDOM && in_checkpoint) || in_background) &&
			dur.txid > durable_txid);
		m_compare_db(db, &inflight);
		inflight_survived++;
	}
	/* The reopened db works: one more commit and checkpoint. */
	struct model after;
	m_clone(&after, dur.txid == durable_txid ? &durable : &inflight);
	T_OK(random_txn(db, &after));
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	btree_db_close(db);
	db = open_db(ps, false);
	m_compare_db(db, &after);
	btree_db_close(db);
	m_free(&after);
	m_free(&committed);
	m_free(&durable);
	m_free(&inflight);
	return cut;
}

/* An I/O error in a commit or a checkpoint's sync: the db refuses writes
 * until reopened, and then holds the last durable checkpoint. */
static void io_error_run(uint64_t seed, bool in_sync)
{
	t_set_seed(seed);
	t_phase = in_sync ? "sync error" : "write error";
	remove(path);
	struct model m, durable, inflight;
	m_init(&m);
	m_init(&inflight);
	fault_opts = diskio_fault_defaults();
	if (in_sync)
		fault_opts.fail_sync_at = 3 + (long)t_below(6);
	else
		fault_opts.fail_write_at = 10 + (long)t_below(100);
	struct btree_db *db = open_db(4096, true);
	setup(db, &m);
	m_clone(&durable, &m);
	struct btree_root dur;
	btree_db_durable(db, &dur);
	uint64_t durable_txid = dur.txid;
	int rc = 0;
	for (int i = 0; i < 200 && rc == 0; i++) {
		rc = random_txn(db, &m);
		if (rc == 0 && t_chance(300)) {
			m_free(&inflight);
			m_clone(&inflight, &m);
			rc = btree_db_checkpoint(db, NULL);
			if (rc == 0) {
				m_free(&durable);
				m_clone(&durable, &m);
				btree_db_durable(db, &dur);
				durable_txid = dur.txid;
			}
		}
	}
	T_RC(rc, -EIO);
	struct btree_txn *t;
	T_RC(btree_write_begin(db, &t), -EIO);
	T_RC(btree_db_checkpoint(db, NULL), -EIO);
	T_CHECK(strstr(errmsg_get(-EIO), path) != NULL);
	btree_db_close(db);
	db = open_db(4096, false);
	T_OK(btree_db_check(db));
	/* Without a power cut the file keeps what was written: after a failed
	 * sync of the meta page, the checkpoint in flight may be there. */
	btree_db_durable(db, &dur);
	if (dur.txid == durable_txid) {
		m_compare_db(db, &durable);
	} else {
		T_CHECK(in_sync);
		m_compare_db(db, &inflight);
	}
	btree_db_close(db);
	m_free(&m);
	m_free(&durable);
	m_free(&inflight);
}

/* A db with a durable checkpoint (model m1) and a commit after it (m2). */
static struct btree_db *boundary_scenario(struct model *m1, struct model *m2)
{
	t_set_seed(7);
	remove(path);
	fault_opts = diskio_fault_defaults();
	struct btree_db *db = open_db(4096, true);
	struct model m;
	m_init(&m);
	setup(db, &m);
	T_OK(random_txn(db, &m));
	m_clone(m1, &m);
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(random_txn(db, &m));
	*m2 = m;
	return db;
}

/*
 * The device cut after each op of a checkpoint (growing the file, the
 * freelist write, its sync, the meta write, its sync). With every unsynced
 * write lost, the previous checkpoint remains; with every write kept, the
 * new one is there exactly when its meta page was written.
 */
static void checkpoint_boundaries(void)
{
	struct model m1, m2;
	struct btree_db *db = boundary_scenario(&m1, &m2);
	long before = diskio_fault_ops(fault_io);
	T_OK(btree_db_checkpoint(db, NULL));
	long k = diskio_fault_ops(fault_io) - before;
	btree_db_close(db);
	m_free(&m1);
	m_free(&m2);
	T_CHECK(k >= 4);
	for (long at = 0; at < k; at++) {
		for (int keep = 0; keep < 2; keep++) {
			t_phase = keep ? "checkpoint boundary, writes kept"
				       : "checkpoint boundary, writes lost";
			t_step = (uint64_t)at;
			db = boundary_scenario(&m1, &m2);
			diskio_fault_cut_after(fault_io, at);
			T_RC(btree_db_checkpoint(db, NULL), -EIO);
			T_OK(diskio_fault_crash(fault_io, keep ? DISKIO_CRASH_KEEP_ALL
							       : DISKIO_CRASH_DROP_ALL, 0));
			btree_db_close(db);
			db = open_db(4096, false);
			T_OK(btree_db_check(db));
			m_compare_db(db, keep && at == k - 1 ? &m2 : &m1);
			btree_db_close(db);
			m_free(&m1);
			m_free(&m2);
		}
	}
}

int main(void)
{
	const char *one = getenv("BTREE_SEED");
	const char *n = getenv("BTREE_SEEDS");
	uint64_t base = t_pick_seed();
	uint64_t seeds = n && *n ? strtoull(n, NULL, 0) : 150;
	if (one && *one)
		seeds = 1;
	printf("test_btree_crash: seeds %" PRIu64 "..%" PRIu64 " (BTREE_SEED=n replays one)\n", base,
	       base + seeds - 1);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	unsigned cuts = 0;
	for (uint64_t s = 0; s < seeds; s++) {
		cuts += crash_run(base + s, DISKIO_CRASH_DROP_ALL);
		cuts += crash_run(base + s, DISKIO_CRASH_RANDOM);
	}
	checkpoint_boundaries();
	for (uint64_t s = 0; s < 10; s++) {
		io_error_run(base + s, false);
		io_error_run(base + s, true);
	}
	T_CHECK(cuts >= seeds / 2);  /* many runs were cut before their end */
	T_CHECK(seeds < 50 || cut_in_checkpoint > 0);
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_crash: ok (%" PRIu64 " seeds x 2 crash modes, %u cut mid-run, %u of them"
	       " inside a checkpoint, %u kept the checkpoint in flight; checkpoint boundaries;"
	       " 20 I/O error runs)\n",
	       seeds, cuts, cut_in_checkpoint, inflight_survived);
	return 0;
}
