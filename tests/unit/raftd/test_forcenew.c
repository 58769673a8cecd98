/*
 * raftd/forcenew.c: --force-new-cluster rewrites a restarted member's log
 * as etcd 3.4's restartAsStandaloneNode does: the uncommitted tail goes,
 * and conf changes at the hard state's term remove every other member
 * (and add this one when the log does not), in id order, committed.
 */
#include "wal_util.h"

#include "raftd/forcenew.h"
#include "raftd/raft/raftmsg.h"

/* An entry from raftd_malloc'ed copies. */
static struct raft_entry ent(uint64_t term, uint64_t index, uint32_t type, const void *data,
			     size_t len)
{
	struct raft_entry e = { .term = term, .index = index, .type = type, .len = (uint32_t)len };
	if (len) {
		e.data = raftd_malloc(len);
		CHECK(e.data);
		memcpy(e.data, data, len);
	}
	return e;
}

static struct raft_entry conf(uint64_t term, uint64_t index, int32_t type, uint64_t node)
{
	struct raftmsg_conf_change cc = { .type = type, .node_id = node };
	uint8_t buf[64];
	size_t len = raftmsg_conf_change_encode(&cc, buf);
	return ent(term, index, RAFT_ENTRY_CONF_CHANGE, buf, len);
}

static void free_ents(struct raft_entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		raftd_free(e[i].data);
	raftd_free(e);
}

/* Entry i of e is a conf change of type for node at (term, index). */
static void check_conf(const struct raft_entry *e, int32_t type, uint64_t node, uint64_t term,
		       uint64_t index)
{
	struct raftmsg_conf_change cc;
	CHECK_EQ(e->type, RAFT_ENTRY_CONF_CHANGE);
	CHECK_EQ(e->term, term);
	CHECK_EQ(e->index, index);
	CHECK_EQ(raftmsg_conf_change_decode(e->data, e->len, &cc), 0);
	CHECK_EQ(cc.type, type);
	CHECK_EQ(cc.node_id, node);
	CHECK_EQ(cc.id, 0);
}

/* Members 1, 2, 3 from the snapshot, 4 added in the log; 2 restarts with
 * --force-new-cluster: 13 (uncommitted) goes, 1, 3, 4 are removed. */
static void test_removes_others(void)
{
	uint64_t voters[] = { 3, 1, 2 };
	struct raft_entry *e = raftd_malloc(3 * sizeof(*e));
	e[0] = conf(5, 11, RAFTMSG_CONF_ADD_NODE, 4);
	e[1] = ent(5, 12, RAFT_ENTRY_NORMAL, "put", 3);
	e[2] = ent(6, 13, RAFT_ENTRY_NORMAL, "uncommitted", 11);
	size_t n = 3;
	struct raft_hardstate hs = { .term = 6, .vote = 2, .commit = 12 };
	struct forcenew_result res;

	CHECK_EQ(forcenew_apply(2, voters, 3, 10, &hs, &e, &n, &res), 0);
	CHECK_EQ(res.n_dropped, 1);
	CHECK_EQ(res.first_added, 2);
	CHECK_EQ(res.n_added, 3);
	CHECK_EQ(n, 5);
	CHECK(e[1].len == 3 && memcmp(e[1].data, "put", 3) == 0);
	check_conf(&e[2], RAFTMSG_CONF_REMOVE_NODE, 1, 6, 13);
	check_conf(&e[3], RAFTMSG_CONF_REMOVE_NODE, 3, 6, 14);
	check_conf(&e[4], RAFTMSG_CONF_REMOVE_NODE, 4, 6, 15);
	CHECK_EQ(hs.commit, 15);
	CHECK_EQ(hs.term, 6);
	free_ents(e, n);
}

/* A member the log no longer names (removed, learner added back counts)
 * adds itself first, with etcd's context; a removal in the log is
 * honoured; a learner counts as a member to remove. */
