/*
 * stored installs a db received from the leader (MSG_SNAPSHOT_INSTALL).
 *
 * Two members run stored as forked children (the loop as stored/main.c
 * runs it); this process plays raftd for both. Member S, the "leader",
 * applies a stream of puts; at index 1000k this process takes a copy of
 * S's db through dbsnap (as raftd streams it to a follower) into
 * snap.k.db. Member T first applies puts of its own, then gets, round by
 * round, MSG_SNAPSHOT_INSTALL of snap.k.db at index 1000k followed by
 * five puts after it, and the entries just below the snapshot again
 * (duplicates to skip). After each round T's published root must hold
 * exactly S's keys at 1000k plus the round's puts, at S's revision plus
 * five, with a new db generation and a txid above every one published
 * before. From the second round on, T's stored is SIGKILLed at a random
 * moment of the install and started again; as raftd does on a new epoch,
 * the install is sent again while T's durable index is below it.
 *
 * Meanwhile a read txn registered on T's old file before the first
 * install must still read that file's keys after it. A resent install at
 * or below the applied index is skipped; a file that is not a db, one
 * with corrupt meta pages, and one whose consistent index is below the
 * snapshot's are refused (an error line; nothing changes and stored
 * lives). Each of those waits for stored's own log line saying it skipped
 * or refused that install before it looks at the state.
 *
 * Then a new member installs two copies under a read txn held on its
 * file: the file the second replaced is given back to the file system a
 * step at a time once the txn ends, and not before (release_phase). And
 * one whose reader leaves while stored is stopped, just before a second
 * install that stored takes before anything else: that file too is given
 * back a step at a time, not freed at once by the loop's close
 * (release_between).
 *
 * stored's log lines go to stored.log in each member's directory; a
 * failed run prints them. STORED_SEED=n replays a seed.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#include "stored_util.h"

#include "base/clock/clock.h"
#include "raftpb/raft.pb-c.h"
#include "shm/doorbell.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "shm/readers.h"
#include "stored/btree/dbsnap.h"
#include "stored/loop.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/revision.h"

#define ROUNDS 6
#define ROUND_ENTRIES 1000u
#define POSTS 5u

static uint64_t seed;

/* The logs of the members started so far, printed if the test fails. */
#define MAX_LOGS 8
static char log_paths[MAX_LOGS][640];
static unsigned nlogs;
static bool passed;
static pid_t test_pid;

struct member {
	struct tst_member m;
	struct shm_region *rf, *gw;
	struct shm_slot_ref slot;
	struct ring *committed;
	char db_path[600];
	char log_path[640];         /* stored's lines, info and up */
	pid_t child;
};

