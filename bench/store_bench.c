/*
 * store_bench: stored's store on this machine, measured the way
 * tests/tools/boltbench measures bbolt, so that the two print comparable
 * lines (bench/store-compare.sh runs both).
 *
 *   store_bench [-n N] [-val V] [-batch B] [-order seq|rand] [-readers R]
 *               [-group G] [-read range|index] [-cache MIB] [-cache-file PATH]
 *               [-keep] FILE
 *
 * Put phase: N etcd PutRequests (8-byte big-endian keys 0..N-1, in key
 * order or shuffled; values of V zero bytes), each applied as one Raft
 * entry through the real apply path: mvcc_apply_begin + mvcc_put inside an
 * apply batch of B entries, one mvcc_batch_commit (one published root) per
 * batch, and checkpoints as stored's loop makes them (every 100 ms or
 * 10,000 entries since the last one, written in the background while the
 * next batches apply, one at a time, and a final one waited for), so that
 * everything is durable when the clock stops.
 *
 * Get phase: every key once, in random order, split among R forked
 * reader processes that map the file with btree_reader_open and read at the
 * root the writer published, as gatewayd does: one read txn each, then per
 * key a single-key Range through mvcc_range (-read range, the default), or
 * only the index's latest-version lookup, kvindex_latest_get
 * (-read index). Each read checks that the value has V bytes. With
 * -group G (default 1, at most 64) a reader takes its keys G at a time and
 * looks them up together first (mvcc_view_prefetch), as gatewayd does with
 * the point reads that arrive in one loop turn. The writer keeps a
 * latest-entry cache (lcache.h) of -cache MiB (default SHM_CACHE_MIB_DEFAULT,
 * as stored's; 0: none) in memory shared with the readers, whose latest
 * lookups go through it as gatewayd's do: anonymous shared memory, or with
 * -cache-file a file made at PATH (and unlinked at once), as stored's
 * region is a file of its runtime dir, with the same request for 2 MiB
 * pages: on a tmpfs mounted with huge=within_size the sets get them. The
 * clock
 * runs from releasing the readers (already mapped, at the txn) until the
 * last one says it has read its keys (before it unmaps and exits, as
 * boltbench's clock stops when its reader goroutines return).
 *
 * Output, one line per phase, as boltbench prints them:
 *
 *   put-seq ops=N secs=S ops_per_sec=X     (put-rand with -order rand)
 *   get-rand ops=N secs=S ops_per_sec=X
 *
 * FILE is removed first, and at the end unless -keep is given. Exit 2 on a
 * bad flag, 1 on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "stored/btree/arena.h"
#include "stored/btree/btree.h"
#include "stored/mvcc/kvindex.h"
#include "stored/mvcc/lcache.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/mvcc_kv.h"
#include "stored/mvcc/revision.h"

/* stored's checkpoint policy (loop.h defaults). */
#define BENCH_CHECKPOINT_MS 100
#define BENCH_CHECKPOINT_ENTRIES 10000

#define BENCH_KEY_BYTES 8

enum bench_read { BENCH_READ_RANGE, BENCH_READ_INDEX };

struct bench_opts {
	uint64_t n;
	uint64_t val;
	uint64_t batch;
	bool rand_order;
	uint64_t readers;
	uint64_t group;
	uint64_t cache_mib;
	const char *cache_file;
	enum bench_read read;
	bool keep;
	const char *path;
};

static void bench_usage(void)
{
	fprintf(stderr, "usage: store_bench [-n N] [-val V] [-batch B] [-order seq|rand] "
			"[-readers R] [-group G] [-read range|index] [-cache MIB] [-cache-file PATH] [-keep] FILE\n");
}

/* ---- flags, as Go's flag package takes them: -name value, -name=value,
 * one or two dashes, up to the first argument that is not a flag ---- */

static int bench_parse_u64(const char *name, const char *s, uint64_t min, uint64_t max,
			   uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		goto out_bad;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		goto out_bad;
	*out = v;
	return 0;

out_bad:
	fprintf(stderr, "store_bench: -%s wants a whole number from %" PRIu64 " to %" PRIu64
			", not \"%s\"\n", name, min, max, s ? s : "");
	return -EINVAL;
}

