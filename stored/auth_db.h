/*
 * The auth buckets of the db, the read side: the permission cache
 * (auth/perm.h) of the state a txn sees, for gatewayd (before a read or a
 * proposal) and stored (at apply).
 */
#ifndef CETCD_STORED_AUTH_DB_H
#define CETCD_STORED_AUTH_DB_H

#include "auth/perm.h"
#include "stored/btree/btree.h"

/*
 * Builds the cache of what the txn t (read or write) holds in the buckets
 * auth (authEnabled, authRevision), authRoles and authUsers; a missing
 * bucket or key is empty. *out, freed with auth_cache_free, does not refer
 * to the txn. Returns 0, the builder's errors (perm.h: -EUCLEAN for a
 * record that does not decode, -EFBIG, -ENOMEM), -EUCLEAN for a bucket
 * where a value should be or the reverse, or the B+tree's read errors.
 */
int auth_db_load(struct btree_txn *t, struct auth_cache **out);

#endif
