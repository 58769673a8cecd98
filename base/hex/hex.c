/* Hexadecimal digits (see hex.h). */
#include "base/hex/hex.h"

#include <errno.h>

int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int hex_parse_u64(const char *s, size_t len, uint64_t *v)
{
	uint64_t x = 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		int d = hex_digit((unsigned char)s[i]);
		if (d < 0)
			return -EINVAL;
		if (x >> 60)
			return -ERANGE; /* as Go, before looking further */
		x = x << 4 | (uint64_t)d;
	}
	*v = x;
	return 0;
}

ssize_t hex_decode(const char *s, size_t len, uint8_t *out)
{
	for (size_t i = 0; i + 1 < len; i += 2) {
		int hi = hex_digit((unsigned char)s[i]), lo;
		if (hi < 0 || (lo = hex_digit((unsigned char)s[i + 1])) < 0)
			return -EINVAL;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	return len % 2 ? -EINVAL : (ssize_t)(len / 2);
}
