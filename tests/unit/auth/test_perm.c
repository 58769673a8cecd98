/*
 * The permission cache (auth/perm.c): its decisions against a flat model
 * of etcd 3.4's interval tree over random users, roles and permissions;
 * the edge cases of etcd's key order (from-key, prefixes, the empty key,
 * adjacent and overlapping permissions, inverted ranges); checks that
 * allocate nothing over 1,000 permissions; corrupt records; failed
 * allocations. Seeded: BTREE_SEED=n repeats a run.
 */

#include "auth_perm_util.h"

#include "auth/check.h"
#include "base/clock/clock.h"

static char dir[256];

/* ---- against the model ---- */

static void compare_user(const struct m_auth *m, const struct auth_cache *c,
			 const struct m_user *mu)
{
	const struct auth_user *u = auth_cache_user(c, mu->name, strlen(mu->name));
	struct e_ivl set[2][128];
	size_t n[2];

	T_CHECK(u != NULL);
	T_CHECK(auth_user_is_root(u) == m_user_has_role(mu, AUTH_ROOT_ROLE));
	T_CHECK(auth_user_has_role(c, u, "r0", 2) == m_user_has_role(mu, "r0"));
	T_CHECK(auth_user_has_role(c, u, "rx", 2) == m_user_has_role(mu, "rx"));
	for (int t = 0; t < 2; t++) {
		n[t] = e_user_set(m, mu, t, set[t], 128);
		T_CHECK(auth_user_interval_count(u, (enum auth_perm_type)t) <= n[t]);
	}
	for (int q = 0; q < 300; q++) {
		t_step = (uint64_t)q;
		int t = (int)t_below(2);
		struct m_bytes key = m_rand_key(), end = m_rand_end(key);
		bool want = e_permitted(set[t], n[t], key, end);
		bool got = auth_user_permitted(c, u, (enum auth_perm_type)t, key.b, key.len, end.b,
					       end.len);
		if (got != want) {
			char k[64] = "", e[64] = "";
			for (size_t i = 0; i < key.len; i++)
				snprintf(k + 3 * i, 4, "%02x.", key.b[i]);
			for (size_t i = 0; i < end.len; i++)
				snprintf(e + 3 * i, 4, "%02x.", end.b[i]);
			T_FAIL("user %s %s [%s, %s): cache says %d, etcd's model %d", mu->name,
			       t ? "WRITE" : "READ", k, e, got, want);
		}
	}
}

static void test_model(void)
{
	t_phase = "model";
	for (int round = 0; round < 400; round++) {
		struct m_auth m;
		m_rand_auth(&m);
		struct btree_db *db = m_db_create(dir, &m);
		struct auth_cache *c = m_cache_of(db);
		T_CHECK(auth_cache_enabled(c) == m.enabled);
		T_CHECK(auth_cache_revision(c) == m.revision);
		T_CHECK(auth_cache_user_count(c) == m.n_users);
		T_CHECK(auth_cache_user(c, "nobody", 6) == NULL);
		for (size_t i = 0; i < m.n_users; i++)
			compare_user(&m, c, &m.users[i]);
		auth_cache_free(c);
		btree_db_close(db);
		am_free(&m);
	}
	ta_no_leaks();
}

/* ---- edge cases ---- */

/* A permission given by literals (which may hold 0 bytes). */
struct lit_perm {
	int32_t type;
	const char *key;
	size_t key_len;
	const char *end;
	size_t end_len;
};
#define P(t, k, e) { t, k, sizeof(k) - 1, e, sizeof(e) - 1 }

/* One user "u" with one role holding perms. */
static struct auth_cache *one_user(const struct lit_perm *perms, size_t n)
{
	struct m_auth m;
	m_one_user(&m, 1);
	for (size_t i = 0; i < n; i++)
		m_add_perm(&m.roles[0], perms[i].type, m_bytes_of(perms[i].key, perms[i].key_len),
			   m_bytes_of(perms[i].end, perms[i].end_len));
	struct auth_cache *c = m_cache_from(dir, &m);
	am_free(&m);
	return c;
}
#define ONE_USER(...)                                                                  \
	one_user((const struct lit_perm[]){ __VA_ARGS__ },                             \
		 sizeof((const struct lit_perm[]){ __VA_ARGS__ }) / sizeof(struct lit_perm))

