/* Defragmentation of the live db into a copy (see defrag.h). */
#include "stored/defrag.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "base/log/errmsg.h"
#include "base/thread/thread.h"
#include "stored/alloc.h"
#include "stored/btree/btree.h"

#define DEFRAG_COMMIT_BYTES (1u << 20)
/* The copy's writeback: bytes written back at a time (and waited for),
 * and the most its commits may run ahead of that before the steps wait. */
#define DEFRAG_WRITEBACK_CHUNK (1u << 20)
#define DEFRAG_WRITEBACK_AHEAD (8u << 20)
/* Entries per look at the clock. */
#define DEFRAG_CLOCK_EVERY 64u
/* A bucket's entries are written at this fill, as etcd's defragdb does. */
#define DEFRAG_FILL 0.9

/* One changed entry: bucket and key bytes follow; whole: the bucket. */
struct defrag_change {
	uint64_t hash;
	uint32_t blen, klen;
	bool whole;
	uint8_t bytes[];
};

/* A set of changes: open addressing, at most half full. */
struct defrag_set {
	struct defrag_change **slots;
	size_t cap, count;
};

/* COPY: the bulk copy; CATCHUP: rounds of carry-over; SEALING: the
 * copy, once equal to a commit of live, is being checkpointed in the
 * background while the rounds go on; READY: that checkpoint is durable. */
enum defrag_phase { DEFRAG_COPY, DEFRAG_CATCHUP, DEFRAG_SEALING, DEFRAG_READY };

struct defrag {
	struct btree_db *live;
	struct btree_db *copy;
	char *tmp_path;
	uint32_t commit_bytes;
	uint32_t final_keys;
	uint32_t writeback_ahead;
	enum defrag_phase phase;
	bool finished;              /* defrag_finish went through */
	int failed;                 /* the tracker could not record a change */
	struct btree_txn *rt;       /* read txn of live being copied from */
	struct btree_txn *ct;       /* write txn of the copy */
	uint64_t ct_bytes;          /* entry bytes in ct */
	/* the bulk copy: the bucket being copied, and where */
	struct btree_cursor top;
	bool top_started;
	struct btree_bucket *src;
	const uint8_t *src_name;    /* in rt's pages */
	size_t src_name_len;
	struct btree_cursor cur;
	bool cur_started;
	/* catch-up: the changes tracked, and those of the round being carried */
	struct defrag_set tracked;
	struct defrag_set round;
	size_t round_pos;
	struct defrag_stats st;
	int sync_fd;                /* the copy's file, for its writeback */
	/*
	 * The copy's writeback, on a thread of its own (defrag_writer): what
	 * the commits wrote is written back a chunk at a time, each waited
	 * for before the next is started, so that the disk's queue never
	 * holds more than a chunk of the copy ahead of the WAL's writes and
	 * syncs; a step stops, and the next ones wait, while the commits are
	 * more than writeback_ahead past it. Once the bulk copy is done it syncs
	 * the copy (fdatasync of sync_fd) while the catch-up goes on, so that
	 * the sealed checkpoint syncs little; ready waits for that sync.
	 * Under mu: target, done, sync_wanted, stop.
	 */
	pthread_t writer;
	bool writing;               /* the thread runs */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t target;            /* bytes of the file the commits reached */
	uint64_t done;              /* written back, in file order, up to here */
	bool sync_wanted, stop;
	bool held;                  /* the last step waited for the writeback */
	atomic_bool writer_gone;    /* the thread has stopped (asked to at the seal) */
	_Atomic int synced;         /* 0 not yet, 1 done, else -errno */
	uint8_t *keybuf;            /* defrag_keep_key's */
	size_t keybuf_cap;
};

/* ---- the set of changes ---- */

