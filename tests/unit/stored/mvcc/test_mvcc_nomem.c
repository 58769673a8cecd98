/*
 * The MVCC layer when allocations fail: for every N, the Nth allocation of
 * a batch (put, txn, delete, compaction, ranges on a view) fails; the batch
 * must fail cleanly (an error, never a crash), abort back to the last
 * commit, leak nothing, and the same requests must then apply as if
 * nothing had happened. Opening a store (schema and index rebuild) gets
 * the same treatment.
 */
#include "mvcc_util.h"

static struct tdb D;
static int64_t committed_puts;  /* puts of "n/..." keys that committed */

/* One batch of requests; returns 0 or the first error. */
static int batch(int64_t i)
{
	char key[32], val[64];
	int rc = mvcc_batch_begin(D.s);
	if (rc)
		return rc;
	snprintf(key, sizeof(key), "n/%06lld", (long long)i);
	snprintf(val, sizeof(val), "value %lld", (long long)i);
	PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	PutResponse *pr;
	p.key = tb(key);
	p.value = tb(val);
	p.prev_kv = true;
	if ((rc = mvcc_apply_begin(D.s, D.index + 1)) || (rc = mvcc_put(D.s, &p, &D.a, &pr)))
		return rc;

	Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = { &op };
	RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	rr.key = tb("n/");
	rr.range_end = tb("n0");
	rr.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op.request_range = &rr;
	TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	TxnResponse *tr;
	t.success = ops;
	t.n_success = 1;
	if ((rc = mvcc_apply_begin(D.s, D.index + 2)) || (rc = mvcc_txn(D.s, &t, &D.a, &tr)))
		return rc;
	T_CHECK(tr->responses[0]->response_range->count == committed_puts + 1);

	DeleteRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	DeleteResponse *dr;
	d.key = tb("gone");
	d.prev_kv = true;
	if ((rc = mvcc_apply_begin(D.s, D.index + 3)) ||
	    (rc = mvcc_delete_range(D.s, &d, &D.a, &dr)))
		return rc;
	Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	Etcdserverpb__CompactionResponse *cr;
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	q.revision = st.rev - 1;
	if ((rc = mvcc_apply_begin(D.s, D.index + 4)) || (rc = mvcc_compact(D.s, &q, &D.a, &cr)))
		return rc;
	if ((rc = mvcc_compact_step(D.s, 3, NULL)))
		return rc;
	return mvcc_batch_commit(D.s, &D.root);
}

/* A range on a view of the last commit. */
static int view_range(int64_t *count)
{
	struct btree_txn *t;
	struct mvcc_view v;
	struct mvcc_range_result res;
	RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	rr.key = tb("n/");
	rr.range_end = tb("n0");
	rr.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__MOD;
	mvcc_range_result_init(&res);
	int rc = btree_db_read_begin(D.db, &D.root, &t);
	if (rc)
		return rc;
	rc = mvcc_view_open(t, &v);
	if (!rc) {
		rc = mvcc_range(&v, &rr, &res);
		mvcc_view_close(&v);
	}
	*count = res.count;
	mvcc_range_result_free(&res);
	btree_txn_end(t);
	return rc;
}

int main(void)
{
	t_set_seed(tm_pick_seed());
	tdb_init(&D, NULL);
	/* something to delete and compact in every batch */
	long failures = 0, n;
	int64_t i = 0;
	for (n = 0;; n++) {
		t_step = (uint64_t)n;
		stored_alloc_fail_after(n);
		int rc = batch(i);
		stored_alloc_fail_after(-1);
		arena_release(&D.a);
		if (rc == 0) {
			D.index += 4;
			committed_puts++;
			i++;
			if (n > 400)
				break;
			continue;
		}
		if (mvcc_is_request_error(rc))
			T_FAIL("batch %" PRId64 ": request error %d with allocation %ld failing", i,
			       rc, n);
		failures++;
		mvcc_batch_abort(D.s);
		struct mvcc_state st;
		mvcc_store_state(D.s, &st);
		T_CHECK(st.consistent_index == D.index);
	}
	int64_t count;
	for (n = 0; n < 200; n++) {
		stored_alloc_fail_after(n);
		int rc = view_range(&count);
		stored_alloc_fail_after(-1);
		if (rc == 0)
			break;
		T_CHECK(rc == -ENOMEM);
	}
	T_OK(view_range(&count));
	T_CHECK(count == committed_puts);

	/* opening: the schema check and a full rebuild, failing anywhere */
	struct btree_txn *t;
	T_OK(btree_write_begin(D.db, &t));
	T_OK(kvindex_drop(t));
	T_OK(btree_commit(t, NULL));
	tdb_close_store(&D, true);
	struct btree_db_opts o = { .map_size = 1ull << 30 };
	T_OK(btree_db_open(D.path, &o, &D.db));
	D.o.rebuild_batch = 50;
	/* every allocation early on, then in growing steps: a rebuild makes
	 * many */
	for (n = 0;; n += 1 + n / 16) {
		stored_alloc_fail_after(n);
		int rc = mvcc_store_open(D.db, &D.o, &D.s);
		stored_alloc_fail_after(-1);
		if (rc == 0)
			break;
		failures++;
		T_CHECK(!mvcc_is_request_error(rc));
		/* a checkpoint that failed leaves the db failed: reopen it */
		btree_db_close(D.db);
		T_OK(btree_db_open(D.path, &o, &D.db));
	}
	btree_db_current(D.db, &D.root);
	T_OK(view_range(&count));
	T_CHECK(count == committed_puts);

	tdb_free(&D);
	t_no_leaks();
	printf("test_mvcc_nomem: ok (seed %" PRIu64 "): %ld failed batches and opens, %" PRId64
	       " committed\n", t_seed, failures, committed_puts);
	return 0;
}
