/*
 * test_json: proto/json.c, messages as etcd's JSON gateway writes and
 * reads them. The expected texts are what grpc-gateway's JSONPb (OrigName,
 * no EmitDefaults) writes for the same values: names as the .proto spells
 * them, defaults left out, 64-bit integers quoted, bytes in base64, enums
 * by name. Every scalar type goes through a message type made here
 * (etcd's own files use only some of them); inputs are decoded to wire
 * bytes, unpacked by protobuf-c and written again. The reader of flat
 * objects (proto_json_object_each, for the JWT's header and claims) and
 * the base64 decoder are checked on their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "proto/json.h"
#include "../../proto/expect.h"

/* ---- a message with one field of every scalar type ---- */

struct scalars {
	ProtobufCMessage base;
	int32_t i32;
	int32_t s32;
	int32_t sf32;
	uint32_t u32;
	uint32_t f32;
	int64_t i64;
	int64_t s64;
	int64_t sf64;
	uint64_t u64;
	uint64_t f64;
	protobuf_c_boolean b;
	char *str;
	ProtobufCBinaryData by;
	int en;
	double dbl;
	float flt;
	size_t n_rep;
	int64_t *rep;
	size_t n_sub;
	Etcdserverpb__Member **sub;
};

#define SF(id_, name_, type_, fld)                                                        \
	{ name_, id_, PROTOBUF_C_LABEL_NONE, type_, 0, offsetof(struct scalars, fld), NULL, \
	  NULL, 0, 0, NULL, NULL }

static const ProtobufCFieldDescriptor scalars_fields[] = {
	SF(1, "i32", PROTOBUF_C_TYPE_INT32, i32),
	SF(2, "s32", PROTOBUF_C_TYPE_SINT32, s32),
	SF(3, "sf32", PROTOBUF_C_TYPE_SFIXED32, sf32),
	SF(4, "u32", PROTOBUF_C_TYPE_UINT32, u32),
	SF(5, "f32", PROTOBUF_C_TYPE_FIXED32, f32),
	SF(6, "i64", PROTOBUF_C_TYPE_INT64, i64),
	SF(7, "s64", PROTOBUF_C_TYPE_SINT64, s64),
	SF(8, "sf64", PROTOBUF_C_TYPE_SFIXED64, sf64),
	SF(9, "u64", PROTOBUF_C_TYPE_UINT64, u64),
	SF(10, "f64", PROTOBUF_C_TYPE_FIXED64, f64),
	SF(11, "b", PROTOBUF_C_TYPE_BOOL, b),
	{ "str", 12, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_STRING, 0,
	  offsetof(struct scalars, str), NULL, &protobuf_c_empty_string, 0, 0, NULL, NULL },
	SF(13, "by", PROTOBUF_C_TYPE_BYTES, by),
	{ "en", 14, PROTOBUF_C_LABEL_NONE, PROTOBUF_C_TYPE_ENUM, 0, offsetof(struct scalars, en),
	  &etcdserverpb__range_request__sort_order__descriptor, NULL, 0, 0, NULL, NULL },
	SF(15, "dbl", PROTOBUF_C_TYPE_DOUBLE, dbl),
	SF(16, "flt", PROTOBUF_C_TYPE_FLOAT, flt),
	{ "rep_int", 17, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_INT64,
	  offsetof(struct scalars, n_rep), offsetof(struct scalars, rep), NULL, NULL, 0,
	  PROTOBUF_C_FIELD_FLAG_PACKED, NULL, NULL },
	{ "sub_members", 18, PROTOBUF_C_LABEL_REPEATED, PROTOBUF_C_TYPE_MESSAGE,
	  offsetof(struct scalars, n_sub), offsetof(struct scalars, sub),
	  &etcdserverpb__member__descriptor, NULL, 0, 0, NULL, NULL },
};
static const unsigned scalars_by_name[] = { 10, 12, 14, 13, 4, 9, 15, 0, 5, 16, 1, 6, 2, 7,
					    11, 17, 3, 8 };
