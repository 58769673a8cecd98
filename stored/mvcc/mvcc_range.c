/*
 * Range with etcd 3.4's semantics (etcdserver/apply.go Range and
 * mvcc/kvstore_txn.go rangeKeys): revision checks, count, limit with one
 * extra for `more`, and when sorting or filtering: fetch everything,
 * filter, sort, then limit.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/alloc.h"

typedef Etcdserverpb__RangeRequest RangeRequest;

void mvcc_range_result_init(struct mvcc_range_result *res)
{
	memset(res, 0, sizeof(*res));
}

void mvcc_range_result_free(struct mvcc_range_result *res)
{
	stored_free(res->kvs);
	stored_free(res->tmp);
	memset(res, 0, sizeof(*res));
}

/* Fills ref from KeyValue bytes (decoded: nothing of the value is read). */
static int decode_ref(const uint8_t *kv, size_t len, struct mvcc_kv_ref *ref)
{
	if (mvcc_kv_decode(kv, len, &ref->f) || ref->f.key_len == 0)
		return kvindex_corrupt("key bucket holds a malformed KeyValue (%zu bytes)", len);
	ref->kv = kv;
	ref->kv_len = len;
	return 0;
}

/* The KeyValue an index hit names, decoded and checked against the key
 * the index gave. */
static int hit_ref(struct mvcc_view *v, const struct kvindex_hit *h, struct mvcc_kv_ref *ref)
{
	const uint8_t *kv = h->kv;
	size_t len = h->kv_len;
	int rc;

	if (!kv) {
		rc = mvcc_view_kv_at(v, h->rev, &kv, &len);
		if (rc)
			return rc;
	}
	rc = decode_ref(kv, len, ref);
	if (rc)
		return rc;
	if (h->key && mvcc_bytes_cmp(ref->f.key, ref->f.key_len, h->key, h->key_len) != 0)
		return kvindex_corrupt("cetcd index: the latest entry of a %zu-byte key "
				       "holds another key's KeyValue", h->key_len);
	return 0;
}

static int append_hit(struct mvcc_view *v, const struct kvindex_hit *h,
		      struct mvcc_range_result *res)
{
	int rc = stored_reserve((void **)&res->kvs, &res->cap, res->n + 1, sizeof(*res->kvs), 8);
	if (rc)
		return rc;
	rc = hit_ref(v, h, &res->kvs[res->n]);
	if (rc)
		return rc;
	res->n++;
	return 0;
}

/* Order of two refs by a sort target; 0 when equal. */
static int cmp_target(int target, const struct mvcc_kv *a, const struct mvcc_kv *b)
{
	switch (target) {
	case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY:
		return mvcc_bytes_cmp(a->key, a->key_len, b->key, b->key_len);
	case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VERSION:
		return mvcc_i64_cmp(a->version, b->version);
	case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__CREATE:
		return mvcc_i64_cmp(a->create_rev, b->create_rev);
	case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__MOD:
		return mvcc_i64_cmp(a->mod_rev, b->mod_rev);
	case ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE:
		return mvcc_bytes_cmp(a->value, a->value_len, b->value, b->value_len);
	}
	return 0;
}

/* Stable merge sort of res->kvs by target; descending reverses the order
 * but keeps equal elements as they were, like Go's sort.Reverse over an
 * insertion sort. */
static int sort_refs(struct mvcc_range_result *res, int target, bool descend)
{
	size_t n = res->n;
	if (n < 2)
		return 0;
	int rc = stored_reserve((void **)&res->tmp, &res->tmp_cap, n, sizeof(*res->tmp), 8);
	if (rc)
		return rc;
	struct mvcc_kv_ref *src = res->kvs, *dst = res->tmp;
	for (size_t width = 1; width < n; width *= 2) {
		for (size_t lo = 0; lo < n; lo += 2 * width) {
			size_t mid = lo + width < n ? lo + width : n;
			size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			size_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi) {
				int c = cmp_target(target, &src[j].f, &src[i].f);
				if (descend)
					c = -c;
				/* take from the right only when strictly before */
				dst[k++] = c < 0 ? src[j++] : src[i++];
			}
			while (i < mid)
				dst[k++] = src[i++];
			while (j < hi)
				dst[k++] = src[j++];
		}
		struct mvcc_kv_ref *t = src;
		src = dst;
		dst = t;
	}
	if (src != res->kvs)
		memcpy(res->kvs, src, n * sizeof(*src));
	return 0;
}

