/* Who makes a call, and the permission cache it is checked against (see
 * auth_call.h). */
#include "gatewayd/auth_call.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "auth/check.h"
#include "auth/error.h"
#include "auth/perm.h"
#include "auth/token.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "base/tls/tls.h"
#include "config/config.h"
#include "gatewayd/server.h"
#include "shm/status.h"
#include "stored/auth_db.h"

/* Builds the cache again from a read at the published root. */
static void gw_auth_load(struct gw_server *s)
{
	struct gw_authz *a = &s->authz;
	struct auth_cache *c = NULL;
	struct gw_read rd;
	int rc = gw_read_begin(s, &rd);

	if (rc == 0) {
		rc = auth_db_load(rd.txn, &c);
		gw_read_end(s, &rd);
	}
	if (rc) {
		if (!a->load_failed && rc != -EAGAIN)
			log_error("cannot read the auth store from the db; auth calls are refused until it can",
				  LOG_ERRNO(rc), LOG_STR("why", errmsg_get(rc)));
		a->load_failed = true;
		return;
	}
	a->load_failed = false;
	auth_cache_free(a->cache);
	a->cache = c;
	/* what the read saw, which may be newer than the record looked at */
	a->revision = auth_cache_revision(c);
	a->enabled = auth_cache_enabled(c);
	if (!a->enabled) {
		auth_cache_free(a->cache);
		a->cache = NULL;
	}
}

void gw_auth_turn(struct gw_server *s)
{
	struct gw_authz *a = &s->authz;
	struct status_stored st;
	uint64_t v = status_stored_version(s->r);

	a->memo_call = 0;
	if (v == a->status_version && !(a->enabled && !a->cache))
		return;
	if (status_stored_read(s->r, &st))
		return; /* a restart rewrites it: next turn */
	a->status_version = v;
	if (!st.auth_enabled) {
		a->enabled = false;
		a->revision = st.auth_revision;
		auth_cache_free(a->cache);
		a->cache = NULL;
		return;
	}
	if (!a->enabled || !a->cache || st.auth_revision != a->revision) {
		a->enabled = true;
		gw_auth_load(s);
	}
}

void gw_auth_fini(struct gw_server *s)
{
	auth_cache_free(s->authz.cache);
	s->authz.cache = NULL;
}

/* The user a token names (auth_call.h), into ai. */
static int gw_auth_token(struct gw_server *s, const char *tok, size_t len, struct gw_auth_info *ai)
{
	const struct auth_token_opts *o = s->auth_tokens;
	uint64_t index;
	size_t ulen;
	int rc;

	if (!o || o->type == AUTH_TOKEN_NONE)
		return AUTH_ERR_INVALID_AUTH_TOKEN;
	if (o->type == AUTH_TOKEN_SIMPLE) {
		if (len > SHM_TOKEN_MAX || !auth_token_simple_index(tok, len, &index))
			return AUTH_ERR_INVALID_AUTH_TOKEN;
		/* the turn's clock: one clock_gettime a turn, not one a call */
		rc = shm_tokens_lookup(s->r, tok, len, (uint64_t)(s->now_ns / 1000000),
				       o->simple_ttl_ms,
				       ai->user, sizeof(ai->user) - 1, &ulen);
		if (rc == -EAGAIN)
			return rc;
		if (rc)
			return AUTH_ERR_INVALID_AUTH_TOKEN;
		ai->user[ulen] = '\0';
		ai->revision = s->authz.revision;
		return 0;
	}
	struct auth_jwt_claims cl;
	if (len > AUTH_JWT_MAX_TOKEN || auth_jwt_verify(o->jwt, tok, len, time(NULL), &cl))
		return AUTH_ERR_INVALID_AUTH_TOKEN;
	rc = cl.username_len < sizeof(ai->user) ? 0 : AUTH_ERR_INVALID_AUTH_TOKEN;
	if (rc == 0) {
		memcpy(ai->user, cl.username, cl.username_len);
		ai->user[cl.username_len] = '\0';
		ai->revision = cl.revision;
	}
	auth_jwt_claims_free(&cl);
	return rc;
}

/* etcd's AuthInfoFromTLS: the CN of a verified client certificate. */
static void gw_auth_cn(struct gw_server *s, struct grpc_call *call, struct gw_auth_info *ai)
{
	struct tls_conn *t = gw_call_tls(s, call);
	size_t n;

	if (!t || !tls_conn_peer_verified(t) || grpc_call_metadata(call, "grpcgateway-accept", &n))
		return;
	if (tls_conn_peer_cn(t, ai->user, sizeof(ai->user)) == 0)
		ai->revision = s->authz.revision;
	else
		ai->user[0] = '\0';
}

