/*
 * Decoding WAL segments (see walread.h). The record loop follows etcd's
 * wal/decoder.go and the replay rules its WAL.ReadAll; where etcd panics
 * on a record it cannot decode, this returns an error naming the segment
 * and offset.
 */
#include "raftd/wal/walread.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/hex/hex.h"
#include "raftd/alloc.h"
#include "base/crc32c/crc32c.h"
#include "raftd/wal/walrec.h"

#define SECTOR_BYTES 512u
#define CORRUPT_HINT "; the member's log is corrupt, restore from a snapshot"

void wal_replay_free(struct wal_replay *r)
{
	for (size_t i = 0; i < r->n_entries; i++)
		raft_entry_free_data(&r->entries[i]);
	raftd_free(r->entries);
	raftd_free(r->locs);
	r->locs = NULL;
	raftd_free(r->metadata);
	raftd_free(r->snaps);
	r->snaps = NULL;
	r->n_snaps = 0;
	r->entries = NULL;
	r->n_entries = 0;
	r->metadata = NULL;
	r->metadata_len = 0;
}

void wal_decoder_init(struct wal_decoder *d, struct wal_replay *rep,
		      uint64_t start_index, uint64_t start_term)
{
	memset(d, 0, sizeof(*d));
	memset(rep, 0, sizeof(*rep));
	d->rep = rep;
	d->start_index = start_index;
	d->start_term = start_term;
}

__attribute__((format(printf, 3, 4)))
static int fail(struct wal_decoder *d, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->rep->error, sizeof(d->rep->error), fmt, ap);
	va_end(ap);
	return rc;
}

bool wal_parse_name(const char *name, uint64_t *seq, uint64_t *index)
{
	uint64_t v[2] = { 0, 0 };
	const char *p = name;
	for (int k = 0; k < 2; k++) {
		/* 16 digits: it stops at a shorter name's NUL */
		if (hex_parse_u64(p, 16, &v[k]))
			return false;
		p += 16;
		if (*p++ != (k == 0 ? '-' : '.'))
			return false;
	}
	if (strcmp(p, "wal") != 0)
		return false;
	*seq = v[0];
	*index = v[1];
	return true;
}

/* etcd's isTornEntry: the record's bytes (data, at file offset off), cut
 * at sector boundaries of the file, include a chunk that is all zero. */
static bool torn_record(uint64_t off, const uint8_t *data, size_t len)
{
	size_t i = 0;
	while (i < len) {
		size_t chunk = SECTOR_BYTES - (size_t)(off % SECTOR_BYTES);
		if (chunk > len - i)
			chunk = len - i;
		bool zero = true;
		for (size_t k = 0; k < chunk && zero; k++)
			zero = data[i + k] == 0;
		if (zero)
			return true;
		i += chunk;
		off += chunk;
	}
	return false;
}

/* An entry replaces those at and after its index (etcd's ReadAll). */
static int replay_entry(struct wal_decoder *d, const struct raft_entry *e,
			const char *name, uint64_t off)
{
	struct wal_replay *rep = d->rep;

	d->last_index = e->index;
	if (e->index <= d->start_index || d->points_only)
		return 0;
	uint64_t up = e->index - d->start_index - 1;
	if (up > rep->n_entries)
		return fail(d, -EBADMSG,
			    "wal: entry %" PRIu64 " in %s at offset %" PRIu64
			    " leaves a gap after entry %" PRIu64 CORRUPT_HINT,
			    e->index, name, off, d->start_index + rep->n_entries);
	while (rep->n_entries > up)
		raft_entry_free_data(&rep->entries[--rep->n_entries]);
	if (raftd_reserve((void **)&rep->entries, &d->cap, rep->n_entries + 1,
			  sizeof(*rep->entries), 256) ||
	    raftd_reserve((void **)&rep->locs, &d->cap_locs, rep->n_entries + 1,
			  sizeof(*rep->locs), 256))
		return fail(d, -ENOMEM, "wal: out of memory replaying %s", name);
	rep->locs[rep->n_entries] = (struct raftlog_loc){
		.seg = d->seg_seq, .off = d->seg_known ? off : 0, .crc = d->crc_before,
	};
	struct raft_entry *dst = &rep->entries[rep->n_entries];
	*dst = *e;
	if (e->len) {
		dst->data = raftd_malloc(e->len);
		if (!dst->data)
			return fail(d, -ENOMEM, "wal: out of memory replaying %s", name);
		memcpy(dst->data, e->data, e->len);
	}
	rep->n_entries++;
	return 0;
}