/* The stored process: its lines go to the member's log file. */
static void child_main(struct member *mb)
{
	struct stored_loop_opts o = {
		.data_dir = mb->m.data_dir, .member_id = TST_MEMBER, .cluster_id = TST_CLUSTER,
		.map_size = 1ull << 30, .batch_entries = 64,
	};
	int fd = open(mb->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (fd < 0)
		test_child_exit(6);
	log_set_fd(fd);
	tst_stored_child(mb->m.region_path, &o, LOG_LEVEL_INFO);
}

/* Lines of the member's log that hold both msg (as the "msg" field) and
 * field (NULL: any). */
static unsigned log_lines(const struct member *mb, const char *msg, const char *field)
{
	char want[512], *line = NULL;
	size_t cap = 0;
	unsigned n = 0;
	FILE *f = fopen(mb->log_path, "r");

	if (!f)
		return 0;
	snprintf(want, sizeof(want), "\"msg\":\"%s\"", msg);
	while (getline(&line, &cap, f) > 0)
		if (strstr(line, want) && (!field || strstr(line, field)))
			n++;
	free(line);
	fclose(f);
	return n;
}

/* On a failed check: what the stored processes logged. Runs before the
 * scratch directory is removed (registered after it). */
static void print_logs(void)
{
	char line[4096];

	if (passed || getpid() != test_pid)
		return;
	for (unsigned i = 0; i < nlogs; i++) {
		FILE *f = fopen(log_paths[i], "r");
		if (!f)
			continue;
		fprintf(stderr, "---- %s\n", log_paths[i]);
		while (fgets(line, sizeof(line), f))
			fputs(line, stderr);
		fclose(f);
	}
}

static void member_start(struct member *mb)
{
	mb->child = test_fork();
	CHECK(mb->child >= 0);
	if (mb->child == 0)
		child_main(mb);
}

static struct status_stored member_status(struct member *mb)
{
	return tst_status(mb->gw);
}

/* Detaches this process's handles of a stopped member. Its files go with
 * the scratch directory. */
static void member_fini(struct member *mb)
{
	shm_region_detach(mb->gw);
	shm_region_detach(mb->rf);
	shm_region_detach(mb->m.launcher);
}

static void member_init(struct member *mb)
{
	memset(mb, 0, sizeof(*mb));
	tst_member_init(&mb->m, 64 * 1024);
	mb->rf = tst_attach(&mb->m);
	mb->gw = tst_attach(&mb->m);
	CHECK_EQ(shm_role_claim(mb->rf, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_slot_claim(mb->gw, &mb->slot), 0);
	mb->committed = shm_daemon_ring(mb->rf, SHM_RING_COMMITTED);
	snprintf(mb->db_path, sizeof(mb->db_path), "%s/member/snap/db", mb->m.data_dir);
	snprintf(mb->log_path, sizeof(mb->log_path), "%s/stored.log", mb->m.dir);
	if (nlogs == 0) {
		test_pid = getpid();
		atexit(print_logs);
	}
	CHECK(nlogs < MAX_LOGS);
	memcpy(log_paths[nlogs++], mb->log_path, sizeof(mb->log_path));
	member_start(mb);
	CHECK(TEST_WAIT_FOR(member_status(mb).epoch >= 1, 20000));
}

/* Waits while the ring is full, then rings stored. */
#define PUSH(mb, expr)                                                        \
	do {                                                                  \
		int rc_;                                                      \
		while ((rc_ = (expr)) == -EAGAIN)                             \
			usleep(100);                                          \
		CHECK_EQ(rc_, 0);                                             \
		shm_doorbell_ring(shm_role_doorbell((mb)->rf, SHM_ROLE_STORED)); \
	} while (0)

/* A put of key (value derived from the key and index) at index. */
static void put_at(struct member *mb, uint64_t index, const char *key, struct tbuf *buf)
{
	char val[700];
	size_t n = 100 + test_mix(index ^ seed) % 500;
	struct msg_origin o = tst_origin(mb->slot.index, mb->slot.generation, index);

	for (size_t i = 0; i < n; i++)
		val[i] = (char)('a' + (index + i) % 26);
	val[n] = '\0';
	tst_put(key, val, &o, buf);
	PUSH(mb, tst_commit(mb->committed, index, 1, RAFTPB__ENTRY_TYPE__EntryNormal, buf->p,
			    buf->len));
}

static void empty_at(struct member *mb, uint64_t index)
{
	PUSH(mb, tst_commit(mb->committed, index, 1, RAFTPB__ENTRY_TYPE__EntryNormal, NULL, 0));
}

static void install_at(struct member *mb, uint64_t index, const char *path)
{
	PUSH(mb, tst_install(mb->committed, index, 1, path));
}

static bool applied_at(struct member *mb, uint64_t index)
{
	struct status_stored st = member_status(mb);
	return st.applied_index >= index && st.root_page != 0;
}

/* A copy of the member's db through dbsnap into path; its consistent index. */
static uint64_t copy_db(struct member *mb, const char *path)
{
	struct dbsnap *s;
	uint8_t buf[65536];
	ssize_t n;
	int fd;

	CHECK_EQ(dbsnap_open(mb->gw, mb->db_path, &s), 0);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	while ((n = dbsnap_read(s, buf, sizeof(buf))) > 0)
		CHECK_EQ(write(fd, buf, (size_t)n), n);
	CHECK_EQ(n, 0);
	CHECK_EQ(fsync(fd), 0);
	close(fd);
	uint64_t index = dbsnap_index(s);
	dbsnap_close(s);
	return index;
}

/* What one read of a member's published root found. */
struct seen {
	int64_t rev;
	size_t src, post, tgt;      /* keys under src/, post/<round>/, tgt/ */
	size_t post_other;          /* keys under post/ of other rounds */
	size_t other;               /* any other key */
};

static void read_published(struct member *mb, unsigned round, struct seen *out)
{
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest all = ETCDSERVERPB__RANGE_REQUEST__INIT;
	static uint8_t zero;
	struct status_stored st;
	struct tst_view w;
	uint32_t e;
	char want[32];

	memset(out, 0, sizeof(*out));
	snprintf(want, sizeof(want), "post/%u/", round);
	all.key.len = 1;
	all.key.data = &zero;
	all.range_end = all.key;
	mvcc_range_result_init(&res);
	CHECK_EQ(readers_claim(mb->gw, &e), 0);
	CHECK_EQ(readers_begin(mb->gw, e, &st), 0);
	CHECK(st.root_page != 0);
	tst_view_open(&w, mb->db_path, &st);
	CHECK_EQ(mvcc_range(&w.v, &all, &res), 0);
	out->rev = w.v.rev;
	for (size_t i = 0; i < res.n; i++) {
		const char *k = (const char *)res.kvs[i].f.key;
		size_t len = res.kvs[i].f.key_len;
		if (len >= 4 && memcmp(k, "src/", 4) == 0)
			out->src++;
		else if (len >= 4 && memcmp(k, "tgt/", 4) == 0)
			out->tgt++;
		else if (len >= strlen(want) && memcmp(k, want, strlen(want)) == 0)
			out->post++;
		else if (len >= 5 && memcmp(k, "post/", 5) == 0)
			out->post_other++;
		else
			out->other++;
	}
	tst_view_close(&w);
	readers_end(mb->gw, e);
	readers_release(mb->gw, e);
	mvcc_range_result_free(&res);
}

/* A read txn on a member's file, held across installs. */
struct held {
	uint32_t e;
	struct btree_reader *db;
	struct btree_txn *t;
	struct mvcc_view v;
};

static void held_open(struct member *mb, struct held *h)
{
	struct status_stored st;

	CHECK_EQ(readers_claim(mb->gw, &h->e), 0);
	CHECK_EQ(readers_begin(mb->gw, h->e, &st), 0);
	CHECK_EQ(btree_reader_open(mb->db_path, NULL, &h->db), 0);
	struct btree_root root = { st.root_page, st.txid, st.high_water_page };
	CHECK_EQ(btree_reader_begin(h->db, &root, &h->t), 0);
	CHECK_EQ(mvcc_view_open(h->t, &h->v), 0);
}

/* The held txn still reads the n keys under tgt/ its file had. */
static void held_check(struct held *h, size_t n)
{
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest pre = ETCDSERVERPB__RANGE_REQUEST__INIT;

	pre.key = tb("tgt/");
	pre.range_end = tb("tgt0");
	mvcc_range_result_init(&res);
	CHECK_EQ(mvcc_range(&h->v, &pre, &res), 0);
	CHECK_EQ(res.n, n);
	mvcc_range_result_free(&res);
}

static void held_close(struct member *mb, struct held *h)
{
	mvcc_view_close(&h->v);
	btree_txn_end(h->t);
	btree_reader_close(h->db);
	readers_end(mb->gw, h->e);
	readers_release(mb->gw, h->e);
}

/* ---- a gateway's reads during the installs ---- */

/* Shared with the reader process. */
struct reader {
	atomic_bool stop;
	uint64_t reads, remaps, refused;
	char err[512];
};

/*
 * Reads member T as gatewayd does (dbread.c): a reader entry, the
 * published root, the file mapped again when the generation moves and
 * used only if the generation did not move while it was opened. Every
 * read must open a view at the published revision and range every key,
 * and revision and applied index never go back.
 */
static void reader_main(struct member *mb, struct reader *rd)
{
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest all = ETCDSERVERPB__RANGE_REQUEST__INIT;
	static uint8_t zero;
	struct btree_reader *db = NULL;
	uint64_t gen = 0, last_rev = 0, last_applied = 0;
	struct shm_region *r;
	uint32_t e;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (shm_region_attach(mb->m.region_path, &r) || readers_claim(r, &e))
		test_child_exit(2);
	all.key.len = 1;
	all.key.data = &zero;
	all.range_end = all.key;
	mvcc_range_result_init(&res);
	while (!atomic_load(&rd->stop) && !rd->err[0]) {
		struct status_stored st, now;
		struct btree_txn *t;
		struct mvcc_view v;

		if (readers_begin(r, e, &st) || st.root_page == 0) {
			readers_end(r, e);
			rd->refused++;
			usleep(100);
			continue;
		}
		if (db && gen != st.db_generation) {
			btree_reader_close(db);
			db = NULL;
			rd->remaps++;
		}
		if (!db) {
			if (btree_reader_open(mb->db_path, NULL, &db) ||
			    status_stored_read(r, &now) || now.db_generation != st.db_generation) {
				btree_reader_close(db);
				db = NULL;
				readers_end(r, e);
				rd->refused++;
				continue;
			}
			gen = st.db_generation;
		}
		if (st.revision < last_rev || st.applied_index < last_applied)
			snprintf(rd->err, sizeof(rd->err), "went back: revision %" PRIu64 " after %" PRIu64
				 ", applied %" PRIu64 " after %" PRIu64, st.revision, last_rev,
				 st.applied_index, last_applied);
		last_rev = st.revision;
		last_applied = st.applied_index;
		struct btree_root root = { st.root_page, st.txid, st.high_water_page };
		int rc = btree_reader_begin(db, &root, &t);
		if (rc == 0) {
			rc = mvcc_view_open(t, &v);
			if (rc == 0) {
				if (v.rev != (int64_t)st.revision)
					snprintf(rd->err, sizeof(rd->err), "view at revision %" PRId64
						 ", published %" PRIu64 " (generation %" PRIu64 ")",
						 v.rev, st.revision, st.db_generation);
				rc = mvcc_range(&v, &all, &res);
				mvcc_view_close(&v);
			}
			/* the root holds the consistent index published with it,
			 * which dbsnap reports of a copy */
			struct btree_bucket *meta;
			const uint8_t *ci;
			size_t cilen;
			if (rc == 0 && btree_bucket_open(t, NULL, "meta", 4, &meta) == 0 &&
			    btree_get(meta, "consistent_index", 16, &ci, &cilen) == 0 &&
			    (cilen != 8 || rev_get_be64(ci) != st.applied_index))
				snprintf(rd->err, sizeof(rd->err), "published applied index %" PRIu64
					 ", consistent index %" PRIu64 " in its root", st.applied_index,
					 cilen == 8 ? rev_get_be64(ci) : 0);
			btree_txn_end(t);
		}
		if (rc && !rd->err[0])
			snprintf(rd->err, sizeof(rd->err), "read at txid %" PRIu64 " generation %" PRIu64
				 ": %s", st.txid, st.db_generation, errmsg_get(rc));
		rd->reads++;
		readers_end(r, e);
	}
	mvcc_range_result_free(&res);
	btree_reader_close(db);
	readers_release(r, e);
	shm_region_detach(r);
	test_child_exit(0);
}

/* raftd's part after a restart of T: the install again while T's durable
 * index is below it, then the entries after it. */
static void resend_round(struct member *t, uint64_t snap_index, const char *path, unsigned round,
			 struct tbuf *buf)
{
	struct status_stored st = member_status(t);
	uint64_t from = st.durable_index + 1;
	char key[32];

	if (st.durable_index < snap_index) {
		install_at(t, snap_index, path);
		from = snap_index + 1;
	}
	for (uint64_t i = from; i <= snap_index + POSTS; i++) {
		snprintf(key, sizeof(key), "post/%u/%" PRIu64, round, i - snap_index);
		put_at(t, i, key, buf);
	}
}

static void write_file(const char *path, const void *p, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, p, len), (ssize_t)len);
	close(fd);
}

