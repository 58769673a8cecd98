/*
 * Applying is idempotent by Raft index, and the index is a function of the
 * key bucket:
 *  - a run applies a seeded list of entries (puts, deletes, txns,
 *    compactions) in batches, finishes its compactions and dumps every
 *    bucket; applying the whole list again changes nothing;
 *  - a second run checkpoints at random, "crashes" (closes without a
 *    checkpoint, so the file is back at its last checkpoint) and replays
 *    the list from the start each time; every entry it applies answers
 *    byte for byte as in the first run, and the final file is the same;
 *  - dropping the index and reopening rebuilds it (in small commits) to the
 *    same bytes as the one written entry by entry, including its meta.
 * MVCC_SEED=n replays a seed.
 */
#include "mvcc_util.h"

enum kind { E_PUT, E_DEL, E_TXN, E_COMPACT };

struct entry {
	enum kind kind;
	struct tbuf req;    /* packed request */
	struct tbuf resp;   /* packed response of the first run, or "E" + rc */
};

static struct entry *ents;
static size_t nents;
static int64_t gen_rev = 1;  /* a rough revision for choosing compactions */

static ProtobufCBinaryData key_of(struct arena *a)
{
	static const char *const pool[] = { "a", "a/b", "a/c", "b", "b\x00", "c", "\xff", "\x00" };
	const char *k = pool[t_below(8)];
	size_t n = k[0] ? strlen(k) : 1;
	if (n == 1 && k[0] == 'b' && t_chance(300))
		n = 2;  /* "b\0" */
	uint8_t *p = arena_alloc(a, n + 1);
	memcpy(p, k, n);
	return tbn(p, n);
}

static Etcdserverpb__PutRequest *gen_put(struct arena *a)
{
	Etcdserverpb__PutRequest *p = arena_zalloc(a, sizeof(*p));
	etcdserverpb__put_request__init(p);
	p->key = key_of(a);
	size_t n = t_chance(30) ? 2500 : t_below(20);
	uint8_t *v = arena_alloc(a, n + 1);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)('a' + t_below(26));
	p->value = tbn(v, n);
	p->prev_kv = t_chance(300);
	return p;
}

static Etcdserverpb__DeleteRangeRequest *gen_del(struct arena *a)
{
	Etcdserverpb__DeleteRangeRequest *d = arena_zalloc(a, sizeof(*d));
	etcdserverpb__delete_range_request__init(d);
	d->key = key_of(a);
	if (t_chance(400))
		d->range_end = t_chance(500) ? tbn("", 1) : key_of(a);
	d->prev_kv = t_chance(500);
	return d;
}

static void gen(size_t n)
{
	struct arena a;
	arena_init(&a);
	ents = calloc(n, sizeof(*ents));
	for (nents = 0; nents < n; nents++) {
		struct entry *e = &ents[nents];
		unsigned r = (unsigned)t_below(100);
		if (r < 50) {
			e->kind = E_PUT;
			tm_pack(&gen_put(&a)->base, &e->req);
			gen_rev++;
		} else if (r < 70) {
			e->kind = E_DEL;
			tm_pack(&gen_del(&a)->base, &e->req);
			gen_rev++;
		} else if (r < 95) {
			Etcdserverpb__TxnRequest *t = arena_zalloc(&a, sizeof(*t));
			etcdserverpb__txn_request__init(t);
			Etcdserverpb__Compare *c = arena_zalloc(&a, sizeof(*c));
			etcdserverpb__compare__init(c);
			c->key = key_of(&a);
			c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
			c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
			c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
			c->version = (int64_t)t_below(3);
			t->compare = arena_alloc(&a, sizeof(*t->compare));
			t->compare[0] = c;
			t->n_compare = 1;
			for (int side = 0; side < 2; side++) {
				size_t k = t_below(4);
				Etcdserverpb__RequestOp **ops = arena_alloc(&a, (k + 1) * sizeof(*ops));
				for (size_t i = 0; i < k; i++) {
					ops[i] = arena_zalloc(&a, sizeof(*ops[i]));
					etcdserverpb__request_op__init(ops[i]);
					if (t_chance(500)) {
						ops[i]->request_case =
							ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
						ops[i]->request_put = gen_put(&a);
					} else {
						ops[i]->request_case =
							ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
						ops[i]->request_delete_range = gen_del(&a);
					}
				}
				if (side == 0) {
					t->success = ops;
					t->n_success = k;
				} else {
					t->failure = ops;
					t->n_failure = k;
				}
			}
			e->kind = E_TXN;
			tm_pack(&t->base, &e->req);
			gen_rev++;
		} else {
			Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
			q.revision = gen_rev - (int64_t)t_below(40);
			e->kind = E_COMPACT;
			tm_pack(&q.base, &e->req);
		}
		arena_release(&a);
	}
}

