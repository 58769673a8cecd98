/*
 * stored's apply loop when the disk that holds the db is full, or fails
 * a checkpoint's sync in the background. The db
 * goes through the fault backend (base/diskio/diskio.h) armed by a trigger
 * file: while the file exists, every write and every allocate of the db
 * fails with ENOSPC, as a full file system refuses them; removing it
 * gives the space back. One process plays raftd (pushing committed puts,
 * and again after each restart from stored's durable index, as raftd does
 * on a new epoch), stored (the loop) and a gateway (reading answers).
 *
 * - a batch whose pages find no space fails the turn with -ENOSPC and a
 *   log line that names the db and says to free space; nothing of the
 *   batch is answered, the db is not failed (nothing was lost: the pages
 *   were refused), and the root published before stays readable with
 *   every acknowledged put
 * - a stored started while the disk is still full fails the same way
 *   (at the checkpoint that ends its open, or at its first batch), with
 *   the same line, losing nothing; readers keep the root published before
 * - once space is back, a new stored replays from the durable index and
 *   every put, acknowledged or not, is applied exactly once at its
 *   revision; the db's tree passes the check
 * - a checkpoint that finds no space fails the turn and the db (its
 *   freelist state is half taken), withdraws the root, and a restart with
 *   space back recovers every acknowledged put
 * - a checkpoint whose fdatasync fails in the background, dropping the
 *   pages of the commits since the last one (or only its meta page)
 *   before the loop reaps the failure: the turn that finds it answers
 *   nothing of its batch, whether the batch failed on the dropped pages
 *   or applied on good ones; it withdraws the root and names the failed
 *   checkpoint rather than a corrupt file; a restart recovers every put
 * - a received snapshot db that cannot be prepared for want of space
 *   fails the turn with the retry message, leaves the member's db and
 *   published root as they were and no copy behind, and installs once
 *   raftd sends it again with space back
 * - the status record's db_no_space (what gateways refuse new writes
 *   on): set by a batch, a checkpoint or an install that finds no room
 *   (not by a failed sync), with one line per episode; a stored restarted
 *   during it keeps it while raftd has entries for it to apply, logging
 *   no second line, and clears it (with a line) when a batch commits or a
 *   received db is installed; one restarted with nothing to apply clears
 *   it at its open, as nothing else would
 */
#include <fcntl.h>

#include "stored_util.h"

#include "raftpb/raft.pb-c.h"
#include "base/diskio/diskio.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "stored/alloc.h"
#include "stored/loop.h"
#include "stored/mvcc/mvcc.h"

#define PUTS 400u

/* One member with stored's loop on the fault backend. */
struct member {
	struct tst_loop e;
	struct diskio_fault_opts fault;
	char trigger[400];
	char db_path[400];
	char log_path[400];
	struct tbuf d;
	uint64_t rid;
	bool acked[PUTS + 1];
	uint64_t nacked;
};

