/*
 * clockstep: a library preloaded (LD_PRELOAD) into a member by the fault
 * suite's clock nemesis (tests/fault/lib.sh). The wall clock it gives,
 * CLOCK_REALTIME and CLOCK_REALTIME_COARSE through clock_gettime,
 * gettimeofday and time, is the kernel's plus the offset in whole seconds
 * that the file named by CLOCKSTEP_FILE holds as text ("+90", "-30", "0"),
 * read at every call, so a write to the file steps the clock at once as a
 * real step would. Every other clock (monotonic, boot time, CPU time) is
 * the kernel's, untouched.
 *
 * libfaketime does this but cannot start in a program linked with
 * jemalloc, as cetcd's programs are: its setup allocates, jemalloc's
 * setup reads a clock, and each waits on the other. So this library
 * allocates nothing and resolves nothing: the clocks come from the
 * system calls themselves, and the file is mapped once at load (the
 * harness writes it in place, never truncating it).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { OFFSET_TEXT_MAX = 32 };

static const volatile char *offset_text;

__attribute__((constructor)) static void clockstep_load(void)
{
	const char *path = getenv("CLOCKSTEP_FILE");
	void *p;
	int fd;

	if (path == NULL)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	p = mmap(NULL, OFFSET_TEXT_MAX, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p != MAP_FAILED)
		offset_text = p;
}

/* The offset in seconds: an optional sign, then digits; anything else
 * (or no file) is 0. The mapped page beyond the file's end reads as
 * zeros, so a short file ends the number. */
static long long offset_s(void)
{
	const volatile char *t = offset_text;
	long long v = 0;
	int i = 0, neg = 0;

	if (t == NULL)
		return 0;
	if (t[0] == '+' || t[0] == '-') {
		neg = t[0] == '-';
		i = 1;
	}
	for (; i < OFFSET_TEXT_MAX - 1 && t[i] >= '0' && t[i] <= '9'; i++)
		v = v * 10 + (t[i] - '0');
	return neg ? -v : v;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
	long r = syscall(SYS_clock_gettime, id, ts);

	if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
		ts->tv_sec += offset_s();
	return (int)r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
	struct timespec ts;

	(void)tz;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return -1;
	tv->tv_sec = ts.tv_sec;
	tv->tv_usec = ts.tv_nsec / 1000;
	return 0;
}

time_t time(time_t *out)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return (time_t)-1;
	if (out != NULL)
		*out = ts.tv_sec;
	return ts.tv_sec;
}