/* Whether a KeyValue passes the request's revision filters. */
static bool passes_filters(const struct mvcc_kv *f, const RangeRequest *r)
{
	if (r->max_mod_revision != 0 && f->mod_rev > r->max_mod_revision)
		return false;
	if (r->min_mod_revision != 0 && f->mod_rev < r->min_mod_revision)
		return false;
	if (r->max_create_revision != 0 && f->create_rev > r->max_create_revision)
		return false;
	if (r->min_create_revision != 0 && f->create_rev < r->min_create_revision)
		return false;
	return true;
}

/* Drops the refs that fail the request's revision filters. */
static void filter_refs(struct mvcc_range_result *res, const RangeRequest *r)
{
	size_t j = 0;
	for (size_t i = 0; i < res->n; i++)
		if (passes_filters(&res->kvs[i].f, r))
			res->kvs[j++] = res->kvs[i];
	res->n = j;
}

static bool has_filters(const RangeRequest *r)
{
	return r->min_mod_revision != 0 || r->max_mod_revision != 0 ||
	       r->min_create_revision != 0 || r->max_create_revision != 0;
}

/* Whether the answer is sorted, as etcd's Range decides it (a target
 * other than the key with no order means ascending; an unknown target or
 * order leaves key order), and how. */
static bool sorts(const RangeRequest *r, int *target, bool *descend)
{
	int order = r->sort_order;
	if (r->sort_target != ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY &&
	    order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE)
		order = ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND;
	*target = r->sort_target;
	*descend = order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__DESCEND;
	return (order == ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__ASCEND || *descend) &&
	       r->sort_target >= ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY &&
	       r->sort_target <= ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__VALUE;
}

/* The revision a range reads at, checked as etcd checks it. */
static int read_rev(const struct mvcc_view *v, const RangeRequest *r, int64_t cur_rev,
		    int64_t *rev)
{
	*rev = r->revision;
	if (*rev > cur_rev)
		return MVCC_ERR_FUTURE_REV;
	if (*rev <= 0)
		*rev = cur_rev;
	if (*rev < v->compact_rev)
		return MVCC_ERR_COMPACTED;
	return 0;
}

/* Every KeyValue of the range is in res: etcd's filter, sort, then limit. */
static int finish_refs(struct mvcc_range_result *res, const RangeRequest *r, bool sorted,
		       int target, bool descend)
{
	filter_refs(res, r);
	if (sorted) {
		int rc = sort_refs(res, target, descend);
		if (rc)
			return rc;
	}
	if (r->limit > 0 && (int64_t)res->n > r->limit) {
		res->n = (size_t)r->limit;
		res->more = true;
	}
	return 0;
}

int mvcc_range_at(struct mvcc_view *v, const RangeRequest *r, int64_t cur_rev,
		  struct mvcc_range_result *res)
{
	struct kvindex_range kr;
	struct kvindex_iter it;
	struct kvindex_hit h;
	int64_t limit = r->limit, rev, count = 0;
	int target;
	bool descend, sorted = sorts(r, &target, &descend);
	int rc;

	res->n = 0;
	res->count = 0;
	res->more = false;
	res->keys_only = r->keys_only;
	res->rev = cur_rev;
	if (r->sort_order != ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE || has_filters(r))
		limit = 0;  /* fetch everything; filter, sort and truncate afterwards */
	if (limit > 0)
		limit++;    /* one extra tells `more` */

