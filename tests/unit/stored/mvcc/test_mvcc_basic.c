/*
 * The MVCC layer's behaviours one by one, with the values etcd 3.4 gives:
 * revisions (an empty store is at 1, the first write at 2), the key
 * bucket's bytes, put (prev_kv, leases, ignore_value, ignore_lease),
 * delete (counts, header revisions, tombstones), range_end rules, limit,
 * sort, count and keys_only, history and compaction (errors, meta keys,
 * what is kept), txns (nested responses, sub revisions, the order of
 * checks, read-only txns on a view), the gRPC-layer validation with etcd's
 * messages and codes (including what etcd's duplicate check lets
 * through), the KeyValue codec against protobuf-c, the event hook, skipped
 * entries, aborted batches, and the schema of a new file.
 */
#include "mvcc_util.h"


static struct tdb D;

/* ---- one-entry batches ---- */

static int put3(const char *k, const char *v, int64_t lease, bool prev, bool ign_v, bool ign_l,
		PutResponse **out)
{
	PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	PutResponse *resp = NULL;
	p.key = tb(k);
	p.value = v ? tb(v) : tbn(NULL, 0);
	p.lease = lease;
	p.prev_kv = prev;
	p.ignore_value = ign_v;
	p.ignore_lease = ign_l;
	tdb_begin(&D);
	tdb_entry(&D);
	int rc = mvcc_put(D.s, &p, &D.a, &resp);
	if (out && !rc) {
		/* keep the response past the commit: pack and unpack it */
		struct tbuf b = { 0 };
		tm_pack(&resp->base, &b);
		*out = etcdserverpb__put_response__unpack(NULL, b.len, b.p);
		tbuf_free(&b);
	}
	tdb_commit(&D);
	return rc;
}

static int64_t put(const char *k, const char *v)
{
	PutResponse *r;
	T_OK(put3(k, v, 0, false, false, false, &r));
	int64_t rev = r->header->revision;
	etcdserverpb__put_response__free_unpacked(r, NULL);
	return rev;
}

static DeleteResponse *del(const char *k, const char *end, bool prev)
{
	DeleteRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	DeleteResponse *resp = NULL;
	d.key = tb(k);
	d.range_end = end ? tbn(end, end[0] ? strlen(end) : 1) : tbn(NULL, 0);
	d.prev_kv = prev;
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_delete_range(D.s, &d, &D.a, &resp));
	struct tbuf b = { 0 };
	tm_pack(&resp->base, &b);
	tdb_commit(&D);
	DeleteResponse *out = etcdserverpb__delete_range_response__unpack(NULL, b.len, b.p);
	tbuf_free(&b);
	return out;
}

static struct mvcc_range_result rres;
static struct btree_txn *vt;
static struct mvcc_view view;

/* A view of the last commit, as a reader process would open it. */
static void view_open(void)
{
	T_OK(btree_db_read_begin(D.db, &D.root, &vt));
	T_OK(mvcc_view_open(vt, &view));
}

static void view_close(void)
{
	mvcc_view_close(&view);
	btree_txn_end(vt);
}

/* Ranges on a fresh view; returns the rc; fills rres. */
static int range(RangeRequest *r)
{
	view_close();
	view_open();
	return mvcc_range(&view, r, &rres);
}

static RangeRequest rq(const char *k, const char *end)
{
	RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	r.key = k[0] ? tb(k) : tbn("", 1);
	r.range_end = end ? tbn(end, end[0] ? strlen(end) : 1) : tbn(NULL, 0);
	return r;
}

static void expect_kv(size_t i, const char *k, const char *v, int64_t create, int64_t mod,
		      int64_t ver, int64_t lease)
{
	T_CHECK(i < rres.n);
	const struct mvcc_kv *f = &rres.kvs[i].f;
	if (m_cmp(f->key, f->key_len, (const uint8_t *)k, k[0] ? strlen(k) : 1) != 0 ||
	    m_cmp(f->value, f->value_len, (const uint8_t *)v, strlen(v)) != 0 ||
	    f->create_rev != create || f->mod_rev != mod || f->version != ver || f->lease != lease)
		T_FAIL("kv %zu: got %.*s=%.*s create %" PRId64 " mod %" PRId64 " version %" PRId64
		       " lease %" PRId64 "; want %s=%s %" PRId64 "/%" PRId64 "/%" PRId64 "/%" PRId64,
		       i, (int)f->key_len, f->key, (int)f->value_len, f->value, f->create_rev,
		       f->mod_rev, f->version, f->lease, k, v, create, mod, ver, lease);
}

static void expect_keys(const char *const *keys, size_t n)
{
	if (rres.n != n)
		T_FAIL("range gave %zu keys, want %zu", rres.n, n);
	for (size_t i = 0; i < n; i++) {
		size_t kl = keys[i][0] ? strlen(keys[i]) : 1;
		if (m_cmp(rres.kvs[i].f.key, rres.kvs[i].f.key_len, (const uint8_t *)keys[i], kl))
			T_FAIL("range key %zu is \"%.*s\", want \"%s\"", i,
			       (int)rres.kvs[i].f.key_len, rres.kvs[i].f.key, keys[i]);
	}
}

static int64_t state_rev(void)
{
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	return st.rev;
}

/* The value of a key of an etcd bucket at the last commit. */
static bool bucket_get(const char *bucket, const void *k, size_t kl, struct tbuf *out)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	const uint8_t *v;
	size_t len;
	T_OK(btree_db_read_begin(D.db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, bucket, strlen(bucket), &b));
	int rc = btree_get(b, k, kl, &v, &len);
	if (!rc) {
		out->len = 0;
		tbuf_add(out, v, len);
	}
	btree_txn_end(t);
	return rc == 0;
}

static void rev_key(uint8_t *k, int64_t main, int64_t sub)
{
	rev_encode((struct rev){ main, sub }, k);
}