static int bench_parse_args(int argc, char **argv, struct bench_opts *o)
{
	int i;

	*o = (struct bench_opts){
		.n = 1000000, .val = 256, .batch = 10000, .readers = 2, .group = 1,
		.cache_mib = SHM_CACHE_MIB_DEFAULT, .read = BENCH_READ_RANGE,
	};
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL, *eq;
		char name[32];
		size_t len;

		if (a[0] != '-' || a[1] == '\0')
			break;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		a += a[1] == '-' ? 2 : 1;
		eq = strchr(a, '=');
		len = eq ? (size_t)(eq - a) : strlen(a);
		if (len == 0 || len >= sizeof(name)) {
			fprintf(stderr, "store_bench: bad flag \"%s\"\n", argv[i]);
			return -EINVAL;
		}
		memcpy(name, a, len);
		name[len] = '\0';
		if (strcmp(name, "keep") == 0) {
			if (eq && strcmp(eq + 1, "true") != 0 && strcmp(eq + 1, "false") != 0) {
				fprintf(stderr, "store_bench: -keep is true or false\n");
				return -EINVAL;
			}
			o->keep = !eq || strcmp(eq + 1, "true") == 0;
			continue;
		}
		if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0)
			return -EINVAL;
		if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			fprintf(stderr, "store_bench: flag -%s needs a value\n", name);
			return -EINVAL;
		}
		int rc = 0;
		if (strcmp(name, "n") == 0) {
			rc = bench_parse_u64(name, v, 1, UINT32_MAX, &o->n);
		} else if (strcmp(name, "val") == 0) {
			rc = bench_parse_u64(name, v, 0, 1u << 30, &o->val);
		} else if (strcmp(name, "batch") == 0) {
			rc = bench_parse_u64(name, v, 1, UINT32_MAX, &o->batch);
		} else if (strcmp(name, "readers") == 0) {
			rc = bench_parse_u64(name, v, 1, 1024, &o->readers);
		} else if (strcmp(name, "group") == 0) {
			rc = bench_parse_u64(name, v, 1, BTREE_GET_MANY_MAX, &o->group);
		} else if (strcmp(name, "cache") == 0) {
			rc = bench_parse_u64(name, v, 0, 1u << 20, &o->cache_mib);
		} else if (strcmp(name, "cache-file") == 0) {
			o->cache_file = v;
		} else if (strcmp(name, "order") == 0) {
			if (strcmp(v, "seq") != 0 && strcmp(v, "rand") != 0) {
				fprintf(stderr, "store_bench: -order is seq or rand, not \"%s\"\n", v);
				return -EINVAL;
			}
			o->rand_order = strcmp(v, "rand") == 0;
		} else if (strcmp(name, "read") == 0) {
			if (strcmp(v, "range") != 0 && strcmp(v, "index") != 0) {
				fprintf(stderr, "store_bench: -read is range or index, not \"%s\"\n", v);
				return -EINVAL;
			}
			o->read = strcmp(v, "index") == 0 ? BENCH_READ_INDEX : BENCH_READ_RANGE;
		} else {
			fprintf(stderr, "store_bench: unknown flag -%s\n", name);
			return -EINVAL;
		}
		if (rc)
			return rc;
	}
	if (argc - i != 1) {
		fprintf(stderr, "store_bench: want exactly one FILE after the flags\n");
		return -EINVAL;
	}
	o->path = argv[i];
	return 0;
}

/* ---- keys ---- */

/* xorshift64*: a fixed, seeded order, the same on every run. */
static uint64_t bench_rand(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static void bench_shuffle(uint64_t *ids, uint64_t n, uint64_t *seed)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = bench_rand(seed) % i;
		uint64_t t = ids[i - 1];
		ids[i - 1] = ids[j];
		ids[j] = t;
	}
}

/* ---- put phase ---- */

/* The latest-entry cache, in memory the readers share (none: hdr NULL). */
static struct lcache bench_cache;
static struct kvindex_feed bench_feed;
#define BENCH_CACHE_GENERATION 1

static int bench_fail(const char *what, int rc)
{
	const char *why = mvcc_is_request_error(rc) ? mvcc_strerror(rc) : errmsg_get(rc);

	fprintf(stderr, "store_bench: %s: %s (%s)\n", what, strerror(rc < 0 ? -rc : rc), why);
	return rc;
}

/* Applies N puts in batches, checkpointing as stored does. *root gets the
 * root published last (after the final checkpoint). */
