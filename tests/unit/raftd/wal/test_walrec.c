/*
 * Unit tests for raftd/wal/walrec.c: the hand-written encoders must produce
 * exactly what protobuf-c produces for the same messages with etcd's
 * always-written fields set (and so what etcd produces), frames must pad
 * as etcd pads, and the decoders must read protobuf-c's output, skip
 * unknown fields, and refuse malformed input.
 */
#include "wal_util.h"

#include "base/crc32c/crc32c.h"
#include "raftd/wal/walrec.h"
#include "raftpb/raft.pb-c.h"
#include "walpb/record.pb-c.h"

static uint64_t rs = 88172645463325252ull;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* A value of random size: small, medium, or all 64 bits. */
static uint64_t rnd_value(void)
{
	switch (rnd() % 4) {
	case 0: return 0;
	case 1: return rnd() % 128;
	case 2: return rnd() % 100000;
	default: return rnd();
	}
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Checks the frame at f (size n) and returns the record bytes in *rec. */
static const uint8_t *check_frame(const uint8_t *f, size_t n, size_t *rec)
{
	uint64_t word = le64(f), bytes;
	unsigned pad;
	walrec_frame_split(word, &bytes, &pad);
	CHECK_EQ(n, 8 + bytes + pad);
	CHECK_EQ(n % 8, 0);
	CHECK_EQ(pad, (8 - bytes % 8) % 8);
	/* etcd: the pad count with the top bit set, only when padded */
	CHECK_EQ(word >> 56, pad ? 0x80u | pad : 0);
	for (unsigned i = 0; i < pad; i++)
		CHECK_EQ(f[8 + bytes + i], 0);
	*rec = (size_t)bytes;
	return f + 8;
}

/* The record protobuf-c packs for (type, crc, data). */
static size_t pack_record(uint8_t *out, int64_t type, uint32_t crc, bool has_data,
			  const uint8_t *data, size_t len)
{
	Walpb__Record r = WALPB__RECORD__INIT;
	r.has_type = r.has_crc = 1;
	r.type = type;
	r.crc = crc;
	r.has_data = has_data;
	r.data.data = (uint8_t *)data;
	r.data.len = len;
	return walpb__record__pack(&r, out);
}

/* The record bytes rec must be what protobuf-c packs for (type, crc,
 * data). */
static void expect_record(const uint8_t *rec, size_t rec_len, int64_t type, uint32_t crc,
			  bool has_data, const uint8_t *data, size_t len)
{
	static uint8_t want[8192];
	size_t wl = pack_record(want, type, crc, has_data, data, len);
	CHECK_EQ(rec_len, wl);
	CHECK(memcmp(rec, want, wl) == 0);
}

static void test_entry_bytes(void)
{
	static uint8_t data[5000], frame[6000], ent[6000];

	for (int iter = 0; iter < 3000; iter++) {
		struct raft_entry e = {
			.term = rnd_value(), .index = rnd_value(),
			.type = (uint32_t)(rnd() % 3), .len = (uint32_t)(rnd() % 5 ? rnd() % 300 : rnd() % 5000),
		};
		for (uint32_t i = 0; i < e.len; i++)
			data[i] = (uint8_t)rnd();
		e.data = e.len ? data : NULL;

		uint32_t crc0 = (uint32_t)rnd(), crc = crc0;
		size_t n = walrec_encode_entry(frame, &crc, &e);
		CHECK(n <= walrec_entry_size(&e));
		size_t rec_len;
		const uint8_t *rec = check_frame(frame, n, &rec_len);

		Raftpb__Entry pe = RAFTPB__ENTRY__INIT;
		pe.has_type = pe.has_term = pe.has_index = 1;
		pe.type = (Raftpb__EntryType)e.type;
		pe.term = e.term;
		pe.index = e.index;
		pe.has_data = e.data != NULL;
		pe.data.data = e.data;
		pe.data.len = e.len;
		size_t el = raftpb__entry__pack(&pe, ent);
		CHECK_EQ(crc, crc32c_update(crc0, ent, el));
		expect_record(rec, rec_len, WALREC_ENTRY, crc, true, ent, el);

		struct walrec r;
		struct raft_entry d;
		CHECK_EQ(walrec_decode(rec, rec_len, &r), 0);
		CHECK_EQ(r.type, WALREC_ENTRY);
		CHECK_EQ(r.crc, crc);
		CHECK(r.has_data);
		CHECK_EQ(walrec_decode_entry(r.data, r.len, &d), 0);
		CHECK_EQ(d.term, e.term);
		CHECK_EQ(d.index, e.index);
		CHECK_EQ(d.type, e.type);
		CHECK_EQ(d.len, e.len);
		CHECK(!e.len || memcmp(d.data, data, e.len) == 0);
	}
}

static void test_small_records(void)
{
	uint8_t frame[128], msg[64];
	size_t rec_len;
	const uint8_t *rec;

	for (int iter = 0; iter < 2000; iter++) {
		struct raft_hardstate hs = { rnd_value(), rnd_value(), rnd_value() };
		uint32_t crc0 = (uint32_t)rnd(), crc = crc0;
		size_t n = walrec_encode_state(frame, &crc, &hs);
		CHECK(n <= WALREC_SMALL_MAX);
		rec = check_frame(frame, n, &rec_len);
		Raftpb__HardState ph = RAFTPB__HARD_STATE__INIT;
		ph.has_term = ph.has_vote = ph.has_commit = 1;
		ph.term = hs.term;
		ph.vote = hs.vote;
		ph.commit = hs.commit;
		size_t ml = raftpb__hard_state__pack(&ph, msg);
		CHECK_EQ(crc, crc32c_update(crc0, msg, ml));
		expect_record(rec, rec_len, WALREC_STATE, crc, true, msg, ml);
		struct walrec r;
		struct raft_hardstate d;
		CHECK_EQ(walrec_decode(rec, rec_len, &r), 0);
		CHECK_EQ(walrec_decode_state(r.data, r.len, &d), 0);
		CHECK(d.term == hs.term && d.vote == hs.vote && d.commit == hs.commit);

		uint64_t index = rnd_value(), term = rnd_value(), di, dt;
		crc = crc0;
		n = walrec_encode_snapshot(frame, &crc, index, term);
		CHECK(n <= WALREC_SMALL_MAX);
		rec = check_frame(frame, n, &rec_len);
		Walpb__Snapshot ps = WALPB__SNAPSHOT__INIT;
		ps.has_index = ps.has_term = 1;
		ps.index = index;
		ps.term = term;
		ml = walpb__snapshot__pack(&ps, msg);
		expect_record(rec, rec_len, WALREC_SNAPSHOT, crc, true, msg, ml);
		CHECK_EQ(walrec_decode(rec, rec_len, &r), 0);
		CHECK_EQ(walrec_decode_snapshot(r.data, r.len, &di, &dt), 0);
		CHECK(di == index && dt == term);

		n = walrec_encode_crc(frame, crc0);
		CHECK(n <= WALREC_SMALL_MAX);
		rec = check_frame(frame, n, &rec_len);
		expect_record(rec, rec_len, WALREC_CRC, crc0, false, NULL, 0);
	}

	/* metadata: absent, empty and present are three encodings */
	const uint8_t md[] = "member";
	for (int k = 0; k < 3; k++) {
		const uint8_t *p = k == 0 ? NULL : md;
		size_t len = k == 2 ? 6 : 0;
		uint32_t crc = 0;
		size_t n = walrec_encode_metadata(frame, &crc, p, len);
		CHECK(n <= walrec_metadata_size(p, len));
		rec = check_frame(frame, n, &rec_len);
		expect_record(rec, rec_len, WALREC_METADATA, crc, p != NULL, p, len);
		struct walrec r;
		CHECK_EQ(walrec_decode(rec, rec_len, &r), 0);
		CHECK_EQ(r.has_data, p != NULL);
	}
}

static void test_decode_rules(void)
{
	struct walrec r;
	struct raft_entry e;
	struct raft_hardstate hs;

	/* unknown fields of every wire type are skipped */
	const uint8_t unknown[] = {
		0x08, 0x02,                   /* type 2 */
		0x48, 0x96, 0x01,             /* field 9 varint */
		0x52, 0x02, 0xaa, 0xbb,       /* field 10 bytes */
		0x5d, 1, 2, 3, 4,             /* field 11 fixed32 */
		0x61, 1, 2, 3, 4, 5, 6, 7, 8, /* field 12 fixed64 */
		0x10, 0x05,                   /* crc 5 */
		0x1a, 0x01, 0x42,             /* data */
	};
	CHECK_EQ(walrec_decode(unknown, sizeof(unknown), &r), 0);
	CHECK(r.type == 2 && r.crc == 5 && r.has_data && r.len == 1 && r.data[0] == 0x42);

	/* a repeated field: the last one wins, as in Go */
	const uint8_t twice[] = { 0x08, 0x01, 0x08, 0x03 };
	CHECK_EQ(walrec_decode(twice, sizeof(twice), &r), 0);
	CHECK_EQ(r.type, 3);

	/* the crc field keeps its low 32 bits, as gogo does */
	const uint8_t wide[] = { 0x10, 0xff, 0xff, 0xff, 0xff, 0x7f };
	CHECK_EQ(walrec_decode(wide, sizeof(wide), &r), 0);
	CHECK_EQ(r.crc, 0xffffffffu);

	const uint8_t *bad[] = {
		(const uint8_t *)"\x08",                         /* truncated varint */
		(const uint8_t *)"\x1a\x05\x01",                 /* bytes past the end */
		(const uint8_t *)"\x0a\x01\x00",                 /* type as bytes */
		(const uint8_t *)"\x00\x01",                     /* field 0 */
		(const uint8_t *)"\x0b\x0c",                     /* a group */
		(const uint8_t *)"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", /* 11-byte varint */
		(const uint8_t *)"\x5d\x01\x02",                 /* short fixed32 */
	};
	const size_t bad_len[] = { 1, 3, 3, 2, 2, 12, 3 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(walrec_decode(bad[i], bad_len[i], &r), -EBADMSG);
		CHECK_EQ(walrec_decode_entry(bad[i], bad_len[i], &e), -EBADMSG);
		CHECK_EQ(walrec_decode_state(bad[i], bad_len[i], &hs), -EBADMSG);
	}
	/* an entry's data as a varint */
	CHECK_EQ(walrec_decode_entry((const uint8_t *)"\x20\x01", 2, &e), -EBADMSG);
	/* empty messages decode to zeros */
	CHECK_EQ(walrec_decode_entry(NULL, 0, &e), 0);
	CHECK(e.term == 0 && e.index == 0 && e.len == 0 && e.data == NULL);

	/* Random bytes: never a crash; whatever decodes agrees with protobuf-c. */
	uint8_t buf[64];
	unsigned agreed = 0;
	for (int iter = 0; iter < 200000; iter++) {
		size_t n = rnd() % sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint8_t)(rnd() % 4 ? rnd() % 0x40 : rnd());
		if (walrec_decode(buf, n, &r) != 0)
			continue;
		Walpb__Record *pr = walpb__record__unpack(NULL, n, buf);
		if (!pr)
			continue; /* protobuf-c is stricter about some oddities */
		CHECK_EQ(pr->type, r.type);
		CHECK_EQ(pr->crc, r.crc);
		CHECK_EQ(pr->has_data, r.has_data);
		CHECK_EQ(pr->data.len, r.len);
		CHECK(!r.len || memcmp(pr->data.data, r.data, r.len) == 0);
		walpb__record__free_unpacked(pr, NULL);
		agreed++;
	}
	CHECK(agreed > 1000);
}

int main(void)
{
	test_entry_bytes();
	test_small_records();
	test_decode_rules();
	printf("raftd/wal/test_walrec: ok\n");
	return 0;
}
