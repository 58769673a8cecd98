/*
 * Fuzz target: WAL segment bytes (a member's disk is outside input: a
 * damaged or foreign file must give a clear error, never a crash).
 *
 * The input is decoded as the last segment (torn tails allowed) and as an
 * earlier one, from the start and from a snapshot point taken from the
 * first bytes. Checked: the decoder never reads past the input (ASan),
 * stops inside it, replays a gap-free run of entries, and every error is a
 * "wal: ..." sentence that names the segment.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/wal/walread.h"

#define NAME "0000000000000001-0000000000000010.wal"

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_wal: %s\n", what);
		abort();
	}
}

static void one(const uint8_t *data, size_t size, bool is_last, uint64_t start_index,
		uint64_t start_term)
{
	struct wal_replay rep;
	struct wal_decoder d;
	uint64_t end = 0;
	bool torn = false;

	wal_decoder_init(&d, &rep, start_index, start_term);
	int rc = wal_decode_segment(&d, NAME, data, size, is_last, &end, &torn);
	if (rc == 0) {
		require(end <= size, "end past the input");
		require(!torn || is_last, "torn outside the last segment");
		for (size_t i = 0; i < rep.n_entries; i++)
			require(rep.entries[i].index == start_index + 1 + i, "entries with a gap");
	} else {
		require(rc < 0, "positive error");
		require(!strncmp(rep.error, "wal: ", 5), "error without the wal: prefix");
		require(rc == -ENOMEM || strstr(rep.error, NAME) != NULL ||
			strstr(rep.error, "snapshot") != NULL, "error without the segment name");
	}
	wal_replay_free(&rep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t start = size ? data[0] % 8 : 0;
	one(data, size, true, 0, 0);
	one(data, size, false, 0, 0);
	one(data, size, true, start, size > 1 ? data[1] % 4 : 0);
	return 0;
}
