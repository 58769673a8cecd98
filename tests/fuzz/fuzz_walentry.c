/*
 * Fuzz target: a WAL record read back for an entry (wal_frame_entry, the
 * check wal_read_entry makes of the bytes it reads from a segment when a
 * follower needs an entry whose data raftd keeps on disk only). The file
 * is outside input: a changed or foreign byte must be refused, never
 * crash or be taken for the entry.
 *
 * The input: the CRC chain value before the record (4 bytes, little
 * endian), the entry wanted (index and term, 8 bytes each; type, 1 byte;
 * length, 4 bytes), then the frame's bytes. Checked: the answer is 0,
 * -EAGAIN or -EBADMSG; -EAGAIN asks for more than was given, and no more
 * than a record may be; 0 gives the entry wanted, its data inside the
 * input; given in two turns as wal_read_entry does, the answer is the
 * same.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/wal/walread.h"
#include "raftd/wal/walrec.h"

#define HEAD 25u

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_walentry: %s\n", what);
		abort();
	}
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HEAD)
		return 0;
	uint32_t crc = (uint32_t)le(data, 4);
	struct raft_entry want = {
		.index = le(data + 4, 8), .term = le(data + 12, 8), .type = data[20],
		.len = (uint32_t)le(data + 21, 4),
	};
	const uint8_t *buf = data + HEAD;
	size_t avail = size - HEAD;
	struct raft_entry got;
	size_t need = 0;
	int rc = wal_frame_entry(buf, avail, crc, &want, &got, &need);
	require(rc == 0 || rc == -EAGAIN || rc == -EBADMSG, "an unexpected answer");
	if (rc == -EAGAIN)
		require(need > avail && need <= WALREC_FRAME_BYTES + WALREC_MAX_RECORD,
			"asked for what it had, or for too much");
	if (rc == 0) {
		require(got.index == want.index && got.term == want.term &&
			got.type == want.type && got.len == want.len, "not the entry wanted");
		require(!got.len || (got.data >= buf && got.data + got.len <= buf + avail),
			"data outside the input");
	}
	/* in turns, as wal_read_entry reads: the length word, then the rest */
	size_t n = WALREC_FRAME_BYTES;
	int rc2 = -EAGAIN;
	for (int turn = 0; turn < 3 && rc2 == -EAGAIN && n <= avail; turn++)
		rc2 = wal_frame_entry(buf, n, crc, &want, &got, &n);
	if (rc2 != -EAGAIN)
		require(rc2 == rc, "a different answer in turns");
	return 0;
}
