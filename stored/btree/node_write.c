/*
 * In-memory nodes of a write txn: a page is materialized into a node the
 * first time the txn changes anything below it, changed in place as often
 * as the txn likes, and written once at commit (spill), split into pages
 * that fit. Nodes that lost elements are merged with a sibling first
 * (rebalance), so the tree stays balanced and pages stay reasonably full.
 * A lookup in a node and freeing a txn's nodes, which reads and ends of
 * txns use, are node_read.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/pagewrite.h"

#define NODE_MIN_KEYS_PER_PAGE 2u

/* stored_reserve for a node's arrays, whose counts are 32-bit. */
static int node_array_reserve(void **v, uint32_t *cap, uint64_t need, size_t elem_size,
			      size_t first_cap)
{
	size_t c = *cap;

	if (need > UINT32_MAX)
		return -ENOMEM;
	int rc = stored_reserve(v, &c, (size_t)need, elem_size, first_cap);
	if (rc == 0)
		*cap = c < UINT32_MAX ? (uint32_t)c : UINT32_MAX; /* it holds at least that many */
	return rc;
}

static int node_reserve(struct bt_node *n, uint32_t extra)
{
	return node_array_reserve((void **)&n->inodes, &n->inodes_cap,
				  n->ninodes + (uint64_t)extra, sizeof(*n->inodes), 8);
}

static int node_add_child(struct bt_node *n, struct bt_node *child)
{
	int rc = node_array_reserve((void **)&n->children, &n->children_cap,
				    n->nchildren + (uint64_t)1, sizeof(*n->children), 4);
	if (rc < 0)
		return rc;
	n->children[n->nchildren++] = child;
	return 0;
}

static void node_remove_child(struct bt_node *n, struct bt_node *child)
{
	for (uint32_t i = 0; i < n->nchildren; i++) {
		if (n->children[i] == child) {
			memmove(&n->children[i], &n->children[i + 1],
				(n->nchildren - i - 1) * sizeof(*n->children));
			n->nchildren--;
			return;
		}
	}
}

static struct bt_node *node_new(struct btree_bucket *b, bool leaf)
{
	struct btree_txn *t = b->txn;
	struct bt_node *n = arena_zalloc(&t->arena, sizeof(*n));
	if (!n)
		return NULL;
	n->bucket = b;
	n->leaf = leaf;
	n->all_next = t->all_nodes;
	t->all_nodes = n;
	return n;
}

/* Fills n's inodes from the page p (span readable bytes). pgid names the
 * page in messages. */
static int node_read(struct bt_node *n, const struct bt_map *m, uint64_t pgid,
		     const uint8_t *p, size_t span)
{
	bool leaf = page_flags(p) == PAGE_FLAG_LEAF;
	uint16_t count = page_count(p);
	int rc = node_reserve(n, count ? count : 1);
	if (rc < 0)
		return rc;
	n->leaf = leaf;
	for (uint16_t i = 0; i < count; i++) {
		struct page_elem e;
		if (page_elem(p, span, leaf, i, &e) < 0)
			return bt_corrupt(m, pgid, "has element %u pointing outside the page", i);
		if (e.ksize == 0)
			return bt_corrupt(m, pgid, "has an empty key at element %u", i);
		n->inodes[i] = (struct bt_inode){ e.key, e.val, e.pgid, e.ksize, e.vsize, e.flags, false };
	}
	n->ninodes = count;
	if (count > 0) {
		n->key = n->inodes[0].key;
		n->ksize = n->inodes[0].ksize;
	}
	return 0;
}

int bt_node_get(struct btree_bucket *b, uint64_t pgid, struct bt_node *parent,
		struct bt_node **out)
{
	struct btree_txn *t = b->txn;
	struct bt_node *n = pgmap_get(&b->nodes, pgid);
	if (n) {
		*out = n;
		return 0;
	}
	const uint8_t *p;
	size_t span;
	uint64_t where = pgid;
	int rc;
	if (b->root == 0) {
		where = b->holder_pgid;
		p = b->inline_page;
		span = b->inline_len;
		rc = bt_page_check(t->map, where, p, span, true);
	} else {
		rc = bt_txn_page(t, pgid, &p, &span);
	}
	if (rc < 0)
		return rc;
	if (parent && page_count(p) == 0)
		return bt_corrupt(t->map, where, "is an empty page below a branch");

