/*
 * The permission cache: who may read and write which keys, as etcd 3.4's
 * auth store decides it (its range permission cache and isOpPermitted),
 * built once from the db's auth buckets and then asked any
 * number of times without allocating.
 *
 * For every user it holds the permissions of all its roles merged into
 * two sets of sorted, disjoint, non-adjacent intervals [begin, end), one
 * for READ and one for WRITE (a READWRITE permission goes into both), the
 * names of its roles and whether one of them is "root"; and for the db,
 * whether auth is enabled and the auth store's revision.
 *
 * Keys compare as etcd's adt.BytesAffineComparable: bytewise, with the
 * empty string above every other. A permission grants:
 *   range_end empty       the one key: [key, key + "\0")
 *   range_end "\0"        every key from key on: [key, no end)
 *   otherwise             [key, range_end)
 * A permission whose begin is not below its end grants nothing: its key is
 * empty (etcdctl sends "\0" for the empty key for that reason), or its
 * range_end is at or below its key. A request range whose range_end is at
 * or below its key asks for its key alone.
 *
 * Where every permission is well-formed and the range is not inverted,
 * the answers are etcd's (tests/auth/perm_diff.sh compares them with
 * etcd's own interval tree). Elsewhere etcd's answer depends on the shape
 * of its red-black tree (the node of an inverted permission, or an
 * inverted range, can lead its search away from a permission that covers
 * the range), and etcd refuses some checks that the well-formed
 * permissions grant (about 3% of inverted ranges and 1% of checks under
 * an inverted permission in that test); cetcd grants them. An inverted
 * range reads and deletes nothing either way.
 *
 * The cache is built from the records of the db's buckets (auth:
 * authEnabled, one byte 1 or 0, and authRevision, 8 bytes big-endian;
 * authUsers: name -> authpb.User; authRoles: name -> authpb.Role), given
 * one by one to a builder; stored/auth_db.h reads them from a db txn. A
 * value that is not there is empty: auth disabled, revision 0, no users,
 * no roles. A user's role that does not exist grants nothing, as in etcd.
 *
 * Errors: the builder's functions return 0 or
 *   -EUCLEAN   a record does not decode (the message, errmsg_get(rc), names
 *              the bucket and key and says what is wrong), or two users or
 *              roles have one name, or a user's name is not its key;
 *   -EFBIG     the permissions hold more than 4 GiB of keys;
 *   -ENOMEM.
 *
 * Memory: built through the auth component's hook (alloc.h); a cache does
 * not refer to the records it was built from, is immutable and may be
 * read by any number of threads at once.
 */
#ifndef CETCD_AUTH_PERM_H
#define CETCD_AUTH_PERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum auth_perm_type {
	AUTH_PERM_READ = 0,
	AUTH_PERM_WRITE = 1,
};

/* etcd's authpb.Permission.Type values. */
#define AUTH_PB_READ 0
#define AUTH_PB_WRITE 1
#define AUTH_PB_READWRITE 2

/* The name of the role that may do anything. */
#define AUTH_ROOT_ROLE "root"

struct auth_cache;
struct auth_user;    /* one user of a cache, valid as long as the cache */
struct auth_builder; /* a cache being built, record by record */

void auth_cache_free(struct auth_cache *c);  /* NULL is accepted */

/* A builder takes records in any order (roles, users, the auth
 * bucket's values) and copies what it keeps. After an error it refuses
 * further records; auth_builder_finish frees the builder in every case
 * (*out is then freed with auth_cache_free), auth_builder_abort frees it
 * without building. auth_builder_state takes the auth bucket's values
 * authEnabled and authRevision (each NULL when absent). */
int auth_builder_begin(struct auth_builder **out);
int auth_builder_state(struct auth_builder *b, const uint8_t *enabled, size_t enabled_len,
		       const uint8_t *revision, size_t revision_len);
int auth_builder_role(struct auth_builder *b, const void *key, size_t key_len,
		      const uint8_t *val, size_t val_len);
int auth_builder_user(struct auth_builder *b, const void *key, size_t key_len,
		      const uint8_t *val, size_t val_len);
int auth_builder_finish(struct auth_builder *b, struct auth_cache **out);
void auth_builder_abort(struct auth_builder *b);

/* Records that the entry key of bucket does not hold what it should
 * (what) in the error slot, naming both; returns -EUCLEAN. */
int auth_record_corrupt(const char *bucket, const void *key, size_t key_len, const char *what);

bool auth_cache_enabled(const struct auth_cache *c);
uint64_t auth_cache_revision(const struct auth_cache *c);
size_t auth_cache_user_count(const struct auth_cache *c);

/* The user named name[0..len), or NULL. O(log users). */
const struct auth_user *auth_cache_user(const struct auth_cache *c, const void *name, size_t len);

/* Whether u has the root role. */
bool auth_user_is_root(const struct auth_user *u);
/* Whether u has the role named role[0..len) (etcd's HasRole). O(roles of u). */
bool auth_user_has_role(const struct auth_cache *c, const struct auth_user *u, const void *role,
			size_t len);
/* Number of merged intervals of u's set t (for tests and figures). */
size_t auth_user_interval_count(const struct auth_user *u, enum auth_perm_type t);

/*
 * Whether u's permissions of type t cover the request range key, range_end
 * as etcd's isRangeOpPermitted decides it, without the root role (see
 * auth_user_is_root): range_end empty is the one key; "\0" every key from
 * key on; otherwise [key, range_end); a range_end at or below key asks
 * for key alone. An empty key is never covered. O(log intervals of u), no
 * allocation.
 */
bool auth_user_permitted(const struct auth_cache *c, const struct auth_user *u,
			 enum auth_perm_type t, const uint8_t *key, size_t key_len,
			 const uint8_t *range_end, size_t range_end_len);

#endif
