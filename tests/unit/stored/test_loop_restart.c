/*
 * stored may die at any moment (invariant 4, docs/invariants.md; broken
 * on purpose here by SIGKILL at random moments). Two members run the
 * same seeded stream of committed entries (puts, deletes, txns,
 * compactions, empty entries, kinds not applied yet); this process plays
 * raftd and a gateway for both. Member A's stored, a forked child, is
 * SIGKILLed mid-stream several times and started again; as raftd does on
 * a new epoch, the test then hands it everything after its published
 * durable index. Member B's stored never dies. At the end both apply a
 * physical compaction just past the stream's last one (answered only once
 * every compaction is done, so both are at rest), stop
 * on SIGTERM with a checkpoint, and their db files must hold the same
 * buckets, byte for byte.
 *
 * Meanwhile a reader process reads member A as a gateway does (reader
 * entry, published root, MVCC view, a range over every key) and checks
 * that a published revision and applied index never go backwards, and that
 * every published root opens and reads at the revision published with it,
 * across the kills. It also looks every key the range found up through
 * stored's latest-entry cache, which each new stored clears and warms: an
 * answer of the cache must be the very entry the tree holds at that root.
 *
 * STORED_SEED=n replays a seed; STORED_ENTRIES=n changes the stream's
 * length.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#include "stored_util.h"

#include "base/clock/clock.h"
#include "stored/mvcc/kvindex.h"
#include "stored/mvcc/revision.h"
#include "stored/mvcc/lcache.h"

#include "raftpb/raft.pb-c.h"
#include "shm/doorbell.h"
#include "base/log/log.h"
#include "base/log/errmsg.h"
#include "shm/readers.h"
#include "stored/alloc.h"
#include "stored/loop.h"
#include "stored/mvcc/mvcc.h"

static uint64_t seed;

static uint64_t mix(uint64_t x)
{
	return test_mix(x ^ seed);
}

/* ---- the entry stream ---- */

static void key_of(char *buf, size_t len, uint64_t x)
{
	snprintf(buf, len, "key/%02u", (unsigned)(x % 40));
}

/* The revision a compaction at index i asks for. */
static int64_t compact_target(uint64_t i)
{
	return (int64_t)(i / 3 > 1 ? i / 3 : 1);
}

static bool is_compaction(uint64_t i)
{
	uint64_t pick = mix(i) % 100;
	return pick >= 90 && pick < 94;
}

/* Entry data for index i (empty for a no-op); *type its entry type. */
static void gen_entry(uint64_t i, const struct msg_origin *o, struct tbuf *out, uint32_t *type)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	uint64_t x = mix(i), pick = x % 100;
	char k1[32], k2[32], val[320];
	size_t vlen = (x >> 20) % 300;

	*type = RAFTPB__ENTRY_TYPE__EntryNormal;
	out->len = 0;
	key_of(k1, sizeof(k1), x >> 8);
	key_of(k2, sizeof(k2), x >> 14);
	for (size_t j = 0; j < vlen; j++)
		val[j] = (char)('a' + (mix(i * 1000 + j) % 26));
	val[vlen] = '\0';

	if (pick < 55) {
		Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
		put.key = tb(k1);
		put.value = tb(val);
		put.prev_kv = (x >> 40) & 1;
		req.put = &put;
		tst_entry(&req, o, out);
	} else if (pick < 70) {
		tst_delete(k1, NULL, (x >> 40) & 1, o, out);
	} else if (pick < 75) {
		tst_delete(strcmp(k1, k2) < 0 ? k1 : k2, strcmp(k1, k2) < 0 ? k2 : k1, true, o, out);
	} else if (pick < 90) {
		Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
		Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = { &cmp };
		Etcdserverpb__RequestOp ok = ETCDSERVERPB__REQUEST_OP__INIT, *oks[1] = { &ok };
		Etcdserverpb__RequestOp no = ETCDSERVERPB__REQUEST_OP__INIT, *nos[1] = { &no };
		Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
		Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
		cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER;
		cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
		cmp.key = tb(k1);
		cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
		cmp.version = (int64_t)((x >> 30) % 3);
		put.key = tb(k2);
		put.value = tb(val);
		ok.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
		ok.request_put = &put;
		del.key = tb(k1);
		no.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		no.request_delete_range = &del;
		txn.n_compare = 1;
		txn.compare = cmps;
		txn.n_success = 1;
		txn.success = oks;
		txn.n_failure = 1;
		txn.failure = nos;
		req.txn = &txn;
		tst_entry(&req, o, out);
	} else if (pick < 94) {
		tst_compact(compact_target(i), (x >> 40) & 1, o, out);
	} else if (pick < 97) {
		return; /* a new leader's empty entry */
	} else {
		Etcdserverpb__LeaseGrantRequest lg = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
		lg.ttl = 60;
		req.lease_grant = &lg;
		tst_entry(&req, o, out);
	}
}

