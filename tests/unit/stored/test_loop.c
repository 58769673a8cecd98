/*
 * Unit tests for stored/loop.c in one process: separate region handles
 * play raftd (pushing committed entries), stored (the loop) and a gateway
 * (reading results).
 *
 * - the index rules: apply only applied+1, skip duplicates, drop gaps;
 *   records that are not committed entries are dropped
 * - results reach the slot after the root that holds the write is
 *   published, with the full response header
 * - one commit per batch, bounded by batch_entries, and one write of the
 *   status record per batch; the delivered index follows each batch
 * - checkpoints when due publish the durable index
 * - a physical compaction is answered only when its deletion is done, and
 *   the delivered index stays below it until then, past later answers;
 *   while it runs, its request gets an interim result (MSG_RESULT_INTERIM,
 *   its origin and index) about every second, and only then
 * - a stored killed during the deletion leaves the request in the region
 *   (status_waiting_write); the next one resumes the deletion, tells the
 *   request at once that its answer is coming, and answers it when the
 *   deletion is done; one that finds the deletion done answers at its
 *   open; it takes over only what it will not apply again (at or below
 *   the db's consistent index), of this member, and nothing from a
 *   record left half written
 * - with the loop running, a gateway that reads the delivered index and
 *   then drains its ring has every result up to it, each result coming
 *   after the root that holds its write
 * - a restart keeps the previous root published until the replay reaches
 *   the applied index published before, with a new epoch, and txids and
 *   revisions never go backwards
 * - attach hellos are still answered; the run loop stops on its flag
 * - a db whose published root page is corrupt is refused with -EUCLEAN,
 *   and both the returned and the logged message name the page and say
 *   to restore from a snapshot
 * - a checkpoint whose fdatasync fails under a continuous writer (the
 *   failed sync drops every write since the last good one, as the kernel
 *   may) stops the loop and withdraws the published root, whose pages
 *   may be lost; a new one starts from the last durable checkpoint,
 *   offers readers no root until the replay from the durable index
 *   reaches the applied index published before, and every put
 *   acknowledged before the failure is there
 *
 * Invariants (docs/invariants.md) the tests break on purpose and name
 * when they fail: 11 (test_batches_and_checkpoints: many entries waiting,
 * one commit and one published root per batch), 12, 4 and 5
 * (test_failed_sync: a failed fsync under a writer, then a restart).
 */
#include <fcntl.h>
#include <pthread.h>

#include "stored_util.h"

#include "raftpb/raft.pb-c.h"
#include "base/diskio/diskio.h"
#include "shm/doorbell.h"
#include "shm/layout.h"
#include "base/log/errmsg.h"
#include "shm/hello.h"
#include "shm/tokens.h"
#include "base/log/log.h"
#include "authpb/auth.pb-c.h"
#include "stored/alloc.h"
#include "stored/loop.h"
#include "stored/btree/page.h"
#include "stored/mvcc/mvcc.h"

/* stored's loop in this process (tst_loop), and what the tests here add. */
struct env {
	struct tst_loop t;
	struct tbuf d;
	uint64_t next_rid;
};

static void env_init(struct env *e, uint32_t batch_entries)
{
	memset(e, 0, sizeof(*e));
	tst_loop_init(&e->t, batch_entries);
	CHECK_EQ(stored_loop_open(e->t.st, &e->t.o, &e->t.l), 0);
}

static void env_fini(struct env *e)
{
	tst_loop_fini(&e->t);
	tbuf_free(&e->d);
}

static struct msg_origin env_origin(struct env *e)
{
	return tst_origin(e->t.slot.index, e->t.slot.generation, ++e->next_rid);
}

/* Pushes a Put of key=val at index (answered to the gateway). */
static void env_put(struct env *e, uint64_t index, const char *key, const char *val)
{
	struct msg_origin o = env_origin(e);
	tst_put(key, val, &o, &e->d);
	CHECK_EQ(tst_commit(e->t.committed, index, 2, RAFTPB__ENTRY_TYPE__EntryNormal, e->d.p, e->d.len),
		 0);
}

static void env_turn(struct env *e)
{
	CHECK_EQ(stored_loop_turn(e->t.l, NULL), 0);
}

static struct stored_loop_stats env_stats(struct env *e)
{
	struct stored_loop_stats s;
	stored_loop_stats(e->t.l, &s);
	return s;
}

static struct status_stored env_status(struct env *e)
{
	struct status_stored st;
	CHECK_EQ(status_stored_read(e->t.gw, &st), 0);
	return st;
}

/* Writes of stored's status record so far. */
static uint64_t env_status_writes(struct env *e)
{
	return status_stored_version(e->t.gw);
}

