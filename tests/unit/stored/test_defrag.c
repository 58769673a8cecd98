/*
 * Defragmentation of a live db into a copy (stored/defrag.c), against the
 * live db as the model.
 *
 * Each run fills a db with buckets of random keys and values (some values
 * past a page, so overflow pages), deletes about half of them and
 * checkpoints: the file then has many free pages. A defragmentation then
 * copies it in tiny steps (a few entries each, the copy committed every
 * few KiB), and between steps the live db takes random write txns: puts
 * of new keys and over old ones, deletes, a bucket created or deleted or
 * its sequence set, now and then a txn dropped instead of committed, a
 * checkpoint. A low final threshold makes the catch-up take several
 * rounds. After the final step the copy must hold exactly what the live
 * db's newest commit holds (every bucket, key, value and sequence, in both
 * directions), pass the engine's full check, and have next to no free
 * pages where the live file had many, and the copy's commits never ran
 * further ahead of its writeback than the limit allows. Also: a copy path that exists is
 * refused, an abort removes the copy, defrag_remove_leftovers removes
 * db.tmp.* files only, and a nested bucket is refused with -ENOTSUP.
 * A failure prints the seed; BTREE_SEED=n replays it.
 */
#include <sys/stat.h>

#include "btree_util.h"

#include "stored/defrag.h"

#define RUNS 6
#define BUCKETS 5
/* Bytes the copy's commits may run ahead of its writeback: small, so
 * that the steps wait for it now and then. */
#define WRITEBACK_AHEAD 32768u

static char dir[256];

static char bname[BUCKETS][16];

static void random_key(uint8_t *k, size_t *klen)
{
	/* few enough that overwrites and deletes hit existing keys */
	*klen = (size_t)snprintf((char *)k, 32, "k%05u", (unsigned)t_below(30000));
}

static size_t random_val(uint8_t *v, size_t cap)
{
	size_t n = t_chance(20) ? 4096 + t_below(6000) : 1 + t_below(300);
	if (n > cap)
		n = cap;
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)t_rand();
	return n;
}

/* One write txn of n random changes to live (a bucket deleted now and
 * then when drop); committed unless dropped. */
static void live_txn(struct btree_db *db, unsigned n, bool drop, uint8_t *vbuf, size_t vcap)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	uint8_t k[32];
	size_t klen;

	T_OK(btree_write_begin(db, &t));
	for (unsigned i = 0; i < n; i++) {
		const char *name = bname[t_below(BUCKETS)];
		int rc = btree_bucket_open(t, NULL, name, strlen(name), &b);
		if (rc == -ENOENT) {
			T_OK(btree_bucket_create(t, NULL, name, strlen(name), &b));
			continue;
		}
		T_OK(rc);
		unsigned what = (unsigned)t_below(1000);
		random_key(k, &klen);
		if (what < 600) {
			size_t vlen = random_val(vbuf, vcap);
			T_OK(btree_put(b, k, klen, vbuf, vlen));
		} else if (what < 990) {
			rc = btree_del(b, k, klen);
			T_CHECK(rc == 0 || rc == -ENOENT);
		} else if (what < 995 || !drop || !t_chance(20)) {
			T_OK(btree_bucket_set_sequence(b, t_rand()));
		} else {
			T_OK(btree_bucket_delete(t, NULL, name, strlen(name)));
		}
	}
	if (t_chance(100))
		btree_txn_end(t); /* dropped: its changes are told, and must not count */
	else
		T_OK(btree_commit(t, NULL));
}