#define SKIPPED "skipped a received snapshot: the store is already at or past it"
#define REFUSED "refused the received snapshot db; nothing is applied until a valid one comes"

/* An install of path at index that stored must answer with the log line
 * msg (SKIPPED or REFUSED, naming that index or path): once the line is
 * there, T's state and generation stayed and stored lives. */
static void check_refused(struct member *t, uint64_t index, const char *path, unsigned round,
			  const struct seen *before, const char *msg)
{
	struct status_stored st0 = member_status(t), st;
	struct seen now;
	char field[700];
	unsigned lines0;
	int status;

	if (strcmp(msg, SKIPPED) == 0)
		snprintf(field, sizeof(field), "\"snapshot-index\":%" PRIu64 ",", index);
	else
		snprintf(field, sizeof(field), "\"path\":\"%s\"", path);
	lines0 = log_lines(t, msg, field);
	install_at(t, index, path);
	if (!TEST_WAIT_FOR(log_lines(t, msg, field) > lines0, 60000)) {
		fprintf(stderr, "stored never logged \"%s\" (%s) for the install of %s at %" PRIu64
			" (it lives: %s)\n", msg, field, path, index,
			waitpid(t->child, &status, WNOHANG) == 0 ? "yes" : "no");
		exit(1);
	}
	st = member_status(t);
	CHECK_EQ(waitpid(t->child, &status, WNOHANG), 0);
	CHECK_EQ(st.db_generation, st0.db_generation);
	CHECK_EQ(st.applied_index, st0.applied_index);
	CHECK_EQ(st.epoch, st0.epoch);
	read_published(t, round, &now);
	CHECK_EQ(now.rev, before->rev);
	CHECK_EQ(now.src, before->src);
	CHECK_EQ(now.post, before->post);
}

