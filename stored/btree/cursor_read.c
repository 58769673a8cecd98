/*
 * Cursors: a stack of (page or node, index) from a bucket's root down to a
 * leaf. Read txns walk pages in the mapping, each one bounds-checked; a
 * write txn sees its materialized nodes wherever it has them, so a cursor
 * shows the txn's own uncommitted changes. Leaves left empty by deletes in
 * a write txn (removed only at commit) are stepped over.
 *
 * Materializing the leaf under a cursor for change is cursor_write.c.
 */
#include <errno.h>

#include "stored/btree/btree_int.h"

enum {
	CURSOR_UNSET,
	CURSOR_ON,
	CURSOR_PAST_END,
	CURSOR_BEFORE_START,
};

void btree_cursor_init(struct btree_cursor *c, struct btree_bucket *b)
{
	c->bucket = b;
	c->depth = 0;
	c->state = CURSOR_UNSET;
}

/* Loads the frame for page pgid of the cursor's bucket. */
static int frame_load(struct btree_cursor *c, uint64_t pgid, struct btree_cursor_frame *f)
{
	struct btree_bucket *b = c->bucket;
	struct btree_txn *t = b->txn;
	struct bt_node *n = NULL;
	int rc;

	if (b->root == 0)
		n = b->root_node;
	else if (t->writable)
		n = pgmap_get(&b->nodes, pgid);
	f->pgid = pgid;
	f->index = 0;
	if (n) {
		f->node = n;
		f->page = NULL;
		f->span = 0;
		f->count = n->ninodes;
		f->leaf = n->leaf;
		return 0;
	}
	f->node = NULL;
	if (b->root == 0) {
		rc = bt_page_check(t->map, b->holder_pgid, b->inline_page, b->inline_len, true);
		f->page = b->inline_page;
		f->span = b->inline_len;
	} else {
		rc = bt_txn_page(t, pgid, &f->page, &f->span);
	}
	if (rc < 0)
		return rc;
	f->count = page_count(f->page);
	f->leaf = page_flags(f->page) == PAGE_FLAG_LEAF;
	return 0;
}

static int cursor_push(struct btree_cursor *c, uint64_t pgid)
{
	if (c->depth >= BTREE_MAX_DEPTH)
		return bt_corrupt(c->bucket->txn->map, pgid,
				  "lies more than %d levels deep (a cycle in the tree?)",
				  BTREE_MAX_DEPTH);
	int rc = frame_load(c, pgid, &c->stack[c->depth]);
	if (rc < 0)
		return rc;
	c->depth++;
	return 0;
}

static const struct bt_map *cursor_map(const struct btree_cursor *c)
{
	return c->bucket->txn->map;
}

/* Page id named in messages about frame f. */
static uint64_t frame_where(const struct btree_cursor *c, const struct btree_cursor_frame *f)
{
	return c->bucket->root == 0 ? c->bucket->holder_pgid : f->pgid;
}

/* Key i of frame f. */
static int frame_key(const struct btree_cursor *c, const struct btree_cursor_frame *f,
		     uint32_t i, const uint8_t **key, uint32_t *ksize)
{
	if (f->node) {
		*key = f->node->inodes[i].key;
		*ksize = f->node->inodes[i].ksize;
		return 0;
	}
	struct page_elem e;
	if (page_elem(f->page, f->span, f->leaf, i, &e) < 0)
		return bt_corrupt(cursor_map(c), frame_where(c, f),
				  "has element %u pointing outside the page", i);
	*key = e.key;
	*ksize = e.ksize;
	return 0;
}

/* Child page of the branch frame f at its index. */
static int frame_child(const struct btree_cursor *c, const struct btree_cursor_frame *f,
		       uint64_t *pgid)
{
	if (f->node) {
		*pgid = f->node->inodes[f->index].pgid;
		return 0;
	}
	struct page_elem e;
	if (page_elem(f->page, f->span, false, f->index, &e) < 0)
		return bt_corrupt(cursor_map(c), frame_where(c, f),
				  "has element %u pointing outside the page", f->index);
	*pgid = e.pgid;
	return 0;
}

