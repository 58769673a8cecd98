/*
 * Fuzz target: the request bodies of the Auth service and of
 * Maintenance.Defragment, which gatewayd decodes with gw_unpack as it
 * decodes every other request (gatewayd/services/auth.c, authenticate.c,
 * maint.c) but which tests/proto/requests.h leaves out. The first input
 * byte picks the message from the list below, by its index; the rest is
 * its body, decoded as gw_unpack decodes it (unpack.h, which aborts when
 * the check and protobuf-c disagree). A decoded message's strings are
 * NUL-ended within their length, as the services read them.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "unpack.h"

static const ProtobufCMessageDescriptor *const kinds[] = {
	&etcdserverpb__auth_enable_request__descriptor,
	&etcdserverpb__auth_disable_request__descriptor,
	&etcdserverpb__authenticate_request__descriptor,
	&etcdserverpb__auth_user_add_request__descriptor,
	&etcdserverpb__auth_user_get_request__descriptor,
	&etcdserverpb__auth_user_delete_request__descriptor,
	&etcdserverpb__auth_user_change_password_request__descriptor,
	&etcdserverpb__auth_user_grant_role_request__descriptor,
	&etcdserverpb__auth_user_revoke_role_request__descriptor,
	&etcdserverpb__auth_role_add_request__descriptor,
	&etcdserverpb__auth_role_get_request__descriptor,
	&etcdserverpb__auth_user_list_request__descriptor,
	&etcdserverpb__auth_role_list_request__descriptor,
	&etcdserverpb__auth_role_delete_request__descriptor,
	&etcdserverpb__auth_role_grant_permission_request__descriptor,
	&etcdserverpb__auth_role_revoke_permission_request__descriptor,
	&etcdserverpb__defragment_request__descriptor,
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Every string field of m (one level: the Auth requests nest only
 * authpb messages of bytes and enums) is a NUL-ended string. */
static void strings_ended(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_STRING || f->label == PROTOBUF_C_LABEL_REPEATED)
			continue;
		const char *s = *(const char *const *)((const char *)m + f->offset);
		if (!s)
			abort();
		(void)strlen(s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	ProtobufCMessage *m;

	if (size < 1)
		return 0;
	m = fuzz_unpack_request(kinds[data[0] % NKINDS], data + 1, size - 1);
	if (!m)
		return 0;
	strings_ended(m);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
