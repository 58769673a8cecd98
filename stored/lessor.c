/* stored's lessor (see lessor.h). */
#include "stored/lessor.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "leasepb/lease.pb-c.h"
#include "base/log/log.h"
#include "stored/alloc.h"
#include "stored/mvcc/revision.h"
#include "stored/mvcc/schema.h"

#define LESSOR_FOREVER INT64_MAX

struct lessor_key {
	uint8_t *p;
	size_t len;
};

struct lessor_lease {
	int64_t id;
	int64_t ttl;            /* seconds, as granted (at least the minimum) */
	int64_t remaining;      /* last checkpointed remaining TTL; 0: unset */
	int64_t expiry_ns;      /* LESSOR_FOREVER while not primary */
	int64_t retry_ns;       /* expired: not offered again before this */
	int64_t checkpoint_ns;  /* next checkpoint; 0: none scheduled */
	struct lessor_key *keys;
	size_t nkeys, keys_cap;
	struct lessor_lease *hnext;
	size_t at[2];           /* its place in each heap, or LESSOR_NOWHERE */
};

/*
 * Two min-heaps of leases, so that the primary's questions (what expired,
 * which checkpoints are due, when is the next) cost the leases they
 * answer with, not a walk of every lease: stored asks when the next one is
 * due each time its loop goes idle.
 *   LESSOR_BY_EXPIRY     every lease, by when it may be offered as expired
 *                        (the later of its expiry and its retry time);
 *   LESSOR_BY_CHECKPOINT the leases with a checkpoint scheduled, by when.
 * Each lease keeps its index in each heap (at[]). The arrays have room for
 * every lease (lessor_make reserves it), so no heap operation fails.
 */
enum { LESSOR_BY_EXPIRY = 0, LESSOR_BY_CHECKPOINT = 1 };
#define LESSOR_NOWHERE SIZE_MAX

struct lessor_heap {
	struct lessor_lease **v;
	size_t n, cap;
};

struct lessor {
	struct lessor_opts o;
	struct lessor_lease **buckets;
	size_t nbuckets;        /* a power of two */
	size_t count;
	bool primary;
	uint64_t term;
	struct lessor_heap heap[2];
};

static const struct {
	int err;
	int code;
	const char *msg;
} lessor_errors[] = {
	{ LESSOR_ERR_NOT_FOUND, 5, "etcdserver: requested lease not found" },
	{ LESSOR_ERR_EXISTS, 9, "etcdserver: lease already exists" },
	{ LESSOR_ERR_TTL_TOO_LARGE, 11, "etcdserver: too large lease TTL" },
	{ LESSOR_ERR_NOT_PRIMARY, 14, "etcdserver: not leader" },
};

bool lessor_is_request_error(int err)
{
	return err <= LESSOR_ERR_NOT_FOUND && err >= LESSOR_ERR_NOT_PRIMARY;
}

const char *lessor_strerror(int err)
{
	for (size_t i = 0; i < sizeof(lessor_errors) / sizeof(lessor_errors[0]); i++)
		if (lessor_errors[i].err == err)
			return lessor_errors[i].msg;
	return strerror(-err);
}

int lessor_grpc_code(int err)
{
	for (size_t i = 0; i < sizeof(lessor_errors) / sizeof(lessor_errors[0]); i++)
		if (lessor_errors[i].err == err)
			return lessor_errors[i].code;
	return 2;
}

int64_t lessor_min_ttl(uint64_t election_ms, uint64_t heartbeat_ms)
{
	if (heartbeat_ms == 0)
		return 1;
	/* etcd: (3 * ElectionTicks / 2) ticks, rounded up to seconds */
	uint64_t ticks = election_ms / heartbeat_ms;
	uint64_t ms = (3 * ticks / 2) * heartbeat_ms;
	return (int64_t)((ms + 999) / 1000);
}

/* ---- the heaps ---- */

static int64_t lessor_heap_key(const struct lessor_lease *e, int which)
{
	if (which == LESSOR_BY_CHECKPOINT)
		return e->checkpoint_ns;
	return e->retry_ns > e->expiry_ns ? e->retry_ns : e->expiry_ns;
}

