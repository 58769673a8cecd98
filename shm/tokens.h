/*
 * The simple-token table: the member's live simple auth tokens (etcd's
 * tokenSimple map and its TTL keeper, auth/simple_token.go), in the
 * region so that every gatewayd reads what stored wrote.
 *
 * Writers and readers:
 *   - stored (the holder of the stored role) is the only writer of an
 *     entry's contents: it adds a token when it applies an Authenticate,
 *     removes every token of a user on UserDelete and UserChangePassword,
 *     removes them all when auth is disabled, and reaps expired ones.
 *   - any process looks a token up; a lookup that finds it pushes its
 *     expiry to now + TTL (etcd resets a simple token's TTL on each use).
 *
 * Each entry is a seqlock (invariant 13, docs/invariants.md): stored makes
 * the entry's sequence odd, writes, and makes it even again; a reader
 * copies the entry between two loads of the sequence and uses the copy
 * only when both are equal and even. A reader's one write is a single
 * compare-and-swap of the expiry word, which only ever moves it forward:
 * a process that dies anywhere in a lookup leaves nothing half done. A
 * stored that dies mid-write leaves an odd sequence: readers treat that
 * entry as unreadable (-EAGAIN) and the next stored clears it
 * (shm_tokens_recover) when it takes the role, before it writes.
 *
 * Size: SHM_TOKENS_ENTRIES entries, open addressing; a token lives in one
 * of the SHM_TOKENS_PROBE entries after its hash. When all of those hold
 * live tokens the table is full for it: shm_tokens_add answers -ENOSPC.
 *
 * Times are the monotonic clock's milliseconds (clock_now_ms,
 * base/clock/clock.h), the same clock in every process of the machine.
 */
#ifndef CETCD_SHM_TOKENS_H
#define CETCD_SHM_TOKENS_H

#include <stddef.h>
#include <stdint.h>

struct shm_region;

#define SHM_TOKENS_ENTRIES 8192u /* a power of two */
#define SHM_TOKENS_PROBE 32u
#define SHM_TOKEN_MAX 48u       /* longest token (a simple token is at most 37) */
#define SHM_TOKEN_USER_MAX 240u /* longest user name */

/* The region bytes the table takes (shm/region.c lays it out). */
size_t shm_tokens_bytes(void);

/*
 * stored only. Adds token -> user, expiring at now_ms + ttl_ms. Returns 0,
 * or
 *   -EINVAL        an empty token or user name
 *   -ENAMETOOLONG  token over SHM_TOKEN_MAX or user over SHM_TOKEN_USER_MAX
 *   -EEXIST        the token is live already (etcd panics on this)
 *   -ENOSPC        every entry the token may live in holds a live token
 * with the reason in errmsg_get.
 */
int shm_tokens_add(struct shm_region *r, const char *token, size_t token_len, const char *user,
		   size_t user_len, uint64_t now_ms, uint64_t ttl_ms);

/* stored only. Removes every token of user (etcd's invalidateUser);
 * returns how many. */
size_t shm_tokens_invalidate_user(struct shm_region *r, const char *user, size_t user_len);

/* stored only. Removes every token expired at now_ms; returns how many. */
size_t shm_tokens_reap(struct shm_region *r, uint64_t now_ms);

/* stored only. Removes every token (auth disabled). */
void shm_tokens_clear(struct shm_region *r);

/* stored only, when it takes the stored role: clears each entry a dead
 * stored left mid-write; returns how many. */
size_t shm_tokens_recover(struct shm_region *r);

/*
 * Any process. Looks token up; when it is live at now_ms, copies its user
 * name to user (cap bytes; SHM_TOKEN_USER_MAX is always enough), sets
 * *user_len and pushes its expiry to now_ms + ttl_ms. Returns 0, or
 *   -ENOENT  no such token, or it expired
 *   -EAGAIN  an entry it may be in was left mid-write by a stored that
 *            died (until the next stored recovers it), or stays mid-write
 *            for longer than a live writer takes
 *   -ENOSPC  cap is too small for the user name
 * Never blocks on a writer for long and never writes an entry's contents.
 */
int shm_tokens_lookup(struct shm_region *r, const char *token, size_t token_len, uint64_t now_ms,
		      uint64_t ttl_ms, char *user, size_t cap, size_t *user_len);

/* Tests only: fn runs in the middle of every entry write (half the words
 * written, the sequence odd), so that a test can kill the writer there.
 * NULL: none. */
void shm_tokens_set_write_hook(void (*fn)(void));

#endif
