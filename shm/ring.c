/*
 * SPSC ring (see ring.h).
 *
 * Ordering (see barrier.h for the vocabulary):
 *  - The producer writes a record's bytes, then stores `head` with release.
 *    The consumer loads `head` with acquire and only then reads the bytes
 *    below it, so it never sees a half-written record.
 *  - The consumer reads a record, then stores `tail` with release. The
 *    producer loads `tail` with acquire before overwriting bytes below it,
 *    so it never overwrites a record still being read.
 *  - Wake-ups are a Dekker pair and need full fences: the producer stores
 *    `head`, full fence, loads the consumer doorbell's "sleeping"; the
 *    sleeper stores "sleeping", full fence, loads `head` (has_work). The
 *    same holds for room: the consumer stores `tail`, full fence, loads
 *    `space_waiter`; a waiting producer stores `space_waiter` and
 *    "sleeping", full fence, loads `tail`.
 *
 * Each side keeps a private copy of its cursor (head_local, tail_local) so
 * that it can batch, and a cached copy of the other side's cursor, so that
 * it touches the other side's cache line only when its cached view runs
 * out. All of it lives in the shared ring so a new holder of a side can
 * take over.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>

#include "base/clock/clock.h"
#include "shm/barrier.h"
#include "shm/doorbell.h"
#include "shm/layout.h"
#include "shm/ring.h"

#define RING_MAGIC 0x52494e47u /* "RING" */
#define RING_REC_HDR 8u
#define RING_NO_RESERVATION UINT64_MAX
#define RING_SPIN_TRIES 2000
/* ring_trim_busy keeps at least this much of the free part past head */
#define RING_TRIM_KEEP_MIN (64u << 10)

struct ring_rec_hdr {
	uint32_t len;
	uint32_t type;
};

struct ring {
	/* Set by ring_init, read-only afterwards (except `failed`). */
	uint32_t magic;
	uint32_t max_record;     /* largest payload */
	uint64_t cap;            /* data bytes, a multiple of 8 */
	int64_t data_rel;        /* data area minus the ring's address */
	int64_t consumer_db_rel; /* consumer doorbell minus ring; 0 = none */
	int64_t producer_db_rel; /* producer doorbell minus ring; 0 = none */
	_Atomic uint32_t failed; /* once set, every call returns -EIO */
	uint8_t pad0[SHM_LINE - 44];

	/* Producer lines: only the producer writes them.
	 * tail <= head <= head_local <= tail + cap; all only grow. */
	_Atomic uint64_t head; /* bytes published */
	uint64_t head_local;   /* bytes written, published or not */
	uint64_t head_off;     /* head_local % cap */
	uint64_t cached_tail;  /* a value tail had; <= tail */
	uint64_t reserved_len; /* payload room of ring_reserve, or none */
	/* ring_trim_idle's view: head_local at its last look, the time it
	 * last saw it move, and head_local when it last gave pages back */
	uint64_t trim_seen;
	int64_t trim_since_ns;
	uint64_t trimmed_at;
	/* ring_trim_busy's: when it last looked, head_local then, and the
	 * cursor up to which the free part's pages are given back */
	int64_t busy_ns;
	uint64_t busy_head;
	uint64_t busy_given;
	uint8_t pad1[SHM_LINE - 88];

	/* Consumer lines: only the consumer writes them.
	 * tail <= tail_local <= cached_head <= head. */
	_Atomic uint64_t tail; /* bytes released */
	uint64_t tail_local;   /* bytes consumed, released or not */
	uint64_t tail_off;     /* tail_local % cap */
	uint64_t cached_head;  /* a value head had */
	uint8_t pad2[SHM_LINE - 32];

	/* Set by a producer waiting for room, cleared by the consumer. */
	_Atomic uint32_t space_waiter;
	uint8_t pad3[SHM_LINE - 4];
};
_Static_assert(sizeof(struct ring) == RING_HEADER_BYTES, "ring header size");

