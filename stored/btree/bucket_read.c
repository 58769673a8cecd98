/*
 * Buckets, the half that reads: handles of existing buckets (top level,
 * nested, inline) and gets, through read and write txns alike. Creating
 * and deleting buckets, puts, deletes, and a write txn's rebalance and
 * spill of its buckets are bucket_write.c.
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

/* Page id of the cursor's leaf, for messages. */
static uint64_t cursor_holder(const struct btree_cursor *c)
{
	const struct btree_cursor_frame *f = &c->stack[c->depth - 1];
	if (c->bucket->root == 0)
		return c->bucket->holder_pgid;
	return f->node ? f->node->pgid : f->pgid;
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

uint64_t btree_bucket_sequence(const struct btree_bucket *b)
{
	return b->sequence;
}

static int bucket_stats_page(struct btree_txn *t, uint64_t pgid, unsigned depth,
			     struct btree_bucket_stats *st)
{
	const uint8_t *p;
	size_t span;
	if (depth >= BTREE_MAX_DEPTH)
		return bt_corrupt(t->map, pgid, "lies deeper than %d levels", BTREE_MAX_DEPTH);
	/* A sound tree reaches each page once. Branches that share children
	 * level after level would be walked a number of times that grows
	 * with the fan-out to the power of the depth: more visits than the
	 * file has pages stop it. */
	if (st->leaf_pages + st->branch_pages >= t->hwm)
		return bt_corrupt(t->map, pgid, "is reached more often than the file has pages");
	int rc = bt_txn_page(t, pgid, &p, &span);
	if (rc < 0)
		return rc;
	bool leaf = page_flags(p) == PAGE_FLAG_LEAF;
	uint64_t used = PAGE_HDR_SIZE;
	for (unsigned i = 0; i < page_count(p); i++) {
		struct page_elem e;
		if (page_elem(p, span, leaf, i, &e) < 0)
			return bt_corrupt(t->map, pgid, "has element %u pointing outside the page", i);
		used += PAGE_ELEM_SIZE + e.ksize + (leaf ? e.vsize : 0);
		if (!leaf) {
			rc = bucket_stats_page(t, e.pgid, depth + 1, st);
			if (rc < 0)
				return rc;
		}
	}
	st->overflow_pages += page_overflow(p);
	if (leaf) {
		st->keys += page_count(p);
		st->leaf_pages++;
		st->leaf_inuse += used;
	} else {
		st->branch_pages++;
		st->branch_inuse += used;
	}
	return 0;
}

int btree_bucket_stats(struct btree_bucket *b, struct btree_bucket_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (b->root == 0)
		return 0;
	return bucket_stats_page(b->txn, b->root, 0, out);
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

/* Bytes from an entry's key that btree_entry_at asks the CPU for at once:
 * a revision key and a KeyValue of a few hundred bytes. */
#define ENTRY_PREFETCH_BYTES 384

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
