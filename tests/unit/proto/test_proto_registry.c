/*
 * test_proto_registry: the descriptor lookups of proto/registry.h, and
 * the proto2 "[always]" encoding rule documented in raftpb/raft.proto
 * (bytes compared with what etcd's Go code writes for the same values).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "proto/registry.h"
#include "../../proto/expect.h"
#include "raftpb/raft.pb-c.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"
#include "walpb/record.pb-c.h"

static void test_messages(void)
{
	size_t n = proto_message_count();

	/* etcd 3.4's files hold 131 message types; most are in rpc.proto. */
	CHECK(n >= 131);
	CHECK(proto_message_at(n) == NULL);
	for (size_t i = 0; i < n; i++) {
		const ProtobufCMessageDescriptor *d = proto_message_at(i);

		CHECK(d != NULL && d->magic == PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC);
		/* Names are unique: find returns this very descriptor. */
		CHECK(proto_message_find(d->name) == d);
	}
	CHECK(proto_message_find("etcdserverpb.RangeRequest") ==
	      &etcdserverpb__range_request__descriptor);
	CHECK(proto_message_find("etcdserverpb.InternalRaftRequest") ==
	      &etcdserverpb__internal_raft_request__descriptor);
	CHECK(proto_message_find("raftpb.Entry") == &raftpb__entry__descriptor);
	CHECK(proto_message_find("walpb.Snapshot") == &walpb__snapshot__descriptor);
	CHECK(proto_message_find("raftpb.Snapshot") == &raftpb__snapshot__descriptor);
	CHECK(proto_message_find("snappb.snapshot") != NULL);
	CHECK(proto_message_find("mvccpb.KeyValue") != NULL);
	CHECK(proto_message_find("authpb.Role") != NULL);
	CHECK(proto_message_find("leasepb.Lease") != NULL);
	CHECK(proto_message_find("v3lockpb.LockRequest") == &v3lockpb__lock_request__descriptor);
	CHECK(proto_message_find("etcdserverpb.Request") != NULL);
	CHECK(proto_message_find("RangeRequest") == NULL);
	CHECK(proto_message_find("etcdserverpb.RangeRequest.SortOrder") == NULL);
	CHECK(proto_message_find("") == NULL);
}

static void test_enums(void)
{
	size_t n = proto_enum_count();

	CHECK(n >= 13);
	CHECK(proto_enum_at(n) == NULL);
	for (size_t i = 0; i < n; i++)
		CHECK(proto_enum_find(proto_enum_at(i)->name) == proto_enum_at(i));
	CHECK(proto_enum_find("etcdserverpb.RangeRequest.SortOrder") ==
	      &etcdserverpb__range_request__sort_order__descriptor);
	CHECK(proto_enum_find("etcdserverpb.AlarmType") == &etcdserverpb__alarm_type__descriptor);
	CHECK(proto_enum_find("raftpb.MessageType") == &raftpb__message_type__descriptor);
	CHECK(proto_enum_find("mvccpb.Event.EventType") != NULL);
	CHECK(proto_enum_find("etcdserverpb.RangeRequest") == NULL);
}

static void test_services(void)
{
	static const char *const names[] = {
		"etcdserverpb.KV", "etcdserverpb.Watch", "etcdserverpb.Lease",
		"etcdserverpb.Cluster", "etcdserverpb.Maintenance", "etcdserverpb.Auth",
		"v3electionpb.Election", "v3lockpb.Lock",
	};

	CHECK(proto_service_count() == sizeof(names) / sizeof(names[0]));
	CHECK(proto_service_at(proto_service_count()) == NULL);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const ProtobufCServiceDescriptor *s = proto_service_find(names[i]);

		CHECK(s != NULL && strcmp(s->name, names[i]) == 0);
	}
	CHECK(proto_service_find("etcdserverpb.KV") == &etcdserverpb__kv__descriptor);
	CHECK(proto_service_find("KV") == NULL);
}

