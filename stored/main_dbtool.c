/*
 * cetcd-dbtool: reads and writes db files through the MVCC layer, for
 * checks against etcd's own tools (tests/integration/mvcc_etcd_interop.sh)
 * and for looking into a member's db.
 *
 *   cetcd-dbtool open DB
 *       opens DB as its writer (creating etcd's buckets, rebuilding the
 *       index of a file etcd wrote), checkpoints, prints the state
 *   cetcd-dbtool get DB KEYHEX [options]
 *       a Range, printed as "revision", "count", "more" and "kv" lines;
 *       options: --end HEX (00: from key), --rev N, --limit N, --order N,
 *       --target N (RangeRequest's enum numbers), --keys-only, --count-only
 *   cetcd-dbtool write DB SEED N
 *       applies N random requests (puts, some with a lease, deletes, txns,
 *       one compaction), checkpoints, prints the state
 *   cetcd-dbtool status DB
 *       what `etcdctl snapshot status -w json` reports, computed here:
 *       hash, revision (of the key bucket's last key) and totalKey (entries
 *       of every bucket)
 *
 * Keys and values are printed in hex. Exit status 0, 1 on a failure (the
 * message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/hex/hex.h"
#include "leasepb/lease.pb-c.h"
#include "base/log/errmsg.h"
#include "stored/alloc.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/schema.h"

static int usage(void)
{
	fprintf(stderr,
		"usage: cetcd-dbtool open DB\n"
		"       cetcd-dbtool get DB KEYHEX [--end HEX] [--rev N] [--limit N] [--order N]\n"
		"                    [--target N] [--keys-only] [--count-only]\n"
		"       cetcd-dbtool write DB SEED N\n"
		"       cetcd-dbtool status DB\n");
	return 2;
}

static int fail(const char *what, int rc)
{
	const char *why = errmsg_get(rc);

	fprintf(stderr, "cetcd-dbtool: %s: %s", what, mvcc_strerror(rc));
	if (!mvcc_is_request_error(rc) && strcmp(why, mvcc_strerror(rc)) != 0)
		fprintf(stderr, " (%s)", why);
	fprintf(stderr, "\n");
	return 1;
}

static void print_hex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* Decodes hex into a new buffer (freed by the caller); NULL on bad hex. */
static uint8_t *from_hex(const char *s, size_t *len)
{
	size_t n = strlen(s);
	if (n % 2)
		return NULL;
	uint8_t *p = malloc(n / 2 + 1);
	if (!p)
		return NULL;
	if (hex_decode(s, n, p) < 0) {
		free(p);
		return NULL;
	}
	*len = n / 2;
	return p;
}

struct tool {
	struct btree_db *db;
	struct mvcc_store *s;
};

static int tool_open(struct tool *t, const char *path, bool create)
{
	struct btree_db_opts o = { .create = create };
	int rc = btree_db_open(path, &o, &t->db);
	if (rc)
		return fail(path, rc);
	rc = mvcc_store_open(t->db, NULL, &t->s);
	if (!rc)
		rc = btree_db_checkpoint(t->db, NULL);
	if (rc) {
		mvcc_store_close(t->s);
		btree_db_close(t->db);
		return fail("opening the store", rc);
	}
	return 0;
}

static void tool_close(struct tool *t)
{
	mvcc_store_close(t->s);
	btree_db_close(t->db);
}

static void print_state(struct tool *t)
{
	struct mvcc_state st;
	mvcc_store_state(t->s, &st);
	printf("revision %" PRId64 "\ncompact_revision %" PRId64 "\nconsistent_index %" PRIu64
	       "\nindex_rebuilt %d\n", st.rev, st.compact_rev, st.consistent_index, st.rebuilt);
}

static int cmd_open(const char *path)
{
	struct tool t;
	if (tool_open(&t, path, false))
		return 1;
	print_state(&t);
	tool_close(&t);
	return 0;
}

