/*
 * The latest-entry cache (stored/mvcc/lcache.h) and the B+tree's observer that
 * keeps it:
 *
 *  - the cache alone: layout, one entry per tag, eviction, generations, a
 *    set or a clear left half done by a dead writer (lookups give up, they
 *    never hang), and a forked writer churning entries while a reader
 *    checks that no entry it is given is torn, then killed mid-churn;
 *  - a model run of the B+tree's observer, with an observer of the test's
 *    own that places every entry it hears of under its own key: random
 *    puts (small, large, overflow values), deletes, whole-bucket drops and
 *    inline spells, and commits that fail after spilling, on the observed
 *    bucket; read txns kept at older commits look keys up through the
 *    cache and must get exactly btree_get's value whenever the cache
 *    answers, and the newest commit must be answered from the cache for
 *    most keys;
 *  - a writer that dies after a commit nobody published and comes back at
 *    the published state (invariant 4, docs/invariants.md): the new writer's
 *    cache must not serve the dead commit's places, a reader kept at the
 *    old root stays right, and warming refills the cache with the keys no
 *    commit moves;
 *  - kvindex's feed (places in the key bucket): random puts, deletes,
 *    several writes of a key in one batch, txns, and compactions that
 *    rewrite old leaves; views kept at older revisions and the newest one
 *    with the cache answer every single-key Range byte for byte as views
 *    without it, one at a time and prefetched; then a new feed on the same
 *    db (a restarted stored) starts empty and warming refills it.
 *
 * BTREE_SEED=n replays a seed.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "shm_testlib.h"
#include "mvcc_util.h"

#include "base/clock/clock.h"
#include "stored/mvcc/kvindex.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/revision.h"

#define LATEST SCHEMA_BUCKET_KV_LATEST
#define LATEST_LEN SCHEMA_LEN(SCHEMA_BUCKET_KV_LATEST)
#define GEN 7

/* ---- the cache alone ---- */

static struct lcache_loc loc_of(uint64_t h, uint64_t txid)
{
	return (struct lcache_loc){ .pgid = (h >> 7) & LCACHE_MAX_PGID, .txid = txid,
				    .index = (uint32_t)(h >> 3) & LCACHE_MAX_INDEX,
				    .key_off = (uint32_t)(h >> 13) & LCACHE_MAX_KEY_OFF };
}

/* Whether a holds the place loc_of gives h. */
static bool place_is(const struct lcache_loc *a, uint64_t h)
{
	struct lcache_loc b = loc_of(h, 0);
	return a->pgid == b.pgid && a->index == b.index && a->key_off == b.key_off;
}

static bool loc_is(const struct lcache_loc *a, uint64_t h, uint64_t txid)
{
	return place_is(a, h) && a->txid == txid;
}

