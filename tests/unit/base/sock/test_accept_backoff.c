/*
 * Unit tests for base/sock/accept_backoff.c, over times the test picks:
 * - the pause doubles from ACCEPT_BACKOFF_MIN_NS to ACCEPT_BACKOFF_MAX_NS
 *   and stays there while accepting fails, and is the shortest again
 *   after an accept succeeds
 * - which errors are exhaustion (EMFILE, ENFILE, ENOBUFS, ENOMEM) and
 *   which are not (EAGAIN, ECONNABORTED, EPERM)
 * - the warning is written once per ACCEPT_BACKOFF_LOG_NS however many
 *   failures come, and the next one counts those left out ("suppressed");
 *   accept_backoff_warn is limited the same way and does not pause
 */
#include <errno.h>
#include <fcntl.h>

#include "shm_testlib.h"

#include "base/sock/accept_backoff.h"
#include "base/log/log.h"

#define MS 1000000ull

/* The log's lines so far (written to fd), and how many there are. */
static int log_lines(int fd, char *buf, size_t cap)
{
	ssize_t n = pread(fd, buf, cap - 1, 0);
	int lines = 0;

	CHECK(n >= 0);
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
		lines += buf[i] == '\n';
	return lines;
}

static void test_schedule(void)
{
	struct accept_backoff b = { 0 };
	const uint64_t want[] = { 100, 200, 400, 800, 1000, 1000, 1000 };
	uint64_t now = 1000 * MS;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	CHECK(null >= 0);
	log_set_fd(null);

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t pause = accept_backoff_fail(&b, now, -EMFILE, "cannot accept", 7);
		CHECK_EQ(pause, want[i] * MS);
		now += pause;
	}
	accept_backoff_ok(&b);
	CHECK_EQ(accept_backoff_fail(&b, now, -ENFILE, "cannot accept", 7), 100 * MS);
	CHECK_EQ(accept_backoff_fail(&b, now, -ENFILE, "cannot accept", 7), 200 * MS);
	CHECK_EQ(b.failures, 9u);

	CHECK(accept_backoff_exhausted(-EMFILE));
	CHECK(accept_backoff_exhausted(-ENFILE));
	CHECK(accept_backoff_exhausted(-ENOBUFS));
	CHECK(accept_backoff_exhausted(-ENOMEM));
	CHECK(!accept_backoff_exhausted(-EAGAIN));
	CHECK(!accept_backoff_exhausted(-ECONNABORTED));
	CHECK(!accept_backoff_exhausted(-EPERM));
	log_set_fd(2);
	close(null);
}

static void test_log_limit(void)
{
	char path[] = "/tmp/test_accept_backoff.XXXXXX", buf[8192];
	int fd = mkstemp(path);
	struct accept_backoff b = { 0 }, w = { 0 };
	uint64_t now = 5000 * MS;

	CHECK(fd >= 0);
	unlink(path);
	log_set_fd(fd);
	/* a thousand failures in 9.9 s: the first one is written */
	for (int i = 0; i < 1000; i++)
		accept_backoff_fail(&b, now + (uint64_t)i * 9 * MS, -EMFILE, "cannot accept", 3);
	CHECK_EQ(log_lines(fd, buf, sizeof(buf)), 1);
	CHECK(strstr(buf, "\"msg\":\"cannot accept\""));
	CHECK(strstr(buf, "\"error\":\"Too many open files\""));
	CHECK(strstr(buf, "\"suppressed\":0"));
	CHECK(strstr(buf, "\"connections\":3"));
	CHECK_EQ(b.suppressed, 999u);
	/* 10 s after the first: the next one, with the count left out */
	accept_backoff_fail(&b, now + ACCEPT_BACKOFF_LOG_NS, -EMFILE, "cannot accept", 3);
	CHECK_EQ(log_lines(fd, buf, sizeof(buf)), 2);
	CHECK(strstr(buf, "\"suppressed\":999"));
	CHECK(strstr(buf, "\"pause-ms\":1000"));
	CHECK_EQ(b.suppressed, 0u);

	/* warnings alone: limited alike, no pause */
	for (int i = 0; i < 50; i++)
		accept_backoff_warn(&w, now + (uint64_t)i * MS, -EAGAIN, "cannot hand over", 1);
	CHECK_EQ(log_lines(fd, buf, sizeof(buf)), 3);
	CHECK_EQ(w.pause_ns, 0u);
	CHECK_EQ(w.suppressed, 49u);
	log_set_fd(2);
	close(fd);
}

int main(void)
{
	test_schedule();
	test_log_limit();
	printf("ok\n");
	return 0;
}