static void lessor_heap_place(struct lessor_heap *h, int which, size_t i, struct lessor_lease *e)
{
	h->v[i] = e;
	e->at[which] = i;
}

static void lessor_heap_up(struct lessor_heap *h, int which, size_t i)
{
	struct lessor_lease *e = h->v[i];
	int64_t k = lessor_heap_key(e, which);

	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (lessor_heap_key(h->v[parent], which) <= k)
			break;
		lessor_heap_place(h, which, i, h->v[parent]);
		i = parent;
	}
	lessor_heap_place(h, which, i, e);
}

static void lessor_heap_down(struct lessor_heap *h, int which, size_t i)
{
	struct lessor_lease *e = h->v[i];
	int64_t k = lessor_heap_key(e, which);

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n &&
		    lessor_heap_key(h->v[c + 1], which) < lessor_heap_key(h->v[c], which))
			c++;
		if (lessor_heap_key(h->v[c], which) >= k)
			break;
		lessor_heap_place(h, which, i, h->v[c]);
		i = c;
	}
	lessor_heap_place(h, which, i, e);
}

/* e's key changed (or e is new at the end): restores the order. */
static void lessor_heap_fix(struct lessor *l, int which, struct lessor_lease *e)
{
	struct lessor_heap *h = &l->heap[which];
	size_t i = e->at[which];

	if (i > 0 && lessor_heap_key(h->v[(i - 1) / 2], which) > lessor_heap_key(e, which))
		lessor_heap_up(h, which, i);
	else
		lessor_heap_down(h, which, i);
}

static void lessor_heap_add(struct lessor *l, int which, struct lessor_lease *e)
{
	struct lessor_heap *h = &l->heap[which];

	if (e->at[which] != LESSOR_NOWHERE) {
		lessor_heap_fix(l, which, e);
		return;
	}
	lessor_heap_place(h, which, h->n++, e); /* room reserved by lessor_make */
	lessor_heap_up(h, which, h->n - 1);
}

static void lessor_heap_remove(struct lessor *l, int which, struct lessor_lease *e)
{
	struct lessor_heap *h = &l->heap[which];
	size_t i = e->at[which];

	if (i == LESSOR_NOWHERE)
		return;
	e->at[which] = LESSOR_NOWHERE;
	struct lessor_lease *last = h->v[--h->n];
	if (last == e)
		return;
	lessor_heap_place(h, which, i, last);
	lessor_heap_fix(l, which, last);
}

/* Every key of the heap changed: orders it again (Floyd's). */
static void lessor_heap_rebuild(struct lessor *l, int which)
{
	struct lessor_heap *h = &l->heap[which];

	for (size_t i = h->n / 2; i-- > 0;)
		lessor_heap_down(h, which, i);
}

/* Sets e's checkpoint time (0: none) and its place in the checkpoint heap. */
static void lessor_set_checkpoint(struct lessor *l, struct lessor_lease *e, int64_t at_ns)
{
	e->checkpoint_ns = at_ns;
	if (at_ns)
		lessor_heap_add(l, LESSOR_BY_CHECKPOINT, e);
	else
		lessor_heap_remove(l, LESSOR_BY_CHECKPOINT, e);
}

