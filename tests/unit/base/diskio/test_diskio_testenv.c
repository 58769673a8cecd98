/*
 * The fault backend chosen from the environment (diskio_testenv.c,
 * DISKIO_TEST_FAULT_ENV), as raftd and stored read it at start:
 *
 * - unset or empty: no fault; a spec for the other file: no fault
 * - every item lands in its option (file, write, sync, allocate, errno,
 *   repeat, trigger, chain), with the defaults otherwise
 * - a spec that does not parse is refused with -EINVAL (a missing file or
 *   op, an unknown file, item, errno or chain, a count that is not a
 *   number >= 0)
 * - a one-shot fault with a trigger counts only ops made while the
 *   trigger exists, fires once, removes the trigger, and a second backend
 *   with the same options (the restarted process) runs without it
 * - with repeat, every write fails with the errno while the trigger
 *   exists (a full disk: the file stays usable), and goes through once it
 *   is removed
 * - crashlog alone is a fault spec (crash journals, no failure), and
 *   file=both gives it (or any fault) to the WAL and the db
 * - delay=MS alone is a fault spec (no op fails): every write call waits
 *   MS while the trigger exists, and none does once it is gone
 */
#include <fcntl.h>
#include <stdlib.h>

#include "shm_testlib.h"

#include "base/clock/clock.h"
#include "base/diskio/diskio.h"

static int parse(const char *spec, const char *file, struct diskio_fault_opts *o, bool *on)
{
	if (spec)
		CHECK_EQ(setenv(DISKIO_TEST_FAULT_ENV, spec, 1), 0);
	else
		CHECK_EQ(unsetenv(DISKIO_TEST_FAULT_ENV), 0);
	return diskio_test_fault(file, o, on);
}

static void test_parse(void)
{
	struct diskio_fault_opts o;
	bool on = true;

	CHECK_EQ(parse(NULL, "wal", &o, &on), 0);
	CHECK(!on);
	CHECK_EQ(parse("", "wal", &o, &on), 0);
	CHECK(!on);
	CHECK_EQ(parse("file=db,sync=0", "wal", &o, &on), 0);
	CHECK(!on);

	CHECK_EQ(parse("file=wal,sync=2,trigger=/tmp/t", "wal", &o, &on), 0);
	CHECK(on);
	CHECK_EQ(o.fail_sync_at, 2);
	CHECK_EQ(o.fail_write_at, -1);
	CHECK_EQ(o.fail_allocate_at, -1);
	CHECK_EQ(o.fail_errno, EIO);
	CHECK(!o.fail_repeat);
	CHECK(o.trigger_path && strcmp(o.trigger_path, "/tmp/t") == 0);
	CHECK_EQ(o.chain, DISKIO_FAULT_CHAIN_AT_SUBMIT);

	CHECK_EQ(parse("file=db,write=3,allocate=0,errno=ENOSPC,repeat,chain=reap", "db", &o, &on), 0);
	CHECK(on);
	CHECK_EQ(o.fail_write_at, 3);
	CHECK_EQ(o.fail_allocate_at, 0);
	CHECK_EQ(o.fail_sync_at, -1);
	CHECK_EQ(o.fail_errno, ENOSPC);
	CHECK(o.fail_repeat);
	CHECK(o.trigger_path == NULL);
	CHECK_EQ(o.chain, DISKIO_FAULT_CHAIN_AT_REAP);
	CHECK_EQ(parse("file=db,write=0,errno=EDQUOT", "db", &o, &on), 0);
	CHECK_EQ(o.fail_errno, EDQUOT);
	CHECK_EQ(o.delay_ms, 0);
	CHECK_EQ(parse("file=db,delay=40", "db", &o, &on), 0);
	CHECK(on);
	CHECK_EQ(o.delay_ms, 40);
	CHECK(o.fail_write_at == -1 && o.fail_sync_at == -1 && o.fail_allocate_at == -1);
	CHECK(!o.crashlog);

	/* crashlog alone is a spec (no op fails); both names either file */
	CHECK_EQ(parse("file=both,crashlog", "wal", &o, &on), 0);
	CHECK(on && o.crashlog);
	CHECK(o.fail_write_at == -1 && o.fail_sync_at == -1 && o.fail_allocate_at == -1);
	CHECK_EQ(parse("file=both,crashlog", "db", &o, &on), 0);
	CHECK(on && o.crashlog);
	CHECK_EQ(parse("file=wal,crashlog", "db", &o, &on), 0);
	CHECK(!on);

	static const char *const bad[] = {
		"file=wal", "sync=0", "file=log,sync=0", "file=wal,sync=-1", "file=wal,sync=x",
		"file=wal,sync=", "file=wal,sync=0,errno=EBOGUS", "file=wal,sync=0,bogus=1",
		"file=wal,sync=0,chain=held", "file=wal,sync=0,trigger=", "file=wal,sync=0,again",
		"file=wal,delay=0", "file=wal,delay=x", "file=wal,delay=",
		"file=all,crashlog", "file=wal,crashlog=1", "crashlog",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		on = true;
		CHECK_EQ(parse(bad[i], "wal", &o, &on), -EINVAL);
		CHECK(!on);
	}
	CHECK_EQ(unsetenv(DISKIO_TEST_FAULT_ENV), 0);
}

