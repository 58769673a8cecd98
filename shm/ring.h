/*
 * SPSC ring of variable-length records in shared memory.
 *
 * One producer process and one consumer process. A record is a header
 * (payload length, type) and a payload of 0 up to the ring's max_record
 * bytes, padded to 8 bytes. A record never straddles the end of the data
 * area: when one would, the producer writes a padding record to the end
 * and starts again at offset 0.
 *
 * The ring lives entirely inside the shared mapping and holds no pointers,
 * so each process may map it at its own address. Cursors only grow; a new
 * holder of either side continues where the last one stopped.
 *
 * Pushing never blocks (-EAGAIN when full): stored must never wait on a
 * result ring. A producer that may wait uses ring_push_wait. After the
 * producer publishes, it rings the consumer's doorbell, but only if that
 * consumer said it sleeps (see shm/doorbell.h).
 *
 * A ring that finds its cursors or a record header corrupt marks itself
 * failed and returns -EIO from then on.
 */
#ifndef CETCD_SHM_RING_H
#define CETCD_SHM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ring;
struct shm_doorbell;

/* Record type reserved for padding; ring_push refuses it. */
#define RING_TYPE_PAD UINT32_MAX

/* How long a producer's ring (or the broadcast ring) stays untouched
 * before ring_trim_idle (bcast_trim_idle) gives its pages back. */
#define SHM_TRIM_QUIET_NS 1000000000ll

/* Bytes of a ring's control block, before its data area. */
#define RING_HEADER_BYTES 512u

struct ring_rec {
	uint32_t type;
	uint32_t len;
	const void *data; /* inside the ring: valid until ring_release */
};

/*
 * Bytes of shared memory a ring whose data area holds cap bytes needs. cap
 * is rounded up to a multiple of 8.
 */
size_t ring_footprint(uint64_t cap);

/* Data-area size that holds `count` records of max_record bytes (plus any
 * padding needed to wrap). */
uint64_t ring_cap_for(uint32_t max_record, uint32_t count);

/*
 * Lays out an empty ring in mem (bytes long, 64-byte aligned, zeroed or
 * not). consumer_db is rung when records are published and the consumer
 * sleeps; producer_db when space frees and a producer waits in
 * ring_push_wait. Either may be NULL; when set they must lie in the same
 * mapping as mem (they are stored as offsets). Returns 0, or -EINVAL if mem
 * is too small for max_record (the data area must hold at least two of the
 * largest record).
 */
int ring_init(void *mem, size_t bytes, uint32_t max_record,
	      struct shm_doorbell *consumer_db,
	      struct shm_doorbell *producer_db);

/* Largest payload the ring accepts. */
uint32_t ring_max_record(const struct ring *r);
/* Bytes of its data area. */
uint64_t ring_capacity(const struct ring *r);

/* Producer side. */

/*
 * Copies one record in and publishes it. Returns 0, -EAGAIN if there is no
 * room now, -EMSGSIZE if len > ring_max_record, -EINVAL for type
 * RING_TYPE_PAD, -EIO if the ring has failed.
 */
int ring_push(struct ring *r, uint32_t type, const void *data, uint32_t len);

/*
 * Like ring_push, but when the ring is full spins briefly and then sleeps
 * on the producer doorbell until the consumer frees room or timeout_ms
 * passes. Not for stored's result rings. Returns 0, -ETIMEDOUT, -EMSGSIZE,
 * -EINVAL, -EIO.
 */
int ring_push_wait(struct ring *r, uint32_t type, const void *data,
		   uint32_t len, int timeout_ms);

/*
 * Batching: ring_stage writes a record without publishing it, ring_publish
 * publishes every staged record at once (and wakes a sleeping consumer).
 * Same return codes as ring_push.
 */
int ring_stage(struct ring *r, uint32_t type, const void *data, uint32_t len);
void ring_publish(struct ring *r);

/*
 * ring_publish in two halves, for a producer that publishes to several
 * rings and wakes their consumers only once all of them are out (a woken
 * consumer may take the producer's CPU at once, and would then find the
 * other rings not yet published). ring_publish_quiet makes the staged
 * records visible and returns whether there were any; ring_wake_consumer
 * (full fence, then wake if the consumer sleeps) must follow for each ring
 * it returned true for, or the consumer may sleep on them until its
 * backstop.
 */
bool ring_publish_quiet(struct ring *r);
void ring_wake_consumer(struct ring *r);

/*
 * Zero-copy: ring_reserve returns room for a payload of up to len bytes
 * inside the ring; ring_commit stages it as a record of `used` <= len bytes.
 * Nothing else may touch the producer side in between. ring_reserve
 * returns 0 and *payload, or the ring_push codes.
 */
int ring_reserve(struct ring *r, uint32_t len, void **payload);
int ring_commit(struct ring *r, uint32_t type, uint32_t used);

/*
 * Producer, at quiet times: once no record was written for
 * SHM_TRIM_QUIET_NS and the consumer has released everything, gives the
 * data area's pages back to the region's tmpfs (shm_pages_give_back), so
 * that a ring holds memory for its traffic and an idle one almost none;
 * once per quiet spell. Under traffic, at most once per SHM_TRIM_QUIET_NS,
 * it also gives back the free part's pages past twice the last second's
 * writes (at least 64 KiB) past head. Call it from the producer's loop
 * every so often (a turn, a tick); returns the time it wants to be called
 * again (INT64_MAX: not before the next record).
 */
int64_t ring_trim_idle(struct ring *r, int64_t now_ns);

/* Whether a record of len bytes would fit now. */
bool ring_has_space(struct ring *r, uint32_t len);

/* Consumer side. */

/*
 * Fills rec with the oldest unreleased record. Returns 0, -EAGAIN if the
 * ring is empty, -EIO if it has failed. rec->data stays valid until the
 * record is released.
 */
int ring_peek(struct ring *r, struct ring_rec *rec);

/* Releases the record ring_peek returned, giving its bytes back to the
 * producer (and waking a producer waiting for room). */
void ring_release(struct ring *r, const struct ring_rec *rec);

/*
 * Batching: ring_consume moves past the peeked record without giving its
 * bytes back; ring_release_consumed gives back everything consumed so far.
 * The data of consumed records stays valid until then.
 */
void ring_consume(struct ring *r, const struct ring_rec *rec);
void ring_release_consumed(struct ring *r);

/* Whether a record is waiting for the consumer. */
bool ring_has_data(struct ring *r);

/* ring_has_data as a has_work callback for shm_doorbell_sleep (arg is the
 * ring). */
bool ring_wait_ready(void *ring);

/* Releases every published record (a new consumer dropping what was meant
 * for its predecessor). Returns how many records were dropped, or -EIO. */
int ring_drain(struct ring *r);

/* Bytes published and not yet released: how full the ring is, read by
 * anyone (relaxed loads; a moment's view, for metrics). */
uint64_t ring_depth(const struct ring *r);
/* Failed state (see the top of this file). */
bool ring_has_failed(const struct ring *r);

/*
 * Takeover by a new holder of one side: sync that side's private cursor
 * with the published one (staged but unpublished records, and consumed but
 * unreleased ones, of a dead holder are forgotten). Only the new holder of
 * that side may call it; the other side may keep running.
 */
void ring_producer_takeover(struct ring *r);
void ring_consumer_takeover(struct ring *r);

#endif
