/*
 * proto/test_wire_reader: proto/wire.h, the one protobuf field reader.
 * Varints as gogo reads them (10 bytes at most, bits past the 64th
 * dropped, an 11th byte an overflow), field numbers as gogo computes them
 * (int32 of key >> 3, refused when <= 0), wire types without a value
 * refused, lengths and fixed values checked against the end, and a
 * seeded round trip of random fields through the writer and the reader.
 * A failure prints its seed (CETCD_TEST_SEED=<n> repeats it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/wire.h"
#include "../../proto/expect.h"
#include "../../proto/rng.h"

static int varint(const uint8_t *p, size_t n, uint64_t *v, size_t *used)
{
	struct proto_reader r = proto_reader_init(p, n);
	int rc = proto_read_varint(&r, v);

	*used = (size_t)(r.p - p);
	return rc;
}

static void test_varint(void)
{
	static const uint8_t one[] = { 0x7f };
	static const uint8_t two[] = { 0xac, 0x02 };
	static const uint8_t max[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t dropped[] = { 0x80, 0x80, 0x80, 0x80, 0x80,
					   0x80, 0x80, 0x80, 0x80, 0x7e };
	static const uint8_t eleven[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
					  0x80, 0x80, 0x80, 0x80, 0x00 };
	static const uint8_t cut[] = { 0x80, 0x80 };
	uint64_t v = 0;
	size_t used;

	CHECK(varint(one, sizeof(one), &v, &used) == 0 && v == 0x7f && used == 1);
	CHECK(varint(two, sizeof(two), &v, &used) == 0 && v == 300 && used == 2);
	CHECK(varint(max, sizeof(max), &v, &used) == 0 && v == UINT64_MAX && used == 10);
	/* The 10th byte's bits past the 64th are dropped, as gogo drops them. */
	CHECK(varint(dropped, sizeof(dropped), &v, &used) == 0 && v == 0 && used == 10);
	CHECK(varint(eleven, sizeof(eleven), &v, &used) == -EOVERFLOW);
	CHECK(varint(cut, sizeof(cut), &v, &used) == -EBADMSG && used == 2);
	CHECK(varint(one, 0, &v, &used) == -EBADMSG && used == 0);
	CHECK(varint(NULL, 0, &v, &used) == -EBADMSG);
}

static int field(const uint8_t *p, size_t n, struct proto_field *f, size_t *used)
{
	struct proto_reader r = proto_reader_init(p, n);
	int rc = proto_read_field(&r, f);

	*used = (size_t)(r.p - p);
	return rc;
}

static void test_fields(void)
{
	static const uint8_t bytes[] = { 0x0a, 0x02, 'h', 'i', 0xff };
	static const uint8_t fixed64[] = { 0x11, 1, 2, 3, 4, 5, 6, 7, 8 };
	static const uint8_t fixed32[] = { 0x1d, 1, 2, 3, 4 };
	static const uint8_t big_num[] = { 0xf8, 0xff, 0xff, 0xff, 0x3f, 0x05 }; /* 2^31-1 */
	static const uint8_t wrapped[] = { 0xa0, 0x80, 0x80, 0x80, 0x80, 0x01, 0x01 }; /* 2^32+4 */
	static const uint8_t negative[] = { 0xf8, 0xff, 0xff, 0xff, 0x7f, 0x01 }; /* int32 -1 */
	static const uint8_t zero[] = { 0x00, 0x01 };
	static const uint8_t group[] = { 0x0b, 0x0c };
	static const uint8_t end_group[] = { 0x0c };
	static const uint8_t wire6[] = { 0x0e, 0x00 };
	static const uint8_t wire7[] = { 0x0f, 0x00 };
	static const uint8_t long_len[] = { 0x0a, 0x03, 'h', 'i' };
	static const uint8_t cut64[] = { 0x11, 1, 2, 3, 4, 5, 6, 7 };
	static const uint8_t cut32[] = { 0x1d, 1, 2, 3 };
	static const uint8_t huge_len[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
					    0xff, 0xff, 0xff, 0xff, 0x01 };
	struct proto_field f;
	size_t used;

	CHECK(field(bytes, sizeof(bytes), &f, &used) == 0 && f.num == 1 &&
	      f.wire == PROTO_WIRE_BYTES && f.len == 2 && memcmp(f.data, "hi", 2) == 0 &&
	      f.start == bytes && used == 4);
	CHECK(field(fixed64, sizeof(fixed64), &f, &used) == 0 && f.num == 2 &&
	      f.wire == PROTO_WIRE_FIXED64 && f.len == 8 && f.data == fixed64 + 1 && used == 9);
	CHECK(field(fixed32, sizeof(fixed32), &f, &used) == 0 && f.num == 3 &&
	      f.wire == PROTO_WIRE_FIXED32 && f.len == 4 && used == 5);
	CHECK(field(big_num, sizeof(big_num), &f, &used) == 0 && f.num == INT32_MAX &&
	      f.wire == PROTO_WIRE_VARINT && f.varint == 5);
	/* gogo keeps the low 32 bits of the field number. */
	CHECK(field(wrapped, sizeof(wrapped), &f, &used) == 0 && f.num == 4 && f.varint == 1);
	CHECK(field(negative, sizeof(negative), &f, &used) == -EINVAL);
	CHECK(field(zero, sizeof(zero), &f, &used) == -EINVAL);
	CHECK(field(group, sizeof(group), &f, &used) == -EPROTO);
	CHECK(field(end_group, sizeof(end_group), &f, &used) == -EPROTO);
	CHECK(field(wire6, sizeof(wire6), &f, &used) == -EPROTO);
	CHECK(field(wire7, sizeof(wire7), &f, &used) == -EPROTO);
	CHECK(field(long_len, sizeof(long_len), &f, &used) == -EBADMSG);
	CHECK(field(cut64, sizeof(cut64), &f, &used) == -EBADMSG);
	CHECK(field(cut32, sizeof(cut32), &f, &used) == -EBADMSG);
	CHECK(field(huge_len, sizeof(huge_len), &f, &used) == -EBADMSG);
	CHECK(field(bytes, 1, &f, &used) == -EBADMSG);
}

