/*
 * Unit tests for stored/apply.c: committed entry bytes in, the store
 * changed and the response bytes out. Put, DeleteRange, Txn, Compaction
 * and Range entries give etcd's response messages with the full header
 * (cluster and member ids, revision, the entry's term); refused requests
 * give etcd's code and text and change nothing; entries that are not
 * requests (empty, configuration changes, kinds not applied yet, bytes that
 * do not decode) still move the consistent index; another member's
 * request is applied but not answered; a replayed index is refused.
 */
#include "stored_util.h"

#include "raftpb/raft.pb-c.h"
#include "stored/alloc.h"
#include "stored/apply.h"
#include "stored/mvcc/mvcc.h"

static const struct stored_apply_ids ids = { .member_id = TST_MEMBER, .cluster_id = TST_CLUSTER };

static char dir[256]; /* every fixture's db lives here, one at a time */

/* Applies data (a normal entry at the next index, term 7). */
static int fx_apply(struct tst_store *f, const struct tbuf *data, struct stored_apply_result *out)
{
	struct msg_committed e = {
		.index = ++f->index, .term = 7, .entry_type = RAFTPB__ENTRY_TYPE__EntryNormal,
		.data_len = (uint32_t)data->len,
	};
	return stored_apply_entry(f->s, &ids, &e, data->p, &f->a, out);
}

static uint64_t fx_consistent_index(struct tst_store *f)
{
	struct mvcc_state st;
	mvcc_store_state(f->s, &st);
	return st.consistent_index;
}

static int64_t fx_rev(struct tst_store *f)
{
	struct mvcc_state st;
	mvcc_store_state(f->s, &st);
	return st.rev;
}

/* Fails unless the result's body is exactly m packed. */
static void check_body(const struct stored_apply_result *r, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *want = malloc(n + 1);

	CHECK(want != NULL);
	protobuf_c_message_pack(m, want);
	CHECK_EQ(r->status, 0);
	CHECK_EQ(r->body_len, n);
	CHECK(memcmp(r->body, want, n) == 0);
	free(want);
}

static void check_error(const struct stored_apply_result *r, int32_t code, const char *text)
{
	CHECK(r->deliver);
	CHECK_EQ(r->status, code);
	CHECK_EQ(r->body_len, strlen(text));
	CHECK(memcmp(r->body, text, r->body_len) == 0);
}

static void header(Etcdserverpb__ResponseHeader *h, int64_t rev)
{
	etcdserverpb__response_header__init(h);
	h->cluster_id = TST_CLUSTER;
	h->member_id = TST_MEMBER;
	h->revision = rev;
	h->raft_term = 7;
}

