/*
 * A map from page id to pointer (open addressing, linear probing), for a
 * bucket's materialized nodes, a txn's dirty pages and the db's pages
 * born since its last checkpoint. Entries are only added (a value may be
 * replaced); the map is dropped whole.
 */
#ifndef CETCD_STORED_PGMAP_H
#define CETCD_STORED_PGMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pgmap {
	uint64_t *keys;  /* page id + 1; 0 marks an empty slot */
	void **vals;
	size_t cap;      /* a power of two, or 0 */
	size_t n;
};

static inline void pgmap_init(struct pgmap *m)
{
	m->keys = NULL;
	m->vals = NULL;
	m->cap = 0;
	m->n = 0;
}

/* The value stored for pgid, or NULL. */
void *pgmap_get(const struct pgmap *m, uint64_t pgid);
/* Sets pgid's value (replacing any). -ENOMEM. */
int pgmap_put(struct pgmap *m, uint64_t pgid, void *val);
/* Replaces the value of a pgid the map holds, without allocating; false
 * if it holds none. */
bool pgmap_replace(struct pgmap *m, uint64_t pgid, void *val);
void pgmap_free(struct pgmap *m);

#endif
