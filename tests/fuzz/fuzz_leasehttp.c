/*
 * Fuzz target: the bodies of etcd's lease calls between members
 * (cluster/leasehttp.h). The first byte picks what is decoded: a request to
 * /leases or /leases/internal (what the peer port's handler reads), or
 * the leader's 200 answer to either (what a follower reads), which is
 * then given this member's header. A decoded request, encoded again and
 * decoded, must give the same fields; a decoded answer must point inside
 * the input and keep its TTL when re-headed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/leasehttp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t hdr[] = { 0x08, 0x01, 0x10, 0x02, 0x20, 0x05 };
	struct leasehttp_req r, again;
	uint8_t buf[LEASEHTTP_MAX_REQUEST];
	const uint8_t *resp;
	size_t len;
	int64_t ttl, ttl2;

	if (size < 2)
		return 0;
	bool internal = data[0] & 1;
	if ((data[0] & 2) == 0) {
		if (leasehttp_request_decode(internal, data + 1, size - 1, &r))
			return 0;
		size_t n = leasehttp_request_encode(&r, buf);
		if (leasehttp_request_decode(internal, buf, n, &again) || again.id != r.id ||
		    again.keys != r.keys)
			abort();
		return 0;
	}
	/* the second byte is the lease asked for */
	r = (struct leasehttp_req){ .internal = internal, .id = data[1] };
	if (leasehttp_response_decode(&r, data + 2, size - 2, &resp, &len))
		return 0;
	if (resp < data + 2 || resp + len > data + size)
		abort();
	if (leasehttp_response_ttl(resp, len, &ttl))
		abort(); /* decode checked it */
	uint8_t *out = malloc(len + sizeof(hdr) + 16);
	if (!out)
		return 0;
	long n = leasehttp_reheader(resp, len, hdr, sizeof(hdr), out);
	if (n < 0 || leasehttp_response_ttl(out, (size_t)n, &ttl2) || ttl2 != ttl)
		abort();
	free(out);
	return 0;
}
