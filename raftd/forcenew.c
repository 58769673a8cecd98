/* --force-new-cluster: see forcenew.h. */
#include "raftd/forcenew.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/raft/raftmsg.h"
#include "cluster/member_json.h"

/* A sorted set of member ids. */
struct idset {
	uint64_t *v;
	size_t n, cap;
};

static size_t idset_find(const struct idset *s, uint64_t id, bool *found)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < s->n && s->v[lo] == id;
	return lo;
}

static int idset_add(struct idset *s, uint64_t id)
{
	bool found;
	size_t at = idset_find(s, id, &found);
	if (found)
		return 0;
	if (raftd_reserve((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 8))
		return -ENOMEM;
	memmove(s->v + at + 1, s->v + at, (s->n - at) * sizeof(*s->v));
	s->v[at] = id;
	s->n++;
	return 0;
}

static void idset_del(struct idset *s, uint64_t id)
{
	bool found;
	size_t at = idset_find(s, id, &found);
	if (!found)
		return;
	memmove(s->v + at, s->v + at + 1, (s->n - at - 1) * sizeof(*s->v));
	s->n--;
}

/* etcd's getIDs: the snapshot's voters, then every conf change of the
 * kept log in order (an UpdateNode changes nothing). */
static int members_named(const uint64_t *snap_voters, size_t n_snap_voters,
			 const struct raft_entry *ents, size_t n, struct idset *out)
{
	int rc = 0;
	for (size_t i = 0; i < n_snap_voters && !rc; i++)
		rc = idset_add(out, snap_voters[i]);
	for (size_t i = 0; i < n && !rc; i++) {
		struct raftmsg_conf_change cc;
		if (ents[i].type != RAFT_ENTRY_CONF_CHANGE)
			continue;
		if (raftmsg_conf_change_decode(ents[i].data, ents[i].len, &cc))
			return -EBADMSG;
		switch (cc.type) {
		case RAFTMSG_CONF_ADD_NODE:
		case RAFTMSG_CONF_ADD_LEARNER_NODE:
			rc = idset_add(out, cc.node_id);
			break;
		case RAFTMSG_CONF_REMOVE_NODE:
			idset_del(out, cc.node_id);
			break;
		case RAFTMSG_CONF_UPDATE_NODE:
			break;
		default:
			return -EBADMSG; /* etcd panics on an unknown type */
		}
	}
	return rc;
}

/* One EntryConfChange entry for cc at (term, index), its data from
 * raftd_malloc. */
static int conf_entry(const struct raftmsg_conf_change *cc, uint64_t term, uint64_t index,
		      struct raft_entry *out)
{
	size_t len = raftmsg_conf_change_size(cc);
	uint8_t *data = raftd_malloc(len);
	if (!data)
		return -ENOMEM;
	raftmsg_conf_change_encode(cc, data);
	*out = (struct raft_entry){
		.term = term, .index = index, .type = RAFT_ENTRY_CONF_CHANGE,
		.len = (uint32_t)len, .data = data,
	};
	return 0;
}

int forcenew_apply(uint64_t self, const uint64_t *snap_voters, size_t n_snap_voters,
		   uint64_t snap_index, struct raft_hardstate *hs, struct raft_entry **ents,
		   size_t *n, struct forcenew_result *res)
{
	struct raft_entry *e = *ents;
	size_t keep = 0;
	while (keep < *n && e[keep].index <= hs->commit)
		keep++;
	uint64_t last = keep ? e[keep - 1].index : snap_index;
	if (last != hs->commit && hs->commit > snap_index)
		return -EBADMSG; /* the log does not reach its own commit index */

	struct idset ids = { 0 };
	int rc = members_named(snap_voters, n_snap_voters, e, keep, &ids);
	bool self_named = false;
	if (!rc)
		idset_find(&ids, self, &self_named);
	size_t n_add = ids.n - (self_named ? 1 : 0) + (self_named ? 0 : 1);
	struct raft_entry *added = NULL;
	if (!rc && !(added = calloc(n_add ? n_add : 1, sizeof(*added))))
		rc = -ENOMEM;

	/* AddNode for itself when the log does not make it a member, with
	 * the context etcd gives it (an id and etcd's default peer URL) */
	uint64_t next = last + 1;
	size_t k = 0;
	if (!rc && !self_named) {
		char *default_url = "http://localhost:2380";
		struct member_info m = { .id = self, .n_peer_urls = 1, .peer_urls = &default_url };
		char *ctx = NULL;
		size_t ctx_len = 0;
		rc = member_json_encode(&m, &ctx, &ctx_len);
		if (!rc) {
			struct raftmsg_conf_change cc = {
				.type = RAFTMSG_CONF_ADD_NODE, .node_id = self, .has_context = true,
				.context_len = ctx_len, .context = (const uint8_t *)ctx,
			};
			rc = conf_entry(&cc, hs->term, next++, &added[k]);
			if (!rc)
				k++;
		}
		free(ctx);
	}
	for (size_t i = 0; i < ids.n && !rc; i++) {
		if (ids.v[i] == self)
			continue;
		struct raftmsg_conf_change cc = { .type = RAFTMSG_CONF_REMOVE_NODE,
						  .node_id = ids.v[i] };
		rc = conf_entry(&cc, hs->term, next++, &added[k]);
		if (!rc)
			k++;
	}
	raftd_free(ids.v);

	struct raft_entry *out = NULL;
	if (!rc && !(out = raftd_malloc((keep + k ? keep + k : 1) * sizeof(*out))))
		rc = -ENOMEM;
	if (rc) {
		for (size_t i = 0; i < k; i++)
			raftd_free(added[i].data);
		free(added);
		return rc;
	}
	/* only now is anything changed: the committed entries move over, the
	 * uncommitted tail is freed, the new entries follow */
	memcpy(out, e, keep * sizeof(*e));
	memcpy(out + keep, added, k * sizeof(*added));
	for (size_t i = keep; i < *n; i++)
		raftd_free(e[i].data);
	raftd_free(e);
	free(added);
	res->n_dropped = *n - keep;
	res->first_added = keep;
	res->n_added = k;
	*ents = out;
	*n = keep + k;
	if (k)
		hs->commit = out[keep + k - 1].index;
	return 0;
}
