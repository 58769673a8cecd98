/*
 * v2store_diff: the C half of the differential check of cetcd's v2 store
 * codec (cluster/v2store.c) against etcd's v2store and membership
 * packages (tests/peer/v2store_diff.sh runs it; tests/tools/v2storediff
 * is the Go half, in whose words the dumps are written).
 *
 *   v2store_diff gen SEED COUNT
 *       prints COUNT lines "<hex> <dump>": a random membership encoded by
 *       v2store_encode, and the dump of that membership.
 *   v2store_diff decode
 *       reads lines whose first field is hex JSON and prints the dump of
 *       what v2store_decode makes of each, or "ERR".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/raftmsg_util.h"
#include "cluster/membership.h"
#include "cluster/v2store.h"

static void put_hex(const char *s)
{
	for (; s && *s; s++)
		printf("%02x", (unsigned char)*s);
}

static void put_list(char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i)
			putchar('.');
		put_hex(v[i]);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void dump(const struct membership *m)
{
	if (m->has_version)
		printf("v=%u.%u m=", m->version_major, m->version_minor);
	else
		printf("v=- m=");
	for (size_t i = 0; i < m->count; i++) {
		const struct member_info *mi = &m->v[i];
		printf("%s%" PRIx64 ",%c,", i ? ";" : "", mi->id, mi->is_learner ? 'L' : 'V');
		put_hex(mi->name);
		putchar(',');
		put_list(mi->peer_urls, mi->n_peer_urls);
		putchar(',');
		put_list(mi->client_urls, mi->n_client_urls);
	}
	printf(" r=");
	uint64_t *r = malloc((m->n_removed + 1) * sizeof(*r));
	if (!r)
		abort();
	if (m->n_removed)
		memcpy(r, m->removed, m->n_removed * sizeof(*r));
	qsort(r, m->n_removed, sizeof(*r), cmp_u64);
	for (size_t i = 0; i < m->n_removed; i++)
		printf("%s%" PRIx64, i ? "," : "", r[i]);
	free(r);
	putchar('\n');
}

/* ---- gen ---- */

static uint64_t rng;

static uint64_t next(void)
{
	/* splitmix64 */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static char *text(void)
{
	static const char *const odd[] = { "\"", "\\", "/", "<", ">", "&", "\n", "\t", "\x01",
					   "\xc3\xa9", "\xe2\x98\x83", "\xe2\x80\xa8" };
	static const char plain[] = "abcdefghijklmnopqrstuvwxyz0123456789-.";
	char *s = calloc(1, 64);
	size_t n = next() % 12, len = 0;
	if (!s)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (next() % 8 == 0) {
			const char *o = odd[next() % (sizeof(odd) / sizeof(odd[0]))];
			memcpy(s + len, o, strlen(o));
			len += strlen(o);
		} else {
			s[len++] = plain[next() % (sizeof(plain) - 1)];
		}
	}
	return s;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char **urls(size_t n)
{
	char **v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		abort();
	for (size_t i = 0; i < n; i++) {
		v[i] = malloc(48);
		if (!v[i])
			abort();
		snprintf(v[i], 48, "http://10.%u.%u.%u:%u", (unsigned)(next() % 256),
			 (unsigned)(next() % 256), (unsigned)(next() % 256),
			 (unsigned)(1 + next() % 65535));
	}
	qsort(v, n, sizeof(*v), cmp_str);
	return v;
}

static int gen(uint64_t seed, unsigned long count)
{
	rng = seed;
	for (unsigned long c = 0; c < count; c++) {
		struct membership m;
		membership_init(&m);
		size_t n = next() % 6, nr = next() % 4;
		for (size_t i = 0; i < n; i++) {
			struct member_info mi = { 0 };
			mi.id = next() | 1;
			mi.n_peer_urls = 1 + next() % 3;
			mi.peer_urls = urls(mi.n_peer_urls);
			mi.is_learner = next() % 4 == 0;
			if (next() % 2) {
				mi.name = text();
				mi.n_client_urls = next() % 3;
				mi.client_urls = urls(mi.n_client_urls);
			}
			if (membership_put(&m, &mi))
				abort();
			member_info_clear(&mi);
		}
		for (size_t i = 0; i < nr; i++)
			if (membership_mark_removed(&m, next() & ~1ull))
				abort();
		if (next() % 2) {
			char ver[16];
			snprintf(ver, sizeof(ver), "3.%u.0", (unsigned)(next() % 5));
			if (membership_set_version(&m, ver, strlen(ver)))
				abort();
		}
		char *json;
		size_t len;
		if (v2store_encode(&m, &json, &len))
			abort();
		for (size_t i = 0; i < len; i++)
			printf("%02x", (unsigned char)json[i]);
		putchar(' ');
		dump(&m);
		free(json);
		membership_free(&m);
	}
	return 0;
}

/* ---- decode ---- */

static int decode(void)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	while ((n = getline(&line, &cap, stdin)) > 0) {
		line[strcspn(line, " \n")] = '\0';
		uint8_t *bytes = malloc(strlen(line) / 2 + 1);
		size_t len = bytes ? rm_unhex(line, bytes) : (size_t)-1;
		bool ok = len != (size_t)-1;
		struct membership m;
		membership_init(&m);
		if (ok && v2store_decode(bytes, len, &m) == 0)
			dump(&m);
		else
			puts("ERR");
		membership_free(&m);
		free(bytes);
	}
	free(line);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "gen") == 0)
		return gen(strtoull(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
	if (argc == 2 && strcmp(argv[1], "decode") == 0)
		return decode();
	fprintf(stderr, "usage: v2store_diff gen SEED COUNT | v2store_diff decode\n");
	return 2;
}
