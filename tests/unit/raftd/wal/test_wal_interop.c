/*
 * The WAL against etcd's bytes.
 *
 * Run without arguments, it is a unit test: a WAL written here must equal,
 * byte for byte, the one etcd 3.4's wal package wrote for the same records
 * (captured below), and the generator shared with tests/tools/walgen must
 * round-trip through the WAL.
 *
 * With arguments it is the C half of tests/integration/wal_interop.sh and
 * takes the same commands and flags as walgen:
 *   test_wal_interop write DIR [-n N] [-seed S] [-batch B] [-segment BYTES]
 *                    [-meta TEXT] [-snap-every K] [-rewind-every R]
 *   test_wal_interop read DIR [-snap-index I -snap-term T]
 * and prints the same text, so the two can be compared with diff.
 */
#include <inttypes.h>

#include "wal_util.h"

#include "raftd/alloc.h"
#include "raftd/wal/wal.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"

/* ---- the generator, mirrored from tests/tools/walgen/main.go ---- */

struct gen_rng {
	uint64_t s;
};

static uint64_t gen_next(struct gen_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t gen_term(uint64_t index, uint64_t gen)
{
	return 1 + (index - 1) / 13 + gen;
}

/* The entry walgen makes; data is malloc'd (free it). */
static struct raft_entry gen_entry(uint64_t seed, uint64_t index, uint64_t gen)
{
	struct gen_rng r = { seed * 1000003 + index * 7 + gen };
	struct raft_entry e = { .index = index, .term = gen_term(index, gen) };
	if (gen_next(&r) % 29 == 0)
		e.type = RAFT_ENTRY_CONF_CHANGE;
	uint64_t x = gen_next(&r), n;
	switch (x % 10) {
	case 0: n = 0; break;
	case 8: n = (x >> 8) % 3000; break;
	case 9: n = (x >> 8) % 20000 + 1000; break;
	default: n = (x >> 8) % 200; break;
	}
	if (n) {
		e.len = (uint32_t)n;
		e.data = malloc(n);
		CHECK(e.data);
		for (uint64_t i = 0; i < n; i++)
			e.data[i] = (uint8_t)(gen_next(&r) >> 56);
	}
	return e;
}

struct gen_opts {
	uint64_t n, seed, batch, segment, snap_every, rewind_every;
	uint64_t snap_index, snap_term;
	const char *meta;
};

static void gen_defaults(struct gen_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->n = 100;
	o->seed = 1;
	o->batch = 5;
	o->segment = WAL_SEGMENT_BYTES;
	o->meta = "cetcd-walgen";
}

static int gen_parse(struct gen_opts *o, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		if (i + 1 >= argc)
			return -1;
		const char *k = argv[i], *v = argv[++i];
		uint64_t x = strtoull(v, NULL, 0);
		if (!strcmp(k, "-n")) o->n = x;
		else if (!strcmp(k, "-seed")) o->seed = x;
		else if (!strcmp(k, "-batch")) o->batch = x;
		else if (!strcmp(k, "-segment")) o->segment = x;
		else if (!strcmp(k, "-meta")) o->meta = v;
		else if (!strcmp(k, "-snap-every")) o->snap_every = x;
		else if (!strcmp(k, "-rewind-every")) o->rewind_every = x;
		else if (!strcmp(k, "-snap-index")) o->snap_index = x;
		else if (!strcmp(k, "-snap-term")) o->snap_term = x;
		else return -1;
	}
	return o->batch ? 0 : -1;
}

