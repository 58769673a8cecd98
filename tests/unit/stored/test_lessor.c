/* stored/lessor.c and lessor_apply.c: etcd's TTL rules, expiry order and
 * batching, extension on promotion, checkpoints, revokes that delete the
 * lease's keys in one revision, and a reload from the db.
 * test_expiry_and_promote checks invariant 8 (docs/invariants.md) at a
 * promotion: every lease gets its TTL plus the extension from then, and
 * none expires sooner. */
#include "mvcc_util.h"

#include "stored/lessor.h"
#include "stored/lessor_apply.h"
#include "stored/lessor_loop.h"

#define SEC 1000000000LL
#define CHECK(c) T_CHECK(c)
#define CHECK_EQ(a, b) \
	do { \
		long long a_ = (long long)(a), b_ = (long long)(b); \
		if (a_ != b_) \
			T_FAIL("%s == %s (%lld != %lld)", #a, #b, a_, b_); \
	} while (0)

static struct tdb D;
static struct lessor *L;

static void on_event(void *arg, const struct mvcc_event *ev)
{
	(void)arg;
	lessor_on_event(L, ev);
}

/* Applies one lease entry as the apply loop does; returns its code. */
static int apply(Etcdserverpb__InternalRaftRequest *req)
{
	ProtobufCMessage *resp;
	Etcdserverpb__ResponseHeader **hdr;
	tdb_begin(&D);
	tdb_entry(&D);
	int rc = lessor_apply(D.s, L, req, &D.a, &resp, &hdr);
	tdb_commit(&D);
	return rc;
}

static int grant(int64_t id, int64_t ttl)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantRequest g = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	g.id = id;
	g.ttl = ttl;
	req.lease_grant = &g;
	return apply(&req);
}

static int lease_revoke(int64_t id)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseRevokeRequest r = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	r.id = id;
	req.lease_revoke = &r;
	return apply(&req);
}

static int checkpoint(int64_t id, int64_t remaining)
{
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseCheckpointRequest cr = ETCDSERVERPB__LEASE_CHECKPOINT_REQUEST__INIT;
	Etcdserverpb__LeaseCheckpoint cp = ETCDSERVERPB__LEASE_CHECKPOINT__INIT;
	Etcdserverpb__LeaseCheckpoint *cps[1] = { &cp };
	cp.id = id;
	cp.remaining_ttl = remaining;
	cr.n_checkpoints = 1;
	cr.checkpoints = cps;
	req.lease_checkpoint = &cr;
	return apply(&req);
}

static int put_leased(const char *k, int64_t lease)
{
	Etcdserverpb__PutRequest p = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__PutResponse *r;
	p.key = tb(k);
	p.value = tb("v");
	p.lease = lease;
	tdb_begin(&D);
	tdb_entry(&D);
	int rc = mvcc_put(D.s, &p, &D.a, &r);
	tdb_commit(&D);
	return rc;
}

static int64_t ttl_of(int64_t id, int64_t now, int64_t *granted, size_t *nkeys)
{
	struct arena a;
	int64_t rem = -1, g = 0;
	ProtobufCBinaryData *k;
	size_t n = 0;
	arena_init(&a);
	if (lessor_time_to_live(L, id, now, true, &a, &rem, &g, &k, &n) != 0)
		rem = -1;
	arena_release(&a);
	if (granted)
		*granted = g;
	if (nkeys)
		*nkeys = n;
	return rem;
}

