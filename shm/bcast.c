/*
 * Broadcast ring (see bcast.h).
 *
 * Ordering (see barrier.h):
 *  - Publishing: the producer writes a record, then stores `head` with
 *    release; a consumer loads `head` with acquire before reading below it.
 *  - Overwriting is a seqlock: before the producer writes over bytes that
 *    held positions below X it stores `oldest` = X, then a release fence,
 *    then the bytes. A consumer copies a record at position p out, then an
 *    acquire fence, then loads `oldest`: if it is still <= p, no byte of the
 *    copy was overwritten (the producer announces an overwrite before it
 *    makes it); otherwise the copy is thrown away and the cursor reports
 *    the lap.
 * The payload bytes themselves are copied with plain memcpy on both sides,
 * as Linux seqlock readers do; only a validated copy is ever used.
 */
#include <errno.h>
#include <string.h>

#include "shm/barrier.h"
#include "shm/bcast.h"
#include "shm/layout.h"
#include "shm/ring.h"

#define BCAST_MAGIC 0x42434153u /* "BCAS" */
#define BCAST_REC_HDR 16u
#define BCAST_TYPE_PAD UINT32_MAX
/* bcast_trim_busy keeps at least this much behind head and ahead of it */
#define BCAST_TRIM_KEEP_MIN (1u << 20)

struct bcast_rec_hdr {
	uint64_t seq;
	uint32_t len;
	uint32_t type;
};

struct bcast {
	/* Set by bcast_init, read-only afterwards. */
	uint32_t magic;
	uint32_t max_record;
	uint64_t cap;     /* data bytes, a multiple of 16 */
	int64_t data_rel; /* data area minus the ring's address */
	uint8_t pad0[SHM_LINE - 24];

	/* Written by the producer, read by every consumer.
	 * oldest <= head + largest record; both only grow. */
	_Atomic uint64_t head;     /* bytes published */
	_Atomic uint64_t oldest;   /* bytes below it may be overwritten */
	_Atomic uint64_t next_seq; /* seq of the next record, from 1 */
	uint8_t pad1[SHM_LINE - 24];

	/* Producer-private. */
	uint64_t head_off; /* head % cap */
	/* bcast_trim_idle's view: head at its last look, when it last saw it
	 * move, and head when it last gave pages back */
	uint64_t trim_seen;
	int64_t trim_since_ns;
	uint64_t trimmed_at;
	/* bcast_trim_busy's: when it last looked, head then, and the
	 * position below which the old records' pages are given back */
	int64_t busy_ns;
	uint64_t busy_head;
	uint64_t busy_given;
	uint8_t pad2[BCAST_HEADER_BYTES - 2 * SHM_LINE - 56];
};
_Static_assert(sizeof(struct bcast) == BCAST_HEADER_BYTES, "bcast header");

static inline uint64_t bcast_align(uint64_t n)
{
	return (n + 15) & ~(uint64_t)15;
}

static inline uint8_t *bcast_data(const struct bcast *b)
{
	return (uint8_t *)b + b->data_rel;
}

size_t bcast_footprint(uint64_t cap)
{
	return BCAST_HEADER_BYTES + bcast_align(cap);
}

uint64_t bcast_cap_for(uint32_t max_record, uint32_t count)
{
	return (uint64_t)count * (BCAST_REC_HDR + bcast_align(max_record));
}

int bcast_init(void *mem, size_t bytes, uint32_t max_record)
{
	struct bcast *b = mem;
	uint64_t cap;

	if (bytes < BCAST_HEADER_BYTES + 2 * BCAST_REC_HDR)
		return -EINVAL;
	cap = (bytes - BCAST_HEADER_BYTES) & ~(uint64_t)15;
	if (2 * (BCAST_REC_HDR + bcast_align(max_record)) > cap)
		return -EINVAL;
	memset(b, 0, sizeof(*b));
	b->magic = BCAST_MAGIC;
	b->max_record = max_record;
	b->cap = cap;
	b->data_rel = BCAST_HEADER_BYTES;
	atomic_init(&b->head, 0);
	atomic_init(&b->oldest, 0);
	atomic_init(&b->next_seq, 1);
	return 0;
}

