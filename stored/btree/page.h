/*
 * The bbolt version 2 file format, as etcd's member/snap/db uses it.
 *
 * A file is an array of pages of page_size bytes (the OS page size unless the
 * file says otherwise). Page 0 and page 1 hold the two meta records; the one
 * with the higher txid whose checksum verifies is current. Every other page
 * is a branch page, a leaf page, a freelist page, or free. A page that needs
 * more room spans overflow pages that follow it. All integers are little
 * endian, as bbolt writes them on amd64 and arm64.
 *
 *   page header (16 bytes):  id u64 | flags u16 | count u16 | overflow u32
 *   branch element (16):     pos u32 | ksize u32 | pgid u64
 *   leaf element (16):       flags u32 | pos u32 | ksize u32 | vsize u32
 *   meta (64, after header): magic u32 | version u32 | page_size u32 |
 *                            flags u32 | root bucket (root u64, sequence u64) |
 *                            freelist u64 | pgid u64 | txid u64 | checksum u64
 *   freelist page:           count page ids (u64) after the header; when
 *                            count is 0xFFFF the first u64 holds the count
 *   bucket value:            root u64 | sequence u64, then, when root is 0
 *                            (an inline bucket), a leaf page whose header id
 *                            is 0, holding the bucket's elements
 *
 * An element's pos counts from the start of that element to its key; the
 * value follows the key. meta.pgid is the high-water mark: pages at or past
 * it are not part of the database. checksum is FNV-1a 64 of the 56 meta
 * bytes before it (0 means "not checksummed", accepted as bbolt does).
 */
#ifndef CETCD_STORED_PAGE_H
#define CETCD_STORED_PAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "stored's page codec assumes a little-endian host"
#endif

#define PAGE_HDR_SIZE 16u
#define PAGE_ELEM_SIZE 16u     /* branch and leaf elements are both 16 bytes */
#define PAGE_META_SIZE 64u
#define PAGE_META_SUM_LEN 56u  /* bytes covered by the checksum */
#define PAGE_BUCKET_HDR_SIZE 16u

#define PAGE_FLAG_BRANCH 0x01u
#define PAGE_FLAG_LEAF 0x02u
#define PAGE_FLAG_META 0x04u
#define PAGE_FLAG_FREELIST 0x10u

#define PAGE_LEAF_BUCKET 0x01u /* leaf element flag: the value is a bucket */

#define PAGE_MAGIC 0xED0CDAEDu
#define PAGE_VERSION 2u
#define PAGE_NO_FREELIST UINT64_MAX /* meta.freelist of a file without one */

#define PAGE_MAX_KEY 32768u
#define PAGE_MAX_VALUE ((1u << 31) - 2)
#define PAGE_MIN_SIZE 512u
#define PAGE_MAX_SIZE 65536u

static inline uint16_t page_ld16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t page_ld32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t page_ld64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void page_st16(uint8_t *p, uint16_t v) { memcpy(p, &v, sizeof(v)); }
static inline void page_st32(uint8_t *p, uint32_t v) { memcpy(p, &v, sizeof(v)); }
static inline void page_st64(uint8_t *p, uint64_t v) { memcpy(p, &v, sizeof(v)); }

/* Page header fields. */
static inline uint64_t page_id(const uint8_t *p) { return page_ld64(p); }
static inline uint16_t page_flags(const uint8_t *p) { return page_ld16(p + 8); }
static inline uint16_t page_count(const uint8_t *p) { return page_ld16(p + 10); }
static inline uint32_t page_overflow(const uint8_t *p) { return page_ld32(p + 12); }

static inline void page_set_header(uint8_t *p, uint64_t id, uint16_t flags,
				   uint16_t count, uint32_t overflow)
{
	page_st64(p, id);
	page_st16(p + 8, flags);
	page_st16(p + 10, count);
	page_st32(p + 12, overflow);
}

/* The decoded meta record. */
struct page_meta {
	uint32_t magic;
	uint32_t version;
	uint32_t page_size;
	uint32_t flags;
	uint64_t root;      /* root bucket's root page */
	uint64_t sequence;  /* root bucket's sequence */
	uint64_t freelist;  /* freelist page, or PAGE_NO_FREELIST */
	uint64_t pgid;      /* high-water mark: first page past the database */
	uint64_t txid;
	uint64_t checksum;
};

/* FNV-1a 64 of the len bytes at p. */
uint64_t page_fnv64a(const void *p, size_t len);

/* Decodes the meta record of the meta page at page (header included). */
void page_meta_decode(const uint8_t *page, struct page_meta *m);

/* Writes a whole meta page into page (page_size bytes, zeroed first): header
 * with id slot and the meta flag, then m with a fresh checksum. */
void page_meta_encode(uint8_t *page, uint32_t page_size, uint64_t slot,
		      const struct page_meta *m);

/* Checks magic, version and checksum of a meta page read from raw (the
 * page, header included). 0 if valid; otherwise -EUCLEAN (bad magic or
 * checksum) or -EPROTO (another version), with a reason in why. */
int page_meta_verify(const uint8_t *raw, char *why, size_t why_len);

/* True when v is a power of two in [PAGE_MIN_SIZE, PAGE_MAX_SIZE]. */
bool page_size_valid(uint32_t v);

/*
 * One decoded element of a branch or leaf page. key and val point into the
 * page; val is NULL on branch elements.
 */
struct page_elem {
	const uint8_t *key;
	const uint8_t *val;
	uint32_t ksize;
	uint32_t vsize;
	uint32_t flags;   /* leaf: PAGE_LEAF_BUCKET or 0 */
	uint64_t pgid;    /* branch: child page */
};

/*
 * Decodes element i of the branch or leaf page p that has span readable
 * bytes, checking that the element and its key and value lie inside the
 * span. 0 or -EUCLEAN (the element points outside the page).
 */
int page_elem(const uint8_t *p, size_t span, bool leaf, unsigned i,
	      struct page_elem *e);

/* Compares two byte strings like memcmp, shorter first on a common prefix. */
static inline int page_keycmp(const uint8_t *a, size_t alen, const uint8_t *b,
			      size_t blen)
{
	size_t n = alen < blen ? alen : blen;
	/* The first 8 bytes as big-endian words: most keys differ there,
	 * and it spares the call. */
	if (n >= 8) {
		uint64_t x, y;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		if (x != y)
			return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
	}
	int c = n ? memcmp(a, b, n) : 0;
	if (c)
		return c;
	return alen < blen ? -1 : alen > blen;
}

#endif