static void test_index_rules(void)
{
	struct env e;
	struct status_stored st;
	struct tst_result r = { 0 };
	Etcdserverpb__PutResponse *pr;

	env_init(&e, 0);
	st = env_status(&e);
	CHECK_EQ(st.epoch, 1);
	CHECK(st.root_page != 0);
	CHECK(st.txid != 0);
	CHECK_EQ(st.applied_index, 0);
	CHECK_EQ(st.revision, 1);
	CHECK_EQ(st.durable_index, 0);

	env_put(&e, 1, "a", "1");
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.applied_index, 1);
	CHECK_EQ(st.revision, 2);
	CHECK_EQ(tst_take_result(e.t.results, &r), 0);
	CHECK_EQ(r.h.index, 1);
	CHECK_EQ(r.h.revision, 2);
	CHECK_EQ(r.h.status, 0);
	CHECK_EQ(r.h.origin.request_id, e.next_rid);
	pr = etcdserverpb__put_response__unpack(NULL, r.body.len, r.body.p);
	CHECK(pr != NULL && pr->header != NULL);
	CHECK_EQ(pr->header->cluster_id, TST_CLUSTER);
	CHECK_EQ(pr->header->member_id, TST_MEMBER);
	CHECK_EQ(pr->header->revision, 2);
	CHECK_EQ(pr->header->raft_term, 2);
	etcdserverpb__put_response__free_unpacked(pr, NULL);

	/* a replayed duplicate and an entry past a gap: neither applies */
	env_put(&e, 1, "a", "dup");
	env_put(&e, 3, "c", "gap");
	CHECK_EQ(ring_push(e.t.committed, MSG_RESULT, "junk", 4), 0);
	env_turn(&e);
	CHECK_EQ(env_stats(&e).applied_index, 1);
	CHECK_EQ(env_stats(&e).duplicates, 1);
	CHECK_EQ(env_stats(&e).gaps, 1);
	CHECK_EQ(env_stats(&e).malformed, 1);
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	CHECK_EQ(env_status(&e).applied_index, 1);

	/* the replay fills the gap: 2, then 3 again */
	env_put(&e, 2, "b", "2");
	env_put(&e, 3, "c", "3");
	/* a new leader's empty entry and a configuration change */
	CHECK_EQ(tst_commit(e.t.committed, 4, 3, RAFTPB__ENTRY_TYPE__EntryNormal, NULL, 0), 0);
	CHECK_EQ(tst_commit(e.t.committed, 5, 3, RAFTPB__ENTRY_TYPE__EntryConfChange, "\x08\x01", 2),
		 0);
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.applied_index, 5);
	CHECK_EQ(st.revision, 4);
	for (uint64_t want = 2; want <= 3; want++) {
		CHECK_EQ(tst_take_result(e.t.results, &r), 0);
		CHECK_EQ(r.h.index, want);
		/* the root that holds the write was published first */
		CHECK(env_status(&e).applied_index >= r.h.index);
	}
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);

	/* a request the store refuses (the revoke of an unknown lease):
	 * etcd's error, index moves, store does not */
	{
		Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
		Etcdserverpb__LeaseRevokeRequest lr = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
		struct msg_origin o = env_origin(&e);
		lr.id = 5;
		req.lease_revoke = &lr;
		tst_entry(&req, &o, &e.d);
		CHECK_EQ(tst_commit(e.t.committed, 6, 3, 0, e.d.p, e.d.len), 0);
		env_turn(&e);
		CHECK_EQ(tst_take_result(e.t.results, &r), 0);
		CHECK_EQ(r.h.status, 5);
		CHECK(tst_body_is(&r, "etcdserver: requested lease not found"));
		CHECK_EQ(r.h.revision, 4);
		CHECK_EQ(env_status(&e).applied_index, 6);
	}

	/* a hello from the gateway is still answered */
	{
		bool acked = false;
		CHECK_EQ(hello_send(e.t.gw, &e.t.slot, SHM_ROLE_STORED, 0), 0);
		env_turn(&e);
		CHECK(hello_take_acks(e.t.gw, &e.t.slot, SHM_ROLE_STORED, &acked) >= 1);
		CHECK(acked);
	}

	/* an explicit checkpoint publishes the durable index */
	CHECK_EQ(env_status(&e).durable_index, 0);
	CHECK_EQ(stored_loop_checkpoint(e.t.l), 0);
	CHECK_EQ(env_status(&e).durable_index, 6);
	tbuf_free(&r.body);
	env_fini(&e);
}

