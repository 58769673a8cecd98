/*
 * The simple-token table (see tokens.h).
 *
 * Ordering (barrier.h), per entry: stored makes `seq` odd, release fence,
 * stores the words, then stores the next even `seq` with release. A
 * reader loads `seq` with acquire, loads the words it needs, acquire
 * fence, loads `seq` again: equal and even means no write overlapped the
 * copy. The words are relaxed atomics, so a torn copy is a retry, never
 * undefined behaviour.
 *
 * `expires_ms` is outside that protocol: readers move it forward with a
 * compare-and-swap, and then load `seq` again: if it moved, stored
 * rewrote the entry meanwhile and the lookup reads it anew. A push meant
 * for a token that stored replaced in between lands on the new token;
 * it can only set now + TTL, which the new entry got itself a moment
 * before (both read the monotonic clock), so no token lives longer
 * than a TTL past its last use.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "base/clock/clock.h"
#include "base/crc32c/crc32c.h"
#include "shm/barrier.h"
#include "shm/layout.h"
#include "shm/tokens.h"

/* A reader that keeps finding an entry mid-write spins, then yields, and
 * gives up on it after TOKENS_READ_GIVE_UP_MS: stored is a few stores
 * from done even when preempted, so longer means it died there. Short,
 * as a gatewayd's event loop waits meanwhile. */
#define TOKENS_READ_SPINS 1000
#define TOKENS_READ_GIVE_UP_MS 10

#define TOKENS_DATA_WORDS 36 /* token bytes, then the user's */
_Static_assert(TOKENS_DATA_WORDS * 8 >= SHM_TOKEN_MAX + SHM_TOKEN_USER_MAX, "token data");
_Static_assert((SHM_TOKENS_ENTRIES & (SHM_TOKENS_ENTRIES - 1)) == 0, "power of two");

struct shm_token_entry {
	_Atomic uint64_t seq;        /* odd while stored writes the words */
	_Atomic uint64_t expires_ms; /* the token's end; moved forward by readers */
	_Atomic uint64_t hash;       /* the token's hash */
	_Atomic uint64_t lens;       /* token length | user length << 8; 0: empty */
	_Atomic uint64_t data[TOKENS_DATA_WORDS];
};
_Static_assert(sizeof(struct shm_token_entry) == 320, "token entry");

/* A copy of an entry's words, taken under its seqlock. */
struct token_copy {
	uint64_t seq;
	uint64_t hash;
	size_t token_len, user_len;
	union {
		uint64_t words[TOKENS_DATA_WORDS];
		char bytes[TOKENS_DATA_WORDS * 8];
	} data;
};

static void (*tokens_write_hook)(void);

void shm_tokens_set_write_hook(void (*fn)(void))
{
	tokens_write_hook = fn;
}

size_t shm_tokens_bytes(void)
{
	return (size_t)SHM_TOKENS_ENTRIES * sizeof(struct shm_token_entry);
}

static struct shm_token_entry *tokens_at(struct shm_region *r, uint32_t i)
{
	return (struct shm_token_entry *)(r->base + r->hdr->tokens_off) +
	       (i & (SHM_TOKENS_ENTRIES - 1));
}

/* now + ttl, saturating: a TTL too long for the clock never wraps into
 * the past. */
static uint64_t tokens_deadline(uint64_t now_ms, uint64_t ttl_ms)
{
	return ttl_ms > UINT64_MAX - now_ms ? UINT64_MAX : now_ms + ttl_ms;
}

static uint64_t tokens_hash(const char *token, size_t len)
{
	return crc32c_update(0, token, len) | (uint64_t)len << 32;
}

/* ---- the writer (stored) ---- */

