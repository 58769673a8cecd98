/*
 * Replays the db-file fuzz corpus (tests/fuzz/corpus/dbfile/) through the
 * fuzz target's entry point, then many mutations of each file: flipped
 * bytes anywhere and in page headers, rewritten page ids and counts,
 * zeroed and copied pages, truncations. The unchanged files must read
 * without error; the mutations may fail but must never crash (run under
 * ASan/UBSan in CI). BTREE_SEED replays a seed; BTREE_MUTATIONS sets the
 * mutations per file.
 */
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "btree_util.h"

#include "../../../fuzz/fuzz_dbfile.c"

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		T_FAIL("cannot open %s: %s", path, strerror(errno));
	struct stat st;
	T_CHECK(fstat(fileno(f), &st) == 0);
	*len = (size_t)st.st_size;
	uint8_t *buf = t_xmalloc(*len);
	T_CHECK(fread(buf, 1, *len, f) == *len);
	fclose(f);
	return buf;
}

/* The page size a file declares (meta 0), or 4096. */
static size_t file_page_size(const uint8_t *b, size_t len)
{
	if (len >= 64 && page_ld32(b + 16) == PAGE_MAGIC) {
		uint32_t ps = page_ld32(b + 24);
		if (page_size_valid(ps))
			return ps;
	}
	return 4096;
}

static void mutate(uint8_t *b, size_t *len, size_t ps)
{
	size_t npages = *len / ps;
	uint64_t kind = t_below(9);
	size_t pg = npages ? t_below(npages) : 0;
	uint8_t *p = b + pg * ps;
	switch (kind) {
	case 0: /* random bytes anywhere */
	case 1:
		for (int i = 1 + (int)t_below(8); i > 0 && *len; i--)
			b[t_below(*len)] ^= (uint8_t)(1 + t_below(255));
		break;
	case 2: /* a page header field */
		if (npages)
			p[t_below(16)] ^= (uint8_t)(1 + t_below(255));
		break;
	case 3: /* element headers right after a page header */
		if (npages)
			for (int i = 0; i < 4; i++)
				p[16 + t_below(ps > 80 ? 64 : 16)] = (uint8_t)t_rand();
		break;
	case 4: /* a count or overflow set to something large */
		if (npages) {
			if (t_chance(500))
				page_st16(p + 10, (uint16_t)t_rand());
			else
				page_st32(p + 12, (uint32_t)t_below(1000));
		}
		break;
	case 5: /* a page zeroed */
		if (npages)
			memset(p, 0, ps);
		break;
	case 6: /* a page copied over another */
		if (npages > 1)
			memcpy(p, b + t_below(npages) * ps, ps);
		break;
	case 7: /* truncated */
		*len = t_below(*len + 1);
		break;
	case 8: /* a u64 (page id, root, pgid, txid) somewhere rewritten */
		if (*len >= 8) {
			size_t off = t_below(*len / 8) * 8;
			page_st64(b + off, t_below(npages + 4));
		}
		break;
	}
}

int main(void)
{
	uint64_t seed = t_pick_seed();
	const char *m = getenv("BTREE_MUTATIONS");
	unsigned mutations = m && *m ? (unsigned)atoi(m) : 300;
	t_set_seed(seed);
	t_phase = "corpus";
	char src[] = __FILE__;
	char corpus[4096];
	snprintf(corpus, sizeof(corpus), "%s/../../../fuzz/corpus/dbfile", dirname(src));
	printf("test_dbfile_corpus: seed %" PRIu64 ", corpus %s\n", seed, corpus);

	DIR *d = opendir(corpus);
	if (!d)
		T_FAIL("cannot open the corpus %s: %s", corpus, strerror(errno));
	struct dirent *e;
	unsigned files = 0, inputs = 0, rejected = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char path[8192];
		snprintf(path, sizeof(path), "%s/%s", corpus, e->d_name);
		size_t len;
		uint8_t *orig = read_file(path, &len);
		size_t ps = file_page_size(orig, len);
		t_phase = e->d_name;
		int rc = dbfile_fuzz_one(orig, len);
		if (rc != 0)
			T_FAIL("corpus file %s does not read cleanly: %d", e->d_name, rc);
		files++;
		inputs++;
		uint8_t *b = t_xmalloc(len);
		for (unsigned i = 0; i < mutations; i++) {
			t_step = i;
			memcpy(b, orig, len);
			size_t blen = len;
			for (int k = 1 + (int)t_below(3); k > 0; k--)
				mutate(b, &blen, ps);
			/* An exact-size copy, so ASan sees reads past the end. */
			uint8_t *exact = t_xmalloc(blen);
			memcpy(exact, b, blen);
			if (dbfile_fuzz_one(exact, blen) != 0)
				rejected++;
			free(exact);
			inputs++;
		}
		free(b);
		free(orig);
	}
	closedir(d);
	T_CHECK(files >= 4);
	T_CHECK(rejected > 0);
	t_no_leaks();
	printf("test_dbfile_corpus: ok (%u corpus files, %u inputs, %u rejected with an error)\n",
	       files, inputs, rejected);
	return 0;
}
