/*
 * Fuzz target: the .snap file decoder (snap files are read from disk at
 * start; a leader's etcd may have written them). What decodes is encoded
 * again and decodes to the same point, configuration and data.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/wal/snap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap s, again;
	const char *why = NULL;
	uint8_t *buf;
	size_t len;

	int rc = snap_decode(data, size, &s, &why);
	if (rc) {
		if (!why || s.data)
			abort(); /* a refusal says why and keeps nothing */
		return 0;
	}
	if (snap_encode(&s, &buf, &len) || snap_decode(buf, len, &again, &why))
		abort();
	if (again.index != s.index || again.term != s.term || again.len != s.len ||
	    memcmp(again.data, s.data, s.len) || again.conf.n_voters != s.conf.n_voters ||
	    again.conf.n_learners != s.conf.n_learners ||
	    memcmp(again.conf.voters, s.conf.voters, s.conf.n_voters * sizeof(uint64_t)))
		abort();
	raftd_free(buf);
	snap_clear(&s);
	snap_clear(&again);
	return 0;
}
