/* The watch key matcher (watch.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/watch.h"

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
	e->key_len = key_len;
	e->end = end;
	e->end_len = end_len;
	if (!end || end_len == 0)
		e->kind = WM_KEY;
	else if (end_len == 1 && end[0] == 0)
		e->kind = WM_FROM_KEY;
	else
		e->kind = WM_RANGE;
	e->hash = e->kind == WM_KEY ? wm_hash(key, key_len) : 0;
	e->next = e->prev = NULL;
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
	/* sorted by start key: insert before the first that starts after */
	struct wm_entry **p = &m->ranges, *prev = NULL;
	while (*p && wm_cmp((*p)->key, (*p)->key_len, e->key, e->key_len) <= 0) {
		prev = *p;
		p = &(*p)->next;
	}
	e->next = *p;
	e->prev = prev;
	if (*p)
		(*p)->prev = e;
	*p = e;
	m->nranges++;
	return 0;
}

void wm_del(struct watch_matcher *m, struct wm_entry *e)
{
	struct wm_entry **head = e->kind == WM_KEY ? &m->buckets[e->hash & (m->nbuckets - 1)] :
						     &m->ranges;
	if (e->prev)
		e->prev->next = e->next;
	else
		*head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	e->next = e->prev = NULL;
	if (e->kind == WM_KEY)
		m->nkeys--;
	else
		m->nranges--;
}

void wm_match(const struct watch_matcher *m, const uint8_t *key, size_t len, wm_fn fn, void *arg)
{
	uint64_t h = wm_hash(key, len);
	struct wm_entry *e = m->buckets[h & (m->nbuckets - 1)], *next;

	for (; e; e = next) {
		next = e->next; /* fn may not remove e, but keep it robust */
		if (e->hash == h && wm_covers(e, key, len))
			fn(arg, e);
	}
	for (e = m->ranges; e; e = next) {
		next = e->next;
		if (wm_cmp(e->key, e->key_len, key, len) > 0)
			break; /* every later range starts after the key */
		if (wm_covers(e, key, len))
			fn(arg, e);
	}
}
