/* The engine under etcd's v3lock and v3election services (v3lock.c,
 * v3election.c): each call in progress is an op, a small state machine on
 * the event loop, which takes its steps through cetcd's own paths.
 *
 *   - writes (the Txns of etcd's clientv3/concurrency, a lease grant) are
 *     proposals whose result comes back to the op (conc_propose), not to
 *     the client;
 *   - reads are linearizable reads of the db (conc_read);
 *   - waits ("until the keys created before mine are deleted", "until the
 *     leader changes") are level-triggered: a waiting op holds the watch
 *     event ring (watch_hold), whose events wake the loop, and conc_turn
 *     hands it a read of the store whenever stored published a new
 *     revision; the op decides from what the store holds then, so a lapped
 *     event ring or a restarted stored loses nothing.
 *
 * An op lives until it answers (conc_answer, conc_fail), its call is
 * cancelled (the client went away, its deadline passed: vt->abandon undoes
 * what etcd's client-side code undoes), or its call was ended by the rings
 * (a request timeout): conc_turn sweeps those. A gatewayd restart drops
 * its ops; keys they made stay until their lease expires, as in etcd.
 *
 * Single-threaded, on the loop's thread.
 */
#ifndef CETCD_GATEWAYD_CONC_H
#define CETCD_GATEWAYD_CONC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/dlist.h"
#include "gatewayd/server.h"

struct mvcc_view;
struct conc_op;

struct conc_vt {
	/* stored's result of the op's proposal: status 0 and the response
	 * bytes, else etcd's status and text (already sent to nobody: the op
	 * answers). Valid during the call only. */
	void (*result)(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		       int32_t status, const uint8_t *body, size_t len);
	/* A read of the store at revision rev: after conc_read, or for a
	 * waiting op after stored published a revision >= its min_rev. */
	void (*check)(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		      struct mvcc_view *v, int64_t rev);
	/* The call ended while the op waited (client gone, deadline): undo
	 * (may be NULL). No call to answer. */
	void (*abandon)(struct gw_server *s, struct conc_op *op);
};

/* The head of every op; the service's own fields follow it in one block
 * (freed with free()). */
struct conc_op {
	const struct conc_vt *vt;
	struct dlist node;   /* the gatewayd's ops, newest first */
	uint64_t id;         /* never reused within the process */
	uint64_t call_id;
	int64_t min_rev;     /* a waiting op is checked at revisions >= it only */
	bool waiting;
	int step;            /* the service's */
};

/* The handler of a method's one request message (call HANDLED already). */
typedef void (*conc_start_fn)(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			      size_t len);

/* Serves path with start; the call's cancel reaches its op. 0 or -ENOMEM. */
int conc_handle(struct gw_server *s, const char *path, conc_start_fn start);

/* A new op of size bytes (zeroed past the head) for call; NULL after
 * answering the call "out of memory". */
struct conc_op *conc_op_new(struct gw_server *s, struct grpc_call *call,
			    const struct conc_vt *vt, size_t size);

/* Answers call with m (OK) or an error, and frees op (conc_answer after
 * encoding m, which may point into op). */
void conc_answer(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		 const ProtobufCMessage *m);
void conc_fail(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
	       enum grpc_status code, const char *text);
/* conc_fail with stored's error text (len bytes), as etcd's servers pass
 * it on: code Unknown, whatever stored's status. */
void conc_fail_result(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		      int32_t status, const uint8_t *text, size_t len);

/* Proposes req (an InternalRaftRequest field: Txn 6, DeleteRange 5,
 * LeaseGrant 8) for op; its result goes to op->vt->result. */
void conc_propose(struct gw_server *s, struct grpc_call *call, struct conc_op *op,
		  uint32_t field, const ProtobufCMessage *req);
/* The same for nobody: the answer is dropped (an undo). */
void conc_propose_orphan(struct gw_server *s, uint32_t field, const ProtobufCMessage *req);
/* A LeaseGrant of etcd's default session TTL (60 s) with a new ID, as
 * etcd's servers grant one for a request without a lease. */
void conc_grant(struct gw_server *s, struct grpc_call *call, struct conc_op *op);
#define CONC_SESSION_TTL 60

/* A linearizable read, then op->vt->check. */
void conc_read(struct gw_server *s, struct grpc_call *call, struct conc_op *op);
/* op waits: checked now (next turn) and at each new revision >= min_rev. */
void conc_wait(struct gw_server *s, struct conc_op *op, int64_t min_rev);

/* InternalRaftRequest fields. */
enum { CONC_IRR_DELETE_RANGE = 5, CONC_IRR_TXN = 6, CONC_IRR_LEASE_GRANT = 8 };

/* ---- building requests (memory: the turn's scratch) ---- */

/* etcd's prefix range end of key: "\0" when every byte is 0xff. */
ProtobufCBinaryData conc_prefix_end(struct gw_server *s, ProtobufCBinaryData key);
/* Writes lease as etcd's fmt "%x" of an int64 writes it (a session's key
 * is <prefix>/<that>) to out; returns its length. */
#define CONC_LEASE_HEX_MAX 24
size_t conc_lease_hex(int64_t lease, char out[CONC_LEASE_HEX_MAX]);
/* Bytes a then b, in scratch. */
ProtobufCBinaryData conc_cat(struct gw_server *s, const void *a, size_t alen, const void *b,
			     size_t blen);
/* Compare create_revision(key) == rev. */
Etcdserverpb__Compare *conc_cmp_create(struct gw_server *s, ProtobufCBinaryData key, int64_t rev);
Etcdserverpb__RequestOp *conc_op_put(struct gw_server *s, ProtobufCBinaryData key,
				     ProtobufCBinaryData value, int64_t lease);
Etcdserverpb__RequestOp *conc_op_get(struct gw_server *s, ProtobufCBinaryData key);
Etcdserverpb__RequestOp *conc_op_delete(struct gw_server *s, ProtobufCBinaryData key);
/* etcd's WithFirstCreate on prefix pfx: the key created first. */
Etcdserverpb__RequestOp *conc_op_first_create(struct gw_server *s, ProtobufCBinaryData pfx);
void conc_range_first_create(struct gw_server *s, ProtobufCBinaryData pfx,
			     Etcdserverpb__RangeRequest *r);

/* Runs r on v; *kvs (n of them) unpacked into the turn's arena. 0, or
 * mvcc_range's error. */
int conc_range(struct gw_server *s, struct mvcc_view *v, const Etcdserverpb__RangeRequest *r,
	       Mvccpb__KeyValue ***kvs, size_t *n);
/* Whether key exists at v. Negative on a read error. */
int conc_exists(struct gw_server *s, struct mvcc_view *v, ProtobufCBinaryData key);
/* The first kv of a Txn's i-th response if it is a range with kvs, else NULL. */
Mvccpb__KeyValue *conc_txn_kv(const Etcdserverpb__TxnResponse *t, size_t i);

int v3lock_register(struct gw_server *s);
int v3election_register(struct gw_server *s);

#endif
