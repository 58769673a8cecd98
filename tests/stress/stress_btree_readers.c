/*
 * Readers in forked processes walk the tree through their own read-only
 * mapping while the writer commits, checkpoints and reuses pages (young
 * ones too: born and freed between two checkpoints, reused as soon as no
 * reader's slot holds them). Every committed batch keeps an invariant:
 * meta/sum holds the sum and count of the leading 8 bytes of every value
 * in data and data/sub. A reader that ever sees a torn state (a page
 * reused under it, a half-written page) breaks the invariant, or its walk
 * fails, and the test fails.
 *
 * Readers register like LMDB's reader table (which the shm reader table
 * implements for the real daemons): store the txid in their slot, full
 * fence, re-read the published state, retry if it moved. The writer's
 * oldest_reader callback scans the slots. BTREE_STRESS_SECS sets the run
 * time (default 8); BTREE_SEED replays a seed.
 *
 * Breaks invariants 3 and 11 (docs/invariants.md) on purpose: pages are
 * reused the moment no reader holds them, and batches modify their own
 * pages in place while readers walk the published ones.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "../lib/btree_util.h"
#include "base/clock/clock.h"

#define NREADERS 3
#define NKEYS 3000

struct shared {
	_Atomic uint64_t seq;   /* seqlock over the published state: odd while writing */
	_Atomic uint64_t root, txid, hwm;
	_Atomic uint64_t slot[NREADERS];   /* txid being read, 0 = none */
	_Atomic uint64_t walks[NREADERS];
	_Atomic uint64_t keys_seen[NREADERS];
	_Atomic int stop;
};

static struct shared *sh;
static char dir[256];
static char path[300];

static void publish(const struct btree_root *r)
{
	uint64_t s = atomic_load_explicit(&sh->seq, memory_order_relaxed);
	atomic_store_explicit(&sh->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&sh->root, r->root_pgid, memory_order_relaxed);
	atomic_store_explicit(&sh->txid, r->txid, memory_order_relaxed);
	atomic_store_explicit(&sh->hwm, r->hwm_pgid, memory_order_relaxed);
	atomic_store_explicit(&sh->seq, s + 2, memory_order_release);
}

static void read_published(struct btree_root *r)
{
	for (;;) {
		uint64_t s1 = atomic_load_explicit(&sh->seq, memory_order_acquire);
		if (s1 & 1)
			continue;
		r->root_pgid = atomic_load_explicit(&sh->root, memory_order_relaxed);
		r->txid = atomic_load_explicit(&sh->txid, memory_order_relaxed);
		r->hwm_pgid = atomic_load_explicit(&sh->hwm, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&sh->seq, memory_order_relaxed) == s1)
			return;
	}
}

static uint64_t oldest_reader(void *arg)
{
	(void)arg;
	uint64_t min = UINT64_MAX;
	for (int i = 0; i < NREADERS; i++) {
		uint64_t v = atomic_load(&sh->slot[i]);
		if (v && v < min)
			min = v;
	}
	return min;
}

static uint64_t lead(const uint8_t *v, size_t len)
{
	uint64_t x = 0;
	memcpy(&x, v, len < 8 ? len : 8);
	return x;
}

/* Sums the leading 8 bytes of every value of b (nested buckets skipped). */
static int sum_bucket(struct btree_bucket *b, uint64_t *sum, uint64_t *count)
{
	struct btree_cursor c;
	struct btree_kv kv;
	int rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		if (kv.flags & BTREE_KV_BUCKET)
			continue;
		*sum += lead(kv.val, kv.val_len);
		(*count)++;
	}
	return rc == -ENOENT ? 0 : rc;
}

/* One walk of the published state; exits the process on a torn state. */
static void reader_walk(int id, struct btree_reader *rd, uint64_t n)
{
	struct btree_root at, again;
	for (;;) {
		read_published(&at);
		atomic_store(&sh->slot[id], at.txid);
		atomic_thread_fence(memory_order_seq_cst);
		read_published(&again);
		if (again.txid == at.txid)
			break;
	}
	struct btree_txn *t;
	struct btree_bucket *data, *sub, *meta;
	uint64_t sum = 0, count = 0;
	const uint8_t *v;
	size_t vl;
	T_OK(btree_reader_begin(rd, &at, &t));
	T_OK(btree_bucket_open(t, NULL, "data", 4, &data));
	T_OK(btree_bucket_open(t, data, "sub", 3, &sub));
	T_OK(btree_bucket_open(t, NULL, "meta", 4, &meta));
	T_OK(sum_bucket(data, &sum, &count));
	T_OK(sum_bucket(sub, &sum, &count));
	T_OK(btree_get(meta, "sum", 3, &v, &vl));
	T_CHECK(vl == 16);
	if (lead(v, 8) != sum || lead(v + 8, 8) != count)
		T_FAIL("invariants 3 and 11 (a reader never sees a page reused under it; one root "
		       "per apply batch, earlier ones copied on write): reader %d at txid %" PRIu64
		       ": sum %" PRIu64 "/%" PRIu64
		       " but meta says %" PRIu64 "/%" PRIu64, id, at.txid, sum, count,
		       lead(v, 8), lead(v + 8, 8));
	if (n % 25 == 0)
		T_OK(btree_txn_check(t));
	btree_txn_end(t);
	atomic_store(&sh->slot[id], 0);
	atomic_fetch_add(&sh->walks[id], 1);
	atomic_fetch_add(&sh->keys_seen[id], count);
}

