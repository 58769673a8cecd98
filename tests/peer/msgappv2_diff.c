/*
 * msgappv2_diff: the C half of the differential check of raftd's
 * msgappv2 stream codec against etcd's own (tests/peer/msgappv2_diff.sh;
 * the Go half is tests/tools/msgappv2diff, run inside etcd's rafthttp
 * package).
 *
 *   msgappv2_diff SEED < streams
 *
 * reads lines "<local> <remote> <stream> <sent> <decoded>" (see
 * msgappv2diff_test.go) and checks, for each: raftd's encoder writes the
 * same stream bytes for the sent messages, and raftd's decoder, given the
 * stream in random pieces (SEED picks them), reads back the messages
 * etcd's decoder read (compared as raftpb bytes), asking for more bytes
 * (-EAGAIN) exactly while a frame is incomplete. Prints a summary; exits 1
 * on any difference.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/raftmsg_util.h"
#include "raftd/peer/msgappv2.h"

#define MAX_MSGS 16

struct hexlist {
	uint8_t *bytes[MAX_MSGS];
	size_t len[MAX_MSGS];
	size_t n;
};

static int parse_list(char *s, struct hexlist *l)
{
	l->n = 0;
	if (strcmp(s, "-") == 0)
		return 0;
	for (char *tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
		if (l->n == MAX_MSGS)
			return -1;
		l->bytes[l->n] = malloc(strlen(tok) / 2 + 1);
		l->len[l->n] = rm_unhex(tok, l->bytes[l->n]);
		if (l->len[l->n] == (size_t)-1)
			return -1;
		l->n++;
	}
	return 0;
}

static void free_list(struct hexlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->bytes[i]);
	l->n = 0;
}

/* raftd's encoding of the sent messages; NULL on a decode failure. */
static uint8_t *encode_stream(const struct hexlist *sent, size_t *len)
{
	struct msgappv2_encoder e;
	size_t cap = 64, n = 0;
	uint8_t *out = malloc(cap);

	msgappv2_encoder_init(&e);
	for (size_t i = 0; i < sent->n; i++) {
		struct raftmsg m;
		if (raftmsg_decode(sent->bytes[i], sent->len[i], &m)) {
			free(out);
			return NULL;
		}
		size_t need = msgappv2_encoded_size(&e, &m);
		if (n + need > cap) {
			cap = (n + need) * 2;
			out = realloc(out, cap);
		}
		if (msgappv2_encode(&e, &m, out + n) != need)
			abort();
		n += need;
		raftmsg_release(&m);
	}
	*len = n;
	return out;
}

/* Decodes stream in random pieces and compares with want; returns a
 * description of the first difference, or NULL. */
static const char *decode_stream(struct rm_gen *g, uint64_t local, uint64_t remote,
				 const uint8_t *stream, size_t len, const struct hexlist *want)
{
	struct msgappv2_decoder d;
	size_t start = 0, avail = 0, got = 0;

	msgappv2_decoder_init(&d, local, remote);
	while (start < len) {
		struct raftmsg m;
		size_t frame;
		int rc = msgappv2_decode(&d, stream + start, avail - start, &m, &frame);
		if (rc == -EAGAIN) {
			if (frame <= avail - start || avail == len)
				return "-EAGAIN without a need for more bytes";
			avail += 1 + rm_below(g, rm_below(g, 2) ? 4 : 200);
			if (avail > len)
				avail = len;
			continue;
		}
		if (rc)
			return "a frame etcd wrote is refused";
		if (got == want->n)
			return "more messages than etcd read";
		size_t n = raftmsg_size(&m);
		uint8_t *b = malloc(n + 1);
		raftmsg_encode(&m, b);
		bool same = n == want->len[got] && memcmp(b, want->bytes[got], n) == 0;
		free(b);
		raftmsg_release(&m);
		if (!same)
			return "a message differs from etcd's";
		got++;
		start += frame;
	}
	return got == want->n ? NULL : "fewer messages than etcd read";
}

int main(int argc, char **argv)
{
	static struct rm_gen g;
	size_t cap = 0;
	char *line = NULL;
	unsigned long lines = 0, msgs = 0, bytes = 0, bad = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: msgappv2_diff SEED < streams\n");
		return 2;
	}
	rm_seed(&g, strtoull(argv[1], NULL, 10));
	while (getline(&line, &cap, stdin) > 0) {
		char *f[5], *save = NULL, *s = line;
		int nf = 0;
		for (char *tok; nf < 5 && (tok = strtok_r(s, " \n", &save)); s = NULL)
			f[nf++] = tok;
		if (nf != 5)
			continue; /* not a case (the Go test's own lines) */
		lines++;
		uint64_t local = strtoull(f[0], NULL, 10), remote = strtoull(f[1], NULL, 10);
		uint8_t *stream = malloc(strlen(f[2]) / 2 + 1);
		size_t slen = rm_unhex(f[2], stream);
		struct hexlist sent, want;
		const char *why = NULL;
		if (slen == (size_t)-1 || parse_list(f[3], &sent) || parse_list(f[4], &want)) {
			why = "unreadable line";
		} else {
			size_t elen = 0;
			uint8_t *enc = encode_stream(&sent, &elen);
			if (!enc || elen != slen || memcmp(enc, stream, slen) != 0)
				why = "raftd's encoding differs from etcd's";
			free(enc);
			if (!why)
				why = decode_stream(&g, local, remote, stream, slen, &want);
			msgs += want.n;
			bytes += slen;
		}
		if (why && ++bad <= 10)
			printf("stream %lu: %s\n   %s %s %s %s %s\n", lines, why, f[0], f[1], f[2],
			       f[3], f[4]);
		free_list(&sent);
		free_list(&want);
		free(stream);
	}
	free(line);
	if (lines == 0) {
		printf("msgappv2_diff: no streams read\n");
		return 1;
	}
	if (bad) {
		printf("FAIL: %lu of %lu streams differ\n", bad, lines);
		return 1;
	}
	printf("ok: %lu streams of etcd's (%lu messages, %lu bytes) encoded alike by raftd and "
	       "decoded alike in random pieces\n", lines, msgs, bytes);
	return 0;
}