#define GAVE "gave the replaced db file's space back"

/*
 * A new member with 50 puts of its own under tgt/, a read txn h held on
 * its file, and the copy first installed at first_index over it, with a
 * put after.
 */
static void release_start(struct member *m, struct held *h, const char *first,
			  uint64_t first_index, struct tbuf *buf)
{
	char key[32];

	member_init(m);
	for (uint64_t i = 1; i <= 50; i++) {
		snprintf(key, sizeof(key), "tgt/%03" PRIu64, i);
		put_at(m, i, key, buf);
	}
	CHECK(TEST_WAIT_FOR(applied_at(m, 50), 20000));
	held_open(m, h);
	install_at(m, first_index, first);
	put_at(m, first_index + 1, "post/0/1", buf);
	CHECK(TEST_WAIT_FOR(applied_at(m, first_index + 1), 30000));
}

/*
 * The file an install replaced goes back to the file system a step at a
 * time once no reader can read it, not all at once at its last close. A
 * new member applies puts of its own, a read txn is held on its file, and
 * it installs the leader's copies at first and then at second: nothing is
 * given back while the txn is held, and the file it reads stays whole.
 * Once it ends, the file the second install replaced is given back, and
 * only that one (the first, still read at the second install, is left to
 * its readers' last close).
 */