int gw_auth_of(struct gw_server *s, struct grpc_call *call, const struct gw_auth_info **out)
{
	static const struct gw_auth_info nobody;
	struct gw_authz *a = &s->authz;
	struct gw_auth_info *ai = &a->memo;
	uint64_t id = grpc_call_id(call);
	const uint8_t *tok;
	size_t len;

	*out = &nobody;
	if (!a->enabled)
		return 0;
	if (!a->cache)
		return -EAGAIN;
	*out = ai;
	if (id == a->memo_call)
		return a->memo_rc;
	ai->cache = a->cache;
	ai->revision = 0;
	ai->user[0] = '\0';
	tok = grpc_call_metadata(call, "token", &len);
	if (!tok)
		tok = grpc_call_metadata(call, "authorization", &len);
	a->memo_rc = 0;
	if (tok)
		a->memo_rc = gw_auth_token(s, (const char *)tok, len, ai);
	else if (s->cfg->client_cert_auth)
		gw_auth_cn(s, call, ai);
	if (a->memo_rc == AUTH_ERR_INVALID_AUTH_TOKEN)
		log_warn("invalid auth token", LOG_BYTES("token", tok, len));
	a->memo_call = a->memo_rc == -EAGAIN ? 0 : id;
	return a->memo_rc;
}

void gw_auth_refuse(struct gw_server *s, struct grpc_call *call, int rc)
{
	if (auth_is_error(rc))
		grpc_call_finish(call, (enum grpc_status)auth_grpc_code(rc), auth_strerror(rc));
	else
		gw_read_refuse(s, call, rc);
}

int gw_auth_after_read(const struct gw_auth_info *ai, uint64_t read_revision)
{
	return ai->revision != 0 && ai->revision != read_revision ? AUTH_ERR_OLD_REVISION : 0;
}

/* The auth package's own texts of the errors an admin check gives, which
 * etcd's authMaintenanceServer returns as they are (gRPC Unknown). */
static const char *gw_auth_pkg_text(int rc)
{
	switch (rc) {
	case AUTH_ERR_USER_EMPTY: return "auth: user name is empty";
	case AUTH_ERR_USER_NOT_FOUND: return "auth: user not found";
	case AUTH_ERR_PERMISSION_DENIED: return "auth: permission denied";
	case AUTH_ERR_INVALID_AUTH_TOKEN: return "auth: invalid auth token";
	default: return NULL;
	}
}

/* gw_auth_check; raw: refusals as the auth package's errors. */
static bool gw_auth_run(struct gw_server *s, struct grpc_call *call,
			int (*check)(const struct gw_auth_info *ai, const void *arg),
			const void *arg, uint64_t *revision, bool raw)
{
	const struct gw_auth_info *ai;
	int rc;

	if (revision)
		*revision = 0;
	if (!gw_auth_enabled(s))
		return true;
	rc = gw_auth_of(s, call, &ai);
	if (rc == 0)
		rc = check(ai, arg);
	if (rc && raw && gw_auth_pkg_text(rc))
		grpc_call_finish(call, GRPC_STATUS_UNKNOWN, gw_auth_pkg_text(rc));
	else if (rc)
		gw_auth_refuse(s, call, rc);
	if (rc)
		return false;
	if (revision)
		*revision = ai->revision;
	return true;
}

bool gw_auth_check(struct gw_server *s, struct grpc_call *call,
		   int (*check)(const struct gw_auth_info *ai, const void *arg), const void *arg,
		   uint64_t *revision)
{
	return gw_auth_run(s, call, check, arg, revision, false);
}

int gw_auth_range(const struct gw_auth_info *ai, const void *r)
{
	return auth_check_range(ai->cache, ai->user, ai->revision, r);
}

static int gw_auth_check_admin(const struct gw_auth_info *ai, const void *arg)
{
	(void)arg;
	return auth_check_admin(ai->cache, ai->user);
}

bool gw_auth_admin(struct gw_server *s, struct grpc_call *call)
{
	return gw_auth_run(s, call, gw_auth_check_admin, NULL, NULL, false);
}

bool gw_auth_maint(struct gw_server *s, struct grpc_call *call)
{
	return gw_auth_run(s, call, gw_auth_check_admin, NULL, NULL, true);
}