	n = node_new(b, false);
	if (!n)
		return -ENOMEM;
	rc = node_read(n, t->map, where, p, span);
	if (rc < 0)
		return rc;
	n->pgid = b->root == 0 ? 0 : pgid;
	n->overflow = b->root == 0 ? 0 : page_overflow(p);
	if (parent) {
		rc = node_add_child(parent, n);
		if (rc < 0)
			return rc;
	}
	rc = pgmap_put(&b->nodes, pgid, n);
	if (rc < 0) {
		if (parent)
			node_remove_child(parent, n);
		return rc;
	}
	n->parent = parent;
	if (!parent)
		b->root_node = n;
	*out = n;
	return 0;
}

int bt_node_put(struct bt_node *n, const uint8_t *old_key, uint32_t old_ksize,
		const uint8_t *key, uint32_t ksize, const uint8_t *val, uint32_t vsize,
		uint64_t pgid, uint32_t flags)
{
	bool exact;
	uint32_t i = node_find(n, old_key, old_ksize, &exact);
	if (!exact) {
		int rc = node_reserve(n, 1);
		if (rc < 0)
			return rc;
		if (i == n->ninodes)
			n->appends++;
		else
			n->mid_insert = true;
		memmove(&n->inodes[i + 1], &n->inodes[i], (n->ninodes - i) * sizeof(*n->inodes));
		n->ninodes++;
	}
	n->inodes[i] = (struct bt_inode){ key, val, pgid, ksize, vsize, flags, true };
	return 0;
}

bool bt_node_del(struct bt_node *n, const uint8_t *key, uint32_t ksize)
{
	bool exact;
	uint32_t i = node_find(n, key, ksize, &exact);
	if (!exact)
		return false;
	memmove(&n->inodes[i], &n->inodes[i + 1], (n->ninodes - i - 1) * sizeof(*n->inodes));
	n->ninodes--;
	n->unbalanced = true;
	return true;
}

size_t bt_node_size(const struct bt_node *n)
{
	size_t sz = PAGE_HDR_SIZE;
	for (uint32_t i = 0; i < n->ninodes; i++)
		sz += PAGE_ELEM_SIZE + n->inodes[i].ksize + (size_t)n->inodes[i].vsize;
	return sz;
}

/* The bytes up to max_elems of n's elements from `start` take as a page
 * of their own, or limit once they reach it (it stops counting there). */
static size_t node_size_upto(const struct bt_node *n, uint32_t start, size_t limit,
			     uint32_t max_elems)
{
	size_t sz = PAGE_HDR_SIZE;
	for (uint32_t i = start; i < n->ninodes && i - start < max_elems; i++) {
		sz += PAGE_ELEM_SIZE + n->inodes[i].ksize + (size_t)n->inodes[i].vsize;
		if (sz >= limit)
			return limit;
	}
	return sz;
}

void bt_node_write(const struct bt_node *n, uint8_t *page, uint64_t id, uint32_t overflow)
{
	page_set_header(page, id, n->leaf ? PAGE_FLAG_LEAF : PAGE_FLAG_BRANCH,
			(uint16_t)n->ninodes, overflow);
	size_t data = PAGE_HDR_SIZE + (size_t)n->ninodes * PAGE_ELEM_SIZE;
	for (uint32_t i = 0; i < n->ninodes; i++) {
		const struct bt_inode *in = &n->inodes[i];
		size_t el = PAGE_HDR_SIZE + (size_t)i * PAGE_ELEM_SIZE;
		uint32_t pos = (uint32_t)(data - el);
		if (n->leaf) {
			page_st32(page + el, in->flags);
			page_st32(page + el + 4, pos);
			page_st32(page + el + 8, in->ksize);
			page_st32(page + el + 12, in->vsize);
		} else {
			page_st32(page + el, pos);
			page_st32(page + el + 4, in->ksize);
			page_st64(page + el + 8, in->pgid);
		}
		memcpy(page + data, in->key, in->ksize);
		data += in->ksize;
		if (n->leaf && in->vsize) {
			memcpy(page + data, in->val, in->vsize);
			data += in->vsize;
		}
	}
}

