/*
 * The watch matcher (gatewayd/watch_match.c) against a plain scan: random
 * watchers on single keys, ranges and from-key ranges over a small key
 * space are added and removed; for every key, wm_match must report
 * exactly the watchers whose range covers it, each once. Seeded; a
 * failure prints its seed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gatewayd/watch.h"

#define NW 400
#define NKEYS 40

struct tw {
	struct wm_entry e;
	uint8_t key[4], end[4];
	bool in;
	unsigned hits;
};

static struct tw ws[NW];

static void hit(void *arg, struct wm_entry *e)
{
	(void)arg;
	((struct tw *)e)->hits++;
}

static void mkkey(unsigned i, uint8_t out[3])
{
	out[0] = 'a' + i / 10;
	out[1] = '0' + i % 10;
	out[2] = 0;
}

int main(int argc, char **argv)
{
	unsigned seed = argc > 1 ? (unsigned)atoi(argv[1]) : 1;
	int failures = 0;

	for (unsigned round = 0; round < 20; round++, seed++) {
		struct watch_matcher m;
		srand(seed);
		if (wm_init(&m)) {
			printf("FAIL wm_init\n");
			return 1;
		}
		memset(ws, 0, sizeof(ws));
		for (unsigned step = 0; step < 2000; step++) {
			struct tw *w = &ws[rand() % NW];
			if (w->in) {
				wm_del(&m, &w->e);
				w->in = false;
				continue;
			}
			unsigned a = rand() % NKEYS, b = rand() % (NKEYS + 2);
			mkkey(a, w->key);
			switch (rand() % 3) {
			case 0:
				wm_entry_set(&w->e, w->key, 2, NULL, 0);
				break;
			case 1:
				mkkey(b % NKEYS, w->end);
				wm_entry_set(&w->e, w->key, 2, w->end, 2);
				break;
			default:
				wm_entry_set(&w->e, w->key, 2, (const uint8_t *)"", 1);
				break;
			}
			wm_add(&m, &w->e);
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
				unsigned want = ws[i].in && wm_covers(&ws[i].e, key, len);
				/* wm_covers itself, against the definition */
				if (ws[i].in) {
					int lo = memcmp(key, ws[i].key, 2);
					bool ge = lo > 0 || (lo == 0 && len >= 2);
					bool cover;
					if (ws[i].e.kind == WM_KEY)
						cover = len == 2 && lo == 0;
					else if (ws[i].e.kind == WM_FROM_KEY)
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
	}
	if (failures)
		return 1;
	printf("ok: wm_match agrees with a scan over 20 seeds\n");
	return 0;
}