static void release_phase(const char *first, uint64_t first_index, const char *second,
			  uint64_t second_index, struct tbuf *buf)
{
	struct member m;
	struct held h;

	release_start(&m, &h, first, first_index, buf);
	install_at(&m, second_index, second);
	put_at(&m, second_index + 1, "post/0/2", buf);
	CHECK(TEST_WAIT_FOR(applied_at(&m, second_index + 1), 30000));
	CHECK_EQ(log_lines(&m, GAVE, NULL), 0u);
	held_check(&h, 50);
	held_close(&m, &h);
	/* a turn with no reader of the replaced files left */
	put_at(&m, second_index + 2, "post/0/3", buf);
	CHECK(TEST_WAIT_FOR(applied_at(&m, second_index + 2), 30000));
	if (!TEST_WAIT_FOR(log_lines(&m, GAVE, "\"left-bytes\":0,") >= 1, 30000)) {
		fprintf(stderr, "stored never logged \"%s\" for the file the install at %" PRIu64
			" replaced\n", GAVE, second_index);
		exit(1);
	}
	CHECK_EQ(log_lines(&m, GAVE, NULL), 1u);
	CHECK_EQ(log_lines(&m, GAVE, "\"steps\":0,"), 0u);
	printf("the file the install replaced went back once its reader was gone\n");
	kill(m.child, SIGTERM);
	CHECK_EQ(test_wait(m.child), 0);
	member_fini(&m);
}

/*
 * A file replaced by an install, whose last reader leaves while stored is
 * stopped, with a second install already waiting for it: the second
 * install's turn comes before the loop looks for readers again. The first
 * file is still given back a step at a time (by the second install's own
 * look), then the second's once a turn passes with no reader, so two
 * complete releases are logged. Had the second install closed the first
 * file unlooked, the loop's close would have freed it at once, unlogged.
 */