/* ---- tests ---- */

static void test_fresh(void)
{
	t_phase = "fresh store";
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	T_CHECK(st.rev == 1 && st.compact_rev == -1 && st.finished_compact_rev == -1 &&
		st.consistent_index == 0 && !st.compacting && st.rebuilt);
	view_open();
	T_CHECK(view.rev == 1 && view.compact_rev == -1);
	RangeRequest r = rq("a", NULL);
	T_OK(range(&r));
	T_CHECK(rres.n == 0 && rres.count == 0 && rres.rev == 1 && !rres.more);

	/* etcd's buckets and cetcd's index buckets */
	static const char *const names[] = { "alarm", "auth", "authRoles", "authUsers",
					     "cetcd_kv_history", "cetcd_kv_latest", "cetcd_kv_meta",
					     "cluster", "key", "lease", "members",
					     "members_removed", "meta" };
	struct btree_txn *t;
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	T_OK(btree_db_read_begin(D.db, NULL, &t));
	btree_cursor_init(&c, btree_txn_root(t));
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		T_CHECK(i < sizeof(names) / sizeof(names[0]));
		T_CHECK(kv.flags & BTREE_KV_BUCKET);
		T_CHECK(m_cmp(kv.key, kv.key_len, (const uint8_t *)names[i], strlen(names[i])) == 0);
	}
	T_CHECK(i == sizeof(names) / sizeof(names[0]));
	btree_txn_end(t);
}

static void test_put(void)
{
	t_phase = "put";
	struct tbuf b = { 0 };
	uint8_t k[18];
	PutResponse *pr;

	T_CHECK(put("a", "1") == 2);
	/* the key bucket holds etcd's bytes: revision 2_0 -> KeyValue */
	rev_key(k, 2, 0);
	T_CHECK(bucket_get("key", k, 17, &b));
	static const uint8_t kv1[] = { 0x0a, 1, 'a', 0x10, 2, 0x18, 2, 0x20, 1, 0x2a, 1, '1' };
	T_CHECK(b.len == sizeof(kv1) && memcmp(b.p, kv1, b.len) == 0);
	/* the consistent index, 8 bytes big-endian */
	T_CHECK(bucket_get("meta", "consistent_index", 16, &b));
	T_CHECK(b.len == 8 && rev_get_be64(b.p) == D.index);

	T_OK(put3("a", "2", 0, true, false, false, &pr));
	T_CHECK(pr->header->revision == 3 && pr->prev_kv);
	T_CHECK(pr->prev_kv->mod_revision == 2 && pr->prev_kv->version == 1 &&
		pr->prev_kv->value.len == 1 && pr->prev_kv->value.data[0] == '1');
	etcdserverpb__put_response__free_unpacked(pr, NULL);
	RangeRequest r = rq("a", NULL);
	T_OK(range(&r));
	expect_kv(0, "a", "2", 2, 3, 2, 0);

	/* prev_kv of a new key: none */
	T_OK(put3("n", "x", 0, true, false, false, &pr));
	T_CHECK(pr->header->revision == 4 && !pr->prev_kv);
	etcdserverpb__put_response__free_unpacked(pr, NULL);

	/* refused puts write nothing and keep the revision */
	uint64_t idx = D.index;
	T_RC(put3("b", NULL, 0, false, true, false, NULL), MVCC_ERR_KEY_NOT_FOUND);
	T_RC(put3("b", "v", 0, false, false, true, NULL), MVCC_ERR_KEY_NOT_FOUND);
	T_RC(put3("b", "v", 7, false, false, false, NULL), MVCC_ERR_LEASE_NOT_FOUND);
	T_CHECK(state_rev() == 4 && D.index == idx + 3);
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	T_CHECK(st.consistent_index == idx + 3);

	/* a lease in the lease bucket (8-byte big-endian id) lets it through */
	tdb_begin(&D);
	tdb_entry(&D);
	struct btree_bucket *lb;
	uint8_t id[8];
	rev_put_be64(id, 7);
	T_OK(btree_bucket_open(mvcc_batch_txn(D.s), NULL, "lease", 5, &lb));
	T_OK(btree_put(lb, id, 8, "L", 1));
	tdb_commit(&D);
	T_OK(put3("b", "v", 7, false, false, false, NULL));          /* rev 5 */
	T_OK(put3("b", "w", 0, false, false, true, NULL));           /* rev 6: keeps lease 7 */
	r = rq("b", NULL);
	T_OK(range(&r));
	expect_kv(0, "b", "w", 5, 6, 2, 7);
	T_OK(put3("b", NULL, 0, false, true, false, NULL));          /* rev 7: keeps "w" */
	T_OK(range(&r));
	expect_kv(0, "b", "w", 5, 7, 3, 0);
	tbuf_free(&b);
}

