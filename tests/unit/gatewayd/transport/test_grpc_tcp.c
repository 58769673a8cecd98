/*
 * gatewayd/transport/grpc.c and gatewayd/transport/h2.c over real loopback TCP, driven by
 * h2load (nghttp2's load generator, Debian nghttp2-client): a small epoll
 * loop in a thread plays gatewayd's event loop, answering each call one
 * loop turn after it arrived (as results from the rings would come), and
 * flushing the connections the pending callback listed.
 * Skips (77) when h2load is not installed.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "shm_testlib.h"

#include "gatewayd/transport/grpc.h"
#include "gatewayd/transport/h2.h"
#include "gatewayd/transport/transport.h"

#define MAX_CONNS 32
#define REQUESTS 2000

extern char **environ;

struct tconn {
	struct transport t; /* first: epoll data.ptr points here */
	struct h2_conn *h2;
	bool listed;        /* on the loop's flush list */
	bool want_out;      /* waiting for EPOLLOUT */
};

static struct {
	struct grpc_server *srv;
	int epfd, lfd, stopfd;
	struct tconn *conns[MAX_CONNS];
	struct tconn *flush[MAX_CONNS];
	int nflush;
	uint64_t queue[4096]; /* calls to answer next turn */
	uint8_t reply[4096][16];
	size_t reply_len[4096];
	int nqueue;
	long served, accepted;
} lp;

static void on_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	CHECK(lp.nqueue < 4096);
	CHECK(len <= 16);
	memcpy(lp.reply[lp.nqueue], msg, len);
	lp.reply_len[lp.nqueue] = len;
	lp.queue[lp.nqueue++] = grpc_call_id(call);
}

static const struct grpc_handler echo_later = { .on_message = on_message };

static void on_pending(struct h2_conn *c, void *user)
{
	struct tconn *tc = user;
	(void)c;
	if (!tc->listed) {
		tc->listed = true;
		lp.flush[lp.nflush++] = tc;
	}
}

static void conn_close(struct tconn *tc)
{
	for (int i = 0; i < MAX_CONNS; i++)
		if (lp.conns[i] == tc)
			lp.conns[i] = NULL;
	for (int i = 0; i < lp.nflush; i++)
		if (lp.flush[i] == tc)
			lp.flush[i] = NULL;
	epoll_ctl(lp.epfd, EPOLL_CTL_DEL, tc->t.fd, NULL);
	grpc_server_conn_free(tc->h2);
	transport_close(&tc->t);
	free(tc);
}

static void conn_watch(struct tconn *tc)
{
	bool out = tc->want_out;
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = tc };
	CHECK_EQ(epoll_ctl(lp.epfd, EPOLL_CTL_MOD, tc->t.fd, &ev), 0);
}

/* Flushes tc; returns false if it was closed. */
static bool conn_flush(struct tconn *tc)
{
	int rc = h2_conn_flush(tc->h2, &tc->t);
	bool want_out = rc == -EAGAIN;
	if (rc < 0 && rc != -EAGAIN) {
		conn_close(tc);
		return false;
	}
	if (want_out != tc->want_out) {
		tc->want_out = want_out;
		conn_watch(tc);
	}
	if (h2_conn_is_done(tc->h2)) {
		conn_close(tc);
		return false;
	}
	return true;
}

static void conn_readable(struct tconn *tc)
{
	uint8_t buf[16384];
	for (;;) {
		ssize_t n = transport_read(&tc->t, buf, sizeof(buf));
		if (n == -EAGAIN)
			break;
		if (n <= 0 || h2_conn_recv(tc->h2, buf, (size_t)n) < 0) {
			conn_close(tc);
			return;
		}
	}
	conn_flush(tc);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(lp.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int slot = -1;
		for (int i = 0; i < MAX_CONNS; i++)
			if (!lp.conns[i])
				slot = i;
		if (slot < 0) {
			close(fd);
			continue;
		}
		struct tconn *tc = calloc(1, sizeof(*tc));
		CHECK(tc != NULL);
		transport_fd_init(&tc->t, fd);
		CHECK_EQ(grpc_server_conn_new(lp.srv, &tc->h2), 0);
		h2_conn_set_user(tc->h2, tc, on_pending);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = tc };
		CHECK_EQ(epoll_ctl(lp.epfd, EPOLL_CTL_ADD, fd, &ev), 0);
		lp.conns[slot] = tc;
		lp.accepted++;
		conn_flush(tc); /* the server's SETTINGS */
	}
}

