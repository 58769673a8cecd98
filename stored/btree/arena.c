/*
 * Txn arena (see arena.h): chunks of 64 KiB, larger requests get a chunk of
 * their own, placed behind the head so the head keeps its free room.
 */
#include "stored/btree/arena.h"

#include <stdint.h>
#include <string.h>

#include "stored/alloc.h"

#define ARENA_CHUNK 65536u
#define ARENA_ALIGN 16u

struct arena_chunk {
	struct arena_chunk *next;
	size_t cap;
	size_t used;
	_Alignas(16) unsigned char data[];
};

void *arena_alloc(struct arena *a, size_t size)
{
	size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (size == 0)
		size = ARENA_ALIGN;
	struct arena_chunk *c = a->head;
	if (c && c->cap - c->used >= size) {
		void *p = c->data + c->used;
		c->used += size;
		return p;
	}
	if (size > ARENA_CHUNK / 4) {
		struct arena_chunk *big = stored_malloc(sizeof(*big) + size);
		if (!big)
			return NULL;
		big->cap = size;
		big->used = size;
		if (c) {
			big->next = c->next;
			c->next = big;
		} else {
			big->next = NULL;
			a->head = big;
		}
		return big->data;
	}
	if (a->pool && a->pool->free) {
		c = a->pool->free;
		a->pool->free = c->next;
		a->pool->n--;
	} else {
		c = stored_malloc(sizeof(*c) + ARENA_CHUNK);
		if (!c)
			return NULL;
	}
	c->cap = ARENA_CHUNK;
	c->used = size;
	c->next = a->head;
	a->head = c;
	return c->data;
}

void *arena_zalloc(struct arena *a, size_t size)
{
	void *p = arena_alloc(a, size);
	if (p)
		memset(p, 0, size);
	return p;
}

void arena_release(struct arena *a)
{
	struct arena_chunk *c = a->head;
	struct arena_pool *p = a->pool;
	while (c) {
		struct arena_chunk *next = c->next;
		if (p && c->cap == ARENA_CHUNK && p->n < p->max) {
			c->next = p->free;
			p->free = c;
			p->n++;
		} else {
			stored_free(c);
		}
		c = next;
	}
	a->head = NULL;
}

void arena_pool_destroy(struct arena_pool *p)
{
	while (p->free) {
		struct arena_chunk *next = p->free->next;
		stored_free(p->free);
		p->free = next;
	}
	p->n = 0;
}