static void test_delete(void)
{
	t_phase = "delete";
	struct tbuf b = { 0 };
	uint8_t k[18];
	DeleteResponse *dr = del("zz", NULL, true);
	T_CHECK(dr->deleted == 0 && dr->header->revision == 7 && dr->n_prev_kvs == 0);
	etcdserverpb__delete_range_response__free_unpacked(dr, NULL);
	T_CHECK(state_rev() == 7);

	dr = del("a", NULL, true);
	T_CHECK(dr->deleted == 1 && dr->header->revision == 8 && dr->n_prev_kvs == 1);
	T_CHECK(dr->prev_kvs[0]->mod_revision == 3 && dr->prev_kvs[0]->value.data[0] == '2');
	etcdserverpb__delete_range_response__free_unpacked(dr, NULL);
	/* the tombstone: revision 8_0 plus 't', value KeyValue{key} */
	rev_encode_tombstone((struct rev){ 8, 0 }, k);
	T_CHECK(bucket_get("key", k, 18, &b));
	T_CHECK(b.len == 3 && b.p[0] == 0x0a && b.p[1] == 1 && b.p[2] == 'a');

	/* a new generation: created now, version 1 */
	T_CHECK(put("a", "3") == 9);
	RangeRequest r = rq("a", NULL);
	T_OK(range(&r));
	expect_kv(0, "a", "3", 9, 9, 1, 0);

	/* history */
	r.revision = 2;
	T_OK(range(&r));
	expect_kv(0, "a", "1", 2, 2, 1, 0);
	T_CHECK(rres.rev == 9 && rres.count == 1);
	r.revision = 8;
	T_OK(range(&r));
	T_CHECK(rres.n == 0 && rres.count == 0);
	r.revision = 10;
	T_RC(range(&r), MVCC_ERR_FUTURE_REV);
	r.revision = -3;  /* <= 0: the current revision */
	T_OK(range(&r));
	expect_kv(0, "a", "3", 9, 9, 1, 0);
	tbuf_free(&b);
}

static void test_range_rules(void)
{
	t_phase = "range rules";
	/* keys: "\0", "a", "b", "foo", "foo1", "fop", "n", "\xff" */
	put("foo", "f1");
	put("foo1", "f2");
	put("fop", "f3");
	put("\xff", "ff");
	PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	PutResponse *pr;
	p.key = tbn("", 1);
	p.value = tb("zero");
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_put(D.s, &p, &D.a, &pr));
	tdb_commit(&D);
	int64_t now = state_rev();

	RangeRequest r = rq("", "");  /* "\0" to "\0": everything */
	T_OK(range(&r));
	static const char *const all[] = { "", "a", "b", "foo", "foo1", "fop", "n", "\xff" };
	expect_keys(all, 8);
	T_CHECK(rres.count == 8 && rres.rev == now);
	r = rq("foo", "fop");  /* the prefix "foo" */
	T_OK(range(&r));
	expect_keys(all + 3, 2);
	r = rq("fop", "");  /* from "fop" */
	T_OK(range(&r));
	expect_keys(all + 5, 3);
	r = rq("n", "b");  /* end before key: nothing */
	T_OK(range(&r));
	T_CHECK(rres.n == 0 && rres.count == 0);

	t_phase = "limit, sort, count";
	r = rq("", "");
	r.limit = 3;
	T_OK(range(&r));
	expect_keys(all, 3);
	T_CHECK(rres.more && rres.count == 8);
	r.limit = 8;
	T_OK(range(&r));
	T_CHECK(!rres.more && rres.n == 8);
	r.limit = 2;
	r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	T_OK(range(&r));
	static const char *const last2[] = { "\xff", "n" };
	expect_keys(last2, 2);
	T_CHECK(rres.more && rres.count == 8);
	/* target MOD with order NONE sorts ascending, but as in etcd only
	 * what the limit fetched in key order ("\0" a b foo): the order NONE
	 * keeps the limit */
	r = rq("", "");
	r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__MOD;
	r.limit = 3;
	T_OK(range(&r));
	static const char *const fetched[] = { "b", "a", "foo" };
	expect_keys(fetched, 3);
	T_CHECK(rres.more && rres.count == 8);
	/* with an order, everything is sorted before the limit */
	r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
	T_OK(range(&r));
	static const char *const oldest[] = { "n", "b", "a" };
	expect_keys(oldest, 3);
	/* VERSION descending; ties keep key order */
	r.sort_target = ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VERSION;
	r.sort_order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	r.limit = 0;
	T_OK(range(&r));
	static const char *const by_ver[] = { "b", "", "a", "foo", "foo1", "fop", "n", "\xff" };
	expect_keys(by_ver, 8);
	/* filters run before the limit and do not change count */
	r = rq("", "");
	r.min_mod_revision = now - 4;
	r.max_create_revision = now - 1;
	r.limit = 1;
	T_OK(range(&r));
	static const char *const filtered[] = { "foo" };
	expect_keys(filtered, 1);
	T_CHECK(rres.more && rres.count == 8);
	/* count_only and keys_only */
	r = rq("f", "g");
	r.count_only = true;
	T_OK(range(&r));
	T_CHECK(rres.n == 0 && rres.count == 3 && !rres.more);
	r = rq("foo", NULL);
	r.keys_only = true;
	T_OK(range(&r));
	T_CHECK(rres.n == 1 && rres.keys_only);
	RangeResponse *resp;
	T_OK(mvcc_range_response(&rres, &D.a, false, &resp));
	T_CHECK(resp->kvs[0]->value.len == 0 && resp->kvs[0]->version == 1 &&
		resp->kvs[0]->key.len == 3 && resp->count == 1 && resp->header->revision == now);
	uint8_t buf[64];
	size_t n;
	T_OK(mvcc_kv_strip_value(rres.kvs[0].kv, rres.kvs[0].kv_len, buf, &n));
	T_CHECK(n == rres.kvs[0].kv_len - 4);  /* field 5: tag, length, "f1" */
	arena_release(&D.a);
}

