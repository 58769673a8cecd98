/*
 * Page id -> pointer map (see pgmap.h).
 */
#include "stored/btree/pgmap.h"

#include <errno.h>
#include <stdint.h>

#include "stored/alloc.h"

static size_t pgmap_slot(uint64_t key, size_t cap)
{
	uint64_t h = key * 0x9E3779B97F4A7C15ull;
	return (size_t)(h >> 17) & (cap - 1);
}

/* The slot holding pgid, or SIZE_MAX. */
static size_t pgmap_find(const struct pgmap *m, uint64_t pgid)
{
	if (m->cap == 0)
		return SIZE_MAX;
	uint64_t key = pgid + 1;
	for (size_t i = pgmap_slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return i;
		if (m->keys[i] == 0)
			return SIZE_MAX;
	}
}

void *pgmap_get(const struct pgmap *m, uint64_t pgid)
{
	size_t i = pgmap_find(m, pgid);
	return i == SIZE_MAX ? NULL : m->vals[i];
}

bool pgmap_replace(struct pgmap *m, uint64_t pgid, void *val)
{
	size_t i = pgmap_find(m, pgid);
	if (i == SIZE_MAX)
		return false;
	m->vals[i] = val;
	return true;
}

static int pgmap_grow(struct pgmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	uint64_t *keys = stored_calloc(cap, sizeof(*keys));
	void **vals = stored_calloc(cap, sizeof(*vals));
	if (!keys || !vals) {
		stored_free(keys);
		stored_free(vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i] == 0)
			continue;
		size_t j = pgmap_slot(m->keys[i], cap);
		while (keys[j] != 0)
			j = (j + 1) & (cap - 1);
		keys[j] = m->keys[i];
		vals[j] = m->vals[i];
	}
	stored_free(m->keys);
	stored_free(m->vals);
	m->keys = keys;
	m->vals = vals;
	m->cap = cap;
	return 0;
}

int pgmap_put(struct pgmap *m, uint64_t pgid, void *val)
{
	if ((m->n + 1) * 4 > m->cap * 3) {
		int rc = pgmap_grow(m);
		if (rc < 0)
			return rc;
	}
	uint64_t key = pgid + 1;
	size_t i = pgmap_slot(key, m->cap);
	while (m->keys[i] != 0 && m->keys[i] != key)
		i = (i + 1) & (m->cap - 1);
	if (m->keys[i] == 0)
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void pgmap_free(struct pgmap *m)
{
	stored_free(m->keys);
	stored_free(m->vals);
	pgmap_init(m);
}
