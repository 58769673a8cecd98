/*
 * raftmsg_diff: the C half of the differential check of raftd's raftpb
 * codec (tests/peer/raftmsg_diff.sh runs it; tests/tools/raftmsgdiff is
 * the Go half, on etcd's own gogo-generated code).
 *
 *   raftmsg_diff gen SEED COUNT
 *       prints COUNT cases, "<Kind> <hex>" a line (Kind: Message, Entry,
 *       Snapshot, ConfChange): random values encoded by raftd's encoder,
 *       some of them then cut short, mutated (a byte flipped, inserted or
 *       removed) or extended with what etcd's encoder never writes but
 *       its decoder takes (unknown fields and groups, a repeated scalar,
 *       a second snapshot whose conf state ids are packed and merge into
 *       the first, another entry).
 *   raftmsg_diff decode
 *       reads such lines and prints, in raftmsgdiff's format, "OK <hex>"
 *       with the re-encoding of what raftd decoded, or "ERR".
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/raftmsg_util.h"
#include "proto/wire.h"
#include "raftd/alloc.h"

enum kind { K_MESSAGE, K_ENTRY, K_SNAPSHOT, K_CONF_CHANGE, K_KINDS };
static const char *const kind_names[K_KINDS] = { "Message", "Entry", "Snapshot", "ConfChange" };

static void put_hex(const uint8_t *p, size_t n)
{
	if (n == 0)
		putchar('-');
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* ---- gen ---- */

/* Bytes under construction (malloc'd, grows). */
struct buf {
	uint8_t *p;
	size_t len, cap;
};

static void buf_reserve(struct buf *b, size_t more)
{
	if (b->len + more <= b->cap)
		return;
	b->cap = (b->len + more) * 2;
	b->p = realloc(b->p, b->cap);
	if (!b->p)
		abort();
}

