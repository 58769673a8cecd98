/*
 * Helpers for the B+tree engine's tests: checks that print the seed, a
 * seeded generator, scratch directories, and a reference model (a tree of
 * buckets, each a plain sorted array) to compare the engine against.
 */
#ifndef CETCD_TEST_BTREE_UTIL_H
#define CETCD_TEST_BTREE_UTIL_H

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_invariants.h"

#include "base/log/errmsg.h"
#include "stored/alloc.h"
#include "stored/btree/btree.h"
#include "stored/btree/page.h"

static uint64_t t_seed;          /* printed with every failure */
static const char *t_phase = ""; /* what the test was doing */
static uint64_t t_step;          /* operation number within the phase */

#define T_FAIL(...)                                                                 \
	do {                                                                        \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                     \
		fprintf(stderr, __VA_ARGS__);                                       \
		fprintf(stderr, " [seed %" PRIu64 ", %s, step %" PRIu64 "]\n",     \
			t_seed, t_phase, t_step);                                   \
		exit(1);                                                            \
	} while (0)

#define T_CHECK(cond)                                  \
	do {                                           \
		if (!(cond))                           \
			T_FAIL("check failed: %s", #cond); \
	} while (0)

#define T_OK(expr)                                                                 \
	do {                                                                       \
		int t_rc_ = (expr);                                                \
		if (t_rc_ != 0)                                                    \
			T_FAIL("%s returned %d (%s)", #expr, t_rc_, errmsg_get(t_rc_)); \
	} while (0)

#define T_RC(expr, want)                                                            \
	do {                                                                        \
		int t_rc_ = (expr);                                                 \
		if (t_rc_ != (want))                                                \
			T_FAIL("%s returned %d (%s), want %d", #expr, t_rc_,        \
			       errmsg_get(t_rc_), (want));                          \
	} while (0)

/* splitmix64: small, fast, good enough for test choices. */
static uint64_t t_rng_state;
static inline uint64_t t_rand(void)
{
	uint64_t z = (t_rng_state += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}
static inline uint64_t t_below(uint64_t n) { return n ? t_rand() % n : 0; }
static inline bool t_chance(unsigned pct_x10) { return t_below(1000) < pct_x10; }

/* The seed: $BTREE_SEED, else from the clock. */
static inline uint64_t t_pick_seed(void)
{
	const char *s = getenv("BTREE_SEED");
	if (s && *s)
		return strtoull(s, NULL, 0);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

static inline void t_set_seed(uint64_t seed)
{
	t_seed = seed;
	t_rng_state = seed;
}

/* A scratch directory, removed by t_rmdir. */
static inline void t_mkdir(char *buf, size_t len)
{
	const char *base = getenv("TMPDIR");
	snprintf(buf, len, "%s/cetcd-btree-XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(buf))
		T_FAIL("mkdtemp: %s", strerror(errno));
}

static int t_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(p);
}

static inline void t_rmdir(const char *dir)
{
	nftw(dir, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Fails the test if the stored component leaked memory. */
static inline void t_no_leaks(void)
{
	long live = stored_alloc_live();
	if (live != 0)
		T_FAIL("%ld stored allocations still live at the end", live);
}

/* The write syscalls this process has made, all its threads (syscw of
 * /proc/self/io). */
static inline uint64_t t_write_syscalls(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	T_CHECK(f != NULL);
	char line[128];
	unsigned long long n = 0;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "syscw: %llu", &n) == 1;
	fclose(f);
	T_CHECK(found);
	return n;
}

/* ---- tagged keys in bucket "b" ---- */

/* One write txn putting keys "<tag>-<i>" (i < n) with vlen-byte values of
 * the tag's byte into bucket "b" (made if missing), in key order or, with
 * scattered, in a fixed scattered order; btree_commit's result. */
static inline int t_put_tagged(struct btree_db *db, char tag, int n, size_t vlen, bool scattered)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	uint8_t v[4096];
	if (vlen > sizeof(v))
		T_FAIL("t_put_tagged: %zu-byte values", vlen);
	memset(v, tag, vlen);
	T_OK(btree_write_begin(db, &t));
	int rc = btree_bucket_create(t, NULL, "b", 1, &b);
	if (rc == -EEXIST)
		rc = btree_bucket_open(t, NULL, "b", 1, &b);
	T_OK(rc);
	for (int i = 0; i < n; i++) {
		char k[32];
		int at = scattered ? (int)((uint64_t)i * 7919 % (uint64_t)n) : i;
		snprintf(k, sizeof(k), "%c-%05d", tag, at);
		T_OK(btree_put(b, k, strlen(k), v, vlen));
	}
	return btree_commit(t, NULL);
}

/* How many keys of tag (i < n) the db's newest commit holds, each checked
 * to have its vlen-byte value. */
static inline int t_count_tagged(struct btree_db *db, char tag, int n, size_t vlen)
{
	struct btree_txn *t;
	struct btree_bucket *b;
	int found = 0;
	T_OK(btree_db_read_begin(db, NULL, &t));
	if (btree_bucket_open(t, NULL, "b", 1, &b) == 0) {
		for (int i = 0; i < n; i++) {
			char k[32];
			const uint8_t *v;
			size_t len;
			snprintf(k, sizeof(k), "%c-%05d", tag, i);
			if (btree_get(b, k, strlen(k), &v, &len) == 0) {
				T_CHECK(len == vlen && v[0] == (uint8_t)tag &&
					v[vlen - 1] == (uint8_t)tag);
				found++;
			}
		}
	}
	btree_txn_end(t);
	return found;
}

/* ---- reference model ---- */

struct m_entry {
	uint8_t *key;
	uint32_t klen;
	uint8_t *val;   /* NULL for a bucket */
	uint32_t vlen;
	int child;      /* bucket index, or -1 for a value */
};

struct m_bucket {
	struct m_entry *e;   /* sorted by key */
	size_t n, cap;
	int parent;          /* -1 for the root */
	bool live;
	uint8_t *name;       /* name in the parent */
	uint32_t nlen;
};

struct model {
	struct m_bucket *b;  /* b[0] is the top level */
	size_t nb, cap;
};

static inline void *t_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		T_FAIL("out of memory");
	return p;
}

static inline uint8_t *t_dup(const void *p, size_t n)
{
	uint8_t *d = t_xmalloc(n);
	if (n)
		memcpy(d, p, n);
	return d;
}

static inline int m_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;
	return c ? c : (al < bl ? -1 : al > bl);
}

static inline int m_new_bucket(struct model *m, int parent)
{
	if (m->nb == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 16;
		m->b = realloc(m->b, m->cap * sizeof(*m->b));
		if (!m->b)
			T_FAIL("out of memory");
	}
	m->b[m->nb] = (struct m_bucket){ NULL, 0, 0, parent, true, NULL, 0 };
	return (int)m->nb++;
}

static inline void m_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m_new_bucket(m, -1);
}

/* Index of the first entry >= key in bucket bi; *found if equal. */
static inline size_t m_find(const struct model *m, int bi, const void *key, size_t klen,
			    bool *found)
{
	const struct m_bucket *b = &m->b[bi];
	size_t lo = 0, hi = b->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m_cmp(b->e[mid].key, b->e[mid].klen, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < b->n && m_cmp(b->e[lo].key, b->e[lo].klen, key, klen) == 0;
	return lo;
}

static inline struct m_entry *m_insert_at(struct model *m, int bi, size_t i)
{
	struct m_bucket *b = &m->b[bi];
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap * 2 : 16;
		b->e = realloc(b->e, b->cap * sizeof(*b->e));
		if (!b->e)
			T_FAIL("out of memory");
	}
	memmove(&b->e[i + 1], &b->e[i], (b->n - i) * sizeof(*b->e));
	b->n++;
	return &b->e[i];
}

/* Returns false if key names a bucket (nothing changed). */
static inline bool m_put(struct model *m, int bi, const void *key, size_t klen,
			 const void *val, size_t vlen)
{
	bool found;
	size_t i = m_find(m, bi, key, klen, &found);
	if (found) {
		struct m_entry *e = &m->b[bi].e[i];
		if (e->child >= 0)
			return false;
		free(e->val);
		e->val = t_dup(val, vlen);
		e->vlen = (uint32_t)vlen;
		return true;
	}
	struct m_entry *e = m_insert_at(m, bi, i);
	*e = (struct m_entry){ t_dup(key, klen), (uint32_t)klen, t_dup(val, vlen), (uint32_t)vlen, -1 };
	return true;
}

static inline void m_remove_at(struct model *m, int bi, size_t i)
{
	struct m_bucket *b = &m->b[bi];
	free(b->e[i].key);
	free(b->e[i].val);
	memmove(&b->e[i], &b->e[i + 1], (b->n - i - 1) * sizeof(*b->e));
	b->n--;
}

/* Returns 0, -ENOENT, or -EISDIR like btree_del. */
static inline int m_del(struct model *m, int bi, const void *key, size_t klen)
{
	bool found;
	size_t i = m_find(m, bi, key, klen, &found);
	if (!found)
		return -ENOENT;
	if (m->b[bi].e[i].child >= 0)
		return -EISDIR;
	m_remove_at(m, bi, i);
	return 0;
}

/* Creates bucket name in bi; returns its index, or -EEXIST / -ENOTDIR. */
static inline int m_create(struct model *m, int bi, const void *name, size_t nlen)
{
	bool found;
	size_t i = m_find(m, bi, name, nlen, &found);
	if (found)
		return m->b[bi].e[i].child >= 0 ? -EEXIST : -ENOTDIR;
	int child = m_new_bucket(m, bi);
	m->b[child].name = t_dup(name, nlen);
	m->b[child].nlen = (uint32_t)nlen;
	struct m_entry *e = m_insert_at(m, bi, i);
	*e = (struct m_entry){ t_dup(name, nlen), (uint32_t)nlen, NULL, 0, child };
	return child;
}

static inline void m_kill(struct model *m, int bi)
{
	struct m_bucket *b = &m->b[bi];
	for (size_t i = 0; i < b->n; i++) {
		if (b->e[i].child >= 0)
			m_kill(m, b->e[i].child);
		free(b->e[i].key);
		free(b->e[i].val);
	}
	free(b->e);
	b->e = NULL;
	b->n = b->cap = 0;
	b->live = false;
}

static inline int m_drop(struct model *m, int bi, const void *name, size_t nlen)
{
	bool found;
	size_t i = m_find(m, bi, name, nlen, &found);
	if (!found)
		return -ENOENT;
	if (m->b[bi].e[i].child < 0)
		return -ENOTDIR;
	m_kill(m, m->b[bi].e[i].child);
	m_remove_at(m, bi, i);
	return 0;
}

static inline void m_free(struct model *m)
{
	for (size_t i = 0; i < m->nb; i++) {
		struct m_bucket *b = &m->b[i];
		for (size_t j = 0; j < b->n; j++) {
			free(b->e[j].key);
			free(b->e[j].val);
		}
		free(b->e);
		free(b->name);
	}
	free(m->b);
	memset(m, 0, sizeof(*m));
}

static inline void m_clone(struct model *dst, const struct model *src)
{
	dst->nb = dst->cap = src->nb;
	dst->b = t_xmalloc(src->nb * sizeof(*dst->b));
	for (size_t i = 0; i < src->nb; i++) {
		const struct m_bucket *s = &src->b[i];
		struct m_bucket *d = &dst->b[i];
		*d = *s;
		d->name = s->name ? t_dup(s->name, s->nlen) : NULL;
		d->cap = s->n;
		d->e = s->n ? t_xmalloc(s->n * sizeof(*d->e)) : NULL;
		for (size_t j = 0; j < s->n; j++) {
			d->e[j] = s->e[j];
			d->e[j].key = t_dup(s->e[j].key, s->e[j].klen);
			d->e[j].val = s->e[j].child >= 0 ? NULL : t_dup(s->e[j].val, s->e[j].vlen);
		}
	}
}

/* Compares bucket bi of the model with the db bucket b: a forward walk,
 * a backward walk, and every nested bucket. */
static inline void m_compare(const struct model *m, int bi, struct btree_txn *t,
		      struct btree_bucket *b, unsigned depth)
{
	const struct m_bucket *mb = &m->b[bi];
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	int rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		if (i >= mb->n)
			T_FAIL("bucket %d: db has more than the model's %zu entries", bi, mb->n);
		const struct m_entry *e = &mb->e[i];
		if (m_cmp(kv.key, kv.key_len, e->key, e->klen) != 0)
			T_FAIL("bucket %d entry %zu: key differs (db %zu bytes, model %u)", bi, i,
			       kv.key_len, e->klen);
		if ((e->child >= 0) != !!(kv.flags & BTREE_KV_BUCKET))
			T_FAIL("bucket %d entry %zu: bucket flag differs", bi, i);
		if (e->child < 0 && m_cmp(kv.val, kv.val_len, e->val, e->vlen) != 0)
			T_FAIL("bucket %d entry %zu: value differs (db %zu bytes, model %u)", bi, i,
			       kv.val_len, e->vlen);
	}
	if (rc != -ENOENT)
		T_FAIL("bucket %d: cursor walk failed with %d", bi, rc);
	if (i != mb->n)
		T_FAIL("bucket %d: db has %zu entries, model %zu", bi, i, mb->n);
	i = mb->n;
	for (rc = btree_cursor_last(&c, &kv); rc == 0; rc = btree_cursor_prev(&c, &kv)) {
		if (i == 0)
			T_FAIL("bucket %d: backward walk has too many entries", bi);
		i--;
		if (m_cmp(kv.key, kv.key_len, mb->e[i].key, mb->e[i].klen) != 0)
			T_FAIL("bucket %d entry %zu: key differs walking backwards", bi, i);
	}
	if (rc != -ENOENT || i != 0)
		T_FAIL("bucket %d: backward walk ended at %zu with %d", bi, i, rc);
	for (i = 0; i < mb->n; i++) {
		if (mb->e[i].child < 0)
			continue;
		struct btree_bucket *child;
		T_OK(btree_bucket_open(t, b, mb->e[i].key, mb->e[i].klen, &child));
		m_compare(m, mb->e[i].child, t, child, depth + 1);
	}
}

/* Compares model m with the db's newest commit, in a read txn. */
static inline void m_compare_db(struct btree_db *db, const struct model *m)
{
	struct btree_txn *t;
	T_OK(btree_db_read_begin(db, NULL, &t));
	m_compare(m, 0, t, btree_txn_root(t), 0);
	btree_txn_end(t);
}

#endif
