/*
 * A second thread that writes a commit's pages while the commit is still
 * building the rest of them.
 *
 * A random write touches about one leaf per put, and the kernel's side of
 * writing those pages (page cache lookup or allocation, copy, dirty
 * marking) costs about as much as building them. The spill hands each
 * page to pagewrite_push as soon as it is final; the thread writes them
 * through the db's diskio (adjacent ones in one pwritev, unless the
 * backend writes each page by itself: diskio_set_separate_writes, which
 * the live db sets), and
 * pagewrite_drain waits until every page pushed so far is written. Only
 * for diskio backends whose write_batch may run on another thread
 * (diskio_ops.concurrent_writes).
 *
 * Waking the thread and waiting for it cost two context switches, more
 * than writing a few pages: the thread starts only once PAGEWRITE_WAKE
 * writes are queued, and pagewrite_drain writes what is still queued on
 * the caller's thread. A commit of a few pages (a small apply batch)
 * never involves the thread.
 *
 * One producer (the db's writer) at a time, and only it drains: the drain
 * writes from the queue unlocked, which holds only while nothing is
 * pushed. Buffers pushed must stay unchanged and allocated until
 * pagewrite_drain returns.
 */
#ifndef CETCD_STORED_PAGEWRITE_H
#define CETCD_STORED_PAGEWRITE_H

#include <stddef.h>
#include <stdint.h>

#include "base/diskio/diskio.h"

struct pagewrite;

/* Queued writes that wake the thread. */
#define PAGEWRITE_WAKE 16

/* Starts the thread for io. 0, -ENOMEM, or pthread_create's error. */
int pagewrite_start(struct diskio *io, struct pagewrite **out);
/* Drains, stops and frees p. NULL-safe. */
void pagewrite_stop(struct pagewrite *p);
/* Queues len bytes of buf for file offset off. 0 or -ENOMEM (nothing
 * queued: the caller writes it itself). */
int pagewrite_push(struct pagewrite *p, const void *buf, size_t len, uint64_t off);
/* Writes what the thread has not taken, waits for what it has: 0, or the
 * first error of the writes since the last drain. */
int pagewrite_drain(struct pagewrite *p);

#endif