/* The decision of user "u" for [key, end) given by literals. */
static bool may_(const struct auth_cache *c, enum auth_perm_type t, const char *key, size_t klen,
		 const char *end, size_t elen)
{
	const struct auth_user *u = auth_cache_user(c, "u", 1);
	T_CHECK(u != NULL);
	return auth_user_permitted(c, u, t, (const uint8_t *)key, klen, (const uint8_t *)end, elen);
}
#define may(c, t, k, e) may_(c, t, k, sizeof(k) - 1, e, sizeof(e) - 1)

static size_t count(const struct auth_cache *c, enum auth_perm_type t)
{
	return auth_user_interval_count(auth_cache_user(c, "u", 1), t);
}

static void test_edges(void)
{
	struct auth_cache *c;
	const enum auth_perm_type R = AUTH_PERM_READ, W = AUTH_PERM_WRITE;

	t_phase = "from key";
	c = ONE_USER(P(2, "z", "\0"));
	T_CHECK(may(c, W, "z0", "") && may(c, W, "\xff\xff", "") && may(c, R, "z", ""));
	T_CHECK(!may(c, W, "x", "") && !may(c, W, "yzz", ""));
	T_CHECK(may(c, R, "z", "\0") && may(c, R, "z1", "\0") && !may(c, R, "y", "\0"));
	T_CHECK(may(c, R, "z", "zz") && !may(c, R, "y", "zz"));
	auth_cache_free(c);

	t_phase = "every key (etcdctl's empty key: \\0 from key)";
	c = ONE_USER(P(0, "\0", "\0"));
	T_CHECK(may(c, R, "a", "") && may(c, R, "\0", "") && may(c, R, "\xff", "\0"));
	T_CHECK(may(c, R, "a", "zzz") && may(c, R, "\0", "\0"));
	T_CHECK(!may(c, R, "", "") && !may(c, R, "", "\0") && !may(c, W, "a", ""));
	auth_cache_free(c);

	t_phase = "the empty key grants nothing";
	c = ONE_USER(P(2, "", "\0"), P(2, "", ""), P(2, "", "z"));
	T_CHECK(!may(c, R, "a", "") && !may(c, R, "a", "\0") && !may(c, W, "", ""));
	T_CHECK(count(c, R) == 0 && count(c, W) == 0);
	auth_cache_free(c);

	t_phase = "prefix";
	c = ONE_USER(P(0, "foo", "fop"));
	T_CHECK(may(c, R, "foo", "") && may(c, R, "foo/bar", "") && !may(c, R, "fop", ""));
	T_CHECK(!may(c, R, "fo", "") && may(c, R, "foo", "fop") && !may(c, R, "foo", "foq"));
	T_CHECK(!may(c, R, "foo", "\0") && may(c, R, "foo\xff", "fop"));
	auth_cache_free(c);

	t_phase = "adjacent and overlapping permissions merge";
	c = ONE_USER(P(0, "a", "b"), P(0, "b", "c"), P(0, "e", "g"), P(0, "f", "h"),
		     P(0, "k", ""), P(0, "k\0", ""));
	T_CHECK(count(c, R) == 3);
	T_CHECK(may(c, R, "a", "c") && may(c, R, "e", "h") && !may(c, R, "a", "e"));
	T_CHECK(!may(c, R, "c", "") && !may(c, R, "d", "") && may(c, R, "gz", ""));
	T_CHECK(may(c, R, "k", "k\0\0") && may(c, R, "k\0", "") && !may(c, R, "k", "k\0\1"));
	auth_cache_free(c);

	t_phase = "a gap stays";
	c = ONE_USER(P(2, "a", "b"), P(2, "c", "d"));
	T_CHECK(count(c, R) == 2 && count(c, W) == 2);
	T_CHECK(!may(c, W, "a", "d") && may(c, W, "a", "b") && may(c, W, "c", "d"));
	T_CHECK(!may(c, W, "b", "") && !may(c, W, "bz", "c"));
	auth_cache_free(c);

	t_phase = "inverted ranges";
	c = ONE_USER(P(1, "b", ""), P(1, "q", "m"));
	T_CHECK(count(c, W) == 1); /* [q, m) grants nothing */
	T_CHECK(may(c, W, "b", "a") && may(c, W, "b", "b") && !may(c, W, "c", "a"));
	T_CHECK(!may(c, W, "q", "") && !may(c, W, "p", "r"));
	auth_cache_free(c);

	t_phase = "types";
	c = ONE_USER(P(0, "r", ""), P(1, "w", ""), P(2, "x", ""), P(7, "y", ""));
	T_CHECK(may(c, R, "r", "") && !may(c, W, "r", ""));
	T_CHECK(may(c, W, "w", "") && !may(c, R, "w", ""));
	T_CHECK(may(c, R, "x", "") && may(c, W, "x", ""));
	T_CHECK(!may(c, R, "y", "") && !may(c, W, "y", ""));
	auth_cache_free(c);
	ta_no_leaks();
}

