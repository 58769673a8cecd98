/*
 * The request checks etcd 3.4 makes in its gRPC layer before a request
 * reaches Raft (etcdserver/api/v3rpc/key.go), for gatewayd. The duplicate
 * key check follows etcd's checkIntervals step by step, including what it
 * lets through: a put in one nested txn and a later nested txn's delete of
 * the same key, and any delete with range_end "\0" (its interval
 * [key, "\0") is empty to etcd's interval tree).
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"

typedef Etcdserverpb__TxnRequest TxnRequest;
typedef Etcdserverpb__RequestOp RequestOp;

static const TxnRequest empty_txn = ETCDSERVERPB__TXN_REQUEST__INIT;

static const TxnRequest *nested(const RequestOp *op)
{
	return op->request_txn ? op->request_txn : &empty_txn;
}

/* ---- single requests ---- */

int mvcc_validate_range(const Etcdserverpb__RangeRequest *r)
{
	return r->key.len == 0 ? MVCC_ERR_EMPTY_KEY : 0;
}

/* etcd's checkPutRequest, without the key size cetcd adds. */
static int check_put(const Etcdserverpb__PutRequest *r)
{
	if (r->key.len == 0)
		return MVCC_ERR_EMPTY_KEY;
	if (r->ignore_value && r->value.len != 0)
		return MVCC_ERR_VALUE_PROVIDED;
	if (r->ignore_lease && r->lease != 0)
		return MVCC_ERR_LEASE_PROVIDED;
	return 0;
}

int mvcc_validate_put(const Etcdserverpb__PutRequest *r)
{
	return check_put(r);
}

int mvcc_validate_delete_range(const Etcdserverpb__DeleteRangeRequest *r)
{
	return r->key.len == 0 ? MVCC_ERR_EMPTY_KEY : 0;
}

/* ---- txn: etcd's checkTxnRequest ---- */

static int check_txn(const TxnRequest *r, int64_t max_ops, unsigned depth);

static int check_op(const RequestOp *op, int64_t max_ops, unsigned depth)
{
	switch (op->request_case) {
	case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
		return !op->request_range ? MVCC_ERR_EMPTY_KEY
					  : mvcc_validate_range(op->request_range);
	case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
		return !op->request_put ? MVCC_ERR_EMPTY_KEY : check_put(op->request_put);
	case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
		return !op->request_delete_range
			       ? MVCC_ERR_EMPTY_KEY
			       : mvcc_validate_delete_range(op->request_delete_range);
	case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
		return check_txn(nested(op), max_ops, depth + 1);
	default:
		return MVCC_ERR_KEY_NOT_FOUND;  /* an empty op */
	}
}

