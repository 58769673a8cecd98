/*
 * Unit tests for raftd/wal/wal.c and walread.c: round trips, replacement of
 * entries, snapshot points, segment cuts and the CRC chain across them,
 * torn tails cut at every offset of the last records, corruption reported
 * with segment and offset, locking, and no leaked allocation.
 */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>

#include "wal_util.h"

#include "raftd/wal/wal.h"
#include "base/diskio/diskio.h"
#include "raftd/wal/walread.h"
#include "raftd/wal/walrec.h"
#include "base/log/log.h"

#define SEG0 "0000000000000000-0000000000000000.wal"

static uint8_t databuf[64 * 1024];

/* Opens a plain-io WAL with segment size seg. */
static struct wal_options opts(uint64_t seg)
{
	struct wal_options o = { .segment_bytes = seg };
	CHECK_EQ(diskio_plain_open(-1, &o.io), 0);
	return o;
}

/* Saves entries [from, to] in term with len(i) bytes, in batches of
 * batch, each synced, with a hard state after each. */
static void save_range(struct wal *w, uint64_t from, uint64_t to, uint64_t term,
		       uint32_t (*len)(uint64_t), uint64_t batch)
{
	struct raft_entry ents[64];
	static uint8_t bufs[64][4096];
	CHECK(batch <= 64);
	for (uint64_t i = from; i <= to;) {
		size_t n = 0;
		for (; n < batch && i <= to; n++, i++)
			ents[n] = wt_entry(i, term, len(i), bufs[n]);
		struct raft_hardstate hs = { term, 1, i - 1 };
		CHECK_EQ(wal_save(w, &hs, ents, n), 0);
		CHECK_EQ(wal_sync(w), 0);
	}
}

static uint32_t len_small(uint64_t i) { return (uint32_t)(i * 37 % 300); }
static uint32_t len_mixed(uint64_t i) { return (uint32_t)(i % 7 == 0 ? 3000 + i % 900 : i * 13 % 150); }

static void check_range(const struct wal_replay *r, size_t at, uint64_t from, uint64_t to,
			uint64_t term, uint32_t (*len)(uint64_t))
{
	for (uint64_t i = from; i <= to; i++, at++) {
		CHECK(at < r->n_entries);
		CHECK(wt_entry_ok(&r->entries[at], i, term, len(i)));
	}
}

static void test_round_trip(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = opts(1 << 20);

	wt_path(dir, sizeof(dir), "rt");
	CHECK(!wal_exists(dir));
	CHECK_EQ(wal_create(dir, (const uint8_t *)"member-7", 8, &o, &w), 0);
	CHECK(wal_exists(dir));
	CHECK(!strcmp(wal_io_name(w), "plain"));
	save_range(w, 1, 100, 2, len_small, 7);
	CHECK_EQ(wal_last_index(w), 100);
	CHECK_EQ(wal_close(w), 0);

	o = opts(1 << 20);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 100);
	CHECK_EQ(r.metadata_len, 8);
	CHECK(!memcmp(r.metadata, "member-7", 8));
	CHECK_EQ(r.state.term, 2);
	CHECK_EQ(r.state.vote, 1);
	CHECK_EQ(r.state.commit, 100);
	CHECK_EQ(r.torn_offset, 0);
	check_range(&r, 0, 1, 100, 2, len_small);
	wal_replay_free(&r);
	CHECK_EQ(wal_last_index(w), 100);

	/* Entries that replace a suffix: 91.. in term 3. */
	save_range(w, 91, 120, 3, len_small, 5);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, 120);
	check_range(&r, 0, 1, 90, 2, len_small);
	check_range(&r, 90, 91, 120, 3, len_small);
	CHECK_EQ(r.state.term, 3);
	wal_replay_free(&r);

	/* A second creation is refused. */
	CHECK_EQ(wal_create(dir, NULL, 0, NULL, &w), -EEXIST);
	/* No temporary file is left behind by close. */
	char p[600];
	snprintf(p, sizeof(p), "%s/0.tmp", dir);
	CHECK(access(p, F_OK) < 0);
}

