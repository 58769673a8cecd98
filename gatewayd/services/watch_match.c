/* The watch key matcher (watch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/services/watch.h"

_Static_assert(sizeof(struct wm_entry) == 16, "a watcher's matcher entry stays small");

/* A range's tree node, after its end bytes: children (starts <= this
 * one's on the left), the entry with the largest end in this subtree
 * (WM_FROM_KEY ends above every key) and the heap priority (a parent's
 * >= its children's). */
struct wm_node {
	struct wm_entry *left, *right, *maxend;
	uint32_t prio;
};

static uint32_t wm_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return (uint32_t)(h ^ (h >> 32));
}

static int wm_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

static size_t wm_node_off(size_t key_off, size_t key_len, size_t end_len)
{
	size_t a = _Alignof(struct wm_node);
	return (key_off + key_len + end_len + a - 1) / a * a;
}

size_t wm_entry_size(size_t key_off, size_t key_len, size_t end_len)
{
	if (end_len == 0)
		return key_off + key_len;
	return wm_node_off(key_off, key_len, end_len) + sizeof(struct wm_node);
}

void wm_entry_set(struct wm_entry *e, size_t key_len, size_t end_len)
{
	e->next = NULL;
	e->key_len = (uint32_t)key_len;
	e->end_len = (uint32_t)end_len;
}

static const uint8_t *wm_end(const struct watch_matcher *m, const struct wm_entry *e)
{
	return wm_key(m, e) + e->key_len;
}

/* The entry's node address: entries are allocated at wm_node's alignment. */
static struct wm_node *wm_n(const struct watch_matcher *m, const struct wm_entry *e)
{
	return (struct wm_node *)((uintptr_t)e + wm_node_off(m->key_off, e->key_len, e->end_len));
}

int wm_kind(const struct watch_matcher *m, const struct wm_entry *e)
{
	if (e->end_len == 0)
		return WM_KEY;
	if (e->end_len == 1 && wm_end(m, e)[0] == 0)
		return WM_FROM_KEY;
	return WM_RANGE;
}

bool wm_covers(const struct watch_matcher *m, const struct wm_entry *e, const uint8_t *key,
	       size_t len)
{
	switch (wm_kind(m, e)) {
	case WM_KEY:
		return len == e->key_len && memcmp(key, wm_key(m, e), len) == 0;
	case WM_FROM_KEY:
		return wm_cmp(key, len, wm_key(m, e), e->key_len) >= 0;
	default:
		return wm_cmp(key, len, wm_key(m, e), e->key_len) >= 0 &&
		       wm_cmp(key, len, wm_end(m, e), e->end_len) < 0;
	}
}

int wm_init(struct watch_matcher *m, size_t key_off)
{
	memset(m, 0, sizeof(*m));
	m->key_off = key_off;
	m->nbuckets = 64;
	m->rng = 0x9e3779b97f4a7c15ull;
	m->buckets = calloc(m->nbuckets, sizeof(*m->buckets));
	return m->buckets ? 0 : -ENOMEM;
}

void wm_fini(struct watch_matcher *m)
{
	free(m->buckets);
	memset(m, 0, sizeof(*m));
}

static struct wm_entry **wm_bucket(struct wm_entry **b, size_t n, const uint8_t *key, size_t len)
{
	return &b[wm_hash(key, len) & (n - 1)];
}

