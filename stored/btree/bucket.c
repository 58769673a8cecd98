/*
 * Buckets: the top-level bucket of a txn holds the file's buckets, each of
 * which holds keys and nested buckets. A bucket is stored as a value
 * (header: root page, sequence) under its name in the parent. A small
 * bucket without nested buckets is stored inline: root 0 and its single
 * leaf page inside the value, as bbolt lays it out (inline when it fits in
 * a quarter page).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"

#define BUCKET_DEFAULT_FILL 0.5

void bt_bucket_init(struct btree_bucket *b, struct btree_txn *t, uint64_t root,
		    uint64_t sequence)
{
	memset(b, 0, sizeof(*b));
	b->txn = t;
	b->root = root;
	b->sequence = sequence;
	b->fill = BUCKET_DEFAULT_FILL;
	pgmap_init(&b->nodes);
}

static struct btree_bucket *bucket_or_root(struct btree_txn *t, struct btree_bucket *b)
{
	return b ? b : &t->root;
}

static int bucket_usable(struct btree_txn *t, struct btree_bucket *b, bool write)
{
	int rc = bt_txn_usable(t, write);
	if (rc < 0)
		return rc;
	if (b->txn != t)
		return bt_error(-EINVAL, "stored: bucket handle of another txn");
	if (b->deleted)
		return bt_error(-ENOENT, "stored: the bucket was deleted in this txn");
	return 0;
}

static int key_valid(const char *what, size_t len)
{
	if (len == 0 || len > PAGE_MAX_KEY)
		return bt_error(-EINVAL, "stored: %s of %zu bytes (must be 1 to %u)", what, len,
				PAGE_MAX_KEY);
	return 0;
}

/* Makes the handle of the child bucket whose value is kv, held by page
 * holder of parent. */
static int bucket_from_value(struct btree_txn *t, struct btree_bucket *parent,
			     const struct btree_kv *kv, uint64_t holder,
			     struct btree_bucket **out)
{
	const struct bt_map *m = t->map;
	if (kv->val_len < PAGE_BUCKET_HDR_SIZE)
		return bt_corrupt(m, holder, "holds a bucket value of %zu bytes, shorter than its header",
				  kv->val_len);
	uint64_t root = page_ld64(kv->val);
	if (root == 0 && kv->val_len < PAGE_BUCKET_HDR_SIZE + PAGE_HDR_SIZE)
		return bt_corrupt(m, holder, "holds an inline bucket of %zu bytes, too short for its page",
				  kv->val_len);
	if (parent->depth + 1 > BT_MAX_NESTING)
		return bt_corrupt(m, holder, "holds buckets nested more than %d deep", BT_MAX_NESTING);
	struct btree_bucket *b = arena_alloc(&t->arena, sizeof(*b));
	uint8_t *name = arena_alloc(&t->arena, kv->key_len);
	if (!b || !name)
		return bt_error(-ENOMEM, "stored: out of memory");
	memcpy(name, kv->key, kv->key_len);
	bt_bucket_init(b, t, root, page_ld64(kv->val + 8));
	b->parent = parent;
	b->name = name;
	b->name_len = (uint32_t)kv->key_len;
	b->holder_pgid = holder;
	b->depth = parent->depth + 1;
	if (t->writable && !parent->parent && t->db->obs_name &&
	    t->db->obs_name_len == kv->key_len && memcmp(t->db->obs_name, name, kv->key_len) == 0)
		b->observed = true;
	if (root == 0) {
		b->inline_page = kv->val + PAGE_BUCKET_HDR_SIZE;
		b->inline_len = kv->val_len - PAGE_BUCKET_HDR_SIZE;
	}
	b->next = parent->children;
	parent->children = b;
	b->all_next = t->all_buckets;
	t->all_buckets = b;
	*out = b;
	return 0;
}

static struct btree_bucket *bucket_cached(struct btree_bucket *parent, const void *name,
					  size_t len)
{
	for (struct btree_bucket *b = parent->children; b; b = b->next)
		if (b->name_len == len && memcmp(b->name, name, len) == 0)
			return b;
	return NULL;
}

static void bucket_unlink(struct btree_bucket *parent, struct btree_bucket *child)
{
	for (struct btree_bucket **pp = &parent->children; *pp; pp = &(*pp)->next) {
		if (*pp == child) {
			*pp = child->next;
			return;
		}
	}
}

/* Page id of the cursor's leaf, for messages. */
static uint64_t cursor_holder(const struct btree_cursor *c)
{
	const struct btree_cursor_frame *f = &c->stack[c->depth - 1];
	if (c->bucket->root == 0)
		return c->bucket->holder_pgid;
	return f->node ? f->node->pgid : f->pgid;
}

/*
 * The common start of the entry points: checks that the txn and bucket may
 * be used (for a change, when write), that key is a valid key (what names
 * it in messages), and positions c at key. 0 with *exact telling whether
 * key is there (kv then holds it); errors of a change fail the txn.
 */
