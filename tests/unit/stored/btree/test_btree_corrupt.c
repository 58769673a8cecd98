/*
 * Corrupt and truncated db files give clear errors, never a crash: flipped
 * bytes in the meta pages (one: the other meta takes over; both: refused),
 * another format version, branch and leaf headers and elements, overflow
 * pages, the freelist page, inline bucket pages, and short files. Each
 * error is -EUCLEAN (or -EPROTO), names the file, the page where there is
 * one, and says to restore from a snapshot.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "btree_util.h"

static char dir[256];
static char orig_path[300];
static char path[300];
static uint32_t ps = 1024;
static uint8_t *orig;
static size_t orig_len;

/* Facts about the original file, found by reading its pages raw. */
static struct page_meta cur_meta;
static unsigned cur_slot;
static uint64_t key_root;        /* root page of bucket "key" (a branch) */
static uint64_t leaf_pg;         /* a leaf of "key" with several elements */
static uint64_t overflow_pg;     /* a leaf of "key" with overflow pages */
static uint64_t branch_child;    /* first child of key_root */
static size_t inline_off;        /* file offset of bucket "meta"'s inline page */

static void build(void)
{
	struct btree_db_opts o = { .create = true, .page_size = ps, .map_size = 1ull << 30 };
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *b, *n, *d;
	static uint8_t big[3000];
	memset(big, 'B', sizeof(big));
	T_OK(btree_db_open(orig_path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "key", 3, &b));
	for (int i = 0; i < 400; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%05d", i);
		T_OK(btree_put(b, k, strlen(k), big, i == 200 ? sizeof(big) : (size_t)(i % 40)));
	}
	T_OK(btree_bucket_create(t, NULL, "meta", 4, &d));
	T_OK(btree_put(d, "consistent_index", 16, "\0\0\0\0\0\0\0\1", 8));
	T_OK(btree_bucket_create(t, NULL, "nested", 6, &n));
	T_OK(btree_bucket_create(t, n, "sub", 3, &d));
	for (int i = 0; i < 50; i++) {
		char k[16];
		snprintf(k, sizeof(k), "s%03d", i);
		T_OK(btree_put(d, k, strlen(k), "0123456789012345678901234567890123456789", 40));
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
	/* A second checkpoint with deletes, so the freelist lists pages. */
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &b));
	for (int i = 0; i < 400; i += 9) {
		char k[16];
		snprintf(k, sizeof(k), "k%05d", i);
		T_OK(btree_del(b, k, strlen(k)));
	}
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
	btree_db_close(db);
}

static const uint8_t *pg(uint64_t id)
{
	return orig + id * ps;
}

/* Finds a leaf element's value by key in a leaf page (raw). */
static const uint8_t *raw_leaf_value(const uint8_t *p, const char *key, uint32_t *vsize)
{
	for (unsigned i = 0; i < page_count(p); i++) {
		struct page_elem e;
		T_OK(page_elem(p, ps, true, i, &e));
		if (e.ksize == strlen(key) && memcmp(e.key, key, e.ksize) == 0) {
			*vsize = e.vsize;
			return e.val;
		}
	}
	T_FAIL("key %s not in page", key);
}

static void walk_key_tree(uint64_t id, int depth)
{
	const uint8_t *p = pg(id);
	if (page_flags(p) == PAGE_FLAG_BRANCH) {
		for (unsigned i = 0; i < page_count(p); i++) {
			struct page_elem e;
			T_OK(page_elem(p, ps, false, i, &e));
			if (depth == 0 && i == 0)
				branch_child = e.pgid;
			walk_key_tree(e.pgid, depth + 1);
		}
		return;
	}
	T_CHECK(page_flags(p) == PAGE_FLAG_LEAF);
	if (page_overflow(p) > 0 && !overflow_pg)
		overflow_pg = id;
	else if (page_overflow(p) == 0 && page_count(p) >= 4 && !leaf_pg)
		leaf_pg = id;
}

