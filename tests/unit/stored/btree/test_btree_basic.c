/*
 * B+tree engine basics: a new file's layout, buckets (top-level, nested,
 * inline, deleted), put/get/delete, cursors, big values on overflow pages,
 * commit and abort, checkpoints and reopen, read txns at older states,
 * the reuse of young pages,
 * argument errors, a second writer refused, and a failed txn refusing use.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "btree_util.h"

static char dir[256];
static char path[300];

static struct btree_db_opts opts(void)
{
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	return o;
}

static void put_str(struct btree_bucket *b, const char *k, const char *v)
{
	T_OK(btree_put(b, k, strlen(k), v, strlen(v)));
}

static void expect_get(struct btree_bucket *b, const char *k, const char *v)
{
	const uint8_t *val;
	size_t len;
	if (!v) {
		T_RC(btree_get(b, k, strlen(k), &val, &len), -ENOENT);
		return;
	}
	T_OK(btree_get(b, k, strlen(k), &val, &len));
	T_CHECK(len == strlen(v) && memcmp(val, v, len) == 0);
}

static void test_new_file(void)
{
	t_phase = "new file";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	o.page_size = 4096;
	T_OK(btree_db_open(path, &o, &db));
	struct btree_root cur, dur;
	btree_db_current(db, &cur);
	btree_db_durable(db, &dur);
	T_CHECK(cur.root_pgid == 3 && cur.txid == 1 && cur.hwm_pgid == 4);
	T_CHECK(dur.txid == 1);
	T_OK(btree_db_check(db));
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	T_CHECK(st.page_size == 4096 && st.file_bytes == 4 * 4096);

	/* A second writer is refused while the first holds the file. */
	struct btree_db *db2;
	T_RC(btree_db_open(path, &o, &db2), -EBUSY);
	btree_db_close(db);

	/* The layout is bbolt's: meta pages 0 and 1 with txids 0 and 1. */
	int fd = open(path, O_RDONLY);
	T_CHECK(fd >= 0);
	uint8_t page[4096];
	T_CHECK(pread(fd, page, sizeof(page), 0) == (ssize_t)sizeof(page));
	T_CHECK(page_ld32(page + 16) == 0xED0CDAEDu && page_ld32(page + 20) == 2);
	T_CHECK(page_ld64(page + 16 + 48) == 0);
	T_CHECK(pread(fd, page, sizeof(page), 4096) == (ssize_t)sizeof(page));
	T_CHECK(page_ld64(page + 16 + 48) == 1 && page_ld16(page + 8) == 0x04);
	close(fd);
}