/* walgen write, through this WAL. */
static int gen_write(const char *dir, const struct gen_opts *o)
{
	struct wal_options wo = { .segment_bytes = o->segment };
	struct wal_replay rep;
	struct wal *w;
	uint64_t last = 0;
	int rc;

	if (wal_exists(dir)) {
		rc = wal_open(dir, 0, 0, &wo, &w, &rep);
		if (rc) {
			fprintf(stderr, "%s\n", rep.error);
			return rc;
		}
		if (rep.n_entries)
			last = rep.entries[rep.n_entries - 1].index;
		wal_replay_free(&rep);
	} else {
		rc = wal_create(dir, (const uint8_t *)o->meta, strlen(o->meta), &wo, &w);
		if (rc)
			return rc;
	}
	struct gen_rng br = { o->seed ^ 0xabcdef ^ last };
	uint64_t gen = 0, batches = 0, snap_mark = 0, end = last + o->n;
	uint64_t *terms = calloc(end + 2, sizeof(*terms));
	struct raft_entry *ents = calloc(o->batch, sizeof(*ents));
	CHECK(terms && ents);
	while (last < end) {
		uint64_t size = 1 + gen_next(&br) % o->batch, start = last + 1, n = 0;
		batches++;
		if (o->rewind_every && batches % o->rewind_every == 0 && start > 3) {
			start -= 2;
			gen++;
		}
		for (uint64_t i = 0; i < size && start + i <= end; i++) {
			ents[n] = gen_entry(o->seed, start + i, gen);
			terms[start + i] = ents[n].term;
			n++;
		}
		last = ents[n - 1].index;
		struct raft_hardstate hs = { ents[n - 1].term, 1 + last % 3, last > 3 ? last - 3 : 0 };
		rc = wal_save(w, &hs, ents, n);
		if (!rc)
			rc = wal_sync(w);
		for (uint64_t i = 0; i < n; i++)
			free(ents[i].data);
		if (rc)
			break;
		if (o->snap_every && hs.commit / o->snap_every > snap_mark) {
			snap_mark = hs.commit / o->snap_every;
			uint64_t index = snap_mark * o->snap_every;
			rc = wal_save_snapshot(w, index, terms[index]);
			if (!rc)
				rc = wal_sync(w);
			if (rc)
				break;
		}
	}
	free(ents);
	free(terms);
	int crc = wal_close(w);
	return rc ? rc : crc;
}

