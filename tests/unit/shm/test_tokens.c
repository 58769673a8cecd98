/*
 * Unit tests for shm/tokens.c, the simple-token table in the region:
 * tokens added by one handle ("stored") and looked up through another
 * ("a gatewayd"); the TTL pushed forward by each use and expiry without
 * it; a user's tokens invalidated; expired entries reaped and reused;
 * a full probe window answered -ENOSPC; a model check of random
 * operations at random times; and invariant 13 broken on purpose: writers
 * SIGKILLed in the middle of their writes and readers (which push
 * expiries) SIGKILLed in the middle of lookups, while other readers check
 * that no lookup ever returns a user from another entry or a torn one.
 */
#include <stdatomic.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "base/crc32c/crc32c.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "shm/tokens.h"

static char region_path[512];

static struct shm_region *attach(void)
{
	struct shm_region *a;

	CHECK_EQ(shm_region_attach(region_path, &a), 0);
	return a;
}

/* A lookup expected to find user. */
static void expect_user(struct shm_region *r, const char *tok, uint64_t now, uint64_t ttl,
			const char *user)
{
	char got[SHM_TOKEN_USER_MAX];
	size_t n;
	int rc = shm_tokens_lookup(r, tok, strlen(tok), now, ttl, got, sizeof(got), &n);

	if (rc)
		fprintf(stderr, "lookup %s at %llu: %d\n", tok, (unsigned long long)now, rc);
	CHECK_EQ(rc, 0);
	CHECK_EQ(n, strlen(user));
	CHECK(memcmp(got, user, n) == 0);
}

static int lookup(struct shm_region *r, const char *tok, uint64_t now, uint64_t ttl)
{
	char got[SHM_TOKEN_USER_MAX];
	size_t n;

	return shm_tokens_lookup(r, tok, strlen(tok), now, ttl, got, sizeof(got), &n);
}

static void test_basic(struct shm_region *l)
{
	struct shm_region *g = attach();
	const uint64_t ttl = 300000, t0 = 1000000;
	char user[SHM_TOKEN_USER_MAX + 2], tok[SHM_TOKEN_MAX + 2];
	size_t n;

	shm_tokens_clear(l);
	CHECK_EQ(shm_tokens_add(l, "NXkgQsLLrRYaBnvP.23", 19, "root", 4, t0, ttl), 0);
	CHECK_EQ(shm_tokens_add(l, "abcdefghijklmnop.24", 19, "alice", 5, t0, ttl), 0);
	CHECK_EQ(shm_tokens_add(l, "qrstuvwxyzABCDEF.25", 19, "alice", 5, t0, ttl), 0);
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0, ttl, "root");
	expect_user(g, "abcdefghijklmnop.24", t0, ttl, "alice");
	CHECK_EQ(lookup(g, "NXkgQsLLrRYaBnvP.2", t0, ttl), -ENOENT);
	CHECK_EQ(lookup(g, "NXkgQsLLrRYaBnvP.233", t0, ttl), -ENOENT);
	CHECK_EQ(lookup(g, "", t0, ttl), -ENOENT);

	/* a live token again is refused, as etcd panics on it */
	CHECK_EQ(shm_tokens_add(l, "NXkgQsLLrRYaBnvP.23", 19, "bob", 3, t0, ttl), -EEXIST);
	CHECK_EQ(shm_tokens_add(l, "", 0, "bob", 3, t0, ttl), -EINVAL);
	CHECK_EQ(shm_tokens_add(l, "x", 1, "", 0, t0, ttl), -EINVAL);
	memset(tok, 'a', sizeof(tok));
	memset(user, 'u', sizeof(user));
	CHECK_EQ(shm_tokens_add(l, tok, SHM_TOKEN_MAX + 1, "bob", 3, t0, ttl), -ENAMETOOLONG);
	CHECK_EQ(shm_tokens_add(l, "x", 1, user, SHM_TOKEN_USER_MAX + 1, t0, ttl), -ENAMETOOLONG);
	/* the longest of both fit */
	CHECK_EQ(shm_tokens_add(l, tok, SHM_TOKEN_MAX, user, SHM_TOKEN_USER_MAX, t0, ttl), 0);
	CHECK_EQ(shm_tokens_lookup(g, tok, SHM_TOKEN_MAX, t0, ttl, user, sizeof(user), &n), 0);
	CHECK_EQ(n, SHM_TOKEN_USER_MAX);
	CHECK_EQ(shm_tokens_lookup(g, tok, SHM_TOKEN_MAX, t0, ttl, user, 10, &n), -ENOSPC);

	/* each use pushes the expiry to now + ttl; unused, it expires */
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0 + ttl - 1, ttl, "root");
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0 + 2 * ttl - 2, ttl, "root");
	CHECK_EQ(lookup(g, "abcdefghijklmnop.24", t0 + ttl + 1, ttl), -ENOENT);
	/* an earlier "now" never pulls it back */
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0, ttl, "root");
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0 + 3 * ttl - 2, ttl, "root");

	/* reaping removes what expired only */
	CHECK_EQ(shm_tokens_reap(l, t0 + ttl + 1), 3); /* .24, .25 and the long one */
	expect_user(g, "NXkgQsLLrRYaBnvP.23", t0 + 3 * ttl - 2, ttl, "root");
	/* an expired token's entry is reused; its token may come back */
	CHECK_EQ(shm_tokens_add(l, "abcdefghijklmnop.24", 19, "carol", 5, t0 + ttl + 2, ttl), 0);
	expect_user(g, "abcdefghijklmnop.24", t0 + ttl + 2, ttl, "carol");

	/* a user's tokens go together, others stay */
	CHECK_EQ(shm_tokens_add(l, "root2", 5, "root", 4, t0 + ttl, ttl), 0);
	CHECK_EQ(shm_tokens_invalidate_user(l, "root", 4), 2);
	CHECK_EQ(lookup(g, "NXkgQsLLrRYaBnvP.23", t0 + ttl, ttl), -ENOENT);
	CHECK_EQ(lookup(g, "root2", t0 + ttl, ttl), -ENOENT);
	expect_user(g, "abcdefghijklmnop.24", t0 + ttl + 2, ttl, "carol");
	CHECK_EQ(shm_tokens_invalidate_user(l, "root", 4), 0);
	/* a TTL too long for the clock lasts forever, never wraps into the
	 * past */
	CHECK_EQ(shm_tokens_add(l, "forever.1", 9, "f", 1, t0, UINT64_MAX), 0);
	expect_user(g, "forever.1", UINT64_MAX - 1, UINT64_MAX, "f");
	CHECK_EQ(shm_tokens_reap(l, UINT64_MAX - 1), 1); /* carol's only */
	expect_user(g, "forever.1", UINT64_MAX, 0, "f");
	shm_tokens_clear(l);
	CHECK_EQ(lookup(g, "abcdefghijklmnop.24", t0 + ttl + 2, ttl), -ENOENT);
	CHECK_EQ(shm_tokens_recover(l), 0);
	shm_region_detach(g);
}