static void test_buckets_and_keys(void)
{
	t_phase = "buckets and keys";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	struct btree_txn *t;
	struct btree_bucket *b, *nested, *again;
	T_OK(btree_db_open(path, &o, &db));

	T_OK(btree_write_begin(db, &t));
	T_CHECK(btree_txn_writable(t) && btree_txn_id(t) == 2);
	T_OK(btree_bucket_create(t, NULL, "key", 3, &b));
	T_RC(btree_bucket_create(t, NULL, "key", 3, &again), -EEXIST);
	T_CHECK(again == b);
	put_str(b, "foo", "bar");
	put_str(b, "abc", "1");
	put_str(b, "foo", "baz");
	T_OK(btree_bucket_create(t, b, "sub", 3, &nested));
	put_str(nested, "x", "y");
	T_RC(btree_put(b, "sub", 3, "v", 1), -EISDIR);
	T_RC(btree_bucket_create(t, b, "foo", 3, &again), -ENOTDIR);
	T_RC(btree_put(btree_txn_root(t), "plain", 5, "v", 1), -EINVAL);
	T_RC(btree_put(b, "", 0, "v", 1), -EINVAL);
	expect_get(b, "foo", "baz");
	expect_get(b, "nope", NULL);
	const uint8_t *v;
	size_t vl;
	T_RC(btree_get(b, "sub", 3, &v, &vl), -EISDIR);
	struct btree_root r1;
	T_OK(btree_commit(t, &r1));
	T_CHECK(r1.txid == 2);
	T_OK(btree_db_check(db));

	/* Read back in a read txn, with a cursor. */
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	expect_get(b, "abc", "1");
	expect_get(b, "foo", "baz");
	struct btree_cursor c;
	struct btree_kv kv;
	btree_cursor_init(&c, b);
	T_OK(btree_cursor_first(&c, &kv));
	T_CHECK(kv.key_len == 3 && memcmp(kv.key, "abc", 3) == 0);
	T_OK(btree_cursor_next(&c, &kv));
	T_CHECK(memcmp(kv.key, "foo", 3) == 0);
	T_OK(btree_cursor_next(&c, &kv));
	T_CHECK(memcmp(kv.key, "sub", 3) == 0 && (kv.flags & BTREE_KV_BUCKET) && !kv.val);
	T_RC(btree_cursor_next(&c, &kv), -ENOENT);
	T_OK(btree_cursor_prev(&c, &kv));
	T_CHECK(memcmp(kv.key, "sub", 3) == 0);
	T_OK(btree_cursor_seek(&c, "b", 1, &kv));
	T_CHECK(memcmp(kv.key, "foo", 3) == 0);
	T_RC(btree_cursor_seek(&c, "zzz", 3, &kv), -ENOENT);
	T_OK(btree_cursor_prev(&c, &kv));
	T_CHECK(memcmp(kv.key, "sub", 3) == 0);
	T_RC(btree_put(b, "a", 1, "b", 1), -EROFS);
	T_OK(btree_bucket_open(t, b, "sub", 3, &nested));
	expect_get(nested, "x", "y");
	T_OK(btree_txn_check(t));
	btree_txn_end(t);

	/* Abort drops everything. */
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	put_str(b, "gone", "soon");
	T_OK(btree_del(b, "foo", 3));
	T_RC(btree_del(b, "foo", 3), -ENOENT);
	btree_txn_end(t);
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	expect_get(b, "gone", NULL);
	expect_get(b, "foo", "baz");
	btree_txn_end(t);

	/* Delete a nested bucket and a top-level one. */
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	T_OK(btree_bucket_delete(t, b, "sub", 3));
	T_RC(btree_bucket_delete(t, b, "sub", 3), -ENOENT);
	T_RC(btree_bucket_delete(t, b, "foo", 3), -ENOTDIR);
	T_OK(btree_bucket_create(t, NULL, "other", 5, &b));
	put_str(b, "k", "v");
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_check(db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_delete(t, NULL, "other", 5));
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_check(db));

	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	btree_db_close(db);

	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_db_check(db));
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_RC(btree_bucket_open(t, NULL, "other", 5, &b), -ENOENT);
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	T_RC(btree_bucket_open(t, b, "sub", 3, &nested), -ENOENT);
	expect_get(b, "foo", "baz");
	btree_txn_end(t);
	btree_db_close(db);
}

/* Many keys and big values: several levels, overflow pages, a bucket that
 * leaves and re-enters the inline form, and an emptied bucket. */