static void test_compact(void)
{
	t_phase = "compact";
	struct tbuf b = { 0 };
	uint8_t k[18];
	Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	Etcdserverpb__CompactionResponse *resp;
	int64_t now = state_rev();

	q.revision = now + 1;
	tdb_begin(&D);
	tdb_entry(&D);
	T_RC(mvcc_compact(D.s, &q, &D.a, &resp), MVCC_ERR_FUTURE_REV);
	q.revision = 3;
	T_OK(mvcc_compact(D.s, &q, &D.a, &resp));
	T_CHECK(resp->header->revision == now);
	tdb_entry(&D);
	T_RC(mvcc_compact(D.s, &q, &D.a, &resp), MVCC_ERR_COMPACTED);
	q.revision = 2;
	T_RC(mvcc_compact(D.s, &q, &D.a, &resp), MVCC_ERR_COMPACTED);
	tdb_commit(&D);

	/* reads below 3 fail at once; at 3 they work */
	RangeRequest r = rq("a", NULL);
	r.revision = 2;
	T_RC(range(&r), MVCC_ERR_COMPACTED);
	T_CHECK(view.compact_rev == 3);
	r.revision = 3;
	T_OK(range(&r));
	expect_kv(0, "a", "2", 2, 3, 2, 0);
	rev_key(k, 3, 0);
	T_CHECK(bucket_get("meta", "scheduledCompactRev", 19, &b));
	T_CHECK(b.len == 17 && memcmp(b.p, k, 17) == 0);
	T_CHECK(!bucket_get("meta", "finishedCompactRev", 18, &b));
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	T_CHECK(st.compacting && st.compact_rev == 3 && st.finished_compact_rev == -1);

	/* the deletion, one entry per batch: 2_0 (a, superseded) goes, 3_0
	 * (a's newest at 3) stays, and so do later revisions */
	rev_key(k, 2, 0);
	T_CHECK(bucket_get("key", k, 17, &b));
	tdb_finish_compaction(&D, 1);
	T_CHECK(!bucket_get("key", k, 17, &b));
	rev_key(k, 3, 0);
	T_CHECK(bucket_get("key", k, 17, &b));
	rev_key(k, 3, 0);
	T_CHECK(bucket_get("meta", "finishedCompactRev", 18, &b));
	T_CHECK(b.len == 17 && memcmp(b.p, k, 17) == 0);
	mvcc_store_state(D.s, &st);
	T_CHECK(!st.compacting && st.finished_compact_rev == 3);

	/* compacting past a's tombstone (8) drops it and what it deleted */
	tdb_begin(&D);
	tdb_entry(&D);
	q.revision = 8;
	T_OK(mvcc_compact(D.s, &q, &D.a, &resp));
	tdb_commit(&D);
	tdb_finish_compaction(&D, 1000);
	rev_encode_tombstone((struct rev){ 8, 0 }, k);
	T_CHECK(!bucket_get("key", k, 18, &b));
	rev_key(k, 3, 0);
	T_CHECK(!bucket_get("key", k, 17, &b));
	rev_key(k, 7, 0);  /* b's newest at 8 stays */
	T_CHECK(bucket_get("key", k, 17, &b));
	r = rq("a", NULL);
	r.revision = 8;
	T_OK(range(&r));
	T_CHECK(rres.n == 0);
	r = rq("b", NULL);
	T_OK(range(&r));
	expect_kv(0, "b", "w", 5, 7, 3, 0);
	tbuf_free(&b);
}

/* ---- txns ---- */

static RequestOp *op_put(const char *k, const char *v)
{
	RequestOp *op = arena_zalloc(&D.a, sizeof(*op));
	PutRequest *p = arena_zalloc(&D.a, sizeof(*p));
	etcdserverpb__request_op__init(op);
	etcdserverpb__put_request__init(p);
	p->key = tb(k);
	p->value = tb(v);
	op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	op->request_put = p;
	return op;
}

static RequestOp *op_range(const char *k, int64_t rev)
{
	RequestOp *op = arena_zalloc(&D.a, sizeof(*op));
	RangeRequest *r = arena_zalloc(&D.a, sizeof(*r));
	etcdserverpb__request_op__init(op);
	*r = rq(k, NULL);
	r->revision = rev;
	op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op->request_range = r;
	return op;
}

static RequestOp *op_del(const char *k, const char *end)
{
	RequestOp *op = arena_zalloc(&D.a, sizeof(*op));
	DeleteRequest *d = arena_zalloc(&D.a, sizeof(*d));
	etcdserverpb__request_op__init(op);
	etcdserverpb__delete_range_request__init(d);
	d->key = tb(k);
	d->range_end = end ? tbn(end, end[0] ? strlen(end) : 1) : tbn(NULL, 0);
	op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	op->request_delete_range = d;
	return op;
}

static RequestOp *op_txn(TxnRequest *t)
{
	RequestOp *op = arena_zalloc(&D.a, sizeof(*op));
	etcdserverpb__request_op__init(op);
	op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
	op->request_txn = t;
	return op;
}

static Compare *cmp_value(const char *k, int result, const char *v)
{
	Compare *c = arena_zalloc(&D.a, sizeof(*c));
	etcdserverpb__compare__init(c);
	c->key = tb(k);
	c->result = (Etcdserverpb__Compare__CompareResult)result;
	c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
	c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
	c->value = tb(v);
	return c;
}

static Compare *cmp_version(const char *k, int result, int64_t ver)
{
	Compare *c = arena_zalloc(&D.a, sizeof(*c));
	etcdserverpb__compare__init(c);
	c->key = tb(k);
	c->result = (Etcdserverpb__Compare__CompareResult)result;
	c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
	c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
	c->version = ver;
	return c;
}

static TxnRequest *txn(Compare **cmps, size_t nc, RequestOp **succ, size_t ns, RequestOp **fail,
		       size_t nf)
{
	TxnRequest *t = arena_zalloc(&D.a, sizeof(*t));
	etcdserverpb__txn_request__init(t);
	t->compare = cmps;
	t->n_compare = nc;
	t->success = succ;
	t->n_success = ns;
	t->failure = fail;
	t->n_failure = nf;
	return t;
}

