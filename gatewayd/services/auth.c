/* etcdserverpb.Auth in gatewayd: every management RPC goes through Raft
 * as etcd's EtcdServer proposes it, and stored applies it (stored/auth.h),
 * answering with etcd's response or error.
 *
 * UserAdd (unless no_password) and UserChangePassword first have their
 * password hashed as etcd 3.5's server does, into the request's
 * hashedPassword, so that no member hashes at apply; the password is sent
 * too, which etcd 3.4 members of a mixed cluster hash themselves (and
 * cetcd ignores when hashedPassword is there). A client's own
 * hashedPassword is replaced, as etcd 3.5 replaces it. Hashing costs tens
 * of milliseconds at etcd's default cost, so it runs on a worker thread
 * of this gateway (offload.h), never on the loop: the loop queues the
 * request's bytes, the worker hashes, and the loop proposes the request
 * with its hash, unless the call ended meanwhile (then nothing is
 * proposed, as etcd proposes nothing for a cancelled request).
 *
 * Authenticate is served by authenticate.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth/bcrypt.h"
#include "base/log/log.h"
#include "config/config.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/offload.h"
#include "gatewayd/server.h"

/* InternalRaftRequest's field numbers (proto/etcdserverpb/raft_internal.proto). */
#define AUTH_IRR_ENABLE 1000u
#define AUTH_IRR_DISABLE 1011u
#define AUTH_IRR_USER_ADD 1100u
#define AUTH_IRR_USER_DELETE 1101u
#define AUTH_IRR_USER_GET 1102u
#define AUTH_IRR_USER_CHANGE_PASSWORD 1103u
#define AUTH_IRR_USER_GRANT_ROLE 1104u
#define AUTH_IRR_USER_REVOKE_ROLE 1105u
#define AUTH_IRR_USER_LIST 1106u
#define AUTH_IRR_ROLE_LIST 1107u
#define AUTH_IRR_ROLE_ADD 1200u
#define AUTH_IRR_ROLE_DELETE 1201u
#define AUTH_IRR_ROLE_GET 1202u
#define AUTH_IRR_ROLE_GRANT_PERMISSION 1203u
#define AUTH_IRR_ROLE_REVOKE_PERMISSION 1204u

/* A password to hash for a call (a job of the gateway's worker,
 * offload.h). */
struct auth_job {
	struct gw_offload_job base;
	uint64_t call_id;         /* grpc_call_id; the call may be gone by the end */
	uint32_t field;           /* AUTH_IRR_USER_ADD or _CHANGE_PASSWORD */
	const ProtobufCMessageDescriptor *desc;
	uint8_t *msg;             /* the request's bytes (owned, wiped when freed) */
	size_t len;
	const char *password;     /* into a copy of the password (owned) */
	size_t password_len;
	int cost;
	int rc;                   /* bcrypt_hash's, once done */
	char hash[BCRYPT_HASH_SIZE];
};

static void auth_job_free(struct gw_offload_job *oj)
{
	struct auth_job *j = (struct auth_job *)oj;

	if (!j)
		return;
	if (j->msg) {
		explicit_bzero(j->msg, j->len);
		free(j->msg);
	}
	if (j->password) {
		explicit_bzero((char *)j->password, j->password_len);
		free((char *)j->password);
	}
	explicit_bzero(j->hash, sizeof(j->hash));
	free(j);
}

/* On the worker. */
static void auth_job_hash(struct gw_offload_job *oj)
{
	struct auth_job *j = (struct auth_job *)oj;

	j->rc = bcrypt_hash(j->password, j->password_len, j->cost, j->hash);
}

static void auth_job_propose(struct gw_server *s, struct gw_offload_job *oj);

/* Hashes the request's password off the loop, then proposes it
 * (auth_job_propose); the request's bytes are msg, len (gw_unpack's). */