static int bench_put(const struct bench_opts *o, const uint64_t *ids, struct btree_root *root,
		     double *secs)
{
	struct btree_db_opts dbo = { .create = true };
	struct btree_db *db = NULL;
	struct mvcc_store *s = NULL;
	struct arena arena;
	uint8_t key[BENCH_KEY_BYTES];
	uint8_t *val = NULL;
	uint64_t index = 0, since_ck = 0;
	int64_t start, ck_ns;
	bool dirty = false;
	int rc;

	arena_init(&arena);
	val = calloc(1, o->val ? o->val : 1);
	if (!val)
		return bench_fail("value buffer", -ENOMEM);
	rc = btree_db_open(o->path, &dbo, &db);
	if (rc) {
		bench_fail("open the db", rc);
		goto out_free_val;
	}
	if (bench_cache.hdr) {
		rc = kvindex_feed_cache(db, &bench_feed, &bench_cache, BENCH_CACHE_GENERATION);
		if (rc) {
			bench_fail("feed the cache", rc);
			goto out_close_db;
		}
	}
	rc = mvcc_store_open(db, NULL, &s);
	if (rc) {
		bench_fail("open the store", rc);
		goto out_close_db;
	}
	rc = btree_db_checkpoint(db, NULL); /* as stored does after opening */
	if (rc) {
		bench_fail("first checkpoint", rc);
		goto out_close_store;
	}

	start = ck_ns = clock_now_ns();
	for (uint64_t lo = 0; lo < o->n; lo += o->batch) {
		uint64_t hi = lo + o->batch < o->n ? lo + o->batch : o->n;

		rc = mvcc_batch_begin(s);
		if (rc) {
			bench_fail("begin a batch", rc);
			goto out_close_store;
		}
		for (uint64_t i = lo; i < hi; i++) {
			Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
			Etcdserverpb__PutResponse *resp;

			rev_put_be64(key, ids[i]);
			req.key.data = key;
			req.key.len = sizeof(key);
			req.value.data = val;
			req.value.len = o->val;
			rc = mvcc_apply_begin(s, ++index);
			if (rc == 0)
				rc = mvcc_put(s, &req, &arena, &resp);
			if (rc) {
				bench_fail("put", rc);
				mvcc_batch_abort(s);
				goto out_close_store;
			}
		}
		rc = mvcc_batch_commit(s, root);
		arena_release(&arena);
		if (rc) {
			bench_fail("commit a batch", rc);
			goto out_close_store;
		}
		dirty = true;
		since_ck += hi - lo;
		/* As stored's loop: reap the checkpoint being written, start
		 * the next one when due and none is. */
		int64_t now = clock_now_ns();
		rc = btree_db_checkpoint_poll(db, false, NULL);
		if (rc == 0 && !btree_db_checkpoint_busy(db) &&
		    (since_ck >= BENCH_CHECKPOINT_ENTRIES ||
		     now - ck_ns >= (int64_t)BENCH_CHECKPOINT_MS * 1000000)) {
			bool started;
			rc = btree_db_checkpoint_begin(db, &started);
			btree_db_current(db, root);
			dirty = false;
			since_ck = 0;
			ck_ns = clock_now_ns();
		}
		if (rc) {
			bench_fail("checkpoint", rc);
			goto out_close_store;
		}
	}
	if (dirty || btree_db_checkpoint_busy(db)) {
		rc = btree_db_checkpoint(db, root);
		if (rc) {
			bench_fail("final checkpoint", rc);
			goto out_close_store;
		}
	}
	*secs = (double)(clock_now_ns() - start) / 1e9;

out_close_store:
	mvcc_store_close(s);
out_close_db:
	btree_db_close(db);
	kvindex_feed_close(&bench_feed);
out_free_val:
	free(val);
	return rc;
}

/* ---- get phase ---- */

/* Reads one key by the index's latest entry; its value length, or an
 * error. */
static int bench_read_index(struct mvcc_view *v, const uint8_t *key, size_t *value_len)
{
	struct kvindex_entry e;
	struct mvcc_kv kv;
	const uint8_t *bytes;
	size_t len;
	int rc;

	rc = kvindex_latest_get(&v->idx, key, BENCH_KEY_BYTES, &e);
	if (rc)
		return rc;
	bytes = e.kv;
	len = e.kv_len;
	if (!bytes) {
		uint8_t rk[REV_BYTES];
		rev_encode(e.mod, rk);
		rc = btree_get(v->key, rk, sizeof(rk), &bytes, &len);
		if (rc)
			return rc;
	}
	rc = mvcc_kv_decode(bytes, len, &kv);
	if (rc)
		return rc;
	*value_len = kv.value_len;
	return 0;
}