/* Applies entry i (Raft index i + 1); packs its response into out. */
static void apply(struct tdb *d, size_t i, struct tbuf *out)
{
	struct entry *e = &ents[i];
	ProtobufCMessage *req = NULL, *resp = NULL;
	int rc = 0;
	switch (e->kind) {
	case E_PUT:
		req = &etcdserverpb__put_request__unpack(NULL, e->req.len, e->req.p)->base;
		rc = mvcc_put(d->s, (Etcdserverpb__PutRequest *)req, &d->a,
			      (Etcdserverpb__PutResponse **)&resp);
		break;
	case E_DEL:
		req = &etcdserverpb__delete_range_request__unpack(NULL, e->req.len, e->req.p)->base;
		rc = mvcc_delete_range(d->s, (Etcdserverpb__DeleteRangeRequest *)req, &d->a,
				       (Etcdserverpb__DeleteRangeResponse **)&resp);
		break;
	case E_TXN:
		req = &etcdserverpb__txn_request__unpack(NULL, e->req.len, e->req.p)->base;
		rc = mvcc_txn(d->s, (Etcdserverpb__TxnRequest *)req, &d->a,
			      (Etcdserverpb__TxnResponse **)&resp);
		break;
	case E_COMPACT:
		req = &etcdserverpb__compaction_request__unpack(NULL, e->req.len, e->req.p)->base;
		rc = mvcc_compact(d->s, (Etcdserverpb__CompactionRequest *)req, &d->a,
				  (Etcdserverpb__CompactionResponse **)&resp);
		break;
	}
	out->len = 0;
	if (rc) {
		if (!mvcc_is_request_error(rc))
			T_FAIL("entry %zu: %d (%s) %s", i, rc, mvcc_strerror(rc), errmsg_get(rc));
		tbuf_add(out, "E", 1);
		tbuf_add(out, &rc, sizeof(rc));
	} else {
		tm_pack(resp, out);
	}
	protobuf_c_message_free_unpacked(req, NULL);
}

/* Runs entries [from, to) in random batches; with crash_pct, may stop
 * after any batch, the last one too, by closing without a checkpoint (the
 * file is then back at its last checkpoint): returns whether it did. */
static bool run(struct tdb *d, size_t from, size_t to, unsigned crash_pct_x10,
		bool check_responses)
{
	struct tbuf out = { 0 };
	size_t i = from;
	while (i < to) {
		size_t batch = 1 + t_below(40);
		tdb_begin(d);
		for (size_t k = 0; k < batch && i < to; k++, i++) {
			int rc = mvcc_apply_begin(d->s, i + 1);
			if (rc == -EALREADY)
				continue;
			T_OK(rc);
			apply(d, i, &out);
			if (check_responses) {
				t_step = i;
				tm_same_dump(&out, &ents[i].resp, "replayed entry's response");
			} else {
				ents[i].resp.len = 0;
				tbuf_add(&ents[i].resp, out.p, out.len);
			}
		}
		T_OK(mvcc_compact_step(d->s, 1 + (uint32_t)t_below(30), NULL));
		tdb_commit(d);
		if (t_chance(100))
			T_OK(btree_db_checkpoint(d->db, NULL));
		if (t_chance(crash_pct_x10)) {
			tdb_close_store(d, false);
			tdb_open_store(d);
			tbuf_free(&out);
			return true;
		}
	}
	tbuf_free(&out);
	return false;
}

