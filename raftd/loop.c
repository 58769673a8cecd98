/* raftd's event loop (see loop.h; its snapshots are in loop_snap.c, the
 * struct both share in loop_int.h). */
#include "raftd/loop.h"
#include "base/clock/clock.h"
#include "raftd/loop_int.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "raftd/alloc.h"
#include "raftd/bootstrap.h"
#include "raftd/feed.h"
#include "raftd/roster.h"
#include "raftd/outbox.h"
#include "raftd/lease_fwd.h"
#include "raftd/promote.h"
#include "raftd/peer/peer.h"
#include "raftd/wal/snapwrite.h"
#include "raftd/proposals.h"
#include "base/diskio/diskio.h"
#include "config/config.h"
#include "shm/doorbell.h"
#include "base/log/log.h"
#include "cluster/initial_cluster.h"
#include "cluster/member.h"
#include "cluster/v2store.h"
#include "shm/msg.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "shm/status.h"
#include "shm/waker.h"

/* MSG_COMMITTED records pushed per pump, so that a long backlog does not
 * hold up a turn. */
#define LOOP_PUMP_MAX 4096u
/* Readies taken per turn: taking one makes another only when it changed
 * the core (a commit noticed, a read answered); a bound all the same. */
#define LOOP_READIES_MAX 8
/* The longest a snapshot send may hold compaction back. */
#define LOOP_SNAP_SEND_MAX_MS (3600u * 1000u)
/* etcd's raft settings (etcdserver/raft.go). */
#define LOOP_MAX_MSG_BYTES (1u << 20)
#define LOOP_MAX_INFLIGHT 512u
/* What the applied log may hold when the options do not say (the default
 * of --raft-log-mib, config/flags.c). */
#define LOOP_RAFT_LOG_BYTES (64ull << 20)

enum loop_tag {
	TAG_TIMER = 1, TAG_WAL, TAG_WAKER, TAG_SIGNAL, TAG_STOP,
	TAG_PEER,      /* peer_event_fd: events no turn took yet (from the
			* forwarding threads, or queued by peer_run) */
	TAG_PEER_IO,   /* peer_poll_fd: the transport's sockets and wake-ups */
	TAG_SNAPW,
};

/* ---- the doorbell bridge ---- */

/* The bridge's has_work (called on its thread): requests wait on the
 * rings, or stored's epoch moved since the loop last looked. */
static bool loop_has_work(void *arg)
{
	struct loop *l = arg;
	struct status_stored st;

	if (proposals_waiting(l->r))
		return true;
	return status_stored_read(l->r, &st) == 0 &&
	       st.epoch != atomic_load_explicit(&l->waker_epoch, memory_order_relaxed);
}

/* ---- WAL bookkeeping ---- */

/* Notes that the entries of a ready, ending at (index, term), went into
 * the WAL batch seq. A later save into the same batch replaces the note:
 * the batch's last entry covers everything before it. */
static int persist_note(struct loop *l, uint64_t seq, uint64_t index, uint64_t term)
{
	if (l->n_persist && l->persist[l->n_persist - 1].seq == seq) {
		l->persist[l->n_persist - 1] = (struct loop_persist){ seq, index, term };
		return 0;
	}
	if (raftd_reserve((void **)&l->persist, &l->cap_persist, l->n_persist + 1,
			  sizeof(*l->persist), 8))
		return -ENOMEM;
	l->persist[l->n_persist++] = (struct loop_persist){ seq, index, term };
	return 0;
}

/* Tells the core what the WAL made durable. */
static void persist_done(struct loop *l)
{
	uint64_t durable = wal_durable_seq(l->wal);
	size_t k = 0;

	while (k < l->n_persist && l->persist[k].seq <= durable) {
		raft_persisted(l->raft, l->persist[k].index, l->persist[k].term);
		k++;
	}
	if (l->peer)
		outbox_release(&l->outbox, durable);
	loop_maybe_purge_wal(l);
	loop_maybe_install(l);
	if (k == 0)
		return;
	memmove(l->persist, l->persist + k, (l->n_persist - k) * sizeof(*l->persist));
	l->n_persist -= k;
}

void loop_fail(struct loop *l, int rc, const char *what)
{
	if (l->fatal)
		return;
	l->fatal = rc;
	log_error(what, LOG_ERRNO(rc));
}

/* Collects a finished WAL batch (the WAL submits the next one itself). */
static void reap_wal(struct loop *l)
{
	uint64_t v;

	/* drained here too, so that a stray signal never keeps it readable */
	while (read(wal_event_fd(l->wal), &v, sizeof(v)) < 0 && errno == EINTR)
		;
	int rc = wal_reap(l->wal);
	if (rc < 0) {
		loop_fail(l, rc, "the WAL failed; raftd stops and must be restarted to replay it");
		return;
	}
	if (rc > 0) {
		l->stats.wal_batches += (uint64_t)rc;
		persist_done(l);
	}
}

/* ---- ready ---- */

static void log_leader_change(struct loop *l, uint64_t prev_lead, const struct raft_ready *rd)
{
	char msg[160];
	uint64_t term = raft_term(l->raft);

	static const char *const role_names[] = {
		[RAFT_FOLLOWER] = "follower", [RAFT_PRE_CANDIDATE] = "pre-candidate",
		[RAFT_CANDIDATE] = "candidate", [RAFT_LEADER] = "leader",
	};
	/* etcd's raft logs each change of role, and a new term as a follower */
	if (rd->role != l->role_seen || (rd->role == RAFT_FOLLOWER && term != l->term_seen)) {
		snprintf(msg, sizeof(msg), "%" PRIx64 " became %s at term %" PRIu64, l->member_id,
			 role_names[rd->role], term);
		log_info(msg);
		l->role_seen = rd->role;
		l->term_seen = term;
	}
	if (rd->leader == prev_lead)
		return;
	if (rd->leader)
		snprintf(msg, sizeof(msg), "raft.node: %" PRIx64 " elected leader %" PRIx64
			 " at term %" PRIu64, l->member_id, rd->leader, term);
	else
		snprintf(msg, sizeof(msg), "raft.node: %" PRIx64 " lost leader %" PRIx64
			 " at term %" PRIu64, l->member_id, prev_lead, term);
	log_info(msg);
}

/* ---- moving the leader (Maintenance.MoveLeader) ---- */

#define LOOP_MSG_NOT_LEADER "etcdserver: not leader"
#define LOOP_MSG_BAD_TRANSFEREE "etcdserver: bad leader transferee"
#define LOOP_MSG_TRANSFER_TIMEOUT "etcdserver: request timed out, leader transfer took too long"

