/*
 * dbtool: cetcd's side of the bbolt interop test, built on stored's B+tree
 * engine (libcetcd_stored.a).
 *
 *   dbtool check FILE          verify the file's durable state
 *   dbtool dump FILE           print every bucket and key like boltcheck -dump
 *   dbtool write FILE SEED [PAGE_SIZE]
 *                              write a new file: etcd-like revision keys,
 *                              nested, inline and emptied buckets, overflow
 *                              values, deletes, many commits and checkpoints
 *   dbtool modify FILE SEED    open an existing file as its writer and change it
 *
 * Exits 0 on success, 1 with the engine's message otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stored/btree/btree.h"
#include "stored/btree/page.h"
#include "base/log/errmsg.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "dbtool: %s: %s (%s)\n", what, strerror(-rc), errmsg_get(rc));
	return 1;
}

static void hex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* Prints "B <path>" and "K <path> <key> <len> <fnv64a>" lines in key order,
 * the same as boltcheck -dump. */
static int dump_bucket(struct btree_txn *t, struct btree_bucket *b, const char *path)
{
	struct btree_cursor c;
	struct btree_kv kv;
	int rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		if (kv.flags & BTREE_KV_BUCKET) {
			size_t plen = strlen(path);
			char *sub = malloc(plen + 2 + kv.key_len * 2 + 1);
			if (!sub)
				return -ENOMEM;
			char *w = sub + sprintf(sub, "%s%s", path, plen ? "/" : "");
			for (size_t i = 0; i < kv.key_len; i++)
				w += sprintf(w, "%02x", kv.key[i]);
			printf("B %s\n", sub);
			struct btree_bucket *child;
			rc = btree_bucket_open(t, b, kv.key, kv.key_len, &child);
			if (rc == 0)
				rc = dump_bucket(t, child, sub);
			free(sub);
			if (rc < 0)
				return rc;
			continue;
		}
		printf("K %s ", path);
		hex(kv.key, kv.key_len);
		printf(" %zu %016" PRIx64 "\n", kv.val_len, page_fnv64a(kv.val, kv.val_len));
	}
	return rc == -ENOENT ? 0 : rc;
}

static int cmd_read(const char *path, bool dump)
{
	struct btree_reader *r;
	struct btree_root at;
	struct btree_txn *t;
	int rc = btree_reader_open(path, NULL, &r);
	if (rc < 0)
		return fail("open", rc);
	rc = btree_reader_check(r);
	if (rc < 0) {
		btree_reader_close(r);
		return fail("check", rc);
	}
	rc = btree_reader_durable(r, &at);
	if (rc == 0)
		rc = btree_reader_begin(r, &at, &t);
	if (rc < 0) {
		btree_reader_close(r);
		return fail("read", rc);
	}
	if (dump)
		rc = dump_bucket(t, btree_txn_root(t), "");
	else
		printf("ok txid=%" PRIu64 " root=%" PRIu64 " hwm=%" PRIu64 "\n", at.txid,
		       at.root_pgid, at.hwm_pgid);
	btree_txn_end(t);
	btree_reader_close(r);
	return rc < 0 ? fail("dump", rc) : 0;
}

static uint64_t rng;
static uint64_t next_rand(void)
{
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)next_rand();
}

/* Random changes over txns commits, with checkpoints; same spirit as
 * boltcheck's churn. */
