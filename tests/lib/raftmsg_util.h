/*
 * Random raftpb values for the tests of raftd/raft/raftmsg.c and the peer
 * stream codecs: seeded (xorshift64*), with the corners etcd's encoder
 * must agree on (zero, one-byte and 10-byte varints, negative enums,
 * nil vs empty bytes, lengths past 127, empty and long id lists).
 *
 * A struct rm_gen owns everything a generated value points at; a new
 * value reuses it.
 */
#ifndef CETCD_TESTS_RAFTMSG_UTIL_H
#define CETCD_TESTS_RAFTMSG_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/hex/hex.h"
#include "raftd/raft/raftmsg.h"

#define RM_MAX_ENTRIES 8
#define RM_MAX_IDS 6
#define RM_ARENA (16 * 1024)

struct rm_gen {
	uint64_t state;
	struct raftmsg msg;
	struct raftmsg_entry ents[RM_MAX_ENTRIES];
	struct raftmsg_conf_change cc;
	uint64_t ids[4][RM_MAX_IDS];
	uint8_t arena[RM_ARENA];
	size_t used;
};

static inline void rm_seed(struct rm_gen *g, uint64_t seed)
{
	g->state = seed * 2 + 1;
}

static inline uint64_t rm_rnd(struct rm_gen *g)
{
	g->state ^= g->state >> 12;
	g->state ^= g->state << 25;
	g->state ^= g->state >> 27;
	return g->state * 2685821657736338717ull;
}

static inline uint64_t rm_below(struct rm_gen *g, uint64_t n)
{
	return rm_rnd(g) % n;
}

/* A value of random size: zero, small, medium, a power of two (or one
 * less) or all 64 bits. */
static inline uint64_t rm_value(struct rm_gen *g)
{
	switch (rm_below(g, 5)) {
	case 0: return 0;
	case 1: return rm_below(g, 128);
	case 2: return rm_below(g, 1u << 20);
	case 3: return (1ull << rm_below(g, 64)) - rm_below(g, 2);
	default: return rm_rnd(g);
	}
}

static inline int32_t rm_enum(struct rm_gen *g, unsigned max)
{
	switch (rm_below(g, 8)) {
	case 0: return (int32_t)(uint32_t)rm_rnd(g);
	case 1: return 0;
	default: return (int32_t)rm_below(g, max + 1);
	}
}

/* Bytes from the arena: absent, empty, or random (sometimes over 127). */
static inline void rm_bytes(struct rm_gen *g, bool *has, const uint8_t **data, size_t *len)
{
	uint64_t pick = rm_below(g, 6);
	size_t n = pick == 3 ? rm_below(g, 400) : rm_below(g, 24);

	*has = pick >= 2;
	*data = NULL;
	*len = 0;
	if (pick < 3 || g->used + n > RM_ARENA)
		return;
	uint8_t *p = g->arena + g->used;
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rm_rnd(g);
	g->used += n;
	*data = n ? p : NULL;
	*len = n;
}

static inline void rm_entry(struct rm_gen *g, struct raftmsg_entry *e)
{
	memset(e, 0, sizeof(*e));
	e->term = rm_value(g);
	e->index = rm_value(g);
	e->type = rm_enum(g, 2);
	rm_bytes(g, &e->has_data, &e->data, &e->len);
}

static inline const uint64_t *rm_ids(struct rm_gen *g, unsigned k, size_t *n)
{
	*n = rm_below(g, 3) ? rm_below(g, RM_MAX_IDS + 1) : 0;
	for (size_t i = 0; i < *n; i++)
		g->ids[k][i] = rm_value(g);
	return *n ? g->ids[k] : NULL;
}

static inline void rm_snapshot(struct rm_gen *g, struct raftmsg_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	if (rm_below(g, 3) == 0)
		return;
	rm_bytes(g, &s->has_data, &s->data, &s->len);
	struct raftmsg_conf_state *cs = &s->conf_state;
	cs->voters = rm_ids(g, 0, &cs->n_voters);
	cs->learners = rm_ids(g, 1, &cs->n_learners);
	cs->voters_outgoing = rm_ids(g, 2, &cs->n_voters_outgoing);
	cs->learners_next = rm_ids(g, 3, &cs->n_learners_next);
	cs->auto_leave = rm_below(g, 2);
	s->index = rm_value(g);
	s->term = rm_value(g);
}

/* A random message in g->msg (pointing into g). */
static inline struct raftmsg *rm_message(struct rm_gen *g)
{
	struct raftmsg *m = &g->msg;

	g->used = 0;
	memset(m, 0, sizeof(*m));
	m->type = rm_enum(g, 18);
	m->to = rm_value(g);
	m->from = rm_value(g);
	m->term = rm_value(g);
	m->log_term = rm_value(g);
	m->index = rm_value(g);
	m->commit = rm_value(g);
	m->reject = rm_below(g, 2);
	m->reject_hint = rm_value(g);
	if (rm_below(g, 2)) {
		m->n_entries = rm_below(g, RM_MAX_ENTRIES + 1);
		m->entries = m->n_entries ? g->ents : NULL;
		for (size_t i = 0; i < m->n_entries; i++)
			rm_entry(g, &g->ents[i]);
	}
	rm_snapshot(g, &m->snapshot);
	switch (rm_below(g, 4)) {
	case 0:
		m->has_context = true;
		m->context = (const uint8_t *)RAFTMSG_CAMPAIGN_TRANSFER;
		m->context_len = RAFTMSG_CAMPAIGN_TRANSFER_LEN;
		break;
	default:
		rm_bytes(g, &m->has_context, &m->context, &m->context_len);
	}
	return m;
}

static inline struct raftmsg_conf_change *rm_conf_change(struct rm_gen *g)
{
	struct raftmsg_conf_change *cc = &g->cc;

	g->used = 0;
	memset(cc, 0, sizeof(*cc));
	cc->id = rm_value(g);
	cc->type = rm_enum(g, 3);
	cc->node_id = rm_value(g);
	rm_bytes(g, &cc->has_context, &cc->context, &cc->context_len);
	return cc;
}

/* The seed of a unit test: CETCD_TEST_SEED, else the time; printed so
 * that a failure can be repeated. */
static inline uint64_t rm_test_seed(const char *test)
{
	const char *env = getenv("CETCD_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);

	printf("%s: seed %llu\n", test, (unsigned long long)seed);
	return seed;
}

/* Hex (or "-" for nothing) to bytes at out; returns the count, or
 * (size_t)-1 for bad hex. */
static inline size_t rm_unhex(const char *h, uint8_t *out)
{
	ssize_t n;

	if (strcmp(h, "-") == 0)
		return 0;
	n = hex_decode(h, strlen(h), out);
	return n < 0 ? (size_t)-1 : (size_t)n;
}

/* The encoding of m, malloc'd; *len its size. */
static inline uint8_t *rm_encode(const struct raftmsg *m, size_t *len)
{
	*len = raftmsg_size(m);
	uint8_t *buf = malloc(*len ? *len : 1);
	if (!buf)
		abort();
	if (raftmsg_encode(m, buf) != *len) {
		fprintf(stderr, "raftmsg_encode wrote other than raftmsg_size\n");
		abort();
	}
	return buf;
}

#endif
