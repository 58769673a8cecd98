/*
 * Verification of a tree, like bbolt's Check and stricter: every page is
 * reached once, page headers and elements are sound, keys are sorted in
 * each page and lie inside the range the parent gives the page, nested and
 * inline buckets are well formed, and (when the free pages are known) every
 * page below the high-water mark is either used or free, never both.
 */
#include <errno.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"

/* Recursion budget over trees and nested buckets together. */
#define CHECK_MAX_LEVELS 1024

struct check_ctx {
	struct btree_txn *t;
	const struct bt_map *m;
	uint8_t *seen;   /* bit per page below hwm: in use */
	uint64_t hwm;
};

/* A key range [lo, hi); a NULL bound is open. */
struct check_range {
	const uint8_t *lo;
	size_t lo_len;
	const uint8_t *hi;
	size_t hi_len;
};

static int check_page_tree(struct check_ctx *ck, uint64_t pgid, const struct check_range *r,
			   unsigned depth, unsigned levels);
static int check_elems(struct check_ctx *ck, uint64_t holder, const uint8_t *p, size_t span,
		       const struct check_range *r, unsigned depth, unsigned levels);

static int check_mark(struct check_ctx *ck, uint64_t first, uint64_t n, uint64_t holder)
{
	for (uint64_t id = first; id < first + n; id++) {
		if (id >= ck->hwm)
			return bt_corrupt(ck->m, holder, "uses page %llu at or past the high-water mark %llu",
					  (unsigned long long)id, (unsigned long long)ck->hwm);
		uint8_t bit = (uint8_t)(1u << (id % 8));
		if (ck->seen[id / 8] & bit)
			return bt_corrupt(ck->m, id, "is referenced more than once");
		ck->seen[id / 8] |= bit;
	}
	return 0;
}

/* A bucket value held by page holder. */
static int check_bucket_value(struct check_ctx *ck, uint64_t holder, const uint8_t *val,
			      size_t vlen, unsigned levels)
{
	if (levels >= CHECK_MAX_LEVELS)
		return bt_corrupt(ck->m, holder, "holds buckets nested too deep");
	if (vlen < PAGE_BUCKET_HDR_SIZE)
		return bt_corrupt(ck->m, holder, "holds a bucket value of %zu bytes, shorter than its header",
				  vlen);
	uint64_t root = page_ld64(val);
	struct check_range open = { 0 };
	if (root != 0)
		return check_page_tree(ck, root, &open, 0, levels + 1);
	const uint8_t *p = val + PAGE_BUCKET_HDR_SIZE;
	size_t span = vlen - PAGE_BUCKET_HDR_SIZE;
	int rc = bt_page_check(ck->m, holder, p, span, true);
	if (rc < 0)
		return rc;
	return check_elems(ck, holder, p, span, &open, 0, levels + 1);
}

/* The elements of the branch or leaf page p (named holder in messages). */
static int check_elems(struct check_ctx *ck, uint64_t holder, const uint8_t *p, size_t span,
		       const struct check_range *r, unsigned depth, unsigned levels)
{
	bool leaf = page_flags(p) == PAGE_FLAG_LEAF;
	uint16_t count = page_count(p);
	struct page_elem prev = { 0 }, e, next;
	int rc;
	for (uint16_t i = 0; i < count; i++) {
		if (page_elem(p, span, leaf, i, &e) < 0)
			return bt_corrupt(ck->m, holder, "has element %u pointing outside the page", i);
		if (e.ksize == 0)
			return bt_corrupt(ck->m, holder, "has an empty key at element %u", i);
		if (i > 0 && page_keycmp(prev.key, prev.ksize, e.key, e.ksize) >= 0)
			return bt_corrupt(ck->m, holder, "has keys out of order at element %u", i);
		if (r->lo && page_keycmp(e.key, e.ksize, r->lo, r->lo_len) < 0)
			return bt_corrupt(ck->m, holder, "has key %u below the range its parent gives it", i);
		if (r->hi && page_keycmp(e.key, e.ksize, r->hi, r->hi_len) >= 0)
			return bt_corrupt(ck->m, holder, "has key %u at or above the range its parent gives it", i);
		if (leaf) {
			if (e.flags & PAGE_LEAF_BUCKET) {
				rc = check_bucket_value(ck, holder, e.val, e.vsize, levels);
				if (rc < 0)
					return rc;
			}
		} else {
			struct check_range child = { e.key, e.ksize, r->hi, r->hi_len };
			if (i + 1 < count) {
				if (page_elem(p, span, false, i + 1u, &next) < 0)
					return bt_corrupt(ck->m, holder, "has element %u pointing outside the page",
							  i + 1u);
				child.hi = next.key;
				child.hi_len = next.ksize;
			}
			rc = check_page_tree(ck, e.pgid, &child, depth + 1, levels + 1);
			if (rc < 0)
				return rc;
		}
		prev = e;
	}
	return 0;
}

