/*
 * The checks of each request kind (auth/check.c) against a model: a
 * request is turned into the list of (READ or WRITE, range) it asks for,
 * as etcd's authApplierV3 reads it (with the nested Txns and Puts in a
 * Txn of its later fixes), and the model decides the list with etcd's
 * isOpPermitted over the flat model of tests/lib/auth_util.h. Random
 * users, roles, permissions and requests (nested Txns included); admin
 * calls; leases with keys. Seeded: BTREE_SEED=n repeats a run.
 */
#include "auth_perm_util.h"

#include "auth/check.h"
#include "auth/error.h"

static char dir[256];

/* ---- requests, in a bump arena reset per request ---- */

static uint8_t arena[1 << 20];
static size_t arena_used;

static void *a_alloc(size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (arena_used + n > sizeof(arena))
		T_FAIL("request arena full");
	void *p = arena + arena_used;
	arena_used += n;
	memset(p, 0, n);
	return p;
}

static ProtobufCBinaryData a_bytes(struct m_bytes b)
{
	uint8_t *p = a_alloc(b.len + 1);
	memcpy(p, b.b, b.len);
	return (ProtobufCBinaryData){ b.len, p };
}

/* leases 1..3 and their keys */
#define N_LEASES 3
static struct m_bytes lease_keys[N_LEASES + 1][4];
static size_t n_lease_keys[N_LEASES + 1];

static int lease_each(void *arg, int64_t id, int (*fn)(void *, const uint8_t *, size_t), void *fa)
{
	(void)arg;
	if (id < 1 || id > N_LEASES)
		return 0;
	for (size_t i = 0; i < n_lease_keys[id]; i++) {
		int rc = fn(fa, lease_keys[id][i].b, lease_keys[id][i].len);
		if (rc)
			return rc;
	}
	return 0;
}
static const struct auth_lease_keys lk = { lease_each, NULL };

static Etcdserverpb__RangeRequest *rand_range(void)
{
	Etcdserverpb__RangeRequest *r = a_alloc(sizeof(*r));
	etcdserverpb__range_request__init(r);
	struct m_bytes k = m_rand_key();
	r->key = a_bytes(k);
	r->range_end = a_bytes(m_rand_end(k));
	return r;
}

static Etcdserverpb__PutRequest *rand_put(void)
{
	Etcdserverpb__PutRequest *r = a_alloc(sizeof(*r));
	etcdserverpb__put_request__init(r);
	r->key = a_bytes(m_rand_key());
	r->lease = (int64_t)t_below(N_LEASES + 2);
	r->prev_kv = t_chance(400);
	return r;
}

static Etcdserverpb__DeleteRangeRequest *rand_delete(void)
{
	Etcdserverpb__DeleteRangeRequest *r = a_alloc(sizeof(*r));
	etcdserverpb__delete_range_request__init(r);
	struct m_bytes k = m_rand_key();
	r->key = a_bytes(k);
	r->range_end = a_bytes(m_rand_end(k));
	r->prev_kv = t_chance(400);
	return r;
}

static Etcdserverpb__TxnRequest *rand_txn(int depth);

static Etcdserverpb__RequestOp **rand_ops(size_t n, int depth)
{
	Etcdserverpb__RequestOp **ops = a_alloc((n + 1) * sizeof(*ops));
	for (size_t i = 0; i < n; i++) {
		Etcdserverpb__RequestOp *op = a_alloc(sizeof(*op));
		etcdserverpb__request_op__init(op);
		switch (t_below(depth < 3 ? 5 : 4)) {
		case 0:
			op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
			op->request_range = rand_range();
			break;
		case 1:
			op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
			op->request_put = rand_put();
			break;
		case 2:
			op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			op->request_delete_range = rand_delete();
			break;
		case 3:
			break; /* an op with nothing set */
		default:
			op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
			op->request_txn = rand_txn(depth + 1);
		}
		ops[i] = op;
	}
	return ops;
}

static Etcdserverpb__TxnRequest *rand_txn(int depth)
{
	Etcdserverpb__TxnRequest *r = a_alloc(sizeof(*r));
	etcdserverpb__txn_request__init(r);
	r->n_compare = (size_t)t_below(3);
	r->compare = a_alloc((r->n_compare + 1) * sizeof(*r->compare));
	for (size_t i = 0; i < r->n_compare; i++) {
		Etcdserverpb__Compare *cmp = a_alloc(sizeof(*cmp));
		etcdserverpb__compare__init(cmp);
		struct m_bytes k = m_rand_key();
		cmp->key = a_bytes(k);
		cmp->range_end = a_bytes(t_chance(500) ? (struct m_bytes){ .len = 0 } : m_rand_end(k));
		r->compare[i] = cmp;
	}
	r->n_success = (size_t)t_below(4);
	r->success = rand_ops(r->n_success, depth);
	r->n_failure = (size_t)t_below(3);
	r->failure = rand_ops(r->n_failure, depth);
	return r;
}