/* Every bucket, key, value and sequence of a is in b and the other way. */
static void same_content(struct btree_txn *a, struct btree_txn *b, uint64_t *keys)
{
	struct btree_cursor ca, cb;
	struct btree_kv ka, kb;
	int ra, rb;

	btree_cursor_init(&ca, btree_txn_root(a));
	btree_cursor_init(&cb, btree_txn_root(b));
	for (ra = btree_cursor_first(&ca, &ka), rb = btree_cursor_first(&cb, &kb);
	     ra == 0 && rb == 0; ra = btree_cursor_next(&ca, &ka), rb = btree_cursor_next(&cb, &kb)) {
		struct btree_bucket *xa, *xb;
		struct btree_cursor ea, eb;
		struct btree_kv va, vb;
		int sa, sb;

		T_CHECK(ka.key_len == kb.key_len && !memcmp(ka.key, kb.key, ka.key_len));
		T_OK(btree_bucket_open(a, NULL, ka.key, ka.key_len, &xa));
		T_OK(btree_bucket_open(b, NULL, kb.key, kb.key_len, &xb));
		T_CHECK(btree_bucket_sequence(xa) == btree_bucket_sequence(xb));
		btree_cursor_init(&ea, xa);
		btree_cursor_init(&eb, xb);
		for (sa = btree_cursor_first(&ea, &va), sb = btree_cursor_first(&eb, &vb);
		     sa == 0 && sb == 0;
		     sa = btree_cursor_next(&ea, &va), sb = btree_cursor_next(&eb, &vb)) {
			if (va.key_len != vb.key_len || memcmp(va.key, vb.key, va.key_len))
				T_FAIL("bucket %.*s: key %.*s in one, %.*s in the other", (int)ka.key_len,
				       (const char *)ka.key, (int)va.key_len, (const char *)va.key,
				       (int)vb.key_len, (const char *)vb.key);
			if (va.val_len != vb.val_len || memcmp(va.val, vb.val, va.val_len))
				T_FAIL("bucket %.*s: key %.*s has another value in the copy",
				       (int)ka.key_len, (const char *)ka.key, (int)va.key_len,
				       (const char *)va.key);
			(*keys)++;
		}
		T_CHECK(sa == -ENOENT && sb == -ENOENT);
	}
	T_CHECK(ra == -ENOENT && rb == -ENOENT);
}

static void one_run(unsigned run)
{
	char live_path[300], tmp_path[300];
	struct btree_db *live, *copy;
	struct btree_db_stats ls, cs;
	struct defrag *d;
	struct defrag_stats ds;
	size_t vcap = 12000;
	uint8_t *vbuf = t_xmalloc(vcap);
	bool ready = false;
	unsigned steps = 0;

	snprintf(live_path, sizeof(live_path), "%s/db%u", dir, run);
	snprintf(tmp_path, sizeof(tmp_path), "%s/db%u.tmp.1", dir, run);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	T_OK(btree_db_open(live_path, &o, &live));
	t_phase = "fill";
	for (unsigned i = 0; i < 40; i++)
		live_txn(live, 1000, false, vbuf, vcap);
	/* delete about half of what is there: free pages */
	struct btree_txn *t;
	T_OK(btree_write_begin(live, &t));
	for (unsigned bi = 0; bi < BUCKETS; bi++) {
		struct btree_bucket *b;
		if (btree_bucket_open(t, NULL, bname[bi], strlen(bname[bi]), &b))
			continue;
		for (unsigned i = 0; i < 30000; i += 2) {
			uint8_t k[32];
			size_t klen = (size_t)snprintf((char *)k, sizeof(k), "k%05u", i);
			int rc = btree_del(b, k, klen);
			T_CHECK(rc == 0 || rc == -ENOENT);
		}
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(live, NULL));
	T_OK(btree_db_checkpoint(live, NULL));

	t_phase = "copy";
	const struct defrag_opts dopts = {
		.tmp_path = tmp_path, .map_size = 1ull << 30,
		.commit_bytes = 8192 + (uint32_t)t_below(65536), .final_keys = 16 + (uint32_t)t_below(64),
		.writeback_ahead = WRITEBACK_AHEAD,
	};
	T_OK(defrag_begin(live, &dopts, &d));
	while (!ready) {
		t_step = steps++;
		T_OK(defrag_step(d, 1 + (int64_t)t_below(20000), &ready));
		if (!ready || t_chance(300))
			live_txn(live, 1 + (unsigned)t_below(40), false, vbuf, vcap);
		if (t_chance(50))
			T_OK(btree_db_checkpoint(live, NULL));
		T_CHECK(steps < 200000);
	}
	defrag_stats(d, &ds);
	T_OK(defrag_finish(d));
	defrag_free(d);

	t_phase = "compare";
	struct btree_db_opts co = { .map_size = 1ull << 30 };
	T_OK(btree_db_open(tmp_path, &co, &copy));
	T_OK(btree_db_check(copy));
	struct btree_txn *lt, *ct;
	uint64_t keys = 0;
	T_OK(btree_db_read_begin(live, NULL, &lt));
	T_OK(btree_db_read_begin(copy, NULL, &ct));
	same_content(lt, ct, &keys);
	btree_txn_end(lt);
	btree_txn_end(ct);
	btree_db_stats(live, &ls);
	btree_db_stats(copy, &cs);
	/* The copy is about the size of what the live db has in use, and
	 * its free pages are the few that the rounds of catch-up freed after
	 * the copy was sealed (the sealed checkpoint's pages are not reused
	 * until the next checkpoint) and nothing after them reused (here,
	 * where a third of the keys are written again during the copy and
	 * the db is small, under 40% and half again what live has in use),
	 * where the live file had about half of its pages free. */
	uint64_t live_in_use = ls.hwm_pgid - ls.free_pages;
	if (cs.free_pages * 100 > cs.hwm_pgid * 40 || cs.hwm_pgid * 10 > live_in_use * 15 + 640 ||
	    ls.free_pages * 100 < ls.hwm_pgid * 30)
		T_FAIL("copy: %" PRIu64 " free of %" PRIu64 " pages; live: %" PRIu64 " free of %" PRIu64
		       "; final step at most %u changes", cs.free_pages, cs.hwm_pgid, ls.free_pages,
		       ls.hwm_pgid, dopts.final_keys);
	printf("run %u: writeback at most %" PRIu64 " bytes behind (largest commit %" PRIu64
	       "), %" PRIu64 " steps held\n", run, ds.ahead_max, ds.commit_max, ds.steps_held);
	printf("run %u: %" PRIu64 " keys; %u steps, %" PRIu64 " copied, %" PRIu64
	       " carried over, %" PRIu64 " buckets again, %u rounds; live %" PRIu64 " pages (%" PRIu64
	       " free) -> copy %" PRIu64 " (%" PRIu64 " free)\n",
	       run, keys, steps, ds.entries_copied, ds.entries_carried, ds.buckets_carried, ds.rounds,
	       ls.hwm_pgid, ls.free_pages, cs.hwm_pgid, cs.free_pages);
	T_CHECK(ds.entries_copied > 0);
	/* The commits never ran further ahead of the copy's writeback than
	 * the limit and one commit (a bucket copied again whole is one) */
	if (ds.ahead_max > WRITEBACK_AHEAD + ds.commit_max)
		T_FAIL("copy: commits %" PRIu64 " bytes ahead of the writeback (limit %u, largest "
		       "commit %" PRIu64 ")", ds.ahead_max, WRITEBACK_AHEAD, ds.commit_max);
	T_CHECK(ds.ahead_max > 0);
	btree_db_close(copy);
	btree_db_close(live);
	free(vbuf);
}