static void test_cache_basics(void)
{
	t_phase = "cache basics";
	const uint64_t nsets = 64;
	size_t bytes = lcache_footprint(nsets);
	void *mem = test_shared(bytes);
	struct lcache c, r;
	struct lcache_loc got;

	T_CHECK(lcache_sets_for(bytes) == nsets);
	T_CHECK(lcache_sets_for(bytes + LCACHE_SET_BYTES) == nsets);
	T_CHECK(lcache_sets_for(LCACHE_HDR_BYTES) == 0);
	T_RC(lcache_attach(&r, mem, bytes), -EAGAIN);
	lcache_format(&c, mem, nsets);
	T_OK(lcache_attach(&r, mem, bytes));
	T_RC(lcache_attach(&r, mem, bytes - LCACHE_SET_BYTES), -EPROTO);
	T_OK(lcache_attach(&r, mem, bytes));

	uint64_t h = lcache_hash("key", 3);
	T_CHECK(h != lcache_hash("kez", 3) && h != lcache_hash("key", 2));
	/* nothing is answered before the first clear */
	struct lcache_loc l = loc_of(h, 5);
	lcache_put(&c, h, &l);
	T_CHECK(!lcache_get(&r, 0, h, &got));
	lcache_clear(&c, GEN);
	T_CHECK(!lcache_get(&r, GEN, h, &got));
	lcache_put(&c, h, &l);
	T_CHECK(lcache_get(&r, GEN, h, &got) && loc_is(&got, h, 5));
	T_CHECK(!lcache_get(&r, GEN + 1, h, &got));  /* another db file */
	l = loc_of(h, 9);
	lcache_put(&c, h, &l);
	T_CHECK(lcache_get(&r, GEN, h, &got) && loc_is(&got, h, 9));
	lcache_del(&c, h);
	T_CHECK(!lcache_get(&r, GEN, h, &got));

	/* one entry per (set, tag): a second hash with both in common
	 * replaces the first */
	uint64_t h2 = h ^ (1ull << 20);
	lcache_put(&c, h, &l);
	struct lcache_loc l2 = loc_of(h2, 11);
	lcache_put(&c, h2, &l2);
	T_CHECK(lcache_get(&r, GEN, h, &got) && loc_is(&got, h2, 11));
	lcache_del(&c, h);
	T_CHECK(!lcache_get(&r, GEN, h2, &got));

	/* a full set: the newest entry is always there, at most WAYS are;
	 * every entry of a set reads with the set's newest change */
	unsigned present = 0;
	for (unsigned i = 0; i < 3 * LCACHE_WAYS; i++) {
		uint64_t hi = (h & (nsets - 1)) | ((uint64_t)(i + 1) << 48);
		struct lcache_loc li = loc_of(hi, 100 + i);
		lcache_put(&c, hi, &li);
		T_CHECK(lcache_get(&r, GEN, hi, &got) && loc_is(&got, hi, 100 + i));
	}
	for (unsigned i = 0; i < 3 * LCACHE_WAYS; i++) {
		uint64_t hi = (h & (nsets - 1)) | ((uint64_t)(i + 1) << 48);
		if (lcache_get(&r, GEN, hi, &got)) {
			T_CHECK(loc_is(&got, hi, 100 + 3 * LCACHE_WAYS - 1));
			present++;
		}
	}
	T_CHECK(present == LCACHE_WAYS);
	/* an older txid put later does not lower the set's */
	uint64_t hlast = (h & (nsets - 1)) | ((uint64_t)(3 * LCACHE_WAYS) << 48);
	struct lcache_loc lold = loc_of(hlast, 2);
	lcache_put(&c, hlast, &lold);
	T_CHECK(lcache_get(&r, GEN, hlast, &got) &&
		loc_is(&got, hlast, 100 + 3 * LCACHE_WAYS - 1));
	/* a delete leaves the set's txid (a reader that finds nothing
	 * descends the tree anyway) */
	lcache_del(&c, hlast);
	T_CHECK(!lcache_get(&r, GEN, hlast, &got));

	/* queued puts: invisible until flushed (or until LCACHE_PENDING more
	 * are queued), and a delete comes after the puts queued before it */
	uint64_t hq0 = lcache_hash("queued", 6);
	struct lcache_loc lq = loc_of(hq0, 21);
	lcache_put_queued(&c, hq0, &lq);
	T_CHECK(!lcache_get(&r, GEN, hq0, &got));
	lcache_flush(&c);
	T_CHECK(lcache_get(&r, GEN, hq0, &got) && place_is(&got, hq0) && got.txid >= 21);
	lq = loc_of(hq0, 22);
	lcache_put_queued(&c, hq0, &lq);
	lcache_del(&c, hq0);
	T_CHECK(!lcache_get(&r, GEN, hq0, &got));
	lcache_put_queued(&c, hq0, &lq);
	for (int i = 0; i < (int)LCACHE_PENDING; i++) {
		uint64_t hi = lcache_hash(&i, sizeof(i));
		struct lcache_loc li = loc_of(hi, 30);
		lcache_put_queued(&c, hi, &li);
	}
	T_CHECK(lcache_get(&r, GEN, hq0, &got) && place_is(&got, hq0) && got.txid >= 22);
	lcache_clear(&c, GEN);  /* drops what is still queued */
	lcache_flush(&c);
	for (int i = 0; i < (int)LCACHE_PENDING; i++)
		T_CHECK(!lcache_get(&r, GEN, lcache_hash(&i, sizeof(i)), &got));

	/* a place that does not fit an entry drops the key's entry */
	for (int f = 0; f < 2; f++) {
		lcache_put(&c, h, &l);
		T_CHECK(lcache_get(&r, GEN, h, &got) && place_is(&got, h));
		struct lcache_loc big = l;
		if (f == 0)
			big.pgid = LCACHE_MAX_PGID + 1;
		else
			big.index = LCACHE_MAX_INDEX + 1;
		lcache_put(&c, h, &big);
		T_CHECK(!lcache_get(&r, GEN, h, &got));
	}
	/* a key further in than a way holds comes back as key_off 0 */
	struct lcache_loc deep = l;
	deep.key_off = LCACHE_MAX_KEY_OFF + 1;
	lcache_put(&c, h, &deep);
	T_CHECK(lcache_get(&r, GEN, h, &got) && got.pgid == l.pgid && got.index == l.index &&
		got.key_off == 0);
	/* the largest place that fits comes back whole */
	struct lcache_loc most = { .pgid = LCACHE_MAX_PGID, .txid = 12, .index = LCACHE_MAX_INDEX,
				   .key_off = LCACHE_MAX_KEY_OFF };
	lcache_put(&c, h, &most);
	T_CHECK(lcache_get(&r, GEN, h, &got) && got.pgid == LCACHE_MAX_PGID &&
		got.index == LCACHE_MAX_INDEX && got.key_off == LCACHE_MAX_KEY_OFF);

	/* txids 2^32 or more past the count's base start a new count: the
	 * cache is emptied first; a txid before the base reads as the base */
	lcache_clear(&c, GEN);
	lcache_put(&c, h, &l);
	T_CHECK(lcache_get(&r, GEN, h, &got) && loc_is(&got, h, 9));
	uint64_t far = (1ull << 32) + 10, hf = lcache_hash("far", 3);
	struct lcache_loc lf = loc_of(hf, far);
	lcache_put(&c, hf, &lf);
	T_CHECK(!lcache_get(&r, GEN, h, &got));
	T_CHECK(lcache_get(&r, GEN, hf, &got) && loc_is(&got, hf, far));
	lcache_put(&c, h, &l);  /* txid 9, before the new base */
	T_CHECK(lcache_get(&r, GEN, h, &got) && place_is(&got, h) && got.txid >= far);
	lcache_clear(&c, GEN);

	/* a writer that died inside a set or a clear: lookups give up */
	lcache_put(&c, h, &l);
	struct lcache_set *s = &c.sets[h & c.mask];
	uint32_t q = atomic_load(&s->seq);
	atomic_store(&s->seq, q | 1u);
	T_CHECK(!lcache_get(&r, GEN, h, &got));
	atomic_store(&s->seq, q);
	T_CHECK(lcache_get(&r, GEN, h, &got));
	uint64_t hq = atomic_load(&c.hdr->seq);
	atomic_store(&c.hdr->seq, hq | 1u);
	T_CHECK(!lcache_get(&r, GEN, h, &got));
	atomic_store(&s->seq, q | 1u);  /* both, as a kill mid-clear leaves them */
	lcache_clear(&c, GEN);           /* the next writer's clear mends them */
	T_CHECK(!lcache_get(&r, GEN, h, &got));
	lcache_put(&c, h, &l);
	T_CHECK(lcache_get(&r, GEN, h, &got) && loc_is(&got, h, 9));
	munmap(mem, bytes);
}

