/*
 * The Raft core (see raft.h). The structure follows etcd's raft package
 * (raft.go, tracker/progress.go, read_only.go): a step function per role,
 * progress trackers per follower, a read-only queue for ReadIndex. Where
 * this differs, it says why; the main difference is durability: the
 * leader's own entry counts toward commit only once raft_persisted says
 * it is durable, and entries are applied only once durable here.
 *
 * Messages are queued in r->msgs as they are made. A MsgApp keeps only
 * the range of its entries (index = the entry before them, n_entries);
 * raft_ready points it into the log, which by then can only have grown.
 * A MsgSnap gets the snapshot point current at raft_ready.
 *
 * Members (voters and learners) sit in prs[0..n_prs), in no particular
 * order; a removal moves the last one into the hole. Quorums count the
 * voters only.
 */
#include "raftd/raft/raft.h"

#include <errno.h>
#include <string.h>

#include "raftd/alloc.h"

enum progress_state { PR_PROBE, PR_REPLICATE, PR_SNAPSHOT };

/* What the leader knows of one member (etcd's tracker.Progress). */
struct progress {
	uint64_t id;
	bool learner;
	uint64_t match;          /* highest index known replicated there */
	uint64_t next;           /* next index to send; match < next */
	enum progress_state state;
	bool probe_sent;         /* probing: wait for an answer before more */
	bool recent_active;      /* heard from since the last quorum check */
	uint64_t pending_snapshot; /* PR_SNAPSHOT: the snapshot's index */
	uint64_t *infl;          /* last index of each MsgApp in flight (ring) */
	unsigned infl_start;
	unsigned infl_count;
	int vote;                /* this election: 1 granted, -1 refused, 0 none */
};

/* A ReadIndex request: waiting for a commit in this term (index 0), or
 * for heartbeat acknowledgements from a quorum (acks: a bit per position
 * in prs). */
struct read_req {
	uint64_t context;
	uint64_t from;           /* 0: this node's own request */
	uint64_t index;
	uint64_t acks;
};

/* A configuration the application applied at an entry index: the
 * configuration at a later snapshot point is the last one at or below
 * it. */
struct conf_change_point {
	uint64_t index;
	struct raft_conf_state cs;
};

#define NO_SELF SIZE_MAX

struct raft {
	struct raft_config cfg;  /* voters and learners not kept: see prs */
	struct progress prs[RAFT_MAX_MEMBERS];
	size_t n_prs;
	size_t self;             /* this node's position in prs, or NO_SELF */
	uint64_t lead_transferee; /* leader: the transfer target, 0 = none */
	uint64_t pending_conf_index; /* leader: a conf change may be unapplied
				      * while applying is below this */
	struct raft_conf_state snap_conf; /* configuration at log.snap_index */
	struct conf_change_point *ccp; /* after snap_index, oldest first */
	size_t n_ccp;
	size_t cap_ccp;
	uint64_t term;
	uint64_t vote;
	uint64_t lead;
	enum raft_role role;
	struct raftlog log;
	unsigned election_elapsed;
	unsigned heartbeat_elapsed;
	unsigned randomized_timeout;
	uint64_t rng;

	struct read_req *rr;     /* ReadIndex requests, oldest first */
	size_t n_rr;
	size_t cap_rr;

	struct raft_msg *msgs;   /* outbox */
	size_t n_msgs;
	size_t cap_msgs;
	/* The outbox the last ready handed out, until raft_advance: calls in
	 * between (raft_apply_conf_change) queue into the other one. */
	struct raft_msg *out_msgs;
	size_t cap_out_msgs;
	struct raft_read_state *reads;
	size_t n_reads;
	size_t cap_reads;

	struct raft_hardstate prev_hs; /* the last hard state handed out */
	uint64_t prev_lead;
	enum raft_role prev_role;
	bool snap_pending;       /* a snapshot replaced the log: hand it out */
};

void raft_config_defaults(struct raft_config *c)
{
	memset(c, 0, sizeof(*c));
	c->election_ticks = 10;
	c->heartbeat_ticks = 1;
	c->pre_vote = true;
	c->check_quorum = true;
	c->max_msg_bytes = 1024 * 1024;
	c->max_inflight = 256;
	c->seed = 1;
}

/* ---- small helpers ---- */

