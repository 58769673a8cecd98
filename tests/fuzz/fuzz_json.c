/*
 * Fuzz target: proto/json.c's decoder, which reads the bodies of requests
 * to the JSON gateway. The first input byte picks the message type (the
 * requests the gateway routes); the rest is a stream of JSON values read
 * one after another, as a Watch body is. Every message decoded must be
 * wire bytes protobuf-c unpacks, and writing it as JSON and reading that
 * back must give the same JSON again; an error must say why. Aborts
 * otherwise.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "proto/json.h"
#include "v3electionpb/v3election.pb-c.h"
#include "v3lockpb/v3lock.pb-c.h"

static const ProtobufCMessageDescriptor *const types[] = {
	&etcdserverpb__range_request__descriptor,
	&etcdserverpb__put_request__descriptor,
	&etcdserverpb__delete_range_request__descriptor,
	&etcdserverpb__txn_request__descriptor,
	&etcdserverpb__compaction_request__descriptor,
	&etcdserverpb__watch_request__descriptor,
	&etcdserverpb__lease_grant_request__descriptor,
	&etcdserverpb__lease_keep_alive_request__descriptor,
	&etcdserverpb__member_add_request__descriptor,
	&etcdserverpb__alarm_request__descriptor,
	&etcdserverpb__range_response__descriptor,
	&etcdserverpb__watch_response__descriptor,
	&v3electionpb__campaign_request__descriptor,
	&v3electionpb__proclaim_request__descriptor,
	&v3lockpb__lock_request__descriptor,
};

/* The JSON of wire bytes of type d; aborts if they do not unpack. */
static struct proto_json_buf rewrite(const ProtobufCMessageDescriptor *d,
				     const struct proto_json_buf *wire)
{
	struct proto_json_buf out = { 0 };
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, wire->len, wire->data);
	if (!m)
		abort();
	if (proto_json_encode(m, &out) != 0)
		abort();
	protobuf_c_message_free_unpacked(m, NULL);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = types[data[0] % (sizeof(types) / sizeof(types[0]))];
	const char *in = (const char *)data + 1;
	size_t len = size - 1, off = 0;

	for (int n = 0; n < 64; n++) {
		struct proto_json_buf wire = { 0 };
		struct proto_json_err err;
		size_t used = 0;
		int rc = proto_json_decode(d, in + off, len - off, &used, &wire, &err);
		if (rc == 0) {
			if (used == 0 || used > len - off)
				abort();
			struct proto_json_buf j1 = rewrite(d, &wire), w2 = { 0 };
			size_t used2;
			if (proto_json_decode(d, (const char *)j1.data, j1.len, &used2, &w2, &err) ||
			    used2 != j1.len)
				abort();
			struct proto_json_buf j2 = rewrite(d, &w2);
			if (j1.len != j2.len || memcmp(j1.data, j2.data, j1.len) != 0)
				abort();
			proto_json_buf_free(&j1);
			proto_json_buf_free(&j2);
			proto_json_buf_free(&w2);
		} else if (rc == -EINVAL || rc == -EAGAIN) {
			if (!err.text[0] || err.offset > len - off)
				abort();
		} else if (rc != -ENODATA) {
			abort();
		}
		proto_json_buf_free(&wire);
		if (rc)
			break;
		off += used;
	}
	return 0;
}
