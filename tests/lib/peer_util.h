/*
 * Helpers for the peer transport tests: a member's transport on loopback
 * (or a unix socket), messages of each kind with recognisable bytes, and
 * waiting for what a transport hands over.
 */
#ifndef CETCD_TESTS_PEER_UTIL_H
#define CETCD_TESTS_PEER_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "wal_util.h"

#include "base/clock/clock.h"
#include "raftd/peer/msgframe.h"
#include "raftd/peer/peer.h"
#include "raftd/peer/peer_int.h"
#include "raftd/raft/raft.h"
#include "config/config.h"
#include "config/config_int.h"
#include "base/tls/tls.h"

/* One member's transport. */
struct pt_node {
	struct peer *p;
	uint64_t id;
	uint64_t cluster_id;
	char url[256];              /* its peer URL, as others dial it */
	struct config_urls listen;
	struct tls_ctx *sctx, *cctx;
	char snap_dir[256];
	bool driven;                /* started with peer_opts.driven: the
				     * test's thread drives it */
	size_t queue_bytes;         /* peer_opts.queue_bytes (0: default) */
};

/* Starts n listening on listen_url ("http://127.0.0.1:0" takes a free
 * port; the URL others use is then in n->url). */
static inline int pt_start(struct pt_node *n, uint64_t id, uint64_t cluster_id,
			   const char *listen_url)
{
	struct peer_opts o = { 0 };
	char why[256];
	int rc;

	n->id = id;
	n->cluster_id = cluster_id;
	CHECK_EQ(config_parse_urls(listen_url, &n->listen, why, sizeof(why)), 0);
	o.self_id = id;
	o.cluster_id = cluster_id;
	o.listen = &n->listen;
	o.server_tls = n->sctx;
	o.client_tls = n->cctx;
	o.server_version = "3.4.0";
	o.min_cluster_version = "3.0.0";
	o.snap_dir = n->snap_dir[0] ? n->snap_dir : NULL;
	o.driven = n->driven;
	o.queue_bytes = n->queue_bytes;
	rc = peer_start(&o, &n->p);
	if (rc) {
		config_urls_free(&n->listen);
		return rc;
	}
	const struct config_url *u = &n->listen.v[0];
	if (!strcmp(u->scheme, "unix") || !strcmp(u->scheme, "unixs"))
		snprintf(n->url, sizeof(n->url), "%s", u->text);
	else
		snprintf(n->url, sizeof(n->url), "%s://%s:%u", u->scheme, u->host,
			 peer_listen_port(n->p, 0));
	return 0;
}

static inline void pt_stop(struct pt_node *n)
{
	peer_stop(n->p);
	n->p = NULL;
	config_urls_free(&n->listen);
}

/* Tells n its peers (each by its URL). */
static inline void pt_members(struct pt_node *n, struct pt_node *const *peers, size_t count,
			      const uint64_t *removed, size_t n_removed)
{
	struct peer_member m[8];
	const char *urls[8];

	CHECK(count <= 8);
	for (size_t i = 0; i < count; i++) {
		urls[i] = peers[i]->url;
		m[i] = (struct peer_member){ .id = peers[i]->id, .urls = &urls[i], .n_urls = 1 };
	}
	CHECK_EQ(peer_set_members(n->p, m, count, removed, n_removed), 0);
}

/* The next event of n within timeout_ms: 0 or -ETIMEDOUT. */
static inline int pt_next(struct pt_node *n, struct peer_event *ev, int timeout_ms)
{
	int64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		if (peer_recv(n->p, ev) == 0)
			return 0;
		int64_t now = clock_now_ns();
		if (now >= end)
			return -ETIMEDOUT;
		struct pollfd pf = { .fd = peer_event_fd(n->p), .events = POLLIN };
		poll(&pf, 1, (int)((end - now) / 1000000u) + 1);
	}
}

/* Waits for the next message event of n, dropping other events (counted
 * into *others when given). */
static inline int pt_next_msg(struct pt_node *n, struct peer_event *ev, int timeout_ms,
			      int *others)
{
	for (;;) {
		int rc = pt_next(n, ev, timeout_ms);
		if (rc || ev->kind == PEER_EV_MESSAGE)
			return rc;
		if (others)
			(*others)++;
		peer_event_release(ev);
	}
}

/* Whether n's writer of stream s to peer id is attached (the peer dialed
 * it), read under the transport's lock. */
static inline bool pt_stream_up(struct pt_node *n, uint64_t id, int s)
{
	bool up;

	pthread_mutex_lock(&n->p->mu);
	struct peer_remote *r = peer_remote_find(n->p, id);
	up = r && r->working[s];
	pthread_mutex_unlock(&n->p->mu);
	return up;
}

/* Waits until both of n's writers to id are attached. */
static inline void pt_wait_streams(struct pt_node *n, uint64_t id)
{
	for (int i = 0; i < 1000; i++) {
		if (pt_stream_up(n, id, PEER_STREAM_MSGAPP) && pt_stream_up(n, id, PEER_STREAM_MESSAGE))
			return;
		usleep(10000);
	}
	fprintf(stderr, "streams from %llx to %llx did not come up\n", (unsigned long long)n->id,
		(unsigned long long)id);
	exit(1);
}

/* A message with recognisable entries; entries and their data live in
 * one malloc'd block in *block (freed by the caller). */
