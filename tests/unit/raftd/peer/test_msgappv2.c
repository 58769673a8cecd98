/*
 * Unit tests for raftd/peer/msgappv2.c and raftd/peer/msgframe.c, the peer stream
 * codecs: byte vectors read off etcd's rafthttp encoders (checked against
 * etcd's Go code by tests/peer/msgappv2_diff.sh), the short form and the
 * (term, index) state both ends carry, decoding byte by byte, refusal of
 * malformed and oversized frames (and a failed stream staying failed),
 * allocation failure, and the message stream and snapshot body frames.
 */
#include "wal_util.h"

#include <sys/mman.h>

#include "raftmsg_util.h"

#include "raftd/peer/msgappv2.h"
#include "raftd/peer/msgframe.h"
#include "raftd/raft/raft.h"

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = rm_unhex(h, out);
	CHECK(n != (size_t)-1);
	return n;
}

static void check_bytes(const uint8_t *got, size_t n, const char *want_hex)
{
	uint8_t want[1024];
	size_t wn = unhex(want_hex, want);

	if (n != wn || memcmp(got, want, n) != 0) {
		fprintf(stderr, "want %s\ngot  ", want_hex);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, "%02x", got[i]);
		fprintf(stderr, "\n");
		CHECK(0);
	}
}

/* raftpb.Message{Type: MsgHeartbeat} as Marshal writes it. */
#define LINK_HEARTBEAT_HEX "08081000180020002800300040004a0a12080a0228001000180050005800"

/* Encodes m on e, checking the size asked first; returns the bytes. */
static size_t enc(struct msgappv2_encoder *e, const struct raftmsg *m, uint8_t *out)
{
	size_t n = msgappv2_encoded_size(e, m);
	CHECK_EQ(msgappv2_encode(e, m, out), n);
	return n;
}

static void test_vectors(void)
{
	struct msgappv2_encoder e;
	struct msgappv2_decoder d;
	struct raftmsg m, hb;
	uint8_t buf[512];
	size_t n, frame;

	msgappv2_encoder_init(&e);
	msgframe_link_heartbeat(&hb);
	CHECK_EQ(enc(&e, &hb, buf), 1);
	CHECK_EQ(buf[0], MSGAPPV2_LINK_HEARTBEAT);

	/* Term 2 but logTerm 1: the full form, then the stream is at
	 * (2, 6), the index of its last entry. */
	struct raftmsg_entry e1 = { .term = 2, .index = 6, .has_data = true,
				    .data = (const uint8_t *)"a", .len = 1 };
	m = (struct raftmsg){ .type = RAFT_MSG_APP, .to = 2, .from = 1, .term = 2, .log_term = 1,
			      .index = 5, .entries = &e1, .n_entries = 1, .commit = 4 };
	n = enc(&e, &m, buf);
	check_bytes(buf, n, "02" "0000000000000029"
			    "080310021801200228013005" "3a09080010021806220161" "4004"
			    "4a0a12080a02280010001800" "50005800");
	CHECK(e.term == 2 && e.index == 6);

	/* It continues at (2, 6): the short form, entry count, each entry
	 * with its length, the commit index. */
	struct raftmsg_entry e2[2] = {
		{ .term = 2, .index = 7, .has_data = true, .data = (const uint8_t *)"b", .len = 1 },
		{ .term = 2, .index = 8 },
	};
	m = (struct raftmsg){ .type = RAFT_MSG_APP, .to = 2, .from = 1, .term = 2, .log_term = 2,
			      .index = 6, .entries = e2, .n_entries = 2, .commit = 7 };
	n = enc(&e, &m, buf);
	check_bytes(buf, n, "01" "0000000000000002"
			    "0000000000000009" "080010021807220162"
			    "0000000000000006" "080010021808"
			    "0000000000000007");
	CHECK(e.term == 2 && e.index == 8);

	/* The reader rebuilds the MsgApp from its own state. */
	msgappv2_decoder_init(&d, 2, 1);
	d.term = 2;
	d.index = 6;
	CHECK_EQ(msgappv2_decode(&d, buf, n, &m, &frame), 0);
	CHECK_EQ(frame, n);
	CHECK(m.type == RAFT_MSG_APP && m.from == 1 && m.to == 2 && m.term == 2 &&
	      m.log_term == 2 && m.index == 6 && m.commit == 7 && m.n_entries == 2);
	CHECK(m.entries[0].index == 7 && m.entries[0].len == 1 && m.entries[0].data == buf + 25);
	CHECK(m.entries[1].index == 8 && !m.entries[1].has_data);
	CHECK(d.index == 8 && d.term == 2);
	raftmsg_release(&m);

	/* The message stream's frame of the link heartbeat. */
	n = msgframe_encode(&hb, buf);
	CHECK_EQ(n, msgframe_size(&hb));
	check_bytes(buf, n, "000000000000001e" LINK_HEARTBEAT_HEX);
	CHECK_EQ(msgframe_decode(buf, n, MSGFRAME_STREAM_MAX, &m, &frame), 0);
	CHECK(frame == n && msgframe_is_link_heartbeat(&m));
}

