/*
 * Internal: the structures inside the member region, the process-local
 * handle, and the lock-byte map. Only the shm sources include this; other
 * components use the public headers.
 *
 * Region layout (offsets in the header, all page aligned; the header also
 * holds the ids, flags and the TLS session ticket key):
 *
 *   header (4 KiB) | roles | slots | reader table | status | metrics
 *   | simple tokens | rings | events | latest-entry cache
 *
 * Rings: slot_count * SHM_SLOT_RING_COUNT slot rings (slot-major), then the
 * SHM_DAEMON_RING_COUNT daemon rings, all ring_stride bytes apart.
 */
#ifndef CETCD_SHM_LAYOUT_H
#define CETCD_SHM_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm/doorbell.h"
#include "base/log/errmsg.h"
#include "shm/region.h"
#include "shm/slot.h"
#include "shm/status.h"

#define SHM_MAGIC "CETCDSHM"
#define SHM_LINE 128 /* two cache lines: the adjacent-line prefetcher pairs them */
#define SHM_PAGE 4096u
/* Where the latest-entry cache starts in the region file: a huge page. */
#define SHM_HUGE_ALIGN (2u << 20)
#define SHM_HEADER_BYTES 4096u
#define SHM_READERS_PER_SLOT 4u
#define SHM_READERS_EXTRA 8u /* for raftd, stored and tools */
#define SHM_RING_RECORDS 4u  /* a ring holds this many of its largest record */
#define SHM_MAX_SLOTS 1024u

/*
 * The region header. The first fields (through `incarnation`) are the
 * stable prefix: every layout version keeps them where they are, so that
 * shm_region_create can carry slot generations over from any older region
 * and shm_region_attach can name the version it found.
 */
struct shm_header {
	char magic[8];
	uint32_t layout_version;
	uint32_t header_bytes;
	uint64_t region_bytes;
	_Atomic uint64_t generation_floor; /* >= every slot generation handed out */
	uint64_t incarnation;              /* bumped by every create */
	/* end of the stable prefix */
	_Atomic uint64_t member_id;
	uint64_t max_request_bytes;
	uint32_t slot_count;
	uint32_t reader_count;
	uint32_t ring_max_record;
	uint32_t bcast_max_record;
	uint64_t ring_stride; /* bytes per ring: control block + data */
	uint64_t roles_off;
	uint64_t slots_off;
	uint64_t readers_off;
	uint64_t status_off;
	uint64_t rings_off;
	uint64_t bcast_off;
	uint64_t bcast_bytes;
	uint64_t blob_off;   /* blob area for results too big for a ring: none yet */
	uint64_t blob_bytes;
	uint64_t cache_off;  /* stored's latest-entry cache (stored/mvcc/lcache.h) */
	uint64_t cache_bytes;/* its sets' bytes, and a page for its header */
	/* the cluster id raftd resolved; stored before member_id, which says
	 * both are known (a region made before the field existed reads 0:
	 * unknown) */
	_Atomic uint64_t cluster_id;
	/* 1 once raftd published the member to the cluster and stored
	 * applied it, as etcd's ReadyNotify (a region made before the field
	 * existed reads 0: not yet) */
	_Atomic uint64_t published;
	uint64_t metrics_off;   /* the metrics blocks (shm/metrics.h) */
	uint64_t metrics_bytes;
	uint64_t tokens_off;    /* the simple-token table (shm/tokens.h) */
	uint64_t tokens_bytes;
	/* the member's TLS session ticket key (shm_region_ticket_key):
	 * random, written once by region_init before the file is visible */
	uint8_t ticket_key[SHM_TICKET_KEY_BYTES];
	uint8_t reserved[3880 - SHM_TICKET_KEY_BYTES];
};
_Static_assert(sizeof(struct shm_header) == SHM_HEADER_BYTES, "header size");
#define SHM_HEADER_PREFIX_BYTES 40u

struct shm_doorbell {
	_Atomic uint32_t seq;          /* the futex word; bumped by every wake */
	_Atomic uint32_t sleeping;     /* threads asleep or about to sleep */
	_Atomic uint32_t wants_events; /* owner wants shm_events_notify wakes */
	uint32_t pad0;
	_Atomic uint64_t wakes; /* futex wakes issued (statistic) */
	uint8_t pad1[SHM_DOORBELL_BYTES - 24];
};
_Static_assert(sizeof(struct shm_doorbell) == SHM_DOORBELL_BYTES, "doorbell");

struct shm_role_block {
	struct shm_doorbell doorbell;
	_Atomic int32_t holder_pid; /* for log messages only */
	uint8_t reserved[SHM_LINE - 4];
};

