/* Auth.Authenticate in gatewayd, as etcd 3.4's EtcdServer.Authenticate:
 *
 *   1. a linearizable read (etcd's linearizableReadNotify), so that a
 *      user or password the client just changed is seen;
 *   2. the user's record from the db at the published root: auth must be
 *      enabled ("authentication is not enabled"), the user must exist and
 *      have a password ("authentication failed, invalid user ID or
 *      password"; a no-password user is etcd's ErrNoPasswordUser);
 *   3. the password checked against its bcrypt hash on the gateway's
 *      worker thread (offload.h): bcrypt costs tens of milliseconds and
 *      the loop never waits for it;
 *   4. an InternalAuthenticateRequest {name, simple_token} proposed (its
 *      simple_token a fresh random prefix when --auth-token is simple; no
 *      password, so that the log never holds one). stored answers it at
 *      apply with the token: "<prefix>.<index>" entered into the region's
 *      token table, or a JWT it signs;
 *   5. the token answered only if the auth store's revision is still the
 *      one the password was checked at; otherwise (the password changed,
 *      the user was deleted, auth was disabled meanwhile) from step 2
 *      again, as etcd retries, so that no token outlives the password it
 *      was given for.
 * A call that ends while its password is checked proposes nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "auth/bcrypt.h"
#include "auth/error.h"
#include "auth/token.h"
#include "authpb/auth.pb-c.h"
#include "base/log/log.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/offload.h"
#include "gatewayd/server.h"
#include "stored/mvcc/schema.h"

/* InternalRaftRequest.authenticate (proto/etcdserverpb/raft_internal.proto). */
#define AUTHN_IRR_AUTHENTICATE 1012u

/* etcd's ErrNoPasswordUser, which its gRPC layer passes through as it is. */
#define AUTHN_NO_PASSWORD_TEXT "auth: authentication failed, password was given for no password user"

/* The request, kept while its linearizable read waits, while its
 * password is checked and while its proposal is applied (wiped when
 * freed): the one copy of the name and password. */
struct authn_deferred {
	struct gw_deferred base;
	uint64_t checked_rev; /* while proposed: the revision the password was checked at */
	bool in_job;          /* a job holds it: its free is the job's */
	size_t name_len, password_len;
	char bytes[]; /* name, NUL, password, NUL */
};

/* A password to check for a call (a job of the gateway's worker,
 * offload.h): the request, which the job holds from the read of the hash
 * until its proposal takes it, and the hash, wiped when freed. */
struct authn_job {
	struct gw_offload_job base;
	uint64_t call_id;   /* grpc_call_id; the call may be gone by the end */
	uint64_t checked_rev; /* the auth store's revision the hash was read at */
	bool ok;            /* the worker's answer */
	struct authn_deferred *req; /* NULL once proposed */
	size_t hash_len;
	char hash[]; /* NUL-terminated */
};

static struct authn_deferred *authn_deferred_new(const struct gw_deferred_ops *ops, const char *name,
						 size_t nlen, const char *pw, size_t plen)
{
	struct authn_deferred *a = malloc(sizeof(*a) + nlen + plen + 2);

	if (!a)
		return NULL;
	a->base.ops = ops;
	a->checked_rev = 0;
	a->in_job = false;
	a->name_len = nlen;
	a->password_len = plen;
	memcpy(a->bytes, name, nlen);
	a->bytes[nlen] = '\0';
	memcpy(a->bytes + nlen + 1, pw, plen);
	a->bytes[nlen + 1 + plen] = '\0';
	return a;
}

static void authn_deferred_free(struct gw_deferred *d)
{
	struct authn_deferred *a = (struct authn_deferred *)d;

	if (a->in_job)
		return; /* the job's now (authn_run) */
	explicit_bzero(a->bytes, a->name_len + a->password_len + 2);
	free(a);
}

static void authn_run(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d);
static void authn_result(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d,
			 int32_t status, const uint8_t *body, size_t len);