static int check_page_tree(struct check_ctx *ck, uint64_t pgid, const struct check_range *r,
			   unsigned depth, unsigned levels)
{
	if (depth >= BTREE_MAX_DEPTH || levels >= CHECK_MAX_LEVELS)
		return bt_corrupt(ck->m, pgid, "lies too deep in the tree (a cycle?)");
	const uint8_t *p;
	size_t span;
	int rc = bt_txn_page(ck->t, pgid, &p, &span);
	if (rc < 0)
		return rc;
	rc = check_mark(ck, pgid, span / ck->m->page_size, pgid);
	if (rc < 0)
		return rc;
	return check_elems(ck, pgid, p, span, r, depth, levels);
}

int bt_check_txn(struct btree_txn *t, const struct bt_check_opts *o)
{
	static const struct bt_check_opts none;
	if (!o)
		o = &none;
	struct check_ctx ck = { .t = t, .m = t->map, .hwm = t->hwm };
	ck.seen = stored_calloc(1, t->hwm / 8 + 1);
	if (!ck.seen)
		return bt_error(-ENOMEM, "stored: out of memory");
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < o->npre_used; i++)
		rc = check_mark(&ck, o->pre_used[i], 1, o->pre_used[i]);

	struct check_range open = { 0 };
	if (rc == 0) {
		if (t->root.root == 0)
			rc = bt_corrupt(ck.m, 0, "is named as the root of the top-level bucket");
		else
			rc = check_page_tree(&ck, t->root.root, &open, 0, 0);
	}

	if (rc == 0 && o->free_ids) {
		uint8_t *is_free = stored_calloc(1, t->hwm / 8 + 1);
		if (!is_free) {
			rc = bt_error(-ENOMEM, "stored: out of memory");
			goto out_free;
		}
		for (size_t i = 0; rc == 0 && i < o->nfree; i++) {
			uint64_t id = o->free_ids[i];
			uint8_t bit = (uint8_t)(1u << (id % 8));
			if (id < 2 || id >= t->hwm)
				rc = bt_corrupt(ck.m, id, "is listed free but lies outside [2, %llu)",
						(unsigned long long)t->hwm);
			else if (ck.seen[id / 8] & bit)
				rc = bt_corrupt(ck.m, id, "is both free and in use");
			else if (is_free[id / 8] & bit)
				rc = bt_corrupt(ck.m, id, "is listed free twice");
			else
				is_free[id / 8] |= bit;
		}
		for (uint64_t id = 0; rc == 0 && o->account_all && id < t->hwm; id++) {
			uint8_t bit = (uint8_t)(1u << (id % 8));
			if (!(ck.seen[id / 8] & bit) && !(is_free[id / 8] & bit))
				rc = bt_corrupt(ck.m, id, "is neither reachable nor free");
		}
		stored_free(is_free);
	}
	if (rc == 0 && o->seen_out) {
		*o->seen_out = ck.seen;
		ck.seen = NULL;
	}
out_free:
	stored_free(ck.seen);
	return rc;
}

int btree_txn_check(struct btree_txn *t)
{
	int rc = bt_txn_usable(t, false);
	if (rc < 0)
		return rc;
	return bt_check_txn(t, NULL);
}
