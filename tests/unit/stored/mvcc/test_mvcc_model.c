/*
 * Randomized model test of the MVCC layer: random puts (prev_kv, leases,
 * ignore_value, ignore_lease), deletes (one key, ranges, from key,
 * prefixes), txns (compares of every target and result over keys and
 * ranges, nested txns, ranges inside), ranges (latest and historical; sort,
 * limit, count_only, keys_only, revision filters) and compactions, applied
 * in batches with Raft indexes, against a plain in-memory model of etcd
 * 3.4's semantics written here. Whole responses are compared as wire
 * bytes. Reads run in the batch, through a read txn of another mapping of
 * the file (as gatewayd reads), and on views held across later batches.
 * Along the way: stale Raft indexes are skipped, the store is reopened (a
 * compaction under way resumes), the index is dropped and rebuilt, and the
 * key bucket is compared entry by entry with what the model says etcd
 * would hold. MVCC_SEED=n replays a run; MVCC_OPS=n sets its length.
 */
#include "mvcc_util.h"


/* ---------------------------------------------------------------- model */

struct mrec {
	int64_t main, sub;
	bool tomb;
	uint8_t *val;
	size_t vlen;
	int64_t create, version, lease;
};

struct mkey {
	uint8_t *k;
	size_t klen;
	struct mrec *r;   /* in revision order */
	size_t n, cap;
};

static struct {
	struct mkey *keys;  /* sorted by key */
	size_t nkeys, cap;
	int64_t rev;        /* current revision */
	int64_t compact;    /* -1: never */
	int64_t begin;      /* op in progress */
	int64_t changes;
	int64_t leases[16];
	size_t nleases;
} M = { .rev = 1, .compact = -1 };

static struct arena ma;  /* model responses */

static void *ma_alloc(size_t n)
{
	void *p = arena_zalloc(&ma, n);
	if (!p)
		T_FAIL("out of memory");
	return p;
}

static int bcmp_(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	return m_cmp(a, al, b, bl);
}

static struct mkey *mk_get(const uint8_t *k, size_t kl, bool create)
{
	size_t lo = 0, hi = M.nkeys;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (bcmp_(M.keys[mid].k, M.keys[mid].klen, k, kl) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < M.nkeys && bcmp_(M.keys[lo].k, M.keys[lo].klen, k, kl) == 0)
		return &M.keys[lo];
	if (!create)
		return NULL;
	if (M.nkeys == M.cap) {
		M.cap = M.cap ? 2 * M.cap : 64;
		M.keys = realloc(M.keys, M.cap * sizeof(*M.keys));
	}
	memmove(&M.keys[lo + 1], &M.keys[lo], (M.nkeys - lo) * sizeof(*M.keys));
	M.nkeys++;
	M.keys[lo] = (struct mkey){ .k = t_dup(k, kl), .klen = kl };
	return &M.keys[lo];
}