static void analyse(void)
{
	struct page_meta m0, m1;
	page_meta_decode(pg(0), &m0);
	page_meta_decode(pg(1), &m1);
	cur_slot = m1.txid > m0.txid;
	cur_meta = cur_slot ? m1 : m0;
	const uint8_t *root = pg(cur_meta.root);
	T_CHECK(page_flags(root) == PAGE_FLAG_LEAF);
	uint32_t vs;
	const uint8_t *v = raw_leaf_value(root, "key", &vs);
	key_root = page_ld64(v);
	T_CHECK(key_root != 0 && page_flags(pg(key_root)) == PAGE_FLAG_BRANCH);
	walk_key_tree(key_root, 0);
	T_CHECK(leaf_pg && overflow_pg && branch_child);
	v = raw_leaf_value(root, "meta", &vs);
	T_CHECK(page_ld64(v) == 0);  /* inline */
	inline_off = (size_t)(v + PAGE_BUCKET_HDR_SIZE - orig);
	T_CHECK(cur_meta.freelist != PAGE_NO_FREELIST && page_count(pg(cur_meta.freelist)) > 0);
}

/* Writes the original with len bytes replaced at off (and then cut to
 * new_len bytes when new_len != 0). */
static void make_copy(size_t off, const void *bytes, size_t len, size_t new_len)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0);
	T_CHECK(write(fd, orig, orig_len) == (ssize_t)orig_len);
	if (len)
		T_CHECK(pwrite(fd, bytes, len, (off_t)off) == (ssize_t)len);
	if (new_len)
		T_CHECK(ftruncate(fd, (off_t)new_len) == 0);
	close(fd);
}

static void put16(uint64_t page, size_t at, uint16_t v)
{
	uint8_t b[2];
	page_st16(b, v);
	make_copy(page * ps + at, b, 2, 0);
}

static void put32(uint64_t page, size_t at, uint32_t v)
{
	uint8_t b[4];
	page_st32(b, v);
	make_copy(page * ps + at, b, 4, 0);
}

static void put64(uint64_t page, size_t at, uint64_t v)
{
	uint8_t b[8];
	page_st64(b, v);
	make_copy(page * ps + at, b, 8, 0);
}

/* Rewrites meta slot s with a change, its checksum recomputed. */
static void put_meta(unsigned s, struct page_meta m, bool both)
{
	uint8_t *buf = t_xmalloc(2 * (size_t)ps);
	memcpy(buf, orig, 2 * (size_t)ps);
	for (unsigned i = 0; i < 2; i++) {
		if (i != s && !both)
			continue;
		struct page_meta mi;
		page_meta_decode(buf + (size_t)i * ps, &mi);
		mi.version = m.version;
		mi.root = m.root ? m.root : mi.root;
		page_meta_encode(buf + (size_t)i * ps, ps, i, &mi);
	}
	make_copy(0, buf, 2 * (size_t)ps, 0);
	free(buf);
}

static void expect_msg(const char *what, const char *want, int rc, int want_rc)
{
	const char *msg = errmsg_get(rc);
	if (rc != want_rc)
		T_FAIL("%s: returned %d, want %d (%s)", what, rc, want_rc, msg);
	if (!strstr(msg, path) || !strstr(msg, want))
		T_FAIL("%s: message \"%s\" lacks the path or \"%s\"", what, msg, want);
	if (want_rc == -EUCLEAN && !strstr(msg, "restore from a snapshot"))
		T_FAIL("%s: message \"%s\" does not say what to do", what, msg);
}

/* The reader side of the copy: open, check. */
static int reader_check(void)
{
	struct btree_reader *r;
	int rc = btree_reader_open(path, NULL, &r);
	if (rc < 0)
		return rc;
	rc = btree_reader_check(r);
	btree_reader_close(r);
	return rc;
}

/* The writer side: open and check. */
static int writer_check(void)
{
	struct btree_db_opts o = { .map_size = 1ull << 30 };
	struct btree_db *db;
	int rc = btree_db_open(path, &o, &db);
	if (rc < 0)
		return rc;
	rc = btree_db_check(db);
	btree_db_close(db);
	return rc;
}

