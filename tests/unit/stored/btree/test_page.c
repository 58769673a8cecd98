/*
 * The bbolt page codec: FNV-1a 64 vectors, meta encode/decode/verify
 * (checksum, magic, version, the unchecksummed 0 that bbolt accepts), meta
 * pages written by real bbolt (the fuzz corpus holds one), element bounds,
 * and key order.
 */
#include <libgen.h>

#include "btree_util.h"

static void test_fnv(void)
{
	T_CHECK(page_fnv64a("", 0) == 0xcbf29ce484222325ull);
	T_CHECK(page_fnv64a("a", 1) == 0xaf63dc4c8601ec8cull);
	T_CHECK(page_fnv64a("foobar", 6) == 0x85944171f73967e8ull);
}

static void test_meta(void)
{
	uint8_t page[4096];
	char why[128];
	struct page_meta m = {
		.magic = PAGE_MAGIC, .version = PAGE_VERSION, .page_size = 4096,
		.root = 3, .sequence = 9, .freelist = 2, .pgid = 4, .txid = 7,
	}, d;
	page_meta_encode(page, sizeof(page), 1, &m);
	T_CHECK(page_id(page) == 1 && page_flags(page) == PAGE_FLAG_META);
	T_OK(page_meta_verify(page, why, sizeof(why)));
	page_meta_decode(page, &d);
	T_CHECK(d.root == 3 && d.sequence == 9 && d.freelist == 2 && d.pgid == 4 && d.txid == 7);
	T_CHECK(d.checksum == page_fnv64a(page + 16, 56));

	page[16 + 48] ^= 1; /* txid */
	T_RC(page_meta_verify(page, why, sizeof(why)), -EUCLEAN);
	T_CHECK(strstr(why, "checksum"));
	page_st64(page + 16 + 56, 0); /* bbolt accepts an unset checksum */
	T_OK(page_meta_verify(page, why, sizeof(why)));

	m.version = 1;
	page_meta_encode(page, sizeof(page), 0, &m);
	T_RC(page_meta_verify(page, why, sizeof(why)), -EPROTO);
	m.version = PAGE_VERSION;
	m.magic = 0x12345678;
	page_meta_encode(page, sizeof(page), 0, &m);
	T_RC(page_meta_verify(page, why, sizeof(why)), -EUCLEAN);
	m.magic = PAGE_MAGIC;
	m.page_size = 3000;
	page_meta_encode(page, sizeof(page), 0, &m);
	T_RC(page_meta_verify(page, why, sizeof(why)), -EUCLEAN);
	T_CHECK(page_size_valid(512) && page_size_valid(65536) && !page_size_valid(256) &&
		!page_size_valid(131072) && !page_size_valid(4095));
}

/* Meta pages that bbolt itself wrote verify with this codec. */
static void test_bbolt_meta(void)
{
	char src[] = __FILE__;
	char path[4096];
	snprintf(path, sizeof(path), "%s/../../../fuzz/corpus/dbfile/bbolt-1k.db", dirname(src));
	FILE *f = fopen(path, "rb");
	T_CHECK(f);
	uint8_t buf[2048];
	T_CHECK(fread(buf, 1, sizeof(buf), f) == sizeof(buf));
	fclose(f);
	char why[128];
	for (int i = 0; i < 2; i++) {
		struct page_meta m;
		T_OK(page_meta_verify(buf + i * 1024, why, sizeof(why)));
		page_meta_decode(buf + i * 1024, &m);
		T_CHECK(m.page_size == 1024 && m.checksum != 0 && page_id(buf + i * 1024) == m.txid % 2);
	}
}

static void test_elements(void)
{
	uint8_t p[256] = { 0 };
	struct page_elem e;
	/* A leaf with two elements: "ab"->"xyz", "b"->"". */
	page_set_header(p, 9, PAGE_FLAG_LEAF, 2, 0);
	size_t data = 16 + 2 * 16;
	page_st32(p + 16, 0);
	page_st32(p + 16 + 4, (uint32_t)(data - 16));
	page_st32(p + 16 + 8, 2);
	page_st32(p + 16 + 12, 3);
	memcpy(p + data, "abxyz", 5);
	page_st32(p + 32, PAGE_LEAF_BUCKET);
	page_st32(p + 32 + 4, (uint32_t)(data + 5 - 32));
	page_st32(p + 32 + 8, 1);
	page_st32(p + 32 + 12, 0);
	p[data + 5] = 'b';
	T_OK(page_elem(p, sizeof(p), true, 0, &e));
	T_CHECK(e.ksize == 2 && memcmp(e.key, "ab", 2) == 0 && e.vsize == 3 &&
		memcmp(e.val, "xyz", 3) == 0 && e.flags == 0);
	T_OK(page_elem(p, sizeof(p), true, 1, &e));
	T_CHECK(e.ksize == 1 && e.key[0] == 'b' && e.flags == PAGE_LEAF_BUCKET);
	/* Outside the span: the element header, or its key/value. */
	T_RC(page_elem(p, 40, true, 1, &e), -EUCLEAN);
	T_RC(page_elem(p, data + 4, true, 0, &e), -EUCLEAN);
	page_st32(p + 16 + 12, 0xFFFFFFFFu);
	T_RC(page_elem(p, sizeof(p), true, 0, &e), -EUCLEAN);

	/* A branch element. */
	page_set_header(p, 9, PAGE_FLAG_BRANCH, 1, 0);
	page_st32(p + 16, 16);
	page_st32(p + 16 + 4, 3);
	page_st64(p + 16 + 8, 77);
	memcpy(p + 32, "key", 3);
	T_OK(page_elem(p, sizeof(p), false, 0, &e));
	T_CHECK(e.pgid == 77 && e.ksize == 3 && memcmp(e.key, "key", 3) == 0 && !e.val);
}

static void test_keycmp(void)
{
	T_CHECK(page_keycmp((const uint8_t *)"a", 1, (const uint8_t *)"b", 1) < 0);
	T_CHECK(page_keycmp((const uint8_t *)"ab", 2, (const uint8_t *)"a", 1) > 0);
	T_CHECK(page_keycmp((const uint8_t *)"a", 1, (const uint8_t *)"ab", 2) < 0);
	T_CHECK(page_keycmp((const uint8_t *)"\xff", 1, (const uint8_t *)"\x01", 1) > 0);
	T_CHECK(page_keycmp((const uint8_t *)"x", 0, (const uint8_t *)"y", 0) == 0);
}

int main(void)
{
	test_fnv();
	test_meta();
	test_bbolt_meta();
	test_elements();
	test_keycmp();
	printf("stored/btree/test_page: ok\n");
	return 0;
}