static inline uint64_t ring_align(uint64_t n)
{
	return (n + 7) & ~(uint64_t)7;
}

static inline uint8_t *ring_data(const struct ring *r)
{
	return (uint8_t *)r + r->data_rel;
}

static inline struct shm_doorbell *ring_db(const struct ring *r, int64_t rel)
{
	return rel ? (struct shm_doorbell *)((uint8_t *)r + rel) : NULL;
}

static int ring_fail(struct ring *r)
{
	atomic_store_explicit(&r->failed, 1, memory_order_relaxed);
	return -EIO;
}

size_t ring_footprint(uint64_t cap)
{
	return RING_HEADER_BYTES + ring_align(cap);
}

uint64_t ring_cap_for(uint32_t max_record, uint32_t count)
{
	return (uint64_t)count * (RING_REC_HDR + ring_align(max_record));
}

int ring_init(void *mem, size_t bytes, uint32_t max_record,
	      struct shm_doorbell *consumer_db,
	      struct shm_doorbell *producer_db)
{
	struct ring *r = mem;
	uint64_t cap;

	if (bytes < RING_HEADER_BYTES + 2 * RING_REC_HDR)
		return -EINVAL;
	cap = (bytes - RING_HEADER_BYTES) & ~(uint64_t)7;
	if (2 * (RING_REC_HDR + ring_align(max_record)) > cap)
		return -EINVAL;

	memset(r, 0, sizeof(*r));
	r->magic = RING_MAGIC;
	r->max_record = max_record;
	r->cap = cap;
	r->data_rel = RING_HEADER_BYTES;
	r->consumer_db_rel = consumer_db ?
		(int64_t)((uint8_t *)consumer_db - (uint8_t *)r) : 0;
	r->producer_db_rel = producer_db ?
		(int64_t)((uint8_t *)producer_db - (uint8_t *)r) : 0;
	atomic_init(&r->failed, 0);
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	atomic_init(&r->space_waiter, 0);
	r->reserved_len = RING_NO_RESERVATION;
	return 0;
}

uint32_t ring_max_record(const struct ring *r)
{
	return r->max_record;
}

uint64_t ring_capacity(const struct ring *r)
{
	return r->cap;
}

bool ring_has_failed(const struct ring *r)
{
	return atomic_load_explicit(&r->failed, memory_order_relaxed) != 0;
}

/* Producer: 0 if `total` bytes are free past head_local, else -EAGAIN. */
static int ring_make_room(struct ring *r, uint64_t total)
{
	uint64_t t;

	if (r->cap - (r->head_local - r->cached_tail) >= total)
		return 0;
	t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (t > r->head_local || r->head_local - t > r->cap)
		return ring_fail(r);
	r->cached_tail = t;
	return r->cap - (r->head_local - t) >= total ? 0 : -EAGAIN;
}

/* Bytes a record of len needs at head_off, counting the padding before it
 * when it would straddle the end; *pad gets the padding part. */
static uint64_t ring_need(const struct ring *r, uint32_t len, uint64_t *pad)
{
	uint64_t need = RING_REC_HDR + ring_align(len);

	*pad = r->head_off + need > r->cap ? r->cap - r->head_off : 0;
	return *pad + need;
}

int ring_reserve(struct ring *r, uint32_t len, void **payload)
{
	struct ring_rec_hdr h;
	uint64_t pad, total;
	int rc;

	if (ring_has_failed(r))
		return -EIO;
	if (len > r->max_record)
		return -EMSGSIZE;
	total = ring_need(r, len, &pad);
	rc = ring_make_room(r, total);
	if (rc)
		return rc;
	if (pad) {
		h.len = (uint32_t)(pad - RING_REC_HDR);
		h.type = RING_TYPE_PAD;
		memcpy(ring_data(r) + r->head_off, &h, sizeof(h));
		r->head_local += pad;
		r->head_off = 0;
	}
	r->reserved_len = len;
	*payload = ring_data(r) + r->head_off + RING_REC_HDR;
	return 0;
}

