/*
 * The bytes of etcd's WAL: record framing and the few protobuf messages a
 * WAL holds, encoded exactly as etcd 3.4 encodes them (so the CRC chain
 * over them matches) and decoded without allocating.
 *
 * A frame is an 8-byte little-endian length word, then a walpb.Record of
 * that many bytes, then zero padding to a multiple of 8. When the record
 * needs padding, the top byte of the length word is 0x80 | pad, so that a
 * length word is never torn (it is 8-byte aligned, inside one sector).
 * walpb.Record is {type (1, int64), crc (2, uint32), data (3, bytes)};
 * type and crc are always written, data only when present. crc is the
 * CRC32C of the data of every non-crc record so far, chained
 * (crc32c_update of the previous value).
 */
#ifndef CETCD_RAFTD_WALREC_H
#define CETCD_RAFTD_WALREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftlog.h"

/* walpb record types */
enum walrec_type {
	WALREC_METADATA = 1,
	WALREC_ENTRY = 2,
	WALREC_STATE = 3,
	WALREC_CRC = 4,
	WALREC_SNAPSHOT = 5,
};

/* etcd's readers refuse a record of this many bytes or more (record plus
 * padding), so no writer may produce one. */
#define WALREC_MAX_RECORD (10u * 1024 * 1024)

/* Bytes of the length word. */
#define WALREC_FRAME_BYTES 8u

/* The length word for a record of rec_bytes, and its padding. */
static inline uint64_t walrec_frame_word(uint64_t rec_bytes, unsigned *pad)
{
	unsigned p = (unsigned)((8 - rec_bytes % 8) % 8);
	*pad = p;
	return p ? rec_bytes | ((uint64_t)(0x80u | p) << 56) : rec_bytes;
}

/* Splits a length word into record bytes and padding (etcd's rule: the pad
 * count is in the low 3 bits of the top byte when its high bit is set). */
static inline void walrec_frame_split(uint64_t word, uint64_t *rec_bytes, unsigned *pad)
{
	*rec_bytes = word & ~(0xffull << 56);
	*pad = (word >> 63) ? (unsigned)((word >> 56) & 7u) : 0;
}

/* A decoded walpb.Record; data points into the decoded buffer. */
struct walrec {
	int64_t type;
	uint32_t crc;
	bool has_data;
	const uint8_t *data;
	size_t len;
};

/* Decodes a walpb.Record as gogo/protobuf does: unknown fields are
 * skipped, a known field with the wrong wire type or a truncated field is
 * an error. 0 or -EBADMSG. */
int walrec_decode(const uint8_t *p, size_t len, struct walrec *out);

/* Decodes a raftpb.Entry; out->data points into p (out->len bytes), or is
 * NULL when the entry has no data. 0 or -EBADMSG (also for data over
 * UINT32_MAX bytes). */
int walrec_decode_entry(const uint8_t *p, size_t len, struct raft_entry *out);

/* Decodes a raftpb.HardState. 0 or -EBADMSG. */
int walrec_decode_state(const uint8_t *p, size_t len, struct raft_hardstate *out);

/* Decodes a walpb.Snapshot {index, term}. 0 or -EBADMSG. */
int walrec_decode_snapshot(const uint8_t *p, size_t len, uint64_t *index,
			   uint64_t *term);

/*
 * Encoding. Each encoder writes one whole frame (length word, record,
 * padding) at dst and returns its size; *crc is the chain value before
 * and, on return, after the record. The room a frame needs is at most
 * walrec_entry_size / walrec_metadata_size, or WALREC_SMALL_MAX for a
 * state, snapshot or crc frame (exact sizes depend on the crc, known only
 * while encoding). A data-carrying record whose frame reaches
 * WALREC_MAX_RECORD must not be written (etcd could not read it back).
 */
#define WALREC_SMALL_MAX 64u

size_t walrec_entry_size(const struct raft_entry *e);
size_t walrec_encode_entry(uint8_t *dst, uint32_t *crc, const struct raft_entry *e);

/* state: raftpb.HardState, all three fields always written. */
size_t walrec_encode_state(uint8_t *dst, uint32_t *crc, const struct raft_hardstate *hs);

/* snapshot: walpb.Snapshot {index, term}, both always written. */
size_t walrec_encode_snapshot(uint8_t *dst, uint32_t *crc, uint64_t index, uint64_t term);

/* metadata: opaque bytes; NULL data means no data field (as etcd writes
 * nil metadata), otherwise the field is written even when len is 0. */
size_t walrec_metadata_size(const uint8_t *data, size_t len);
size_t walrec_encode_metadata(uint8_t *dst, uint32_t *crc, const uint8_t *data, size_t len);

/* crc: a record without data whose crc field is crc (the chain value at a
 * segment's start); it leaves the chain unchanged. */
size_t walrec_encode_crc(uint8_t *dst, uint32_t crc);

#endif
