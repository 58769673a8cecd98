/*
 * Unit tests for stored/mvcc/mvcc_hash.c: Maintenance.HashKV and Hash.
 *
 * The expected values are what etcd 3.4 answers for the same writes: they
 * were computed with etcd's own mvcc.store (HashByRev) and backend (Hash)
 * from Debian's golang-etcd-server-dev, applying the same sequence, each
 * after a backend commit (etcd's readers see a compaction's last deletions
 * only once its backend commits, at most 100 ms later). The
 * steps, compactions left half done and errors are checked against the
 * same values. tests/integration/hashkv_etcd.sh compares live servers.
 */
#include "mvcc_util.h"

static struct tdb D;

static void put(const char *k, const char *v)
{
	tdb_begin(&D);
	tdb_put(&D, k, strlen(k), v);
	tdb_commit(&D);
}

static void del(const char *k)
{
	DeleteRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	DeleteResponse *resp;
	d.key = tb(k);
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_delete_range(D.s, &d, &D.a, &resp));
	tdb_commit(&D);
}

/* One txn putting k1 = v1 and k2 = v2 at one revision. */
static void put2(const char *k1, const char *v1, const char *k2, const char *v2)
{
	PutRequest p[2] = { ETCDSERVERPB__PUT_REQUEST__INIT, ETCDSERVERPB__PUT_REQUEST__INIT };
	RequestOp op[2] = { ETCDSERVERPB__REQUEST_OP__INIT, ETCDSERVERPB__REQUEST_OP__INIT };
	RequestOp *ops[2] = { &op[0], &op[1] };
	TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	TxnResponse *resp;
	p[0].key = tb(k1);
	p[0].value = tb(v1);
	p[1].key = tb(k2);
	p[1].value = tb(v2);
	for (int i = 0; i < 2; i++) {
		op[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
		op[i].request_put = &p[i];
	}
	t.n_success = 2;
	t.success = ops;
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, &t, &D.a, &resp));
	tdb_commit(&D);
}

/* Schedules a compaction at rev; `steps` key-bucket entries of its
 * deletion run (0: all of it). */
static void compact(int64_t rev, uint32_t steps)
{
	Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	Etcdserverpb__CompactionResponse *resp;
	bool done;
	q.revision = rev;
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_compact(D.s, &q, &D.a, &resp));
	tdb_commit(&D);
	if (steps == 0) {
		tdb_finish_compaction(&D, 1);
		return;
	}
	tdb_begin(&D);
	T_OK(mvcc_compact_step(D.s, steps, &done));
	T_CHECK(!done);
	tdb_commit(&D);
}

/*
 * HashKV at rev through a read txn of the newest commit, three ways: at
 * once, in steps of one entry, and in steps of a kilobyte of work; all
 * must agree with want_hash and report the revisions etcd reports.
 * want_rc: an MVCC_ERR_* instead.
 */
static void check_hashkv(int64_t rev, int want_rc, uint32_t want_hash, int64_t want_rev,
			 int64_t want_compact)
{
	static const size_t budgets[] = { 1, 1024 };
	struct btree_txn *t;
	struct mvcc_view v;
	struct mvcc_hashkv h;

	T_OK(btree_db_read_begin(D.db, NULL, &t));
	T_OK(mvcc_view_open(t, &v));
	int rc = mvcc_hashkv(&v, rev, &h);
	if (rc != want_rc)
		T_FAIL("HashKV at %lld: rc %d, want %d", (long long)rev, rc, want_rc);
	if (rc == 0 && (h.hash != want_hash || h.rev != want_rev || h.compact_rev != want_compact))
		T_FAIL("HashKV at %lld: hash 0x%08x rev %lld compact %lld, etcd says 0x%08x %lld %lld",
		       (long long)rev, h.hash, (long long)h.rev, (long long)h.compact_rev, want_hash,
		       (long long)want_rev, (long long)want_compact);
	for (size_t i = 0; rc == 0 && i < sizeof(budgets) / sizeof(budgets[0]); i++) {
		bool done = false;
		unsigned steps = 0;
		T_OK(mvcc_hashkv_begin(&h, &v, rev));
		while (!done) {
			T_OK(mvcc_hashkv_step(&h, budgets[i], &done));
			steps++;
		}
		T_CHECK(h.hash == want_hash);
		if (budgets[i] == 1 && v.rev > 1)
			T_CHECK(steps > 1); /* one entry a step: the walk was cut */
	}
	mvcc_view_close(&v);
	btree_txn_end(t);
}

