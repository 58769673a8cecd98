/*
 * Who makes a call, and what the auth store lets them do, in gatewayd (etcd
 * 3.4's EtcdServer.AuthInfoFromCtx and the checks of its API layer).
 *
 * The permission cache (auth/perm.h) is this gateway's own, built from its
 * read of the db: gw_auth_turn, once per loop turn, compares stored's
 * published auth_enabled and auth_revision (shm/status.h) with what the
 * cache was built at, and builds it again only when they moved. With auth
 * disabled a call costs the load and compare of gw_auth_enabled (server.h).
 *
 * A call's auth info, while auth is enabled:
 *   - the `token` metadata (or `authorization`, which the JSON gateway
 *     sends, as grpc-gateway forwards the Authorization header): a simple
 *     token is looked up in the region's table (shm/tokens.h, its TTL
 *     pushed on) and carries the auth store's current revision; a JWT is
 *     verified (auth/jwt.h) and carries the revision of its claims. A
 *     token that resolves to nobody is etcd's ErrInvalidAuthToken;
 *   - without a token, with --client-cert-auth: the CN of the verified
 *     client certificate, at the current revision (etcd's
 *     AuthInfoFromTLS), unless the call came through a gRPC gateway
 *     (`grpcgateway-accept` metadata);
 *   - otherwise no user (revision 0), which the checks refuse with
 *     "user name is empty".
 * A call's info is resolved once per turn (the JWT's signature is checked
 * once however many steps ask).
 */
#ifndef CETCD_GATEWAYD_AUTH_CALL_H
#define CETCD_GATEWAYD_AUTH_CALL_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/tokens.h"

struct auth_cache;
struct grpc_call;
struct gw_server;

/* A call's auth info. user is "" when the call names nobody. */
struct gw_auth_info {
	const struct auth_cache *cache; /* the gateway's, valid for the turn */
	uint64_t revision;              /* 0: no user */
	char user[SHM_TOKEN_USER_MAX + 1];
};

/* The gateway's auth state (struct gw_server's authz). */
struct gw_authz {
	bool enabled;                  /* auth enabled, as of this turn */
	bool load_failed;              /* logged; built again next turn */
	uint64_t status_version;       /* stored's record last looked at */
	uint64_t revision;             /* the published auth revision */
	struct auth_cache *cache;      /* built at revision (owned); NULL
					* while auth is disabled */
	uint64_t memo_call;            /* the call memo holds (grpc_call_id),
					* this turn only; 0: none */
	int memo_rc;
	struct gw_auth_info memo;
};

/* Once per turn, before the turn's calls: looks at stored's record and
 * builds the cache again when the auth store moved. */
void gw_auth_turn(struct gw_server *s);
void gw_auth_fini(struct gw_server *s);

/*
 * The auth info of call, when auth is enabled (*out is then valid for the
 * turn). Returns 0; AUTH_ERR_INVALID_AUTH_TOKEN; -EAGAIN when the cache
 * could not be built or the token's entry is being rewritten (answered as
 * gw_read_refuse answers it: "not capable", which clients retry).
 * Without auth, 0 with an info that names nobody and no cache.
 */
int gw_auth_of(struct gw_server *s, struct grpc_call *call, const struct gw_auth_info **out);

/* Finishes call with rc: an AUTH_ERR_* with etcd's status and text, any
 * other code as gw_read_refuse. */
void gw_auth_refuse(struct gw_server *s, struct grpc_call *call, int rc);

/* etcd's check after a serialized read: a token issued at another
 * revision of the auth store than the one the read saw (read_revision,
 * the published auth_revision of the read's root) is
 * AUTH_ERR_OLD_REVISION; otherwise 0. */
int gw_auth_after_read(const struct gw_auth_info *ai, uint64_t read_revision);

/*
 * Whether call may go on: true at once while auth is disabled; otherwise
 * its auth info is resolved and check(info, arg) asked (an auth_check_*
 * of check.h, 0 or an AUTH_ERR_*); a refusal answers the call and gives
 * false. *revision (unless NULL) gets the auth revision of the caller's
 * token (0 without auth), for gw_auth_after_read.
 */
bool gw_auth_check(struct gw_server *s, struct grpc_call *call,
		   int (*check)(const struct gw_auth_info *ai, const void *arg), const void *arg,
		   uint64_t *revision);

/* A check for gw_auth_check: READ over the range of r, a RangeRequest
 * (auth_check_range). */
int gw_auth_range(const struct gw_auth_info *ai, const void *r);

/*
 * An admin-only call (etcd's IsAdminPermitted from the API layer): true
 * when it may go on; otherwise the call was answered. gw_auth_admin
 * answers etcd's mapped errors (the membership changes: "etcdserver:
 * permission denied"); gw_auth_maint the auth package's errors as they
 * are, gRPC Unknown "auth: permission denied", as etcd's
 * authMaintenanceServer answers Defragment, Snapshot, Hash and HashKV.
 */
bool gw_auth_admin(struct gw_server *s, struct grpc_call *call);
bool gw_auth_maint(struct gw_server *s, struct grpc_call *call);

#endif
