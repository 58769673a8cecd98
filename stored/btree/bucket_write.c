/*
 * Buckets: the top-level bucket of a txn holds the file's buckets, each of
 * which holds keys and nested buckets. A bucket is stored as a value
 * (header: root page, sequence) under its name in the parent. A small
 * bucket without nested buckets is stored inline: root 0 and its single
 * leaf page inside the value, as bbolt lays it out (inline when it fits in
 * a quarter page).
 *
 * This is the half that writes: creating and deleting buckets, puts,
 * deletes, and a write txn's rebalance and spill of its buckets. Handles
 * of existing buckets and gets are bucket_read.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"

static void bucket_unlink(struct btree_bucket *parent, struct btree_bucket *child)
{
	for (struct btree_bucket **pp = &parent->children; *pp; pp = &(*pp)->next) {
		if (*pp == child) {
			*pp = child->next;
			return;
		}
	}
}

/* The leaf node of b where key (an existing bucket entry, when
 * must_be_bucket) is, materialized for change. */
static int bucket_leaf(struct btree_bucket *b, const void *key, size_t klen,
		       bool must_be_bucket, struct bt_node **leaf)
{
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	int rc = bucket_seek(b, true, "key", key, klen, &c, &kv, &exact);
	if (rc < 0)
		return rc;
	if (must_be_bucket && (!exact || !(kv.flags & BTREE_KV_BUCKET)))
		return bt_error(-EUCLEAN, "stored: db %s: bucket %.*s is missing from its parent",
				b->txn->map->path, (int)klen, (const char *)key);
	return bt_cursor_node(&c, leaf);
}

int btree_bucket_create(struct btree_txn *t, struct btree_bucket *parent,
			const void *name, size_t name_len, struct btree_bucket **out)
{
	struct btree_bucket *p = bucket_or_root(t, parent);
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	int rc = bucket_seek(p, true, "bucket name", name, name_len, &c, &kv, &exact);
	if (rc >= 0 && !exact)
		bt_track(p, name, name_len, true);
	if (rc < 0)
		return rc;
	if (exact) {
		if (!(kv.flags & BTREE_KV_BUCKET))
			return bt_error(-ENOTDIR, "stored: %.*s is a key, not a bucket",
					(int)name_len, (const char *)name);
		rc = btree_bucket_open(t, p, name, name_len, out);
		return rc < 0 ? rc : -EEXIST;
	}

	/* An empty inline bucket: header (root 0, sequence 0) and an empty leaf. */
	size_t vlen = PAGE_BUCKET_HDR_SIZE + PAGE_HDR_SIZE;
	uint8_t *val = arena_zalloc(&t->arena, vlen);
	uint8_t *key = arena_alloc(&t->arena, name_len);
	if (!val || !key)
		return bt_txn_fail(t, bt_error(-ENOMEM, "stored: out of memory"));
	page_set_header(val + PAGE_BUCKET_HDR_SIZE, 0, PAGE_FLAG_LEAF, 0, 0);
	memcpy(key, name, name_len);
	struct bt_node *leaf;
	rc = bt_cursor_node(&c, &leaf);
	if (rc == 0)
		rc = bt_node_put(leaf, key, (uint32_t)name_len, key, (uint32_t)name_len, val,
				 (uint32_t)vlen, 0, PAGE_LEAF_BUCKET);
	if (rc == 0)
		rc = btree_bucket_open(t, p, name, name_len, out);
	return rc < 0 ? bt_txn_fail(t, rc) : 0;
}

/* Frees the pages of the subtree at pgid; via_nodes prefers the txn's
 * nodes (the current shape) over the pages (the shape at txn start). */
