/*
 * Decoding WAL segments (internal to the WAL, and the fuzz target's
 * entry point): the record loop of etcd's decoder and the replay rules of
 * its ReadAll, over segment bytes in memory.
 */
#ifndef CETCD_RAFTD_WALREAD_H
#define CETCD_RAFTD_WALREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/wal/wal.h"

struct wal_decoder {
	uint32_t crc;          /* chain value after the last record */
	uint64_t start_index;  /* the snapshot point replay starts after */
	uint64_t start_term;
	bool snap_found;       /* a snapshot record for the start point was seen */
	uint64_t last_index;   /* index of the last entry record seen (enti) */
	size_t cap;            /* room of rep->entries */
	bool points_only;      /* wal_snapshots: collect snapshot records,
				* keep no entries */
	size_t cap_snaps;      /* room of rep->snaps */
	size_t cap_locs;       /* room of rep->locs */
	/* the record being replayed: its segment's sequence number (when
	 * its name has one) and the chain value before it */
	bool seg_known;
	uint64_t seg_seq;
	uint32_t crc_before;
	struct wal_replay *rep;
};

/* A decoder that fills rep (zeroed here) with what follows the start. */
void wal_decoder_init(struct wal_decoder *d, struct wal_replay *rep,
		      uint64_t start_index, uint64_t start_term);

/*
 * Decodes the records of one segment, buf[0..len), named name (for
 * errors). A zero length word ends the segment (preallocated space).
 * When is_last, a record that is cut short or torn (it fails to decode or
 * its CRC mismatches, and one of its 512-byte sectors is all zero) ends
 * the segment quietly with *torn set; otherwise that is corruption.
 * *end is the offset after the last valid record.
 * 0; -EBADMSG, -EINVAL, -ENOMEM with d->rep->error set.
 */
int wal_decode_segment(struct wal_decoder *d, const char *name, const uint8_t *buf,
		       size_t len, bool is_last, uint64_t *end, bool *torn);

/*
 * wal_read_entry's check of the bytes it read back: the frame at
 * buf[0..avail) must hold the record of entry want (its index, term,
 * type and length), and its CRC must continue the chain value crc.
 * 0 with *got (its data pointing into buf); -EAGAIN with *need the bytes
 * the frame's record ends at, when avail is short of them (at first the
 * length word's 8); -EBADMSG when it is not that entry's record.
 */
int wal_frame_entry(const uint8_t *buf, size_t avail, uint32_t crc,
		    const struct raft_entry *want, struct raft_entry *got, size_t *need);

/* Parses "%016x-%016x.wal". */
bool wal_parse_name(const char *name, uint64_t *seq, uint64_t *index);

#endif