static void test_rules(void)
{
	CHECK_EQ(lessor_min_ttl(1000, 100), 2);   /* 15 ticks of 100 ms -> 1.5 s -> 2 */
	CHECK_EQ(lessor_min_ttl(5000, 500), 8);   /* 15 ticks of 500 ms -> 7.5 s -> 8 */
	CHECK_EQ(grant(0, 10), LESSOR_ERR_NOT_FOUND);
	CHECK_EQ(grant(7, LESSOR_MAX_TTL + 1), LESSOR_ERR_TTL_TOO_LARGE);
	CHECK_EQ(grant(7, 1), 0);
	CHECK_EQ(grant(7, 10), LESSOR_ERR_EXISTS);
	int64_t g;
	/* raised to the minimum TTL; not primary: never expires */
	CHECK_EQ(ttl_of(7, 0, &g, NULL), 2);
	CHECK_EQ(g, 2);
	CHECK_EQ(lease_revoke(8), LESSOR_ERR_NOT_FOUND);
	CHECK_EQ(lease_revoke(7), 0);
	CHECK_EQ(lessor_count(L), 0);
	CHECK_EQ(strcmp(lessor_strerror(LESSOR_ERR_TTL_TOO_LARGE), "etcdserver: too large lease TTL"), 0);
	CHECK_EQ(lessor_grpc_code(LESSOR_ERR_TTL_TOO_LARGE), 11);
	CHECK_EQ(lessor_grpc_code(LESSOR_ERR_EXISTS), 9);
}

static void test_revoke_deletes_keys(void)
{
	struct mvcc_state st;
	CHECK_EQ(grant(100, 60), 0);
	CHECK_EQ(put_leased("a", 100), 0);
	CHECK_EQ(put_leased("b", 100), 0);
	CHECK_EQ(put_leased("c", 100), 0);
	CHECK_EQ(put_leased("c", 0), 0);          /* c leaves the lease */
	CHECK_EQ(put_leased("x", 4242), MVCC_ERR_LEASE_NOT_FOUND);
	size_t n;
	CHECK_EQ(ttl_of(100, 0, NULL, &n), 60);
	CHECK_EQ(n, 2);
	mvcc_store_state(D.s, &st);
	int64_t before = st.rev;
	CHECK_EQ(lease_revoke(100), 0);
	mvcc_store_state(D.s, &st);
	CHECK_EQ(st.rev, before + 1);             /* both deletes in one revision */
	CHECK_EQ(ttl_of(100, 0, NULL, NULL), -1);
}

static void test_expiry_and_promote(void)
{
	int64_t now = 1000 * SEC, ids[4];
	CHECK_EQ(grant(1, 10), 0);
	CHECK_EQ(grant(2, 5), 0);
	CHECK_EQ(grant(3, 20), 0);
	/* not primary: nothing expires */
	CHECK_EQ(lessor_expired(L, now + 100 * SEC, ids, 4), 0);
	CHECK(lessor_set_primary(L, true, 3, now));
	CHECK(!lessor_set_primary(L, true, 3, now + SEC)); /* same term: no second promotion */
	/* extended by the election timeout (1 s) on promotion */
	CHECK_INVARIANT_EQ(INV8_LEASES, lessor_expired(L, now + 5 * SEC, ids, 4), 0);
	CHECK_EQ(lessor_expired(L, now + 6 * SEC + 1, ids, 4), 1);
	CHECK_EQ(ids[0], 2);
	/* asked again only after the retry interval */
	CHECK_EQ(lessor_expired(L, now + 7 * SEC, ids, 4), 0);
	CHECK_EQ(lessor_expired(L, now + 6 * SEC + 1 + LESSOR_RETRY_NS, ids, 4), 1);
	/* a renewal moves the expiry; an expired lease is not renewed, and
	 * is told apart from one that is gone by an error code of its own,
	 * negative as every error (STYLE), that no request is answered with */
	int64_t ttl;
	bool clear;
	int rc = lessor_renew(L, 2, now + 12 * SEC, &ttl, &clear);
	CHECK(rc < 0);
	CHECK_EQ(rc, LESSOR_ERR_EXPIRED);
	CHECK(!lessor_is_request_error(rc));
	CHECK_EQ(lessor_renew(L, 77, now + 12 * SEC, &ttl, &clear), LESSOR_ERR_NOT_FOUND);
	CHECK_EQ(lessor_renew(L, 1, now + 10 * SEC, &ttl, &clear), 0);
	CHECK_EQ(ttl, 10);
	CHECK(!clear);
	CHECK_EQ(lessor_expired(L, now + 19 * SEC, ids, 4), 1); /* only 2 again */
	/* batching: at most max per call */
	CHECK_EQ(lessor_expired(L, now + 100 * SEC, ids, 1), 1);
	CHECK_EQ(lessor_expired(L, now + 100 * SEC, ids, 4), 2);
	/* demoted: no expiry, no renewals */
	lessor_set_primary(L, false, 4, now);
	CHECK_EQ(lessor_renew(L, 1, now, &ttl, &clear), LESSOR_ERR_NOT_PRIMARY);
	CHECK_EQ(lessor_expired(L, now + 1000 * SEC, ids, 4), 0);
	CHECK_EQ(lease_revoke(1), 0);
	CHECK_EQ(lease_revoke(2), 0);
	CHECK_EQ(lease_revoke(3), 0);
}