static void move_done(struct loop *l, size_t i, int32_t status, const char *text)
{
	struct loop_move *m = &l->moves[i];
	char from[24], to[24];

	if (!status) {
		snprintf(from, sizeof(from), "%" PRIx64, m->from);
		snprintf(to, sizeof(to), "%" PRIx64, m->target);
		log_info("leadership transfer finished", LOG_STR("old-leader-member-id", from),
			 LOG_STR("new-leader-member-id", to));
	}
	/* MoveLeaderResponse is empty on the wire */
	proposals_answer(&l->props, m->slot, &m->origin, status, text, NULL, 0);
	l->moves[i] = l->moves[--l->n_moves];
}

/* etcd's MoveLeader: only the leader moves leadership, to a voting
 * member; the call ends when the transferee leads, or after the request
 * timeout. */
static void on_move_leader(void *arg, uint32_t slot, const struct msg_move_leader *req)
{
	struct loop *l = arg;
	const struct member_info *m = membership_find(&l->roster.ms, req->target);

	if (!raft_is_leader(l->raft)) {
		proposals_answer(&l->props, slot, &req->origin, PROPOSALS_GRPC_FAILED_PRECONDITION,
				 LOOP_MSG_NOT_LEADER, NULL, 0);
		return;
	}
	if (!m || m->is_learner) {
		proposals_answer(&l->props, slot, &req->origin, PROPOSALS_GRPC_FAILED_PRECONDITION,
				 LOOP_MSG_BAD_TRANSFEREE, NULL, 0);
		return;
	}
	if (raftd_reserve((void **)&l->moves, &l->cap_moves, l->n_moves + 1, sizeof(*l->moves), 4)) {
		proposals_answer(&l->props, slot, &req->origin, PROPOSALS_GRPC_RESOURCE_EXHAUSTED,
				 PROPOSALS_MSG_TOO_MANY, NULL, 0);
		return;
	}
	l->moves[l->n_moves++] = (struct loop_move){ .slot = slot, .origin = req->origin,
						     .target = req->target,
						     .from = l->member_id };
	char from[24], to[24];
	snprintf(from, sizeof(from), "%" PRIx64, l->member_id);
	snprintf(to, sizeof(to), "%" PRIx64, req->target);
	log_info("leadership transfer starting", LOG_STR("current-leader-member-id", from),
		 LOG_STR("transferee-member-id", to));
	if (req->target != l->member_id)
		(void)raft_transfer_leader(l->raft, req->target);
}

/* Ends the MoveLeader calls whose transferee leads, or that waited too
 * long (tick: one more tick passed). */
static void check_moves(struct loop *l, bool tick)
{
	uint64_t lead = raft_leader(l->raft);
	for (size_t i = l->n_moves; i-- > 0;) {
		struct loop_move *m = &l->moves[i];
		m->ticks += tick;
		if (lead == m->target)
			move_done(l, i, 0, NULL);
		else if (m->ticks >= l->roster.timeout_ticks)
			move_done(l, i, PROPOSALS_GRPC_UNKNOWN, LOOP_MSG_TRANSFER_TIMEOUT);
	}
}

/* ---- promoting a learner (Cluster.MemberPromote): promote.h ---- */

/* What the promotion module borrows from the loop for one call. */
static struct promote_env loop_promote_env(struct loop *l)
{
	return (struct promote_env){ .raft = l->raft, .roster = &l->roster, .props = &l->props,
				     .peer = l->peer, .region = l->r,
				     .member_id = l->member_id, .cluster_id = l->cluster_id, .tick_ms = l->tick_ms };
}

static void on_lease_forward(void *arg, uint32_t slot, const struct msg_keepalive *m)
{
	struct loop *l = arg;
	struct promote_env e = loop_promote_env(l);
	lease_fwd_gateway(&l->lease_fwds, &e, slot, m);
}

static void on_promote(void *arg, uint32_t slot, const struct msg_promote *req)
{
	struct loop *l = arg;
	struct promote_env e = loop_promote_env(l);
	promote_gateway(&l->promotes, &e, slot, req);
}

/* ---- peers ---- */

/*
 * Sends a ready's messages: at once, or, when the ready saved what must
 * be durable before a follower speaks (raft.h), once the WAL batch
 * holding it is. A MsgSnap goes with the db (loop_send_snapshot); one that
 * cannot go now has its peer reported a failed snapshot after
 * raft_advance (ids in snap_failed), and the core tries again later.
 */
static int send_msgs(struct loop *l, const struct raft_ready *rd, bool must_sync,
		     uint64_t *snap_failed, size_t *n_snap_failed)
{
	if (!l->peer) {
		l->stats.msgs_dropped += rd->n_msgs;
		return 0;
	}
	for (size_t i = 0; i < rd->n_msgs; i++) {
		const struct raft_msg *m = &rd->msgs[i];
		int rc;
		if (rd->msgs_after_persist && must_sync)
			rc = outbox_hold(&l->outbox, m, wal_last_seq(l->wal));
		else
			rc = outbox_send(&l->outbox, m);
		if (rc == -ENOTSUP)
			rc = loop_send_snapshot(l, m);
		if (rc && rc != -ENOMEM && m->type == RAFT_MSG_SNAP &&
		    *n_snap_failed < RAFT_MAX_MEMBERS)
			snap_failed[(*n_snap_failed)++] = m->to;
		else if (rc == -ENOMEM)
			return rc;
	}
	return 0;
}