static uint32_t hashdb(size_t budget)
{
	struct btree_txn *t;
	struct mvcc_view v;
	struct mvcc_hashdb h;
	bool done = false;

	T_OK(btree_db_read_begin(D.db, NULL, &t));
	T_OK(mvcc_view_open(t, &v));
	mvcc_hashdb_begin(&h, &v);
	while (!done)
		T_OK(mvcc_hashdb_step(&h, budget, &done));
	T_CHECK(h.rev == v.rev);
	mvcc_view_close(&v);
	btree_txn_end(t);
	return h.hash;
}

/* Puts, deletes, a txn, two compactions: HashKV at every revision. */
static void test_history(void)
{
	tdb_init(&D, NULL);
	check_hashkv(0, 0, 0x40a4756d, 1, -1); /* the bucket name alone */
	put("a", "1");                          /* 2 */
	put("b", "2");                          /* 3 */
	put("a", "3");                          /* 4 */
	del("b");                               /* 5 */
	put2("c", "4", "d", "5");               /* 6 */
	put("a", "6");                          /* 7 */
	del("a");                               /* 8 */
	put("e", "7");                          /* 9 */

	static const uint32_t at[] = { 0x40a4756d, 0x9a396dd7, 0x6ceed8d6, 0x7b5cbf9c,
				       0x43188ed4, 0xe5ac3753, 0xc15b8f17, 0x650ce83f,
				       0x697a1c20 };
	check_hashkv(0, 0, 0x697a1c20, 9, -1);
	for (int64_t r = 1; r <= 9; r++)
		check_hashkv(r, 0, at[r - 1], 9, -1);
	check_hashkv(10, MVCC_ERR_FUTURE_REV, 0, 0, 0);
	check_hashkv(-1, 0, 0x40a4756d, 9, -1); /* etcd hashes nothing below 1 */

	/* etcd hashes the same while the deletion runs as after it: what it
	 * will delete is left out either way */
	compact(5, 1);
	check_hashkv(0, 0, 0x030a8817, 9, 5);
	tdb_finish_compaction(&D, 1);
	check_hashkv(0, 0, 0x030a8817, 9, 5);
	check_hashkv(5, MVCC_ERR_COMPACTED, 0, 0, 0);
	check_hashkv(4, MVCC_ERR_COMPACTED, 0, 0, 0);
	check_hashkv(6, 0, 0xffbdd89b, 9, 5);
	check_hashkv(7, 0, 0x2701a15c, 9, 5);
	check_hashkv(8, 0, 0xc2e5805a, 9, 5);
	check_hashkv(9, 0, 0x030a8817, 9, 5);
	check_hashkv(10, MVCC_ERR_FUTURE_REV, 0, 0, 0);

	compact(8, 0);
	check_hashkv(0, 0, 0xff87f14a, 9, 8);
	check_hashkv(8, MVCC_ERR_COMPACTED, 0, 0, 0);
	check_hashkv(9, 0, 0xff87f14a, 9, 8);

	/* Maintenance.Hash: etcd's buckets, without cetcd's index and the
	 * consistent index; any budget gives the same. The db also holds the
	 * authRevision etcd's auth store writes at start (etcd's server has
	 * one; its bare mvcc store, which gave the values above, has none):
	 * the value is etcd's backend.Hash of this db once cetcd's own
	 * buckets are deleted from it. */
	T_CHECK(hashdb(SIZE_MAX) == 0x3892a5cf);
	T_CHECK(hashdb(1) == 0x3892a5cf);
	T_CHECK(hashdb(100) == 0x3892a5cf);
	tdb_free(&D);
}

/*
 * etcd's quirk: when no key is live at the hashed revision its Keep map is
 * empty, and then every entry at or below the compact revision counts,
 * even those a non-empty Keep would leave out.
 */
static void test_empty_keep(void)
{
	tdb_init(&D, NULL);
	put("x", "1");  /* 2 */
	put("y", "2");  /* 3 */
	del("x");       /* 4 */
	del("y");       /* 5 */
	compact(4, 0);  /* keeps y@3 (the newest at 4) and y's tombstone at 5 */
	check_hashkv(0, 0, 0x31d6a8b9, 5, 4);
	check_hashkv(5, 0, 0x31d6a8b9, 5, 4);
	put("z", "3");  /* 6 */
	check_hashkv(0, 0, 0x4ad26b0b, 6, 4);
	check_hashkv(5, 0, 0x31d6a8b9, 6, 4); /* z is not live at 5 */
	check_hashkv(6, 0, 0x4ad26b0b, 6, 4);
	/* the same over a reopened store (the index read back from the file) */
	tdb_reopen(&D, true);
	check_hashkv(5, 0, 0x31d6a8b9, 6, 4);
	check_hashkv(6, 0, 0x4ad26b0b, 6, 4);
	tdb_free(&D);
}

int main(void)
{
	t_set_seed(tm_pick_seed());
	test_history();
	test_empty_keep();
	t_no_leaks();
	printf("test_mvcc_hash: ok\n");
	return 0;
}