/* Tokens that all start at one entry fill its probe window: the next one
 * is refused with -ENOSPC until one of them expires. */
static void test_full(struct shm_region *l)
{
	char toks[SHM_TOKENS_PROBE + 1][24];
	uint32_t want = 0;
	unsigned found = 0;

	shm_tokens_clear(l);
	for (uint64_t k = 0; found < SHM_TOKENS_PROBE + 1; k++) {
		char t[24];
		snprintf(t, sizeof(t), "tok%llu", (unsigned long long)k);
		uint32_t h = crc32c_update(0, t, strlen(t)) & (SHM_TOKENS_ENTRIES - 1);
		if (found == 0)
			want = h;
		if (h == want)
			memcpy(toks[found++], t, sizeof(t));
	}
	for (unsigned i = 0; i < SHM_TOKENS_PROBE; i++)
		CHECK_EQ(shm_tokens_add(l, toks[i], strlen(toks[i]), "u", 1, 100 + i, 1000), 0);
	CHECK_EQ(shm_tokens_add(l, toks[SHM_TOKENS_PROBE], strlen(toks[SHM_TOKENS_PROBE]), "u", 1,
				200, 1000), -ENOSPC);
	CHECK(strstr(errmsg_get(-ENOSPC), "no room"));
	for (unsigned i = 0; i < SHM_TOKENS_PROBE; i++)
		CHECK_EQ(lookup(l, toks[i], 200, 0), 0);
	/* toks[0] expired at 1100: its entry is taken */
	CHECK_EQ(shm_tokens_add(l, toks[SHM_TOKENS_PROBE], strlen(toks[SHM_TOKENS_PROBE]), "v", 1,
				1100 + 1, 1000), 0);
	CHECK_EQ(lookup(l, toks[0], 1101, 0), -ENOENT);
	expect_user(l, toks[SHM_TOKENS_PROBE], 1101, 0, "v");
	shm_tokens_clear(l);
}

/* Random adds, lookups, invalidations and reaps at random times against
 * a plain array. */
