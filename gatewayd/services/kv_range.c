/* RangeResponse encoding, whole or streamed (see kv_range.h). */
#include "gatewayd/services/kv_range.h"

#include <errno.h>
#include <string.h>

#include "proto/wire.h"
#include "stored/mvcc/kvindex.h"

/* Fields of RangeResponse and of ResponseHeader. */
enum {
	RR_HEADER = 1,
	RR_KVS = 2,
	RR_MORE = 3,
	RR_COUNT = 4,
	HDR_CLUSTER_ID = 1,
	HDR_MEMBER_ID = 2,
	HDR_REVISION = 3,
	HDR_RAFT_TERM = 4,
};

/* Stages of a stream. */
enum { KVS_COUNT, KVS_HEAD, KVS_KVS, KVS_TAIL, KVS_DONE };

static size_t head_inner(const struct gw_header *h)
{
	return proto_varint_field_len(HDR_CLUSTER_ID, h->cluster_id) +
	       proto_varint_field_len(HDR_MEMBER_ID, h->member_id) +
	       proto_varint_field_len(HDR_REVISION, (uint64_t)h->revision) +
	       proto_varint_field_len(HDR_RAFT_TERM, h->raft_term);
}

size_t kv_range_head_len(const struct gw_header *h)
{
	return proto_bytes_field_len(RR_HEADER, head_inner(h));
}

size_t kv_range_head_write(uint8_t *out, const struct gw_header *h)
{
	size_t w = proto_bytes_head_put(out, RR_HEADER, head_inner(h));

	w += proto_varint_field_put(out + w, HDR_CLUSTER_ID, h->cluster_id);
	w += proto_varint_field_put(out + w, HDR_MEMBER_ID, h->member_id);
	w += proto_varint_field_put(out + w, HDR_REVISION, (uint64_t)h->revision);
	w += proto_varint_field_put(out + w, HDR_RAFT_TERM, h->raft_term);
	return w;
}

/* The bytes of the KeyValue as sent: all of them, or without the value. */
static int kv_body_len(const struct mvcc_kv_ref *kv, bool keys_only, size_t *len)
{
	if (!keys_only) {
		*len = kv->kv_len;
		return 0;
	}
	if (mvcc_kv_stripped_len(kv->kv, kv->kv_len, len))
		return kvindex_corrupt("key bucket holds a malformed KeyValue (%zu bytes)",
				       kv->kv_len);
	return 0;
}

int kv_range_kv_len(const struct mvcc_kv_ref *kv, bool keys_only, size_t *len)
{
	size_t body;
	int rc = kv_body_len(kv, keys_only, &body);

	if (rc)
		return rc;
	*len = proto_bytes_field_len(RR_KVS, body);
	return 0;
}

size_t kv_range_kv_write(uint8_t *out, const struct mvcc_kv_ref *kv, bool keys_only)
{
	size_t body = 0;

	if (!keys_only)
		return proto_bytes_put(out, RR_KVS, kv->kv, kv->kv_len);
	/* kv_range_kv_len walked these fields already */
	(void)mvcc_kv_stripped_len(kv->kv, kv->kv_len, &body);
	size_t w = proto_bytes_head_put(out, RR_KVS, body);
	(void)mvcc_kv_strip_value(kv->kv, kv->kv_len, out + w, &body);
	return w + body;
}

size_t kv_range_tail_len(bool more, int64_t count)
{
	return proto_varint_field_len(RR_MORE, more) +
	       proto_varint_field_len(RR_COUNT, (uint64_t)count);
}

size_t kv_range_tail_write(uint8_t *out, bool more, int64_t count)
{
	size_t w = proto_varint_field_put(out, RR_MORE, more);

	return w + proto_varint_field_put(out + w, RR_COUNT, (uint64_t)count);
}

/* ---- streamed ---- */

void kv_range_stream_init(struct kv_range_stream *st)
{
	memset(st, 0, sizeof(*st));
	mvcc_range_walk_init(&st->w);
}

void kv_range_stream_free(struct kv_range_stream *st)
{
	mvcc_range_walk_free(&st->w);
}

int kv_range_stream_begin(struct kv_range_stream *st, struct mvcc_view *v,
			  const Etcdserverpb__RangeRequest *r, const struct gw_header *h)
{
	st->h = *h;
	st->keys_only = r->keys_only;
	st->stage = KVS_COUNT;
	st->held = false;
	st->total = kv_range_head_len(h);
	return mvcc_range_walk_begin(&st->w, v, r);
}

int kv_range_stream_count(struct kv_range_stream *st, size_t *budget, bool *done)
{
	struct mvcc_kv_ref kv;
	size_t len;
	int rc;

	*done = st->stage != KVS_COUNT;
	while (!*done && *budget > 0) {
		rc = mvcc_range_walk_next(&st->w, &kv, budget);
		if (rc == -EAGAIN)
			return 0;
		if (rc == -ENOENT) {
			st->total += kv_range_tail_len(st->w.more, st->w.count);
			mvcc_range_walk_rewind(&st->w);
			st->stage = KVS_HEAD;
			*done = true;
			return 0;
		}
		if (rc == 0)
			rc = kv_range_kv_len(&kv, st->keys_only, &len);
		if (rc)
			return rc;
		st->total += len;
	}
	return 0;
}

static void take(size_t *budget, size_t n)
{
	*budget = *budget > n ? *budget - n : 0;
}

int kv_range_stream_write(struct kv_range_stream *st, kv_range_sink sink, void *arg,
			  size_t *budget, bool *done)
{
	uint8_t *out;
	size_t len;
	int rc;

	while (st->stage != KVS_DONE && *budget > 0) {
		switch (st->stage) {
		case KVS_COUNT:
			return -EINVAL;
		case KVS_HEAD:
			len = kv_range_head_len(&st->h);
			if (!(out = sink(arg, len)))
				return -ENOMEM;
			kv_range_head_write(out, &st->h);
			take(budget, len);
			st->stage = KVS_KVS;
			break;
		case KVS_KVS:
			if (!st->held) {
				rc = mvcc_range_walk_next(&st->w, &st->kv, budget);
				if (rc == -EAGAIN)
					break;
				if (rc == -ENOENT) {
					st->stage = KVS_TAIL;
					break;
				}
				if (rc)
					return rc;
				st->held = true;
			}
			rc = kv_range_kv_len(&st->kv, st->keys_only, &len);
			if (rc)
				return rc;
			if (!(out = sink(arg, len)))
				return -ENOMEM;
			kv_range_kv_write(out, &st->kv, st->keys_only);
			st->held = false;
			/* the work is the KeyValue read, whatever of it is sent */
			take(budget, len > st->kv.kv_len ? len : st->kv.kv_len);
			break;
		case KVS_TAIL:
			len = kv_range_tail_len(st->w.more, st->w.count);
			if (len && !(out = sink(arg, len)))
				return -ENOMEM;
			if (len)
				kv_range_tail_write(out, st->w.more, st->w.count);
			st->stage = KVS_DONE;
			break;
		}
	}
	*done = st->stage == KVS_DONE;
	return 0;
}