/* Reads every key of bucket "key" in a read txn: the first error. */
static int read_all_keys(void)
{
	struct btree_reader *r;
	struct btree_root at;
	struct btree_txn *t;
	struct btree_bucket *b;
	int rc = btree_reader_open(path, NULL, &r);
	if (rc < 0)
		return rc;
	rc = btree_reader_durable(r, &at);
	if (rc == 0)
		rc = btree_reader_begin(r, &at, &t);
	if (rc < 0) {
		btree_reader_close(r);
		return rc;
	}
	rc = btree_bucket_open(t, NULL, "key", 3, &b);
	for (int i = 0; rc == 0 && i < 400; i++) {
		char k[16];
		const uint8_t *v;
		size_t vl;
		snprintf(k, sizeof(k), "k%05d", i);
		rc = btree_get(b, k, strlen(k), &v, &vl);
		if (rc == -ENOENT)
			rc = 0;
	}
	struct btree_cursor c;
	struct btree_kv kv;
	btree_cursor_init(&c, b);
	for (int n = 0; rc == 0; n++)
		rc = btree_cursor_next(&c, &kv);
	if (rc == -ENOENT)
		rc = 0;
	btree_txn_end(t);
	btree_reader_close(r);
	return rc;
}

static void test_metas(void)
{
	t_phase = "meta pages";
	struct page_meta m = cur_meta;

	/* One meta broken: the other (older checkpoint) takes over. */
	make_copy((size_t)cur_slot * ps + 16 + 16, "\xff\xff", 2, 0);
	T_OK(reader_check());
	T_OK(writer_check());
	struct btree_reader *r;
	struct btree_root at;
	T_OK(btree_reader_open(path, NULL, &r));
	T_OK(btree_reader_durable(r, &at));
	T_CHECK(at.txid < cur_meta.txid);
	btree_reader_close(r);

	/* Both broken. */
	uint8_t *buf = t_xmalloc(2 * (size_t)ps);
	memcpy(buf, orig, 2 * (size_t)ps);
	buf[16 + 40] ^= 0x55;
	buf[ps + 16 + 40] ^= 0x55;
	make_copy(0, buf, 2 * (size_t)ps, 0);
	free(buf);
	expect_msg("both metas, reader", "both meta pages are invalid", reader_check(), -EUCLEAN);
	expect_msg("both metas, writer", "fails its checksum", writer_check(), -EUCLEAN);

	/* Another format version. */
	m.version = 3;
	m.root = 0;
	put_meta(0, m, true);
	expect_msg("version", "format version 3", reader_check(), -EPROTO);

	/* Not a db at all. */
	buf = t_xmalloc(4 * (size_t)ps);
	for (size_t i = 0; i < 4 * (size_t)ps; i++)
		buf[i] = (uint8_t)(i * 13);
	make_copy(0, buf, 4 * (size_t)ps, 0);
	free(buf);
	expect_msg("garbage", "no valid meta page", reader_check(), -EUCLEAN);

	/* A checksummed meta whose root lies past the high-water mark. */
	m = cur_meta;
	m.version = PAGE_VERSION;
	m.root = cur_meta.pgid + 5;
	put_meta(cur_slot, m, false);
	expect_msg("root past hwm", "outside [2,", reader_check(), -EUCLEAN);
}

static void test_tree_pages(void)
{
	char want[64];
	t_phase = "tree pages";

	put16(key_root, 8, 0x40);
	snprintf(want, sizeof(want), "page %" PRIu64 " has invalid flags 0x0040", key_root);
	expect_msg("branch flags", want, reader_check(), -EUCLEAN);
	expect_msg("branch flags, writer", want, writer_check(), -EUCLEAN);
	expect_msg("branch flags, reads", want, read_all_keys(), -EUCLEAN);

	put64(key_root, 16 + 8, cur_meta.pgid + 100);  /* first child pgid */
	expect_msg("child past hwm", "outside the tree", reader_check(), -EUCLEAN);
	expect_msg("child past hwm, reads", "outside the tree", read_all_keys(), -EUCLEAN);

	put64(key_root, 16 + 16 + 8, branch_child);  /* second child = first */
	expect_msg("child twice", "referenced more than once", reader_check(), -EUCLEAN);

	put64(key_root, 16 + 8, key_root);  /* a cycle */
	expect_msg("cycle", "", reader_check(), -EUCLEAN);
	expect_msg("cycle, reads", "deep", read_all_keys(), -EUCLEAN);

	put16(key_root, 10, 0xFFFF);
	expect_msg("branch count", "more than fit", reader_check(), -EUCLEAN);

	put64(key_root, 0, key_root + 1);
	expect_msg("page id", "has id", reader_check(), -EUCLEAN);

	put32(leaf_pg, 16 + 4, 0x7fffffff);  /* element 0's pos */
	snprintf(want, sizeof(want), "page %" PRIu64 " has element 0 pointing outside", leaf_pg);
	expect_msg("leaf pos", want, reader_check(), -EUCLEAN);
	expect_msg("leaf pos, reads", want, read_all_keys(), -EUCLEAN);

	/* Element 1's key made smaller than element 0's. */
	struct page_elem e;
	T_OK(page_elem(pg(leaf_pg), ps, true, 1, &e));
	make_copy((size_t)(e.key - orig), "\x01", 1, 0);
	expect_msg("key order", "out of order", reader_check(), -EUCLEAN);

	put32(overflow_pg, 12, 100000);
	expect_msg("overflow", "past the high-water mark", reader_check(), -EUCLEAN);
	expect_msg("overflow, reads", "past the high-water mark", read_all_keys(), -EUCLEAN);

	/* The inline bucket's page. */
	make_copy(inline_off + 8, "\x01\x00", 2, 0);
	expect_msg("inline page", "inline bucket page with invalid flags", reader_check(), -EUCLEAN);
}

