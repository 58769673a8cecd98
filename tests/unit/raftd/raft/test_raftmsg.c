/*
 * Unit tests for raftd/raft/raftmsg.c, raftpb on the wire: byte vectors read
 * off etcd's gogo-generated MarshalTo (and checked against etcd's Go code
 * by tests/peer/raftmsg_diff.sh), round trips of random messages, the
 * decoding rules that etcd's encoder never exercises (merged snapshots,
 * packed ids, repeated scalars, unknown fields and groups), refusal of
 * malformed bytes at every cut, zero-copy ownership, allocation failure
 * and leaks, and the context helpers.
 */
#include "wal_util.h"

#include "raftmsg_util.h"

#include "raftd/raft/raft.h"
#include "raftd/raft/raftmsg.h"

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = rm_unhex(h, out);
	CHECK(n != (size_t)-1);
	return n;
}

/* Encodes m and checks the bytes against want (hex). */
static void check_encoding(const struct raftmsg *m, const char *want)
{
	uint8_t exp[512], got[512];
	size_t n = unhex(want, exp);

	CHECK_EQ(raftmsg_size(m), n);
	CHECK_EQ(raftmsg_encode(m, got), n);
	if (memcmp(got, exp, n) != 0) {
		fprintf(stderr, "want %s\ngot  ", want);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%02x", got[i]);
		fprintf(stderr, "\n");
		CHECK(0);
	}
}

/* The link heartbeat of etcd's streams, raftpb.Message{Type:
 * MsgHeartbeat}: every non-nullable field written, zero. */
static const char LINK_HEARTBEAT[] =
	"0808" "1000" "1800" "2000" "2800" "3000" "4000"
	"4a0a" "1208" "0a02" "2800" "1000" "1800" /* snapshot{metadata{conf_state{auto_leave}}} */
	"5000" "5800";

static void test_vectors(void)
{
	struct raftmsg m = { .type = RAFT_MSG_HEARTBEAT };
	check_encoding(&m, LINK_HEARTBEAT);

	/* A MsgApp with one entry "ab" and a commit index. */
	struct raftmsg_entry e = { .term = 5, .index = 11, .has_data = true,
				   .data = (const uint8_t *)"ab", .len = 2 };
	m = (struct raftmsg){ .type = RAFT_MSG_APP, .to = 2, .from = 1, .term = 5,
			      .log_term = 4, .index = 10, .entries = &e, .n_entries = 1,
			      .commit = 9 };
	check_encoding(&m, "08031002180120052804300a"
			   "3a0a" "0800" "1005" "180b" "22026162"
			   "4009" "4a0a12080a0228001000180050005800");

	/* Negative enum: ten bytes, sign-extended; empty vs absent bytes. */
	m = (struct raftmsg){ .type = -1, .has_context = true };
	check_encoding(&m, "08ffffffffffffffffff01" "1000180020002800300040004a0a12080a02280010001800"
			   "5000" "5800" "6200");

	/* A snapshot with a conf state and data. */
	uint64_t voters[] = { 1, 300 }, learners[] = { 7 };
	m = (struct raftmsg){ .type = RAFT_MSG_SNAP, .snapshot = {
		.has_data = true, .data = (const uint8_t *)"s", .len = 1, .index = 100, .term = 3,
		.conf_state = { .voters = voters, .n_voters = 2, .learners = learners,
				.n_learners = 1, .auto_leave = true } } };
	check_encoding(&m, "0807100018002000280030004000"
			   "4a14" "0a0173" "120f" "0a09" "0801" "08ac02" "1007" "2801" "1064" "1803"
			   "50005800");

	/* ConfChange: id first, then type, node id, context. */
	struct raftmsg_conf_change cc = { .id = 7, .type = RAFTMSG_CONF_ADD_LEARNER_NODE,
					  .node_id = 0x1234, .has_context = true,
					  .context = (const uint8_t *)"x", .context_len = 1 };
	uint8_t buf[64], want[64];
	size_t n = unhex("0807100318b424220178", want);
	CHECK_EQ(raftmsg_conf_change_size(&cc), n);
	CHECK_EQ(raftmsg_conf_change_encode(&cc, buf), n);
	CHECK(memcmp(buf, want, n) == 0);
	struct raftmsg_conf_change back;
	CHECK_EQ(raftmsg_conf_change_decode(buf, n, &back), 0);
	CHECK(back.id == 7 && back.type == 3 && back.node_id == 0x1234 && back.has_context &&
	      back.context == buf + n - 1 && back.context_len == 1);
}

/* Re-encodes a decoded message: equal bytes mean equal messages (the
 * encoding is a function of every field). */