/* The transport's view of the members: who to dial, and /members. */
static void update_peers(struct loop *l)
{
	const struct membership *ms = &l->roster.ms;
	struct membership initial;
	struct peer_member *v;
	char *json = NULL;
	size_t len = 1;

	if (!l->peer)
		return;
	if (ms->has_version) {
		char ver[32];
		snprintf(ver, sizeof(ver), "%u.%u.0", ms->version_major, ms->version_minor);
		if (peer_set_cluster_version(l->peer, ver))
			goto out_nomem;
	}
	/* a new member has applied no membership yet: its initial cluster */
	if (ms->count == 0 && l->initial) {
		memset(&initial, 0, sizeof(initial));
		initial.v = l->initial->v;
		initial.count = l->initial->count;
		ms = &initial;
	}
	/* A joining member replays the cluster's log from its start: until it
	 * reaches its own addition, the members the running cluster listed
	 * (etcd's joiner adds them to its transport from /members) stay its
	 * peers too, unless the log removed them, or it could neither answer
	 * nor hear a leader the replayed log does not know yet. */
	bool seeded = l->join_seed && ms != &initial;
	if (seeded && membership_find(ms, l->member_id))
		seeded = l->join_seed = false;
	size_t extra = seeded ? l->initial->count : 0;
	v = raftd_calloc(ms->count + extra ? ms->count + extra : 1, sizeof(*v));
	if (!v)
		goto out_nomem;
	size_t n = 0;
	for (size_t i = 0; i < ms->count; i++) {
		if (ms->v[i].id == l->member_id)
			continue;
		v[n].id = ms->v[i].id;
		v[n].urls = (const char *const *)ms->v[i].peer_urls;
		v[n].n_urls = ms->v[i].n_peer_urls;
		n++;
	}
	for (size_t i = 0; i < extra; i++) {
		const struct member_info *m = &l->initial->v[i];
		if (m->id == l->member_id || membership_find(ms, m->id) ||
		    membership_is_removed(ms, m->id))
			continue;
		v[n].id = m->id;
		v[n].urls = (const char *const *)m->peer_urls;
		v[n].n_urls = m->n_peer_urls;
		n++;
	}
	int rc = peer_set_members(l->peer, v, n, ms->removed, ms->n_removed);
	raftd_free(v);
	if (rc)
		goto out_nomem;
	/* GET /members: the members as etcd's JSON array */
	if (roster_json(ms, &json, &len))
		goto out_nomem;
	if (peer_set_members_json(l->peer, json, len))
		goto out_nomem;
	raftd_free(json);
	return;

out_nomem:
	raftd_free(json);
	log_warn("cannot update the peer transport's members (out of memory); retried at the next change");
}

/* This member was removed from the cluster: it stops for good, as etcd. */
static void removed_self(struct loop *l)
{
	if (l->removed)
		return;
	l->removed = true;
	log_error("the member has been permanently removed from the cluster");
	log_error("the data-dir used by this member must be removed");
	loop_fail(l, -EIDRM, "this member was removed from the cluster");
}

/*
 * Applies a committed entry to the membership and, for a configuration
 * change it accepts, to the core (etcd applies a refused one as a no-op);
 * *peers_changed says the transport's members need an update.
 */
static int apply_membership(struct loop *l, const struct raft_entry *e, bool *peers_changed)
{
	struct membership_result res;
	int rc = roster_apply(&l->roster, e, &res);

	if (!rc && res.change != MEMBERSHIP_NONE)
		l->members_changed_at = e->index;
	if (!rc && res.change == MEMBERSHIP_VERSION)
		*peers_changed = true; /* /version reports it */
	if (rc || e->type != RAFT_ENTRY_CONF_CHANGE)
		return rc;
	enum raft_conf_change_type t;
	switch (res.change) {
	case MEMBERSHIP_ADDED:
		t = res.cc_type == MEMBERSHIP_CC_ADD_LEARNER_NODE ? RAFT_CONF_ADD_LEARNER_NODE :
								     RAFT_CONF_ADD_NODE;
		break;
	case MEMBERSHIP_PROMOTED:
		t = RAFT_CONF_ADD_NODE;
		break;
	case MEMBERSHIP_REMOVED:
		t = RAFT_CONF_REMOVE_NODE;
		break;
	case MEMBERSHIP_UPDATED:
		t = RAFT_CONF_UPDATE_NODE;
		break;
	default:
		return 0;
	}
	struct raft_conf_state cs;
	rc = raft_apply_conf_change(l->raft, e->index, t, res.node_id, &cs);
	if (rc == -ENOMEM)
		return rc;
	if (rc)
		log_warn("the Raft core refused a configuration change that membership applied",
			 LOG_U64("index", e->index), LOG_U64("node", res.node_id), LOG_ERRNO(rc));
	*peers_changed = true;
	if (res.change == MEMBERSHIP_PROMOTED) {
		struct promote_env pe = loop_promote_env(l);
		promote_applied(&l->promotes, &pe, res.node_id);
	}
	if (res.change == MEMBERSHIP_REMOVED && res.node_id == l->member_id)
		removed_self(l);
	return 0;
}

/* Messages and news from peers. */
static void on_peer(struct loop *l)
{
	struct peer_event ev;

	for (int n = 0; n < 256 && !l->fatal && peer_recv(l->peer, &ev) == 0; n++) {
		switch (ev.kind) {
		case PEER_EV_MESSAGE: {
			struct raft_msg m;
			int rc = msgconv_from_wire(&ev.msg, &l->conv, &m);
			struct shm_metrics_peer *mp = shm_metrics_peer(l->metrics, ev.msg.from);
			if (mp)
				shm_metric_bump(&mp->received_bytes, raftmsg_size(&ev.msg));
			if (rc == 0 && m.type == RAFT_MSG_HEARTBEAT_RESP)
				outbox_heartbeat_answered(&l->outbox, ev.msg.from);
			if (rc == 0 && m.type == RAFT_MSG_SNAP)
				rc = loop_take_snapshot_msg(l, &ev);
			if (rc == 0)
				rc = raft_step(l->raft, &m);
			if (rc && rc != -ENOTSUP)
				log_debug("dropped a message from a peer", LOG_U64("from", ev.msg.from),
					  LOG_U64("type", ev.msg.type), LOG_ERRNO(rc));
			break;
		}
		case PEER_EV_UNREACHABLE:
			raft_report_unreachable(l->raft, ev.id);
			break;
		case PEER_EV_DOWN:
			if (raft_role(l->raft) == RAFT_FOLLOWER && ev.id == raft_leader(l->raft)) {
				char id[24];
				snprintf(id, sizeof(id), "%" PRIx64, ev.id);
				log_info("leader refuses connections: its process is gone, its lease ends",
					 LOG_STR("leader-member-id", id));
			}
			raft_report_leader_down(l->raft, ev.id);
			break;
		case PEER_EV_SNAPSHOT_DONE:
			if (l->snaps_inflight)
				l->snaps_inflight--;
			l->snaps_inflight_ticks = 0;
			if (ev.ok)
				loop_snap_ack_wait(l, ev.id);
			loop_snap_timed(l, ev.id, ev.ok);
			raft_report_snapshot(l->raft, ev.id, ev.ok);
			break;
		case PEER_EV_REMOVED:
			removed_self(l);
			break;
		case PEER_EV_PROMOTE: {
			struct promote_env e = loop_promote_env(l);
			promote_peer_request(&l->promotes, &e, ev.id, ev.token);
			break;
		}
		case PEER_EV_PROMOTE_DONE: {
			struct promote_env e = loop_promote_env(l);
			promote_forward_done(&l->promotes, &e, &ev);
			break;
		}
		case PEER_EV_LEASE_DONE: {
			struct promote_env e = loop_promote_env(l);
			lease_fwd_done(&l->lease_fwds, &e, &ev);
			break;
		}
		}
		peer_event_release(&ev);
	}
}