static uint64_t rnd(struct raft *r)
{
	/* splitmix64 */
	uint64_t z = (r->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t n_voters(const struct raft *r)
{
	size_t n = 0;
	for (size_t i = 0; i < r->n_prs; i++)
		n += !r->prs[i].learner;
	return n;
}

static size_t quorum(const struct raft *r)
{
	return n_voters(r) / 2 + 1;
}

/* The positions in prs of the voters, as a bit set. */
static uint64_t voter_mask(const struct raft *r)
{
	uint64_t m = 0;
	for (size_t i = 0; i < r->n_prs; i++)
		if (!r->prs[i].learner)
			m |= 1ull << i;
	return m;
}

static struct progress *progress_of(struct raft *r, uint64_t id)
{
	for (size_t i = 0; i < r->n_prs; i++)
		if (r->prs[i].id == id)
			return &r->prs[i];
	return NULL;
}

static struct progress *self_pr(struct raft *r)
{
	return r->self == NO_SELF ? NULL : &r->prs[r->self];
}

/* etcd's promotable: a voter of its own configuration may campaign. */
static bool promotable(const struct raft *r)
{
	return r->self != NO_SELF && !r->prs[r->self].learner;
}

/* Room for one more element in the array *p of n elements. */
static bool grow(void **p, size_t *cap, size_t n, size_t elem)
{
	return raftd_reserve(p, cap, n + 1, elem, 16) == 0;
}

/* Queues m (from this node). Without memory the message is dropped:
 * Raft tolerates lost messages, and the peer is retried by heartbeats. */
static void send(struct raft *r, struct raft_msg m)
{
	if (!grow((void **)&r->msgs, &r->cap_msgs, r->n_msgs, sizeof(*r->msgs)))
		return;
	m.from = r->cfg.id;
	r->msgs[r->n_msgs++] = m;
}

static void push_read(struct raft *r, uint64_t index, uint64_t context)
{
	if (!grow((void **)&r->reads, &r->cap_reads, r->n_reads, sizeof(*r->reads)))
		return; /* the reader times out and asks again */
	r->reads[r->n_reads++] = (struct raft_read_state){ index, context };
}

/* ---- progress (etcd's tracker.Progress) ---- */

static bool infl_full(const struct raft *r, const struct progress *pr)
{
	return pr->infl_count == r->cfg.max_inflight;
}

static void infl_add(struct raft *r, struct progress *pr, uint64_t last)
{
	if (infl_full(r, pr))
		return;
	pr->infl[(pr->infl_start + pr->infl_count) % r->cfg.max_inflight] = last;
	pr->infl_count++;
}

/* Frees the MsgApps whose entries all reached the follower. */
static void infl_free_to(struct raft *r, struct progress *pr, uint64_t to)
{
	while (pr->infl_count && pr->infl[pr->infl_start] <= to) {
		pr->infl_start = (pr->infl_start + 1) % r->cfg.max_inflight;
		pr->infl_count--;
	}
}

static void infl_free_first(struct raft *r, struct progress *pr)
{
	if (pr->infl_count)
		infl_free_to(r, pr, pr->infl[pr->infl_start]);
}

static void pr_reset_state(struct progress *pr, enum progress_state s)
{
	pr->state = s;
	pr->probe_sent = false;
	pr->pending_snapshot = 0;
	pr->infl_start = pr->infl_count = 0;
}

static void pr_become_probe(struct progress *pr)
{
	uint64_t next = pr->match + 1;
	if (pr->state == PR_SNAPSHOT && pr->pending_snapshot + 1 > next)
		next = pr->pending_snapshot + 1;
	pr_reset_state(pr, PR_PROBE);
	pr->next = next;
}

static void pr_become_replicate(struct progress *pr)
{
	pr_reset_state(pr, PR_REPLICATE);
	pr->next = pr->match + 1;
}

static bool pr_paused(const struct raft *r, const struct progress *pr)
{
	switch (pr->state) {
	case PR_PROBE: return pr->probe_sent;
	case PR_REPLICATE: return infl_full(r, pr);
	default: return true;
	}
}

/* The follower has everything up to n. Whether match moved. */
static bool pr_update(struct progress *pr, uint64_t n)
{
	bool updated = false;
	if (pr->match < n) {
		pr->match = n;
		updated = true;
		pr->probe_sent = false;
	}
	if (pr->next < n + 1)
		pr->next = n + 1;
	return updated;
}

/* The follower refused an append after index rejected; its log ends at
 * hint. Whether this was news (not a stale refusal). */
static bool pr_decr_to(struct progress *pr, uint64_t rejected, uint64_t hint)
{
	if (pr->state == PR_REPLICATE) {
		if (rejected <= pr->match)
			return false;
		pr->next = pr->match + 1;
		return true;
	}
	if (pr->next - 1 != rejected)
		return false;
	uint64_t next = rejected < hint + 1 ? rejected : hint + 1;
	pr->next = next ? next : 1;
	pr->probe_sent = false;
	return true;
}

/* ---- role changes ---- */

static void reset(struct raft *r, uint64_t term)
{
	if (r->term != term) {
		r->term = term;
		r->vote = 0;
	}
	r->lead = 0;
	r->election_elapsed = 0;
	r->heartbeat_elapsed = 0;
	r->randomized_timeout = r->cfg.election_ticks +
				(unsigned)(rnd(r) % r->cfg.election_ticks);
	uint64_t last = raftlog_last_index(&r->log);
	r->lead_transferee = 0;
	r->pending_conf_index = 0;
	for (size_t i = 0; i < r->n_prs; i++) {
		struct progress *pr = &r->prs[i];
		pr_reset_state(pr, PR_PROBE);
		pr->match = 0;
		pr->next = last + 1;
		pr->recent_active = true;
		pr->vote = 0;
	}
	/* Pending reads die with the term or role; their callers retry. */
	r->n_rr = 0;
}

static void become_follower(struct raft *r, uint64_t term, uint64_t lead)
{
	reset(r, term);
	r->lead = lead;
	r->role = RAFT_FOLLOWER;
}

static void become_pre_candidate(struct raft *r)
{
	/* etcd: no term change and no reset of the election clock. */
	for (size_t i = 0; i < r->n_prs; i++)
		r->prs[i].vote = 0;
	r->lead = 0;
	r->n_rr = 0;
	r->role = RAFT_PRE_CANDIDATE;
}

static void become_candidate(struct raft *r)
{
	reset(r, r->term + 1);
	r->vote = r->cfg.id;
	r->role = RAFT_CANDIDATE;
}

static void bcast_append(struct raft *r);

/* The leader appends entries (type and data taken from ents) in its term.
 * 0 or -ENOMEM (nothing appended). */
static int append_own(struct raft *r, const struct raft_entry *ents, size_t n)
{
	int rc = raftlog_append(&r->log, ents, n);
	if (rc == 0)
		for (size_t i = 0; i < n; i++)
			r->log.ents[r->log.n - n + i].term = r->term;
	return rc;
}

static void become_leader(struct raft *r)
{
	reset(r, r->term);
	r->lead = r->cfg.id;
	r->role = RAFT_LEADER;
	struct progress *me = self_pr(r);
	if (me) {
		me->match = r->log.stabled;
		pr_become_replicate(me);
	}
	/* A conf change may hide in the log's unapplied tail: accept the
	 * next one only once all of it is applied (etcd does the same
	 * rather than scan the tail). */
	r->pending_conf_index = raftlog_last_index(&r->log);
	/* An empty entry of the new term: committing it commits everything
	 * before it, and tells ReadIndex the leader is current. (Without
	 * memory for it, the first proposal plays its part.) */
	struct raft_entry e = { .type = RAFT_ENTRY_NORMAL };
	(void)append_own(r, &e, 1);
}

/* Records a vote; returns 1 when won, -1 when lost, 0 while open. */
static int poll_votes(struct raft *r, uint64_t id, bool granted)
{
	struct progress *pr = progress_of(r, id);
	if (pr && pr->vote == 0)
		pr->vote = granted ? 1 : -1;
	size_t yes = 0, no = 0;
	for (size_t i = 0; i < r->n_prs; i++) {
		if (r->prs[i].learner)
			continue;
		yes += r->prs[i].vote > 0;
		no += r->prs[i].vote < 0;
	}
	if (yes >= quorum(r))
		return 1;
	if (no > n_voters(r) - quorum(r))
		return -1;
	return 0;
}

/* Campaigns for the next term: with a pre-vote round first (pre), or at
 * once; transfer marks the votes of a leadership transfer. */
static void campaign(struct raft *r, bool pre, bool transfer)
{
	enum raft_msg_type type;
	uint64_t term;

	if (pre) {
		become_pre_candidate(r);
		type = RAFT_MSG_PRE_VOTE;
		term = r->term + 1;
	} else {
		become_candidate(r);
		type = RAFT_MSG_VOTE;
		term = r->term;
	}
	if (poll_votes(r, r->cfg.id, true) > 0) {
		/* A single voter wins at once. */
		if (pre) {
			campaign(r, false, false);
		} else {
			become_leader(r);
			bcast_append(r);
		}
		return;
	}
	for (size_t i = 0; i < r->n_prs; i++) {
		if (i == r->self || r->prs[i].learner)
			continue;
		send(r, (struct raft_msg){
			.type = type, .to = r->prs[i].id, .term = term,
			.index = raftlog_last_index(&r->log),
			.log_term = raftlog_last_term(&r->log), .transfer = transfer,
		});
	}
}

/* Whether a committed conf change waits to be applied: its configuration
 * is not in force yet, so this node may not know its own quorum. */
static bool conf_change_unapplied(const struct raft *r)
{
	for (uint64_t i = r->log.applying + 1; i <= r->log.committed; i++) {
		const struct raft_entry *e = raftlog_entry(&r->log, i);
		if (e && e->type == RAFT_ENTRY_CONF_CHANGE)
			return true;
	}
	return false;
}

static void hup(struct raft *r)
{
	if (r->role == RAFT_LEADER || !promotable(r) || conf_change_unapplied(r))
		return;
	campaign(r, r->cfg.pre_vote, false);
}

/* ---- the leader's sending ---- */

/* Sends what pr needs: a snapshot when its next entry was compacted,
 * else a MsgApp from pr->next (even empty, when send_if_empty, to carry
 * the commit index). Whether something was sent. */
static bool send_append(struct raft *r, struct progress *pr, bool send_if_empty)
{
	if (pr_paused(r, pr))
		return false;
	uint64_t prev = pr->next - 1;
	if (prev < r->log.snap_index) {
		send(r, (struct raft_msg){
			.type = RAFT_MSG_SNAP, .to = pr->id, .term = r->term,
			.snap_index = r->log.snap_index, .snap_term = r->log.snap_term,
		});
		pr_reset_state(pr, PR_SNAPSHOT);
		pr->pending_snapshot = r->log.snap_index;
		return true;
	}
	uint64_t last = raftlog_last_index(&r->log);
	size_t n = 0, bytes = 0;
	for (uint64_t i = pr->next; i <= last; i++) {
		size_t len = raftlog_entry(&r->log, i)->len;
		if (n > 0 && bytes + len > r->cfg.max_msg_bytes)
			break;
		bytes += len;
		n++;
	}
	if (n == 0 && !send_if_empty)
		return false;
	send(r, (struct raft_msg){
		.type = RAFT_MSG_APP, .to = pr->id, .term = r->term, .index = prev,
		.log_term = raftlog_term(&r->log, prev), .commit = r->log.committed,
		.n_entries = n,
	});
	if (n > 0) {
		if (pr->state == PR_REPLICATE) {
			pr->next = prev + n + 1;
			infl_add(r, pr, prev + n);
		} else {
			pr->probe_sent = true;
		}
	}
	return true;
}

static void bcast_append(struct raft *r)
{
	for (size_t i = 0; i < r->n_prs; i++)
		if (i != r->self)
			send_append(r, &r->prs[i], true);
}

/* Heartbeats to every member; context is the ReadIndex request they
 * confirm (0: none). */
static void bcast_heartbeat(struct raft *r, uint64_t context)
{
	for (size_t i = 0; i < r->n_prs; i++) {
		if (i == r->self)
			continue;
		struct progress *pr = &r->prs[i];
		uint64_t commit = pr->match < r->log.committed ? pr->match : r->log.committed;
		send(r, (struct raft_msg){
			.type = RAFT_MSG_HEARTBEAT, .to = pr->id, .term = r->term,
			.commit = commit, .context = context,
		});
	}
}

/* ---- commit and ReadIndex on the leader ---- */

static bool committed_in_term(const struct raft *r)
{
	return raftlog_term(&r->log, r->log.committed) == r->term;
}

static void deliver_read(struct raft *r, uint64_t index, uint64_t context, uint64_t from)
{
	if (from == 0 || from == r->cfg.id)
		push_read(r, index, context);
	else
		send(r, (struct raft_msg){ .type = RAFT_MSG_READ_INDEX_RESP, .to = from,
					   .term = r->term, .index = index,
					   .context = context });
}

/* The acknowledgements a new ReadIndex round starts with: the leader's
 * own, while it is a member. */
static uint64_t own_ack(const struct raft *r)
{
	return r->self == NO_SELF ? 0 : 1ull << r->self;
}

/* The newest request in a heartbeat round: every heartbeat carries it
 * (etcd's lastPendingRequestCtx), so that a lost round is retried. */
static uint64_t last_pending_read(const struct raft *r)
{
	for (size_t i = r->n_rr; i-- > 0;)
		if (r->rr[i].index)
			return r->rr[i].context;
	return 0;
}

/* Starts heartbeat rounds for the requests that waited for a commit in
 * this term: one heartbeat confirms them all. */
static void start_waiting_reads(struct raft *r)
{
	uint64_t last_ctx = 0;
	for (size_t i = 0; i < r->n_rr; i++) {
		if (r->rr[i].index == 0) {
			r->rr[i].index = r->log.committed;
			r->rr[i].acks = own_ack(r);
			last_ctx = r->rr[i].context;
		}
	}
	if (last_ctx)
		bcast_heartbeat(r, last_ctx);
}

/* The leader's commit rule: the highest index durable on a quorum (this
 * node counting only what its WAL made durable), if of the current term.
 * Whether the commit index moved. */
static bool maybe_commit(struct raft *r)
{
	uint64_t m[RAFT_MAX_MEMBERS];
	size_t n = 0;
	if (self_pr(r))
		self_pr(r)->match = r->log.stabled;
	for (size_t i = 0; i < r->n_prs; i++) {
		if (r->prs[i].learner)
			continue;
		uint64_t v = r->prs[i].match;
		size_t j = n++;
		for (; j > 0 && m[j - 1] < v; j--)
			m[j] = m[j - 1];
		m[j] = v;
	}
	if (n == 0)
		return false;
	uint64_t q = m[quorum(r) - 1];
	if (q <= r->log.committed || raftlog_term(&r->log, q) != r->term)
		return false;
	bool first = !committed_in_term(r);
	r->log.committed = q;
	if (first)
		start_waiting_reads(r);
	return true;
}

static void read_index(struct raft *r, uint64_t context, uint64_t from)
{
	if (n_voters(r) == 1 && promotable(r)) {
		deliver_read(r, r->log.committed, context, from);
		return;
	}
	if (!grow((void **)&r->rr, &r->cap_rr, r->n_rr, sizeof(*r->rr)))
		return;
	struct read_req *q = &r->rr[r->n_rr++];
	*q = (struct read_req){ .context = context, .from = from };
	/* etcd answers only once the leader committed an entry of its term:
	 * before that its commit index may be behind the cluster's. */
	if (committed_in_term(r)) {
		q->index = r->log.committed;
		q->acks = own_ack(r);
		bcast_heartbeat(r, context);
	}
}

static void read_ack(struct raft *r, uint64_t context, uint64_t from)
{
	size_t at = r->n_rr;
	for (size_t i = 0; i < r->n_rr; i++)
		if (r->rr[i].context == context && r->rr[i].index) {
			at = i;
			break;
		}
	struct progress *pr = progress_of(r, from);
	if (at == r->n_rr || !pr)
		return;
	r->rr[at].acks |= 1ull << (pr - r->prs);
	if ((size_t)__builtin_popcountll(r->rr[at].acks & voter_mask(r)) < quorum(r))
		return;
	/* Leadership was confirmed after every earlier request arrived. */
	for (size_t i = 0; i <= at; i++)
		deliver_read(r, r->rr[i].index, r->rr[i].context, r->rr[i].from);
	memmove(r->rr, r->rr + at + 1, (r->n_rr - at - 1) * sizeof(*r->rr));
	r->n_rr -= at + 1;
}

/* ---- the configuration ---- */

static bool conf_has(const struct raft_conf_state *cs, uint64_t id)
{
	for (size_t i = 0; i < cs->n_voters; i++)
		if (cs->voters[i] == id)
			return true;
	for (size_t i = 0; i < cs->n_learners; i++)
		if (cs->learners[i] == id)
			return true;
	return false;
}

/* Whether cs is a configuration raft_new and snapshots may carry: ids
 * not 0, each once, within the bound. */
static bool conf_valid(const struct raft_conf_state *cs)
{
	if (cs->n_voters > RAFT_MAX_MEMBERS ||
	    cs->n_learners > RAFT_MAX_MEMBERS - cs->n_voters)
		return false;
	for (size_t i = 0; i < cs->n_voters + cs->n_learners; i++) {
		uint64_t id = i < cs->n_voters ? cs->voters[i] : cs->learners[i - cs->n_voters];
		if (!id)
			return false;
		for (size_t j = 0; j < i; j++)
			if ((j < cs->n_voters ? cs->voters[j] : cs->learners[j - cs->n_voters]) == id)
				return false;
	}
	return true;
}

static void conf_drop(struct raft_conf_state *cs, uint64_t id)
{
	for (size_t i = 0; i < cs->n_voters; i++)
		if (cs->voters[i] == id)
			cs->voters[i--] = cs->voters[--cs->n_voters];
	for (size_t i = 0; i < cs->n_learners; i++)
		if (cs->learners[i] == id)
			cs->learners[i--] = cs->learners[--cs->n_learners];
}

static void find_self(struct raft *r)
{
	struct progress *me = progress_of(r, r->cfg.id);
	r->self = me ? (size_t)(me - r->prs) : NO_SELF;
}

/* The member at position i leaves prs; the last one takes its place, and
 * pending ReadIndex acknowledgements follow it. */
static void remove_member(struct raft *r, size_t i)
{
	size_t last = r->n_prs - 1;
	raftd_free(r->prs[i].infl);
	r->prs[i] = r->prs[last];
	for (size_t k = 0; k < r->n_rr; k++) {
		uint64_t a = r->rr[k].acks & ~(1ull << i);
		if (a & (1ull << last))
			a = (a & ~(1ull << last)) | (1ull << i);
		r->rr[k].acks = a;
	}
	r->n_prs--;
	find_self(r);
}

/* Replaces the whole configuration with cs (valid): members that stay
 * keep their progress; new ones are probed from the last index and count
 * as active until the next quorum check (etcd's initProgress). 0 or
 * -ENOMEM (then nothing changed). */
static int switch_config(struct raft *r, const struct raft_conf_state *cs)
{
	size_t fresh = 0;
	for (size_t i = 0; i < cs->n_voters + cs->n_learners; i++) {
		uint64_t id = i < cs->n_voters ? cs->voters[i] : cs->learners[i - cs->n_voters];
		fresh += progress_of(r, id) == NULL;
	}
	/* allocate first, so that a failure changes nothing */
	uint64_t *infl[RAFT_MAX_MEMBERS];
	for (size_t i = 0; i < fresh; i++) {
		infl[i] = raftd_calloc(r->cfg.max_inflight, sizeof(uint64_t));
		if (!infl[i]) {
			while (i--)
				raftd_free(infl[i]);
			return -ENOMEM;
		}
	}
	for (size_t i = r->n_prs; i-- > 0;)
		if (!conf_has(cs, r->prs[i].id))
			remove_member(r, i);
	for (size_t i = 0; i < cs->n_voters + cs->n_learners; i++) {
		bool learner = i >= cs->n_voters;
		uint64_t id = learner ? cs->learners[i - cs->n_voters] : cs->voters[i];
		struct progress *pr = progress_of(r, id);
		if (!pr) {
			pr = &r->prs[r->n_prs++];
			memset(pr, 0, sizeof(*pr));
			pr->infl = infl[--fresh];
			pr->id = id;
			pr->next = raftlog_last_index(&r->log) ? raftlog_last_index(&r->log) : 1;
			pr->state = PR_PROBE;
			pr->recent_active = true;
		}
		pr->learner = learner;
	}
	find_self(r);
	return 0;
}

/* ---- proposals and leadership transfer on the leader ---- */

/* Appends proposed entries, replacing each conf change that comes while
 * an earlier one may be unapplied by an empty normal entry (etcd's
 * pendingConfIndex rule). 0, -EBUSY (a transfer runs), -EPERM (this
 * leader was removed), -ENOMEM. */
static int propose_entries(struct raft *r, const struct raft_entry *ents, size_t n)
{
	struct raft_entry *copy = NULL;
	uint64_t last = raftlog_last_index(&r->log);
	uint64_t pending = r->pending_conf_index;

	if (!self_pr(r))
		return -EPERM;
	if (r->lead_transferee)
		return -EBUSY;
	for (size_t i = 0; i < n; i++) {
		if (ents[i].type != RAFT_ENTRY_CONF_CHANGE)
			continue;
		if (pending <= r->log.applying) {
			pending = last + i + 1;
			continue;
		}
		if (!copy) {
			copy = raftd_malloc(n * sizeof(*copy));
			if (!copy)
				return -ENOMEM;
			memcpy(copy, ents, n * sizeof(*copy));
		}
		copy[i] = (struct raft_entry){ .type = RAFT_ENTRY_NORMAL };
	}
	int rc = append_own(r, copy ? copy : ents, n);
	raftd_free(copy);
	if (rc)
		return rc;
	r->pending_conf_index = pending;
	bcast_append(r);
	return 0;
}

static void send_timeout_now(struct raft *r, uint64_t to)
{
	send(r, (struct raft_msg){ .type = RAFT_MSG_TIMEOUT_NOW, .to = to, .term = r->term });
}

/* etcd's MsgTransferLeader on the leader, pr the transferee. */
static void start_transfer(struct raft *r, struct progress *pr)
{
	if (pr->learner || pr->id == r->lead_transferee || pr == self_pr(r))
		return;
	/* one election timeout to finish, measured from now */
	r->election_elapsed = 0;
	r->lead_transferee = pr->id;
	if (pr->match == raftlog_last_index(&r->log))
		send_timeout_now(r, pr->id);
	else
		send_append(r, pr, true);
}

/* ---- stepping ---- */

static void step_leader(struct raft *r, const struct raft_msg *m)
{
	struct progress *pr;

	switch (m->type) {
	case RAFT_MSG_BEAT:
		bcast_heartbeat(r, last_pending_read(r));
		return;
	case RAFT_MSG_CHECK_QUORUM: {
		size_t active = 0;
		for (size_t i = 0; i < r->n_prs; i++) {
			if (!r->prs[i].learner)
				active += i == r->self || r->prs[i].recent_active;
			if (i != r->self)
				r->prs[i].recent_active = false;
		}
		/* No voter at all: etcd's empty majority wins. */
		if (n_voters(r) && active < quorum(r))
			become_follower(r, r->term, 0);
		return;
	}
	case RAFT_MSG_PROP:
		propose_entries(r, m->entries, m->n_entries);
		return;
	case RAFT_MSG_READ_INDEX:
		read_index(r, m->context, m->from);
		return;
	default:
		break;
	}

	pr = progress_of(r, m->from);
	if (!pr || pr == self_pr(r))
		return;
	switch (m->type) {
	case RAFT_MSG_APP_RESP:
		pr->recent_active = true;
		if (m->reject) {
			if (pr_decr_to(pr, m->index, m->reject_hint)) {
				if (pr->state == PR_REPLICATE)
					pr_become_probe(pr);
				send_append(r, pr, true);
			}
			return;
		}
		{
			bool was_paused = pr_paused(r, pr);
			if (!pr_update(pr, m->index))
				return;
			/* In probe, only the answer to the probe (or a later
			 * MsgApp) shows where the follower's log reaches: an
			 * older answer still on the way, e.g. from before a
			 * snapshot was sent, would set next back below the
			 * snapshot and send another one. (etcd 3.4 replicates
			 * from there.) */
			if (pr->state == PR_PROBE && m->index + 1 >= pr->next)
				pr_become_replicate(pr);
			else if (pr->state == PR_SNAPSHOT && pr->match >= pr->pending_snapshot)
				pr_become_probe(pr);
			else if (pr->state == PR_REPLICATE)
				infl_free_to(r, pr, m->index);
			if (maybe_commit(r))
				bcast_append(r);
			else if (was_paused)
				send_append(r, pr, true);
			/* The window may have room for several MsgApps now. */
			while (send_append(r, pr, false))
				;
			if (m->from == r->lead_transferee &&
			    pr->match == raftlog_last_index(&r->log))
				send_timeout_now(r, m->from);
		}
		return;
	case RAFT_MSG_HEARTBEAT_RESP:
		pr->recent_active = true;
		pr->probe_sent = false;
		if (pr->state == PR_REPLICATE && infl_full(r, pr))
			infl_free_first(r, pr);
		if (pr->match < raftlog_last_index(&r->log))
			send_append(r, pr, true);
		if (m->context)
			read_ack(r, m->context, m->from);
		return;
	case RAFT_MSG_SNAP_STATUS:
		if (pr->state != PR_SNAPSHOT)
			return;
		if (m->reject)
			pr->pending_snapshot = 0;
		pr_become_probe(pr);
		/* wait for the follower's answer before probing again */
		pr->probe_sent = true;
		return;
	case RAFT_MSG_UNREACHABLE:
		if (pr->state == PR_REPLICATE)
			pr_become_probe(pr);
		return;
	case RAFT_MSG_TRANSFER_LEADER:
		start_transfer(r, pr);
		return;
	default:
		return;
	}
}

static void commit_to(struct raft *r, uint64_t commit)
{
	uint64_t last = raftlog_last_index(&r->log);
	if (commit > last)
		commit = last;
	if (commit > r->log.committed)
		r->log.committed = commit;
}

static void handle_append(struct raft *r, const struct raft_msg *m)
{
	struct raft_msg resp = { .type = RAFT_MSG_APP_RESP, .to = m->from, .term = r->term };

	if (m->index < r->log.committed) {
		resp.index = r->log.committed;
		send(r, resp);
		return;
	}
	bool matched;
	uint64_t last_new;
	int rc = raftlog_maybe_append(&r->log, m->index, m->log_term, m->entries,
				      m->n_entries, &matched, &last_new);
	if (rc)
		return; /* no memory (or a leader breaking Raft): no answer */
	if (matched) {
		commit_to(r, m->commit < last_new ? m->commit : last_new);
		resp.index = last_new;
	} else {
		resp.index = m->index;
		resp.reject = true;
		resp.reject_hint = raftlog_last_index(&r->log);
	}
	send(r, resp);
}

static void handle_heartbeat(struct raft *r, const struct raft_msg *m)
{
	commit_to(r, m->commit);
	send(r, (struct raft_msg){ .type = RAFT_MSG_HEARTBEAT_RESP, .to = m->from,
				   .term = r->term, .context = m->context });
}

static void handle_snapshot(struct raft *r, const struct raft_msg *m)
{
	struct raft_msg resp = { .type = RAFT_MSG_APP_RESP, .to = m->from, .term = r->term };
	struct raft_conf_state cur;

	if (!m->snap_conf)
		raft_conf_state(r, &cur);
	const struct raft_conf_state *cs = m->snap_conf ? m->snap_conf : &cur;
	if (m->snap_index <= r->log.committed || !conf_has(cs, r->cfg.id)) {
		/* old news, or (defence in depth, as etcd) a snapshot of a
		 * configuration without this member */
		resp.index = r->log.committed;
	} else if (raftlog_term(&r->log, m->snap_index) == m->snap_term &&
		   m->snap_index <= raftlog_last_index(&r->log)) {
		/* The log already has it: just commit up to it. */
		commit_to(r, m->snap_index);
		resp.index = r->log.committed;
	} else if (switch_config(r, cs) == 0) {
		raftlog_reset(&r->log, m->snap_index, m->snap_term);
		r->snap_conf = *cs;
		r->n_ccp = 0;
		r->snap_pending = true;
		resp.index = m->snap_index;
	} else {
		return; /* no memory: the leader sends it again */
	}
	send(r, resp);
}

static void step_candidate(struct raft *r, const struct raft_msg *m)
{
	enum raft_msg_type mine = r->role == RAFT_PRE_CANDIDATE ? RAFT_MSG_PRE_VOTE_RESP
								: RAFT_MSG_VOTE_RESP;
	switch (m->type) {
	case RAFT_MSG_APP:
		become_follower(r, m->term, m->from);
		handle_append(r, m);
		return;
	case RAFT_MSG_HEARTBEAT:
		become_follower(r, m->term, m->from);
		handle_heartbeat(r, m);
		return;
	case RAFT_MSG_SNAP:
		become_follower(r, m->term, m->from);
		handle_snapshot(r, m);
		return;
	default:
		break;
	}
	if (m->type != mine)
		return;
	int won = poll_votes(r, m->from, !m->reject);
	if (won > 0) {
		if (r->role == RAFT_PRE_CANDIDATE) {
			campaign(r, false, false);
		} else {
			become_leader(r);
			bcast_append(r);
		}
	} else if (won < 0) {
		become_follower(r, r->term, 0);
	}
}

static void step_follower(struct raft *r, const struct raft_msg *m)
{
	switch (m->type) {
	case RAFT_MSG_APP:
	case RAFT_MSG_HEARTBEAT:
	case RAFT_MSG_SNAP:
		/* the leader of this term is alive */
		r->election_elapsed = 0;
		r->lead = m->from;
		if (m->type == RAFT_MSG_APP)
			handle_append(r, m);
		else if (m->type == RAFT_MSG_HEARTBEAT)
			handle_heartbeat(r, m);
		else
			handle_snapshot(r, m);
		return;
	case RAFT_MSG_READ_INDEX_RESP:
		push_read(r, m->index, m->context);
		return;
	case RAFT_MSG_TIMEOUT_NOW:
		/* a transfer skips pre-vote: no partition to recover from */
		if (promotable(r))
			campaign(r, false, true);
		return;
	case RAFT_MSG_READ_INDEX:
	case RAFT_MSG_TRANSFER_LEADER:
		/* etcd forwards both to the leader as this node's own */
		if (r->lead)
			send(r, (struct raft_msg){ .type = m->type, .to = r->lead,
						   .term = m->type == RAFT_MSG_READ_INDEX ? 0 : r->term,
						   .context = m->context });
		return;
	default:
		return;
	}
}

/* etcd's Step: the term checks, votes, then the role's step function. */
static void step(struct raft *r, const struct raft_msg *m)
{
	if (m->term > r->term) {
		bool vote = m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE;
		if (vote && !m->transfer && r->cfg.check_quorum && r->lead != 0 &&
		    r->election_elapsed < r->cfg.election_ticks)
			return; /* a leader is alive: its lease forbids a new vote */
		if (m->type == RAFT_MSG_PRE_VOTE) {
			/* a pre-vote never changes the term */
		} else if (m->type == RAFT_MSG_PRE_VOTE_RESP && !m->reject) {
			/* granted pre-votes carry the future term */
		} else if (m->type == RAFT_MSG_APP || m->type == RAFT_MSG_HEARTBEAT ||
			   m->type == RAFT_MSG_SNAP) {
			become_follower(r, m->term, m->from);
		} else {
			become_follower(r, m->term, 0);
		}
	} else if (m->term < r->term) {
		if ((r->cfg.check_quorum || r->cfg.pre_vote) &&
		    (m->type == RAFT_MSG_HEARTBEAT || m->type == RAFT_MSG_APP)) {
			/* Tell a stale leader (cut off, then back) that a newer
			 * term exists, so it steps down. */
			send(r, (struct raft_msg){ .type = RAFT_MSG_APP_RESP, .to = m->from,
						   .term = r->term });
		} else if (m->type == RAFT_MSG_PRE_VOTE) {
			send(r, (struct raft_msg){ .type = RAFT_MSG_PRE_VOTE_RESP, .to = m->from,
						   .term = r->term, .reject = true });
		}
		return;
	}

	switch (m->type) {
	case RAFT_MSG_HUP:
		hup(r);
		return;
	case RAFT_MSG_VOTE:
	case RAFT_MSG_PRE_VOTE: {
		enum raft_msg_type resp = m->type == RAFT_MSG_VOTE ? RAFT_MSG_VOTE_RESP
								   : RAFT_MSG_PRE_VOTE_RESP;
		bool can_vote = r->vote == m->from || (r->vote == 0 && r->lead == 0) ||
				(m->type == RAFT_MSG_PRE_VOTE && m->term > r->term);
		if (can_vote && raftlog_is_up_to_date(&r->log, m->index, m->log_term)) {
			send(r, (struct raft_msg){ .type = resp, .to = m->from, .term = m->term });
			if (m->type == RAFT_MSG_VOTE) {
				r->election_elapsed = 0;
				r->vote = m->from;
			}
		} else {
			send(r, (struct raft_msg){ .type = resp, .to = m->from, .term = r->term,
						   .reject = true });
		}
		return;
	}
	default:
		break;
	}
	if (r->role == RAFT_LEADER)
		step_leader(r, m);
	else if (r->role == RAFT_FOLLOWER)
		step_follower(r, m);
	else
		step_candidate(r, m);
}

/* ---- the API ---- */

int raft_new(const struct raft_config *cfg, const struct raft_hardstate *hs,
	     uint64_t snap_index, uint64_t snap_term, struct raft_entry *ents, size_t n,
	     uint64_t applied, struct raft **out)
{
	struct raft_conf_state cs = { .n_voters = cfg->n_voters, .n_learners = cfg->n_learners };

	if (!cfg->id || cfg->n_voters > RAFT_MAX_MEMBERS ||
	    cfg->n_learners > RAFT_MAX_MEMBERS - cfg->n_voters ||
	    !cfg->election_ticks || !cfg->heartbeat_ticks ||
	    cfg->heartbeat_ticks >= cfg->election_ticks || !cfg->max_inflight)
		return -EINVAL;
	if (cfg->n_voters)
		memcpy(cs.voters, cfg->voters, cfg->n_voters * sizeof(*cs.voters));
	if (cfg->n_learners)
		memcpy(cs.learners, cfg->learners, cfg->n_learners * sizeof(*cs.learners));
	if (!conf_valid(&cs))
		return -EINVAL;
	struct raft_hardstate zero = { 0, 0, 0 };
	if (!hs)
		hs = &zero;
	if (hs->commit > snap_index + n)
		return -EINVAL;

	struct raft *r = raftd_calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cfg = *cfg;
	r->cfg.voters = NULL;
	r->cfg.learners = NULL;
	r->self = NO_SELF;
	r->rng = cfg->seed ^ (cfg->id * 0x9e3779b97f4a7c15ull);
	raftlog_init(&r->log, snap_index, snap_term);
	if (switch_config(r, &cs)) {
		raft_free(r);
		return -ENOMEM;
	}
	r->snap_conf = cs;
	if (raftlog_restore(&r->log, snap_index, snap_term, ents, n)) {
		raft_free(r);
		return -EINVAL;
	}
	/* What the application applied was committed, even when the hard
	 * state recording it did not reach the WAL before a crash. */
	uint64_t last = snap_index + n;
	uint64_t commit = hs->commit > snap_index ? hs->commit : snap_index;
	if (applied > commit)
		commit = applied < last ? applied : last;
	r->log.committed = commit;
	r->log.applying = applied < commit ? applied : commit;
	if (r->log.applying < snap_index)
		r->log.applying = snap_index;
	r->term = hs->term;
	r->vote = hs->vote;
	r->prev_hs = *hs;
	become_follower(r, r->term, 0);
	r->prev_lead = 0;
	r->prev_role = RAFT_FOLLOWER;
	*out = r;
	return 0;
}

void raft_free(struct raft *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_prs; i++)
		raftd_free(r->prs[i].infl);
	raftlog_free(&r->log);
	raftd_free(r->ccp);
	raftd_free(r->rr);
	raftd_free(r->msgs);
	raftd_free(r->out_msgs);
	raftd_free(r->reads);
	raftd_free(r);
}

void raft_tick(struct raft *r)
{
	if (r->role != RAFT_LEADER) {
		/* A member that may not campaign keeps counting, as etcd's
		 * tickElection: its leader's lease then runs out, and it can
		 * vote for whoever the configuration it does not know yet
		 * needs it for. */
		if (++r->election_elapsed >= r->randomized_timeout && promotable(r)) {
			r->election_elapsed = 0;
			hup(r);
		}
		return;
	}
	r->heartbeat_elapsed++;
	if (++r->election_elapsed >= r->cfg.election_ticks) {
		r->election_elapsed = 0;
		if (r->cfg.check_quorum) {
			struct raft_msg m = { .type = RAFT_MSG_CHECK_QUORUM, .from = r->cfg.id };
			step_leader(r, &m);
			if (r->role != RAFT_LEADER)
				return;
		}
		/* a transfer that took an election timeout failed */
		r->lead_transferee = 0;
	}
	if (r->heartbeat_elapsed >= r->cfg.heartbeat_ticks) {
		r->heartbeat_elapsed = 0;
		bcast_heartbeat(r, last_pending_read(r));
	}
}

int raft_step(struct raft *r, const struct raft_msg *m)
{
	switch (m->type) {
	case RAFT_MSG_HUP:
	case RAFT_MSG_BEAT:
	case RAFT_MSG_CHECK_QUORUM:
	case RAFT_MSG_UNREACHABLE:
	case RAFT_MSG_SNAP_STATUS:
		return -EINVAL; /* local only */
	default:
		break;
	}
	if (m->type > RAFT_MSG_PRE_VOTE_RESP || m->to != r->cfg.id || !m->from ||
	    m->from == r->cfg.id)
		return -EINVAL;
	if (m->type == RAFT_MSG_PROP || m->type == RAFT_MSG_READ_INDEX) {
		/* forwarded requests carry no term (as in etcd) */
		if (r->role == RAFT_LEADER)
			step_leader(r, m);
		else if (r->role == RAFT_FOLLOWER && m->type == RAFT_MSG_READ_INDEX)
			step_follower(r, m);
		return 0;
	}
	step(r, m);
	return 0;
}

int raft_propose(struct raft *r, const struct raft_entry *ents, size_t n)
{
	if (r->role != RAFT_LEADER)
		return -EAGAIN;
	return propose_entries(r, ents, n);
}

int raft_read_index(struct raft *r, uint64_t context)
{
	if (!context)
		return -EINVAL;
	if (r->role == RAFT_LEADER) {
		read_index(r, context, 0);
		return 0;
	}
	if (!r->lead)
		return -EAGAIN;
	send(r, (struct raft_msg){ .type = RAFT_MSG_READ_INDEX, .to = r->lead,
				   .context = context });
	return 0;
}

int raft_campaign(struct raft *r)
{
	hup(r);
	return 0;
}

int raft_transfer_leader(struct raft *r, uint64_t to)
{
	if (r->role == RAFT_LEADER) {
		struct progress *pr = progress_of(r, to);
		if (to == r->cfg.id)
			return -EALREADY;
		if (!pr || pr->learner)
			return -EINVAL;
		start_transfer(r, pr);
		return 0;
	}
	if (to != r->cfg.id)
		return -EINVAL;
	if (!r->lead)
		return -EAGAIN;
	if (r->role == RAFT_FOLLOWER)
		send(r, (struct raft_msg){ .type = RAFT_MSG_TRANSFER_LEADER, .to = r->lead,
					   .term = r->term });
	return 0;
}

void raft_conf_state(const struct raft *r, struct raft_conf_state *out)
{
	out->n_voters = out->n_learners = 0;
	for (size_t i = 0; i < r->n_prs; i++) {
		if (r->prs[i].learner)
			out->learners[out->n_learners++] = r->prs[i].id;
		else
			out->voters[out->n_voters++] = r->prs[i].id;
	}
}

/* Remembers the configuration the entry at index brought, for the
 * snapshot point compaction will move past it. */
static int note_conf_change(struct raft *r, uint64_t index, const struct raft_conf_state *cs)
{
	if (index <= r->log.snap_index) {
		/* a change before the snapshot point, applied again */
		r->snap_conf = *cs;
		return 0;
	}
	while (r->n_ccp && r->ccp[r->n_ccp - 1].index >= index)
		r->n_ccp--;
	if (!grow((void **)&r->ccp, &r->cap_ccp, r->n_ccp, sizeof(*r->ccp)))
		return -ENOMEM;
	r->ccp[r->n_ccp++] = (struct conf_change_point){ index, *cs };
	return 0;
}

int raft_apply_conf_change(struct raft *r, uint64_t index, enum raft_conf_change_type type,
			   uint64_t node, struct raft_conf_state *out)
{
	struct raft_conf_state cs;

	if ((unsigned)type > RAFT_CONF_ADD_LEARNER_NODE)
		return -EINVAL;
	raft_conf_state(r, &cs);
	if (node && type != RAFT_CONF_UPDATE_NODE) {
		conf_drop(&cs, node);
		if (cs.n_voters + cs.n_learners == RAFT_MAX_MEMBERS &&
		    type != RAFT_CONF_REMOVE_NODE)
			return -EINVAL;
		if (type == RAFT_CONF_ADD_NODE)
			cs.voters[cs.n_voters++] = node;
		else if (type == RAFT_CONF_ADD_LEARNER_NODE)
			cs.learners[cs.n_learners++] = node;
		if (cs.n_voters == 0)
			return -EINVAL; /* etcd: "removed all voters" */
	}
	if (note_conf_change(r, index, &cs))
		return -ENOMEM;
	if (switch_config(r, &cs)) {
		r->n_ccp -= index > r->log.snap_index;
		return -ENOMEM;
	}
	if (out)
		*out = cs;
	/* A leader removed or demoted stays leader, counting itself no
	 * more (etcd 3.4 does the same); otherwise a smaller quorum may
	 * commit more, and new members are probed at once. */
	if (r->role != RAFT_LEADER || !promotable(r))
		return 0;
	if (maybe_commit(r)) {
		bcast_append(r);
	} else {
		for (size_t i = 0; i < r->n_prs; i++)
			if (i != r->self)
				send_append(r, &r->prs[i], false);
	}
	if (r->lead_transferee && !progress_of(r, r->lead_transferee))
		r->lead_transferee = 0;
	return 0;
}

static void progress_info(const struct progress *pr, struct raft_progress *out)
{
	static const enum raft_progress_state states[] = {
		[PR_PROBE] = RAFT_PROGRESS_PROBE,
		[PR_REPLICATE] = RAFT_PROGRESS_REPLICATE,
		[PR_SNAPSHOT] = RAFT_PROGRESS_SNAPSHOT,
	};
	*out = (struct raft_progress){
		.id = pr->id, .learner = pr->learner, .match = pr->match, .next = pr->next,
		.state = states[pr->state], .pending_snapshot = pr->pending_snapshot,
		.recent_active = pr->recent_active,
	};
}

void raft_status(const struct raft *r, struct raft_status *st)
{
	st->id = r->cfg.id;
	st->term = r->term;
	st->vote = r->vote;
	st->commit = r->log.committed;
	st->applied = r->log.applying;
	st->leader = r->lead;
	st->role = r->role;
	st->lead_transferee = r->lead_transferee;
	st->n_progress = 0;
	if (r->role != RAFT_LEADER)
		return;
	for (size_t i = 0; i < r->n_prs; i++)
		progress_info(&r->prs[i], &st->progress[st->n_progress++]);
}

int raft_progress(const struct raft *r, uint64_t id, struct raft_progress *out)
{
	if (r->role != RAFT_LEADER)
		return -EAGAIN;
	for (size_t i = 0; i < r->n_prs; i++) {
		if (r->prs[i].id == id) {
			progress_info(&r->prs[i], out);
			return 0;
		}
	}
	return -ENOENT;
}

static struct raft_hardstate hard_state(const struct raft *r)
{
	return (struct raft_hardstate){ r->term, r->vote, r->log.committed };
}

/* The last index that may go to the application. */
static uint64_t applicable(const struct raft *r)
{
	return r->log.committed < r->log.stabled ? r->log.committed : r->log.stabled;
}

bool raft_has_ready(const struct raft *r)
{
	struct raft_hardstate hs = hard_state(r);
	return raftlog_last_index(&r->log) > r->log.persisting || r->snap_pending ||
	       memcmp(&hs, &r->prev_hs, sizeof(hs)) || applicable(r) > r->log.applying ||
	       r->n_msgs || r->n_reads || r->lead != r->prev_lead || r->role != r->prev_role;
}

void raft_ready(struct raft *r, struct raft_ready *rd)
{
	memset(rd, 0, sizeof(*rd));
	rd->entries = raftlog_slice(&r->log, r->log.persisting, raftlog_last_index(&r->log),
				    &rd->n_entries);
	rd->entry_locs = rd->n_entries ? raftlog_locs_from(&r->log, r->log.persisting + 1) : NULL;
	rd->has_snapshot = r->snap_pending;
	rd->snap_index = r->log.snap_index;
	rd->snap_term = r->log.snap_term;
	rd->snap_conf = &r->snap_conf;
	rd->hs = hard_state(r);
	rd->hs_changed = memcmp(&rd->hs, &r->prev_hs, sizeof(rd->hs)) != 0;
	rd->committed = raftlog_slice(&r->log, r->log.applying, applicable(r), &rd->n_committed);

	/* Resolve MsgApp entries; drop those a lost leadership made stale. */
	size_t k = 0;
	for (size_t i = 0; i < r->n_msgs; i++) {
		struct raft_msg *m = &r->msgs[i];
		if (m->type == RAFT_MSG_APP) {
			if (m->term != r->term || r->role != RAFT_LEADER ||
			    m->index < r->log.snap_index ||
			    m->index + m->n_entries > raftlog_last_index(&r->log))
				continue;
			/* entries whose data left memory come back for this
			 * ready (raftlog_unload at raft_advance), up to
			 * RAFTLOG_LOAD_MAX_BYTES a ready: a MsgApp past that,
			 * or one whose entries cannot be read, is dropped (the
			 * follower asks again) */
			if (raftlog_load(&r->log, m->index, m->index + m->n_entries))
				continue;
			size_t n;
			m->entries = raftlog_slice(&r->log, m->index, m->index + m->n_entries, &n);
		} else if (m->type == RAFT_MSG_SNAP) {
			/* the newest snapshot: compaction may have moved it */
			m->snap_index = r->log.snap_index;
			m->snap_term = r->log.snap_term;
			m->snap_conf = &r->snap_conf;
		}
		r->msgs[k++] = *m;
	}
	struct raft_msg *out = r->out_msgs;
	size_t cap_out = r->cap_out_msgs;
	r->out_msgs = r->msgs;
	r->cap_out_msgs = r->cap_msgs;
	r->msgs = out;
	r->cap_msgs = cap_out;
	r->n_msgs = 0;
	rd->msgs = r->out_msgs;
	rd->n_msgs = k;
	rd->msgs_after_persist = r->role != RAFT_LEADER;
	rd->reads = r->reads;
	rd->n_reads = r->n_reads;
	rd->leader = r->lead;
	rd->role = r->role;
	rd->soft_changed = r->lead != r->prev_lead || r->role != r->prev_role;
}

void raft_advance(struct raft *r, const struct raft_ready *rd)
{
	raftlog_unload(&r->log);
	if (rd->n_entries)
		r->log.persisting = rd->entries[rd->n_entries - 1].index;
	if (rd->has_snapshot)
		r->snap_pending = false;
	if (rd->hs_changed)
		r->prev_hs = rd->hs;
	if (rd->n_committed)
		r->log.applying = rd->committed[rd->n_committed - 1].index;
	if (rd->n_reads) {
		memmove(r->reads, r->reads + rd->n_reads,
			(r->n_reads - rd->n_reads) * sizeof(*r->reads));
		r->n_reads -= rd->n_reads;
	}
	r->prev_lead = rd->leader;
	r->prev_role = rd->role;
}

void raft_persisted(struct raft *r, uint64_t index, uint64_t term)
{
	if (index <= r->log.stabled || index > r->log.persisting ||
	    raftlog_term(&r->log, index) != term)
		return;
	r->log.stabled = index;
	if (r->role == RAFT_LEADER && maybe_commit(r))
		bcast_append(r);
}

void raft_report_snapshot(struct raft *r, uint64_t peer, bool ok)
{
	if (r->role != RAFT_LEADER)
		return;
	struct raft_msg m = { .type = RAFT_MSG_SNAP_STATUS, .from = peer, .reject = !ok };
	step_leader(r, &m);
}

void raft_report_unreachable(struct raft *r, uint64_t peer)
{
	if (r->role != RAFT_LEADER)
		return;
	struct raft_msg m = { .type = RAFT_MSG_UNREACHABLE, .from = peer };
	step_leader(r, &m);
}

void raft_report_leader_down(struct raft *r, uint64_t peer)
{
	if (r->role != RAFT_FOLLOWER || peer == 0 || peer != r->lead || !promotable(r))
		return;
	/* Its lease is over: this member may vote for another now. */
	if (r->election_elapsed < r->cfg.election_ticks)
		r->election_elapsed = r->cfg.election_ticks;
	/* The voter with the lowest id among the others campaigns at the
	 * next tick, each following one two ticks later, so that two who
	 * saw the same crash do not split the vote (its own timeout, if it
	 * was about to fire, waits its turn too); a leader heard from in
	 * between resets the count. */
	unsigned rank = 0;
	for (size_t i = 0; i < r->n_prs; i++)
		if (!r->prs[i].learner && r->prs[i].id != peer && r->prs[i].id < r->cfg.id)
			rank++;
	unsigned left = 1 + 2 * rank;
	if (left >= r->cfg.election_ticks)
		left = r->cfg.election_ticks - 1;
	r->randomized_timeout = r->election_elapsed + left;
}

void raft_compact(struct raft *r, uint64_t index)
{
	raftlog_compact(&r->log, index);
	size_t k = 0;
	while (k < r->n_ccp && r->ccp[k].index <= r->log.snap_index)
		r->snap_conf = r->ccp[k++].cs;
	if (k) {
		memmove(r->ccp, r->ccp + k, (r->n_ccp - k) * sizeof(*r->ccp));
		r->n_ccp -= k;
	}
}

uint64_t raft_term(const struct raft *r) { return r->term; }
uint64_t raft_leader(const struct raft *r) { return r->lead; }
enum raft_role raft_role(const struct raft *r) { return r->role; }
bool raft_is_leader(const struct raft *r) { return r->role == RAFT_LEADER; }
bool raft_is_learner(const struct raft *r)
{
	return r->self != NO_SELF && r->prs[r->self].learner;
}
uint64_t raft_commit_index(const struct raft *r) { return r->log.committed; }
uint64_t raft_last_index(const struct raft *r) { return raftlog_last_index(&r->log); }
const struct raftlog *raft_log(const struct raft *r) { return &r->log; }

void raft_set_loader(struct raft *r, raftlog_load_fn load, void *ctx)
{
	raftlog_set_loader(&r->log, load, ctx);
}

void raft_evict(struct raft *r, uint64_t hi, uint64_t keep)
{
	raftlog_evict(&r->log, hi, keep);
}

void raft_set_locs(struct raft *r, uint64_t from, const struct raftlog_loc *locs, size_t n)
{
	raftlog_set_locs(&r->log, from, locs, n);
}

uint64_t raft_take_load_failure(struct raft *r)
{
	return raftlog_take_load_failure(&r->log);
}