static void test_model(struct shm_region *l)
{
	enum { TOKENS = 400, USERS = 7 };
	struct { bool live; unsigned user; uint64_t exp; } m[TOKENS] = { 0 };
	struct shm_region *g = attach();
	uint64_t now = 5000, seed = 0x5eed;
	const uint64_t ttl = 50;
	char tok[32], user[16];

	shm_tokens_clear(l);
	for (int step = 0; step < 20000; step++) {
		seed = test_mix(seed);
		unsigned k = (unsigned)(seed % TOKENS), op = (unsigned)(seed >> 20) % 100;
		unsigned u = (unsigned)(seed >> 40) % USERS;
		size_t want = 0;
		now += (seed >> 50) % 3;
		/* what expired goes first, so that every count below is exact
		 * (an add may take any expired entry of its window) */
		for (unsigned i = 0; i < TOKENS; i++)
			if (m[i].live && m[i].exp < now) {
				m[i].live = false;
				want++;
			}
		CHECK_EQ(shm_tokens_reap(l, now), want);
		snprintf(tok, sizeof(tok), "%016llx.%u", (unsigned long long)(k * 0x9e3779b97f4a7c15ull), k);
		if (op < 40) {
			snprintf(user, sizeof(user), "user%u", u);
			bool live = m[k].live && m[k].exp >= now;
			int rc = shm_tokens_add(l, tok, strlen(tok), user, strlen(user), now, ttl);
			CHECK_EQ(rc, live ? -EEXIST : 0);
			if (!live)
				m[k] = (typeof(m[k])){ true, u, now + ttl };
		} else if (op < 90) {
			bool live = m[k].live && m[k].exp >= now;
			char got[SHM_TOKEN_USER_MAX];
			size_t n;
			int rc = shm_tokens_lookup(g, tok, strlen(tok), now, ttl, got, sizeof(got), &n);
			CHECK_EQ(rc, live ? 0 : -ENOENT);
			if (live) {
				snprintf(user, sizeof(user), "user%u", m[k].user);
				CHECK(n == strlen(user) && memcmp(got, user, n) == 0);
				m[k].exp = now + ttl;
			}
		} else {
			want = 0;
			snprintf(user, sizeof(user), "user%u", u);
			for (unsigned i = 0; i < TOKENS; i++)
				if (m[i].live && m[i].user == u) {
					m[i].live = false;
					want++;
				}
			CHECK_EQ(shm_tokens_invalidate_user(l, user, strlen(user)), want);
		}
	}
	shm_tokens_clear(l);
	shm_region_detach(g);
}

/* ---- invariant 13 ---- */

#define INV_TOKENS 600

static void inv_token(unsigned k, char *tok, size_t cap)
{
	snprintf(tok, cap, "inv%05u.%u", k, k * 7919u);
}

/* The user of token k: long, and different in every word, so that a copy
 * mixing two entries or two writes of one entry cannot pass. */
static size_t inv_user(unsigned k, char *user)
{
	size_t n = 40 + k % 150;
	for (size_t i = 0; i < n; i++)
		user[i] = (char)('A' + (k * 31 + i * 7) % 26);
	return n;
}

/* In the writer child: the entry write at which it kills itself. */
static uint64_t inv_die_at, inv_writes;

static void inv_die_mid_write(void)
{
	if (++inv_writes == inv_die_at)
		raise(SIGKILL);
}

/* A stored that adds the tokens and clears them, forever, and kills
 * itself in the middle of its die_at-th entry write (0: never). */
static void inv_writer(uint64_t die_at)
{
	struct shm_region *w = attach();

	inv_die_at = die_at;
	shm_tokens_set_write_hook(inv_die_mid_write);
	char tok[32], user[SHM_TOKEN_USER_MAX];

	for (uint64_t round = 0;; round++) {
		for (unsigned k = 0; k < INV_TOKENS; k++) {
			inv_token(k, tok, sizeof(tok));
			size_t n = inv_user(k, user);
			(void)shm_tokens_add(w, tok, strlen(tok), user, n, 1000, 1u << 30);
		}
		if (round & 1)
			shm_tokens_clear(w);
		else
			for (unsigned k = 0; k < INV_TOKENS; k += 3) {
				size_t n = inv_user(k, user);
				shm_tokens_invalidate_user(w, user, n);
			}
	}
}

/* A gatewayd that looks the tokens up, pushing their expiry, forever. */
static void inv_toucher(void)
{
	struct shm_region *g = attach();
	char tok[32], got[SHM_TOKEN_USER_MAX];
	size_t n;

	for (uint64_t i = 0;; i++) {
		inv_token((unsigned)(i % INV_TOKENS), tok, sizeof(tok));
		(void)shm_tokens_lookup(g, tok, strlen(tok), 2000 + i, 1u << 30, got, sizeof(got), &n);
	}
}

/* Looks every token up once: a lookup that answers must give the token's
 * own user. Returns how many answered. */