static void test_snapshot_points(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = opts(1 << 20);

	wt_path(dir, sizeof(dir), "snap");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	save_range(w, 1, 50, 4, len_small, 10);
	CHECK_EQ(wal_save_snapshot(w, 30, 4), 0);
	CHECK_EQ(wal_sync(w), 0);
	save_range(w, 51, 60, 4, len_small, 10);
	CHECK_EQ(wal_close(w), 0);

	o = opts(1 << 20);
	CHECK_EQ(wal_open(dir, 30, 4, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 30);
	check_range(&r, 0, 31, 60, 4, len_small);
	CHECK(r.metadata == NULL);
	wal_replay_free(&r);
	wal_close(w);

	CHECK_EQ(wal_open(dir, 30, 5, NULL, &w, &r), -EINVAL);
	CHECK(strstr(r.error, "has term 4, the snapshot has term 5"));
	CHECK_EQ(wal_open(dir, 31, 4, NULL, &w, &r), -ENOENT);
	CHECK(strstr(r.error, "no snapshot record for index 31 term 4"));
	/* The read-only path does not insist on the record. */
	CHECK_EQ(wal_read(dir, 31, 4, &r), 0);
	CHECK_EQ(r.n_entries, 29);
	wal_replay_free(&r);
}

static size_t segments(const char *dir, char names[][64], size_t n);

/* wal_snapshots lists the records a restart may start from (committed
 * ones only), and wal_purge keeps every segment from the one that holds
 * the newest snapshot's index, whatever --max-wals says. */
static void test_snapshot_purge(void)
{
	char dir[512], names[64][64];
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = opts(16 * 1024);
	uint64_t seq, first;

	wt_path(dir, sizeof(dir), "purge");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	save_range(w, 1, 200, 3, len_mixed, 10);
	CHECK_EQ(wal_save_snapshot(w, 150, 3), 0);
	save_range(w, 201, 400, 3, len_mixed, 10);
	CHECK_EQ(wal_save_snapshot(w, 300, 3), 0);
	CHECK_EQ(wal_sync(w), 0);
	/* past the commit index the hard states recorded: not valid */
	CHECK_EQ(wal_save_snapshot(w, 401, 3), 0);
	CHECK_EQ(wal_sync(w), 0);
	size_t before = segments(dir, names, 64);
	CHECK(before > 6);

	CHECK_EQ(wal_snapshots(dir, &r), 0);
	CHECK_EQ(r.n_snaps, 3); /* the create's (0, 0), 150 and 300 */
	CHECK_EQ(r.snaps[0].index, 0);
	CHECK_EQ(r.snaps[1].index, 150);
	CHECK_EQ(r.snaps[2].index, 300);
	CHECK_EQ(r.snaps[2].term, 3);
	CHECK_EQ(r.n_entries, 0);
	CHECK_EQ(r.state.commit, 400);
	wal_replay_free(&r);

	CHECK_EQ(wal_purge(w, 300, 0), 0); /* 0: keep all */
	CHECK_EQ(segments(dir, names, 64), before);
	int removed = wal_purge(w, 300, 2);
	CHECK(removed > 0);
	size_t after = segments(dir, names, 64);
	CHECK_EQ(after, before - (size_t)removed);
	/* the oldest left holds index 300: replay from the snapshot works */
	CHECK(wal_parse_name(names[0], &seq, &first));
	CHECK(first <= 300);
	CHECK(after == 2 || first > 0);
	CHECK_EQ(wal_close(w), 0);

	o = opts(16 * 1024);
	CHECK_EQ(wal_open(dir, 300, 3, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 100);
	check_range(&r, 0, 301, 400, 3, len_mixed);
	wal_replay_free(&r);
	/* the snapshot at 150 is gone with its segments: replaying from it
	 * fails with a clear error, never silently */
	CHECK_EQ(wal_snapshots(dir, &r), 0);
	CHECK_EQ(r.snaps[r.n_snaps - 1].index, 300);
	wal_replay_free(&r);
	CHECK_EQ(wal_close(w), 0);
	if (first > 150) {
		CHECK_EQ(wal_read(dir, 150, 3, &r), -ENOENT);
		CHECK(strstr(r.error, "does not reach back to the snapshot"));
	}
}

/* Names of the segments of dir, sorted, into names (max n); returns count. */
static size_t segments(const char *dir, char names[][64], size_t n)
{
	size_t k = 0;
	DIR *d = opendir(dir);
	CHECK(d);
	struct dirent *e;
	uint64_t s, i;
	while ((e = readdir(d)))
		if (wal_parse_name(e->d_name, &s, &i) && k < n)
			memcpy(names[k++], e->d_name, strlen(e->d_name) + 1); /* 36 bytes */
	closedir(d);
	qsort(names, k, 64, (int (*)(const void *, const void *))strcmp);
	return k;
}

/* Offsets where the records of the tail segment end, from a clean read. */
static size_t record_ends(const uint8_t *b, size_t len, uint64_t *ends, size_t max)
{
	size_t n = 0;
	uint64_t off = 0;
	while (off + 8 <= len && n < max) {
		uint64_t word = 0, rec;
		unsigned pad;
		for (int k = 7; k >= 0; k--)
			word = word << 8 | b[off + k];
		if (!word)
			break;
		walrec_frame_split(word, &rec, &pad);
		off += 8 + rec + pad;
		ends[n++] = off;
	}
	return n;
}

/* Directory fsyncs seen through diskio's hook: of the WAL dir, and of
 * the one that holds it. */
static const char *seg_dir;
static size_t seg_dir_syncs, seg_parent_syncs;

static void seg_count_sync(const char *d)
{
	size_t n = strlen(d);
	if (strcmp(d, seg_dir) == 0)
		seg_dir_syncs++;
	else if (strncmp(seg_dir, d, n) == 0 && seg_dir[n] == '/' && !strchr(seg_dir + n + 1, '/'))
		seg_parent_syncs++;
}

static void test_segments(void)
{
	char dir[512], names[64][64], p[700];
	struct wal *w;
	struct wal_replay r;
	const uint64_t seg = 16 * 1024;
	struct wal_options o = opts(seg);

	wt_path(dir, sizeof(dir), "seg");
	seg_dir = dir;
	seg_dir_syncs = seg_parent_syncs = 0;
	diskio_set_dir_sync_hook(seg_count_sync);
	CHECK_EQ(wal_create(dir, (const uint8_t *)"m", 1, &o, &w), 0);
	/* The rename of dir.tmp to dir is durable in its parent. */
	CHECK(seg_parent_syncs >= 1);
	save_range(w, 1, 300, 1, len_mixed, 4);
	CHECK_EQ(wal_save_snapshot(w, 150, 1), 0);
	save_range(w, 301, 400, 1, len_mixed, 4);
	CHECK_EQ(wal_close(w), 0);
	diskio_set_dir_sync_hook(NULL);

	size_t n = segments(dir, names, 64);
	CHECK(n >= 10);
	/* Every segment after the first got its name by a rename in dir,
	 * made durable by an fsync of dir. */
	CHECK(seg_dir_syncs >= n - 1);
	uint64_t prev_index = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t s, idx;
		CHECK(wal_parse_name(names[i], &s, &idx));
		CHECK_EQ(s, i); /* consecutive sequence numbers */
		CHECK(i == 0 || idx > prev_index);
		prev_index = idx;
		size_t len;
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		uint8_t *b = wt_read_file(p, &len);
		uint64_t ends[4096];
		size_t nrec = record_ends(b, len, ends, 4096);
		if (i + 1 < n) {
			/* a full segment was cut (truncated) after its last record */
			CHECK(len >= seg);
			CHECK_EQ(ends[nrec - 1], len);
		} else {
			/* the tail stays preallocated */
			CHECK(len >= seg);
			CHECK(ends[nrec - 1] <= len);
		}
		/* ...every segment starts with a crc record */
		uint64_t rec;
		unsigned pad;
		uint64_t word = 0;
		for (int k = 7; k >= 0; k--)
			word = word << 8 | b[k];
		walrec_frame_split(word, &rec, &pad);
		struct walrec wr;
		CHECK_EQ(walrec_decode(b + 8, (size_t)rec, &wr), 0);
		CHECK_EQ(wr.type, WALREC_CRC);
		CHECK(i == 0 ? wr.crc == 0 : wr.crc != 0);
		free(b);
	}
	/* A new segment is named after the entry that follows the cut. */
	o = opts(seg);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 400);
	check_range(&r, 0, 1, 400, 1, len_mixed);
	wal_replay_free(&r);
	wal_close(w);

	/* From the snapshot at 150: only the segments from the one holding it. */
	CHECK_EQ(wal_read(dir, 150, 1, &r), 0);
	CHECK_EQ(r.n_entries, 250);
	check_range(&r, 0, 151, 400, 1, len_mixed);
	wal_replay_free(&r);

	/* The chain crosses segments: a crc record that disagrees with it is
	 * corruption, named with its segment at offset 0. */
	snprintf(p, sizeof(p), "%s/%s", dir, names[3]);
	size_t len;
	uint8_t *b = wt_read_file(p, &len);
	CHECK_EQ(b[8], 0x08);
	CHECK_EQ(b[9], WALREC_CRC);
	CHECK_EQ(b[10], 0x10);
	b[11] ^= 0x01; /* the crc varint's low bits */
	wt_write_file(p, b, len);
	free(b);
	CHECK_EQ(wal_read(dir, 0, 0, &r), -EBADMSG);
	char want[256];
	snprintf(want, sizeof(want), "wal: crc mismatch in %s at offset 0; the member's log "
		 "is corrupt, restore from a snapshot", names[3]);
	CHECK(!strcmp(r.error, want));

	/* A missing segment in the middle. */
	snprintf(p, sizeof(p), "%s/%s", dir, names[5]);
	CHECK_EQ(unlink(p), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), -ENOENT);
	CHECK(strstr(r.error, "a segment is missing"));
}