/* A model of the stream state: what the decoder must rebuild. */
static void expect(const struct raftmsg *sent, bool short_form, uint64_t *term, uint64_t *index,
		   uint64_t local, uint64_t remote, struct raftmsg *want)
{
	*want = *sent;
	if (msgframe_is_link_heartbeat(sent)) {
		msgframe_link_heartbeat(want);
		return;
	}
	if (short_form) {
		*want = (struct raftmsg){ .type = RAFT_MSG_APP, .from = remote, .to = local,
					  .term = *term, .log_term = *term, .index = *index,
					  .entries = sent->entries, .n_entries = sent->n_entries,
					  .commit = sent->commit };
		*index += sent->n_entries;
		return;
	}
	*term = sent->term;
	*index = sent->n_entries ? sent->entries[sent->n_entries - 1].index : sent->index;
}

static bool same_msg(const struct raftmsg *a, const struct raftmsg *b)
{
	size_t n = raftmsg_size(a), nb = raftmsg_size(b);
	uint8_t *x = malloc(n + 1), *y = malloc(nb + 1);
	raftmsg_encode(a, x);
	raftmsg_encode(b, y);
	bool same = n == nb && memcmp(x, y, n) == 0;
	free(x);
	free(y);
	return same;
}

/*
 * Random streams: a mix of heartbeats, messages that continue the stream
 * and messages that do not, decoded one byte more at a time: every
 * prefix short of a frame asks for more, never for fewer bytes than it
 * has, and each frame gives back the message the model expects.
 */
static void test_random_streams(uint64_t seed)
{
	static struct rm_gen g;
	uint8_t *stream = malloc(1 << 20);

	rm_seed(&g, seed);
	for (int s = 0; s < 200; s++) {
		struct msgappv2_encoder e;
		struct msgappv2_decoder d;
		uint64_t local = rm_value(&g), remote = rm_value(&g), term = 0, index = 0;
		size_t at = 0, start = 0;

		msgappv2_encoder_init(&e);
		msgappv2_decoder_init(&d, local, remote);
		for (int k = 0; k < 12; k++) {
			struct raftmsg *m = rm_message(&g), want, got;
			if (rm_below(&g, 4) == 0)
				msgframe_link_heartbeat(m);
			else if (rm_below(&g, 2))
				m->term = m->log_term = e.term, m->index = e.index;
			bool short_form = !msgframe_is_link_heartbeat(m) &&
					  e.index == m->index && e.term == m->log_term &&
					  m->log_term == m->term;
			size_t n = enc(&e, m, stream + at);
			CHECK(n > 0 && (short_form ? stream[at] == MSGAPPV2_APP_ENTRIES : 1));
			at += n;
			expect(m, short_form, &term, &index, local, remote, &want);
			for (size_t avail = start; ; avail++) {
				size_t frame;
				int rc = msgappv2_decode(&d, stream + start, avail - start, &got, &frame);
				if (rc == -EAGAIN) {
					CHECK(avail < at && frame > avail - start);
					continue;
				}
				CHECK_EQ(rc, 0);
				CHECK_EQ(start + frame, at);
				break;
			}
			CHECK(same_msg(&got, &want));
			CHECK(d.term == term && d.index == index);
			raftmsg_release(&got);
			start = at;
		}
	}
	free(stream);
	CHECK_EQ(wt_live_allocs(), 0);
}

static int decode_hex(struct msgappv2_decoder *d, const char *hex, struct raftmsg *m)
{
	uint8_t buf[256];
	size_t frame, n = unhex(hex, buf);
	return msgappv2_decode(d, buf, n, m, &frame);
}