static void test_batches_and_checkpoints(void)
{
	struct env e;
	struct status_stored st, prev;
	char key[32];

	env_init(&e, 16);
	e.t.o.checkpoint_entries = 40;
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	CHECK_EQ(env_status(&e).epoch, 2); /* a second open is a restart */

	for (uint64_t i = 1; i <= 50; i++) {
		snprintf(key, sizeof(key), "k%03llu", (unsigned long long)i);
		env_put(&e, i, key, "v");
	}
	prev = env_status(&e);
	uint64_t writes = env_status_writes(&e);
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.applied_index, 16);
	CHECK_EQ(st.revision, 17);
	/* 50 entries waiting, 16 a batch: one commit and one root */
	CHECK_INVARIANT_EQ(INV11_ONE_ROOT, env_stats(&e).batches, 1);
	CHECK(st.txid > prev.txid);
	CHECK_EQ(st.durable_index, 0);
	CHECK_INVARIANT_EQ(INV11_ONE_ROOT, env_status_writes(&e), writes + 1);
	CHECK_EQ(status_stored_delivered(e.t.gw), 16);
	env_turn(&e);
	CHECK_EQ(env_status_writes(&e), writes + 2);
	CHECK_EQ(status_stored_delivered(e.t.gw), 32);
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.applied_index, 48);
	CHECK_EQ(status_stored_delivered(e.t.gw), 48);
	CHECK_EQ(env_stats(&e).batches, 3);
	/* 48 entries since the last checkpoint >= 40: a checkpoint started,
	 * and the durable index moves only once it has ended. */
	CHECK(st.durable_index == 0 || st.durable_index == 48);
	CHECK_EQ(stored_loop_checkpoint_wait(e.t.l), 0);
	CHECK_EQ(env_status(&e).durable_index, 48);
	CHECK_EQ(env_stats(&e).checkpoints, 1);
	env_turn(&e);
	CHECK_EQ(env_status(&e).applied_index, 50);
	CHECK_EQ(env_status(&e).durable_index, 48);

	/* time-based checkpoints: a short period */
	e.t.o.checkpoint_ms = 1;
	e.t.o.checkpoint_entries = 0;
	CHECK_EQ(stored_loop_checkpoint(e.t.l), 0);
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	env_put(&e, 51, "z", "1");
	env_turn(&e);
	usleep(2000);
	env_turn(&e);
	CHECK_EQ(stored_loop_checkpoint_wait(e.t.l), 0);
	CHECK_EQ(env_status(&e).durable_index, 51);
	env_fini(&e);
}

/* A batch wakes a sleeping gateway: for its answers, and through the
 * event notice when the gateway asked for events. Nothing of the batch
 * wakes anyone before it is all out (stored/test_results), so a batch that
 * forgot a wake would leave the gateway asleep until its backstop. */
static void test_batch_wakes(void)
{
	struct env e;
	struct shm_doorbell *db;
	struct tst_result got = { 0 };
	struct test_sleeper sl;

	env_init(&e, 16);
	db = shm_slot_doorbell(e.t.gw, e.t.slot.index);

	/* answers only: one wake */
	shm_doorbell_want_events(db, false);
	test_sleeper_start(&sl, db);
	env_put(&e, 1, "a", "1");
	env_turn(&e);
	CHECK_EQ(status_stored_delivered(e.t.gw), 1);
	CHECK_EQ(test_sleeper_wakes(&sl), 1);
	CHECK(test_sleeper_rung(&sl));
	test_sleeper_stop(&sl);
	CHECK_EQ(tst_take_result(e.t.results, &got), 0);
	CHECK_EQ(got.h.index, 1);

	/* events only (the answer is for an older generation of the slot,
	 * and dropped): the event notice wakes it */
	shm_doorbell_want_events(db, true);
	test_sleeper_start(&sl, db);
	{
		struct msg_origin o = tst_origin(e.t.slot.index, e.t.slot.generation - 1, ++e.next_rid);
		tst_put("b", "2", &o, &e.d);
		CHECK_EQ(tst_commit(e.t.committed, 2, 2, RAFTPB__ENTRY_TYPE__EntryNormal, e.d.p,
				    e.d.len),
			 0);
	}
	env_turn(&e);
	CHECK_EQ(status_stored_delivered(e.t.gw), 2);
	CHECK_EQ(test_sleeper_wakes(&sl), 1);
	CHECK(test_sleeper_rung(&sl));
	test_sleeper_stop(&sl);
	CHECK_EQ(tst_take_result(e.t.results, &got), -EAGAIN);

	/* both: the answers' wake, then the notice's */
	test_sleeper_start(&sl, db);
	env_put(&e, 3, "c", "3");
	env_turn(&e);
	CHECK_EQ(test_sleeper_wakes(&sl), 2);
	test_sleeper_stop(&sl);
	CHECK_EQ(tst_take_result(e.t.results, &got), 0);
	CHECK_EQ(got.h.index, 3);
	shm_doorbell_want_events(db, false);
	tbuf_free(&got.body);
	env_fini(&e);
}

/* The next record of the result ring, if it is an interim result, in *m:
 * 0; -EAGAIN when the ring is empty, -ENOMSG for another record (left). */
static int take_interim(struct ring *ring, struct msg_result_interim *m)
{
	struct ring_rec rec;

	if (ring_peek(ring, &rec) != 0)
		return -EAGAIN;
	if (rec.type != MSG_RESULT_INTERIM)
		return -ENOMSG;
	CHECK_EQ(rec.len, sizeof(*m));
	memcpy(m, rec.data, sizeof(*m));
	ring_release(ring, &rec);
	return 0;
}

/* A physical compaction at 41 over 40 revisions of 4 keys (steps of 5
 * key entries: it deletes 36 of them), applied in one turn with its
 * deletion under way; its origin in *o, its entry's index returned. */
