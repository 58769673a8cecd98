/*
 * Unit tests for base/http/query.c: query strings read as Go's
 * url.ParseQuery reads them (pairs at '&', keys without '=' with an empty
 * value, %-escapes and '+' decoded, pairs with a bad escape or a ';'
 * skipped while the others are kept), and the lookups etcd's health
 * handlers make (?verbose present, ?serializable=true's first value).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/http/query.h"

#define CHECK(c)                                                                      \
	do {                                                                          \
		if (!(c)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
			exit(1);                                                      \
		}                                                                     \
	} while (0)

/* The pairs of q joined as "k=v;" each. */
static void expect_pairs(const char *q, const char *want)
{
	char got[1024] = "";
	struct http_query_pair p;
	size_t off = 0;

	while (http_query_next(q, strlen(q), &off, &p)) {
		CHECK(strlen(p.key) == p.key_len && strlen(p.value) == p.value_len);
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s=%s;", p.key, p.value);
	}
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "query \"%s\": got \"%s\", want \"%s\"\n", q, got, want);
		exit(1);
	}
}

int main(void)
{
	struct http_query_pair p;
	char big[HTTP_QUERY_MAX + 32];

	expect_pairs("", "");
	expect_pairs("verbose", "verbose=;");
	expect_pairs("exclude=NOSPACE&exclude=CORRUPT", "exclude=NOSPACE;exclude=CORRUPT;");
	expect_pairs("a=1&&b=2&", "a=1;b=2;");
	expect_pairs("a%3Db=c%26d&e+f=g+h", "a=b=c&d;e f=g h;");
	expect_pairs("a=%zz&b=2&c=%4&d=%41", "b=2;d=A;");
	expect_pairs("a=1;b=2&c=3", "c=3;");
	expect_pairs("=x&y=", "=x;y=;");
	memset(big, 'k', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	expect_pairs(big, "");
	CHECK(http_query_has("verbose&exclude=x", 17, "verbose"));
	CHECK(!http_query_has("verbosex=1", 10, "verbose"));
	CHECK(http_query_get("serializable=true&serializable=false", 36, "serializable", &p));
	CHECK(strcmp(p.value, "true") == 0);
	CHECK(!http_query_get("a=1", 3, "serializable", &p));
	/* the length bounds the read: no NUL needed */
	CHECK(!http_query_has("verbose", 4, "verbose"));
	printf("ok\n");
	return 0;
}
