/*
 * Writes with etcd 3.4's semantics (mvcc/kvstore_txn.go put and delete,
 * etcdserver/apply.go Put and DeleteRange): every change of an op takes
 * the op's main revision and the next sub revision; a put keeps the key's
 * create revision and bumps its version, or starts a new generation
 * (version 1, created now); a delete writes a tombstone. mvcc_txn, the Txn
 * that writes, runs the txn runner of mvcc_txn.c with them.
 */
#include "stored/mvcc/mvcc_int.h"

#include <errno.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/mvcc/schema.h"

/* The KeyValue bytes of a latest entry: inline, or read from the key
 * bucket. Valid like btree_get's. */
static int entry_kv(struct mvcc_store *s, const struct kvindex_entry *e, const uint8_t **kv,
		    size_t *kv_len)
{
	if (e->kv) {
		*kv = e->kv;
		*kv_len = e->kv_len;
		return 0;
	}
	return mvcc_view_kv_at(&s->wv, e->mod, kv, kv_len);
}

/* The revision of the op's next change. */
static struct rev next_rev(const struct mvcc_store *s)
{
	return (struct rev){ s->begin_rev + 1, s->changes };
}

static void change_done(struct mvcc_store *s)
{
	s->changes++;
	s->wv.rev = s->begin_rev + 1;
}

/* Emits the event of a change; prev is looked up when wanted. */
static int emit(struct mvcc_store *s, enum mvcc_event_type type, struct rev r,
		const uint8_t *key, size_t klen, size_t kv_len, const struct kvindex_entry *prev)
{
	if (!s->o.on_event)
		return 0;
	struct mvcc_event ev = { .type = type, .rev = r, .key = key, .key_len = klen,
				 .kv = s->kvbuf, .kv_len = kv_len };
	if (prev) {
		int rc = entry_kv(s, prev, &ev.prev_kv, &ev.prev_kv_len);
		if (rc)
			return rc;
	}
	s->o.on_event(s->o.event_arg, &ev);
	return 0;
}

/*
 * Writes key = value with lease at the op's next revision. prev is the
 * key's latest entry (kvindex_latest_get in this op), NULL when it is not
 * live. value may point into the txn (it is copied before anything
 * changes).
 */
static int write_put(struct mvcc_store *s, const uint8_t *key, size_t klen,
		     const uint8_t *value, size_t vlen, int64_t lease,
		     const struct kvindex_entry *prev)
{
	struct rev r = next_rev(s);
	uint8_t rk[REV_BYTES];
	struct mvcc_kv kv = {
		.key = key, .key_len = klen, .value = value, .value_len = vlen,
		.create_rev = prev ? prev->create_rev : r.main,
		.mod_rev = r.main,
		.version = prev ? prev->version + 1 : 1,
		.lease = lease,
	};
	size_t len = mvcc_kv_encoded_len(&kv);
	int rc = stored_reserve((void **)&s->kvbuf, &s->kvcap, len, 1, 64);
	if (rc)
		return rc;
	mvcc_kv_encode(&kv, s->kvbuf);
	rc = emit(s, MVCC_EVENT_PUT, r, key, klen, len, prev);
	if (rc)
		return rc;
	rev_encode(r, rk);
	rc = btree_put(s->wv.key, rk, sizeof(rk), s->kvbuf, len);
	if (!rc)
		rc = kvindex_put(&s->wv.idx, &kv, r, s->kvbuf, len, prev);
	if (rc)
		return rc;
	change_done(s);
	return 0;
}

/* Writes a tombstone of key (which is live) at the op's next revision. */
static int write_delete(struct mvcc_store *s, const uint8_t *key, size_t klen)
{
	struct kvindex_entry e;
	struct rev r = next_rev(s);
	uint8_t rk[REV_MARKED_BYTES];
	struct mvcc_kv kv = { .key = key, .key_len = klen };
	size_t len = mvcc_kv_encoded_len(&kv);
	int rc = kvindex_latest_get(&s->wv.idx, key, klen, &e);
	if (rc)
		return rc == -ENOENT ? kvindex_corrupt("deleting a key that is not live") : rc;
	rc = stored_reserve((void **)&s->kvbuf, &s->kvcap, len, 1, 64);
	if (rc)
		return rc;
	mvcc_kv_encode(&kv, s->kvbuf);
	rc = emit(s, MVCC_EVENT_DELETE, r, key, klen, len, &e);
	if (rc)
		return rc;
	rev_encode_tombstone(r, rk);
	rc = btree_put(s->wv.key, rk, sizeof(rk), s->kvbuf, len);
	if (!rc)
		rc = kvindex_tombstone(&s->wv.idx, key, klen, r, &e);
	if (rc)
		return rc;
	change_done(s);
	return 0;
}

