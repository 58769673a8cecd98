/*
 * The C half of tests/auth/perm_diff.sh: random cases of one user's
 * permissions and checks, written for tests/tools/permdiff (etcd's own
 * interval tree) and decided by cetcd's permission cache (auth/perm.h),
 * built through the builder from authpb records as the db holds them.
 *
 * Usage: perm_diff SEED COUNT CASES OUT. CASES gets the cases (permdiff's
 * input), OUT a line per case: cetcd's decisions ('1'/'0' per query),
 * then a space and a mark per query: 'p' when the case's permissions are
 * all well-formed and the query's range is not inverted (where cetcd and
 * etcd must agree), 'i' for an inverted range of well-formed permissions,
 * 'm' when a permission is not well-formed (where etcd's tree may answer
 * by its shape).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/perm.h"
#include "authpb/auth.pb-c.h"

static uint64_t rng;

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

struct bytes {
	uint8_t b[4];
	size_t len;
};

static struct bytes rand_key(void)
{
	static const uint8_t alpha[] = { 0x00, 'a', 'b', 0xff };
	struct bytes k = { .len = next() % 4 };
	for (size_t i = 0; i < k.len; i++)
		k.b[i] = alpha[next() % 4];
	return k;
}

static struct bytes rand_end(struct bytes key)
{
	uint64_t r = next() % 10;
	if (r < 3)
		return (struct bytes){ .len = 0 };
	if (r < 5)
		return (struct bytes){ .b = { 0 }, .len = 1 };
	if (r < 6 && key.len && key.b[key.len - 1] != 0xff) {
		key.b[key.len - 1]++;
		return key;
	}
	return rand_key();
}

static int cmp(struct bytes a, struct bytes b)
{
	size_t n = a.len < b.len ? a.len : b.len;
	int r = n ? memcmp(a.b, b.b, n) : 0;
	return r ? r : (a.len > b.len) - (a.len < b.len);
}

/* A range that asks for key alone though its end is set: at or below key. */
static bool inverted(struct bytes key, struct bytes end)
{
	return end.len && !(end.len == 1 && end.b[0] == 0) && cmp(end, key) <= 0;
}

static bool well_formed(struct bytes key, struct bytes end)
{
	return key.len && !inverted(key, end);
}

static void put_hex(FILE *f, struct bytes b)
{
	if (!b.len)
		fputc('-', f);
	for (size_t i = 0; i < b.len; i++)
		fprintf(f, "%02x", b.b[i]);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: perm_diff SEED COUNT CASES OUT\n");
		return 2;
	}
	rng = strtoull(argv[1], NULL, 0);
	long count = strtol(argv[2], NULL, 0);
	FILE *cases = fopen(argv[3], "w"), *out = fopen(argv[4], "w");
	if (!cases || !out)
		return 2;
	for (long c = 0; c < count; c++) {
		Authpb__Permission perms[12], *pp[12];
		struct bytes keys[12], ends[12];
		size_t n = next() % 12;
		bool plain = true;
		for (size_t i = 0; i < n; i++) {
			authpb__permission__init(&perms[i]);
			perms[i].permtype = (Authpb__Permission__Type)(next() % 3);
			keys[i] = rand_key();
			ends[i] = rand_end(keys[i]);
			perms[i].key = (ProtobufCBinaryData){ keys[i].len, keys[i].b };
			perms[i].range_end = (ProtobufCBinaryData){ ends[i].len, ends[i].b };
			pp[i] = &perms[i];
			plain = plain && well_formed(keys[i], ends[i]);
			fprintf(cases, "%s%d:", i ? " " : "", perms[i].permtype);
			put_hex(cases, keys[i]);
			fputc(':', cases);
			put_hex(cases, ends[i]);
		}
		Authpb__Role role = AUTHPB__ROLE__INIT;
		role.name = (ProtobufCBinaryData){ 1, (uint8_t *)"r" };
		role.n_keypermission = n;
		role.keypermission = pp;
		char *roles[] = { "r" };
		Authpb__User user = AUTHPB__USER__INIT;
		user.name = (ProtobufCBinaryData){ 1, (uint8_t *)"u" };
		user.n_roles = 1;
		user.roles = roles;
		uint8_t rbuf[1024], ubuf[64];
		size_t rlen = authpb__role__pack(&role, rbuf), ulen = authpb__user__pack(&user, ubuf);
		struct auth_builder *b;
		struct auth_cache *cache;
		if (auth_builder_begin(&b) || auth_builder_role(b, "r", 1, rbuf, rlen) ||
		    auth_builder_user(b, "u", 1, ubuf, ulen) || auth_builder_finish(b, &cache)) {
			fprintf(stderr, "case %ld: the cache does not build\n", c);
			return 1;
		}
		const struct auth_user *u = auth_cache_user(cache, "u", 1);
		char got[32], mark[32];
		size_t q = 16;
		fputc('|', cases);
		for (size_t i = 0; i < q; i++) {
			int t = (int)(next() % 2);
			struct bytes key = rand_key(), end = rand_end(key);
			fprintf(cases, "%s%d:", i ? " " : "", t);
			put_hex(cases, key);
			fputc(':', cases);
			put_hex(cases, end);
			got[i] = auth_user_permitted(cache, u, (enum auth_perm_type)t, key.b, key.len,
						     end.b, end.len) ? '1' : '0';
			mark[i] = !plain ? 'm' : inverted(key, end) ? 'i' : 'p';
		}
		got[q] = mark[q] = 0;
		fputc('\n', cases);
		fprintf(out, "%s %s\n", got, mark);
		auth_cache_free(cache);
	}
	return fclose(cases) || fclose(out) ? 2 : 0;
}
