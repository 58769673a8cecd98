/*
 * Fuzz target: a crash journal (base/diskio/diskio_crashlog.c) as
 * tests/tools/crashrevert reads it back from beside a killed process's
 * file. The first input byte picks the mode (drop, random, keep) and the
 * seed; the rest is the journal, applied to a scratch file of 8 KiB with
 * diskio_crashlog_revert. Bytes that diskio_crashlog_parse refuses are
 * refused by the revert with -EBADMSG and leave the file as it was, as
 * does a journal whose header was cut short; a journal it takes (within a small size here, to keep runs fast) reverts
 * with 0: keep leaves the file, drop leaves it at the journal's synced
 * size, random never past the furthest byte a record touches. A crash, a
 * hang or a sanitizer report is a bug.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/diskio/diskio.h"
#include "shm_testlib.h"

static char dir[128]; /* test_tmpdir's, removed at exit */
#define FILE_BYTES 8192

static uint64_t size_of(int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		abort();
	return (uint64_t)st.st_size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	static uint8_t start[FILE_BYTES], back[FILE_BYTES];
	char path[sizeof(dir) + 8];

	if (!ready) {
		test_tmpdir(dir, sizeof(dir));
		for (size_t i = 0; i < sizeof(start); i++)
			start[i] = (uint8_t)(i * 13 + 5);
		ready = true;
	}
	if (size == 0)
		return 0;
	enum diskio_crash_mode mode = (enum diskio_crash_mode)(data[0] % 3);
	uint64_t seed = data[0] / 3;
	data++;
	size--;

	struct diskio_crashlog_info info;
	int parsed = diskio_crashlog_parse(data, size, &info);
	if (parsed != 0 && parsed != -EBADMSG)
		abort();
	/* a real journal may name a TiB; a fuzzed file stays small */
	if (parsed == 0 && (info.end > (16u << 20) || info.write_bytes > (1u << 20)))
		return 0;

	snprintf(path, sizeof(path), "%s/file", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || diskio_pwrite_all(fd, start, sizeof(start), 0) < 0)
		abort();
	int rc = diskio_crashlog_revert(data, size, fd, mode, seed);
	if (rc != parsed)
		abort();
	uint64_t now = size_of(fd);
	if (parsed != 0 || mode == DISKIO_CRASH_KEEP_ALL || info.headless) {
		if (now != sizeof(start) || pread(fd, back, sizeof(back), 0) != (ssize_t)sizeof(back) ||
		    memcmp(back, start, sizeof(start)) != 0)
			abort();
	} else if (mode == DISKIO_CRASH_DROP_ALL ? now != info.synced_size
						  : now > (info.end > FILE_BYTES ? info.end : FILE_BYTES)) {
		abort();
	}
	close(fd);
	(void)unlink(path);
	return 0;
}