/* Where the piece of n that starts at element `start` ends so that it
 * fills threshold bytes, keeping at least NODE_MIN_KEYS_PER_PAGE elements
 * in it and more than min_after after it (min_after + 1 at least, as
 * bbolt's splitIndex leaves minKeysPerPage + 1). */
static uint32_t node_split_index(const struct bt_node *n, uint32_t start, size_t threshold,
				 uint32_t min_after)
{
	size_t sz = PAGE_HDR_SIZE;
	uint32_t index = start;
	for (uint32_t i = start; i + min_after < n->ninodes; i++) {
		index = i;
		size_t elsize = PAGE_ELEM_SIZE + n->inodes[i].ksize + (size_t)n->inodes[i].vsize;
		if (i - start >= NODE_MIN_KEYS_PER_PAGE && sz + elsize > threshold)
			break;
		sz += elsize;
	}
	return index;
}

/* True when leaf elements a and b are in one run (btree_bucket_set_runs):
 * equal but for their last `suffix` bytes. */
static bool node_same_run(const struct bt_inode *a, const struct bt_inode *b, uint32_t suffix)
{
	return a->ksize == b->ksize && a->ksize > suffix &&
	       memcmp(a->key, b->key, a->ksize - suffix) == 0;
}

/* In a bucket of runs, the end of the piece of n from `start` that stops
 * right after the last element this txn put in at a run's front, within a
 * page's worth of elements, when at least half a page of the run's older
 * elements follows it; 0 when there is none. Those older elements are
 * never inserted into again, so the pages they go to stay as full as
 * they are written, where a cut at the fill would leave each run's tail
 * in a half-empty page for good. */
static uint32_t node_run_cut(const struct bt_node *n, uint32_t start, size_t page_size)
{
	uint32_t suffix = n->bucket->run_suffix;
	uint32_t full = node_split_index(n, start, page_size, NODE_MIN_KEYS_PER_PAGE);
	for (uint32_t f = full; f-- > start + NODE_MIN_KEYS_PER_PAGE - 1;) {
		const struct bt_inode *in = &n->inodes[f];
		if (!in->fresh || f + 1 + NODE_MIN_KEYS_PER_PAGE > n->ninodes ||
		    !node_same_run(in, &n->inodes[f + 1], suffix))
			continue;
		size_t older = 0;
		for (uint32_t i = f + 1; i < n->ninodes && !n->inodes[i].fresh &&
		     node_same_run(in, &n->inodes[i], suffix); i++)
			older += PAGE_ELEM_SIZE + n->inodes[i].ksize + (size_t)n->inodes[i].vsize;
		if (older >= page_size / 2)
			return f + 1;
	}
	return 0;
}

/* The end of the page-sized piece of n that starts at element `start`:
 * n->ninodes when the rest fits one page (or is too short to split). */
static uint32_t node_piece_end(const struct bt_node *n, uint32_t start, size_t page_size)
{
	const struct btree_bucket *b = n->bucket;
	bool appended = n->appends >= 2 && !n->mid_insert;
	if (n->ninodes - start <= NODE_MIN_KEYS_PER_PAGE * 2 ||
	    node_size_upto(n, start, page_size, UINT32_MAX) < page_size)
		return n->ninodes;
	if (n->leaf && b->run_suffix && !appended) {
		uint32_t cut = node_run_cut(n, start, page_size);
		if (cut)
			return cut;
	}
	double fill = b->fill;
	if (appended) {
		/* A node that only grew at its end (keys written in order) is
		 * cut into full pieces: the next keys go after it, not into
		 * it. A leaf piece spans as many whole pages as the rest (at
		 * most append_elems of it) fills, up to append_pages, so that
		 * only its last page's tail stays unused
		 * (btree_bucket_set_append_pages); and it leaves as few as two
		 * elements after it (min_after 1), which the next appends
		 * join, where three (min_after 2, bbolt's) would cut a page of
		 * a trickle of appends two elements short each time: 324-byte
		 * elements (12 fill a page, 0.95) appended 5 a txn make pages
		 * of 10, 0.80 full, where here they hold 11 (cut from 13) or
		 * 12, 0.93 (test_btree_fill). */
		size_t pages = 1;
		if (n->leaf && b->append_pages > 1)
			pages = node_size_upto(n, start, (size_t)b->append_pages * page_size,
					       b->append_elems) / page_size;
		return node_split_index(n, start, (pages > 1 ? pages : 1) * page_size,
					n->leaf ? 1 : NODE_MIN_KEYS_PER_PAGE);
	}
	if (fill < 0.1)
		fill = 0.1;
	if (fill > 1.0)
		fill = 1.0;
	return node_split_index(n, start, (size_t)(page_size * fill), NODE_MIN_KEYS_PER_PAGE);
}