/* Forwards proposals to the leader (proposals.h): a follower's gateways
 * are answered by this member's stored once the entries commit. */
static int loop_forward(void *arg, uint64_t leader, const struct raft_entry *ents, size_t n)
{
	struct loop *l = arg;
	struct raft_msg m = { .type = RAFT_MSG_PROP, .to = leader, .from = l->member_id,
			      .entries = ents, .n_entries = n };
	return outbox_send(&l->outbox, &m);
}

/* Alone, raftd writes and syncs a small batch itself, as etcd does, at
 * the end of the turn (turn, wal_submit_owed), once what the turn made
 * committed is handed on; with peers io_uring's worker does, started now,
 * so that the messages to the followers never wait behind the disk. */
int loop_submit_wal(struct loop *l)
{
	struct raft_conf_state cs;
	raft_conf_state(l->raft, &cs);
	bool alone = cs.n_voters + cs.n_learners <= 1;
	wal_set_inline_writes(l->wal, alone);
	int rc = 0;
	if (alone)
		wal_submit_later(l->wal);
	else
		rc = wal_submit(l->wal);
	if (rc)
		loop_fail(l, rc, "cannot write to the WAL");
	return rc;
}

/* Takes one ready out of the core. */
static void take_ready(struct loop *l)
{
	struct raft_ready rd;
	bool must_submit = false;
	int rc = 0;

	raft_ready(l->raft, &rd);
	bool peers_changed = false;
	if (rd.has_snapshot) {
		/* only a leader's snapshot does this */
		rc = loop_record_snapshot(l, &rd, &peers_changed);
		must_submit = true;
	}
	if (!rc && (rd.n_entries || rd.hs_changed)) {
		rc = wal_save_locs(l->wal, rd.hs_changed ? &rd.hs : NULL, rd.entries,
				   rd.n_entries, rd.entry_locs);
		l->stats.wal_saves++;
		/* a hard state whose commit alone moved needs no write of its
		 * own (etcd's MustSync): it rides with the next batch */
		must_submit |= rd.n_entries > 0 ||
			       (rd.hs_changed && (rd.hs.term != l->saved.term ||
						  rd.hs.vote != l->saved.vote));
		if (rd.hs_changed)
			l->saved = rd.hs;
		if (!rc && rd.n_entries) {
			const struct raft_entry *last = &rd.entries[rd.n_entries - 1];
			rc = persist_note(l, wal_last_seq(l->wal), last->index, last->term);
		}
	}
	if (rc) {
		loop_fail(l, rc, "cannot append to the WAL");
		return;
	}
	uint64_t snap_failed[RAFT_MAX_MEMBERS];
	size_t n_snap_failed = 0;
	rc = send_msgs(l, &rd, must_submit, snap_failed, &n_snap_failed);
	for (size_t i = 0; i < rd.n_committed && !rc; i++)
		rc = apply_membership(l, &rd.committed[i], &peers_changed);
	if (rc) {
		loop_fail(l, rc, "cannot apply a membership change");
		return;
	}
	if (rd.n_committed)
		feed_handed(&l->feed, rd.committed[rd.n_committed - 1].index);
	for (size_t i = 0; i < rd.n_reads; i++)
		proposals_read_state(&l->props, &rd.reads[i], raft_term(l->raft));
	if (rd.soft_changed) {
		log_leader_change(l, l->lead_seen, &rd);
		/* the core dropped its pending ReadIndex rounds */
		proposals_fail_reads(&l->props, PROPOSALS_GRPC_UNAVAILABLE, false);
		l->lead_seen = rd.leader;
	}
	raft_advance(l->raft, &rd);
	/* the reads that waited for the round just answered */
	if (rd.n_reads)
		proposals_ask_reads(&l->props, l->raft);
	for (size_t i = 0; i < n_snap_failed; i++)
		raft_report_snapshot(l->raft, snap_failed[i], false);
	if (peers_changed)
		update_peers(l);
	loop_maybe_snapshot(l);
	loop_maybe_compact(l);
	if (must_submit)
		(void)loop_submit_wal(l);
}

static void handle_ready(struct loop *l)
{
	for (int i = 0; i < LOOP_READIES_MAX && !l->fatal && raft_has_ready(l->raft); i++)
		take_ready(l);
}

/* ---- status, stored, feed ---- */

/* The first index of the term of the committed entry at commit (terms
 * never decrease along the log), or the compacted end of the log when
 * that term started before it: an index at or after the term's first
 * entry that is committed, which is what settled_index needs. */
