/*
 * The Raft core in a simulated cluster, driven by a seed: 3 or 5 voters
 * at first and spare nodes that membership changes add (as learners,
 * promoted later, or as voters at once) while members are removed, the
 * leader too; each node with a simulated WAL (writes become durable
 * after a delay, in order; a crash loses what was not yet durable), a
 * network that drops, delays, duplicates and reorders messages and
 * partitions the nodes, crashes and restarts from the durable state only,
 * log compaction with snapshots sent to followers that fell behind,
 * leadership transfers, proposals and ReadIndex requests, and reports
 * that a leader is down (true ones after crashes, false ones too). Conf changes
 * travel as proposed EntryConfChange entries that the simulated
 * application applies with raft_apply_conf_change; a node that applies
 * its own removal stops for good (as etcd's server does).
 *
 * After every step it checks Raft's safety properties:
 *   election safety     at most one leader per term, ever;
 *   log matching        two entries with the same index and term are the
 *                       same entry, and so are the entries before them;
 *   leader completeness a leader holds every entry committed before its
 *                       term began;
 *   durability          an entry a leader commits is durable on a quorum
 *                       of that leader's voters;
 *   state machine       every node applies the same entry at an index,
 *                       and only entries committed and durable in its
 *                       own WAL;
 *   ReadIndex           a read index covers everything committed before
 *                       the read was asked.
 * and at the end, with the network healed, that the cluster makes
 * progress. Half the runs are without pre-vote (--pre-vote=false, etcd
 * 3.4's default), the others with it (cetcd's). A failure prints its
 * seed; CETCD_RAFT_SEED=n reruns one, and CETCD_RAFT_RUNS=n runs seeds
 * 1..n (default 10000). The totals printed
 * at the end (elections, conf changes, transfers, snapshots) must all be
 * nonzero, so the run is known to exercise them.
 */
#include "wal_util.h"

#include "raftd/raft/raft.h"

#define MAXN 7           /* node slots: initial voters, then spares */
#define STEPS 1200        /* chaotic steps per seed */
#define MAXIDX 4096
#define MAXTERM 20000
#define MAXBATCH 256
#define MAXHELD 1024
#define MAXNET 4096

/* Conf change entries carry this tag in their value: the rest holds a
 * sequence number, the change type and the node. */
#define CC_TAG (1ull << 63)

static uint64_t cur_seed;

#define SIM_CHECK(cond)                                                      \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s (seed %llu; "   \
				"rerun it alone with CETCD_RAFT_SEED=%llu)\n", \
				__FILE__, __LINE__, #cond,                   \
				(unsigned long long)cur_seed,                \
				(unsigned long long)cur_seed);               \
			exit(1);                                             \
		}                                                            \
	} while (0)

struct sentry {
	uint64_t term;
	uint64_t value; /* the 8 data bytes; 0 for an empty entry */
};

/* A message on the wire: the raft_msg with its entries (and a
 * snapshot's configuration) copied. */
struct wire {
	struct raft_msg m;
	struct raft_entry *ents;
	uint64_t *vals;
	struct raft_conf_state *conf;
	uint64_t due;
};

/* One WAL write of a node: what a ready handed over. */
struct batch {
	struct sentry *ents; /* indexes first .. first + n - 1 */
	uint64_t first, n;
	bool has_hs;
	struct raft_hardstate hs;
	bool has_snap;
	uint64_t snap_index, snap_term;
	struct raft_conf_state *snap_conf; /* with has_snap */
	uint64_t due;
};

struct held {
	uint64_t ticket; /* send once this many batches are durable */
	struct wire w;
};

struct node {
	uint64_t id;
	struct raft *r;
	bool up;
	uint64_t down_until;
	uint64_t retire_at;  /* applied its own removal: stops for good then */
	bool retired;
	/* the disk */
	struct raft_hardstate dhs;
	uint64_t dsnap_index, dsnap_term;
	struct raft_conf_state dsnap_conf;
	struct sentry dlog[MAXIDX]; /* index i at dlog[i]; valid (dsnap_index, dlast] */
	uint64_t dlast;
	/* the WAL pipeline */
	struct batch q[MAXBATCH];
	size_t qhead, qn;
	uint64_t handed, durable;
	struct held held[MAXHELD];
	size_t nheld;
	/* the application */
	uint64_t applied;
	uint64_t checked_commit;
	/* ReadIndex requests in flight: context -> minimum index */
	uint64_t read_ctx[64], read_min[64];
	size_t nreads;
	uint64_t next_ctx;
};