/* A cache with one key per two ways, filled with hashes of real keys, as
 * stored's default cache holds a million keys: full sets and shared tags
 * turn away at most 1.5% of them (15 ways: 0.1% expected; 4 ways turned
 * away 3.3%). */
static void test_cache_occupancy(void)
{
	t_phase = "cache occupancy";
	const uint64_t nsets = 4096, nkeys = nsets * LCACHE_WAYS / 2;
	size_t bytes = lcache_footprint(nsets);
	void *mem = test_shared(bytes);
	struct lcache c;
	struct lcache_loc got;
	uint64_t held = 0;

	lcache_format(&c, mem, nsets);
	lcache_clear(&c, GEN);
	for (uint64_t i = 0; i < nkeys; i++) {
		uint8_t k[8];
		rev_put_be64(k, i);
		uint64_t h = lcache_hash(k, sizeof(k));
		struct lcache_loc l = loc_of(h, 1);
		lcache_put(&c, h, &l);
	}
	for (uint64_t i = 0; i < nkeys; i++) {
		uint8_t k[8];
		rev_put_be64(k, i);
		uint64_t h = lcache_hash(k, sizeof(k));
		/* another key of the set with the same 16-bit tag took the
		 * way (a reader's check of the key refuses that place) */
		if (lcache_get(&c, GEN, h, &got) && loc_is(&got, h, 1))
			held++;
	}
	if (held * 1000 < nkeys * 985)
		T_FAIL("a cache at half its ways holds %" PRIu64 " of %" PRIu64 " keys", held, nkeys);
	munmap(mem, bytes);
}

/* A forked writer rewrites the entries of a few hundred hashes (each
 * entry's fields all derive from its hash and a txid) while this process
 * reads them: every answer must be one whole entry. Then the writer is
 * killed mid-churn, and every lookup still returns promptly. */
