/* The watch event feed (events.h): stored's producer. The records' decoder,
 * which the gateways use, is in events_read.c. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "shm/bcast.h"
#include "stored/alloc.h"
#include "stored/events.h"
#include "stored/mvcc/mvcc_kv.h"

#define EVENTS_ALIGN(n) (((n) + 7u) & ~(size_t)7u)
/* A batch's buffer is kept up to this size between batches. */
#define EVENTS_KEEP_BYTES (4u << 20)

void events_init(struct stored_events *e, struct bcast *b)
{
	memset(e, 0, sizeof(*e));
	e->b = b;
	e->limit = b ? (size_t)bcast_capacity(b) : 0;
	e->last_off = SIZE_MAX;
	e->resync = true;
}

void events_fini(struct stored_events *e)
{
	stored_free(e->buf);
	e->buf = NULL;
	e->len = e->cap = 0;
}

static int events_reserve(struct stored_events *e, size_t more)
{
	if (more > SIZE_MAX - e->len)
		return -ENOMEM;
	return stored_reserve((void **)&e->buf, &e->cap, e->len + more, 1, 65536);
}

void events_on_event(void *arg, const struct mvcc_event *ev)
{
	struct stored_events *e = arg;
	struct events_hdr h = {
		.flags = ev->type == MVCC_EVENT_DELETE ? EVENTS_F_DELETE : 0,
		.key_len = (uint32_t)ev->key_len,
		.prev_len = ev->prev_kv ? (uint32_t)ev->prev_kv_len : 0,
		.main = ev->rev.main,
		.sub = ev->rev.sub,
	};
	struct mvcc_kv tomb = {
		.key = ev->key, .key_len = ev->key_len, .mod_rev = ev->rev.main,
	};

	if (!e->b || e->overflow)
		return;
	h.kv_len = (uint32_t)(ev->type == MVCC_EVENT_DELETE ? mvcc_kv_encoded_len(&tomb) :
							      ev->kv_len);
	size_t payload = sizeof(h) + h.key_len + h.kv_len + h.prev_len;
	if (8 + EVENTS_ALIGN(payload) > e->limit - e->len ||
	    events_reserve(e, 8 + EVENTS_ALIGN(payload))) {
		e->overflow = true;
		return;
	}
	/* the previous record ends its revision when this one starts another */
	if (e->last_off != SIZE_MAX) {
		struct events_hdr *prev = (void *)(e->buf + e->last_off);
		if (prev->main != h.main)
			prev->flags |= EVENTS_F_LAST;
	}
	uint8_t *p = e->buf + e->len;
	uint32_t n = (uint32_t)payload;
	memcpy(p, &n, 4);
	e->last_off = e->len + 8;
	p += 8;
	memcpy(p, &h, sizeof(h));
	p += sizeof(h);
	memcpy(p, ev->key, ev->key_len);
	p += ev->key_len;
	if (ev->type == MVCC_EVENT_DELETE)
		mvcc_kv_encode(&tomb, p);
	else
		memcpy(p, ev->kv, ev->kv_len);
	p += h.kv_len;
	if (h.prev_len)
		memcpy(p, ev->prev_kv, h.prev_len);
	e->len += 8 + EVENTS_ALIGN(payload);
}

void events_discard(struct stored_events *e)
{
	e->len = 0;
	e->last_off = SIZE_MAX;
	e->overflow = false;
	if (e->cap > EVENTS_KEEP_BYTES) {
		stored_free(e->buf);
		e->buf = NULL;
		e->cap = 0;
	}
}

void events_resync(struct stored_events *e)
{
	e->resync = true;
}

void events_publish(struct stored_events *e)
{
	if (!e->b)
		return;
	if (e->overflow)
		e->resync = true;
	if (e->last_off != SIZE_MAX) {
		struct events_hdr *last = (void *)(e->buf + e->last_off);
		last->flags |= EVENTS_F_LAST;
	}
	/* The db holds everything up to the published root: a RESYNC covers
	 * this batch's events too. */
	if (!e->resync) {
		for (size_t off = 0; off < e->len;) {
			uint32_t n;
			memcpy(&n, e->buf + off, 4);
			if (bcast_publish(e->b, EVENTS_REC_EVENT, e->buf + off + 8, n)) {
				e->resync = true; /* too large for a record */
				break;
			}
			e->published++;
			off += 8 + EVENTS_ALIGN(n);
		}
	}
	if (e->resync && bcast_publish(e->b, EVENTS_REC_RESYNC, "", 0) == 0) {
		e->resync = false;
		e->resyncs++;
	}
	events_discard(e);
}
