/* The watch event feed's records, read by the gateways (events.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "stored/events.h"

int events_decode(const uint8_t *p, size_t len, struct events_ev *out)
{
	struct events_hdr h;

	if (len < sizeof(h))
		return -EBADMSG;
	memcpy(&h, p, sizeof(h));
	uint64_t need = (uint64_t)sizeof(h) + h.key_len + h.kv_len + h.prev_len;
	if (need != len || h.main <= 0 || h.sub < 0 || h.key_len == 0 || h.kv_len == 0)
		return -EBADMSG;
	p += sizeof(h);
	out->main = h.main;
	out->sub = h.sub;
	out->is_delete = h.flags & EVENTS_F_DELETE;
	out->last = h.flags & EVENTS_F_LAST;
	out->key = p;
	out->key_len = h.key_len;
	out->kv = p + h.key_len;
	out->kv_len = h.kv_len;
	out->prev = h.prev_len ? p + h.key_len + h.kv_len : NULL;
	out->prev_len = h.prev_len;
	return 0;
}
