/*
 * Allocation failures: the Nth allocation of a write txn, its commit or a
 * checkpoint fails, for every N until the cycle gets through. A failed txn
 * refuses further use (-ECANCELED), its commit fails and changes nothing; a
 * failed checkpoint leaves the db refusing writes until reopened. After
 * each, the db passes its check and holds the expected state, and nothing
 * leaks.
 */
#include "btree_util.h"

static char dir[256];
static char path[300];

static struct btree_db *open_db(void)
{
	struct btree_db_opts o = { .create = true, .page_size = 1024, .map_size = 1ull << 30,
				   .io_open = NULL };
	struct btree_db *db;
	T_OK(btree_db_open(path, &o, &db));
	return db;
}

/* A fixed batch of changes (iteration it) against the db and a model copy;
 * returns the first error (after which the txn must refuse further use). */
static int workload(struct btree_txn *t, struct model *m, int it)
{
	struct btree_bucket *b, *n;
	int rc = btree_bucket_open(t, NULL, "key", 3, &b);
	if (rc < 0)
		return rc;
	static uint8_t val[3000];
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < 120; i++) {
		char k[16];
		int kl = snprintf(k, sizeof(k), "k%04d", (i * 31 + it * 17) % 900);
		size_t vl = i % 29 == 0 ? sizeof(val) : (size_t)(i % 50);
		if (i % 5 == 4) {
			rc = btree_del(b, k, (size_t)kl);
			if (rc == 0 || rc == -ENOENT) {
				T_CHECK(m_del(m, 1, k, (size_t)kl) == rc);
				rc = 0;
			}
		} else {
			rc = btree_put(b, k, (size_t)kl, val, vl);
			if (rc == 0)
				m_put(m, 1, k, (size_t)kl, val, vl);
		}
		if (rc < 0)
			return rc;
	}
	char name[16];
	int nl = snprintf(name, sizeof(name), "n%d", it % 3);
	rc = btree_bucket_create(t, b, name, (size_t)nl, &n);
	if (rc == -EEXIST) {
		rc = btree_bucket_delete(t, b, name, (size_t)nl);
		if (rc == 0)
			m_drop(m, 1, name, (size_t)nl);
		return rc;
	}
	if (rc < 0)
		return rc;
	int child = m_create(m, 1, name, (size_t)nl);
	for (int i = 0; i < 30 && rc == 0; i++) {
		char k[16];
		int kl = snprintf(k, sizeof(k), "c%03d", i);
		rc = btree_put(n, k, (size_t)kl, val, 40);
		if (rc == 0)
			m_put(m, child, k, (size_t)kl, val, 40);
	}
	return rc;
}

int main(void)
{
	t_set_seed(0);
	t_phase = "nomem";
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);

	struct model committed, durable;
	m_init(&committed);
	struct btree_db *db = open_db();
	struct btree_txn *t;
	struct btree_bucket *b;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, "key", 3, &b));
	m_create(&committed, 0, "key", 3);
	T_OK(btree_commit(t, NULL));
	T_OK(btree_db_checkpoint(db, NULL));
	m_clone(&durable, &committed);

	unsigned failed_txns = 0, failed_checkpoints = 0, ok_cycles = 0;
	for (long n = 0; ok_cycles < 3; n++) {
		t_step = (uint64_t)n;
		int it = (int)n;
		struct model work;
		m_clone(&work, &committed);
		stored_alloc_fail_after(n);
		int rc = btree_write_begin(db, &t);
		if (rc == 0) {
			rc = workload(t, &work, it);
			if (rc < 0) {
				T_RC(rc, -ENOMEM);
				/* The txn refuses further use. */
				T_RC(btree_put(b = btree_txn_root(t), "x", 1, "y", 1),
				     -ECANCELED);
				T_RC(btree_commit(t, NULL), -ECANCELED);
			} else {
				rc = btree_commit(t, NULL);
			}
		}
		if (rc == 0) {
			m_free(&committed);
			committed = work;
			rc = btree_db_checkpoint(db, NULL);
			stored_alloc_fail_after(-1);
			if (rc == 0) {
				m_free(&durable);
				m_clone(&durable, &committed);
				ok_cycles++;
			} else {
				T_RC(rc, -ENOMEM);
				failed_checkpoints++;
				T_RC(btree_write_begin(db, &t), -EIO);
				btree_db_close(db);
				db = open_db();
				m_free(&committed);
				m_clone(&committed, &durable);
			}
		} else {
			stored_alloc_fail_after(-1);
			T_RC(rc, -ENOMEM);
			m_free(&work);
			failed_txns++;
		}
		T_OK(btree_db_check(db));
		m_compare_db(db, &committed);
	}
	btree_db_close(db);
	db = open_db();
	T_OK(btree_db_check(db));
	m_compare_db(db, &durable);
	btree_db_close(db);
	m_free(&committed);
	m_free(&durable);
	t_rmdir(dir);
	t_no_leaks();
	T_CHECK(failed_txns > 50);
	printf("test_btree_nomem: ok (%u failed txns, %u failed checkpoints, then %u clean cycles)\n",
	       failed_txns, failed_checkpoints, ok_cycles);
	return 0;
}
