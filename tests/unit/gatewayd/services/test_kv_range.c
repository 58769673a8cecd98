/*
 * gatewayd/services/kv_range.c: a RangeResponse streamed over a read txn
 * (measured, then written, in steps of random sizes into a sink) is byte
 * for byte what protobuf-c packs for the same answer built whole
 * (mvcc_range, mvcc_range_response), for random ranges over a store with
 * history: key, prefix, from-key and single-key ranges, old revisions,
 * limits, every sort order and target (and unknown ones), count_only,
 * keys_only, min/max mod and create revisions; refused revisions give
 * mvcc_range's errors. A keys_only KeyValue is measured and written
 * without its value's bytes being read (they sit on a page no one may
 * read). MVCC_SEED=n replays a run; KV_RANGE_CASES=n sets its length.
 */
#include "mvcc_util.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gatewayd/services/kv_range.h"
#include "proto/wire.h"

static struct tdb D;
static int64_t compacted = -1;

/* ---- the store ---- */

static void key_name(char *buf, size_t len, unsigned i)
{
	snprintf(buf, len, "%c/%04u", "abc"[i % 3], i);
}

static char *value_of(size_t n)
{
	static char v[4096];
	for (size_t i = 0; i < n; i++)
		v[i] = (char)('a' + t_below(26));
	v[n] = 0;
	return v;
}

static void put_key(unsigned i, size_t vlen)
{
	char k[32];
	key_name(k, sizeof(k), i);
	tdb_put(&D, k, strlen(k), value_of(vlen));
}

static void delete_key(unsigned i)
{
	Etcdserverpb__DeleteRangeRequest r = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	Etcdserverpb__DeleteRangeResponse *resp;
	char k[32];
	key_name(k, sizeof(k), i);
	r.key = tb(k);
	tdb_entry(&D);
	T_OK(mvcc_delete_range(D.s, &r, &D.a, &resp));
}

/* Batches of puts (values of 0 to 3000 bytes), overwrites and deletes,
 * then a compaction in the middle of the history. */
static void fill(unsigned keys, unsigned batches)
{
	for (unsigned b = 0; b < batches; b++) {
		tdb_begin(&D);
		for (unsigned n = 0; n < keys / 2; n++) {
			unsigned i = (unsigned)t_below(keys);
			if (b > 0 && t_chance(100))
				delete_key(i);
			else
				put_key(i, t_chance(100) ? 0 : (size_t)t_below(3000));
		}
		tdb_commit(&D);
		if (b == batches / 2) {
			Etcdserverpb__CompactionRequest c = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
			Etcdserverpb__CompactionResponse *resp;
			struct mvcc_state st;
			mvcc_store_state(D.s, &st);
			c.revision = st.rev / 2;
			tdb_begin(&D);
			tdb_entry(&D);
			T_OK(mvcc_compact(D.s, &c, &D.a, &resp));
			tdb_commit(&D);
			tdb_finish_compaction(&D, 64);
			compacted = c.revision;
		}
	}
}

/* ---- random requests ---- */

static char kbuf[2][32];