int lessor_verify(const struct lessor *l)
{
	size_t seen = 0, with_cp = 0;

	for (size_t b = 0; b < l->nbuckets; b++)
		for (const struct lessor_lease *e = l->buckets[b]; e; e = e->hnext) {
			seen++;
			if (e->at[LESSOR_BY_EXPIRY] >= l->heap[LESSOR_BY_EXPIRY].n ||
			    l->heap[LESSOR_BY_EXPIRY].v[e->at[LESSOR_BY_EXPIRY]] != e)
				return -1;
			if (e->checkpoint_ns) {
				with_cp++;
				if (e->at[LESSOR_BY_CHECKPOINT] >= l->heap[LESSOR_BY_CHECKPOINT].n ||
				    l->heap[LESSOR_BY_CHECKPOINT].v[e->at[LESSOR_BY_CHECKPOINT]] != e)
					return -2;
			} else if (e->at[LESSOR_BY_CHECKPOINT] != LESSOR_NOWHERE) {
				return -3;
			}
		}
	if (seen != l->count || l->heap[LESSOR_BY_EXPIRY].n != seen ||
	    l->heap[LESSOR_BY_CHECKPOINT].n != with_cp)
		return -4;
	for (int w = 0; w < 2; w++)
		for (size_t i = 1; i < l->heap[w].n; i++)
			if (lessor_heap_key(l->heap[w].v[(i - 1) / 2], w) >
			    lessor_heap_key(l->heap[w].v[i], w))
				return -5;
	return 0;
}

static size_t lessor_hash(const struct lessor *l, int64_t id)
{
	uint64_t h = (uint64_t)id * 0x9e3779b97f4a7c15ull;
	return (size_t)(h >> 32) & (l->nbuckets - 1);
}

static struct lessor_lease *lessor_find(const struct lessor *l, int64_t id)
{
	for (struct lessor_lease *e = l->buckets[lessor_hash(l, id)]; e; e = e->hnext)
		if (e->id == id)
			return e;
	return NULL;
}

static void lessor_lease_free(struct lessor_lease *e)
{
	for (size_t i = 0; i < e->nkeys; i++)
		stored_free(e->keys[i].p);
	stored_free(e->keys);
	stored_free(e);
}

static int lessor_grow(struct lessor *l)
{
	size_t n = l->nbuckets * 2;
	struct lessor_lease **b = stored_calloc(n, sizeof(*b));

	if (!b)
		return -ENOMEM;
	struct lessor_lease **old = l->buckets;
	size_t oldn = l->nbuckets;
	l->buckets = b;
	l->nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		struct lessor_lease *e = old[i], *next;
		for (; e; e = next) {
			next = e->hnext;
			size_t h = lessor_hash(l, e->id);
			e->hnext = b[h];
			b[h] = e;
		}
	}
	stored_free(old);
	return 0;
}

static int lessor_insert(struct lessor *l, struct lessor_lease *e)
{
	if (l->count + 1 > l->nbuckets) {
		int rc = lessor_grow(l);
		if (rc)
			return rc;
	}
	size_t h = lessor_hash(l, e->id);
	e->hnext = l->buckets[h];
	l->buckets[h] = e;
	l->count++;
	return 0;
}

static void lessor_unlink(struct lessor *l, struct lessor_lease *e)
{
	struct lessor_lease **pp = &l->buckets[lessor_hash(l, e->id)];
	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	l->count--;
	lessor_heap_remove(l, LESSOR_BY_EXPIRY, e);
	lessor_heap_remove(l, LESSOR_BY_CHECKPOINT, e);
}

static void lessor_clear(struct lessor *l)
{
	for (size_t i = 0; i < l->nbuckets; i++) {
		struct lessor_lease *e = l->buckets[i], *next;
		for (; e; e = next) {
			next = e->hnext;
			lessor_lease_free(e);
		}
		l->buckets[i] = NULL;
	}
	l->count = 0;
	l->heap[LESSOR_BY_EXPIRY].n = 0;
	l->heap[LESSOR_BY_CHECKPOINT].n = 0;
}

int lessor_new(const struct lessor_opts *o, struct lessor **out)
{
	struct lessor *l = stored_calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->o = *o;
	if (l->o.checkpoint_ns <= 0)
		l->o.checkpoint_ns = LESSOR_CHECKPOINT_INTERVAL_NS;
	if (l->o.min_ttl <= 0)
		l->o.min_ttl = 1;
	l->nbuckets = 64;
	l->buckets = stored_calloc(l->nbuckets, sizeof(*l->buckets));
	if (!l->buckets) {
		stored_free(l);
		return -ENOMEM;
	}
	*out = l;
	return 0;
}

