/* RangeResponse encoding in gatewayd, by hand: whole, for an answer that
 * fits in memory, or streamed, for one that does not.
 *
 * A RangeResponse is {1 header, 2 kvs (repeated), 3 more, 4 count}. Each
 * kvs field carries a stored KeyValue's bytes as they are
 * (docs/design.md: stored bytes are encoded once); a keys_only answer
 * copies every field of them but the value, whose bytes are never read.
 * Fields go in number order, zero values left out and the header always
 * present, as etcd's marshaller writes them.
 *
 * A gRPC message carries its length before its first byte, so a streamed
 * answer is walked twice over one read txn (stored/mvcc/mvcc.h,
 * mvcc_range_walk): kv_range_stream_count measures it, a step at a time,
 * and kv_range_stream_write then writes it, a step at a time, into
 * whatever room its sink gives. Nothing of the answer is held between
 * steps but the walk's position.
 */
#ifndef CETCD_GATEWAYD_KV_RANGE_H
#define CETCD_GATEWAYD_KV_RANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/server.h"
#include "stored/mvcc/mvcc.h"

/* The parts of a RangeResponse: the header field, one kvs field, the
 * more and count fields. _len gives the bytes, _write writes them to out
 * (room for _len bytes) and returns the bytes written. kv_range_kv_len
 * returns -EUCLEAN (errmsg_get names it) for a keys_only KeyValue whose
 * fields it cannot walk. */
size_t kv_range_head_len(const struct gw_header *h);
size_t kv_range_head_write(uint8_t *out, const struct gw_header *h);
int kv_range_kv_len(const struct mvcc_kv_ref *kv, bool keys_only, size_t *len);
size_t kv_range_kv_write(uint8_t *out, const struct mvcc_kv_ref *kv, bool keys_only);
size_t kv_range_tail_len(bool more, int64_t count);
size_t kv_range_tail_write(uint8_t *out, bool more, int64_t count);

/* Where a streamed answer goes: room for len more bytes of it, written
 * before the next call, or NULL (out of memory, or the call is gone). */
typedef uint8_t *(*kv_range_sink)(void *arg, size_t len);

/*
 * A streamed RangeResponse over a view that stays open (and r unchanged)
 * until kv_range_stream_free.
 *   init once; begin: the walk's errors (MVCC_ERR_* of the revision);
 *   count: walks up to *budget keys (each takes one); *done once `total`
 *     (the message's bytes) is known;
 *   write: writes into sink until about *budget is spent (a KeyValue
 *     takes its stored bytes or the bytes written, whichever is more; a
 *     key walked takes one more); *done once all of total is written.
 * Errors of count and write: the walk's (-EUCLEAN, B+tree errors),
 * -ENOMEM when the sink gives no room.
 */
struct kv_range_stream {
	struct mvcc_range_walk w;
	struct gw_header h;
	uint64_t total;          /* bytes of the message, once counted */
	/* private */
	int stage;
	bool keys_only;
	bool held;               /* kv was walked and not yet written */
	struct mvcc_kv_ref kv;
};
void kv_range_stream_init(struct kv_range_stream *st);
int kv_range_stream_begin(struct kv_range_stream *st, struct mvcc_view *v,
			  const Etcdserverpb__RangeRequest *r, const struct gw_header *h);
int kv_range_stream_count(struct kv_range_stream *st, size_t *budget, bool *done);
int kv_range_stream_write(struct kv_range_stream *st, kv_range_sink sink, void *arg,
			  size_t *budget, bool *done);
void kv_range_stream_free(struct kv_range_stream *st);

#endif
