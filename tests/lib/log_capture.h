/*
 * The log lines a test provokes, captured in a file to be searched: the
 * config tests (tests/unit/config/) check the lines etcd's flag handling
 * logs. log_capture_reset starts the file afresh at path and sends the
 * log there; log_capture_has searches it (its first 64 KiB).
 */
#ifndef CETCD_TEST_LOG_CAPTURE_H
#define CETCD_TEST_LOG_CAPTURE_H

#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "shm_testlib.h"
#include "base/log/log.h"

static int log_capture_fd = -1;

static inline void log_capture_reset(const char *path)
{
	if (log_capture_fd >= 0)
		close(log_capture_fd);
	log_capture_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(log_capture_fd >= 0);
	log_set_fd(log_capture_fd);
}

static inline bool log_capture_has(const char *needle)
{
	static char buf[65536];
	ssize_t n = pread(log_capture_fd, buf, sizeof(buf) - 1, 0);
	CHECK(n >= 0);
	buf[n] = '\0';
	return strstr(buf, needle) != NULL;
}

/* Sends the log back to stderr and closes the file. */
static inline void log_capture_end(void)
{
	log_set_fd(2);
	if (log_capture_fd >= 0)
		close(log_capture_fd);
	log_capture_fd = -1;
}

#endif