static const struct gw_deferred_ops authn_deferred_ops = {
	.run = authn_run,
	.free = authn_deferred_free,
};
static const struct gw_deferred_ops authn_proposed_ops = {
	.free = authn_deferred_free,
	.result = authn_result,
};

static void authn_job_free(struct gw_offload_job *oj)
{
	struct authn_job *j = (struct authn_job *)oj;

	if (j->req) {
		j->req->in_job = false;
		authn_deferred_free(&j->req->base);
	}
	explicit_bzero(j->hash, j->hash_len + 1);
	free(j);
}

/* On the worker. */
static void authn_job_check(struct gw_offload_job *oj)
{
	struct authn_job *j = (struct authn_job *)oj;
	const struct authn_deferred *a = j->req;

	j->ok = bcrypt_verify(a->bytes + a->name_len + 1, a->password_len, j->hash, j->hash_len);
}

static void authn_refuse(struct grpc_call *call, int err)
{
	grpc_call_finish(call, (enum grpc_status)auth_grpc_code(err), auth_strerror(err));
}

/* A checked password back on the loop: the call's InternalAuthenticateRequest
 * proposed, or the call refused. */
static void authn_job_done(struct gw_server *s, struct gw_offload_job *oj)
{
	struct authn_job *j = (struct authn_job *)oj;
	struct authn_deferred *a = j->req;
	Etcdserverpb__InternalAuthenticateRequest r =
		ETCDSERVERPB__INTERNAL_AUTHENTICATE_REQUEST__INIT;
	struct grpc_call *call = grpc_call_find(s->grpc, j->call_id);
	char prefix[AUTH_TOKEN_SIMPLE_PREFIX_LEN + 1] = "";
	uint8_t *buf;
	size_t n;

	if (!call)
		return;
	if (!j->ok) {
		log_info("invalid password", LOG_BYTES("user-name", a->bytes, a->name_len));
		authn_refuse(call, AUTH_ERR_AUTH_FAILED);
		return;
	}
	if (s->auth_tokens && s->auth_tokens->type == AUTH_TOKEN_SIMPLE &&
	    auth_token_simple_prefix(prefix) != 0) {
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, "etcdserver: no random bytes for a token");
		return;
	}
	r.name = a->bytes;
	r.simple_token = prefix;
	n = etcdserverpb__internal_authenticate_request__get_packed_size(&r);
	buf = gw_scratch(s, n ? n : 1);
	if (!buf) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	etcdserverpb__internal_authenticate_request__pack(&r, buf);
	/* the request goes on with the proposal, which frees it */
	j->req = NULL;
	a->in_job = false;
	a->base.ops = &authn_proposed_ops;
	a->checked_rev = j->checked_rev;
	gw_propose_then(s, call, AUTHN_IRR_AUTHENTICATE, buf, n, &a->base);
}

/* stored's answer: the token, if the auth store did not move since the
 * password was checked; otherwise the check again (etcd's loop). */
static void authn_result(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d,
			 int32_t status, const uint8_t *body, size_t len)
{
	struct authn_deferred *a = (struct authn_deferred *)d;
	struct gw_read rd;

	if (status == 0 && gw_read_begin(s, &rd) == 0) {
		uint64_t rev = rd.st.auth_revision;
		gw_read_end(s, &rd);
		if (rev != a->checked_rev) {
			log_info("revision when password checked became stale; retrying",
				 LOG_U64("checked", a->checked_rev), LOG_U64("now", rev));
			authn_run(s, call, d);
			return;
		}
	}
	gw_answer_result(call, status, body, len);
}


/* The user named name from the db at rd: 0 with *u (unpacked into the
 * turn's memory), or -ENOENT, or a read error. */