struct shm_slot {
	_Atomic uint64_t generation; /* bumped by every claim */
	_Atomic int32_t holder_pid;  /* for log messages only */
	uint8_t pad0[SHM_LINE - 12];
	struct shm_doorbell doorbell;
};

struct shm_reader_entry {
	_Atomic uint64_t txid;      /* READERS_IDLE when not reading */
	_Atomic int32_t holder_pid; /* for log messages only */
	uint8_t pad[64 - 12];
};

struct shm_status_block {
	uint8_t raftd[STATUS_SEQLOCK_BYTES];
	uint8_t stored[STATUS_SEQLOCK_BYTES];
	uint8_t stored_delivered[64]; /* one word of its own (status.c) */
	uint8_t stored_waiting[STATUS_WAITING_BYTES]; /* status_waiting_write */
	uint8_t reserved[SHM_PAGE - 2 * STATUS_SEQLOCK_BYTES - 64 - STATUS_WAITING_BYTES];
};

/*
 * Lock-byte map: the OFD locks are taken on these byte offsets of the
 * region file (locks may lie past the end of the file).
 */
#define SHM_LOCK_LAUNCHER 0
#define SHM_LOCK_ROLE(role) (8 + (off_t)(role))
#define SHM_LOCK_SLOT(i) (64 + (off_t)(i))
#define SHM_LOCK_READER(h, j) (64 + (off_t)(h)->slot_count + (off_t)(j))

/* The process-local handle. */
struct shm_region {
	int fd;
	uint8_t *base; /* start of the mapping */
	size_t bytes;
	struct shm_header *hdr;
	bool launcher;
	bool role_held[SHM_ROLE_COUNT];
	bool *slot_held;   /* slot_count entries */
	bool *reader_held; /* reader_count entries */
};

/* Pointers into the region from header offsets. */
static inline struct shm_role_block *shm_role_block(struct shm_region *r,
						    enum shm_role role)
{
	return (struct shm_role_block *)(r->base + r->hdr->roles_off) + role;
}

static inline struct shm_slot *shm_slot_at(struct shm_region *r, uint32_t i)
{
	return (struct shm_slot *)(r->base + r->hdr->slots_off) + i;
}

static inline struct shm_reader_entry *shm_reader_at(struct shm_region *r,
						     uint32_t j)
{
	return (struct shm_reader_entry *)(r->base + r->hdr->readers_off) + j;
}

static inline struct shm_status_block *shm_status_at(struct shm_region *r)
{
	return (struct shm_status_block *)(r->base + r->hdr->status_off);
}

static inline struct ring *shm_ring_at(struct shm_region *r, uint64_t n)
{
	return (struct ring *)(r->base + r->hdr->rings_off +
			       n * r->hdr->ring_stride);
}

/* Records the text of the failure rc in the error slot (base/log/errmsg.h) and
 * returns rc: the region code's name for errmsg_set. */
#define shm_set_error(rc, ...) errmsg_set((rc), __VA_ARGS__)

/*
 * OFD locks on one byte of fd (shm/ofdlock.c).
 * ofdlock_try: 0 if taken (or already held through this file description),
 *   -EBUSY if another open file description holds it, -errno otherwise.
 * ofdlock_is_held: 1 if another open file description holds it, 0 if not,
 *   -errno on failure. Locks held through fd itself do not count.
 * ofdlock_any_from: like ofdlock_is_held for any byte at or past `from`.
 */
int ofdlock_try(int fd, off_t byte);
void ofdlock_release(int fd, off_t byte);
int ofdlock_is_held(int fd, off_t byte);
int ofdlock_any_from(int fd, off_t from);

/*
 * Gives the whole SHM_PAGE pages of [lo, hi) back to the file system the
 * mapping is a file of (MADV_REMOVE, shm/ring.c): they read as zeroes from
 * then on and hold no memory until written again. Where the memory is not
 * a shared file's (a private mapping) nothing happens.
 */
void shm_pages_give_back(void *lo, void *hi);

/* The same for the pages of a ring's data area (cap bytes at data) that
 * hold the cursors from to to (to - from <= cap), which may wrap past
 * its end. */
void shm_pages_give_back_wrapped(uint8_t *data, uint64_t cap, uint64_t from,
				 uint64_t to);

/* Wakes the doorbell if someone sleeps on it; the caller has already
 * issued the full fence after publishing (shm/doorbell.c). */
void shm_doorbell_wake(struct shm_doorbell *d);
/* Forgets sleepers of a dead holder (new holder only). */
void shm_doorbell_takeover(struct shm_doorbell *d);

#endif