	rc = read_rev(v, r, cur_rev, &rev);
	if (rc)
		return rc;
	kvindex_range_from_request(&kr, r->key.data, r->key.len, r->range_end.data,
				   r->range_end.len);
	kvindex_iter_begin(&it, &v->idx, &kr, rev, rev == v->rev);
	while ((rc = kvindex_iter_next(&it, &h)) == 0) {
		count++;
		if (r->count_only || (limit > 0 && (int64_t)res->n >= limit))
			continue;
		rc = append_hit(v, &h, res);
		if (rc)
			return rc;
	}
	if (rc != -ENOENT)
		return rc;
	res->count = count;
	return finish_refs(res, r, sorted, target, descend);
}

/* ---- a range in steps ---- */

int mvcc_range_walk_begin(struct mvcc_range_walk *w, struct mvcc_view *v, const RangeRequest *r)
{
	int target;
	bool descend;
	int rc;

	w->v = v;
	w->r = r;
	w->hdr_rev = v->rev;
	w->pass = 0;
	w->handed = 0;
	w->n = 0;
	w->count = 0;
	w->more = false;
	w->pos = 0;
	w->read = 0;
	rc = read_rev(v, r, v->rev, &w->rev);
	if (rc)
		return rc;
	/* ascending by key is key order already */
	w->sorted = sorts(r, &target, &descend) &&
		    !(target == ETCDSERVERPB__RANGE_REQUEST__SORT_TARGET__KEY && !descend);
	w->collecting = w->sorted;
	w->res.n = 0;
	w->res.more = false;
	w->res.keys_only = r->keys_only;
	w->res.rev = v->rev;
	kvindex_range_from_request(&w->kr, r->key.data, r->key.len, r->range_end.data,
				   r->range_end.len);
	kvindex_iter_begin(&w->it, &v->idx, &w->kr, w->rev, w->rev == v->rev);
	return 0;
}

void mvcc_range_walk_rewind(struct mvcc_range_walk *w)
{
	w->pass = 1;
	w->handed = 0;
	w->pos = 0;
	if (!w->sorted)
		kvindex_iter_begin(&w->it, &w->v->idx, &w->kr, w->rev, w->rev == w->v->rev);
}

int mvcc_range_walk_next(struct mvcc_range_walk *w, struct mvcc_kv_ref *out, size_t *budget)
{
	const RangeRequest *r = w->r;
	int64_t limit = r->limit > 0 ? r->limit : 0;
	bool filters = has_filters(r);
	struct kvindex_hit h;
	int rc;

	if (w->collecting) {
		/* the KeyValues to sort first, a step at a time: all of them,
		 * or with no sort order asked (a target alone) and no filters,
		 * as mvcc_range_at fetches them, the limit and one more */
		int64_t fetch = r->sort_order != ETCDSERVERPB__RANGE_REQUEST__SORT_ORDER__NONE ||
				filters || limit == 0 ? 0 : limit + 1;
		while ((rc = *budget > 0 ? kvindex_iter_next(&w->it, &h) : -EAGAIN) == 0) {
			(*budget)--;
			w->count++;
			if (r->count_only || (fetch > 0 && (int64_t)w->res.n >= fetch))
				continue;
			rc = append_hit(w->v, &h, &w->res);
			if (rc)
				return rc;
			w->read += w->res.kvs[w->res.n - 1].kv_len;
		}
		if (rc != -ENOENT)
			return rc;
		int target;
		bool descend;
		(void)sorts(r, &target, &descend);
		w->res.count = w->count;
		rc = finish_refs(&w->res, r, true, target, descend);
		if (rc)
			return rc;
		w->collecting = false;
		w->n = w->res.n;
		w->more = w->res.more;
	}
	if (w->sorted) {
		if (w->pos == w->res.n)
			return -ENOENT;
		*out = w->res.kvs[w->pos++];
		w->read += out->kv_len;
		return 0;
	}
	if (w->pass == 1 && w->handed == w->n)
		return -ENOENT;
	while (*budget > 0) {
		(*budget)--;
		rc = kvindex_iter_next(&w->it, &h);
		if (rc == -ENOENT && w->pass == 1)
			return kvindex_corrupt("cetcd index: a range walked again ended early");
		if (rc)
			return rc;
		if (w->pass == 0)
			w->count++;
		if (r->count_only)
			continue;
		bool full = limit > 0 && (int64_t)w->handed >= limit;
		if (full && !filters)
			w->more = true;
		if (full && w->more)
			continue; /* counted only */
		rc = hit_ref(w->v, &h, out);
		if (rc)
			return rc;
		w->read += out->kv_len;
		if (filters && !passes_filters(&out->f, r))
			continue;
		if (full) {
			w->more = true;
			continue;
		}
		w->handed++;
		if (w->pass == 0)
			w->n = w->handed;
		return 0;
	}
	return -EAGAIN;
}