static void *loop(void *arg)
{
	static int listener_tag, stop_tag;
	(void)arg;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &listener_tag };
	CHECK_EQ(epoll_ctl(lp.epfd, EPOLL_CTL_ADD, lp.lfd, &ev), 0);
	ev.data.ptr = &stop_tag;
	CHECK_EQ(epoll_ctl(lp.epfd, EPOLL_CTL_ADD, lp.stopfd, &ev), 0);
	for (;;) {
		struct epoll_event evs[32];
		int timeout = lp.nqueue ? 0 : grpc_server_timeout_ms(lp.srv);
		int n = epoll_wait(lp.epfd, evs, 32, timeout);
		CHECK(n >= 0 || errno == EINTR);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr == &stop_tag)
				return NULL;
			if (evs[i].data.ptr == &listener_tag) {
				accept_all();
				continue;
			}
			struct tconn *tc = evs[i].data.ptr;
			if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
				conn_readable(tc);
			else if (evs[i].events & EPOLLOUT)
				conn_flush(tc);
		}
		/* "Results from the rings": answer last turn's calls. */
		int q = lp.nqueue;
		lp.nqueue = 0;
		for (int i = 0; i < q; i++) {
			struct grpc_call *call = grpc_call_find(lp.srv, lp.queue[i]);
			if (!call)
				continue;
			CHECK_EQ(grpc_call_send(call, lp.reply[i], lp.reply_len[i]), 0);
			CHECK_EQ(grpc_call_finish(call, GRPC_STATUS_OK, NULL), 0);
			lp.served++;
		}
		grpc_server_expire(lp.srv);
		/* One flush per connection touched, however many answers. */
		for (int i = 0; i < lp.nflush; i++) {
			struct tconn *tc = lp.flush[i];
			if (!tc)
				continue;
			tc->listed = false;
			conn_flush(tc);
		}
		lp.nflush = 0;
	}
}

/* Runs h2load and returns its stdout (caller frees). */
static char *run_h2load(char *const argv[])
{
	int pfd[2];
	CHECK_EQ(pipe(pfd), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pfd[0]);
	pid_t pid;
	CHECK_EQ(posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	size_t cap = 65536, len = 0;
	char *out = malloc(cap);
	CHECK(out != NULL);
	for (;;) {
		ssize_t n = read(pfd[0], out + len, cap - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len == cap - 1)
			break;
	}
	out[len] = '\0';
	close(pfd[0]);
	int status;
	CHECK_EQ(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status));
	return out;
}

static bool have_h2load(void)
{
	const char *path = getenv("PATH");
	if (!path)
		return false;
	char *dup = strdup(path), *save = NULL;
	bool found = false;
	for (char *d = strtok_r(dup, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char p[4096];
		snprintf(p, sizeof(p), "%s/h2load", d);
		found = access(p, X_OK) == 0;
	}
	free(dup);
	return found;
}

int main(void)
{
	if (!have_h2load())
		SKIP("h2load is not installed (Debian package nghttp2-client)");
	signal(SIGPIPE, SIG_IGN);

	struct grpc_server_config cfg;
	grpc_server_config_default(&cfg, 1536 * 1024);
	cfg.h2.max_concurrent_streams = 64;
	CHECK_EQ(grpc_server_new(&cfg, &lp.srv), 0);
	CHECK_EQ(grpc_server_handle(lp.srv, "/etcdserverpb.KV/Range", &echo_later, NULL), 0);

	lp.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(lp.lfd >= 0);
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK_EQ(bind(lp.lfd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	CHECK_EQ(listen(lp.lfd, 64), 0);
	socklen_t alen = sizeof(addr);
	CHECK_EQ(getsockname(lp.lfd, (struct sockaddr *)&addr, &alen), 0);
	lp.epfd = epoll_create1(EPOLL_CLOEXEC);
	lp.stopfd = eventfd(0, EFD_CLOEXEC);
	CHECK(lp.epfd >= 0 && lp.stopfd >= 0);

	/* The request body: one gRPC message. */
	char tmpl[] = "/tmp/cetcd-h2load-XXXXXX";
	int dfd = mkstemp(tmpl);
	CHECK(dfd >= 0);
	uint8_t body[GRPC_PREFIX_LEN + 10];
	grpc_prefix_write(body, false, 10);
	memcpy(body + GRPC_PREFIX_LEN, "\x0a\x08some/key", 10); /* RangeRequest{key} */
	CHECK_EQ(write(dfd, body, sizeof(body)), (ssize_t)sizeof(body));
	close(dfd);

	pthread_t th;
	CHECK_EQ(pthread_create(&th, NULL, loop, NULL), 0);

	char url[128], n[16];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/etcdserverpb.KV/Range", ntohs(addr.sin_port));
	snprintf(n, sizeof(n), "%d", REQUESTS);
	char *argv[] = { "h2load", "-n", n, "-c", "4", "-m", "10", "-d", tmpl,
			 "-H", "content-type: application/grpc", "-H", "te: trailers", url, NULL };
	char *out = run_h2load(argv);
	unlink(tmpl);

	uint64_t one = 1;
	CHECK_EQ(write(lp.stopfd, &one, sizeof(one)), (ssize_t)sizeof(one));
	CHECK_EQ(pthread_join(th, NULL), 0);

	char want[128];
	snprintf(want, sizeof(want), "requests: %d total, %d started, %d done, %d succeeded", REQUESTS,
		 REQUESTS, REQUESTS, REQUESTS);
	if (!strstr(out, want)) {
		fprintf(stderr, "h2load did not succeed:\n%s\n", out);
		exit(1);
	}
	const char *fin = strstr(out, "finished in");
	printf("h2load: %.*s\n", fin ? (int)strcspn(fin, "\n") : 0, fin ? fin : "");
	CHECK_EQ(lp.served, REQUESTS);
	CHECK_EQ(lp.accepted, 4);
	free(out);

	for (int i = 0; i < MAX_CONNS; i++)
		if (lp.conns[i])
			conn_close(lp.conns[i]);
	CHECK_EQ(grpc_server_call_count(lp.srv), 0);
	grpc_server_free(lp.srv);
	close(lp.lfd);
	close(lp.epfd);
	close(lp.stopfd);
	printf("test_grpc_tcp: passed\n");
	return 0;
}