static int authn_user(struct gw_server *s, struct gw_read *rd, const char *name, size_t len,
		      Authpb__User **u)
{
	struct btree_bucket *bk;
	const uint8_t *val;
	size_t vlen;
	int rc = btree_bucket_open(rd->txn, NULL, SCHEMA_BUCKET_AUTH_USERS,
				   SCHEMA_LEN(SCHEMA_BUCKET_AUTH_USERS), &bk);

	if (rc == 0)
		rc = btree_get(bk, name, len, &val, &vlen);
	if (rc == -EISDIR || rc == -ENOTDIR)
		rc = -EUCLEAN;
	if (rc)
		return rc;
	*u = authpb__user__unpack(gw_pb_alloc(s), vlen, val);
	return *u ? 0 : -EUCLEAN;
}

/* After the read index, or again after a proposal whose check went
 * stale: etcd's CheckPassword up to the hash comparison, which goes to
 * the worker with d (its caller's free of d then leaves it to the job). */
static void authn_run(struct gw_server *s, struct grpc_call *call, struct gw_deferred *d)
{
	struct authn_deferred *a = (struct authn_deferred *)d;
	const char *name = a->bytes;
	Authpb__User *u = NULL;
	struct authn_job *j;
	struct gw_read rd;
	int rc = gw_read_begin(s, &rd);

	if (rc) {
		gw_read_refuse(s, call, rc);
		return;
	}
	if (!rd.st.auth_enabled) {
		gw_read_end(s, &rd);
		authn_refuse(call, AUTH_ERR_AUTH_NOT_ENABLED);
		return;
	}
	rc = authn_user(s, &rd, name, a->name_len, &u);
	if (rc == 0 && u->options && u->options->no_password) {
		gw_read_end(s, &rd);
		log_warn("invalid authentication was requested",
			 LOG_BYTES("user", name, a->name_len), LOG_STR("error", AUTHN_NO_PASSWORD_TEXT));
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, AUTHN_NO_PASSWORD_TEXT);
		return;
	}
	if (rc == -ENOENT) {
		gw_read_end(s, &rd);
		log_warn("invalid authentication was requested", LOG_BYTES("user", name, a->name_len));
		authn_refuse(call, AUTH_ERR_AUTH_FAILED);
		return;
	}
	if (rc) {
		gw_read_end(s, &rd);
		log_error("cannot read a user of the auth store", LOG_ERRNO(rc),
			  LOG_BYTES("user", name, a->name_len));
		gw_read_refuse(s, call, rc);
		return;
	}
	size_t hlen = u->password.len;
	j = calloc(1, sizeof(*j) + hlen + 1);
	if (!j) {
		gw_read_end(s, &rd);
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	j->call_id = grpc_call_id(call);
	j->checked_rev = rd.st.auth_revision;
	j->hash_len = hlen;
	if (hlen)
		memcpy(j->hash, u->password.data, hlen);
	gw_read_end(s, &rd); /* u's bytes were the txn's */
	j->base.work = authn_job_check;
	j->base.done = authn_job_done;
	j->base.free = authn_job_free;
	j->req = a; /* before the worker can see the job */
	a->in_job = true;
	rc = gw_offload_queue(s, &j->base);
	if (rc) {
		j->req = NULL; /* still d's caller's */
		a->in_job = false;
		authn_job_free(&j->base);
		s->stats.too_many++;
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "etcdserver: too many requests");
	}
}

static void authn_authenticate(struct gw_server *s, struct grpc_call *call, const uint8_t *msg,
			       size_t len)
{
	Etcdserverpb__AuthenticateRequest *r =
		gw_unpack(s, call, &etcdserverpb__authenticate_request__descriptor, &msg, &len);
	struct authn_deferred *a;
	size_t nlen, plen;

	if (!r)
		return;
	nlen = strlen(r->name);
	plen = strlen(r->password);
	a = authn_deferred_new(&authn_deferred_ops, r->name, nlen, r->password, plen);
	explicit_bzero(r->password, plen);
	if (!a) {
		grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
		return;
	}
	gw_read_linearizable(s, call, &a->base);
}

int authn_register(struct gw_server *s)
{
	return gw_handle_unary(s, "/etcdserverpb.Auth/Authenticate", authn_authenticate);
}