/* The entry at the leaf frame f's index; a bucket's value is its header. */
static int frame_kv(const struct btree_cursor *c, const struct btree_cursor_frame *f,
		    struct btree_kv *kv)
{
	if (f->node) {
		const struct bt_inode *in = &f->node->inodes[f->index];
		kv->key = in->key;
		kv->key_len = in->ksize;
		kv->val = in->val;
		kv->val_len = in->vsize;
		kv->flags = (in->flags & PAGE_LEAF_BUCKET) ? BTREE_KV_BUCKET : 0;
		return 0;
	}
	struct page_elem e;
	if (page_elem(f->page, f->span, true, f->index, &e) < 0)
		return bt_corrupt(cursor_map(c), frame_where(c, f),
				  "has element %u pointing outside the page", f->index);
	if (e.ksize == 0)
		return bt_corrupt(cursor_map(c), frame_where(c, f), "has an empty key at element %u",
				  f->index);
	kv->key = e.key;
	kv->key_len = e.ksize;
	kv->val = e.val;
	kv->val_len = e.vsize;
	kv->flags = (e.flags & PAGE_LEAF_BUCKET) ? BTREE_KV_BUCKET : 0;
	return 0;
}

/* From the top frame down to a leaf, taking the first (or, with last, the
 * last) child each time. */
static int descend(struct btree_cursor *c, bool last)
{
	while (!cursor_top(c)->leaf) {
		uint64_t pgid = 0;
		int rc = frame_child(c, cursor_top(c), &pgid);
		if (rc == 0)
			rc = cursor_push(c, pgid);
		if (rc < 0)
			return rc;
		struct btree_cursor_frame *f = cursor_top(c);
		f->index = last && f->count ? f->count - 1 : 0;
	}
	return 0;
}

/* Moves to the next (forward) or previous entry, over empty leaves. */
static int step(struct btree_cursor *c, struct btree_kv *kv, bool forward)
{
	for (;;) {
		int i;
		for (i = (int)c->depth - 1; i >= 0; i--) {
			struct btree_cursor_frame *f = &c->stack[i];
			if (forward && f->index + 1 < f->count) {
				f->index++;
				break;
			}
			if (!forward && f->index > 0) {
				f->index--;
				break;
			}
		}
		if (i < 0) {
			if (forward)
				cursor_top(c)->index = cursor_top(c)->count;
			c->state = forward ? CURSOR_PAST_END : CURSOR_BEFORE_START;
			return -ENOENT;
		}
		c->depth = (uint32_t)i + 1;
		int rc = descend(c, !forward);
		if (rc < 0)
			return rc;
		if (cursor_top(c)->count == 0)
			continue;
		c->state = CURSOR_ON;
		return frame_kv(c, cursor_top(c), kv);
	}
}

/* A nested bucket shows no value to callers. */
static int public_kv(int rc, struct btree_kv *kv)
{
	if (rc == 0 && (kv->flags & BTREE_KV_BUCKET)) {
		kv->val = NULL;
		kv->val_len = 0;
	}
	return rc;
}

static int cursor_usable(struct btree_cursor *c)
{
	int rc = bt_txn_usable(c->bucket->txn, false);
	if (rc < 0)
		return rc;
	if (c->bucket->deleted)
		return bt_error(-ENOENT, "stored: the bucket was deleted in this txn");
	return 0;
}

/* Positions at the first (or, with last, the last) entry. */
static int cursor_edge(struct btree_cursor *c, struct btree_kv *kv, bool last)
{
	int rc = cursor_usable(c);
	if (rc < 0)
		return rc;
	c->depth = 0;
	c->state = CURSOR_UNSET;
	rc = cursor_push(c, c->bucket->root);
	if (rc < 0)
		return rc;
	struct btree_cursor_frame *f = cursor_top(c);
	f->index = last && f->count ? f->count - 1 : 0;
	rc = descend(c, last);
	if (rc < 0)
		return rc;
	if (cursor_top(c)->count == 0)
		return public_kv(step(c, kv, !last), kv);
	c->state = CURSOR_ON;
	return public_kv(frame_kv(c, cursor_top(c), kv), kv);
}

