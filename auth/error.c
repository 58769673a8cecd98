/* The auth error table (see error.h). */
#include "auth/error.h"

#include <string.h>

#define AUTH_ERR_FIRST AUTH_ERR_ROOT_USER_NOT_EXIST
#define AUTH_ERR_LAST AUTH_ERR_INVALID_AUTH_TOKEN

/* gRPC status codes (grpc/codes). */
enum {
	AUTH_GRPC_UNKNOWN = 2,
	AUTH_GRPC_INVALID_ARGUMENT = 3,
	AUTH_GRPC_PERMISSION_DENIED = 7,
	AUTH_GRPC_FAILED_PRECONDITION = 9,
	AUTH_GRPC_UNAUTHENTICATED = 16,
};

struct auth_err_desc {
	int grpc_code;  /* 0: no error has this code */
	const char *text;
};

/* Indexed by AUTH_ERR_FIRST - err. */
static const struct auth_err_desc auth_err_descs[AUTH_ERR_FIRST - AUTH_ERR_LAST + 1] = {
	[AUTH_ERR_FIRST - AUTH_ERR_ROOT_USER_NOT_EXIST] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: root user does not exist" },
	[AUTH_ERR_FIRST - AUTH_ERR_ROOT_ROLE_NOT_EXIST] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: root user does not have root role" },
	[AUTH_ERR_FIRST - AUTH_ERR_USER_ALREADY_EXIST] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: user name already exists" },
	[AUTH_ERR_FIRST - AUTH_ERR_USER_EMPTY] = { AUTH_GRPC_INVALID_ARGUMENT,
		"etcdserver: user name is empty" },
	[AUTH_ERR_FIRST - AUTH_ERR_USER_NOT_FOUND] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: user name not found" },
	[AUTH_ERR_FIRST - AUTH_ERR_ROLE_ALREADY_EXIST] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: role name already exists" },
	[AUTH_ERR_FIRST - AUTH_ERR_ROLE_NOT_FOUND] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: role name not found" },
	[AUTH_ERR_FIRST - AUTH_ERR_ROLE_EMPTY] = { AUTH_GRPC_INVALID_ARGUMENT,
		"etcdserver: role name is empty" },
	[AUTH_ERR_FIRST - AUTH_ERR_AUTH_FAILED] = { AUTH_GRPC_INVALID_ARGUMENT,
		"etcdserver: authentication failed, invalid user ID or password" },
	[AUTH_ERR_FIRST - AUTH_ERR_PERMISSION_DENIED] = { AUTH_GRPC_PERMISSION_DENIED,
		"etcdserver: permission denied" },
	[AUTH_ERR_FIRST - AUTH_ERR_ROLE_NOT_GRANTED] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: role is not granted to the user" },
	[AUTH_ERR_FIRST - AUTH_ERR_PERMISSION_NOT_GRANTED] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: permission is not granted to the role" },
	[AUTH_ERR_FIRST - AUTH_ERR_AUTH_NOT_ENABLED] = { AUTH_GRPC_FAILED_PRECONDITION,
		"etcdserver: authentication is not enabled" },
	[AUTH_ERR_FIRST - AUTH_ERR_INVALID_AUTH_MGMT] = { AUTH_GRPC_INVALID_ARGUMENT,
		"etcdserver: invalid auth management" },
	[AUTH_ERR_FIRST - AUTH_ERR_OLD_REVISION] = { AUTH_GRPC_INVALID_ARGUMENT,
		"etcdserver: revision of auth store is old" },
	[AUTH_ERR_FIRST - AUTH_ERR_INVALID_AUTH_TOKEN] = { AUTH_GRPC_UNAUTHENTICATED,
		"etcdserver: invalid auth token" },
};

/* The entry of err, or NULL when err is no AUTH_ERR_*. */
static const struct auth_err_desc *auth_err_find(int err)
{
	if (err > AUTH_ERR_FIRST || err < AUTH_ERR_LAST)
		return NULL;
	const struct auth_err_desc *d = &auth_err_descs[AUTH_ERR_FIRST - err];
	return d->grpc_code ? d : NULL;
}

bool auth_is_error(int err)
{
	return auth_err_find(err) != NULL;
}

const char *auth_strerror(int err)
{
	const struct auth_err_desc *d = auth_err_find(err);
	return d ? d->text : strerror(err < 0 ? -err : err);
}

int auth_grpc_code(int err)
{
	const struct auth_err_desc *d = auth_err_find(err);
	return d ? d->grpc_code : AUTH_GRPC_UNKNOWN;
}