static void print_hex(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

/* walgen read, through this WAL. */
static int gen_read(const char *dir, const struct gen_opts *o)
{
	struct wal_replay rep;
	int rc = wal_read(dir, o->snap_index, o->snap_term, &rep);
	if (rc) {
		fprintf(stderr, "%s\n", rep.error);
		return rc;
	}
	if (rep.metadata) {
		printf("metadata ");
		print_hex(rep.metadata, rep.metadata_len);
		printf("\n");
	} else {
		printf("metadata none\n");
	}
	printf("state %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", rep.state.term,
	       rep.state.vote, rep.state.commit);
	printf("entries %zu\n", rep.n_entries);
	for (size_t i = 0; i < rep.n_entries; i++) {
		const struct raft_entry *e = &rep.entries[i];
		printf("%" PRIu64 " %" PRIu64 " %u %u ", e->index, e->term, e->type, e->len);
		if (e->len)
			print_hex(e->data, e->len);
		else
			printf("-");
		printf("\n");
	}
	wal_replay_free(&rep);
	return 0;
}

/* ---- the unit test ---- */

/* What etcd 3.4 wrote for wal.Create(dir, []byte("meta")) followed by
 * Save(HardState{Term: 1, Commit: 1}, []Entry{{Term: 1, Index: 1,
 * Data: []byte("x")}}): the crc, metadata and snapshot records, the entry
 * and the state, then the preallocated zeros. */
static const uint8_t etcd_bytes[] = {
	0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x84, 0x08, 0x04, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82, 0x08, 0x01, 0x10, 0x95, 0xa1, 0x9c, 0xd8, 0x01,
	0x1a, 0x04, 0x6d, 0x65, 0x74, 0x61, 0x00, 0x00, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x82,
	0x08, 0x05, 0x10, 0xf2, 0xc4, 0xf7, 0xfa, 0x01, 0x1a, 0x04, 0x08, 0x00, 0x10, 0x00, 0x00, 0x00,
	0x13, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x85, 0x08, 0x02, 0x10, 0xcb, 0xbd, 0x89, 0x83, 0x0f,
	0x1a, 0x09, 0x08, 0x00, 0x10, 0x01, 0x18, 0x01, 0x22, 0x01, 0x78, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x81, 0x08, 0x03, 0x10, 0xab, 0x98, 0x99, 0x1b, 0x1a,
	0x06, 0x08, 0x01, 0x10, 0x00, 0x18, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
};

static void test_etcd_bytes(const char *root)
{
	char dir[512], path[600];
	struct wal *w;
	struct wal_options o = { .segment_bytes = 4096 };

	snprintf(dir, sizeof(dir), "%s/golden", root);
	CHECK_EQ(wal_create(dir, (const uint8_t *)"meta", 4, &o, &w), 0);
	struct raft_entry e = { .term = 1, .index = 1, .len = 1, .data = (uint8_t *)"x" };
	struct raft_hardstate hs = { 1, 0, 1 };
	CHECK_EQ(wal_save(w, &hs, &e, 1), 0);
	CHECK_EQ(wal_sync(w), 0);
	CHECK_EQ(wal_close(w), 0);

	snprintf(path, sizeof(path), "%s/0000000000000000-0000000000000000.wal", dir);
	FILE *f = fopen(path, "rb");
	CHECK(f);
	uint8_t got[4096 + 1];
	size_t n = fread(got, 1, sizeof(got), f);
	fclose(f);
	CHECK_EQ(n, 4096); /* preallocated to the segment size */
	CHECK(memcmp(got, etcd_bytes, sizeof(etcd_bytes)) == 0);
	for (size_t i = sizeof(etcd_bytes); i < n; i++)
		CHECK_EQ(got[i], 0);
}

/* The generator through the WAL: every entry read back is the last one
 * written at its index. */
static void test_generator_round_trip(const char *root)
{
	char dir[512];
	struct gen_opts o;
	struct wal_replay rep;

	gen_defaults(&o);
	o.n = 200;
	o.segment = 30000;
	o.rewind_every = 5;
	o.snap_every = 40;
	snprintf(dir, sizeof(dir), "%s/gen", root);
	CHECK_EQ(gen_write(dir, &o), 0);
	o.n = 50;
	CHECK_EQ(gen_write(dir, &o), 0); /* reopen and append */

	CHECK_EQ(wal_read(dir, 0, 0, &rep), 0);
	CHECK_EQ(rep.n_entries, 250);
	CHECK_EQ(rep.metadata_len, strlen("cetcd-walgen"));
	CHECK(memcmp(rep.metadata, "cetcd-walgen", rep.metadata_len) == 0);
	CHECK_EQ(rep.state.commit, 247);
	for (size_t i = 0; i < rep.n_entries; i++) {
		const struct raft_entry *e = &rep.entries[i];
		CHECK_EQ(e->index, i + 1);
		/* Which generation wrote it is not known here; one must match. */
		bool found = false;
		for (uint64_t gen = 0; gen < 20 && !found; gen++) {
			struct raft_entry x = gen_entry(o.seed, e->index, gen);
			found = x.term == e->term && x.len == e->len && x.type == e->type &&
				(!x.len || memcmp(x.data, e->data, x.len) == 0);
			free(x.data);
		}
		CHECK(found);
	}
	uint64_t term40 = rep.entries[39].term;
	wal_replay_free(&rep);
	/* A snapshot record at 40 was written with its entry's term: reading
	 * from it starts at 41, from the segment that holds it. */
	CHECK_EQ(wal_read(dir, 40, term40, &rep), 0);
	CHECK_EQ(rep.n_entries, 210);
	CHECK_EQ(rep.entries[0].index, 41);
	wal_replay_free(&rep);
	struct wal *w;
	CHECK_EQ(wal_open(dir, 40, term40 + 1, NULL, &w, &rep), -EINVAL);
	CHECK(strstr(rep.error, "does not belong to this snapshot"));
}

static int unit_test(void)
{
	const char *root = wt_scratch();

	log_set_level(LOG_LEVEL_WARN);
	test_etcd_bytes(root);
	test_generator_round_trip(root);
	printf("test_wal_interop: ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	struct gen_opts o;

	if (argc == 1)
		return unit_test();
	gen_defaults(&o);
	if (argc < 3 || gen_parse(&o, argc - 3, argv + 3)) {
		fprintf(stderr, "usage: %s write|read DIR [flags as walgen]\n", argv[0]);
		return 2;
	}
	int rc;
	if (!strcmp(argv[1], "write"))
		rc = gen_write(argv[2], &o);
	else if (!strcmp(argv[1], "read"))
		rc = gen_read(argv[2], &o);
	else
		return 2;
	if (rc)
		fprintf(stderr, "%s %s: %s\n", argv[1], argv[2], strerror(-rc));
	return rc ? 1 : 0;
}