static void test_cache_torn(void)
{
	t_phase = "cache torn reads";
	const uint64_t nsets = 16;
	size_t bytes = lcache_footprint(nsets);
	void *mem = test_shared(bytes);
	struct lcache c;
	lcache_format(&c, mem, nsets);
	lcache_clear(&c, GEN);
	enum { NH = 200 };
	uint64_t hs[NH];
	for (int i = 0; i < NH; i++)
		hs[i] = lcache_hash(&i, sizeof(i));

	pid_t pid = fork();
	if (pid < 0)
		T_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		/* dies with this process, even when a check fails first */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(0);
		for (uint64_t txid = 1;; txid++) {
			uint64_t h = hs[txid % NH];
			if (txid % 7 == 0) {
				lcache_del(&c, h);
			} else {
				struct lcache_loc l = loc_of(h, txid);
				lcache_put(&c, h, &l);
			}
		}
	}
	uint64_t answered = 0, asked = 0;
	int64_t t0 = clock_now_ns(), secs;
	do {
		for (int i = 0; i < NH; i++) {
			struct lcache_loc got;
			asked++;
			if (!lcache_get(&c, GEN, hs[i], &got))
				continue;
			answered++;
			/* the hash's own entry (or another with its set and tag,
			 * which these hashes do not share), whole */
			t_step = asked;
			T_CHECK(loc_is(&got, hs[i], got.txid));
		}
		secs = (clock_now_ns() - t0) / 1000000000;
		/* a second of torn reads at least; longer while the writer
		 * leaves readers few answers (a loaded machine may run it
		 * alone for a while), up to 30 s */
	} while (secs < 1 || (answered < 1000 && secs < 30));
	T_CHECK(answered >= 1000);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* whatever the kill left (a set may be odd for good), lookups end */
	for (int round = 0; round < 1000; round++)
		for (int i = 0; i < NH; i++) {
			struct lcache_loc got;
			if (lcache_get(&c, GEN, hs[i], &got))
				T_CHECK(loc_is(&got, hs[i], got.txid));
		}
	lcache_clear(&c, GEN);
	for (int i = 0; i < NH; i++) {
		struct lcache_loc got;
		T_CHECK(!lcache_get(&c, GEN, hs[i], &got));
	}
	munmap(mem, bytes);
}

/* ---- the B+tree keeps it: a model run ---- */

enum { NKEYS = 1500, NREADERS = 4 };

static uint8_t keyb[NKEYS][24];
static size_t keyl[NKEYS];

static void make_keys(void)
{
	for (int i = 0; i < NKEYS; i++) {
		int n = snprintf((char *)keyb[i], sizeof(keyb[i]), "%s%05d",
				 i % 3 ? "/registry/pods/" : "k", (int)t_below(100000));
		keyl[i] = (size_t)n;
		if (t_chance(50))
			keyb[i][0] = 0x00;
	}
}

/* ---- an observer that places each entry under its own key ---- */

struct obs_feed {
	struct lcache *lc;
};

static void obs_placed(void *arg, uint64_t pgid, uint64_t txid, const struct btree_placed *e,
		       size_t n)
{
	struct obs_feed *f = arg;
	for (size_t i = 0; i < n; i++) {
		struct lcache_loc loc = { .pgid = pgid, .txid = txid, .index = e[i].index,
					  .key_off = e[i].key_off };
		lcache_put_queued(f->lc, lcache_hash(e[i].key, e[i].ksize), &loc);
	}
}

static void obs_gone(void *arg, const uint8_t *key, uint32_t ksize, const uint8_t *val,
		     uint32_t vsize)
{
	struct obs_feed *f = arg;
	(void)val;
	(void)vsize;
	lcache_del(f->lc, lcache_hash(key, ksize));
}

static void obs_reset(void *arg)
{
	struct obs_feed *f = arg;
	lcache_clear(f->lc, GEN);
}

static void obs_flush(void *arg)
{
	struct obs_feed *f = arg;
	lcache_flush(f->lc);
}

static void obs_start(struct btree_db *db, struct obs_feed *f, struct lcache *lc)
{
	const struct btree_observer o = { .placed = obs_placed, .gone = obs_gone,
					  .reset = obs_reset, .flush = obs_flush, .arg = f };
	f->lc = lc;
	lcache_clear(lc, GEN);
	T_OK(btree_db_observe(db, LATEST, LATEST_LEN, &o));
}

/* The cached lookup, in txn t's bucket b: as kvindex does it, with the
 * key's own bytes at the place. */
static int cached_get(const struct lcache *c, struct btree_bucket *b, const uint8_t *key,
		      size_t klen, const uint8_t **val, size_t *vlen)
{
	struct lcache_loc loc;
	uint32_t vs;
	if (!lcache_get(c, GEN, lcache_hash(key, klen), &loc) ||
	    loc.txid > btree_txn_id(btree_bucket_txn(b)) ||
	    btree_entry_at(b, loc.pgid, loc.index, loc.key_off, key, klen, val, &vs))
		return -EAGAIN;
	*vlen = vs;
	return 0;
}

struct kept {
	struct btree_txn *t;
	struct btree_bucket *b;  /* NULL: the txn has no such bucket */
};

/* Every key through the cache in kept txn k must be btree_get's answer
 * there; returns how many the cache answered. */
