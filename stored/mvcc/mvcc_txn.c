/*
 * Txn with etcd 3.4's semantics (etcdserver/apply.go Txn): every compare of
 * the txn and of the nested txns on the chosen branches is evaluated first,
 * at the txn's starting state, giving a path of branch choices; then the
 * checks (puts: ignore_value/ignore_lease keys, leases; ranges: revisions)
 * run along that path; then its ops run in order, writes at one main
 * revision with increasing sub revisions.
 *
 * The ops that write are run by the functions of x->put and x->del, which
 * mvcc_txn (mvcc_write.c) sets; a read-only txn (mvcc_txn_read) has none.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/alloc.h"

typedef Etcdserverpb__TxnRequest TxnRequest;
typedef Etcdserverpb__RequestOp RequestOp;
typedef Etcdserverpb__Compare Compare;

static const TxnRequest empty_txn = ETCDSERVERPB__TXN_REQUEST__INIT;

/* A nested txn; a missing message counts as an empty one. */
static const TxnRequest *nested(const RequestOp *op)
{
	return op->request_txn ? op->request_txn : &empty_txn;
}

static void branch(const TxnRequest *r, bool succeeded, RequestOp ***ops, size_t *n)
{
	*ops = succeeded ? r->success : r->failure;
	*n = succeeded ? r->n_success : r->n_failure;
}

/* etcd's compareKV: the compare's operand when its union holds the
 * target's kind, zero (or empty) otherwise. */
static bool compare_kv(const Compare *c, const struct mvcc_kv *kv)
{
	int result = 0;
	switch (c->target) {
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE: {
		bool set = c->target_union_case == ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
		result = mvcc_bytes_cmp(kv->value, kv->value_len, set ? c->value.data : NULL,
				   set ? c->value.len : 0);
		break;
	}
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE:
		result = mvcc_i64_cmp(kv->create_rev, c->target_union_case ==
				 ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION
				 ? c->create_revision : 0);
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD:
		result = mvcc_i64_cmp(kv->mod_rev, c->target_union_case ==
				 ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION
				 ? c->mod_revision : 0);
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__VERSION:
		result = mvcc_i64_cmp(kv->version, c->target_union_case ==
				 ETCDSERVERPB__COMPARE__TARGET_UNION_VERSION ? c->version : 0);
		break;
	case ETCDSERVERPB__COMPARE__COMPARE_TARGET__LEASE:
		result = mvcc_i64_cmp(kv->lease, c->target_union_case ==
				 ETCDSERVERPB__COMPARE__TARGET_UNION_LEASE ? c->lease : 0);
		break;
	default:
		break;
	}
	switch (c->result) {
	case ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL:
		return result == 0;
	case ETCDSERVERPB__COMPARE__COMPARE_RESULT__NOT_EQUAL:
		return result != 0;
	case ETCDSERVERPB__COMPARE__COMPARE_RESULT__GREATER:
		return result > 0;
	case ETCDSERVERPB__COMPARE__COMPARE_RESULT__LESS:
		return result < 0;
	default:
		return true;
	}
}

/* etcd's applyCompare over [key, range_end): 1 holds, 0 fails, or an error. */
static int apply_compare(struct txn_exec *x, const Compare *c)
{
	Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
	rq.key = c->key;
	rq.range_end = c->range_end;
	int rc = mvcc_range_at(x->v, &rq, x->v->rev, x->rr);
	if (rc)
		return mvcc_is_request_error(rc) ? 0 : rc;
	if (x->rr->n == 0) {
		/* A value compare on a missing key always fails; the others
		 * compare against zero. */
		if (c->target == ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE)
			return 0;
		struct mvcc_kv none = { 0 };
		return compare_kv(c, &none);
	}
	for (size_t i = 0; i < x->rr->n; i++)
		if (!compare_kv(c, &x->rr->kvs[i].f))
			return 0;
	return 1;
}

