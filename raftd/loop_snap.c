/* raftd's snapshots: the .snap files, compaction and WAL purging, and
 * snapshots between members (see loop_int.h). */
#include "base/clock/clock.h"
#include "raftd/loop_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/peer/peer.h"
#include "raftd/raft/raftmsg.h"
#include "raftd/retain.h"
#include "raftd/wal/snap.h"
#include "raftd/wal/snapwrite.h"
#include "raftd/wal/wal.h"
#include "stored/btree/dbsnap.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"
#include "cluster/membership.h"
#include "cluster/v2store.h"

/* ---- snapshots on disk (etcd's triggerSnapshot) ---- */

/*
 * Writes a .snap file and its WAL snapshot record once --snapshot-count
 * entries were applied since the last one, as etcd does, at the newest
 * index that stored has made durable (a restart from the snapshot then
 * finds stored's db at or past it: invariant 5, docs/invariants.md), and only when the
 * membership in force now is the one at that index and a hard state
 * committing it went to the WAL (etcd's ValidSnapshotEntries skips a
 * snapshot past the recorded commit). Right after raft_advance only.
 */
void loop_maybe_snapshot(struct loop *l)
{
	uint64_t applied = l->feed.handed;
	if (!l->snap_dir || !l->snapshot_count || applied <= l->snap_index + l->snapshot_count)
		return;
	uint64_t at = l->feed.durable < applied ? l->feed.durable : applied;
	if (at > l->saved.commit)
		at = l->saved.commit;
	if (at <= l->snap_index || l->members_changed_at > at)
		return;
	const struct raftlog *log = raft_log(l->raft);
	const struct raft_entry *e = raftlog_entry(log, at);
	if (!e && at != log->snap_index)
		return;

	if (!l->snapw || snapwrite_busy(l->snapw))
		return; /* the last one is still being written */
	struct snap sn = { .index = at, .term = e ? e->term : log->snap_term };
	char *json;
	size_t len;
	raft_conf_state(l->raft, &sn.conf);
	if (v2store_encode(&l->roster.ms, &json, &len)) {
		log_warn("cannot encode the membership for a snapshot (out of memory); retried later");
		return;
	}
	sn.data = raftd_malloc(len ? len : 1);
	if (!sn.data) {
		free(json);
		log_warn("cannot encode the membership for a snapshot (out of memory); retried later");
		return;
	}
	memcpy(sn.data, json, len);
	sn.len = len;
	free(json);
	/* etcd's order: the .snap file (written and fsynced off the loop),
	 * then the WAL's record of it (loop_on_snapshot_written) */
	if (snapwrite_submit(l->snapw, &sn)) {
		snap_clear(&sn);
		return;
	}
	l->snap_index = at;
}

/* The .snap file of loop_maybe_snapshot is durable: the WAL records it. */
void loop_on_snapshot_written(struct loop *l)
{
	uint64_t index, term;
	int rc = snapwrite_reap(l->snapw, &index, &term);

	if (rc == -EAGAIN)
		return;
	if (rc) {
		loop_fail(l, rc, "failed to save snapshot");
		return;
	}
	rc = wal_save_snapshot(l->wal, index, term);
	if (rc) {
		loop_fail(l, rc, "cannot write the snapshot record to the WAL");
		return;
	}
	/* as every write of the loop: a lone member's inline write and sync
	 * waits for the end of the turn */
	if (loop_submit_wal(l))
		return;
	l->purge_seq = wal_last_seq(l->wal);
	l->purge_index = index;
	log_info("saved snapshot", LOG_U64("snapshot-index", index), LOG_U64("snapshot-term", term));
}

/* etcd's purge of WAL segments (--max-wals): once the newest snapshot
 * record is durable, the segments before the one it sits in may go. */
void loop_maybe_purge_wal(struct loop *l)
{
	if (!l->purge_seq || wal_durable_seq(l->wal) < l->purge_seq)
		return;
	l->purge_seq = 0;
	if (wal_purge(l->wal, l->purge_index, l->max_wals) < 0)
		log_warn("failed to purge WAL segments; retried at the next snapshot");
}

/* to, or less: the match of each follower that received a snapshot in
 * the last two election timeouts. Such a follower asks next for the
 * entries right after the snapshot, which sit at the start of the log;
 * compacting them would send it another snapshot at once. */
static uint64_t snap_acks_cap(struct loop *l, uint64_t to)
{
	for (size_t i = 0; i < l->n_snap_acks;) {
		struct loop_snap_ack *a = &l->snap_acks[i];
		struct raft_progress pr;
		if (raft_progress(l->raft, a->id, &pr) || a->ticks > 2 * l->election_ticks) {
			*a = l->snap_acks[--l->n_snap_acks];
			continue;
		}
		if (pr.match < to)
			to = pr.match;
		i++;
	}
	return to;
}

/* A snapshot send to id ended well. */
void loop_snap_ack_wait(struct loop *l, uint64_t id)
{
	size_t i = 0;

	while (i < l->n_snap_acks && l->snap_acks[i].id != id)
		i++;
	if (i == RAFT_MAX_MEMBERS)
		return;
	if (i == l->n_snap_acks)
		l->n_snap_acks++;
	l->snap_acks[i] = (struct loop_snap_ack){ .id = id };
}

