/*
 * The auth store, as etcd 3.4 keeps it (auth/store.go) and applies its
 * requests (etcdserver/apply.go, apply_auth.go): users and roles in the
 * db's "authUsers" and "authRoles" buckets (name -> authpb.User or
 * authpb.Role bytes, as etcd writes them), the enabled flag
 * ("authEnabled", one byte) and the auth revision ("authRevision", 8 bytes
 * big-endian) in the "auth" bucket, so that a db or snapshot moves between
 * etcd and cetcd with its users.
 *
 * Each change that etcd counts bumps the auth revision (every user and
 * role change that changed something, and AuthDisable; not AuthEnable,
 * not a role granted twice). A user's roles stay sorted; a role's
 * permissions are sorted by key, one per (key, range_end), a grant of a
 * pair it holds changing its type. The root user and role are special
 * as etcd makes them: AuthEnable needs the user "root" holding the role
 * "root" (which need not exist as a role); while auth is enabled the root
 * user cannot be deleted nor lose the root role, and the root role
 * cannot be deleted. While auth is enabled the management requests need
 * a user holding the root role in the request's header (UserGet of
 * oneself and RoleGet of a role one holds excepted).
 *
 * Passwords: a UserAdd or UserChangePassword that carries etcd 3.5's
 * hashedPassword stores it; one without (an etcd 3.4 member's proposal)
 * is hashed here at the store's bcrypt cost (auth/bcrypt.h).
 */
#ifndef CETCD_STORED_AUTH_H
#define CETCD_STORED_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "auth/error.h"
#include "etcdserverpb/raft_internal.pb-c.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "stored/btree/arena.h"

struct btree_txn;
struct shm_region;
struct auth_token_opts;
struct stored_auth_check;

/* The auth store's state beside its buckets, as of the consistent index. */
struct stored_auth {
	bool enabled;       /* authEnabled is 1 */
	uint64_t revision;  /* authRevision */
	int bcrypt_cost;    /* for passwords hashed at apply (BCRYPT_MIN_COST..MAX) */
	/* --auth-token's provider (auth/token.h); NULL: etcd's nop provider
	 * (Authenticate answers "authentication failed") */
	const struct auth_token_opts *tokens;
	/* the region whose simple-token table (shm/tokens.h) an Authenticate
	 * adds its token to, and a UserDelete, UserChangePassword or
	 * AuthDisable takes tokens from; NULL: none */
	struct shm_region *region;
	/* the permission cache the admin checks read (stored/auth_check.h),
	 * kept in step with the buckets; NULL: one is built from the write
	 * txn for each request that needs it */
	const struct stored_auth_check *check;
};

/* Request errors: etcd's (auth/error.h), and the apply's own where etcd
 * would stop (a panic, or a failure inside Go's bcrypt). */
enum stored_auth_error {
	AUTH_ERR_CORRUPT = -5215,       /* DATA_LOSS: a record does not decode */
	AUTH_ERR_NAME_TOO_LONG = -5216, /* INVALID_ARGUMENT: over bbolt's key limit */
	AUTH_ERR_HASH = -5217,          /* UNKNOWN: bcrypt failed */
	/* Authenticate's token could not be made (etcd: its provider's error) */
	AUTH_ERR_TOKEN_TABLE = -5230,   /* RESOURCE_EXHAUSTED: no room for a simple token */
	AUTH_ERR_VERIFY_ONLY = -5231,   /* UNKNOWN: a JWT key that cannot sign */
	AUTH_ERR_SIGN = -5232,          /* UNKNOWN: OpenSSL failed to sign */
};
bool stored_auth_is_request_error(int err);
const char *stored_auth_strerror(int err);
int stored_auth_grpc_code(int err);

/* Loads the enabled flag and the revision through t (missing: disabled,
 * revision 0), keeping au->bcrypt_cost. Returns 0 or the B+tree's error. */
int stored_auth_load(struct btree_txn *t, struct stored_auth *au);

/* Whether req is one of the auth store's requests (Authenticate,
 * AuthEnable, AuthDisable, the user and role requests). */
bool stored_auth_handles(const Etcdserverpb__InternalRaftRequest *req);

/*
 * Applies req (stored_auth_handles) through the write txn t, the Raft
 * entry at index. An Authenticate's token is what au->tokens provides, as
 * etcd's providers make it at apply: a simple token "<its prefix>.<index>"
 * (added to the table with --auth-token-ttl), a JWT signed with the key,
 * or none. On 0, *resp (in arena a) is
 * etcd's response and *hdr the place of its header, for the caller to
 * fill. Returns 0, an AUTH_ERR_* (nothing changed), or an error that
 * fails the batch (-ENOMEM, the B+tree's).
 */
int stored_auth_apply(struct btree_txn *t, struct stored_auth *au,
		      const Etcdserverpb__InternalRaftRequest *req, uint64_t index,
		      struct arena *a, ProtobufCMessage **resp,
		      Etcdserverpb__ResponseHeader ***hdr);

#endif