/* ---- 1,000 permissions, no allocation ---- */

static void test_no_alloc(void)
{
	t_phase = "1000 permissions";
	struct m_auth m;
	m_one_user(&m, 3);
	for (int i = 0; i < 1000; i++) {
		char k[8], e[8];
		snprintf(k, sizeof(k), "k%04d", 2 * i);
		snprintf(e, sizeof(e), "k%04d", 2 * i + 1);
		m_add_perm(&m.roles[0], 2, m_str(k), m_str(e));
	}
	struct auth_cache *c = m_cache_from(dir, &m);
	T_CHECK(count(c, AUTH_PERM_READ) == 1000);

	/* keys k0000..k1999 and their ranges [kN, kN+1): even ones granted */
	static char keys[2001][8];
	for (int i = 0; i <= 2000; i++)
		snprintf(keys[i], sizeof(keys[i]), "k%04d", i);
	auth_util_budget = 1000000; /* counts down at each allocation */
	long permitted = 0;
	const int n = 1000000;
	int64_t t0 = clock_now_ns();
	for (int i = 0; i < n; i++) {
		int x = (int)((uint64_t)i * 7919 % 2000);
		int rc = auth_check_op(c, "u", 3, AUTH_PERM_READ, (const uint8_t *)keys[x], 5,
				       (const uint8_t *)keys[x + 1], 5);
		if (rc != (x % 2 == 0 ? 0 : AUTH_ERR_PERMISSION_DENIED))
			T_FAIL("[%s, %s): %d", keys[x], keys[x + 1], rc);
		permitted += rc == 0;
	}
	int64_t took_ns = clock_now_ns() - t0;
	T_CHECK(auth_util_budget == 1000000); /* no allocation while checking */
	auth_util_budget = -1;
	T_CHECK(permitted == n / 2);
	printf("1000 permissions: %.0f ns a range check\n", (double)took_ns / n);
	auth_cache_free(c);
	am_free(&m);
	ta_no_leaks();
}

/* ---- corrupt records, missing buckets, failed allocations ---- */

/* Builds the cache of a db whose bucket holds key -> val (and a valid
 * rest); returns the build's result, with its message in msg. */
static int build_with(const char *bucket, const char *key, const void *val, size_t len,
		      bool nested, char *msg, size_t cap)
{
	struct m_auth m;
	m_one_user(&m, 1);
	struct btree_db *db = m_db_create(dir, &m);
	struct btree_txn *t;
	struct btree_bucket *b, *sub;
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_open(t, NULL, bucket, strlen(bucket), &b));
	if (nested)
		T_OK(btree_bucket_create(t, b, key, strlen(key), &sub));
	else
		T_OK(btree_put(b, key, strlen(key), val, len));
	T_OK(btree_commit(t, NULL));
	struct auth_cache *c = NULL;
	T_OK(btree_db_read_begin(db, NULL, &t));
	int rc = auth_db_load(t, &c);
	snprintf(msg, cap, "%s", errmsg_get(rc));
	btree_txn_end(t);
	btree_db_close(db);
	auth_cache_free(c);
	am_free(&m);
	return rc;
}

static void want_corrupt(const char *bucket, const char *key, const void *val, size_t len,
			 bool nested, const char *says)
{
	char msg[ERRMSG_MAX];
	int rc = build_with(bucket, key, val, len, nested, msg, sizeof(msg));
	if (rc != -EUCLEAN || !strstr(msg, bucket) || !strstr(msg, key) || !strstr(msg, says))
		T_FAIL("%s/%s: got %d \"%s\", want -EUCLEAN saying \"%s\"", bucket, key, rc, msg, says);
}