static uint64_t compaction_applied(struct env *e, struct msg_origin *o)
{
	struct tst_result r = { 0 };
	char key[32];
	uint64_t idx = 0;

	env_init(e, 0);
	e->t.o.compact_step = 5;
	stored_loop_free(e->t.l);
	CHECK_EQ(stored_loop_open(e->t.st, &e->t.o, &e->t.l), 0);
	for (int i = 0; i < 40; i++) {
		snprintf(key, sizeof(key), "key%d", i % 4);
		env_put(e, ++idx, key, "value");
	}
	env_turn(e);
	while (tst_take_result(e->t.results, &r) == 0)
		;
	CHECK_EQ(status_stored_delivered(e->t.gw), idx);
	*o = env_origin(e);
	tst_compact(41, true, o, &e->d);
	CHECK_EQ(tst_commit(e->t.committed, ++idx, 2, 0, e->d.p, e->d.len), 0);
	env_turn(e);
	tbuf_free(&r.body);
	return idx;
}

static void test_physical_compaction(void)
{
	struct msg_result_interim im;
	struct env e;
	struct tst_result r = { 0 };
	struct msg_origin o;
	int turns = 0;

	uint64_t compact_idx = compaction_applied(&e, &o), idx = compact_idx;
	/* the compaction is under way, its answer waits, and so does the
	 * delivered index, below it */
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	CHECK_EQ(env_status(&e).applied_index, compact_idx);
	CHECK_EQ(status_stored_delivered(e.t.gw), compact_idx - 1);
	/* a put behind it is answered at once; the index still waits */
	env_put(&e, ++idx, "later", "v");
	env_turn(&e);
	CHECK_EQ(tst_take_result(e.t.results, &r), 0);
	CHECK_EQ(r.h.index, idx);
	CHECK_EQ(status_stored_delivered(e.t.gw), compact_idx - 1);
	/* a turn within the second says nothing more; one after it tells the
	 * request its answer is still coming, and answers nothing */
	env_turn(&e);
	CHECK_EQ(take_interim(e.t.results, &im), -EAGAIN);
	usleep(1050 * 1000);
	env_turn(&e);
	CHECK_EQ(take_interim(e.t.results, &im), 0);
	CHECK(memcmp(&im.origin, &o, sizeof(o)) == 0);
	CHECK_EQ(im.index, compact_idx);
	CHECK_EQ(take_interim(e.t.results, &im), -EAGAIN);
	CHECK_EQ(status_stored_delivered(e.t.gw), compact_idx - 1);
	for (;;) {
		bool more;
		CHECK_EQ(stored_loop_turn(e.t.l, &more), 0);
		turns++;
		if (tst_take_result(e.t.results, &r) == 0)
			break;
		CHECK(more);
		CHECK(turns < 100);
	}
	CHECK(turns >= 4); /* 40 key entries in steps of 5: 4 of them above */
	CHECK_EQ(r.h.origin.request_id, o.request_id);
	CHECK_EQ(status_stored_delivered(e.t.gw), idx);
	CHECK_EQ(r.h.status, 0);
	{
		Etcdserverpb__CompactionResponse *cr =
			etcdserverpb__compaction_response__unpack(NULL, r.body.len, r.body.p);
		CHECK(cr != NULL && cr->header != NULL);
		CHECK_EQ(cr->header->revision, 42); /* the store's, at the answer */
		CHECK_EQ(cr->header->member_id, TST_MEMBER);
		CHECK_EQ(cr->header->raft_term, 2);
		etcdserverpb__compaction_response__free_unpacked(cr, NULL);
	}
	/* answered after a checkpoint made the finished compaction durable */
	CHECK_EQ(env_status(&e).durable_index, idx);
	tbuf_free(&r.body);
	env_fini(&e);
}

/* compaction_applied, then checkpointed with its deletion under way. */
static uint64_t compaction_checkpointed(struct env *e, struct msg_origin *o)
{
	struct tst_result r = { 0 };
	uint64_t idx = compaction_applied(e, o);

	CHECK_EQ(tst_take_result(e->t.results, &r), -EAGAIN);
	CHECK_EQ(stored_loop_checkpoint(e->t.l), 0);
	CHECK_EQ(env_status(e).durable_index, idx);
	tbuf_free(&r.body);
	return idx;
}

/* Checks that r answers the compaction of o at index idx with success. */
static void check_compaction_answer(const struct tst_result *r, const struct msg_origin *o,
				    uint64_t idx)
{
	CHECK(memcmp(&r->h.origin, o, sizeof(*o)) == 0);
	CHECK_EQ(r->h.index, idx);
	CHECK_EQ(r->h.status, 0);
	Etcdserverpb__CompactionResponse *cr =
		etcdserverpb__compaction_response__unpack(NULL, r->body.len, r->body.p);
	CHECK(cr != NULL && cr->header != NULL);
	CHECK_EQ(cr->header->revision, 41);
	CHECK_EQ(cr->header->raft_term, 2);
	etcdserverpb__compaction_response__free_unpacked(cr, NULL);
}

