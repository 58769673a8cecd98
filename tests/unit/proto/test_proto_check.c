/*
 * test_proto_check: proto_check_request (proto/check.h) takes and refuses
 * what etcd 3.4's decoder takes and refuses, with etcd's error texts (the
 * expected texts below are what Debian's etcd 3.4 answered to the same
 * bytes), says when protobuf-c needs a canonical copy and makes one that
 * decodes to the same message; proto_check_strings finds a NUL in a
 * string field at any depth, ignores bytes fields and unknown fields,
 * refuses malformed input with -EBADMSG, and survives random input.
 * Seeded; a failure prints its seed (CETCD_TEST_SEED=<n> repeats it).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hex/hex.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "proto/check.h"
#include "../../proto/expect.h"

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
 * malformed unless etcd's decoder refuses them too.
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
			/* protobuf-c takes field numbers gogo calls illegal
			 * (int32 <= 0); etcd refuses those too. */
			CHECK(rc != -EBADMSG ||
			      proto_check_request(d, data, n, NULL, NULL) == -EBADMSG);
			protobuf_c_message_free_unpacked(m, NULL);
		}
		if (expect_failures)
			fprintf(stderr, "test_proto_check: seed %u, iteration %d\n", seed, iter);
	}
	/* The mutations must leave many inputs decodable, or this proves little. */
	CHECK(accepted > 1000);
}

static size_t unhex(const char *h, uint8_t *out)
{
	ssize_t n = hex_decode(h, strlen(h), out);

	CHECK(n >= 0);
	return (size_t)n;
}

/* Bytes, etcd's verdict on them, and whether protobuf-c reads them as is. */
static const struct {
	const ProtobufCMessageDescriptor *desc;
	const char *hex;
	int rc;
	const char *text;   /* on -EBADMSG */
	bool canonical;     /* on 0 */
} requests[] = {
	{ &etcdserverpb__put_request__descriptor, "0a01612001", 0, NULL, true },
	{ &etcdserverpb__put_request__descriptor, "0a0161220100", -EBADMSG,
	  "proto: wrong wireType = 2 for field PrevKv", false },
	{ &etcdserverpb__put_request__descriptor, "0a016121aaaaaaaaaaaaaaaa", -EBADMSG,
	  "proto: wrong wireType = 1 for field PrevKv", false },
	{ &etcdserverpb__put_request__descriptor, "0a01612a0100", -EBADMSG,
	  "proto: wrong wireType = 2 for field IgnoreValue", false },
	{ &etcdserverpb__put_request__descriptor, "0a0161320100", -EBADMSG,
	  "proto: wrong wireType = 2 for field IgnoreLease", false },
	{ &etcdserverpb__put_request__descriptor, "00", -EBADMSG,
	  "proto: PutRequest: illegal tag 0 (wire type 0)", false },
	{ &etcdserverpb__put_request__descriptor, "0a05", -EBADMSG, "unexpected EOF", false },
	{ &etcdserverpb__put_request__descriptor, "0affffffffffffffffff01", -EBADMSG,
	  "proto: negative length found during unmarshaling", false },
	{ &etcdserverpb__put_request__descriptor, "0a80808080808080808080", -EBADMSG,
	  "proto: integer overflow", false },
	{ &etcdserverpb__put_request__descriptor, "0c", -EBADMSG,
	  "proto: PutRequest: wiretype end group for non-group", false },
	{ &etcdserverpb__put_request__descriptor, "0b", -EBADMSG,
	  "proto: wrong wireType = 3 for field Key", false },
	{ &etcdserverpb__put_request__descriptor, "0a01617a01", -EBADMSG, "unexpected EOF", false },
	{ &etcdserverpb__put_request__descriptor, "0a0161a601", -EBADMSG,
	  "proto: illegal wireType 6", false },
	{ &etcdserverpb__range_request__descriptor, "0a0161420100", -EBADMSG,
	  "proto: wrong wireType = 2 for field KeysOnly", false },
	{ &etcdserverpb__compaction_request__descriptor, "0801120100", -EBADMSG,
	  "proto: wrong wireType = 2 for field Physical", false },
	{ &etcdserverpb__delete_range_request__descriptor, "0a0161190000000000000000", -EBADMSG,
	  "proto: wrong wireType = 1 for field PrevKv", false },
	{ &etcdserverpb__txn_request__descriptor, "0a020000", -EBADMSG,
	  "proto: Compare: illegal tag 0 (wire type 0)", false },
	{ &etcdserverpb__txn_request__descriptor, "12040a020000", -EBADMSG,
	  "proto: RangeRequest: illegal tag 0 (wire type 0)", false },
	{ &etcdserverpb__txn_request__descriptor, "0a0422012a00", -EBADMSG,
	  "proto: wrong wireType = 2 for field Version", false },
	{ &etcdserverpb__txn_request__descriptor, "1a021a00", 0, NULL, true },
	/* Unknown fields are skipped, groups included; protobuf-c needs a copy. */
	{ &etcdserverpb__compaction_request__descriptor, "0801220100", 0, NULL, false },
	{ &etcdserverpb__put_request__descriptor, "0a01619b01080110029c01", 0, NULL, false },
	{ &etcdserverpb__member_list_request__descriptor, "0b0c", 0, NULL, false },
	/* Field 2^32 + 4 is PrevKv to gogo. */
	{ &etcdserverpb__put_request__descriptor, "a0808080800101", 0, NULL, false },
	{ &etcdserverpb__put_request__descriptor, "0a8100", -EBADMSG, "unexpected EOF", false },
	{ &etcdserverpb__put_request__descriptor, "0a810061", 0, NULL, false },
};