static void check_roundtrip(const struct raftmsg *m)
{
	size_t len, len2;
	uint8_t *a = rm_encode(m, &len);
	struct raftmsg d;

	CHECK_EQ(raftmsg_decode(a, len, &d), 0);
	uint8_t *b = rm_encode(&d, &len2);
	CHECK_EQ(len2, len);
	CHECK(memcmp(a, b, len) == 0);
	/* zero-copy: bytes point into the input */
	for (size_t i = 0; i < d.n_entries; i++)
		CHECK(!d.entries[i].len || (d.entries[i].data > a && d.entries[i].data < a + len));
	CHECK(!d.context_len || (d.context > a && d.context < a + len));
	raftmsg_release(&d);
	CHECK(d.alloc == NULL && d.entries == NULL);
	free(a);
	free(b);
}

static void test_random_roundtrip(uint64_t seed)
{
	static struct rm_gen g;

	rm_seed(&g, seed);
	for (int i = 0; i < 20000; i++)
		check_roundtrip(rm_message(&g));
	CHECK_EQ(wt_live_allocs(), 0);
}

/* Every cut of a valid message either decodes (a cut at a field
 * boundary) or is refused; nothing leaks, nothing reads past the cut
 * (ASan: each cut is its own exact-size copy). */
static void test_truncations(uint64_t seed)
{
	static struct rm_gen g;

	rm_seed(&g, seed);
	for (int i = 0; i < 300; i++) {
		size_t len;
		uint8_t *a = rm_encode(rm_message(&g), &len);
		for (size_t cut = 0; cut < len; cut++) {
			uint8_t *c = malloc(cut + 1);
			memcpy(c, a, cut);
			struct raftmsg d;
			int rc = raftmsg_decode(c, cut, &d);
			CHECK(rc == 0 || rc == -EBADMSG);
			if (rc)
				CHECK(d.alloc == NULL && d.n_entries == 0);
			raftmsg_release(&d);
			free(c);
		}
		free(a);
	}
	CHECK_EQ(wt_live_allocs(), 0);
}

static int decode_hex(const char *h, struct raftmsg *m, uint8_t *buf)
{
	return raftmsg_decode(buf, unhex(h, buf), m);
}

static void test_decoding_rules(void)
{
	uint8_t buf[256] = { 0 };
	struct raftmsg m;

	/* Empty input: a zero message. */
	CHECK_EQ(raftmsg_decode(buf, 0, &m), 0);
	CHECK(m.type == 0 && m.alloc == NULL && !m.has_context);

	/* Repeated scalars: the last counts; fields in any order. */
	CHECK_EQ(decode_hex("1005" "0803" "1007", &m, buf), 0);
	CHECK(m.to == 7 && m.type == 3);

	/* An enum keeps the low 32 bits of its varint. */
	CHECK_EQ(decode_hex("08ffffffff8f01", &m, buf), 0);
	CHECK_EQ(m.type, -1);

	/* reject: any non-zero varint. */
	CHECK_EQ(decode_hex("508080808010", &m, buf), 0);
	CHECK(m.reject);

	/* Two snapshot fields merge: voters packed in the first, unpacked
	 * in the second, append; index is replaced, data kept. */
	CHECK_EQ(decode_hex("4a0b" "0a0178" "1206" "0a04" "0a020102"
			    "4a08" "1206" "0a020803" "1009", &m, buf), 0);
	CHECK_EQ(m.snapshot.conf_state.n_voters, 3);
	CHECK(m.snapshot.conf_state.voters[0] == 1 && m.snapshot.conf_state.voters[1] == 2 &&
	      m.snapshot.conf_state.voters[2] == 3);
	CHECK(m.snapshot.has_data && m.snapshot.len == 1 && m.snapshot.data[0] == 'x');
	CHECK_EQ(m.snapshot.index, 9);
	CHECK(m.alloc != NULL);
	raftmsg_release(&m);

	/* Entries append; an entry's repeated data field takes the last. */
	CHECK_EQ(decode_hex("3a00" "3a06" "22016122016b", &m, buf), 0);
	CHECK_EQ(m.n_entries, 2);
	CHECK(!m.entries[0].has_data && m.entries[1].has_data && m.entries[1].len == 1 &&
	      m.entries[1].data[0] == 'k');
	raftmsg_release(&m);

	/* Unknown fields of every wire type, groups (nested) included. */
	CHECK_EQ(decode_hex("6801" "710102030405060708" "750102030" "4" "720100"
			    "7b" "0801" "13" "14" "7c" "1002", &m, buf), 0);
	CHECK_EQ(m.to, 2);

	/* Refused as gogo refuses them. */
	static const char *const bad[] = {
		"0a00",         /* type as bytes: wrong wire type */
		"3800",         /* entries as a varint */
		"6000",         /* context as a varint */
		"4a02" "1100",  /* snapshot metadata as fixed64 */
		"0001",         /* field 0 */
		"0c",           /* end group outside a group */
		"7b0801",       /* group never closed */
		"6f",           /* wire type 7 */
		"08ffffffffffffffffffff01", /* 11-byte varint */
		"3a05" "0800",  /* entry longer than the message */
		"4a04" "1202" "0a05", /* conf state longer than the metadata */
		"4a06" "1204" "0a02" "0a80", /* packed id cut short */
		"3a02" "1a00" "00",          /* bad entry: index as bytes */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (decode_hex(bad[i], &m, buf) != -EBADMSG) {
			fprintf(stderr, "taken: %s\n", bad[i]);
			CHECK(0);
		}
		CHECK(m.alloc == NULL);
	}
	CHECK_EQ(wt_live_allocs(), 0);
}