static uint64_t term_first_index(const struct raftlog *log, uint64_t commit, uint64_t term)
{
	uint64_t lo = log->snap_index + 1, hi = commit;

	if (commit <= log->snap_index || raftlog_term(log, log->snap_index) == term)
		return commit < log->snap_index ? commit : log->snap_index;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (raftlog_term(log, mid) < term)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static void publish_status(struct loop *l, bool force_no_leader)
{
	struct status_raftd st = {
		.leader_id = force_no_leader ? 0 : raft_leader(l->raft),
		.term = raft_term(l->raft),
		.commit_index = raft_commit_index(l->raft),
		.is_leader = !force_no_leader && raft_is_leader(l->raft),
		.settled_term = l->published.settled_term,
		.settled_index = l->published.settled_index,
		.is_learner = raft_is_learner(l->raft),
	};
	const struct raftlog *log = raft_log(l->raft);
	uint64_t cterm = raftlog_term(log, st.commit_index);
	if (cterm > st.settled_term) {
		st.settled_term = cterm;
		st.settled_index = term_first_index(log, st.commit_index, cterm);
	}
	if (l->has_published && st.leader_id == l->published.leader_id &&
	    st.term == l->published.term && st.commit_index == l->published.commit_index &&
	    st.is_leader == l->published.is_leader && st.settled_term == l->published.settled_term &&
	    st.is_learner == l->published.is_learner)
		return;
	/* etcd counts a leader known that is not the last one it knew */
	if (st.leader_id && (!l->has_published || st.leader_id != l->published.leader_id))
		shm_metric_add(l->metrics, SHM_M_LEADER_CHANGES, 1);
	status_raftd_write(l->r, &st);
	l->published = st;
	l->has_published = true;
}

static void observe_stored(struct loop *l)
{
	struct status_stored st;

	if (status_stored_read(l->r, &st))
		return; /* a write in progress by a dead writer: next turn */
	(void)feed_observe(&l->feed, &st);
	if (roster_stored_applied(&l->roster, st.applied_index))
		shm_region_set_published(l->r);
	atomic_store_explicit(&l->waker_epoch, st.epoch, memory_order_relaxed);
}

static void pump(struct loop *l)
{
	int rc = feed_pump(&l->feed, raft_log(l->raft), LOOP_PUMP_MAX);
	if (rc < 0) {
		loop_fail(l, rc, "the ring of committed entries to stored is corrupt; restart the member");
		return;
	}
	if (rc > 0 || !l->feed.blocked)
		l->retry_ms = 0;
}

/* epoll_wait's timeout for the next turn. */
static int next_timeout(struct loop *l)
{
	int ms = l->peer ? l->peer_run_ms : -1; /* the transport's timers */

	if (l->fatal || proposals_more(&l->props) || raft_has_ready(l->raft) ||
	    (l->peer && peer_has_events(l->peer)))
		return 0;
	if (!feed_pending(&l->feed))
		return ms;
	if (!l->feed.blocked)
		return 0; /* a pump stopped at its bound */
	/* stored frees room without ringing raftd: retry, backing off up to
	 * a tick while it stays full */
	l->retry_ms = l->retry_ms ? 2 * l->retry_ms : 1;
	if (l->retry_ms > l->tick_ms)
		l->retry_ms = (unsigned)l->tick_ms;
	return ms >= 0 && ms < (int)l->retry_ms ? ms : (int)l->retry_ms;
}

/* ---- a turn ---- */

static void on_timer(struct loop *l)
{
	uint64_t n;
	if (read(l->timer_fd, &n, sizeof(n)) != (ssize_t)sizeof(n) || n == 0)
		return;
	/* one tick however many expired: a late loop must not rush the
	 * election clock (etcd's ticker drops ticks the same way) */
	if (n > 1) {
		l->stats.ticks_lost += n - 1;
		if (++l->late_logged <= 10 || l->late_logged % 100 == 0)
			log_warn("raftd's loop was late: ticks were lost, so elections and heartbeats "
				 "come later than configured (is the machine overloaded?)",
				 LOG_U64("lost-ticks", n - 1), LOG_U64("tick-ms", l->tick_ms),
				 LOG_U64("lost-so-far", l->stats.ticks_lost));
	}
	raft_tick(l->raft);
	proposals_tick(&l->props, 2 * l->election_ticks);
	if (!l->stopping)
		proposals_ask_reads(&l->props, l->raft); /* after a round was lost */
	roster_tick(&l->roster);
	check_moves(l, true);
	for (size_t i = 0; i < l->n_snap_acks; i++)
		l->snap_acks[i].ticks++;
	/* rings quiet for a second give their pages back */
	int64_t now = clock_now_ns();
	(void)shm_role_trim(l->r, SHM_ROLE_RAFTD, now);
	/* and the heap what a burst (a follower's catch-up) left freed */
	if (mem_dirty_turn(&l->mem, now))
		log_debug("raftd gives freed memory back to the kernel",
			  LOG_U64("freed-bytes", l->mem.last_freed),
			  LOG_U64("purges-so-far", l->mem.purges));
	/* a send whose end was never reported must not stop compaction for
	 * good: after an hour the count is dropped */
	if (l->snaps_inflight && ++l->snaps_inflight_ticks * l->tick_ms > LOOP_SNAP_SEND_MAX_MS) {
		log_warn("snapshot sends did not report their end; compacting the log again",
			 LOG_U64("sends", l->snaps_inflight));
		l->snaps_inflight = 0;
	}
	{
		struct promote_env e = loop_promote_env(l);
		promote_tick(&l->promotes, &e);
		lease_fwd_tick(&l->lease_fwds, &e);
	}
	l->stats.ticks++;
}

static void on_stop_fd(struct loop *l, int fd, bool is_signal)
{
	if (is_signal) {
		struct signalfd_siginfo si;
		if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			l->stop_signal = (int)si.ssi_signo;
			l->stopping = true;
		}
		return;
	}
	uint64_t v;
	if (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
		l->stopping = true;
}

/*
 * One turn: what woke the loop, then the transport's socket events (read
 * before the messages they carry are stepped), the core's work, and at
 * the end the transport's run, which writes out what the turn sent to
 * peers (one write per stream for all of it) and keeps its timers; only
 * then are stored and the gateways woken for what the turn gave them.
 */
static void turn(struct loop *l, const struct epoll_event *ev, int n)
{
	bool woke = false, peer_ready = l->peer && peer_has_events(l->peer);

	l->stats.turns++;
	shm_metric_add(l->metrics, SHM_M_LOOP_TURNS, 1);
	shm_metric_add(l->metrics, SHM_M_COMMITTED_FULL, l->feed.full - l->full_counted);
	l->full_counted = l->feed.full;
	for (int i = 0; i < n; i++) {
		switch (ev[i].data.u32) {
		case TAG_TIMER:
			on_timer(l);
			break;
		case TAG_WAL:
			reap_wal(l);
			break;
		case TAG_WAKER:
			woke = true;
			break;
		case TAG_SIGNAL:
			on_stop_fd(l, l->signal_fd, true);
			break;
		case TAG_STOP:
			on_stop_fd(l, l->stop_fd, false);
			break;
		case TAG_PEER:
			peer_ready = true;
			break;
		case TAG_PEER_IO:
			peer_poll(l->peer);
			peer_ready = true;
			break;
		case TAG_SNAPW:
			loop_on_snapshot_written(l);
			break;
		}
	}
	if (peer_ready)
		on_peer(l);
	observe_stored(l);
	if (!l->stopping && !l->fatal) {
		/* a failed request ring is logged there and skipped */
		(void)proposals_drain(&l->props, l->raft, false);
		roster_propose(&l->roster, l->raft, l->peer ? loop_forward : NULL, l);
		handle_ready(l);
		if (l->n_moves)
			check_moves(l, false);
		pump(l);
		publish_status(l, false);
	}
	shm_metric_set(l->metrics, SHM_M_RAFT_LOG_BYTES, raft_log(l->raft)->bytes);
	shm_metric_set(l->metrics, SHM_M_RAFT_LOG_RESIDENT, raft_log(l->raft)->resident);
	if (l->peer)
		l->peer_run_ms = peer_run(l->peer);
	/* Wakes last: stored or a gateway woken earlier may take this CPU at
	 * once, and the followers would wait for its work to hear of the new
	 * entries and commit index. */
	feed_wake(&l->feed);
	proposals_flush(&l->props);
	if (woke)
		shm_waker_drained(&l->waker);
	/* a lone member's WAL sync, on this thread: last, as it holds it */
	int rc = l->fatal ? 0 : wal_submit_owed(l->wal);
	if (rc)
		loop_fail(l, rc, "cannot write to the WAL");
}

/* Stopping: refuse what still arrives, make the WAL durable, hand stored
 * what that commits, answer waiting reads. */
static void stop(struct loop *l)
{
	if (l->stop_signal)
		log_info("stopping", LOG_STR("signal", strsignal(l->stop_signal)));
	else
		log_info("stopping");
	(void)proposals_drain(&l->props, l->raft, true);
	if (!l->fatal) {
		int rc = wal_sync(l->wal);
		if (rc) {
			loop_fail(l, rc, "cannot make the WAL durable while stopping");
		} else {
			persist_done(l);
			handle_ready(l);
			pump(l);
			feed_wake(&l->feed);
		}
	}
	proposals_fail_reads(&l->props, PROPOSALS_GRPC_UNAVAILABLE, true);
	while (l->n_moves)
		move_done(l, l->n_moves - 1, PROPOSALS_GRPC_UNAVAILABLE, PROPOSALS_MSG_STOPPED);
	proposals_flush(&l->props);
	publish_status(l, true);
}

int loop_run(struct loop *l)
{
	struct epoll_event ev[8];

	/* the core may already have work: bootstrap entries to hand over.
	 * A lone member campaigns once they are: the core refuses to while
	 * committed conf changes wait to be applied (as etcd's raft). */
	turn(l, NULL, 0);
	if (l->lone && !l->stopping && !l->fatal) {
		(void)raft_campaign(l->raft);
		turn(l, NULL, 0);
	}
	struct config_watchdog wd;
	config_watchdog_init(&wd, clock_now_ns());
	while (!l->stopping && !l->fatal) {
		int n, err;
		/* systemd's watchdog is fed here, by the loop itself */
		int wd_ms = config_watchdog_turn(&wd, clock_now_ns());
		int timeout = next_timeout(l);

		if (wd_ms >= 0 && (timeout < 0 || timeout > wd_ms))
			timeout = wd_ms;
		n = epoll_wait(l->epfd, ev, 8, shm_waker_prepare(&l->waker, timeout));
		err = n < 0 ? errno : 0;
		shm_waker_done(&l->waker);
		if (n < 0) {
			/* a signal, or in ring mode the doorbell's wake
			 * interrupting the wait: the turn looks at everything */
			if (err != EINTR) {
				loop_fail(l, -err, "epoll_wait failed");
				break;
			}
			n = 0;
		}
		turn(l, ev, n);
	}
	stop(l);
	return l->fatal;
}

void loop_stop(struct loop *l)
{
	uint64_t one = 1;
	while (write(l->stop_fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

/* ---- setting up ---- */

static int epoll_watch(int epfd, int fd, enum loop_tag tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = tag };
	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? -errno : 0;
}

static int open_fds(struct loop *l, const struct loop_options *o)
{
	struct itimerspec its = {
		.it_interval = { (time_t)(o->tick_ms / 1000), (long)(o->tick_ms % 1000) * 1000000 },
	};
	int rc;

	its.it_value = its.it_interval;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	l->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->epfd < 0 || l->timer_fd < 0 || l->stop_fd < 0)
		return -errno;
	if (timerfd_settime(l->timer_fd, 0, &its, NULL) < 0)
		return -errno;
	atomic_store_explicit(&l->waker_epoch, l->feed.epoch, memory_order_relaxed);
	rc = shm_waker_start(&l->waker, shm_role_doorbell(l->r, SHM_ROLE_RAFTD), loop_has_work, l,
			     SHM_DOORBELL_BACKSTOP_MS);
	if (!rc)
		rc = epoll_watch(l->epfd, l->timer_fd, TAG_TIMER);
	if (!rc)
		rc = epoll_watch(l->epfd, wal_event_fd(l->wal), TAG_WAL);
	if (!rc)
		rc = epoll_watch(l->epfd, shm_waker_fd(&l->waker), TAG_WAKER);
	if (!rc)
		rc = epoll_watch(l->epfd, l->stop_fd, TAG_STOP);
	if (!rc && l->signal_fd >= 0)
		rc = epoll_watch(l->epfd, l->signal_fd, TAG_SIGNAL);
	if (!rc && l->peer)
		rc = epoll_watch(l->epfd, peer_event_fd(l->peer), TAG_PEER);
	if (!rc && l->peer)
		rc = epoll_watch(l->epfd, peer_poll_fd(l->peer), TAG_PEER_IO);
	if (!rc && l->snapw)
		rc = epoll_watch(l->epfd, snapwrite_event_fd(l->snapw), TAG_SNAPW);
	return rc;
}

static uint64_t loop_seed(void)
{
	uint64_t seed;
	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	return (uint64_t)clock_now_ns() ^ ((uint64_t)getpid() << 32);
}

/* The core's loader (raftlog.h): an entry whose data left memory, read
 * back from this member's WAL. */
static int load_entry(void *ctx, const struct raft_entry *e, const struct raftlog_loc *loc,
		      uint8_t **data)
{
	struct loop *l = ctx;
	return wal_read_entry(l->wal, e, loc, data);
}

/* Builds the core from the replayed WAL (entries taken over) and stored's
 * published state. */
static int build_core(struct loop *l, const struct loop_options *o, struct bootstrap_state *bs)
{
	const struct initial_cluster *c = o->cluster;
	uint64_t voters[RAFT_MAX_VOTERS];
	struct raft_config cfg;
	struct status_stored st;
	bool found = false;

	if (c->count > RAFT_MAX_VOTERS)
		return -EINVAL;
	for (size_t i = 0; i < c->count; i++) {
		voters[i] = c->v[i].id;
		found |= voters[i] == bs->member_id;
	}
	if (!found && bs->created && !o->join) {
		log_error("--initial-cluster does not name the member this WAL belongs to",
			  LOG_U64("member-id", bs->member_id));
		return -EINVAL;
	}
	if (status_stored_read(l->r, &st))
		memset(&st, 0, sizeof(st));
	feed_init(&l->feed, shm_daemon_ring(l->r, SHM_RING_COMMITTED), &st);
	uint64_t snap_index = bs->has_snap ? bs->snap.index : 0;
	uint64_t snap_term = bs->has_snap ? bs->snap.term : 0;
	if (bs->has_snap) {
		/* the membership at the snapshot, as etcd recovers it */
		int rc = v2store_decode(bs->snap.data, bs->snap.len, &l->roster.ms);
		if (rc) {
			log_error("the snapshot's v2 store cannot be read; the member's snap file is corrupt",
				  LOG_U64("snapshot-index", snap_index), LOG_ERRNO(rc));
			return rc;
		}
		roster_recovered(&l->roster);
		l->snap_index = l->members_changed_at = snap_index;
		/* stored's state is not known yet (it has not published): the
		 * feed starts after the snapshot, and a replay from stored's
		 * durable index follows when it does */
		if (st.epoch == 0 && feed_start_after(&l->feed) < snap_index)
			feed_skip_to(&l->feed, snap_index);
		/* a snapshot received from the leader that stored may not
		 * have installed yet: the feed decides once stored's durable
		 * index is known */
		char db[4200];
		if (o->snap_dir && (st.epoch == 0 || st.durable_index < snap_index) &&
		    snprintf(db, sizeof(db), "%s/%016" PRIx64 ".snap.db", o->snap_dir, snap_index) <
			    (int)sizeof(db) &&
		    access(db, R_OK) == 0) {
			int rc = feed_install(&l->feed, snap_index, snap_term, db);
			if (rc)
				return rc;
		}
	}
	uint64_t last = bs->n_entries ? bs->entries[bs->n_entries - 1].index : snap_index;
	/* membership as of what stored applied: the entries after it come
	 * out of the core as committed */
	for (size_t i = 0; i < bs->n_entries && bs->entries[i].index <= feed_start_after(&l->feed);
	     i++) {
		struct membership_result res;
		int rc = roster_apply(&l->roster, &bs->entries[i], &res);
		if (rc)
			return rc;
		if (res.change != MEMBERSHIP_NONE)
			l->members_changed_at = bs->entries[i].index;
	}
	if (feed_start_after(&l->feed) > last)
		log_error("stored has applied entries beyond the end of this member's WAL; its db does not belong to this log",
			  LOG_U64("stored-applied-index", feed_start_after(&l->feed)),
			  LOG_U64("wal-last-index", last));

	raft_config_defaults(&cfg);
	cfg.id = bs->member_id;
	cfg.voters = voters;
	/* a member that joined a running cluster (or whose WAL --initial-
	 * cluster does not name: etcd ignores the flag on a restart) starts
	 * with no voters, as etcd's startNode with no peers; the leader's log
	 * brings the members */
	cfg.n_voters = found && !o->join ? c->count : 0;
	/* a member that applied membership changes before it stopped starts
	 * from the members as of then; the changes after come through the
	 * core and apply_membership */
	uint64_t learners[RAFT_MAX_MEMBERS];
	const struct membership *ms = &l->roster.ms;
	if (ms->count && ms->count <= RAFT_MAX_MEMBERS) {
		cfg.n_voters = cfg.n_learners = 0;
		for (size_t i = 0; i < ms->count; i++) {
			if (ms->v[i].is_learner)
				learners[cfg.n_learners++] = ms->v[i].id;
			else
				voters[cfg.n_voters++] = ms->v[i].id;
		}
		cfg.learners = learners;
	} else if (bs->has_snap) {
		/* a snapshot without members in its v2 store: its ConfState */
		cfg.voters = bs->snap.conf.voters;
		cfg.n_voters = bs->snap.conf.n_voters;
		cfg.learners = bs->snap.conf.learners;
		cfg.n_learners = bs->snap.conf.n_learners;
	}
	cfg.election_ticks = (unsigned)l->election_ticks;
	cfg.heartbeat_ticks = 1;
	cfg.pre_vote = o->pre_vote;
	cfg.check_quorum = true;
	cfg.max_msg_bytes = LOOP_MAX_MSG_BYTES;
	cfg.max_inflight = LOOP_MAX_INFLIGHT;
	cfg.seed = loop_seed();
	uint64_t applied = feed_start_after(&l->feed);
	int rc = raft_new(&cfg, &bs->hs, snap_index, snap_term, bs->entries, bs->n_entries,
			  applied > snap_index ? applied : snap_index, &l->raft);
	if (rc)
		return rc;
	bs->entries = NULL; /* the core owns them now */
	bs->n_entries = 0;
	raft_set_locs(l->raft, snap_index + 1, bs->locs, bs->n_locs);
	/* what stored already applied counts as handed over: a replay may
	 * need it again before anything new commits */
	feed_handed(&l->feed, raft_log(l->raft)->applying);
	return 0;
}

static void log_start(const struct loop *l, const struct bootstrap_state *bs)
{
	char id[24], cid[24];

	snprintf(id, sizeof(id), "%" PRIx64, l->member_id);
	snprintf(cid, sizeof(cid), "%" PRIx64, l->cluster_id);
	if (bs->created)
		log_info("starting local member", LOG_STR("local-member-id", id),
			 LOG_STR("cluster-id", cid));
	else
		log_info("restarting local member", LOG_STR("local-member-id", id),
			 LOG_STR("cluster-id", cid),
			 LOG_U64("commit-index", raft_commit_index(l->raft)),
			 LOG_U64("last-index", raft_last_index(l->raft)),
			 LOG_U64("term", raft_term(l->raft)));
	log_info("feeding stored", LOG_U64("from-index", l->feed.next),
		 LOG_U64("stored-epoch", l->feed.epoch), LOG_STR("wal-io", wal_io_name(l->wal)));
}

/* How long a WAL lock may stay held after its holder died. */
#define LOOP_WAL_LOCK_WAIT_MS 5000

/*
 * bootstrap_open, waiting a while for the WAL's lock when it is held: a
 * raftd killed in the middle of a write holds it until the kernel has torn
 * down its io_uring, which happens after the process is gone, so a quick
 * restart can find the lock still taken. Another process that really
 * uses the WAL keeps it, and the error stands after the wait. (Only when
 * the I/O backend is opened here: a caller's backend is consumed by the
 * first attempt.)
 */
static int open_wal(const struct bootstrap_params *bp, struct bootstrap_state *bs)
{
	long pause_ms = 10, waited_ms = 0;
	int rc = bootstrap_open(bp, bs);

	while (rc == -EBUSY && !bp->wal.io && waited_ms < LOOP_WAL_LOCK_WAIT_MS) {
		if (waited_ms == 0)
			log_warn("the WAL is locked; waiting for a previous raftd's I/O to be torn down",
				 LOG_STR("wal-dir", bp->wal_dir),
				 LOG_U64("wait-ms", LOOP_WAL_LOCK_WAIT_MS));
		struct timespec ts = { 0, pause_ms * 1000000 };
		nanosleep(&ts, NULL);
		waited_ms += pause_ms;
		pause_ms = pause_ms * 2 > 500 ? 500 : pause_ms * 2;
		rc = bootstrap_open(bp, bs);
	}
	return rc;
}

int loop_new(const struct loop_options *o, struct loop **out)
{
	struct bootstrap_state bs;
	struct loop *l;
	int rc;

	if (!o->region || !o->cluster || !o->cluster->count || !o->tick_ms ||
	    o->election_ms / o->tick_ms < 2 || o->election_ms / o->tick_ms > UINT32_MAX) {
		if (o->wal.io)
			diskio_close(o->wal.io);
		return -EINVAL;
	}
	l = raftd_calloc(1, sizeof(*l));
	if (!l) {
		if (o->wal.io)
			diskio_close(o->wal.io);
		return -ENOMEM;
	}
	l->r = o->region;
	l->epfd = l->timer_fd = l->stop_fd = l->waker.efd = -1;
	l->signal_fd = o->signal_fd;
	l->tick_ms = o->tick_ms;
	l->election_ticks = o->election_ms / o->tick_ms;
	(void)mem_dirty_init(&l->mem); /* a no-op without jemalloc */

	struct bootstrap_params bp = {
		.wal_dir = o->wal_dir, .member_id = o->member_id, .cluster = o->cluster,
		.wal = o->wal, .snap_dir = o->snap_dir, .join = o->join,
		.force_new_cluster = o->force_new_cluster,
	};
	rc = open_wal(&bp, &bs);
	if (rc) {
		log_error("cannot open the member's WAL", LOG_STR("wal-dir", o->wal_dir),
			  LOG_ERRNO(rc));
		goto out_free;
	}
	l->wal = bs.wal;
	bs.wal = NULL;
	l->member_id = bs.member_id;
	l->cluster_id = bs.cluster_id;
	l->saved = bs.hs;
	uint64_t request_timeout_ms = o->request_timeout_ms ? o->request_timeout_ms :
							      5000 + 2 * o->election_ms;
	rc = proposals_init(&l->props, l->r);
	l->props.hold_ticks = request_timeout_ms / o->tick_ms;
	if (!rc)
		rc = roster_init(&l->roster, l->member_id, l->cluster_id, o->name, o->client_urls,
				 request_timeout_ms, o->tick_ms);
	if (rc)
		goto out_free_state;
	rc = build_core(l, o, &bs);
	if (rc) {
		log_error("cannot build the Raft state from the WAL", LOG_ERRNO(rc));
		goto out_free_state;
	}
	raft_set_loader(l->raft, load_entry, l);
	bootstrap_state_free(&bs);
	log_start(l, &bs);
	l->lone = o->cluster->count == 1 && !o->join;
	l->peer = o->peer;
	l->initial = o->cluster;
	l->join_seed = o->join;
	l->snapshot_count = o->snapshot_count;
	l->raft_log_bytes = o->raft_log_bytes ? o->raft_log_bytes : LOOP_RAFT_LOG_BYTES;
	l->max_snapshots = o->max_snapshots;
	l->max_wals = o->max_wals;
	if (o->snap_dir) {
		l->snap_dir = raftd_malloc(strlen(o->snap_dir) + 1);
		if (!l->snap_dir) {
			rc = -ENOMEM;
			goto out_free;
		}
		strcpy(l->snap_dir, o->snap_dir);
		rc = snapwrite_start(o->snap_dir, o->max_snapshots, &l->snapw);
		if (rc) {
			log_error("cannot start the snapshot writer", LOG_ERRNO(rc));
			goto out_free;
		}
	}
	outbox_init(&l->outbox, o->peer);
	l->metrics = shm_metrics_block(l->r, SHM_METRICS_RAFTD);
	l->outbox.metrics = l->metrics;
	wal_set_metrics(l->wal, l->metrics);
	l->props.move_leader = on_move_leader;
	l->props.move_leader_arg = l;
	l->props.promote = on_promote;
	l->props.lease_forward = on_lease_forward;
	l->props.lease_forward_arg = l;
	l->props.promote_arg = l;
	if (o->peer) {
		l->props.forward = loop_forward;
		l->props.forward_arg = l;
		update_peers(l);
	}
	rc = open_fds(l, o);
	if (rc) {
		log_error("cannot set up the event loop", LOG_ERRNO(rc));
		goto out_free;
	}
	log_info("event loop set up", LOG_STR("ring-wake", shm_waker_mode_name(&l->waker)));
	*out = l;
	return 0;

out_free_state:
	bootstrap_state_free(&bs);
out_free:
	loop_free(l);
	return rc;
}

void loop_free(struct loop *l)
{
	if (!l)
		return;
	shm_waker_stop(&l->waker);
	snapwrite_stop(l->snapw);
	if (l->wal) {
		int rc = wal_close(l->wal);
		if (rc)
			log_error("the WAL's last batch did not become durable", LOG_ERRNO(rc));
	}
	raft_free(l->raft);
	proposals_free(&l->props);
	roster_free(&l->roster);
	outbox_free(&l->outbox);
	raftd_free(l->moves);
	promote_free(&l->promotes);
	lease_fwd_free(&l->lease_fwds);
	msgconv_scratch_free(&l->conv);
	raftd_free(l->persist);
	raftd_free(l->snap_dir);
	raftd_free(l->rx_data);
	if (l->epfd >= 0)
		close(l->epfd);
	if (l->timer_fd >= 0)
		close(l->timer_fd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	raftd_free(l);
}

void loop_get_stats(const struct loop *l, struct loop_stats *out)
{
	*out = l->stats;
	out->proposed = l->props.stats.proposed;
	out->rejected = l->props.stats.rejected;
	out->dropped_term = l->props.stats.dropped_term;
	out->read_rounds = l->props.stats.read_rounds;
	out->reads_answered = l->props.stats.reads_answered;
	out->hellos = l->props.stats.hellos;
	out->commits_pushed = l->feed.pushed;
	out->commits_blocked = l->feed.full;
	out->replays = l->feed.replays;
}

uint64_t loop_member_id(const struct loop *l)
{
	return l->member_id;
}
