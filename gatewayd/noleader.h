/* Calls that require a leader (etcd's clientv3.WithRequireLeader: the
 * gRPC metadata hasleader = "true"), as etcd 3.4's interceptors treat
 * them (v3rpc/interceptor.go):
 *
 * - while the member knows no leader (raftd's status record says leader
 *   0), such a call, unary or stream, is refused at once: UNAVAILABLE
 *   "etcdserver: no leader";
 * - a stream that came in is tagged (grpc_call_tag); while any tagged
 *   stream lives, the gateway looks at the record once per election
 *   timeout, and after GW_NOLEADER_CHECKS looks in a row without a
 *   leader it ends every tagged stream with that same status (its
 *   handler gets on_cancel with GRPC_CANCEL_SERVER).
 *
 * Calls without the metadata are never touched, and with no tagged
 * stream there is no timer at all. The JSON gateway's streams carry no
 * such metadata (grpc-gateway does not forward it), as in etcd.
 */
#ifndef CETCD_GATEWAYD_NOLEADER_H
#define CETCD_GATEWAYD_NOLEADER_H

#include <stdint.h>

struct gw_server;

/* etcd's maxNoLeaderCnt. */
#define GW_NOLEADER_CHECKS 3

/* Puts the admission check on the server's gRPC calls. */
void gw_noleader_init(struct gw_server *s);

/* Once per turn (the turn's monotonic s->now_ns): the check when it is
 * due. Returns when the next one is due, INT64_MAX when none is. */
int64_t gw_noleader_turn(struct gw_server *s);

#endif
