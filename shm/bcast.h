/*
 * Broadcast ring: one producer that never waits, any number of consumers,
 * each with its own cursor (process-local, struct bcast_cursor).
 *
 * The producer overwrites the oldest records when the ring is full. Each
 * record carries a sequence number, and the producer announces how far it
 * may be overwriting before it writes, so a consumer copies a record out
 * and then validates the copy (seqlock style). A lapped consumer gets
 * -ESTALE, never a torn or stale record, even when the producer overwrote
 * the record while it was being copied. It then re-syncs (bcast_cursor_init)
 * and catches up by other means (stored's event feed: from the db).
 */
#ifndef CETCD_SHM_BCAST_H
#define CETCD_SHM_BCAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bcast;

#define BCAST_HEADER_BYTES 512u

/* A consumer's position. Treat as opaque apart from the statistics, which
 * count over the cursor's life: bcast_cursor_init (also a re-sync after a
 * lap) leaves them as they are, so a cursor starts zeroed. */
struct bcast_cursor {
	uint64_t pos;        /* byte position of the next record */
	uint64_t seq;        /* sequence number expected next; 0 = any */
	uint64_t laps;       /* statistic: times this cursor was lapped */
	uint64_t torn_reads; /* statistic: laps detected only after a copy */
};

struct bcast_rec {
	uint64_t seq; /* 1 for the first record ever published, then +1 */
	uint32_t type;
	uint32_t len;
	const void *data; /* the caller's buffer */
};

size_t bcast_footprint(uint64_t cap);
uint64_t bcast_cap_for(uint32_t max_record, uint32_t count);

/* Lays out an empty broadcast ring in mem. Returns 0 or -EINVAL (too small
 * for two of the largest record). */
int bcast_init(void *mem, size_t bytes, uint32_t max_record);

uint32_t bcast_max_record(const struct bcast *b);
uint64_t bcast_capacity(const struct bcast *b);

/*
 * Producer: appends a record, overwriting the oldest ones if needed, and
 * publishes it. Never waits. Returns 0, -EMSGSIZE if len > max_record,
 * -EINVAL for the reserved type UINT32_MAX.
 */
int bcast_publish(struct bcast *b, uint32_t type, const void *data,
		  uint32_t len);

/*
 * Producer, at quiet times: once nothing was published for
 * SHM_TRIM_QUIET_NS, gives the data area's pages back to the region's
 * tmpfs (once per quiet spell). A consumer that had not read the last
 * records by then gets a lap (-ESTALE), as if they were overwritten.
 * Under traffic, at most once per SHM_TRIM_QUIET_NS, it also gives back
 * the pages of the records older than twice the last second's traffic
 * (at least 1 MiB) behind head, except as much again of the oldest ones,
 * which the producer overwrites next; a consumer lagging further gets a
 * lap. Call it from the producer's loop every so often (a turn, a tick).
 * Returns the time it wants to be called again (INT64_MAX: not before
 * the next record).
 */
int64_t bcast_trim_idle(struct bcast *b, int64_t now_ns);

/* Takeover by a new producer (a restarted stored): continue at the
 * published head; a record the dead producer left half written is
 * overwritten, and every consumer sees a lap at its next record. Only the
 * new producer may call it. */
void bcast_producer_takeover(struct bcast *b);

/* Sequence number the next published record will carry. */
uint64_t bcast_next_seq(const struct bcast *b);

/* Points the cursor at the next record to be published (nothing older). */
void bcast_cursor_init(struct bcast *b, struct bcast_cursor *c);

/*
 * Copies the record at the cursor into buf and advances the cursor.
 * Returns 0 with rec filled in (rec->data == buf), or:
 *   -EAGAIN  no new record
 *   -ESTALE  the cursor was lapped (or the producer was restarted):
 *            records were lost; re-sync with bcast_cursor_init and catch
 *            up by other means
 *   -ENOBUFS buf_len is too small; rec->len says how much is needed and
 *            the cursor does not move
 *   -EIO     the ring's contents are inconsistent
 */
int bcast_read(struct bcast *b, struct bcast_cursor *c, struct bcast_rec *rec,
	       void *buf, size_t buf_len);

/* Whether a record is waiting at the cursor (or it was lapped). */
bool bcast_has_data(struct bcast *b, const struct bcast_cursor *c);

/* For shm_doorbell_sleep: has_work = bcast_wait_ready, arg = a struct
 * bcast_wait naming the ring and the cursor to wait on. */
struct bcast_wait {
	struct bcast *b;
	const struct bcast_cursor *c;
};
bool bcast_wait_ready(void *arg);

#endif