void mvcc_range_walk_init(struct mvcc_range_walk *w)
{
	memset(w, 0, sizeof(*w));
	mvcc_range_result_init(&w->res);
}

void mvcc_range_walk_free(struct mvcc_range_walk *w)
{
	mvcc_range_result_free(&w->res);
}

int mvcc_range(struct mvcc_view *v, const RangeRequest *r, struct mvcc_range_result *res)
{
	return mvcc_range_at(v, r, v->rev, res);
}

Etcdserverpb__ResponseHeader *mvcc_header(struct arena *a, int64_t rev)
{
	Etcdserverpb__ResponseHeader *h = arena_alloc(a, sizeof(*h));
	if (!h)
		return NULL;
	etcdserverpb__response_header__init(h);
	h->revision = rev;
	return h;
}

static int arena_bytes(struct arena *a, bool copy, const uint8_t *p, size_t n,
		       ProtobufCBinaryData *out)
{
	out->len = n;
	out->data = NULL;
	if (!n)
		return 0;
	if (!copy) {
		out->data = (uint8_t *)p;
		return 0;
	}
	out->data = arena_alloc(a, n);
	if (!out->data)
		return -ENOMEM;
	memcpy(out->data, p, n);
	return 0;
}

int mvcc_kv_message(const struct mvcc_kv *f, bool keys_only, struct arena *a, bool copy,
		    Mvccpb__KeyValue **out)
{
	Mvccpb__KeyValue *m = arena_alloc(a, sizeof(*m));
	if (!m)
		return -ENOMEM;
	mvccpb__key_value__init(m);
	m->create_revision = f->create_rev;
	m->mod_revision = f->mod_rev;
	m->version = f->version;
	m->lease = f->lease;
	int rc = arena_bytes(a, copy, f->key, f->key_len, &m->key);
	if (!rc && !keys_only)
		rc = arena_bytes(a, copy, f->value, f->value_len, &m->value);
	if (rc)
		return rc;
	*out = m;
	return 0;
}

int mvcc_range_response(const struct mvcc_range_result *res, struct arena *a, bool copy,
			Etcdserverpb__RangeResponse **out)
{
	Etcdserverpb__RangeResponse *m = arena_alloc(a, sizeof(*m));
	if (!m)
		return -ENOMEM;
	etcdserverpb__range_response__init(m);
	m->header = mvcc_header(a, res->rev);
	if (!m->header)
		return -ENOMEM;
	m->count = res->count;
	m->more = res->more;
	if (res->n) {
		m->kvs = arena_alloc(a, res->n * sizeof(*m->kvs));
		if (!m->kvs)
			return -ENOMEM;
		for (size_t i = 0; i < res->n; i++) {
			int rc = mvcc_kv_message(&res->kvs[i].f, res->keys_only, a, copy, &m->kvs[i]);
			if (rc)
				return rc;
		}
		m->n_kvs = res->n;
	}
	*out = m;
	return 0;
}