/* Entry and snapshot on their own. */
static void test_parts(void)
{
	uint8_t buf[256];
	struct raftmsg_entry e = { .term = 1ull << 63, .index = 3, .type = RAFT_ENTRY_CONF_CHANGE };
	size_t n = raftmsg_entry_encode(&e, buf);
	struct raftmsg_entry back;

	CHECK_EQ(n, raftmsg_entry_size(&e));
	CHECK_EQ(raftmsg_entry_decode(buf, n, &back), 0);
	CHECK(back.term == e.term && back.index == 3 && back.type == 1 && !back.has_data);
	CHECK_EQ(raftmsg_entry_decode(buf, n - 1, &back), -EBADMSG);

	uint64_t v[] = { 1, 2, 3 };
	struct raftmsg_snapshot s = { .index = 5, .term = 2,
				      .conf_state = { .voters = v, .n_voters = 3,
						      .learners_next = v, .n_learners_next = 1 } };
	struct raftmsg_snapshot sb;
	void *alloc;
	n = raftmsg_snapshot_encode(&s, buf);
	CHECK_EQ(n, raftmsg_snapshot_size(&s));
	CHECK_EQ(raftmsg_snapshot_decode(buf, n, &sb, &alloc), 0);
	CHECK(alloc && sb.conf_state.n_voters == 3 && sb.conf_state.voters[2] == 3 &&
	      sb.conf_state.n_learners_next == 1 && sb.conf_state.learners_next[0] == 1 &&
	      sb.conf_state.n_learners == 0 && sb.conf_state.learners == NULL && sb.index == 5);
	raftd_free(alloc);
	CHECK_EQ(raftmsg_snapshot_decode(buf, n - 1, &sb, &alloc), -EBADMSG);
	CHECK(alloc == NULL);
	CHECK_EQ(wt_live_allocs(), 0);
}

/* A decode whose allocation fails says -ENOMEM and leaves nothing. */
static void test_nomem(void)
{
	static struct rm_gen g;
	struct raftmsg m;
	size_t len;
	uint8_t *a;

	rm_seed(&g, 5);
	do {
		a = rm_encode(rm_message(&g), &len);
		if (g.msg.n_entries)
			break;
		free(a);
	} while (1);
	wt_fail_after(0);
	CHECK_EQ(raftmsg_decode(a, len, &m), -ENOMEM);
	CHECK(m.alloc == NULL && m.n_entries == 0);
	wt_fail_after(-1);
	CHECK_EQ(raftmsg_decode(a, len, &m), 0);
	CHECK_EQ(wt_live_allocs(), 1);
	raftmsg_release(&m);
	CHECK_EQ(wt_live_allocs(), 0);
	free(a);

	/* A message without entries or ids allocates nothing. */
	uint8_t hb[64];
	wt_fail_after(0);
	CHECK_EQ(raftmsg_decode(hb, unhex(LINK_HEARTBEAT, hb), &m), 0);
	wt_fail_after(-1);
	CHECK_EQ(m.type, RAFT_MSG_HEARTBEAT);
}

static void test_contexts(void)
{
	uint8_t ctx[RAFTMSG_READ_CTX_LEN];
	uint64_t id;

	raftmsg_read_ctx_put(ctx, 0x0102030405060708ull);
	CHECK(ctx[0] == 1 && ctx[7] == 8);
	CHECK_EQ(raftmsg_read_ctx_get(ctx, 8, &id), 0);
	CHECK(id == 0x0102030405060708ull);
	CHECK_EQ(raftmsg_read_ctx_get(ctx, 7, &id), -EINVAL);

	struct raftmsg m = { .type = RAFT_MSG_VOTE, .has_context = true,
			     .context = (const uint8_t *)"CampaignTransfer", .context_len = 16 };
	CHECK(raftmsg_is_campaign_transfer(&m));
	m.context_len = 15;
	CHECK(!raftmsg_is_campaign_transfer(&m));
	m.context_len = 0;
	m.context = NULL;
	CHECK(!raftmsg_is_campaign_transfer(&m));
}

int main(void)
{
	uint64_t seed = rm_test_seed("test_raftmsg");

	wt_count_allocs();
	test_vectors();
	test_random_roundtrip(seed);
	test_truncations(seed);
	test_decoding_rules();
	test_parts();
	test_nomem();
	test_contexts();
	printf("test_raftmsg: ok\n");
	return 0;
}
