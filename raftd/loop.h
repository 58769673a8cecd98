/*
 * raftd's event loop: one thread that owns the Raft core, the WAL, the
 * feed to stored, the request rings, and drives the peer transport.
 *
 * It waits in epoll_wait on
 *   a timerfd        one Raft tick per heartbeat interval;
 *   the WAL's fd     a group commit finished (write + fdatasync);
 *   a doorbell fd    requests arrived on the rings, or stored's status
 *                    changed: a small thread sleeps on raftd's doorbell
 *                    (a futex cannot be put in an epoll set) and makes it
 *                    readable, then waits until the loop has drained;
 *   the transport's  its sockets and wake-ups from its helper threads
 *   epoll fd         (peer_poll_fd): polled within the turn;
 *   its event fd     events the lease and promote forwarders queued;
 *   a signal fd      (optional) SIGTERM / SIGINT: stop;
 *   a stop eventfd   loop_stop from another thread.
 * Idle, it wakes only for the tick.
 *
 * Each turn: collect a finished WAL batch (raft_persisted for its last
 * entry), look at stored's status (replay on a new epoch), drain the rings
 * (proposals.h), then take the core's ready work: entries and hard state
 * into the WAL's pending batch, which is submitted as soon as no batch is
 * in flight (group commit: whatever arrives during a write + fdatasync
 * goes into the next one); committed entries to the feed (feed.h), read
 * states to the gateways; then push what the COMMITTED ring has room for,
 * trim the core's log below what stored may still need, publish
 * raftd's status record when it changed, and end with the transport's
 * run, which writes the turn's messages to peers and keeps the
 * transport's timers (its next deadline bounds the wait). Nothing in a
 * turn waits: a full
 * ring leaves work queued and the loop comes back for it (a full
 * COMMITTED ring is retried on a short, growing timeout, since stored
 * frees room without ringing raftd).
 *
 * A single voter campaigns at once on start (etcd fast-forwards the
 * election clock of a lone member too) and leads before the loop serves
 * its first request.
 *
 * Stopping (SIGTERM, loop_stop): requests still arriving are refused with
 * etcd's "server stopped", the WAL batch in flight and the pending one are
 * made durable, what that commits is pushed to stored if the ring has
 * room, and waiting reads are answered.
 */
#ifndef CETCD_RAFTD_LOOP_H
#define CETCD_RAFTD_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "raftd/wal/wal.h"

struct shm_region;
struct initial_cluster;
struct peer;

struct loop_options {
	struct shm_region *region;  /* attached, with the raftd role held */
	const char *wal_dir;
	const struct initial_cluster *cluster; /* the initial cluster: the
					        * voters, and a new WAL's
					        * bootstrap entries */
	uint64_t member_id;         /* this member, one of cluster's */
	bool force_new_cluster;     /* --force-new-cluster (forcenew.h) */
	bool join;                  /* joining a running cluster (join.h):
				     * cluster holds its ids, and the core
				     * starts with no voters until the
				     * leader's log brings them */
	const char *name;           /* --name, published to the cluster */
	const struct config_urls *client_urls; /* --advertise-client-urls,
						* published; NULL = none */
	uint64_t request_timeout_ms; /* etcd's request timeout: how long a
				      * publish may take before it is retried
				      * (0: etcd's 5 s + 2 election timeouts) */
	uint64_t tick_ms;           /* --heartbeat-interval */
	uint64_t election_ms;       /* --election-timeout */
	bool pre_vote;              /* --pre-vote */
	struct wal_options wal;     /* io NULL = io_uring or plain; taken over */
	int signal_fd;              /* a signalfd whose readability means stop,
				     * or -1 */
	uint64_t snapshot_count;    /* --snapshot-count: entries applied
				     * between .snap files, and at most kept
				     * for followers (raftd/retain.h) */
	uint64_t raft_log_bytes;    /* --raft-log-mib in bytes: what the
				     * applied log may hold (0: 64 MiB) */
	const char *snap_dir;       /* member/snap: .snap files are written
				     * there and a restart starts from the
				     * newest; NULL: none */
	unsigned max_snapshots;     /* --max-snapshots (0: keep all) */
	unsigned max_wals;          /* --max-wals (0: keep all) */
	struct peer *peer;          /* the peer transport (started with
				     * peer_opts.driven: the loop's thread
				     * drives it; owned by the caller,
				     * stopped after loop_free); NULL:
				     * messages to peers are dropped */
};

struct loop_stats {
	uint64_t turns;
	uint64_t ticks;
	uint64_t ticks_lost;     /* timer expirations a late loop merged */
	uint64_t wal_batches;    /* group commits that became durable */
	uint64_t wal_saves;      /* readies saved into a batch */
	uint64_t commits_pushed; /* MSG_COMMITTED records pushed */
	uint64_t commits_blocked; /* pushes that found the COMMITTED ring full */
	uint64_t replays;        /* replays for a restarted stored */
	uint64_t msgs_dropped;   /* messages to peers (no peer links yet) */
	uint64_t proposed;       /* entries handed to the core */
	uint64_t rejected;       /* MSG_PROPOSE_REJECT sent */
	uint64_t dropped_term;   /* term-carrying proposals dropped */
	uint64_t read_rounds;    /* ReadIndex rounds */
	uint64_t reads_answered;
	uint64_t hellos;
};

struct loop;

/*
 * Opens or creates the WAL (bootstrap.h), builds the core from it and
 * stored's published state, and campaigns if this member is the only
 * voter. Logs each step as etcd does ("starting local member" or
 * "restarting local member"). Returns 0 and *out (freed by loop_free), or:
 * -EINVAL (bad options, this member not in the cluster), -EBADMSG (corrupt
 * WAL), -EBUSY (WAL still locked by another process after waiting up to
 * 5 s for a killed predecessor's I/O to be torn down), -ENOMEM, or another
 * -errno (logged with what failed).
 */
int loop_new(const struct loop_options *o, struct loop **out);

/*
 * Runs until the signal fd fires or loop_stop is called, then stops as
 * described above. Returns 0, or the error that ended it: the WAL failed
 * (-EIO and the like; the member must restart and replay), or a ring of
 * raftd's failed (-EIO).
 */
int loop_run(struct loop *l);

/* Asks loop_run to stop; safe from any thread and from a signal
 * handler. */
void loop_stop(struct loop *l);

/* Closes the WAL (syncing what is pending), stops the doorbell thread and
 * frees everything. NULL is accepted. */
void loop_free(struct loop *l);

/* Counters so far (call from the loop's thread, or after loop_run
 * returned). */
void loop_get_stats(const struct loop *l, struct loop_stats *out);

/* This member's id: its WAL's (which etcd trusts over the flags). */
uint64_t loop_member_id(const struct loop *l);

#endif