static uint64_t check_reader(const struct lcache *c, struct kept *k, uint64_t *present)
{
	uint64_t hits = 0;
	if (!k->b)
		return 0;
	for (int i = 0; i < NKEYS; i++) {
		const uint8_t *v, *cv;
		size_t vl, cvl;
		int rc = btree_get(k->b, keyb[i], keyl[i], &v, &vl);
		int crc = cached_get(c, k->b, keyb[i], keyl[i], &cv, &cvl);
		t_step = (uint64_t)i;
		if (rc == 0)
			(*present)++;
		if (crc == -EAGAIN)
			continue;
		T_CHECK(crc == 0 && rc == 0);
		T_CHECK(cvl == vl && memcmp(cv, v, vl) == 0);
		hits++;
	}
	return hits;
}

static void keep_reader(struct btree_db *db, struct kept *slot)
{
	if (slot->t)
		btree_txn_end(slot->t);
	T_OK(btree_db_read_begin(db, NULL, &slot->t));
	int rc = btree_bucket_open(slot->t, NULL, LATEST, LATEST_LEN, &slot->b);
	if (rc == -ENOENT)
		slot->b = NULL;
	else
		T_OK(rc);
}

static void end_readers(struct kept *k)
{
	for (int i = 0; i < NREADERS; i++) {
		btree_txn_end(k[i].t);
		k[i] = (struct kept){ 0 };
	}
}

static uint8_t bigval[3 * 4096];

static void random_put(struct btree_bucket *b, uint64_t round)
{
	int i = (int)t_below(NKEYS);
	size_t vl = t_chance(30) ? 4096 + t_below(2 * 4096) : 1 + t_below(300);
	bigval[0] = (uint8_t)round;
	bigval[vl - 1] = (uint8_t)t_rand();
	T_OK(btree_put(b, keyb[i], keyl[i], bigval, vl));
}

static void test_model(void)
{
	t_phase = "model";
	char dir[256], path[300];
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	/* a small map, so that a commit can fail after its spill (-ENOSPC
	 * when the file would grow past it) */
	struct btree_db_opts o = { .create = true, .map_size = 64ull << 20 };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	size_t bytes = lcache_footprint(1024);
	void *mem = test_shared(bytes);
	struct lcache c;
	lcache_format(&c, mem, 1024);
	struct obs_feed f;
	obs_start(db, &f, &c);
	for (size_t i = 0; i < sizeof(bigval); i++)
		bigval[i] = (uint8_t)(i * 31);

	struct kept k[NREADERS] = { 0 };
	uint64_t hits_newest = 0, present_newest = 0, failed = 0, drops = 0, inlines = 0;
	for (uint64_t round = 0; round < 400; round++) {
		struct btree_txn *t;
		struct btree_bucket *b;
		t_step = round;
		T_OK(btree_write_begin(db, &t));
		int rc = btree_bucket_create(t, NULL, LATEST, LATEST_LEN, &b);
		T_CHECK(rc == 0 || rc == -EEXIST);
		uint64_t r = t_below(100);
		if (r < 3) {
			/* drop the bucket (and start again) */
			T_OK(btree_bucket_delete(t, NULL, LATEST, LATEST_LEN));
			T_OK(btree_bucket_create(t, NULL, LATEST, LATEST_LEN, &b));
			drops++;
		} else if (r < 6) {
			/* shrink it until it goes inline */
			struct btree_cursor cur;
			struct btree_kv kv;
			uint8_t kbuf[64];
			btree_cursor_init(&cur, b);
			int n = 0;
			while (btree_cursor_first(&cur, &kv) == 0) {
				memcpy(kbuf, kv.key, kv.key_len);
				T_OK(btree_del(b, kbuf, kv.key_len));
				n++;
			}
			for (int j = 0; j < 3; j++)
				T_OK(btree_put(b, keyb[j], keyl[j], "v", 1));
			inlines++;
		} else if (r < 9) {
			/* a commit that fails after its spill */
			for (int j = 0; j < 40; j++)
				random_put(b, round);
			uint8_t *huge = calloc(1, 80u << 20);
			if (!huge)
				T_FAIL("out of memory");
			T_OK(btree_put(b, "huge", 4, huge, 80u << 20));
			free(huge);
			T_CHECK(btree_commit(t, NULL) != 0);
			failed++;
			continue;
		}
		size_t n = 1 + t_below(t_chance(200) ? 400 : 40);
		for (size_t j = 0; j < n; j++) {
			if (t_chance(200)) {
				int i = (int)t_below(NKEYS);
				rc = btree_del(b, keyb[i], keyl[i]);
				T_CHECK(rc == 0 || rc == -ENOENT);
			} else {
				random_put(b, round);
			}
		}
		T_OK(btree_commit(t, NULL));
		if (t_chance(300))
			T_OK(btree_db_checkpoint(db, NULL));
		/* as stored does between batches: tell the cache of keys
		 * that it lost (a failed commit clears it) */
		bool done;
		T_OK(btree_db_observe_warm(db, 300, &done));
		/* a reader at this commit replaces a random older one */
		keep_reader(db, &k[t_below(NREADERS)]);
		for (int i = 0; i < NREADERS; i++) {
			uint64_t present = 0;
			check_reader(&c, &k[i], &present);
		}
		/* the newest commit: most keys come from the cache */
		struct kept now = { 0 };
		keep_reader(db, &now);
		hits_newest += check_reader(&c, &now, &present_newest);
		btree_txn_end(now.t);
	}
	printf("model: %" PRIu64 " of %" PRIu64 " lookups at the newest commit answered by "
	       "the cache; %" PRIu64 " failed commits, %" PRIu64 " drops, %" PRIu64
	       " inline spells\n", hits_newest, present_newest, failed, drops, inlines);
	T_CHECK(failed > 0 && drops > 0 && inlines > 0);
	T_CHECK(hits_newest * 10 >= present_newest * 9);
	end_readers(k);
	btree_db_close(db);
	munmap(mem, bytes);
	t_rmdir(dir);
}

