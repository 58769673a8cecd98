/*
 * The watch matcher (gatewayd/services/watch_match.c) against a plain scan: random
 * watchers on single keys, ranges and from-key ranges over a small key
 * space are added and removed; for every key, wm_match must report
 * exactly the watchers whose range covers it, each once. Then the same
 * with keys of random length over a few bytes (0x00 and 0xff included),
 * many equal ranges, and a check after every add and remove. Then
 * thousands of exact keys (many on the same key) added and removed in
 * random order, so that chains are cut in the middle while the table
 * grows: every key must still find exactly its watchers, the table
 * must hold every entry once and stay within WM_LOAD entries a bucket.
 * Entries are allocated as a watcher is, their bytes after them at the
 * matcher's key_off. Seeded; a failure prints its seed.
 *
 * Last, a benchmark: 100,000 range watchers, lookups timed against a
 * plain scan of the same ranges, in two layouts: disjoint narrow ranges,
 * and ranges that all end before the keys looked up (a list sorted by
 * start would walk all of them). The matcher must be at least 10 times
 * faster than the scan in both; the figures are printed.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock/clock.h"
#include "gatewayd/services/watch.h"

/* An entry as its owner holds it: the matcher's entry, the owner's
 * fields, then the key and end bytes. */
struct tent {
	struct wm_entry e;
	uint32_t idx; /* the test's index of its watcher */
	uint8_t bytes[];
};
#define KEY_OFF offsetof(struct tent, bytes)

static struct wm_entry *tent_new(uint32_t idx, const uint8_t *key, size_t kl, const uint8_t *end,
				 size_t el)
{
	struct tent *t = malloc(wm_entry_size(KEY_OFF, kl, el));
	if (!t) {
		printf("FAIL out of memory\n");
		exit(1);
	}
	t->idx = idx;
	if (kl)
		memcpy(t->bytes, key, kl);
	if (el)
		memcpy(t->bytes + kl, end, el);
	wm_entry_set(&t->e, kl, el);
	return &t->e;
}

static uint32_t tent_idx(const struct wm_entry *e)
{
	return ((const struct tent *)e)->idx;
}

#define NW 400
#define NKEYS 40

struct tw {
	struct wm_entry *e;
	uint8_t key[4], end[4];
	bool in;
	unsigned hits;
};

static struct tw ws[NW];

static void hit(void *arg, struct wm_entry *e)
{
	(void)arg;
	ws[tent_idx(e)].hits++;
}

static void mkkey(unsigned i, uint8_t out[3])
{
	out[0] = 'a' + i / 10;
	out[1] = '0' + i % 10;
	out[2] = 0;
}


/* ---- random byte strings ---- */

#define NV 300

struct tv {
	struct wm_entry *e;
	uint8_t key[4], end[4];
	bool in;
	unsigned hits;
};

static struct tv vs[NV];

static void vhit(void *arg, struct wm_entry *e)
{
	(void)arg;
	vs[tent_idx(e)].hits++;
}

static size_t rkey(uint8_t out[4])
{
	static const uint8_t alpha[] = { 0x00, 'a', 'b', 0xff };
	size_t n = (size_t)(rand() % 4);
	for (size_t i = 0; i < n; i++)
		out[i] = alpha[rand() % 4];
	return n;
}

/* Every random key and every watcher's own bounds against a scan. */
static int vcheck(struct watch_matcher *m, unsigned seed, unsigned step)
{
	int failures = 0;
	for (unsigned q = 0; q < 2 * NV + 20; q++) {
		uint8_t kb[4];
		const uint8_t *key = kb;
		size_t len;
		if (q < NV && vs[q].e)
			key = vs[q].key, len = vs[q].e->key_len;
		else if (q >= NV && q < 2 * NV && vs[q - NV].e)
			key = vs[q - NV].end, len = vs[q - NV].e->end_len;
		else
			len = rkey(kb);
		for (unsigned i = 0; i < NV; i++)
			vs[i].hits = 0;
		wm_match(m, key, len, vhit, NULL);
		for (unsigned i = 0; i < NV; i++) {
			unsigned want = vs[i].in && wm_covers(m, vs[i].e, key, len);
			if (vs[i].hits != want) {
				printf("FAIL seed %u step %u: key len %zu watcher %u hits %u want %u\n",
				       seed, step, len, i, vs[i].hits, want);
				failures++;
			}
		}
	}
	return failures;
}