static void test_checkpoint_and_reload(void)
{
	int64_t now = 5000 * SEC;
	struct lessor_cp cps[4];
	CHECK_EQ(grant(50, 100), 0);
	CHECK(lessor_set_primary(L, true, 9, now));
	/* interval 10 s in this test: due after 10 s with 91 s left
	 * (100 + 1 s extension - 10) */
	CHECK_EQ(lessor_due_checkpoints(L, now + 5 * SEC, cps, 4), 0);
	CHECK_EQ(lessor_due_checkpoints(L, now + 10 * SEC, cps, 4), 1);
	CHECK_EQ(cps[0].id, 50);
	CHECK_EQ(cps[0].remaining, 91);
	CHECK_EQ(checkpoint(50, 91), 0);
	CHECK_EQ(checkpoint(51, 5), 0);           /* unknown: ignored */
	CHECK_EQ(put_leased("k50", 50), 0);
	/* a new leader starts from the checkpointed remaining TTL */
	lessor_set_primary(L, false, 10, now);
	CHECK(lessor_set_primary(L, true, 11, now + 20 * SEC));
	CHECK_EQ(ttl_of(50, now + 20 * SEC, NULL, NULL), 92); /* 91 + 1 s extension */
	/* a renewal after a checkpoint asks to clear it */
	int64_t ttl;
	bool clear;
	CHECK_EQ(lessor_renew(L, 50, now + 21 * SEC, &ttl, &clear), 0);
	CHECK(clear);

	/* reload from the db: the lease, its checkpoint and its key */
	tdb_reopen(&D, true);
	CHECK_EQ(lessor_loop_load(L, D.s), 0);
	CHECK_EQ(lessor_count(L), 1);
	size_t n;
	CHECK_EQ(ttl_of(50, 0, NULL, &n), 91);
	CHECK_EQ(n, 1);
	CHECK_EQ(lease_revoke(50), 0);
}

/* Many leases, random renewals, revokes, promotions and expiry calls
 * against a model of the primary's times: each answer of lessor_expired
 * is the soonest lapsed leases (up to max), lessor_next_deadline the
 * soonest time any becomes due, and the lessor's heaps stay consistent
 * (lessor_verify) after every step. TTLs stay at or below the checkpoint
 * interval (10 s here), so no checkpoint is scheduled. */
#define RL_N 600
struct rl_lease {
	bool alive;
	int64_t ttl, expiry, retry;
};

static int64_t rl_key(const struct rl_lease *m)
{
	return m->retry > m->expiry ? m->retry : m->expiry;
}