/* ---- a writer that dies and comes back ---- */

static void put_all(struct btree_db *db, const char *value)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	int rc = btree_bucket_create(t, NULL, LATEST, LATEST_LEN, &b);
	T_CHECK(rc == 0 || rc == -EEXIST);
	for (int i = 0; i < NKEYS; i++)
		T_OK(btree_put(b, keyb[i], keyl[i], value, strlen(value)));
	T_OK(btree_commit(t, NULL));
}

/* The oldest txid read elsewhere: the published one while the reader of
 * the dead writer's time is open. */
static uint64_t other_reader_txid = UINT64_MAX;
static uint64_t other_readers(void *arg)
{
	(void)arg;
	return other_reader_txid;
}

static void test_restart(void)
{
	t_phase = "restart";
	char dir[256], path[300];
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30,
				   .oldest_reader = other_readers };
	struct btree_db *db;
	size_t bytes = lcache_footprint(1024);
	void *mem = test_shared(bytes);
	struct lcache c;
	struct btree_root published;
	lcache_format(&c, mem, 1024);

	struct obs_feed f;
	T_OK(btree_db_open(path, &o, &db));
	obs_start(db, &f, &c);
	put_all(db, "published");
	T_OK(btree_db_checkpoint(db, &published));
	/* a reader of another process at the published root */
	struct btree_reader *rd;
	struct btree_txn *old;
	struct btree_bucket *ob;
	T_OK(btree_reader_open(path, NULL, &rd));
	T_OK(btree_reader_begin(rd, &published, &old));
	T_OK(btree_bucket_open(old, NULL, LATEST, LATEST_LEN, &ob));
	other_reader_txid = published.txid;
	/* a commit that is never published, then the writer dies */
	put_all(db, "never published");
	btree_db_close(db);

	/* the next writer resumes after the published root */
	o.resume = published;
	T_OK(btree_db_open(path, &o, &db));
	obs_start(db, &f, &c);
	struct kept old_k = { old, ob };
	uint64_t present = 0;
	check_reader(&c, &old_k, &present);
	T_CHECK(present > 0);
	/* a commit of the new writer that moves a few keys only */
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, LATEST, LATEST_LEN, &b));
	for (int i = 0; i < 5; i++)
		T_OK(btree_put(b, keyb[i], keyl[i], "moved", 5));
	T_OK(btree_commit(t, NULL));
	struct kept now = { 0 };
	keep_reader(db, &now);
	uint64_t p1 = 0, h1 = check_reader(&c, &now, &p1);
	check_reader(&c, &old_k, &present);
	/* warming tells the cache of every other key */
	bool done = false;
	int steps = 0;
	while (!done) {
		T_OK(btree_db_observe_warm(db, 100, &done));
		steps++;
	}
	T_CHECK(steps > 1);
	keep_reader(db, &now);
	uint64_t p2 = 0, h2 = check_reader(&c, &now, &p2);
	printf("restart: the cache answered %" PRIu64 " of %" PRIu64 " keys before warming, "
	       "%" PRIu64 " of %" PRIu64 " after %d steps\n", h1, p1, h2, p2, steps);
	T_CHECK(h1 < p1 / 2 && h2 * 10 >= p2 * 9);
	check_reader(&c, &old_k, &present);
	/* once done, warming stays done */
	T_OK(btree_db_observe_warm(db, 100, &done));
	T_CHECK(done);
	btree_txn_end(now.t);
	btree_txn_end(old);
	other_reader_txid = UINT64_MAX;
	btree_reader_close(rd);
	btree_db_close(db);
	munmap(mem, bytes);
	t_rmdir(dir);
}

