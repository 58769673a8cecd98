/*
 * Randomized model test of the B+tree engine: buckets (top-level and
 * nested), puts, deletes, gets, cursor walks and seeks, big values that
 * need overflow pages, commits, aborts, checkpoints, reopen with and
 * without a checkpoint, read txns held at old states while the writer
 * moves on (one in this process, one through a reader handle standing for
 * another process, across a restart of the writer), all compared against a
 * plain sorted map. A failure prints the seed; BTREE_SEED=n replays it.
 * BTREE_OPS=n changes the number of operations per run.
 */
#include "btree_util.h"

static char dir[256];
static char path[300];

/* Operation log of the open write txn, replayed into the committed model. */
enum { OP_PUT, OP_DEL, OP_CREATE, OP_DROP };
struct oplog_entry {
	int op;
	int bucket;
	uint8_t *key;
	size_t klen;
	uint8_t *val;
	size_t vlen;
};

struct run {
	uint32_t page_size;
	struct btree_db *db;
	struct btree_txn *txn;
	struct btree_bucket **handles;  /* per model bucket, this txn */
	size_t nhandles;
	struct model work, committed, durable;
	struct oplog_entry *log;
	size_t nlog, logcap;
	struct btree_root published;
	/* a read txn of this process at an old state */
	struct btree_txn *held;
	struct model held_model;
	int held_left;
	/* a reader handle at an old state, standing for another process */
	struct btree_reader *ext;
	struct btree_txn *ext_txn;
	struct model ext_model;
	uint64_t ext_txid;  /* what the oldest_reader callback reports */
	int ext_left;
	uint64_t ops, commits, aborts, checkpoints, reopens, checks;
	uint8_t *valbuf;
};

static uint64_t ext_oldest(void *arg)
{
	struct run *r = arg;
	return r->ext_txn ? r->ext_txid : UINT64_MAX;
}

static void log_op(struct run *r, int op, int bucket, const void *k, size_t kl,
		   const void *v, size_t vl)
{
	if (r->nlog == r->logcap) {
		r->logcap = r->logcap ? r->logcap * 2 : 256;
		r->log = realloc(r->log, r->logcap * sizeof(*r->log));
		if (!r->log)
			T_FAIL("out of memory");
	}
	r->log[r->nlog++] = (struct oplog_entry){ op, bucket, t_dup(k, kl), kl,
						  v ? t_dup(v, vl) : NULL, vl };
}

static void log_clear(struct run *r)
{
	for (size_t i = 0; i < r->nlog; i++) {
		free(r->log[i].key);
		free(r->log[i].val);
	}
	r->nlog = 0;
}

static void log_replay(struct run *r, struct model *m)
{
	for (size_t i = 0; i < r->nlog; i++) {
		struct oplog_entry *e = &r->log[i];
		switch (e->op) {
		case OP_PUT:
			m_put(m, e->bucket, e->key, e->klen, e->val, e->vlen);
			break;
		case OP_DEL:
			m_del(m, e->bucket, e->key, e->klen);
			break;
		case OP_CREATE:
			m_create(m, e->bucket, e->key, e->klen);
			break;
		case OP_DROP:
			m_drop(m, e->bucket, e->key, e->klen);
			break;
		}
	}
}

static void db_open(struct run *r, const struct btree_root *resume)
{
	struct btree_db_opts o = {
		.create = true,
		.page_size = r->page_size,
		.map_size = 2ull << 30,
		.oldest_reader = ext_oldest,
		.oldest_reader_arg = r,
	};
	if (resume)
		o.resume = *resume;
	T_OK(btree_db_open(path, &o, &r->db));
	btree_db_current(r->db, &r->published);
}

/* The handle of model bucket bi in the open txn t (opened by path). */
static struct btree_bucket *handle(struct run *r, struct btree_txn *t,
				   struct btree_bucket **cache, const struct model *m, int bi)
{
	if (bi == 0)
		return btree_txn_root(t);
	if (cache && cache[bi])
		return cache[bi];
	struct btree_bucket *parent = handle(r, t, cache, m, m->b[bi].parent);
	struct btree_bucket *b;
	T_OK(btree_bucket_open(t, parent, m->b[bi].name, m->b[bi].nlen, &b));
	if (cache)
		cache[bi] = b;
	return b;
}

static void txn_begin(struct run *r)
{
	T_OK(btree_write_begin(r->db, &r->txn));
	r->nhandles = r->work.nb + 64;
	r->handles = calloc(r->nhandles, sizeof(*r->handles));
	if (!r->handles)
		T_FAIL("out of memory");
}

static struct btree_bucket *whandle(struct run *r, int bi)
{
	if ((size_t)bi >= r->nhandles) {
		size_t n = (size_t)bi * 2 + 16;
		r->handles = realloc(r->handles, n * sizeof(*r->handles));
		memset(r->handles + r->nhandles, 0, (n - r->nhandles) * sizeof(*r->handles));
		r->nhandles = n;
	}
	return handle(r, r->txn, r->handles, &r->work, bi);
}