/* Reads one key by a single-key Range; its value length, or an error. */
static int bench_read_range(struct mvcc_view *v, struct mvcc_range_result *res,
			    const uint8_t *key, size_t *value_len)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	int rc;

	req.key.data = (uint8_t *)key;
	req.key.len = BENCH_KEY_BYTES;
	rc = mvcc_range(v, &req, res);
	if (rc)
		return rc;
	if (res->n != 1)
		return -ENOENT;
	*value_len = res->kvs[0].f.value_len;
	return 0;
}

/*
 * One reader process: maps the file, begins a read txn at root, says so on
 * ready_fd, waits for go_fd to close, then reads its keys. Exit status 0,
 * or 1 with the reason on stderr.
 */
static int bench_reader(const struct bench_opts *o, const struct btree_root *root,
			const uint64_t *ids, uint64_t n, int ready_fd, int go_fd)
{
	struct btree_reader *r = NULL;
	struct btree_txn *t = NULL;
	struct mvcc_view v;
	struct mvcc_range_result res;
	uint8_t keys[BTREE_GET_MANY_MAX][BENCH_KEY_BYTES];
	const uint8_t *key_ptrs[BTREE_GET_MANY_MAX];
	size_t key_lens[BTREE_GET_MANY_MAX];
	char c = 'r';
	int rc;

	for (size_t j = 0; j < BTREE_GET_MANY_MAX; j++) {
		key_ptrs[j] = keys[j];
		key_lens[j] = BENCH_KEY_BYTES;
	}
	mvcc_range_result_init(&res);
	rc = btree_reader_open(o->path, NULL, &r);
	if (rc) {
		bench_fail("reader: map the db", rc);
		goto out;
	}
	rc = btree_reader_begin(r, root, &t);
	if (rc) {
		bench_fail("reader: begin at the published root", rc);
		goto out_close_reader;
	}
	rc = mvcc_view_open(t, &v);
	if (rc) {
		bench_fail("reader: open a view", rc);
		goto out_end_txn;
	}
	if (bench_cache.hdr)
		mvcc_view_use_cache(&v, &bench_cache, BENCH_CACHE_GENERATION);
	if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 0) {
		rc = -EPIPE;
		fprintf(stderr, "store_bench: reader: lost the parent\n");
		goto out_close_view;
	}
	for (uint64_t lo = 0; lo < n; lo += o->group) {
		uint64_t g = n - lo < o->group ? n - lo : o->group;

		for (uint64_t j = 0; j < g; j++)
			rev_put_be64(keys[j], ids[lo + j]);
		if (g > 1) {
			/* as gatewayd reads the point ranges of one loop turn */
			rc = mvcc_view_prefetch(&v, g, key_ptrs, key_lens);
			if (rc) {
				bench_fail("reader: prefetch", rc);
				goto out_close_view;
			}
		}
		for (uint64_t j = 0; j < g; j++) {
			size_t got = 0;

			if (o->read == BENCH_READ_INDEX)
				rc = bench_read_index(&v, keys[j], &got);
			else
				rc = bench_read_range(&v, &res, keys[j], &got);
			if (rc == 0 && got != o->val)
				rc = -EBADMSG;
			if (rc) {
				fprintf(stderr, "store_bench: reader: key %" PRIu64
						" (value %zu bytes): ", ids[lo + j], got);
				bench_fail("missing or wrong", rc);
				goto out_close_view;
			}
		}
	}

	/* done: the clock stops at the last reader's byte, as boltbench's
	 * stops when its readers return, before any process tears down */
	if (write(ready_fd, &c, 1) != 1) {
		rc = -EPIPE;
		fprintf(stderr, "store_bench: reader: lost the parent\n");
	}

out_close_view:
	mvcc_view_close(&v);
out_end_txn:
	btree_txn_end(t);
out_close_reader:
	btree_reader_close(r);
out:
	mvcc_range_result_free(&res);
	return rc ? 1 : 0;
}

/* Forks the readers, releases them together once all are ready, and waits
 * for them. */