static int cmd_get(const char *path, int argc, char **argv)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;
	uint8_t *key, *end = NULL;
	size_t klen, elen = 0;
	int status = 1;
	if (!(key = from_hex(argv[0], &klen)))
		return usage();
	r.key = (ProtobufCBinaryData){ klen, key };
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--keys-only")) {
			r.keys_only = 1;
		} else if (!strcmp(a, "--count-only")) {
			r.count_only = 1;
		} else if (v && !strcmp(a, "--end")) {
			free(end);
			if (!(end = from_hex(v, &elen)))
				goto out_usage;
			r.range_end = (ProtobufCBinaryData){ elen, end };
			i++;
		} else if (v && !strcmp(a, "--rev")) {
			r.revision = strtoll(v, NULL, 0);
			i++;
		} else if (v && !strcmp(a, "--limit")) {
			r.limit = strtoll(v, NULL, 0);
			i++;
		} else if (v && !strcmp(a, "--order")) {
			r.sort_order = (Etcdserverpb__RangeRequest__SortOrder)atoi(v);
			i++;
		} else if (v && !strcmp(a, "--target")) {
			r.sort_target = (Etcdserverpb__RangeRequest__SortTarget)atoi(v);
			i++;
		} else {
			goto out_usage;
		}
	}

	struct tool t;
	struct btree_txn *txn;
	struct mvcc_view view;
	struct mvcc_range_result res;
	if (tool_open(&t, path, false))
		goto out_free;
	int rc = btree_db_read_begin(t.db, NULL, &txn);
	if (rc) {
		fail("read txn", rc);
		goto out_close;
	}
	mvcc_range_result_init(&res);
	rc = mvcc_view_open(txn, &view);
	if (!rc)
		rc = mvcc_range(&view, &r, &res);
	if (rc) {
		fail("range", rc);
	} else {
		printf("revision %" PRId64 "\ncount %" PRId64 "\nmore %d\n", res.rev, res.count,
		       res.more);
		for (size_t i = 0; i < res.n; i++) {
			const struct mvcc_kv *f = &res.kvs[i].f;
			printf("kv k=");
			print_hex(f->key, f->key_len);
			printf(" v=");
			if (!res.keys_only)
				print_hex(f->value, f->value_len);
			printf(" c=%" PRId64 " m=%" PRId64 " ver=%" PRId64 " l=%" PRId64 "\n",
			       f->create_rev, f->mod_rev, f->version, f->lease);
		}
		status = 0;
	}
	mvcc_range_result_free(&res);
	mvcc_view_close(&view);
	btree_txn_end(txn);
out_close:
	tool_close(&t);
out_free:
	free(key);
	free(end);
	return status;
out_usage:
	free(key);
	free(end);
	return usage();
}

/* ---- write: a random workload ---- */

static uint64_t rng;

static uint64_t next_rand(void)
{
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static unsigned below(unsigned n)
{
	return (unsigned)(next_rand() % n);
}

#define LEASE_ID 0x1234
#define NKEYS 60

static char keys[NKEYS][16];

/* Grants the tool's lease (a leasepb.Lease in the lease bucket, as etcd's
 * lessor stores it). */
static int grant_lease(struct btree_txn *t)
{
	struct btree_bucket *b;
	Leasepb__Lease l = LEASEPB__LEASE__INIT;
	uint8_t k[8], v[32];
	l.id = LEASE_ID;
	l.ttl = 3600;
	rev_put_be64(k, LEASE_ID);
	size_t n = leasepb__lease__pack(&l, v);
	int rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_LEASE, SCHEMA_LEN(SCHEMA_BUCKET_LEASE), &b);
	return rc ? rc : btree_put(b, k, sizeof(k), v, n);
}