/* Full comparison of model m with the state at root in a fresh read txn. */
static void compare_state(struct run *r, const struct model *m, const struct btree_root *at)
{
	struct btree_txn *t;
	T_OK(btree_db_read_begin(r->db, at, &t));
	m_compare(m, 0, t, btree_txn_root(t), 0);
	btree_txn_end(t);
}

static int pick_bucket(struct run *r, bool allow_root)
{
	for (int tries = 0; tries < 20; tries++) {
		int bi = (int)t_below(r->work.nb);
		if (r->work.b[bi].live && (allow_root || bi != 0))
			return bi;
	}
	return allow_root ? 0 : -1;
}

static size_t make_key(struct run *r, int bi, uint8_t *buf)
{
	const struct m_bucket *b = &r->work.b[bi];
	if (b->n > 0 && t_chance(300)) {
		const struct m_entry *e = &b->e[t_below(b->n)];
		memcpy(buf, e->key, e->klen);
		return e->klen;
	}
	uint64_t n = t_below(3000);
	if (t_chance(30)) {
		size_t len = t_chance(20) ? 32768 - t_below(100) : 100 + t_below(2000);
		for (size_t i = 0; i < len; i++)
			buf[i] = (uint8_t)(n * 31 + i * 7);
		buf[0] = 'L';
		return len;
	}
	unsigned width = 4 + (unsigned)(n % 13);
	return (size_t)sprintf((char *)buf, "k%0*" PRIu64, (int)width, n);
}

static size_t make_val(struct run *r)
{
	size_t len;
	uint64_t p = t_below(1000);
	if (p < 600)
		len = t_below(65);
	else if (p < 900)
		len = 64 + t_below(1000);
	else if (p < 980)
		len = 1000 + t_below(7000);
	else if (p < 999)
		len = 8000 + t_below(62000);
	else
		len = 300000;
	for (size_t i = 0; i < len; i += 8) {
		uint64_t x = t_rand();
		memcpy(r->valbuf + i, &x, len - i < 8 ? len - i : 8);
	}
	return len;
}

static void op_put(struct run *r)
{
	int bi = pick_bucket(r, false);
	if (bi < 0)
		return;
	static uint8_t key[40000];
	size_t kl = make_key(r, bi, key);
	size_t vl = make_val(r);
	int rc = btree_put(whandle(r, bi), key, kl, r->valbuf, vl);
	bool found;
	size_t i = m_find(&r->work, bi, key, kl, &found);
	if (found && r->work.b[bi].e[i].child >= 0) {
		T_RC(rc, -EISDIR);
		return;
	}
	T_OK(rc);
	m_put(&r->work, bi, key, kl, r->valbuf, vl);
	log_op(r, OP_PUT, bi, key, kl, r->valbuf, vl);
}

/* Puts a run of keys after every key the model test makes otherwise, in
 * order: a leaf that only grew at its end, which a bucket set to append
 * pages (btree_bucket_set_append_pages) writes in leaves of several pages. */
static void op_append(struct run *r)
{
	int bi = pick_bucket(r, false);
	if (bi < 0)
		return;
	if (t_chance(500))
		btree_bucket_set_append_pages(whandle(r, bi), 4, 1 + (uint32_t)t_below(300));
	for (uint64_t j = 0, n = 2 + t_below(200); j < n; j++) {
		char key[24];
		size_t kl = (size_t)sprintf(key, "z%013" PRIu64, (uint64_t)r->ops * 256 + j);
		size_t vl = t_below(400);
		T_OK(btree_put(whandle(r, bi), key, kl, r->valbuf, vl));
		m_put(&r->work, bi, key, kl, r->valbuf, vl);
		log_op(r, OP_PUT, bi, key, kl, r->valbuf, vl);
	}
}

static void op_del(struct run *r)
{
	int bi = pick_bucket(r, false);
	if (bi < 0)
		return;
	static uint8_t key[40000];
	size_t kl = make_key(r, bi, key);
	int want = m_del(&r->work, bi, key, kl);
	T_RC(btree_del(whandle(r, bi), key, kl), want);
	if (want == 0)
		log_op(r, OP_DEL, bi, key, kl, NULL, 0);
}

static void op_get(struct run *r)
{
	int bi = pick_bucket(r, false);
	if (bi < 0)
		return;
	static uint8_t key[40000];
	size_t kl = make_key(r, bi, key);
	const uint8_t *v;
	size_t vl;
	int rc = btree_get(whandle(r, bi), key, kl, &v, &vl);
	bool found;
	size_t i = m_find(&r->work, bi, key, kl, &found);
	if (!found) {
		T_RC(rc, -ENOENT);
		return;
	}
	const struct m_entry *e = &r->work.b[bi].e[i];
	if (e->child >= 0) {
		T_RC(rc, -EISDIR);
		return;
	}
	T_OK(rc);
	T_CHECK(vl == e->vlen && (vl == 0 || memcmp(v, e->val, vl) == 0));
}