static int path_push(struct txn_exec *x, bool b)
{
	int rc = stored_reserve((void **)&x->path, &x->path_cap, x->npath + 1, sizeof(*x->path), 64);
	if (rc)
		return rc;
	x->path[x->npath++] = b;
	return 0;
}

/* etcd's compareToPath: the branch of r and, in preorder, of every nested
 * txn on the branches taken. The later passes follow this path, so its
 * depth bound holds for them too. */
static int compare_to_path(struct txn_exec *x, const TxnRequest *r, unsigned depth)
{
	bool ok = true;
	RequestOp **ops;
	size_t n;
	if (depth > MVCC_TXN_MAX_DEPTH)
		return MVCC_ERR_TOO_MANY_OPS;
	for (size_t i = 0; i < r->n_compare && ok; i++) {
		int rc = apply_compare(x, r->compare[i]);
		if (rc < 0)
			return rc;
		ok = rc == 1;
	}
	int rc = path_push(x, ok);
	if (rc)
		return rc;
	branch(r, ok, &ops, &n);
	for (size_t i = 0; i < n; i++) {
		if (ops[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN)
			continue;
		rc = compare_to_path(x, nested(ops[i]), depth + 1);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * etcd's checkRequestPut, at the txn's starting state, so that no op can
 * fail once the txn has started writing.
 */
static int check_put(struct txn_exec *x, const Etcdserverpb__PutRequest *p)
{
	if (!p || p->key.len == 0)
		return MVCC_ERR_EMPTY_KEY;
	if (p->ignore_value || p->ignore_lease) {
		struct kvindex_entry e;
		int rc = kvindex_latest_get(&x->v->idx, p->key.data, p->key.len, &e);
		if (rc == -ENOENT)
			return MVCC_ERR_KEY_NOT_FOUND;
		if (rc)
			return rc;
	}
	if (p->lease != 0) {
		int rc = mvcc_lease_exists(x->s, p->lease);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return MVCC_ERR_LEASE_NOT_FOUND;
	}
	return 0;
}

/* etcd's checkRequestRange: revisions outside the store's. */
static int check_range(struct txn_exec *x, const Etcdserverpb__RangeRequest *q)
{
	if (!q || q->revision == 0)
		return 0;
	if (q->revision > x->v->rev)
		return MVCC_ERR_FUTURE_REV;
	if (q->revision < x->v->compact_rev)
		return MVCC_ERR_COMPACTED;
	return 0;
}

/* etcd's checkRequests along the path, with one kind of check. */
static int check_requests(struct txn_exec *x, const TxnRequest *r, size_t *pos, bool puts)
{
	RequestOp **ops;
	size_t n;
	branch(r, x->path[(*pos)++], &ops, &n);
	for (size_t i = 0; i < n; i++) {
		int rc = 0;
		switch (ops[i]->request_case) {
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
			rc = check_requests(x, nested(ops[i]), pos, puts);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
			if (puts)
				rc = check_put(x, ops[i]->request_put);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
			if (puts && (!ops[i]->request_delete_range ||
				     ops[i]->request_delete_range->key.len == 0))
				rc = MVCC_ERR_EMPTY_KEY;
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
			if (!puts)
				rc = check_range(x, ops[i]->request_range);
			break;
		default:
			break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int run_range(struct txn_exec *x, const Etcdserverpb__RangeRequest *q,
		     Etcdserverpb__ResponseOp *out)
{
	Etcdserverpb__RangeRequest empty = ETCDSERVERPB__RANGE_REQUEST__INIT;
	int rc = mvcc_range_at(x->v, q ? q : &empty, x->v->rev, x->rr);
	if (!rc)
		rc = mvcc_range_response(x->rr, x->a, x->s != NULL, &out->response_range);
	out->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE;
	return rc;
}

/* Runs the branch of r the path chose; *out gets its response (header
 * empty: etcd sets only the outermost one). */
static int run_txn(struct txn_exec *x, const TxnRequest *r, size_t *pos,
		   Etcdserverpb__TxnResponse **out)
{
	RequestOp **ops;
	size_t n;
	bool ok = x->path[(*pos)++];
	Etcdserverpb__TxnResponse *resp = arena_alloc(x->a, sizeof(*resp));
	if (!resp)
		return -ENOMEM;
	etcdserverpb__txn_response__init(resp);
	resp->header = mvcc_header(x->a, 0);
	if (!resp->header)
		return -ENOMEM;
	resp->succeeded = ok;
	branch(r, ok, &ops, &n);
	if (n) {
		resp->responses = arena_alloc(x->a, n * sizeof(*resp->responses));
		if (!resp->responses)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		Etcdserverpb__ResponseOp *ro = arena_alloc(x->a, sizeof(*ro));
		if (!ro)
			return -ENOMEM;
		etcdserverpb__response_op__init(ro);
		resp->responses[i] = ro;
		resp->n_responses = i + 1;
		const RequestOp *op = ops[i];
		int rc = 0;
		switch (op->request_case) {
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
			rc = run_range(x, op->request_range, ro);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
			if (!x->s || !op->request_put)
				return -EINVAL;
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT;
			rc = x->put(x->s, op->request_put, false, x->a, &ro->response_put);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
			if (!x->s || !op->request_delete_range)
				return -EINVAL;
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE;
			rc = x->del(x->s, op->request_delete_range, x->a,
				    &ro->response_delete_range);
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
			ro->response_case = ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN;
			rc = run_txn(x, nested(op), pos, &ro->response_txn);
			break;
		default:
			break;  /* an empty op gets an empty response */
		}
		if (rc)
			return rc;
	}
	*out = resp;
	return 0;
}

/* Path, checks, ops; the outermost header gets rev. */
int mvcc_txn_exec(struct txn_exec *x, const TxnRequest *r, bool writes,
		  Etcdserverpb__TxnResponse **out)
{
	size_t pos;
	int rc = compare_to_path(x, r, 0);
	if (!rc && writes) {
		pos = 0;
		rc = check_requests(x, r, &pos, true);
	}
	if (!rc) {
		pos = 0;
		rc = check_requests(x, r, &pos, false);
	}
	if (!rc) {
		pos = 0;
		rc = run_txn(x, r, &pos, out);
	}
	stored_free(x->path);
	return rc;
}

bool mvcc_txn_is_readonly(const TxnRequest *r)
{
	for (size_t i = 0; i < r->n_success; i++)
		if (r->success[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
			return false;
	for (size_t i = 0; i < r->n_failure; i++)
		if (r->failure[i]->request_case != ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE)
			return false;
	return true;
}

void mvcc_txn_count_ops(const TxnRequest *r, const Etcdserverpb__TxnResponse *resp,
			struct mvcc_op_counts *c)
{
	RequestOp **ops;
	size_t n;

	c->ranges += r->n_compare;
	branch(r, resp->succeeded, &ops, &n);
	for (size_t i = 0; i < n; i++) {
		switch (ops[i]->request_case) {
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE:
			c->ranges++;
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT:
			c->puts++;
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE:
			c->deletes++;
			break;
		case ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN:
			if (i < resp->n_responses && resp->responses[i]->response_txn)
				mvcc_txn_count_ops(nested(ops[i]), resp->responses[i]->response_txn, c);
			break;
		default:
			break;
		}
	}
}

int mvcc_txn_read(struct mvcc_view *v, const TxnRequest *r, struct arena *a,
		  Etcdserverpb__TxnResponse **out)
{
	if (!mvcc_txn_is_readonly(r))
		return -EINVAL;
	struct mvcc_range_result rr;
	mvcc_range_result_init(&rr);
	struct txn_exec x = { .v = v, .s = NULL, .a = a, .rr = &rr };
	int rc = mvcc_txn_exec(&x, r, false, out);
	if (!rc)
		(*out)->header->revision = v->rev;
	mvcc_range_result_free(&rr);
	return rc;
}