static int random_request(struct mvcc_store *s, struct arena *a, char *val, size_t val_cap)
{
	unsigned r = below(100);
	void *resp;
	const char *k = keys[below(NKEYS)];
	size_t vl = below(4) == 0 ? 2000 + below(2000) : below(40);
	if (vl >= val_cap)
		vl = val_cap - 1;
	for (size_t i = 0; i < vl; i++)
		val[i] = (char)('a' + below(26));
	if (r < 55) {
		Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
		p.key = (ProtobufCBinaryData){ strlen(k), (uint8_t *)k };
		p.value = (ProtobufCBinaryData){ vl, (uint8_t *)val };
		p.lease = below(5) == 0 ? LEASE_ID : 0;
		return mvcc_put(s, &p, a, (Etcdserverpb__PutResponse **)&resp);
	}
	if (r < 75) {
		Etcdserverpb__DeleteRangeRequest d = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
		char from[4] = { k[0], k[1], k[2], 0 }, to[4] = { k[0], k[1], (char)(k[2] + 1), 0 };
		d.key = (ProtobufCBinaryData){ strlen(k), (uint8_t *)k };
		if (below(3) == 0) {  /* every key of the prefix "k/N" */
			d.key = (ProtobufCBinaryData){ 3, (uint8_t *)from };
			d.range_end = (ProtobufCBinaryData){ 3, (uint8_t *)to };
		}
		return mvcc_delete_range(s, &d, a, (Etcdserverpb__DeleteRangeResponse **)&resp);
	}
	Etcdserverpb__PutRequest p1 = ETCDSERVERPB__PUT_REQUEST__INIT, p2 = p1;
	Etcdserverpb__RequestOp o1 = ETCDSERVERPB__REQUEST_OP__INIT, o2 = o1;
	Etcdserverpb__RequestOp *ops[2] = { &o1, &o2 };
	Etcdserverpb__Compare c = ETCDSERVERPB__COMPARE__INIT, *cs[1] = { &c };
	Etcdserverpb__TxnRequest t = ETCDSERVERPB__TXN_REQUEST__INIT;
	const char *k2 = keys[below(NKEYS)];
	p1.key = (ProtobufCBinaryData){ strlen(k), (uint8_t *)k };
	p1.value = (ProtobufCBinaryData){ vl, (uint8_t *)val };
	p2.key = (ProtobufCBinaryData){ strlen(k2), (uint8_t *)k2 };
	p2.value = (ProtobufCBinaryData){ 3, (uint8_t *)"txn" };
	o1.request_case = o2.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	o1.request_put = &p1;
	o2.request_put = &p2;
	c.key = p1.key;
	c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION;
	c.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS;
	c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
	c.version = 3;
	t.compare = cs;
	t.n_compare = 1;
	t.success = ops;
	t.n_success = k == k2 ? 1 : 2;
	t.failure = ops + 1;
	t.n_failure = 1;
	return mvcc_txn(s, &t, a, (Etcdserverpb__TxnResponse **)&resp);
}