void lessor_free(struct lessor *l)
{
	if (!l)
		return;
	lessor_clear(l);
	stored_free(l->buckets);
	stored_free(l->heap[LESSOR_BY_EXPIRY].v);
	stored_free(l->heap[LESSOR_BY_CHECKPOINT].v);
	stored_free(l);
}

size_t lessor_count(const struct lessor *l)
{
	return l->count;
}

bool lessor_is_primary(const struct lessor *l)
{
	return l->primary;
}

uint64_t lessor_term(const struct lessor *l)
{
	return l->term;
}

/* The remaining TTL a refresh starts from: the checkpointed one if set.
 * At most LESSOR_MAX_TTL: a checkpoint may say more, and a TTL in
 * nanoseconds must fit an int64_t. */
static int64_t lessor_base_ttl(const struct lessor_lease *e)
{
	int64_t ttl = e->remaining > 0 ? e->remaining : e->ttl;
	return ttl < LESSOR_MAX_TTL ? ttl : LESSOR_MAX_TTL;
}

/* The lease's new expiry; the caller puts it in its place in the expiry
 * heap (one lease: lessor_heap_fix; all: lessor_heap_rebuild). */
static void lessor_refresh(struct lessor_lease *e, int64_t now_ns, int64_t extend_ns)
{
	e->expiry_ns = now_ns + extend_ns + lessor_base_ttl(e) * 1000000000LL;
	e->retry_ns = 0;
}

/* etcd's scheduleCheckpointIfNeeded, replacing any checkpoint scheduled
 * before (none when not needed). */
static void lessor_schedule_checkpoint(struct lessor *l, struct lessor_lease *e,
				       int64_t now_ns)
{
	bool due = l->o.checkpoint && l->primary &&
		   lessor_base_ttl(e) * 1000000000LL > l->o.checkpoint_ns;
	lessor_set_checkpoint(l, e, due ? now_ns + l->o.checkpoint_ns : 0);
}

static struct lessor_lease *lessor_make(struct lessor *l, int64_t id, int64_t ttl,
					int64_t remaining)
{
	struct lessor_lease *e = stored_calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->id = id;
	/* a TTL above the maximum comes only from a damaged db (a grant
	 * refuses it) */
	e->ttl = ttl < l->o.min_ttl ? l->o.min_ttl : ttl > LESSOR_MAX_TTL ? LESSOR_MAX_TTL : ttl;
	e->remaining = remaining;
	e->expiry_ns = LESSOR_FOREVER;
	e->at[LESSOR_BY_EXPIRY] = e->at[LESSOR_BY_CHECKPOINT] = LESSOR_NOWHERE;
	for (int w = 0; w < 2; w++)
		if (stored_reserve((void **)&l->heap[w].v, &l->heap[w].cap, l->count + 1,
				   sizeof(*l->heap[w].v), 64) < 0) {
			stored_free(e);
			return NULL;
		}
	if (lessor_insert(l, e)) {
		stored_free(e);
		return NULL;
	}
	lessor_heap_add(l, LESSOR_BY_EXPIRY, e);
	return e;
}

static int lessor_persist(struct btree_txn *t, const struct lessor_lease *e)
{
	Leasepb__Lease pb = LEASEPB__LEASE__INIT;
	struct btree_bucket *b;
	uint8_t k[8], v[40];
	int rc;

	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_LEASE, strlen(SCHEMA_BUCKET_LEASE), &b);
	if (rc == -ENOENT)
		rc = btree_bucket_create(t, NULL, SCHEMA_BUCKET_LEASE, strlen(SCHEMA_BUCKET_LEASE),
					 &b);
	if (rc)
		return rc;
	pb.id = e->id;
	pb.ttl = e->ttl;
	pb.remainingttl = e->remaining;
	size_t n = leasepb__lease__pack(&pb, v);
	rev_put_be64(k, (uint64_t)e->id);
	return btree_put(b, k, sizeof(k), v, n);
}