int btree_cursor_first(struct btree_cursor *c, struct btree_kv *kv)
{
	return cursor_edge(c, kv, false);
}

int btree_cursor_last(struct btree_cursor *c, struct btree_kv *kv)
{
	return cursor_edge(c, kv, true);
}

int btree_cursor_next(struct btree_cursor *c, struct btree_kv *kv)
{
	int rc = cursor_usable(c);
	if (rc < 0)
		return rc;
	switch (c->state) {
	case CURSOR_UNSET:
	case CURSOR_BEFORE_START:
		return btree_cursor_first(c, kv);
	case CURSOR_PAST_END:
		return -ENOENT;
	default:
		return public_kv(step(c, kv, true), kv);
	}
}

int btree_cursor_prev(struct btree_cursor *c, struct btree_kv *kv)
{
	int rc = cursor_usable(c);
	if (rc < 0)
		return rc;
	switch (c->state) {
	case CURSOR_UNSET:
		return btree_cursor_last(c, kv);
	case CURSOR_BEFORE_START:
		return -ENOENT;
	default:
		return public_kv(step(c, kv, false), kv);
	}
}

/* First index of frame f whose key is >= key. */
static int frame_search(const struct btree_cursor *c, const struct btree_cursor_frame *f,
			const uint8_t *key, size_t klen, uint32_t *index, bool *exact)
{
	uint32_t lo = 0, hi = f->count;
	const uint8_t *k = NULL;
	uint32_t ks = 0;
	int rc;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		rc = frame_key(c, f, mid, &k, &ks);
		if (rc < 0)
			return rc;
		if (page_keycmp(k, ks, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*exact = false;
	if (lo < f->count) {
		rc = frame_key(c, f, lo, &k, &ks);
		if (rc < 0)
			return rc;
		*exact = page_keycmp(k, ks, key, klen) == 0;
	}
	*index = lo;
	return 0;
}

/* The child of branch frame f whose range holds a key that a search of f
 * placed at idx (exact or not): the last separator <= the key. */
static uint32_t frame_route(const struct btree_cursor_frame *f, uint32_t idx, bool exact)
{
	if (!exact && idx > 0)
		idx--;
	return idx < f->count ? idx : f->count - 1;
}

int bt_cursor_seek(struct btree_cursor *c, const uint8_t *key, size_t klen,
		   struct btree_kv *kv, bool *exact)
{
	c->depth = 0;
	c->state = CURSOR_ON;
	*exact = false;
	int rc = cursor_push(c, c->bucket->root);
	if (rc < 0)
		return rc;
	for (;;) {
		struct btree_cursor_frame *f = cursor_top(c);
		uint32_t idx;
		bool ex;
		rc = frame_search(c, f, key, klen, &idx, &ex);
		if (rc < 0)
			return rc;
		if (f->leaf) {
			f->index = idx;
			*exact = ex;
			break;
		}
		f->index = frame_route(f, idx, ex);
		uint64_t pgid = 0;
		rc = frame_child(c, f, &pgid);
		if (rc == 0)
			rc = cursor_push(c, pgid);
		if (rc < 0)
			return rc;
	}
	struct btree_cursor_frame *f = cursor_top(c);
	if (f->index >= f->count)
		return -ENOENT;
	return frame_kv(c, f, kv);
}

int btree_cursor_seek(struct btree_cursor *c, const void *key, size_t key_len,
		      struct btree_kv *kv)
{
	int rc = cursor_usable(c);
	if (rc < 0)
		return rc;
	bool exact;
	rc = bt_cursor_seek(c, key, key_len, kv, &exact);
	if (rc == -ENOENT)
		rc = step(c, kv, true);
	return public_kv(rc, kv);
}

/* Makes leaf n the bucket's finger, with the key range the cursor's path
 * routes to it: from the separator of the deepest branch where the path
 * did not take the first child, to the separator after the one it took in
 * the deepest branch where it did not take the last. */
void bt_cursor_set_finger(struct btree_cursor *c, struct bt_node *n)
{
	struct btree_bucket *b = c->bucket;
	const uint8_t *lo = NULL, *hi = NULL;
	uint32_t lo_len = 0, hi_len = 0;
	bool have_lo = false, have_hi = false;
	b->finger = NULL;
	for (int i = (int)c->depth - 2; i >= 0 && !(have_lo && have_hi); i--) {
		const struct btree_cursor_frame *f = &c->stack[i];
		if (!have_lo && f->index > 0) {
			if (frame_key(c, f, f->index, &lo, &lo_len) < 0)
				return;
			have_lo = true;
		}
		if (!have_hi && f->index + 1 < f->count) {
			if (frame_key(c, f, f->index + 1, &hi, &hi_len) < 0)
				return;
			have_hi = true;
		}
	}
	b->finger = n;
	b->finger_lo = lo;
	b->finger_lo_len = lo_len;
	b->finger_hi = hi;
	b->finger_hi_len = hi_len;
}

/* ---- several lookups at once (btree_get_many) ---- */

/* Lines of a page asked for ahead of its search: the header and the
 * first elements, where every search starts. */
#define GET_MANY_PREFETCH 256u

int bt_get_many_pages(struct btree_bucket *b, size_t n, const uint8_t *const *keys,
		      const size_t *key_lens, const uint8_t **vals, size_t *val_lens, int *rcs)
{
	struct btree_txn *t = b->txn;
	const struct bt_map *m = t->map;
	struct btree_cursor c;   /* for the frame helpers: bucket and messages */
	uint64_t pgid[BTREE_GET_MANY_MAX];
	bool done[BTREE_GET_MANY_MAX];
	size_t left = n;
	int rc = 0;

	btree_cursor_init(&c, b);
	for (size_t i = 0; i < n; i++) {
		pgid[i] = b->root;
		done[i] = false;
		rcs[i] = -ENOENT;
	}
	for (int depth = 0; left > 0; depth++) {
		if (depth >= BTREE_MAX_DEPTH) {
			rc = bt_corrupt(m, b->root, "has keys more than %d levels deep (a cycle in the tree?)",
					BTREE_MAX_DEPTH);
			goto out_fail;
		}
		for (size_t i = 0; i < n; i++) {
			if (done[i] || pgid[i] >= t->hwm)
				continue;
			const uint8_t *p = m->base + pgid[i] * m->page_size;
			for (uint32_t off = 0; off < GET_MANY_PREFETCH && off < m->page_size; off += 64)
				__builtin_prefetch(p + off);
		}
		for (size_t i = 0; i < n; i++) {
			struct btree_cursor_frame f;
			struct btree_kv kv;
			uint32_t idx = 0;
			bool exact = false;
			if (done[i])
				continue;
			rc = frame_load(&c, pgid[i], &f);
			if (rc == 0)
				rc = frame_search(&c, &f, keys[i], key_lens[i], &idx, &exact);
			if (rc < 0)
				goto out_fail;
			if (!f.leaf) {
				f.index = frame_route(&f, idx, exact);
				rc = frame_child(&c, &f, &pgid[i]);
				if (rc < 0)
					goto out_fail;
				continue;
			}
			done[i] = true;
			left--;
			if (!exact)
				continue;
			f.index = idx;
			rc = frame_kv(&c, &f, &kv);
			if (rc < 0)
				goto out_fail;
			if (kv.flags & BTREE_KV_BUCKET) {
				rcs[i] = -EISDIR;
				continue;
			}
			vals[i] = kv.val;
			val_lens[i] = kv.val_len;
			rcs[i] = 0;
		}
	}
	return 0;

out_fail:
	for (size_t i = 0; i < n; i++)
		if (!done[i])
			rcs[i] = rc;
	return rc;
}