static inline struct raftmsg pt_msg(int32_t type, uint64_t from, uint64_t to, uint64_t term,
				    uint64_t index, size_t n_entries, size_t entry_len,
				    void **block)
{
	struct raftmsg m = { .type = type, .from = from, .to = to, .term = term,
			     .log_term = term, .index = index, .commit = index };
	uint8_t *b = malloc(n_entries * (sizeof(struct raftmsg_entry) + entry_len) + 1);

	CHECK(b);
	*block = b;
	m.entries = (struct raftmsg_entry *)b;
	m.n_entries = n_entries;
	uint8_t *data = b + n_entries * sizeof(struct raftmsg_entry);
	for (size_t i = 0; i < n_entries; i++) {
		uint8_t *d = data + i * entry_len;
		for (size_t k = 0; k < entry_len; k++)
			d[k] = (uint8_t)(index * 31 + i * 7 + k);
		m.entries[i] = (struct raftmsg_entry){ .term = term, .index = index + 1 + i,
						       .has_data = true, .len = entry_len,
						       .data = d };
	}
	return m;
}

/* Whether two messages have the same raftpb bytes. */
static inline bool pt_same(const struct raftmsg *a, const struct raftmsg *b)
{
	size_t na = raftmsg_size(a), nb = raftmsg_size(b);
	uint8_t *ba, *bb;
	bool same;

	if (na != nb)
		return false;
	ba = malloc(na + 1);
	bb = malloc(nb + 1);
	CHECK(ba && bb);
	raftmsg_encode(a, ba);
	raftmsg_encode(b, bb);
	same = memcmp(ba, bb, na) == 0;
	free(ba);
	free(bb);
	return same;
}

/* A MsgSnap from `from` to `to` at (index, term) with a small v2 store
 * and both as voters (both point into static storage: one at a time). */
static inline struct raftmsg pt_snap_msg(uint64_t from, uint64_t to, uint64_t index,
					 uint64_t term)
{
	static uint8_t v2[] = "{\"Root\":{}}";
	static uint64_t voters[2];
	struct raftmsg m = { .type = RAFT_MSG_SNAP, .from = from, .to = to, .term = term };

	voters[0] = from;
	voters[1] = to;
	m.snapshot = (struct raftmsg_snapshot){ .has_data = true, .data = v2, .len = sizeof(v2) - 1,
						.index = index, .term = term,
						.conf_state = { .voters = voters, .n_voters = 2 } };
	return m;
}

/* Checks that ev is the MsgSnap m with a db file holding data[size]; ev
 * is released. */
static inline void pt_check_snap(struct peer_event *ev, const struct raftmsg *m,
				 const uint8_t *data, size_t size)
{
	size_t got_len;
	uint8_t *got;

	CHECK(pt_same(&ev->msg, m));
	CHECK(ev->snap_db_path);
	got = wt_read_file(ev->snap_db_path, &got_len);
	CHECK_EQ(got_len, size);
	CHECK(memcmp(got, data, size) == 0);
	free(got);
	peer_event_release(ev);
}

/* Checks messages as they arrive against the ones sent, msgs[0..n):
 * each once, MsgApp in order among themselves (the msgapp stream), the
 * others likewise (the message stream); the two streams do not keep
 * order between them, as in etcd. */
struct pt_matcher {
	const struct raftmsg *msgs;
	size_t n;
	size_t next[2];
};

static inline void pt_match(struct pt_matcher *mt, const struct raftmsg *got)
{
	int cls = got->type == RAFT_MSG_APP;
	size_t *i = &mt->next[cls];

	while (*i < mt->n && (mt->msgs[*i].type == RAFT_MSG_APP) != cls)
		(*i)++;
	if (*i == mt->n || !pt_same(got, &mt->msgs[*i])) {
		fprintf(stderr, "message %zu of %zu arrived changed or out of order (got type %d index %llu)\n",
			*i, mt->n, got->type, (unsigned long long)got->index);
		exit(1);
	}
	(*i)++;
}

/* How many messages pt_all_kinds makes. */
#define PT_ALL_KINDS 262

/*
 * Every kind of message from one member to another, in msgs[] (entries in
 * blocks[], freed by the caller): runs of MsgApp that take msgappv2's
 * short form (consecutive, logTerm == term), heartbeats with a ReadIndex
 * context, votes, rejecting and accepting MsgAppResp, an empty MsgApp (a
 * probe) and one that does not continue the run. Returns the count.
 */
static inline size_t pt_all_kinds(uint64_t from, uint64_t to, uint64_t term,
				   struct raftmsg *msgs, void **blocks)
{
	static uint8_t ctx[8];
	uint64_t index = 100;
	size_t n = 0;

	raftmsg_read_ctx_put(ctx, 42);
	for (int round = 0; round < 20; round++) {
		for (int k = 0; k < 10; k++) {
			msgs[n] = pt_msg(RAFT_MSG_APP, from, to, term, index, 1 + (size_t)k % 4,
					 16 + (size_t)k * 3, &blocks[n]);
			index += msgs[n].n_entries;
			n++;
		}
		msgs[n] = pt_msg(RAFT_MSG_HEARTBEAT, from, to, term, 0, 0, 0, &blocks[n]);
		msgs[n].commit = index;
		msgs[n].has_context = true;
		msgs[n].context = ctx;
		msgs[n].context_len = sizeof(ctx);
		n++;
		msgs[n] = pt_msg(RAFT_MSG_VOTE, from, to, term + 1, index, 0, 0, &blocks[n]);
		n++;
		msgs[n] = pt_msg(RAFT_MSG_APP_RESP, from, to, term, index, 0, 0, &blocks[n]);
		msgs[n].reject = round % 2;
		msgs[n].reject_hint = (uint64_t)round;
		n++;
	}
	msgs[n] = pt_msg(RAFT_MSG_APP, from, to, term, index, 0, 0, &blocks[n]);
	n++;
	msgs[n] = pt_msg(RAFT_MSG_APP, from, to, term, 7, 2, 8, &blocks[n]);
	msgs[n].log_term = term - 1;
	n++;
	CHECK_EQ(n, PT_ALL_KINDS);
	return n;
}

#endif
