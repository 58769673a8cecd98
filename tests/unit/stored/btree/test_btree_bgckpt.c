/*
 * Checkpoints written in the background (btree_db_checkpoint_begin/poll):
 * write txns go on while one is written, only the state it began with
 * becomes durable, a second one is refused until it is reaped, a backend
 * without chains writes it at once, and a chain whose fdatasync failed is
 * never written again: it leaves the db failed for good.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "btree_util.h"

static char dir[256];
static char path[300];

/* ---- the fault backend: chains run when reaped (after the commits
 * written meanwhile), or no chains at all (arg NULL) ---- */

static struct diskio *last_io;

static int fault_open(int fd, void *arg, struct diskio **out)
{
	struct diskio_fault_opts fo = diskio_fault_defaults();
	fo.chain = arg ? DISKIO_FAULT_CHAIN_AT_REAP : DISKIO_FAULT_CHAIN_NONE;
	int rc = diskio_fault_open(fd, &fo, out);
	if (rc == 0)
		last_io = *out;
	return rc;
}

/* ---- helpers ---- */

static struct btree_db_opts opts(void)
{
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };
	return o;
}

/* One write txn putting n keys "<tag>-<i>" with 64-byte values into
 * bucket "b". */
static void commit_keys(struct btree_db *db, char tag, int n)
{
	T_OK(t_put_tagged(db, tag, n, 64, false));
}

/* How many of the n keys of tag the file holds (0 or n expected). */
static int count_keys(char tag, int n)
{
	struct btree_db *db;
	struct btree_db_opts o = opts();
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_db_check(db));
	int found = t_count_tagged(db, tag, n, 64);
	btree_db_close(db);
	return found;
}

/* ---- tests ---- */

static void test_background(void)
{
	t_phase = "background checkpoint (default backend)";
	unlink(path);
	struct btree_db *db;
	struct btree_db_opts o = opts();
	T_OK(btree_db_open(path, &o, &db));
	commit_keys(db, 'a', 2000);
	struct btree_root before, cur, dur;
	btree_db_durable(db, &before);

	bool started = false;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started);
	btree_db_current(db, &cur);  /* what this checkpoint makes durable */
	if (btree_db_checkpoint_busy(db)) {
		/* One at a time. */
		bool again;
		T_RC(btree_db_checkpoint_begin(db, &again), -EBUSY);
		/* The durable state moves only once it is reaped. */
		btree_db_durable(db, &dur);
		T_CHECK(dur.txid == before.txid && dur.root_pgid == before.root_pgid);
	} else {
		printf("no background chain here: the checkpoint was written at once\n");
	}
	/* Writes go on while it is written. */
	commit_keys(db, 'b', 2000);
	bool done = false;
	T_OK(btree_db_checkpoint_poll(db, true, &done));
	T_CHECK(done && !btree_db_checkpoint_busy(db));
	btree_db_durable(db, &dur);
	T_CHECK(dur.txid == cur.txid && dur.root_pgid == cur.root_pgid &&
		dur.hwm_pgid == cur.hwm_pgid);
	/* Nothing in flight: polling again is a no-op. */
	T_OK(btree_db_checkpoint_poll(db, false, &done));
	T_CHECK(done);
	/* Closed without another checkpoint: 'b' is lost, 'a' is durable. */
	btree_db_close(db);
	T_CHECK(count_keys('a', 2000) == 2000);
	T_CHECK(count_keys('b', 2000) == 0);

	/* A synchronous checkpoint waits for the one being written, then
	 * covers everything committed. */
	T_OK(btree_db_open(path, &o, &db));
	commit_keys(db, 'c', 500);
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started);
	commit_keys(db, 'd', 500);
	T_OK(btree_db_checkpoint(db, NULL));
	T_CHECK(!btree_db_checkpoint_busy(db));
	btree_db_current(db, &cur);
	btree_db_durable(db, &dur);
	T_CHECK(dur.txid == cur.txid && dur.root_pgid == cur.root_pgid);
	/* Nothing new: begin starts nothing. */
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(!started && !btree_db_checkpoint_busy(db));
	/* A checkpoint still being written at close is waited for. */
	commit_keys(db, 'e', 500);
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started);
	btree_db_close(db);
	T_CHECK(count_keys('c', 500) == 500);
	T_CHECK(count_keys('d', 500) == 500);
	T_CHECK(count_keys('e', 500) == 500);
}

/* A fresh file through the backend io_open (arg), with n 'a' keys
 * committed and not yet checkpointed. */
static struct btree_db *open_with_keys(int (*io_open)(int, void *, struct diskio **), void *arg,
				       int n)
{
	struct btree_db *db;
	struct btree_db_opts o = opts();
	unlink(path);
	o.io_open = io_open;
	o.io_open_arg = arg;
	T_OK(btree_db_open(path, &o, &db));
	commit_keys(db, 'a', n);
	return db;
}

static void check_durable_is_current(struct btree_db *db)
{
	struct btree_root cur, dur;
	btree_db_current(db, &cur);
	btree_db_durable(db, &dur);
	T_CHECK(dur.txid == cur.txid && dur.root_pgid == cur.root_pgid &&
		dur.hwm_pgid == cur.hwm_pgid);
}

static void test_no_chain(void)
{
	t_phase = "backend without chains";
	struct btree_db *db = open_with_keys(fault_open, NULL, 300);
	bool started;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started && !btree_db_checkpoint_busy(db));
	check_durable_is_current(db);
	btree_db_close(db);
	T_CHECK(count_keys('a', 300) == 300);
}

/* A chain whose sync fails after its writes landed is never written
 * again: the db is failed for good, and the file keeps the last durable
 * checkpoint (the failed sync dropped the commit's pages, as the kernel
 * may). */
static void test_failed_chain(void)
{
	t_phase = "a chain whose sync fails";
	struct btree_db *db = open_with_keys(fault_open, (void *)1, 300);
	struct btree_root before, dur;
	btree_db_durable(db, &before);
	diskio_fault_fail_sync_after(last_io, 0);
	bool started, done;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started && btree_db_checkpoint_busy(db));
	T_RC(btree_db_checkpoint_poll(db, true, &done), -EIO);
	T_CHECK(done && !btree_db_checkpoint_busy(db));
	T_CHECK(diskio_failed(last_io) == -EIO);
	btree_db_durable(db, &dur);
	T_CHECK(dur.txid == before.txid && dur.root_pgid == before.root_pgid);
	/* Nothing reaches the file after the failure: the db refuses
	 * further writes and checkpoints. */
	long ops = diskio_fault_ops(last_io);
	struct btree_txn *t;
	T_RC(btree_write_begin(db, &t), -EIO);
	T_RC(btree_db_checkpoint(db, NULL), -EIO);
	T_RC(btree_db_checkpoint_begin(db, &started), -EIO);
	T_CHECK(diskio_fault_ops(last_io) == ops);
	btree_db_close(db);
	/* Reopened: the checkpoint before the failure, without the keys. */
	T_CHECK(count_keys('a', 300) == 0);
}

int main(void)
{
	t_set_seed(t_pick_seed());
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/db", dir);
	test_background();
	test_no_chain();
	test_failed_chain();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_btree_bgckpt: ok\n");
	return 0;
}
