/*
 * A URL's query string as Go's url.ParseQuery reads it: pairs split at
 * '&', each "key=value" (or "key", whose value is empty), key and value
 * percent-decoded with '+' a space. A pair Go refuses (a bad %-escape, a
 * ';') is skipped, as ParseQuery drops it and keeps the others.
 *
 * Pure functions on the caller's bytes: no allocation, and any input is
 * safe (tests/fuzz/fuzz_query.c).
 */
#ifndef CETCD_BASE_HTTP_QUERY_H
#define CETCD_BASE_HTTP_QUERY_H

#include <stdbool.h>
#include <stddef.h>

/* The longest key or value http_query_next decodes; a longer one makes
 * its pair skipped (no health check's name or flag is that long). */
#define HTTP_QUERY_MAX 256

struct http_query_pair {
	char key[HTTP_QUERY_MAX + 1];   /* decoded, NUL-terminated */
	size_t key_len;
	char value[HTTP_QUERY_MAX + 1];
	size_t value_len;
};

/*
 * Decodes the next pair of q[*off..len) into *out and moves *off past it.
 * Returns true with a pair, false at the end. Pairs that do not decode
 * are skipped.
 */
bool http_query_next(const char *q, size_t len, size_t *off, struct http_query_pair *out);

/* Whether key appears in q (with any value), and the first value it has
 * (NULL when absent): Go's r.URL.Query()[key] and .Get(key). *value
 * points into the caller's pair buffer. */
bool http_query_has(const char *q, size_t len, const char *key);
bool http_query_get(const char *q, size_t len, const char *key, struct http_query_pair *pair);

#endif
