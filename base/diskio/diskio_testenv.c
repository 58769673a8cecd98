/*
 * The fault backend chosen from the environment (see diskio.h,
 * DISKIO_TEST_FAULT_ENV): how an integration test makes a real raftd's
 * WAL or a real stored's db fail, and only that file.
 */
#include "base/diskio/diskio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/log/log.h"

static const struct {
	const char *name;
	int err;
} testenv_errnos[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT }, { "EROFS", EROFS },
};

static int testenv_errno(const char *v)
{
	for (size_t i = 0; i < sizeof(testenv_errnos) / sizeof(testenv_errnos[0]); i++)
		if (strcmp(v, testenv_errnos[i].name) == 0)
			return testenv_errnos[i].err;
	return 0;
}

/* A count for write=, sync=, allocate=: a decimal >= 0, else -1. */
static long testenv_count(const char *v)
{
	char *end;
	long n;
	if (!*v)
		return -1;
	errno = 0;
	n = strtol(v, &end, 10);
	return errno || *end || n < 0 ? -1 : n;
}

/* Parses spec (changed in place; o's trigger points into it) into o and
 * the file it names. -EINVAL with *bad set to the item that does not
 * parse. */
static int testenv_parse(char *spec, struct diskio_fault_opts *o, const char **file,
			 const char **bad)
{
	char *save = NULL;
	bool op = false;

	*o = diskio_fault_defaults();
	o->chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
	*file = NULL;
	for (char *item = strtok_r(spec, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *v = strchr(item, '=');
		long n = 0;
		*bad = item;
		if (!v) {
			if (strcmp(item, "repeat") == 0) {
				o->fail_repeat = true;
			} else if (strcmp(item, "crashlog") == 0) {
				o->crashlog = true;
				op = true;
			} else {
				return -EINVAL;
			}
			continue;
		}
		*v++ = '\0';
		if (strcmp(item, "file") == 0) {
			if (strcmp(v, "wal") != 0 && strcmp(v, "db") != 0 && strcmp(v, "both") != 0)
				return -EINVAL;
			*file = v;
		} else if (strcmp(item, "write") == 0 || strcmp(item, "sync") == 0 ||
			   strcmp(item, "allocate") == 0) {
			if ((n = testenv_count(v)) < 0)
				return -EINVAL;
			if (item[0] == 'w')
				o->fail_write_at = n;
			else if (item[0] == 's')
				o->fail_sync_at = n;
			else
				o->fail_allocate_at = n;
			op = true;
		} else if (strcmp(item, "delay") == 0) {
			if ((n = testenv_count(v)) <= 0)
				return -EINVAL;
			o->delay_ms = n;
			op = true;
		} else if (strcmp(item, "errno") == 0) {
			if ((o->fail_errno = testenv_errno(v)) == 0)
				return -EINVAL;
		} else if (strcmp(item, "trigger") == 0) {
			if (!*v)
				return -EINVAL;
			o->trigger_path = v;
		} else if (strcmp(item, "chain") == 0) {
			if (strcmp(v, "submit") == 0)
				o->chain = DISKIO_FAULT_CHAIN_AT_SUBMIT;
			else if (strcmp(v, "reap") == 0)
				o->chain = DISKIO_FAULT_CHAIN_AT_REAP;
			else
				return -EINVAL;
		} else {
			return -EINVAL;
		}
	}
	*bad = "file= and one of write=, sync=, allocate=, delay=, crashlog are required";
	return *file && op ? 0 : -EINVAL;
}

int diskio_test_fault(const char *file, struct diskio_fault_opts *o, bool *on)
{
	/* the options point into it for the life of the process */
	static char spec[4096];
	const char *env = getenv(DISKIO_TEST_FAULT_ENV);
	const char *named, *bad = "";
	size_t len;
	int rc;

	*on = false;
	if (!env || !*env)
		return 0;
	len = strlen(env);
	if (len >= sizeof(spec)) {
		log_error("the test-only disk fault variable is too long", LOG_STR("variable", DISKIO_TEST_FAULT_ENV));
		return -EINVAL;
	}
	memcpy(spec, env, len + 1);
	rc = testenv_parse(spec, o, &named, &bad);
	if (rc) {
		log_error("cannot parse the test-only disk fault variable; unset it (it is for tests only)",
			  LOG_STR("variable", DISKIO_TEST_FAULT_ENV), LOG_STR("value", env),
			  LOG_STR("at", bad));
		return rc;
	}
	if (strcmp(named, file) != 0 && strcmp(named, "both") != 0)
		return 0;
	*on = true;
	log_warn("injecting disk faults into this file, as the test-only variable asks",
		 LOG_STR("file", file), LOG_STR("variable", DISKIO_TEST_FAULT_ENV),
		 LOG_STR("value", env));
	return 0;
}

int diskio_fault_open_arg(int fd, void *arg, struct diskio **out)
{
	return diskio_fault_open(fd, arg, out);
}
