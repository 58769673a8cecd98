/*
 * A fuzz target's scratch db: opened once per process in a temporary dir
 * of its own (closed, and the dir removed, at exit), with the log quieted
 * to errors, for targets that put their input in a write txn of it and
 * drop the txn (tests/fuzz/fuzz_leasealarm.c, fuzz_authstore.c).
 */
#ifndef CETCD_TESTS_FUZZ_DB_H
#define CETCD_TESTS_FUZZ_DB_H

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

#endif