static void test_corrupt(void)
{
	char msg[ERRMSG_MAX];
	t_phase = "corrupt records";
	want_corrupt("auth", "authEnabled", "\2", 1, false, "one byte 0 or 1");
	want_corrupt("auth", "authEnabled", "\1\1", 2, false, "one byte 0 or 1");
	want_corrupt("auth", "authRevision", "\0\0\0\0\0\0\1", 7, false, "8 bytes");
	want_corrupt("authUsers", "v", "\x0a\x01v\x1a", 4, false, "ends inside");
	want_corrupt("authUsers", "v", "\x0a\x01w", 3, false, "another name");
	want_corrupt("authUsers", "v", "\x0a\x01v\x18\x01", 5, false, "not length-delimited");
	want_corrupt("authUsers", "v", "\x0a\x01v\x22\x02\x0a\x00", 7, false, "no_password");
	want_corrupt("authUsers", "v", "\x0a\x01v\x0f", 4, false, "invalid wire type");
	want_corrupt("authUsers", "v", "\x02", 1, false, "numbered 0");
	want_corrupt("authUsers", "v", NULL, 0, true, "is a bucket");
	want_corrupt("authRoles", "q", "\x12\x02\x12\x05", 4, false, "ends inside");
	want_corrupt("authRoles", "q", "\x10\x01", 2, false, "no message");
	want_corrupt("authRoles", "q", "\x12\x02\x0a\x00", 4, false, "no varint");
	want_corrupt("authRoles", "q", "\x12\x02\x10\x01", 4, false, "key that is no bytes");
	want_corrupt("authRoles", "q", "\x12\x02\x18\x01", 4, false, "range_end that is no bytes");
	want_corrupt("authRoles", "q", "\x08\x01", 2, false, "name that is no bytes");

	t_phase = "records etcd takes";
	/* unknown fields are skipped; a user with a role that does not exist,
	 * and a role with an unknown permission type, grant nothing */
	T_OK(build_with("authUsers", "v", "\x0a\x01v\x1a\x02rx\x28\x05\x3a\x00", 11, false, msg,
			sizeof(msg)));
	T_OK(build_with("authRoles", "q", "\x12\x04\x08\x09\x12\x00\x45\x01\x02\x03\x04", 11,
			false, msg, sizeof(msg)));
	T_OK(build_with("auth", "other", "xyz", 3, false, msg, sizeof(msg)));

	t_phase = "no auth buckets";
	{
		char path[512];
		struct btree_db *db;
		struct btree_db_opts o = { .create = true, .map_size = 1u << 30, .scratch = true };
		snprintf(path, sizeof(path), "%s/db", dir);
		unlink(path);
		T_OK(btree_db_open(path, &o, &db));
		struct auth_cache *c = m_cache_of(db);
		T_CHECK(!auth_cache_enabled(c) && auth_cache_revision(c) == 0);
		T_CHECK(auth_cache_user_count(c) == 0);
		T_CHECK(auth_check_op(c, "", 0, AUTH_PERM_WRITE, (const uint8_t *)"a", 1, NULL, 0) == 0);
		auth_cache_free(c);
		btree_db_close(db);
	}

	t_phase = "failed allocations";
	struct m_auth m;
	m_rand_auth(&m);
	for (m.n_users = 0; m.n_users < 3; m.n_users++)
		snprintf(m.users[m.n_users].name, M_NAME_MAX, "u%u", (unsigned)m.n_users);
	snprintf(m.users[2].roles[0], M_NAME_MAX, "r0");
	m.users[2].n_roles = 1;
	m_add_perm(&m.roles[0], 2, m_str("a"), m_str("b"));
	struct btree_db *db = m_db_create(dir, &m);
	struct btree_txn *t;
	T_OK(btree_db_read_begin(db, NULL, &t));
	int failed = 0;
	for (long n = 0;; n++) {
		struct auth_cache *c;
		auth_util_budget = n;
		int rc = auth_db_load(t, &c);
		auth_util_budget = -1;
		if (rc == 0) {
			auth_cache_free(c);
			break;
		}
		T_RC(rc, -ENOMEM);
		ta_no_leaks();
		failed++;
	}
	T_CHECK(failed >= 5);
	btree_txn_end(t);
	btree_db_close(db);
	am_free(&m);
	ta_no_leaks();
}

int main(void)
{
	ta_begin(dir, sizeof(dir));
	test_edges();
	test_model();
	test_no_alloc();
	test_corrupt();
	ta_end(dir);
	return 0;
}
