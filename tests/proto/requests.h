/*
 * tests/proto/requests.h: every request type gatewayd decodes with
 * gw_unpack (gatewayd/services/kv.c, watch.c, lease.c, cluster.c, alarm.c,
 * maint.c, snapshot.c, v3election.c, v3lock.c), by the message name
 * tests/tools/protodiff knows it by. proto_diff and fuzz_gwreq go
 * through this one list. Not in it: DefragmentRequest (maint.c) and the
 * Auth service's requests (services/auth.c, authenticate.c), which
 * gatewayd decodes too: tests/fuzz/fuzz_authreq.c fuzzes those.
 */
#ifndef CETCD_TESTS_PROTO_REQUESTS_H
#define CETCD_TESTS_PROTO_REQUESTS_H

#include "etcdserverpb/rpc.pb-c.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

static const struct proto_test_request {
	const char *name;
	const ProtobufCMessageDescriptor *desc;
} proto_test_requests[] = {
	{ "RangeRequest", &etcdserverpb__range_request__descriptor },
	{ "PutRequest", &etcdserverpb__put_request__descriptor },
	{ "DeleteRangeRequest", &etcdserverpb__delete_range_request__descriptor },
	{ "TxnRequest", &etcdserverpb__txn_request__descriptor },
	{ "CompactionRequest", &etcdserverpb__compaction_request__descriptor },
	{ "StatusRequest", &etcdserverpb__status_request__descriptor },
	{ "MemberListRequest", &etcdserverpb__member_list_request__descriptor },
	{ "WatchRequest", &etcdserverpb__watch_request__descriptor },
	{ "LeaseGrantRequest", &etcdserverpb__lease_grant_request__descriptor },
	{ "LeaseRevokeRequest", &etcdserverpb__lease_revoke_request__descriptor },
	{ "LeaseKeepAliveRequest", &etcdserverpb__lease_keep_alive_request__descriptor },
	{ "LeaseTimeToLiveRequest", &etcdserverpb__lease_time_to_live_request__descriptor },
	{ "LeaseLeasesRequest", &etcdserverpb__lease_leases_request__descriptor },
	{ "MemberAddRequest", &etcdserverpb__member_add_request__descriptor },
	{ "MemberRemoveRequest", &etcdserverpb__member_remove_request__descriptor },
	{ "MemberUpdateRequest", &etcdserverpb__member_update_request__descriptor },
	{ "MemberPromoteRequest", &etcdserverpb__member_promote_request__descriptor },
	{ "AlarmRequest", &etcdserverpb__alarm_request__descriptor },
	{ "HashRequest", &etcdserverpb__hash_request__descriptor },
	{ "HashKVRequest", &etcdserverpb__hash_kvrequest__descriptor },
	{ "SnapshotRequest", &etcdserverpb__snapshot_request__descriptor },
	{ "MoveLeaderRequest", &etcdserverpb__move_leader_request__descriptor },
	{ "CampaignRequest", &v3electionpb__campaign_request__descriptor },
	{ "ProclaimRequest", &v3electionpb__proclaim_request__descriptor },
	{ "LeaderRequest", &v3electionpb__leader_request__descriptor },
	{ "ResignRequest", &v3electionpb__resign_request__descriptor },
	{ "LockRequest", &v3lockpb__lock_request__descriptor },
	{ "UnlockRequest", &v3lockpb__unlock_request__descriptor },
};
#define PROTO_TEST_NREQUESTS (sizeof(proto_test_requests) / sizeof(proto_test_requests[0]))

#endif
