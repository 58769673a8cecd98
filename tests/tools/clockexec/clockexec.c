/*
 * clockexec: runs a program with its wall clock offset by the seconds that
 * the file named by CLOCKSTEP_FILE holds (as tests/tools/clockstep reads
 * it: "+90", "-30", "0"), read at every reading of the clock, so that a
 * write to the file steps the program's clock at once, as a real step of
 * the host's clock would. Every other clock is the kernel's, untouched.
 *
 *   CLOCKSTEP_FILE=FILE clockexec PROGRAM [ARG...]
 *
 * For programs a preloaded library cannot reach: a Go program (etcd)
 * reads the clocks through the vDSO with its own code, not libc's, and a
 * time namespace moves only the monotonic and boot clocks. So:
 *
 * - The program runs without the vDSO. It is started under ptrace, and
 *   at its exec the AT_SYSINFO_EHDR entry of its auxiliary vector (on its
 *   new stack) is made AT_IGNORE before it runs an instruction, then it
 *   is let go. Go's runtime and glibc alike then read the clocks with
 *   system calls.
 * - A seccomp filter, installed before the exec and kept by it, hands
 *   clock_gettime of CLOCK_REALTIME, CLOCK_REALTIME_COARSE and CLOCK_TAI,
 *   gettimeofday and time to this process (SECCOMP_RET_USER_NOTIF), which
 *   reads the clock itself, adds the offset and writes the answer into the
 *   program's memory; every other system call goes through untouched.
 *
 * This process stays the program's parent: it passes on SIGTERM, SIGINT,
 * SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2, and exits as the program did (its
 * status, or 128 + the signal that killed it). If this process dies, the
 * program is killed (PR_SET_PDEATHSIG), as its clock would stop working.
 * x86-64 only; needs root or CAP_SYS_ADMIN for the notifications'
 * memory writes.
 */

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef __x86_64__
#error "clockexec knows the x86-64 system call table and auxiliary vector only"
#endif

#define AT_NULL_TAG 0
#define AT_IGNORE_TAG 1
#define AT_SYSINFO_EHDR_TAG 33

static const char *offset_path;

static void die(const char *what)
{
	fprintf(stderr, "clockexec: %s: %s\n", what, strerror(errno));
	exit(125);
}

/* The offset in seconds: an optional sign, then digits; anything else
 * (or no file) is 0, as clockstep reads it. */
static long long offset_s(void)
{
	char buf[32];
	long long v = 0;
	int neg = 0, fd = open(offset_path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = buf;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	return neg ? -v : v;
}

/* The filter: the wall clock's system calls to this process, every other
 * one allowed; a program of another architecture is killed. */
static int install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_gettimeofday, 7, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_time, 6, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clock_gettime, 0, 4),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_REALTIME, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_REALTIME_COARSE, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CLOCK_TAI, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

/* The child: the filter, its listener's number to the parent through
 * pipe fd w, a stop for the parent to take the listener and follow the
 * exec, then the program. */
