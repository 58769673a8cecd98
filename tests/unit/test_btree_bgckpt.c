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

#include "test_btree_util.h"

static char dir[256];
static char path[300];

/* ---- a backend whose chain syncs fail after its writes landed: the
 * chain's writes reach the file, then chain_reap reports the fdatasync
 * that followed them as failed; synchronous writes go through plain ---- */

struct failing_io {
	struct diskio base;   /* first */
	struct diskio_write chain[DISKIO_CHAIN_MAX];
	size_t nchain;
	bool chain_pending;
	int chains;
	int synced_writes;    /* write_batch calls with a sync after a chain */
};

static int fio_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync)
{
	struct failing_io *f = (struct failing_io *)d;
	if (sync && f->chains > 0)
		f->synced_writes++;
	return diskio_plain_ops()->write_batch(d, w, n, sync);
}

static int fio_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n)
{
	struct failing_io *f = (struct failing_io *)d;
	if (f->chain_pending)
		return -EBUSY;
	memcpy(f->chain, w, n * sizeof(*w));
	f->nchain = n;
	f->chain_pending = true;
	f->chains++;
	return 0;
}

/* The first write of the chain lands in the file, then its sync fails. */
static int fio_chain_reap(struct diskio *d, bool wait, bool *done)
{
	struct failing_io *f = (struct failing_io *)d;
	(void)wait;
	*done = true;
	if (!f->chain_pending)
		return 0;
	f->chain_pending = false;
	int rc = diskio_pwrite_all(d->fd, f->chain[0].buf, f->chain[0].len, f->chain[0].off);
	return rc < 0 ? rc : -EIO;
}

/* The plain backend's ops but for its writes and chains (fio_open). */
static struct diskio_ops fio_ops;

static struct failing_io *last_fio;

static int fio_open(int fd, void *arg, struct diskio **out)
{
	(void)arg;
	if (!fio_ops.name) {
		fio_ops = *diskio_plain_ops();
		fio_ops.name = "failing-chain";
		fio_ops.concurrent_writes = false;
		fio_ops.write_batch = fio_write_batch;
		fio_ops.chain_submit = fio_chain_submit;
		fio_ops.chain_reap = fio_chain_reap;
	}
	struct failing_io *f = stored_calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.ops = &fio_ops;
	f->base.fd = fd;
	last_fio = f;
	*out = &f->base;
	return 0;
}

static int plain_open(int fd, void *arg, struct diskio **out)
{
	(void)arg;
	return diskio_plain_open(fd, out);
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
	struct btree_db *db = open_with_keys(plain_open, NULL, 300);
	bool started;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started && !btree_db_checkpoint_busy(db));
	check_durable_is_current(db);
	btree_db_close(db);
	T_CHECK(count_keys('a', 300) == 300);
}

/* A chain whose sync failed is never written again: the db is failed
 * for good, and the file keeps the last durable checkpoint. */
static void test_failed_chain(void)
{
	t_phase = "a chain whose sync fails";
	struct btree_db *db = open_with_keys(fio_open, NULL, 300);
	struct btree_root before, dur;
	btree_db_durable(db, &before);
	bool started, done;
	T_OK(btree_db_checkpoint_begin(db, &started));
	T_CHECK(started && btree_db_checkpoint_busy(db));
	T_RC(btree_db_checkpoint_poll(db, true, &done), -EIO);
	T_CHECK(done && !btree_db_checkpoint_busy(db));
	/* Nothing was written and synced again after the failure. */
	T_CHECK(last_fio->chains == 1 && last_fio->synced_writes == 0);
	btree_db_durable(db, &dur);
	T_CHECK(dur.txid == before.txid && dur.root_pgid == before.root_pgid);
	/* The db refuses further writes and checkpoints. */
	struct btree_txn *t;
	T_RC(btree_write_begin(db, &t), -EIO);
	T_RC(btree_db_checkpoint(db, NULL), -EIO);
	T_RC(btree_db_checkpoint_begin(db, &started), -EIO);
	T_CHECK(last_fio->chains == 1 && last_fio->synced_writes == 0);
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
