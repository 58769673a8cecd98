/*
 * Helpers for the shm unit and stress tests: assertions, a scratch
 * directory for region files, deterministic record payloads with a
 * checksum, a counting allocator, and child-process plumbing.
 *
 * Header-only (static functions) so each test stays one source file.
 */
#ifndef CETCD_TESTS_SHM_TESTLIB_H
#define CETCD_TESTS_SHM_TESTLIB_H

#include <sys/prctl.h>
#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "shm/doorbell.h"

#include "test_invariants.h"

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long check_a_ = (long long)(a);                         \
		long long check_b_ = (long long)(b);                         \
		if (check_a_ != check_b_) {                                  \
			fprintf(stderr, "%s:%d: check failed: %s == %s "     \
				"(%lld != %lld)\n", __FILE__, __LINE__, #a,  \
				#b, check_a_, check_b_);                     \
			exit(1);                                             \
		}                                                            \
	} while (0)

#define SKIP(...)                                                            \
	do {                                                                 \
		printf("SKIP: " __VA_ARGS__);                                \
		printf("\n");                                                \
		exit(77);                                                    \
	} while (0)

static inline void test_rmdir(const char *dir);

static char test_tmpdir_path[256] __attribute__((unused));
static pid_t test_tmpdir_owner __attribute__((unused));

static inline void test_tmpdir_cleanup(void)
{
	if (getpid() == test_tmpdir_owner && test_tmpdir_path[0])
		test_rmdir(test_tmpdir_path);
}

/* Makes a scratch directory, on tmpfs when there is one, and writes its
 * path into dir. It is removed when the process that made it exits (also
 * after a failed check); children leave it alone. */
static inline void test_tmpdir(char *dir, size_t len)
{
	const char *bases[] = { "/dev/shm", getenv("TMPDIR"), "/tmp" };
	size_t i;

	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i])
			continue;
		snprintf(dir, len, "%s/cetcd-test.XXXXXX", bases[i]);
		if (mkdtemp(dir)) {
			snprintf(test_tmpdir_path, sizeof(test_tmpdir_path),
				 "%s", dir);
			test_tmpdir_owner = getpid();
			atexit(test_tmpdir_cleanup);
			return;
		}
	}
	fprintf(stderr, "cannot make a scratch directory: %s\n",
		strerror(errno));
	exit(1);
}

/* A scratch directory (test_tmpdir) and the path of a region file in it. */
static inline void test_region_path(char *dir, size_t dir_len, char *path,
				    size_t path_len)
{
	test_tmpdir(dir, dir_len);
	snprintf(path, path_len, "%s/member.shm", dir);
}

/* Zeroed memory shared with forked children. */
static inline void *test_shared(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	return p;
}

/* Zeroed memory that is a file's on tmpfs (a memfd), mapped shared as the
 * region is, so that pages given back (MADV_REMOVE) really go; *fd gets
 * the file for test_held_bytes. */
static inline void *test_shared_file(size_t len, int *fd)
{
	*fd = memfd_create("cetcd-test", MFD_CLOEXEC);
	CHECK(*fd >= 0);
	CHECK(ftruncate(*fd, (off_t)len) == 0);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	CHECK(p != MAP_FAILED);
	return p;
}

/* Bytes of memory the file holds (its allocated blocks). */
static inline uint64_t test_held_bytes(int fd)
{
	struct stat st;

	CHECK(fstat(fd, &st) == 0);
	return (uint64_t)st.st_blocks * 512;
}

