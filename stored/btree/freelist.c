/*
 * Free and pending pages of the writer (see freelist.h). Decoding a
 * freelist page, which readers use too, is freelist_read.c.
 */
#include "stored/btree/freelist.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stored/alloc.h"
#include "stored/btree/btree_int.h"
#include "stored/btree/page.h"

void freelist_init(struct freelist *fl)
{
	memset(fl, 0, sizeof(*fl));
}

void freelist_destroy(struct freelist *fl)
{
	stored_free(fl->free);
	stored_free(fl->pending.v);
	stored_free(fl->young.v);
	memset(fl, 0, sizeof(*fl));
}

int freelist_alloc(struct freelist *fl, uint64_t n, uint64_t *pgid)
{
	if (n == 0)
		return -ENOENT;
	/* Walk from the lowest id upwards (from the end of the array). */
	size_t run = 0;
	for (size_t i = fl->nfree; i-- > 0;) {
		uint64_t id = fl->free[i];
		if (run > 0 && fl->free[i + 1] + 1 == id)
			run++;
		else
			run = 1;
		if (run == n) {
			/* The run is free[i .. i+n-1], first page free[i+n-1]. */
			*pgid = fl->free[i + n - 1];
			memmove(&fl->free[i], &fl->free[i + n],
				(fl->nfree - i - n) * sizeof(uint64_t));
			fl->nfree -= n;
			return 0;
		}
	}
	return -ENOENT;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* Merges the descending ids (owned by the caller) into the free set. */
static int freelist_merge_desc(struct freelist *fl, const uint64_t *ids, size_t n)
{
	if (n == 0)
		return 0;
	size_t total = fl->nfree + n;
	uint64_t *out = stored_malloc(total * sizeof(*out));
	if (!out)
		return -ENOMEM;
	size_t i = 0, j = 0, k = 0;
	while (i < fl->nfree || j < n) {
		uint64_t v;
		if (j == n || (i < fl->nfree && fl->free[i] > ids[j])) {
			v = fl->free[i++];
		} else {
			v = ids[j++];
		}
		if (k > 0 && out[k - 1] == v) {
			stored_free(out);
			return -EEXIST;
		}
		out[k++] = v;
	}
	stored_free(fl->free);
	fl->free = out;
	fl->nfree = k;
	fl->free_cap = total;
	return 0;
}

int freelist_put_free(struct freelist *fl, const uint64_t *ids, size_t n)
{
	if (n == 0)
		return 0;
	uint64_t *tmp = stored_malloc(n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, ids, n * sizeof(*tmp));
	qsort(tmp, n, sizeof(*tmp), cmp_desc);
	int rc = freelist_merge_desc(fl, tmp, n);
	stored_free(tmp);
	return rc;
}

int freelist_put_free_run(struct freelist *fl, uint64_t pgid, uint64_t n)
{
	if (n == 0)
		return 0;
	if (fl->free_cap - fl->nfree >= n) {
		/* In place, without allocating: pages handed back after an
		 * aborted txn fit in the room they were taken from. */
		uint64_t last = pgid + n - 1;
		size_t lo = 0, hi = fl->nfree;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (fl->free[mid] > last)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < fl->nfree && fl->free[lo] >= pgid)
			return -EEXIST;
		memmove(&fl->free[lo + n], &fl->free[lo], (fl->nfree - lo) * sizeof(uint64_t));
		for (uint64_t i = 0; i < n; i++)
			fl->free[lo + i] = last - i;
		fl->nfree += n;
		return 0;
	}
	uint64_t *tmp = stored_malloc(n * sizeof(*tmp));
	if (!tmp)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		tmp[i] = pgid + n - 1 - i;
	int rc = freelist_merge_desc(fl, tmp, n);
	stored_free(tmp);
	return rc;
}

/* Room for n more spans in l. */
static int spans_reserve(struct freelist_spans *l, size_t n)
{
	if (n > SIZE_MAX - l->n)
		return -ENOMEM;
	return stored_reserve((void **)&l->v, &l->cap, l->n + n, sizeof(*l->v), 64);
}

int freelist_reserve_pending(struct freelist *fl, size_t n)
{
	int rc = spans_reserve(&fl->pending, n);
	return rc ? rc : spans_reserve(&fl->young, n);
}

static int spans_add(struct freelist_spans *l, uint64_t txid, uint64_t pgid, uint64_t n)
{
	int rc = spans_reserve(l, 1);
	if (rc < 0)
		return rc;
	l->v[l->n++] = (struct freelist_span){ txid, pgid, n };
	l->pages += n;
	return 0;
}

