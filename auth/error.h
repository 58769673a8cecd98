/*
 * The auth errors of etcd 3.4 as cetcd's codes: one table for the checker
 * (check.h), the apply of the auth requests and the tokens, so that each
 * code has one text and one gRPC status, as etcd's package rpctypes pairs
 * them.
 *
 * Each code, its gRPC status and the text clients see:
 *   AUTH_ERR_ROOT_USER_NOT_EXIST     FAILED_PRECONDITION (9)
 *        "etcdserver: root user does not exist"
 *   AUTH_ERR_ROOT_ROLE_NOT_EXIST     FAILED_PRECONDITION (9)
 *        "etcdserver: root user does not have root role"
 *   AUTH_ERR_USER_ALREADY_EXIST      FAILED_PRECONDITION (9) "etcdserver: user name already exists"
 *   AUTH_ERR_USER_EMPTY              INVALID_ARGUMENT (3) "etcdserver: user name is empty"
 *   AUTH_ERR_USER_NOT_FOUND          FAILED_PRECONDITION (9) "etcdserver: user name not found"
 *   AUTH_ERR_ROLE_ALREADY_EXIST      FAILED_PRECONDITION (9) "etcdserver: role name already exists"
 *   AUTH_ERR_ROLE_NOT_FOUND          FAILED_PRECONDITION (9) "etcdserver: role name not found"
 *   AUTH_ERR_ROLE_EMPTY              INVALID_ARGUMENT (3) "etcdserver: role name is empty"
 *   AUTH_ERR_AUTH_FAILED             INVALID_ARGUMENT (3)
 *        "etcdserver: authentication failed, invalid user ID or password"
 *   AUTH_ERR_PERMISSION_DENIED       PERMISSION_DENIED (7) "etcdserver: permission denied"
 *   AUTH_ERR_ROLE_NOT_GRANTED        FAILED_PRECONDITION (9)
 *        "etcdserver: role is not granted to the user"
 *   AUTH_ERR_PERMISSION_NOT_GRANTED  FAILED_PRECONDITION (9)
 *        "etcdserver: permission is not granted to the role"
 *   AUTH_ERR_AUTH_NOT_ENABLED        FAILED_PRECONDITION (9)
 *        "etcdserver: authentication is not enabled"
 *   AUTH_ERR_INVALID_AUTH_MGMT       INVALID_ARGUMENT (3) "etcdserver: invalid auth management"
 *   AUTH_ERR_OLD_REVISION            INVALID_ARGUMENT (3)
 *        "etcdserver: revision of auth store is old"
 *   AUTH_ERR_INVALID_AUTH_TOKEN      UNAUTHENTICATED (16) "etcdserver: invalid auth token"
 *
 * -5215 to -5217 are left for codes of the apply of the auth requests.
 */
#ifndef CETCD_AUTH_ERROR_H
#define CETCD_AUTH_ERROR_H

#include <stdbool.h>

enum auth_err {
	AUTH_ERR_ROOT_USER_NOT_EXIST = -5201,
	AUTH_ERR_ROOT_ROLE_NOT_EXIST = -5202,
	AUTH_ERR_USER_ALREADY_EXIST = -5203,
	AUTH_ERR_USER_EMPTY = -5204,
	AUTH_ERR_USER_NOT_FOUND = -5205,
	AUTH_ERR_ROLE_ALREADY_EXIST = -5206,
	AUTH_ERR_ROLE_NOT_FOUND = -5207,
	AUTH_ERR_ROLE_EMPTY = -5208,
	AUTH_ERR_AUTH_FAILED = -5209,
	AUTH_ERR_PERMISSION_DENIED = -5210,
	AUTH_ERR_ROLE_NOT_GRANTED = -5211,
	AUTH_ERR_PERMISSION_NOT_GRANTED = -5212,
	AUTH_ERR_AUTH_NOT_ENABLED = -5213,
	AUTH_ERR_INVALID_AUTH_MGMT = -5214,
	AUTH_ERR_OLD_REVISION = -5218,
	AUTH_ERR_INVALID_AUTH_TOKEN = -5219,
};

/* Whether err is one of the AUTH_ERR_* above. */
bool auth_is_error(int err);
/* The text a client sees for an AUTH_ERR_*; strerror(-err) for any other
 * code. Static storage. */
const char *auth_strerror(int err);
/* The gRPC status code of an AUTH_ERR_*; UNKNOWN (2) for any other code,
 * as etcd answers an error it does not map. */
int auth_grpc_code(int err);

#endif