/* proto_method_find on a NUL-terminated path. */
static int find(const char *path, const ProtobufCServiceDescriptor **s,
		const ProtobufCMethodDescriptor **m)
{
	return proto_method_find(path, strlen(path), s, m);
}

static void test_methods(void)
{
	const ProtobufCServiceDescriptor *s = NULL;
	const ProtobufCMethodDescriptor *m = NULL;
	static const char nul_inside[] = "/etcdserverpb.KV\0/Range";
	static const char trailing[] = "/etcdserverpb.KV/RangeXYZ";

	CHECK(find("/etcdserverpb.KV/Range", &s, &m) == 0);
	CHECK(s == &etcdserverpb__kv__descriptor);
	CHECK(m != NULL && strcmp(m->name, "Range") == 0 &&
	      m->input == &etcdserverpb__range_request__descriptor &&
	      m->output == &etcdserverpb__range_response__descriptor);
	CHECK(find("/etcdserverpb.Watch/Watch", &s, &m) == 0 &&
	      m->input == &etcdserverpb__watch_request__descriptor);
	CHECK(find("/etcdserverpb.Maintenance/HashKV", &s, &m) == 0 &&
	      m->output == &etcdserverpb__hash_kvresponse__descriptor);
	CHECK(find("/etcdserverpb.Auth/RoleRevokePermission", NULL, &m) == 0 &&
	      m->input == &etcdserverpb__auth_role_revoke_permission_request__descriptor);
	CHECK(find("/v3electionpb.Election/Observe", &s, NULL) == 0 &&
	      s == &v3electionpb__election__descriptor);
	CHECK(find("/v3lockpb.Lock/Unlock", NULL, NULL) == 0);

	/* Length-delimited: the bytes past len are not part of the path. */
	CHECK(proto_method_find(trailing, sizeof(trailing) - 4, NULL, &m) == 0 &&
	      strcmp(m->name, "Range") == 0);

	CHECK(find("/etcdserverpb.KV/Rang", NULL, NULL) == -ENOENT);
	CHECK(find("/etcdserverpb.KV/RangeX", NULL, NULL) == -ENOENT);
	CHECK(find("/etcdserverpb.KX/Range", NULL, NULL) == -ENOENT);
	CHECK(find("/etcdserverpb.kv/Range", NULL, NULL) == -ENOENT);
	CHECK(find("/etcdserverpb.KV/Watch", NULL, NULL) == -ENOENT);
	CHECK(proto_method_find(nul_inside, sizeof(nul_inside) - 1, NULL, NULL) == -ENOENT);

	CHECK(find("", NULL, NULL) == -EINVAL);
	CHECK(find("/", NULL, NULL) == -EINVAL);
	CHECK(find("//", NULL, NULL) == -EINVAL);
	CHECK(find("///", NULL, NULL) == -EINVAL);
	CHECK(find("/etcdserverpb.KV", NULL, NULL) == -EINVAL);
	CHECK(find("/etcdserverpb.KV/", NULL, NULL) == -EINVAL);
	CHECK(find("//Range", NULL, NULL) == -EINVAL);
	CHECK(find("etcdserverpb.KV/Range", NULL, NULL) == -EINVAL);
	CHECK(find("/etcdserverpb.KV/Range/", NULL, NULL) == -EINVAL);
	CHECK(find("/etcdserverpb.KV/Range/x", NULL, NULL) == -EINVAL);
	CHECK(proto_method_find(NULL, 10, NULL, NULL) == -EINVAL);
}

/* Packs m and compares with the bytes etcd's Go code writes. */
static void check_packed(const ProtobufCMessage *m, const uint8_t *want, size_t want_len)
{
	uint8_t buf[64];
	size_t n = protobuf_c_message_get_packed_size(m);

	CHECK(n == want_len);
	if (n != want_len || n > sizeof(buf))
		return;
	CHECK(protobuf_c_message_pack(m, buf) == n);
	CHECK(memcmp(buf, want, n) == 0);
}