/* Random fields written with proto_varint_put read back as written. */
static void test_round_trip(void)
{
	enum { N = 64 };
	uint8_t buf[N * 40];
	struct {
		uint32_t num;
		unsigned wire;
		uint64_t v;
		size_t len;
	} want[N];

	for (int iter = 0; iter < 2000; iter++) {
		size_t n = 0;
		for (int i = 0; i < N; i++) {
			static const unsigned wires[] = { 0, 1, 2, 5 };
			want[i].num = 1 + (uint32_t)(proto_test_rnd() % ((proto_test_rnd() & 1) ? 15 : 0x1fffffff));
			want[i].wire = wires[proto_test_rnd() % 4];
			want[i].v = proto_test_rnd() >> (proto_test_rnd() % 64);
			want[i].len = proto_test_rnd() % 8;
			size_t kl = proto_varint_put(buf + n, (uint64_t)want[i].num << 3 | want[i].wire);
			CHECK(kl == proto_varint_len((uint64_t)want[i].num << 3 | want[i].wire));
			n += kl;
			switch (want[i].wire) {
			case 0:
				n += proto_varint_put(buf + n, want[i].v);
				break;
			case 1:
				memset(buf + n, 0xa5, 8);
				n += 8;
				break;
			case 2:
				n += proto_varint_put(buf + n, want[i].len);
				memset(buf + n, 'x', want[i].len);
				n += want[i].len;
				break;
			default:
				memset(buf + n, 0x5a, 4);
				n += 4;
				break;
			}
		}
		struct proto_reader r = proto_reader_init(buf, n);
		for (int i = 0; i < N; i++) {
			struct proto_field f;
			int rc = proto_read_field(&r, &f);
			CHECK(rc == 0 && (uint32_t)f.num == want[i].num && f.wire == want[i].wire);
			if (rc)
				break;
			if (f.wire == 0)
				CHECK(f.varint == want[i].v);
			if (f.wire == 2)
				CHECK(f.len == want[i].len && (f.len == 0 || f.data[0] == 'x'));
			if (f.wire == 1 || f.wire == 5)
				CHECK(f.len == (f.wire == 1 ? 8u : 4u));
		}
		CHECK(proto_reader_done(&r) && r.p == buf + n);
		/* Cut anywhere inside the last field: an error, never a read past the end. */
		struct proto_reader c = proto_reader_init(buf, n - 1);
		struct proto_field f;
		int rc = 0;
		while (!proto_reader_done(&c) && (rc = proto_read_field(&c, &f)) == 0)
			;
		CHECK(rc == -EBADMSG && c.p <= buf + n - 1);
		if (expect_failures)
			return;
	}
}

int main(void)
{
	const char *env = getenv("CETCD_TEST_SEED");
	unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);

	proto_test_seed(seed);
	test_varint();
	test_fields();
	test_round_trip();
	if (expect_failures) {
		fprintf(stderr, "proto/test_wire_reader: %d check(s) failed (seed %u)\n",
			expect_failures, seed);
		return 1;
	}
	printf("proto/test_wire_reader: all checks passed (seed %u)\n", seed);
	return 0;
}