static void disk_full(struct member *mb, bool full)
{
	if (full) {
		int fd = open(mb->trigger, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		CHECK(fd >= 0);
		close(fd);
	} else {
		CHECK_EQ(unlink(mb->trigger), 0);
	}
}

/* Opens stored's loop as a (re)started stored does; its log goes to
 * log_path. Returns stored_loop_open's code. */
static int member_open(struct member *mb)
{
	int fd = open(mb->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	log_set_fd(fd);
	int rc = stored_loop_open(mb->e.st, &mb->e.o, &mb->e.l);
	log_set_fd(2);
	close(fd);
	return rc;
}

static void member_init(struct member *mb)
{
	memset(mb, 0, sizeof(*mb));
	tst_loop_init(&mb->e, 16);
	snprintf(mb->trigger, sizeof(mb->trigger), "%s/disk-full", mb->e.m.dir);
	snprintf(mb->db_path, sizeof(mb->db_path), "%s/member/snap/db", mb->e.m.data_dir);
	snprintf(mb->log_path, sizeof(mb->log_path), "%s/stored.log", mb->e.m.dir);
	mb->fault = diskio_fault_defaults();
	mb->fault.fail_write_at = 0;
	mb->fault.fail_allocate_at = 0;
	mb->fault.fail_repeat = true;
	mb->fault.fail_errno = ENOSPC;
	mb->fault.trigger_path = mb->trigger;
	mb->fault.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	mb->e.o.io_open = diskio_fault_open_arg;
	mb->e.o.io_open_arg = &mb->fault;
	CHECK_EQ(member_open(mb), 0);
}

static void member_fini(struct member *mb)
{
	tbuf_free(&mb->d);
	unlink(mb->log_path);
	unlink(mb->trigger);
	tst_loop_fini(&mb->e);
}

static struct status_stored member_status(struct member *mb)
{
	return tst_status(mb->e.gw);
}

/* raftd's record: entries up to commit are committed. */
static void member_raftd_commit(struct member *mb, uint64_t commit)
{
	struct status_raftd rs = { .leader_id = 1, .term = 2, .commit_index = commit,
				   .is_leader = true };
	status_raftd_write(mb->e.rf, &rs);
}

/* How many times text is in stored's last log. */
static int member_log_count(struct member *mb, const char *text)
{
	static char buf[1 << 16];
	ssize_t n, got = 0;
	int fd = open(mb->log_path, O_RDONLY | O_CLOEXEC), count = 0;

	CHECK(fd >= 0);
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	for (const char *p = buf; (p = strstr(p, text)); p++)
		count++;
	return count;
}

#define NO_SPACE_LINE "\"msg\":\"the db is out of space: gateways refuse new writes"
#define SPACE_BACK_LINE "\"msg\":\"the db has space again: gateways take new writes"

/* Commits put i (key k<i> = v<i>) at index i, as raftd hands it over. */
static void member_put(struct member *mb, uint64_t i)
{
	char key[16], val[16];
	struct msg_origin o = tst_origin(mb->e.slot.index, mb->e.slot.generation, ++mb->rid);

	snprintf(key, sizeof(key), "k%04llu", (unsigned long long)i);
	snprintf(val, sizeof(val), "v%llu", (unsigned long long)i);
	tst_put(key, val, &o, &mb->d);
	CHECK_EQ(tst_commit(mb->e.committed, i, 2, RAFTPB__ENTRY_TYPE__EntryNormal, mb->d.p,
			    mb->d.len), 0);
}

/* Takes the answers waiting; marks the puts they acknowledge. Each put
 * is answered with the revision it was applied at (index + 1). */
static void member_drain(struct member *mb)
{
	struct tst_result r = { 0 };

	while (tst_take_result(mb->e.results, &r) == 0) {
		CHECK_EQ(r.h.status, 0);
		CHECK(r.h.index >= 1 && r.h.index <= PUTS);
		CHECK_EQ(r.h.revision, r.h.index + 1);
		if (!mb->acked[r.h.index])
			mb->nacked++;
		mb->acked[r.h.index] = true;
	}
	tbuf_free(&r.body);
}

/* Pushes puts from..to (a few at a time) and turns the loop, until all
 * are applied or a turn fails; returns the turn's code. */
static int member_apply(struct member *mb, uint64_t from, uint64_t to)
{
	uint64_t i = from;
	int rc = 0;

	while (rc == 0) {
		for (int k = 0; k < 8 && i <= to; k++, i++)
			member_put(mb, i);
		rc = stored_loop_turn(mb->e.l, NULL);
		member_drain(mb);
		struct stored_loop_stats s;
		stored_loop_stats(mb->e.l, &s);
		if (i > to && s.applied_index >= to && !ring_has_data(mb->e.committed))
			break;
	}
	return rc;
}

/* Reads the published root: each acknowledged put is there with its
 * value and mod revision, and nothing else but puts 1..upto. Returns how
 * many keys there are. */
static size_t member_check(struct member *mb, uint64_t upto)
{
	struct status_stored st = member_status(mb);
	struct tst_view w;
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest all = ETCDSERVERPB__RANGE_REQUEST__INIT;
	static bool found[PUTS + 1];

	CHECK(st.root_page != 0);
	all.key = tb("k");
	all.range_end = tb("l");
	tst_view_open(&w, mb->db_path, &st);
	mvcc_range_result_init(&res);
	CHECK_EQ(mvcc_range(&w.v, &all, &res), 0);
	memset(found, 0, sizeof(found));
	for (size_t k = 0; k < res.n; k++) {
		const struct mvcc_kv *kv = &res.kvs[k].f;
		CHECK(kv->key_len == 5);
		CHECK_EQ(kv->version, 1);
		found[tst_put_number(kv, upto)] = true;
	}
	for (uint64_t i = 1; i <= PUTS; i++)
		CHECK(!mb->acked[i] || found[i]);
	size_t n = res.n;
	mvcc_range_result_free(&res);
	tst_view_close(&w);
	return n;
}

/* Whether stored's last log holds text. */
static bool member_log_has(struct member *mb, const char *text, bool show)
{
	static char buf[1 << 16];
	ssize_t n, got = 0;
	int fd = open(mb->log_path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	while ((n = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	close(fd);
	buf[got] = '\0';
	if (strstr(buf, text))
		return true;
	if (show)
		printf("stored's log has no \"%s\":\n%s", text, buf);
	return false;
}

/* The same, showing the log when it does not. */
static bool member_logged(struct member *mb, const char *text)
{
	return member_log_has(mb, text, true);
}

/* One turn with the log going to log_path (appended). */
static int member_turn_logged(struct member *mb)
{
	int fd = open(mb->log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	log_set_fd(fd);
	int rc = stored_loop_turn(mb->e.l, NULL);
	log_set_fd(2);
	close(fd);
	member_drain(mb);
	return rc;
}

/* stored dies (the process ends without a last checkpoint) and a new one
 * starts. Returns the open's code (the loop is NULL on failure). */
static int member_restart(struct member *mb)
{
	stored_loop_free(mb->e.l);
	mb->e.l = NULL;
	ring_consumer_takeover(mb->e.committed); /* what the dead one consumed comes again */
	return member_open(mb);
}

/* raftd's replay after a new epoch: everything from the durable index
 * on, after whatever the ring still holds. */
static int member_replay(struct member *mb, uint64_t last)
{
	struct status_stored st = member_status(mb);
	return member_apply(mb, st.durable_index + 1, last);
}

/* ---- a batch finds no space ---- */

static void test_batch_full(void)
{
	struct member mb;
	struct status_stored before, st;
	int rc;

	member_init(&mb);
	CHECK_EQ(member_apply(&mb, 1, 100), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	CHECK_EQ(member_apply(&mb, 101, 200), 0);
	CHECK_EQ(mb.nacked, 200u);
	before = member_status(&mb);
	CHECK_EQ(before.durable_index, 100u);
	CHECK_EQ(before.applied_index, 200u);
	CHECK(!before.db_no_space);

	/* The disk fills up: the next batch's pages are refused. */
	disk_full(&mb, true);
	for (uint64_t i = 201; i <= 240; i++)
		member_put(&mb, i);
	member_raftd_commit(&mb, 240);
	rc = member_turn_logged(&mb);
	printf("batch on a full disk: %s\n", errmsg_get(rc));
	CHECK_EQ(rc, -ENOSPC);
	CHECK(strstr(errmsg_get(rc), mb.db_path) != NULL);
	CHECK(member_logged(&mb, mb.db_path));
	CHECK(member_logged(&mb, "free space on the disk that holds it"));
	CHECK_EQ(mb.nacked, 200u);
	/* The pages were refused, not lost: the root published before stays
	 * offered to readers, with every acknowledged put. */
	st = member_status(&mb);
	CHECK_EQ(st.root_page, before.root_page);
	CHECK_EQ(st.applied_index, 200u);
	CHECK_EQ(member_check(&mb, 200), 200u);
	/* Gateways are told, once, with a line that names the db. */
	CHECK(st.db_no_space);
	CHECK_EQ(member_log_count(&mb, NO_SPACE_LINE), 1);

	/* A new stored on the still full disk fails the same way, at its
	 * open or its first batch. Readers keep the old root meanwhile. */
	rc = member_restart(&mb);
	if (rc == 0) {
		/* raftd has entries for it: the flag stays until they apply */
		CHECK(member_status(&mb).db_no_space);
		rc = member_replay(&mb, 240);
		CHECK_EQ(rc, -ENOSPC);
	}
	printf("restart on a full disk: %s\n", rc ? errmsg_get(rc) : "ok");
	CHECK(rc == -ENOSPC);
	CHECK(member_logged(&mb, "free space on the disk that holds it"));
	st = member_status(&mb);
	CHECK_EQ(st.root_page, before.root_page);
	CHECK_EQ(member_check(&mb, 200), 200u);
	/* The same episode: still set, and no second line. */
	CHECK(st.db_no_space);
	CHECK_EQ(member_log_count(&mb, NO_SPACE_LINE), 0);
	CHECK_EQ(member_log_count(&mb, SPACE_BACK_LINE), 0);

	/* Space is back: the next stored replays from the durable index;
	 * every put is applied once, at its revision. */
	disk_full(&mb, false);
	CHECK_EQ(member_restart(&mb), 0);
	CHECK(member_status(&mb).db_no_space);
	CHECK_EQ(member_log_count(&mb, SPACE_BACK_LINE), 0);
	{
		int fd = open(mb.log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
		CHECK(fd >= 0);
		log_set_fd(fd);
		CHECK_EQ(member_replay(&mb, 240), 0);
		log_set_fd(2);
		close(fd);
	}
	CHECK(!member_status(&mb).db_no_space);
	CHECK_EQ(member_log_count(&mb, SPACE_BACK_LINE), 1);
	CHECK(member_logged(&mb, "\"reason\":\"a batch committed\""));
	CHECK_EQ(member_log_count(&mb, NO_SPACE_LINE), 0);
	CHECK_EQ(member_apply(&mb, 241, 260), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	st = member_status(&mb);
	CHECK_EQ(st.applied_index, 260u);
	CHECK_EQ(st.durable_index, 260u);
	CHECK_EQ(member_check(&mb, 260), 260u);
	CHECK_EQ(mb.nacked, 260u);
	stored_loop_free(mb.e.l);
	mb.e.l = NULL;
	struct btree_db *db;
	CHECK_EQ(btree_db_open(mb.db_path, NULL, &db), 0);
	CHECK_EQ(btree_db_check(db), 0);
	btree_db_close(db);
	member_fini(&mb);
}

/* ---- a checkpoint finds no space ---- */

static void test_checkpoint_full(void)
{
	struct member mb;
	struct status_stored st;
	int rc;

	member_init(&mb);
	CHECK_EQ(member_apply(&mb, 1, 50), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	CHECK_EQ(member_apply(&mb, 51, 150), 0);
	disk_full(&mb, true);
	int fd = open(mb.log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	log_set_fd(fd);
	rc = stored_loop_checkpoint(mb.e.l);
	log_set_fd(2);
	close(fd);
	printf("checkpoint on a full disk: %s\n", errmsg_get(rc));
	CHECK_EQ(rc, -ENOSPC);
	CHECK(member_logged(&mb, mb.db_path));
	CHECK(member_logged(&mb, "free space on the disk that holds it"));
	st = member_status(&mb);
	CHECK_EQ(st.durable_index, 50u);
	CHECK_EQ(st.applied_index, 150u);
	CHECK_EQ(st.root_page, 0); /* the failed db's pages may be lost */
	CHECK(st.db_no_space);
	CHECK(member_logged(&mb, NO_SPACE_LINE));

	disk_full(&mb, false);
	member_raftd_commit(&mb, 150);
	CHECK_EQ(member_restart(&mb), 0);
	CHECK(member_status(&mb).db_no_space);
	CHECK_EQ(member_replay(&mb, 150), 0);
	CHECK(!member_status(&mb).db_no_space);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	CHECK_EQ(member_status(&mb).durable_index, 150u);
	CHECK_EQ(member_check(&mb, 150), 150u);
	CHECK_EQ(mb.nacked, 150u);
	member_fini(&mb);
}

/* ---- a checkpoint's sync fails in the background ---- */

/* The checkpoint's sync number sync_at (0: the one that makes the pages
 * of the commits since the last one durable, 1: the one after its meta
 * page) fails; path says which way the loop must find it. */
static void test_background_sync(long sync_at, const char *path)
{
	struct member mb;
	struct status_stored st;
	uint64_t i, acked;
	int rc = 0;

	member_init(&mb);
	/* The db's next sync fails once the trigger exists, in a checkpoint
	 * that the loop starts by itself every 8 entries; the chain runs as
	 * it is submitted, so the pages it drops are gone before the loop
	 * reaps its result. */
	mb.fault = diskio_fault_defaults();
	mb.fault.fail_sync_at = sync_at;
	mb.fault.trigger_path = mb.trigger;
	mb.fault.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	mb.e.o.checkpoint_entries = 8;
	CHECK_EQ(member_restart(&mb), 0);
	CHECK_EQ(member_apply(&mb, 1, 100), 0);
	CHECK(member_status(&mb).durable_index >= 40);
	disk_full(&mb, true); /* here: arms the failing sync */

	int fd = open(mb.log_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	log_set_fd(fd);
	for (i = 101; i <= PUTS && rc == 0;) {
		for (int k = 0; k < 8; k++, i++)
			member_put(&mb, i);
		acked = mb.nacked;
		rc = stored_loop_turn(mb.e.l, NULL);
		member_drain(&mb);
	}
	log_set_fd(2);
	close(fd);
	printf("background checkpoint sync %ld failed: %s\n", sync_at, errmsg_get(rc));
	CHECK_EQ(rc, -EIO);
	CHECK(access(mb.trigger, F_OK) != 0);
	/* The turn that found the failure answered nothing, whatever its batch
	 * read; the log names the failed checkpoint, not a corrupt file. */
	CHECK_EQ(mb.nacked, acked);
	CHECK(member_logged(&mb, path));
	CHECK(member_logged(&mb, "checkpoint failed; restart stored to recover from the last one"));
	CHECK(!strstr(errmsg_get(rc), "restore from a snapshot"));
	st = member_status(&mb);
	CHECK_EQ(st.root_page, 0);
	CHECK(!st.db_no_space); /* a failed sync is not a full disk */
	CHECK(!member_log_has(&mb, NO_SPACE_LINE, false));
	uint64_t last = i - 1;

	/* The next stored replays from the durable checkpoint. */
	CHECK_EQ(member_restart(&mb), 0);
	CHECK_EQ(member_replay(&mb, last), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	CHECK_EQ(member_status(&mb).applied_index, last);
	CHECK_EQ(member_check(&mb, last), last);
	CHECK_EQ(mb.nacked, last);
	member_fini(&mb);
}

/* ---- a received snapshot db finds no space ---- */

static void test_install_full(void)
{
	struct member src, mb;
	char snap[600], installing[600];
	struct status_stored before, st;
	struct stored_loop_stats s;
	int rc;

	/* The leader's db at index 300, as raftd receives it. */
	member_init(&src);
	CHECK_EQ(member_apply(&src, 1, 300), 0);
	CHECK_EQ(stored_loop_checkpoint(src.e.l), 0);
	stored_loop_free(src.e.l);
	src.e.l = NULL;
	member_init(&mb);
	snprintf(snap, sizeof(snap), "%s/received.db", mb.e.m.dir);
	snprintf(installing, sizeof(installing), "%s.installing", mb.db_path);
	{
		int in = open(src.db_path, O_RDONLY | O_CLOEXEC);
		int out = open(snap, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		char buf[65536];
		ssize_t n;
		CHECK(in >= 0 && out >= 0);
		while ((n = read(in, buf, sizeof(buf))) > 0)
			CHECK_EQ(write(out, buf, (size_t)n), n);
		CHECK_EQ(n, 0);
		close(in);
		close(out);
	}
	member_fini(&src);

	/* This member is behind: 20 puts, then the snapshot. */
	CHECK_EQ(member_apply(&mb, 1, 20), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	before = member_status(&mb);
	disk_full(&mb, true);
	CHECK_EQ(tst_install(mb.e.committed, 300, 2, snap), 0);
	rc = member_turn_logged(&mb);
	printf("install on a full disk: %s\n", errmsg_get(rc));
	CHECK_EQ(rc, -ENOSPC);
	CHECK(member_logged(&mb, "no space left to prepare the received snapshot db"));
	CHECK(member_logged(&mb, installing));
	CHECK(access(installing, F_OK) != 0);
	stored_loop_stats(mb.e.l, &s);
	CHECK_EQ(s.installs, 0u);
	CHECK_EQ(s.installs_refused, 0u);
	st = member_status(&mb);
	CHECK_EQ(st.root_page, before.root_page);
	CHECK_EQ(st.db_generation, before.db_generation);
	CHECK_EQ(member_check(&mb, 20), 20u);
	CHECK(st.db_no_space);
	CHECK(member_logged(&mb, NO_SPACE_LINE));

	/* Space is back; raftd sends the install again to the new stored. */
	disk_full(&mb, false);
	member_raftd_commit(&mb, 300);
	CHECK_EQ(member_restart(&mb), 0);
	CHECK(member_status(&mb).db_no_space);
	CHECK_EQ(tst_install(mb.e.committed, 300, 2, snap), 0);
	CHECK_EQ(member_turn_logged(&mb), 0);
	CHECK(!member_status(&mb).db_no_space);
	CHECK(member_logged(&mb, "\"reason\":\"a received db was installed\""));
	stored_loop_stats(mb.e.l, &s);
	CHECK_EQ(s.installs, 1u);
	CHECK_EQ(s.applied_index, 300u);
	CHECK_EQ(member_apply(&mb, 301, 310), 0);
	CHECK_EQ(member_check(&mb, 310), 310u);
	unlink(snap);
	member_fini(&mb);
}

/* ---- a stored restarted during an episode with nothing to apply ---- */

/* The previous stored left db_no_space set (it died on a full disk) and
 * space is back. With raftd committed no further than the db holds, no
 * batch would come to clear the flag (gateways refuse the writes that
 * would make one): the open clears it. With entries to apply, it stays
 * until they commit. */
static void test_idle_restart(void)
{
	struct member mb;
	struct status_stored st;

	member_init(&mb);
	CHECK_EQ(member_apply(&mb, 1, 30), 0);
	CHECK_EQ(stored_loop_checkpoint(mb.e.l), 0);
	st = member_status(&mb);
	st.db_no_space = true;
	status_stored_write(mb.e.st, &st); /* as the stored before left it */

	member_raftd_commit(&mb, 30);
	CHECK_EQ(member_restart(&mb), 0);
	CHECK(!member_status(&mb).db_no_space);
	CHECK(member_logged(&mb, SPACE_BACK_LINE));
	CHECK(member_logged(&mb, "nothing left to apply"));

	st = member_status(&mb);
	st.db_no_space = true;
	status_stored_write(mb.e.st, &st);
	member_raftd_commit(&mb, 31);
	CHECK_EQ(member_restart(&mb), 0);
	CHECK(member_status(&mb).db_no_space);
	CHECK_EQ(member_log_count(&mb, SPACE_BACK_LINE), 0);
	CHECK_EQ(member_apply(&mb, 31, 31), 0);
	CHECK(!member_status(&mb).db_no_space);
	CHECK_EQ(member_check(&mb, 31), 31u);
	member_fini(&mb);
}

int main(void)
{
	test_batch_full();
	test_idle_restart();
	test_checkpoint_full();
	/* the pages dropped: the next batch reads old bytes and fails */
	test_background_sync(0, "the batch read pages the failed checkpoint's sync may have dropped");
	/* only the meta page dropped: the next batch applies, and is dropped */
	test_background_sync(1, "dropped an applied batch");
	test_install_full();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_loop_enospc: ok\n");
	return 0;
}