int lessor_load(struct lessor *l, struct btree_txn *t)
{
	struct btree_bucket *b;
	struct btree_cursor c;
	struct btree_kv kv;
	int rc;

	lessor_clear(l);
	l->primary = false;
	l->term = 0;
	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_LEASE, strlen(SCHEMA_BUCKET_LEASE), &b);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	btree_cursor_init(&c, b);
	for (rc = btree_cursor_first(&c, &kv); rc == 0; rc = btree_cursor_next(&c, &kv)) {
		Leasepb__Lease *pb = leasepb__lease__unpack(NULL, kv.val_len, kv.val);
		if (!pb || kv.key_len != 8) {
			log_warn("skipped a malformed entry of the lease bucket",
				 LOG_U64("key-len", kv.key_len), LOG_U64("value-len", kv.val_len));
			if (pb)
				leasepb__lease__free_unpacked(pb, NULL);
			continue;
		}
		/* etcd keeps the last value of an id that comes twice */
		struct lessor_lease *e = lessor_find(l, pb->id);
		if (e) {
			lessor_unlink(l, e);
			lessor_lease_free(e);
		}
		e = lessor_make(l, pb->id, pb->ttl, pb->remainingttl);
		leasepb__lease__free_unpacked(pb, NULL);
		if (!e)
			return -ENOMEM;
	}
	return rc == -ENOENT ? 0 : rc;
}

int lessor_attach_key(struct lessor *l, int64_t id, const uint8_t *key, size_t len)
{
	struct lessor_lease *e = id ? lessor_find(l, id) : NULL;

	if (!e)
		return 0;
	for (size_t i = 0; i < e->nkeys; i++)
		if (e->keys[i].len == len && memcmp(e->keys[i].p, key, len) == 0)
			return 0;
	int rc = stored_reserve((void **)&e->keys, &e->keys_cap, e->nkeys + 1, sizeof(*e->keys), 4);
	if (rc < 0)
		return rc;
	uint8_t *p = stored_malloc(len ? len : 1);
	if (!p)
		return -ENOMEM;
	memcpy(p, key, len);
	e->keys[e->nkeys++] = (struct lessor_key){ p, len };
	return 0;
}

static void lessor_detach_key(struct lessor *l, int64_t id, const uint8_t *key, size_t len)
{
	struct lessor_lease *e = id ? lessor_find(l, id) : NULL;

	if (!e)
		return;
	for (size_t i = 0; i < e->nkeys; i++) {
		if (e->keys[i].len == len && memcmp(e->keys[i].p, key, len) == 0) {
			stored_free(e->keys[i].p);
			e->keys[i] = e->keys[--e->nkeys];
			return;
		}
	}
}

void lessor_on_event(struct lessor *l, const struct mvcc_event *ev)
{
	struct mvcc_kv kv, prev;
	int64_t old = 0, now = 0;

	if (ev->prev_kv && mvcc_kv_decode(ev->prev_kv, ev->prev_kv_len, &prev) == 0)
		old = prev.lease;
	if (ev->type == MVCC_EVENT_PUT && mvcc_kv_decode(ev->kv, ev->kv_len, &kv) == 0)
		now = kv.lease;
	if (old == now)
		return;
	if (old)
		lessor_detach_key(l, old, ev->key, ev->key_len);
	if (now && lessor_attach_key(l, now, ev->key, ev->key_len))
		log_warn("out of memory attaching a key to its lease", LOG_I64("lease", now));
}

int lessor_grant(struct lessor *l, struct btree_txn *t, int64_t id, int64_t ttl, int64_t now_ns,
		 int64_t *granted)
{
	struct lessor_lease *e;

	if (id == 0)
		return LESSOR_ERR_NOT_FOUND;
	if (ttl > LESSOR_MAX_TTL)
		return LESSOR_ERR_TTL_TOO_LARGE;
	if (lessor_find(l, id))
		return LESSOR_ERR_EXISTS;
	e = lessor_make(l, id, ttl, 0);
	if (!e)
		return -ENOMEM;
	if (l->primary) {
		lessor_refresh(e, now_ns, 0);
		lessor_heap_fix(l, LESSOR_BY_EXPIRY, e);
		lessor_schedule_checkpoint(l, e, now_ns);
	}
	*granted = e->ttl;
	return lessor_persist(t, e);
}