static void test_always_fields(void)
{
	/* etcd writes a zero HardState as term=0, vote=0, commit=0. */
	static const uint8_t hard_state[] = { 0x08, 0x00, 0x10, 0x00, 0x18, 0x00 };
	/* A zero Entry: Type, Term, Index written, Data (nil) not. */
	static const uint8_t entry[] = { 0x08, 0x00, 0x10, 0x00, 0x18, 0x00 };
	/* A CRC record: type 4, crc 0, no data. */
	static const uint8_t crc_record[] = { 0x08, 0x04, 0x10, 0x00 };
	/* A snapshot with zero metadata: metadata{conf_state{auto_leave 0},
	 * index 0, term 0}, data (nil) not written. */
	static const uint8_t snapshot[] = { 0x12, 0x08, 0x0a, 0x02, 0x28, 0x00,
					    0x10, 0x00, 0x18, 0x00 };
	Raftpb__HardState hs = RAFTPB__HARD_STATE__INIT;
	Raftpb__Entry e = RAFTPB__ENTRY__INIT;
	Walpb__Record r = WALPB__RECORD__INIT;
	Raftpb__Snapshot snap = RAFTPB__SNAPSHOT__INIT;
	Raftpb__SnapshotMetadata meta = RAFTPB__SNAPSHOT_METADATA__INIT;
	Raftpb__ConfState cs = RAFTPB__CONF_STATE__INIT;

	/* Without the has_ flags nothing is written: not etcd's bytes. */
	CHECK(protobuf_c_message_get_packed_size(&hs.base) == 0);

	hs.has_term = hs.has_vote = hs.has_commit = 1;
	check_packed(&hs.base, hard_state, sizeof(hard_state));

	e.has_type = e.has_term = e.has_index = 1;
	check_packed(&e.base, entry, sizeof(entry));

	r.has_type = r.has_crc = 1;
	r.type = 4;
	check_packed(&r.base, crc_record, sizeof(crc_record));

	cs.has_auto_leave = 1;
	meta.conf_state = &cs;
	meta.has_index = meta.has_term = 1;
	snap.metadata = &meta;
	check_packed(&snap.base, snapshot, sizeof(snapshot));
}

/* A proto3 request built with the generated API round-trips. */
static void test_roundtrip(void)
{
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__InternalRaftRequest req = ETCDSERVERPB__INTERNAL_RAFT_REQUEST__INIT;
	Etcdserverpb__InternalRaftRequest *got;
	uint8_t buf[128];
	size_t n;

	put.key.data = (uint8_t *)"k\0ey";
	put.key.len = 4;
	put.value.data = (uint8_t *)"v";
	put.value.len = 1;
	put.lease = -1;
	req.id = 0xffffffffffffffffULL;
	req.put = &put;
	n = etcdserverpb__internal_raft_request__get_packed_size(&req);
	CHECK(n > 0 && n <= sizeof(buf));
	if (n == 0 || n > sizeof(buf))
		return;
	CHECK(etcdserverpb__internal_raft_request__pack(&req, buf) == n);
	got = etcdserverpb__internal_raft_request__unpack(NULL, n, buf);
	CHECK(got != NULL);
	if (got == NULL)
		return;
	CHECK(got->id == req.id);
	CHECK(got->put != NULL && got->range == NULL);
	if (got->put != NULL) {
		CHECK(got->put->key.len == 4 && memcmp(got->put->key.data, "k\0ey", 4) == 0);
		CHECK(got->put->lease == -1);
	}
	etcdserverpb__internal_raft_request__free_unpacked(got, NULL);
}

int main(void)
{
	test_messages();
	test_enums();
	test_services();
	test_methods();
	test_always_fields();
	test_roundtrip();
	if (expect_failures) {
		fprintf(stderr, "test_proto_registry: %d check(s) failed\n", expect_failures);
		return 1;
	}
	printf("test_proto_registry: all checks passed\n");
	return 0;
}