/* Gives n a parent when it is a root that is about to split. */
static int node_ensure_parent(struct bt_node *n)
{
	if (n->parent)
		return 0;
	struct bt_node *p = node_new(n->bucket, false);
	if (!p)
		return -ENOMEM;
	int rc = node_add_child(p, n);
	if (rc < 0)
		return rc;
	n->parent = p;
	return 0;
}

/* A new sibling of n holding a copy of n's elements [start, end). */
static int node_new_sibling(struct bt_node *n, uint32_t start, uint32_t end,
			    struct bt_node **out)
{
	struct bt_node *s = node_new(n->bucket, n->leaf);
	if (!s)
		return -ENOMEM;
	int rc = node_reserve(s, end - start);
	if (rc < 0)
		return rc;
	rc = node_add_child(n->parent, s);
	if (rc < 0)
		return rc;
	s->parent = n->parent;
	memcpy(s->inodes, &n->inodes[start], (end - start) * sizeof(*n->inodes));
	s->ninodes = end - start;
	*out = s;
	return 0;
}

static int node_child_cmp(const void *a, const void *b)
{
	const struct bt_node *x = *(struct bt_node *const *)a;
	const struct bt_node *y = *(struct bt_node *const *)b;
	if (x->ninodes == 0 || y->ninodes == 0)
		return (x->ninodes != 0) - (y->ninodes != 0);
	return page_keycmp(x->inodes[0].key, x->inodes[0].ksize,
			   y->inodes[0].key, y->inodes[0].ksize);
}

/* Gives the node's page back (pending until the txn commits). */
static int node_free_page(struct bt_node *n)
{
	if (n->pgid == 0)
		return 0;
	int rc = bt_txn_free(n->bucket->txn, n->pgid, (uint64_t)n->overflow + 1);
	if (rc < 0)
		return rc;
	n->pgid = 0;
	return 0;
}

/* Tells the db's observer where each entry of a leaf just written sits
 * (the offsets bt_node_write gave them). */
static void node_observe_placed(const struct bt_node *n)
{
	const struct btree_txn *t = n->bucket->txn;
	const struct btree_observer *o = &t->db->obs;
	struct btree_placed e[BTREE_PLACED_MAX];
	size_t data = PAGE_HDR_SIZE + (size_t)n->ninodes * PAGE_ELEM_SIZE, k = 0;
	if (!o->placed)
		return;
	for (uint32_t i = 0; i < n->ninodes; i++) {
		const struct bt_inode *in = &n->inodes[i];
		if (!(in->flags & PAGE_LEAF_BUCKET)) {
			e[k++] = (struct btree_placed){ in->key, in->val, in->ksize, i,
							(uint32_t)data, in->vsize, in->fresh };
			if (k == BTREE_PLACED_MAX) {
				o->placed(o->arg, n->pgid, t->txid, e, k);
				k = 0;
			}
		}
		data += in->ksize + (size_t)in->vsize;
	}
	if (k)
		o->placed(o->arg, n->pgid, t->txid, e, k);
}

/* Writes one node (already split to size) to new pages and points its
 * parent at them. */