static void test_txn(void)
{
	t_phase = "txn";
	int64_t R = state_rev();
	TxnResponse *resp;
	tdb_begin(&D);

	/* nested compares see the state before the txn: "c" is missing, so
	 * version == 0 holds although the outer txn puts "c" first */
	Compare **nc = arena_zalloc(&D.a, sizeof(*nc));
	nc[0] = cmp_version("c", ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, 0);
	RequestOp **nsucc = arena_zalloc(&D.a, sizeof(*nsucc));
	nsucc[0] = op_put("d", "1");
	TxnRequest *inner = txn(nc, 1, nsucc, 1, NULL, 0);
	Compare **cs = arena_zalloc(&D.a, sizeof(*cs));
	cs[0] = cmp_value("a", ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, "3");
	RequestOp **succ = arena_zalloc(&D.a, 4 * sizeof(*succ));
	succ[0] = op_put("c", "1");
	succ[1] = op_range("c", 0);
	succ[2] = op_txn(inner);
	succ[3] = op_del("zz", NULL);
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, txn(cs, 1, succ, 4, NULL, 0), &D.a, &resp));
	T_CHECK(resp->succeeded && resp->header->revision == R + 1 && resp->n_responses == 4);
	T_CHECK(resp->responses[0]->response_put->header->revision == R + 1);
	RangeResponse *rr = resp->responses[1]->response_range;
	T_CHECK(rr->header->revision == R + 1 && rr->n_kvs == 1 && rr->kvs[0]->mod_revision == R + 1);
	TxnResponse *in = resp->responses[2]->response_txn;
	T_CHECK(in->succeeded && in->header && in->header->revision == 0 && in->n_responses == 1);
	T_CHECK(in->responses[0]->response_put->header->revision == R + 1);
	/* nothing deleted, but the txn wrote: the delete reports R+1 */
	Etcdserverpb__DeleteRangeResponse *dr = resp->responses[3]->response_delete_range;
	T_CHECK(dr->deleted == 0 && dr->header->revision == R + 1);
	tdb_commit(&D);
	/* one main revision, sub revisions in order */
	struct tbuf b = { 0 };
	uint8_t k[18];
	rev_key(k, R + 1, 0);
	T_CHECK(bucket_get("key", k, 17, &b) && b.p[2] == 'c');
	rev_key(k, R + 1, 1);
	T_CHECK(bucket_get("key", k, 17, &b) && b.p[2] == 'd');
	T_CHECK(state_rev() == R + 1);

	/* failure branch; a txn that writes nothing keeps the revision */
	tdb_begin(&D);
	cs = arena_zalloc(&D.a, sizeof(*cs));
	cs[0] = cmp_value("a", ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL, "3");
	RequestOp **fail = arena_zalloc(&D.a, sizeof(*fail));
	fail[0] = op_range("a", 0);
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, txn(cs, 1, NULL, 0, fail, 1), &D.a, &resp));
	T_CHECK(!resp->succeeded && resp->header->revision == R + 1 && resp->n_responses == 1);
	/* value compares on a missing key fail, whatever the result */
	cs[0] = cmp_value("missing", ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL, "x");
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, txn(cs, 1, NULL, 0, fail, 1), &D.a, &resp));
	T_CHECK(!resp->succeeded);

	/* the checks come before any write: puts first, then ranges */
	RequestOp **bad = arena_zalloc(&D.a, 3 * sizeof(*bad));
	bad[0] = op_range("a", R + 2);
	bad[1] = op_put("e", "1");
	tdb_entry(&D);
	T_RC(mvcc_txn(D.s, txn(NULL, 0, bad, 2, NULL, 0), &D.a, &resp), MVCC_ERR_FUTURE_REV);
	bad[1]->request_put->lease = 99;
	tdb_entry(&D);
	T_RC(mvcc_txn(D.s, txn(NULL, 0, bad, 2, NULL, 0), &D.a, &resp), MVCC_ERR_LEASE_NOT_FOUND);
	bad[1]->request_put->lease = 0;
	bad[1]->request_put->ignore_value = true;
	tdb_entry(&D);
	T_RC(mvcc_txn(D.s, txn(NULL, 0, bad, 2, NULL, 0), &D.a, &resp), MVCC_ERR_KEY_NOT_FOUND);
	bad[0] = op_range("a", 2);
	bad[1] = op_put("e", "1");
	tdb_entry(&D);
	T_RC(mvcc_txn(D.s, txn(NULL, 0, bad, 2, NULL, 0), &D.a, &resp), MVCC_ERR_COMPACTED);
	tdb_commit(&D);
	T_CHECK(state_rev() == R + 1);
	RangeRequest r = rq("e", NULL);
	T_OK(range(&r));
	T_CHECK(rres.n == 0);

	/* a read-only txn answers the same on a view as through the store */
	tdb_begin(&D);
	RequestOp **ro = arena_zalloc(&D.a, 2 * sizeof(*ro));
	ro[0] = op_range("c", 0);
	ro[1] = op_range("a", R);
	cs = arena_zalloc(&D.a, sizeof(*cs));
	cs[0] = cmp_value("c", ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL, "1");
	TxnRequest *rt = txn(cs, 1, ro, 2, ro, 1);
	T_CHECK(mvcc_txn_is_readonly(rt));
	TxnResponse *via_store, *via_view;
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, rt, &D.a, &via_store));
	view_close();
	view_open();
	T_OK(mvcc_txn_read(&view, rt, &D.a, &via_view));
	tm_same_msg(&via_view->base, &via_store->base, "read-only txn");
	T_CHECK(via_view->succeeded && via_view->header->revision == R + 1);
	RequestOp **w = arena_zalloc(&D.a, sizeof(*w));
	w[0] = op_put("c", "2");
	T_RC(mvcc_txn_read(&view, txn(NULL, 0, w, 1, NULL, 0), &D.a, &via_view), -EINVAL);
	tdb_commit(&D);
	tbuf_free(&b);
}

/* ---- validation ---- */

