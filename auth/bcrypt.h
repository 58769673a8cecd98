/*
 * bcrypt as etcd's auth store uses it (golang.org/x/crypto/bcrypt):
 * hashes written as "$2a$<cost>$<22 salt><31 hash>" (60 characters),
 * computed with the correct Blowfish key schedule Go's package uses, and
 * checks of any "$2a$", "$2b$" or "$2y$" hash, so that a db written by
 * etcd keeps its passwords in cetcd and the reverse.
 *
 * libxcrypt computes it (its "$2b$" is Go's algorithm; its "$2a$" differs
 * for some passwords holding the byte 0xff, so hashes are made and
 * checked as "$2b$" and named "$2a$" as Go names them). Hashing costs
 * 2^cost Blowfish key setups (about 50-80 ms at etcd's default cost 10):
 * never on an event loop.
 */
#ifndef CETCD_AUTH_BCRYPT_H
#define CETCD_AUTH_BCRYPT_H

#include <stdbool.h>
#include <stddef.h>

/* Go's bcrypt.MinCost, MaxCost and DefaultCost (etcd's --bcrypt-cost). */
#define BCRYPT_MIN_COST 4
#define BCRYPT_MAX_COST 31
#define BCRYPT_DEFAULT_COST 10
/* etcd's NewAuthStore: a --bcrypt-cost out of [BCRYPT_MIN_COST,
 * BCRYPT_MAX_COST] is taken as BCRYPT_DEFAULT_COST (etcd warns "use default
 * bcrypt cost instead of the invalid given cost" and starts). */
static inline int bcrypt_cost_or_default(unsigned long long cost)
{
	return cost < BCRYPT_MIN_COST || cost > BCRYPT_MAX_COST ? BCRYPT_DEFAULT_COST : (int)cost;
}

/* A hash's length, and the buffer that holds it with its NUL. */
#define BCRYPT_HASH_LEN 60
#define BCRYPT_HASH_SIZE (BCRYPT_HASH_LEN + 1)

/*
 * Hashes the len bytes of pw with a random salt at cost into out (NUL
 * terminated, BCRYPT_HASH_LEN characters). As Go's bcrypt, only the first
 * 72 bytes of pw count, and a cost below BCRYPT_MIN_COST is taken as
 * BCRYPT_DEFAULT_COST. Thread-safe. Returns 0; -EINVAL when cost is above
 * BCRYPT_MAX_COST or pw holds a NUL byte; -ENOMEM; -EIO when libxcrypt
 * failed (no randomness).
 */
int bcrypt_hash(const char *pw, size_t len, int cost, char out[BCRYPT_HASH_SIZE]);

/* Whether the len bytes of pw match hash (hash_len bytes, a bcrypt hash
 * of any of the three prefixes). False for anything that is not one, and
 * when out of memory. Thread-safe. */
bool bcrypt_verify(const char *pw, size_t len, const char *hash, size_t hash_len);

/* Whether hash (hash_len bytes) has a bcrypt hash's form: prefix, a two
 * digit cost in range, 53 characters of bcrypt's base64. */
bool bcrypt_is_hash(const char *hash, size_t hash_len);

#endif