int mvcc_put_op(struct mvcc_store *s, const Etcdserverpb__PutRequest *r, bool strict,
		struct arena *a, Etcdserverpb__PutResponse **out)
{
	struct kvindex_entry e;
	struct mvcc_kv prev;
	const uint8_t *prev_bytes = NULL, *value = r->value.data;
	size_t prev_len = 0, vlen = r->value.len;
	int64_t lease = r->lease;
	bool have_prev = false;
	int rc;

	if (r->key.len == 0)
		return MVCC_ERR_EMPTY_KEY;
	Etcdserverpb__PutResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return -ENOMEM;
	etcdserverpb__put_response__init(resp);

	/* The one lookup of the key's latest entry: write_put needs it too. */
	rc = kvindex_latest_get(&s->wv.idx, r->key.data, r->key.len, &e);
	if (rc && rc != -ENOENT)
		return rc;
	have_prev = rc == 0;
	if (have_prev && (r->ignore_value || r->ignore_lease || r->prev_kv)) {
		rc = entry_kv(s, &e, &prev_bytes, &prev_len);
		if (rc)
			return rc;
		if (mvcc_kv_decode(prev_bytes, prev_len, &prev))
			return kvindex_corrupt("key bucket holds a malformed KeyValue");
	}
	if ((r->ignore_value || r->ignore_lease) && !have_prev) {
		if (strict)
			return MVCC_ERR_KEY_NOT_FOUND;
		/* Only reachable inside a txn that deleted the key first. */
		value = NULL;
		vlen = 0;
		lease = 0;
	} else {
		if (r->ignore_value) {
			value = prev.value;
			vlen = prev.value_len;
		}
		if (r->ignore_lease)
			lease = prev.lease;
	}
	if (r->prev_kv && have_prev) {
		rc = mvcc_kv_message(&prev, false, a, true, &resp->prev_kv);
		if (rc)
			return rc;
	}
	resp->header = mvcc_header(a, s->begin_rev + 1);
	if (!resp->header)
		return -ENOMEM;
	rc = write_put(s, r->key.data, r->key.len, value, vlen, lease, have_prev ? &e : NULL);
	if (rc)
		return rc;
	*out = resp;
	return 0;
}

/* Collects up to `max` live keys of a range into s->keys. */
static int collect_keys(struct mvcc_store *s, const struct kvindex_range *kr, size_t max)
{
	struct kvindex_iter it;
	struct kvindex_hit h;
	int rc = 0;
	s->keys_len = 0;
	s->nkeys = 0;
	kvindex_iter_begin(&it, &s->wv.idx, kr, s->wv.rev, true);
	while (s->nkeys < max && (rc = kvindex_iter_next(&it, &h)) == 0) {
		rc = stored_reserve((void **)&s->key_offs, &s->key_offs_cap, s->nkeys + 2,
				    sizeof(*s->key_offs), 8);
		if (rc)
			return rc;
		rc = stored_reserve((void **)&s->keys, &s->keys_cap, s->keys_len + h.key_len, 1, 64);
		if (rc)
			return rc;
		memcpy(s->keys + s->keys_len, h.key, h.key_len);
		s->key_offs[s->nkeys++] = s->keys_len;
		s->keys_len += h.key_len;
	}
	if (s->nkeys)
		s->key_offs[s->nkeys] = s->keys_len;
	return rc == -ENOENT || s->nkeys == max ? 0 : rc;
}

#define DELETE_CHUNK 1024u

int mvcc_delete_op(struct mvcc_store *s, const Etcdserverpb__DeleteRangeRequest *r,
		   struct arena *a, Etcdserverpb__DeleteRangeResponse **out)
{
	struct kvindex_range kr;
	int64_t deleted = 0;
	int rc;