static int bench_get(const struct bench_opts *o, const struct btree_root *root,
		     const uint64_t *ids, double *secs)
{
	uint64_t per = (o->n + o->readers - 1) / o->readers;
	uint64_t started = 0;
	int ready[2], go[2];
	int rc = 0;
	int64_t start;

	if (pipe(ready) != 0 || pipe(go) != 0) {
		fprintf(stderr, "store_bench: pipe: %s\n", strerror(errno));
		return -errno;
	}
	fflush(stdout);
	for (uint64_t r = 0; r < o->readers; r++) {
		uint64_t lo = r * per < o->n ? r * per : o->n;
		uint64_t hi = lo + per < o->n ? lo + per : o->n;
		pid_t pid = fork();

		if (pid < 0) {
			fprintf(stderr, "store_bench: fork: %s\n", strerror(errno));
			rc = -errno;
			break;
		}
		if (pid == 0) {
			close(ready[0]);
			close(go[1]);
			_exit(bench_reader(o, root, ids + lo, hi - lo, ready[1], go[0]));
		}
		started++;
	}
	close(ready[1]);
	close(go[0]);
	for (uint64_t i = 0; i < started && rc == 0; i++) {
		char c;
		if (read(ready[0], &c, 1) != 1)
			rc = -EIO; /* a reader died before it was ready */
	}
	start = clock_now_ns();
	close(go[1]); /* every reader's read of go returns 0: go */
	/* each reader writes once more when it has read its keys; a reader
	 * that fails exits without, and its end closes the pipe */
	for (uint64_t i = 0; i < started && rc == 0; i++) {
		char c;
		if (read(ready[0], &c, 1) != 1)
			rc = -EIO;
	}
	*secs = (double)(clock_now_ns() - start) / 1e9;
	for (uint64_t i = 0; i < started; i++) {
		int status;
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			rc = rc ? rc : -EIO;
	}
	close(ready[0]);
	if (rc)
		fprintf(stderr, "store_bench: a reader failed\n");
	return rc;
}

/* Shared memory for the cache: anonymous, or a file made at path, sized
 * and allocated as stored's region is, then unlinked (the mapping stays).
 * NULL (said on stderr) on failure. */
static void *bench_cache_map(const char *path, size_t bytes)
{
	void *mem;
	int fd = -1, rc;

	if (path) {
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr, "store_bench: cache file %s: %s\n", path, strerror(errno));
			return NULL;
		}
		unlink(path);
		rc = ftruncate(fd, (off_t)bytes) ? errno : posix_fallocate(fd, 0, (off_t)bytes);
		if (rc) {
			fprintf(stderr, "store_bench: cache file %s of %zu bytes: %s\n", path,
				bytes, strerror(rc));
			close(fd);
			return NULL;
		}
	}
	mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		   fd < 0 ? MAP_SHARED | MAP_ANONYMOUS : MAP_SHARED, fd, 0);
	if (fd >= 0)
		close(fd);
	if (mem == MAP_FAILED) {
		fprintf(stderr, "store_bench: no memory for the cache: %s\n", strerror(errno));
		return NULL;
	}
	(void)madvise(mem, bytes, MADV_HUGEPAGE); /* as shm_region_create's */
	return mem;
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct btree_root root = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	uint64_t *ids;
	double secs = 0;
	int rc;

	if (bench_parse_args(argc, argv, &o)) {
		bench_usage();
		return 2;
	}
	if (unlink(o.path) != 0 && errno != ENOENT) {
		fprintf(stderr, "store_bench: cannot remove %s: %s\n", o.path, strerror(errno));
		return 1;
	}
	ids = malloc(o.n * sizeof(*ids));
	if (!ids) {
		fprintf(stderr, "store_bench: no memory for %" PRIu64 " keys\n", o.n);
		return 1;
	}
	for (uint64_t i = 0; i < o.n; i++)
		ids[i] = i;
	if (o.rand_order)
		bench_shuffle(ids, o.n, &seed);

	if (o.cache_mib) {
		/* MIB of sets, as stored's region lays them out */
		uint64_t nsets = lcache_sets_for(((size_t)o.cache_mib << 20) + LCACHE_HDR_BYTES);
		void *mem = bench_cache_map(o.cache_file, lcache_footprint(nsets));
		if (!mem) {
			free(ids);
			return 1;
		}
		lcache_format(&bench_cache, mem, nsets);
	}
	rc = bench_put(&o, ids, &root, &secs);
	if (rc)
		goto out;
	printf("put-%s ops=%" PRIu64 " secs=%.3f ops_per_sec=%.0f\n", o.rand_order ? "rand" : "seq",
	       o.n, secs, (double)o.n / secs);

	bench_shuffle(ids, o.n, &seed);
	rc = bench_get(&o, &root, ids, &secs);
	if (rc)
		goto out;
	printf("get-rand ops=%" PRIu64 " secs=%.3f ops_per_sec=%.0f\n", o.n, secs,
	       (double)o.n / secs);

out:
	free(ids);
	if (!o.keep)
		unlink(o.path);
	return rc ? 1 : 0;
}
