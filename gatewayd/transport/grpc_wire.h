/* Pieces of the gRPC-over-HTTP/2 wire format that need no connection:
 * status codes, the grpc-timeout header, grpc-message percent-encoding,
 * the 5-byte message prefix, and quoting client text for error messages.
 * Pure functions; nothing allocates.
 * Reference: https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md
 */
#ifndef CETCD_GATEWAYD_GRPC_WIRE_H
#define CETCD_GATEWAYD_GRPC_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* gRPC status codes (google.golang.org/grpc/codes). */
enum grpc_status {
	GRPC_STATUS_OK = 0,
	GRPC_STATUS_CANCELLED = 1,
	GRPC_STATUS_UNKNOWN = 2,
	GRPC_STATUS_INVALID_ARGUMENT = 3,
	GRPC_STATUS_DEADLINE_EXCEEDED = 4,
	GRPC_STATUS_NOT_FOUND = 5,
	GRPC_STATUS_ALREADY_EXISTS = 6,
	GRPC_STATUS_PERMISSION_DENIED = 7,
	GRPC_STATUS_RESOURCE_EXHAUSTED = 8,
	GRPC_STATUS_FAILED_PRECONDITION = 9,
	GRPC_STATUS_ABORTED = 10,
	GRPC_STATUS_OUT_OF_RANGE = 11,
	GRPC_STATUS_UNIMPLEMENTED = 12,
	GRPC_STATUS_INTERNAL = 13,
	GRPC_STATUS_UNAVAILABLE = 14,
	GRPC_STATUS_DATA_LOSS = 15,
	GRPC_STATUS_UNAUTHENTICATED = 16,
};

/* "OK", "Canceled", ... as grpc-go's codes.Code.String() spells them;
 * "Code(N)" style is not produced: unknown values give "Unknown". */
const char *grpc_status_name(enum grpc_status code);

/* Length of the prefix before each message: a flag byte (1 = compressed)
 * and the message length, 4 bytes big-endian. */
#define GRPC_PREFIX_LEN 5

/* etcd's server accepts requests up to --max-request-bytes plus this much
 * (etcdserver/api/v3rpc/grpc.go, grpcOverheadBytes). */
#define GRPC_OVERHEAD_BYTES (512u * 1024u)

static inline void grpc_prefix_write(uint8_t *p, bool compressed, uint32_t len)
{
	p[0] = compressed ? 1 : 0;
	p[1] = (uint8_t)(len >> 24);
	p[2] = (uint8_t)(len >> 16);
	p[3] = (uint8_t)(len >> 8);
	p[4] = (uint8_t)len;
}

static inline uint32_t grpc_prefix_len(const uint8_t *p)
{
	return (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
}

/* Parses a grpc-timeout value: 1 to 8 ASCII digits and a unit (H, M, S,
 * m, u, n). Stores the duration in nanoseconds in *ns, saturated at
 * INT64_MAX (as grpc-go clamps hours). Returns 0 or -EINVAL. */
int grpc_timeout_parse(const uint8_t *s, size_t len, int64_t *ns);

/* Percent-encodes msg for the grpc-message trailer: bytes outside
 * 0x20..0x7e, and '%', become %XX. Writes at most cap bytes to out,
 * never splitting an escape (the tail of a message that does not fit is
 * dropped), and returns the length written; out is not NUL-terminated. */
size_t grpc_message_encode(const char *msg, size_t len, char *out, size_t cap);

/* Reverses grpc_message_encode in place-safe fashion (out may equal in):
 * %XX becomes the byte, anything else is copied. Returns the length. */
size_t grpc_message_decode(const char *in, size_t len, char *out);

/* Writes s as a double-quoted string for an error message, in the manner
 * of Go's %q: '"' and '\\' escaped, other bytes outside 0x20..0x7e as
 * \xNN; at most max_in bytes of s are shown, then "...". The result is
 * NUL-terminated and truncated to fit cap (cap >= 1). Returns its
 * length. */
size_t grpc_quote(char *out, size_t cap, const uint8_t *s, size_t len, size_t max_in);

/* Whether a content-type names gRPC: "application/grpc" alone or
 * followed by '+' or ';' (a subtype or parameters), as grpc-go decides. */
bool grpc_content_type_ok(const uint8_t *s, size_t len);

#endif