/* Seek to a random key, then step a few times either way. */
static void op_seek(struct run *r)
{
	int bi = pick_bucket(r, true);
	static uint8_t key[40000];
	size_t kl = make_key(r, bi, key);
	struct btree_cursor c;
	struct btree_kv kv;
	const struct m_bucket *mb = &r->work.b[bi];
	btree_cursor_init(&c, whandle(r, bi));
	bool found;
	size_t i = m_find(&r->work, bi, key, kl, &found);
	int rc = btree_cursor_seek(&c, key, kl, &kv);
	long pos = (long)i;
	for (int step = 0; step < 8; step++) {
		if (pos < 0 || (size_t)pos >= mb->n) {
			T_RC(rc, -ENOENT);
			break;
		}
		T_OK(rc);
		T_CHECK(m_cmp(kv.key, kv.key_len, mb->e[pos].key, mb->e[pos].klen) == 0);
		if (t_chance(500)) {
			rc = btree_cursor_next(&c, &kv);
			pos++;
		} else {
			rc = btree_cursor_prev(&c, &kv);
			pos--;
		}
	}
}

static void op_create_bucket(struct run *r)
{
	int parent = pick_bucket(r, true);
	int depth = 0;
	for (int p = parent; p > 0; p = r->work.b[p].parent)
		depth++;
	if (depth >= 3)
		parent = 0;
	char name[32];
	int nl = snprintf(name, sizeof(name), "b%02u", (unsigned)t_below(40));
	struct btree_bucket *b;
	int want = m_create(&r->work, parent, name, (size_t)nl);
	int rc = btree_bucket_create(r->txn, whandle(r, parent), name, (size_t)nl, &b);
	if (want < 0) {
		T_RC(rc, want);
		return;
	}
	T_OK(rc);
	log_op(r, OP_CREATE, parent, name, (size_t)nl, NULL, 0);
}

static void op_drop_bucket(struct run *r)
{
	int bi = pick_bucket(r, false);
	if (bi < 0)
		return;
	int parent = r->work.b[bi].parent;
	uint8_t name[64];
	uint32_t nl = r->work.b[bi].nlen;
	memcpy(name, r->work.b[bi].name, nl);
	T_OK(btree_bucket_delete(r->txn, whandle(r, parent), name, nl));
	T_OK(m_drop(&r->work, parent, name, nl));
	log_op(r, OP_DROP, parent, name, nl, NULL, 0);
	/* Handles of the dropped subtree are gone; forget all cached ones. */
	memset(r->handles, 0, r->nhandles * sizeof(*r->handles));
}

/* Ends a read txn held at an old state, after comparing it with the
 * model of that state. */
static void end_snapshot(struct btree_txn **t, struct model *m)
{
	if (!*t)
		return;
	m_compare(m, 0, *t, btree_txn_root(*t), 0);
	T_OK(btree_txn_check(*t));
	btree_txn_end(*t);
	*t = NULL;
	m_free(m);
}

static void after_commit(struct run *r)
{
	r->commits++;
	if (r->held && --r->held_left <= 0)
		end_snapshot(&r->held, &r->held_model);
	if (r->ext_txn && --r->ext_left <= 0)
		end_snapshot(&r->ext_txn, &r->ext_model);
	if (!r->held && t_chance(30)) {
		T_OK(btree_db_read_begin(r->db, &r->published, &r->held));
		m_clone(&r->held_model, &r->committed);
		r->held_left = 5 + (int)t_below(60);
	}
	if (!r->ext_txn && t_chance(20)) {
		T_OK(btree_reader_begin(r->ext, &r->published, &r->ext_txn));
		r->ext_txid = r->published.txid;
		m_clone(&r->ext_model, &r->committed);
		r->ext_left = 5 + (int)t_below(80);
	}
	if (t_chance(100)) {
		T_OK(btree_db_checkpoint(r->db, &r->published));
		m_free(&r->durable);
		m_clone(&r->durable, &r->committed);
		r->checkpoints++;
	}
	if (t_chance(25)) {
		T_OK(btree_db_check(r->db));
		compare_state(r, &r->committed, NULL);
		r->checks++;
	}
	if (t_chance(8)) {
		/* Restart the writer, with or without a last checkpoint; the
		 * reader handle's old state must survive it. */
		end_snapshot(&r->held, &r->held_model);
		bool checkpoint = t_chance(500);
		if (checkpoint) {
			T_OK(btree_db_checkpoint(r->db, &r->published));
			m_free(&r->durable);
			m_clone(&r->durable, &r->committed);
		}
		struct btree_root resume = r->published;
		btree_db_close(r->db);
		db_open(r, &resume);
		if (!checkpoint) {
			m_free(&r->committed);
			m_clone(&r->committed, &r->durable);
		}
		m_free(&r->work);
		m_clone(&r->work, &r->committed);
		T_OK(btree_db_check(r->db));
		compare_state(r, &r->committed, NULL);
		r->reopens++;
	}
}