static void test_compaction_restart(void)
{
	struct msg_result_interim im;
	struct status_waiting w[STATUS_WAITING_MAX];
	struct tst_result r = { 0 };
	struct msg_origin o;
	struct env e;
	int turns = 0;

	/* killed during the deletion: the next stored resumes it, tells the
	 * request at its first step, and answers it when it is done */
	uint64_t idx = compaction_checkpointed(&e, &o);
	CHECK_EQ(status_waiting_read(e.t.gw, w, STATUS_WAITING_MAX), 1);
	stored_loop_free(e.t.l); /* no answer, no checkpoint: a kill */
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	env_turn(&e);
	CHECK_EQ(take_interim(e.t.results, &im), 0);
	CHECK(memcmp(&im.origin, &o, sizeof(o)) == 0);
	CHECK_EQ(im.index, idx);
	CHECK_EQ(status_stored_delivered(e.t.gw), idx - 1);
	for (;;) {
		bool more;
		CHECK_EQ(stored_loop_turn(e.t.l, &more), 0);
		if (tst_take_result(e.t.results, &r) == 0)
			break;
		CHECK(more);
		CHECK(++turns < 100);
	}
	check_compaction_answer(&r, &o, idx);
	CHECK_EQ(status_stored_delivered(e.t.gw), idx);
	CHECK_EQ(status_waiting_read(e.t.gw, w, STATUS_WAITING_MAX), 0);
	/* the next stored has nothing to take over */
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	env_turn(&e);
	CHECK_EQ(take_interim(e.t.results, &im), -EAGAIN);

	/* killed after the deletion was done and durable, before the
	 * answer: the region still names the request (written here as the
	 * dead stored left it), and the next stored answers it at its open;
	 * not a request of another member, nor one whose entry it applies
	 * again (above the consistent index) */
	w[0] = (struct status_waiting){ .origin = o, .index = idx, .term = 2 };
	w[1] = w[0];
	w[1].origin.member_id = TST_MEMBER + 1;
	w[2] = w[0];
	w[2].index = idx + 1;
	w[2].origin.request_id = o.request_id + 100;
	status_waiting_write(e.t.st, w, 3);
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	CHECK_EQ(tst_take_result(e.t.results, &r), 0);
	check_compaction_answer(&r, &o, idx);
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	CHECK_EQ(status_waiting_read(e.t.gw, w, STATUS_WAITING_MAX), 0);

	/* a record its writer died in the middle of is not taken over */
	w[0] = (struct status_waiting){ .origin = o, .index = idx, .term = 2 };
	status_waiting_write(e.t.st, w, 1);
	_Atomic uint64_t *seq = (_Atomic uint64_t *)shm_status_at(e.t.st)->stored_waiting;
	atomic_fetch_add(seq, 1); /* odd: a write in progress */
	CHECK_EQ(status_waiting_read(e.t.gw, w, STATUS_WAITING_MAX), -EAGAIN);
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	CHECK_EQ(tst_take_result(e.t.results, &r), -EAGAIN);
	CHECK_EQ(status_waiting_read(e.t.gw, w, STATUS_WAITING_MAX), 0);
	tbuf_free(&r.body);
	env_fini(&e);
}

static void test_restart_hold(void)
{
	struct env e;
	struct status_stored before, st;
	struct tst_result r = { 0 };
	char key[32];
	uint64_t idx;

	env_init(&e, 8);
	for (idx = 1; idx <= 10; idx++) {
		snprintf(key, sizeof(key), "k%llu", (unsigned long long)idx);
		env_put(&e, idx, key, "v");
	}
	env_turn(&e);
	CHECK_EQ(stored_loop_checkpoint(e.t.l), 0); /* durable at 8 */
	env_turn(&e);
	before = env_status(&e);
	CHECK_EQ(before.applied_index, 10);
	CHECK_EQ(before.durable_index, 8);
	while (tst_take_result(e.t.results, &r) == 0)
		;

	/* "crash": close without a checkpoint, open again */
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	st = env_status(&e);
	CHECK_EQ(st.epoch, before.epoch + 1);
	CHECK_EQ(st.durable_index, 8);
	/* the previous root stays published */
	CHECK_EQ(st.root_page, before.root_page);
	CHECK_EQ(st.txid, before.txid);
	CHECK_EQ(st.applied_index, 10);
	CHECK_EQ(st.revision, before.revision);
	CHECK_EQ(env_stats(&e).applied_index, 8);
	CHECK(!env_stats(&e).publishing);

	/* raftd replays from durable + 1; 9 alone does not reach 10 */
	env_put(&e, 9, "k9", "v");
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.txid, before.txid);
	CHECK_EQ(st.applied_index, 10);
	/* its result still goes out (the published root holds it) */
	CHECK_EQ(tst_take_result(e.t.results, &r), 0);
	CHECK_EQ(r.h.index, 9);
	env_put(&e, 10, "k10", "v");
	env_put(&e, 11, "k11", "v");
	env_turn(&e);
	st = env_status(&e);
	CHECK(env_stats(&e).publishing);
	CHECK_EQ(st.applied_index, 11);
	CHECK(st.txid > before.txid);
	CHECK_EQ(st.revision, before.revision + 1);
	tbuf_free(&r.body);
	env_fini(&e);
}

struct runner {
	struct stored_loop *l;
	volatile sig_atomic_t stop;
	int rc;
};

static void *run_thread(void *arg)
{
	struct runner *rn = arg;
	rn->rc = stored_loop_run(rn->l, &rn->stop);
	return NULL;
}

