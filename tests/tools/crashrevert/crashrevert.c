/*
 * crashrevert --mode drop|random|keep --seed N JOURNAL FILE
 *
 * Rewrites FILE as a power cut could have left it, from the crash journal
 * its writer kept beside it (base/diskio/diskio.h, "crash journal"; the
 * test-only item crashlog of CETCD_TEST_DISKIO_FAULT): drop loses every
 * op since the file's last completed sync and cuts the file back to its
 * synced size; random keeps, loses or tears (at a 512-byte boundary) each
 * at random from the seed; keep leaves the file. Run after the writer was
 * SIGKILLed and before it restarts (tests/integration/crash_unsynced.sh).
 * Prints what it did; exits 0, 1 on an error (a journal that does not
 * read is refused with FILE untouched), 2 on bad arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/diskio/diskio.h"

static int usage(void)
{
	fprintf(stderr, "usage: crashrevert --mode drop|random|keep --seed N JOURNAL FILE\n");
	return 2;
}

/* The whole journal; NULL with errno set on failure. */
static uint8_t *read_all(const char *path, size_t *size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *buf = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size <= DISKIO_CRASHLOG_MAX_BYTES * 2 &&
	    (buf = malloc((size_t)st.st_size + 1)) != NULL) {
		int rc = diskio_pread_all(fd, buf, (size_t)st.st_size, 0);
		if (rc < 0) {
			free(buf);
			buf = NULL;
			errno = -rc;
		}
		*size = (size_t)st.st_size;
	} else if (!buf && errno == 0) {
		errno = EFBIG;
	}
	close(fd);
	return buf;
}

int main(int argc, char **argv)
{
	const char *mode_name = NULL, *seed_text = "1";
	enum diskio_crash_mode mode;
	int i = 1;

	for (; i + 1 < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
		if (strcmp(argv[i], "--mode") == 0)
			mode_name = argv[i + 1];
		else if (strcmp(argv[i], "--seed") == 0)
			seed_text = argv[i + 1];
		else
			return usage();
	}
	if (!mode_name || argc - i != 2)
		return usage();
	if (strcmp(mode_name, "drop") == 0)
		mode = DISKIO_CRASH_DROP_ALL;
	else if (strcmp(mode_name, "random") == 0)
		mode = DISKIO_CRASH_RANDOM;
	else if (strcmp(mode_name, "keep") == 0)
		mode = DISKIO_CRASH_KEEP_ALL;
	else
		return usage();
	char *end;
	errno = 0;
	uint64_t seed = strtoull(seed_text, &end, 10);
	if (errno || !*seed_text || *end)
		return usage();

	const char *journal = argv[i], *file = argv[i + 1];
	size_t size = 0;
	errno = 0;
	uint8_t *buf = read_all(journal, &size);
	if (!buf) {
		fprintf(stderr, "crashrevert: %s: %s\n", journal, strerror(errno));
		return 1;
	}
	struct diskio_crashlog_info info;
	int rc = diskio_crashlog_parse(buf, size, &info);
	int fd = rc == 0 ? open(file, O_RDWR | O_CLOEXEC) : -1;
	if (rc == 0 && fd < 0)
		rc = -errno;
	if (rc == 0)
		rc = diskio_crashlog_revert(buf, size, fd, mode, seed);
	if (fd >= 0)
		close(fd);
	free(buf);
	if (rc < 0) {
		fprintf(stderr, "crashrevert: %s onto %s: %s\n", journal, file, strerror(-rc));
		return 1;
	}
	if (info.headless) {
		printf("crashrevert: %s: the journal's header was cut short: no op had begun\n", file);
		return 0;
	}
	printf("crashrevert: %s: mode %s seed %" PRIu64 ": %zu ops (%" PRIu64
	       " bytes written) since the sync at size %" PRIu64 "%s\n",
	       file, mode_name, seed, info.records, info.write_bytes, info.synced_size,
	       info.used < size ? ", the last record cut short" : "");
	return 0;
}
