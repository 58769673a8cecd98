/*
 * Fuzz target: the request decoding gatewayd and stored do on bytes from
 * clients, the WAL and peers. The first input byte picks the message
 * (Range, Put, DeleteRange, Txn, Compaction request, a whole
 * InternalRaftRequest as stored reads from an entry, Status or MemberList
 * request); the rest is its protobuf encoding, which also goes through
 * proto/wire.h's field reader. Each goes through the same steps as the
 * servers: proto_check_request and, when it asks for it,
 * proto_check_canonicalize (gatewayd), or proto_check_strings (stored,
 * for entries); protobuf-c unpack; etcd's validation rules; for entries
 * the origin lookup. Aborts when the check and protobuf-c disagree: bytes
 * the check takes as canonical must unpack, and bytes it takes otherwise
 * must canonicalize into bytes it takes again, that unpack, and that
 * canonicalize to themselves.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "proto/check.h"
#include "proto/wire.h"
#include "shm/msg.h"
#include "stored/mvcc/mvcc.h"

static void validate(const ProtobufCMessageDescriptor *d, const ProtobufCMessage *m)
{
	if (d == &etcdserverpb__range_request__descriptor)
		(void)mvcc_validate_range((const Etcdserverpb__RangeRequest *)m);
	else if (d == &etcdserverpb__put_request__descriptor)
		(void)mvcc_validate_put((const Etcdserverpb__PutRequest *)m);
	else if (d == &etcdserverpb__delete_range_request__descriptor)
		(void)mvcc_validate_delete_range((const Etcdserverpb__DeleteRangeRequest *)m);
	else if (d == &etcdserverpb__txn_request__descriptor) {
		const Etcdserverpb__TxnRequest *t = (const Etcdserverpb__TxnRequest *)m;
		if (mvcc_validate_txn(t, 128) == 0)
			(void)mvcc_txn_is_readonly(t);
	} else if (d == &etcdserverpb__internal_raft_request__descriptor) {
		const Etcdserverpb__InternalRaftRequest *r =
			(const Etcdserverpb__InternalRaftRequest *)m;
		if (r->put)
			(void)mvcc_validate_put(r->put);
		if (r->delete_range)
			(void)mvcc_validate_delete_range(r->delete_range);
		if (r->txn && mvcc_validate_txn(r->txn, 128) == 0)
			(void)mvcc_txn_is_readonly(r->txn);
		if (r->range)
			(void)mvcc_validate_range(r->range);
	}
}

/* What gatewayd decodes of data (checked, taken): the canonical copy
 * when one is needed, held in *canon (freed by the caller). */
static const uint8_t *request_bytes(const ProtobufCMessageDescriptor *d, const uint8_t *data,
				    size_t *size, bool canonical, uint8_t **canon)
{
	if (canonical)
		return data;
	size_t cap = proto_check_canonical_max(*size), n, n2;
	uint8_t *c = malloc(cap), *c2 = malloc(proto_check_canonical_max(cap));
	if (!c || !c2 || proto_check_canonicalize(d, data, *size, c, &n) != 0 || n > cap ||
	    proto_check_request(d, c, n, NULL, NULL) != 0 ||
	    proto_check_canonicalize(d, c, n, c2, &n2) != 0 || n2 != n || memcmp(c, c2, n) != 0)
		abort();
	free(c2);
	*canon = c;
	*size = n;
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const ProtobufCMessageDescriptor *const kinds[] = {
		&etcdserverpb__range_request__descriptor,
		&etcdserverpb__put_request__descriptor,
		&etcdserverpb__delete_range_request__descriptor,
		&etcdserverpb__txn_request__descriptor,
		&etcdserverpb__compaction_request__descriptor,
		&etcdserverpb__internal_raft_request__descriptor,
		&etcdserverpb__status_request__descriptor,
		&etcdserverpb__member_list_request__descriptor,
	};
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m;
	uint8_t *canon = NULL;
	char text[PROTO_CHECK_TEXT_MAX];
	bool canonical;

	if (size < 1)
		return 0;
	d = kinds[data[0] % (sizeof(kinds) / sizeof(kinds[0]))];
	data++;
	size--;

	struct proto_reader r = proto_reader_init(data, size);
	struct proto_field f;
	while (!proto_reader_done(&r) && proto_read_field(&r, &f) == 0)
		if (r.p > data + size || f.start < data || f.len > size)
			abort();

	if (d == &etcdserverpb__internal_raft_request__descriptor) {
		struct msg_origin o;
		(void)msg_origin_find(data, size, &o);
		if (proto_check_strings(d, data, size) != 0)
			return 0;
		m = protobuf_c_message_unpack(d, NULL, size, data);
	} else {
		int rc = proto_check_request(d, data, size, text, &canonical);
		if (memchr(text, '\0', sizeof(text)) == NULL || (rc != 0 && text[0] == '\0'))
			abort();
		if (rc != 0)
			return 0;
		data = request_bytes(d, data, &size, canonical, &canon);
		m = protobuf_c_message_unpack(d, NULL, size, data);
		if (!m)
			abort();
	}
	if (m) {
		validate(d, m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	free(canon);
	return 0;
}