static void random_request(RangeRequest *r, int64_t cur)
{
	etcdserverpb__range_request__init(r);
	key_name(kbuf[0], sizeof(kbuf[0]), (unsigned)t_below(400));
	switch (t_below(5)) {
	case 0: /* one key */
		r->key = tb(kbuf[0]);
		break;
	case 1: /* [a, b) */
		key_name(kbuf[1], sizeof(kbuf[1]), (unsigned)t_below(400));
		if (strcmp(kbuf[0], kbuf[1]) > 0) {
			r->key = tb(kbuf[1]);
			r->range_end = tb(kbuf[0]);
		} else {
			r->key = tb(kbuf[0]);
			r->range_end = tb(kbuf[1]);
		}
		break;
	case 2: /* a prefix */
		kbuf[0][1] = 0;
		r->key = tb(kbuf[0]);
		kbuf[1][0] = (char)(kbuf[0][0] + 1);
		kbuf[1][1] = 0;
		r->range_end = tb(kbuf[1]);
		break;
	case 3: /* from a key */
		r->key = tb(kbuf[0]);
		r->range_end = tbn("\0", 1);
		break;
	default: /* everything */
		r->key = tbn("\0", 1);
		r->range_end = tbn("\0", 1);
		break;
	}
	if (t_chance(50)) /* compacted away, or in the future */
		r->revision = t_below(2) ? compacted - 1 - (int64_t)t_below(3) : cur + 1 + (int64_t)t_below(3);
	else if (t_chance(400))
		r->revision = compacted + (int64_t)t_below((uint64_t)(cur - compacted + 1));
	if (t_chance(400))
		r->limit = (int64_t)t_below(40) - 2;
	if (t_chance(500)) {
		r->sort_order = (Etcdserverpb__RangeRequest__SortOrder)t_below(4);
		r->sort_target = (Etcdserverpb__RangeRequest__SortTarget)t_below(6);
	}
	r->count_only = t_chance(100);
	r->keys_only = t_chance(250);
	if (t_chance(200))
		r->min_mod_revision = (int64_t)t_below((uint64_t)cur);
	if (t_chance(200))
		r->max_mod_revision = (int64_t)t_below((uint64_t)cur + 2);
	if (t_chance(200))
		r->min_create_revision = (int64_t)t_below((uint64_t)cur);
	if (t_chance(200))
		r->max_create_revision = (int64_t)t_below((uint64_t)cur + 2);
}

/* ---- the comparison ---- */

static struct tbuf sunk;

static uint8_t *sink(void *arg, size_t len)
{
	(void)arg;
	size_t at = sunk.len;
	tbuf_add(&sunk, NULL, 0);
	if (at + len > sunk.cap) {
		sunk.cap = (at + len) * 2;
		sunk.p = realloc(sunk.p, sunk.cap);
		if (!sunk.p)
			T_FAIL("out of memory");
	}
	sunk.len += len;
	return sunk.p + at;
}

static struct mvcc_range_result res;

/* The streamed answer to r over v equals protobuf-c's packing of the whole
 * one; returns its size (0 for a refused request). */
static size_t check_one(struct mvcc_view *v, const RangeRequest *r)
{
	struct gw_header h = {
		.cluster_id = t_below(2) ? t_rand() : 0,
		.member_id = t_rand(),
		.revision = v->rev,
		.raft_term = t_below(300),
	};
	struct kv_range_stream st;
	struct tbuf want = { 0 };
	struct arena a;
	bool done = false;

	kv_range_stream_init(&st);
	int want_rc = mvcc_range(v, r, &res);
	int rc = kv_range_stream_begin(&st, v, r, &h);
	if (rc != want_rc)
		T_FAIL("begin returned %d, mvcc_range %d", rc, want_rc);
	if (rc) {
		kv_range_stream_free(&st);
		return 0;
	}
	while (!done) {
		size_t budget = 1 + t_below(t_chance(500) ? 3 : 200);
		T_OK(kv_range_stream_count(&st, &budget, &done));
	}

	Etcdserverpb__RangeResponse *resp;
	arena_init(&a);
	T_OK(mvcc_range_response(&res, &a, false, &resp));
	resp->header->cluster_id = h.cluster_id;
	resp->header->member_id = h.member_id;
	resp->header->raft_term = h.raft_term;
	tm_pack(&resp->base, &want);
	T_CHECK(st.total == want.len);
	T_CHECK(st.w.n == res.n && st.w.count == res.count && st.w.more == res.more);

	sunk.len = 0;
	done = false;
	while (!done) {
		size_t budget = 1 + t_below(t_chance(500) ? 16 : 64 * 1024);
		T_OK(kv_range_stream_write(&st, sink, NULL, &budget, &done));
	}
	if (sunk.len != want.len || memcmp(sunk.p, want.p, want.len) != 0)
		T_FAIL("streamed %zu bytes, protobuf-c packs %zu, or they differ", sunk.len,
		       want.len);
	size_t n = want.len;
	tbuf_free(&want);
	arena_release(&a);
	kv_range_stream_free(&st);
	return n;
}

