/*
 * test_proto_check: proto_check_strings (proto/check.h) finds a NUL in a
 * string field at any depth, ignores bytes fields and unknown fields,
 * refuses malformed input with -EBADMSG, and survives random input.
 * Seeded; a failure prints its seed (CETCD_TEST_SEED=<n> repeats it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "proto/check.h"
#include "../proto/expect.h"

struct buf {
	uint8_t data[4096];
	size_t len;
};

static void put_varint(struct buf *b, uint64_t v)
{
	do {
		b->data[b->len++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v != 0);
}

static void put_field(struct buf *b, uint32_t num, const void *data, size_t len)
{
	put_varint(b, (uint64_t)num << 3 | 2);
	put_varint(b, len);
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

static int check(const ProtobufCMessageDescriptor *d, const struct buf *b)
{
	return proto_check_strings(d, b->data, b->len);
}

static void test_strings(void)
{
	const ProtobufCMessageDescriptor *user_add =
		&etcdserverpb__auth_user_add_request__descriptor;
	struct buf b = { .len = 0 }, inner = { .len = 0 };

	/* name "root", password "pw": fine. */
	put_field(&b, 1, "root", 4);
	put_field(&b, 2, "pw", 2);
	CHECK(check(user_add, &b) == 0);
	CHECK(proto_check_strings(user_add, NULL, 0) == 0);

	/* name "root\0x": refused, whether first, last or alone. */
	b.len = 0;
	put_field(&b, 1, "root\0x", 6);
	CHECK(check(user_add, &b) == -EILSEQ);
	b.len = 0;
	put_field(&b, 2, "pw", 2);
	put_field(&b, 1, "\0", 1);
	CHECK(check(user_add, &b) == -EILSEQ);

	/* A NUL in a field our schema does not know is not a string. */
	b.len = 0;
	put_field(&b, 99, "a\0b", 3);
	CHECK(check(user_add, &b) == 0);

	/* Keys are bytes: NULs allowed. */
	b.len = 0;
	put_field(&b, 1, "k\0", 2);
	CHECK(check(&etcdserverpb__put_request__descriptor, &b) == 0);

	/* Nested: InternalRaftRequest.auth_user_add (1100) .name. */
	put_field(&inner, 1, "ad\0min", 6);
	b.len = 0;
	put_field(&b, 1100, inner.data, inner.len);
	CHECK(check(&etcdserverpb__internal_raft_request__descriptor, &b) == -EILSEQ);
	/* Nested proto2: InternalRaftRequest.v2 (2) .Method (2). */
	inner.len = 0;
	put_field(&inner, 2, "PU\0T", 4);
	b.len = 0;
	put_field(&b, 2, inner.data, inner.len);
	CHECK(check(&etcdserverpb__internal_raft_request__descriptor, &b) == -EILSEQ);
}

/* TxnRequest.success (2) -> RequestOp.request_txn (4) -> TxnRequest ... */
static size_t nested_txn(uint8_t *out, size_t cap, unsigned depth, int nul_at_bottom)
{
	struct buf *cur = calloc(1, sizeof(*cur)), *next = calloc(1, sizeof(*next));
	size_t len = 0;

	if (cur == NULL || next == NULL)
		goto out_free;
	/* Innermost: a TxnRequest whose one op is a Put with a key. */
	{
		struct buf put = { .len = 0 }, op = { .len = 0 };

		put_field(&put, 1, nul_at_bottom ? "x\0" : "x", nul_at_bottom ? 2 : 1);
		put_field(&op, 2, put.data, put.len);
		put_field(cur, 2, op.data, op.len);
	}
	for (unsigned i = 0; i < depth; i++) {
		struct buf *t;
		struct buf op = { .len = 0 };

		if (cur->len + 16 > sizeof(op.data))
			goto out_free;
		put_field(&op, 4, cur->data, cur->len);
		next->len = 0;
		put_field(next, 2, op.data, op.len);
		t = cur;
		cur = next;
		next = t;
	}
	if (cur->len <= cap) {
		memcpy(out, cur->data, cur->len);
		len = cur->len;
	}
out_free:
	free(cur);
	free(next);
	return len;
}

static void test_depth(void)
{
	const ProtobufCMessageDescriptor *txn = &etcdserverpb__txn_request__descriptor;
	uint8_t data[4096];
	size_t n;

	/* Keys are bytes, so even with a NUL the shallow one is fine. */
	n = nested_txn(data, sizeof(data), 10, 1);
	CHECK(n > 0 && proto_check_strings(txn, data, n) == 0);
	/* Each level is TxnRequest + RequestOp: 2 * 40 > the limit. */
	n = nested_txn(data, sizeof(data), 40, 0);
	CHECK(n > 0 && proto_check_strings(txn, data, n) == -EBADMSG);
}