static void auth_hash_then_propose(struct gw_server *s, struct grpc_call *call, uint32_t field,
				   const ProtobufCMessageDescriptor *desc, const uint8_t *msg,
				   size_t len, const char *password)
{
	struct auth_job *j = calloc(1, sizeof(*j));
	size_t plen = strlen(password);
	int rc;

	if (!j || !(j->msg = malloc(len ? len : 1)) || !(j->password = malloc(plen + 1))) {
		auth_job_free(&j->base);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	memcpy(j->msg, msg, len);
	j->len = len;
	memcpy((char *)j->password, password, plen + 1);
	j->password_len = plen;
	j->call_id = grpc_call_id(call);
	j->field = field;
	j->desc = desc;
	j->cost = bcrypt_cost_or_default(s->cfg->bcrypt_cost);
	j->base.work = auth_job_hash;
	j->base.done = auth_job_propose;
	j->base.free = auth_job_free;
	rc = gw_offload_queue(s, &j->base);
	if (rc) {
		auth_job_free(&j->base);
		s->stats.too_many++;
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "etcdserver: too many requests");
	}
}

/* A hashed job back on the loop: its request, with hashedPassword set,
 * proposed for its call (if the call still waits). */
static void auth_job_propose(struct gw_server *s, struct gw_offload_job *oj)
{
	struct auth_job *j = (struct auth_job *)oj;
	struct grpc_call *call = grpc_call_find(s->grpc, j->call_id);
	ProtobufCMessage *m;
	uint8_t *buf;
	size_t n;

	if (!call)
		return;
	if (j->rc) {
		log_warn("failed to bcrypt hash password", LOG_ERRNO(j->rc));
		grpc_call_finish(call, j->rc == -EINVAL ? GRPC_STATUS_INVALID_ARGUMENT
							: GRPC_STATUS_UNKNOWN,
				 j->rc == -EINVAL ? "etcdserver: the password cannot be hashed"
						  : "etcdserver: cannot hash the password");
		return;
	}
	m = protobuf_c_message_unpack(j->desc, gw_pb_alloc(s), j->len, j->msg);
	if (!m) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	if (j->desc == &etcdserverpb__auth_user_add_request__descriptor)
		((Etcdserverpb__AuthUserAddRequest *)m)->hashedpassword = j->hash;
	else
		((Etcdserverpb__AuthUserChangePasswordRequest *)m)->hashedpassword = j->hash;
	n = protobuf_c_message_get_packed_size(m);
	buf = gw_scratch(s, n ? n : 1);
	if (!buf) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	protobuf_c_message_pack(m, buf);
	gw_propose(s, call, j->field, buf, n);
	explicit_bzero(buf, n);
}

/* ---- the RPCs ---- */

#define AUTH_PLAIN(fn, desc, field)                                                       \
	static void fn(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,   \
		       size_t len)                                                        \
	{                                                                                 \
		if (gw_unpack(s, call, &desc, &msg, &len))                                \
			gw_propose(s, call, field, msg, len);                             \
	}
AUTH_PLAIN(auth_enable, etcdserverpb__auth_enable_request__descriptor, AUTH_IRR_ENABLE)
AUTH_PLAIN(auth_disable, etcdserverpb__auth_disable_request__descriptor, AUTH_IRR_DISABLE)
AUTH_PLAIN(auth_user_get, etcdserverpb__auth_user_get_request__descriptor, AUTH_IRR_USER_GET)
AUTH_PLAIN(auth_user_list, etcdserverpb__auth_user_list_request__descriptor, AUTH_IRR_USER_LIST)
AUTH_PLAIN(auth_user_delete, etcdserverpb__auth_user_delete_request__descriptor,
	   AUTH_IRR_USER_DELETE)
AUTH_PLAIN(auth_user_grant_role, etcdserverpb__auth_user_grant_role_request__descriptor,
	   AUTH_IRR_USER_GRANT_ROLE)
AUTH_PLAIN(auth_user_revoke_role, etcdserverpb__auth_user_revoke_role_request__descriptor,
	   AUTH_IRR_USER_REVOKE_ROLE)