static void expect_err(int rc, int want, int code, const char *msg)
{
	if (rc != want)
		T_FAIL("got %d (%s), want %d (%s)", rc, mvcc_strerror(rc), want, msg);
	T_CHECK(strcmp(mvcc_strerror(rc), msg) == 0);
	T_CHECK(mvcc_grpc_code(rc) == code);
	T_CHECK(mvcc_is_request_error(rc));
}

static void test_validate(void)
{
	t_phase = "validation";
	RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	expect_err(mvcc_validate_range(&r), MVCC_ERR_EMPTY_KEY, 3, "etcdserver: key is not provided");
	r.key = tb("a");
	T_OK(mvcc_validate_range(&r));
	PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	p.key = tb("a");
	p.ignore_value = true;
	p.value = tb("v");
	expect_err(mvcc_validate_put(&p), MVCC_ERR_VALUE_PROVIDED, 3, "etcdserver: value is provided");
	p.value = tbn(NULL, 0);
	p.ignore_lease = true;
	p.lease = 5;
	expect_err(mvcc_validate_put(&p), MVCC_ERR_LEASE_PROVIDED, 3, "etcdserver: lease is provided");
	p.lease = 0;
	T_OK(mvcc_validate_put(&p));
	static uint8_t big[40000];
	memset(big, 'k', sizeof(big));
	/* any key size passes: the request size limit is the only one (raftd) */
	p.key = tbn(big, sizeof(big));
	T_OK(mvcc_validate_put(&p));
	DeleteRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	expect_err(mvcc_validate_delete_range(&d), MVCC_ERR_EMPTY_KEY, 3,
		   "etcdserver: key is not provided");
	expect_err(MVCC_ERR_COMPACTED, MVCC_ERR_COMPACTED, 11,
		   "etcdserver: mvcc: required revision has been compacted");
	expect_err(MVCC_ERR_FUTURE_REV, MVCC_ERR_FUTURE_REV, 11,
		   "etcdserver: mvcc: required revision is a future revision");
	expect_err(MVCC_ERR_LEASE_NOT_FOUND, MVCC_ERR_LEASE_NOT_FOUND, 5,
		   "etcdserver: requested lease not found");
	expect_err(MVCC_ERR_KEY_NOT_FOUND, MVCC_ERR_KEY_NOT_FOUND, 3, "etcdserver: key not found");
	T_CHECK(!mvcc_is_request_error(-ENOMEM) && mvcc_grpc_code(-EIO) == 2);

	/* too many ops: a nested txn gets what its parent leaves */
	RequestOp **ops = arena_zalloc(&D.a, 200 * sizeof(*ops));
	for (int i = 0; i < 200; i++) {
		char *k = arena_alloc(&D.a, 8);
		snprintf(k, 8, "k%d", i);
		ops[i] = op_put(k, "v");
	}
	expect_err(mvcc_validate_txn(txn(NULL, 0, ops, 129, NULL, 0), 128), MVCC_ERR_TOO_MANY_OPS, 3,
		   "etcdserver: too many operations in txn request");
	T_OK(mvcc_validate_txn(txn(NULL, 0, ops, 128, NULL, 0), 128));
	RequestOp **outer = arena_zalloc(&D.a, 100 * sizeof(*outer));
	for (int i = 0; i < 99; i++)
		outer[i] = ops[100 + i];
	outer[99] = op_txn(txn(NULL, 0, ops, 29, NULL, 0));
	expect_err(mvcc_validate_txn(txn(NULL, 0, outer, 100, NULL, 0), 128), MVCC_ERR_TOO_MANY_OPS,
		   3, "etcdserver: too many operations in txn request");
	outer[99] = op_txn(txn(NULL, 0, ops, 28, NULL, 0));
	T_OK(mvcc_validate_txn(txn(NULL, 0, outer, 100, NULL, 0), 128));
	/* empty keys and empty ops */
	Compare **cs = arena_zalloc(&D.a, sizeof(*cs));
	cs[0] = cmp_value("x", 0, "v");
	cs[0]->key = tbn(NULL, 0);
	expect_err(mvcc_validate_txn(txn(cs, 1, NULL, 0, NULL, 0), 128), MVCC_ERR_EMPTY_KEY, 3,
		   "etcdserver: key is not provided");
	RequestOp **one = arena_zalloc(&D.a, sizeof(*one));
	one[0] = arena_zalloc(&D.a, sizeof(*one[0]));
	etcdserverpb__request_op__init(one[0]);
	expect_err(mvcc_validate_txn(txn(NULL, 0, one, 1, NULL, 0), 128), MVCC_ERR_KEY_NOT_FOUND, 3,
		   "etcdserver: key not found");

	/* duplicates, as etcd's checkIntervals decides */
	const char *dup = "etcdserver: duplicate key given in txn request";
	RequestOp **two = arena_zalloc(&D.a, 2 * sizeof(*two));
	two[0] = op_put("a", "1");
	two[1] = op_put("a", "2");
	expect_err(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128), MVCC_ERR_DUPLICATE_KEY, 3,
		   dup);
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 1, two + 1, 1), 128));  /* other branch */
	two[1] = op_del("a", NULL);
	expect_err(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128), MVCC_ERR_DUPLICATE_KEY, 3,
		   dup);
	two[1] = op_del("0", "b");  /* [0, b) holds a */
	expect_err(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128), MVCC_ERR_DUPLICATE_KEY, 3,
		   dup);
	two[1] = op_del("a\x01", "b");  /* [a\x01, b) does not */
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128));
	two[1] = op_del("0", "");  /* from "0": etcd's interval [0, "\0") is empty */
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128));
	/* a put in both branches of a nested txn is fine; with a put of the
	 * parent it is not */
	RequestOp **a1 = arena_zalloc(&D.a, sizeof(*a1));
	RequestOp **a2 = arena_zalloc(&D.a, sizeof(*a2));
	a1[0] = op_put("a", "1");
	a2[0] = op_put("a", "2");
	two[0] = op_txn(txn(NULL, 0, a1, 1, a2, 1));
	two[1] = op_put("b", "1");
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128));
	two[1] = op_put("a", "3");
	expect_err(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128), MVCC_ERR_DUPLICATE_KEY, 3,
		   dup);
	/* a nested put, then a later nested delete of it: etcd lets it pass;
	 * the other order it refuses */
	RequestOp **d1 = arena_zalloc(&D.a, sizeof(*d1));
	d1[0] = op_del("a", NULL);
	two[0] = op_txn(txn(NULL, 0, a1, 1, NULL, 0));
	two[1] = op_txn(txn(NULL, 0, d1, 1, NULL, 0));
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128));
	two[0] = op_txn(txn(NULL, 0, d1, 1, NULL, 0));
	two[1] = op_txn(txn(NULL, 0, a1, 1, NULL, 0));
	expect_err(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128), MVCC_ERR_DUPLICATE_KEY, 3,
		   dup);
	/* a parent's delete range covers a nested put */
	two[0] = op_del("a", "c");
	T_CHECK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128) == MVCC_ERR_DUPLICATE_KEY);
	/* a key longer than a B+tree key in a nested put is as good as any */
	RequestOp **bigp = arena_zalloc(&D.a, sizeof(*bigp));
	bigp[0] = op_put("x", "v");
	bigp[0]->request_put->key = tbn(big, sizeof(big));
	two[0] = op_txn(txn(NULL, 0, bigp, 1, NULL, 0));
	two[1] = op_put("b", "v");
	T_OK(mvcc_validate_txn(txn(NULL, 0, two, 2, NULL, 0), 128));
	arena_release(&D.a);
}

