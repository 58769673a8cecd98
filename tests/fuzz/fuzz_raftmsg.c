/*
 * Fuzz target: raftpb bytes from a peer (raftd/raft/raftmsg.c). The input is
 * decoded as a Message, a Snapshot and a ConfChange. Checked: no read
 * past the input (ASan), only -EBADMSG or -ENOMEM as errors, a refused
 * input leaves nothing allocated, and a taken one re-encodes to bytes
 * that decode again to the same message (same re-encoding), with bytes
 * fields pointing into the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/raft/raftmsg.h"

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_raftmsg: %s\n", what);
		abort();
	}
}

static int inside(const uint8_t *p, size_t n, const uint8_t *data, size_t size)
{
	return n == 0 || (p >= data && p + n <= data + size);
}

static void message(const uint8_t *data, size_t size)
{
	struct raftmsg m, m2;
	int rc = raftmsg_decode(data, size, &m);

	require(rc == 0 || rc == -EBADMSG || rc == -ENOMEM, "unexpected error");
	if (rc) {
		require(m.alloc == NULL && m.n_entries == 0, "refused message keeps memory");
		return;
	}
	require(inside(m.context, m.context_len, data, size), "context outside the input");
	require(inside(m.snapshot.data, m.snapshot.len, data, size), "snapshot outside the input");
	for (size_t i = 0; i < m.n_entries; i++)
		require(inside(m.entries[i].data, m.entries[i].len, data, size),
			"entry data outside the input");
	size_t n = raftmsg_size(&m);
	uint8_t *a = malloc(n + 1), *b = NULL;
	require(a && raftmsg_encode(&m, a) == n, "encode wrote other than its size");
	require(raftmsg_decode(a, n, &m2) == 0, "re-encoding refused");
	size_t n2 = raftmsg_size(&m2);
	b = malloc(n2 + 1);
	require(b && raftmsg_encode(&m2, b) == n2, "encode wrote other than its size");
	require(n2 == n && memcmp(a, b, n) == 0, "re-encoding not stable");
	raftmsg_release(&m2);
	raftmsg_release(&m);
	free(a);
	free(b);
}

static void snapshot(const uint8_t *data, size_t size)
{
	struct raftmsg_snapshot s, s2;
	void *alloc, *alloc2;

	if (raftmsg_snapshot_decode(data, size, &s, &alloc))
		return;
	size_t n = raftmsg_snapshot_size(&s);
	uint8_t *a = malloc(n + 1), *b = malloc(n + 1);
	require(a && b && raftmsg_snapshot_encode(&s, a) == n, "snapshot size");
	require(raftmsg_snapshot_decode(a, n, &s2, &alloc2) == 0, "snapshot re-encoding refused");
	require(raftmsg_snapshot_size(&s2) == n && raftmsg_snapshot_encode(&s2, b) == n &&
		memcmp(a, b, n) == 0, "snapshot re-encoding not stable");
	raftd_free(alloc);
	raftd_free(alloc2);
	free(a);
	free(b);
}

static void conf_change(const uint8_t *data, size_t size)
{
	struct raftmsg_conf_change cc, cc2;
	uint8_t *a, *b;

	if (raftmsg_conf_change_decode(data, size, &cc))
		return;
	size_t n = raftmsg_conf_change_size(&cc);
	a = malloc(n + 1);
	b = malloc(n + 1);
	require(a && b && raftmsg_conf_change_encode(&cc, a) == n, "conf change size");
	require(raftmsg_conf_change_decode(a, n, &cc2) == 0 &&
		raftmsg_conf_change_encode(&cc2, b) == n && memcmp(a, b, n) == 0,
		"conf change re-encoding not stable");
	free(a);
	free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	message(data, size);
	snapshot(data, size);
	conf_change(data, size);
	return 0;
}