/* ---- a member: its region, its stored child, raftd's and a gateway's side ---- */

struct member {
	const char *name;
	struct tst_member m;
	struct shm_region *rf, *gw;
	struct shm_slot_ref slot;
	struct ring *committed, *results;
	pid_t child;
	uint64_t next;          /* next index to hand over */
	uint64_t epoch;         /* stored's epoch last seen */
	uint64_t restarts;
	uint64_t kills_behind;  /* kills with handed-over entries not applied */
	uint64_t results_seen;
	uint64_t final_index;   /* the closing compaction's index, once sent */
	bool final_answered;
};

/* The stored process. */
static void child_main(struct member *mb)
{
	struct stored_loop_opts o = {
		.data_dir = mb->m.data_dir, .member_id = TST_MEMBER, .cluster_id = TST_CLUSTER,
		.map_size = 1ull << 30, .compact_step = 50, .batch_entries = 64,
		.checkpoint_entries = 300,
	};
	tst_stored_child(mb->m.region_path, &o, LOG_LEVEL_WARN);
}

static void member_start(struct member *mb)
{
	mb->child = test_fork();
	CHECK(mb->child >= 0);
	if (mb->child == 0)
		child_main(mb);
}

static struct status_stored member_status(struct member *mb)
{
	return tst_status(mb->gw);
}