/* An existing copy path, an abort, leftovers, a nested bucket. */
static void edges(void)
{
	char live_path[300], tmp_path[300], other[300];
	struct btree_db *live;
	struct btree_txn *t;
	struct btree_bucket *b, *n;
	struct defrag *d;
	struct stat sb;
	bool ready;

	t_phase = "edges";
	snprintf(live_path, sizeof(live_path), "%s/edge", dir);
	snprintf(tmp_path, sizeof(tmp_path), "%s/db.tmp.7", dir);
	snprintf(other, sizeof(other), "%s/db.other", dir);
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	T_OK(btree_db_open(live_path, &o, &live));
	T_OK(btree_write_begin(live, &t));
	T_OK(btree_bucket_create(t, NULL, "key", 3, &b));
	T_OK(btree_put(b, "a", 1, "1", 1));
	T_OK(btree_commit(t, NULL));
	const struct defrag_opts dopts = { .tmp_path = tmp_path, .map_size = 1ull << 30 };

	FILE *f = fopen(tmp_path, "w");
	T_CHECK(f != NULL);
	fclose(f);
	T_RC(defrag_begin(live, &dopts, &d), -EEXIST);
	f = fopen(other, "w");
	T_CHECK(f != NULL);
	fclose(f);
	T_CHECK(defrag_remove_leftovers(dir) == 1);
	T_CHECK(stat(tmp_path, &sb) != 0 && stat(other, &sb) == 0);

	T_OK(defrag_begin(live, &dopts, &d));
	T_CHECK(stat(tmp_path, &sb) == 0);
	defrag_abort(d);
	T_CHECK(stat(tmp_path, &sb) != 0);

	T_OK(btree_write_begin(live, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	T_OK(btree_bucket_create(t, b, "nested", 6, &n));
	T_OK(btree_commit(t, NULL));
	T_OK(defrag_begin(live, &dopts, &d));
	T_RC(defrag_step(d, 1000000000, &ready), -ENOTSUP);
	defrag_abort(d);
	T_CHECK(stat(tmp_path, &sb) != 0);
	btree_db_close(live);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_mkdir(dir, sizeof(dir));
	const char *names[BUCKETS] = { "key", "meta", "lease", "members", "z" };
	for (unsigned i = 0; i < BUCKETS; i++)
		snprintf(bname[i], sizeof(bname[i]), "%s", names[i]);
	for (unsigned run = 0; run < RUNS; run++)
		one_run(run);
	edges();
	t_rmdir(dir);
	t_no_leaks();
	printf("ok: %u runs [seed %" PRIu64 "]\n", RUNS, t_seed);
	return 0;
}