static void test_freelist(void)
{
	char want[80];
	uint64_t fl = cur_meta.freelist;
	t_phase = "freelist page";

	put16(fl, 8, PAGE_FLAG_LEAF);
	snprintf(want, sizeof(want), "page %" PRIu64 " has invalid flags 0x0002 where the freelist", fl);
	expect_msg("freelist flags, writer", want, writer_check(), -EUCLEAN);
	expect_msg("freelist flags, reader", "where the freelist belongs", reader_check(), -EUCLEAN);

	put64(fl, 16, key_root);  /* a used page listed free */
	expect_msg("freelist lists a used page", "both free and in use", reader_check(), -EUCLEAN);
	expect_msg("freelist lists a used page, writer", "both free and in use", writer_check(),
		   -EUCLEAN);

	put64(fl, 16, cur_meta.pgid + 3);
	expect_msg("freelist past hwm", "outside [2,", writer_check(), -EUCLEAN);

	/* count 0xFFFF puts the real count in the first slot: a huge one. */
	uint8_t b[14] = { 0 };
	page_st16(b, 0xFFFF);
	page_st64(b + 6, 1ull << 40);
	make_copy(fl * ps + 10, b, sizeof(b), 0);
	expect_msg("freelist count", "claims", writer_check(), -EUCLEAN);
	page_st64(b + 6, 3);  /* a small one shifts the list: caught by accounting */
	make_copy(fl * ps + 10, b, sizeof(b), 0);
	expect_msg("freelist count shifted", "", writer_check(), -EUCLEAN);
}

static void test_truncated(void)
{
	t_phase = "truncated file";
	make_copy(0, NULL, 0, ps + 100);
	expect_msg("shorter than two pages", "truncated", reader_check(), -EUCLEAN);
	make_copy(0, NULL, 0, (size_t)(cur_meta.pgid / 2) * ps);
	expect_msg("half the pages", "truncated", reader_check(), -EUCLEAN);
	expect_msg("half the pages, writer", "truncated", writer_check(), -EUCLEAN);
	make_copy(0, NULL, 0, 1);
	expect_msg("one byte", "no valid meta page", reader_check(), -EUCLEAN);
	make_copy(0, NULL, 0, 0);
	int fd = open(path, O_RDWR | O_TRUNC);
	close(fd);
	expect_msg("empty, reader", "no valid meta page", reader_check(), -EUCLEAN);
}

int main(void)
{
	t_set_seed(0);
	t_mkdir(dir, sizeof(dir));
	snprintf(orig_path, sizeof(orig_path), "%s/orig.db", dir);
	snprintf(path, sizeof(path), "%s/db", dir);
	build();
	int fd = open(orig_path, O_RDONLY);
	struct stat st;
	T_CHECK(fd >= 0 && fstat(fd, &st) == 0);
	orig_len = (size_t)st.st_size;
	orig = t_xmalloc(orig_len);
	T_CHECK(read(fd, orig, orig_len) == (ssize_t)orig_len);
	close(fd);
	analyse();

	make_copy(0, NULL, 0, 0);
	T_OK(reader_check());
	T_OK(writer_check());
	T_OK(read_all_keys());
	test_metas();
	test_tree_pages();
	test_freelist();
	test_truncated();

	free(orig);
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_corrupt: ok\n");
	return 0;
}
