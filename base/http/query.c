/* Query strings (see query.h). */
#include "base/http/query.h"
#include "base/hex/hex.h"
#include "base/http/http.h"

#include <string.h>

/* Go's QueryUnescape of s[0..len) into out (cap bytes and a NUL): the
 * decoded length, or -1 for a bad escape or one too long. */
static long query_unescape(const char *s, size_t len, char *out, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (c == '%') {
			if (i + 2 >= len)
				return -1;
			int hi = hex_digit((unsigned char)s[i + 1]), lo = hex_digit((unsigned char)s[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (n == cap)
			return -1;
		out[n++] = c;
	}
	out[n] = '\0';
	return (long)n;
}

bool http_query_next(const char *q, size_t len, size_t *off, struct http_query_pair *out)
{
	while (*off < len) {
		const char *p = q + *off;
		const char *amp = memchr(p, '&', len - *off);
		size_t plen = amp ? (size_t)(amp - p) : len - *off;
		*off += plen + (amp ? 1 : 0);
		if (plen == 0 || memchr(p, ';', plen))
			continue;
		const char *eq = memchr(p, '=', plen);
		size_t klen = eq ? (size_t)(eq - p) : plen;
		long k = query_unescape(p, klen, out->key, HTTP_QUERY_MAX);
		long v = eq ? query_unescape(eq + 1, plen - klen - 1, out->value, HTTP_QUERY_MAX) : 0;
		if (k < 0 || v < 0)
			continue;
		if (!eq)
			out->value[0] = '\0';
		out->key_len = (size_t)k;
		out->value_len = (size_t)v;
		return true;
	}
	return false;
}

bool http_query_get(const char *q, size_t len, const char *key, struct http_query_pair *pair)
{
	size_t off = 0;

	while (http_query_next(q, len, &off, pair))
		if (strcmp(pair->key, key) == 0)
			return true;
	return false;
}

bool http_query_has(const char *q, size_t len, const char *key)
{
	struct http_query_pair pair;

	return http_query_get(q, len, key, &pair);
}