static void child(int w, char **argv)
{
	int lfd;

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
		die("prctl(PR_SET_PDEATHSIG)");
	lfd = install_filter();
	if (lfd < 0)
		die("seccomp(SECCOMP_FILTER_FLAG_NEW_LISTENER)");
	if (write(w, &lfd, sizeof(lfd)) != (ssize_t)sizeof(lfd))
		die("write");
	close(w);
	if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
		die("ptrace(PTRACE_TRACEME)");
	raise(SIGSTOP);
	close(lfd);
	execvp(argv[0], argv);
	fprintf(stderr, "clockexec: %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

static int peek(pid_t pid, uint64_t addr, uint64_t *v)
{
	errno = 0;
	long x = ptrace(PTRACE_PEEKDATA, pid, (void *)addr, NULL);
	if (errno)
		return -1;
	*v = (uint64_t)x;
	return 0;
}

/* At the program's exec stop: its stack holds argc, argv, NULL, envp,
 * NULL, then the auxiliary vector; the vDSO's entry becomes AT_IGNORE.
 * Returns 0, or -1 with errno. */
static int hide_vdso(pid_t pid)
{
	struct user_regs_struct regs;
	uint64_t a, v;

	if (ptrace(PTRACE_GETREGS, pid, NULL, &regs) != 0)
		return -1;
	a = regs.rsp;
	if (peek(pid, a, &v) != 0)
		return -1;
	a += 8 * (v + 2); /* past argc, argv and its NULL */
	do {
		if (peek(pid, a, &v) != 0)
			return -1;
		a += 8;
	} while (v != 0); /* past envp and its NULL */
	for (int i = 0; i < 256; i++, a += 16) {
		if (peek(pid, a, &v) != 0)
			return -1;
		if (v == AT_NULL_TAG)
			break;
		if (v == AT_SYSINFO_EHDR_TAG)
			return ptrace(PTRACE_POKEDATA, pid, (void *)a, (void *)AT_IGNORE_TAG) == 0 ? 0
												  : -1;
	}
	return 0; /* no vDSO to hide */
}

static int write_mem(pid_t pid, uint64_t addr, const void *p, size_t len)
{
	struct iovec local = { .iov_base = (void *)p, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)addr, .iov_len = len };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Answers one notification: the clock's reading plus the offset, written
 * where the call asked, or EFAULT. */
static void answer(int lfd, const struct seccomp_notif *req)
{
	struct seccomp_notif_resp resp = { .id = req->id };
	long long off = offset_s();
	const __u64 *args = req->data.args;
	struct timespec ts;
	int rc = 0;

	if (req->data.nr == SYS_clock_gettime) {
		clock_gettime((clockid_t)args[0], &ts);
		ts.tv_sec += off;
		rc = args[1] ? write_mem(req->pid, args[1], &ts, sizeof(ts)) : -1;
	} else if (req->data.nr == SYS_gettimeofday) {
		struct timeval tv;
		clock_gettime(CLOCK_REALTIME, &ts);
		tv.tv_sec = ts.tv_sec + off;
		tv.tv_usec = ts.tv_nsec / 1000;
		if (args[0])
			rc = write_mem(req->pid, args[0], &tv, sizeof(tv));
		if (!rc && args[1]) {
			struct timezone tz = { 0 };
			rc = write_mem(req->pid, args[1], &tz, sizeof(tz));
		}
	} else { /* time */
		clock_gettime(CLOCK_REALTIME, &ts);
		time_t t = ts.tv_sec + off;
		if (args[0])
			rc = write_mem(req->pid, args[0], &t, sizeof(t));
		resp.val = t;
	}
	if (rc)
		resp.error = -EFAULT;
	/* the call may have been interrupted, its thread gone: then the
	 * answer is refused with ENOENT, and that is all */
	(void)ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

static int exit_status(int st)
{
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	static const int passed[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
	int pfd[2], lfd, childfd, st, sfd;
	sigset_t set;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: CLOCKSTEP_FILE=FILE clockexec PROGRAM [ARG...]\n");
		return 2;
	}
	offset_path = getenv("CLOCKSTEP_FILE");
	if (!offset_path) {
		fprintf(stderr, "clockexec: CLOCKSTEP_FILE is not set\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
		sigaddset(&set, passed[i]);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		die("sigprocmask");
	if (pipe2(pfd, O_CLOEXEC) != 0)
		die("pipe2");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		close(pfd[0]);
		child(pfd[1], argv + 1);
	}
	close(pfd[1]);
	if (read(pfd[0], &childfd, sizeof(childfd)) != (ssize_t)sizeof(childfd)) {
		waitpid(pid, &st, 0);
		return exit_status(st);
	}
	close(pfd[0]);
	/* the child's SIGSTOP: take its listener, follow its exec */
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		return WIFSTOPPED(st) ? 125 : exit_status(st);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		die("pidfd_open");
	lfd = (int)syscall(SYS_pidfd_getfd, pidfd, childfd, 0);
	if (lfd < 0)
		die("pidfd_getfd");
	close(pidfd);
	if (ptrace(PTRACE_SETOPTIONS, pid, NULL, (void *)(long)(PTRACE_O_TRACEEXEC |
							      PTRACE_O_EXITKILL)) != 0 ||
	    ptrace(PTRACE_CONT, pid, NULL, NULL) != 0)
		die("ptrace");
	for (;;) {
		if (waitpid(pid, &st, 0) != pid)
			die("waitpid");
		if (!WIFSTOPPED(st))
			return exit_status(st); /* the exec failed */
		if (st >> 8 == (SIGTRAP | PTRACE_EVENT_EXEC << 8))
			break;
		/* a signal before the exec: passed on */
		if (ptrace(PTRACE_CONT, pid, NULL, (void *)(long)WSTOPSIG(st)) != 0)
			die("ptrace(PTRACE_CONT)");
	}
	if (hide_vdso(pid) != 0) {
		fprintf(stderr, "clockexec: cannot hide the vDSO from %s: %s\n", argv[1],
			strerror(errno));
		kill(pid, SIGKILL);
		return 125;
	}
	if (ptrace(PTRACE_DETACH, pid, NULL, NULL) != 0)
		die("ptrace(PTRACE_DETACH)");

	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0)
		die("signalfd");
	struct seccomp_notif_sizes sizes;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
		die("seccomp(SECCOMP_GET_NOTIF_SIZES)");
	struct seccomp_notif *req = calloc(1, sizes.seccomp_notif > sizeof(*req)
					       ? sizes.seccomp_notif : sizeof(*req));
	if (!req)
		die("calloc");
	for (;;) {
		struct pollfd p[2] = { { .fd = lfd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[0].revents & POLLIN) {
			memset(req, 0, sizes.seccomp_notif);
			if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, req) == 0)
				answer(lfd, req);
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
				continue;
			if (si.ssi_signo != SIGCHLD) {
				kill(pid, (int)si.ssi_signo);
				continue;
			}
			if (waitpid(pid, &st, WNOHANG) == pid)
				return exit_status(st);
		}
		if (p[0].revents & (POLLHUP | POLLERR) && !(p[0].revents & POLLIN)) {
			/* no task uses the filter any more: the program is gone */
			if (waitpid(pid, &st, 0) == pid)
				return exit_status(st);
			return 125;
		}
	}
}