/* Removes dir and everything under it (a data dir a test ran in). */
static inline void test_rmdir(const char *dir)
{
	char path[4096];
	struct dirent *e;
	DIR *d = opendir(dir);

	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		int n = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if (e->d_type == DT_DIR)
			test_rmdir(path);
		else
			unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/*
 * Record payloads: the first 8 bytes hold a sequence number, the next 8 a
 * checksum of the rest, and the rest is a deterministic stream derived
 * from the sequence number.
 */
#define TEST_REC_MIN 16u

static inline uint64_t test_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t test_sum(const uint8_t *p, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, w;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 0x100000001b3ULL;
	}
	for (; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

static inline void test_fill(uint8_t *buf, uint32_t len, uint64_t seq)
{
	uint64_t x = test_mix(seq + 1), sum;
	uint32_t i;

	memcpy(buf, &seq, 8);
	for (i = TEST_REC_MIN; i + 8 <= len; i += 8) {
		x += 0x9e3779b97f4a7c15ULL;
		memcpy(buf + i, &x, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)(seq + i);
	sum = test_sum(buf + TEST_REC_MIN, len - TEST_REC_MIN);
	memcpy(buf + 8, &sum, 8);
}

/* 0 if buf is the record test_fill made for seq with this length. */
static inline int test_verify(const uint8_t *buf, uint32_t len, uint64_t seq)
{
	uint64_t got_seq, got_sum;

	if (len < TEST_REC_MIN)
		return -1;
	memcpy(&got_seq, buf, 8);
	memcpy(&got_sum, buf + 8, 8);
	if (got_seq != seq)
		return -2;
	if (got_sum != test_sum(buf + TEST_REC_MIN, len - TEST_REC_MIN))
		return -3;
	return 0;
}

/* Length of record seq: mostly small, sometimes up to max. */
static inline uint32_t test_len(uint64_t seq, uint32_t small_max, uint32_t max,
				uint32_t big_every)
{
	uint64_t x = test_mix(seq ^ 0x5bd1e995u);

	if (big_every && x % big_every == 0)
		return max - (uint32_t)((x >> 20) % 4); /* near or at max */
	return TEST_REC_MIN + (uint32_t)((x >> 8) % (small_max - TEST_REC_MIN + 1));
}

/* A counting allocator that can fail the Nth allocation (1-based; 0 =
 * never). */
static long test_alloc_live __attribute__((unused));
static long test_alloc_count __attribute__((unused));
static long test_alloc_fail_at __attribute__((unused));

static inline void *test_alloc(size_t n)
{
	if (test_alloc_fail_at && ++test_alloc_count == test_alloc_fail_at)
		return NULL;
	test_alloc_live++;
	return malloc(n);
}

static inline void test_free(void *p)
{
	if (p)
		test_alloc_live--;
	free(p);
}

/* fork() after flushing stdio, so that nothing the parent printed is
 * printed again by the child. */
/* fork() for test children: a child dies with its parent, so a test that
 * fails (or is killed by its watchdog) never leaves processes behind that
 * keep the test runner waiting on their output. */
static inline pid_t test_fork(void)
{
	pid_t parent = getpid();
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(99);
	}
	return pid;
}

/* Fails the test with a message if it runs longer than `seconds`: a hang
 * becomes a quick, named failure instead of a runner timeout. */
static void test_watchdog_fire(int sig)
{
	static const char msg[] = "test watchdog: the test hung and was stopped\n";
	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(97);
}

static inline void test_watchdog(unsigned seconds)
{
	signal(SIGALRM, test_watchdog_fire);
	alarm(seconds);
}

/* Ends a forked child: flushes what it printed, skips the parent's atexit
 * handlers. */
static inline void test_child_exit(int status)
{
	fflush(stdout);
	fflush(stderr);
	_exit(status);
}

/* A child that has set something up tells its parent through a pipe and
 * then waits to be killed. */
static inline void test_ready_and_pause(int fd)
{
	if (write(fd, "x", 1) != 1)
		_exit(1);
	for (;;)
		pause();
}

/* Waits for pid; returns its exit status, or 128 + signal. */
static inline int test_wait(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

/* Polls cond (an expression) every millisecond for up to ms; evaluates to
 * whether it became true. */
#define TEST_WAIT_FOR(cond, ms)                                              \
	({                                                                   \
		int64_t wait_end_ = clock_now_ns() + (int64_t)(ms) * 1000000;  \
		int wait_ok_ = 0;                                            \
		for (;;) {                                                   \
			if (cond) {                                          \
				wait_ok_ = 1;                                \
				break;                                       \
			}                                                    \
			if (clock_now_ns() > wait_end_)                       \
				break;                                       \
			usleep(1000);                                        \
		}                                                            \
		wait_ok_;                                                    \
	})

/* A stand-in for a process asleep on a doorbell: announced as
 * shm_doorbell_sleep announces before it waits, so that a test can see
 * whether (and how often) a producer rang it. */
struct test_sleeper {
	struct shm_doorbell *db;
	uint32_t seq0;   /* the futex word when it announced */
	uint64_t wakes0; /* the doorbell's wake count then */
};

static inline void test_sleeper_start(struct test_sleeper *s, struct shm_doorbell *db)
{
	s->db = db;
	CHECK(shm_doorbell_announce(db, NULL, NULL, &s->seq0));
	s->wakes0 = shm_doorbell_wakes(db);
}

/* Wakes issued on the doorbell since the sleeper announced. */
static inline uint64_t test_sleeper_wakes(const struct test_sleeper *s)
{
	return shm_doorbell_wakes(s->db) - s->wakes0;
}

/* Whether a wake moved the futex word since the sleeper announced. */
static inline int test_sleeper_rung(const struct test_sleeper *s)
{
	return atomic_load(shm_doorbell_futex_word(s->db)) != s->seq0;
}

static inline void test_sleeper_stop(struct test_sleeper *s)
{
	shm_doorbell_unannounce(s->db);
}

#endif