static int node_write_out(struct bt_node *n)
{
	struct btree_txn *t = n->bucket->txn;
	size_t ps = t->map->page_size;
	int rc;
	if (n->ninodes >= 0xFFFF)
		return bt_error(-EOVERFLOW, "stored: db %s: a node of %u elements does not fit a page",
				t->map->path, n->ninodes);
	if (n->parent && n->ninodes == 0)
		return bt_error(-EUCLEAN, "stored: db %s: an empty node below a branch at commit",
				t->map->path);
	rc = node_free_page(n);
	if (rc < 0)
		return rc;
	size_t used = bt_node_size(n);
	uint64_t npages = (used + ps - 1) / ps;
	uint64_t pgid;
	uint8_t *buf;
	rc = bt_txn_allocate(t, npages, &pgid, &buf);
	if (rc < 0)
		return rc;
	n->pgid = pgid;
	n->overflow = (uint32_t)(npages - 1);
	bt_node_write(n, buf, pgid, n->overflow);
	memset(buf + used, 0, npages * ps - used);  /* no stale bytes in the file */
	n->spilled = true;
	/* The page is final: the page writer may take it now (bt_txn_allocate
	 * has just recorded it last). Where it cannot, the commit writes it. */
	struct bt_dirty *d = &t->dirty[t->ndirty - 1];
	if (t->db->pagewrite && d->buf == buf &&
	    pagewrite_push(t->db->pagewrite, buf, npages * ps, pgid * ps) == 0)
		d->queued = true;
	if (n->leaf && n->bucket->observed)
		node_observe_placed(n);
	if (n->parent) {
		const uint8_t *k = n->key ? n->key : n->inodes[0].key;
		uint32_t ks = n->key ? n->ksize : n->inodes[0].ksize;
		rc = bt_node_put(n->parent, k, ks, n->inodes[0].key, n->inodes[0].ksize,
				 NULL, 0, pgid, 0);
		if (rc < 0)
			return rc;
		n->key = n->inodes[0].key;
		n->ksize = n->inodes[0].ksize;
	}
	return 0;
}

int bt_node_spill(struct bt_node *n)
{
	if (n->spilled)
		return 0;
	size_t ps = n->bucket->txn->map->page_size;
	int rc;

	/* Children first; a child's split appends siblings to this list,
	 * which are visited too (and are spilled already). */
	if (n->nchildren > 1)
		qsort(n->children, n->nchildren, sizeof(*n->children), node_child_cmp);
	for (uint32_t i = 0; i < n->nchildren; i++) {
		rc = bt_node_spill(n->children[i]);
		if (rc < 0)
			return rc;
	}
	n->nchildren = 0;

	/* Split into page-sized pieces: n keeps the first, each further
	 * piece is copied once into a sibling of its own (a node that grew
	 * by a whole batch of appends must not be copied tail by tail). The
	 * siblings are appended to the parent's children, and written out
	 * after n, in key order. */
	uint32_t first_end = node_piece_end(n, 0, ps);
	struct bt_node *parent = NULL;
	uint32_t first_sibling = 0;
	if (first_end < n->ninodes) {
		rc = node_ensure_parent(n);
		if (rc < 0)
			return rc;
		parent = n->parent;
		first_sibling = parent->nchildren;
		for (uint32_t start = first_end; start < n->ninodes;) {
			uint32_t end = node_piece_end(n, start, ps);
			struct bt_node *sib;
			rc = node_new_sibling(n, start, end, &sib);
			if (rc < 0)
				return rc;
			start = end;
		}
		n->ninodes = first_end;
	}
	rc = node_write_out(n);
	if (rc < 0)
		return rc;
	for (uint32_t i = first_sibling; parent && i < parent->nchildren; i++) {
		rc = node_write_out(parent->children[i]);
		if (rc < 0)
			return rc;
	}

	/* A root that split got a new parent, which needs writing too. */
	if (n->parent && n->parent->pgid == 0 && !n->parent->spilled) {
		n->nchildren = 0;
		return bt_node_spill(n->parent);
	}
	return 0;
}