int ring_commit(struct ring *r, uint32_t type, uint32_t used)
{
	struct ring_rec_hdr h = { .len = used, .type = type };
	uint64_t size;

	if (type == RING_TYPE_PAD || r->reserved_len == RING_NO_RESERVATION ||
	    used > r->reserved_len)
		return -EINVAL;
	memcpy(ring_data(r) + r->head_off, &h, sizeof(h));
	size = RING_REC_HDR + ring_align(used);
	r->head_local += size;
	r->head_off += size;
	if (r->head_off == r->cap)
		r->head_off = 0;
	r->reserved_len = RING_NO_RESERVATION;
	return 0;
}

int ring_stage(struct ring *r, uint32_t type, const void *data, uint32_t len)
{
	void *payload;
	int rc;

	if (type == RING_TYPE_PAD)
		return -EINVAL;
	rc = ring_reserve(r, len, &payload);
	if (rc)
		return rc;
	if (len)
		memcpy(payload, data, len);
	return ring_commit(r, type, len);
}

bool ring_publish_quiet(struct ring *r)
{
	if (atomic_load_explicit(&r->head, memory_order_relaxed) == r->head_local)
		return false;
	atomic_store_explicit(&r->head, r->head_local, memory_order_release);
	return true;
}

void ring_wake_consumer(struct ring *r)
{
	struct shm_doorbell *db = ring_db(r, r->consumer_db_rel);

	if (db) {
		shm_full_fence();
		shm_doorbell_wake(db);
	}
}

void ring_publish(struct ring *r)
{
	if (ring_publish_quiet(r))
		ring_wake_consumer(r);
}

int ring_push(struct ring *r, uint32_t type, const void *data, uint32_t len)
{
	int rc = ring_stage(r, type, data, len);

	if (rc == 0)
		ring_publish(r);
	return rc;
}

bool ring_has_space(struct ring *r, uint32_t len)
{
	uint64_t pad;

	if (len > r->max_record)
		return false;
	return ring_make_room(r, ring_need(r, len, &pad)) == 0;
}

struct ring_space_arg {
	struct ring *r;
	uint32_t len;
};

static bool ring_space_or_failed(void *arg)
{
	struct ring_space_arg *a = arg;

	return ring_has_space(a->r, a->len) || ring_has_failed(a->r);
}

int ring_push_wait(struct ring *r, uint32_t type, const void *data,
		   uint32_t len, int timeout_ms)
{
	struct ring_space_arg arg = { .r = r, .len = len };
	struct shm_doorbell *db = ring_db(r, r->producer_db_rel);
	int64_t deadline = clock_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
	int64_t left;
	int rc, i;

	rc = ring_push(r, type, data, len);
	for (i = 0; rc == -EAGAIN && i < RING_SPIN_TRIES; i++) {
		shm_cpu_relax();
		if (ring_has_space(r, len))
			rc = ring_push(r, type, data, len);
	}
	while (rc == -EAGAIN) {
		left = deadline - clock_now_ms();
		if (left <= 0) {
			rc = -ETIMEDOUT;
			break;
		}
		/* The doorbell's own full fence orders this store before
		 * the re-check of tail inside shm_doorbell_sleep. */
		atomic_store_explicit(&r->space_waiter, 1, memory_order_relaxed);
		if (db) {
			shm_doorbell_sleep(db, ring_space_or_failed, &arg,
					   left < SHM_DOORBELL_BACKSTOP_MS ?
					   (int)left : SHM_DOORBELL_BACKSTOP_MS);
		} else {
			struct timespec ts = { 0, 100 * 1000 };

			nanosleep(&ts, NULL);
		}
		rc = ring_push(r, type, data, len);
	}
	atomic_store_explicit(&r->space_waiter, 0, memory_order_relaxed);
	return rc;
}

