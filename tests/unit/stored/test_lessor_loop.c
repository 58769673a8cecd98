/*
 * Unit tests for stored/lessor_loop.c's keepalives that wait: a keepalive
 * of a lease that expired and waits for its revoke is parked, not
 * answered, while others are answered at once; the revoke answers its
 * waiters TTL 0; a demotion answers them "not leader", and so does a move
 * to another term (a new promotion extended the lease, so no revoke
 * comes for it); past LESSOR_WAITERS_MAX a keepalive is answered TTL 0 at
 * once; a waiter does not outlive its request (a gateway's timeout, a
 * slot claimed again).
 *
 * Region handles of their own play stored (the loop's), raftd (its status
 * record) and a gateway (a slot, its request and result rings). Leases are
 * granted with a grant time in the past, so they are expired at once
 * without waiting.
 *
 * Breaks invariants 8 and 2 (docs/invariants.md) on purpose: a leader
 * change under a waiting keepalive (test_new_term), a slot claimed again
 * under one (test_stale).
 */
#include "stored_util.h"

#include "etcdserverpb/rpc.pb-c.h"
#include "stored/alloc.h"
#include "stored/lessor.h"
#include "stored/lessor_loop.h"
#include "stored/results.h"

#define SEC 1000000000LL
#define LIFE (10 * SEC) /* the loop's waiter_life_ns here */

/* The loop's clock: the tests move it. */
static int64_t fake_now_ns;

static int64_t fake_clock(void)
{
	return fake_now_ns;
}

struct fix {
	struct tst_loop e;              /* the region's handles; no stored loop */
	struct ring *requests;
	struct tst_store store;
	struct lessor *lessor;
	struct stored_results rs;
	struct lessor_loop ll;
	uint64_t rid;                   /* the last request id sent */
	struct tst_result got;
};

static void fix_init(struct fix *f)
{
	struct lessor_opts lo = { .min_ttl = 1, .extend_ns = SEC };
	char dir[256];

	memset(f, 0, sizeof(*f));
	tst_loop_init(&f->e, 0);
	f->requests = shm_slot_ring(f->e.gw, f->e.slot.index, SHM_SLOT_TO_STORED);
	/* the store, for the grants' txn, in the member's directory (a copy
	 * the size the store's path leaves room for) */
	CHECK(strlen(f->e.m.dir) < sizeof(dir));
	memcpy(dir, f->e.m.dir, strlen(f->e.m.dir) + 1);
	tst_store_open(&f->store, dir);
	CHECK_EQ(lessor_new(&lo, &f->lessor), 0);
	CHECK_EQ(stored_results_init(&f->rs, f->e.st, TST_MEMBER), 0);
	lessor_loop_init(&f->ll, f->e.st, f->lessor, &f->rs, TST_MEMBER, TST_CLUSTER);
	fake_now_ns = 10000 * SEC;
	f->ll.clock = fake_clock;
	f->ll.waiter_life_ns = LIFE;
}

static void fix_fini(struct fix *f)
{
	lessor_loop_fini(&f->ll);
	stored_results_fini(&f->rs);
	lessor_free(f->lessor);
	tst_store_close(&f->store);
	tbuf_free(&f->got.body);
	tst_loop_fini(&f->e);
}

/* raftd's status: this member leads (or not) in term; the loop's tick
 * follows it. */
static void fix_raftd(struct fix *f, bool leader, uint64_t term)
{
	struct status_raftd rs = { .leader_id = leader ? TST_MEMBER : 2, .term = term,
				   .is_leader = leader };

	status_raftd_write(f->e.rf, &rs);
	lessor_loop_tick(&f->ll);
	CHECK_EQ(lessor_is_primary(f->lessor), leader);
	CHECK_EQ(lessor_term(f->lessor), term);
}

/* Grants lease id (TTL ttl seconds) as granted long ago: expired. */
static void fix_grant_expired(struct fix *f, int64_t id, int64_t ttl)
{
	int64_t granted;

	CHECK_EQ(lessor_grant(f->lessor, mvcc_batch_txn(f->store.s), id, ttl,
			      fake_now_ns - 1000 * SEC, &granted), 0);
}

/* The fixture, leading in term 2, with lease 7 expired. */
static void fix_start(struct fix *f)
{
	fix_init(f);
	fix_raftd(f, true, 2);
	fix_grant_expired(f, 7, 5);
}

/* A gateway's keepalive of lease id, confirmed in term (the gateway's
 * ReadIndex round: msg_keepalive.term), then one turn of the loop. */
static void fix_keepalive_in(struct fix *f, int64_t id, uint64_t term)
{
	struct msg_keepalive m = {
		.origin = tst_origin(f->e.slot.index, f->e.slot.generation, ++f->rid),
		.lease_id = id, .op = MSG_LEASE_KEEPALIVE, .term = term,
	};

	CHECK_EQ(ring_push(f->requests, MSG_KEEPALIVE, &m, sizeof(m)), 0);
	lessor_loop_requests(&f->ll, 1);
}