/* The lowest match of the followers this leader replicates to (not those
 * waiting for a snapshot), or UINT64_MAX: none, or not the leader. */
static uint64_t followers_match(struct loop *l)
{
	struct raft_status st;
	uint64_t low = UINT64_MAX;

	if (!l->peer || !raft_is_leader(l->raft))
		return low;
	raft_status(l->raft, &st);
	for (size_t i = 0; i < st.n_progress; i++) {
		const struct raft_progress *p = &st.progress[i];
		if (p->id != l->member_id && p->state != RAFT_PROGRESS_SNAPSHOT && p->match < low)
			low = p->match;
	}
	return low;
}

/* Drops log entries nobody needs any more (raftd/retain.h): those
 * before stored's replay point and the feed's cursor, less what the
 * followers may still take from the log within --snapshot-count and
 * --raft-log-mib; and, of those kept, the data past RETAIN_RESIDENT_BYTES
 * from memory (also while a snapshot is sent, when no entry goes). Right
 * after raft_advance only. */
void loop_maybe_compact(struct loop *l)
{
	/* what followers may still need stays in the WAL, not in memory */
	uint64_t keep_from = feed_keep_from(&l->feed);
	raft_evict(l->raft, keep_from ? keep_from - 1 : 0, RETAIN_RESIDENT_BYTES);
	if (l->snaps_inflight)
		return;
	const struct raftlog *log = raft_log(l->raft);
	struct raft_conf_state cs;
	raft_conf_state(l->raft, &cs);
	struct retain r = {
		.keep_from = keep_from,
		.margin = cs.n_voters + cs.n_learners > 1 ? RETAIN_MARGIN_ENTRIES : 0,
		.limit = snap_acks_cap(l, UINT64_MAX),
		.followers = followers_match(l),
		.max_extra = l->snapshot_count,
		.budget = l->raft_log_bytes,
	};
	uint64_t to = retain_compact_to(log, &r);
	uint64_t failed = raft_take_load_failure(l->raft);
	if (failed && to < failed) {
		/* the follower that needed it takes a snapshot instead */
		to = failed < r.limit ? failed : r.limit;
		if (failed != l->load_failed_logged)
			log_warn("cannot read a Raft entry back from the WAL; a follower that "
				 "needs it gets a snapshot",
				 LOG_U64("index", failed), LOG_U64("compact-to", to));
		l->load_failed_logged = failed;
	}
	if (to > log->snap_index)
		raft_compact(l->raft, to);
}

/* ---- snapshots between members ---- */