/* The newest record of key at or below main revision at. */
static struct mrec *m_at(const struct mkey *mk, int64_t at)
{
	size_t lo = 0, hi = mk->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (mk->r[mid].main <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &mk->r[lo - 1] : NULL;
}

/* The newest record if the key is live now. */
static struct mrec *m_live(const uint8_t *k, size_t kl)
{
	struct mkey *mk = mk_get(k, kl, false);
	if (!mk || !mk->n || mk->r[mk->n - 1].tomb)
		return NULL;
	return &mk->r[mk->n - 1];
}

static bool m_lease_exists(int64_t id)
{
	for (size_t i = 0; i < M.nleases; i++)
		if (M.leases[i] == id)
			return true;
	return false;
}

static void m_append(const uint8_t *k, size_t kl, struct mrec rec)
{
	struct mkey *mk = mk_get(k, kl, true);
	if (mk->n == mk->cap) {
		mk->cap = mk->cap ? 2 * mk->cap : 8;
		mk->r = realloc(mk->r, mk->cap * sizeof(*mk->r));
	}
	mk->r[mk->n++] = rec;
}

static void mm_put(const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, int64_t lease)
{
	struct mrec *prev = m_live(k, kl);
	struct mrec rec = { .main = M.begin + 1, .sub = M.changes, .val = t_dup(v, vl),
			    .vlen = vl, .lease = lease };
	rec.create = prev ? prev->create : rec.main;
	rec.version = prev ? prev->version + 1 : 1;
	m_append(k, kl, rec);
	M.changes++;
}

static void mm_del(const uint8_t *k, size_t kl)
{
	struct mrec rec = { .main = M.begin + 1, .sub = M.changes, .tomb = true };
	m_append(k, kl, rec);
	M.changes++;
}

static int64_t m_cur(void)
{
	return M.changes ? M.begin + 1 : M.begin;
}

/* etcd's range_end rules. */
static bool m_in_range(const uint8_t *k, size_t kl, ProtobufCBinaryData key,
		       ProtobufCBinaryData end)
{
	int c = bcmp_(k, kl, key.data, key.len);
	if (end.len == 0)
		return c == 0;
	if (end.len == 1 && end.data[0] == 0)
		return c >= 0;
	return c >= 0 && bcmp_(k, kl, end.data, end.len) < 0;
}

struct mhit {
	struct mkey *k;
	struct mrec *r;
};

/* The live records of a range at rev, in key order. */
static size_t m_collect(ProtobufCBinaryData key, ProtobufCBinaryData end, int64_t rev,
			struct mhit *out)
{
	size_t n = 0;
	for (size_t i = 0; i < M.nkeys; i++) {
		struct mkey *mk = &M.keys[i];
		if (!m_in_range(mk->k, mk->klen, key, end))
			continue;
		struct mrec *r = m_at(mk, rev);
		if (r && !r->tomb)
			out[n++] = (struct mhit){ mk, r };
	}
	return n;
}

static struct mhit *hits;  /* scratch, room for every key */

static int64_t target_of(const struct mhit *h, int target, const uint8_t **b, size_t *bl)
{
	switch (target) {
	case 0: *b = h->k->k; *bl = h->k->klen; return 0;
	case 1: return h->r->version;
	case 2: return h->r->create;
	case 3: return h->r->main;
	case 4: *b = h->r->val; *bl = h->r->vlen; return 0;
	}
	return 0;
}

static bool m_less(const struct mhit *a, const struct mhit *b, int target)
{
	const uint8_t *ab = NULL, *bb = NULL;
	size_t al = 0, bl = 0;
	int64_t av = target_of(a, target, &ab, &al), bv = target_of(b, target, &bb, &bl);
	if (target == 0 || target == 4)
		return bcmp_(ab, al, bb, bl) < 0;
	return av < bv;
}

static Mvccpb__KeyValue *m_kv_msg(const struct mkey *k, const struct mrec *r, bool keys_only)
{
	Mvccpb__KeyValue *m = ma_alloc(sizeof(*m));
	mvccpb__key_value__init(m);
	m->key = tbn(k->k, k->klen);
	m->create_revision = r->create;
	m->mod_revision = r->main;
	m->version = r->version;
	m->lease = r->lease;
	if (!keys_only)
		m->value = tbn(r->val, r->vlen);
	return m;
}

static Etcdserverpb__ResponseHeader *m_header(int64_t rev)
{
	Etcdserverpb__ResponseHeader *h = ma_alloc(sizeof(*h));
	etcdserverpb__response_header__init(h);
	h->revision = rev;
	return h;
}

/* etcd's Range at the current state, whose revision is cur. */
static int m_range(const RangeRequest *r, int64_t cur, RangeResponse **out)
{
	int64_t limit = r->limit, rev = r->revision;
	bool filters = r->min_mod_revision || r->max_mod_revision || r->min_create_revision ||
		       r->max_create_revision;
	if (r->sort_order != 0 || filters)
		limit = 0;
	if (limit > 0)
		limit++;
	if (rev > cur)
		return MVCC_ERR_FUTURE_REV;
	if (rev <= 0)
		rev = cur;
	if (rev < M.compact)
		return MVCC_ERR_COMPACTED;
	size_t total = m_collect(r->key, r->range_end, rev, hits), n = total;
	if (r->count_only)
		n = 0;
	else if (limit > 0 && (size_t)limit < n)
		n = (size_t)limit;
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		const struct mrec *x = hits[i].r;
		if (r->max_mod_revision && x->main > r->max_mod_revision)
			continue;
		if (r->min_mod_revision && x->main < r->min_mod_revision)
			continue;
		if (r->max_create_revision && x->create > r->max_create_revision)
			continue;
		if (r->min_create_revision && x->create < r->min_create_revision)
			continue;
		hits[j++] = hits[i];
	}
	n = j;
	int order = r->sort_order;
	if (r->sort_target != 0 && order == 0)
		order = 1;
	if ((order == 1 || order == 2) && r->sort_target >= 0 && r->sort_target <= 4) {
		for (size_t i = 1; i < n; i++) {
			for (size_t k = i; k > 0; k--) {
				bool less = order == 1 ? m_less(&hits[k], &hits[k - 1], r->sort_target)
						       : m_less(&hits[k - 1], &hits[k], r->sort_target);
				if (!less)
					break;
				struct mhit tmp = hits[k];
				hits[k] = hits[k - 1];
				hits[k - 1] = tmp;
			}
		}
	}
	RangeResponse *resp = ma_alloc(sizeof(*resp));
	etcdserverpb__range_response__init(resp);
	if (r->limit > 0 && (int64_t)n > r->limit) {
		n = (size_t)r->limit;
		resp->more = 1;
	}
	resp->header = m_header(cur);
	resp->count = (int64_t)total;
	if (n) {
		resp->kvs = ma_alloc(n * sizeof(*resp->kvs));
		for (size_t i = 0; i < n; i++)
			resp->kvs[i] = m_kv_msg(hits[i].k, hits[i].r, r->keys_only);
		resp->n_kvs = n;
	}
	*out = resp;
	return 0;
}

/* etcd's Put inside an op; strict: a standalone Put. */
static int m_put_op(const PutRequest *p, bool strict, PutResponse **out)
{
	struct mrec *prev = (p->ignore_value || p->ignore_lease || p->prev_kv)
				    ? m_live(p->key.data, p->key.len) : NULL;
	const uint8_t *val = p->value.data;
	size_t vl = p->value.len;
	int64_t lease = p->lease;
	if ((p->ignore_value || p->ignore_lease) && !prev) {
		if (strict)
			return MVCC_ERR_KEY_NOT_FOUND;
		val = NULL;
		vl = 0;
		lease = 0;
	} else {
		if (p->ignore_value) {
			val = prev->val;
			vl = prev->vlen;
		}
		if (p->ignore_lease)
			lease = prev->lease;
	}
	PutResponse *resp = ma_alloc(sizeof(*resp));
	etcdserverpb__put_response__init(resp);
	if (p->prev_kv && prev)
		resp->prev_kv = m_kv_msg(mk_get(p->key.data, p->key.len, false), prev, false);
	resp->header = m_header(M.begin + 1);
	uint8_t *copy = t_dup(val, vl);  /* prev's value may move */
	mm_put(p->key.data, p->key.len, copy, vl, lease);
	free(copy);
	*out = resp;
	return 0;
}

