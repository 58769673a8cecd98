/*
 * Fuzz target: building the permission cache (auth/perm.h) from the auth
 * buckets' records, whose bytes come from a db file that may come from
 * anywhere. The input is a list of records: a byte choosing the bucket
 * (auth, authRoles, authUsers), a byte of key length, the key, two bytes
 * (big-endian) of value length, the value (of the auth bucket, only
 * authEnabled and authRevision count). A build either succeeds, and
 * the cache then answers questions on keys taken from the input, or fails
 * with -EUCLEAN (with a message) or -EFBIG; it never crashes and leaves
 * nothing allocated.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/alloc.h"
#include "auth/check.h"
#include "auth/perm.h"
#include "base/log/errmsg.h"

#include "auth_util.h"

/* The records of the input; stops at a cut one. */
struct rec {
	unsigned bucket;
	const uint8_t *key, *val;
	size_t key_len, val_len;
};

static size_t next_rec(const uint8_t *d, size_t size, size_t at, struct rec *r)
{
	if (at + 2 > size)
		return 0;
	r->bucket = d[at] % 3;
	r->key_len = d[at + 1];
	r->key = d + at + 2;
	at += 2 + r->key_len;
	if (at + 2 > size)
		return 0;
	r->val_len = (size_t)d[at] << 8 | d[at + 1];
	r->val = d + at + 2;
	at += 2 + r->val_len;
	return at <= size ? at : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct auth_builder *b;
	struct auth_cache *c = NULL;
	struct rec r;
	int rc = 0;

	auth_set_allocator(auth_util_alloc, auth_util_free);
	if (auth_builder_begin(&b))
		abort();
	for (size_t at = 0; (at = next_rec(data, size, at, &r)) != 0;) {
		if (r.bucket == 0 && r.key_len == 11 && !memcmp(r.key, "authEnabled", 11))
			rc = auth_builder_state(b, r.val, r.val_len, NULL, 0);
		else if (r.bucket == 0 && r.key_len == 12 && !memcmp(r.key, "authRevision", 12))
			rc = auth_builder_state(b, NULL, 0, r.val, r.val_len);
		else if (r.bucket == 0)
			rc = 0; /* other keys of the auth bucket are not read */
		else if (r.bucket == 1)
			rc = auth_builder_role(b, r.key, r.key_len, r.val, r.val_len);
		else
			rc = auth_builder_user(b, r.key, r.key_len, r.val, r.val_len);
		if (rc)
			break;
	}
	if (rc == 0)
		rc = auth_builder_finish(b, &c);
	else
		auth_builder_abort(b);
	if (rc) {
		if ((rc != -EUCLEAN && rc != -EFBIG) || !strstr(errmsg_get(rc), "auth: ") || c)
			abort();
	} else {
		/* every user of the input is there; ask it about every key */
		for (size_t at = 0; (at = next_rec(data, size, at, &r)) != 0;) {
			if (r.bucket != 2)
				continue;
			const struct auth_user *u = auth_cache_user(c, r.key, r.key_len);
			if (!u)
				abort();
			for (size_t k = 0; (k = next_rec(data, size, k, &r)) != 0;)
				for (int t = 0; t < 2; t++) {
					bool key = auth_user_permitted(c, u, (enum auth_perm_type)t,
								       r.key, r.key_len, NULL, 0);
					bool range = auth_user_permitted(
						c, u, (enum auth_perm_type)t, r.key, r.key_len,
						r.val, r.val_len < 8 ? r.val_len : 8);
					/* a range from a key holds the key */
					if (range && r.key_len && !key)
						abort();
				}
		}
		auth_cache_free(c);
	}
	auth_set_allocator(NULL, NULL);
	if (auth_util_live != 0)
		abort();
	return 0;
}
