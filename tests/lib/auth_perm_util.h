/*
 * Helpers for the permission checker's tests: a model of the auth
 * buckets (users, roles, permissions) written into a real db file, and a
 * plain model of etcd 3.4's permission decisions: the interval
 * comparisons of its adt package (Interval.Compare,
 * BytesAffineComparable) applied to every permission of the user in a flat list, as its
 * Intersects and Contains decide them, with no tree and no merging.
 */
#ifndef CETCD_TEST_AUTH_PERM_UTIL_H
#define CETCD_TEST_AUTH_PERM_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth_util.h"
#include "btree_util.h"

#include "auth/perm.h"
#include "auth/alloc.h"
#include "authpb/auth.pb-c.h"
#include "stored/auth_db.h"
#include "stored/mvcc/schema.h"

static inline void ta_no_leaks(void)
{
	if (auth_util_live != 0)
		T_FAIL("%ld auth allocations still live", auth_util_live);
}

/* ---- the model of the buckets ---- */

#define M_KEY_MAX 8
struct m_bytes {
	uint8_t b[M_KEY_MAX + 1];
	size_t len;
};

struct m_perm {
	int32_t type;
	struct m_bytes key, end;
};

#define M_NAME_MAX 16
struct m_role {
	char name[M_NAME_MAX];
	struct m_perm *perms;
	size_t n, cap;
};

#define M_USER_ROLES 6
struct m_user {
	char name[M_NAME_MAX];
	char roles[M_USER_ROLES][M_NAME_MAX];
	size_t n_roles;
};

#define M_MAX 8
struct m_auth {
	bool enabled;
	uint64_t revision;
	struct m_role roles[M_MAX];
	size_t n_roles;
	struct m_user users[M_MAX];
	size_t n_users;
};

static inline struct m_bytes m_bytes_of(const void *p, size_t len)
{
	struct m_bytes b = { .len = len };
	if (len > M_KEY_MAX)
		T_FAIL("model key of %zu bytes", len);
	if (len)
		memcpy(b.b, p, len);
	return b;
}

static inline struct m_bytes m_str(const char *s)
{
	return m_bytes_of(s, strlen(s));
}

static inline void m_add_perm(struct m_role *r, int32_t type, struct m_bytes key,
			      struct m_bytes end)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 8;
		r->perms = realloc(r->perms, r->cap * sizeof(*r->perms));
		if (!r->perms)
			T_FAIL("out of memory");
	}
	r->perms[r->n++] = (struct m_perm){ type, key, end };
}

static inline void am_free(struct m_auth *m)
{
	for (size_t i = 0; i < m->n_roles; i++)
		free(m->roles[i].perms);
	memset(m, 0, sizeof(*m));
}

/* A random key of 0 to 3 bytes over a small alphabet that has the bytes
 * that matter: 0x00, two letters, 0xff. */
static inline struct m_bytes m_rand_key(void)
{
	static const uint8_t alpha[] = { 0x00, 'a', 'b', 0xff };
	struct m_bytes k = { .len = (size_t)t_below(4) };
	for (size_t i = 0; i < k.len; i++)
		k.b[i] = alpha[t_below(sizeof(alpha))];
	return k;
}

/* A random range_end for key: none (one key), "\0" (from key on), the
 * prefix end, or any key (maybe at or below key). */
static inline struct m_bytes m_rand_end(struct m_bytes key)
{
	uint64_t r = t_below(10);
	struct m_bytes e = { .len = 0 };
	if (r < 3)
		return e;
	if (r < 5)
		return m_bytes_of("", 1);
	if (r < 6 && key.len) {
		e = key;
		while (e.len && e.b[e.len - 1] == 0xff)
			e.len--;
		if (e.len)
			e.b[e.len - 1]++;
		else
			e = m_bytes_of("", 1);
		return e;
	}
	return m_rand_key();
}

/* Random users and roles: role names r0..r5 and sometimes "root", user
 * roles that may not exist (rx). */