static void test_request(void)
{
	uint8_t in[64], out[512], again[512];
	char text[PROTO_CHECK_TEXT_MAX];

	for (size_t i = 0; i < sizeof(requests) / sizeof(requests[0]); i++) {
		const ProtobufCMessageDescriptor *d = requests[i].desc;
		size_t n = unhex(requests[i].hex, in), on, an;
		bool canonical = !requests[i].canonical;
		int rc = proto_check_request(d, in, n, text, &canonical);

		CHECK(rc == requests[i].rc);
		if (rc != requests[i].rc || rc != 0) {
			if (requests[i].text && strcmp(text, requests[i].text) != 0) {
				fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i, text,
					requests[i].text);
				expect_failures++;
			}
			continue;
		}
		CHECK(canonical == requests[i].canonical);
		/* The copy decodes, and to what etcd decodes: same re-encoding
		 * whether or not the copy was needed. */
		CHECK(proto_check_canonicalize(d, in, n, out, &on) == 0);
		CHECK(proto_check_request(d, out, on, NULL, NULL) == 0);
		ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, on, out);
		CHECK(m != NULL);
		if (m != NULL) {
			an = protobuf_c_message_pack(m, again);
			protobuf_c_message_free_unpacked(m, NULL);
			m = canonical ? protobuf_c_message_unpack(d, NULL, n, in) : NULL;
			if (m != NULL) {
				CHECK(protobuf_c_message_get_packed_size(m) == an);
				protobuf_c_message_free_unpacked(m, NULL);
			}
		}
	}
	/* The field 2^32 + 4 copy is a PutRequest with prev_kv set, as etcd reads it. */
	size_t n = unhex("a0808080800101", in), on;
	CHECK(proto_check_canonicalize(&etcdserverpb__put_request__descriptor, in, n, out, &on) == 0);
	Etcdserverpb__PutRequest *put = etcdserverpb__put_request__unpack(NULL, on, out);
	CHECK(put != NULL && put->prev_kv);
	if (put)
		etcdserverpb__put_request__free_unpacked(put, NULL);
	/* A refused message is not copied. */
	n = unhex("0a0161220100", in);
	CHECK(proto_check_canonicalize(&etcdserverpb__put_request__descriptor, in, n, out, &on) ==
	      -EBADMSG);

	/* Deeper than PROTO_CHECK_MAX_DEPTH: refused, with a text. */
	uint8_t deep[4096];
	n = nested_txn(deep, sizeof(deep), 40, 0);
	CHECK(n > 0 && proto_check_request(&etcdserverpb__txn_request__descriptor, deep, n, text,
					   NULL) == -ELOOP && text[0] != '\0');
	/* A NUL in a string: etcd takes it, cetcd refuses it. */
	struct buf b = { .len = 0 };
	put_field(&b, 1, "ro\0t", 4);
	CHECK(proto_check_request(&etcdserverpb__auth_user_add_request__descriptor, b.data, b.len,
				  text, NULL) == -EILSEQ);
	CHECK(proto_check_request(NULL, b.data, b.len, text, NULL) == -EINVAL);
}

int main(void)
{
	const char *env = getenv("CETCD_TEST_SEED");
	unsigned seed = env != NULL ? (unsigned)strtoul(env, NULL, 10)
				    : (unsigned)time(NULL);

	test_strings();
	test_request();
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
