/*
 * The peer transport (raftd/peer*.c) against clients that hold its
 * descriptors, driven on the test's thread (peer_opts.driven):
 * - a request head that trickles in, a byte every 300 ms, is closed once
 *   PEER_IO_TIMEOUT_NS has passed since the connection came, however
 *   many bytes came since (each read does not buy 5 s more): not before
 *   4 s, and by 9 s
 * - out of descriptors (RLIMIT_NOFILE lowered below what a child
 *   process's silent connections need): the listener leaves the poll
 *   and comes back after the back-off's pause, so driving the transport
 *   for 1.5 s costs well under half of it in CPU time and writes one
 *   warning about the failed accepts; once the connections are gone and
 *   descriptors are free, GET /version is answered again
 * - a connection relayed to a gateway whose client stops reading is
 *   closed once the bytes queued for it made no progress for
 *   PEER_IO_TIMEOUT_NS, and the gateway's end with it
 * Every raftd allocation is counted and none may be left at the end.
 */
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <dirent.h>

#include "peer_util.h"

#include "base/clock/clock.h"
#include "base/sock/gwsock.h"

#define MS 1000000ull

/* Drives n's transport until ms have passed, or until fd (when >= 0)
 * reads EOF (then returns the ms it took; -1 otherwise). Every
 * trickle_ms, one byte goes to fd; what fd reads is appended to out (up
 * to cap bytes, NUL-terminated) when out is given. */
static long drive(struct pt_node *n, uint64_t ms, int fd, uint64_t trickle_ms, char *out,
		  size_t cap)
{
	int64_t start = clock_now_ns(), end = start + ms * MS, next_byte = start + trickle_ms * MS;
	size_t got = 0;

	if (out)
		out[0] = '\0';
	for (;;) {
		int64_t now = clock_now_ns();
		if (now >= end)
			return -1;
		int t = peer_run(n->p);
		uint64_t left = (end - now) / MS + 1;
		if (t < 0 || (uint64_t)t > left)
			t = (int)left;
		if (trickle_ms && t > (int)trickle_ms)
			t = (int)trickle_ms;
		struct pollfd pf[2] = { { .fd = peer_poll_fd(n->p), .events = POLLIN },
					{ .fd = fd, .events = POLLIN } };
		if (poll(pf, fd >= 0 ? 2 : 1, t) > 0 && (pf[0].revents & POLLIN))
			peer_poll(n->p);
		if (fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			char buf[4096];
			ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN))
				return (long)((clock_now_ns() - start) / MS);
			if (r > 0 && out && got + 1 < cap) {
				size_t k = (size_t)r < cap - 1 - got ? (size_t)r : cap - 1 - got;
				memcpy(out + got, buf, k);
				got += k;
				out[got] = '\0';
			}
		}
		if (fd >= 0 && trickle_ms && clock_now_ns() >= next_byte) {
			CHECK(send(fd, "a", 1, MSG_NOSIGNAL) == 1);
			next_byte += trickle_ms * MS;
		}
	}
}

static int dial(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	return fd;
}

static void start(struct pt_node *n)
{
	memset(n, 0, sizeof(*n));
	n->driven = true;
	CHECK_EQ(pt_start(n, 1, 0x1000, "http://127.0.0.1:0"), 0);
}

static void test_trickled_head(void)
{
	struct pt_node n;
	static const char head[] = "GET /version HTTP/1.1\r\nHost: x\r\nX-Slow: ";

	start(&n);
	int fd = dial(peer_listen_port(n.p, 0));
	CHECK(send(fd, head, sizeof(head) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(head) - 1);
	long at = drive(&n, 9000, fd, 300, NULL, 0);
	printf("a head trickled a byte per 300 ms was closed after %ld ms\n", at);
	CHECK(at >= 4000);
	close(fd);
	pt_stop(&n);
}

/* The limit of descriptors under which this process has room for free
 * more (new ones take the lowest numbers free). */
static rlim_t limit_with_room(int free)
{
	static bool open_fd[4096];
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fd;

	CHECK(d);
	memset(open_fd, 0, sizeof(open_fd));
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) < 4096)
			open_fd[atoi(e->d_name)] = true;
	open_fd[dirfd(d)] = false; /* free again once closed */
	closedir(d);
	for (fd = 0; fd < 4096 && free > 0; fd++)
		free -= !open_fd[fd];
	CHECK(free == 0);
	return (rlim_t)fd;
}