static void release_between(const char *first, uint64_t first_index, const char *second,
			    uint64_t second_index, struct tbuf *buf)
{
	struct member m;
	struct held h;

	release_start(&m, &h, first, first_index, buf);
	usleep(200000); /* the turn that applied the put, and any checkpoint, done */
	CHECK_EQ(log_lines(&m, GAVE, NULL), 0u);
	held_check(&h, 50);
	CHECK_EQ(kill(m.child, SIGSTOP), 0);
	held_close(&m, &h);
	install_at(&m, second_index, second);
	put_at(&m, second_index + 1, "post/0/2", buf);
	CHECK_EQ(kill(m.child, SIGCONT), 0);
	CHECK(TEST_WAIT_FOR(applied_at(&m, second_index + 1), 30000));
	put_at(&m, second_index + 2, "post/0/3", buf);
	CHECK(TEST_WAIT_FOR(applied_at(&m, second_index + 2), 30000));
	if (!TEST_WAIT_FOR(log_lines(&m, GAVE, "\"left-bytes\":0,") >= 2, 30000)) {
		fprintf(stderr, "stored logged \"%s\" %u times, not twice: the file the first "
			"install replaced was not given back in steps\n", GAVE,
			log_lines(&m, GAVE, NULL));
		exit(1);
	}
	CHECK_EQ(log_lines(&m, GAVE, NULL), 2u);
	printf("the file whose reader left just before the second install went back in steps\n");
	kill(m.child, SIGTERM);
	CHECK_EQ(test_wait(m.child), 0);
	member_fini(&m);
}

/*
 * With STORED_ETCD_DB (a db file written by etcd: `etcdctl snapshot save`
 * against Debian's etcd, its checksum cut off), STORED_ETCD_KEYS and
 * STORED_ETCD_REV (tests/integration/install_etcd.sh): a new member
 * installs it at its consistent index, builds cetcd's index for it, and
 * must then publish exactly the keys under etcd/ etcd had, at etcd's
 * revision, and apply puts after it.
 */
static void etcd_phase(struct tbuf *buf)
{
	const char *path = getenv("STORED_ETCD_DB");
	struct member m;
	struct seen seen;

	if (!path || !*path)
		return;
	size_t keys = (size_t)strtoull(getenv("STORED_ETCD_KEYS"), NULL, 0);
	int64_t rev = (int64_t)strtoll(getenv("STORED_ETCD_REV"), NULL, 0);
	uint64_t index = tst_file_index(path);

	member_init(&m);
	put_at(&m, 1, "before/1", buf);
	CHECK(TEST_WAIT_FOR(applied_at(&m, 1), 20000));
	install_at(&m, index, path);
	put_at(&m, index + 1, "post/0/1", buf);
	CHECK(TEST_WAIT_FOR(applied_at(&m, index + 1), 30000));
	read_published(&m, 0, &seen);
	printf("etcd's db: consistent index %" PRIu64 ", revision %" PRId64 ", %zu keys under etcd/; "
	       "installed: revision %" PRId64 ", %zu keys under etcd/\n",
	       index, rev, keys, seen.rev, seen.other);
	CHECK_EQ(seen.other, keys);       /* etcd/ keys: neither src/ nor post/ nor tgt/ */
	CHECK_EQ(seen.post, 1u);
	CHECK_EQ(seen.rev, rev + 1);
	kill(m.child, SIGTERM);
	CHECK_EQ(test_wait(m.child), 0);
	member_fini(&m);
}