/* Moves the branch elements' materialized children of src under dst. */
static int node_adopt_children(struct bt_node *dst, const struct bt_node *src)
{
	if (src->leaf)
		return 0;
	for (uint32_t i = 0; i < src->ninodes; i++) {
		struct bt_node *c = pgmap_get(&dst->bucket->nodes, src->inodes[i].pgid);
		if (!c || c->dead || c->parent == dst)
			continue;
		int rc = node_add_child(dst, c);
		if (rc < 0)
			return rc;
		if (c->parent)
			node_remove_child(c->parent, c);
		c->parent = dst;
	}
	return 0;
}

/* Index of child in its parent's elements. */
static uint32_t node_child_index(const struct bt_node *parent, const struct bt_node *child)
{
	bool exact;
	return node_find(parent, child->key, child->ksize, &exact);
}

/* Appends src's elements to dst. */
static int node_append(struct bt_node *dst, const struct bt_node *src)
{
	if (src->ninodes == 0)
		return 0;
	int rc = node_reserve(dst, src->ninodes);
	if (rc < 0)
		return rc;
	memcpy(&dst->inodes[dst->ninodes], src->inodes, src->ninodes * sizeof(*src->inodes));
	dst->ninodes += src->ninodes;
	return 0;
}

/* Removes victim (already emptied into a sibling) from its parent. */
static int node_unlink(struct bt_node *victim)
{
	struct bt_node *parent = victim->parent;
	bt_node_del(parent, victim->key, victim->ksize);
	node_remove_child(parent, victim);
	victim->dead = true;
	return node_free_page(victim);
}

int bt_node_rebalance(struct bt_node *n)
{
	if (!n->unbalanced || n->dead)
		return 0;
	n->unbalanced = false;
	struct btree_bucket *b = n->bucket;
	const struct bt_map *m = b->txn->map;
	size_t threshold = m->page_size / 4;
	uint32_t min_keys = n->leaf ? 1 : 2;
	int rc;

	if (bt_node_size(n) > threshold && n->ninodes > min_keys)
		return 0;

	if (!n->parent) {
		/* A branch root with one child gives way to that child. */
		if (!n->leaf && n->ninodes == 1) {
			struct bt_node *child;
			rc = bt_node_get(b, n->inodes[0].pgid, n, &child);
			if (rc < 0)
				return rc;
			struct bt_inode *old_inodes = n->inodes;
			struct bt_node **old_children = n->children;
			n->leaf = child->leaf;
			n->inodes = child->inodes;
			n->ninodes = child->ninodes;
			n->inodes_cap = child->inodes_cap;
			n->children = child->children;
			n->nchildren = child->nchildren;
			n->children_cap = child->children_cap;
			child->inodes = old_inodes;
			child->ninodes = 0;
			child->children = old_children;
			child->nchildren = 0;
			for (uint32_t i = 0; i < n->nchildren; i++)
				n->children[i]->parent = n;
			child->parent = NULL;
			child->dead = true;
			return node_free_page(child);
		}
		return 0;
	}

	struct bt_node *parent = n->parent;
	if (n->ninodes == 0) {
		rc = node_unlink(n);
		if (rc < 0)
			return rc;
		return bt_node_rebalance(parent);
	}
	if (parent->ninodes < 2)
		return bt_corrupt(m, parent->pgid, "is a branch with a single child below the root");

	uint32_t idx = node_child_index(parent, n);
	bool use_next = idx == 0;
	if (!use_next && idx >= parent->ninodes)
		return bt_corrupt(m, parent->pgid, "does not list a child it holds");
	struct bt_node *target;
	rc = bt_node_get(b, parent->inodes[use_next ? idx + 1 : idx - 1].pgid, parent, &target);
	if (rc < 0)
		return rc;
	if (target->leaf != n->leaf)
		return bt_corrupt(m, target->pgid, "is a sibling of another kind than its neighbour");

	if (use_next) {
		rc = node_adopt_children(n, target);
		if (rc == 0)
			rc = node_append(n, target);
		if (rc == 0)
			rc = node_unlink(target);
	} else {
		rc = node_adopt_children(target, n);
		if (rc == 0)
			rc = node_append(target, n);
		if (rc == 0)
			rc = node_unlink(n);
	}
	if (rc < 0)
		return rc;
	return bt_node_rebalance(parent);
}