static unsigned inv_check(struct shm_region *g, unsigned *stuck)
{
	char tok[32], got[SHM_TOKEN_USER_MAX], want[SHM_TOKEN_USER_MAX];
	unsigned found = 0;
	size_t n;

	for (unsigned k = 0; k < INV_TOKENS; k++) {
		inv_token(k, tok, sizeof(tok));
		int rc = shm_tokens_lookup(g, tok, strlen(tok), 1000, 1u << 30, got, sizeof(got), &n);
		CHECK_INVARIANT(INV13_TOKENS, rc == 0 || rc == -ENOENT || rc == -EAGAIN);
		if (rc == -EAGAIN)
			(*stuck)++;
		if (rc)
			continue;
		size_t wn = inv_user(k, want);
		CHECK_INVARIANT_EQ(INV13_TOKENS, n, wn);
		CHECK_INVARIANT(INV13_TOKENS, memcmp(got, want, n) == 0);
		found++;
	}
	return found;
}

/*
 * Writers die mid-write: half the rounds at a random entry write (inside
 * it, the sequence odd), half killed from outside at a random moment.
 * Meanwhile, and after each death, every lookup that answers gives its
 * token's own user; the next stored (shm_tokens_recover) clears what a
 * dead one left, after which no lookup is stuck.
 */
static void test_killed_writers(struct shm_region *l)
{
	struct shm_region *g = attach();
	unsigned found = 0, stuck = 0, recovered = 0, inside = 0;
	int64_t start = clock_now_ns();
	uint64_t seed = 77;

	shm_tokens_clear(l);
	for (int round = 0; round < 80; round++) {
		seed = test_mix(seed);
		bool self = round % 2 == 0;
		pid_t w = test_fork();
		if (w == 0)
			inv_writer(self ? 1 + seed % 4000 : 0);
		if (self) {
			while (waitpid(w, NULL, WNOHANG) == 0)
				found += inv_check(g, &stuck);
			inside++;
		} else {
			int64_t until = clock_now_ns() + 200000 + (int64_t)(seed % 1800000);
			while (clock_now_ns() < until)
				found += inv_check(g, &stuck);
			kill(w, SIGKILL);
			CHECK_EQ(test_wait(w), 128 + SIGKILL);
		}
		found += inv_check(g, &stuck);
		unsigned cleared = (unsigned)shm_tokens_recover(l);
		if (self)
			CHECK_INVARIANT_EQ(INV13_TOKENS, cleared, 1);
		recovered += cleared;
		unsigned after = 0;
		found += inv_check(g, &after);
		CHECK_INVARIANT_EQ(INV13_TOKENS, after, 0);
	}
	printf("tokens: 80 writers killed (%u inside a write), %u entries recovered, %u lookups "
	       "answered, %u found mid-write, %.1f s\n", inside, recovered, found, stuck,
	       (double)(clock_now_ns() - start) / 1e9);
	CHECK(found > 1000);
	CHECK(recovered >= inside);
	shm_tokens_clear(l);
	shm_region_detach(g);
}

/* Readers push expiries with one compare-and-swap: killing them anywhere
 * leaves no entry mid-write, and the writer's entries whole. */
static void test_killed_readers(struct shm_region *l)
{
	struct shm_region *g = attach();
	char tok[32], user[SHM_TOKEN_USER_MAX];
	unsigned stuck = 0;

	shm_tokens_clear(l);
	for (unsigned k = 0; k < INV_TOKENS; k++) {
		inv_token(k, tok, sizeof(tok));
		size_t n = inv_user(k, user);
		CHECK_EQ(shm_tokens_add(l, tok, strlen(tok), user, n, 1000, 1u << 30), 0);
	}
	for (int round = 0; round < 100; round++) {
		pid_t r[2];
		for (int i = 0; i < 2; i++)
			if ((r[i] = test_fork()) == 0)
				inv_toucher();
		usleep(200 + (unsigned)(test_mix((uint64_t)round) % 2000));
		for (int i = 0; i < 2; i++) {
			kill(r[i], SIGKILL);
			CHECK_EQ(test_wait(r[i]), 128 + SIGKILL);
		}
		CHECK_INVARIANT_EQ(INV13_TOKENS, inv_check(g, &stuck), INV_TOKENS);
		CHECK_INVARIANT_EQ(INV13_TOKENS, stuck, 0);
	}
	CHECK_INVARIANT_EQ(INV13_TOKENS, shm_tokens_recover(l), 0);
	shm_tokens_clear(l);
	shm_region_detach(g);
}

int main(void)
{
	struct shm_region_params p = { .slot_count = 4, .max_request_bytes = 4096 };
	struct shm_region *l;
	char dir[256];

	test_watchdog(240);
	test_region_path(dir, sizeof(dir), region_path, sizeof(region_path));
	CHECK_EQ(shm_region_create(region_path, &p, &l), 0);
	test_basic(l);
	test_full(l);
	test_model(l);
	test_killed_readers(l);
	test_killed_writers(l);
	shm_region_detach(l);
	printf("test_tokens: ok\n");
	return 0;
}