static void test_run(void)
{
	struct env e;
	struct runner rn = { 0 };
	struct tst_result r = { 0 };
	pthread_t th;

	env_init(&e, 0);
	e.t.o.checkpoint_ms = 20;
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	rn.l = e.t.l;
	rn.rc = -1;
	/* a simple token that expired 9 s ago, and one that lives; a lookup
	 * "from back then" finds the first until the loop reaps it */
	uint64_t then = (uint64_t)clock_now_ms() - 10000;
	char user[SHM_TOKEN_USER_MAX];
	size_t ulen;
	CHECK_EQ(shm_tokens_add(e.t.st, "old.1", 5, "u", 1, then, 1000), 0);
	CHECK_EQ(shm_tokens_add(e.t.st, "new.2", 5, "u", 1, then, 60000), 0);
	CHECK_EQ(shm_tokens_lookup(e.t.gw, "old.1", 5, then, 0, user, sizeof(user), &ulen), 0);
	CHECK_EQ(pthread_create(&th, NULL, run_thread, &rn), 0);
	/* an entry wakes the sleeping loop; the checkpoint follows by itself */
	env_put(&e, 1, "a", "1");
	CHECK(TEST_WAIT_FOR(tst_take_result(e.t.results, &r) == 0, 5000));
	CHECK_EQ(r.h.index, 1);
	CHECK(TEST_WAIT_FOR(env_status(&e).durable_index == 1, 5000));
	CHECK(TEST_WAIT_FOR(shm_tokens_lookup(e.t.gw, "old.1", 5, then, 0, user, sizeof(user),
					      &ulen) == -ENOENT, 5000));
	CHECK_EQ(shm_tokens_lookup(e.t.gw, "new.2", 5, then, 0, user, sizeof(user), &ulen), 0);
	rn.stop = 1;
	shm_doorbell_ring(shm_role_doorbell(e.t.gw, SHM_ROLE_STORED));
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(rn.rc, 0);
	tbuf_free(&r.body);
	env_fini(&e);
}

/* The gateway's side of the delivered index, against the running loop:
 * it reads the index, then drains its ring, and must have every result up
 * to the index by then; each result it takes has its root published. */
static void test_delivered_while_running(void)
{
	const uint64_t total = 600, chunk = 20;
	struct env e;
	struct runner rn = { 0 };
	struct tst_result r = { 0 };
	uint64_t got = 0, reads = 0;
	char key[32];
	pthread_t th;

	env_init(&e, 3); /* many small batches */
	rn.l = e.t.l;
	CHECK_EQ(pthread_create(&th, NULL, run_thread, &rn), 0);
	for (uint64_t next = 1; got < total;) {
		uint64_t delivered = status_stored_delivered(e.t.gw);
		reads++;
		while (tst_take_result(e.t.results, &r) == 0) {
			CHECK_EQ(r.h.index, got + 1);
			CHECK(env_status(&e).applied_index >= r.h.index);
			got = r.h.index;
		}
		if (got < delivered) {
			fprintf(stderr, "delivered index %llu passed result %llu\n",
				(unsigned long long)delivered, (unsigned long long)got + 1);
			exit(1);
		}
		if (next <= total && next - got <= chunk) {
			for (uint64_t end = next + chunk; next < end && next <= total; next++) {
				snprintf(key, sizeof(key), "k%llu", (unsigned long long)next % 50);
				env_put(&e, next, key, "v");
			}
			shm_doorbell_ring(shm_role_doorbell(e.t.rf, SHM_ROLE_STORED));
		}
	}
	CHECK(TEST_WAIT_FOR(status_stored_delivered(e.t.gw) == total, 5000));
	CHECK(env_stats(&e).batches >= total / 3);
	rn.stop = 1;
	shm_doorbell_ring(shm_role_doorbell(e.t.gw, SHM_ROLE_STORED));
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK_EQ(rn.rc, 0);
	printf("delivered index read %llu times over %llu results\n", (unsigned long long)reads,
	       (unsigned long long)got);
	tbuf_free(&r.body);
	env_fini(&e);
}

/* Reads all of path (at most cap - 1 bytes) as a string. */
static void read_text(const char *path, char *buf, size_t cap)
{
	ssize_t n, got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	CHECK(fd >= 0);
	while ((n = read(fd, buf + got, cap - 1 - (size_t)got)) > 0)
		got += n;
	CHECK(n == 0);
	buf[got] = '\0';
	close(fd);
}