static inline void m_rand_auth(struct m_auth *m)
{
	memset(m, 0, sizeof(*m));
	m->enabled = !t_chance(100);
	m->revision = 1 + t_below(5);
	m->n_roles = 1 + (size_t)t_below(6);
	for (size_t i = 0; i < m->n_roles; i++) {
		struct m_role *r = &m->roles[i];
		snprintf(r->name, sizeof(r->name), "r%u", (unsigned)i % 100);
		size_t n = (size_t)t_below(7);
		for (size_t j = 0; j < n; j++) {
			struct m_bytes k = m_rand_key();
			int32_t type = t_chance(50) ? 7 : (int32_t)t_below(3);
			m_add_perm(r, type, k, m_rand_end(k));
		}
	}
	if (t_chance(300))
		snprintf(m->roles[m->n_roles++].name, M_NAME_MAX, "%s", AUTH_ROOT_ROLE);
	m->n_users = 1 + (size_t)t_below(5);
	for (size_t i = 0; i < m->n_users; i++) {
		struct m_user *u = &m->users[i];
		snprintf(u->name, sizeof(u->name), "u%u", (unsigned)i % 100);
		u->n_roles = (size_t)t_below(4);
		for (size_t j = 0; j < u->n_roles; j++) {
			if (t_chance(100))
				snprintf(u->roles[j], M_NAME_MAX, "rx");
			else
				snprintf(u->roles[j], M_NAME_MAX, "%s",
					 m->roles[t_below(m->n_roles)].name);
		}
	}
}

static inline const struct m_user *m_user_find(const struct m_auth *m, const char *name)
{
	for (size_t i = 0; i < m->n_users; i++)
		if (strcmp(m->users[i].name, name) == 0)
			return &m->users[i];
	return NULL;
}

static inline bool m_user_has_role(const struct m_user *u, const char *role)
{
	for (size_t i = 0; i < u->n_roles; i++)
		if (strcmp(u->roles[i], role) == 0)
			return true;
	return false;
}

/* ---- writing the model into a db ---- */

static inline void am_put(struct btree_bucket *b, const char *key, const ProtobufCMessage *msg)
{
	size_t n = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = t_xmalloc(n);
	protobuf_c_message_pack(msg, buf);
	T_OK(btree_put(b, key, strlen(key), buf, n));
	free(buf);
}

static inline void m_write_role(struct btree_bucket *b, const struct m_role *r)
{
	Authpb__Role pb = AUTHPB__ROLE__INIT;
	Authpb__Permission *ps = t_xmalloc((r->n + 1) * sizeof(*ps));
	Authpb__Permission **pp = t_xmalloc((r->n + 1) * sizeof(*pp));
	pb.name = (ProtobufCBinaryData){ strlen(r->name), (uint8_t *)r->name };
	for (size_t i = 0; i < r->n; i++) {
		authpb__permission__init(&ps[i]);
		ps[i].permtype = (Authpb__Permission__Type)r->perms[i].type;
		ps[i].key = (ProtobufCBinaryData){ r->perms[i].key.len, (uint8_t *)r->perms[i].key.b };
		ps[i].range_end =
			(ProtobufCBinaryData){ r->perms[i].end.len, (uint8_t *)r->perms[i].end.b };
		pp[i] = &ps[i];
	}
	pb.n_keypermission = r->n;
	pb.keypermission = pp;
	am_put(b, r->name, &pb.base);
	free(ps);
	free(pp);
}

static inline void m_write_user(struct btree_bucket *b, const struct m_user *u)
{
	Authpb__User pb = AUTHPB__USER__INIT;
	Authpb__UserAddOptions opts = AUTHPB__USER_ADD_OPTIONS__INIT;
	char *roles[M_USER_ROLES];
	pb.name = (ProtobufCBinaryData){ strlen(u->name), (uint8_t *)u->name };
	pb.password = (ProtobufCBinaryData){ 4, (uint8_t *)"$2a$" };
	for (size_t i = 0; i < u->n_roles; i++)
		roles[i] = (char *)u->roles[i];
	pb.n_roles = u->n_roles;
	pb.roles = roles;
	opts.no_password = u->n_roles % 2;
	pb.options = &opts;
	am_put(b, u->name, &pb.base);
}

