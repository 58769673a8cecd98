/*
 * A map from page id to pointer (open addressing, linear probing), for a
 * bucket's materialized nodes and a txn's dirty pages. Entries are only
 * added; the map is dropped whole at the end of the txn.
 */
#ifndef CETCD_STORED_PGMAP_H
#define CETCD_STORED_PGMAP_H

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
void pgmap_free(struct pgmap *m);

#endif
