/* The watch key matcher (watch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/watch.h"

_Static_assert(sizeof(struct wm_entry) <= 56, "a watcher's matcher entry stays small");

static uint64_t wm_hash(const uint8_t *p, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h ^ (h >> 29);
}

static int wm_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

void wm_entry_set(struct wm_entry *e, const uint8_t *key, size_t key_len, const uint8_t *end,
		  size_t end_len)
{
	e->key = key;
	e->key_len = (uint32_t)key_len;
	e->end = end;
	e->end_len = (uint32_t)end_len;
	if (!end || end_len == 0)
		e->kind = WM_KEY;
	else if (end_len == 1 && end[0] == 0)
		e->kind = WM_FROM_KEY;
	else
		e->kind = WM_RANGE;
	e->prio = 0;
	if (e->kind == WM_KEY) {
		e->hash = wm_hash(key, key_len);
		e->next = e->prev = NULL;
	} else {
		e->left = e->right = NULL;
		e->maxend = e;
	}
}

bool wm_covers(const struct wm_entry *e, const uint8_t *key, size_t len)
{
	switch (e->kind) {
	case WM_KEY:
		return len == e->key_len && memcmp(key, e->key, len) == 0;
	case WM_FROM_KEY:
		return wm_cmp(key, len, e->key, e->key_len) >= 0;
	default:
		return wm_cmp(key, len, e->key, e->key_len) >= 0 &&
		       wm_cmp(key, len, e->end, e->end_len) < 0;
	}
}

int wm_init(struct watch_matcher *m)
{
	memset(m, 0, sizeof(*m));
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

static void wm_link(struct wm_entry **head, struct wm_entry *e)
{
	e->prev = NULL;
	e->next = *head;
	if (*head)
		(*head)->prev = e;
	*head = e;
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
			next = e->next;
			wm_link(&b[e->hash & (n - 1)], e);
		}
	}
	free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
	return 0;
}

/* ---- the interval treap for ranges ---- */

/* Whether a's end is above b's (WM_FROM_KEY is above every key). */
static bool wm_end_above(const struct wm_entry *a, const struct wm_entry *b)
{
	if (a->kind == WM_FROM_KEY)
		return b->kind != WM_FROM_KEY;
	if (b->kind == WM_FROM_KEY)
		return false;
	return wm_cmp(a->end, a->end_len, b->end, b->end_len) > 0;
}

/* Whether e's end is above key: some range in e's subtree may cover it. */
static bool wm_end_above_key(const struct wm_entry *e, const uint8_t *key, size_t len)
{
	return e->kind == WM_FROM_KEY || wm_cmp(e->end, e->end_len, key, len) > 0;
}

/* Tree order: start key, then address, so that equal ranges are distinct
 * and a removal finds its own entry. */
static int wm_order(const struct wm_entry *a, const struct wm_entry *b)
{
	int c = wm_cmp(a->key, a->key_len, b->key, b->key_len);
	if (c)
		return c;
	return (uintptr_t)a < (uintptr_t)b ? -1 : (uintptr_t)a > (uintptr_t)b;
}

static void wm_fix(struct wm_entry *t)
{
	struct wm_entry *mx = t;
	if (t->left && wm_end_above(t->left->maxend, mx))
		mx = t->left->maxend;
	if (t->right && wm_end_above(t->right->maxend, mx))
		mx = t->right->maxend;
	t->maxend = mx;
}

static struct wm_entry *wm_rot_right(struct wm_entry *t)
{
	struct wm_entry *l = t->left;
	t->left = l->right;
	l->right = t;
	wm_fix(t);
	wm_fix(l);
	return l;
}

static struct wm_entry *wm_rot_left(struct wm_entry *t)
{
	struct wm_entry *r = t->right;
	t->right = r->left;
	r->left = t;
	wm_fix(t);
	wm_fix(r);
	return r;
}

/* Recursion depth is the treap's depth, O(log n) expected. */
static struct wm_entry *wm_insert(struct wm_entry *t, struct wm_entry *e)
{
	if (!t)
		return e;
	if (wm_order(e, t) < 0) {
		t->left = wm_insert(t->left, e);
		if (t->left->prio > t->prio)
			return wm_rot_right(t);
	} else {
		t->right = wm_insert(t->right, e);
		if (t->right->prio > t->prio)
			return wm_rot_left(t);
	}
	wm_fix(t);
	return t;
}

/* Joins two treaps where every entry of a orders before every one of b. */
static struct wm_entry *wm_join(struct wm_entry *a, struct wm_entry *b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	if (a->prio > b->prio) {
		a->right = wm_join(a->right, b);
		wm_fix(a);
		return a;
	}
	b->left = wm_join(a, b->left);
	wm_fix(b);
	return b;
}

static struct wm_entry *wm_remove(struct wm_entry *t, struct wm_entry *e)
{
	if (!t)
		return NULL; /* not in the tree: nothing to do */
	if (t == e)
		return wm_join(t->left, t->right);
	if (wm_order(e, t) < 0)
		t->left = wm_remove(t->left, e);
	else
		t->right = wm_remove(t->right, e);
	wm_fix(t);
	return t;
}

/* Reports every range in t's subtree that covers key. A subtree whose
 * largest end is not above the key holds no match; a node that starts
 * after the key has none on its right either. */
static void wm_stab(const struct wm_entry *t, const uint8_t *key, size_t len, wm_fn fn, void *arg)
{
	while (t && wm_end_above_key(t->maxend, key, len)) {
		wm_stab(t->left, key, len, fn, arg);
		if (wm_cmp(t->key, t->key_len, key, len) > 0)
			return;
		if (wm_end_above_key(t, key, len))
			fn(arg, (struct wm_entry *)t);
		t = t->right;
	}
}

int wm_add(struct watch_matcher *m, struct wm_entry *e)
{
	int rc = 0;

	if (e->kind == WM_KEY) {
		if (m->nkeys >= m->nbuckets)
			rc = wm_grow(m);
		wm_link(&m->buckets[e->hash & (m->nbuckets - 1)], e);
		m->nkeys++;
		return rc;
	}
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	e->left = e->right = NULL;
	e->maxend = e;
	e->prio = (uint32_t)(m->rng >> 32);
	m->ranges = wm_insert(m->ranges, e);
	m->nranges++;
	return 0;
}

void wm_del(struct watch_matcher *m, struct wm_entry *e)
{
	if (e->kind != WM_KEY) {
		m->ranges = wm_remove(m->ranges, e);
		e->left = e->right = NULL;
		e->maxend = e;
		m->nranges--;
		return;
	}
	struct wm_entry **head = &m->buckets[e->hash & (m->nbuckets - 1)];
	if (e->prev)
		e->prev->next = e->next;
	else
		*head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	e->next = e->prev = NULL;
	m->nkeys--;
}

void wm_match(const struct watch_matcher *m, const uint8_t *key, size_t len, wm_fn fn, void *arg)
{
	uint64_t h = wm_hash(key, len);
	struct wm_entry *e = m->buckets[h & (m->nbuckets - 1)], *next;

	for (; e; e = next) {
		next = e->next;
		if (e->hash == h && wm_covers(e, key, len))
			fn(arg, e);
	}
	wm_stab(m->ranges, key, len, fn, arg);
}
