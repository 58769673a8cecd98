/*
 * The writer's freelist: allocation of the lowest contiguous run, giving
 * pages back, pending and young pages released by txid, the freelist page format
 * (including bbolt's count-in-the-first-slot form past 0xFFFF ids) and its
 * validation, and a randomized comparison with a plain bitmap.
 */
#include "stored/btree/freelist.h"
#include "btree_util.h"

static void test_alloc(void)
{
	struct freelist fl;
	uint64_t pg;
	freelist_init(&fl);
	T_RC(freelist_alloc(&fl, 1, &pg), -ENOENT);
	uint64_t ids[] = { 9, 3, 4, 5, 12, 13, 20 };
	T_OK(freelist_put_free(&fl, ids, 7));
	T_RC(freelist_put_free(&fl, ids, 1), -EEXIST);
	T_CHECK(fl.nfree == 7);
	T_OK(freelist_alloc(&fl, 3, &pg));
	T_CHECK(pg == 3);
	T_OK(freelist_alloc(&fl, 2, &pg));
	T_CHECK(pg == 12);
	T_RC(freelist_alloc(&fl, 2, &pg), -ENOENT);
	T_OK(freelist_alloc(&fl, 1, &pg));
	T_CHECK(pg == 9);
	T_OK(freelist_put_free_run(&fl, 3, 3));
	T_OK(freelist_alloc(&fl, 1, &pg));
	T_CHECK(pg == 3);
	freelist_destroy(&fl);
}

static void test_pending(void)
{
	struct freelist fl;
	uint64_t pg;
	freelist_init(&fl);
	T_OK(freelist_add_pending(&fl, 5, 10, 2));
	T_OK(freelist_add_pending(&fl, 6, 20, 1));
	T_OK(freelist_add_pending(&fl, 8, 30, 3));
	T_CHECK(freelist_count(&fl) == 6 && fl.nfree == 0);
	T_RC(freelist_alloc(&fl, 1, &pg), -ENOENT);
	T_OK(freelist_release(&fl, 4, 0));
	T_CHECK(fl.nfree == 0);
	T_OK(freelist_release(&fl, 6, 0));
	T_CHECK(fl.nfree == 3 && fl.pending.pages == 3);
	T_OK(freelist_alloc(&fl, 2, &pg));
	T_CHECK(pg == 10);
	freelist_drop_pending_after(&fl, 7);
	T_CHECK(fl.pending.pages == 0);
	/* A page released twice is a double free. */
	T_OK(freelist_add_pending(&fl, 9, 20, 1));
	T_RC(freelist_release(&fl, 9, 0), -EEXIST);
	freelist_destroy(&fl);
}

/* Young runs wait for their own bound only, pending runs for theirs;
 * both are listed and counted, and a double free among them is found. */
static void test_young(void)
{
	struct freelist fl;
	uint64_t pg;
	freelist_init(&fl);
	T_OK(freelist_reserve_pending(&fl, 2));
	T_OK(freelist_add_pending(&fl, 5, 10, 2));
	T_OK(freelist_add_young(&fl, 5, 40, 1));
	T_OK(freelist_add_young(&fl, 7, 50, 2));
	T_CHECK(freelist_waiting(&fl) == 5 && freelist_count(&fl) == 5);
	uint64_t ids[8];
	size_t k = 0;
	freelist_list_waiting(&fl, ids, &k);
	T_CHECK(k == 5 && ids[0] == 10 && ids[1] == 11 && ids[2] == 40 && ids[3] == 50);
	/* the durable bound holds pending back, not young */
	T_OK(freelist_release(&fl, 4, 6));
	T_CHECK(fl.nfree == 1 && fl.pending.pages == 2 && fl.young.pages == 2);
	T_OK(freelist_alloc(&fl, 1, &pg));
	T_CHECK(pg == 40);
	/* and the readers' bound holds young back */
	T_OK(freelist_release(&fl, 5, 6));
	T_CHECK(fl.nfree == 2 && fl.pending.pages == 0 && fl.young.pages == 2);
	freelist_drop_pending_after(&fl, 6);
	T_CHECK(fl.young.pages == 0 && freelist_count(&fl) == 2);
	T_OK(freelist_add_young(&fl, 9, 10, 1));
	T_RC(freelist_release(&fl, 0, 9), -EEXIST);
	T_CHECK(fl.young.pages == 1 && fl.nfree == 2);
	freelist_destroy(&fl);
}