static void test_put_delete(void)
{
	struct tst_store f;
	struct tbuf d = { 0 };
	struct stored_apply_result r;
	struct msg_origin o = tst_origin(2, 5, 42);
	Etcdserverpb__ResponseHeader h;

	tst_store_open(&f, dir);
	tst_put("a", "1", &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(r.deliver);
	CHECK(!r.after_compaction);
	CHECK_EQ(r.index, 1);
	CHECK_EQ(r.term, 7);
	CHECK_EQ(r.revision, 2);
	CHECK(memcmp(&r.origin, &o, sizeof(o)) == 0);
	{
		Etcdserverpb__PutResponse want = ETCDSERVERPB__PUT_RESPONSE__INIT;
		header(&h, 2);
		want.header = &h;
		check_body(&r, &want.base);
	}

	/* a Put with prev_kv: the previous KeyValue comes back */
	{
		Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
		Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
		Etcdserverpb__PutResponse want = ETCDSERVERPB__PUT_RESPONSE__INIT;
		Mvccpb__KeyValue prev = MVCCPB__KEY_VALUE__INIT;

		put.key = tb("a");
		put.value = tb("2");
		put.prev_kv = true;
		req.put = &put;
		tst_entry(&req, &o, &d);
		CHECK_EQ(fx_apply(&f, &d, &r), 0);
		prev.key = tb("a");
		prev.value = tb("1");
		prev.create_revision = 2;
		prev.mod_revision = 2;
		prev.version = 1;
		header(&h, 3);
		want.header = &h;
		want.prev_kv = &prev;
		check_body(&r, &want.base);
		CHECK_EQ(r.revision, 3);
	}

	tst_put("ab", "x", &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK_EQ(r.revision, 4);

	/* DeleteRange of the prefix "a" with prev_kv */
	tst_delete("a", "b", true, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK_EQ(r.revision, 5);
	{
		Etcdserverpb__DeleteRangeResponse *got =
			etcdserverpb__delete_range_response__unpack(NULL, r.body_len, r.body);
		CHECK(got != NULL);
		CHECK_EQ(got->deleted, 2);
		CHECK_EQ(got->n_prev_kvs, 2);
		CHECK(got->prev_kvs[0]->key.len == 1 && got->prev_kvs[0]->key.data[0] == 'a');
		CHECK(got->prev_kvs[0]->value.len == 1 && got->prev_kvs[0]->value.data[0] == '2');
		CHECK(got->prev_kvs[1]->key.len == 2);
		CHECK(got->header != NULL);
		CHECK_EQ(got->header->revision, 5);
		CHECK_EQ(got->header->cluster_id, TST_CLUSTER);
		CHECK_EQ(got->header->member_id, TST_MEMBER);
		CHECK_EQ(got->header->raft_term, 7);
		etcdserverpb__delete_range_response__free_unpacked(got, NULL);
	}

	/* deleting nothing: no new revision, deleted 0 */
	tst_delete("zzz", NULL, false, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	{
		Etcdserverpb__DeleteRangeResponse want = ETCDSERVERPB__DELETE_RANGE_RESPONSE__INIT;
		header(&h, 5);
		want.header = &h;
		check_body(&r, &want.base);
	}
	CHECK_EQ(fx_consistent_index(&f), 5);
	tbuf_free(&d);
	tst_store_close(&f);
}

static void test_txn(void)
{
	struct tst_store f;
	struct tbuf d = { 0 };
	struct stored_apply_result r;
	struct msg_origin o = tst_origin(1, 3, 9);
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__TxnRequest txn = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__Compare cmp = ETCDSERVERPB__COMPARE__INIT, *cmps[1] = { &cmp };
	Etcdserverpb__RequestOp op1 = ETCDSERVERPB__REQUEST_OP__INIT;
	Etcdserverpb__RequestOp op2 = ETCDSERVERPB__REQUEST_OP__INIT;
	Etcdserverpb__RequestOp *ops[2] = { &op1, &op2 };
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest rng = ETCDSERVERPB__RANGE_REQUEST__INIT;

	tst_store_open(&f, dir);
	tst_put("k", "v1", &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);

	/* if value(k) == "v1" then put k=v2, get k */
	cmp.result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	cmp.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__VALUE;
	cmp.key = tb("k");
	cmp.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_VALUE;
	cmp.value = tb("v1");
	put.key = tb("k");
	put.value = tb("v2");
	op1.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	op1.request_put = &put;
	rng.key = tb("k");
	op2.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	op2.request_range = &rng;
	txn.n_compare = 1;
	txn.compare = cmps;
	txn.n_success = 2;
	txn.success = ops;
	req.txn = &txn;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(r.deliver);
	CHECK_EQ(r.status, 0);
	CHECK_EQ(r.revision, 3);
	{
		Etcdserverpb__TxnResponse *got =
			etcdserverpb__txn_response__unpack(NULL, r.body_len, r.body);
		CHECK(got != NULL);
		CHECK(got->succeeded);
		CHECK(got->header != NULL);
		CHECK_EQ(got->header->cluster_id, TST_CLUSTER);
		CHECK_EQ(got->header->member_id, TST_MEMBER);
		CHECK_EQ(got->header->revision, 3);
		CHECK_EQ(got->header->raft_term, 7);
		CHECK_EQ(got->n_responses, 2);
		CHECK_EQ(got->responses[0]->response_case,
			 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_PUT);
		CHECK_EQ(got->responses[1]->response_case,
			 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE);
		/* nested headers are etcd's: no member fields */
		Etcdserverpb__RangeResponse *rr = got->responses[1]->response_range;
		CHECK(rr->header == NULL || rr->header->member_id == 0);
		CHECK_EQ(rr->n_kvs, 1);
		CHECK(rr->kvs[0]->value.len == 2 && memcmp(rr->kvs[0]->value.data, "v2", 2) == 0);
		CHECK_EQ(rr->kvs[0]->mod_revision, 3);
		etcdserverpb__txn_response__free_unpacked(got, NULL);
	}

	/* the compare fails now: no branch ops, revision unchanged */
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK_EQ(r.revision, 3);
	{
		Etcdserverpb__TxnResponse want = ETCDSERVERPB__TXN_RESPONSE__INIT;
		Etcdserverpb__ResponseHeader h;
		header(&h, 3);
		want.header = &h;
		check_body(&r, &want.base);
	}
	tbuf_free(&d);
	tst_store_close(&f);
}

static void test_refusals(void)
{
	struct tst_store f;
	struct tbuf d = { 0 };
	struct stored_apply_result r;
	struct msg_origin o = tst_origin(0, 1, 1);
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;

	tst_store_open(&f, dir);
	for (int i = 0; i < 3; i++) {
		tst_put("k", "v", &o, &d);
		CHECK_EQ(fx_apply(&f, &d, &r), 0);
	}
	CHECK_EQ(fx_rev(&f), 4);

	/* a lease that does not exist */
	put.key = tb("k");
	put.value = tb("v");
	put.lease = 99;
	req.put = &put;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 5, "etcdserver: requested lease not found");
	CHECK_EQ(r.revision, 4);
	CHECK_EQ(fx_consistent_index(&f), 4);

	/* ignore_value on a missing key */
	put.key = tb("missing");
	put.lease = 0;
	put.value = tb("");
	put.ignore_value = true;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 3, "etcdserver: key not found");

	/* Compaction: done at 3, then at or below it, then in the future */
	tst_compact(3, false, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(!r.after_compaction);
	{
		Etcdserverpb__CompactionResponse want = ETCDSERVERPB__COMPACTION_RESPONSE__INIT;
		Etcdserverpb__ResponseHeader h;
		header(&h, 4);
		want.header = &h;
		check_body(&r, &want.base);
	}
	tst_compact(3, false, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 11, "etcdserver: mvcc: required revision has been compacted");
	tst_compact(2, false, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 11, "etcdserver: mvcc: required revision has been compacted");
	tst_compact(5, false, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 11, "etcdserver: mvcc: required revision is a future revision");

	/* a physical compaction is answered later, with the body given then */
	tst_compact(4, true, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(r.deliver);
	CHECK(r.after_compaction);
	CHECK_EQ(r.body_len, 0);
	{
		Etcdserverpb__CompactionResponse want = ETCDSERVERPB__COMPACTION_RESPONSE__INIT;
		Etcdserverpb__ResponseHeader h;
		struct stored_apply_result b = { 0 };
		CHECK_EQ(stored_apply_compaction_body(&ids, 9, 7, &f.a, &b.body, &b.body_len), 0);
		header(&h, 9);
		want.header = &h;
		check_body(&b, &want.base);
	}
	CHECK_EQ(fx_consistent_index(&f), 10);
	CHECK_EQ(fx_rev(&f), 4);
	tbuf_free(&d);
	tst_store_close(&f);
}

static void test_not_requests(void)
{
	struct tst_store f;
	struct tbuf d = { 0 };
	struct stored_apply_result r;
	struct msg_origin o = tst_origin(0, 1, 1);
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantRequest lg = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	Etcdserverpb__RequestHeader rh = ETCDSERVERPB__REQUEST_HEADER__INIT;
	Etcdserverpb__AuthEnableRequest ae = ETCDSERVERPB__AUTH_ENABLE_REQUEST__INIT;

	tst_store_open(&f, dir);

	/* a new leader's empty entry */
	{
		struct msg_committed e = { .index = ++f.index, .term = 8 };
		CHECK_EQ(stored_apply_entry(f.s, &ids, &e, NULL, &f.a, &r), 0);
		CHECK(!r.deliver);
		CHECK_EQ(fx_consistent_index(&f), 1);
	}
	/* a configuration change, whose bytes are not a request */
	{
		static const uint8_t cc[] = { 0x08, 0x01, 0x10, 0x00, 0x18, 0x05 };
		struct msg_committed e = {
			.index = ++f.index, .term = 8,
			.entry_type = RAFTPB__ENTRY_TYPE__EntryConfChange, .data_len = sizeof(cc),
		};
		CHECK_EQ(stored_apply_entry(f.s, &ids, &e, cc, &f.a, &r), 0);
		CHECK(!r.deliver);
		CHECK_EQ(fx_consistent_index(&f), 2);
	}
	/* a replayed index */
	{
		struct msg_committed e = { .index = 2, .term = 8 };
		CHECK_EQ(stored_apply_entry(f.s, &ids, &e, NULL, &f.a, &r), -EALREADY);
	}

	/* kinds not applied yet: UNIMPLEMENTED, the index moves */
	lg.ttl = 10;
	req.lease_grant = &lg;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 12, "cetcd: lease_grant requests are not implemented yet");
	req.lease_grant = NULL;
	req.auth_enable = &ae;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 12, "cetcd: this request kind is not implemented"); /* ids.auth NULL */
	req.auth_enable = NULL;
	req.header = &rh; /* nothing but a header */
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 12, "cetcd: this request kind is not implemented");
	CHECK_EQ(fx_consistent_index(&f), 5);
	CHECK_EQ(fx_rev(&f), 1);

	/* a string with a NUL byte (header.username "ro\0ot", written by
	 * hand: protobuf-c packs C strings up to the NUL): refused before
	 * decoding */
	{
		static const uint8_t bad_user[] = { 0xa2, 0x06, 0x07, 0x12, 0x05, 'r', 'o', 0, 'o', 't' };
		uint8_t origin[MSG_ORIGIN_MAX_BYTES];
		d.len = 0;
		tbuf_add(&d, bad_user, sizeof(bad_user));
		tbuf_add(&d, origin, msg_origin_encode(&o, origin));
	}
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	check_error(&r, 3, "etcdserver: the request in the raft log does not decode");
	CHECK_EQ(fx_rev(&f), 1);

	/* well-formed protobuf that is not an InternalRaftRequest (field 4 as
	 * a varint), with an origin */
	{
		static const uint8_t wrong[] = { 0x20, 0x05 };
		uint8_t origin[MSG_ORIGIN_MAX_BYTES];
		d.len = 0;
		tbuf_add(&d, wrong, sizeof(wrong));
		tbuf_add(&d, origin, msg_origin_encode(&o, origin));
		CHECK_EQ(fx_apply(&f, &d, &r), 0);
		check_error(&r, 3, "etcdserver: the request in the raft log does not decode");
	}
	/* bytes that are no protobuf at all: nobody to answer */
	{
		static const uint8_t junk[] = { 0xff, 0xff, 0xff };
		d.len = 0;
		tbuf_add(&d, junk, sizeof(junk));
		CHECK_EQ(fx_apply(&f, &d, &r), 0);
		CHECK(!r.deliver);
	}
	CHECK_EQ(fx_consistent_index(&f), 8);
	CHECK_EQ(fx_rev(&f), 1);
	tbuf_free(&d);
	tst_store_close(&f);
}

static void test_origins_and_range(void)
{
	struct tst_store f;
	struct tbuf d = { 0 };
	struct stored_apply_result r;
	struct msg_origin o = tst_origin(0, 1, 1), other = o;
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__RangeRequest rng = ETCDSERVERPB__RANGE_REQUEST__INIT;

	tst_store_open(&f, dir);
	other.member_id = TST_MEMBER + 1;
	/* another member's request: applied, not answered here */
	tst_put("x", "1", &other, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(!r.deliver);
	CHECK_EQ(fx_rev(&f), 2);
	/* no origin at all (stored's own proposals): applied */
	tst_put("y", "1", NULL, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(!r.deliver);
	CHECK_EQ(fx_rev(&f), 3);

	/* a Range through Raft is answered with the kvs */
	rng.key = tb("x");
	rng.range_end = tb("z");
	req.range = &rng;
	tst_entry(&req, &o, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(r.deliver);
	CHECK_EQ(r.status, 0);
	{
		Etcdserverpb__RangeResponse *got =
			etcdserverpb__range_response__unpack(NULL, r.body_len, r.body);
		CHECK(got != NULL);
		CHECK_EQ(got->count, 2);
		CHECK_EQ(got->n_kvs, 2);
		CHECK_EQ(got->header->revision, 3);
		CHECK_EQ(got->header->member_id, TST_MEMBER);
		etcdserverpb__range_response__free_unpacked(got, NULL);
	}
	/* and skipped (the index moves) when nobody here waits for it */
	tst_entry(&req, &other, &d);
	CHECK_EQ(fx_apply(&f, &d, &r), 0);
	CHECK(!r.deliver);
	CHECK_EQ(fx_consistent_index(&f), 4);
	tbuf_free(&d);
	tst_store_close(&f);
}

int main(void)
{
	test_tmpdir(dir, sizeof(dir));
	test_put_delete();
	test_txn();
	test_refusals();
	test_not_requests();
	test_origins_and_range();
	CHECK_EQ(stored_alloc_live(), 0);
	printf("stored/test_apply: ok\n");
	return 0;
}