/* ---- the model: what a request asks for ---- */

struct demand {
	int t; /* 0 READ, 1 WRITE */
	struct m_bytes key, end;
};
static struct demand demands[4096];
static size_t n_demands;

static void want(int t, ProtobufCBinaryData key, ProtobufCBinaryData end)
{
	if (n_demands == sizeof(demands) / sizeof(demands[0]))
		T_FAIL("too many demands");
	demands[n_demands++] = (struct demand){ t, m_bytes_of(key.data, key.len),
						m_bytes_of(end.data, end.len) };
}

static void want_lease(int t, int64_t id)
{
	if (id < 1 || id > N_LEASES)
		return;
	for (size_t i = 0; i < n_lease_keys[id]; i++)
		demands[n_demands++] = (struct demand){ t, lease_keys[id][i], { .len = 0 } };
}

static const ProtobufCBinaryData none = { 0, NULL };

static void want_put(const Etcdserverpb__PutRequest *p)
{
	want(1, p->key, none);
	want_lease(1, p->lease);
	if (p->prev_kv)
		want(0, p->key, none);
}

static void want_delete(const Etcdserverpb__DeleteRangeRequest *d)
{
	want(1, d->key, d->range_end);
	if (d->prev_kv)
		want(0, d->key, d->range_end);
}