uint32_t bcast_max_record(const struct bcast *b)
{
	return b->max_record;
}

uint64_t bcast_capacity(const struct bcast *b)
{
	return b->cap;
}

uint64_t bcast_next_seq(const struct bcast *b)
{
	return atomic_load_explicit(&b->next_seq, memory_order_relaxed);
}

/* Writes one record of `size` bytes at position pos, announcing first what
 * it is about to overwrite. */
static void bcast_write(struct bcast *b, uint64_t pos, uint64_t size,
			const struct bcast_rec_hdr *h, const void *payload)
{
	uint8_t *at = bcast_data(b) + b->head_off;
	uint64_t end = pos + size;

	if (end > b->cap && end - b->cap >
	    atomic_load_explicit(&b->oldest, memory_order_relaxed)) {
		atomic_store_explicit(&b->oldest, end - b->cap,
				      memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
	}
	memcpy(at, h, sizeof(*h));
	if (payload && h->len) /* a pad record has none */
		memcpy(at + BCAST_REC_HDR, payload, h->len);
}

int bcast_publish(struct bcast *b, uint32_t type, const void *data,
		  uint32_t len)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
	uint64_t seq = atomic_load_explicit(&b->next_seq, memory_order_relaxed);
	uint64_t need = BCAST_REC_HDR + bcast_align(len);
	struct bcast_rec_hdr h;

	if (type == BCAST_TYPE_PAD)
		return -EINVAL;
	if (len > b->max_record)
		return -EMSGSIZE;
	if (b->head_off + need > b->cap) {
		uint64_t pad = b->cap - b->head_off;

		h.seq = seq;
		h.len = (uint32_t)(pad - BCAST_REC_HDR);
		h.type = BCAST_TYPE_PAD;
		bcast_write(b, head, pad, &h, NULL);
		head += pad;
		b->head_off = 0;
	}
	h.seq = seq;
	h.len = len;
	h.type = type;
	bcast_write(b, head, need, &h, data);
	b->head_off += need;
	if (b->head_off == b->cap)
		b->head_off = 0;
	atomic_store_explicit(&b->next_seq, seq + 1, memory_order_relaxed);
	atomic_store_explicit(&b->head, head + need, memory_order_release);
	return 0;
}

/* Zeroing bytes is overwriting them: announced first, as bcast_write
 * does, so that a consumer still copying a record below pos gets a lap,
 * never zeroes taken for a record. */
static void bcast_announce(struct bcast *b, uint64_t pos)
{
	if (atomic_load_explicit(&b->oldest, memory_order_relaxed) < pos) {
		atomic_store_explicit(&b->oldest, pos, memory_order_relaxed);
		atomic_thread_fence(memory_order_release);
	}
}

/*
 * Under traffic the producer goes round the whole data area, and in time
 * every page of it holds memory, however light the traffic: at a few
 * thousand puts a second the ring holds ten seconds of events or more,
 * which only a consumer lagging that far behind would read. Once every
 * SHM_TRIM_QUIET_NS the producer keeps twice the last second's traffic
 * (at least BCAST_TRIM_KEEP_MIN) behind head for the consumers, and as
 * much of the oldest records, which it overwrites next, and gives back
 * the pages of the records between. A consumer more than that behind is
 * lapped (-ESTALE) and re-syncs, as one lapped by the traffic itself
 * does. A ring whose traffic goes round it within four seconds keeps all
 * of it.
 */
static void bcast_trim_busy(struct bcast *b, uint64_t head, int64_t now_ns)
{
	uint64_t written, keep, from, to;

	if (now_ns - b->busy_ns < SHM_TRIM_QUIET_NS)
		return;
	written = head - b->busy_head;
	b->busy_ns = now_ns;
	b->busy_head = head;
	keep = 2 * written > BCAST_TRIM_KEEP_MIN ? 2 * written : BCAST_TRIM_KEEP_MIN;
	if (head <= keep)
		return;
	to = head - keep;
	from = head + keep > b->cap ? head + keep - b->cap : 0;
	if (from < b->busy_given)
		from = b->busy_given; /* given back already, not written since */
	if (from >= to)
		return;
	bcast_announce(b, to);
	shm_pages_give_back_wrapped(bcast_data(b), b->cap, from, to);
	b->busy_given = to;
}