static void test_grow_and_shrink(void)
{
	t_phase = "grow and shrink";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	struct btree_txn *t;
	struct btree_bucket *b;
	char key[32];
	static uint8_t big[100000];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	T_OK(btree_db_open(path, &o, &db));

	for (int round = 0; round < 4; round++) {
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
		for (int i = 0; i < 3000; i++) {
			int n = round * 3000 + i;
			snprintf(key, sizeof(key), "k%08d", n);
			size_t vl = n % 97 == 0 ? 5000 + (size_t)n % 50000 : (size_t)n % 60;
			T_OK(btree_put(b, key, strlen(key), big + n % 100, vl));
		}
		T_OK(btree_commit(t, NULL));
		T_OK(btree_db_check(db));
		if (round % 2)
			T_OK(btree_db_checkpoint(db, NULL));
	}
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	for (int n = 0; n < 12000; n += 7) {
		snprintf(key, sizeof(key), "k%08d", n);
		const uint8_t *v;
		size_t vl;
		size_t want = n % 97 == 0 ? 5000 + (size_t)n % 50000 : (size_t)n % 60;
		T_OK(btree_get(b, key, strlen(key), &v, &vl));
		T_CHECK(vl == want && memcmp(v, big + n % 100, vl) == 0);
	}
	T_OK(btree_txn_check(t));
	btree_txn_end(t);

	/* Delete nearly everything: the tree collapses, pages come back. */
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	for (int n = 0; n < 12000; n++) {
		if (n == 5 || n == 11999)
			continue;
		snprintf(key, sizeof(key), "k%08d", n);
		T_OK(btree_del(b, key, strlen(key)));
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_check(db));
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));
	struct btree_db_stats st;
	btree_db_stats(db, &st);
	T_CHECK(st.pending_pages + st.free_pages > 100);

	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	T_OK(btree_del(b, "k00000005", 9));
	T_OK(btree_del(b, "k00011999", 9));
	T_OK(btree_del(b, "abc", 3));
	T_OK(btree_del(b, "foo", 3));
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	struct btree_cursor c;
	struct btree_kv kv;
	btree_cursor_init(&c, b);
	T_RC(btree_cursor_first(&c, &kv), -ENOENT);
	T_RC(btree_cursor_last(&c, &kv), -ENOENT);
	btree_txn_end(t);
	T_OK(btree_db_checkpoint(db, NULL));
	T_OK(btree_db_check(db));

	/* Pages freed long ago are reused: the file stops growing. */
	btree_db_stats(db, &st);
	uint64_t hwm = st.hwm_pgid;
	for (int round = 0; round < 20; round++) {
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
		for (int i = 0; i < 50; i++) {
			snprintf(key, sizeof(key), "r%04d", i);
			T_OK(btree_put(b, key, strlen(key), big, 100 + (size_t)round));
		}
		T_OK(btree_commit(t, NULL));
		T_OK(btree_db_checkpoint(db, NULL));
	}
	btree_db_stats(db, &st);
	T_CHECK(st.hwm_pgid == hwm);
	T_OK(btree_db_check(db));
	btree_db_close(db);
}

/* A read txn at an old state keeps seeing it while the writer moves on. */
static void test_old_reader(void)
{
	t_phase = "old reader";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	struct btree_txn *t, *old;
	struct btree_bucket *b;
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "snap", 4, &b));
	for (int i = 0; i < 500; i++) {
		char k[16];
		snprintf(k, sizeof(k), "%05d", i);
		T_OK(btree_put(b, k, strlen(k), "old", 3));
	}
	struct btree_root at;
	T_OK(btree_commit(t, &at));
	T_OK(btree_db_read_begin(db, &at, &old));
	for (int round = 0; round < 30; round++) {
		T_OK(btree_write_begin(db, &t));
		T_OK(btree_bucket_open(t, NULL, "snap", 4, &b));
		for (int i = 0; i < 500; i += 3) {
			char k[16];
			snprintf(k, sizeof(k), "%05d", i);
			T_OK(btree_put(b, k, strlen(k), "new", 3));
		}
		T_OK(btree_commit(t, NULL));
		T_OK(btree_db_checkpoint(db, NULL));
	}
	T_OK(btree_bucket_open(old, NULL, "snap", 4, &b));
	for (int i = 0; i < 500; i++) {
		char k[16];
		snprintf(k, sizeof(k), "%05d", i);
		expect_get(b, k, "old");
	}
	T_OK(btree_txn_check(old));
	btree_txn_end(old);
	T_OK(btree_db_check(db));
	btree_db_close(db);
}

/* One small commit after another: the commit that writes a key (bucket
 * "y", key k, value v) and nothing else. */
static void put_one(struct btree_db *db, const char *k, const char *v, struct btree_root *out)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "y", 1, &b));
	put_str(b, k, v);
	T_OK(btree_commit(t, out));
}

/* Young pages (born and freed between two checkpoints) are reused as soon
 * as no reader can see them: a trickle of small commits keeps taking the
 * same few pages, a reader's pages stay intact while it lives, no page of
 * a checkpoint's tree is reused before the next checkpoint is durable
 * (also while one is being written), and the durable state survives a
 * crash after all of it. */