static int lessor_key_cmp(const void *a, const void *b)
{
	const ProtobufCBinaryData *x = a, *y = b;
	return mvcc_bytes_cmp(x->data, x->len, y->data, y->len);
}

static int lessor_copy_keys(const struct lessor_lease *e, struct arena *a,
			    ProtobufCBinaryData **keys, size_t *n)
{
	ProtobufCBinaryData *v = arena_alloc(a, (e->nkeys ? e->nkeys : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < e->nkeys; i++) {
		v[i].len = e->keys[i].len;
		v[i].data = arena_alloc(a, e->keys[i].len ? e->keys[i].len : 1);
		if (!v[i].data)
			return -ENOMEM;
		memcpy(v[i].data, e->keys[i].p, e->keys[i].len);
	}
	qsort(v, e->nkeys, sizeof(*v), lessor_key_cmp);
	*keys = v;
	*n = e->nkeys;
	return 0;
}

int lessor_keys(struct lessor *l, int64_t id, struct arena *a, ProtobufCBinaryData **keys,
		size_t *n)
{
	struct lessor_lease *e = lessor_find(l, id);

	if (!e)
		return LESSOR_ERR_NOT_FOUND;
	return lessor_copy_keys(e, a, keys, n);
}

int lessor_remove(struct lessor *l, struct btree_txn *t, int64_t id)
{
	struct lessor_lease *e = lessor_find(l, id);
	struct btree_bucket *b;
	uint8_t k[8];
	int rc;

	if (!e)
		return LESSOR_ERR_NOT_FOUND;
	lessor_unlink(l, e);
	lessor_lease_free(e);
	rc = btree_bucket_open(t, NULL, SCHEMA_BUCKET_LEASE, strlen(SCHEMA_BUCKET_LEASE), &b);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	rev_put_be64(k, (uint64_t)id);
	rc = btree_del(b, k, sizeof(k));
	return rc == -ENOENT ? 0 : rc;
}

int lessor_checkpoint(struct lessor *l, struct btree_txn *t, int64_t id, int64_t remaining,
		      int64_t now_ns)
{
	struct lessor_lease *e = lessor_find(l, id);

	if (!e)
		return 0;
	e->remaining = remaining;
	lessor_schedule_checkpoint(l, e, now_ns);
	return lessor_persist(t, e);
}

/* etcd's Promote: every lease restarts from its remaining TTL plus
 * extend. (etcd also spreads leases that would expire in the same second
 * beyond 3/4 of its revoke rate over later seconds; here the revoke
 * batches alone bound the rate.) */
static void lessor_promote(struct lessor *l, int64_t now_ns)
{
	for (size_t i = 0; i < l->nbuckets; i++)
		for (struct lessor_lease *e = l->buckets[i]; e; e = e->hnext) {
			lessor_refresh(e, now_ns, l->o.extend_ns);
			lessor_schedule_checkpoint(l, e, now_ns);
		}
	lessor_heap_rebuild(l, LESSOR_BY_EXPIRY);
}

bool lessor_set_primary(struct lessor *l, bool leader, uint64_t term, int64_t now_ns)
{
	if (leader && l->primary && term == l->term)
		return false;
	if (!leader) {
		if (l->primary) {
			for (size_t i = 0; i < l->nbuckets; i++)
				for (struct lessor_lease *e = l->buckets[i]; e; e = e->hnext) {
					e->expiry_ns = LESSOR_FOREVER;
					lessor_set_checkpoint(l, e, 0);
				}
			lessor_heap_rebuild(l, LESSOR_BY_EXPIRY);
		}
		l->primary = false;
		l->term = term;
		return false;
	}
	l->primary = true;
	l->term = term;
	lessor_promote(l, now_ns);
	return true;
}

int lessor_renew(struct lessor *l, int64_t id, int64_t now_ns, int64_t *ttl,
		 bool *clear_checkpoint)
{
	struct lessor_lease *e;

	if (!l->primary)
		return LESSOR_ERR_NOT_PRIMARY;
	e = lessor_find(l, id);
	if (!e)
		return LESSOR_ERR_NOT_FOUND;
	if (e->expiry_ns <= now_ns)
		return LESSOR_ERR_EXPIRED;
	*clear_checkpoint = l->o.checkpoint && e->remaining > 0;
	/* the new expiry counts from the full TTL, as etcd's refresh after
	 * its checkpoint of 0 clears the remaining TTL */
	e->expiry_ns = now_ns + e->ttl * 1000000000LL;
	e->retry_ns = 0;
	lessor_heap_fix(l, LESSOR_BY_EXPIRY, e);
	*ttl = e->ttl;
	return 0;
}

bool lessor_exists(const struct lessor *l, int64_t id)
{
	return lessor_find(l, id) != NULL;
}

int lessor_time_to_live(struct lessor *l, int64_t id, int64_t now_ns, bool keys, struct arena *a,
			int64_t *remaining, int64_t *granted, ProtobufCBinaryData **kv, size_t *n)
{
	struct lessor_lease *e = lessor_find(l, id);

	if (!e)
		return LESSOR_ERR_NOT_FOUND;
	if (e->expiry_ns == LESSOR_FOREVER)
		*remaining = lessor_base_ttl(e);
	else
		*remaining = e->expiry_ns > now_ns ? (e->expiry_ns - now_ns) / 1000000000LL : 0;
	*granted = e->ttl;
	*n = 0;
	*kv = NULL;
	return keys ? lessor_copy_keys(e, a, kv, n) : 0;
}

int lessor_ids(struct lessor *l, struct arena *a, int64_t **ids, size_t *n)
{
	int64_t *v = arena_alloc(a, (l->count ? l->count : 1) * sizeof(*v));
	size_t k = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < l->nbuckets; i++)
		for (struct lessor_lease *e = l->buckets[i]; e; e = e->hnext)
			v[k++] = e->id;
	*ids = v;
	*n = k;
	return 0;
}