static int bucket_free_tree(struct btree_bucket *b, uint64_t pgid, bool via_nodes,
			    unsigned depth)
{
	struct btree_txn *t = b->txn;
	int rc;
	if (depth >= BTREE_MAX_DEPTH)
		return bt_corrupt(t->map, pgid, "lies more than %d levels deep (a cycle in the tree?)",
				  BTREE_MAX_DEPTH);
	struct bt_node *n = via_nodes ? pgmap_get(&b->nodes, pgid) : NULL;
	if (n) {
		if (n->pgid) {
			rc = bt_txn_free(t, n->pgid, (uint64_t)n->overflow + 1);
			if (rc < 0)
				return rc;
			n->pgid = 0;
		}
		if (n->leaf)
			return 0;
		for (uint32_t i = 0; i < n->ninodes; i++) {
			rc = bucket_free_tree(b, n->inodes[i].pgid, via_nodes, depth + 1);
			if (rc < 0)
				return rc;
		}
		return 0;
	}
	const uint8_t *p;
	size_t span;
	rc = bt_txn_page(t, pgid, &p, &span);
	if (rc < 0)
		return rc;
	rc = bt_txn_free(t, pgid, (uint64_t)page_overflow(p) + 1);
	if (rc < 0 || page_flags(p) != PAGE_FLAG_BRANCH)
		return rc;
	for (uint16_t i = 0; i < page_count(p); i++) {
		struct page_elem e;
		if (page_elem(p, span, false, i, &e) < 0)
			return bt_corrupt(t->map, pgid, "has element %u pointing outside the page", i);
		rc = bucket_free_tree(b, e.pgid, via_nodes, depth + 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int bt_bucket_free_pages(struct btree_bucket *b, bool via_nodes)
{
	if (b->root == 0)
		return 0;
	int rc = bucket_free_tree(b, b->root, via_nodes, 0);
	if (rc == 0)
		b->root = 0;
	return rc;
}

/* Names of the nested buckets of b, in an array the caller frees with
 * stored_free (also on failure); the keys stay valid while the txn is. */
static int bucket_child_names(struct btree_bucket *b, struct btree_kv **names, size_t *n)
{
	struct btree_cursor c;
	struct btree_kv kv;
	size_t cap = 0;
	*names = NULL;
	*n = 0;
	btree_cursor_init(&c, b);
	int rc;
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		if (!(kv.flags & BTREE_KV_BUCKET))
			continue;
		rc = stored_reserve((void **)names, &cap, *n + 1, sizeof(**names), 8);
		if (rc < 0)
			return rc;
		(*names)[(*n)++] = kv;
	}
	return rc == -ENOENT ? 0 : rc;
}

int btree_bucket_delete(struct btree_txn *t, struct btree_bucket *parent,
			const void *name, size_t name_len)
{
	struct btree_bucket *p = bucket_or_root(t, parent);
	int rc = bucket_usable(t, p, true);
	if (rc < 0)
		return rc;
	struct btree_bucket *child;
	rc = btree_bucket_open(t, p, name, name_len, &child);
	if (rc < 0)
		return rc == -ENOENT || rc == -ENOTDIR || rc == -EINVAL ? rc : bt_txn_fail(t, rc);
	bt_track(p, name, name_len, true);

	/* Nested buckets first, then this bucket's own pages. */
	struct btree_kv *names;
	size_t n;
	rc = bucket_child_names(child, &names, &n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = btree_bucket_delete(t, child, names[i].key, names[i].key_len);
	stored_free(names);
	if (rc == 0)
		rc = bt_bucket_free_pages(child, false);
	if (rc < 0)
		return bt_txn_fail(t, rc);
	if (child->observed)
		bt_db_observe_reset(t->db);
	bucket_unlink(p, child);
	child->deleted = true;
	struct bt_node *leaf;
	rc = bucket_leaf(p, name, name_len, true, &leaf);
	if (rc < 0)
		return bt_txn_fail(t, rc);
	bt_node_del(leaf, name, (uint32_t)name_len);
	return 0;
}

void btree_bucket_set_fill(struct btree_bucket *b, double fill)
{
	b->fill = fill < 0.1 ? 0.1 : fill > 1.0 ? 1.0 : fill;
}

void btree_bucket_set_runs(struct btree_bucket *b, uint32_t suffix)
{
	b->run_suffix = suffix;
}

void btree_bucket_set_append_pages(struct btree_bucket *b, uint32_t pages, uint32_t max_elems)
{
	b->append_pages = pages;
	b->append_elems = max_elems;
}

int btree_bucket_set_sequence(struct btree_bucket *b, uint64_t seq)
{
	struct btree_txn *t = b->txn;
	int rc = bucket_usable(t, b, true);
	if (rc < 0)
		return rc;
	bt_track(b, NULL, 0, false);
	/* A materialized root makes the bucket part of the commit. */
	if (!b->root_node) {
		struct bt_node *n;
		rc = bt_node_get(b, b->root, NULL, &n);
		if (rc < 0)
			return bt_txn_fail(t, rc);
	}
	b->sequence = seq;
	return 0;
}

/* The leaf of key from the last get's path, when that get was of key. */
static int bucket_last_get_leaf(struct btree_bucket *b, const void *key, size_t klen,
				struct bt_node **leaf)
{
	*leaf = NULL;
	if (!b->lg_valid || klen != b->lg_klen || memcmp(key, b->lg_key, klen) != 0)
		return 0;
	b->lg_valid = false;
	struct btree_cursor c;
	btree_cursor_init(&c, b);
	memcpy(c.stack, b->lg_frames, b->lg_depth * sizeof(*c.stack));
	c.depth = b->lg_depth;
	return bt_cursor_node(&c, leaf);
}

int btree_put(struct btree_bucket *b, const void *key, size_t key_len,
	      const void *val, size_t val_len)
{
	struct btree_txn *t = b->txn;
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	struct bt_node *leaf = bucket_finger(b, key, key_len);
	int rc;
	bt_track(b, key, key_len, false);
	if (leaf || b->lg_valid) {
		rc = bucket_usable(t, b, true);
		if (rc < 0)
			return rc;
		if (!leaf) {
			rc = bucket_last_get_leaf(b, key, key_len, &leaf);
			if (rc < 0)
				return bt_txn_fail(t, rc);
		}
	}
	if (leaf) {
		const struct bt_inode *in = bt_node_lookup(leaf, key, (uint32_t)key_len);
		exact = in != NULL;
		kv.flags = in && (in->flags & PAGE_LEAF_BUCKET) ? BTREE_KV_BUCKET : 0;
	} else {
		rc = bucket_seek(b, true, "key", key, key_len, &c, &kv, &exact);
		if (rc < 0)
			return rc;
	}
	if (val_len > PAGE_MAX_VALUE)
		return bt_error(-EINVAL, "stored: value of %zu bytes (at most %u)", val_len,
				PAGE_MAX_VALUE);
	if (b == &t->root)
		return bt_error(-EINVAL, "stored: keys at the top level must be buckets");
	if (exact && (kv.flags & BTREE_KV_BUCKET))
		return bt_error(-EISDIR, "stored: the key names a bucket");

	uint8_t *copy = arena_alloc(&t->arena, key_len + val_len);
	if (!copy)
		return bt_txn_fail(t, bt_error(-ENOMEM, "stored: out of memory"));
	memcpy(copy, key, key_len);
	if (val_len)
		memcpy(copy + key_len, val, val_len);
	rc = leaf ? 0 : bt_cursor_node(&c, &leaf);
	if (rc == 0)
		rc = bt_node_put(leaf, copy, (uint32_t)key_len, copy, (uint32_t)key_len,
				 copy + key_len, (uint32_t)val_len, 0, 0);
	return rc < 0 ? bt_txn_fail(t, rc) : 0;
}

/* Tells the db's observer that a key of an observed bucket is gone. */
static void bucket_observe_del(const struct btree_bucket *b, const void *key, size_t key_len,
			       const uint8_t *val, size_t vsize)
{
	const struct btree_db *db = b->txn->db;
	if (b->observed && db->obs.gone)
		db->obs.gone(db->obs.arg, key, (uint32_t)key_len, val, (uint32_t)vsize);
}

void bt_bucket_observe_gone(const struct btree_bucket *b, const struct bt_node *n)
{
	const struct btree_db *db = b->txn->db;
	if (!b->observed || !db->obs.gone)
		return;
	for (uint32_t i = 0; i < n->ninodes; i++)
		db->obs.gone(db->obs.arg, n->inodes[i].key, n->inodes[i].ksize, n->inodes[i].val,
			     n->inodes[i].vsize);
}

int btree_del(struct btree_bucket *b, const void *key, size_t key_len)
{
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	struct bt_node *leaf = bucket_finger(b, key, key_len);
	int rc;
	bt_track(b, key, key_len, false);
	if (leaf) {
		rc = bucket_usable(b->txn, b, true);
		if (rc < 0)
			return rc;
		const struct bt_inode *in = bt_node_lookup(leaf, key, (uint32_t)key_len);
		if (!in)
			return -ENOENT;
		if (in->flags & PAGE_LEAF_BUCKET)
			return bt_error(-EISDIR, "stored: the key names a bucket");
		const uint8_t *val = in->val;
		uint32_t vsize = in->vsize;
		bt_node_del(leaf, key, (uint32_t)key_len);
		bucket_observe_del(b, key, key_len, val, vsize);
		return 0;
	}
	rc = bucket_seek(b, true, "key", key, key_len, &c, &kv, &exact);
	if (rc < 0)
		return rc;
	if (!exact)
		return -ENOENT;
	if (kv.flags & BTREE_KV_BUCKET)
		return bt_error(-EISDIR, "stored: the key names a bucket");
	rc = bt_cursor_node(&c, &leaf);
	if (rc < 0)
		return bt_txn_fail(b->txn, rc);
	bt_node_del(leaf, key, (uint32_t)key_len);
	bucket_observe_del(b, key, key_len, kv.val, kv.val_len);
	return 0;
}

int bt_bucket_rebalance(struct btree_bucket *b)
{
	int rc = 0;
	if (b->nodes.n > 0) {
		struct bt_node **nodes = stored_malloc(b->nodes.n * sizeof(*nodes));
		if (!nodes)
			return -ENOMEM;
		size_t n = 0;
		for (size_t i = 0; i < b->nodes.cap; i++)
			if (b->nodes.keys[i])
				nodes[n++] = b->nodes.vals[i];
		for (size_t i = 0; rc == 0 && i < n; i++)
			rc = bt_node_rebalance(nodes[i]);
		stored_free(nodes);
	}
	for (struct btree_bucket *c = b->children; rc == 0 && c; c = c->next)
		rc = bt_bucket_rebalance(c);
	return rc;
}

/* True when b's content fits inline in its parent's value. */
static bool bucket_inlineable(const struct btree_bucket *b)
{
	const struct bt_node *n = b->root_node;
	if (!n || !n->leaf)
		return false;
	size_t size = PAGE_HDR_SIZE;
	size_t max = b->txn->map->page_size / 4;
	for (uint32_t i = 0; i < n->ninodes; i++) {
		size += PAGE_ELEM_SIZE + n->inodes[i].ksize + (size_t)n->inodes[i].vsize;
		if ((n->inodes[i].flags & PAGE_LEAF_BUCKET) || size > max)
			return false;
	}
	return true;
}

/* Writes a changed child bucket and stores its new value in b. */
static int bucket_spill_child(struct btree_bucket *b, struct btree_bucket *child)
{
	struct btree_txn *t = b->txn;
	uint8_t *val;
	size_t vlen;
	int rc;
	/* Spilling the child may materialize its root (a nested bucket of it
	 * changed); a child without a root node did not change. */
	if (bucket_inlineable(child)) {
		rc = bt_bucket_free_pages(child, true);
		if (rc < 0)
			return rc;
		bt_bucket_observe_gone(child, child->root_node);
		vlen = PAGE_BUCKET_HDR_SIZE + bt_node_size(child->root_node);
		val = arena_zalloc(&t->arena, vlen);
		if (!val)
			return -ENOMEM;
		bt_node_write(child->root_node, val + PAGE_BUCKET_HDR_SIZE, 0, 0);
	} else {
		rc = bt_bucket_spill(child);
		if (rc < 0)
			return rc;
		if (!child->root_node)
			return 0;
		vlen = PAGE_BUCKET_HDR_SIZE;
		val = arena_alloc(&t->arena, vlen);
		if (!val)
			return -ENOMEM;
	}
	page_st64(val, child->root);
	page_st64(val + 8, child->sequence);
	struct bt_node *leaf;
	rc = bucket_leaf(b, child->name, child->name_len, true, &leaf);
	if (rc < 0)
		return rc;
	return bt_node_put(leaf, child->name, child->name_len, child->name, child->name_len,
			   val, (uint32_t)vlen, 0, PAGE_LEAF_BUCKET);
}

int bt_bucket_spill(struct btree_bucket *b)
{
	int rc;
	for (struct btree_bucket *c = b->children; c; c = c->next) {
		rc = bucket_spill_child(b, c);
		if (rc < 0)
			return rc;
	}
	if (!b->root_node)
		return 0;
	rc = bt_node_spill(b->root_node);
	if (rc < 0)
		return rc;
	while (b->root_node->parent)
		b->root_node = b->root_node->parent;
	b->root = b->root_node->pgid;
	return 0;
}
