/*
 * Installing a db received from the leader (MSG_SNAPSHOT_INSTALL, see
 * shm/msg.h): the part that works on the received file alone, before the
 * apply loop (loop.c) makes it the member's db.
 *
 * install_prepare copies the received file (raftd keeps its own until
 * stored's durable index reaches the snapshot, so that a restarted stored
 * can be sent it again) to `tmp` beside the db, and checks the copy as
 * bbolt and etcd would before trusting it: meta pages and their
 * checksums, page size, the whole tree as bbolt's Check does (every page
 * in bounds and reached once, keys sorted, buckets well formed), etcd's
 * key and meta buckets, the members buckets, and a consistent index at
 * least `min_index`. It then opens the copy as stored opens its db at
 * start (etcd's buckets created where missing, cetcd's index buckets
 * rebuilt from `key` for a db etcd wrote) and checkpoints it, so the copy
 * is durable and ready to be renamed over the db. A bad file is refused
 * with a message that says what is wrong (errmsg_get) and never crashes
 * the process: nothing of the member's db changes then.
 */
#ifndef CETCD_STORED_INSTALL_H
#define CETCD_STORED_INSTALL_H

#include <stdbool.h>
#include <stdint.h>

struct diskio;

struct install_info {
	uint64_t consistent_index;
	int64_t revision;
	uint64_t bytes;      /* of the received file */
	bool index_rebuilt;  /* an etcd db: cetcd's index was built for it */
};

/*
 * Prepares tmp from the db file at src as above; map_size as
 * stored_loop_opts. Returns 0 with *out, or: -EUCLEAN or -EPROTO (not a
 * valid db), -ERANGE (its consistent index is below min_index), -ENOENT
 * (no file at src), -ENOMEM, or the -errno of reading, writing or syncing.
 * On failure tmp is removed.
 */
int install_prepare(const char *src, const char *tmp, uint64_t min_index, uint64_t map_size,
		    struct install_info *out);

/* install_prepare whose copy is written, checked and checkpointed through
 * the disk I/O io_open opens on it (stored_loop_opts.io_open: tests, the
 * fault backend); NULL io_open is install_prepare. Errors as there. */
int install_prepare_io(const char *src, const char *tmp, uint64_t min_index, uint64_t map_size,
		       int (*io_open)(int fd, void *arg, struct diskio **out), void *io_open_arg,
		       struct install_info *out);

#endif
