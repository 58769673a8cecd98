/* gRPC wire-format helpers (see grpc_wire.h). */
#include "gatewayd/transport/grpc_wire.h"
#include "base/hex/hex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

const char *grpc_status_name(enum grpc_status code)
{
	static const char *const names[] = {
		"OK",
		"Canceled",
		"Unknown",
		"InvalidArgument",
		"DeadlineExceeded",
		"NotFound",
		"AlreadyExists",
		"PermissionDenied",
		"ResourceExhausted",
		"FailedPrecondition",
		"Aborted",
		"OutOfRange",
		"Unimplemented",
		"Internal",
		"Unavailable",
		"DataLoss",
		"Unauthenticated",
	};
	if ((unsigned)code < sizeof(names) / sizeof(names[0]))
		return names[code];
	return "Unknown";
}

int grpc_timeout_parse(const uint8_t *s, size_t len, int64_t *ns)
{
	/* The spec allows at most 8 digits; grpc-go refuses longer values. */
	if (len < 2 || len > 9)
		return -EINVAL;
	int64_t unit_ns;
	switch (s[len - 1]) {
	case 'H':
		unit_ns = 3600LL * 1000000000LL;
		break;
	case 'M':
		unit_ns = 60LL * 1000000000LL;
		break;
	case 'S':
		unit_ns = 1000000000LL;
		break;
	case 'm':
		unit_ns = 1000000LL;
		break;
	case 'u':
		unit_ns = 1000LL;
		break;
	case 'n':
		unit_ns = 1;
		break;
	default:
		return -EINVAL;
	}
	int64_t v = 0;
	for (size_t i = 0; i + 1 < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0'); /* at most 8 digits: no overflow */
	}
	*ns = v > INT64_MAX / unit_ns ? INT64_MAX : v * unit_ns;
	return 0;
}

static const char grpc_hex[] = "0123456789ABCDEF";
static const char grpc_hex_lower[] = "0123456789abcdef";

size_t grpc_message_encode(const char *msg, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		uint8_t c = (uint8_t)msg[i];
		if (c >= 0x20 && c <= 0x7e && c != '%') {
			if (o + 1 > cap)
				break;
			out[o++] = (char)c;
		} else {
			if (o + 3 > cap)
				break;
			out[o++] = '%';
			out[o++] = grpc_hex[c >> 4];
			out[o++] = grpc_hex[c & 0xf];
		}
	}
	return o;
}

size_t grpc_message_decode(const char *in, size_t len, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		if (in[i] == '%' && i + 2 < len) {
			int hi = hex_digit((unsigned char)in[i + 1]), lo = hex_digit((unsigned char)in[i + 2]);
			if (hi >= 0 && lo >= 0) {
				out[o++] = (char)(hi << 4 | lo);
				i += 2;
				continue;
			}
		}
		out[o++] = in[i];
	}
	return o;
}

size_t grpc_quote(char *out, size_t cap, const uint8_t *s, size_t len, size_t max_in)
{
	/* Worst case per input byte is 4 output bytes (\xNN); stop while the
	 * closing quote, the ellipsis and the NUL still fit. */
	size_t o = 0;
	size_t shown = len < max_in ? len : max_in;
	if (cap < 1)
		return 0;
	if (cap < 6) {
		out[0] = '\0';
		return 0;
	}
	out[o++] = '"';
	size_t i;
	for (i = 0; i < shown; i++) {
		char esc[5];
		size_t n;
		uint8_t c = s[i];
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			n = 2;
		} else if (c >= 0x20 && c <= 0x7e) {
			esc[0] = (char)c;
			n = 1;
		} else {
			esc[0] = '\\';
			esc[1] = 'x';
			esc[2] = grpc_hex_lower[c >> 4];
			esc[3] = grpc_hex_lower[c & 0xf];
			n = 4;
		}
		if (o + n + 5 > cap) /* closing quote, "...", NUL */
			break;
		memcpy(out + o, esc, n);
		o += n;
	}
	out[o++] = '"';
	if (i < len && o + 4 <= cap) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return o;
}

bool grpc_content_type_ok(const uint8_t *s, size_t len)
{
	static const char base[] = "application/grpc";
	const size_t blen = sizeof(base) - 1;
	if (len < blen || memcmp(s, base, blen) != 0)
		return false;
	return len == blen || s[blen] == '+' || s[blen] == ';';
}