int main(void)
{
	const char *s = getenv("STORED_SEED");
	struct member src, tgt;
	struct tbuf buf = { 0 };
	uint64_t next_src = 1;
	size_t src_keys = 0;
	int64_t src_rev[ROUNDS + 1];
	size_t src_count[ROUNDS + 1];
	char snap[ROUNDS + 1][700];
	char key[64];

	seed = s && *s ? strtoull(s, NULL, 0) : clock_now_ns() ^ (uint64_t)getpid();
	printf("seed %" PRIu64 " (STORED_SEED)\n", seed);
	fflush(stdout);

	/* The leader's copies at 1000, 2000, ...: puts of new keys and of
	 * some old ones, between empty entries. */
	member_init(&src);
	for (unsigned k = 1; k <= ROUNDS; k++) {
		for (; next_src <= (uint64_t)k * ROUND_ENTRIES; next_src++) {
			uint64_t x = test_mix(next_src ^ seed);
			if (x % 3 == 0) {
				empty_at(&src, next_src);
				continue;
			}
			uint64_t n = x % 5 == 0 && src_keys ? (x >> 8) % src_keys : src_keys++;
			snprintf(key, sizeof(key), "src/%06" PRIu64, n);
			put_at(&src, next_src, key, &buf);
		}
		CHECK(TEST_WAIT_FOR(applied_at(&src, (uint64_t)k * ROUND_ENTRIES), 30000));
		snprintf(snap[k], sizeof(snap[k]), "%s/%016" PRIx64 ".snap.db", src.m.dir,
			 (uint64_t)k * ROUND_ENTRIES);
		CHECK_EQ(copy_db(&src, snap[k]), (uint64_t)k * ROUND_ENTRIES);
		src_rev[k] = (int64_t)member_status(&src).revision;
		src_count[k] = src_keys;
	}
	kill(src.child, SIGTERM);
	CHECK_EQ(test_wait(src.child), 0);
	member_fini(&src);

	/* T applies puts of its own first. */
	member_init(&tgt);
	for (uint64_t i = 1; i <= 50; i++) {
		snprintf(key, sizeof(key), "tgt/%03" PRIu64, i);
		put_at(&tgt, i, key, &buf);
	}
	CHECK(TEST_WAIT_FOR(applied_at(&tgt, 50), 20000));
	struct seen before;
	read_published(&tgt, 0, &before);
	CHECK_EQ(before.tgt, 50u);
	struct reader *rd = test_shared(sizeof(*rd));
	pid_t reader = test_fork();
	CHECK(reader >= 0);
	if (reader == 0)
		reader_main(&tgt, rd);

	/* A read txn on T's old file, held across the installs. */
	struct held old;
	held_open(&tgt, &old);

	uint64_t kills = 0, kills_before = 0;
	struct status_stored last = member_status(&tgt);
	for (unsigned k = 1; k <= ROUNDS; k++) {
		uint64_t snap_index = (uint64_t)k * ROUND_ENTRIES;
		install_at(&tgt, snap_index, snap[k]);
		/* entries at or below the snapshot, as a replay could bring */
		put_at(&tgt, snap_index - 1, "dup/below", &buf);
		put_at(&tgt, snap_index, "dup/at", &buf);
		for (uint64_t i = 1; i <= POSTS; i++) {
			snprintf(key, sizeof(key), "post/%u/%" PRIu64, k, i);
			put_at(&tgt, snap_index + i, key, &buf);
		}
		if (k >= 2) {
			/* SIGKILL somewhere in the install: the first one
			 * before the rename for sure, later ones once stored
			 * has begun the copy beside the db, at a random
			 * moment of the next 15 ms */
			uint64_t old_epoch = member_status(&tgt).epoch;
			char copy[700];
			snprintf(copy, sizeof(copy), "%s.installing", tgt.db_path);
			if (kills_before == 0) {
				/* None has landed before the rename yet: catch
				 * this install with its copy still beside the
				 * db. Spin rather than sleep, stop stored the
				 * moment the copy shows, and look again while it
				 * is stopped: a copy still there means the
				 * rename has not happened. */
				int64_t end = clock_now_ns() + 5000000000ull;
				while (access(copy, F_OK) != 0 && !applied_at(&tgt, snap_index) &&
				       clock_now_ns() < end)
					;
				kill(tgt.child, SIGSTOP);
				if (access(copy, F_OK) == 0)
					printf("round %u: stopped with the copy beside the db\n", k);
			} else {
				TEST_WAIT_FOR(access(copy, F_OK) == 0 || applied_at(&tgt, snap_index),
					      5000);
				usleep((useconds_t)(test_mix(seed + k) % 15000));
			}
			kill(tgt.child, SIGKILL);
			CHECK_EQ(test_wait(tgt.child), 128 + SIGKILL);
			kills++;
			member_start(&tgt);
			CHECK(TEST_WAIT_FOR(member_status(&tgt).epoch > old_epoch, 20000));
			if (member_status(&tgt).durable_index < snap_index)
				kills_before++; /* the old db came back: installed again */
			resend_round(&tgt, snap_index, snap[k], k, &buf);
		}
		CHECK(TEST_WAIT_FOR(applied_at(&tgt, snap_index + POSTS), 30000));
		struct status_stored st = member_status(&tgt);
		struct seen now;
		read_published(&tgt, k, &now);
		printf("round %u: generation %" PRIu64 " txid %" PRIu64 " revision %" PRId64
		       " keys %zu+%zu\n", k, st.db_generation, st.txid, now.rev, now.src, now.post);
		CHECK_EQ(now.rev, src_rev[k] + (int64_t)POSTS);
		CHECK_EQ(now.src, src_count[k]);
		CHECK_EQ(now.post, (size_t)POSTS);
		CHECK_EQ(now.tgt, 0u);
		CHECK_EQ(now.post_other, 0u);
		CHECK_EQ(now.other, 0u);
		CHECK(st.db_generation > last.db_generation);
		CHECK(st.txid > last.txid);
		CHECK_EQ(st.applied_index, snap_index + POSTS);
		last = st;
	}
	atomic_store(&rd->stop, true);
	CHECK_EQ(test_wait(reader), 0);
	printf("reader: %" PRIu64 " reads, %" PRIu64 " new files mapped, %" PRIu64 " refused%s%s\n",
	       rd->reads, rd->remaps, rd->refused, rd->err[0] ? ": " : "", rd->err);
	CHECK(!rd->err[0]);
	CHECK(rd->reads > 0);
	CHECK(rd->remaps >= 1);
	CHECK_EQ(kills, (uint64_t)ROUNDS - 1);
	CHECK(kills_before >= 1);

	/* The txn on the old file still reads the old file. */
	held_check(&old, 50);
	held_close(&tgt, &old);

	/* A resend at or below the applied index is skipped. */
	struct seen at_rest;
	uint64_t top = (uint64_t)ROUNDS * ROUND_ENTRIES + POSTS;
	read_published(&tgt, ROUNDS, &at_rest);
	check_refused(&tgt, (uint64_t)ROUNDS * ROUND_ENTRIES, snap[ROUNDS], ROUNDS, &at_rest, SKIPPED);

	/* Refused: a consistent index below the snapshot's, garbage, corrupt
	 * metas, a missing file. */
	check_refused(&tgt, top + 100, snap[ROUNDS], ROUNDS, &at_rest, REFUSED);
	char bad[700];
	uint8_t junk[8192];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)test_mix(seed + i);
	snprintf(bad, sizeof(bad), "%s/junk.snap.db", tgt.m.dir);
	write_file(bad, junk, sizeof(junk));
	check_refused(&tgt, top + 100, bad, ROUNDS, &at_rest, REFUSED);
	{
		snprintf(bad, sizeof(bad), "%s/metas.snap.db", tgt.m.dir);
		int in = open(snap[ROUNDS], O_RDONLY);
		CHECK(in >= 0);
		off_t size = lseek(in, 0, SEEK_END);
		uint8_t *p = malloc((size_t)size);
		CHECK(p != NULL);
		CHECK_EQ(pread(in, p, (size_t)size, 0), (ssize_t)size);
		close(in);
		p[16 + 20] ^= 0x40;          /* meta 0's root */
		p[4096 + 16 + 20] ^= 0x40;   /* meta 1's */
		write_file(bad, p, (size_t)size);
		free(p);
	}
	check_refused(&tgt, top + 100, bad, ROUNDS, &at_rest, REFUSED);
	snprintf(bad, sizeof(bad), "%s/none.snap.db", tgt.m.dir);
	check_refused(&tgt, top + 100, bad, ROUNDS, &at_rest, REFUSED);

	kill(tgt.child, SIGTERM);
	CHECK_EQ(test_wait(tgt.child), 0);
	member_fini(&tgt);
	release_phase(snap[ROUNDS - 1], (uint64_t)(ROUNDS - 1) * ROUND_ENTRIES, snap[ROUNDS],
		      (uint64_t)ROUNDS * ROUND_ENTRIES, &buf);
	release_between(snap[ROUNDS - 1], (uint64_t)(ROUNDS - 1) * ROUND_ENTRIES, snap[ROUNDS],
			(uint64_t)ROUNDS * ROUND_ENTRIES, &buf);
	etcd_phase(&buf);
	tbuf_free(&buf);
	passed = true;
	printf("ok: %u installs, %" PRIu64 " of them killed (%" PRIu64 " before the rename) and resent\n",
	       ROUNDS, kills, kills_before);
	return 0;
}