int64_t bcast_trim_idle(struct bcast *b, int64_t now_ns)
{
	uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);

	bcast_trim_busy(b, head, now_ns);
	if (head != b->trim_seen) {
		b->trim_seen = head;
		b->trim_since_ns = now_ns;
	}
	if (b->trimmed_at == head)
		return INT64_MAX;
	if (now_ns - b->trim_since_ns < SHM_TRIM_QUIET_NS)
		return b->trim_since_ns + SHM_TRIM_QUIET_NS;
	bcast_announce(b, head);
	shm_pages_give_back(bcast_data(b), bcast_data(b) + b->cap);
	b->trimmed_at = head;
	b->busy_given = head;
	return INT64_MAX;
}

void bcast_producer_takeover(struct bcast *b)
{
	uint64_t seq = atomic_load_explicit(&b->next_seq, memory_order_relaxed);

	b->head_off = atomic_load_explicit(&b->head, memory_order_relaxed) %
		      b->cap;
	/* Skip a number: the dead producer may have died between counting a
	 * record and publishing it, and a consumer must see a gap (a lap),
	 * never the same number twice. */
	atomic_store_explicit(&b->next_seq, seq + 1, memory_order_relaxed);
}

void bcast_cursor_init(struct bcast *b, struct bcast_cursor *c)
{
	c->pos = atomic_load_explicit(&b->head, memory_order_acquire);
	c->seq = 0;
}

bool bcast_has_data(struct bcast *b, const struct bcast_cursor *c)
{
	return atomic_load_explicit(&b->head, memory_order_acquire) != c->pos;
}

bool bcast_wait_ready(void *arg)
{
	const struct bcast_wait *w = arg;

	return bcast_has_data(w->b, w->c);
}

/* After an acquire fence: whether the bytes at pos may have changed since
 * they were read. */
static bool bcast_overwritten(struct bcast *b, uint64_t pos)
{
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&b->oldest, memory_order_relaxed) > pos;
}

int bcast_read(struct bcast *b, struct bcast_cursor *c, struct bcast_rec *rec,
	       void *buf, size_t buf_len)
{
	struct bcast_rec_hdr h;
	uint64_t head, pos, off, size;

	for (;;) {
		head = atomic_load_explicit(&b->head, memory_order_acquire);
		pos = c->pos;
		if (pos == head)
			return -EAGAIN;
		if (pos > head)
			return -EIO;
		if (head - pos > b->cap ||
		    atomic_load_explicit(&b->oldest, memory_order_relaxed) > pos)
			goto lapped;
		off = pos % b->cap;
		memcpy(&h, bcast_data(b) + off, sizeof(h));
		if (h.type == BCAST_TYPE_PAD) {
			if (bcast_overwritten(b, pos))
				goto lapped;
			if (off + BCAST_REC_HDR + (uint64_t)h.len != b->cap)
				return -EIO;
			c->pos = pos + (b->cap - off);
			continue;
		}
		size = BCAST_REC_HDR + bcast_align(h.len);
		if (h.len > b->max_record || off + size > b->cap ||
		    head - pos < size) {
			if (bcast_overwritten(b, pos))
				goto lapped;
			return -EIO;
		}
		/* A sequence gap without an overwrite: the producer was
		 * restarted (takeover skips a number); treat it as a lap. */
		if (c->seq && h.seq != c->seq)
			goto lapped;
		if (h.len > buf_len) {
			if (bcast_overwritten(b, pos))
				goto lapped;
			rec->len = h.len;
			return -ENOBUFS;
		}
		memcpy(buf, bcast_data(b) + off + BCAST_REC_HDR, h.len);
		if (bcast_overwritten(b, pos)) {
			c->torn_reads++;
			goto lapped;
		}
		rec->seq = h.seq;
		rec->type = h.type;
		rec->len = h.len;
		rec->data = buf;
		c->pos = pos + size;
		c->seq = h.seq + 1;
		return 0;
	}
lapped:
	c->laps++;
	return -ESTALE;
}