static void touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	close(fd);
}

/* A file to write and a trigger path beside it, in a new temp dir (each
 * buffer FILE_PATH_MAX bytes); the file's descriptor. */
#define FILE_PATH_MAX 300
static int open_file(char *path, char *trigger)
{
	char dir[256];
	test_tmpdir(dir, sizeof(dir));
	snprintf(path, FILE_PATH_MAX, "%s/file", dir);
	snprintf(trigger, FILE_PATH_MAX, "%s/trigger", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	CHECK(fd >= 0);
	return fd;
}

static void test_trigger(void)
{
	char path[FILE_PATH_MAX], trigger[FILE_PATH_MAX];
	struct diskio_fault_opts o;
	struct diskio *a, *b;
	bool on;
	char spec[400];
	uint8_t buf[512] = { 1 };

	int fd = open_file(path, trigger);

	/* one-shot: the second sync made while the trigger exists fails */
	snprintf(spec, sizeof(spec), "file=wal,sync=1,trigger=%s", trigger);
	CHECK_EQ(parse(spec, "wal", &o, &on), 0);
	CHECK(on);
	CHECK_EQ(diskio_fault_open(fd, &o, &a), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(diskio_write(a, buf, sizeof(buf), 0), 0);
		CHECK_EQ(diskio_sync(a), 0);
	}
	touch(trigger);
	CHECK_EQ(diskio_sync(a), 0);
	CHECK_EQ(diskio_sync(a), -EIO);
	CHECK(access(trigger, F_OK) != 0);
	CHECK_EQ(diskio_failed(a), -EIO);
	diskio_close(a);
	/* the restarted process: same options, no trigger, no fault */
	CHECK_EQ(diskio_fault_open(fd, &o, &b), 0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(diskio_sync(b), 0);
	diskio_close(b);

	/* repeat: a full disk while the trigger exists */
	snprintf(spec, sizeof(spec), "file=db,write=0,allocate=0,errno=ENOSPC,repeat,trigger=%s",
		 trigger);
	CHECK_EQ(parse(spec, "db", &o, &on), 0);
	CHECK_EQ(diskio_fault_open(fd, &o, &a), 0);
	CHECK_EQ(diskio_write(a, buf, sizeof(buf), 0), 0);
	CHECK_EQ(diskio_allocate(a, 0, 4096), 0);
	touch(trigger);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(diskio_write(a, buf, sizeof(buf), 512), -ENOSPC);
		CHECK_EQ(diskio_allocate(a, 0, 8192), -ENOSPC);
	}
	CHECK_EQ(diskio_failed(a), 0);
	CHECK_EQ(diskio_sync(a), 0);
	CHECK(access(trigger, F_OK) == 0);
	CHECK_EQ(unlink(trigger), 0);
	CHECK_EQ(diskio_write(a, buf, sizeof(buf), 512), 0);
	CHECK_EQ(diskio_allocate(a, 0, 8192), 0);
	CHECK_EQ(diskio_sync(a), 0);
	diskio_close(a);
	close(fd);
	unlink(path);
	CHECK_EQ(unsetenv(DISKIO_TEST_FAULT_ENV), 0);
}

/* How long one write of buf through d takes, in ms. */
static int64_t write_ms(struct diskio *d, const uint8_t *buf, size_t len)
{
	int64_t t0 = clock_now_ns();
	CHECK_EQ(diskio_write(d, buf, len, 0), 0);
	return (clock_now_ns() - t0) / 1000000;
}

static void test_delay(void)
{
	char path[FILE_PATH_MAX], trigger[FILE_PATH_MAX], spec[400];
	struct diskio_fault_opts o;
	struct diskio *d;
	uint8_t buf[512] = { 2 };
	bool on;

	int fd = open_file(path, trigger);
	snprintf(spec, sizeof(spec), "file=db,delay=200,trigger=%s", trigger);
	CHECK_EQ(parse(spec, "db", &o, &on), 0);
	CHECK(on);
	CHECK_EQ(diskio_fault_open(fd, &o, &d), 0);
	CHECK(write_ms(d, buf, sizeof(buf)) < 200);
	touch(trigger);
	for (int i = 0; i < 2; i++)
		CHECK(write_ms(d, buf, sizeof(buf)) >= 200);
	CHECK(access(trigger, F_OK) == 0); /* a delay never removes it */
	CHECK_EQ(diskio_sync(d), 0);
	CHECK_EQ(diskio_failed(d), 0);
	CHECK_EQ(unlink(trigger), 0);
	CHECK(write_ms(d, buf, sizeof(buf)) < 200);
	diskio_close(d);
	close(fd);
	unlink(path);
	CHECK_EQ(unsetenv(DISKIO_TEST_FAULT_ENV), 0);
}

int main(void)
{
	test_parse();
	test_trigger();
	test_delay();
	printf("test_diskio_testenv: ok\n");
	return 0;
}
