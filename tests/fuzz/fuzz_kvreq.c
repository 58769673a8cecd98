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
 * the origin lookup. Aborts when the check and protobuf-c disagree
 * (unpack.h). fuzz_gwreq covers the other services' requests.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "shm/msg.h"
#include "stored/mvcc/mvcc.h"
#include "unpack.h"

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

	if (size < 1)
		return 0;
	d = kinds[data[0] % (sizeof(kinds) / sizeof(kinds[0]))];
	data++;
	size--;

	if (d == &etcdserverpb__internal_raft_request__descriptor) {
		struct msg_origin o;
		fuzz_read_fields(data, size);
		(void)msg_origin_find(data, size, &o);
		if (proto_check_strings(d, data, size) != 0)
			return 0;
		m = protobuf_c_message_unpack(d, NULL, size, data);
	} else {
		m = fuzz_unpack_request(d, data, size);
	}
	if (m) {
		validate(d, m);
		protobuf_c_message_free_unpacked(m, NULL);
	}
	return 0;
}