static void test_page_format(void)
{
	struct freelist fl;
	char why[128];
	uint64_t *ids;
	size_t n;
	freelist_init(&fl);
	T_OK(freelist_put_free_run(&fl, 100, 5));
	T_OK(freelist_add_pending(&fl, 3, 50, 2));
	size_t span = (size_t)freelist_page_bytes(freelist_count(&fl));
	T_CHECK(span == 16 + 7 * 8);
	uint8_t *buf = calloc(1, 4096);
	T_RC(freelist_encode(&fl, buf, span - 1, 8, 0), -ENOSPC);
	T_OK(freelist_encode(&fl, buf, 4096, 8, 0));
	T_CHECK(page_id(buf) == 8 && page_flags(buf) == PAGE_FLAG_FREELIST && page_count(buf) == 7);
	T_OK(freelist_decode(buf, 4096, 200, &ids, &n, why, sizeof(why)));
	uint64_t want[] = { 50, 51, 100, 101, 102, 103, 104 };
	T_CHECK(n == 7 && memcmp(ids, want, sizeof(want)) == 0);
	stored_free(ids);
	T_RC(freelist_decode(buf, 4096, 104, &ids, &n, why, sizeof(why)), -EUCLEAN);
	T_CHECK(strstr(why, "outside"));
	page_st64(buf + 16 + 8, 50);  /* a duplicate */
	T_RC(freelist_decode(buf, 4096, 200, &ids, &n, why, sizeof(why)), -EUCLEAN);
	T_CHECK(strstr(why, "twice"));
	page_st16(buf + 10, 1000);
	T_RC(freelist_decode(buf, 4096, 200, &ids, &n, why, sizeof(why)), -EUCLEAN);
	T_CHECK(strstr(why, "claims"));
	free(buf);
	freelist_destroy(&fl);

	/* Past 0xFFFF ids the count moves to the first slot, as in bbolt. */
	freelist_init(&fl);
	T_OK(freelist_put_free_run(&fl, 2, 70000));
	span = (size_t)freelist_page_bytes(freelist_count(&fl));
	T_CHECK(span == 16 + 70001 * 8);
	buf = calloc(1, span);
	T_OK(freelist_encode(&fl, buf, span, 5, 0));
	T_CHECK(page_count(buf) == 0xFFFF && page_ld64(buf + 16) == 70000);
	T_OK(freelist_decode(buf, span, 70002, &ids, &n, why, sizeof(why)));
	T_CHECK(n == 70000 && ids[0] == 2 && ids[69999] == 70001);
	stored_free(ids);
	free(buf);
	freelist_destroy(&fl);
}

/* Random allocs, gives, frees and releases against a bitmap. */
static void test_random(void)
{
	enum { N = 4000 };
	static uint8_t state[N];  /* 0 used, 1 free, 2 pending, 3 young */
	static uint64_t pend_txid[N];
	struct freelist fl;
	freelist_init(&fl);
	t_set_seed(t_pick_seed());
	uint64_t txid = 1;
	for (uint64_t id = 2; id < N; id++)
		state[id] = 0;
	for (int step = 0; step < 20000; step++) {
		t_step = (uint64_t)step;
		uint64_t p = t_below(100);
		if (p < 35) {
			/* free a used run as pending under the current txid */
			uint64_t id = 2 + t_below(N - 10), n = 1 + t_below(3);
			bool ok = true;
			for (uint64_t i = 0; i < n; i++)
				ok = ok && state[id + i] == 0;
			if (!ok)
				continue;
			bool young = t_chance(2);
			T_OK(young ? freelist_add_young(&fl, txid, id, n)
				   : freelist_add_pending(&fl, txid, id, n));
			for (uint64_t i = 0; i < n; i++) {
				state[id + i] = young ? 3 : 2;
				pend_txid[id + i] = txid;
			}
		} else if (p < 45) {
			txid++;
		} else if (p < 46) {
			/* the page lists free and waiting ids alike, ascending */
			uint64_t count = freelist_count(&fl), *ids, k = 0;
			size_t span = (size_t)freelist_page_bytes(count), n;
			uint8_t *buf = calloc(1, span);
			char why[128];
			T_CHECK(buf != NULL);
			T_OK(freelist_encode(&fl, buf, span, 1, 0));
			T_OK(freelist_decode(buf, span, N, &ids, &n, why, sizeof(why)));
			T_CHECK(n == count && count < 0xFFFF);
			stored_free(ids);
			/* in the page itself, not only as decoded (which sorts) */
			for (uint64_t id = 2; id < N; id++)
				if (state[id] != 0) {
					T_CHECK(k < n && page_ld64(buf + 16 + k * 8) == id);
					k++;
				}
			T_CHECK(k == n);
			free(buf);
		} else if (p < 60) {
			uint64_t upto = txid - t_below(3), young_upto = txid - t_below(3);
			T_OK(freelist_release(&fl, upto, young_upto));
			for (uint64_t id = 2; id < N; id++)
				if ((state[id] == 2 && pend_txid[id] <= upto) ||
				    (state[id] == 3 && pend_txid[id] <= young_upto))
					state[id] = 1;
		} else {
			uint64_t n = 1 + (t_chance(800) ? 0 : t_below(4)), pg;
			uint64_t want = 0;
			for (uint64_t id = 2; id + n <= N && !want; id++) {
				bool ok = true;
				for (uint64_t i = 0; i < n; i++)
					ok = ok && state[id + i] == 1;
				if (ok)
					want = id;
			}
			int rc = freelist_alloc(&fl, n, &pg);
			if (!want) {
				T_RC(rc, -ENOENT);
				continue;
			}
			T_OK(rc);
			T_CHECK(pg == want);
			for (uint64_t i = 0; i < n; i++)
				state[pg + i] = 0;
			if (t_chance(100)) {
				T_OK(freelist_put_free_run(&fl, pg, n));
				for (uint64_t i = 0; i < n; i++)
					state[pg + i] = 1;
			}
		}
	}
	uint64_t nfree = 0, npend = 0, nyoung = 0;
	for (uint64_t id = 2; id < N; id++) {
		nfree += state[id] == 1;
		npend += state[id] == 2;
		nyoung += state[id] == 3;
	}
	T_CHECK(fl.nfree == nfree && fl.pending.pages == npend && fl.young.pages == nyoung);
	freelist_destroy(&fl);
}

int main(void)
{
	test_alloc();
	test_pending();
	test_young();
	test_page_format();
	test_random();
	t_no_leaks();
	printf("test_freelist: ok\n");
	return 0;
}