int main(void)
{
	struct tdb a, b;
	struct tbuf da = { 0 }, db = { 0 }, tmp = { 0 };
	t_set_seed(tm_pick_seed());
	gen((size_t)tm_env_long("MVCC_ENTRIES", 4000));

	t_phase = "straight run";
	tdb_init(&a, NULL);
	run(&a, 0, nents, 0, false);
	tdb_finish_compaction(&a, 64);
	tdb_dump(&a, NULL, &da);

	t_phase = "apply everything again";
	run(&a, 0, nents, 0, true);
	tdb_finish_compaction(&a, 64);
	tdb_dump(&a, NULL, &tmp);
	tm_same_dump(&tmp, &da, "db after applying every entry twice");

	t_phase = "crashes and replays";
	tdb_init(&b, NULL);
	size_t crashes = 0;
	for (;;) {
		/* after a crash raftd hands over every entry again */
		if (!run(&b, 0, nents, crashes < 40 ? 15 : 0, true))
			break;
		crashes++;
	}
	tdb_finish_compaction(&b, 64);
	tdb_dump(&b, NULL, &db);
	tm_same_dump(&db, &da, "db after crashes and replays");
	struct mvcc_state st;
	mvcc_store_state(b.s, &st);
	T_CHECK(st.consistent_index == nents);

	t_phase = "index rebuild";
	struct tbuf idx_before = { 0 }, idx_after = { 0 };
	tdb_dump(&b, tm_is_index_bucket, &idx_before);
	T_CHECK(idx_before.len > 0);
	struct btree_txn *t;
	T_OK(btree_write_begin(b.db, &t));
	T_OK(kvindex_drop(t));
	T_OK(btree_commit(t, NULL));
	tdb_close_store(&b, true);
	b.o.rebuild_batch = 300;
	tdb_open_store(&b);
	mvcc_store_state(b.s, &st);
	T_CHECK(st.rebuilt && st.consistent_index == nents);
	tdb_dump(&b, tm_is_index_bucket, &idx_after);
	tm_same_dump(&idx_after, &idx_before, "rebuilt index");
	tmp.len = 0;
	tdb_dump(&b, NULL, &tmp);
	tm_same_dump(&tmp, &da, "db after the rebuild");
	/* an index that no longer matches the key bucket is rebuilt too */
	T_OK(btree_write_begin(b.db, &t));
	struct btree_bucket *meta;
	T_OK(btree_bucket_open(t, NULL, SCHEMA_BUCKET_KV_META, strlen(SCHEMA_BUCKET_KV_META), &meta));
	T_OK(btree_put(meta, "covers", 6, "0123456789abcdefX", 17));
	T_OK(btree_commit(t, NULL));
	tdb_reopen(&b, true);
	mvcc_store_state(b.s, &st);
	T_CHECK(st.rebuilt);
	tmp.len = 0;
	tdb_dump(&b, NULL, &tmp);
	tm_same_dump(&tmp, &da, "db after a stale index was rebuilt");

	size_t dump_len = da.len;
	tdb_free(&a);
	tdb_free(&b);
	for (size_t i = 0; i < nents; i++) {
		tbuf_free(&ents[i].req);
		tbuf_free(&ents[i].resp);
	}
	free(ents);
	tbuf_free(&da);
	tbuf_free(&db);
	tbuf_free(&tmp);
	tbuf_free(&idx_before);
	tbuf_free(&idx_after);
	t_no_leaks();
	printf("test_mvcc_replay: ok (seed %" PRIu64 "): %zu entries, %zu crashes, final "
	       "revision %" PRId64 ", db dump %zu bytes\n", t_seed, nents, crashes, st.rev, dump_len);
	return 0;
}
