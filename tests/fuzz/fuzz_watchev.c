/*
 * Fuzz target: events_decode (stored/events.h) over arbitrary bytes, the
 * watch event records gatewayd copies off the broadcast ring. A record it
 * accepts must have its parts inside the input and add up to its length.
 */
#include <stdint.h>
#include <stdlib.h>

#include "stored/events.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct events_ev ev;

	if (events_decode(data, size, &ev) != 0)
		return 0;
	const uint8_t *end = data + size;
	if (ev.main <= 0 || ev.key < data || ev.key + ev.key_len > end || ev.kv + ev.kv_len > end ||
	    (ev.prev && ev.prev + ev.prev_len != end) ||
	    sizeof(struct events_hdr) + ev.key_len + ev.kv_len + ev.prev_len != size)
		abort();
	return 0;
}