/* A chain of `depth` txns, each nesting the next; the innermost puts k. */
static TxnRequest *chain(unsigned depth, const char *k)
{
	RequestOp **ops = arena_zalloc(&D.a, sizeof(*ops));
	ops[0] = op_put(k, "deep");
	TxnRequest *t = txn(NULL, 0, ops, 1, NULL, 0);
	for (unsigned i = 1; i < depth; i++) {
		ops = arena_zalloc(&D.a, sizeof(*ops));
		ops[0] = op_txn(t);
		t = txn(NULL, 0, ops, 1, NULL, 0);
	}
	return t;
}

static void test_deep_txn(void)
{
	t_phase = "deep txns";
	TxnResponse *resp;
	int64_t R = state_rev();
	T_RC(mvcc_validate_txn(chain(MVCC_TXN_MAX_DEPTH + 2, "deep"), 1000000),
	     MVCC_ERR_TOO_MANY_OPS);
	T_OK(mvcc_validate_txn(chain(100, "deep"), 1000000));
	T_OK(mvcc_validate_txn(chain(128, "deep"), 128));
	T_RC(mvcc_validate_txn(chain(129, "deep"), 128), MVCC_ERR_TOO_MANY_OPS);
	tdb_begin(&D);
	tdb_entry(&D);
	T_RC(mvcc_txn(D.s, chain(MVCC_TXN_MAX_DEPTH + 2, "deep"), &D.a, &resp),
	     MVCC_ERR_TOO_MANY_OPS);
	tdb_entry(&D);
	T_OK(mvcc_txn(D.s, chain(MVCC_TXN_MAX_DEPTH, "deep"), &D.a, &resp));
	T_CHECK(resp->header->revision == R + 1);
	for (unsigned i = 1; i < MVCC_TXN_MAX_DEPTH; i++) {
		T_CHECK(resp->n_responses == 1 && resp->succeeded);
		resp = resp->responses[0]->response_txn;
	}
	T_CHECK(resp->responses[0]->response_put->header->revision == R + 1);
	tdb_commit(&D);
}

/* ---- codec ---- */

static void test_codec(void)
{
	t_phase = "KeyValue codec";
	uint8_t buf[512], strip[512], key[40], val[200];
	for (t_step = 0; t_step < 20000; t_step++) {
		Mvccpb__KeyValue m = MVCCPB__KEY_VALUE__INIT;
		size_t kl = t_below(40), vl = t_below(200);
		for (size_t i = 0; i < kl; i++)
			key[i] = (uint8_t)t_rand();
		for (size_t i = 0; i < vl; i++)
			val[i] = (uint8_t)t_rand();
		int64_t ints[4];
		for (int i = 0; i < 4; i++) {
			switch (t_below(4)) {
			case 0: ints[i] = 0; break;
			case 1: ints[i] = (int64_t)t_below(300); break;
			case 2: ints[i] = -(int64_t)t_below(5); break;
			default: ints[i] = (int64_t)t_rand(); break;
			}
		}
		m.key = tbn(key, kl);
		m.value = tbn(val, vl);
		m.create_revision = ints[0];
		m.mod_revision = ints[1];
		m.version = ints[2];
		m.lease = ints[3];
		struct mvcc_kv f = { key, kl, val, vl, ints[0], ints[1], ints[2], ints[3] };
		size_t n = mvcc_kv_encoded_len(&f);
		T_CHECK(n == mvccpb__key_value__get_packed_size(&m));
		T_CHECK(mvcc_kv_encode(&f, buf) == n);
		uint8_t pb[512];
		mvccpb__key_value__pack(&m, pb);
		T_CHECK(memcmp(buf, pb, n) == 0);
		struct mvcc_kv g;
		T_OK(mvcc_kv_decode(buf, n, &g));
		T_CHECK(g.key_len == kl && g.value_len == vl && g.create_rev == ints[0] &&
			g.mod_rev == ints[1] && g.version == ints[2] && g.lease == ints[3]);
		T_CHECK(m_cmp(g.key, g.key_len, key, kl) == 0 &&
			m_cmp(g.value, g.value_len, val, vl) == 0);
		size_t sn;
		T_OK(mvcc_kv_strip_value(buf, n, strip, &sn));
		m.value = tbn(NULL, 0);
		T_CHECK(sn == mvccpb__key_value__get_packed_size(&m));
		mvccpb__key_value__pack(&m, pb);
		T_CHECK(memcmp(strip, pb, sn) == 0);
		/* every truncation is refused or decodes a prefix of fields */
		size_t cut = t_below(n + 1);
		int rc = mvcc_kv_decode(buf, cut, &g);
		T_CHECK(rc == 0 || rc == -EBADMSG);
	}
	struct mvcc_kv g;
	static const uint8_t wrong_type[] = { 0x08, 0x01 };           /* key as a varint */
	static const uint8_t long_len[] = { 0x0a, 0x05, 'a' };        /* past the end */
	static const uint8_t group[] = { 0x0b };                      /* a group */
	static const uint8_t zero_tag[] = { 0x00, 0x01 };
	static const uint8_t unknown[] = { 0x0a, 1, 'k', 0x3a, 2, 'x', 'y', 0x40, 5, 0x10, 9 };
	T_RC(mvcc_kv_decode(wrong_type, sizeof(wrong_type), &g), -EBADMSG);
	T_RC(mvcc_kv_decode(long_len, sizeof(long_len), &g), -EBADMSG);
	T_RC(mvcc_kv_decode(group, sizeof(group), &g), -EBADMSG);
	T_RC(mvcc_kv_decode(zero_tag, sizeof(zero_tag), &g), -EBADMSG);
	T_OK(mvcc_kv_decode(unknown, sizeof(unknown), &g));
	T_CHECK(g.key_len == 1 && g.create_rev == 9 && g.value_len == 0);
}