/* A copy of the torn test's WAL whose segment holds b[0..len). */
static void torn_copy(char *copy, size_t copy_len, const uint8_t *b, size_t len)
{
	char p[700];
	wt_path(copy, copy_len, "tc");
	CHECK_EQ(mkdir(copy, 0700), 0);
	snprintf(p, sizeof(p), "%s/" SEG0, copy);
	wt_write_file(p, b, len);
}

/* Opens copy: it must replay entries 1..valid (and the state when
 * state_ok), report a torn tail when torn, and then take new entries and
 * replay them after the survivors. */
static void torn_check(const char *copy, uint64_t seg, size_t valid, bool state_ok, bool torn)
{
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = opts(seg);

	CHECK_EQ(wal_open(copy, 0, 0, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, valid);
	check_range(&r, 0, 1, valid, 1, len_mixed);
	CHECK_EQ(r.state.commit, state_ok ? 40 : 0);
	CHECK(torn ? r.torn_offset > 0 : r.torn_offset == 0);
	wal_replay_free(&r);
	save_range(w, valid + 1, valid + 3, 2, len_small, 3);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(copy, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, valid + 3);
	check_range(&r, 0, 1, valid, 1, len_mixed);
	check_range(&r, valid, valid + 1, valid + 3, 2, len_small);
	CHECK_EQ(r.torn_offset, 0);
	wal_replay_free(&r);
	wt_rm_tree(copy);
}

/*
 * A power cut while the last batch was being written leaves some of its
 * 512-byte sectors written and the others as they were (the preallocated
 * zeros), or a file that simply ends early. For cut points across the
 * last records: open must succeed, replay exactly the records before the
 * damage, and leave a WAL that takes new entries.
 */
static void test_torn_tail(void)
{
	char dir[512], copy[512], p[700];
	struct wal *w;
	const uint64_t seg = 64 * 1024;
	struct wal_options o = opts(seg);

	wt_path(dir, sizeof(dir), "torn");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	save_range(w, 1, 40, 1, len_mixed, 40); /* one batch, entries then state */
	CHECK_EQ(wal_close(w), 0);
	snprintf(p, sizeof(p), "%s/" SEG0, dir);
	size_t len;
	uint8_t *orig = wt_read_file(p, &len);
	uint64_t ends[128];
	size_t nrec = record_ends(orig, len, ends, 128);
	CHECK_EQ(nrec, 3 + 40 + 1); /* crc, metadata, snapshot, 40 entries, state */
	uint64_t data_end = ends[nrec - 1];
	uint8_t *b = malloc(len);
	CHECK(b);
	unsigned cases = 0;

	/* The file ends at any byte. */
	for (uint64_t cut = ends[2]; cut <= data_end; cut += (cut % 97 == 0 ? 1 : 13)) {
		size_t valid = 0;
		uint64_t last_end = 0;
		for (size_t k = 3; k < 3 + 40; k++)
			valid += ends[k] <= cut;
		for (size_t k = 0; k < nrec; k++)
			if (ends[k] <= cut)
				last_end = ends[k];
		/* Torn, unless the cut is at a record's end or leaves only
		 * zero bytes of a length word (read as the end). */
		bool clean = cut - last_end < 8;
		for (uint64_t i = last_end; i < cut && clean; i++)
			clean = orig[i] == 0;
		torn_copy(copy, sizeof(copy), orig, cut);
		torn_check(copy, seg, valid, data_end <= cut, !clean);
		cases++;
	}
	/* Only the sectors before a sector boundary reached the disk. */
	for (uint64_t cut = (ends[2] + 511) / 512 * 512; cut <= data_end + 511; cut += 512) {
		memcpy(b, orig, len);
		memset(b + cut, 0, len - cut);
		size_t valid = 0;
		bool at_end = false;
		for (size_t k = 3; k < 3 + 40; k++)
			valid += ends[k] <= cut;
		for (size_t k = 0; k < nrec; k++)
			at_end = at_end || ends[k] == cut;
		torn_copy(copy, sizeof(copy), b, len);
		torn_check(copy, seg, valid, data_end <= cut, cut < data_end && !at_end);
		cases++;
	}
	/* One sector in the middle of the batch is missing, later ones made
	 * it: the damaged record ends the log. */
	for (uint64_t hole = (ends[2] + 511) / 512 * 512; hole + 512 < data_end; hole += 512) {
		memcpy(b, orig, len);
		memset(b + hole, 0, 512);
		size_t valid = 0;
		for (size_t k = 3; k < 3 + 40 && ends[k] <= hole; k++)
			valid++;
		torn_copy(copy, sizeof(copy), b, len);
		/* A hole that starts at a record reads as the end of the
		 * log (a zero length word), not as a torn record. */
		bool at_end = false;
		for (size_t k = 0; k < nrec; k++)
			at_end = at_end || ends[k] == hole;
		torn_check(copy, seg, valid, false, !at_end);
		cases++;
	}
	printf("torn tail: %u damaged tails replayed\n", cases);
	free(b);
	free(orig);
}

/*
 * Damage that no torn write explains (a flipped bit, with no zeroed
 * sector) is an error naming the segment and the record's offset, in the
 * tail segment and before it.
 */
static void test_corruption(void)
{
	char dir[512], copy[512], p[700], want[300];
	struct wal *w;
	struct wal_replay r;
	struct wal_options o = opts(1 << 20);

	wt_path(dir, sizeof(dir), "bad");
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	save_range(w, 1, 60, 1, len_mixed, 6);
	CHECK_EQ(wal_close(w), 0);
	snprintf(p, sizeof(p), "%s/" SEG0, dir);
	size_t len;
	uint8_t *orig = wt_read_file(p, &len);
	uint64_t ends[256];
	size_t nrec = record_ends(orig, len, ends, 256);

	unsigned exact = 0, tried = 0;
	for (size_t k = 3; k + 1 < nrec; k += 5, tried++) {
		/* flip a byte in the last byte of record k + 1's data */
		uint64_t at = ends[k + 1] - 1;
		while (orig[at] == 0)
			at--; /* skip padding */
		wt_path(copy, sizeof(copy), "bc");
		wt_copy_dir(dir, copy);
		snprintf(p, sizeof(p), "%s/" SEG0, copy);
		uint8_t *b = malloc(len);
		CHECK(b);
		memcpy(b, orig, len);
		b[at] ^= 0x40;
		wt_write_file(p, b, len);
		free(b);
		int rc = wal_open(copy, 0, 0, NULL, &w, &r);
		CHECK_EQ(rc, -EBADMSG);
		snprintf(want, sizeof(want), "wal: crc mismatch in " SEG0 " at offset %llu; the "
			 "member's log is corrupt, restore from a snapshot",
			 (unsigned long long)ends[k]);
		/* a flipped byte of a length word or a key is reported as an
		 * undecodable record instead, still with its place */
		if (strcmp(r.error, want))
			CHECK(strstr(r.error, "at offset") && strstr(r.error, SEG0));
		else
			exact++;
		wt_rm_tree(copy);
	}

	CHECK(exact == tried);

	/* A record length over etcd's limit. */
	wt_path(copy, sizeof(copy), "bc");
	wt_copy_dir(dir, copy);
	snprintf(p, sizeof(p), "%s/" SEG0, copy);
	uint8_t *b = malloc(len);
	memcpy(b, orig, len);
	b[ends[5] + 3] = 0x7f;
	wt_write_file(p, b, len);
	CHECK_EQ(wal_read(copy, 0, 0, &r), -EBADMSG);
	CHECK(strstr(r.error, "over the 10 MiB limit"));
	snprintf(want, sizeof(want), "at offset %llu", (unsigned long long)ends[5]);
	CHECK(strstr(r.error, want));
	free(b);

	/* In a segment before the tail, even a zeroed sector is corruption. */
	wt_path(copy, sizeof(copy), "bc");
	wt_copy_dir(dir, copy);
	snprintf(p, sizeof(p), "%s/" SEG0, copy);
	b = malloc(len);
	memcpy(b, orig, len);
	memset(b + ends[nrec - 1] - 700, 0, 600);
	wt_write_file(p, b, ends[nrec - 1]);
	free(b);
	o = opts(512);
	CHECK_EQ(wal_open(copy, 0, 0, &o, &w, &r), 0);
	CHECK(r.torn_offset > 0); /* as the tail, it was torn */
	wal_replay_free(&r);
	save_range(w, 1, 3, 9, len_small, 1); /* now it is cut behind a new tail */
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(copy, 0, 0, &r), 0);
	wal_replay_free(&r);
	free(orig);
}