/* The same, confirmed in the term raftd publishes. */
static void fix_keepalive(struct fix *f, int64_t id)
{
	struct status_raftd rs;

	CHECK_EQ(status_raftd_read(f->e.rf, &rs), 0);
	fix_keepalive_in(f, id, rs.term);
}

/* The next answer must be Unavailable with text to request rid. */
static void fix_expect_unavailable(struct fix *f, uint64_t rid, const char *text)
{
	CHECK_EQ(tst_take_result(f->e.results, &f->got), 0);
	CHECK_EQ(f->got.h.origin.request_id, rid);
	CHECK_EQ(f->got.h.status, 14);
	CHECK(tst_body_is(&f->got, text));
}

/* The next answer must be a LeaseKeepAliveResponse to request rid: lease
 * id, TTL ttl, this member's header. */
static void fix_expect_ttl(struct fix *f, uint64_t rid, int64_t id, int64_t ttl)
{
	Etcdserverpb__LeaseKeepAliveResponse *r;

	CHECK_EQ(tst_take_result(f->e.results, &f->got), 0);
	CHECK_EQ(f->got.h.origin.request_id, rid);
	CHECK_EQ(f->got.h.status, 0);
	r = etcdserverpb__lease_keep_alive_response__unpack(NULL, f->got.body.len, f->got.body.p);
	CHECK(r != NULL);
	CHECK_EQ(r->id, id);
	CHECK_EQ(r->ttl, ttl);
	CHECK(r->header != NULL);
	CHECK_EQ(r->header->member_id, TST_MEMBER);
	CHECK_EQ(r->header->cluster_id, TST_CLUSTER);
	etcdserverpb__lease_keep_alive_response__free_unpacked(r, NULL);
}

/* Revokes lease id as its applied revoke does (the lessor's part). */
static void fix_revoke(struct fix *f, int64_t id)
{
	CHECK_EQ(lessor_remove(f->lessor, mvcc_batch_txn(f->store.s), id), 0);
}

/* No answer waits on the gateway's ring. */
static void fix_expect_none(struct fix *f)
{
	CHECK_EQ(tst_take_result(f->e.results, &f->got), -EAGAIN);
}

/* A waiter of term 2 whose member leads again in term 3 (the promotion
 * extended its lease: no revoke comes) is answered "not leader" at once,
 * as etcd's Renew is on the demotion that ended its term. */
static void test_new_term(void)
{
	struct fix f;

	fix_start(&f);
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 1);
	fix_expect_none(&f);

	fix_raftd(&f, true, 3);
	CHECK(lessor_exists(f.lessor, 7));
	lessor_loop_requests(&f.ll, 1);
	CHECK_INVARIANT_EQ(INV8_LEASES, f.ll.nwaiters, 0);
	fix_expect_unavailable(&f, f.rid, "etcdserver: not leader");
	fix_fini(&f);
}

/* A waiter does not outlive its request (invariant 2): once it has
 * waited as long as its gateway waits (which has answered the client
 * "request timed out" by then) it is answered so and leaves the table,
 * and one whose slot was claimed again (a restarted gateway, a new
 * generation) leaves it at once, unanswered. */
static void test_stale(void)
{
	struct fix f;

	fix_start(&f);
	fix_keepalive(&f, 7);
	uint64_t first = f.rid;
	fake_now_ns += SEC;
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 2);

	/* the first one's life is over, not the second one's */
	fake_now_ns += LIFE - SEC - 1;
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 2);
	fix_expect_none(&f);
	fake_now_ns += 1;
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 1);
	fix_expect_unavailable(&f, first, "etcdserver: request timed out");
	fix_expect_none(&f);

	/* the gateway's slot is claimed again: its waiter goes unanswered */
	shm_slot_release(f.e.gw, &f.e.slot);
	CHECK_EQ(shm_slot_claim(f.e.gw, &f.e.slot), 0);
	lessor_loop_requests(&f.ll, 1);
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, f.ll.nwaiters, 0);
	CHECK_INVARIANT_EQ(INV2_REQUEST_IDENTITY, tst_take_result(f.e.results, &f.got), -EAGAIN);
	CHECK(lessor_exists(f.lessor, 7));

	/* the new holder's keepalive waits as any */
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 1);
	fix_expect_none(&f);
	fix_fini(&f);
}

/* A keepalive of an expired lease waits, turn after turn, while the
 * loop asks to be run again soon; keepalives of a live lease and of an
 * unknown one are answered at once meanwhile; the revoke answers every
 * waiter of the lease TTL 0, in the order they came, and only them. */
