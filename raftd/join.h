/*
 * Joining a running cluster: --initial-cluster-state existing on a member
 * without a WAL, as etcd 3.4's NewServer does it (etcdserver/server.go,
 * the case "no WAL, not a new cluster"):
 *
 *   1. the flags must name this member in --initial-cluster, without a
 *      URL twice and without --discovery (VerifyJoinExisting);
 *   2. GET /members from the peer URLs of the other members named there,
 *      sorted, the first good answer wins: the running cluster's members
 *      and its id (the X-Etcd-Cluster-ID header)
 *      (GetClusterFromRemotePeers);
 *   3. every running member must match a member of --initial-cluster by
 *      its peer URLs, and takes that member's place with its id
 *      (ValidateClusterAndAssignIDs): this is how the member learns the id
 *      `etcdctl member add` gave it;
 *   4. at least one other member must report (GET /version) a cluster
 *      version this server supports, none one it does not
 *      (isCompatibleWithCluster).
 *
 * The WAL is then created with these ids and no bootstrap entries: the
 * Raft core starts with no peers, and the leader replicates its log,
 * ConfChanges included.
 */
#ifndef CETCD_RAFTD_JOIN_H
#define CETCD_RAFTD_JOIN_H

#include <stddef.h>
#include <stdint.h>

struct cetcd_config;
struct initial_cluster;
struct tls_ctx;

/*
 * Runs steps 1-4 for the member cfg describes. cluster holds
 * --initial-cluster as initial_cluster_parse made it; on success its ids
 * are the running cluster's, its members sorted by them, its cluster_id
 * the running cluster's, and *member_id is this member's. tls: the peer
 * client context (NULL without peer TLS). Each failure is logged as etcd
 * logs it, ending with etcd's fatal "discovery failed" line. Returns 0,
 * -EINVAL (the flags), -EHOSTUNREACH (no peer answered), -ENOENT (the
 * running cluster does not match --initial-cluster), -EPROTO (not a
 * compatible cluster version), -EINTR (a stop signal is pending), -ENOMEM.
 */
int join_cluster(const struct cetcd_config *cfg, struct tls_ctx *tls,
		 struct initial_cluster *cluster, uint64_t *member_id);

/* A peer's GET /version answer: its "etcdcluster" value, as
 * version.Versions decodes it, into out (NUL-terminated). 0, or -EBADMSG
 * (no such string in a JSON object). */
int join_parse_versions(const char *body, size_t len, char *cluster_version, size_t cap);

/* Major, minor and patch of a semantic version ("3.4.0"; a pre-release
 * or build suffix is ignored). 0 or -EINVAL. */
int join_parse_semver(const char *text, unsigned v[3]);

#endif