static uint64_t defrag_hash(const uint8_t *b, size_t blen, const uint8_t *k, size_t klen,
			    bool whole)
{
	uint64_t h = 1469598103934665603ull ^ (whole ? 0x9e3779b97f4a7c15ull : 0);

	for (size_t i = 0; i < blen; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	h = (h ^ 0xff) * 1099511628211ull;
	for (size_t i = 0; i < klen; i++)
		h = (h ^ k[i]) * 1099511628211ull;
	return h;
}

static void defrag_set_clear(struct defrag_set *s)
{
	for (size_t i = 0; i < s->cap; i++)
		stored_free(s->slots[i]);
	stored_free(s->slots);
	memset(s, 0, sizeof(*s));
}

static void defrag_set_place(struct defrag_set *s, struct defrag_change *c)
{
	size_t i = (size_t)c->hash & (s->cap - 1);

	while (s->slots[i])
		i = (i + 1) & (s->cap - 1);
	s->slots[i] = c;
	s->count++;
}

static int defrag_set_grow(struct defrag_set *s)
{
	struct defrag_set n = { .cap = s->cap ? s->cap * 2 : 1024 };

	n.slots = stored_calloc(n.cap, sizeof(*n.slots));
	if (!n.slots)
		return -ENOMEM;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slots[i])
			defrag_set_place(&n, s->slots[i]);
	stored_free(s->slots);
	*s = n;
	return 0;
}

/* Adds a change unless the set has it. 0 or -ENOMEM. */
static int defrag_set_add(struct defrag_set *s, const uint8_t *b, size_t blen,
			  const uint8_t *k, size_t klen, bool whole)
{
	uint64_t h = defrag_hash(b, blen, k, klen, whole);

	if ((s->count + 1) * 2 > s->cap && defrag_set_grow(s))
		return -ENOMEM;
	for (size_t i = (size_t)h & (s->cap - 1); s->slots[i]; i = (i + 1) & (s->cap - 1)) {
		const struct defrag_change *c = s->slots[i];
		if (c->hash == h && c->whole == whole && c->blen == blen && c->klen == klen &&
		    !memcmp(c->bytes, b, blen) && (!klen || !memcmp(c->bytes + blen, k, klen)))
			return 0;
	}
	struct defrag_change *c = stored_malloc(sizeof(*c) + blen + klen);
	if (!c)
		return -ENOMEM;
	c->hash = h;
	c->blen = (uint32_t)blen;
	c->klen = (uint32_t)klen;
	c->whole = whole;
	memcpy(c->bytes, b, blen);
	if (klen)
		memcpy(c->bytes + blen, k, klen);
	defrag_set_place(s, c);
	return 0;
}

static void defrag_on_write(void *arg, const uint8_t *bucket, size_t blen, const uint8_t *key,
			    size_t klen)
{
	struct defrag *d = arg;
	int rc = defrag_set_add(&d->tracked, bucket, blen, key, key ? klen : 0, key == NULL);

	if (rc && !d->failed)
		d->failed = errmsg_set(rc, "stored: out of memory tracking the writes made during a defragmentation");
}

/* ---- the copy's writeback ---- */

static void *defrag_writer(void *arg)
{
	struct defrag *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!d->stop && d->done >= d->target && !d->sync_wanted)
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->stop)
			break;
		if (d->done < d->target) {
			uint64_t off = d->done, len = d->target - off;
			if (len > DEFRAG_WRITEBACK_CHUNK)
				len = DEFRAG_WRITEBACK_CHUNK;
			pthread_mutex_unlock(&d->mu);
			/* an error here is the sync's to report */
			(void)sync_file_range(d->sync_fd, (off_t)off, (off_t)len,
					      SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
						      SYNC_FILE_RANGE_WAIT_AFTER);
			pthread_mutex_lock(&d->mu);
			d->done = off + len;
			pthread_cond_broadcast(&d->cv);
			continue;
		}
		d->sync_wanted = false;
		pthread_mutex_unlock(&d->mu);
		int rc = fdatasync(d->sync_fd) < 0 ? -errno : 1;
		atomic_store_explicit(&d->synced, rc, memory_order_release);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	atomic_store_explicit(&d->writer_gone, true, memory_order_release);
	return NULL;
}