AUTH_PLAIN(auth_role_add, etcdserverpb__auth_role_add_request__descriptor, AUTH_IRR_ROLE_ADD)
AUTH_PLAIN(auth_role_get, etcdserverpb__auth_role_get_request__descriptor, AUTH_IRR_ROLE_GET)
AUTH_PLAIN(auth_role_list, etcdserverpb__auth_role_list_request__descriptor, AUTH_IRR_ROLE_LIST)
AUTH_PLAIN(auth_role_delete, etcdserverpb__auth_role_delete_request__descriptor,
	   AUTH_IRR_ROLE_DELETE)
AUTH_PLAIN(auth_role_grant_permission,
	   etcdserverpb__auth_role_grant_permission_request__descriptor,
	   AUTH_IRR_ROLE_GRANT_PERMISSION)
AUTH_PLAIN(auth_role_revoke_permission,
	   etcdserverpb__auth_role_revoke_permission_request__descriptor,
	   AUTH_IRR_ROLE_REVOKE_PERMISSION)
#undef AUTH_PLAIN

static void auth_user_add(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			  size_t len)
{
	const ProtobufCMessageDescriptor *d = &etcdserverpb__auth_user_add_request__descriptor;
	Etcdserverpb__AuthUserAddRequest *r = gw_unpack(s, call, d, &msg, &len);

	if (!r)
		return;
	/* nothing to hash: proposed as it came (an empty name is refused
	 * at apply, as etcd's store refuses it) */
	if ((r->options && r->options->no_password) || !*r->name) {
		gw_propose(s, call, AUTH_IRR_USER_ADD, msg, len);
		return;
	}
	auth_hash_then_propose(s, call, AUTH_IRR_USER_ADD, d, msg, len, r->password);
}

static void auth_user_change_password(struct gw_server *s, struct grpc_call *call,
				      const uint8_t *msg, size_t len)
{
	const ProtobufCMessageDescriptor *d =
		&etcdserverpb__auth_user_change_password_request__descriptor;
	Etcdserverpb__AuthUserChangePasswordRequest *r = gw_unpack(s, call, d, &msg, &len);

	if (r)
		auth_hash_then_propose(s, call, AUTH_IRR_USER_CHANGE_PASSWORD, d, msg, len,
				       r->password);
}

int auth_service_register(struct gw_server *s)
{
	static const struct {
		const char *path;
		gw_unary_fn fn;
	} methods[] = {
		{ "/etcdserverpb.Auth/AuthEnable", auth_enable },
		{ "/etcdserverpb.Auth/AuthDisable", auth_disable },
		{ "/etcdserverpb.Auth/UserAdd", auth_user_add },
		{ "/etcdserverpb.Auth/UserGet", auth_user_get },
		{ "/etcdserverpb.Auth/UserList", auth_user_list },
		{ "/etcdserverpb.Auth/UserDelete", auth_user_delete },
		{ "/etcdserverpb.Auth/UserChangePassword", auth_user_change_password },
		{ "/etcdserverpb.Auth/UserGrantRole", auth_user_grant_role },
		{ "/etcdserverpb.Auth/UserRevokeRole", auth_user_revoke_role },
		{ "/etcdserverpb.Auth/RoleAdd", auth_role_add },
		{ "/etcdserverpb.Auth/RoleGet", auth_role_get },
		{ "/etcdserverpb.Auth/RoleList", auth_role_list },
		{ "/etcdserverpb.Auth/RoleDelete", auth_role_delete },
		{ "/etcdserverpb.Auth/RoleGrantPermission", auth_role_grant_permission },
		{ "/etcdserverpb.Auth/RoleRevokePermission", auth_role_revoke_permission },
	};
	int rc;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		rc = gw_handle_unary(s, methods[i].path, methods[i].fn);
		if (rc)
			return rc;
	}
	return 0;
}