static int check_txn(const TxnRequest *r, int64_t max_ops, unsigned depth)
{
	if (depth > MVCC_TXN_MAX_DEPTH)
		return MVCC_ERR_TOO_MANY_OPS;
	int64_t opc = (int64_t)r->n_compare;
	if (opc < (int64_t)r->n_success)
		opc = (int64_t)r->n_success;
	if (opc < (int64_t)r->n_failure)
		opc = (int64_t)r->n_failure;
	if (opc > max_ops)
		return MVCC_ERR_TOO_MANY_OPS;
	for (size_t i = 0; i < r->n_compare; i++)
		if (r->compare[i]->key.len == 0)
			return MVCC_ERR_EMPTY_KEY;
	for (size_t i = 0; i < r->n_success; i++) {
		int rc = check_op(r->success[i], max_ops - opc, depth);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < r->n_failure; i++) {
		int rc = check_op(r->failure[i], max_ops - opc, depth);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- txn: etcd's checkIntervals ---- */

/* A set of keys (the puts of a branch), open addressing. Keys point into
 * the request. */
struct keyslot {
	const uint8_t *p;
	size_t len;
	bool used;
};
struct keyset {
	struct keyslot *slots;
	size_t cap;   /* a power of two, or 0 */
	size_t n;
};

static uint64_t key_hash(const uint8_t *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static struct keyslot *ks_find(const struct keyset *ks, const uint8_t *p, size_t len)
{
	if (!ks->cap)
		return NULL;
	size_t i = (size_t)key_hash(p, len) & (ks->cap - 1);
	while (ks->slots[i].used) {
		if (ks->slots[i].len == len && (len == 0 || memcmp(ks->slots[i].p, p, len) == 0))
			return &ks->slots[i];
		i = (i + 1) & (ks->cap - 1);
	}
	return &ks->slots[i];
}

static bool ks_has(const struct keyset *ks, const uint8_t *p, size_t len)
{
	struct keyslot *s = ks_find(ks, p, len);
	return s && s->used;
}

static int ks_add(struct keyset *ks, const uint8_t *p, size_t len)
{
	if (2 * (ks->n + 1) > ks->cap) {
		struct keyset bigger = { .cap = ks->cap ? 2 * ks->cap : 16 };
		bigger.slots = stored_calloc(bigger.cap, sizeof(*bigger.slots));
		if (!bigger.slots)
			return -ENOMEM;
		for (size_t i = 0; i < ks->cap; i++) {
			if (!ks->slots[i].used)
				continue;
			*ks_find(&bigger, ks->slots[i].p, ks->slots[i].len) = ks->slots[i];
			bigger.n++;
		}
		stored_free(ks->slots);
		*ks = bigger;
	}
	struct keyslot *s = ks_find(ks, p, len);
	if (!s->used) {
		*s = (struct keyslot){ p, len, true };
		ks->n++;
	}
	return 0;
}

static void ks_free(struct keyset *ks)
{
	stored_free(ks->slots);
	memset(ks, 0, sizeof(*ks));
}

/* A delete's interval [begin, end); a single key's end is the key followed
 * by 0x00, as etcd's NewStringAffinePoint. */
struct interval {
	const uint8_t *b;
	size_t bl;
	const uint8_t *e;
	size_t el;
	bool e_zero;   /* end is e followed by one 0x00 byte */
};

/* The deletes of a branch, answering "is key k inside one of them" with a
 * sort by begin and a running maximum of ends, redone after additions. */
struct ivset {
	struct interval *v;
	size_t n, cap;
	size_t *maxend;   /* maxend[i]: index of the largest end among v[0..i] */
	size_t maxend_cap;
	bool dirty;
};

/* Compares two byte strings, each optionally followed by one 0x00 byte
 * (az, bz). */
static int cmp_vstr(const uint8_t *a, size_t al, bool az, const uint8_t *b, size_t bl, bool bz)
{
	size_t n = al < bl ? al : bl;
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	size_t ra = al - n + az, rb = bl - n + bz;  /* bytes left on each side */
	if (ra == 0 || rb == 0)
		return ra == rb ? 0 : (ra == 0 ? -1 : 1);
	uint8_t ca = al > n ? a[n] : 0, cb = bl > n ? b[n] : 0;
	if (ca != cb)
		return ca < cb ? -1 : 1;
	/* At most one side has real bytes past n; the other had only its
	 * 0x00, so what is left decides. */
	ra--;
	rb--;
	return ra == rb ? 0 : (ra < rb ? -1 : 1);
}

/* Compares key (a, al) with an interval's end. */
static int cmp_end(const uint8_t *a, size_t al, const struct interval *iv)
{
	return cmp_vstr(a, al, false, iv->e, iv->el, iv->e_zero);
}

static int cmp_ends(const struct interval *x, const struct interval *y)
{
	return cmp_vstr(x->e, x->el, x->e_zero, y->e, y->el, y->e_zero);
}

static int iv_begin_order(const void *a, const void *b)
{
	const struct interval *x = a, *y = b;
	return mvcc_bytes_cmp(x->b, x->bl, y->b, y->bl);
}

static int ivs_add(struct ivset *s, const struct interval *iv)
{
	int rc = stored_reserve((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 8);
	if (rc)
		return rc;
	s->v[s->n++] = *iv;
	s->dirty = true;
	return 0;
}

static int ivs_union(struct ivset *s, const struct ivset *other)
{
	for (size_t i = 0; i < other->n; i++) {
		int rc = ivs_add(s, &other->v[i]);
		if (rc)
			return rc;
	}
	return 0;
}

static int ivs_prepare(struct ivset *s)
{
	if (!s->dirty)
		return 0;
	int rc = stored_reserve((void **)&s->maxend, &s->maxend_cap, s->n, sizeof(*s->maxend), 8);
	if (rc)
		return rc;
	qsort(s->v, s->n, sizeof(*s->v), iv_begin_order);
	for (size_t i = 0; i < s->n; i++) {
		size_t best = i;
		if (i > 0 && cmp_ends(&s->v[s->maxend[i - 1]], &s->v[i]) > 0)
			best = s->maxend[i - 1];
		s->maxend[i] = best;
	}
	s->dirty = false;
	return 0;
}

/* Whether some interval holds k: 1, 0, or -ENOMEM. */
static int ivs_intersects(struct ivset *s, const uint8_t *k, size_t kl)
{
	int rc = ivs_prepare(s);
	if (rc)
		return rc;
	size_t lo = 0, hi = s->n;  /* find the first begin > k */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (mvcc_bytes_cmp(s->v[mid].b, s->v[mid].bl, k, kl) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return 0;
	return cmp_end(k, kl, &s->v[s->maxend[lo - 1]]) < 0;
}

static void ivs_free(struct ivset *s)
{
	stored_free(s->v);
	stored_free(s->maxend);
	memset(s, 0, sizeof(*s));
}

/* k collides with the puts or deletes seen so far: -> DUPLICATE_KEY. */
static int collides(const struct keyset *puts, struct ivset *dels, const uint8_t *k, size_t kl)
{
	if (ks_has(puts, k, kl))
		return MVCC_ERR_DUPLICATE_KEY;
	int rc = ivs_intersects(dels, k, kl);
	if (rc < 0)
		return rc;
	return rc ? MVCC_ERR_DUPLICATE_KEY : 0;
}

/* etcd's checkIntervals over one list of ops: *puts and *dels (zeroed by
 * the caller) receive the list's puts and deletes. */
static int check_intervals(RequestOp *const *reqs, size_t n, struct keyset *puts,
			   struct ivset *dels)
{
	int rc = 0;
	/* this level's deletes first */
	for (size_t i = 0; i < n && !rc; i++) {
		const Etcdserverpb__DeleteRangeRequest *d = reqs[i]->request_delete_range;
		if (reqs[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE ||
		    !d)
			continue;
		struct interval iv = { d->key.data, d->key.len, d->range_end.data,
				       d->range_end.len, false };
		if (d->range_end.len == 0) {
			iv.e = d->key.data;
			iv.el = d->key.len;
			iv.e_zero = true;
		}
		rc = ivs_add(dels, &iv);
	}
	/* then the nested txns' puts, against this level's deletes and the
	 * nested txns before */
	for (size_t i = 0; i < n && !rc; i++) {
		if (reqs[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
			continue;
		const TxnRequest *t = nested(reqs[i]);
		struct keyset pt = { 0 }, pe = { 0 };
		struct ivset dt = { 0 }, de = { 0 };
		rc = check_intervals(t->success, t->n_success, &pt, &dt);
		if (!rc)
			rc = check_intervals(t->failure, t->n_failure, &pe, &de);
		for (size_t j = 0; j < pt.cap && !rc; j++) {
			if (!pt.slots[j].used)
				continue;
			rc = collides(puts, dels, pt.slots[j].p, pt.slots[j].len);
			if (!rc)
				rc = ks_add(puts, pt.slots[j].p, pt.slots[j].len);
		}
		for (size_t j = 0; j < pe.cap && !rc; j++) {
			const struct keyslot *k = &pe.slots[j];
			if (!k->used)
				continue;
			/* a key of both branches is fine: only one runs */
			if (ks_has(puts, k->p, k->len) && !ks_has(&pt, k->p, k->len)) {
				rc = MVCC_ERR_DUPLICATE_KEY;
				break;
			}
			rc = ivs_intersects(dels, k->p, k->len);
			if (rc > 0)
				rc = MVCC_ERR_DUPLICATE_KEY;
			if (!rc)
				rc = ks_add(puts, k->p, k->len);
		}
		if (!rc)
			rc = ivs_union(dels, &dt);
		if (!rc)
			rc = ivs_union(dels, &de);
		ks_free(&pt);
		ks_free(&pe);
		ivs_free(&dt);
		ivs_free(&de);
	}
	/* then this level's puts */
	for (size_t i = 0; i < n && !rc; i++) {
		const Etcdserverpb__PutRequest *p = reqs[i]->request_put;
		if (reqs[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT || !p)
			continue;
		rc = collides(puts, dels, p->key.data, p->key.len);
		if (!rc)
			rc = ks_add(puts, p->key.data, p->key.len);
	}
	return rc;
}

static int intervals_of(RequestOp *const *reqs, size_t n)
{
	struct keyset puts = { 0 };
	struct ivset dels = { 0 };
	int rc = check_intervals(reqs, n, &puts, &dels);
	ks_free(&puts);
	ivs_free(&dels);
	return rc;
}

/* cetcd's own limit: every put's key must fit the index. */
static int check_key_sizes(const TxnRequest *r)
{
	for (int side = 0; side < 2; side++) {
		RequestOp *const *ops = side ? r->failure : r->success;
		size_t n = side ? r->n_failure : r->n_success;
		for (size_t i = 0; i < n; i++) {
			int rc = 0;
			if (ops[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT)
				rc = mvcc_validate_put(ops[i]->request_put);
			else if (ops[i]->request_case ==
				 ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
				rc = check_key_sizes(nested(ops[i]));
			if (rc)
				return rc;
		}
	}
	return 0;
}

int mvcc_validate_txn(const TxnRequest *r, unsigned max_txn_ops)
{
	/* etcd's checks bound the nesting the later recursive ones see */
	int rc = check_txn(r, (int64_t)max_txn_ops, 0);
	if (!rc)
		rc = intervals_of(r->success, r->n_success);
	if (!rc)
		rc = intervals_of(r->failure, r->n_failure);
	if (!rc)
		rc = check_key_sizes(r);
	return rc;
}