static void test_corrupt_root(void)
{
	struct env e;
	struct status_stored st;
	char db[512], logpath[512], page[64], logged[16384];
	uint32_t ps;
	uint16_t flags = 0x0040; /* neither branch nor leaf */
	int fd, log_fd, rc;

	env_init(&e, 8);
	env_put(&e, 1, "a", "1");
	env_put(&e, 2, "b", "2");
	env_turn(&e);
	CHECK_EQ(stored_loop_checkpoint(e.t.l), 0);
	st = env_status(&e);
	CHECK(st.root_page >= 2);
	stored_loop_free(e.t.l);
	e.t.l = NULL;

	/* the durable meta names the published root: break its flags */
	snprintf(db, sizeof(db), "%s/member/snap/db", e.t.m.data_dir);
	fd = open(db, O_RDWR | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(pread(fd, &ps, sizeof(ps), PAGE_HDR_SIZE + 8), sizeof(ps)); /* meta 0 */
	CHECK(page_size_valid(ps));
	CHECK_EQ(pwrite(fd, &flags, sizeof(flags), (off_t)(st.root_page * ps + 8)),
		 sizeof(flags));
	close(fd);

	snprintf(logpath, sizeof(logpath), "%s/open.log", e.t.m.dir);
	log_fd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(log_fd >= 0);
	log_set_fd(log_fd);
	rc = stored_loop_open(e.t.st, &e.t.o, &e.t.l);
	log_set_fd(2);
	close(log_fd);
	CHECK_EQ(rc, -EUCLEAN);
	CHECK(e.t.l == NULL);

	snprintf(page, sizeof(page), "page %llu ", (unsigned long long)st.root_page);
	printf("corrupt root: %s\n", errmsg_get(rc));
	CHECK(strstr(errmsg_get(rc), page) != NULL);
	CHECK(strstr(errmsg_get(rc), db) != NULL);
	CHECK(strstr(errmsg_get(rc), "restore from a snapshot") != NULL);
	read_text(logpath, logged, sizeof(logged));
	fputs(logged, stdout);
	CHECK(strstr(logged, page) != NULL);
	CHECK(strstr(logged, "invalid flags 0x0040") != NULL);
	CHECK(strstr(logged, "restore from a snapshot") != NULL);
	unlink(logpath);
	env_fini(&e);
}

/* ---- a failed sync under a continuous writer ---- */

#define SF_PUTS 600u

static struct diskio *sf_io;

/* The db's disk I/O: the fault backend, its chains (the checkpoints) run
 * when reaped, after the commits written meanwhile. */
static int sf_open(int fd, void *arg, struct diskio **out)
{
	struct diskio_fault_opts fo = diskio_fault_defaults();
	(void)arg;
	fo.chain = DISKIO_FAULT_CHAIN_AT_REAP;
	int rc = diskio_fault_open(fd, &fo, out);
	if (rc == 0)
		sf_io = *out;
	return rc;
}

/* Commits put i, key "w<i>" = "v<i>", at index i. 0, or -EAGAIN when the
 * ring is full. */
static int sf_put(struct env *e, uint64_t i)
{
	char key[16], val[16];
	snprintf(key, sizeof(key), "w%05llu", (unsigned long long)i);
	snprintf(val, sizeof(val), "v%llu", (unsigned long long)i);
	struct msg_origin o = env_origin(e);
	tst_put(key, val, &o, &e->d);
	return tst_commit(e->t.committed, i, 2, RAFTPB__ENTRY_TYPE__EntryNormal, e->d.p, e->d.len);
}

/* Takes the results waiting; marks the puts they acknowledge. */
static void sf_drain(struct env *e, bool *acked, uint64_t *n)
{
	struct tst_result r = { 0 };
	while (tst_take_result(e->t.results, &r) == 0) {
		CHECK_EQ(r.h.status, 0);
		CHECK(r.h.index >= 1 && r.h.index <= SF_PUTS);
		if (!acked[r.h.index])
			(*n)++;
		acked[r.h.index] = true;
	}
	tbuf_free(&r.body);
}

/* Every acknowledged put is in the db at the published root, with its
 * value. */
static void sf_check(struct env *e, const bool *acked)
{
	struct status_stored st = env_status(e);
	char path[600];
	struct tst_view w;
	struct mvcc_range_result res;
	Etcdserverpb__RangeRequest all = ETCDSERVERPB__RANGE_REQUEST__INIT;
	static uint8_t zero; /* key "\0" with range_end "\0": every key */
	static bool found[SF_PUTS + 1];

	all.key.len = 1;
	all.key.data = &zero;
	all.range_end = all.key;
	snprintf(path, sizeof(path), "%s/member/snap/db", e->t.m.data_dir);
	tst_view_open(&w, path, &st);
	mvcc_range_result_init(&res);
	CHECK_EQ(mvcc_range(&w.v, &all, &res), 0);
	memset(found, 0, sizeof(found));
	for (size_t k = 0; k < res.n; k++)
		found[tst_put_number(&res.kvs[k].f, SF_PUTS)] = true;
	for (uint64_t i = 1; i <= SF_PUTS; i++)
		CHECK(!acked[i] || found[i]);
	mvcc_range_result_free(&res);
	tst_view_close(&w);
}

static void test_failed_sync(void)
{
	struct env e;
	static bool acked[SF_PUTS + 1];
	uint64_t next = 1, nacked = 0;
	/* raftd keeps its log back only to the durable index stored
	 * published (invariant 5, docs/invariants.md): what lies before is
	 * gone. */
	uint64_t raft_kept = 0;
	int rc = 0;

	memset(acked, 0, sizeof(acked));
	env_init(&e, 8);
	e.t.o.checkpoint_entries = 40;
	e.t.o.io_open = sf_open;
	stored_loop_free(e.t.l);
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);

	/* The writer puts and the loop turns until a checkpoint's sync,
	 * failing from the 300th put on, stops the loop. */
	while (rc == 0 && next <= SF_PUTS) {
		for (int k = 0; k < 4 && next <= SF_PUTS; k++) {
			int pr = sf_put(&e, next);
			if (pr == -EAGAIN)
				break;
			CHECK_EQ(pr, 0);
			if (next++ == 300)
				diskio_fault_fail_sync_after(sf_io, 0);
		}
		rc = stored_loop_turn(e.t.l, NULL);
		sf_drain(&e, acked, &nacked);
		if (env_status(&e).durable_index > raft_kept)
			raft_kept = env_status(&e).durable_index;
	}
	CHECK_INVARIANT(INV12_DURABLE, rc < 0);
	CHECK_INVARIANT_EQ(INV12_DURABLE, diskio_failed(sf_io), -EIO);
	uint64_t acked_before = nacked;
	struct status_stored st = env_status(&e);
	/* Puts were acknowledged past the durable index: only the replay
	 * can bring them back. */
	CHECK(st.durable_index > 0 && st.applied_index > st.durable_index);
	CHECK_EQ(raft_kept, st.durable_index);
	/* The root that reaches pages the failed sync may have lost is no
	 * longer offered to readers; the applied index stays published. */
	CHECK_INVARIANT_EQ(INV12_DURABLE, st.root_page, 0);
	bool beyond = false;
	for (uint64_t i = st.durable_index + 1; i <= SF_PUTS; i++)
		beyond = beyond || acked[i];
	CHECK(beyond);
	stored_loop_free(e.t.l);

	/* stored restarts on the default backend; as raftd does on a new
	 * epoch, everything after the durable index is handed over again. */
	e.t.o.io_open = NULL;
	CHECK_EQ(stored_loop_open(e.t.st, &e.t.o, &e.t.l), 0);
	st = env_status(&e);
	/* It starts from the checkpoint it published as durable: raftd
	 * still has everything after it. Readers get no root until the
	 * replay reaches the applied index published before. */
	CHECK_INVARIANT_EQ(INV5_COMMITTED_DURABLE, st.durable_index, raft_kept);
	CHECK_INVARIANT_EQ(INV4_STORED_DIES, st.root_page, 0);
	uint64_t last = next - 1;
	for (uint64_t i = st.durable_index + 1; i <= last;) {
		for (int k = 0; k < 16 && i <= last; k++, i++)
			CHECK_EQ(sf_put(&e, i), 0);
		env_turn(&e);
		sf_drain(&e, acked, &nacked);
	}
	while (env_stats(&e).applied_index < last)
		env_turn(&e);
	sf_drain(&e, acked, &nacked);
	CHECK_EQ(stored_loop_checkpoint(e.t.l), 0);
	CHECK_EQ(env_status(&e).durable_index, last);
	CHECK(env_status(&e).root_page != 0);
	sf_check(&e, acked);
	printf("failed sync: %llu puts acknowledged before it, all there after the restart\n",
	       (unsigned long long)acked_before);
	env_fini(&e);
}