static int churn(struct btree_db *db, int txns, uint64_t base)
{
	static uint8_t val[40000];
	int rc = 0;
	for (int i = 0; i < txns && rc == 0; i++) {
		struct btree_txn *t;
		struct btree_bucket *kb, *misc, *child;
		rc = btree_write_begin(db, &t);
		if (rc < 0)
			return rc;
		rc = btree_bucket_create(t, NULL, "key", 3, &kb);
		if (rc == -EEXIST)
			rc = 0;
		for (int j = 0; rc == 0 && j < 50; j++) {
			uint8_t k[17];
			uint64_t main_rev = base + (uint64_t)i * 50 + (uint64_t)j + 1;
			for (int b = 0; b < 8; b++) {
				k[b] = (uint8_t)(main_rev >> (56 - 8 * b));
				k[9 + b] = 0;
			}
			k[8] = '_';
			size_t n = next_rand() % 200;
			if (next_rand() % 40 == 0)
				n = 4000 + next_rand() % 30000;
			fill(val, n);
			rc = btree_put(kb, k, sizeof(k), val, n);
		}
		struct btree_cursor c;
		struct btree_kv kv;
		btree_cursor_init(&c, kb);
		int crc = rc ? rc : btree_cursor_first(&c, &kv);
		while (rc == 0 && crc == 0 && next_rand() % 4 == 0) {
			uint8_t k[64];
			memcpy(k, kv.key, kv.key_len < sizeof(k) ? kv.key_len : sizeof(k));
			rc = btree_del(kb, k, kv.key_len);
			if (rc == 0)
				crc = btree_cursor_seek(&c, k, kv.key_len, &kv);
		}
		if (rc == 0) {
			rc = btree_bucket_create(t, NULL, "misc", 4, &misc);
			if (rc == -EEXIST)
				rc = 0;
		}
		for (int j = 0; rc == 0 && j < 20; j++) {
			char k[32];
			int kl = snprintf(k, sizeof(k), "key-%06d", (int)(next_rand() % 5000));
			if (next_rand() % 3 == 0) {
				rc = btree_del(misc, k, (size_t)kl);
			} else {
				size_t n = next_rand() % 300;
				fill(val, n);
				rc = btree_put(misc, k, (size_t)kl, val, n);
			}
			if (rc == -ENOENT || rc == -EISDIR)
				rc = 0;
		}
		char nb[32];
		int nl = snprintf(nb, sizeof(nb), "nested-%d", (int)(next_rand() % 6));
		if (rc == 0 && next_rand() % 8 == 0) {
			rc = btree_bucket_delete(t, misc, nb, (size_t)nl);
			if (rc == -ENOENT)
				rc = 0;
		} else if (rc == 0) {
			rc = btree_bucket_create(t, misc, nb, (size_t)nl, &child);
			if (rc == -EEXIST)
				rc = 0;
			int n = (int)(next_rand() % 8);
			if (strcmp(nb, "nested-0") == 0)
				n += 100;
			for (int j = 0; rc == 0 && j < n; j++) {
				char k[32];
				int kl = snprintf(k, sizeof(k), "key-%06d", (int)(next_rand() % 5000));
				size_t vn = next_rand() % 100;
				fill(val, vn);
				rc = btree_put(child, k, (size_t)kl, val, vn);
			}
			if (rc == 0 && strcmp(nb, "nested-0") == 0) {
				struct btree_bucket *deeper;
				rc = btree_bucket_create(t, child, "deeper", 6, &deeper);
				if (rc == -EEXIST)
					rc = 0;
				if (rc == 0)
					rc = btree_put(deeper, "x", 1, "0123456789", 10);
			}
		}
		if (rc < 0) {
			btree_txn_end(t);
			return rc;
		}
		rc = btree_commit(t, NULL);
		if (rc == 0 && i % 7 == 6)
			rc = btree_db_checkpoint(db, NULL);
	}
	if (rc == 0) {
		struct btree_txn *t;
		struct btree_bucket *e;
		rc = btree_write_begin(db, &t);
		if (rc == 0) {
			rc = btree_bucket_create(t, NULL, "empty", 5, &e);
			if (rc == -EEXIST)
				rc = 0;
			rc = rc ? (btree_txn_end(t), rc) : btree_commit(t, NULL);
		}
	}
	if (rc == 0)
		rc = btree_db_checkpoint(db, NULL);
	if (rc == 0)
		rc = btree_db_check(db);
	return rc;
}

static int cmd_write(const char *path, uint64_t seed, uint32_t page_size, bool create)
{
	struct btree_db *db;
	struct btree_db_opts o = { .create = create, .page_size = page_size, .map_size = 4ull << 30 };
	if (create)
		remove(path);
	rng = seed;
	int rc = btree_db_open(path, &o, &db);
	if (rc < 0)
		return fail("open", rc);
	rc = churn(db, create ? 40 : 10, create ? 0 : 100000);
	btree_db_close(db);
	return rc < 0 ? fail(create ? "write" : "modify", rc) : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "check") == 0)
		return cmd_read(argv[2], false);
	if (argc >= 3 && strcmp(argv[1], "dump") == 0)
		return cmd_read(argv[2], true);
	if (argc >= 4 && strcmp(argv[1], "write") == 0)
		return cmd_write(argv[2], strtoull(argv[3], NULL, 0),
				 argc >= 5 ? (uint32_t)strtoul(argv[4], NULL, 0) : 0, true);
	if (argc >= 4 && strcmp(argv[1], "modify") == 0)
		return cmd_write(argv[2], strtoull(argv[3], NULL, 0), 0, false);
	fprintf(stderr, "usage: dbtool check|dump FILE | write FILE SEED [PAGE_SIZE] | modify FILE SEED\n");
	return 2;
}
