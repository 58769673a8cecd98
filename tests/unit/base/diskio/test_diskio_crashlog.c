/*
 * The crash journal (base/diskio/diskio_crashlog.c) as the fault backend
 * keeps it and diskio_crashlog_revert (tests/tools/crashrevert) applies it:
 *
 * - no journal while nothing is unsynced; one beside the file (its path
 *   + ".crashlog") from the first write after a sync until the next
 *   completed sync, chained syncs included; a failed sync and closing
 *   remove it too
 * - drop: the file reads what its last sync saw, size included, whatever
 *   the unsynced writes, truncates and allocates did
 * - keep: the file as written
 * - random: each 512-byte sector of the file holds the synced bytes or
 *   the written ones, never anything else; a write is kept, lost, or
 *   kept up to a sector boundary; seeds differ in what they keep
 * - a record the kill cut short ends the journal, a header cut short
 *   leaves the file (no op had begun); bytes that are not a
 *   journal are refused with -EBADMSG and the file untouched
 * - a diskio pointed at another file (the WAL's next segment) journals
 *   that file beside it
 */
#include "diskio_util.h"

#define SECTORS 24
static uint8_t synced[SECTORS * 512], w1[3000], w2[5000];
static char jpath[320];

static bool exists(const char *p)
{
	return access(p, F_OK) == 0;
}

/* The journal's bytes (caller frees); *size its length. */
static uint8_t *journal(size_t *size)
{
	int fd = open(jpath, O_RDONLY);
	T_CHECK(fd >= 0);
	uint64_t n = file_size(fd);
	uint8_t *buf = t_xmalloc(n + 1);
	T_CHECK(pread(fd, buf, n, 0) == (ssize_t)n);
	close(fd);
	*size = n;
	return buf;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* A file synced with `synced`, then written (w1 over its middle), cut (or
 * grown) to cut, written past its end (w2) and allocated, without a sync;
 * returns its fd and leaves the journal beside it. *after gets the file
 * as written. */
static int unsynced_file(uint64_t cut, uint8_t *after, uint64_t *after_size)
{
	int fd = open_file();
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.crashlog = true;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, synced, sizeof(synced), 0));
	T_CHECK(exists(jpath));
	T_OK(diskio_sync(d));
	T_CHECK(!exists(jpath));
	T_OK(diskio_write(d, w1, sizeof(w1), 700));
	T_CHECK(exists(jpath));
	T_OK(diskio_truncate(d, cut));
	T_OK(diskio_write(d, w2, sizeof(w2), 14336));
	T_OK(diskio_allocate(d, 0, 20000));
	*after_size = file_size(fd);
	T_CHECK(pread(fd, after, *after_size, 0) == (ssize_t)*after_size);
	/* a kill: the journal stays as it is (diskio_close would remove it) */
	int keep = open(jpath, O_RDONLY);
	uint8_t *copy;
	size_t n;
	copy = journal(&n);
	diskio_close(d);
	T_CHECK(!exists(jpath));
	int jfd = open(jpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	T_CHECK(jfd >= 0 && write(jfd, copy, n) == (ssize_t)n);
	close(jfd);
	close(keep);
	free(copy);
	return fd;
}

static void revert(int fd, enum diskio_crash_mode mode, uint64_t seed)
{
	size_t n;
	uint8_t *j = journal(&n);
	T_OK(diskio_crashlog_revert(j, n, fd, mode, seed));
	free(j);
}

static void test_drop_keep(void)
{
	t_phase = "drop and keep";
	static uint8_t after[32768], back[32768];
	uint64_t after_size;

	int fd = unsynced_file(9000, after, &after_size);
	T_CHECK(after_size == 20000);
	revert(fd, DISKIO_CRASH_KEEP_ALL, 1);
	T_CHECK(file_size(fd) == after_size);
	T_CHECK(pread(fd, back, after_size, 0) == (ssize_t)after_size &&
		memcmp(back, after, after_size) == 0);
	revert(fd, DISKIO_CRASH_DROP_ALL, 1);
	T_CHECK(file_size(fd) == sizeof(synced));
	T_CHECK(pread(fd, back, sizeof(synced), 0) == (ssize_t)sizeof(synced) &&
		memcmp(back, synced, sizeof(synced)) == 0);
	close(fd);
}

static void test_random(void)
{
	t_phase = "random";
	static uint8_t after[32768], back[32768];
	uint64_t after_size;
	int kept_w1 = 0, lost_w1 = 0, torn = 0;

	for (uint64_t seed = 0; seed < 40; seed++) {
		/* grown, not cut: a kept cut would zero synced sectors */
		int fd = unsynced_file(13000, after, &after_size);
		revert(fd, DISKIO_CRASH_RANDOM, seed);
		uint64_t size = file_size(fd);
		T_CHECK(size <= after_size);
		memset(back, 0, sizeof(back));
		T_CHECK(pread(fd, back, size, 0) == (ssize_t)size);
		/* every sector is the synced one or the written one (past the
		 * synced end: zeros or written) */
		for (uint64_t s = 0; s < (after_size + 511) / 512; s++) {
			uint64_t off = s * 512, len = after_size - off < 512 ? after_size - off : 512;
			bool old = off + len <= sizeof(synced) ? memcmp(back + off, synced + off, len) == 0
							       : all_zero(back + off, len);
			bool now = memcmp(back + off, after + off, len) == 0;
			T_CHECK(old || now);
		}
		/* w1 covers sectors 1-7 (700..3700): all, none or a prefix */
		bool first = memcmp(back + 1024, w1 + 324, 512) == 0;
		bool last = memcmp(back + 3072, w1 + 2372, 512) == 0;
		kept_w1 += first && last;
		lost_w1 += !first && !last;
		torn += first && !last;
		T_CHECK(!(last && !first));
		close(fd);
	}
	T_CHECK(kept_w1 > 0 && lost_w1 > 0 && torn > 0);
}