static void test_malformed(void)
{
	struct msgappv2_decoder d;
	struct raftmsg m;
	static const struct {
		const char *hex;
		int rc;
	} cases[] = {
		{ "03", -EBADMSG },                        /* unknown frame type */
		{ "ff00", -EBADMSG },
		{ "0200000000000000020a00", -EBADMSG },    /* message not raftpb */
		{ "01" "0000000000000001" "0000000000000002" "0a00" "0000000000000000",
		  -EBADMSG },                              /* entry not raftpb */
		{ "01" "0100000000000000", -EMSGSIZE },    /* entry count too large */
		{ "01" "0000000000000001" "0000000020000001", -EMSGSIZE }, /* entry > 512 MiB */
		{ "01" "0000000000000002" "0000000010000000" , -EAGAIN }, /* lengths not in yet */
		{ "02" "0000000020000001", -EMSGSIZE },    /* message > 512 MiB */
		{ "02" "ffffffffffffffff", -EMSGSIZE },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msgappv2_decoder_init(&d, 1, 2);
		int rc = decode_hex(&d, cases[i].hex, &m);
		if (rc != cases[i].rc) {
			fprintf(stderr, "%s: %d, want %d\n", cases[i].hex, rc, cases[i].rc);
			CHECK(0);
		}
		CHECK(m.alloc == NULL);
		if (rc != -EAGAIN) /* a failed stream stays failed */
			CHECK_EQ(decode_hex(&d, "00", &m), rc);
	}

	/* Entries of 200 MiB each: the third passes 512 MiB in all. The
	 * buffer is mapped, not written: only the length words are read. */
	const size_t big = 200u << 20, len = 9 + 2 * (8 + big) + 8;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	size_t frame;
	CHECK(p != MAP_FAILED);
	p[0] = MSGAPPV2_APP_ENTRIES;
	msgframe_put_u64(p + 1, 3);
	msgframe_put_u64(p + 9, big);
	msgframe_put_u64(p + 9 + 8 + big, big);
	msgframe_put_u64(p + 9 + 2 * (8 + big), big);
	msgappv2_decoder_init(&d, 1, 2);
	CHECK_EQ(msgappv2_decode(&d, p, 17, &m, &frame), -EAGAIN);
	CHECK_EQ(frame, 17 + big + 8); /* up to the second length word */
	CHECK_EQ(msgappv2_decode(&d, p, len, &m, &frame), -EMSGSIZE);
	munmap(p, len);
	CHECK_EQ(wt_live_allocs(), 0);
}

/* Allocation failure consumes nothing and leaves the stream usable. */
static void test_nomem(void)
{
	struct msgappv2_decoder d;
	struct raftmsg m;
	const char *hex = "01" "0000000000000001" "0000000000000006" "080010021807"
			  "0000000000000007";

	msgappv2_decoder_init(&d, 1, 2);
	wt_fail_after(0);
	CHECK_EQ(decode_hex(&d, hex, &m), -ENOMEM);
	wt_fail_after(-1);
	CHECK(d.index == 0 && d.error == 0);
	CHECK_EQ(decode_hex(&d, hex, &m), 0);
	CHECK(m.n_entries == 1 && m.commit == 7 && d.index == 1);
	raftmsg_release(&m);
	CHECK_EQ(wt_live_allocs(), 0);
}

/* Message stream frames and the snapshot body. */
static void test_frames(uint64_t seed)
{
	static struct rm_gen g;
	struct raftmsg m;
	uint8_t buf[64] = { 0 };
	size_t frame;

	CHECK_EQ(msgframe_decode(buf, 0, MSGFRAME_STREAM_MAX, &m, &frame), -EAGAIN);
	CHECK_EQ(frame, 8);
	msgframe_put_u64(buf, MSGFRAME_STREAM_MAX + 1);
	CHECK_EQ(msgframe_decode(buf, 8, MSGFRAME_STREAM_MAX, &m, &frame), -EMSGSIZE);
	CHECK_EQ(msgframe_decode(buf, 8, MSGFRAME_SNAPSHOT_MAX, &m, &frame), -EAGAIN);
	CHECK_EQ(frame, 8 + MSGFRAME_STREAM_MAX + 1);
	msgframe_put_u64(buf, 2);
	buf[8] = 0x0a;
	buf[9] = 0x00;
	CHECK_EQ(msgframe_decode(buf, 10, MSGFRAME_STREAM_MAX, &m, &frame), -EBADMSG);

	/* A snapshot body: the MsgSnap's frame, then the db bytes. */
	rm_seed(&g, seed);
	for (int i = 0; i < 500; i++) {
		struct raftmsg *snap = rm_message(&g);
		snap->type = RAFT_MSG_SNAP;
		size_t n = msgframe_size(snap);
		uint8_t *body = malloc(n + 100);
		CHECK_EQ(msgframe_encode(snap, body), n);
		memset(body + n, 0xdb, 100);
		for (size_t avail = 0; avail < n; avail += 1 + avail / 3) {
			CHECK_EQ(msgframe_decode(body, avail, MSGFRAME_SNAPSHOT_MAX, &m, &frame),
				 -EAGAIN);
			CHECK(frame > avail && frame <= n);
		}
		CHECK_EQ(msgframe_decode(body, n + 100, MSGFRAME_SNAPSHOT_MAX, &m, &frame), 0);
		CHECK_EQ(frame, n);
		CHECK(same_msg(&m, snap) && m.type == RAFT_MSG_SNAP);
		raftmsg_release(&m);
		free(body);
	}
	CHECK_EQ(wt_live_allocs(), 0);
}

int main(void)
{
	uint64_t seed = rm_test_seed("test_msgappv2");

	wt_count_allocs();
	test_vectors();
	test_random_streams(seed);
	test_malformed();
	test_nomem();
	test_frames(seed);
	printf("test_msgappv2: ok\n");
	return 0;
}