static void want_txn(const Etcdserverpb__TxnRequest *r)
{
	for (size_t i = 0; i < r->n_compare; i++)
		want(0, r->compare[i]->key, r->compare[i]->range_end);
	for (int branch = 0; branch < 2; branch++) {
		size_t n = branch ? r->n_failure : r->n_success;
		Etcdserverpb__RequestOp **ops = branch ? r->failure : r->success;
		for (size_t i = 0; i < n; i++) {
			const Etcdserverpb__RequestOp *op = ops[i];
			if (op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
				want(0, op->request_range->key, op->request_range->range_end);
			else if (op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
				want_put(op->request_put);
			else if (op->request_case ==
				 ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE)
				want_delete(op->request_delete_range);
			else if (op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
				want_txn(op->request_txn);
		}
	}
}

/* etcd's isOpPermitted for each demand, the first refusal. */
static int m_decide(const struct m_auth *m, const char *user, uint64_t rev)
{
	if (!m->enabled || n_demands == 0)
		return 0;
	if (rev == 0)
		return AUTH_ERR_USER_EMPTY;
	if (rev < m->revision)
		return AUTH_ERR_OLD_REVISION;
	const struct m_user *u = m_user_find(m, user);
	if (!u)
		return AUTH_ERR_PERMISSION_DENIED;
	if (m_user_has_role(u, AUTH_ROOT_ROLE))
		return 0;
	static struct e_ivl set[2][256];
	size_t n[2] = { e_user_set(m, u, 0, set[0], 256), e_user_set(m, u, 1, set[1], 256) };
	for (size_t i = 0; i < n_demands; i++) {
		const struct demand *d = &demands[i];
		if (!e_permitted(set[d->t], n[d->t], d->key, d->end))
			return AUTH_ERR_PERMISSION_DENIED;
	}
	return 0;
}

static int m_admin(const struct m_auth *m, const char *user)
{
	if (!m->enabled)
		return 0;
	if (!*user)
		return AUTH_ERR_USER_EMPTY;
	const struct m_user *u = m_user_find(m, user);
	if (!u)
		return AUTH_ERR_USER_NOT_FOUND;
	return m_user_has_role(u, AUTH_ROOT_ROLE) ? 0 : AUTH_ERR_PERMISSION_DENIED;
}

/* ---- the test ---- */

static void expect(int got, int want_rc, const char *what, const char *user, uint64_t rev)
{
	if (got != want_rc)
		T_FAIL("%s by \"%s\" at revision %" PRIu64 ": check says %d (%s), model %d (%s)",
		       what, user, rev, got, auth_strerror(got), want_rc, auth_strerror(want_rc));
}

static void test_model(void)
{
	t_phase = "model";
	long permitted = 0, refused = 0;
	for (int round = 0; round < 300; round++) {
		struct m_auth m;
		m_rand_auth(&m);
		for (int l = 1; l <= N_LEASES; l++) {
			n_lease_keys[l] = (size_t)t_below(3);
			for (size_t i = 0; i < n_lease_keys[l]; i++)
				lease_keys[l][i] = m_rand_key();
		}
		struct auth_cache *c = m_cache_from(dir, &m);
		for (int q = 0; q < 200; q++) {
			t_step = (uint64_t)(round * 1000 + q);
			arena_used = 0;
			n_demands = 0;
			char user[M_NAME_MAX];
			uint64_t r = t_below(10);
			if (r == 0)
				snprintf(user, sizeof(user), "%s", "");
			else if (r == 1)
				snprintf(user, sizeof(user), "nobody");
			else
				snprintf(user, sizeof(user), "%s", m.users[t_below(m.n_users)].name);
			uint64_t rev = t_chance(100) ? 0 : m.revision + t_below(3) - (t_chance(100) ? 1 : 0);
			int got;
			const char *what;
			switch (t_below(8)) {
			case 0: {
				Etcdserverpb__RangeRequest *rq = rand_range();
				want(0, rq->key, rq->range_end);
				got = auth_check_range(c, user, rev, rq);
				what = "Range";
				break;
			}
			case 1: {
				Etcdserverpb__PutRequest *rq = rand_put();
				want_put(rq);
				got = auth_check_put(c, user, rev, rq, &lk);
				what = "Put";
				break;
			}
			case 2: {
				Etcdserverpb__DeleteRangeRequest *rq = rand_delete();
				want_delete(rq);
				got = auth_check_delete_range(c, user, rev, rq);
				what = "DeleteRange";
				break;
			}
			case 3: {
				Etcdserverpb__LeaseRevokeRequest rq = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
				rq.id = (int64_t)t_below(N_LEASES + 2);
				want_lease(1, rq.id);
				got = auth_check_lease_revoke(c, user, rev, &rq, &lk);
				what = "LeaseRevoke";
				break;
			}
			case 4: {
				Etcdserverpb__WatchCreateRequest rq = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
				struct m_bytes k = m_rand_key();
				rq.key = a_bytes(k);
				rq.range_end = a_bytes(m_rand_end(k));
				want(0, rq.key, rq.range_end);
				got = auth_check_watch(c, user, rev, &rq);
				what = "Watch";
				break;
			}
			case 5: {
				Etcdserverpb__LeaseTimeToLiveRequest rq =
					ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
				rq.id = (int64_t)t_below(N_LEASES + 2);
				rq.keys = t_chance(700);
				if (rq.keys)
					want_lease(0, rq.id);
				got = auth_check_lease_time_to_live(c, user, rev, &rq, &lk);
				what = "LeaseTimeToLive";
				int w = m_decide(&m, user, rev);
				if (rq.keys && m.enabled && !*user)
					w = AUTH_ERR_USER_EMPTY;
				expect(got, w, what, user, rev);
				permitted += got == 0;
				refused += got != 0;
				continue;
			}
			case 6: {
				what = "admin";
				got = auth_check_admin(c, user);
				expect(got, m_admin(&m, user), what, user, rev);
				Etcdserverpb__AuthRoleGetRequest rg = ETCDSERVERPB__AUTH_ROLE_GET_REQUEST__INIT;
				rg.role = (char *)m.roles[t_below(m.n_roles)].name;
				const struct m_user *mu = m_user_find(&m, user);
				int w = m_admin(&m, user);
				if (w && mu && m_user_has_role(mu, rg.role))
					w = 0;
				expect(auth_check_role_get(c, user, &rg), w, "RoleGet", user, rev);
				Etcdserverpb__AuthUserGetRequest ug = ETCDSERVERPB__AUTH_USER_GET_REQUEST__INIT;
				ug.name = t_chance(500) ? user : (char *)m.users[0].name;
				w = m_admin(&m, user);
				if (w && strcmp(ug.name, user) == 0)
					w = 0;
				expect(auth_check_user_get(c, user, &ug), w, "UserGet", user, rev);
				continue;
			}
			default: {
				Etcdserverpb__TxnRequest *rq = rand_txn(0);
				want_txn(rq);
				got = auth_check_txn(c, user, rev, rq, &lk);
				what = "Txn";
			}
			}
			expect(got, m_decide(&m, user, rev), what, user, rev);
			permitted += got == 0;
			refused += got != 0;
		}
		auth_cache_free(c);
		am_free(&m);
	}
	printf("model: %ld permitted, %ld refused\n", permitted, refused);
	T_CHECK(permitted > 1000 && refused > 1000);
	ta_no_leaks();
}

static void test_fixed(void)
{
	t_phase = "fixed cases";
	struct m_auth m;
	m_one_user(&m, 5);
	m_add_perm(&m.roles[0], 0, m_str("a"), m_str("c"));
	snprintf(m.roles[m.n_roles++].name, M_NAME_MAX, AUTH_ROOT_ROLE);
	snprintf(m.users[1].name, M_NAME_MAX, "root");
	snprintf(m.users[1].roles[0], M_NAME_MAX, AUTH_ROOT_ROLE);
	m.users[1].n_roles = 1;
	m.n_users = 2;
	struct auth_cache *c = m_cache_from(dir, &m);

	/* an empty Txn asks for nothing: permitted with no user at all */
	Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
	T_CHECK(auth_check_txn(c, NULL, 0, &txn, NULL) == 0);
	/* a Range of a user with no token, an old token, an unknown user */
	Etcdserverpb__RangeRequest rr = ETCDSERVERPB__RANGE_REQUEST__INIT;
	rr.key = (ProtobufCBinaryData){ 1, (uint8_t *)"b" };
	T_CHECK(auth_check_range(c, NULL, 0, &rr) == AUTH_ERR_USER_EMPTY);
	T_CHECK(auth_check_range(c, "u", 4, &rr) == AUTH_ERR_OLD_REVISION);
	T_CHECK(auth_check_range(c, "u", 5, &rr) == 0 && auth_check_range(c, "u", 9, &rr) == 0);
	T_CHECK(auth_check_range(c, "x", 5, &rr) == AUTH_ERR_PERMISSION_DENIED);
	/* a nested Txn's Put is checked */
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	put.key = rr.key;
	Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, nop = op;
	op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	op.request_put = &put;
	Etcdserverpb__RequestOp *ops[] = { &op }, *nops[] = { &nop };
	Etcdserverpb__TxnRequest inner = ETCDSERVERPB__TXN_REQUEST__INIT;
	inner.n_failure = 1;
	inner.failure = ops;
	nop.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
	nop.request_txn = &inner;
	txn.n_success = 1;
	txn.success = nops;
	T_CHECK(auth_check_txn(c, "u", 5, &txn, NULL) == AUTH_ERR_PERMISSION_DENIED);
	T_CHECK(auth_check_txn(c, "root", 5, &txn, NULL) == 0);
	/* ...except as etcd 3.4 applies a Txn: a nested one is not looked
	 * into, a Put of a branch is */
	T_CHECK(auth_check_txn_applied(c, "u", 5, &txn) == 0);
	txn.success = ops;
	T_CHECK(auth_check_txn_applied(c, "u", 5, &txn) == AUTH_ERR_PERMISSION_DENIED);
	T_CHECK(auth_check_txn_applied(c, "u", 4, &txn) == AUTH_ERR_OLD_REVISION);
	txn.success = nops;
	/* LeaseTimeToLive with keys needs a user even for a lease with none */
	Etcdserverpb__LeaseTimeToLiveRequest ttl = ETCDSERVERPB__LEASE_TIME_TO_LIVE_REQUEST__INIT;
	ttl.id = 9;
	ttl.keys = 1;
	T_CHECK(auth_check_lease_time_to_live(c, "", 0, &ttl, &lk) == AUTH_ERR_USER_EMPTY);
	T_CHECK(auth_check_lease_time_to_live(c, "u", 5, &ttl, &lk) == 0);
	ttl.keys = 0;
	T_CHECK(auth_check_lease_time_to_live(c, "", 0, &ttl, &lk) == 0);
	/* admin */
	T_CHECK(auth_check_admin(c, "root") == 0);
	T_CHECK(auth_check_admin(c, "u") == AUTH_ERR_PERMISSION_DENIED);
	T_CHECK(auth_check_admin(c, "x") == AUTH_ERR_USER_NOT_FOUND);
	T_CHECK(auth_check_admin(c, NULL) == AUTH_ERR_USER_EMPTY);
	Etcdserverpb__InternalRaftRequest ir = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__AuthRoleListRequest rl = ETCDSERVERPB__AUTH_ROLE_LIST_REQUEST__INIT;
	T_CHECK(!auth_check_needs_admin(&ir));
	ir.put = &put;
	T_CHECK(!auth_check_needs_admin(&ir));
	ir.auth_role_list = &rl;
	T_CHECK(auth_check_needs_admin(&ir));
	/* the error table */
	T_CHECK(strcmp(auth_strerror(AUTH_ERR_PERMISSION_DENIED), "etcdserver: permission denied") == 0);
	T_CHECK(auth_grpc_code(AUTH_ERR_PERMISSION_DENIED) == 7);
	T_CHECK(auth_grpc_code(AUTH_ERR_INVALID_AUTH_TOKEN) == 16 && auth_grpc_code(-5216) == 2);
	T_CHECK(auth_is_error(AUTH_ERR_OLD_REVISION) && !auth_is_error(-5216) && !auth_is_error(-1));
	auth_cache_free(c);
	am_free(&m);
	ta_no_leaks();
}

int main(void)
{
	ta_begin(dir, sizeof(dir));
	test_fixed();
	test_model();
	ta_end(dir);
	return 0;
}