static const ProtobufCIntRange scalars_ranges[] = { { 1, 0 }, { 0, 18 } };
static const ProtobufCMessageDescriptor scalars_desc;
static void scalars_init(ProtobufCMessage *m)
{
	struct scalars *s = (struct scalars *)m;
	memset(s, 0, sizeof(*s));
	s->base.descriptor = &scalars_desc;
	s->str = (char *)protobuf_c_empty_string;
}
static const ProtobufCMessageDescriptor scalars_desc = {
	PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC, "test.Scalars", "Scalars", "Test__Scalars", "test",
	sizeof(struct scalars), 18, scalars_fields, scalars_by_name, 1, scalars_ranges,
	scalars_init, NULL, NULL, NULL
};

/* ---- helpers ---- */

/* JSON text → wire → unpacked → JSON text: the text written, or NULL if
 * the decode failed (rc gets its code, err its text). */
static char *roundtrip(const ProtobufCMessageDescriptor *d, const char *in, int *rc,
		       struct proto_json_err *err)
{
	struct proto_json_buf wire = { 0 }, out = { 0 };
	size_t used = 0;

	*rc = proto_json_decode(d, in, strlen(in), &used, &wire, err);
	if (*rc) {
		proto_json_buf_free(&wire);
		return NULL;
	}
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, wire.len, wire.data);
	proto_json_buf_free(&wire);
	if (!m) {
		*rc = -EBADMSG;
		return NULL;
	}
	CHECK(proto_json_encode(m, &out) == 0);
	protobuf_c_message_free_unpacked(m, NULL);
	CHECK(proto_json_buf_append(&out, "", 1) == 0);
	return (char *)out.data;
}

static void expect_roundtrip(const ProtobufCMessageDescriptor *d, const char *in,
			     const char *want)
{
	struct proto_json_err err;
	int rc;
	char *got = roundtrip(d, in, &rc, &err);

	if (!got || strcmp(got, want) != 0) {
		fprintf(stderr, "roundtrip of %s\n  got  %s (rc %d %s)\n  want %s\n", in,
			got ? got : "(none)", rc, err.text, want);
		expect_failures++;
	}
	free(got);
}

static void expect_error(const ProtobufCMessageDescriptor *d, const char *in, int want_rc,
			 const char *want_text)
{
	struct proto_json_buf wire = { 0 };
	struct proto_json_err err;
	size_t used;
	int rc = proto_json_decode(d, in, strlen(in), &used, &wire, &err);

	if (rc != want_rc || (want_text && !strstr(err.text, want_text))) {
		fprintf(stderr, "decode of %s: rc %d \"%s\", want %d \"%s\"\n", in, rc, err.text,
			want_rc, want_text ? want_text : "");
		expect_failures++;
	}
	proto_json_buf_free(&wire);
}

static char *encode(const ProtobufCMessage *m)
{
	struct proto_json_buf out = { 0 };
	CHECK(proto_json_encode(m, &out) == 0);
	CHECK(proto_json_buf_append(&out, "", 1) == 0);
	return (char *)out.data;
}

static void expect_encode(const ProtobufCMessage *m, const char *want)
{
	char *got = encode(m);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "encode\n  got  %s\n  want %s\n", got, want);
		expect_failures++;
	}
	free(got);
}

/* ---- tests ---- */