static void test_malformed(void)
{
	const ProtobufCMessageDescriptor *d = &etcdserverpb__auth_user_add_request__descriptor;
	static const uint8_t field_zero[] = { 0x02, 0x00 };
	static const uint8_t group_start[] = { 0x0b };
	static const uint8_t wire_type_7[] = { 0x0f, 0x00 };
	static const uint8_t long_varint[] = { 0x08, 0x80, 0x80, 0x80, 0x80, 0x80,
					       0x80, 0x80, 0x80, 0x80, 0x80, 0x01 };
	static const uint8_t short_fixed64[] = { 0x09, 1, 2, 3 };
	static const uint8_t short_len[] = { 0x0a, 0x05, 'a', 'b' };
	static const uint8_t huge_len[] = { 0x0a, 0xff, 0xff, 0xff, 0xff, 0xff,
					    0xff, 0xff, 0xff, 0xff, 0x01 };
	static const uint8_t cut_key[] = { 0x80 };
	static const uint8_t ok_scalars[] = { 0x08, 0x96, 0x01, 0x11, 1, 2, 3, 4, 5, 6, 7, 8,
					      0x1d, 1, 2, 3, 4 };

	CHECK(proto_check_strings(d, field_zero, sizeof(field_zero)) == -EBADMSG);
	CHECK(proto_check_strings(d, group_start, sizeof(group_start)) == -EBADMSG);
	CHECK(proto_check_strings(d, wire_type_7, sizeof(wire_type_7)) == -EBADMSG);
	CHECK(proto_check_strings(d, long_varint, sizeof(long_varint)) == -EBADMSG);
	CHECK(proto_check_strings(d, short_fixed64, sizeof(short_fixed64)) == -EBADMSG);
	CHECK(proto_check_strings(d, short_len, sizeof(short_len)) == -EBADMSG);
	CHECK(proto_check_strings(d, huge_len, sizeof(huge_len)) == -EBADMSG);
	CHECK(proto_check_strings(d, cut_key, sizeof(cut_key)) == -EBADMSG);
	CHECK(proto_check_strings(d, ok_scalars, sizeof(ok_scalars)) == 0);
	CHECK(proto_check_strings(NULL, ok_scalars, sizeof(ok_scalars)) == -EBADMSG);
	CHECK(proto_check_strings(d, NULL, 3) == -EBADMSG);
}

/*
 * Random and mutated input: the result is always one of the documented
 * codes, and bytes that protobuf-c's own decoder accepts are never called
 * malformed (the check refuses only what etcd would refuse too).
 */
static void test_random(unsigned seed)
{
	const ProtobufCMessageDescriptor *d = &etcdserverpb__internal_raft_request__descriptor;
	Etcdserverpb__AuthUserAddRequest add = ETCDSERVERPB__AUTH_USER_ADD_REQUEST__INIT;
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	uint8_t base[256], data[256];
	size_t base_len;
	int accepted = 0;

	srand(seed);
	add.name = "operator";
	add.password = "secret";
	req.auth_user_add = &add;
	base_len = etcdserverpb__internal_raft_request__pack(&req, base);
	for (int iter = 0; iter < 20000 && expect_failures == 0; iter++) {
		ProtobufCMessage *m;
		size_t n = base_len;
		int rc;

		memcpy(data, base, n);
		if (iter % 2 == 0) {
			for (int k = rand() % 4; k >= 0; k--)
				data[rand() % n] = (uint8_t)rand();
		} else {
			n = (size_t)rand() % sizeof(data);
			for (size_t i = 0; i < n; i++)
				data[i] = (uint8_t)rand();
		}
		rc = proto_check_strings(d, data, n);
		CHECK(rc == 0 || rc == -EILSEQ || rc == -EBADMSG);
		m = protobuf_c_message_unpack(d, NULL, n, data);
		if (m != NULL) {
			accepted++;
			CHECK(rc != -EBADMSG);
			protobuf_c_message_free_unpacked(m, NULL);
		}
		if (expect_failures)
			fprintf(stderr, "test_proto_check: seed %u, iteration %d\n", seed, iter);
	}
	/* The mutations must leave many inputs decodable, or this proves little. */
	CHECK(accepted > 1000);
}

int main(void)
{
	const char *env = getenv("CETCD_TEST_SEED");
	unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10)
				    : (unsigned)time(NULL);

	test_strings();
	test_depth();
	test_malformed();
	test_random(seed);
	if (expect_failures) {
		fprintf(stderr, "test_proto_check: %d check(s) failed (seed %u)\n",
			expect_failures, seed);
		return 1;
	}
	printf("test_proto_check: all checks passed (seed %u)\n", seed);
	return 0;
}
