/*
 * Fuzz target: what a peer sends the corruption check (GET
 * /members/hashkv's answer: the HTTP response, then the HashKVResponse
 * JSON or an error text) and what the peer port's handler reads (the
 * HashKVRequest JSON). The first byte picks which. A decoded response,
 * encoded again and decoded, must give the same fields (the header's
 * member id is not encoded, as etcd's handler leaves it out); likewise a
 * decoded request's revision.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/hashkv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hashkv_resp r, again;
	const uint8_t *body;
	size_t blen;
	char buf[256], err[128];
	int64_t rev, rev2;
	int status, n;

	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (hashkv_request_decode(data + 1, size - 1, &rev))
			return 0;
		n = hashkv_request_encode(buf, sizeof(buf), rev);
		if (n < 0 || hashkv_request_decode(buf, (size_t)n, &rev2) || rev2 != rev)
			abort();
		return 0;
	case 1:
		if (hashkv_response_decode(data + 1, size - 1, &r))
			return 0;
		break;
	default:
		if (hashkv_http_response(data + 1, size - 1, &status, &body, &blen))
			return 0;
		if (body < data + 1 || body + blen > data + size)
			abort();
		if (hashkv_answer(status, body, blen, &r, err, sizeof(err)) != HASHKV_OK)
			return 0;
		break;
	}
	r.member_id = 0;
	n = hashkv_response_encode(buf, sizeof(buf), &r);
	if (n < 0 || hashkv_response_decode(buf, (size_t)n, &again) ||
	    memcmp(&r, &again, sizeof(r)) != 0)
		abort();
	return 0;
}