static void test_scalars(void)
{
	/* every type at a value away from its default */
	expect_roundtrip(&scalars_desc,
			 "{\"i32\":-5,\"s32\":-6,\"sf32\":-7,\"u32\":4000000000,\"f32\":9,"
			 "\"i64\":\"-9223372036854775808\",\"s64\":\"-2\",\"sf64\":\"-3\","
			 "\"u64\":\"18446744073709551615\",\"f64\":\"10\",\"b\":true,"
			 "\"str\":\"h\\u00e9\",\"by\":\"AAEC/w==\",\"en\":\"DESCEND\","
			 "\"dbl\":0.5,\"flt\":2,\"rep_int\":[\"1\",2,\"-3\"],"
			 "\"sub_members\":[{\"ID\":\"7\",\"name\":\"a\"},{}]}",
			 "{\"i32\":-5,\"s32\":-6,\"sf32\":-7,\"u32\":4000000000,\"f32\":9,"
			 "\"i64\":\"-9223372036854775808\",\"s64\":\"-2\",\"sf64\":\"-3\","
			 "\"u64\":\"18446744073709551615\",\"f64\":\"10\",\"b\":true,"
			 "\"str\":\"h\xc3\xa9\",\"by\":\"AAEC/w==\",\"en\":\"DESCEND\","
			 "\"dbl\":0.5,\"flt\":2,\"rep_int\":[\"1\",\"2\",\"-3\"],"
			 "\"sub_members\":[{\"ID\":\"7\",\"name\":\"a\"},{}]}");
	/* defaults are left out, whatever way they came */
	expect_roundtrip(&scalars_desc,
			 "{\"i32\":0,\"i64\":\"0\",\"b\":false,\"str\":\"\",\"by\":\"\","
			 "\"en\":\"NONE\",\"rep_int\":[],\"u64\":null}",
			 "{}");
	expect_roundtrip(&scalars_desc, "null", "{}");
	expect_roundtrip(&scalars_desc, "  {}  ", "{}");
	/* integers as numbers or strings, at their limits */
	expect_roundtrip(&scalars_desc, "{\"i32\":\"2147483647\",\"u32\":\"4294967295\"}",
			 "{\"i32\":2147483647,\"u32\":4294967295}");
	expect_roundtrip(&scalars_desc, "{\"i32\":-2147483648,\"i64\":9223372036854775807}",
			 "{\"i32\":-2147483648,\"i64\":\"9223372036854775807\"}");
	/* enums by number; a number without a name is written bare */
	expect_roundtrip(&scalars_desc, "{\"en\":1}", "{\"en\":\"ASCEND\"}");
	expect_roundtrip(&scalars_desc, "{\"en\":42}", "{\"en\":42}");
	/* bytes: URL-safe and unpadded base64 are read too */
	expect_roundtrip(&scalars_desc, "{\"by\":\"AAEC_w\"}", "{\"by\":\"AAEC/w==\"}");
	expect_roundtrip(&scalars_desc, "{\"by\":\"-_8\"}", "{\"by\":\"+/8=\"}");
}

static void test_names(void)
{
	/* lowerCamelCase names are read; the .proto name wins over it; the
	 * last of a repeated key wins; unknown keys are skipped */
	expect_roundtrip(&etcdserverpb__range_request__descriptor,
			 "{\"key\":\"YQ==\",\"rangeEnd\":\"Yg==\",\"countOnly\":true}",
			 "{\"key\":\"YQ==\",\"range_end\":\"Yg==\",\"count_only\":true}");
	expect_roundtrip(&etcdserverpb__range_request__descriptor,
			 "{\"range_end\":\"Yg==\",\"rangeEnd\":\"Yw==\"}",
			 "{\"range_end\":\"Yg==\"}");
	expect_roundtrip(&etcdserverpb__range_request__descriptor,
			 "{\"limit\":1,\"limit\":\"2\",\"nope\":{\"x\":[1,{\"y\":null}]},\"z\":1}",
			 "{\"limit\":\"2\"}");
	expect_roundtrip(&etcdserverpb__range_request__descriptor,
			 "{\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\"}",
			 "{\"sort_order\":\"DESCEND\",\"sort_target\":\"MOD\"}");
	/* an escaped key is compared by its text */
	expect_roundtrip(&etcdserverpb__range_request__descriptor, "{\"k\\u0065y\":\"YQ==\"}",
			 "{\"key\":\"YQ==\"}");
	/* etcd's mixed-case names stay as they are */
	expect_roundtrip(&etcdserverpb__member__descriptor,
			 "{\"ID\":\"12\",\"peerURLs\":[\"http://a:1\",\"http://b:2\"],\"isLearner\":true}",
			 "{\"ID\":\"12\",\"peerURLs\":[\"http://a:1\",\"http://b:2\"],\"isLearner\":true}");
}