static void test_lock_and_errors(void)
{
	char dir[512];
	struct wal *w, *w2;
	struct wal_replay r;

	wt_path(dir, sizeof(dir), "lock");
	CHECK_EQ(wal_open(dir, 0, 0, NULL, &w, &r), -ENOENT);
	CHECK(strstr(r.error, dir));
	CHECK_EQ(mkdir(dir, 0700), 0);
	CHECK_EQ(wal_open(dir, 0, 0, NULL, &w, &r), -ENOENT);
	CHECK(strstr(r.error, "no WAL segment"));
	struct wal_options o = opts(1 << 20);
	CHECK_EQ(wal_create(dir, NULL, 0, &o, &w), 0);
	/* The tail is locked while open: a second writer is refused. */
	CHECK_EQ(wal_open(dir, 0, 0, NULL, &w2, &r), -EBUSY);
	CHECK(strstr(r.error, "locked by another process"));
	/* Reading is not. */
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	wal_replay_free(&r);
	/* An oversized entry is refused before anything is encoded. */
	static uint8_t big[WALREC_MAX_RECORD];
	struct raft_entry e = { .term = 1, .index = 1, .len = sizeof(big), .data = big };
	CHECK_EQ(wal_save(w, NULL, &e, 1), -EMSGSIZE);
	CHECK(wal_idle(w));
	e.len = 5 * 1024 * 1024;
	CHECK_EQ(wal_save(w, NULL, &e, 1), 0);
	CHECK_EQ(wal_close(w), 0);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	CHECK_EQ(r.n_entries, 1);
	CHECK_EQ(r.entries[0].len, 5 * 1024 * 1024);
	wal_replay_free(&r);
	/* A file that is not a segment is ignored. */
	char p[600];
	snprintf(p, sizeof(p), "%s/notes.txt", dir);
	wt_write_file(p, (const uint8_t *)"x", 1);
	CHECK_EQ(wal_read(dir, 0, 0, &r), 0);
	wal_replay_free(&r);
}