static void test_park_and_revoke(void)
{
	struct fix f;
	int64_t granted;

	fix_start(&f);
	fix_grant_expired(&f, 8, 5);
	CHECK_EQ(lessor_grant(f.lessor, mvcc_batch_txn(f.store.s), 9, 60, fake_now_ns, &granted), 0);
	fix_keepalive(&f, 7);
	fix_keepalive(&f, 8);
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 3);
	fix_expect_none(&f);
	/* it looks again before a tick's time: a demotion may wake nothing */
	CHECK(lessor_loop_timeout_ms(&f.ll) >= 1);
	CHECK(lessor_loop_timeout_ms(&f.ll) <= LESSOR_TICK_NS / 1000000);

	fix_keepalive(&f, 9);
	fix_expect_ttl(&f, f.rid, 9, 60);
	fix_keepalive(&f, 10);
	fix_expect_ttl(&f, f.rid, 10, 0);
	for (int i = 0; i < 3; i++) {
		fake_now_ns += SEC;
		lessor_loop_tick(&f.ll);
		lessor_loop_requests(&f.ll, 1);
	}
	CHECK_EQ(f.ll.nwaiters, 3);
	fix_expect_none(&f);

	fix_revoke(&f, 7);
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 1);
	fix_expect_ttl(&f, 1, 7, 0);
	fix_expect_ttl(&f, 3, 7, 0);
	fix_expect_none(&f);
	fix_revoke(&f, 8);
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 0);
	fix_expect_ttl(&f, 2, 8, 0);
	fix_expect_none(&f);
	fix_fini(&f);
}

/* Waiters are answered "not leader" when their member stops leading, and
 * a keepalive that comes then too, at once. */
static void test_demotion(void)
{
	struct fix f;

	fix_start(&f);
	fix_keepalive(&f, 7);
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 2);
	fix_raftd(&f, false, 2);
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 0);
	fix_expect_unavailable(&f, 1, "etcdserver: not leader");
	fix_expect_unavailable(&f, 2, "etcdserver: not leader");
	fix_expect_none(&f);
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, 0);
	fix_expect_unavailable(&f, 3, "etcdserver: not leader");
	fix_fini(&f);
}

/* A renewal is made only by the lessor primary in the very term raftd
 * confirmed the member led in after the renewal came: one not confirmed
 * (term 0), one confirmed in an earlier term (a leader stopped or cut
 * off since; another may have led and expired the lease meanwhile) and
 * one of a term the lessor has not seen yet are answered "not leader"
 * and renew nothing; the confirmed one renews. */
static void test_confirmed_term(void)
{
	struct fix f;
	int64_t granted;

	fix_init(&f);
	fix_raftd(&f, true, 3);
	CHECK_EQ(lessor_grant(f.lessor, mvcc_batch_txn(f.store.s), 9, 60, fake_now_ns, &granted), 0);
	fake_now_ns += 50 * SEC;
	ProtobufCBinaryData *kv;
	size_t nkv;
	int64_t before = 0, remaining = 0;
	CHECK_EQ(lessor_time_to_live(f.lessor, 9, fake_now_ns, false, NULL, &before, &granted, &kv,
				     &nkv), 0);
	CHECK(before > 0 && before < 60);
	const uint64_t wrong[] = { 0, 2, 4 };
	for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
		fix_keepalive_in(&f, 9, wrong[i]);
		CHECK_EQ(f.ll.nwaiters, 0);
		fix_expect_unavailable(&f, f.rid, "etcdserver: not leader");
		CHECK_EQ(lessor_time_to_live(f.lessor, 9, fake_now_ns, false, NULL, &remaining,
					     &granted, &kv, &nkv), 0);
		CHECK_INVARIANT_EQ(INV8_LEASES, remaining, before);
	}
	fix_keepalive_in(&f, 9, 3);
	fix_expect_ttl(&f, f.rid, 9, 60);
	CHECK_EQ(lessor_time_to_live(f.lessor, 9, fake_now_ns, false, NULL, &remaining, &granted,
				     &kv, &nkv), 0);
	CHECK_EQ(remaining, 60);
	fix_expect_none(&f);
	fix_fini(&f);
}

/* A full table: the keepalive past LESSOR_WAITERS_MAX is answered TTL 0
 * at once, and those that wait still get their answer at the revoke. */
static void test_full_table(void)
{
	struct fix f;

	fix_start(&f);
	for (int i = 0; i < LESSOR_WAITERS_MAX; i++)
		fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, LESSOR_WAITERS_MAX);
	fix_expect_none(&f);
	fix_keepalive(&f, 7);
	CHECK_EQ(f.ll.nwaiters, LESSOR_WAITERS_MAX);
	fix_expect_ttl(&f, f.rid, 7, 0);
	fix_expect_none(&f);

	fix_revoke(&f, 7);
	lessor_loop_requests(&f.ll, 1);
	CHECK_EQ(f.ll.nwaiters, 0);
	for (uint64_t rid = 1; rid <= LESSOR_WAITERS_MAX; rid++)
		fix_expect_ttl(&f, rid, 7, 0);
	fix_expect_none(&f);
	fix_fini(&f);
}

int main(void)
{
	test_park_and_revoke();
	test_demotion();
	test_full_table();
	test_new_term();
	test_stale();
	test_confirmed_term();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_lessor_loop: ok\n");
	return 0;
}