/* ---- kvindex's feed: MVCC views with and without the cache ---- */

/* A value of one of three kinds: small (its KeyValue inline in the latest
 * entry up to KVINDEX_INLINE_MAX bytes, referred to beyond), a few KiB
 * (referred to), or larger than a page (overflow pages). */
static void feed_value(char *buf, size_t cap, uint64_t round, int i)
{
	size_t n = t_chance(100) ? 5000 + t_below(3000) : t_chance(100) ? 2100 + t_below(500)
										 : 1 + t_below(200);
	if (n >= cap)
		n = cap - 1;
	memset(buf, 'a' + (int)((round + (uint64_t)i) % 26), n);
	snprintf(buf, cap < 32 ? cap : 32, "r%" PRIu64 "k%d", round, i);
	buf[strlen(buf)] = n > strlen(buf) ? '.' : '\0';
	buf[n] = '\0';
}

/* A view with the cache and one without, on two read txns at the same
 * commit. */
struct view_pair {
	struct btree_txn *t1, *t2;
	struct mvcc_view v1, v2;
	bool open;
};

static void pair_open(struct tdb *d, const struct lcache *c, struct view_pair *p)
{
	T_OK(btree_db_read_begin(d->db, NULL, &p->t1));
	T_OK(btree_db_read_begin(d->db, NULL, &p->t2));
	T_OK(mvcc_view_open(p->t1, &p->v1));
	T_OK(mvcc_view_open(p->t2, &p->v2));
	mvcc_view_use_cache(&p->v1, c, GEN);
	p->open = true;
}

static void pair_close(struct view_pair *p)
{
	if (!p->open)
		return;
	mvcc_view_close(&p->v1);
	mvcc_view_close(&p->v2);
	btree_txn_end(p->t1);
	btree_txn_end(p->t2);
	p->open = false;
}

/* Every key's single-key Range, with the cache and without, must match
 * byte for byte (some of them after a prefetch); returns how many keys the
 * cache answered. */