int freelist_add_pending(struct freelist *fl, uint64_t txid, uint64_t pgid, uint64_t n)
{
	return spans_add(&fl->pending, txid, pgid, n);
}

int freelist_add_young(struct freelist *fl, uint64_t txid, uint64_t pgid, uint64_t n)
{
	return spans_add(&fl->young, txid, pgid, n);
}

static void spans_drop_after(struct freelist_spans *l, uint64_t txid)
{
	while (l->n > 0 && l->v[l->n - 1].txid > txid)
		l->pages -= l->v[--l->n].n;
}

void freelist_drop_pending_after(struct freelist *fl, uint64_t txid)
{
	spans_drop_after(&fl->pending, txid);
	spans_drop_after(&fl->young, txid);
}

/* Spans at the head of l freed by txids <= upto: how many, and their
 * pages added to *pages. */
static size_t spans_due(const struct freelist_spans *l, uint64_t upto, uint64_t *pages)
{
	size_t k = 0;
	while (k < l->n && l->v[k].txid <= upto)
		*pages += l->v[k++].n;
	return k;
}

/* Appends the ids of the first nspans spans of l to ids at *k. */
static void spans_ids(const struct freelist_spans *l, size_t nspans, uint64_t *ids, size_t *k)
{
	for (size_t i = 0; i < nspans; i++)
		for (uint64_t j = 0; j < l->v[i].n; j++)
			ids[(*k)++] = l->v[i].pgid + j;
}

/* Drops the first k spans of l, holding kpages pages. */
static void spans_shift(struct freelist_spans *l, size_t k, uint64_t kpages)
{
	if (k == 0)
		return; /* l->v may be NULL: nothing was ever added */
	memmove(l->v, l->v + k, (l->n - k) * sizeof(*l->v));
	l->n -= k;
	l->pages -= kpages;
}

void freelist_list_waiting(const struct freelist *fl, uint64_t *ids, size_t *k)
{
	spans_ids(&fl->pending, fl->pending.n, ids, k);
	spans_ids(&fl->young, fl->young.n, ids, k);
}

int freelist_release(struct freelist *fl, uint64_t upto_txid, uint64_t young_upto)
{
	uint64_t ppages = 0, ypages = 0;
	size_t np = spans_due(&fl->pending, upto_txid, &ppages);
	size_t ny = spans_due(&fl->young, young_upto, &ypages);
	if (np + ny == 0)
		return 0;
	uint64_t *ids = stored_malloc((ppages + ypages) * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	size_t k = 0;
	spans_ids(&fl->pending, np, ids, &k);
	spans_ids(&fl->young, ny, ids, &k);
	qsort(ids, k, sizeof(*ids), cmp_desc);
	int rc = freelist_merge_desc(fl, ids, k);
	stored_free(ids);
	if (rc < 0)
		return rc;
	spans_shift(&fl->pending, np, ppages);
	spans_shift(&fl->young, ny, ypages);
	return 0;
}

uint64_t freelist_page_bytes(uint64_t count)
{
	uint64_t slots = count >= 0xFFFF ? count + 1 : count;
	return PAGE_HDR_SIZE + slots * 8;
}

int freelist_encode(const struct freelist *fl, uint8_t *buf, size_t span,
		    uint64_t pgid, uint32_t overflow)
{
	uint64_t count = freelist_count(fl);
	if (freelist_page_bytes(count) > span)
		return -ENOSPC;
	uint16_t hdr_count = count >= 0xFFFF ? 0xFFFF : (uint16_t)count;
	page_set_header(buf, pgid, PAGE_FLAG_FREELIST, hdr_count, overflow);
	uint8_t *p = buf + PAGE_HDR_SIZE;
	if (count >= 0xFFFF) {
		page_st64(p, count);
		p += 8;
	}
	/* the free ids are kept sorted: only the waiting ones (a few
	 * checkpoints' worth) are sorted here, then merged with them in
	 * ascending order. Sorting all of them took milliseconds of the
	 * writer's time at every checkpoint of a db with many free pages. */
	uint64_t nwait = freelist_waiting(fl);
	uint64_t *wait = stored_malloc((nwait ? nwait : 1) * sizeof(*wait));
	if (!wait)
		return -ENOMEM;
	size_t nw = 0, iw = 0, jf = fl->nfree;
	freelist_list_waiting(fl, wait, &nw);
	qsort(wait, nw, sizeof(*wait), cmp_asc);
	while (iw < nw || jf > 0) {
		uint64_t id = jf == 0 || (iw < nw && wait[iw] < fl->free[jf - 1]) ? wait[iw++]
										 : fl->free[--jf];
		page_st64(p, id);
		p += 8;
	}
	stored_free(wait);
	return 0;
}
