/*
 * Fuzz target: what a server sends grpcc's unary call (launcher/grpcc.h):
 * HTTP/2 frames, headers and trailers, the length-prefixed response. The
 * call is started and its request sent (to nowhere); the input is fed as
 * the server's bytes in two parts split at its first byte's value; the
 * result, if any, must lie within what was received.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launcher/grpcc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct grpcc_call c;
	const uint8_t *msg;
	size_t len, cut;
	int rc;

	if (size == 0 || grpcc_call_begin(&c, "localhost", "/etcdserverpb.Maintenance/Alarm",
					  "\x08\x01", 2))
		return 0;
	cut = 1 + data[0] % size; /* in [1, size] */
	if (grpcc_call_send(&c) == 0) {
		grpcc_call_sent(&c, c.out_len);
		if (grpcc_call_recv(&c, data + 1, cut - 1) == 0 && grpcc_call_send(&c) == 0)
			grpcc_call_recv(&c, data + cut, size - cut);
	}
	rc = grpcc_call_result(&c, &msg, &len);
	if (rc == 0 && (msg < c.body || msg + len > c.body + c.body_len || len > GRPCC_MAX_RESPONSE))
		abort();
	if (rc > 0 && strlen(c.message) >= sizeof(c.message))
		abort();
	grpcc_call_end(&c);
	return 0;
}