static int random_bytes(unsigned seed)
{
	struct watch_matcher m;
	int failures = 0;

	srand(seed);
	if (wm_init(&m, KEY_OFF))
		return 1;
	memset(vs, 0, sizeof(vs));
	for (unsigned step = 0; step < 1500 && !failures; step++) {
		uint32_t idx = (uint32_t)(rand() % NV);
		struct tv *w = &vs[idx];
		if (w->in) {
			wm_del(&m, w->e);
			w->in = false;
		} else {
			size_t kl = rkey(w->key), el = 0;
			switch (rand() % 4) {
			case 0:
				break;
			case 1:
				w->end[0] = 0, el = 1;
				break;
			case 2: /* one of a few equal ranges */
				w->key[0] = 'a';
				w->end[0] = 'b';
				kl = el = 1;
				break;
			default:
				el = rkey(w->end);
				if (el == 0 || (el == 1 && w->end[0] == 0))
					w->end[0] = 'b', el = 1; /* a range end, not a kind */
				break;
			}
			free(w->e);
			w->e = tent_new(idx, w->key, kl, w->end, el);
			wm_add(&m, w->e);
			w->in = true;
		}
		if (step % 10 == 0 || step > 1400)
			failures += vcheck(&m, seed, step);
	}
	if (m.nranges + m.nkeys != 0) {
		size_t n = 0;
		for (unsigned i = 0; i < NV; i++)
			n += vs[i].in;
		if (n != m.nranges + m.nkeys) {
			printf("FAIL seed %u: matcher counts %zu entries, %zu are in\n", seed,
			       m.nranges + m.nkeys, n);
			failures++;
		}
	}
	wm_fini(&m);
	for (unsigned i = 0; i < NV; i++)
		free(vs[i].e);
	return failures;
}

/* ---- exact keys: chains and growth ---- */

#define NX 6000

static struct wm_entry *xs[NX];
static uint8_t xkey[NX][20];
static size_t xlen[NX];
static unsigned xhits[NX];

static void xhit(void *arg, struct wm_entry *e)
{
	(void)arg;
	xhits[tent_idx(e)]++;
}

/* Looks every watcher's key up (and a key no one watches) and compares
 * with a scan; then counts the table's entries. */
static int xcheck(struct watch_matcher *m, unsigned seed, unsigned step)
{
	int failures = 0;
	size_t in = 0, chained = 0;

	for (unsigned q = 0; q <= NX && !failures; q += q < NX ? 7 : 1) {
		const uint8_t *key = q < NX ? xkey[q] : (const uint8_t *)"not a key";
		size_t len = q < NX ? xlen[q] : 9;
		memset(xhits, 0, sizeof(xhits));
		wm_match(m, key, len, xhit, NULL);
		for (unsigned i = 0; i < NX; i++) {
			unsigned want = xs[i] && xlen[i] == len && memcmp(xkey[i], key, len) == 0;
			if (xhits[i] != want) {
				printf("FAIL seed %u step %u: key %u watcher %u hits %u want %u\n",
				       seed, step, q, i, xhits[i], want);
				failures++;
			}
		}
	}
	for (unsigned i = 0; i < NX; i++)
		in += xs[i] != NULL;
	for (size_t b = 0; b < m->nbuckets; b++)
		for (struct wm_entry *e = m->buckets[b]; e; e = e->next)
			chained++;
	if (chained != in || m->nkeys != in || m->nkeys > WM_LOAD * m->nbuckets) {
		printf("FAIL seed %u step %u: %zu in, %zu counted, %zu chained, %zu buckets\n", seed,
		       step, in, m->nkeys, chained, m->nbuckets);
		failures++;
	}
	return failures;
}