	if (r->key.len == 0)
		return MVCC_ERR_EMPTY_KEY;
	Etcdserverpb__DeleteRangeResponse *resp = arena_alloc(a, sizeof(*resp));
	if (!resp)
		return -ENOMEM;
	etcdserverpb__delete_range_response__init(resp);
	if (r->prev_kv) {
		Etcdserverpb__RangeRequest rq = ETCDSERVERPB__RANGE_REQUEST__INIT;
		rq.key = r->key;
		rq.range_end = r->range_end;
		rc = mvcc_range_at(&s->wv, &rq, s->wv.rev, &s->rr);
		if (rc)
			return rc;
		if (s->rr.n) {
			resp->prev_kvs = arena_alloc(a, s->rr.n * sizeof(*resp->prev_kvs));
			if (!resp->prev_kvs)
				return -ENOMEM;
			for (size_t i = 0; i < s->rr.n; i++) {
				rc = mvcc_kv_message(&s->rr.kvs[i].f, false, a, true,
						     &resp->prev_kvs[i]);
				if (rc)
					return rc;
			}
			resp->n_prev_kvs = s->rr.n;
		}
	}
	/* Deleted keys leave the latest bucket, so each round starts over at
	 * the range's start. */
	kvindex_range_from_request(&kr, r->key.data, r->key.len, r->range_end.data,
				   r->range_end.len);
	for (;;) {
		rc = collect_keys(s, &kr, DELETE_CHUNK);
		if (rc)
			return rc;
		for (size_t i = 0; i < s->nkeys; i++) {
			rc = write_delete(s, s->keys + s->key_offs[i],
					  s->key_offs[i + 1] - s->key_offs[i]);
			if (rc)
				return rc;
		}
		deleted += (int64_t)s->nkeys;
		if (s->nkeys < DELETE_CHUNK)
			break;
	}
	resp->deleted = deleted;
	resp->header = mvcc_header(a, deleted || s->changes ? s->begin_rev + 1 : s->begin_rev);
	if (!resp->header)
		return -ENOMEM;
	*out = resp;
	return 0;
}

int mvcc_put(struct mvcc_store *s, const Etcdserverpb__PutRequest *r, struct arena *a,
	     Etcdserverpb__PutResponse **out)
{
	int rc = mvcc_check_open(s);
	if (rc)
		return rc;
	if (r->key.len == 0)
		return MVCC_ERR_EMPTY_KEY;
	if (r->lease != 0) {
		rc = mvcc_lease_exists(s, r->lease);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return MVCC_ERR_LEASE_NOT_FOUND;
	}
	mvcc_op_begin(s);
	rc = mvcc_put_op(s, r, true, a, out);
	mvcc_op_end(s);
	return rc;
}

int mvcc_delete_range(struct mvcc_store *s, const Etcdserverpb__DeleteRangeRequest *r,
		      struct arena *a, Etcdserverpb__DeleteRangeResponse **out)
{
	int rc = mvcc_check_open(s);
	if (rc)
		return rc;
	mvcc_op_begin(s);
	rc = mvcc_delete_op(s, r, a, out);
	mvcc_op_end(s);
	return rc;
}

int mvcc_range_apply(struct mvcc_store *s, const Etcdserverpb__RangeRequest *r,
		     struct arena *a, Etcdserverpb__RangeResponse **out)
{
	int rc = mvcc_check_open(s);
	if (rc)
		return rc;
	rc = mvcc_range_at(&s->wv, r, s->wv.rev, &s->rr);
	if (rc)
		return rc;
	return mvcc_range_response(&s->rr, a, true, out);
}

/* A Txn that may write: mvcc_txn.c runs it, with this file's puts and
 * deletes. */
int mvcc_txn(struct mvcc_store *s, const Etcdserverpb__TxnRequest *r, struct arena *a,
	     Etcdserverpb__TxnResponse **out)
{
	int rc = mvcc_check_open(s);
	if (rc)
		return rc;
	struct txn_exec x = { .v = &s->wv, .s = s, .a = a, .rr = &s->rr,
			      .put = mvcc_put_op, .del = mvcc_delete_op };
	mvcc_op_begin(s);
	rc = mvcc_txn_exec(&x, r, !mvcc_txn_is_readonly(r), out);
	if (!rc)
		(*out)->header->revision = s->changes ? s->begin_rev + 1 : s->begin_rev;
	mvcc_op_end(s);
	return rc;
}