/* Consumer: 1 if cached_head moved past tail_local, 0 if empty, -EIO. */
static int ring_refresh_head(struct ring *r)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);

	if (h < r->tail_local || h - r->tail_local > r->cap)
		return ring_fail(r);
	r->cached_head = h;
	return h != r->tail_local;
}

int ring_peek(struct ring *r, struct ring_rec *rec)
{
	struct ring_rec_hdr h;
	uint64_t off, size, avail;
	int rc;

	for (;;) {
		if (ring_has_failed(r))
			return -EIO;
		if (r->tail_local == r->cached_head) {
			rc = ring_refresh_head(r);
			if (rc <= 0)
				return rc ? rc : -EAGAIN;
		}
		off = r->tail_off;
		avail = r->cached_head - r->tail_local;
		memcpy(&h, ring_data(r) + off, sizeof(h));
		if (h.type == RING_TYPE_PAD) {
			size = RING_REC_HDR + (uint64_t)h.len;
			if (off + size != r->cap || size > avail)
				return ring_fail(r);
			/* Released with the next record. */
			r->tail_local += size;
			r->tail_off = 0;
			continue;
		}
		size = RING_REC_HDR + ring_align(h.len);
		if (h.len > r->max_record || off + size > r->cap || size > avail)
			return ring_fail(r);
		rec->type = h.type;
		rec->len = h.len;
		rec->data = ring_data(r) + off + RING_REC_HDR;
		return 0;
	}
}

void ring_consume(struct ring *r, const struct ring_rec *rec)
{
	uint64_t size = RING_REC_HDR + ring_align(rec->len);

	if (rec->data != ring_data(r) + r->tail_off + RING_REC_HDR ||
	    size > r->cached_head - r->tail_local) {
		ring_fail(r);
		return;
	}
	r->tail_local += size;
	r->tail_off += size;
	if (r->tail_off == r->cap)
		r->tail_off = 0;
}

void ring_release_consumed(struct ring *r)
{
	struct shm_doorbell *db;

	if (atomic_load_explicit(&r->tail, memory_order_relaxed) == r->tail_local)
		return;
	atomic_store_explicit(&r->tail, r->tail_local, memory_order_release);
	db = ring_db(r, r->producer_db_rel);
	if (!db)
		return;
	shm_full_fence();
	if (atomic_load_explicit(&r->space_waiter, memory_order_relaxed) &&
	    atomic_exchange_explicit(&r->space_waiter, 0, memory_order_relaxed))
		shm_doorbell_wake(db);
}

void ring_release(struct ring *r, const struct ring_rec *rec)
{
	ring_consume(r, rec);
	ring_release_consumed(r);
}

bool ring_has_data(struct ring *r)
{
	if (r->tail_local != r->cached_head)
		return true;
	return atomic_load_explicit(&r->head, memory_order_acquire) !=
	       r->tail_local;
}

bool ring_wait_ready(void *ring)
{
	return ring_has_data(ring);
}

int ring_drain(struct ring *r)
{
	uint64_t end = atomic_load_explicit(&r->head, memory_order_acquire);
	struct ring_rec rec;
	int n = 0, rc;

	while (r->tail_local < end) {
		rc = ring_peek(r, &rec);
		if (rc == -EAGAIN)
			break;
		if (rc)
			return rc;
		ring_consume(r, &rec);
		n++;
	}
	ring_release_consumed(r);
	return ring_has_failed(r) ? -EIO : n;
}

void shm_pages_give_back(void *lo, void *hi)
{
	uintptr_t a = ((uintptr_t)lo + SHM_PAGE - 1) & ~(uintptr_t)(SHM_PAGE - 1);
	uintptr_t b = (uintptr_t)hi & ~(uintptr_t)(SHM_PAGE - 1);

	if (b > a)
		(void)madvise((void *)a, b - a, MADV_REMOVE);
}