static void test_out_of_descriptors(void)
{
	char path[] = "/tmp/test_peer_idle.XXXXXX", text[65536], answer[4096];
	struct pt_node n;
	struct rlimit old, low;
	struct timespec c0, c1;
	int sync[2];
	char ready;

	start(&n);
	uint16_t port = peer_listen_port(n.p, 0);
	/* the child holds 64 silent connections; the transport has room
	 * for a dozen */
	CHECK(pipe(sync) == 0);
	pid_t child = fork();
	CHECK(child >= 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with the test, even a failed one */
		close(sync[0]);
		for (int i = 0; i < 64; i++)
			dial(port);
		if (write(sync[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sync[1]);
	CHECK(read(sync[0], &ready, 1) == 1);
	close(sync[0]);

	int logfd = mkstemp(path);
	CHECK(logfd >= 0);
	unlink(path);
	log_set_level(LOG_LEVEL_WARN);
	log_set_fd(logfd);
	CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
	low = old;
	low.rlim_cur = limit_with_room(12);
	CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);

	/* the first turns take what the descriptors allow; then 1.5 s out
	 * of them, timed */
	drive(&n, 300, -1, 0, NULL, 0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
	drive(&n, 1500, -1, 0, NULL, 0);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
	uint64_t cpu_ms = (uint64_t)((c1.tv_sec - c0.tv_sec) * 1000 + (c1.tv_nsec - c0.tv_nsec) / 1000000);
	ssize_t len = pread(logfd, text, sizeof(text) - 1, 0);
	CHECK(len >= 0);
	text[len] = '\0';
	int lines = 0;
	for (char *s = text; (s = strstr(s, "cannot accept a peer connection")); s++)
		lines++;
	printf("out of descriptors for 1.5 s: %llu ms of CPU, %llu failed accepts, %d warnings\n",
	       (unsigned long long)cpu_ms, (unsigned long long)n.p->accept_bo.failures, lines);
	CHECK(cpu_ms < 500);
	CHECK(lines == 1);
	CHECK(n.p->accept_bo.failures >= 2 && n.p->accept_bo.failures <= 40);

	/* the connections go, the limit comes back: served again */
	kill(child, SIGKILL);
	CHECK(waitpid(child, NULL, 0) == child);
	CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
	drive(&n, 200, -1, 0, NULL, 0);
	int fd = dial(port);
	static const char req[] = "GET /version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	CHECK(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1);
	long at = drive(&n, 5000, fd, 0, answer, sizeof(answer));
	CHECK(at >= 0);
	CHECK(strstr(answer, "HTTP/1.1 200 OK"));
	CHECK(strstr(answer, "\"etcdserver\":\"3.4.0\""));
	close(fd);
	log_set_fd(2);
	close(logfd);
	log_set_level(LOG_LEVEL_ERROR);
	pt_stop(&n);
}

/* A relayed connection whose client stops reading: what the gateway
 * sends piles up in raftd, and once it has made no progress for
 * PEER_IO_TIMEOUT_NS the relay is closed, so the gateway's end reads
 * EOF (not before 4 s, by 12 s). The bytes come a KiB at a time, so
 * that the client's socket fills on a write that took all it was given
 * and the next one finds it full: bytes queued with no write at all
 * still have their 5 s. */
static void test_relay_stuck_reader(void)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	static char chunk[1024];
	char dir[256];
	struct pt_node n;
	struct gwsock_addr ga;
	int lfd, small = 4096;

	test_tmpdir(dir, sizeof(dir));
	start(&n);
	CHECK_EQ(peer_grpc_init(n.p, dir, 1), 0);
	CHECK_EQ(gwsock_addr_of(dir, 0, &ga), 0);
	CHECK_EQ(gwsock_listen(&ga, &lfd), 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(peer_listen_port(n.p, 0)) };
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(cfd >= 0);
	CHECK(setsockopt(cfd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) == 0);
	CHECK(connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(send(cfd, preface, sizeof(preface) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(preface) - 1);
	/* the transport takes the preface and dials the gateway */
	int gfd = -1;
	for (int i = 0; i < 200 && gfd < 0; i++) {
		drive(&n, 10, -1, 0, NULL, 0);
		gfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	}
	CHECK(gfd >= 0);
	/* and raftd's socket to the client holds little */
	for (struct peer_conn *c = n.p->conns; c; c = c->next)
		if (c->kind == PEER_CONN_SERVER && c->state == PEER_ST_RELAY)
			CHECK(setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	/* the gateway sends a KiB at a time while the client reads nothing:
	 * the socket to the client fills on a write that took all it was
	 * given, and the next finds it full with nothing queued before */
	int64_t start_ns = clock_now_ns(), end = start_ns + 12000 * MS;
	size_t sent = 0;
	long closed_ms = -1;
	while (clock_now_ns() < end && closed_ms < 0) {
		ssize_t w = send(gfd, chunk, 1024, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w > 0)
			sent += (size_t)w;
		char b;
		ssize_t r = recv(gfd, &b, 1, MSG_DONTWAIT);
		if (r == 0 || (r < 0 && errno != EAGAIN))
			closed_ms = (long)((clock_now_ns() - start_ns) / MS);
		drive(&n, 2, -1, 0, NULL, 0);
	}
	printf("a relay whose client reads nothing was closed after %ld ms (%zu bytes sent)\n",
	       closed_ms, sent);
	CHECK(closed_ms >= 4000);
	close(gfd);
	close(cfd);
	close(lfd);
	pt_stop(&n);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	wt_count_allocs();
	if (!getenv("CETCD_TEST_VERBOSE"))
		log_set_level(LOG_LEVEL_ERROR);
	test_trickled_head();
	test_out_of_descriptors();
	test_relay_stuck_reader();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("ok\n");
	return 0;
}