static int replay_metadata(struct wal_decoder *d, const struct walrec *r,
			   const char *name, uint64_t off)
{
	struct wal_replay *rep = d->rep;

	if (!r->has_data)
		return 0; /* etcd's nil metadata */
	if (rep->metadata) {
		if (rep->metadata_len != r->len || memcmp(rep->metadata, r->data, r->len))
			return fail(d, -EINVAL,
				    "wal: conflicting metadata in %s at offset %" PRIu64
				    "; the WAL mixes segments of different members",
				    name, off);
		return 0;
	}
	rep->metadata = raftd_malloc(r->len);
	if (!rep->metadata)
		return fail(d, -ENOMEM, "wal: out of memory replaying %s", name);
	memcpy(rep->metadata, r->data, r->len);
	rep->metadata_len = r->len;
	return 0;
}

/* wal_snapshots: one more snapshot record. */
static int note_snapshot(struct wal_decoder *d, uint64_t index, uint64_t term, const char *name)
{
	struct wal_replay *rep = d->rep;

	if (raftd_reserve((void **)&rep->snaps, &d->cap_snaps, rep->n_snaps + 1, sizeof(*rep->snaps),
			  16))
		return fail(d, -ENOMEM, "wal: out of memory reading %s", name);
	rep->snaps[rep->n_snaps++] = (struct wal_snap){ index, term };
	return 0;
}

