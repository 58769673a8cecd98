/*
 * Fuzz target: reading a peer's HTTP/1.1 answers off a connection
 * (raftd/peer/peer_fetch.h's reader, which the lease forwarder's keep-alive
 * connections and the blocking peer_fetch use). The first byte seeds the
 * sizes of the pieces the rest arrives in; the stream then ends. The
 * answers read piece by piece must be the same (statuses, bodies, their
 * order, the final verdict) as those read with all bytes at once, and
 * every answer must be within the limits: a status of 100..999, a body
 * of at most PEER_FETCH_MAX_BODY bytes and NUL-terminated.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/peer/peer_fetch.h"

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_peer_fetch: %s\n", what);
		abort();
	}
}

/* What a reading gave: a digest of its answers and how it ended. */
struct outcome {
	unsigned answers;
	uint64_t digest;
	int verdict;
};

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Feeds data in pieces of the sizes seed makes (all at once for seed 0),
 * then the end of the stream, taking every answer as it becomes whole. */
static struct outcome read_all(const uint8_t *data, size_t size, uint32_t seed)
{
	struct peer_fetch_reader r = { 0 };
	struct outcome o = { 0, 0xcbf29ce484222325ull, 0 };
	size_t off = 0;
	bool eof = false;

	while (!eof) {
		size_t n = size - off;
		if (seed && n) {
			seed = seed * 1103515245u + 12345u;
			size_t piece = 1 + (seed >> 16) % 7;
			n = n < piece ? n : piece;
		}
		uint8_t *at = peer_fetch_reader_space(&r, n ? n : 1);
		require(at != NULL, "no room");
		memcpy(at, data + off, n);
		off += n;
		eof = n == 0;
		struct peer_fetch_resp resp;
		int rc = peer_fetch_reader_feed(&r, n, eof, &resp);
		while (rc == 1) {
			require(resp.status >= 100 && resp.status <= 999, "a status out of range");
			require(resp.len <= PEER_FETCH_MAX_BODY, "a body over the limit");
			require(resp.body && resp.body[resp.len] == '\0', "a body not terminated");
			o.answers++;
			o.digest = mix(o.digest, &resp.status, sizeof(resp.status));
			o.digest = mix(o.digest, resp.body, resp.len);
			peer_fetch_free(&resp);
			/* answers already whole may wait in the reader */
			rc = peer_fetch_reader_feed(&r, 0, eof, &resp);
		}
		if (rc < 0) {
			require(rc == -EBADMSG || rc == -EMSGSIZE || rc == -ECONNRESET,
				"an unexpected error");
			o.verdict = rc;
			break;
		}
		require(!eof, "the end of the stream left the reader waiting");
	}
	peer_fetch_reader_free(&r);
	return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	struct outcome whole = read_all(data + 1, size - 1, 0);
	struct outcome pieces = read_all(data + 1, size - 1, data[0] | 0x100u);
	require(whole.answers == pieces.answers && whole.digest == pieces.digest &&
			whole.verdict == pieces.verdict,
		"pieces read otherwise than the whole");
	return 0;
}