static int exact_keys(unsigned seed)
{
	struct watch_matcher m;
	int failures = 0;

	srand(seed);
	if (wm_init(&m, KEY_OFF))
		return 1;
	for (unsigned i = 0; i < NX; i++) {
		if (i % 4 == 3) { /* every fourth shares an earlier watcher's key */
			unsigned j = (unsigned)rand() % i;
			xlen[i] = xlen[j];
			memcpy(xkey[i], xkey[j], xlen[j]);
		} else {
			xlen[i] = (size_t)(rand() % 20);
			for (size_t k = 0; k < xlen[i]; k++)
				xkey[i][k] = (uint8_t)rand();
		}
		xs[i] = NULL;
	}
	for (unsigned step = 0; step < 4 * NX && !failures; step++) {
		/* mostly adds while the first half runs, then mostly removes */
		unsigned i = (unsigned)rand() % NX;
		bool add = (unsigned)rand() % 4 != 0;
		if (step >= 2 * NX)
			add = !add;
		if (add && !xs[i]) {
			xs[i] = tent_new(i, xkey[i], xlen[i], NULL, 0);
			wm_add(&m, xs[i]);
		} else if (!add && xs[i]) {
			wm_del(&m, xs[i]);
			/* out of the matcher, the spare word is the owner's */
			xs[i]->spare = &m;
			free(xs[i]);
			xs[i] = NULL;
		}
		if (step % 2000 == 0 || step == 4 * NX - 1)
			failures += xcheck(&m, seed, step);
	}
	for (unsigned i = 0; i < NX; i++) {
		if (xs[i])
			wm_del(&m, xs[i]);
		free(xs[i]);
		xs[i] = NULL;
	}
	if (m.nkeys != 0) {
		printf("FAIL seed %u: %zu keys left after removing all\n", seed, m.nkeys);
		failures++;
	}
	wm_fini(&m);
	return failures;
}

/* ---- the benchmark ---- */

#define NB 100000
#define NQ 20000

static unsigned long bhits;

static void bhit(void *arg, struct wm_entry *e)
{
	(void)arg;
	(void)e;
	bhits++;
}

/* Layout 0: range i is [k(2i), k(2i+1)), keys looked up k(0..4*NB);
 * layout 1: range i is [k(i), k(NB)), keys looked up from k(NB) up. */