static void member_init(struct member *mb, const char *name)
{
	memset(mb, 0, sizeof(*mb));
	mb->name = name;
	tst_member_init(&mb->m, 64 * 1024);
	mb->rf = tst_attach(&mb->m);
	mb->gw = tst_attach(&mb->m);
	CHECK_EQ(shm_role_claim(mb->rf, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_slot_claim(mb->gw, &mb->slot), 0);
	mb->committed = shm_daemon_ring(mb->rf, SHM_RING_COMMITTED);
	mb->results = shm_slot_ring(mb->gw, mb->slot.index, SHM_SLOT_FROM_STORED);
	mb->next = 1;
	member_start(mb);
}

/* raftd's side: on a new epoch, hand over again from the durable index. */
static void member_watch_epoch(struct member *mb)
{
	struct status_stored st = member_status(mb);

	if (st.epoch != mb->epoch) {
		CHECK(st.epoch > mb->epoch);
		mb->epoch = st.epoch;
		mb->next = st.durable_index + 1;
	}
}

/* The gateway's side: take results; a result never comes before the root
 * that holds its entry (or a later one) is published. */
static void member_drain(struct member *mb)
{
	struct tst_result r = { 0 };

	while (tst_take_result(mb->results, &r) == 0) {
		struct status_stored st = member_status(mb);
		CHECK(st.applied_index >= r.h.index);
		CHECK(st.revision >= r.h.revision);
		if (r.h.index == mb->final_index && mb->final_index) {
			CHECK_EQ(r.h.status, 0);
			mb->final_answered = true;
		}
		mb->results_seen++;
	}
	tbuf_free(&r.body);
}

/* Hands over the entries up to last, as fast as the ring takes them. */
static void member_feed(struct member *mb, uint64_t last, struct tbuf *buf)
{
	uint32_t type;

	member_watch_epoch(mb);
	while (mb->next <= last) {
		struct msg_origin o = tst_origin(mb->slot.index, mb->slot.generation, mb->next);
		gen_entry(mb->next, &o, buf, &type);
		int rc = tst_commit(mb->committed, mb->next, 1 + mb->next / 500, type, buf->p, buf->len);
		if (rc == -EAGAIN)
			break;
		CHECK_EQ(rc, 0);
		mb->next++;
	}
	member_drain(mb);
}

static void member_kill_and_restart(struct member *mb)
{
	uint64_t old = member_status(mb).epoch;

	kill(mb->child, SIGKILL);
	if (member_status(mb).applied_index + 1 < mb->next)
		mb->kills_behind++;
	CHECK_EQ(test_wait(mb->child), 128 + SIGKILL);
	mb->restarts++;
	member_start(mb);
	CHECK(TEST_WAIT_FOR(member_status(mb).epoch > old, 20000));
	member_watch_epoch(mb);
}

/* ---- the reader of member A ---- */

/* Shared with the reader process (this one forks stored children, so it
 * keeps no threads of its own: a child forked from a threaded process may
 * inherit a lock another thread held). */
struct reader {
	struct member *mb;
	atomic_bool stop;
	uint64_t reads, skipped;
	uint64_t cache_asked, cache_hits;
	char err[1024];
};

/* Every key of a range over everything, looked up through the cache: an
 * answer must be the key's latest revision as the latest bucket has it in
 * the same txn, and the very key-bucket entry btree_get finds for that
 * revision (the same bytes of the same page). */
static void reader_check_cache(struct reader *rd, const struct lcache *c, uint64_t generation,
			       struct mvcc_view *v, const struct mvcc_range_result *res)
{
	for (size_t i = 0; i < res->n && !rd->err[0]; i++) {
		const uint8_t *tv;
		size_t tvl;
		struct kvindex_entry ce;
		uint8_t rk[REV_BYTES];
		const uint8_t *key = res->kvs[i].f.key;
		size_t klen = res->kvs[i].f.key_len;
		rd->cache_asked++;
		if (!v->idx.keyb ||
		    kvindex_cache_get(c, generation, v->idx.keyb, key, klen, &ce) != 0)
			continue;
		rd->cache_hits++;
		rev_encode(ce.mod, rk);
		struct kvindex_entry le;
		if (kvindex_latest_get(&v->idx, key, klen, &le) != 0 || rev_cmp(le.mod, ce.mod) != 0 ||
		    btree_get(v->idx.keyb, rk, sizeof(rk), &tv, &tvl) != 0 || tv != ce.kv ||
		    tvl != ce.kv_len)
			snprintf(rd->err, sizeof(rd->err),
				 "the cache's entry of a %zu-byte key is not the tree's", klen);
	}
}

static void reader_main(struct reader *rd)
{
	struct shm_region *r;
	struct btree_reader *db = NULL;
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest all = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint64_t last_rev = 0, last_applied = 0;
	char path[600];
	uint32_t e;
	struct lcache cache;
	bool cache_ok = false;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (shm_region_attach(rd->mb->m.region_path, &r))
		test_child_exit(2);
	snprintf(path, sizeof(path), "%s/member/snap/db", rd->mb->m.data_dir);
	static uint8_t zero; /* key "\0" with range_end "\0": every key */
	all.key.len = 1;
	all.key.data = &zero;
	all.range_end = all.key;
	mvcc_range_result_init(&res);
	if (readers_claim(r, &e))
		test_child_exit(3);
	while (!atomic_load(&rd->stop) && !rd->err[0]) {
		struct status_stored st;
		struct btree_txn *t;
		struct mvcc_view v;
		int rc;

		if (readers_begin(r, e, &st) != 0 || st.root_page == 0) {
			readers_end(r, e);
			rd->skipped++;
			usleep(200);
			continue;
		}
		if (st.revision < last_rev || st.applied_index < last_applied)
			snprintf(rd->err, sizeof(rd->err),
				 "went backwards: revision %" PRIu64 " after %" PRIu64
				 ", applied %" PRIu64 " after %" PRIu64,
				 st.revision, last_rev, st.applied_index, last_applied);
		last_rev = st.revision;
		last_applied = st.applied_index;
		if (!db && btree_reader_open(path, NULL, &db) != 0)
			db = NULL;
		if (!cache_ok) {
			size_t bytes;
			void *area = shm_cache_area(r, &bytes);
			cache_ok = area && lcache_attach(&cache, area, bytes) == 0;
		}
		struct btree_root root = { st.root_page, st.txid, st.high_water_page };
		if (db && !rd->err[0]) {
			rc = btree_reader_begin(db, &root, &t);
			if (rc) {
				snprintf(rd->err, sizeof(rd->err), "reader begin at txid %" PRIu64 ": %d %s",
					 st.txid, rc, errmsg_get(rc));
			} else {
				rc = mvcc_view_open(t, &v);
				if (rc == 0) {
					if (v.rev != (int64_t)st.revision)
						snprintf(rd->err, sizeof(rd->err),
							 "view revision %" PRId64 " != published %" PRIu64,
							 v.rev, st.revision);
					rc = mvcc_range(&v, &all, &res);
					if (rc && rc != MVCC_ERR_COMPACTED)
						snprintf(rd->err, sizeof(rd->err), "range: %d %s", rc,
							 errmsg_get(rc));
					if (rc == 0 && cache_ok)
						reader_check_cache(rd, &cache, st.db_generation, &v, &res);
					mvcc_view_close(&v);
				} else {
					snprintf(rd->err, sizeof(rd->err),
						 "view open at txid %" PRIu64 " root %" PRIu64
						 " hwm %" PRIu64 " applied %" PRIu64 " epoch %" PRIu64
						 ": %d %s",
						 st.txid, st.root_page, st.high_water_page,
						 st.applied_index, st.epoch, rc, errmsg_get(rc));
				}
				btree_txn_end(t);
				rd->reads++;
			}
		}
		readers_end(r, e);
	}
	mvcc_range_result_free(&res);
	btree_reader_close(db);
	readers_release(r, e);
	shm_region_detach(r);
	test_child_exit(0);
}

/* ---- the test ---- */

static void finish(struct member *mb, int64_t revision, struct tbuf *buf)
{
	struct msg_origin o = tst_origin(mb->slot.index, mb->slot.generation, mb->next);

	mb->final_index = mb->next;
	tst_compact(revision, true, &o, buf);
	CHECK(TEST_WAIT_FOR(tst_commit(mb->committed, mb->next, 9, 0, buf->p, buf->len) == 0,
			    10000));
	mb->next++;
	CHECK(TEST_WAIT_FOR((member_drain(mb), mb->final_answered), 20000));
	kill(mb->child, SIGTERM);
	CHECK_EQ(test_wait(mb->child), 0);
	CHECK_EQ(member_status(mb).durable_index, mb->final_index);
	CHECK_EQ(member_status(mb).applied_index, mb->final_index);
}

int main(void)
{
	const char *s = getenv("STORED_SEED");
	const char *n_env = getenv("STORED_ENTRIES");
	uint64_t n = n_env && *n_env ? strtoull(n_env, NULL, 0) : 2500;
	uint64_t kills[4];
	struct member a, b;
	struct reader *rd = test_shared(sizeof(*rd));
	struct tbuf buf = { 0 }, da = { 0 }, db = { 0 };
	pid_t reader;
	unsigned k = 0;

	seed = s && *s ? strtoull(s, NULL, 0) : clock_now_ns() ^ (uint64_t)getpid();
	printf("seed %" PRIu64 " (STORED_SEED), %" PRIu64 " entries\n", seed, n);
	fflush(stdout);
	for (unsigned i = 0; i < 4; i++)
		kills[i] = (i + 1) * n / 5 + mix(7777 + i) % (n / 10 + 1);

	member_init(&a, "A");
	member_init(&b, "B");
	CHECK(TEST_WAIT_FOR(member_status(&a).epoch >= 1 && member_status(&b).epoch >= 1, 20000));
	rd->mb = &a;
	reader = test_fork();
	CHECK(reader >= 0);
	if (reader == 0)
		reader_main(rd);

	while (a.next <= n || b.next <= n) {
		uint64_t a_before = a.next;
		member_feed(&a, k < 4 ? (kills[k] < n ? kills[k] : n) : n, &buf);
		member_feed(&b, n, &buf);
		if (k < 4 && a.next > kills[k]) {
			/* mid-stream: kill it while it applies the last 200 or so */
			uint64_t near = kills[k] - 200 + mix(k) % 150;
			TEST_WAIT_FOR(member_status(&a).applied_index >= near, 5000);
			member_kill_and_restart(&a);
			k++;
		} else if (a.next == a_before) {
			usleep(100);
		}
		if (rd->err[0]) {
			fprintf(stderr, "invariant 4 (stored may die at any moment): reader: %s\n", rd->err);
			CHECK(!rd->err[0]);
		}
	}
	CHECK(TEST_WAIT_FOR((member_drain(&a), member_drain(&b),
			     member_status(&a).applied_index >= n && member_status(&b).applied_index >= n),
			    30000));
	CHECK_EQ(member_status(&a).revision, member_status(&b).revision);
	CHECK(a.restarts >= 3);

	/* the closing compaction asks for just past the stream's last one,
	 * keeping most of the history to compare */
	int64_t target = 1;
	for (uint64_t i = 1; i <= n; i++)
		if (is_compaction(i) && compact_target(i) >= target)
			target = compact_target(i) + 1;
	CHECK(target <= (int64_t)member_status(&a).revision);
	finish(&a, target, &buf);
	finish(&b, target, &buf);
	atomic_store(&rd->stop, true);
	CHECK_EQ(test_wait(reader), 0);
	if (rd->err[0]) {
		fprintf(stderr, "invariant 4 (stored may die at any moment): reader: %s\n", rd->err);
		CHECK(!rd->err[0]);
	}
	CHECK(rd->reads > 0);
	CHECK(rd->cache_hits > 0);

	{
		char pa[600], pb[600];
		snprintf(pa, sizeof(pa), "%s/member/snap/db", a.m.data_dir);
		snprintf(pb, sizeof(pb), "%s/member/snap/db", b.m.data_dir);
		tst_dump_file(pa, &da);
		tst_dump_file(pb, &db);
	}
	if (da.len != db.len || memcmp(da.p, db.p, da.len) != 0) {
		size_t i = 0;
		while (i < da.len && i < db.len && da.p[i] == db.p[i])
			i++;
		fprintf(stderr, "invariant 4 (stored may die at any moment): the killed member's db "
			"differs from the other's: %zu vs %zu bytes of dump, first difference at %zu\n",
			da.len, db.len, i);
		CHECK(0);
	}
	printf("restarts %" PRIu64 " (%" PRIu64 " with entries left to apply), reads %" PRIu64 " (%" PRIu64 " waits), results A %" PRIu64
	       " B %" PRIu64 ", final revision %" PRIu64 ", dump %zu bytes, cache answered %" PRIu64
	       " of %" PRIu64 " lookups\n",
	       a.restarts, a.kills_behind, rd->reads, rd->skipped, a.results_seen, b.results_seen,
	       member_status(&a).revision, da.len, rd->cache_hits, rd->cache_asked);

	tbuf_free(&buf);
	tbuf_free(&da);
	tbuf_free(&db);
	for (struct member *mb = &a; mb; mb = mb == &a ? &b : NULL) {
		shm_region_detach(mb->gw);
		shm_region_detach(mb->rf);
		shm_region_detach(mb->m.launcher);
		tst_member_clean(&mb->m);
	}
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_loop_restart: ok\n");
	return 0;
}