static void reader_main(int id)
{
	struct btree_reader *rd;
	T_OK(btree_reader_open(path, NULL, &rd));
	for (uint64_t n = 0; !atomic_load(&sh->stop); n++)
		reader_walk(id, rd, n);
	btree_reader_close(rd);
	exit(0);
}

static void put_val(struct btree_bucket *b, const char *k, uint64_t x, size_t len)
{
	static uint8_t buf[20000];
	memcpy(buf, &x, 8);
	for (size_t i = 8; i < len; i++)
		buf[i] = (uint8_t)(x >> (i % 8));
	T_OK(btree_put(b, k, strlen(k), buf, len < 8 ? 8 : len));
}

int main(void)
{
	uint64_t seed = t_pick_seed();
	const char *s = getenv("BTREE_STRESS_SECS");
	int secs = s && *s ? atoi(s) : 8;
	t_set_seed(seed);
	t_phase = "writer";
	printf("stress_btree_readers: seed %" PRIu64 ", %d readers, %d s\n", seed, NREADERS, secs);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));

	struct btree_db_opts o = { .create = true, .map_size = 4ull << 30,
				   .oldest_reader = oldest_reader };
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *data, *sub, *meta;
	struct btree_root root;
	T_OK(btree_db_open(path, &o, &db));

	/* The live values, mirrored to keep the sum. */
	static uint64_t vals[NKEYS];
	static bool present[NKEYS];
	uint64_t sum = 0, count = 0;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "data", 4, &data));
	T_OK(btree_bucket_create(t, data, "sub", 3, &sub));
	T_OK(btree_bucket_create(t, NULL, "meta", 4, &meta));
	for (int i = 0; i < NKEYS; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%05d", i);
		vals[i] = t_rand();
		present[i] = true;
		put_val(i % 10 == 0 ? sub : data, k, vals[i], 8 + t_below(200));
		sum += vals[i];
		count++;
	}
	uint64_t sv[2] = { sum, count };
	T_OK(btree_put(meta, "sum", 3, sv, sizeof(sv)));
	T_OK(btree_commit(t, &root));
	T_OK(btree_db_checkpoint(db, &root));
	publish(&root);

	pid_t pids[NREADERS];
	fflush(stdout);
	for (int i = 0; i < NREADERS; i++) {
		pids[i] = fork();
		T_CHECK(pids[i] >= 0);
		if (pids[i] == 0) {
			t_phase = "reader";
			reader_main(i);
		}
	}

	int64_t start = clock_now_ns();
	uint64_t commits = 0, checkpoints = 0;
	do {
		t_step = commits;
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "data", 4, &data));
		T_OK(btree_bucket_open(t, data, "sub", 3, &sub));
		T_OK(btree_bucket_open(t, NULL, "meta", 4, &meta));
		int changes = 1 + (int)t_below(60);
		for (int c = 0; c < changes; c++) {
			int i = (int)t_below(NKEYS);
			char k[16];
			snprintf(k, sizeof(k), "k%05d", i);
			struct btree_bucket *b = i % 10 == 0 ? sub : data;
			if (present[i]) {
				sum -= vals[i];
				count--;
			}
			if (t_chance(250)) {
				if (present[i])
					T_OK(btree_del(b, k, strlen(k)));
				present[i] = false;
				continue;
			}
			vals[i] = t_rand();
			present[i] = true;
			size_t len = t_chance(20) ? 5000 + t_below(15000) : 8 + t_below(300);
			put_val(b, k, vals[i], len);
			sum += vals[i];
			count++;
		}
		sv[0] = sum;
		sv[1] = count;
		T_OK(btree_put(meta, "sum", 3, sv, sizeof(sv)));
		T_OK(btree_commit(t, &root));
		publish(&root);
		commits++;
		if (t_chance(100)) {
			T_OK(btree_db_checkpoint(db, &root));
			publish(&root);
			checkpoints++;
		}
	} while ((clock_now_ns() - start) / 1000000000 < secs);

	atomic_store(&sh->stop, 1);
	int failed = 0;
	for (int i = 0; i < NREADERS; i++) {
		int st;
		T_CHECK(waitpid(pids[i], &st, 0) == pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			fprintf(stderr, "reader %d failed (status 0x%x)\n", i, st);
			failed++;
		}
	}
	T_CHECK(failed == 0);
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	uint64_t walks = 0;
	for (int i = 0; i < NREADERS; i++) {
		walks += atomic_load(&sh->walks[i]);
		T_CHECK(atomic_load(&sh->walks[i]) > 0);
	}
	printf("stress_btree_readers: %" PRIu64 " commits, %" PRIu64 " checkpoints, %" PRIu64
	       " reader walks; file %" PRIu64 " pages (%" PRIu64 " free, %" PRIu64
	       " pending), %" PRIu64 " pages freed young, io %s\n",
	       commits, checkpoints, walks, st.hwm_pgid, st.free_pages, st.pending_pages,
	       st.young_freed, st.io_backend);
	/* Most commits fall between two checkpoints: their pages go young and
	 * are reused under the readers' feet, as soon as no slot holds them. */
	T_CHECK(st.young_freed > commits);
	/* Pages are reused: the file stays far below one new page per change. */
	T_CHECK(st.hwm_pgid < commits * 4 + 5000);
	btree_db_close(db);
	t_rmdir(dir);
	t_no_leaks();
	printf("stress_btree_readers: ok\n");
	return 0;
}
