/* Messages from the Raft core to peers (see outbox.h). */
#include "raftd/outbox.h"

#include <errno.h>
#include <string.h>

#include "base/clock/clock.h"
#include "raftd/alloc.h"
#include "raftd/peer/peer.h"
#include "base/log/log.h"


void outbox_init(struct outbox *o, struct peer *peer)
{
	memset(o, 0, sizeof(*o));
	o->peer = peer;
}

void outbox_free(struct outbox *o)
{
	for (size_t i = 0; i < o->n_held; i++)
		raftd_free(o->held[i].block);
	raftd_free(o->held);
	msgconv_scratch_free(&o->conv);
	memset(o, 0, sizeof(*o));
}

int outbox_send(struct outbox *o, const struct raft_msg *m)
{
	struct raftmsg w;

	if (m->type == RAFT_MSG_SNAP)
		return -ENOTSUP;
	int rc = msgconv_to_wire(m, &o->conv, &w);
	if (!rc)
		rc = peer_send(o->peer, &w);
	if (rc) {
		o->failed++;
		if (m->type == RAFT_MSG_HEARTBEAT)
			shm_metric_add(o->metrics, SHM_M_HEARTBEAT_FAILURES, 1);
		return rc;
	}
	o->sent++;
	struct shm_metrics_peer *mp = shm_metrics_peer(o->metrics, m->to);
	if (mp) {
		shm_metric_bump(&mp->sent_bytes, raftmsg_size(&w));
		if (m->type == RAFT_MSG_HEARTBEAT)
			o->heartbeat_ns[mp - o->metrics->peer] = clock_now_ns();
	}
	return 0;
}

void outbox_heartbeat_answered(struct outbox *o, uint64_t from)
{
	struct shm_metrics_peer *mp = shm_metrics_peer(o->metrics, from);
	if (!mp)
		return;
	int64_t *sent = &o->heartbeat_ns[mp - o->metrics->peer];
	if (*sent) {
		shm_metrics_observe(&mp->rtt, SHM_H_PEER_RTT, (uint64_t)(clock_now_ns() - *sent));
		*sent = 0;
	}
}

int outbox_hold(struct outbox *o, const struct raft_msg *m, uint64_t seq)
{
	size_t bytes = m->n_entries * sizeof(struct raft_entry);
	for (size_t i = 0; i < m->n_entries; i++)
		bytes += m->entries[i].len;
	if (raftd_reserve((void **)&o->held, &o->cap_held, o->n_held + 1, sizeof(*o->held), 16))
		return -ENOMEM;
	struct outbox_msg *h = &o->held[o->n_held];
	h->seq = seq;
	h->m = *m;
	h->block = NULL;
	/* a held snapshot message keeps no pointer into the core */
	h->m.snap_conf = NULL;
	if (m->n_entries) {
		h->block = raftd_malloc(bytes);
		if (!h->block)
			return -ENOMEM;
		struct raft_entry *ents = h->block;
		uint8_t *data = (uint8_t *)(ents + m->n_entries);
		for (size_t i = 0; i < m->n_entries; i++) {
			ents[i] = m->entries[i];
			if (ents[i].len) {
				memcpy(data, m->entries[i].data, ents[i].len);
				ents[i].data = data;
				data += ents[i].len;
			}
		}
		h->m.entries = ents;
	}
	o->n_held++;
	return 0;
}

/* Whether held message i of the first n is an append acknowledgement
 * that a later one among them makes redundant: a leader learns nothing
 * from an accepted MsgAppResp once it has one of the same term for the
 * same or a higher index (etcd's leader only moves a follower's match
 * forward). Rejections are always sent: each carries its own hint. */
static bool outbox_superseded(const struct outbox *o, size_t i, size_t n)
{
	const struct raft_msg *m = &o->held[i].m;

	if (m->type != RAFT_MSG_APP_RESP || m->reject)
		return false;
	for (size_t j = i + 1; j < n; j++) {
		const struct raft_msg *later = &o->held[j].m;
		if (later->type == RAFT_MSG_APP_RESP && !later->reject && later->to == m->to &&
		    later->term == m->term && later->index >= m->index)
			return true;
	}
	return false;
}

void outbox_release(struct outbox *o, uint64_t durable)
{
	size_t n = 0;
	while (n < o->n_held && o->held[n].seq <= durable)
		n++;
	for (size_t k = 0; k < n; k++) {
		if (outbox_superseded(o, k, n)) {
			o->superseded++;
		} else {
			int rc = outbox_send(o, &o->held[k].m);
			if (rc && rc != -ENOENT)
				log_debug("a message to a peer was not sent",
					  LOG_U64("to", o->held[k].m.to),
					  LOG_U64("type", o->held[k].m.type), LOG_ERRNO(rc));
		}
		raftd_free(o->held[k].block);
	}
	if (n) {
		memmove(o->held, o->held + n, (o->n_held - n) * sizeof(*o->held));
		o->n_held -= n;
	}
}