/* Applies one valid record (its CRC already checked) to the replay. */
static int replay_record(struct wal_decoder *d, const struct walrec *r,
			 const char *name, uint64_t off)
{
	struct raft_entry e;
	uint64_t index, term;

	switch (r->type) {
	case WALREC_ENTRY:
		if (walrec_decode_entry(r->data, r->len, &e))
			break;
		return replay_entry(d, &e, name, off);
	case WALREC_STATE:
		if (walrec_decode_state(r->data, r->len, &d->rep->state))
			break;
		return 0;
	case WALREC_METADATA:
		return replay_metadata(d, r, name, off);
	case WALREC_CRC:
		/* A fresh decoder (chain 0) takes the value on trust. */
		if (d->crc != 0 && r->crc != d->crc)
			return fail(d, -EBADMSG,
				    "wal: crc mismatch in %s at offset %" PRIu64 CORRUPT_HINT,
				    name, off);
		d->crc = r->crc;
		return 0;
	case WALREC_SNAPSHOT:
		if (walrec_decode_snapshot(r->data, r->len, &index, &term))
			break;
		if (d->points_only)
			return note_snapshot(d, index, term, name);
		if (index == d->start_index) {
			if (term != d->start_term)
				return fail(d, -EINVAL,
					    "wal: the snapshot record at index %" PRIu64
					    " in %s at offset %" PRIu64 " has term %" PRIu64
					    ", the snapshot has term %" PRIu64
					    "; the WAL does not belong to this snapshot",
					    index, name, off, term, d->start_term);
			d->snap_found = true;
		}
		return 0;
	default:
		return fail(d, -EBADMSG,
			    "wal: unknown record type %" PRId64 " in %s at offset %" PRIu64
			    CORRUPT_HINT, r->type, name, off);
	}
	return fail(d, -EBADMSG,
		    "wal: undecodable record data (type %" PRId64 ") in %s at offset %" PRIu64
		    CORRUPT_HINT, r->type, name, off);
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int wal_decode_segment(struct wal_decoder *d, const char *name, const uint8_t *buf,
		       size_t len, bool is_last, uint64_t *end, bool *torn)
{
	uint64_t off = 0;
	uint64_t first_index;

	*torn = false;
	d->seg_known = wal_parse_name(name, &d->seg_seq, &first_index);
	for (;;) {
		*end = off;
		if (len - off < WALREC_FRAME_BYTES) {
			/* The end, or preallocated zeros too short for a
			 * length word (a file size that is not a multiple
			 * of 8). */
			bool zero = true;
			for (uint64_t i = off; i < len && zero; i++)
				zero = buf[i] == 0;
			if (zero)
				return 0;
			if (is_last)
				goto torn_tail;
			return fail(d, -EBADMSG,
				    "wal: %s ends inside a record at offset %" PRIu64 CORRUPT_HINT,
				    name, off);
		}
		uint64_t word = le64(buf + off);
		if (word == 0)
			return 0; /* preallocated space */
		uint64_t rec;
		unsigned pad;
		walrec_frame_split(word, &rec, &pad);
		if (rec >= WALREC_MAX_RECORD - pad)
			return fail(d, -EBADMSG,
				    "wal: record of %" PRIu64 " bytes in %s at offset %" PRIu64
				    " is over the 10 MiB limit" CORRUPT_HINT, rec, name, off);
		if (rec + pad > len - off - WALREC_FRAME_BYTES) {
			if (is_last)
				goto torn_tail;
			return fail(d, -EBADMSG,
				    "wal: %s ends inside a record at offset %" PRIu64 CORRUPT_HINT,
				    name, off);
		}
		const uint8_t *data = buf + off + WALREC_FRAME_BYTES;
		size_t data_len = (size_t)(rec + pad);
		struct walrec r;
		if (walrec_decode(data, (size_t)rec, &r)) {
			if (is_last && torn_record(off + WALREC_FRAME_BYTES, data, data_len))
				goto torn_tail;
			return fail(d, -EBADMSG,
				    "wal: undecodable record in %s at offset %" PRIu64 CORRUPT_HINT,
				    name, off);
		}
		d->crc_before = d->crc;
		if (r.type != WALREC_CRC) {
			uint32_t c = crc32c_update(d->crc, r.data, r.len);
			if (c != r.crc) {
				if (is_last &&
				    torn_record(off + WALREC_FRAME_BYTES, data, data_len))
					goto torn_tail;
				return fail(d, -EBADMSG,
					    "wal: crc mismatch in %s at offset %" PRIu64 CORRUPT_HINT,
					    name, off);
			}
			d->crc = c;
		}
		int rc = replay_record(d, &r, name, off);
		if (rc)
			return rc;
		off += WALREC_FRAME_BYTES + rec + pad;
	}

torn_tail:
	*torn = true;
	return 0;
}

int wal_frame_entry(const uint8_t *buf, size_t avail, uint32_t crc,
		    const struct raft_entry *want, struct raft_entry *got, size_t *need)
{
	if (avail < WALREC_FRAME_BYTES) {
		*need = WALREC_FRAME_BYTES;
		return -EAGAIN;
	}
	uint64_t rec;
	unsigned pad;
	walrec_frame_split(le64(buf), &rec, &pad);
	if (rec == 0 || rec >= WALREC_MAX_RECORD - pad)
		return -EBADMSG;
	if (avail - WALREC_FRAME_BYTES < rec) {
		*need = WALREC_FRAME_BYTES + (size_t)rec;
		return -EAGAIN;
	}
	struct walrec r;
	if (walrec_decode(buf + WALREC_FRAME_BYTES, (size_t)rec, &r) || r.type != WALREC_ENTRY ||
	    !r.has_data || crc32c_update(crc, r.data, r.len) != r.crc ||
	    walrec_decode_entry(r.data, r.len, got) || got->index != want->index ||
	    got->term != want->term || got->type != want->type || got->len != want->len)
		return -EBADMSG;
	return 0;
}