void shm_pages_give_back_wrapped(uint8_t *data, uint64_t cap, uint64_t from,
				 uint64_t to)
{
	uint64_t a = from % cap, n = to - from;

	if (a + n <= cap) {
		shm_pages_give_back(data + a, data + a + n);
		return;
	}
	shm_pages_give_back(data + a, data + cap);
	shm_pages_give_back(data, data + (a + n - cap));
}

/*
 * Under traffic a ring is never quiet, and its producer goes round the
 * whole data area: in time every page of it holds memory, whatever the
 * traffic. Once every SHM_TRIM_QUIET_NS the producer gives back the pages
 * of the free part that it will not reach soon: all of it but the
 * RING_TRIM_KEEP_MIN bytes, or twice what it wrote since the last look,
 * right past head. The consumer reads nothing past head and the producer
 * is the caller, so no byte given back is read or written until the
 * producer writes it again (a page fault of the tmpfs's, then zeroes). A
 * ring whose traffic goes round it faster than every two seconds keeps
 * all of it.
 */
static void ring_trim_busy(struct ring *r, int64_t now_ns)
{
	uint64_t t, keep, from, to, written;

	if (now_ns - r->busy_ns < SHM_TRIM_QUIET_NS)
		return;
	written = r->head_local - r->busy_head;
	r->busy_ns = now_ns;
	r->busy_head = r->head_local;
	if (r->reserved_len != RING_NO_RESERVATION)
		return;
	t = atomic_load_explicit(&r->tail, memory_order_acquire);
	if (t > r->head_local || r->head_local - t > r->cap)
		return; /* the next push finds it corrupt */
	keep = 2 * written > RING_TRIM_KEEP_MIN ? 2 * written : RING_TRIM_KEEP_MIN;
	if (keep >= r->cap - (r->head_local - t))
		return;
	from = r->head_local + keep;
	to = t + r->cap;
	if (from < r->busy_given)
		from = r->busy_given; /* given back already, not written since */
	if (from >= to)
		return;
	shm_pages_give_back_wrapped(ring_data(r), r->cap, from, to);
	r->busy_given = to;
}

int64_t ring_trim_idle(struct ring *r, int64_t now_ns)
{
	if (!ring_has_failed(r))
		ring_trim_busy(r, now_ns);
	if (r->head_local != r->trim_seen) {
		r->trim_seen = r->head_local;
		r->trim_since_ns = now_ns;
	}
	if (r->trimmed_at == r->head_local || ring_has_failed(r))
		return INT64_MAX;
	if (now_ns - r->trim_since_ns < SHM_TRIM_QUIET_NS)
		return r->trim_since_ns + SHM_TRIM_QUIET_NS;
	/* Only a ring the consumer has given everything back of: then no byte
	 * of the data area is read or written until the producer writes the
	 * next record, and the producer is the caller. */
	if (r->reserved_len != RING_NO_RESERVATION ||
	    atomic_load_explicit(&r->tail, memory_order_acquire) != r->head_local)
		return now_ns + SHM_TRIM_QUIET_NS;
	shm_pages_give_back(ring_data(r), ring_data(r) + r->cap);
	r->trimmed_at = r->head_local;
	r->busy_given = r->head_local + r->cap;
	return INT64_MAX;
}

void ring_producer_takeover(struct ring *r)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);

	r->head_local = h;
	r->head_off = h % r->cap;
	r->busy_head = h; /* a dead holder's staged records are no traffic */
	r->cached_tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	r->reserved_len = RING_NO_RESERVATION;
	atomic_store_explicit(&r->space_waiter, 0, memory_order_relaxed);
}

void ring_consumer_takeover(struct ring *r)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);

	r->tail_local = t;
	r->tail_off = t % r->cap;
	r->cached_head = t;
}

uint64_t ring_depth(const struct ring *r)
{
	uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
	return head > tail ? head - tail : 0;
}
