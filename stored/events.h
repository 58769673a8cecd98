/*
 * The watch event feed: stored publishes every applied change on the
 * region's broadcast ring (shm/bcast.h) for the gateways' watchers.
 *
 * Records (bcast type, then payload):
 *   EVENTS_REC_EVENT   one change: struct events_hdr, then the key, the
 *                      KeyValue bytes (for a delete: KeyValue{key,
 *                      mod_revision}), then the replaced version's
 *                      KeyValue bytes (prev_len 0: none). The events of
 *                      one revision are contiguous and the last carries
 *                      EVENTS_F_LAST.
 *   EVENTS_REC_RESYNC  events were not published (a restart, a root held
 *                      back, a record too large, a snapshot install): a
 *                      consumer treats it as a lap and catches up from the
 *                      db.
 *
 * Ordering a consumer relies on: the events of a batch are published only
 * after the root that holds them is published (status block), so a read
 * that begins after a consumer (re)initialised its cursor sees every
 * revision whose events the cursor will not see.
 *
 * Producer (stored): events_on_event collects a batch's changes (the
 * mvcc_store_opts.on_event hook); events_publish sends them after the
 * batch's root is published; events_discard drops them when the batch
 * failed; events_resync asks for a RESYNC record with the next publish.
 */
#ifndef CETCD_STORED_EVENTS_H
#define CETCD_STORED_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stored/mvcc/mvcc.h"

struct bcast;

#define EVENTS_REC_EVENT 1u
#define EVENTS_REC_RESYNC 2u

#define EVENTS_F_DELETE 1u
#define EVENTS_F_LAST 2u

struct events_hdr {
	uint32_t flags;    /* EVENTS_F_* */
	uint32_t key_len;
	uint32_t kv_len;
	uint32_t prev_len;
	int64_t main;      /* the event's revision */
	int64_t sub;
};

/* One decoded event record; pointers into the record's bytes. */
struct events_ev {
	int64_t main, sub;
	bool is_delete;
	bool last;          /* last event of its revision */
	const uint8_t *key;
	size_t key_len;
	const uint8_t *kv;
	size_t kv_len;
	const uint8_t *prev; /* NULL: none */
	size_t prev_len;
};

/* Decodes an EVENTS_REC_EVENT payload. 0, or -EBADMSG when the lengths
 * do not add up to len or the revision is not positive. */
int events_decode(const uint8_t *p, size_t len, struct events_ev *out);

struct stored_events {
	struct bcast *b;     /* NULL: nothing is published */
	uint8_t *buf;        /* the batch's records: [u32 len, payload, pad to 8] */
	size_t len, cap;
	size_t last_off;     /* offset of the last record's header, or SIZE_MAX */
	bool resync;         /* publish RESYNC before anything else */
	bool overflow;       /* the batch's events did not fit in memory, or
			      * in the ring (limit): RESYNC instead */
	size_t limit;        /* the most a batch's records may take: what
			      * the ring holds at once */
	uint64_t published;  /* statistics */
	uint64_t resyncs;
};

/* Starts with a RESYNC pending (a new producer: consumers must catch up
 * from the db, whatever a predecessor left unpublished). b may be NULL.
 * A batch whose records would take more than the ring holds at once
 * (bcast_capacity) is not collected past that: every consumer would be
 * lapped by its own batch, so it gets RESYNC and catches up from the db,
 * and a large DeleteRange or Txn costs no copy of its events. */
void events_init(struct stored_events *e, struct bcast *b);
void events_fini(struct stored_events *e);
/* mvcc_store_opts.on_event: arg is the struct stored_events. */
void events_on_event(void *arg, const struct mvcc_event *ev);
void events_discard(struct stored_events *e);
void events_resync(struct stored_events *e);
/* Publishes the batch (or RESYNC), then empties it. */
void events_publish(struct stored_events *e);

#endif