static struct sim {
	size_t n;          /* node slots in use */
	size_t n_initial;  /* voters at the start: nodes 1..n_initial */
	struct node nodes[MAXN];
	struct wire net[MAXNET];
	size_t nnet;
	uint64_t now;
	uint64_t rng;
	int group[MAXN]; /* partition: messages only within a group */
	unsigned p_drop, p_dup; /* per mille */
	unsigned max_delay;
	bool chaos;
	bool pre_vote;   /* the nodes' raft_config.pre_vote */
	/* what the checks remember */
	uint64_t leader_of[MAXTERM];
	struct { uint64_t term, value, prev_term; } canon[MAXIDX][8];
	uint8_t ncanon[MAXIDX];
	struct { uint64_t term, value, seen_term; bool set; } committed[MAXIDX];
	uint64_t committed_max;
	struct { uint64_t value; bool set; } app[MAXIDX];
	uint64_t next_value;
	bool removed[MAXN + 1];  /* ids never to be added again (etcd's rule) */
	uint64_t transfer_to, transfer_term;
	unsigned reads_done, snaps_installed, crashes;
	unsigned elections, conf_applied, transfers_started, transfers_done;
} S;

static uint64_t rnd(void)
{
	uint64_t z = (S.rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool chance(unsigned per_mille)
{
	return rnd() % 1000 < per_mille;
}

static uint64_t val_of(const struct raft_entry *e)
{
	uint64_t v = 0;
	if (e->len == 8)
		memcpy(&v, e->data, 8);
	return v;
}

static uint32_t type_of(uint64_t value)
{
	return value & CC_TAG ? RAFT_ENTRY_CONF_CHANGE : RAFT_ENTRY_NORMAL;
}

/* ---- the network ---- */

static void wire_free(struct wire *w)
{
	free(w->ents);
	free(w->vals);
	free(w->conf);
	w->ents = NULL;
	w->vals = NULL;
	w->conf = NULL;
}

static struct wire wire_copy(const struct raft_msg *m)
{
	struct wire w = { .m = *m };
	if (m->n_entries) {
		w.ents = malloc(m->n_entries * sizeof(*w.ents));
		w.vals = malloc(m->n_entries * sizeof(*w.vals));
		SIM_CHECK(w.ents && w.vals);
		for (size_t i = 0; i < m->n_entries; i++) {
			w.ents[i] = m->entries[i];
			w.vals[i] = val_of(&m->entries[i]);
			w.ents[i].data = m->entries[i].len ? (uint8_t *)&w.vals[i] : NULL;
		}
	}
	w.m.entries = w.ents;
	if (m->snap_conf) {
		w.conf = malloc(sizeof(*w.conf));
		SIM_CHECK(w.conf);
		*w.conf = *m->snap_conf;
		w.m.snap_conf = w.conf;
	}
	return w;
}

static void net_put(struct wire w)
{
	if (S.nnet >= MAXNET || (S.chaos && chance(S.p_drop))) {
		/* a lost snapshot is reported as failed to its sender */
		if (w.m.type == RAFT_MSG_SNAP && S.nodes[w.m.from - 1].up)
			raft_report_snapshot(S.nodes[w.m.from - 1].r, w.m.to, false);
		wire_free(&w);
		return;
	}
	w.due = S.now + 1 + rnd() % S.max_delay;
	if (S.chaos && chance(30))
		w.due += rnd() % (8 * S.max_delay); /* a straggler: reordering */
	if (S.chaos && chance(S.p_dup) && S.nnet + 1 < MAXNET) {
		struct wire d = wire_copy(&w.m);
		d.due = w.due + rnd() % 4;
		S.net[S.nnet++] = d;
	}
	S.net[S.nnet++] = w;
}

static void deliver(struct wire *w)
{
	struct node *to = &S.nodes[w->m.to - 1];
	struct node *from = &S.nodes[w->m.from - 1];
	bool ok = to->up && S.group[w->m.to - 1] == S.group[w->m.from - 1];
	if (ok) {
		for (size_t i = 0; i < w->m.n_entries; i++)
			w->ents[i].data = w->ents[i].len ? (uint8_t *)&w->vals[i] : NULL;
		w->m.entries = w->ents;
		w->m.snap_conf = w->conf;
		SIM_CHECK(raft_step(to->r, &w->m) == 0);
	}
	if (w->m.type == RAFT_MSG_SNAP && from->up)
		raft_report_snapshot(from->r, w->m.to, ok);
}

static void net_step(void)
{
	size_t k = 0;
	/* deliver what is due, in random order among the due */
	for (size_t i = 0; i < S.nnet; i++) {
		size_t j = i + rnd() % (S.nnet - i);
		struct wire t = S.net[i];
		S.net[i] = S.net[j];
		S.net[j] = t;
	}
	for (size_t i = 0; i < S.nnet; i++) {
		if (S.net[i].due <= S.now) {
			deliver(&S.net[i]);
			wire_free(&S.net[i]);
		} else {
			S.net[k++] = S.net[i];
		}
	}
	S.nnet = k;
}

/* ---- nodes ---- */

/* The application's conf change: decodes the entry's value. */
static void cc_decode(uint64_t value, enum raft_conf_change_type *type, uint64_t *node)
{
	*type = (enum raft_conf_change_type)((value >> 8) & 0xff);
	*node = value & 0xff;
}

static void node_start(struct node *nd)
{
	struct raft_config c;
	uint64_t voters[MAXN];
	for (size_t i = 0; i < S.n_initial; i++)
		voters[i] = i + 1;
	raft_config_defaults(&c);
	c.id = nd->id;
	/* the configuration at the WAL's snapshot: the initial one (which
	 * spare nodes are told too, not being in it) or the snapshot's */
	if (nd->dsnap_index) {
		c.voters = nd->dsnap_conf.voters;
		c.n_voters = nd->dsnap_conf.n_voters;
		c.learners = nd->dsnap_conf.learners;
		c.n_learners = nd->dsnap_conf.n_learners;
	} else {
		c.voters = voters;
		c.n_voters = S.n_initial;
	}
	c.pre_vote = S.pre_vote;
	c.seed = rnd();
	c.max_inflight = 1 + (unsigned)(rnd() % 8);
	c.max_msg_bytes = 8 * (1 + rnd() % 4);

	/* The WAL's log; the application may be ahead of the commit index
	 * the WAL recorded: entries it already has come again and are
	 * skipped, as stored skips by index. */
	uint64_t si = nd->dsnap_index, st = nd->dsnap_term, last = nd->dlast;
	size_t n = (size_t)(last - si);
	struct raft_entry *ents = n ? raftd_calloc(n, sizeof(*ents)) : NULL;
	SIM_CHECK(n == 0 || ents);
	for (size_t i = 0; i < n; i++) {
		const struct sentry *s = &nd->dlog[si + 1 + i];
		ents[i].index = si + 1 + i;
		ents[i].term = s->term;
		ents[i].type = type_of(s->value);
		if (s->value) {
			ents[i].len = 8;
			ents[i].data = raftd_malloc(8);
			SIM_CHECK(ents[i].data);
			memcpy(ents[i].data, &s->value, 8);
		}
	}
	struct raft_hardstate hs = nd->dhs;
	SIM_CHECK(raft_new(&c, &hs, si, st, ents, n, nd->applied, &nd->r) == 0);
	/* the conf changes the application applied after the snapshot */
	for (uint64_t i = si + 1; i <= nd->applied && i <= last; i++) {
		enum raft_conf_change_type type;
		uint64_t node;
		if (type_of(nd->dlog[i].value) != RAFT_ENTRY_CONF_CHANGE)
			continue;
		cc_decode(nd->dlog[i].value, &type, &node);
		SIM_CHECK(raft_apply_conf_change(nd->r, i, type, node, NULL) == 0);
	}
	nd->up = true;
	nd->checked_commit = 0;
}

static void node_crash(struct node *nd)
{
	raft_free(nd->r);
	nd->r = NULL;
	nd->up = false;
	for (size_t i = 0; i < nd->qn; i++) {
		free(nd->q[(nd->qhead + i) % MAXBATCH].ents);
		free(nd->q[(nd->qhead + i) % MAXBATCH].snap_conf);
	}
	nd->qn = 0;
	nd->handed = nd->durable = 0;
	for (size_t i = 0; i < nd->nheld; i++)
		wire_free(&nd->held[i].w);
	nd->nheld = 0;
	nd->nreads = 0;
	nd->down_until = S.now + 5 + rnd() % 60;
	S.crashes++;
}

/* Batches whose time came become durable, in order. */
static void node_persist(struct node *nd)
{
	while (nd->qn && nd->q[nd->qhead].due <= S.now) {
		struct batch *b = &nd->q[nd->qhead];
		if (b->has_snap) {
			nd->dsnap_index = b->snap_index;
			nd->dsnap_term = b->snap_term;
			nd->dsnap_conf = *b->snap_conf;
			nd->dlast = b->snap_index;
			if (b->snap_index > nd->applied)
				nd->applied = b->snap_index;
			S.snaps_installed++;
		}
		for (uint64_t k = 0; k < b->n; k++)
			nd->dlog[b->first + k] = b->ents[k];
		if (b->n)
			nd->dlast = b->first + b->n - 1;
		if (b->has_hs)
			nd->dhs = b->hs;
		nd->durable++;
		nd->qhead = (nd->qhead + 1) % MAXBATCH;
		nd->qn--;
		if (b->n)
			raft_persisted(nd->r, b->first + b->n - 1, b->ents[b->n - 1].term);
		free(b->ents);
		free(b->snap_conf);
	}
	size_t k = 0;
	for (size_t i = 0; i < nd->nheld; i++) {
		if (nd->held[i].ticket <= nd->durable)
			net_put(nd->held[i].w);
		else
			nd->held[k++] = nd->held[i];
	}
	nd->nheld = k;
}

/* Newly committed entries of nd: they never change, and are durable on
 * a quorum. Run before nd compacts its log, too. */
static void record_commits(struct node *nd)
{
	/* A leader's commit is durable on a quorum of its voters (it may
	 * not count itself, once removed). A follower only learns commits
	 * a leader made, under a configuration it may not know yet. */
	struct raft_conf_state cs;
	raft_conf_state(nd->r, &cs);
	bool leader = raft_is_leader(nd->r);
	const struct raftlog *l = raft_log(nd->r);
	uint64_t term = raft_term(nd->r);
	uint64_t commit = raft_commit_index(nd->r);
	for (uint64_t i = nd->checked_commit + 1; i <= commit; i++) {
		if (i <= l->snap_index)
			continue;
		const struct raft_entry *e = raftlog_entry(l, i);
		if (S.committed[i].set) {
			SIM_CHECK(S.committed[i].term == e->term);
			SIM_CHECK(S.committed[i].value == val_of(e));
			continue;
		}
		S.committed[i].set = true;
		S.committed[i].term = e->term;
		S.committed[i].value = val_of(e);
		S.committed[i].seen_term = term;
		size_t durable = 0;
		for (size_t j = 0; j < cs.n_voters; j++) {
			struct node *o = &S.nodes[cs.voters[j] - 1];
			durable += (i <= o->dsnap_index) ||
				   (i <= o->dlast && o->dlog[i].term == e->term);
		}
		SIM_CHECK(!leader || durable >= cs.n_voters / 2 + 1);
		if (i > S.committed_max)
			S.committed_max = i;
	}
	if (commit > nd->checked_commit)
		nd->checked_commit = commit;
}


static void apply(struct node *nd, const struct raft_entry *e)
{
	/* only what is committed and durable in this node's own WAL */
	SIM_CHECK(e->index <= raft_commit_index(nd->r));
	SIM_CHECK(e->index <= nd->dlast && nd->dlog[e->index].term == e->term);
	uint64_t v = val_of(e);
	if (e->index <= nd->applied) {
		/* after a restart: already applied, skipped by index */
		SIM_CHECK(S.app[e->index].set && S.app[e->index].value == v);
		return;
	}
	SIM_CHECK(e->index == nd->applied + 1);
	SIM_CHECK(e->type == type_of(v));
	if (S.app[e->index].set)
		SIM_CHECK(S.app[e->index].value == v);
	else
		S.conf_applied += e->type == RAFT_ENTRY_CONF_CHANGE;
	S.app[e->index].set = true;
	S.app[e->index].value = v;
	nd->applied = e->index;
	if (e->type == RAFT_ENTRY_CONF_CHANGE) {
		enum raft_conf_change_type type;
		uint64_t node;
		cc_decode(v, &type, &node);
		/* commits so far were made under the old configuration */
		record_commits(nd);
		SIM_CHECK(raft_apply_conf_change(nd->r, e->index, type, node, NULL) == 0);
		if (type == RAFT_CONF_REMOVE_NODE) {
			S.removed[node] = true;
			if (node == nd->id && !nd->retire_at)
				nd->retire_at = S.now + 1 + rnd() % 50;
		}
	}
}

static void node_ready(struct node *nd)
{
	struct raft_ready rd;
	while (nd->up && raft_has_ready(nd->r)) {
		raft_ready(nd->r, &rd);
		if (rd.has_snapshot) {
			/* The snapshot's state (everything up to its index) must
			 * be committed; the application installs it once the WAL
			 * recorded it (node_persist), as etcd orders it. */
			for (uint64_t i = nd->applied + 1; i <= rd.snap_index; i++) {
				SIM_CHECK(S.committed[i].set);
				SIM_CHECK(S.app[i].set);
			}
		}
		if (rd.n_entries || rd.hs_changed || rd.has_snapshot) {
			SIM_CHECK(nd->qn < MAXBATCH);
			struct batch *b = &nd->q[(nd->qhead + nd->qn) % MAXBATCH];
			memset(b, 0, sizeof(*b));
			b->n = rd.n_entries;
			b->first = rd.n_entries ? rd.entries[0].index : 0;
			if (b->n) {
				b->ents = malloc(b->n * sizeof(*b->ents));
				SIM_CHECK(b->ents);
			}
			for (size_t i = 0; i < rd.n_entries; i++) {
				SIM_CHECK(rd.entries[i].index == b->first + i);
				SIM_CHECK(rd.entries[i].index < MAXIDX);
				b->ents[i] = (struct sentry){ rd.entries[i].term, val_of(&rd.entries[i]) };
			}
			b->has_hs = rd.hs_changed;
			b->hs = rd.hs;
			b->has_snap = rd.has_snapshot;
			b->snap_index = rd.snap_index;
			b->snap_term = rd.snap_term;
			if (rd.has_snapshot) {
				b->snap_conf = malloc(sizeof(*b->snap_conf));
				SIM_CHECK(b->snap_conf);
				*b->snap_conf = *rd.snap_conf;
			}
			uint64_t prev_due = nd->qn ? nd->q[(nd->qhead + nd->qn - 1) % MAXBATCH].due : 0;
			b->due = S.now + rnd() % 4;
			if (S.chaos && chance(10))
				b->due += 10 + rnd() % 40; /* a slow fdatasync */
			if (b->due < prev_due)
				b->due = prev_due;
			nd->qn++;
			nd->handed++;
		}
		for (size_t i = 0; i < rd.n_committed; i++)
			apply(nd, &rd.committed[i]);
		for (size_t i = 0; i < rd.n_msgs; i++) {
			struct wire w = wire_copy(&rd.msgs[i]);
			if (w.m.type == RAFT_MSG_SNAP) {
				/* the transport sends the application's state, as
				 * etcd's server does: at its applied index, with
				 * the configuration in force there */
				w.m.snap_index = nd->applied;
				w.m.snap_term = raftlog_term(raft_log(nd->r), nd->applied);
				SIM_CHECK(w.m.snap_term);
				raft_conf_state(nd->r, w.conf);
			}
			if (rd.msgs_after_persist && nd->durable < nd->handed) {
				SIM_CHECK(nd->nheld < MAXHELD);
				nd->held[nd->nheld++] = (struct held){ nd->handed, w };
			} else {
				net_put(w);
			}
		}
		for (size_t i = 0; i < rd.n_reads; i++) {
			size_t k;
			for (k = 0; k < nd->nreads && nd->read_ctx[k] != rd.reads[i].context; k++)
				;
			if (k == nd->nreads)
				continue; /* a duplicated answer (the network copies) */
			SIM_CHECK(rd.reads[i].index >= nd->read_min[k]);
			nd->nreads--;
			nd->read_ctx[k] = nd->read_ctx[nd->nreads];
			nd->read_min[k] = nd->read_min[nd->nreads];
			S.reads_done++;
		}
		raft_advance(nd->r, &rd);
		if (S.chaos && chance(20) && nd->applied > 5) {
			record_commits(nd);
			raft_compact(nd->r, nd->applied - rnd() % 5);
		}
	}
}

/* ---- the checks ---- */

static void check_all(void)
{
	for (size_t k = 0; k < S.n; k++) {
		struct node *nd = &S.nodes[k];
		if (!nd->up)
			continue;
		uint64_t term = raft_term(nd->r);
		SIM_CHECK(term < MAXTERM);
		if (raft_is_leader(nd->r)) {
			SIM_CHECK(S.leader_of[term] == 0 || S.leader_of[term] == nd->id);
			if (!S.leader_of[term]) {
				S.elections++;
				if (nd->id == S.transfer_to && term > S.transfer_term) {
					S.transfers_done++;
					S.transfer_to = 0;
				}
			}
			S.leader_of[term] = nd->id;
		}
		/* log matching through a canonical (index, term) -> entry map */
		const struct raftlog *l = raft_log(nd->r);
		uint64_t prev_term = l->snap_term;
		for (uint64_t i = l->snap_index + 1; i <= raftlog_last_index(l); i++) {
			const struct raft_entry *e = raftlog_entry(l, i);
			SIM_CHECK(i < MAXIDX);
			uint64_t v = val_of(e);
			bool found = false;
			for (unsigned c = 0; c < S.ncanon[i]; c++) {
				if (S.canon[i][c].term != e->term)
					continue;
				SIM_CHECK(S.canon[i][c].value == v);
				SIM_CHECK(S.canon[i][c].prev_term == prev_term ||
					  i - 1 == l->snap_index);
				found = true;
			}
			if (!found) {
				SIM_CHECK(S.ncanon[i] < 8);
				S.canon[i][S.ncanon[i]].term = e->term;
				S.canon[i][S.ncanon[i]].value = v;
				S.canon[i][S.ncanon[i]].prev_term = prev_term;
				S.ncanon[i]++;
			}
			prev_term = e->term;
		}
		record_commits(nd);
	}
	/* leader completeness */
	for (size_t k = 0; k < S.n; k++) {
		struct node *nd = &S.nodes[k];
		if (!nd->up || !raft_is_leader(nd->r))
			continue;
		const struct raftlog *l = raft_log(nd->r);
		uint64_t term = raft_term(nd->r);
		for (uint64_t i = l->snap_index + 1; i <= S.committed_max; i++) {
			if (!S.committed[i].set || S.committed[i].seen_term >= term)
				continue;
			SIM_CHECK(i <= raftlog_last_index(l));
			SIM_CHECK(raftlog_entry(l, i)->term == S.committed[i].term);
		}
	}
}

/* ---- the run ---- */

static void step_all(void)
{
	S.now++;
	net_step();
	for (size_t k = 0; k < S.n; k++) {
		struct node *nd = &S.nodes[k];
		if (nd->up && nd->retire_at && S.now >= nd->retire_at) {
			node_crash(nd);
			nd->retired = true;
		}
		if (!nd->up) {
			if (!nd->retired && S.now >= nd->down_until)
				node_start(nd);
			continue;
		}
		if (S.now % 4 == k % 4)
			raft_tick(nd->r);
		node_persist(nd);
	}
	for (size_t k = 0; k < S.n; k++)
		node_ready(&S.nodes[k]);
	check_all();
}

static bool in_list(const uint64_t *ids, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

/* A membership change the leader nd proposes, chosen from its
 * configuration: add a spare (as learner or voter), promote a learner,
 * remove a learner or a voter (itself too) while three voters remain. */
static void propose_conf_change(struct node *nd)
{
	struct raft_conf_state cs;
	raft_conf_state(nd->r, &cs);
	uint64_t id = 1 + rnd() % S.n;
	enum raft_conf_change_type type;
	if (in_list(cs.learners, cs.n_learners, id))
		type = chance(700) ? RAFT_CONF_ADD_NODE : RAFT_CONF_REMOVE_NODE;
	else if (in_list(cs.voters, cs.n_voters, id))
		type = cs.n_voters >= 3 ? RAFT_CONF_REMOVE_NODE : RAFT_CONF_UPDATE_NODE;
	else if (!S.removed[id])
		type = chance(600) ? RAFT_CONF_ADD_LEARNER_NODE : RAFT_CONF_ADD_NODE;
	else
		return;
	uint64_t v = CC_TAG | (++S.next_value << 16) | ((uint64_t)type << 8) | id;
	struct raft_entry e = { .type = RAFT_ENTRY_CONF_CHANGE, .len = 8, .data = (uint8_t *)&v };
	int rc = raft_propose(nd->r, &e, 1);
	SIM_CHECK(rc == 0 || rc == -EBUSY || rc == -EPERM);
}

/* The leader nd hands leadership to a random voter. */
static void transfer(struct node *nd)
{
	struct raft_conf_state cs;
	raft_conf_state(nd->r, &cs);
	if (!cs.n_voters)
		return;
	uint64_t to = cs.voters[rnd() % cs.n_voters];
	int rc = raft_transfer_leader(nd->r, to);
	SIM_CHECK(rc == 0 || rc == -EALREADY);
	if (rc == 0) {
		S.transfers_started++;
		S.transfer_to = to;
		S.transfer_term = raft_term(nd->r);
	}
}

static void client(void)
{
	size_t k = rnd() % S.n;
	struct node *nd = &S.nodes[k];
	if (!nd->up)
		return;
	if (raft_is_leader(nd->r) && chance(60)) {
		propose_conf_change(nd);
	} else if (raft_is_leader(nd->r) && chance(40)) {
		transfer(nd);
	} else if (chance(600)) {
		uint64_t v = ++S.next_value;
		struct raft_entry e = { .len = 8, .data = (uint8_t *)&v };
		int rc = raft_propose(nd->r, &e, 1);
		SIM_CHECK(rc == 0 || rc == -EAGAIN || rc == -EBUSY || rc == -EPERM);
	} else if (nd->nreads < 64) {
		uint64_t ctx = ((uint64_t)nd->id << 40) | ++nd->next_ctx;
		if (raft_read_index(nd->r, ctx) == 0) {
			nd->read_ctx[nd->nreads] = ctx;
			nd->read_min[nd->nreads] = S.committed_max;
			nd->nreads++;
		}
	}
}

static void chaos(void)
{
	if (chance(8)) {
		/* a new partition: one node alone, or two groups, or none */
		for (size_t k = 0; k < S.n; k++)
			S.group[k] = 0;
		switch (rnd() % 3) {
		case 0:
			S.group[rnd() % S.n] = 1;
			break;
		case 1:
			for (size_t k = 0; k < S.n; k++)
				S.group[k] = (int)(rnd() % 2);
			break;
		default:
			break;
		}
	}
	if (chance(3)) {
		struct node *nd = &S.nodes[rnd() % S.n];
		if (nd->up) {
			node_crash(nd);
			/* some of the others find its port closed (raftd's
			 * transport reports a refused dial) */
			for (size_t k = 0; k < S.n; k++)
				if (S.nodes[k].up && chance(500))
					raft_report_leader_down(S.nodes[k].r, nd->id);
		}
	}
	if (chance(2)) {
		/* a report about a leader that is alive (a port closed while
		 * it restarts, or a wrong URL): safety must not depend on it */
		struct node *nd = &S.nodes[rnd() % S.n];
		if (nd->up)
			raft_report_leader_down(nd->r, raft_leader(nd->r));
	}
}

static void sim_free(void)
{
	for (size_t k = 0; k < S.n; k++)
		if (S.nodes[k].up)
			node_crash(&S.nodes[k]);
	for (size_t i = 0; i < S.nnet; i++)
		wire_free(&S.net[i]);
}

/* Whether every member of the leader nd's configuration is up and has
 * applied up to index. */
static bool members_applied(struct node *nd, uint64_t index)
{
	struct raft_conf_state cs;
	raft_conf_state(nd->r, &cs);
	for (size_t i = 0; i < cs.n_voters + cs.n_learners; i++) {
		uint64_t id = i < cs.n_voters ? cs.voters[i] : cs.learners[i - cs.n_voters];
		struct node *o = &S.nodes[id - 1];
		if (!o->up || o->applied < index)
			return false;
	}
	return true;
}

static void sim_run(uint64_t seed, size_t n_initial, unsigned steps)
{
	sim_free();
	memset(&S, 0, sizeof(S));
	cur_seed = seed;
	S.rng = seed * 0x2545f4914f6cdd1dull + 7;
	S.n = MAXN;
	S.n_initial = n_initial;
	S.pre_vote = (seed / 2) % 2 == 0;
	S.p_drop = (unsigned)(rnd() % 200);
	S.p_dup = (unsigned)(rnd() % 100);
	S.max_delay = 1 + (unsigned)(rnd() % 6);
	S.chaos = true;
	for (size_t k = 0; k < S.n; k++) {
		S.nodes[k].id = k + 1;
		node_start(&S.nodes[k]);
	}
	for (unsigned s = 0; s < steps; s++) {
		step_all();
		if (chance(300))
			client();
		chaos();
	}
	/* Heal: everyone up, one network, no loss. Then the cluster must
	 * elect a leader and commit new proposals on every member. */
	S.chaos = false;
	for (size_t k = 0; k < S.n; k++)
		S.group[k] = 0;
	uint64_t target = 0;
	struct node *lead = NULL;
	for (unsigned s = 0; s < 3000; s++) {
		step_all();
		for (size_t k = 0; k < S.n && !target; k++) {
			struct node *nd = &S.nodes[k];
			if (nd->up && raft_is_leader(nd->r) && S.now % 7 == 0) {
				uint64_t v = ++S.next_value;
				struct raft_entry e = { .len = 8, .data = (uint8_t *)&v };
				if (raft_propose(nd->r, &e, 1) == 0) {
					target = raft_last_index(nd->r);
					lead = nd;
				}
			}
		}
		if (target && lead->up && raft_is_leader(lead->r) && members_applied(lead, target))
			return;
		/* a proposal lost with its leader is asked again */
		if (target && s % 400 == 399)
			target = 0;
	}
	for (size_t k = 0; k < S.n; k++) {
		struct node *nd = &S.nodes[k];
		struct raft_conf_state cs = { 0 };
		if (nd->up)
			raft_conf_state(nd->r, &cs);
		fprintf(stderr, "node %llu: last %llu/%llu %s role %d term %llu commit %llu applied %llu "
			"voters %zu learners %zu\n", (unsigned long long)nd->id,
			(unsigned long long)(nd->up ? raft_last_index(nd->r) : 0),
			(unsigned long long)(nd->up ? raftlog_last_term(raft_log(nd->r)) : 0),
			nd->retired ? "retired" : nd->up ? "up" : "down",
			nd->up ? (int)raft_role(nd->r) : -1,
			(unsigned long long)(nd->up ? raft_term(nd->r) : 0),
			(unsigned long long)(nd->up ? raft_commit_index(nd->r) : 0),
			(unsigned long long)nd->applied, cs.n_voters, cs.n_learners);
	}
	SIM_CHECK(!"no progress after the network healed");
}

int main(void)
{
	const char *env = getenv("CETCD_RAFT_SEED");
	if (env) {
		uint64_t seed = strtoull(env, NULL, 0);
		sim_run(seed, 3 + 2 * (seed % 2), STEPS);
		printf("seed %llu: ok (%u elections, %u conf changes applied, %u of %u transfers "
		       "done, %u snapshots installed)\n", (unsigned long long)seed, S.elections,
		       S.conf_applied, S.transfers_done, S.transfers_started, S.snaps_installed);
		sim_free();
		return 0;
	}
	const char *nruns = getenv("CETCD_RAFT_RUNS");
	uint64_t max_seed = nruns ? strtoull(nruns, NULL, 0) : 10000;
	unsigned runs = 0, runs_no_pre_vote = 0;
	uint64_t commits = 0, reads = 0, snaps = 0, crashes = 0, terms = 0;
	uint64_t elections = 0, confs = 0, transfers = 0, transfers_started = 0;
	for (uint64_t seed = 1; seed <= max_seed; seed++) {
		sim_run(seed, 3 + 2 * (seed % 2), STEPS);
		runs++;
		runs_no_pre_vote += !S.pre_vote;
		commits += S.committed_max;
		reads += S.reads_done;
		snaps += S.snaps_installed;
		crashes += S.crashes;
		elections += S.elections;
		confs += S.conf_applied;
		transfers += S.transfers_done;
		transfers_started += S.transfers_started;
		for (size_t k = 0; k < S.n; k++)
			if (S.nodes[k].up && raft_term(S.nodes[k].r) > terms)
				terms = raft_term(S.nodes[k].r);
	}
	printf("raft sim: %u runs of %u steps, %llu entries committed, %llu reads, %llu elections, "
	       "%llu conf changes applied, %llu of %llu transfers done, %llu snapshots installed, "
	       "%llu crashes, highest term %llu\n", runs, STEPS,
	       (unsigned long long)commits, (unsigned long long)reads,
	       (unsigned long long)elections, (unsigned long long)confs,
	       (unsigned long long)transfers, (unsigned long long)transfers_started,
	       (unsigned long long)snaps, (unsigned long long)crashes, (unsigned long long)terms);
	printf("raft sim: %u runs without pre-vote\n", runs_no_pre_vote);
	printf("raft sim: per run %.1f elections, %.2f conf changes, %.2f transfers, "
	       "%.2f snapshots\n", (double)elections / runs, (double)confs / runs,
	       (double)transfers / runs, (double)snaps / runs);
	CHECK(commits > runs && reads > 0 && snaps > 0 && crashes > 0 && elections > runs &&
	      confs > 0 && transfers > 0 && runs_no_pre_vote > 0 && runs_no_pre_vote < runs);
	sim_free();
	printf("test_raft_sim: ok\n");
	return 0;
}