/* The auth store's flag and revision go out in the status record with
 * the batch that changed them. */
static void test_auth_status(void)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthUserAddRequest ua = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	Etcdserverpb__AuthUserGrantRoleRequest gr = ETCDSERVERPB__AUTH_USER_GRANT_ROLE_REQUEST__INIT;
	Etcdserverpb__AuthEnableRequest en = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;
	Authpb__UserAddOptions opts = AUTHPB__USER_ADD_OPTIONS__INIT;
	struct msg_origin o;
	struct status_stored st;
	struct env e;

	env_init(&e, 0);
	st = env_status(&e);
	CHECK(!st.auth_enabled);
	CHECK_EQ(st.auth_revision, 1); /* etcd's fresh auth store */
	ua.name = "root";
	opts.no_password = true;
	ua.options = &opts;
	gr.user = "root";
	gr.role = "root";
	for (uint64_t i = 1; i <= 3; i++) {
		req.auth_user_add = i == 1 ? &ua : NULL;
		req.auth_user_grant_role = i == 2 ? &gr : NULL;
		req.auth_enable = i == 3 ? &en : NULL;
		o = env_origin(&e);
		tst_entry(&req, &o, &e.d);
		CHECK_EQ(tst_commit(e.t.committed, i, 2, RAFTPB__ENTRY_TYPE__EntryNormal, e.d.p,
				    e.d.len),
			 0);
		if (i == 2) {
			env_turn(&e);
			st = env_status(&e);
			CHECK(!st.auth_enabled);
			CHECK_EQ(st.auth_revision, 3);
		}
	}
	env_turn(&e);
	st = env_status(&e);
	CHECK_EQ(st.applied_index, 3);
	CHECK(st.auth_enabled);
	CHECK_EQ(st.auth_revision, 3); /* an enable is no revision */
	env_fini(&e);
}

int main(void)
{
	test_index_rules();
	test_batches_and_checkpoints();
	test_batch_wakes();
	test_physical_compaction();
	test_compaction_restart();
	test_restart_hold();
	test_run();
	test_delivered_while_running();
	test_corrupt_root();
	test_failed_sync();
	test_auth_status();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_loop: ok\n");
	return 0;
}