/* A fresh db file in dir holding m's buckets. */
static inline struct btree_db *m_db_create(const char *dir, const struct m_auth *m)
{
	char path[512];
	struct btree_db *db;
	struct btree_txn *t;
	struct btree_bucket *a, *users, *roles;
	struct btree_db_opts o = { .create = true, .map_size = 1u << 30, .scratch = true };
	uint8_t rev[8];

	snprintf(path, sizeof(path), "%s/db", dir);
	unlink(path);
	T_OK(btree_db_open(path, &o, &db));
	T_OK(btree_write_begin(db, &t));
	T_OK(btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH, SCHEMA_LEN(SCHEMA_BUCKET_AUTH), &a));
	T_OK(btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH_USERS,
				 SCHEMA_LEN(SCHEMA_BUCKET_AUTH_USERS), &users));
	T_OK(btree_bucket_create(t, NULL, SCHEMA_BUCKET_AUTH_ROLES,
				 SCHEMA_LEN(SCHEMA_BUCKET_AUTH_ROLES), &roles));
	T_OK(btree_put(a, "authEnabled", 11, m->enabled ? "\1" : "\0", 1));
	for (int i = 0; i < 8; i++)
		rev[i] = (uint8_t)(m->revision >> (56 - 8 * i));
	T_OK(btree_put(a, SCHEMA_AUTH_REVISION, SCHEMA_LEN(SCHEMA_AUTH_REVISION), rev, 8));
	for (size_t i = 0; i < m->n_roles; i++)
		m_write_role(roles, &m->roles[i]);
	for (size_t i = 0; i < m->n_users; i++)
		m_write_user(users, &m->users[i]);
	T_OK(btree_commit(t, NULL));
	return db;
}

/* The cache of db's newest commit. */
static inline struct auth_cache *m_cache_of(struct btree_db *db)
{
	struct btree_txn *t;
	struct auth_cache *c;
	T_OK(btree_db_read_begin(db, NULL, &t));
	T_OK(auth_db_load(t, &c));
	btree_txn_end(t);
	return c;
}

/* Auth enabled at revision rev, role "r" (no permissions yet), user "u"
 * holding it. */
static inline void m_one_user(struct m_auth *m, uint64_t rev)
{
	memset(m, 0, sizeof(*m));
	*m = (struct m_auth){ .enabled = true, .revision = rev, .n_roles = 1, .n_users = 1 };
	snprintf(m->roles[0].name, M_NAME_MAX, "r");
	snprintf(m->users[0].name, M_NAME_MAX, "u");
	snprintf(m->users[0].roles[0], M_NAME_MAX, "r");
	m->users[0].n_roles = 1;
}

/* The cache of m written into a fresh db in dir. */
static inline struct auth_cache *m_cache_from(const char *dir, const struct m_auth *m)
{
	struct btree_db *db = m_db_create(dir, m);
	struct auth_cache *c = m_cache_of(db);
	btree_db_close(db);
	return c;
}

/* A test's start (seed, hook, scratch dir) and end (no leaks). */
static inline void ta_begin(char *dir, size_t len)
{
	t_set_seed(t_pick_seed());
	printf("seed %" PRIu64 "\n", t_seed);
	auth_set_allocator(auth_util_alloc, auth_util_free);
	t_mkdir(dir, len);
}

static inline void ta_end(const char *dir)
{
	t_rmdir(dir);
	ta_no_leaks();
	t_no_leaks();
	printf("ok\n");
}

/* ---- etcd's decisions, flat ---- */