static void test_adds_itself(void)
{
	uint64_t voters[] = { 1, 2, 3 };
	struct raft_entry *e = raftd_malloc(3 * sizeof(*e));
	e[0] = conf(2, 21, RAFTMSG_CONF_REMOVE_NODE, 2);
	e[1] = conf(2, 22, RAFTMSG_CONF_REMOVE_NODE, 3);
	e[2] = conf(2, 23, RAFTMSG_CONF_ADD_LEARNER_NODE, 9);
	size_t n = 3;
	struct raft_hardstate hs = { .term = 3, .commit = 23 };
	struct forcenew_result res;

	CHECK_EQ(forcenew_apply(2, voters, 3, 20, &hs, &e, &n, &res), 0);
	CHECK_EQ(res.n_dropped, 0);
	CHECK_EQ(res.n_added, 3);
	struct raftmsg_conf_change cc;
	check_conf(&e[3], RAFTMSG_CONF_ADD_NODE, 2, 3, 24);
	CHECK_EQ(raftmsg_conf_change_decode(e[3].data, e[3].len, &cc), 0);
	/* json.Marshal(membership.Member{ID: 2, PeerURLs: [localhost:2380]}) */
	static const char want[] = "{\"id\":2,\"peerURLs\":[\"http://localhost:2380\"]}";
	CHECK(cc.has_context && cc.context_len == strlen(want) &&
	      memcmp(cc.context, want, cc.context_len) == 0);
	check_conf(&e[4], RAFTMSG_CONF_REMOVE_NODE, 1, 3, 25);
	check_conf(&e[5], RAFTMSG_CONF_REMOVE_NODE, 9, 3, 26);
	CHECK_EQ(hs.commit, 26);
	free_ents(e, n);
}

/* A single member already alone: nothing to add or remove. An empty log
 * at the snapshot point appends right after it. */
static void test_alone_and_empty(void)
{
	uint64_t voters[] = { 7 };
	struct raft_entry *e = raftd_malloc(1);
	size_t n = 0;
	struct raft_hardstate hs = { .term = 4, .commit = 30 };
	struct forcenew_result res;
	CHECK_EQ(forcenew_apply(7, voters, 1, 30, &hs, &e, &n, &res), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(hs.commit, 30);
	uint64_t two[] = { 7, 8 };
	CHECK_EQ(forcenew_apply(7, two, 2, 30, &hs, &e, &n, &res), 0);
	CHECK_EQ(n, 1);
	check_conf(&e[0], RAFTMSG_CONF_REMOVE_NODE, 8, 4, 31);
	free_ents(e, n);
}

/* A conf change that does not decode, a log short of its commit index and
 * no memory leave the log as it was. */
static void test_refusals(void)
{
	uint64_t voters[] = { 1, 2 };
	struct raft_entry *e = raftd_malloc(2 * sizeof(*e));
	e[0] = ent(1, 1, RAFT_ENTRY_CONF_CHANGE, "\xff\xff\xff", 3);
	e[1] = ent(1, 2, RAFT_ENTRY_NORMAL, "x", 1);
	size_t n = 2;
	struct raft_hardstate hs = { .term = 1, .commit = 2 };
	struct forcenew_result res;
	CHECK_EQ(forcenew_apply(1, voters, 2, 0, &hs, &e, &n, &res), -EBADMSG);
	CHECK(n == 2 && hs.commit == 2 && e[0].len == 3);
	raftd_free(e[0].data);
	e[0] = conf(1, 1, RAFTMSG_CONF_ADD_NODE, 3);
	hs.commit = 5;
	CHECK_EQ(forcenew_apply(1, voters, 2, 0, &hs, &e, &n, &res), -EBADMSG);
	CHECK(n == 2 && hs.commit == 5);
	hs.commit = 1;
	for (long k = 0; k < 8; k++) {
		wt_fail_after(k);
		int rc = forcenew_apply(1, voters, 2, 0, &hs, &e, &n, &res);
		wt_fail_after(-1);
		if (rc == 0) {
			CHECK(n == 3 && hs.commit == 3);
			break;
		}
		CHECK_EQ(rc, -ENOMEM);
		CHECK(n == 2 && hs.commit == 1 && e[1].len == 1);
	}
	CHECK_EQ(n, 3);
	free_ents(e, n);
}

int main(void)
{
	wt_count_allocs();
	test_removes_others();
	test_adds_itself();
	test_alone_and_empty();
	test_refusals();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_forcenew: ok\n");
	return 0;
}