size_t lessor_expired(struct lessor *l, int64_t now_ns, int64_t *ids, size_t max)
{
	struct lessor_heap *h = &l->heap[LESSOR_BY_EXPIRY];
	size_t n = 0;

	if (!l->primary)
		return 0;
	/* each one offered moves past now, so none comes twice */
	while (n < max && h->n && lessor_heap_key(h->v[0], LESSOR_BY_EXPIRY) <= now_ns) {
		struct lessor_lease *e = h->v[0];
		e->retry_ns = now_ns + LESSOR_RETRY_NS;
		lessor_heap_down(h, LESSOR_BY_EXPIRY, 0);
		ids[n++] = e->id;
	}
	return n;
}

size_t lessor_due_checkpoints(struct lessor *l, int64_t now_ns, struct lessor_cp *out, size_t max)
{
	struct lessor_heap *h = &l->heap[LESSOR_BY_CHECKPOINT];
	size_t n = 0;

	if (!l->primary || !l->o.checkpoint)
		return 0;
	while (n < max && h->n && h->v[0]->checkpoint_ns <= now_ns) {
		struct lessor_lease *e = h->v[0];
		lessor_set_checkpoint(l, e, 0);
		if (e->expiry_ns <= now_ns)
			continue;
		int64_t left = (e->expiry_ns - now_ns + 999999999) / 1000000000LL;
		if (left >= e->ttl)
			continue;
		out[n++] = (struct lessor_cp){ e->id, left };
	}
	return n;
}

int64_t lessor_next_deadline(const struct lessor *l)
{
	const struct lessor_heap *x = &l->heap[LESSOR_BY_EXPIRY];
	const struct lessor_heap *c = &l->heap[LESSOR_BY_CHECKPOINT];
	int64_t next = INT64_MAX;

	if (!l->primary)
		return next;
	if (x->n)
		next = lessor_heap_key(x->v[0], LESSOR_BY_EXPIRY);
	if (c->n && c->v[0]->checkpoint_ns < next)
		next = c->v[0]->checkpoint_ns;
	return next;
}
