/*
 * etcd 3.4's v2 store as JSON: what etcd puts in a raftpb.Snapshot's Data
 * (v2store's Save) and recovers its membership from when it starts from a
 * .snap file or applies a snapshot from its leader (Recovery, then
 * RaftCluster.Recover). Only the membership part is cetcd's to keep; the
 * layout is etcdserver/api/membership's:
 *
 *   /0/members/<id hex>/raftAttributes  {"peerURLs":[...],"isLearner":true}
 *   /0/members/<id hex>/attributes      {"name":"...","clientURLs":[...]}
 *   /0/removed_members/<id hex>         ""
 *   /0/version                          "3.4.0"
 *   /1                                  etcd's v2 keys (none in a v3 cluster)
 *
 * The encoder writes what Go's encoding/json makes of a store holding
 * that membership (fields in the struct's order, map keys sorted, an
 * empty event history of etcd's 1000 slots, zero statistics), so that
 * etcd's Recovery takes it as one of its own. The decoder accepts what
 * Go's json.Unmarshal into the store accepts for these paths (keys in any
 * case and order, white space, unknown keys) and refuses, with -EBADMSG,
 * what would make etcd panic as it recovers the members (an id that is
 * not hex, an unknown key under a member, an attribute that is not JSON,
 * a bad version).
 */
#ifndef CETCD_CLUSTER_V2STORE_H
#define CETCD_CLUSTER_V2STORE_H

#include <stddef.h>

#include "cluster/membership.h"

/*
 * The v2 store JSON of membership m into *out (malloc'ed, NUL-terminated,
 * *len bytes without the NUL; the caller frees it). 0 or -ENOMEM.
 */
int v2store_encode(const struct membership *m, char **out, size_t *len);

/*
 * The membership held by v2 store JSON p[0..len), into out (the caller's,
 * initialised with membership_init; what it held is replaced only on
 * success). 0, -EBADMSG (not a store etcd would recover; nothing
 * changed), -ENOMEM.
 */
int v2store_decode(const void *p, size_t len, struct membership *out);

#endif
