/*
 * shm/msg: the origin field appended to proposal bytes. Checks that the
 * bytes stay a valid InternalRaftRequest for a real protobuf decoder, that
 * the origin is found again exactly, and that malformed bytes give
 * -EBADMSG (never a crash or a wrong origin).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "shm/msg.h"

static int failures;
#define CHECK(c) do { if (!(c)) { failures++; \
	fprintf(stderr, "%s:%d: check failed: %s (seed %u)\n", __FILE__, __LINE__, #c, seed); } } while (0)

static unsigned seed;

static uint64_t rnd64(void)
{
	uint64_t v = 0;
	for (int i = 0; i < 4; i++)
		v = v << 16 | (uint64_t)(rand() & 0xffff);
	/* Mix in small values too: varint edge cases live there. */
	switch (rand() % 4) {
	case 0: return v & 0x7f;
	case 1: return v & 0x3fff;
	case 2: return v;
	default: return UINT64_MAX - (v & 3);
	}
}

/* Encodes a Put proposal with random fields into buf; returns its length. */
static size_t encode_proposal(uint8_t *buf, size_t cap)
{
	Etcdserverpb__InternalRaftRequest irr = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__RequestHeader hdr = ETCDSERVERPB__REQUEST_HEADER__INIT;
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	uint8_t key[64], val[200];
	size_t klen = 1 + (size_t)rand() % sizeof(key), vlen = (size_t)rand() % sizeof(val);

	for (size_t i = 0; i < klen; i++)
		key[i] = (uint8_t)rand();
	for (size_t i = 0; i < vlen; i++)
		val[i] = (uint8_t)rand();
	hdr.id = rnd64();
	put.key.data = key;
	put.key.len = klen;
	put.value.data = val;
	put.value.len = vlen;
	put.lease = (int64_t)(rnd64() >> 1);
	put.prev_kv = rand() & 1;
	irr.header = &hdr;
	irr.put = &put;
	if (etcdserverpb__internal_raft_request__get_packed_size(&irr) > cap)
		abort();
	return etcdserverpb__internal_raft_request__pack(&irr, buf);
}

static void test_round_trip(void)
{
	for (int i = 0; i < 20000; i++) {
		uint8_t buf[512];
		struct msg_origin o = {
			.member_id = rnd64(), .slot = (uint32_t)rnd64(),
			.generation = rnd64(), .request_id = rnd64(),
		}, got;
		size_t n = encode_proposal(buf, sizeof(buf) - MSG_ORIGIN_MAX_BYTES);
		size_t m = msg_origin_encode(&o, buf + n);

		CHECK(m <= MSG_ORIGIN_MAX_BYTES);
		CHECK(msg_origin_find(buf, n, &got) == -ENOENT);
		CHECK(msg_origin_find(buf, n + m, &got) == 0);
		CHECK(got.member_id == o.member_id && got.slot == o.slot &&
		      got.generation == o.generation && got.request_id == o.request_id);

		/* Still an InternalRaftRequest to protobuf-c. */
		Etcdserverpb__InternalRaftRequest *irr =
			etcdserverpb__internal_raft_request__unpack(NULL, n + m, buf);
		CHECK(irr && irr->put && irr->header);
		if (irr)
			etcdserverpb__internal_raft_request__free_unpacked(irr, NULL);

		/* Every cut inside the origin field is malformed, never a match. */
		for (size_t cut = n + 1; cut < n + m; cut++)
			CHECK(msg_origin_find(buf, cut, &got) == -EBADMSG);
	}
}

static void test_last_wins(void)
{
	uint8_t buf[256];
	struct msg_origin a = { 1, 2, 0, 3, 4 }, b = { 5, 6, 0, 7, 8 }, got;
	size_t n = msg_origin_encode(&a, buf);
	n += msg_origin_encode(&b, buf + n);
	CHECK(msg_origin_find(buf, n, &got) == 0);
	CHECK(got.member_id == 5 && got.slot == 6 && got.generation == 7 &&
	      got.request_id == 8);
}

static void test_malformed(void)
{
	/* Field number 0, a group, an overlong varint, a length past the end,
	 * and a slot that does not fit 32 bits. */
	static const uint8_t zero_field[] = { 0x00, 0x01 };
	static const uint8_t group[] = { 0x0b, 0x0c };
	static const uint8_t long_varint[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
					       0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t past_end[] = { 0x12, 0x05, 0x00 };
	uint8_t big_slot[32];
	struct msg_origin got;
	size_t n = 0;

	CHECK(msg_origin_find(zero_field, sizeof(zero_field), &got) == -EBADMSG);
	CHECK(msg_origin_find(group, sizeof(group), &got) == -EBADMSG);
	CHECK(msg_origin_find(long_varint, sizeof(long_varint), &got) == -EBADMSG);
	CHECK(msg_origin_find(past_end, sizeof(past_end), &got) == -EBADMSG);
	CHECK(msg_origin_find(NULL, 0, &got) == -ENOENT);

	/* tag 4096/LEN = 0x82 0x80 0x02, len 6, field 2 varint 2^32 */
	big_slot[n++] = 0x82; big_slot[n++] = 0x80; big_slot[n++] = 0x02;
	big_slot[n++] = 6;
	big_slot[n++] = 0x10;
	big_slot[n++] = 0x80; big_slot[n++] = 0x80; big_slot[n++] = 0x80;
	big_slot[n++] = 0x80; big_slot[n++] = 0x10;
	CHECK(msg_origin_find(big_slot, n, &got) == -EBADMSG);
}

int main(void)
{
	const char *env = getenv("CETCD_TEST_SEED");
	seed = env ? (unsigned)strtoul(env, NULL, 10) : 12345u;
	srand(seed);
	test_round_trip();
	test_last_wins();
	test_malformed();
	if (failures) {
		fprintf(stderr, "test_msg: %d checks failed (seed %u)\n", failures, seed);
		return 1;
	}
	printf("test_msg: ok (seed %u)\n", seed);
	return 0;
}
