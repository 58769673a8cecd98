/*
 * Fuzz target: what a peer sends the corruption check (GET
 * /members/hashkv's answer: the HTTP response read as hashkv_fetch reads
 * it, with base/http's http_reader, then the HashKVResponse JSON or an
 * error text) and what the peer port's handler reads (the
 * HashKVRequest JSON). The first byte picks which. A decoded response,
 * encoded again and decoded, must give the same fields (the header's
 * member id is not encoded, as etcd's handler leaves it out); likewise a
 * decoded request's revision.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/http/http.h"
#include "cluster/hashkv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hashkv_resp r, again;
	enum hashkv_outcome oc;
	char text[256], err[128];
	uint8_t *buf;
	int64_t rev, rev2;
	int n, rc;

	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (hashkv_request_decode(data + 1, size - 1, &rev))
			return 0;
		n = hashkv_request_encode(text, sizeof(text), rev);
		if (n < 0 || hashkv_request_decode(text, (size_t)n, &rev2) || rev2 != rev)
			abort();
		return 0;
	case 1:
		if (hashkv_response_decode(data + 1, size - 1, &r))
			return 0;
		break;
	default:
		/* the answer as hashkv_fetch reads it (cluster/peer_request.c):
		 * the whole stream, then its end */
		buf = malloc(size);
		if (!buf)
			abort();
		memcpy(buf, data + 1, size - 1);
		struct http_reader rd = { .max_body = HASHKV_MAX_ANSWER };
		rc = http_reader_feed(&rd, buf, size - 1, true);
		if (rc != 1) {
			free(buf);
			return 0;
		}
		if (rd.body_len > size - 1 || rd.body_len > HASHKV_MAX_ANSWER)
			abort();
		oc = hashkv_answer(rd.status, buf, rd.body_len, &r, err, sizeof(err));
		free(buf);
		if (oc != HASHKV_OK)
			return 0;
		break;
	}
	r.member_id = 0;
	n = hashkv_response_encode(text, sizeof(text), &r);
	if (n < 0 || hashkv_response_decode(text, (size_t)n, &again) ||
	    memcmp(&r, &again, sizeof(r)) != 0)
		abort();
	return 0;
}