static int bucket_seek(struct btree_bucket *b, bool write, const char *what,
		       const void *key, size_t klen, struct btree_cursor *c,
		       struct btree_kv *kv, bool *exact)
{
	int rc = bucket_usable(b->txn, b, write);
	if (rc < 0)
		return rc;
	rc = key_valid(what, klen);
	if (rc < 0)
		return rc;
	btree_cursor_init(c, b);
	rc = bt_cursor_seek(c, key, klen, kv, exact);
	if (rc == -ENOENT)
		return 0;
	return rc < 0 && write ? bt_txn_fail(b->txn, rc) : rc;
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

int btree_bucket_open(struct btree_txn *t, struct btree_bucket *parent,
		      const void *name, size_t name_len, struct btree_bucket **out)
{
	struct btree_bucket *p = bucket_or_root(t, parent);
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	int rc = bucket_usable(t, p, false);
	if (rc < 0)
		return rc;
	struct btree_bucket *b = bucket_cached(p, name, name_len);
	if (b) {
		*out = b;
		return 0;
	}
	rc = bucket_seek(p, false, "bucket name", name, name_len, &c, &kv, &exact);
	if (rc < 0)
		return rc;
	if (!exact)
		return bt_error(-ENOENT, "stored: bucket %.*s not found", (int)name_len,
				(const char *)name);
	if (!(kv.flags & BTREE_KV_BUCKET))
		return bt_error(-ENOTDIR, "stored: %.*s is a key, not a bucket", (int)name_len,
				(const char *)name);
	return bucket_from_value(t, p, &kv, cursor_holder(&c), out);
}

int btree_bucket_create(struct btree_txn *t, struct btree_bucket *parent,
			const void *name, size_t name_len, struct btree_bucket **out)
{
	struct btree_bucket *p = bucket_or_root(t, parent);
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	int rc = bucket_seek(p, true, "bucket name", name, name_len, &c, &kv, &exact);
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

uint64_t btree_bucket_sequence(const struct btree_bucket *b)
{
	return b->sequence;
}

int btree_bucket_set_sequence(struct btree_bucket *b, uint64_t seq)
{
	struct btree_txn *t = b->txn;
	int rc = bucket_usable(t, b, true);
	if (rc < 0)
		return rc;
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

/* Keeps the path of a write txn's get (see btree_bucket.lg_*). */
static void bucket_remember_get(struct btree_bucket *b, const struct btree_cursor *c,
				const void *key, size_t klen)
{
	b->lg_valid = false;
	if (!b->txn->writable || klen > BT_LAST_GET_KEY_MAX || c->depth == 0)
		return;
	if (!b->lg_frames) {
		b->lg_frames = arena_alloc(&b->txn->arena, BTREE_MAX_DEPTH * sizeof(*b->lg_frames));
		if (!b->lg_frames)
			return;
	}
	memcpy(b->lg_frames, c->stack, c->depth * sizeof(*c->stack));
	b->lg_depth = c->depth;
	memcpy(b->lg_key, key, klen);
	b->lg_klen = (uint32_t)klen;
	b->lg_valid = true;
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

/* The bucket's finger leaf when key lies in its range, else NULL. */
static struct bt_node *bucket_finger(const struct btree_bucket *b, const uint8_t *key, size_t klen)
{
	const struct bt_node *n = b->finger;
	if (!n || n->dead || klen == 0 || klen > PAGE_MAX_KEY)
		return NULL;
	if (b->finger_lo && page_keycmp(key, (uint32_t)klen, b->finger_lo, b->finger_lo_len) < 0)
		return NULL;
	if (b->finger_hi && page_keycmp(key, (uint32_t)klen, b->finger_hi, b->finger_hi_len) >= 0)
		return NULL;
	return b->finger;
}

int btree_get(struct btree_bucket *b, const void *key, size_t key_len,
	      const uint8_t **val, size_t *val_len)
{
	struct btree_cursor c;
	struct btree_kv kv;
	bool exact;
	struct bt_node *leaf = bucket_finger(b, key, key_len);
	if (leaf && bucket_usable(b->txn, b, false) == 0) {
		const struct bt_inode *in = bt_node_lookup(leaf, key, (uint32_t)key_len);
		if (!in)
			return -ENOENT;
		if (in->flags & PAGE_LEAF_BUCKET)
			return -EISDIR;
		*val = in->val;
		*val_len = in->vsize;
		return 0;
	}
	int rc = bucket_seek(b, false, "key", key, key_len, &c, &kv, &exact);
	if (rc < 0)
		return rc;
	bucket_remember_get(b, &c, key, key_len);
	if (!exact)
		return -ENOENT;
	if (kv.flags & BTREE_KV_BUCKET)
		return -EISDIR;
	*val = kv.val;
	*val_len = kv.val_len;
	return 0;
}

struct btree_txn *btree_bucket_txn(const struct btree_bucket *b)
{
	return b->txn;
}

int btree_get_many(struct btree_bucket *b, size_t n, const uint8_t *const *keys,
		   const size_t *key_lens, const uint8_t **vals, size_t *val_lens, int *rcs)
{
	if (n > BTREE_GET_MANY_MAX)
		return bt_error(-EINVAL, "stored: %zu keys at once (at most %d)", n,
				BTREE_GET_MANY_MAX);
	int rc = bucket_usable(b->txn, b, false);
	if (rc < 0)
		return rc;
	bool together = !b->txn->writable && b->root != 0;
	for (size_t i = 0; i < n && together; i++)
		together = key_lens[i] > 0 && key_lens[i] <= PAGE_MAX_KEY;
	if (!together) {
		/* Write txns (nodes, finger), inline buckets and keys the
		 * lookup refuses: one by one. */
		for (size_t i = 0; i < n; i++)
			rcs[i] = btree_get(b, keys[i], key_lens[i], &vals[i], &val_lens[i]);
		return 0;
	}
	return bt_get_many_pages(b, n, keys, key_lens, vals, val_lens, rcs);
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

/* The start of page pgid of a read txn's mapping, or NULL when it is not
 * below the txn's high-water mark. */
static const uint8_t *bucket_read_page(const struct btree_bucket *b, uint64_t pgid)
{
	const struct btree_txn *t = b->txn;
	if (t->writable || b->root == 0 || pgid < 2 || pgid >= t->hwm)
		return NULL;
	return t->map->base + pgid * t->map->page_size;
}

void btree_entry_prefetch(struct btree_bucket *b, uint64_t pgid, uint32_t index,
			  uint32_t key_off)
{
	const uint8_t *p = bucket_read_page(b, pgid);
	if (!p)
		return;
	__builtin_prefetch(p);
	__builtin_prefetch(p + PAGE_HDR_SIZE + (size_t)index * PAGE_ELEM_SIZE);
	__builtin_prefetch(p + key_off);
}

/* Whether p, page pgid of a file whose pages below hwm exist, starts a
 * leaf page run that has an element `index`: 0 with the run's bytes in
 * *span, or -ENOENT. */
static int leaf_run_span(const uint8_t *p, uint64_t pgid, uint32_t index, uint64_t hwm,
			 size_t page_size, uint64_t *span)
{
	uint32_t overflow = page_overflow(p);
	if (page_id(p) != pgid || page_flags(p) != PAGE_FLAG_LEAF || index >= page_count(p) ||
	    overflow >= hwm - pgid)
		return -ENOENT;
	*span = ((uint64_t)overflow + 1) * page_size;
	return 0;
}

/* Bytes from an entry's key that btree_entry_at asks the CPU for at once:
 * a revision key and a KeyValue of a few hundred bytes. */
#define ENTRY_PREFETCH_BYTES 384

int btree_entry_at(struct btree_bucket *b, uint64_t pgid, uint32_t index, uint32_t key_off,
		   const void *key, size_t key_len, const uint8_t **val, uint32_t *vsize)
{
	const struct btree_txn *t = b->txn;
	const uint8_t *p = bucket_read_page(b, pgid);
	if (!p)
		return -ENOENT;
	size_t el = PAGE_HDR_SIZE + (size_t)index * PAGE_ELEM_SIZE;
	size_t ps = t->map->page_size;
	__builtin_prefetch(p + el);
	/* The key's line and the value's first ones, within the first page
	 * (the element gives the value's size only once it is in). */
	for (size_t o = key_off; key_off && o < (size_t)key_off + ENTRY_PREFETCH_BYTES && o < ps;
	     o += 64)
		__builtin_prefetch(p + o);
	uint64_t span;
	if (leaf_run_span(p, pgid, index, t->hwm, ps, &span) || el + PAGE_ELEM_SIZE > span ||
	    page_ld32(p + el) != 0 || page_ld32(p + el + 8) != key_len)
		return -ENOENT;
	uint64_t at = el + (uint64_t)page_ld32(p + el + 4);
	if (key_off ? at != key_off : at < el + PAGE_ELEM_SIZE)
		return -ENOENT;
	uint32_t vs = page_ld32(p + el + 12);
	if (at + key_len + vs > span || (key && memcmp(p + at, key, key_len) != 0))
		return -ENOENT;
	*val = p + at + key_len;
	*vsize = vs;
	return 0;
}

int btree_db_entry_key(const struct btree_db *db, uint64_t pgid, uint32_t index,
		       const uint8_t **key, uint32_t *ksize)
{
	const struct bt_map *m = &db->map;
	if (pgid < 2 || pgid >= db->cur.hwm_pgid)
		return -ENOENT;
	const uint8_t *p = m->base + pgid * m->page_size;
	uint64_t span;
	struct page_elem e;
	if (leaf_run_span(p, pgid, index, db->cur.hwm_pgid, m->page_size, &span) ||
	    page_elem(p, span, true, index, &e) < 0)
		return -ENOENT;
	*key = e.key;
	*ksize = e.ksize;
	return 0;
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