/* Every allocation failure on open and append is an error, never a crash
 * or a leak. */
static void test_alloc_failures(void)
{
	char dir[512];
	struct wal *w;
	struct wal_replay r;

	wt_path(dir, sizeof(dir), "oom");
	struct wal_options o = opts(1 << 20);
	CHECK_EQ(wal_create(dir, (const uint8_t *)"m", 1, &o, &w), 0);
	save_range(w, 1, 20, 1, len_small, 3);
	CHECK_EQ(wal_close(w), 0);
	long base = wt_live_allocs();
	unsigned failed = 0;
	for (long n = 0;; n++) {
		o = opts(1 << 20);
		wt_fail_after(n);
		int rc = wal_open(dir, 0, 0, &o, &w, &r);
		if (rc == 0) {
			struct raft_entry e = { .term = 1, .index = 21, .len = 3, .data = databuf };
			rc = wal_save(w, NULL, &e, 1);
			wt_fail_after(-1);
			wal_replay_free(&r);
			wal_close(w);
			if (rc == 0)
				break;
		}
		wt_fail_after(-1);
		CHECK(rc == -ENOMEM);
		failed++;
		CHECK_EQ(wt_live_allocs(), base);
	}
	CHECK(failed > 3);
	CHECK_EQ(wt_live_allocs(), base);
}