static int bench(int layout)
{
	static struct wm_entry *es[NB];
	static uint8_t kb[NB][9], eb[NB][9];
	struct watch_matcher m;
	char tmp[16];

	if (wm_init(&m, KEY_OFF))
		return 1;
	for (unsigned i = 0; i < NB; i++) {
		unsigned a = layout ? i : 2 * i, b = layout ? NB : 2 * i + 1;
		snprintf(tmp, sizeof(tmp), "k%08u", a);
		memcpy(kb[i], tmp, 9);
		snprintf(tmp, sizeof(tmp), "k%08u", b);
		memcpy(eb[i], tmp, 9);
		es[i] = tent_new(i, kb[i], 9, eb[i], 9);
		wm_add(&m, es[i]);
	}
	uint8_t (*qs)[9] = malloc(sizeof(*qs) * NQ);
	if (!qs)
		return 1;
	srand(7);
	for (unsigned q = 0; q < NQ; q++) {
		unsigned k = layout ? NB + (unsigned)rand() % NB : (unsigned)rand() % (4 * NB);
		snprintf(tmp, sizeof(tmp), "k%08u", k);
		memcpy(qs[q], tmp, 9);
	}
	bhits = 0;
	double t0 = (clock_now_ns() / 1e9);
	for (unsigned q = 0; q < NQ; q++)
		wm_match(&m, qs[q], 9, bhit, NULL);
	double t_tree = (clock_now_ns() / 1e9) - t0;
	unsigned long tree_hits = bhits;
	/* the scan looks at a tenth of the keys: it is slow */
	unsigned long scan_hits = 0, tree_tenth = 0;
	t0 = (clock_now_ns() / 1e9);
	for (unsigned q = 0; q < NQ; q += 10)
		for (unsigned i = 0; i < NB; i++)
			scan_hits += wm_covers(&m, es[i], qs[q], 9);
	double t_scan = ((clock_now_ns() / 1e9) - t0) * 10;
	for (unsigned q = 0; q < NQ; q += 10) {
		bhits = 0;
		wm_match(&m, qs[q], 9, bhit, NULL);
		tree_tenth += bhits;
	}
	free(qs);
	wm_fini(&m);
	for (unsigned i = 0; i < NB; i++)
		free(es[i]);
	double ns_tree = t_tree / NQ * 1e9, ns_scan = t_scan / NQ * 1e9;
	printf("bench: %d range watchers (%s): lookup %.0f ns (matcher), %.0f ns (scan), %lu matches "
	       "in %d lookups\n",
	       NB, layout ? "all ending before the keys" : "disjoint", ns_tree, ns_scan, tree_hits,
	       NQ);
	if (tree_tenth != scan_hits) {
		printf("FAIL bench: matcher found %lu matches, the scan %lu\n", tree_tenth, scan_hits);
		return 1;
	}
	if (ns_tree * 10 > ns_scan) {
		printf("FAIL bench: the matcher is not 10 times faster than a scan\n");
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
	int failures = 0;

	for (unsigned round = 0; round < 20; round++, seed++) {
		struct watch_matcher m;
		srand(seed);
		if (wm_init(&m, KEY_OFF)) {
			printf("FAIL wm_init\n");
			return 1;
		}
		memset(ws, 0, sizeof(ws));
		for (unsigned step = 0; step < 2000; step++) {
			uint32_t idx = (uint32_t)(rand() % NW);
			struct tw *w = &ws[idx];
			if (w->in) {
				wm_del(&m, w->e);
				w->in = false;
				continue;
			}
			unsigned a = rand() % NKEYS, b = rand() % (NKEYS + 2);
			size_t el = 0;
			mkkey(a, w->key);
			switch (rand() % 3) {
			case 0:
				break;
			case 1:
				mkkey(b % NKEYS, w->end);
				el = 2;
				break;
			default:
				w->end[0] = 0;
				el = 1;
				break;
			}
			free(w->e);
			w->e = tent_new(idx, w->key, 2, w->end, el);
			wm_add(&m, w->e);
			w->in = true;
		}
		for (unsigned k = 0; k < NKEYS + 5; k++) {
			uint8_t key[3];
			size_t len = 2;
			mkkey(k, key);
			if (k >= NKEYS) /* keys outside the space, and a longer one */
				len = k % 2 ? 1 : 2;
			for (unsigned i = 0; i < NW; i++)
				ws[i].hits = 0;
			wm_match(&m, key, len, hit, NULL);
			for (unsigned i = 0; i < NW; i++) {
				unsigned want = ws[i].in && wm_covers(&m, ws[i].e, key, len);
				/* wm_covers itself, against the definition */
				if (ws[i].in) {
					int lo = memcmp(key, ws[i].key, 2);
					bool ge = lo > 0 || (lo == 0 && len >= 2);
					bool cover;
					int kind = wm_kind(&m, ws[i].e);
					if (kind == WM_KEY)
						cover = len == 2 && lo == 0;
					else if (kind == WM_FROM_KEY)
						cover = ge;
					else {
						int hi = memcmp(key, ws[i].end, len < 2 ? len : 2);
						cover = ge && (hi < 0 || (hi == 0 && len < 2));
					}
					if (cover != (bool)want) {
						printf("FAIL seed %u: wm_covers key %.*s watcher %u\n", seed,
						       (int)len, key, i);
						failures++;
					}
				}
				if (ws[i].hits != want) {
					printf("FAIL seed %u: key %.*s watcher %u hits %u want %u\n", seed,
					       (int)len, key, i, ws[i].hits, want);
					failures++;
				}
			}
		}
		wm_fini(&m);
		for (unsigned i = 0; i < NW; i++) {
			free(ws[i].e);
			ws[i].e = NULL;
		}
	}
	for (unsigned r = 0; r < 10; r++)
		failures += random_bytes(seed + 1000 + r);
	for (unsigned r = 0; r < 3 && !failures; r++)
		failures += exact_keys(seed + 2000 + r);
	if (failures)
		return 1;
	printf("ok: wm_match agrees with a scan over 33 seeds\n");
	if (bench(0) || bench(1))
		return 1;
	return 0;
}
