/*
 * dbsnapcopy: takes consistent copies of a running member's db through
 * stored/btree/dbsnap.h, as raftd and gatewayd do, and checks each one
 * with stored's engine (tests/integration/dbsnap.sh checks them with the
 * real bbolt and etcdctl as well).
 *
 *   dbsnapcopy REGION DB OUT_PREFIX COUNT [CHUNK_BYTES [PAUSE_US]]
 *
 * attaches to the member region REGION (<runtime-dir>/region) as an
 * extra process, and writes COUNT copies of DB to OUT_PREFIX.N, each read
 * CHUNK_BYTES at a time with PAUSE_US between reads, so that stored
 * commits and reuses pages while a copy is read. Each copy must then pass
 * the engine's check, hold the consistent index dbsnap_index reported in
 * its meta bucket, and have a `key` bucket whose main revisions run from
 * 2 without a hole (what a member that only took puts and deletes has).
 * Prints "copy N index I revision R size S" per copy. Exits 0 when every
 * copy passed, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log/errmsg.h"
#include "shm/region.h"
#include "stored/btree/btree.h"
#include "stored/btree/dbsnap.h"
#include "stored/mvcc/revision.h"
#include "stored/mvcc/schema.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "dbsnapcopy: %s: %s (%s)\n", what, strerror(-rc), errmsg_get(rc));
	return 1;
}

/* Streams one copy into path. */
static int copy_one(struct shm_region *r, const char *db, const char *path, size_t chunk,
		    unsigned pause_us, uint64_t *index, uint64_t *size)
{
	struct dbsnap *s;
	uint8_t *buf = malloc(chunk);
	uint64_t total = 0;
	int fd, rc;

	if (!buf)
		return fail("malloc", -ENOMEM);
	do
		rc = dbsnap_open(r, db, &s);
	while (rc == -EAGAIN && usleep(10000) == 0);
	if (rc) {
		free(buf);
		return fail("dbsnap_open", rc);
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		dbsnap_close(s);
		free(buf);
		return fail(path, -errno);
	}
	for (;;) {
		ssize_t n = dbsnap_read(s, buf, chunk);
		if (n < 0) {
			rc = fail("dbsnap_read", (int)n);
			break;
		}
		if (n == 0)
			break;
		if (write(fd, buf, (size_t)n) != n) {
			rc = fail("write", -errno);
			break;
		}
		total += (uint64_t)n;
		if (pause_us)
			usleep(pause_us);
	}
	*index = dbsnap_index(s);
	*size = dbsnap_size(s);
	if (rc == 0 && total != *size) {
		fprintf(stderr, "dbsnapcopy: %s: streamed %" PRIu64 " bytes of %" PRIu64 "\n", path,
			total, *size);
		rc = 1;
	}
	dbsnap_close(s);
	close(fd);
	free(buf);
	return rc;
}

/* Checks a copy with the engine; *rev gets its newest main revision. */
static int check_one(const char *path, uint64_t index, int64_t *rev)
{
	struct btree_reader *rd;
	struct btree_root root;
	struct btree_txn *t;
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	const uint8_t *v;
	size_t vlen;
	int64_t want = 2;
	int rc, bad = 0;

	rc = btree_reader_open(path, NULL, &rd);
	if (rc)
		return fail(path, rc);
	rc = btree_reader_check(rd);
	if (rc) {
		btree_reader_close(rd);
		return fail(path, rc);
	}
	rc = btree_reader_durable(rd, &root);
	if (!rc)
		rc = btree_reader_begin(rd, &root, &t);
	if (rc) {
		btree_reader_close(rd);
		return fail(path, rc);
	}
	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_META, SCHEMA_LEN(SCHEMA_BUCKET_META), &b);
	if (!rc)
		rc = btree_get(b, SCHEMA_META_CONSISTENT_INDEX,
			       SCHEMA_LEN(SCHEMA_META_CONSISTENT_INDEX), &v, &vlen);
	if (rc || vlen != 8 || rev_get_be64(v) != index) {
		fprintf(stderr, "dbsnapcopy: %s: consistent index %" PRIu64 " in the copy, %" PRIu64 " reported\n",
			path, rc || vlen != 8 ? 0 : rev_get_be64(v), index);
		bad = 1;
	}
	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_KEY, SCHEMA_LEN(SCHEMA_BUCKET_KEY), &b);
	if (rc) {
		btree_txn_end(t);
		btree_reader_close(rd);
		return fail("the key bucket", rc);
	}
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		struct rev r;
		bool tomb;
		if (rev_decode(kv.key, kv.key_len, &r, &tomb) < 0) {
			fprintf(stderr, "dbsnapcopy: %s: a key bucket key of %zu bytes\n", path,
				kv.key_len);
			bad = 1;
			break;
		}
		if (r.main == want)
			want++;
		else if (r.main != want - 1) {
			fprintf(stderr, "dbsnapcopy: %s: main revision %" PRId64 " follows %" PRId64 "\n",
				path, r.main, want - 1);
			bad = 1;
			break;
		}
	}
	if (rc != 0 && rc != -ENOENT)
		bad = fail("walking the key bucket", rc);
	*rev = want - 1;
	btree_txn_end(t);
	btree_reader_close(rd);
	return bad;
}

int main(int argc, char **argv)
{
	struct shm_region *r;
	size_t chunk = 65536;
	unsigned pause_us = 0;
	int rc, bad = 0;

	if (argc < 5) {
		fprintf(stderr, "usage: dbsnapcopy REGION DB OUT_PREFIX COUNT [CHUNK_BYTES [PAUSE_US]]\n");
		return 2;
	}
	int count = atoi(argv[4]);
	if (argc > 5)
		chunk = (size_t)strtoull(argv[5], NULL, 10);
	if (argc > 6)
		pause_us = (unsigned)strtoul(argv[6], NULL, 10);
	if (chunk == 0)
		chunk = 1;
	rc = shm_region_attach(argv[1], &r);
	if (rc)
		return fail(argv[1], rc);
	for (int i = 0; i < count; i++) {
		char path[4096];
		uint64_t index = 0, size = 0;
		int64_t rev = 0;
		snprintf(path, sizeof(path), "%s.%d", argv[3], i);
		if (copy_one(r, argv[2], path, chunk, pause_us, &index, &size) ||
		    check_one(path, index, &rev)) {
			bad = 1;
			continue;
		}
		printf("copy %d index %" PRIu64 " revision %" PRId64 " size %" PRIu64 "\n", i, index,
		       rev, size);
		fflush(stdout);
	}
	shm_region_detach(r);
	return bad;
}