static void test_random_ranges(void)
{
	struct btree_txn *t;
	struct mvcc_view v;
	long cases = tm_env_long("KV_RANGE_CASES", 3000);
	size_t bytes = 0, refused = 0;

	t_phase = "random ranges";
	T_OK(btree_db_read_begin(D.db, &D.root, &t));
	T_OK(mvcc_view_open(t, &v));
	for (t_step = 0; t_step < (uint64_t)cases; t_step++) {
		RangeRequest r;
		random_request(&r, v.rev);
		size_t n = check_one(&v, &r);
		bytes += n;
		refused += n == 0;
	}
	/* the requests reached both refusals and answers */
	T_CHECK(refused > 0 && refused < (size_t)cases / 2);
	printf("  %ld ranges, %zu refused, %zu bytes compared\n", cases, refused, bytes);
	mvcc_view_close(&v);
	btree_txn_end(t);
}

/* keys_only never reads a value: a KeyValue whose value bytes lie on a
 * page nobody may read is measured and written all the same. */
static void test_keys_only_skips_value(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, (size_t)pg * 3, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	T_CHECK(m != MAP_FAILED);
	/* key "k", create 2, mod 3, version 1, value: the whole middle page
	 * (its length's varint ends just before it), lease 7 */
	uint8_t *val = m + pg;
	size_t vlen = (size_t)pg;
	uint8_t head[32];
	size_t hn = 0;
	head[hn++] = 1 << 3 | 2;
	head[hn++] = 1;
	head[hn++] = 'k';
	head[hn++] = 2 << 3;
	head[hn++] = 2;
	head[hn++] = 3 << 3;
	head[hn++] = 3;
	head[hn++] = 4 << 3;
	head[hn++] = 1;
	head[hn++] = 5 << 3 | 2;
	hn += proto_varint_put(head + hn, vlen);
	uint8_t *kv = val - hn;
	memcpy(kv, head, hn);
	val[vlen] = 6 << 3;
	val[vlen + 1] = 7;
	size_t kvlen = hn + vlen + 2;
	T_OK(mprotect(val, vlen, PROT_NONE));

	struct mvcc_kv_ref ref = { .kv = kv, .kv_len = kvlen };
	T_OK(mvcc_kv_decode(kv, kvlen, &ref.f));
	T_CHECK(ref.f.value == val && ref.f.value_len == vlen && ref.f.lease == 7);
	size_t len = 0;
	T_OK(kv_range_kv_len(&ref, true, &len));
	uint8_t out[64];
	T_CHECK(len <= sizeof(out));
	T_CHECK(kv_range_kv_write(out, &ref, true) == len);
	/* kvs field: tag, length, then the KeyValue without field 5 */
	static const uint8_t want[] = { 2 << 3 | 2, 11, 1 << 3 | 2, 1, 'k', 2 << 3, 2, 3 << 3, 3,
					4 << 3, 1, 6 << 3, 7 };
	T_CHECK(len == sizeof(want) && memcmp(out, want, len) == 0);
	munmap(m, (size_t)pg * 3);
}

int main(void)
{
	t_set_seed(tm_pick_seed());
	mvcc_range_result_init(&res);
	test_keys_only_skips_value();
	tdb_init(&D, NULL);
	fill(400, 8);
	test_random_ranges();
	mvcc_range_result_free(&res);
	tbuf_free(&sunk);
	tdb_free(&D);
	t_no_leaks();
	printf("test_kv_range: ok (seed %" PRIu64 ")\n", t_seed);
	return 0;
}