/* ---- events, skips, aborts ---- */

static struct {
	int n;
	enum mvcc_event_type type[8];
	struct rev rev[8];
	size_t kv_len[8], prev_len[8];
	bool prev[8];
} ev;

static void on_event(void *arg, const struct mvcc_event *e)
{
	(void)arg;
	if (ev.n >= 8)
		return;
	ev.type[ev.n] = e->type;
	ev.rev[ev.n] = e->rev;
	ev.kv_len[ev.n] = e->kv_len;
	ev.prev[ev.n] = e->prev_kv != NULL;
	ev.prev_len[ev.n] = e->prev_kv_len;
	struct mvcc_kv f;
	T_OK(mvcc_kv_decode(e->kv, e->kv_len, &f));
	T_CHECK(m_cmp(f.key, f.key_len, e->key, e->key_len) == 0);
	ev.n++;
}

static void test_events_and_batches(void)
{
	t_phase = "events, skips, aborts";
	tdb_close_store(&D, true);
	D.o.on_event = on_event;
	tdb_open_store(&D);
	T_CHECK(put("ev", "1") > 0);
	T_CHECK(put("ev", "22") > 0);
	DeleteResponse *dr = del("ev", NULL, false);
	int64_t R = dr->header->revision;
	etcdserverpb__delete_range_response__free_unpacked(dr, NULL);
	T_CHECK(ev.n == 3);
	T_CHECK(ev.type[0] == MVCC_EVENT_PUT && !ev.prev[0] && ev.rev[0].main == R - 2);
	T_CHECK(ev.type[1] == MVCC_EVENT_PUT && ev.prev[1] && ev.prev_len[1] == ev.kv_len[0]);
	T_CHECK(ev.type[2] == MVCC_EVENT_DELETE && ev.prev[2] && ev.prev_len[2] == ev.kv_len[1] &&
		ev.kv_len[2] == 4 && ev.rev[2].main == R);

	/* outside an entry, or a stale entry: refused / skipped */
	PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	PutResponse *pr;
	p.key = tb("skip");
	T_RC(mvcc_put(D.s, &p, &D.a, &pr), -EINVAL);
	T_RC(mvcc_apply_begin(D.s, 1), -EINVAL);
	tdb_begin(&D);
	T_RC(mvcc_batch_begin(D.s), -EBUSY);
	T_RC(mvcc_apply_begin(D.s, D.index), -EALREADY);
	T_RC(mvcc_put(D.s, &p, &D.a, &pr), -EINVAL);
	T_CHECK(mvcc_batch_view(D.s)->rev == R);

	/* an aborted batch leaves nothing; the entries apply again */
	uint64_t idx = D.index;
	tdb_entry(&D);
	T_OK(mvcc_put(D.s, &p, &D.a, &pr));
	T_CHECK(pr->header->revision == R + 1 && state_rev() == R + 1);
	mvcc_batch_abort(D.s);
	arena_release(&D.a);
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	T_CHECK(st.rev == R && st.consistent_index == idx);
	D.index = idx;
	tdb_begin(&D);
	tdb_entry(&D);
	T_OK(mvcc_put(D.s, &p, &D.a, &pr));
	T_CHECK(pr->header->revision == R + 1);
	tdb_commit(&D);

	/* the state survives a reopen */
	tdb_reopen(&D, true);
	mvcc_store_state(D.s, &st);
	T_CHECK(st.rev == R + 1 && st.consistent_index == D.index && !st.rebuilt &&
		st.compact_rev == 8 && st.finished_compact_rev == 8);
	D.o.on_event = NULL;
}

int main(void)
{
	t_set_seed(tm_pick_seed());
	mvcc_range_result_init(&rres);
	tdb_init(&D, NULL);
	test_fresh();
	test_put();
	test_delete();
	test_range_rules();
	test_compact();
	test_txn();
	test_validate();
	test_deep_txn();
	test_codec();
	view_close();
	test_events_and_batches();
	mvcc_range_result_free(&rres);
	tdb_free(&D);
	t_no_leaks();
	printf("test_mvcc_basic: ok (seed %" PRIu64 ")\n", t_seed);
	return 0;
}
