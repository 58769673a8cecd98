/*
 * The writer's set of free pages, and pages waiting to become free.
 *
 * A page freed by the write txn with id T goes to "pending" under T. It is
 * not reused until it is released, which the db does once T is covered by
 * the last durable checkpoint and no live reader reads a txid below T (a
 * reader at txid R sees the tree committed by R, which no longer holds the
 * pages R or later txns freed). Released pages are "free" and can be
 * allocated again. The freelist page written at a checkpoint lists free and
 * pending pages alike: after a restart all of them are free.
 *
 * A page that was born (allocated) after the last checkpoint began and is
 * freed before the next one begins belongs to no checkpoint's tree, durable
 * or being written: only readers can still see it. It goes to "young"
 * under T instead, and is released once no live reader reads below T,
 * whatever the checkpoints. Under a steady trickle of small commits the
 * same few pages then take each commit's copies of the changed path,
 * where otherwise every commit between two checkpoints would write (and
 * the checkpoint's fdatasync flush) pages of its own.
 */
#ifndef CETCD_STORED_FREELIST_H
#define CETCD_STORED_FREELIST_H

#include <stddef.h>
#include <stdint.h>

struct freelist_span {
	uint64_t txid;  /* txn that freed the pages */
	uint64_t pgid;  /* first page */
	uint64_t n;     /* pages in the run */
};

/* Runs waiting to become free, in the order freed: txid never decreases
 * along v. */
struct freelist_spans {
	struct freelist_span *v;
	size_t n, cap;
	uint64_t pages;  /* sum of n over v */
};

struct freelist {
	uint64_t *free;   /* free page ids, sorted descending (lowest last), unique */
	size_t nfree, free_cap;
	struct freelist_spans pending;
	struct freelist_spans young;  /* born and freed between two checkpoints */
};

void freelist_init(struct freelist *fl);
void freelist_destroy(struct freelist *fl);

/* Takes the lowest run of n contiguous free pages. 0 with *pgid set, or
 * -ENOENT when there is none. */
int freelist_alloc(struct freelist *fl, uint64_t n, uint64_t *pgid);

/* Adds pages to the free set (the pages read at open, or a txn's
 * allocations after it aborted: those fit in the room they left and never
 * allocate). ids need not be sorted. -EEXIST if one is already free
 * (nothing is changed then), -ENOMEM. */
int freelist_put_free(struct freelist *fl, const uint64_t *ids, size_t n);
int freelist_put_free_run(struct freelist *fl, uint64_t pgid, uint64_t n);

/* Records that txn txid freed the run [pgid, pgid+n). txid must not be
 * below that of earlier calls. -ENOMEM (never after a reservation). */
int freelist_add_pending(struct freelist *fl, uint64_t txid, uint64_t pgid, uint64_t n);

/* The same for a run born since the last checkpoint began (see above). */
int freelist_add_young(struct freelist *fl, uint64_t txid, uint64_t pgid, uint64_t n);

/* Makes room for n more freelist_add_pending and n more
 * freelist_add_young calls, which then cannot fail. -ENOMEM. */
int freelist_reserve_pending(struct freelist *fl, size_t n);

/* Drops pending and young runs recorded under txids greater than txid (a
 * checkpoint that failed before its pages were written). */
void freelist_drop_pending_after(struct freelist *fl, uint64_t txid);

/* Moves pending pages freed by txids <= upto_txid, and young pages freed
 * by txids <= young_upto, into the free set. -ENOMEM (nothing changed),
 * -EEXIST (a page was freed twice). */
int freelist_release(struct freelist *fl, uint64_t upto_txid, uint64_t young_upto);

/* Pages waiting to become free, pending and young. */
static inline uint64_t freelist_waiting(const struct freelist *fl)
{
	return fl->pending.pages + fl->young.pages;
}

/* Appends the ids of the waiting pages to ids at *k. */
void freelist_list_waiting(const struct freelist *fl, uint64_t *ids, size_t *k);

/* Free plus waiting pages. */
static inline uint64_t freelist_count(const struct freelist *fl)
{
	return fl->nfree + freelist_waiting(fl);
}

/* Bytes a freelist page needs to list count ids. */
uint64_t freelist_page_bytes(uint64_t count);

/* Writes the freelist page for every free and pending id into buf (span
 * bytes, zeroed by the caller), with header id pgid and the given overflow.
 * -ENOSPC if span is too small, -ENOMEM. */
int freelist_encode(const struct freelist *fl, uint8_t *buf, size_t span,
		    uint64_t pgid, uint32_t overflow);

/*
 * Reads the ids of a freelist page of span readable bytes. On success *ids
 * (freed with stored_free) holds *n ids sorted ascending, each in [2, hwm)
 * and unique. -EUCLEAN with a reason in why if the page is malformed,
 * -ENOMEM.
 */
int freelist_decode(const uint8_t *page, size_t span, uint64_t hwm,
		    uint64_t **ids, size_t *n, char *why, size_t why_len);

#endif