static void buf_put(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	buf_reserve(b, n);
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void buf_varint(struct buf *b, uint64_t v)
{
	buf_reserve(b, PROTO_VARINT_MAX_BYTES);
	b->len += proto_varint_put(b->p + b->len, v);
}

/* A length-delimited field whose value is inner. */
static void buf_nested(struct buf *b, uint8_t key, const struct buf *inner)
{
	buf_varint(b, key);
	buf_varint(b, inner->len);
	buf_put(b, inner->p, inner->len);
}

/* An unknown field (number 13..15 or a large one) of a random wire type,
 * groups included. */
static void put_unknown(struct rm_gen *g, struct buf *b)
{
	uint64_t num = rm_below(g, 2) ? 13 + rm_below(g, 3) : 100 + rm_below(g, 1000);
	uint8_t junk[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };

	switch (rm_below(g, 5)) {
	case 0:
		buf_varint(b, num << 3 | PROTO_WIRE_VARINT);
		buf_varint(b, rm_value(g));
		break;
	case 1:
		buf_varint(b, num << 3 | PROTO_WIRE_FIXED64);
		buf_put(b, junk, 8);
		break;
	case 2:
		buf_varint(b, num << 3 | PROTO_WIRE_FIXED32);
		buf_put(b, junk, 4);
		break;
	case 3:
		buf_varint(b, num << 3 | PROTO_WIRE_BYTES);
		buf_varint(b, 3);
		buf_put(b, junk, 3);
		break;
	default: /* a group holding a varint and a nested group */
		buf_varint(b, num << 3 | PROTO_WIRE_START_GROUP);
		buf_varint(b, 1 << 3 | PROTO_WIRE_VARINT);
		buf_varint(b, rm_value(g));
		buf_varint(b, 2 << 3 | PROTO_WIRE_START_GROUP);
		buf_varint(b, 2 << 3 | PROTO_WIRE_END_GROUP);
		buf_varint(b, num << 3 | PROTO_WIRE_END_GROUP);
	}
}

/* A Snapshot field for a Message: metadata with conf state ids packed
 * (gogo's decoder takes both forms; its encoder writes them unpacked). */
static void put_packed_snapshot(struct rm_gen *g, struct buf *b)
{
	struct buf ids = { 0 }, cs = { 0 }, md = { 0 }, snap = { 0 };
	uint64_t n = rm_below(g, 4);

	for (uint64_t i = 0; i < n; i++)
		buf_varint(&ids, rm_value(g));
	buf_nested(&cs, (uint8_t)((1 + rm_below(g, 4)) << 3 | PROTO_WIRE_BYTES), &ids);
	buf_nested(&md, 1 << 3 | PROTO_WIRE_BYTES, &cs);
	if (rm_below(g, 2)) {
		buf_varint(&md, 2 << 3);
		buf_varint(&md, rm_value(g));
	}
	buf_nested(&snap, 2 << 3 | PROTO_WIRE_BYTES, &md);
	buf_nested(b, 9 << 3 | PROTO_WIRE_BYTES, &snap);
	free(ids.p);
	free(cs.p);
	free(md.p);
	free(snap.p);
}

/* What etcd's decoder takes beyond its encoder's output, appended. */
static void extend(struct rm_gen *g, enum kind k, struct buf *b)
{
	struct raftmsg_entry e;

	if (k != K_MESSAGE || rm_below(g, 3) == 0) {
		put_unknown(g, b);
		return;
	}
	switch (rm_below(g, 3)) {
	case 0: /* a repeated scalar: the last one counts */
		buf_varint(b, (1 + rm_below(g, 6)) << 3);
		buf_varint(b, rm_value(g));
		break;
	case 1:
		put_packed_snapshot(g, b);
		break;
	default:
		rm_entry(g, &e);
		buf_varint(b, 7 << 3 | PROTO_WIRE_BYTES);
		buf_varint(b, raftmsg_entry_size(&e));
		buf_reserve(b, raftmsg_entry_size(&e));
		b->len += raftmsg_entry_encode(&e, b->p + b->len);
	}
}

static void mutate(struct rm_gen *g, struct buf *b)
{
	size_t at = b->len ? rm_below(g, b->len) : 0;

	switch (rm_below(g, 4)) {
	case 0: /* cut short */
		b->len = at;
		break;
	case 1: /* flip a byte */
		if (b->len)
			b->p[at] ^= (uint8_t)(1 + rm_below(g, 255));
		break;
	case 2: /* insert a byte */
		buf_reserve(b, 1);
		memmove(b->p + at + 1, b->p + at, b->len - at);
		b->p[at] = (uint8_t)rm_rnd(g);
		b->len++;
		break;
	default: /* remove a byte */
		if (b->len) {
			memmove(b->p + at, b->p + at + 1, b->len - at - 1);
			b->len--;
		}
	}
}

static void gen_one(struct rm_gen *g, struct buf *b, enum kind k)
{
	struct raftmsg_entry e;
	struct raftmsg_snapshot s;
	struct raftmsg_conf_change *cc;
	struct raftmsg *m;

	b->len = 0;
	switch (k) {
	case K_MESSAGE:
		m = rm_message(g);
		buf_reserve(b, raftmsg_size(m));
		b->len = raftmsg_encode(m, b->p);
		break;
	case K_ENTRY:
		g->used = 0;
		rm_entry(g, &e);
		buf_reserve(b, raftmsg_entry_size(&e));
		b->len = raftmsg_entry_encode(&e, b->p);
		break;
	case K_SNAPSHOT:
		g->used = 0;
		rm_snapshot(g, &s);
		buf_reserve(b, raftmsg_snapshot_size(&s));
		b->len = raftmsg_snapshot_encode(&s, b->p);
		break;
	default:
		cc = rm_conf_change(g);
		buf_reserve(b, raftmsg_conf_change_size(cc));
		b->len = raftmsg_conf_change_encode(cc, b->p);
	}
}

static int gen(uint64_t seed, unsigned long count)
{
	static struct rm_gen g;
	struct buf b = { 0 };

	rm_seed(&g, seed);
	for (unsigned long i = 0; i < count; i++) {
		uint64_t pick = rm_below(&g, 10);
		enum kind k = pick < 7 ? K_MESSAGE : (enum kind)(pick - 6);
		gen_one(&g, &b, k);
		switch (rm_below(&g, 8)) {
		case 0:
		case 1:
			mutate(&g, &b);
			break;
		case 2:
			extend(&g, k, &b);
			break;
		}
		printf("%s ", kind_names[k]);
		put_hex(b.p, b.len);
		putchar('\n');
	}
	free(b.p);
	return 0;
}

/* ---- decode ---- */

/* Decodes p as kind and prints the verdict. */
static void decode_one(const char *kind, const uint8_t *p, size_t len)
{
	uint8_t *out = NULL;
	size_t n = 0;
	int rc = -EINVAL;

	if (strcmp(kind, "Message") == 0) {
		struct raftmsg m;
		if ((rc = raftmsg_decode(p, len, &m)) == 0) {
			out = malloc(raftmsg_size(&m) + 1);
			n = raftmsg_encode(&m, out);
			raftmsg_release(&m);
		}
	} else if (strcmp(kind, "Entry") == 0) {
		struct raftmsg_entry e;
		if ((rc = raftmsg_entry_decode(p, len, &e)) == 0) {
			out = malloc(raftmsg_entry_size(&e) + 1);
			n = raftmsg_entry_encode(&e, out);
		}
	} else if (strcmp(kind, "Snapshot") == 0) {
		struct raftmsg_snapshot s;
		void *alloc;
		if ((rc = raftmsg_snapshot_decode(p, len, &s, &alloc)) == 0) {
			out = malloc(raftmsg_snapshot_size(&s) + 1);
			n = raftmsg_snapshot_encode(&s, out);
			raftd_free(alloc);
		}
	} else if (strcmp(kind, "ConfChange") == 0) {
		struct raftmsg_conf_change cc;
		if ((rc = raftmsg_conf_change_decode(p, len, &cc)) == 0) {
			out = malloc(raftmsg_conf_change_size(&cc) + 1);
			n = raftmsg_conf_change_encode(&cc, out);
		}
	}
	if (rc) {
		puts(rc == -EBADMSG ? "ERR" : "ERR unexpected error");
		return;
	}
	printf("OK ");
	put_hex(out, n);
	putchar('\n');
	free(out);
}

static int decode(void)
{
	size_t cap = 1 << 16;
	char *line = malloc(cap);
	uint8_t *bytes = NULL;
	ssize_t got;

	while ((got = getline(&line, &cap, stdin)) > 0) {
		char kind[32], *h = line;
		size_t len;
		if (line[got - 1] == '\n')
			line[got - 1] = 0;
		if (sscanf(line, "%31s", kind) != 1 || !(h = strchr(line, ' '))) {
			puts("ERR bad line");
			continue;
		}
		h++;
		bytes = realloc(bytes, strlen(h) / 2 + 1);
		if (!bytes || (len = rm_unhex(h, bytes)) == (size_t)-1) {
			puts("ERR bad hex");
			continue;
		}
		decode_one(kind, bytes, len);
	}
	free(bytes);
	free(line);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "gen") == 0)
		return gen(strtoull(argv[2], NULL, 10), strtoul(argv[3], NULL, 10));
	if (argc == 2 && strcmp(argv[1], "decode") == 0)
		return decode();
	fprintf(stderr, "usage: raftmsg_diff gen SEED COUNT | raftmsg_diff decode\n");
	return 2;
}
