/*
 * Member and cluster IDs, derived as etcd 3.4 derives them for a new
 * cluster (etcdserver/api/membership), so that clients and tools see the
 * numbers etcd would print for the same flags:
 *
 *   member id  = the first 8 bytes, big-endian, of
 *                sha1(peer URLs sorted and concatenated, then the cluster
 *                token)
 *   cluster id = the first 8 bytes, big-endian, of
 *                sha1(the member ids sorted ascending, 8 bytes big-endian
 *                each)
 *
 * The peer URLs are the canonical texts of --initial-cluster's entries
 * ("http://10.0.0.1:2380"); the token is --initial-cluster-token.
 */
#ifndef CETCD_CLUSTER_MEMBER_H
#define CETCD_CLUSTER_MEMBER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cetcd_config;

/* SHA-1 of len bytes (FIPS 180-4), into out. */
void member_sha1(const void *data, size_t len, uint8_t out[20]);

/* etcd's member id for these peer URLs (any order; they are sorted here,
 * byte-wise as Go's sort.Strings) and token. Returns 0 and sets *id, or
 * -ENOMEM. */
int member_id_compute(const char *const *peer_urls, size_t n, const char *token, uint64_t *id);

/* etcd's cluster id over n member ids (any order). */
uint64_t member_cluster_id(const uint64_t *ids, size_t n);

/* Sorts n URL strings byte-wise, as Go's sort.Strings. */
void member_urls_sort(char **v, size_t n);

/* One member: of the initial cluster, or as etcd's membership.Member
 * carries it (member_json.h). Strings and arrays are malloc'ed and owned
 * by the struct (member_info_clear frees them). */
struct member_info {
	char *name;           /* "" or NULL before the member published */
	uint64_t id;
	size_t n_peer_urls;
	char **peer_urls;     /* canonical texts, sorted */
	size_t n_client_urls;
	char **client_urls;   /* as the member published them */
	bool is_learner;
};

/* Frees what m owns and zeroes it. */
void member_info_clear(struct member_info *m);

/*
 * Peer URLs of a MemberAdd or MemberUpdate, checked and ordered as etcd's
 * types.NewURLs does (http, https, unix or unixs with host:port and no
 * path; sorted): their canonical texts into *out (n of them, malloc'ed;
 * free each and the array). Returns 0, -EINVAL (a URL etcd refuses: the
 * Cluster service answers "etcdserver: given member URLs are invalid") or
 * -ENOMEM.
 */
int member_peer_urls(char *const *in, size_t n, char ***out);

/* etcd's id for a member added at unix time now_s (membership.NewMember:
 * the sorted peer URLs, then the time in decimal, through SHA-1). */
int member_id_added(char *const *peer_urls, size_t n, int64_t now_s, uint64_t *id);

/* Go's %v of a []string ("[a b c]"), for etcd's log and error texts;
 * cut to cap bytes with its NUL. */
void member_strings_text(char *const *v, size_t n, char *out, size_t cap);

/*
 * This member's id and the cluster id from a parsed configuration
 * (--name, --initial-cluster, --initial-cluster-token). Returns 0, -ENOENT
 * if --initial-cluster does not name this member, or an error of
 * initial_cluster_parse.
 */
int member_ids_from_config(const struct cetcd_config *c, uint64_t *member_id,
			   uint64_t *cluster_id);

struct shm_region;

/*
 * The start-up step every daemon shares: member_ids_from_config, with an
 * error line naming --initial-cluster and --name when the ids cannot be
 * derived (the daemon then exits with CONFIG_EXIT_FATAL: restarting it
 * cannot help), and a warning when the region r (may be NULL) records
 * another member id. Returns 0 or the error of member_ids_from_config.
 */
int member_ids_load(const struct cetcd_config *c, struct shm_region *r, uint64_t *member_id,
		    uint64_t *cluster_id);

/*
 * The ids stored and gatewayd serve with: the ones raftd resolved and
 * published in the region r (shm_region_set_ids: its WAL's on a restart,
 * the joined cluster's with --initial-cluster-state existing, the flags'
 * for a new cluster), as etcd trusts its WAL over the flags. Waits until
 * raftd has published them (a restarted stored or gatewayd finds them at
 * once), logging now and then while it waits; says so at info level when
 * they are not the ones --initial-cluster derives. Returns 0, or -EINTR
 * when a stop signal (config_stop_signals) is pending while it waits.
 */
int member_ids_wait(const struct cetcd_config *c, struct shm_region *r, uint64_t *member_id,
		    uint64_t *cluster_id);

#endif