/* The hand-made inputs of the fuzz corpus (tests/fuzz/corpus/wal) read
 * as what they were made to be, as the tail segment of a WAL. */
static void corpus_case(const char *name, int want_rc, const char *want_error,
			size_t want_entries)
{
	char src[1024], dir[512], p[700];
	snprintf(src, sizeof(src), "%s", __FILE__);
	char *slash = strrchr(src, '/');
	CHECK(slash);
	snprintf(slash, sizeof(src) - (size_t)(slash - src), "/../../../fuzz/corpus/wal/%s", name);
	size_t len;
	uint8_t *b = wt_read_file(src, &len);
	wt_path(dir, sizeof(dir), "corpus");
	CHECK_EQ(mkdir(dir, 0700), 0);
	snprintf(p, sizeof(p), "%s/" SEG0, dir);
	wt_write_file(p, b, len);
	free(b);
	struct wal_replay r;
	int rc = wal_read(dir, 0, 0, &r);
	if (rc != want_rc || (want_error && !strstr(r.error, want_error)))
		fprintf(stderr, "corpus %s: %d %s\n", name, rc, r.error);
	CHECK_EQ(rc, want_rc);
	if (rc == 0) {
		CHECK_EQ(r.n_entries, want_entries);
		wal_replay_free(&r);
	} else {
		CHECK(strstr(r.error, want_error));
		CHECK(strstr(r.error, SEG0));
	}
}