static uint64_t pair_check(struct view_pair *p, const struct lcache *c)
{
	uint64_t hits = 0;
	for (int i = 0; i < NKEYS; i += BTREE_GET_MANY_MAX / 2) {
		const uint8_t *ks[BTREE_GET_MANY_MAX / 2];
		size_t kls[BTREE_GET_MANY_MAX / 2];
		int n = 0;
		for (; n < BTREE_GET_MANY_MAX / 2 && i + n < NKEYS; n++) {
			ks[n] = keyb[i + n];
			kls[n] = keyl[i + n];
		}
		if (t_chance(300))
			T_OK(mvcc_view_prefetch(&p->v1, (size_t)n, ks, kls));
		for (int j = 0; j < n; j++) {
			struct tbuf a = { 0 }, b = { 0 };
			struct kvindex_entry e;
			t_step = (uint64_t)(i + j);
			tm_range_bytes(&p->v1, ks[j], kls[j], 0, &a);
			tm_range_bytes(&p->v2, ks[j], kls[j], 0, &b);
			T_CHECK(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
			tbuf_free(&a);
			tbuf_free(&b);
			if (p->v1.idx.keyb &&
			    kvindex_cache_get(c, GEN, p->v1.idx.keyb, ks[j], kls[j], &e) == 0) {
				/* the very entry the view's tree has for that
				 * revision, not a copy on a page it freed */
				uint8_t rk[REV_BYTES];
				const uint8_t *tv;
				size_t tvl;
				rev_encode(e.mod, rk);
				T_OK(btree_get(p->v1.idx.keyb, rk, sizeof(rk), &tv, &tvl));
				T_CHECK(tv == e.kv && tvl == e.kv_len);
				hits++;
			}
		}
	}
	return hits;
}

/* The live keys of the newest commit. */
static uint64_t live_keys(struct view_pair *p)
{
	uint64_t n = 0;
	for (int i = 0; i < NKEYS; i++) {
		struct kvindex_entry e;
		if (kvindex_latest_get(&p->v2.idx, keyb[i], keyl[i], &e) == 0)
			n++;
	}
	return n;
}

static void test_views(void)
{
	t_phase = "views";
	struct tdb d;
	size_t bytes = lcache_footprint(1024);
	void *mem = test_shared(bytes);
	struct lcache c;
	struct kvindex_feed feed = { 0 };
	static char val[8192];
	lcache_format(&c, mem, 1024);
	tdb_init(&d, NULL);
	T_OK(kvindex_feed_cache(d.db, &feed, &c, GEN));
	struct view_pair kept[3] = { 0 }, now = { 0 };
	uint64_t hits = 0, live = 0, compactions = 0;
	for (uint64_t round = 0; round < 60; round++) {
		t_step = round;
		tdb_begin(&d);
		uint64_t nops = t_chance(250) ? 1200 : 1 + t_below(60);
		for (uint64_t op = 0; op < nops; op++) {
			int i = (int)t_below(NKEYS);
			if (t_chance(80)) {
				DeleteRequest req = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
				DeleteResponse *resp;
				req.key = tbn(keyb[i], keyl[i]);
				tdb_entry(&d);
				T_OK(mvcc_delete_range(d.s, &req, &d.a, &resp));
			} else {
				/* the same key again in this batch, now and then */
				int times = t_chance(100) ? 2 + (int)t_below(3) : 1;
				for (int k = 0; k < times; k++) {
					feed_value(val, sizeof(val), round * 8 + (uint64_t)k, i);
					tdb_put(&d, keyb[i], keyl[i], val);
				}
			}
		}
		tdb_commit(&d);
		if (t_chance(350)) {
			/* compact at a revision of the last few rounds: the key
			 * bucket's old leaves lose entries and are rewritten,
			 * moving the ones they keep */
			struct mvcc_state ms;
			mvcc_store_state(d.s, &ms);
			int64_t lo = ms.compact_rev > 0 ? ms.compact_rev + 1 : 1;
			if (lo < ms.rev) {
				Etcdserverpb__CompactionRequest q =
					ETCDSERVERPB__COMPACTION_REQUEST__INIT;
				Etcdserverpb__CompactionResponse *resp;
				q.revision = lo + (int64_t)t_below((uint64_t)(ms.rev - lo));
				tdb_begin(&d);
				tdb_entry(&d);
				T_OK(mvcc_compact(d.s, &q, &d.a, &resp));
				tdb_commit(&d);
				tdb_finish_compaction(&d, 1 + (uint32_t)t_below(500));
				compactions++;
			}
		}
		/* checkpoints let later commits reuse the pages that views
		 * kept at older commits still read (freed since, but not
		 * before the oldest view) */
		if (t_chance(500))
			T_OK(btree_db_checkpoint(d.db, NULL));
		/* as stored does between batches */
		bool done;
		T_OK(kvindex_feed_warm(&feed, 100, 0, &done));
		/* a view at this commit replaces a random older one; all are
		 * checked (reads below the compaction are not asked for) */
		struct view_pair *slot = &kept[t_below(3)];
		pair_close(slot);
		pair_open(&d, &c, slot);
		for (int k = 0; k < 3; k++)
			if (kept[k].open)
				pair_check(&kept[k], &c);
		pair_open(&d, &c, &now);
		hits += pair_check(&now, &c);
		live += live_keys(&now);
		pair_close(&now);
	}
	printf("views: the cache answered %" PRIu64 " of %" PRIu64 " live keys at the newest "
	       "commit; %" PRIu64 " compactions\n", hits, live, compactions);
	T_CHECK(compactions > 0 && hits * 10 >= live * 9);
	for (int k = 0; k < 3; k++)
		pair_close(&kept[k]);

	/* a new feed (a restarted stored) starts with an empty cache, and
	 * warming brings back every key: in steps of 100 keys, then again
	 * with a time bound long past, where each step tells of
	 * KVINDEX_WARM_CLOCK_EVERY keys at most */
	int steps[2] = { 0, 0 };
	for (int timed = 0; timed < 2; timed++) {
		T_OK(kvindex_feed_cache(d.db, &feed, &c, GEN));
		pair_open(&d, &c, &now);
		uint64_t before = pair_check(&now, &c);
		pair_close(&now);
		bool done = false;
		while (!done) {
			T_OK(kvindex_feed_warm(&feed, 100, timed ? 1 : 0, &done));
			steps[timed]++;
		}
		pair_open(&d, &c, &now);
		uint64_t after = pair_check(&now, &c), nlive = live_keys(&now);
		pair_close(&now);
		printf("views: after a new feed the cache answered %" PRIu64 " keys; after %d warming "
		       "steps%s %" PRIu64 " of %" PRIu64 "\n", before, steps[timed],
		       timed ? " bounded in time" : "", after, nlive);
		T_CHECK(before == 0 && steps[timed] > 1 && after * 10 >= nlive * 9);
	}
	/* the entries both went through number more than 100 (steps[0] - 1) */
	T_CHECK((uint64_t)steps[1] * KVINDEX_WARM_CLOCK_EVERY > (uint64_t)(steps[0] - 1) * 100);
	btree_db_observe(d.db, NULL, 0, NULL);
	kvindex_feed_close(&feed);
	tdb_free(&d);
	munmap(mem, bytes);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	make_keys();
	test_cache_basics();
	test_cache_occupancy();
	test_cache_torn();
	test_model();
	test_restart();
	test_views();
	t_no_leaks();
	printf("test_lcache: ok\n");
	return 0;
}