static int m_delete_op(const DeleteRequest *d, DeleteResponse **out)
{
	DeleteResponse *resp = ma_alloc(sizeof(*resp));
	etcdserverpb__delete_range_response__init(resp);
	int64_t cur = m_cur();
	size_t n = m_collect(d->key, d->range_end, cur, hits);
	if (d->prev_kv && n) {
		resp->prev_kvs = ma_alloc(n * sizeof(*resp->prev_kvs));
		for (size_t i = 0; i < n; i++)
			resp->prev_kvs[i] = m_kv_msg(hits[i].k, hits[i].r, false);
		resp->n_prev_kvs = n;
	}
	/* copy the keys: deleting appends records */
	struct tbuf keys = { 0 };
	size_t *lens = malloc((n + 1) * sizeof(*lens));
	for (size_t i = 0; i < n; i++) {
		tbuf_add(&keys, hits[i].k->k, hits[i].k->klen);
		lens[i] = hits[i].k->klen;
	}
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		mm_del(keys.p + off, lens[i]);
		off += lens[i];
	}
	tbuf_free(&keys);
	free(lens);
	resp->deleted = (int64_t)n;
	resp->header = m_header(n || M.changes ? M.begin + 1 : M.begin);
	*out = resp;
	return 0;
}

static bool m_compare_kv(const Compare *c, const struct mkey *k, const struct mrec *r)
{
	int res = 0;
	int64_t v = 0, have = 0;
	switch (c->target) {
	case 3: { /* VALUE */
		ProtobufCBinaryData want = { 0, NULL };
		if (c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE)
			want = c->value;
		res = bcmp_(r ? r->val : NULL, r ? r->vlen : 0, want.data, want.len);
		goto result;
	}
	case 0: /* VERSION */
		v = c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION ? c->version : 0;
		have = r ? r->version : 0;
		break;
	case 1: /* CREATE */
		v = c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION
			    ? c->create_revision : 0;
		have = r ? r->create : 0;
		break;
	case 2: /* MOD */
		v = c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION
			    ? c->mod_revision : 0;
		have = r ? r->main : 0;
		break;
	case 4: /* LEASE */
		v = c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE ? c->lease : 0;
		have = r ? r->lease : 0;
		break;
	default:
		goto result;
	}
	res = have < v ? -1 : have > v;
result:
	(void)k;
	switch (c->result) {
	case 0: return res == 0;
	case 1: return res > 0;
	case 2: return res < 0;
	case 3: return res != 0;
	default: return true;
	}
}

static bool mm_compare(const Compare *c)
{
	size_t n = m_collect(c->key, c->range_end, M.begin, hits);
	if (n == 0)
		return c->target == 3 ? false : m_compare_kv(c, NULL, NULL);
	for (size_t i = 0; i < n; i++)
		if (!m_compare_kv(c, hits[i].k, hits[i].r))
			return false;
	return true;
}

struct mpath {
	bool v[4096];
	size_t n;
};