/* adt.BytesAffineComparable: bytewise, the empty string above all. */
static inline int e_cmp(const struct m_bytes *a, const struct m_bytes *b)
{
	if (a->len == 0)
		return b->len == 0 ? 0 : 1;
	if (b->len == 0)
		return -1;
	int r = memcmp(a->b, b->b, a->len < b->len ? a->len : b->len);
	if (r)
		return r < 0 ? -1 : 1;
	return a->len < b->len ? -1 : a->len > b->len;
}

struct e_ivl {
	struct m_bytes begin, end;
};

/* adt.Interval.Compare: -1 left of, 1 right of, 0 overlapping. */
static inline int e_ivl_cmp(const struct e_ivl *a, const struct e_ivl *b)
{
	int bb = e_cmp(&a->begin, &b->begin), be = e_cmp(&a->begin, &b->end);
	int eb = e_cmp(&a->end, &b->begin);
	if (bb < 0 && eb <= 0)
		return -1;
	if (be >= 0)
		return 1;
	return 0;
}

static inline struct m_bytes e_point_end(const struct m_bytes *k)
{
	struct m_bytes e = *k;
	e.b[e.len++] = 0;
	return e;
}

/* The interval getMergedPerms inserts for a permission. */
static inline struct e_ivl e_perm_ivl(const struct m_perm *p)
{
	struct e_ivl iv = { p->key, p->end };
	if (p->end.len == 0)
		iv.end = e_point_end(&p->key);
	else if (p->end.len == 1 && p->end.b[0] == 0)
		iv.end.len = 0;
	return iv;
}

/* The intervals of user u's set of type t (0 READ, 1 WRITE), as inserted. */
static inline size_t e_user_set(const struct m_auth *m, const struct m_user *u, int t,
				struct e_ivl *out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < u->n_roles; i++)
		for (size_t r = 0; r < m->n_roles; r++) {
			if (strcmp(m->roles[r].name, u->roles[i]) != 0)
				continue;
			for (size_t j = 0; j < m->roles[r].n; j++) {
				const struct m_perm *p = &m->roles[r].perms[j];
				if (p->type == 2 || p->type == t) {
					if (n == cap)
						T_FAIL("model set over %zu", cap);
					out[n++] = e_perm_ivl(p);
				}
			}
		}
	return n;
}

static int e_begin_cmp(const void *a, const void *b)
{
	return e_cmp(&((const struct e_ivl *)a)->begin, &((const struct e_ivl *)b)->begin);
}

/* etcd's isRangeOpPermitted over the flat set: checkKeyPoint (Intersects)
 * for an empty range_end, else checkKeyInterval (Contains). */
static inline bool e_permitted(const struct e_ivl *set, size_t n, struct m_bytes key,
			       struct m_bytes end)
{
	struct e_ivl q = { key, end };
	if (end.len == 0) {
		q.end = e_point_end(&key);
		for (size_t i = 0; i < n; i++)
			if (e_ivl_cmp(&q, &set[i]) == 0)
				return true;
		return false;
	}
	if (end.len == 1 && end.b[0] == 0)
		q.end.len = 0;
	struct e_ivl *visit = t_xmalloc((n + 1) * sizeof(*visit));
	size_t nv = 0;
	for (size_t i = 0; i < n; i++)
		if (e_ivl_cmp(&q, &set[i]) == 0)
			visit[nv++] = set[i];
	qsort(visit, nv, sizeof(*visit), e_begin_cmp);
	bool contiguous = true;
	struct m_bytes max_end = { .len = 0 };
	for (size_t i = 0; i < nv; i++) {
		if (i == 0) {
			max_end = visit[0].end;
			continue;
		}
		if (e_cmp(&max_end, &visit[i].begin) < 0) {
			contiguous = false;
			break;
		}
		if (e_cmp(&visit[i].end, &max_end) > 0)
			max_end = visit[i].end;
	}
	bool ok = contiguous && nv > 0 && e_cmp(&max_end, &q.end) >= 0 &&
		  e_cmp(&visit[0].begin, &q.begin) <= 0;
	free(visit);
	return ok;
}

#endif