static void test_corpus(void)
{
	corpus_case("etcd-first-segment", 0, NULL, 9);
	corpus_case("torn-short", 0, NULL, 9);
	corpus_case("crc-flip", -EBADMSG, "crc mismatch", 0);
	corpus_case("huge-length", -EBADMSG, "over the 10 MiB limit", 0);
	corpus_case("entry-undecodable", -EBADMSG, "undecodable record data (type 2)", 0);
	corpus_case("unknown-type", -EBADMSG, "unknown record type 9", 0);
	corpus_case("entry-gap", -EBADMSG, "leaves a gap after entry 0", 0);
	corpus_case("entries-replaced", 0, NULL, 3);
	corpus_case("zeros", 0, NULL, 0);
	corpus_case("short-zeros", 0, NULL, 0);
}

/*
 * Extents of path as FIEMAP reports them in [off, off + len): sets
 * *written to the bytes in written extents and *unwritten to those in
 * allocated-only ones. false when the file system cannot say (no FIEMAP,
 * as on tmpfs).
 */
static bool extent_bytes(const char *path, uint64_t off, uint64_t len, uint64_t *written,
			 uint64_t *unwritten)
{
	/* struct fiemap ends in a flexible array of extents: room for 64. */
	union {
		struct fiemap fm;
		char room[sizeof(struct fiemap) + 64 * sizeof(struct fiemap_extent)];
	} q = { .fm = { .fm_start = off, .fm_length = len, .fm_flags = FIEMAP_FLAG_SYNC,
			.fm_extent_count = 64 } };
	int fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	int rc = ioctl(fd, FS_IOC_FIEMAP, &q.fm);
	close(fd);
	if (rc < 0)
		return false;
	*written = *unwritten = 0;
	for (uint32_t i = 0; i < q.fm.fm_mapped_extents; i++) {
		const struct fiemap_extent *e = &q.fm.fm_extents[i];
		uint64_t a = e->fe_logical > off ? e->fe_logical : off;
		uint64_t b = e->fe_logical + e->fe_length;
		if (b > off + len)
			b = off + len;
		if (b <= a)
			continue;
		if (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN)
			*unwritten += b - a;
		else
			*written += b - a;
	}
	return true;
}