static void test_bad_and_cut(void)
{
	t_phase = "bad and cut-short journals";
	static uint8_t after[32768], back[32768];
	uint64_t after_size;
	struct diskio_crashlog_info info;
	size_t n;

	int fd = unsynced_file(9000, after, &after_size);
	uint8_t *j = journal(&n);
	T_OK(diskio_crashlog_parse(j, n, &info));
	T_CHECK(info.records == 4 && info.used == n && info.synced_size == sizeof(synced));
	T_CHECK(info.write_bytes == sizeof(w1) + sizeof(w2));
	/* cut in the last record: three records, the rest ignored */
	T_OK(diskio_crashlog_parse(j, n - 5, &info));
	T_CHECK(info.records == 3 && info.used < n - 5);
	/* not a journal: refused, the file untouched */
	j[0] ^= 1;
	T_RC(diskio_crashlog_revert(j, n, fd, DISKIO_CRASH_DROP_ALL, 1), -EBADMSG);
	j[0] ^= 1;
	j[16] = 9; /* the first record's kind */
	T_RC(diskio_crashlog_revert(j, n, fd, DISKIO_CRASH_DROP_ALL, 1), -EBADMSG);
	j[16] = DISKIO_CRASHLOG_WRITE;
	j[16 + 15] = 0x80; /* its offset past the bound */
	T_RC(diskio_crashlog_revert(j, n, fd, DISKIO_CRASH_RANDOM, 1), -EBADMSG);
	/* a header cut short: the kill came before the first op */
	T_OK(diskio_crashlog_parse(j, 10, &info));
	T_CHECK(info.headless && info.records == 0);
	T_OK(diskio_crashlog_revert(j, 0, fd, DISKIO_CRASH_DROP_ALL, 1));
	T_OK(diskio_crashlog_revert(j, 12, fd, DISKIO_CRASH_RANDOM, 1));
	j[3] ^= 1;
	T_RC(diskio_crashlog_parse(j, 10, &info), -EBADMSG);
	T_CHECK(file_size(fd) == after_size);
	T_CHECK(pread(fd, back, after_size, 0) == (ssize_t)after_size &&
		memcmp(back, after, after_size) == 0);
	free(j);
	close(fd);
}

static void test_lifecycle(void)
{
	t_phase = "journal lifecycle";
	char other[320], ojournal[340];
	struct diskio *d;
	struct diskio_fault_opts o = diskio_fault_defaults();
	o.crashlog = true;
	o.chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;

	/* chains: each write is synced, no journal is left */
	int fd = open_file();
	T_OK(diskio_fault_open(fd, &o, &d));
	struct diskio_write w = { w1, sizeof(w1), 0 };
	T_OK(diskio_chain_submit(d, &w, 1));
	T_OK(diskio_chain_reap(d, true));
	T_CHECK(!exists(jpath));
	/* and so does a batch written with its sync */
	batch_roundtrip(d, fd, 8, 512, 3);
	T_CHECK(!exists(jpath));

	/* pointed at another file: its own journal */
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(ojournal, sizeof(ojournal), "%s.crashlog", other);
	int fd2 = open(other, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd2 >= 0);
	T_OK(diskio_set_fd(d, fd2));
	T_OK(diskio_write(d, w2, sizeof(w2), 0));
	T_CHECK(exists(ojournal) && !exists(jpath));
	size_t n;
	int keep = open(ojournal, O_RDONLY);
	T_CHECK(keep >= 0);
	uint8_t buf[64];
	T_CHECK(pread(keep, buf, 16, 0) == 16 && buf[8] == 0); /* synced size 0 */
	close(keep);
	T_OK(diskio_sync(d));
	T_CHECK(!exists(ojournal));
	diskio_close(d);
	close(fd2);
	unlink(other);

	/* a failed sync reverts the file and removes the journal */
	o.fail_sync_at = 0;
	T_OK(diskio_fault_open(fd, &o, &d));
	T_OK(diskio_write(d, w2, sizeof(w2), 0));
	T_CHECK(exists(jpath));
	T_RC(diskio_sync(d), -EIO);
	T_CHECK(!exists(jpath));
	diskio_close(d);
	close(fd);
	(void)n;
}

int main(void)
{
	t_set_seed(0);
	t_mkdir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/file", dir);
	snprintf(jpath, sizeof(jpath), "%s%s", path, DISKIO_CRASHLOG_SUFFIX);
	for (size_t i = 0; i < sizeof(synced); i++)
		synced[i] = (uint8_t)(i * 7 + 1) | 1;
	fill(w1, sizeof(w1), 0xa1);
	fill(w2, sizeof(w2), 0xb2);
	test_drop_keep();
	test_random();
	test_bad_and_cut();
	test_lifecycle();
	t_rmdir(dir);
	t_no_leaks();
	printf("test_diskio_crashlog: ok\n");
	return 0;
}