static int cmd_write(const char *path, const char *seed, const char *count)
{
	struct tool t;
	struct arena a;
	uint64_t index, batches = 0;
	long n = atol(count);
	char *val = malloc(4096);
	int rc = 0;
	if (!val || n < 0)
		return usage();
	rng = strtoull(seed, NULL, 0);
	for (int i = 0; i < NKEYS; i++)
		snprintf(keys[i], sizeof(keys[i]), "k/%02u", below(30) * 3 + (unsigned)(i % 3));
	if (tool_open(&t, path, true)) {
		free(val);
		return 1;
	}
	arena_init(&a);
	struct mvcc_state st;
	mvcc_store_state(t.s, &st);
	index = st.consistent_index;
	for (long i = 0; i < n && !rc;) {
		rc = mvcc_batch_begin(t.s);
		if (!rc && (rc = mvcc_apply_begin(t.s, ++index)) == 0)
			rc = grant_lease(mvcc_batch_txn(t.s));
		for (int k = 0; k < 25 && i < n && !rc; k++, i++) {
			rc = mvcc_apply_begin(t.s, ++index);
			if (!rc)
				rc = random_request(t.s, &a, val, 4096);
			if (rc && mvcc_is_request_error(rc))
				rc = 0;
			if (!rc && i == n / 2) {
				/* one compaction in the middle, a few revisions back */
				Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
				void *resp;
				mvcc_store_state(t.s, &st);
				q.revision = st.rev > 10 ? st.rev - 10 : st.rev;
				rc = mvcc_apply_begin(t.s, ++index);
				if (!rc)
					rc = mvcc_compact(t.s, &q, &a,
							  (Etcdserverpb__CompactionResponse **)&resp);
			}
		}
		if (!rc)
			rc = mvcc_compact_step(t.s, 1000, NULL);
		if (!rc)
			rc = mvcc_batch_commit(t.s, NULL);
		else
			mvcc_batch_abort(t.s);
		arena_release(&a);
		/* freed pages are reused only after a checkpoint, as in stored */
		if (!rc && ++batches % 64 == 0)
			rc = btree_db_checkpoint(t.db, NULL);
	}
	bool done = false;
	while (!rc && !done) {
		rc = mvcc_batch_begin(t.s);
		if (!rc)
			rc = mvcc_compact_step(t.s, 1000, &done);
		if (!rc)
			rc = mvcc_batch_commit(t.s, NULL);
	}
	if (!rc)
		rc = btree_db_checkpoint(t.db, NULL);
	free(val);
	if (rc) {
		tool_close(&t);
		return fail("writing", rc);
	}
	print_state(&t);
	tool_close(&t);
	return 0;
}

/* ---- status: etcdctl snapshot status's figures ---- */

static uint32_t crc_table[256];

/* CRC-32C (Castagnoli), as Go's crc32.MakeTable(crc32.Castagnoli). */
static uint32_t crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	if (!crc_table[1]) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
			crc_table[i] = c;
		}
	}
	crc = ~crc;
	for (size_t i = 0; i < n; i++)
		crc = crc_table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static int cmd_status(const char *path)
{
	struct btree_reader *r;
	struct btree_root root;
	struct btree_txn *t;
	struct btree_cursor c, cb;
	struct btree_kv kv, e;
	uint64_t total = 0;
	int64_t revision = 0;
	uint32_t hash = 0;
	int rc = btree_reader_open(path, NULL, &r);
	if (rc)
		return fail(path, rc);
	rc = btree_reader_durable(r, &root);
	if (!rc)
		rc = btree_reader_begin(r, &root, &t);
	if (rc) {
		btree_reader_close(r);
		return fail(path, rc);
	}
	btree_cursor_init(&c, btree_txn_root(t));
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		struct btree_bucket *b;
		bool is_key = kv.key_len == 3 && !memcmp(kv.key, "key", 3);
		hash = crc32c(hash, kv.key, kv.key_len);
		rc = btree_bucket_open(t, NULL, kv.key, kv.key_len, &b);
		if (rc)
			break;
		btree_cursor_init(&cb, b);
		for (rc = btree_cursor_first(&cb, &e); rc == 0; rc = btree_cursor_next(&cb, &e)) {
			hash = crc32c(hash, e.key, e.key_len);
			hash = crc32c(hash, e.val, e.val_len);
			if (is_key && e.key_len >= 8)
				revision = (int64_t)rev_get_be64(e.key);
			total++;
		}
		if (rc != -ENOENT)
			break;
	}
	btree_txn_end(t);
	btree_reader_close(r);
	if (rc != -ENOENT)
		return fail("walking the buckets", rc);
	printf("{\"hash\":%" PRIu32 ",\"revision\":%" PRId64 ",\"totalKey\":%" PRIu64 "}\n",
	       hash, revision, total);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "open"))
		return cmd_open(argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "get"))
		return cmd_get(argv[2], argc - 3, argv + 3);
	if (argc == 5 && !strcmp(argv[1], "write"))
		return cmd_write(argv[2], argv[3], argv[4]);
	if (argc == 3 && !strcmp(argv[1], "status"))
		return cmd_status(argv[2]);
	return usage();
}
