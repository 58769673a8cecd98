/*
 * Fuzz target: peer stream bytes (raftd/peer/msgappv2.c, raftd/peer/msgframe.c).
 * The input is read as a msgappv2 stream, once whole and once in pieces
 * whose sizes come from the input, and as a message stream. Checked: no
 * read past the input (ASan), frames never claim more than the bytes
 * given, -EAGAIN asks for more than it has, both readings give the same
 * messages and the same verdict, a failed stream stays failed, and every
 * message taken survives a frame round trip unchanged.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raftd/peer/msgappv2.h"
#include "raftd/peer/msgframe.h"

#define MAX_FRAMES 64

static void require(int cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "fuzz_msgappv2: %s\n", what);
		abort();
	}
}

/* The raftpb bytes of m, malloc'd. */
static uint8_t *encoded(const struct raftmsg *m, size_t *n)
{
	*n = raftmsg_size(m);
	uint8_t *p = malloc(*n + 1);
	require(p && raftmsg_encode(m, p) == *n, "encode wrote other than its size");
	return p;
}

/* A frame round trip leaves m's bytes as they are. */
static void frame_roundtrip(const struct raftmsg *m, const uint8_t *want, size_t n)
{
	size_t fn = msgframe_size(m), frame;
	uint8_t *f = malloc(fn);
	struct raftmsg back;

	require(f && msgframe_encode(m, f) == fn, "frame size");
	require(msgframe_decode(f, fn, MSGFRAME_STREAM_MAX, &back, &frame) == 0 && frame == fn,
		"frame round trip refused");
	size_t bn;
	uint8_t *b = encoded(&back, &bn);
	require(bn == n && memcmp(b, want, n) == 0, "frame round trip changed the message");
	raftmsg_release(&back);
	free(b);
	free(f);
}

struct reading {
	int rc;               /* the last decode's result */
	size_t n;             /* messages taken */
	uint8_t *msg[MAX_FRAMES];
	size_t len[MAX_FRAMES];
};

/* Reads data as a msgappv2 stream, offering `step(i)` more bytes each
 * time the decoder asks (0: everything at once). */
static void read_stream(const uint8_t *data, size_t size, unsigned step_seed, struct reading *r)
{
	struct msgappv2_decoder d;
	size_t start = 0, avail = step_seed ? 0 : size;
	unsigned s = step_seed;

	memset(r, 0, sizeof(*r));
	msgappv2_decoder_init(&d, 1, 2);
	while (r->n < MAX_FRAMES) {
		struct raftmsg m;
		size_t frame = 0;
		int rc = msgappv2_decode(&d, data + start, avail - start, &m, &frame);
		if (rc == -EAGAIN) {
			require(frame > avail - start, "-EAGAIN without asking for more");
			if (avail == size) {
				r->rc = rc;
				return;
			}
			s = s * 1103515245u + 12345u;
			avail += 1 + (s >> 16) % 64;
			if (avail > size)
				avail = size;
			continue;
		}
		r->rc = rc;
		if (rc) {
			require(rc == -EBADMSG || rc == -EMSGSIZE || rc == -ENOMEM, "unexpected error");
			require(m.alloc == NULL, "refused frame keeps memory");
			if (rc != -ENOMEM)
				require(msgappv2_decode(&d, data, size, &m, &frame) == rc,
					"failed stream not failed");
			return;
		}
		require(frame <= avail - start && frame > 0, "frame past the bytes given");
		r->msg[r->n] = encoded(&m, &r->len[r->n]);
		frame_roundtrip(&m, r->msg[r->n], r->len[r->n]);
		r->n++;
		raftmsg_release(&m);
		start += frame;
	}
}

static void free_reading(struct reading *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->msg[i]);
}

/* The input as a message stream: frames until one does not decode. */
static void message_stream(const uint8_t *data, size_t size)
{
	size_t start = 0;

	for (int i = 0; i < MAX_FRAMES; i++) {
		struct raftmsg m;
		size_t frame = 0;
		int rc = msgframe_decode(data + start, size - start, MSGFRAME_STREAM_MAX, &m, &frame);
		if (rc == -EAGAIN)
			require(frame > size - start, "-EAGAIN without asking for more");
		if (rc)
			return;
		require(frame <= size - start, "frame past the input");
		raftmsg_release(&m);
		start += frame;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct reading whole, pieces;

	read_stream(data, size, 0, &whole);
	read_stream(data, size, size ? data[0] | 1u : 1u, &pieces);
	require(whole.n == pieces.n, "pieces give other messages than the whole");
	if (whole.n < MAX_FRAMES)
		require(whole.rc == pieces.rc, "pieces give another verdict than the whole");
	for (size_t i = 0; i < whole.n; i++)
		require(whole.len[i] == pieces.len[i] &&
			memcmp(whole.msg[i], pieces.msg[i], whole.len[i]) == 0,
			"pieces give other messages than the whole");
	free_reading(&whole);
	free_reading(&pieces);
	message_stream(data, size);
	return 0;
}