static void txn_end(struct run *r, bool commit)
{
	free(r->handles);
	r->handles = NULL;
	if (commit) {
		T_OK(btree_commit(r->txn, &r->published));
		log_replay(r, &r->committed);
		after_commit(r);
	} else {
		btree_txn_end(r->txn);
		m_free(&r->work);
		m_clone(&r->work, &r->committed);
		r->aborts++;
	}
	r->txn = NULL;
	log_clear(r);
}

static void run_one(uint64_t seed, uint32_t page_size, uint64_t nops)
{
	struct run r = { .page_size = page_size };
	t_set_seed(seed);
	t_phase = page_size == 1024 ? "model, 1 KiB pages" : "model, 4 KiB pages";
	remove(path);
	r.valbuf = t_xmalloc(300008);
	m_init(&r.work);
	m_init(&r.committed);
	m_init(&r.durable);
	db_open(&r, NULL);
	T_OK(btree_reader_open(path, NULL, &r.ext));

	/* A few top-level buckets to start with, committed and durable. */
	txn_begin(&r);
	for (int i = 0; i < 4; i++) {
		char name[8];
		struct btree_bucket *b;
		snprintf(name, sizeof(name), "top%d", i);
		T_OK(btree_bucket_create(r.txn, NULL, name, 4, &b));
		m_create(&r.work, 0, name, 4);
		log_op(&r, OP_CREATE, 0, name, 4, NULL, 0);
	}
	txn_end(&r, true);
	T_OK(btree_db_checkpoint(r.db, &r.published));
	m_free(&r.durable);
	m_clone(&r.durable, &r.committed);

	for (r.ops = 0; r.ops < nops; r.ops++) {
		t_step = r.ops;
		if (!r.txn)
			txn_begin(&r);
		uint64_t p = t_below(1000);
		if (p < 420)
			op_put(&r);
		else if (p < 620)
			op_del(&r);
		else if (p < 770)
			op_get(&r);
		else if (p < 850)
			op_seek(&r);
		else if (p < 855)
			op_create_bucket(&r);
		else if (p < 857)
			op_drop_bucket(&r);
		else if (p < 859) {
			int bi = pick_bucket(&r, true);
			m_compare(&r.work, bi, r.txn, whandle(&r, bi), 0);
		} else if (p < 859 + 15) {
			txn_end(&r, !t_chance(100));
		} else if (p < 859 + 17) {
			int bi = pick_bucket(&r, false);
			if (bi > 0) {
				btree_bucket_set_fill(whandle(&r, bi), t_chance(500) ? 0.9 : 0.5);
				btree_bucket_set_append_pages(whandle(&r, bi), 1, 0);
			}
		} else if (p < 859 + 19) {
			op_append(&r);
		}
	}
	if (r.txn)
		txn_end(&r, true);
	end_snapshot(&r.held, &r.held_model);
	end_snapshot(&r.ext_txn, &r.ext_model);
	T_OK(btree_db_checkpoint(r.db, &r.published));
	T_OK(btree_db_check(r.db));
	compare_state(&r, &r.committed, NULL);
	btree_db_close(r.db);
	db_open(&r, NULL);
	T_OK(btree_db_check(r.db));
	compare_state(&r, &r.committed, NULL);
	btree_db_close(r.db);
	btree_reader_close(r.ext);

	printf("seed %" PRIu64 " page %u: %" PRIu64 " ops, %" PRIu64 " commits, %" PRIu64
	       " aborts, %" PRIu64 " checkpoints, %" PRIu64 " reopens, %" PRIu64 " full checks\n",
	       seed, page_size, r.ops, r.commits, r.aborts, r.checkpoints, r.reopens, r.checks);
	m_free(&r.work);
	m_free(&r.committed);
	m_free(&r.durable);
	log_clear(&r);
	free(r.log);
	free(r.valbuf);
}

int main(void)
{
	uint64_t seed = t_pick_seed();
	const char *o = getenv("BTREE_OPS");
	uint64_t nops = o && *o ? strtoull(o, NULL, 0) : 100000;
	printf("test_btree_model: seed %" PRIu64 " (BTREE_SEED=%" PRIu64 " replays)\n", seed, seed);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	run_one(seed, 4096, nops);
	run_one(seed + 1, 1024, nops / 2);
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_model: ok\n");
	return 0;
}
