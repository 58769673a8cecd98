/*
 * Writing .snap files off raftd's event loop: a thread of its own takes
 * one snapshot at a time, writes and fsyncs it (snap_save), then purges
 * old .snap and .snap.db files as etcd does, and reports through an
 * eventfd. The loop appends the WAL's snapshot record only once the file
 * is durable (etcd's order), so a slow disk never holds heartbeats up.
 *
 * The loop thread calls everything here but the worker's own function.
 */
#ifndef CETCD_RAFTD_SNAPWRITE_H
#define CETCD_RAFTD_SNAPWRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "raftd/wal/snap.h"

struct snapwrite;

/* A writer for dir (copied), keeping max_snapshots of each kind of file
 * (0: all). 0, -ENOMEM, or the -errno of the eventfd or thread. */
int snapwrite_start(const char *dir, unsigned max_snapshots, struct snapwrite **out);

/* Stops the worker (after the file in hand, if any) and frees w. NULL is
 * fine. */
void snapwrite_stop(struct snapwrite *w);

/* Whether a snapshot is in hand (submitted and not reaped yet). */
bool snapwrite_busy(const struct snapwrite *w);

/* Hands s over (its data is taken: s is cleared). -EBUSY while busy. */
int snapwrite_submit(struct snapwrite *w, struct snap *s);

/* Readable when a snapshot was written (or failed). */
int snapwrite_event_fd(const struct snapwrite *w);

/* The outcome of the snapshot in hand: 0 with its point, the error of
 * writing it, or -EAGAIN while it is not done (or none was submitted). */
int snapwrite_reap(struct snapwrite *w, uint64_t *index, uint64_t *term);

#endif
