/*
 * Fuzz target: msg_origin_find over arbitrary bytes (proposal bytes come
 * from the WAL and from peers). When it reports an origin, re-encoding
 * that origin and searching again must give the same one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shm/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct msg_origin o, again;
	uint8_t buf[MSG_ORIGIN_MAX_BYTES];

	if (msg_origin_find(data, size, &o) != 0)
		return 0;
	size_t n = msg_origin_encode(&o, buf);
	if (msg_origin_find(buf, n, &again) != 0 ||
	    memcmp(&o, &again, sizeof(o)) != 0)
		abort();
	return 0;
}