/* member/snap/<index %016x>.snap.db */
static int snap_db_path(const struct loop *l, uint64_t index, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s/%016" PRIx64 ".snap.db", l->snap_dir, index);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/*
 * etcd's snapshot_merge and snapshot_sender for a MsgSnap the core wants
 * sent: the message carries the v2 store and the point of the db copy
 * that follows it (stored's published state, read beside stored), not
 * the core's older compaction point; the transport streams it as its
 * connection drains and reports the outcome (PEER_EV_SNAPSHOT_DONE).
 */
int loop_send_snapshot(struct loop *l, const struct raft_msg *m)
{
	char path[4200];
	struct dbsnap *ds;
	int rc;

	if (!l->snap_dir || snprintf(path, sizeof(path), "%s/db", l->snap_dir) >= (int)sizeof(path))
		return -ENOTSUP;
	rc = dbsnap_open(l->r, path, &ds);
	if (rc) {
		log_warn("cannot read the db for a snapshot to a follower; retried",
			 LOG_U64("to", m->to), LOG_ERRNO(rc));
		return rc;
	}
	uint64_t index = dbsnap_index(ds);
	const struct raftlog *log = raft_log(l->raft);
	const struct raft_entry *e = raftlog_entry(log, index);
	/* the membership sent must be the one at the db's index */
	if ((!e && index != log->snap_index) || index < m->snap_index ||
	    l->members_changed_at > index) {
		dbsnap_close(ds);
		return -EAGAIN;
	}
	char *json;
	size_t len;
	if (v2store_encode(&l->roster.ms, &json, &len)) {
		dbsnap_close(ds);
		return -ENOMEM;
	}
	struct raft_conf_state cs;
	raft_conf_state(l->raft, &cs);
	struct raftmsg w = {
		.type = RAFT_MSG_SNAP, .to = m->to, .from = m->from, .term = m->term,
		.snapshot = { .has_data = true, .len = len, .data = (const uint8_t *)json,
			      .index = index, .term = e ? e->term : log->snap_term,
			      .conf_state = { .voters = cs.voters, .n_voters = cs.n_voters,
					      .learners = cs.learners,
					      .n_learners = cs.n_learners } },
	};
	rc = peer_send_snapshot_db(l->peer, &w, ds); /* ds taken */
	free(json);
	if (!rc) {
		l->snaps_inflight++;
		l->snaps_inflight_ticks = 0;
		struct shm_metrics_peer *mp = shm_metrics_peer(l->metrics, m->to);
		if (mp)
			l->snap_sent_ns[mp - l->metrics->peer] = clock_now_ns();
	}
	return rc;
}

void loop_snap_timed(struct loop *l, uint64_t to, bool ok)
{
	struct shm_metrics_peer *mp = shm_metrics_peer(l->metrics, to);
	if (!mp)
		return;
	int64_t *sent = &l->snap_sent_ns[mp - l->metrics->peer];
	if (*sent && ok)
		shm_metric_observe(l->metrics, SHM_H_BACKEND_SNAPSHOT,
				   (uint64_t)(clock_now_ns() - *sent));
	*sent = 0;
}

/*
 * etcd's snapshotHandler after the transport saved the db (fsynced, under
 * a temporary name): the db becomes member/snap/<index>.snap.db, the
 * v2 store is kept for the ready that records the snapshot, and the
 * message goes on to the core. Returns 0 or why the message is dropped.
 */
int loop_take_snapshot_msg(struct loop *l, struct peer_event *ev)
{
	const struct raftmsg_snapshot *sn = &ev->msg.snapshot;
	char path[4200];
	int rc;

	if (!l->snap_dir || !ev->snap_db_path)
		return -ENOTSUP; /* a MsgSnap without its db (not through /raft/snapshot) */
	rc = snap_db_path(l, sn->index, path, sizeof(path));
	if (!rc && rename(ev->snap_db_path, path) < 0)
		rc = -errno;
	if (!rc)
		rc = diskio_sync_dir(l->snap_dir);
	if (rc) {
		log_warn("failed to save incoming database snapshot", LOG_STR("path", path),
			 LOG_ERRNO(rc));
		return rc;
	}
	raftd_free(ev->snap_db_path);
	ev->snap_db_path = NULL;
	uint8_t *data = raftd_malloc(sn->len ? sn->len : 1);
	if (!data)
		return -ENOMEM;
	if (sn->len)
		memcpy(data, sn->data, sn->len);
	raftd_free(l->rx_data);
	l->rx_data = data;
	l->rx_len = sn->len;
	l->rx_index = sn->index;
	l->rx_term = sn->term;
	return 0;
}

/*
 * A ready whose snapshot replaced the log: as etcd's applySnapshot, the
 * .snap file, then its WAL record (the install waits until that is
 * durable), the membership of the snapshot's v2 store. Returns 0 or a
 * fatal error (logged).
 */
int loop_record_snapshot(struct loop *l, const struct raft_ready *rd, bool *peers_changed)
{
	struct membership ms;
	int rc;

	if (!l->rx_data || l->rx_index != rd->snap_index || l->rx_term != rd->snap_term) {
		log_error("the core took a snapshot whose data this member does not have",
			  LOG_U64("snapshot-index", rd->snap_index));
		return -EPROTO;
	}
	log_info("applying snapshot", LOG_U64("current-snapshot-index", l->snap_index),
		 LOG_U64("current-applied-index", l->feed.handed),
		 LOG_U64("incoming-leader-snapshot-index", rd->snap_index),
		 LOG_U64("incoming-leader-snapshot-term", rd->snap_term));
	membership_init(&ms);
	rc = v2store_decode(l->rx_data, l->rx_len, &ms);
	if (rc) {
		log_error("the leader's snapshot holds no v2 store this member can read",
			  LOG_U64("snapshot-index", rd->snap_index), LOG_ERRNO(rc));
		return rc;
	}
	struct snap sn = { .index = rd->snap_index, .term = rd->snap_term, .conf = *rd->snap_conf,
			   .data = l->rx_data, .len = l->rx_len };
	rc = snap_save(l->snap_dir, &sn);
	if (!rc)
		rc = wal_save_snapshot(l->wal, rd->snap_index, rd->snap_term);
	if (rc) {
		membership_free(&ms);
		log_error("failed to save the leader's snapshot", LOG_ERRNO(rc));
		return rc;
	}
	membership_free(&l->roster.ms);
	l->roster.ms = ms;
	roster_recovered(&l->roster);
	l->members_changed_at = rd->snap_index;
	*peers_changed = true;
	l->snap_index = rd->snap_index;
	l->install_seq = wal_last_seq(l->wal);
	l->purge_seq = l->install_seq;
	l->purge_index = rd->snap_index;
	raftd_free(l->rx_data);
	l->rx_data = NULL;
	/* stored gets the db before anything after it, once the WAL holds
	 * the snapshot durably (loop_maybe_install) */
	char path[4200];
	rc = snap_db_path(l, rd->snap_index, path, sizeof(path));
	if (!rc)
		rc = feed_install(&l->feed, rd->snap_index, rd->snap_term, path);
	if (rc)
		return rc;
	feed_install_hold(&l->feed);
	return 0;
}

/* Once the WAL holds the snapshot durably, stored gets its db. */
void loop_maybe_install(struct loop *l)
{
	if (!l->install_seq || wal_durable_seq(l->wal) < l->install_seq)
		return;
	l->install_seq = 0;
	feed_install_release(&l->feed);
}