static int wm_grow(struct watch_matcher *m)
{
	size_t n = m->nbuckets * 2;
	struct wm_entry **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct wm_entry *e = m->buckets[i], *next;
		for (; e; e = next) {
			struct wm_entry **head = wm_bucket(b, n, wm_key(m, e), e->key_len);
			next = e->next;
			e->next = *head;
			*head = e;
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
	return 0;
}

/* ---- the interval treap for ranges ---- */

/* Whether a's end is above b's (WM_FROM_KEY is above every key). */
static bool wm_end_above(const struct watch_matcher *m, const struct wm_entry *a,
			 const struct wm_entry *b)
{
	if (wm_kind(m, a) == WM_FROM_KEY)
		return wm_kind(m, b) != WM_FROM_KEY;
	if (wm_kind(m, b) == WM_FROM_KEY)
		return false;
	return wm_cmp(wm_end(m, a), a->end_len, wm_end(m, b), b->end_len) > 0;
}

/* Whether e's end is above key: some range in e's subtree may cover it. */
static bool wm_end_above_key(const struct watch_matcher *m, const struct wm_entry *e,
			     const uint8_t *key, size_t len)
{
	return wm_kind(m, e) == WM_FROM_KEY || wm_cmp(wm_end(m, e), e->end_len, key, len) > 0;
}

/* Tree order: start key, then address, so that equal ranges are distinct
 * and a removal finds its own entry. */
static int wm_order(const struct watch_matcher *m, const struct wm_entry *a,
		    const struct wm_entry *b)
{
	int c = wm_cmp(wm_key(m, a), a->key_len, wm_key(m, b), b->key_len);
	if (c)
		return c;
	return (uintptr_t)a < (uintptr_t)b ? -1 : (uintptr_t)a > (uintptr_t)b;
}

static void wm_fix(const struct watch_matcher *m, struct wm_entry *t)
{
	struct wm_node *n = wm_n(m, t);
	struct wm_entry *mx = t;
	if (n->left && wm_end_above(m, wm_n(m, n->left)->maxend, mx))
		mx = wm_n(m, n->left)->maxend;
	if (n->right && wm_end_above(m, wm_n(m, n->right)->maxend, mx))
		mx = wm_n(m, n->right)->maxend;
	n->maxend = mx;
}

static struct wm_entry *wm_rot_right(const struct watch_matcher *m, struct wm_entry *t)
{
	struct wm_entry *l = wm_n(m, t)->left;
	wm_n(m, t)->left = wm_n(m, l)->right;
	wm_n(m, l)->right = t;
	wm_fix(m, t);
	wm_fix(m, l);
	return l;
}

static struct wm_entry *wm_rot_left(const struct watch_matcher *m, struct wm_entry *t)
{
	struct wm_entry *r = wm_n(m, t)->right;
	wm_n(m, t)->right = wm_n(m, r)->left;
	wm_n(m, r)->left = t;
	wm_fix(m, t);
	wm_fix(m, r);
	return r;
}

/* Recursion depth is the treap's depth, O(log n) expected. */
static struct wm_entry *wm_insert(const struct watch_matcher *m, struct wm_entry *t,
				  struct wm_entry *e)
{
	if (!t)
		return e;
	struct wm_node *n = wm_n(m, t);
	if (wm_order(m, e, t) < 0) {
		n->left = wm_insert(m, n->left, e);
		if (wm_n(m, n->left)->prio > n->prio)
			return wm_rot_right(m, t);
	} else {
		n->right = wm_insert(m, n->right, e);
		if (wm_n(m, n->right)->prio > n->prio)
			return wm_rot_left(m, t);
	}
	wm_fix(m, t);
	return t;
}

/* Joins two treaps where every entry of a orders before every one of b. */
static struct wm_entry *wm_join(const struct watch_matcher *m, struct wm_entry *a,
				struct wm_entry *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	struct wm_node *na = wm_n(m, a), *nb = wm_n(m, b);
	if (na->prio > nb->prio) {
		na->right = wm_join(m, na->right, b);
		wm_fix(m, a);
		return a;
	}
	nb->left = wm_join(m, a, nb->left);
	wm_fix(m, b);
	return b;
}

static struct wm_entry *wm_remove(const struct watch_matcher *m, struct wm_entry *t,
				  struct wm_entry *e)
{
	if (!t)
		return NULL; /* not in the tree: nothing to do */
	struct wm_node *n = wm_n(m, t);
	if (t == e)
		return wm_join(m, n->left, n->right);
	if (wm_order(m, e, t) < 0)
		n->left = wm_remove(m, n->left, e);
	else
		n->right = wm_remove(m, n->right, e);
	wm_fix(m, t);
	return t;
}

/* Reports every range in t's subtree that covers key. A subtree whose
 * largest end is not above the key holds no match; a node that starts
 * after the key has none on its right either. */
static void wm_stab(const struct watch_matcher *m, const struct wm_entry *t, const uint8_t *key,
		    size_t len, wm_fn fn, void *arg)
{
	while (t && wm_end_above_key(m, wm_n(m, t)->maxend, key, len)) {
		const struct wm_node *n = wm_n(m, t);
		wm_stab(m, n->left, key, len, fn, arg);
		if (wm_cmp(wm_key(m, t), t->key_len, key, len) > 0)
			return;
		if (wm_end_above_key(m, t, key, len))
			fn(arg, (struct wm_entry *)t);
		t = n->right;
	}
}

int wm_add(struct watch_matcher *m, struct wm_entry *e)
{
	int rc = 0;

	if (e->end_len == 0) {
		if (m->nkeys >= WM_LOAD * m->nbuckets)
			rc = wm_grow(m);
		struct wm_entry **head = wm_bucket(m->buckets, m->nbuckets, wm_key(m, e), e->key_len);
		e->next = *head;
		*head = e;
		m->nkeys++;
		return rc;
	}
	struct wm_node *n = wm_n(m, e);
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	n->left = n->right = NULL;
	n->maxend = e;
	n->prio = (uint32_t)(m->rng >> 32);
	m->ranges = wm_insert(m, m->ranges, e);
	m->nranges++;
	return 0;
}

void wm_del(struct watch_matcher *m, struct wm_entry *e)
{
	if (e->end_len != 0) {
		m->ranges = wm_remove(m, m->ranges, e);
		m->nranges--;
		return;
	}
	struct wm_entry **p = wm_bucket(m->buckets, m->nbuckets, wm_key(m, e), e->key_len);
	for (; *p; p = &(*p)->next) {
		if (*p == e) {
			*p = e->next;
			m->nkeys--;
			break;
		}
	}
	e->next = NULL;
}

void wm_match(const struct watch_matcher *m, const uint8_t *key, size_t len, wm_fn fn, void *arg)
{
	struct wm_entry *e = *wm_bucket(m->buckets, m->nbuckets, key, len), *next;

	for (; e; e = next) {
		next = e->next;
		if (e->key_len == len && memcmp(wm_key(m, e), key, len) == 0)
			fn(arg, e);
	}
	wm_stab(m, m->ranges, key, len, fn, arg);
}