static void test_young_pages(void)
{
	t_phase = "young pages";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	struct btree_txn *t, *old;
	struct btree_bucket *b;
	struct btree_db_stats st;
	char k[16], v[32], ypath[320];
	snprintf(ypath, sizeof(ypath), "%s/young.db", dir);
	T_OK(btree_db_open(ypath, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "y", 1, &b));
	for (int i = 0; i < 3000; i++) {
		snprintf(k, sizeof(k), "%05d", i);
		put_str(b, k, "base");
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
	btree_db_stats(db, &st);
	uint64_t hwm0 = st.hwm_pgid;

	/* 2000 commits and no checkpoint: each one copies a leaf, a branch
	 * and the root; the copies of one commit are free again after the
	 * next, so the file hardly grows. */
	for (int i = 0; i < 2000; i++) {
		snprintf(k, sizeof(k), "%05d", i % 3000);
		snprintf(v, sizeof(v), "a%d", i);
		put_one(db, k, v, NULL);
	}
	btree_db_stats(db, &st);
	T_CHECK(st.hwm_pgid < hwm0 + 40);
	T_OK(btree_db_check(db));

	/* A read txn at a young commit keeps its pages while later commits
	 * free them. */
	struct btree_root at;
	put_one(db, "00007", "pinned", &at);
	T_OK(btree_db_read_begin(db, &at, &old));
	for (int i = 0; i < 500; i++) {
		snprintf(v, sizeof(v), "b%d", i);
		put_one(db, "00007", v, NULL);
	}
	t_phase = "young pages: old reader";
	T_OK(btree_bucket_open(old, NULL, "y", 1, &b));
	expect_get(b, "00007", "pinned");
	expect_get(b, "01999", "a1999");
	T_OK(btree_txn_check(old));
	btree_txn_end(old);

	/* A checkpoint's tree: its pages are pending, not young, once later
	 * commits free them, also while the checkpoint is being written. */
	put_one(db, "00010", "durable", NULL);
	bool started;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started);
	for (int i = 0; i < 300; i++) {
		snprintf(v, sizeof(v), "c%d", i);
		put_one(db, "00010", v, NULL);
	}
	T_OK(btree_db_checkpoint_poll(db, true, NULL));
	for (int i = 0; i < 300; i++) {
		snprintf(v, sizeof(v), "d%d", i);
		put_one(db, "00010", v, NULL);
		put_one(db, "02500", v, NULL);
	}
	T_OK(btree_db_check(db));
	/* the crash: the commits since that checkpoint are gone */
	btree_db_close(db);
	t_phase = "young pages: reopened";
	T_OK(btree_db_open(ypath, &o, &db));
	T_OK(btree_db_check(db));
	T_OK(btree_db_read_begin(db, NULL, &old));
	T_OK(btree_bucket_open(old, NULL, "y", 1, &b));
	expect_get(b, "00010", "durable");
	expect_get(b, "02500", "base");
	expect_get(b, "00007", "b499");
	expect_get(b, "01999", "a1999");
	expect_get(b, "02999", "base");
	btree_txn_end(old);
	btree_db_close(db);
	unlink(ypath);
}

/* A failed write txn refuses further use and its commit fails. */
static void test_failed_txn(void)
{
	t_phase = "failed txn";
	struct btree_db *db;
	struct btree_db_opts o = opts();
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	struct btree_txn *t2;
	T_RC(btree_write_begin(db, &t2), -EBUSY);
	stored_alloc_fail_after(0);
	int rc = btree_put(b, "new-key", 7, "v", 1);
	stored_alloc_fail_after(-1);
	T_CHECK(rc == -ENOMEM);
	T_RC(btree_put(b, "other", 5, "v", 1), -ECANCELED);
	const uint8_t *v;
	size_t vl;
	T_RC(btree_get(b, "foo", 3, &v, &vl), -ECANCELED);
	T_RC(btree_commit(t, NULL), -ECANCELED);
	T_OK(btree_db_check(db));
	btree_db_close(db);
}

int main(void)
{
	t_set_seed(1);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	test_new_file();
	test_buckets_and_keys();
	test_grow_and_shrink();
	test_old_reader();
	test_young_pages();
	test_failed_txn();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_basic: ok\n");
	return 0;
}