static void test_nested(void)
{
	/* oneofs: the chosen member is written even at its default */
	expect_roundtrip(&etcdserverpb__txn_request__descriptor,
			 "{\"compare\":[{\"key\":\"Zm9v\",\"version\":\"0\"},"
			 "{\"target\":\"VALUE\",\"result\":\"GREATER\",\"key\":\"YQ==\",\"value\":\"\"}],"
			 "\"success\":[{\"request_put\":{\"key\":\"Zm9v\",\"value\":\"YmFy\"}},"
			 "{\"request_range\":{}}],"
			 "\"failure\":[{\"requestTxn\":{\"success\":[{\"request_delete_range\":"
			 "{\"key\":\"YQ==\",\"prev_kv\":true}}]}}]}",
			 "{\"compare\":[{\"key\":\"Zm9v\",\"version\":\"0\"},"
			 "{\"result\":\"GREATER\",\"target\":\"VALUE\",\"key\":\"YQ==\",\"value\":\"\"}],"
			 "\"success\":[{\"request_put\":{\"key\":\"Zm9v\",\"value\":\"YmFy\"}},"
			 "{\"request_range\":{}}],"
			 "\"failure\":[{\"request_txn\":{\"success\":[{\"request_delete_range\":"
			 "{\"key\":\"YQ==\",\"prev_kv\":true}}]}}]}");
	/* a message written from C values: what etcd's gateway answers */
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	Mvccpb__KeyValue kv = MVCCPB__KEY_VALUE__INIT, *kvs[] = { &kv };
	Etcdserverpb__RangeResponse r = ETCDSERVERPB__RANGE_RESPONSE__INIT;
	h.cluster_id = 14841639068965178418ull;
	h.member_id = 10276657743932975437ull;
	h.revision = 2;
	h.raft_term = 2;
	kv.key = (ProtobufCBinaryData){ 3, (uint8_t *)"foo" };
	kv.value = (ProtobufCBinaryData){ 3, (uint8_t *)"bar" };
	kv.create_revision = kv.mod_revision = 2;
	kv.version = 1;
	r.header = &h;
	r.n_kvs = 1;
	r.kvs = kvs;
	r.count = 1;
	expect_encode(&r.base,
		      "{\"header\":{\"cluster_id\":\"14841639068965178418\",\"member_id\":"
		      "\"10276657743932975437\",\"revision\":\"2\",\"raft_term\":\"2\"},"
		      "\"kvs\":[{\"key\":\"Zm9v\",\"create_revision\":\"2\",\"mod_revision\":\"2\","
		      "\"version\":\"1\",\"value\":\"YmFy\"}],\"count\":\"1\"}");
	/* strings escaped as Go escapes them */
	Etcdserverpb__Member m = ETCDSERVERPB__MEMBER__INIT;
	m.name = "a<b>&\"c\\\n\t\x01\xff\xe2\x80\xa8z";
	expect_encode(&m.base,
		      "{\"name\":\"a\\u003cb\\u003e\\u0026\\\"c\\\\\\n\\t\\u0001\\ufffd\\u2028z\"}");
}

