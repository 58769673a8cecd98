/*
 * Fuzz target: the request bodies gatewayd decodes for every service it
 * serves (KV, Watch, Lease, Cluster, Maintenance, Election, Lock). The
 * first input byte picks the message from tests/proto/requests.h, by
 * its index there; the rest is its body, decoded as gw_unpack decodes it
 * (unpack.h, which aborts when the check and protobuf-c disagree). The
 * peer URLs of a MemberAdd or MemberUpdate then go through what the
 * Cluster service does with them: member_peer_urls' check and order,
 * and the new member's id (fuzz_peerurl compares that check with the
 * parser raftd dials them with).
 */
#include <stdint.h>
#include <stdlib.h>

#include "../proto/requests.h"
#include "cluster/member.h"
#include "unpack.h"

static void peer_urls(char *const *in, size_t n)
{
	char **urls;
	uint64_t id;

	if (member_peer_urls(in, n, &urls) != 0)
		return;
	if (member_id_added(urls, n, 1, &id) != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		free(urls[i]);
	free(urls);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct proto_test_request *k;
	ProtobufCMessage *m;

	if (size < 1)
		return 0;
	k = &proto_test_requests[data[0] % PROTO_TEST_NREQUESTS];
	m = fuzz_unpack_request(k->desc, data + 1, size - 1);
	if (!m)
		return 0;
	if (k->desc == &etcdserverpb__member_add_request__descriptor) {
		const Etcdserverpb__MemberAddRequest *r = (const void *)m;
		peer_urls(r->peerurls, r->n_peerurls);
	} else if (k->desc == &etcdserverpb__member_update_request__descriptor) {
		const Etcdserverpb__MemberUpdateRequest *r = (const void *)m;
		peer_urls(r->peerurls, r->n_peerurls);
	}
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
