/*
 * etcd's --initial-cluster: the members a new cluster starts with, each
 * with the id etcd derives from its peer URLs and the cluster token
 * (member.h), and the cluster id over them.
 */
#ifndef CETCD_CLUSTER_INITIAL_CLUSTER_H
#define CETCD_CLUSTER_INITIAL_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "cluster/member.h"

/* The members of --initial-cluster, in the order of their ids, and the
 * cluster id. Owned by the struct; initial_cluster_free frees it. */
struct initial_cluster {
	uint64_t cluster_id;
	size_t count;
	struct member_info *v;
};

/*
 * Parses an --initial-cluster value ("name=url,name=url,..."; a name may
 * repeat, one URL each time, as etcd's URLsMap) with the token, and
 * computes every member's id and the cluster id. URLs are trimmed and
 * their scheme lower-cased, as the configuration's parser keeps them; the
 * configuration has already refused malformed ones. Returns 0, -EINVAL
 * (an entry without '=' or an empty list), -EEXIST (two members with the
 * same id, which etcd refuses too), or -ENOMEM.
 */
int initial_cluster_parse(const char *initial_cluster, const char *token,
			  struct initial_cluster *out);

/* The member named name, or NULL. */
const struct member_info *initial_cluster_find(const struct initial_cluster *c, const char *name);

/* Frees what c owns and zeroes it. */
void initial_cluster_free(struct initial_cluster *c);

#endif