/* Starts the copy's writer; without it (no thread, no descriptor) the
 * kernel writes the copy back on its own and the sealed checkpoint syncs
 * it all. */
static void defrag_writer_start(struct defrag *d)
{
	if (d->sync_fd < 0)
		return;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->writing = shm_thread_start(&d->writer, false, defrag_writer, d) == 0;
	if (!d->writing) {
		pthread_cond_destroy(&d->cv);
		pthread_mutex_destroy(&d->mu);
	}
}

/* Asks the writer to stop after what it is writing: at the seal, from
 * which on the copy's checkpoints make it durable. */
static void defrag_writer_end(struct defrag *d)
{
	if (!d->writing)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Whether the writer has stopped (or never ran). */
static bool defrag_writer_gone(const struct defrag *d)
{
	return !d->writing || atomic_load_explicit(&d->writer_gone, memory_order_acquire);
}

static void defrag_writer_stop(struct defrag *d)
{
	if (!d->writing)
		return;
	defrag_writer_end(d);
	pthread_join(d->writer, NULL);
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	d->writing = false;
}

/* After a commit of the copy: its file's pages up to the high-water mark
 * are the writer's to write back. */
static void defrag_writeback_to(struct defrag *d)
{
	struct btree_db_stats st;

	if (!d->writing)
		return;
	btree_db_stats(d->copy, &st);
	pthread_mutex_lock(&d->mu);
	if (!d->stop && st.hwm_pgid * st.page_size > d->target) {
		if (st.hwm_pgid * st.page_size - d->target > d->st.commit_max)
			d->st.commit_max = st.hwm_pgid * st.page_size - d->target;
		d->target = st.hwm_pgid * st.page_size;
		if (d->target - d->done > d->st.ahead_max)
			d->st.ahead_max = d->target - d->done;
		pthread_cond_signal(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
}

/* Whether the commits are so far ahead of the writeback that a step
 * should wait (the writer catches up meanwhile). */
static bool defrag_writeback_behind(struct defrag *d)
{
	bool behind;

	if (!d->writing)
		return false;
	pthread_mutex_lock(&d->mu);
	behind = !d->stop && d->target - d->done > d->writeback_ahead;
	if (d->target > d->done)
		pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return behind;
}

/* ---- writing the copy ---- */

static int defrag_copy_fail(struct defrag *d, int rc, const char *what)
{
	if (rc == -ENOTSUP || rc == -ENOMEM)
		return rc;
	return errmsg_set(rc, "stored: defragmenting into %s: %s: %s", d->tmp_path, what,
			  errmsg_get(rc));
}

/*
 * Commits the copy's txn and begins the next. The copy is not
 * checkpointed until it is sealed: a page born since the last
 * checkpoint and freed again is reused at once (freelist.h; no reader
 * reads the copy), so the pages the catch-up rewrites go back into the
 * copy rather than staying free in it. What was written is handed to the
 * kernel's writeback instead, so that the final sync has little left.
 */
static int defrag_commit(struct defrag *d, bool next)
{
	int rc = btree_commit(d->ct, NULL);

	d->ct = NULL;
	d->ct_bytes = 0;
	if (rc)
		return defrag_copy_fail(d, rc, "commit");
	defrag_writeback_to(d);
	d->held = next && defrag_writeback_behind(d);
	if (!next)
		return 0;
	rc = btree_write_begin(d->copy, &d->ct);
	if (rc) {
		d->ct = NULL;
		return defrag_copy_fail(d, rc, "begin");
	}
	return 0;
}

/* The copy's bucket of that name, created (with seq) when absent. */
static int defrag_dst_bucket(struct defrag *d, const uint8_t *name, size_t len, uint64_t seq,
			     struct btree_bucket **out)
{
	int rc = btree_bucket_open(d->ct, NULL, name, len, out);

	if (rc == -ENOENT) {
		rc = btree_bucket_create(d->ct, NULL, name, len, out);
		if (rc == 0)
			rc = btree_bucket_set_sequence(*out, seq);
	}
	if (rc == 0)
		btree_bucket_set_fill(*out, DEFRAG_FILL);
	return rc;
}

static int defrag_put(struct defrag *d, struct btree_bucket *dst, const struct btree_kv *kv)
{
	if (kv->flags & BTREE_KV_BUCKET)
		return errmsg_set(-ENOTSUP, "stored: the db has a nested bucket (%.*s): defragmentation "
					    "copies only etcd's flat buckets", (int)kv->key_len,
				  (const char *)kv->key);
	int rc = btree_put(dst, kv->key, kv->key_len, kv->val, kv->val_len);
	if (rc)
		return defrag_copy_fail(d, rc, "put");
	d->ct_bytes += kv->key_len + kv->val_len + 16;
	return 0;
}

/* Keeps a copy of key in d's buffer (a change to the bucket moves the
 * bytes a cursor gave). */
static int defrag_keep_key(struct defrag *d, const uint8_t *key, size_t len)
{
	int rc = stored_reserve((void **)&d->keybuf, &d->keybuf_cap, len ? len : 1, 1, 256);

	if (rc)
		return rc;
	memcpy(d->keybuf, key, len);
	return 0;
}

/* Makes the copy's bucket name what rt has (removed when rt has none):
 * both are walked in key order and only what differs is written, so a
 * bucket that changed another way than by its keys (its sequence set;
 * deleted and created again) costs the copy few pages. */
static int defrag_bucket_again(struct defrag *d, const uint8_t *name, size_t len)
{
	struct btree_bucket *src, *dst;
	struct btree_cursor cs, cd;
	struct btree_kv ks, kd;
	int rs, rd, rc;

	rc = btree_bucket_open(d->rt, NULL, name, len, &src);
	if (rc == -ENOENT || rc == -ENOTDIR) {
		rc = btree_bucket_delete(d->ct, NULL, name, len);
		return rc == -ENOENT ? 0 : rc ? defrag_copy_fail(d, rc, "bucket delete") : 0;
	}
	if (rc)
		return rc;
	rc = defrag_dst_bucket(d, name, len, btree_bucket_sequence(src), &dst);
	if (rc == 0 && btree_bucket_sequence(dst) != btree_bucket_sequence(src))
		rc = btree_bucket_set_sequence(dst, btree_bucket_sequence(src));
	if (rc)
		return defrag_copy_fail(d, rc, "bucket create");
	btree_cursor_init(&cs, src);
	btree_cursor_init(&cd, dst);
	rs = btree_cursor_first(&cs, &ks);
	rd = btree_cursor_first(&cd, &kd);
	while (rs == 0 || rd == 0) {
		int cmp;
		if (rs != 0 && rs != -ENOENT)
			return rs;
		if (rd != 0 && rd != -ENOENT)
			return rd;
		if (rs)
			cmp = 1;
		else if (rd)
			cmp = -1;
		else {
			size_t n = ks.key_len < kd.key_len ? ks.key_len : kd.key_len;
			cmp = memcmp(ks.key, kd.key, n);
			if (!cmp)
				cmp = ks.key_len < kd.key_len ? -1 : ks.key_len > kd.key_len;
		}
		if (cmp > 0) {
			/* the copy has a key rt has not */
			rc = defrag_keep_key(d, kd.key, kd.key_len);
			if (!rc)
				rc = btree_del(dst, d->keybuf, kd.key_len);
			if (rc)
				return defrag_copy_fail(d, rc, "delete");
			rd = btree_cursor_seek(&cd, d->keybuf, kd.key_len, &kd);
			continue;
		}
		if (cmp == 0 && ks.val_len == kd.val_len && ks.flags == kd.flags &&
		    (!ks.val_len || !memcmp(ks.val, kd.val, ks.val_len))) {
			rs = btree_cursor_next(&cs, &ks);
			rd = btree_cursor_next(&cd, &kd);
			continue;
		}
		rc = defrag_put(d, dst, &ks);
		if (rc)
			return rc;
		rd = btree_cursor_seek(&cd, ks.key, ks.key_len, &kd);
		if (rd == 0)
			rd = btree_cursor_next(&cd, &kd);
		rs = btree_cursor_next(&cs, &ks);
	}
	d->st.buckets_carried++;
	return 0;
}

/* Carries one change over: the entry's state in rt into the copy. */
static int defrag_carry(struct defrag *d, const struct defrag_change *c)
{
	const uint8_t *name = c->bytes, *key = c->bytes + c->blen;
	struct btree_bucket *src, *dst;
	const uint8_t *val;
	size_t vlen;
	int rc;

	if (c->whole)
		return defrag_bucket_again(d, name, c->blen);
	rc = btree_bucket_open(d->rt, NULL, name, c->blen, &src);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0; /* the bucket went: its own change removes it */
	if (rc)
		return rc;
	rc = defrag_dst_bucket(d, name, c->blen, btree_bucket_sequence(src), &dst);
	if (rc)
		return defrag_copy_fail(d, rc, "bucket create");
	rc = btree_get(src, key, c->klen, &val, &vlen);
	if (rc == 0) {
		struct btree_kv kv = { .key = key, .key_len = c->klen, .val = val, .val_len = vlen };
		rc = defrag_put(d, dst, &kv);
	} else if (rc == -ENOENT) {
		rc = btree_del(dst, key, c->klen);
		if (rc == -ENOENT)
			rc = 0;
		else if (rc)
			rc = defrag_copy_fail(d, rc, "delete");
	} else if (rc == -EISDIR) {
		struct btree_kv kv = { .key = key, .key_len = c->klen, .flags = BTREE_KV_BUCKET };
		rc = defrag_put(d, dst, &kv);
	}
	if (rc == 0)
		d->st.entries_carried++;
	return rc;
}

/* ---- the phases ---- */

/* The bulk copy: entries of rt into the copy for up to deadline. *done
 * when every bucket is copied. */
static int defrag_copy_step(struct defrag *d, int64_t deadline, bool *done)
{
	struct btree_bucket *dst = NULL;
	struct btree_kv kv;
	uint32_t n = 0;
	int rc;

	*done = false;
	for (;;) {
		if (++n % DEFRAG_CLOCK_EVERY == 0 && clock_now_ns() >= deadline)
			return 0;
		if (!d->src) {
			rc = d->top_started ? btree_cursor_next(&d->top, &kv) :
					      btree_cursor_first(&d->top, &kv);
			d->top_started = true;
			if (rc == -ENOENT) {
				*done = true;
				return 0;
			}
			if (rc)
				return rc;
			if (!(kv.flags & BTREE_KV_BUCKET))
				continue; /* bbolt keeps no plain key at the top level */
			rc = btree_bucket_open(d->rt, NULL, kv.key, kv.key_len, &d->src);
			if (rc)
				return rc;
			d->src_name = kv.key;
			d->src_name_len = kv.key_len;
			btree_cursor_init(&d->cur, d->src);
			d->cur_started = false;
			dst = NULL;
		}
		if (!dst) {
			rc = defrag_dst_bucket(d, d->src_name, d->src_name_len,
					       btree_bucket_sequence(d->src), &dst);
			if (rc)
				return defrag_copy_fail(d, rc, "bucket create");
		}
		rc = d->cur_started ? btree_cursor_next(&d->cur, &kv) :
				      btree_cursor_first(&d->cur, &kv);
		d->cur_started = true;
		if (rc == -ENOENT) {
			d->src = NULL;
			continue;
		}
		if (rc)
			return rc;
		rc = defrag_put(d, dst, &kv);
		if (rc)
			return rc;
		d->st.entries_copied++;
		if (d->ct_bytes >= d->commit_bytes) {
			rc = defrag_commit(d, true);
			if (rc)
				return rc;
			dst = NULL; /* handles end with their txn */
			if (d->held)
				return 0;
		}
	}
}

/* Starts a round: the changes tracked so far are carried over from the
 * live db's newest commit, and those made from now on are tracked anew. */
static int defrag_round_begin(struct defrag *d)
{
	int rc;

	btree_txn_end(d->rt);
	d->rt = NULL;
	rc = btree_db_read_begin(d->live, NULL, &d->rt);
	if (rc) {
		d->rt = NULL;
		return rc;
	}
	defrag_set_clear(&d->round);
	d->round = d->tracked;
	memset(&d->tracked, 0, sizeof(d->tracked));
	d->round_pos = 0;
	d->st.rounds++;
	return 0;
}

/* Carries over the round's changes for up to deadline (0: all). *done
 * when the round is over. */
static int defrag_round_step(struct defrag *d, int64_t deadline, bool *done)
{
	uint32_t n = 0;
	int rc;

	*done = false;
	for (; d->round_pos < d->round.cap; d->round_pos++) {
		const struct defrag_change *c = d->round.slots[d->round_pos];
		if (!c)
			continue;
		if (deadline && ++n % DEFRAG_CLOCK_EVERY == 0 && clock_now_ns() >= deadline)
			return 0;
		rc = defrag_carry(d, c);
		if (rc)
			return rc;
		if (d->ct_bytes >= d->commit_bytes) {
			rc = defrag_commit(d, true);
			if (rc)
				return rc;
			if (d->held && deadline) {
				d->round_pos++;
				return 0;
			}
		}
	}
	defrag_set_clear(&d->round);
	*done = true;
	return 0;
}

/* Asks for the sync of what the bulk copy wrote (after the writeback
 * reaches the commits); where no thread runs, the sealed checkpoint
 * syncs it all. */
static void defrag_sync_start(struct defrag *d)
{
	if (!d->writing) {
		atomic_store_explicit(&d->synced, 1, memory_order_relaxed);
		return;
	}
	pthread_mutex_lock(&d->mu);
	d->sync_wanted = true;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Whether the bulk copy's sync is over: 1, 0 (still running), or its
 * error. */
static int defrag_sync_done(struct defrag *d)
{
	int rc = atomic_load_explicit(&d->synced, memory_order_acquire);

	if (rc < 0)
		return errmsg_set(rc, "stored: syncing the defragmented copy %s: %s", d->tmp_path,
				  strerror(-rc));
	return rc;
}

/* Makes the copy equal to live's newest commit (every change tracked
 * carried over, with no write txn of live in between) and starts its
 * checkpoint in the background: the state the switch makes durable by
 * the rename. The rounds go on meanwhile, into the next commits. */
static int defrag_seal(struct defrag *d)
{
	bool done, started;
	int rc = defrag_round_begin(d);

	if (!rc)
		rc = defrag_round_step(d, 0, &done);
	if (!rc)
		rc = defrag_commit(d, false);
	if (rc)
		return rc;
	defrag_writer_end(d);
	rc = btree_db_checkpoint_begin(d->copy, &started);
	if (rc)
		return defrag_copy_fail(d, rc, "checkpoint");
	rc = btree_write_begin(d->copy, &d->ct);
	if (rc) {
		d->ct = NULL;
		return defrag_copy_fail(d, rc, "begin");
	}
	d->phase = DEFRAG_SEALING;
	return 0;
}

/* Whether the sealed copy's checkpoint is durable: 1, 0 (still being
 * written), or its error. */
static int defrag_sealed_durable(struct defrag *d)
{
	bool done;
	int rc = btree_db_checkpoint_poll(d->copy, false, &done);

	if (rc)
		return defrag_copy_fail(d, rc, "checkpoint");
	/* and the writer gone, so that the final step never waits for it */
	return done && defrag_writer_gone(d);
}

int defrag_step(struct defrag *d, int64_t budget_ns, bool *ready)
{
	int64_t deadline = clock_now_ns() + (budget_ns > 0 ? budget_ns : 1);
	bool done;
	int rc;

	*ready = false;
	if (d->failed)
		return d->failed;
	d->held = defrag_writeback_behind(d);
	if (d->held) {
		d->st.steps_held++;
		return 0;
	}
	if (d->phase == DEFRAG_COPY) {
		rc = defrag_copy_step(d, deadline, &done);
		if (rc || !done)
			return rc;
		d->phase = DEFRAG_CATCHUP;
		rc = defrag_commit(d, true);
		if (rc)
			return rc;
		defrag_sync_start(d);
		rc = defrag_round_begin(d);
		if (rc)
			return rc;
	}
	while (d->phase == DEFRAG_CATCHUP || d->phase == DEFRAG_SEALING) {
		rc = defrag_round_step(d, deadline, &done);
		if (rc || !done)
			return rc;
		/* CATCHUP: the bulk copy's sync; SEALING: the sealed checkpoint */
		rc = d->phase == DEFRAG_CATCHUP ? defrag_sync_done(d) : defrag_sealed_durable(d);
		if (rc < 0)
			return rc;
		bool few = d->tracked.count <= d->final_keys;
		if (rc == 1 && (few || d->st.rounds >= DEFRAG_MAX_ROUNDS)) {
			if (d->phase == DEFRAG_SEALING) {
				d->phase = DEFRAG_READY;
				break;
			}
			return defrag_seal(d); /* the caller notes the commit sealed */
		}
		if (rc == 0 && few)
			return 0; /* the sync goes on: nothing to do meanwhile */
		rc = defrag_round_begin(d);
		if (rc)
			return rc;
		if (clock_now_ns() >= deadline)
			return 0;
	}
	*ready = true;
	return 0;
}

int defrag_finish(struct defrag *d)
{
	bool done;
	int rc;

	if (d->failed)
		return d->failed;
	if (d->phase == DEFRAG_COPY) {
		rc = defrag_copy_step(d, INT64_MAX, &done);
		if (rc)
			return rc;
	}
	rc = defrag_sync_done(d);
	if (rc < 0)
		return rc;
	/* every change not carried over yet (a round's, when one is under
	 * way, are carried again: that is harmless), from the newest commit */
	for (size_t i = 0; i < d->round.cap; i++) {
		const struct defrag_change *c = d->round.slots[i];
		if (!c)
			continue;
		rc = defrag_set_add(&d->tracked, c->bytes, c->blen, c->bytes + c->blen, c->klen,
				    c->whole);
		if (rc)
			return rc;
	}
	btree_db_track(d->live, NULL);
	rc = defrag_round_begin(d);
	if (!rc)
		rc = defrag_round_step(d, 0, &done);
	if (rc)
		return rc;
	btree_txn_end(d->rt);
	d->rt = NULL;
	rc = defrag_commit(d, false);
	if (rc)
		return rc;
	/* Sealed: its checkpoint is the durable state (waited for only when
	 * the caller did not wait for ready). Not: this one is. */
	if (d->phase == DEFRAG_SEALING || d->phase == DEFRAG_READY)
		rc = btree_db_checkpoint_poll(d->copy, true, NULL);
	else
		rc = btree_db_checkpoint(d->copy, NULL);
	if (rc)
		return defrag_copy_fail(d, rc, "checkpoint");
	d->phase = DEFRAG_READY;
	d->finished = true;
	return 0;
}

struct btree_db *defrag_take(struct defrag *d)
{
	struct btree_db *copy = d->copy;

	d->copy = NULL;
	return copy;
}

bool defrag_sealed(const struct defrag *d)
{
	return d->phase == DEFRAG_SEALING || d->phase == DEFRAG_READY;
}

bool defrag_waits(const struct defrag *d)
{
	bool busy = d->phase == DEFRAG_SEALING ?
			    btree_db_checkpoint_busy(d->copy) || !defrag_writer_gone(d) :
			    d->phase == DEFRAG_CATCHUP &&
				    atomic_load_explicit(&d->synced, memory_order_acquire) == 0;

	return d->held || (busy && d->round.count == 0 && d->tracked.count <= d->final_keys);
}

void defrag_stats(const struct defrag *d, struct defrag_stats *out)
{
	*out = d->st;
	out->pending = d->tracked.count + d->round.count;
}

/* ---- begin and end ---- */

int defrag_begin(struct btree_db *live, const struct defrag_opts *o, struct defrag **out)
{
	struct btree_db_stats ls;
	struct stat sb;
	struct defrag *d;
	int rc;

	*out = NULL;
	if (stat(o->tmp_path, &sb) == 0)
		return errmsg_set(-EEXIST, "stored: %s exists already", o->tmp_path);
	d = stored_calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->live = live;
	d->sync_fd = -1;
	d->commit_bytes = o->commit_bytes ? o->commit_bytes : DEFRAG_COMMIT_BYTES;
	d->final_keys = o->final_keys ? o->final_keys : DEFRAG_FINAL_KEYS;
	d->writeback_ahead = o->writeback_ahead ? o->writeback_ahead : DEFRAG_WRITEBACK_AHEAD;
	d->tmp_path = stored_strdup(o->tmp_path);
	if (!d->tmp_path) {
		stored_free(d);
		return -ENOMEM;
	}
	btree_db_stats(live, &ls);
	struct btree_db_opts co = {
		.create = true,
		.scratch = true,
		.page_size = ls.page_size,
		.map_size = o->map_size,
		.io_open = o->io_open,
		.io_open_arg = o->io_open_arg,
	};
	rc = btree_db_open(d->tmp_path, &co, &d->copy);
	if (rc) {
		d->copy = NULL;
		goto out_abort;
	}
	d->sync_fd = open(d->tmp_path, O_RDONLY | O_CLOEXEC);
	defrag_writer_start(d);
	rc = btree_write_begin(d->copy, &d->ct);
	if (rc) {
		d->ct = NULL;
		goto out_abort;
	}
	rc = btree_db_read_begin(live, NULL, &d->rt);
	if (rc) {
		d->rt = NULL;
		goto out_abort;
	}
	btree_cursor_init(&d->top, btree_txn_root(d->rt));
	const struct btree_tracker t = { .wrote = defrag_on_write, .arg = d };
	btree_db_track(live, &t);
	*out = d;
	return 0;

out_abort:
	/* keep the reason: what undoes the begin must not replace it */
	{
		char why[512];
		snprintf(why, sizeof(why), "%s", errmsg_get(rc));
		defrag_abort(d);
		return errmsg_set(rc, "%s", why);
	}
}

static void defrag_release(struct defrag *d)
{
	defrag_writer_stop(d);
	btree_db_track(d->live, NULL);
	btree_txn_end(d->rt);
	btree_txn_end(d->ct);
	btree_db_close(d->copy);
	if (d->sync_fd >= 0)
		close(d->sync_fd);
	defrag_set_clear(&d->tracked);
	defrag_set_clear(&d->round);
	stored_free(d->keybuf);
	stored_free(d->tmp_path);
	stored_free(d);
}

void defrag_abort(struct defrag *d)
{
	if (!d)
		return;
	btree_txn_end(d->ct);
	d->ct = NULL;
	btree_db_close(d->copy); /* waits for a checkpoint being written */
	d->copy = NULL;
	(void)unlink(d->tmp_path);
	defrag_release(d);
}

void defrag_free(struct defrag *d)
{
	if (!d)
		return;
	/* a finished copy not taken: its last commit made durable first, as
	 * a file that holds live's newest commit */
	if (d->copy && d->finished)
		(void)btree_db_checkpoint(d->copy, NULL);
	defrag_release(d);
}

int defrag_remove_leftovers(const char *dir)
{
	char path[4096];
	struct dirent *e;
	int n = 0;
	DIR *dp = opendir(dir);

	if (!dp)
		return -errno;
	while ((e = readdir(dp)) != NULL) {
		if (strncmp(e->d_name, "db.tmp.", 7) != 0)
			continue;
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (unlink(path) == 0)
			n++;
	}
	closedir(dp);
	return n;
}