static void tokens_write_begin(struct shm_token_entry *e)
{
	uint64_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);

	/* odd; a dead writer's odd value stays odd and is finished over */
	atomic_store_explicit(&e->seq, seq | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static void tokens_write_end(struct shm_token_entry *e)
{
	uint64_t seq = atomic_load_explicit(&e->seq, memory_order_relaxed);

	atomic_store_explicit(&e->seq, seq + 1, memory_order_release);
}

static void tokens_clear_entry(struct shm_token_entry *e)
{
	tokens_write_begin(e);
	atomic_store_explicit(&e->lens, 0, memory_order_relaxed);
	if (tokens_write_hook)
		tokens_write_hook();
	atomic_store_explicit(&e->hash, 0, memory_order_relaxed);
	atomic_store_explicit(&e->expires_ms, 0, memory_order_relaxed);
	tokens_write_end(e);
}

/* The writer's own view of an entry (it is the only one that changes the
 * words, so it reads them without the seqlock). */
static size_t tokens_own_lens(struct shm_token_entry *e, size_t *user_len)
{
	uint64_t lens = atomic_load_explicit(&e->lens, memory_order_relaxed);

	*user_len = (size_t)(lens >> 8);
	return (size_t)(lens & 0xff);
}

static bool tokens_own_live(struct shm_token_entry *e, uint64_t now_ms)
{
	size_t ul;

	if (atomic_load_explicit(&e->seq, memory_order_relaxed) & 1)
		return false; /* a dead writer's: reusable */
	return tokens_own_lens(e, &ul) &&
	       atomic_load_explicit(&e->expires_ms, memory_order_relaxed) >= now_ms;
}

/* Copies the entry's data words out (writer: no seqlock needed). */
static void tokens_own_data(struct shm_token_entry *e, struct token_copy *c)
{
	for (unsigned i = 0; i < TOKENS_DATA_WORDS; i++)
		c->data.words[i] = atomic_load_explicit(&e->data[i], memory_order_relaxed);
}

int shm_tokens_add(struct shm_region *r, const char *token, size_t token_len, const char *user,
		   size_t user_len, uint64_t now_ms, uint64_t ttl_ms)
{
	struct shm_token_entry *e, *free_entry = NULL;
	struct token_copy c;
	uint64_t h;
	size_t tl, ul;

	if (!token_len || !user_len)
		return shm_set_error(-EINVAL, "tokens: an empty %s", token_len ? "user name" : "token");
	if (token_len > SHM_TOKEN_MAX || user_len > SHM_TOKEN_USER_MAX)
		return shm_set_error(-ENAMETOOLONG, "tokens: a %s of %zu bytes is longer than the "
				     "token table holds (%u)", token_len > SHM_TOKEN_MAX ? "token" :
				     "user name", token_len > SHM_TOKEN_MAX ? token_len : user_len,
				     token_len > SHM_TOKEN_MAX ? SHM_TOKEN_MAX : SHM_TOKEN_USER_MAX);
	h = tokens_hash(token, token_len);
	for (uint32_t p = 0; p < SHM_TOKENS_PROBE; p++) {
		e = tokens_at(r, (uint32_t)h + p);
		if (!tokens_own_live(e, now_ms)) {
			if (!free_entry)
				free_entry = e;
			continue;
		}
		tl = tokens_own_lens(e, &ul);
		if (atomic_load_explicit(&e->hash, memory_order_relaxed) != h || tl != token_len)
			continue;
		tokens_own_data(e, &c);
		if (memcmp(c.data.bytes, token, token_len) == 0)
			return shm_set_error(-EEXIST, "tokens: token %.*s is in use already",
					     (int)token_len, token);
	}
	if (!free_entry)
		return shm_set_error(-ENOSPC, "tokens: the token table has no room for another "
				     "token near this one's hash (%u live tokens there); wait "
				     "for tokens to expire or lower --auth-token-ttl",
				     SHM_TOKENS_PROBE);
	memset(&c.data, 0, sizeof(c.data));
	memcpy(c.data.bytes, token, token_len);
	memcpy(c.data.bytes + token_len, user, user_len);
	e = free_entry;
	tokens_write_begin(e);
	atomic_store_explicit(&e->hash, h, memory_order_relaxed);
	atomic_store_explicit(&e->lens, token_len | (uint64_t)user_len << 8, memory_order_relaxed);
	for (unsigned i = 0; i < TOKENS_DATA_WORDS; i++) {
		atomic_store_explicit(&e->data[i], c.data.words[i], memory_order_relaxed);
		if (i == TOKENS_DATA_WORDS / 2 && tokens_write_hook)
			tokens_write_hook();
	}
	atomic_store_explicit(&e->expires_ms, tokens_deadline(now_ms, ttl_ms), memory_order_relaxed);
	tokens_write_end(e);
	return 0;
}

size_t shm_tokens_invalidate_user(struct shm_region *r, const char *user, size_t user_len)
{
	struct token_copy c;
	size_t n = 0, tl, ul;

	for (uint32_t i = 0; i < SHM_TOKENS_ENTRIES; i++) {
		struct shm_token_entry *e = tokens_at(r, i);
		tl = tokens_own_lens(e, &ul);
		if (!tl || ul != user_len)
			continue;
		tokens_own_data(e, &c);
		if (memcmp(c.data.bytes + tl, user, user_len) == 0) {
			tokens_clear_entry(e);
			n++;
		}
	}
	return n;
}

size_t shm_tokens_reap(struct shm_region *r, uint64_t now_ms)
{
	size_t n = 0, ul;

	for (uint32_t i = 0; i < SHM_TOKENS_ENTRIES; i++) {
		struct shm_token_entry *e = tokens_at(r, i);
		if (tokens_own_lens(e, &ul) &&
		    atomic_load_explicit(&e->expires_ms, memory_order_relaxed) < now_ms) {
			tokens_clear_entry(e);
			n++;
		}
	}
	return n;
}

void shm_tokens_clear(struct shm_region *r)
{
	size_t ul;

	for (uint32_t i = 0; i < SHM_TOKENS_ENTRIES; i++) {
		struct shm_token_entry *e = tokens_at(r, i);
		if (tokens_own_lens(e, &ul) || (atomic_load_explicit(&e->seq, memory_order_relaxed) & 1))
			tokens_clear_entry(e);
	}
}

size_t shm_tokens_recover(struct shm_region *r)
{
	size_t n = 0;

	for (uint32_t i = 0; i < SHM_TOKENS_ENTRIES; i++) {
		struct shm_token_entry *e = tokens_at(r, i);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) & 1) {
			tokens_clear_entry(e);
			n++;
		}
	}
	return n;
}

