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
 * A RangeResponse is encoded by hand (kv_range.h): each stored KeyValue's
 * bytes are copied into the response as they are (docs/design.md: stored
 * bytes are encoded once), without decoding and re-encoding them. A Range
 * with a large answer is streamed from a read txn of its own as the
 * client's flow-control window allows (kv.c: Ranges answered over several
 * turns), so that a gatewayd never holds an answer whole.
 */
#ifndef CETCD_GATEWAYD_KV_H
#define CETCD_GATEWAYD_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gatewayd/server.h"

/* Frees what kv_register set up (kv_register is in server.h). */
void kv_fini(struct gw_server *s);

#endif
