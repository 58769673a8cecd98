/* The etcdserverpb.KV service in gatewayd: Range, Put, DeleteRange, Txn,
 * Compact, as etcd 3.4's v3rpc serves them.
 *
 * Requests are checked as etcd's gRPC layer checks them (stored/mvcc/mvcc.h's
 * mvcc_validate_*, with etcd's codes and messages). Writes (Put,
 * DeleteRange, a Txn with a write, Compact) go to raftd as proposals
 * (gw_propose); stored's result is the encoded response and goes back to
 * the client as it is. Reads (Range, a Txn of ranges only) are served in
 * this process from the db: at once when serializable, after a read index
 * (gw_read_linearizable) otherwise. Serializable Ranges of one key wait
 * for the end of the loop turn (kv_turn), where the keys of all of them are
 * looked up together and each is answered from one view.
 *
 * A RangeResponse is encoded here by hand: each stored KeyValue's bytes
 * are copied into the response as they are (docs/design.md: stored bytes
 * are encoded once), without decoding and re-encoding them.
 */
#ifndef CETCD_GATEWAYD_KV_H
#define CETCD_GATEWAYD_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/server.h"

/* One encoded mvccpb.KeyValue. */
struct kv_bytes {
	const uint8_t *p;
	size_t len;
};

/* Bytes of the RangeResponse {header h, kvs[0..n), more, count}, encoded
 * as etcd's marshaller does (fields in order, zero values left out, the
 * header always present). */
size_t kv_range_size(const struct gw_header *h, const struct kv_bytes *kvs, size_t n, bool more,
		     int64_t count);

/* Writes that RangeResponse to out (room for kv_range_size bytes);
 * returns the bytes written. */
size_t kv_range_write(uint8_t *out, const struct gw_header *h, const struct kv_bytes *kvs,
		      size_t n, bool more, int64_t count);

/* Frees what kv_register set up (kv_register is in server.h). */
void kv_fini(struct gw_server *s);

#endif