/* ---- readers (any process) ---- */

/*
 * Copies e under its seqlock: all of it when its hash and token length
 * are h and token_len, else only those. 0, or -EAGAIN when it stayed
 * mid-write past TOKENS_READ_GIVE_UP_MS.
 */
static int tokens_read(struct shm_token_entry *e, uint64_t h, size_t token_len,
		       struct token_copy *c)
{
	int64_t give_up = 0;
	uint64_t s2, lens;
	unsigned tries;

	for (tries = 0;; tries++) {
		if (tries == TOKENS_READ_SPINS) {
			give_up = clock_now_ms() + TOKENS_READ_GIVE_UP_MS;
		} else if (tries > TOKENS_READ_SPINS) {
			if (clock_now_ms() > give_up)
				return -EAGAIN;
			sched_yield();
		} else if (tries) {
			shm_cpu_relax();
		}
		c->seq = atomic_load_explicit(&e->seq, memory_order_acquire);
		if (c->seq & 1)
			continue;
		c->hash = atomic_load_explicit(&e->hash, memory_order_relaxed);
		lens = atomic_load_explicit(&e->lens, memory_order_relaxed);
		c->token_len = (size_t)(lens & 0xff);
		c->user_len = (size_t)(lens >> 8);
		if (c->hash == h && c->token_len == token_len && c->user_len <= SHM_TOKEN_USER_MAX) {
			unsigned words = (unsigned)((c->token_len + c->user_len + 7) / 8);
			for (unsigned i = 0; i < words && i < TOKENS_DATA_WORDS; i++)
				c->data.words[i] = atomic_load_explicit(&e->data[i],
									memory_order_relaxed);
		}
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&e->seq, memory_order_relaxed);
		if (c->seq == s2)
			return 0;
	}
}

int shm_tokens_lookup(struct shm_region *r, const char *token, size_t token_len, uint64_t now_ms,
		      uint64_t ttl_ms, char *user, size_t cap, size_t *user_len)
{
	uint64_t h = tokens_hash(token, token_len), exp, want = tokens_deadline(now_ms, ttl_ms);
	bool stuck = false;
	struct token_copy c;

	*user_len = 0;
	if (!token_len || token_len > SHM_TOKEN_MAX)
		return -ENOENT;
	for (uint32_t p = 0; p < SHM_TOKENS_PROBE; p++) {
		struct shm_token_entry *e = tokens_at(r, (uint32_t)h + p);
again:
		if (tokens_read(e, h, token_len, &c)) {
			stuck = true;
			continue;
		}
		if (c.hash != h || c.token_len != token_len ||
		    memcmp(c.data.bytes, token, token_len) != 0)
			continue;
		exp = atomic_load_explicit(&e->expires_ms, memory_order_acquire);
		if (exp < now_ms)
			continue; /* expired: stored reaps it */
		while (exp < want &&
		       !atomic_compare_exchange_weak_explicit(&e->expires_ms, &exp, want,
							      memory_order_acq_rel,
							      memory_order_acquire))
			;
		/* rewritten under the push: read it anew */
		if (atomic_load_explicit(&e->seq, memory_order_acquire) != c.seq)
			goto again;
		if (c.user_len > cap)
			return shm_set_error(-ENOSPC, "tokens: a user name of %zu bytes does not fit "
					     "in %zu", c.user_len, cap);
		memcpy(user, c.data.bytes + token_len, c.user_len);
		*user_len = c.user_len;
		return 0;
	}
	if (stuck)
		return shm_set_error(-EAGAIN, "tokens: an entry was left mid-write by a stored that "
				     "died; the next stored clears it");
	return -ENOENT;
}
