/*
 * Codec helpers for the bbolt page format (see page.h).
 */
#include "stored/btree/page.h"

#include <errno.h>
#include <stdio.h>

uint64_t page_fnv64a(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

void page_meta_decode(const uint8_t *page, struct page_meta *m)
{
	const uint8_t *b = page + PAGE_HDR_SIZE;
	m->magic = page_ld32(b);
	m->version = page_ld32(b + 4);
	m->page_size = page_ld32(b + 8);
	m->flags = page_ld32(b + 12);
	m->root = page_ld64(b + 16);
	m->sequence = page_ld64(b + 24);
	m->freelist = page_ld64(b + 32);
	m->pgid = page_ld64(b + 40);
	m->txid = page_ld64(b + 48);
	m->checksum = page_ld64(b + 56);
}

void page_meta_encode(uint8_t *page, uint32_t page_size, uint64_t slot,
		      const struct page_meta *m)
{
	memset(page, 0, page_size);
	page_set_header(page, slot, PAGE_FLAG_META, 0, 0);
	uint8_t *b = page + PAGE_HDR_SIZE;
	page_st32(b, m->magic);
	page_st32(b + 4, m->version);
	page_st32(b + 8, m->page_size);
	page_st32(b + 12, m->flags);
	page_st64(b + 16, m->root);
	page_st64(b + 24, m->sequence);
	page_st64(b + 32, m->freelist);
	page_st64(b + 40, m->pgid);
	page_st64(b + 48, m->txid);
	page_st64(b + 56, page_fnv64a(b, PAGE_META_SUM_LEN));
}

int page_meta_verify(const uint8_t *raw, char *why, size_t why_len)
{
	struct page_meta m;
	page_meta_decode(raw, &m);
	if (m.magic != PAGE_MAGIC) {
		snprintf(why, why_len, "has magic 0x%08x, not bbolt's 0x%08x",
			 m.magic, PAGE_MAGIC);
		return -EUCLEAN;
	}
	if (m.version != PAGE_VERSION) {
		snprintf(why, why_len, "has format version %u, not %u",
			 m.version, PAGE_VERSION);
		return -EPROTO;
	}
	if (m.checksum != 0 &&
	    m.checksum != page_fnv64a(raw + PAGE_HDR_SIZE, PAGE_META_SUM_LEN)) {
		snprintf(why, why_len, "fails its checksum");
		return -EUCLEAN;
	}
	if (!page_size_valid(m.page_size)) {
		snprintf(why, why_len, "has an invalid page size %u", m.page_size);
		return -EUCLEAN;
	}
	return 0;
}

bool page_size_valid(uint32_t v)
{
	return v >= PAGE_MIN_SIZE && v <= PAGE_MAX_SIZE && (v & (v - 1)) == 0;
}

int page_elem(const uint8_t *p, size_t span, bool leaf, unsigned i,
	      struct page_elem *e)
{
	size_t off = PAGE_HDR_SIZE + (size_t)i * PAGE_ELEM_SIZE;
	if (off + PAGE_ELEM_SIZE > span)
		return -EUCLEAN;
	const uint8_t *el = p + off;
	uint64_t pos, end;
	if (leaf) {
		e->flags = page_ld32(el);
		pos = page_ld32(el + 4);
		e->ksize = page_ld32(el + 8);
		e->vsize = page_ld32(el + 12);
		e->pgid = 0;
	} else {
		pos = page_ld32(el);
		e->ksize = page_ld32(el + 4);
		e->pgid = page_ld64(el + 8);
		e->vsize = 0;
		e->flags = 0;
	}
	end = off + pos + (uint64_t)e->ksize + e->vsize;
	if (end > span)
		return -EUCLEAN;
	e->key = el + pos;
	e->val = leaf ? el + pos + e->ksize : NULL;
	return 0;
}