static void m_path(const TxnRequest *t, struct mpath *p)
{
	bool ok = true;
	for (size_t i = 0; i < t->n_compare && ok; i++)
		ok = mm_compare(t->compare[i]);
	p->v[p->n++] = ok;
	RequestOp **ops = ok ? t->success : t->failure;
	size_t n = ok ? t->n_success : t->n_failure;
	for (size_t i = 0; i < n; i++)
		if (ops[i]->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
			m_path(ops[i]->request_txn, p);
}

static int m_check(const TxnRequest *t, const struct mpath *p, size_t *pos, bool puts)
{
	bool ok = p->v[(*pos)++];
	RequestOp **ops = ok ? t->success : t->failure;
	size_t n = ok ? t->n_success : t->n_failure;
	for (size_t i = 0; i < n; i++) {
		const RequestOp *op = ops[i];
		int rc = 0;
		if (op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN) {
			rc = m_check(op->request_txn, p, pos, puts);
		} else if (puts && op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT) {
			const PutRequest *q = op->request_put;
			if ((q->ignore_value || q->ignore_lease) && !m_live(q->key.data, q->key.len))
				rc = MVCC_ERR_KEY_NOT_FOUND;
			else if (q->lease && !m_lease_exists(q->lease))
				rc = MVCC_ERR_LEASE_NOT_FOUND;
		} else if (!puts && op->request_case == ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE) {
			int64_t rv = op->request_range->revision;
			if (rv != 0 && rv > M.begin)
				rc = MVCC_ERR_FUTURE_REV;
			else if (rv != 0 && rv < M.compact)
				rc = MVCC_ERR_COMPACTED;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static TxnResponse *m_run(const TxnRequest *t, const struct mpath *p, size_t *pos)
{
	bool ok = p->v[(*pos)++];
	RequestOp **ops = ok ? t->success : t->failure;
	size_t n = ok ? t->n_success : t->n_failure;
	TxnResponse *resp = ma_alloc(sizeof(*resp));
	etcdserverpb__txn_response__init(resp);
	resp->header = m_header(0);
	resp->succeeded = ok;
	resp->n_responses = n;
	resp->responses = n ? ma_alloc(n * sizeof(*resp->responses)) : NULL;
	for (size_t i = 0; i < n; i++) {
		ResponseOp *ro = ma_alloc(sizeof(*ro));
		etcdserverpb__response_op__init(ro);
		resp->responses[i] = ro;
		const RequestOp *op = ops[i];
		switch (op->request_case) {
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
			T_OK(m_range(op->request_range, m_cur(), &ro->response_range));
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
			T_OK(m_put_op(op->request_put, false, &ro->response_put));
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
			T_OK(m_delete_op(op->request_delete_range, &ro->response_delete_range));
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
			ro->response_txn = m_run(op->request_txn, p, pos);
			break;
		default:
			break;
		}
	}
	return resp;
}

static bool m_readonly(const TxnRequest *t)
{
	for (size_t i = 0; i < t->n_success; i++)
		if (t->success[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
			return false;
	for (size_t i = 0; i < t->n_failure; i++)
		if (t->failure[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
			return false;
	return true;
}

static int m_txn(const TxnRequest *t, TxnResponse **out)
{
	static struct mpath p;
	size_t pos;
	int rc;
	p.n = 0;
	M.begin = M.rev;
	M.changes = 0;
	m_path(t, &p);
	pos = 0;
	rc = m_readonly(t) ? 0 : m_check(t, &p, &pos, true);
	pos = 0;
	if (!rc)
		rc = m_check(t, &p, &pos, false);
	if (rc)
		return rc;
	pos = 0;
	TxnResponse *resp = m_run(t, &p, &pos);
	resp->header->revision = m_cur();
	M.rev = m_cur();
	*out = resp;
	return 0;
}

static void m_begin_op(void)
{
	M.begin = M.rev;
	M.changes = 0;
}

static void m_end_op(void)
{
	M.rev = m_cur();
	M.changes = 0;
}

/* etcd's compaction: drop every revision at or below rev but each key's
 * newest there, unless that one is a tombstone. */
static void m_compact_physical(int64_t rev)
{
	size_t w = 0;
	for (size_t i = 0; i < M.nkeys; i++) {
		struct mkey *mk = &M.keys[i];
		struct mrec *keep = m_at(mk, rev);
		size_t j = 0;
		for (size_t k = 0; k < mk->n; k++) {
			struct mrec *r = &mk->r[k];
			if (r->main <= rev && !(r == keep && !r->tomb)) {
				free(r->val);
				continue;
			}
			mk->r[j++] = *r;
		}
		mk->n = j;
		if (mk->n == 0) {
			free(mk->k);
			free(mk->r);
			continue;
		}
		M.keys[w++] = *mk;
	}
	M.nkeys = w;
}

static int m_compact(int64_t rev, Etcdserverpb__CompactionResponse **out)
{
	if (rev <= M.compact)
		return MVCC_ERR_COMPACTED;
	if (rev > M.rev)
		return MVCC_ERR_FUTURE_REV;
	M.compact = rev;
	m_compact_physical(rev);
	Etcdserverpb__CompactionResponse *resp = ma_alloc(sizeof(*resp));
	etcdserverpb__compaction_response__init(resp);
	resp->header = m_header(M.rev);
	*out = resp;
	return 0;
}

/* The key bucket the model expects: (17/18-byte key, KeyValue bytes packed
 * by protobuf-c) in revision order. */
struct kbent {
	uint8_t key[18];
	size_t klen;
	uint8_t *val;
	size_t vlen;
};

static int kbent_order(const void *a, const void *b)
{
	const struct kbent *x = a, *y = b;
	return m_cmp(x->key, x->klen, y->key, y->klen);
}

static void be64(uint8_t *o, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		o[i] = (uint8_t)v;
}

static void check_key_bucket(struct tdb *d)
{
	size_t n = 0;
	for (size_t i = 0; i < M.nkeys; i++)
		n += M.keys[i].n;
	struct kbent *e = calloc(n ? n : 1, sizeof(*e));
	size_t w = 0;
	for (size_t i = 0; i < M.nkeys; i++) {
		struct mkey *mk = &M.keys[i];
		for (size_t k = 0; k < mk->n; k++) {
			struct mrec *r = &mk->r[k];
			be64(e[w].key, (uint64_t)r->main);
			e[w].key[8] = '_';
			be64(e[w].key + 9, (uint64_t)r->sub);
			e[w].klen = 17;
			Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT;
			kv.key = tbn(mk->k, mk->klen);
			if (r->tomb) {
				e[w].key[17] = 't';
				e[w].klen = 18;
			} else {
				kv.create_revision = r->create;
				kv.mod_revision = r->main;
				kv.version = r->version;
				kv.value = tbn(r->val, r->vlen);
				kv.lease = r->lease;
			}
			e[w].vlen = mvccpb__key_value__get_packed_size(&kv);
			e[w].val = malloc(e[w].vlen + 1);
			mvccpb__key_value__pack(&kv, e[w].val);
			w++;
		}
	}
	qsort(e, n, sizeof(*e), kbent_order);
	struct btree_txn *t;
	struct btree_bucket *kb;
	struct btree_cursor c;
	struct btree_kv kv;
	size_t i = 0;
	T_OK(btree_db_read_begin(d->db, NULL, &t));
	T_OK(btree_bucket_open(t, NULL, "key", 3, &kb));
	btree_cursor_init(&c, kb);
	int rc;
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv), i++) {
		if (i >= n)
			T_FAIL("key bucket has more than the model's %zu entries", n);
		if (m_cmp(kv.key, kv.key_len, e[i].key, e[i].klen) != 0)
			T_FAIL("key bucket entry %zu: revision differs", i);
		if (m_cmp(kv.val, kv.val_len, e[i].val, e[i].vlen) != 0)
			T_FAIL("key bucket entry %zu: KeyValue bytes differ", i);
	}
	T_CHECK(rc == -ENOENT);
	if (i != n)
		T_FAIL("key bucket has %zu entries, the model %zu", i, n);
	btree_txn_end(t);
	for (i = 0; i < n; i++)
		free(e[i].val);
	free(e);
}

static void mm_free(void)
{
	for (size_t i = 0; i < M.nkeys; i++) {
		for (size_t k = 0; k < M.keys[i].n; k++)
			free(M.keys[i].r[k].val);
		free(M.keys[i].r);
		free(M.keys[i].k);
	}
	free(M.keys);
}

/* ------------------------------------------------------------ generator */

#define NKEYS 40
#ifndef MODEL_KEY_MAX
/* The keys: 1 to 4 bytes of an alphabet of edge bytes (test_mvcc_model_longkey.c
 * brings its own). */
#define MODEL_KEY_MAX 6
#define MODEL_OPS 100000
static void pool_key(uint8_t *k, size_t *len)
{
	static const uint8_t alphabet[] = { 0x00, 0x01, 'a', 'b', 0xfe, 0xff };
	*len = 1 + t_below(4);
	for (size_t j = 0; j < *len; j++)
		k[j] = alphabet[t_below(sizeof(alphabet))];
}
#endif
static uint8_t pool[NKEYS][MODEL_KEY_MAX];
static size_t pool_len[NKEYS];
static struct arena ra;  /* requests of one op */
static uint8_t bigval[3000];

static void *ra_alloc(size_t n)
{
	void *p = arena_zalloc(&ra, n);
	if (!p)
		T_FAIL("out of memory");
	return p;
}

static void make_pool(void)
{
	for (size_t i = 0; i < NKEYS; i++) {
again:
		pool_key(pool[i], &pool_len[i]);
		for (size_t k = 0; k < i; k++)
			if (m_cmp(pool[k], pool_len[k], pool[i], pool_len[i]) == 0)
				goto again;
	}
}

static ProtobufCBinaryData g_key(void)
{
	size_t i = t_below(NKEYS);
	return tbn(pool[i], pool_len[i]);
}

static ProtobufCBinaryData g_end(ProtobufCBinaryData key)
{
	unsigned r = (unsigned)t_below(100);
	if (r < 25)
		return tbn(NULL, 0);
	if (r < 40)
		return tbn("", 1);  /* "\0": from key */
	if (r < 55) {           /* prefix end, as clients compute it */
		uint8_t *e = ra_alloc(key.len);
		size_t n = key.len;
		memcpy(e, key.data, n);
		while (n && e[n - 1] == 0xff)
			n--;
		if (!n)
			return tbn("", 1);
		e[n - 1]++;
		return tbn(e, n);
	}
	return g_key();
}

static const char *const values[] = { "", "v1", "v2", "x", "\xff\x00" };

static ProtobufCBinaryData g_value(void)
{
	if (t_chance(20))
		return tbn(bigval, 2050 + t_below(900));
	if (t_chance(600))
		return tb(values[t_below(5)]);
	size_t n = t_below(24);
	uint8_t *v = ra_alloc(n + 1);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint8_t)t_rand();
	return tbn(v, n);
}

static int64_t g_lease(void)
{
	if (t_chance(700))
		return 0;
	return 100 + (int64_t)t_below(12);  /* 100..111: some exist */
}

static int64_t g_rev(void)
{
	switch (t_below(6)) {
	case 0: return M.rev;
	case 1: return M.rev + 1 + (int64_t)t_below(2);
	case 2: return M.compact - (int64_t)t_below(2);
	case 3: return -(int64_t)t_below(3);
	default: {
		int64_t lo = M.compact > 1 ? M.compact : 1;
		return lo + (int64_t)t_below((uint64_t)(M.rev - lo + 1));
	}
	}
}

static RangeRequest *g_range(bool in_txn)
{
	RangeRequest *r = ra_alloc(sizeof(*r));
	etcdserverpb__range_request__init(r);
	if (t_chance(30)) {
		r->key = tbn("", 1);
		r->range_end = tbn("", 1);
	} else {
		r->key = g_key();
		r->range_end = g_end(r->key);
	}
	if (t_chance(in_txn ? 200 : 400))
		r->revision = g_rev();
	if (t_chance(500))
		r->limit = t_chance(50) ? -1 : 1 + (int64_t)t_below(8);
	if (t_chance(400))
		r->sort_order = (Etcdserverpb__RangeRequest__SortOrder)t_below(t_chance(50) ? 4 : 3);
	if (t_chance(500))
		r->sort_target = (Etcdserverpb__RangeRequest__SortTarget)t_below(t_chance(50) ? 6 : 5);
	r->keys_only = t_chance(200);
	r->count_only = t_chance(150);
	if (t_chance(100))
		r->min_mod_revision = g_rev();
	if (t_chance(100))
		r->max_mod_revision = g_rev();
	if (t_chance(100))
		r->min_create_revision = g_rev();
	if (t_chance(100))
		r->max_create_revision = g_rev();
	return r;
}

static PutRequest *g_put(void)
{
	PutRequest *p = ra_alloc(sizeof(*p));
	etcdserverpb__put_request__init(p);
	p->key = g_key();
	p->prev_kv = t_chance(400);
	p->ignore_value = t_chance(100);
	p->ignore_lease = t_chance(100);
	if (!p->ignore_value)
		p->value = g_value();
	if (!p->ignore_lease)
		p->lease = g_lease();
	return p;
}

static DeleteRequest *g_delete(void)
{
	DeleteRequest *d = ra_alloc(sizeof(*d));
	etcdserverpb__delete_range_request__init(d);
	d->key = g_key();
	d->range_end = t_chance(500) ? tbn(NULL, 0) : g_end(d->key);
	d->prev_kv = t_chance(400);
	return d;
}

static Compare *g_compare(void)
{
	Compare *c = ra_alloc(sizeof(*c));
	etcdserverpb__compare__init(c);
	c->key = g_key();
	if (t_chance(250))
		c->range_end = g_end(c->key);
	c->result = (Etcdserverpb__Compare__CompareResult)t_below(t_chance(20) ? 5 : 4);
	c->target = (Etcdserverpb__Compare__CompareTarget)t_below(t_chance(20) ? 6 : 5);
	unsigned u = t_chance(100) ? (unsigned)t_below(5) : (unsigned)c->target;
	switch (u) {
	case 0:
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION;
		c->version = (int64_t)t_below(4);
		break;
	case 1:
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		c->create_revision = (int64_t)t_below((uint64_t)M.rev + 1);
		break;
	case 2:
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		c->mod_revision = (int64_t)t_below((uint64_t)M.rev + 1);
		break;
	case 3:
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
		c->value = t_chance(800) ? tb(values[t_below(5)]) : g_value();
		break;
	default:
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE;
		c->lease = g_lease();
		break;
	}
	return c;
}

static TxnRequest *g_txn(int depth);

static RequestOp *g_op(int depth)
{
	RequestOp *op = ra_alloc(sizeof(*op));
	etcdserverpb__request_op__init(op);
	unsigned r = (unsigned)t_below(100);
	if (r < 35) {
		op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
		op->request_put = g_put();
	} else if (r < 55) {
		op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
		op->request_delete_range = g_delete();
	} else if (r < 85 || depth >= 3) {
		op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		op->request_range = g_range(true);
	} else {
		op->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
		op->request_txn = g_txn(depth + 1);
	}
	return op;
}

static TxnRequest *g_txn(int depth)
{
	TxnRequest *t = ra_alloc(sizeof(*t));
	etcdserverpb__txn_request__init(t);
	bool readonly = t_chance(150);
	t->n_compare = t_below(4);
	t->compare = ra_alloc((t->n_compare + 1) * sizeof(*t->compare));
	for (size_t i = 0; i < t->n_compare; i++)
		t->compare[i] = g_compare();
	for (int side = 0; side < 2; side++) {
		size_t n = t_below(5);
		RequestOp **ops = ra_alloc((n + 1) * sizeof(*ops));
		for (size_t i = 0; i < n; i++) {
			if (readonly) {
				ops[i] = ra_alloc(sizeof(*ops[i]));
				etcdserverpb__request_op__init(ops[i]);
				ops[i]->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
				ops[i]->request_range = g_range(true);
			} else {
				ops[i] = g_op(depth);
			}
		}
		if (side == 0) {
			t->success = ops;
			t->n_success = n;
		} else {
			t->failure = ops;
			t->n_failure = n;
		}
	}
	return t;
}

/* ---------------------------------------------------------------- run */

static struct tdb D;
static struct btree_reader *reader;   /* another mapping, as gatewayd has */
static struct mvcc_range_result rres;
static uint64_t stats[16];
enum { S_PUT, S_DEL, S_TXN, S_RANGE, S_COMPACT, S_ERR, S_EXTREAD, S_HELD, S_REOPEN,
       S_REBUILD, S_BATCH, S_SKIP, S_LEASE };

static void same(const ProtobufCMessage *got, const ProtobufCMessage *want, const char *what)
{
	tm_same_msg(got, want, what);
}

static void check_rc(int got, int want, const char *what)
{
	if (got != want)
		T_FAIL("%s: store returned %d (%s), model %d (%s); %s", what, got, mvcc_strerror(got),
		       want, mvcc_strerror(want), errmsg_get(got));
	if (got)
		stats[S_ERR]++;
}

static void op_put(void)
{
	PutRequest *p = g_put();
	PutResponse *got = NULL, *want = NULL;
	int wrc = 0;
	if (p->lease && !m_lease_exists(p->lease)) {
		wrc = MVCC_ERR_LEASE_NOT_FOUND;
	} else {
		m_begin_op();
		wrc = m_put_op(p, true, &want);
		m_end_op();
	}
	tdb_entry(&D);
	check_rc(mvcc_put(D.s, p, &D.a, &got), wrc, "put");
	if (!wrc)
		same(&got->base, &want->base, "put");
	stats[S_PUT]++;
}

static void op_delete(void)
{
	DeleteRequest *d = g_delete();
	DeleteResponse *got = NULL, *want = NULL;
	m_begin_op();
	T_OK(m_delete_op(d, &want));
	m_end_op();
	tdb_entry(&D);
	check_rc(mvcc_delete_range(D.s, d, &D.a, &got), 0, "delete");
	same(&got->base, &want->base, "delete");
	stats[S_DEL]++;
}

static void op_txn(void)
{
	TxnRequest *t = g_txn(0);
	TxnResponse *got = NULL, *want = NULL;
	int wrc = m_txn(t, &want);
	tdb_entry(&D);
	check_rc(mvcc_txn(D.s, t, &D.a, &got), wrc, "txn");
	if (!wrc)
		same(&got->base, &want->base, "txn");
	stats[S_TXN]++;
}

static void op_range_in_batch(void)
{
	RangeRequest *r = g_range(false);
	RangeResponse *got = NULL, *want = NULL;
	int wrc = m_range(r, M.rev, &want);
	tdb_entry(&D);
	check_rc(mvcc_range_apply(D.s, r, &D.a, &got), wrc, "range in batch");
	if (!wrc)
		same(&got->base, &want->base, "range in batch");
	stats[S_RANGE]++;
}

static void op_compact(void)
{
	int64_t rev = g_rev();
	Etcdserverpb__CompactionRequest q = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	Etcdserverpb__CompactionResponse *got = NULL, *want = NULL;
	q.revision = rev;
	int wrc = m_compact(rev, &want);
	tdb_entry(&D);
	check_rc(mvcc_compact(D.s, &q, &D.a, &got), wrc, "compact");
	if (!wrc)
		same(&got->base, &want->base, "compact");
	stats[S_COMPACT]++;
}

/* Lease grant or revoke: the lease bucket entry the existence checks see. */
static void op_lease(void)
{
	int64_t id = 100 + (int64_t)t_below(12);
	struct btree_bucket *b;
	uint8_t k[8];
	be64(k, (uint64_t)id);
	tdb_entry(&D);
	T_OK(btree_bucket_open(mvcc_batch_txn(D.s), NULL, "lease", 5, &b));
	if (m_lease_exists(id)) {
		T_OK(btree_del(b, k, 8));
		for (size_t i = 0; i < M.nleases; i++)
			if (M.leases[i] == id)
				M.leases[i] = M.leases[--M.nleases];
	} else {
		T_OK(btree_put(b, k, 8, "lease", 5));
		M.leases[M.nleases++] = id;
	}
	stats[S_LEASE]++;
}

/* A range and a read-only txn through another mapping of the file at the
 * published root, as a gatewayd reads. */
static void ext_reads(void)
{
	struct btree_txn *t;
	struct mvcc_view v;
	T_OK(btree_reader_begin(reader, &D.root, &t));
	T_OK(mvcc_view_open(t, &v));
	T_CHECK(v.rev == M.rev && v.compact_rev == M.compact);
	for (int i = 0; i < 3; i++) {
		RangeRequest *r = g_range(false);
		RangeResponse *got = NULL, *want = NULL;
		int wrc = m_range(r, M.rev, &want);
		int rc = mvcc_range(&v, r, &rres);
		check_rc(rc, wrc, "external range");
		if (!rc) {
			T_OK(mvcc_range_response(&rres, &ma, false, &got));
			same(&got->base, &want->base, "external range");
			/* keys_only answers are the stored bytes minus field 5 */
			for (size_t k = 0; k < rres.n; k++) {
				struct tbuf want = { 0 };
				Mvccpb__KeyValue kv = *got->kvs[k];
				kv.value = tbn(NULL, 0);
				tm_pack(&kv.base, &want);
				uint8_t *buf = malloc(rres.kvs[k].kv_len + 1);
				size_t n;
				T_OK(mvcc_kv_strip_value(rres.kvs[k].kv, rres.kvs[k].kv_len, buf, &n));
				T_CHECK(n == want.len && memcmp(buf, want.p, n) == 0);
				free(buf);
				tbuf_free(&want);
			}
		}
		stats[S_EXTREAD]++;
	}
	TxnRequest *tr = g_txn(0);
	if (mvcc_txn_is_readonly(tr)) {
		TxnResponse *got = NULL, *want = NULL;
		int64_t saved = M.rev;
		int wrc = m_txn(tr, &want);
		T_CHECK(M.rev == saved);
		int rc = mvcc_txn_read(&v, tr, &ma, &got);
		check_rc(rc, wrc, "read-only txn on a view");
		if (!rc)
			same(&got->base, &want->base, "read-only txn on a view");
	} else {
		TxnResponse *got = NULL;
		T_RC(mvcc_txn_read(&v, tr, &ma, &got), -EINVAL);
	}
	mvcc_view_close(&v);
	btree_txn_end(t);
}

/* A view held across batches: its answers must not change. */
static struct {
	struct btree_txn *t;
	struct mvcc_view v;
	RangeRequest *req[4];
	struct tbuf want[4];
	int rc[4];
	int left;
	struct arena a;
} held;

static void held_take(void)
{
	T_OK(btree_db_read_begin(D.db, &D.root, &held.t));
	T_OK(mvcc_view_open(held.t, &held.v));
	for (int i = 0; i < 4; i++) {
		/* requests live in the held arena, not the per-op one */
		struct arena keep = ra;
		ra = held.a;
		held.req[i] = g_range(false);
		held.a = ra;
		ra = keep;
		RangeResponse *want = NULL;
		held.rc[i] = m_range(held.req[i], M.rev, &want);
		held.want[i].len = 0;
		if (!held.rc[i])
			tm_pack(&want->base, &held.want[i]);
	}
	held.left = 1 + (int)t_below(40);
}

static void held_check(void)
{
	for (int i = 0; i < 4; i++) {
		int rc = mvcc_range(&held.v, held.req[i], &rres);
		check_rc(rc, held.rc[i], "held view range");
		if (rc)
			continue;
		RangeResponse *got = NULL;
		struct tbuf g = { 0 };
		T_OK(mvcc_range_response(&rres, &ma, false, &got));
		tm_pack(&got->base, &g);
		tm_same_dump(&g, &held.want[i], "held view range");
		tbuf_free(&g);
	}
	mvcc_view_close(&held.v);
	btree_txn_end(held.t);
	held.t = NULL;
	arena_release(&held.a);
	stats[S_HELD]++;
}

static void commit_batch(void)
{
	T_OK(mvcc_compact_step(D.s, 1 + (uint32_t)t_below(40), NULL));
	tdb_commit(&D);
	arena_release(&ma);
	stats[S_BATCH]++;
}

int main(void)
{
	long ops = tm_env_long("MVCC_OPS", MODEL_OPS);
	t_set_seed(tm_pick_seed());
	memset(bigval, 'B', sizeof(bigval));
	arena_init(&ma);
	arena_init(&ra);
	arena_init(&held.a);
	mvcc_range_result_init(&rres);
	make_pool();
	hits = malloc((NKEYS + 8) * sizeof(*hits));
	tdb_init(&D, NULL);
	T_OK(btree_reader_open(D.path, NULL, &reader));

	t_phase = "random ops";
	tdb_begin(&D);
	for (t_step = 0; t_step < (uint64_t)ops; t_step++) {
		unsigned r = (unsigned)t_below(1000);
		if (r < 300)
			op_put();
		else if (r < 400)
			op_delete();
		else if (r < 600)
			op_txn();
		else if (r < 960)
			op_range_in_batch();
		else if (r < 980)
			op_compact();
		else
			op_lease();
		arena_release(&ra);

		if (t_chance(15) && D.index > 0) {
			/* a stale entry, as after a restart of raftd's replay
			 * (index 0 is never one: entries start at 1) */
			uint64_t back = t_below(3);
			T_RC(mvcc_apply_begin(D.s, D.index - (back < D.index ? back : D.index - 1)),
			     -EALREADY);
			stats[S_SKIP]++;
		}
		if (!t_chance(70))
			continue;
		commit_batch();
		if (held.t && --held.left == 0)
			held_check();
		if (t_chance(300))
			ext_reads();
		if (!held.t && t_chance(100))
			held_take();
		if (!held.t && t_chance(4)) {
			tdb_reopen(&D, true);
			stats[S_REOPEN]++;
		}
		if (!held.t && t_chance(2)) {
			struct btree_txn *t;
			T_OK(btree_write_begin(D.db, &t));
			T_OK(kvindex_drop(t));
			T_OK(btree_commit(t, NULL));
			tdb_reopen(&D, true);
			struct mvcc_state st;
			mvcc_store_state(D.s, &st);
			T_CHECK(st.rebuilt && st.rev == M.rev && st.compact_rev == M.compact);
			stats[S_REBUILD]++;
		}
		if (!held.t && t_chance(10)) {
			tdb_finish_compaction(&D, 1 + (uint32_t)t_below(100));
			check_key_bucket(&D);
		}
		tdb_begin(&D);
	}
	commit_batch();
	if (held.t)
		held_check();

	t_phase = "final";
	tdb_finish_compaction(&D, 50);
	check_key_bucket(&D);
	struct mvcc_state st;
	mvcc_store_state(D.s, &st);
	T_CHECK(st.rev == M.rev && st.consistent_index == D.index && !st.compacting);

	btree_reader_close(reader);
	tdb_free(&D);
	mvcc_range_result_free(&rres);
	arena_release(&ma);
	arena_release(&ra);
	mm_free();
	free(hits);
	t_no_leaks();
	printf("test_mvcc_model: ok (seed %" PRIu64 "): %" PRIu64 " puts, %" PRIu64 " deletes, %"
	       PRIu64 " txns, %" PRIu64 " ranges, %" PRIu64 " compactions, %" PRIu64
	       " refused requests, %" PRIu64 " external reads, %" PRIu64 " held views, %" PRIu64
	       " batches, %" PRIu64 " reopens, %" PRIu64 " rebuilds, %" PRIu64
	       " stale entries skipped, %" PRIu64 " lease changes; final revision %" PRId64 "\n",
	       t_seed, stats[S_PUT], stats[S_DEL], stats[S_TXN], stats[S_RANGE], stats[S_COMPACT],
	       stats[S_ERR], stats[S_EXTREAD], stats[S_HELD], stats[S_BATCH], stats[S_REOPEN],
	       stats[S_REBUILD], stats[S_SKIP], stats[S_LEASE], M.rev);
	return 0;
}