static void test_stream(void)
{
	/* several values one after another: each decode takes one */
	const char *in = " {\"key\":\"YQ==\"}\n{\"limit\":3}  ";
	struct proto_json_buf wire = { 0 };
	struct proto_json_err err;
	size_t used, off = 0;

	CHECK(proto_json_decode(&etcdserverpb__range_request__descriptor, in, strlen(in), &used,
				&wire, &err) == 0);
	off += used;
	CHECK(in[off - 1] == '}' && in[off] == '\n');
	CHECK(proto_json_decode(&etcdserverpb__range_request__descriptor, in + off,
				strlen(in) - off, &used, &wire, &err) == 0);
	off += used;
	CHECK(proto_json_decode(&etcdserverpb__range_request__descriptor, in + off,
				strlen(in) - off, &used, &wire, &err) == -ENODATA);
	Etcdserverpb__RangeRequest *rr =
		etcdserverpb__range_request__unpack(NULL, wire.len, wire.data);
	CHECK(rr && rr->key.len == 1 && rr->limit == 3); /* two encodings, merged */
	if (rr)
		etcdserverpb__range_request__free_unpacked(rr, NULL);
	proto_json_buf_free(&wire);
}

static void test_errors(void)
{
	const ProtobufCMessageDescriptor *rd = &etcdserverpb__range_request__descriptor;
	const ProtobufCMessageDescriptor *sd = &scalars_desc;
	const ProtobufCMessageDescriptor *td = &etcdserverpb__txn_request__descriptor;
	const struct {
		const ProtobufCMessageDescriptor *d;
		const char *in;
		int rc;
		const char *text;
	} cases[] = {
		{ rd, "", -ENODATA, NULL },
		{ rd, " \n\t", -ENODATA, NULL },
		/* cut short: more input could complete it */
		{ rd, "{", -EAGAIN, "unexpected EOF" },
		{ rd, "{\"key\":\"YQ", -EAGAIN, "unexpected EOF" },
		{ rd, "{\"limit\":12", -EAGAIN, "unexpected EOF" },
		{ rd, "{\"key\":tru", -EAGAIN, "unexpected EOF" },
		/* malformed JSON, with Go's texts */
		{ rd, "{bad}", -EINVAL, "invalid character 'b' looking for beginning of object key string" },
		{ rd, "{\"key\" 1}", -EINVAL, "invalid character '1' after object key" },
		{ rd, "{\"key\":1 2}", -EINVAL, "invalid character '2' after object key:value pair" },
		{ rd, "[1 2]", -EINVAL, "invalid character '2' after array element" },
		{ rd, "x", -EINVAL, "invalid character 'x' looking for beginning of value" },
		{ rd, "{\"key\":\"a\x01\"}", -EINVAL, "in string literal" },
		{ rd, "{\"key\":\"\\q\"}", -EINVAL, "in string escape code" },
		{ rd, "{\"key\":\"\\u12g4\"}", -EINVAL, "hexadecimal character escape" },
		{ rd, "{\"limit\":01}", -EINVAL, "after object key:value pair" },
		{ rd, "{\"limit\":1.}", -EINVAL, "after decimal point" },
		{ rd, "{\"limit\":-}", -EINVAL, "in numeric literal" },
		{ rd, "{\"key\":nul }", -EINVAL, "in literal null" },
		/* well-formed, but not a RangeRequest */
		{ rd, "[]", -EINVAL, "cannot unmarshal array into Go value of type map" },
		{ rd, "\"s\"", -EINVAL, "cannot unmarshal string" },
		{ rd, "7", -EINVAL, "cannot unmarshal number" },
		{ rd, "{\"limit\":1.5}", -EINVAL, "cannot unmarshal number 1.5 into Go value of type int64" },
		{ rd, "{\"limit\":\"1e3\"}", -EINVAL, "cannot unmarshal number 1e3" },
		{ rd, "{\"limit\":\"x\"}", -EINVAL, "cannot unmarshal number x" },
		{ rd, "{\"limit\":9223372036854775808}", -EINVAL, "cannot unmarshal number" },
		{ rd, "{\"limit\":true}", -EINVAL, "cannot unmarshal bool into Go value of type int64" },
		{ rd, "{\"serializable\":\"true\"}", -EINVAL, "cannot unmarshal string into Go value of type bool" },
		{ rd, "{\"key\":5}", -EINVAL, "cannot unmarshal number into Go value of type []uint8" },
		{ rd, "{\"key\":\"a*b=\"}", -EINVAL, "illegal base64 data" },
		{ rd, "{\"key\":\"abcde\"}", -EINVAL, "illegal base64 data" },
		{ rd, "{\"sort_order\":\"SIDEWAYS\"}", -EINVAL, "unknown value \"SIDEWAYS\" for enum etcdserverpb.RangeRequest_SortOrder" },
		{ sd, "{\"u64\":\"-1\"}", -EINVAL, "type uint64" },
		{ sd, "{\"i32\":2147483648}", -EINVAL, "type int32" },
		{ sd, "{\"u32\":4294967296}", -EINVAL, "type uint32" },
		{ sd, "{\"rep_int\":5}", -EINVAL, "cannot unmarshal number into Go value of type []int64" },
		{ td, "{\"compare\":[5]}", -EINVAL, "cannot unmarshal number into Go value of type map" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_error(cases[i].d, cases[i].in, cases[i].rc, cases[i].text);

	/* nesting past the bound is refused, not recursed into */
	char deep[4 * PROTO_JSON_MAX_DEPTH + 64];
	size_t n = 0;
	n += (size_t)sprintf(deep + n, "{\"x\":");
	for (int i = 0; i < PROTO_JSON_MAX_DEPTH + 1; i++)
		deep[n++] = '[';
	deep[n] = 0;
	expect_error(rd, deep, -EINVAL, "exceeded max depth");
	/* TxnRequest nests itself: the message depth is bounded too */
	char txn[64 * (PROTO_JSON_MAX_DEPTH + 2)];
	n = 0;
	for (int i = 0; i < PROTO_JSON_MAX_DEPTH / 2 + 2; i++)
		n += (size_t)sprintf(txn + n, "{\"success\":[{\"request_txn\":");
	n += (size_t)sprintf(txn + n, "{}");
	for (int i = 0; i < PROTO_JSON_MAX_DEPTH / 2 + 2; i++)
		n += (size_t)sprintf(txn + n, "}]}");
	expect_error(&etcdserverpb__txn_request__descriptor, txn, -EINVAL, "exceeded max depth");
}

/* ---- proto_json_object_each and proto_json_base64_decode ---- */

struct members {
	char text[512]; /* "key=kind:value;" for each member */
	int stop_at;    /* the member whose callback answers -ECANCELED; 0: none */
	int seen;
};

static int collect(void *arg, const struct proto_json_member *m)
{
	struct members *ms = arg;
	size_t n = strlen(ms->text);

	snprintf(ms->text + n, sizeof(ms->text) - n, "%.*s=%d:%.*s;", (int)m->key_len, m->key,
		 (int)m->kind, (int)m->value_len, m->value);
	return ++ms->seen == ms->stop_at ? -ECANCELED : 0;
}

/* An allocator that counts what is not freed yet. */
static long each_live;

static void *each_alloc(void *data, size_t size)
{
	(void)data;
	void *p = malloc(size);
	if (p)
		each_live++;
	return p;
}

static void each_free(void *data, void *p)
{
	(void)data;
	if (p)
		each_live--;
	free(p);
}

static void test_object_each(void)
{
	ProtobufCAllocator counting = { .alloc = each_alloc, .free = each_free };
	static const struct {
		const char *in;
		int rc;
		const char *text; /* members, or the error */
	} cases[] = {
		{ " {\"a\":\"x\\u00e9\\n\", \"b\" : -1.5e3,\"c\":true,\"d\":null,"
		  "\"e\":{\"f\":[1,{}]},\"g\":[],\"a\":\"y\"} ", 0,
		  "a=0:x\xc3\xa9\n;b=1:-1.5e3;c=2:true;d=3:null;e=4:{\"f\":[1,{}]};g=5:[];a=0:y;" },
		{ "{}", 0, "" },
		{ "{\"\\ud800\":\"\"}", 0, "\xef\xbf\xbd=0:;" },
		{ "[1]", -EINVAL,
		  "json: cannot unmarshal array into Go value of type map[string]interface {}" },
		{ "7", -EINVAL,
		  "json: cannot unmarshal number into Go value of type map[string]interface {}" },
		{ "{\"a\":1} x", -EINVAL, "invalid character 'x' after top-level value" },
		{ "{\"a\":1,}", -EINVAL, "invalid character '}' looking for beginning of object key string" },
		{ "{\"a\" 1}", -EINVAL, "invalid character '1' after object key" },
		{ "{\"a\":01}", -EINVAL, "invalid character '1' after object key:value pair" },
		{ "{\"a\":1", -EAGAIN, "unexpected EOF" },
		{ "{\"a\":1,", -EAGAIN, "unexpected EOF" },
		{ "{\"ab\":\"xy\", ", -EAGAIN, "unexpected EOF" },
		{ "{\"a\":\"x", -EAGAIN, "unexpected EOF" },
		{ "", -EAGAIN, "unexpected EOF" },
	};
	struct proto_json_err err;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct members ms = { .text = "" };
		int rc = proto_json_object_each(cases[i].in, strlen(cases[i].in), collect, &ms,
						&counting, &err);
		CHECK(rc == cases[i].rc);
		CHECK(each_live == 0); /* the key's and value's buffers, whatever the end */
		CHECK(strcmp(rc ? err.text : ms.text, cases[i].text) == 0);
		if (rc != cases[i].rc || strcmp(rc ? err.text : ms.text, cases[i].text))
			fprintf(stderr, "case %zu: %d %s\n", i, rc, rc ? err.text : ms.text);
	}
	/* nesting beyond PROTO_JSON_MAX_DEPTH is refused, not recursed into */
	char deep[2 * PROTO_JSON_MAX_DEPTH + 16];
	size_t n = (size_t)snprintf(deep, sizeof(deep), "{\"a\":");
	for (int d = 0; d < PROTO_JSON_MAX_DEPTH; d++)
		deep[n++] = '[';
	for (int d = 0; d < PROTO_JSON_MAX_DEPTH; d++)
		deep[n++] = ']';
	deep[n++] = '}';
	struct members ms = { .text = "" };
	CHECK(proto_json_object_each(deep, n, collect, &ms, NULL, &err) == -EINVAL);
	CHECK(strcmp(err.text, "exceeded max depth") == 0);
	/* the callback's answer stops the walk */
	ms = (struct members){ .text = "", .stop_at = 2 };
	CHECK(proto_json_object_each("{\"a\":1,\"b\":2,\"c\":3}", 19, collect, &ms, NULL, &err) ==
	      -ECANCELED);
	CHECK(ms.seen == 2);
}

static void test_base64(void)
{
	static const struct {
		const char *in, *out;
		int rc;
		size_t bad;
	} cases[] = {
		{ "", "", 0, 0 }, { "YQ", "a", 0, 0 }, { "YQ==", "a", 0, 0 }, { "YWI", "ab", 0, 0 },
		{ "YWJj", "abc", 0, 0 }, { "-_8", "\xfb\xff", 0, 0 }, { "+/8", "\xfb\xff", 0, 0 },
		{ "Y", NULL, -EINVAL, 0 }, { "YW!j", NULL, -EINVAL, 2 }, { "YQ=a", NULL, -EINVAL, 2 },
	};
	uint8_t out[16];
	size_t len, bad;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bad = 99;
		int rc = proto_json_base64_decode(cases[i].in, strlen(cases[i].in), out, &len, &bad);
		CHECK(rc == cases[i].rc);
		if (rc == 0)
			CHECK(len == strlen(cases[i].out) && memcmp(out, cases[i].out, len) == 0);
		else
			CHECK(bad == cases[i].bad);
	}
}

int main(void)
{
	test_object_each();
	test_base64();
	test_scalars();
	test_names();
	test_nested();
	test_stream();
	test_errors();
	if (expect_failures)
		fprintf(stderr, "%d checks failed\n", expect_failures);
	return expect_failures ? 1 : 0;
}