static void test_random_expiry(void)
{
	static struct rl_lease m[RL_N];
	int64_t now = 90000 * SEC, ids[8];
	uint64_t term = 20;
	size_t offered = 0, renewed = 0, revoked = 0;

	for (int i = 0; i < RL_N; i++) {
		m[i] = (struct rl_lease){ .alive = true, .ttl = 2 + (int64_t)(t_rand() % 9) };
		CHECK_EQ(grant(1000 + i, m[i].ttl), 0);
	}
	CHECK_EQ(lessor_verify(L), 0);
	for (int step = 0; step < 20000; step++) {
		unsigned op = (unsigned)(t_rand() % 100);
		if (step == 0 || op == 0) {
			/* a new leading term (after a demotion) */
			lessor_set_primary(L, false, term++, now);
			CHECK_EQ(lessor_verify(L), 0);
			CHECK(lessor_set_primary(L, true, term++, now));
			for (int i = 0; i < RL_N; i++)
				if (m[i].alive) {
					m[i].expiry = now + SEC + m[i].ttl * SEC;
					m[i].retry = 0;
				}
		} else if (op < 40) {
			int i = (int)(t_rand() % RL_N);
			int64_t ttl;
			bool clear;
			int rc = lessor_renew(L, 1000 + i, now, &ttl, &clear);
			if (m[i].alive && m[i].expiry > now) {
				CHECK_EQ(rc, 0);
				CHECK_EQ(ttl, m[i].ttl);
				m[i].expiry = now + m[i].ttl * SEC;
				m[i].retry = 0;
				renewed++;
			} else {
				CHECK_EQ(rc, m[i].alive ? LESSOR_ERR_EXPIRED : LESSOR_ERR_NOT_FOUND);
			}
		} else if (op < 45) {
			int i = (int)(t_rand() % RL_N);
			CHECK_EQ(lease_revoke(1000 + i), m[i].alive ? 0 : LESSOR_ERR_NOT_FOUND);
			revoked += m[i].alive;
			m[i].alive = false;
		} else if (op < 75) {
			size_t max = 1 + t_rand() % 8, lapsed = 0;
			for (int i = 0; i < RL_N; i++)
				lapsed += m[i].alive && rl_key(&m[i]) <= now;
			size_t n = lessor_expired(L, now, ids, max);
			CHECK_EQ(n, lapsed < max ? lapsed : max);
			int64_t last = INT64_MIN;
			for (size_t k = 0; k < n; k++) {
				int i = (int)(ids[k] - 1000);
				CHECK(i >= 0 && i < RL_N && m[i].alive);
				CHECK(rl_key(&m[i]) <= now);
				CHECK(rl_key(&m[i]) >= last); /* soonest first */
				last = rl_key(&m[i]);
			}
			/* none left behind was due sooner than the last given */
			for (int i = 0; n == max && i < RL_N; i++) {
				bool given = false;
				for (size_t k = 0; k < n; k++)
					given |= ids[k] == 1000 + i;
				if (m[i].alive && !given && rl_key(&m[i]) <= now)
					CHECK(rl_key(&m[i]) >= last);
			}
			for (size_t k = 0; k < n; k++)
				m[ids[k] - 1000].retry = now + LESSOR_RETRY_NS;
			offered += n;
		} else {
			now += (int64_t)(t_rand() % (SEC / 2));
		}
		int64_t next = INT64_MAX;
		for (int i = 0; i < RL_N; i++)
			if (m[i].alive && rl_key(&m[i]) < next)
				next = rl_key(&m[i]);
		CHECK_EQ(lessor_next_deadline(L), next);
		CHECK_EQ(lessor_verify(L), 0);
	}
	printf("random expiry: %zu offered, %zu renewed, %zu revoked\n", offered, renewed, revoked);
	CHECK(offered > 100 && renewed > 100 && revoked > 100);
	lessor_set_primary(L, false, term, now);
	for (int i = 0; i < RL_N; i++)
		if (m[i].alive)
			CHECK_EQ(lease_revoke(1000 + i), 0);
	CHECK_EQ(lessor_count(L), 0);
	CHECK_EQ(lessor_verify(L), 0);
}

int main(void)
{
	struct lessor_opts o = { .min_ttl = 2, .extend_ns = SEC, .checkpoint_ns = 10 * SEC,
				 .checkpoint = true };
	struct mvcc_store_opts so = { .on_event = on_event };
	t_set_seed(tm_pick_seed());
	CHECK_EQ(lessor_new(&o, &L), 0);
	tdb_init(&D, &so);
	test_rules();
	test_revoke_deletes_keys();
	test_expiry_and_promote();
	test_checkpoint_and_reload();
	test_random_expiry();
	tdb_free(&D);
	lessor_free(L);
	t_no_leaks();
	printf("test_lessor: ok\n");
	return 0;
}
