/*
 * Helpers for the MVCC layer's tests: a db with a store in a scratch
 * directory, apply batches with Raft indexes, protobuf packing for
 * comparing whole responses, and dumps of every bucket of a db.
 * The failure macros and the seeded generator are the B+tree tests'
 * (btree_util.h); MVCC_SEED=n replays a seed.
 */
#ifndef CETCD_TEST_MVCC_UTIL_H
#define CETCD_TEST_MVCC_UTIL_H

#include "btree_util.h"

#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/schema.h"

/* Shorter names for the request and response messages. */
typedef Etcdserverpb__RangeRequest RangeRequest;
typedef Etcdserverpb__RangeResponse RangeResponse;
typedef Etcdserverpb__PutRequest PutRequest;
typedef Etcdserverpb__PutResponse PutResponse;
typedef Etcdserverpb__DeleteRangeRequest DeleteRequest;
typedef Etcdserverpb__DeleteRangeResponse DeleteResponse;
typedef Etcdserverpb__TxnRequest TxnRequest;
typedef Etcdserverpb__TxnResponse TxnResponse;
typedef Etcdserverpb__RequestOp RequestOp;
typedef Etcdserverpb__ResponseOp ResponseOp;
typedef Etcdserverpb__Compare Compare;

static inline uint64_t tm_pick_seed(void)
{
	const char *s = getenv("MVCC_SEED");
	if (s && *s)
		return strtoull(s, NULL, 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

static inline long tm_env_long(const char *name, long dflt)
{
	const char *s = getenv(name);
	return s && *s ? strtol(s, NULL, 0) : dflt;
}

/* ---- a db with a store ---- */

struct tdb {
	char dir[256];
	char path[300];
	struct btree_db *db;
	struct mvcc_store *s;
	struct mvcc_store_opts o;
	uint64_t index;          /* last Raft index handed to the store */
	struct arena a;          /* responses of the open batch */
	struct btree_root root;  /* last published */
};

static inline void tdb_open_store(struct tdb *d)
{
	struct btree_db_opts o = { .create = true, .map_size = 4ull << 30 };
	T_OK(btree_db_open(d->path, &o, &d->db));
	int rc = mvcc_store_open(d->db, &d->o, &d->s);
	if (rc)
		T_FAIL("mvcc_store_open: %d (%s): %s", rc, mvcc_strerror(rc), errmsg_get(rc));
	btree_db_current(d->db, &d->root);
}

static inline void tdb_init(struct tdb *d, const struct mvcc_store_opts *o)
{
	memset(d, 0, sizeof(*d));
	if (o)
		d->o = *o;
	t_mkdir(d->dir, sizeof(d->dir));
	snprintf(d->path, sizeof(d->path), "%s/db", d->dir);
	arena_init(&d->a);
	tdb_open_store(d);
}

/* Closes the store and the db; with checkpoint, makes everything durable
 * first (otherwise the file keeps its last checkpoint, as after a crash). */
static inline void tdb_close_store(struct tdb *d, bool checkpoint)
{
	if (checkpoint)
		T_OK(btree_db_checkpoint(d->db, NULL));
	mvcc_store_close(d->s);
	btree_db_close(d->db);
	d->s = NULL;
	d->db = NULL;
}

static inline void tdb_reopen(struct tdb *d, bool checkpoint)
{
	tdb_close_store(d, checkpoint);
	tdb_open_store(d);
}

static inline void tdb_free(struct tdb *d)
{
	if (d->s)
		tdb_close_store(d, false);
	arena_release(&d->a);
	t_rmdir(d->dir);
}

static inline void tdb_begin(struct tdb *d)
{
	T_OK(mvcc_batch_begin(d->s));
}

/* Starts the next entry (a fresh Raft index). */
static inline void tdb_entry(struct tdb *d)
{
	T_OK(mvcc_apply_begin(d->s, ++d->index));
}

/* One Put of key = value as the next entry of the open batch. */
static inline void tdb_put(struct tdb *d, const void *key, size_t klen, const char *value)
{
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *resp;
	p.key.data = (uint8_t *)key;
	p.key.len = klen;
	p.value.data = (uint8_t *)value;
	p.value.len = strlen(value);
	tdb_entry(d);
	T_OK(mvcc_put(d->s, &p, &d->a, &resp));
}

static inline void tdb_commit(struct tdb *d)
{
	int rc = mvcc_batch_commit(d->s, &d->root);
	if (rc)
		T_FAIL("commit: %d (%s): %s", rc, mvcc_strerror(rc), errmsg_get(rc));
	arena_release(&d->a);
}

/* Runs a compaction to its end in batches of `step` entries. */
static inline void tdb_finish_compaction(struct tdb *d, uint32_t step)
{
	bool done = false;
	while (!done) {
		tdb_begin(d);
		T_OK(mvcc_compact_step(d->s, step, &done));
		tdb_commit(d);
	}
}

static inline ProtobufCBinaryData tb(const char *s)
{
	ProtobufCBinaryData b = { strlen(s), (uint8_t *)s };
	return b;
}

static inline ProtobufCBinaryData tbn(const void *p, size_t n)
{
	ProtobufCBinaryData b = { n, (uint8_t *)p };
	return b;
}

/* ---- whole messages ---- */

struct tbuf {
	uint8_t *p;
	size_t len, cap;
};

static inline void tbuf_add(struct tbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			T_FAIL("out of memory");
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

static inline void tbuf_free(struct tbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* A single-key Range's whole answer as bytes (its result code, count and
 * KeyValues), through view v at rev (<= 0: the view's revision). */
static inline void tm_range_bytes(struct mvcc_view *v, const uint8_t *key, size_t klen,
				  int64_t rev, struct tbuf *out)
{
	RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	struct mvcc_range_result res;
	mvcc_range_result_init(&res);
	req.key = tbn(key, klen);
	req.revision = rev;
	int rc = mvcc_range(v, &req, &res);
	tbuf_add(out, &rc, sizeof(rc));
	if (rc == 0) {
		tbuf_add(out, &res.n, sizeof(res.n));
		tbuf_add(out, &res.count, sizeof(res.count));
		for (size_t i = 0; i < res.n; i++)
			tbuf_add(out, res.kvs[i].kv, res.kvs[i].kv_len);
	}
	mvcc_range_result_free(&res);
}

/* The message's wire bytes, appended to b. */
static inline void tm_pack(const ProtobufCMessage *m, struct tbuf *b)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	tbuf_add(b, NULL, 0);
	if (b->len + n > b->cap) {
		b->cap = b->len + n + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			T_FAIL("out of memory");
	}
	if (protobuf_c_message_pack(m, b->p + b->len) != n)
		T_FAIL("protobuf_c_message_pack wrote an unexpected size");
	b->len += n;
}

/* Fails unless a and b pack to the same bytes; what names the message. */
static inline void tm_same_msg(const ProtobufCMessage *got, const ProtobufCMessage *want,
			       const char *what)
{
	struct tbuf g = { 0 }, w = { 0 };
	tm_pack(got, &g);
	tm_pack(want, &w);
	if (g.len != w.len || (g.len && memcmp(g.p, w.p, g.len) != 0)) {
		fprintf(stderr, "%s differs: got %zu bytes, want %zu\n got:", what, g.len, w.len);
		for (size_t i = 0; i < g.len && i < 160; i++)
			fprintf(stderr, " %02x", g.p[i]);
		fprintf(stderr, "\nwant:");
		for (size_t i = 0; i < w.len && i < 160; i++)
			fprintf(stderr, " %02x", w.p[i]);
		fprintf(stderr, "\n");
		T_FAIL("%s: responses differ", what);
	}
	tbuf_free(&g);
	tbuf_free(&w);
}

/* ---- dumps ---- */

/* Appends every bucket of t (top-level names, then their entries, as
 * length-prefixed bytes) to out; only buckets whose name passes keep (NULL:
 * all). */
static inline void tm_dump(struct btree_txn *t, bool (*keep)(const uint8_t *, size_t),
			   struct tbuf *out)
{
	struct btree_cursor c, cb;
	struct btree_kv kv, e;
	btree_cursor_init(&c, btree_txn_root(t));
	for (int rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		if (keep && !keep(kv.key, kv.key_len))
			continue;
		struct btree_bucket *b;
		uint32_t n = (uint32_t)kv.key_len;
		tbuf_add(out, "B", 1);
		tbuf_add(out, &n, sizeof(n));
		tbuf_add(out, kv.key, kv.key_len);
		T_OK(btree_bucket_open(t, NULL, kv.key, kv.key_len, &b));
		btree_cursor_init(&cb, b);
		int rc2;
		for (rc2 = btree_cursor_first(&cb, &e); rc2 == 0; rc2 = btree_cursor_next(&cb, &e)) {
			uint32_t kl = (uint32_t)e.key_len, vl = (uint32_t)e.val_len;
			tbuf_add(out, "E", 1);
			tbuf_add(out, &kl, sizeof(kl));
			tbuf_add(out, e.key, e.key_len);
			tbuf_add(out, &vl, sizeof(vl));
			tbuf_add(out, e.val, e.val_len);
		}
		T_CHECK(rc2 == -ENOENT);
	}
}

static inline void tdb_dump(struct tdb *d, bool (*keep)(const uint8_t *, size_t),
			    struct tbuf *out)
{
	struct btree_txn *t;
	T_OK(btree_db_read_begin(d->db, NULL, &t));
	tm_dump(t, keep, out);
	btree_txn_end(t);
}

static inline bool tm_is_index_bucket(const uint8_t *name, size_t len)
{
	return len > 9 && memcmp(name, "cetcd_kv_", 9) == 0;
}

static inline void tm_same_dump(const struct tbuf *a, const struct tbuf *b, const char *what)
{
	if (a->len != b->len || memcmp(a->p, b->p, a->len) != 0) {
		size_t i = 0;
		while (i < a->len && i < b->len && a->p[i] == b->p[i])
			i++;
		T_FAIL("%s: dumps differ (%zu vs %zu bytes, first difference at %zu)", what,
		       a->len, b->len, i);
	}
}

#endif
