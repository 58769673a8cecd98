/*
 * Fuzz target: URL query strings (base/http/query.c), bytes from outside
 * (a health check's ?exclude=, ?verbose, ?serializable=). Every pair
 * decoded stays within its buffers and NUL-terminated at its length, and
 * the walk ends.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/http/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_query_pair p;
	size_t off = 0, pairs = 0;

	while (http_query_next((const char *)data, size, &off, &p)) {
		if (p.key_len > HTTP_QUERY_MAX || p.value_len > HTTP_QUERY_MAX ||
		    p.key[p.key_len] != '\0' || p.value[p.value_len] != '\0' || off > size)
			abort();
		if (++pairs > size + 1)
			abort(); /* each pair takes at least one byte */
	}
	(void)http_query_has((const char *)data, size, "verbose");
	(void)http_query_get((const char *)data, size, "serializable", &p);
	return 0;
}