/* Removes test_zero_ahead's dir and, when it made one, its parent
 * under /var/tmp (the scratch dir goes at exit anyway). */
static void zero_ahead_cleanup(const char *dir)
{
	if (strncmp(dir, "/var/tmp/", 9))
		return;
	char parent[512];
	snprintf(parent, sizeof(parent), "%s", dir);
	*strrchr(parent, '/') = '\0';
	wt_rm_tree(parent);
}

/* A batch that reaches past the written part of a segment writes zeros
 * on to 512 KiB further (WAL_ZERO_AHEAD), so the fdatasyncs of the
 * appends after it convert no unwritten extents; space beyond stays
 * allocated only. Checked where the file system reports unwritten
 * extents (ext4, xfs); a fresh segment and a reopened tail alike. */
static void test_zero_ahead(void)
{
	char dir[512], path[700];
	struct wal *w;
	struct wal_replay r;
	const uint64_t seg = 4u << 20;
	struct wal_options o = opts(seg);
	uint64_t wr, un;

	/* on a disk's file system: the scratch dir is on tmpfs where there is
	 * one, and tmpfs has no extents to report */
	snprintf(dir, sizeof(dir), "/var/tmp/cetcd-walzero.XXXXXX");
	if (!mkdtemp(dir))
		wt_path(dir, sizeof(dir), "zero");
	else
		strcat(dir, "/wal");
	CHECK_EQ(wal_create(dir, (const uint8_t *)"m", 1, &o, &w), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, SEG0);
	if (!extent_bytes(path, 1u << 20, 1u << 20, &wr, &un) || un == 0) {
		printf("test_wal: zero-ahead not checked (no unwritten extents in %s)\n", dir);
		CHECK_EQ(wal_close(w), 0);
		zero_ahead_cleanup(dir);
		return;
	}
	save_range(w, 1, 20, 1, len_small, 4);
	CHECK(extent_bytes(path, 0, 512u << 10, &wr, &un));
	CHECK_EQ(un, 0);
	CHECK_EQ(wr, 512u << 10);
	CHECK(extent_bytes(path, 1u << 20, 1u << 20, &wr, &un));
	CHECK_EQ(wr, 0);
	CHECK_EQ(un, 1u << 20);
	CHECK_EQ(wal_close(w), 0);

	/* reopened: the tail past the records is allocated again, and the
	 * first batch zeros ahead of it once more */
	o = opts(seg);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 20);
	wal_replay_free(&r);
	CHECK(extent_bytes(path, 256u << 10, 256u << 10, &wr, &un));
	CHECK(un > 0);
	save_range(w, 21, 30, 1, len_small, 4);
	CHECK(extent_bytes(path, 0, 512u << 10, &wr, &un));
	CHECK_EQ(un, 0);
	CHECK_EQ(wal_close(w), 0);
	o = opts(seg);
	CHECK_EQ(wal_open(dir, 0, 0, &o, &w, &r), 0);
	CHECK_EQ(r.n_entries, 30);
	check_range(&r, 0, 1, 30, 1, len_small);
	wal_replay_free(&r);
	CHECK_EQ(wal_close(w), 0);
	zero_ahead_cleanup(dir);
}

int main(void)
{
	log_set_level(LOG_LEVEL_FATAL); /* the errors tested here are logged too */
	wt_count_allocs();
	test_round_trip();
	test_snapshot_points();
	test_snapshot_purge();
	test_segments();
	test_torn_tail();
	test_corruption();
	test_lock_and_errors();
	test_corpus();
	test_zero_ahead();
	CHECK_EQ(wt_live_allocs(), 0);
	test_alloc_failures();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_wal: ok\n");
	return 0;
}
