/* The core's messages on the wire (see msgconv.h). */
#include "raftd/raft/msgconv.h"

#include <errno.h>
#include <string.h>

#include "raftd/alloc.h"

static const char msgconv_transfer[] = "CampaignTransfer";

void msgconv_scratch_free(struct msgconv_scratch *s)
{
	raftd_free(s->wents);
	raftd_free(s->cents);
	memset(s, 0, sizeof(*s));
}

static bool msgconv_read_ctx_type(int type)
{
	return type == RAFT_MSG_READ_INDEX || type == RAFT_MSG_READ_INDEX_RESP;
}

static bool msgconv_heartbeat_type(int type)
{
	return type == RAFT_MSG_HEARTBEAT || type == RAFT_MSG_HEARTBEAT_RESP;
}

int msgconv_to_wire(const struct raft_msg *m, struct msgconv_scratch *s, struct raftmsg *out)
{
	memset(out, 0, sizeof(*out));
	out->type = (int32_t)m->type;
	out->to = m->to;
	out->from = m->from;
	out->term = m->term;
	out->log_term = m->log_term;
	out->index = m->index;
	out->commit = m->commit;
	out->reject = m->reject;
	out->reject_hint = m->reject_hint;

	if (msgconv_read_ctx_type(m->type)) {
		raftmsg_read_ctx_put(s->ctx_entry, m->context);
		memset(&s->ctx_ent, 0, sizeof(s->ctx_ent));
		s->ctx_ent.has_data = true;
		s->ctx_ent.len = sizeof(s->ctx_entry);
		s->ctx_ent.data = s->ctx_entry;
		out->entries = &s->ctx_ent;
		out->n_entries = 1;
		return 0;
	}
	if (msgconv_heartbeat_type(m->type) && m->context) {
		raftmsg_read_ctx_put(s->ctx, m->context);
		out->has_context = true;
		out->context_len = sizeof(s->ctx);
		out->context = s->ctx;
	}
	if ((m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE) && m->transfer) {
		out->has_context = true;
		out->context_len = sizeof(msgconv_transfer) - 1;
		out->context = (const uint8_t *)msgconv_transfer;
	}
	if (m->n_entries) {
		if (raftd_reserve((void **)&s->wents, &s->cap_wents, m->n_entries,
				  sizeof(*s->wents), 16))
			return -ENOMEM;
		for (size_t i = 0; i < m->n_entries; i++) {
			const struct raft_entry *e = &m->entries[i];
			s->wents[i] = (struct raftmsg_entry){
				.term = e->term, .index = e->index, .type = (int32_t)e->type,
				.has_data = e->len > 0, .len = e->len, .data = e->data,
			};
		}
		out->entries = s->wents;
		out->n_entries = m->n_entries;
	}
	if (m->type == RAFT_MSG_SNAP) {
		out->snapshot.index = m->snap_index;
		out->snapshot.term = m->snap_term;
		if (m->snap_conf) {
			out->snapshot.conf_state.voters = m->snap_conf->voters;
			out->snapshot.conf_state.n_voters = m->snap_conf->n_voters;
			out->snapshot.conf_state.learners = m->snap_conf->learners;
			out->snapshot.conf_state.n_learners = m->snap_conf->n_learners;
		}
	}
	return 0;
}

int msgconv_from_wire(const struct raftmsg *w, struct msgconv_scratch *s, struct raft_msg *out)
{
	memset(out, 0, sizeof(*out));
	if (w->type < RAFT_MSG_PROP || w->type > RAFT_MSG_PRE_VOTE_RESP ||
	    w->type == RAFT_MSG_UNREACHABLE || w->type == RAFT_MSG_SNAP_STATUS ||
	    w->type == RAFT_MSG_CHECK_QUORUM)
		return -EINVAL;
	out->type = (enum raft_msg_type)w->type;
	out->to = w->to;
	out->from = w->from;
	out->term = w->term;
	out->log_term = w->log_term;
	out->index = w->index;
	out->commit = w->commit;
	out->reject = w->reject;
	out->reject_hint = w->reject_hint;

	if (msgconv_read_ctx_type(w->type)) {
		/* a context this member did not make reads as 0 (raft.h) */
		if (w->n_entries != 1 || raftmsg_read_ctx_get(w->entries[0].data,
							     w->entries[0].len, &out->context))
			out->context = 0;
		return 0;
	}
	if (msgconv_heartbeat_type(w->type) && w->has_context &&
	    raftmsg_read_ctx_get(w->context, w->context_len, &out->context))
		out->context = 0;
	if (w->type == RAFT_MSG_VOTE || w->type == RAFT_MSG_PRE_VOTE)
		out->transfer = raftmsg_is_campaign_transfer(w);
	if (w->n_entries) {
		if (raftd_reserve((void **)&s->cents, &s->cap_cents, w->n_entries,
				  sizeof(*s->cents), 16))
			return -ENOMEM;
		for (size_t i = 0; i < w->n_entries; i++) {
			const struct raftmsg_entry *e = &w->entries[i];
			if (e->len > UINT32_MAX)
				return -EINVAL;
			s->cents[i] = (struct raft_entry){
				.term = e->term, .index = e->index, .type = (uint32_t)e->type,
				.len = (uint32_t)e->len, .data = (uint8_t *)e->data,
			};
		}
		out->entries = s->cents;
		out->n_entries = w->n_entries;
	}
	if (w->type == RAFT_MSG_SNAP) {
		const struct raftmsg_conf_state *cs = &w->snapshot.conf_state;
		if (cs->n_voters > RAFT_MAX_MEMBERS || cs->n_learners > RAFT_MAX_MEMBERS)
			return -EINVAL;
		out->snap_index = w->snapshot.index;
		out->snap_term = w->snapshot.term;
		s->conf.n_voters = cs->n_voters;
		s->conf.n_learners = cs->n_learners;
		if (cs->n_voters)
			memcpy(s->conf.voters, cs->voters, cs->n_voters * sizeof(*cs->voters));
		if (cs->n_learners)
			memcpy(s->conf.learners, cs->learners, cs->n_learners * sizeof(*cs->learners));
		out->snap_conf = &s->conf;
	}
	return 0;
}
