/*
 * A fuzz target's scratch db: opened once per process in a temporary dir
 * of its own (closed, and the dir removed, at exit), with the log quieted
 * to errors, for targets that put their input in a write txn of it and
 * drop the txn (tests/fuzz/fuzz_leasealarm.c, fuzz_authstore.c).
 */
#ifndef CETCD_TESTS_FUZZ_DB_H
#define CETCD_TESTS_FUZZ_DB_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log/log.h"
#include "shm_testlib.h"
#include "stored/btree/btree.h"

static struct btree_db *fuzz_db;

static inline void fuzz_db_close(void)
{
	btree_db_close(fuzz_db); /* then test_tmpdir's clean-up removes the dir */
}

/* The scratch db; aborts when it cannot be made. */
static inline struct btree_db *fuzz_scratch_db(void)
{
	static char dir[128];
	static char path[sizeof(dir) + 4];

	if (!fuzz_db) {
		struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
		test_tmpdir(dir, sizeof(dir));
		snprintf(path, sizeof(path), "%s/db", dir);
		if (btree_db_open(path, &o, &fuzz_db) != 0) {
			fprintf(stderr, "fuzz: cannot open the scratch db %s\n", path);
			abort();
		}
		atexit(fuzz_db_close);
		log_set_level(LOG_LEVEL_ERROR);
	}
	return fuzz_db;
}

/* One record of a target's input: a tag byte, a key length and a value
 * length (a byte each), then the key and the value, each cut short where
 * the input ends. */
struct fuzz_rec {
	uint8_t tag;
	const uint8_t *key, *val;
	size_t klen, vlen;
};

/* Takes the next record off *data and *size; false when fewer than 3
 * bytes are left. */
static inline bool fuzz_db_record(const uint8_t **data, size_t *size, struct fuzz_rec *r)
{
	const uint8_t *p = *data;
	size_t n = *size;

	if (n < 3)
		return false;
	r->tag = p[0];
	r->klen = p[1];
	r->vlen = p[2];
	p += 3;
	n -= 3;
	if (r->klen > n)
		r->klen = n;
	if (r->vlen > n - r->klen)
		r->vlen = n - r->klen;
	r->key = p;
	r->val = p + r->klen;
	*data = r->val + r->vlen;
	*size = n - r->klen - r->vlen;
	return true;
}

#endif
