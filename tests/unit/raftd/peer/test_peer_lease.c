/*
 * The lease forwarder (raftd/peer/peer_lease.c): POST /leases to a leader
 * over keep-alive connections. Against a small HTTP/1.1 server in this
 * test that counts its connections and can answer, stay silent, or close
 * each connection after an answer without saying so: requests in turn
 * reuse one connection; many at once are all answered on at most the
 * pool's connections; a connection the server closed is redialed without
 * an error; a silent leader ends in a timeout; a cancelled request gets
 * no event and its connection is closed; a dead first URL falls over to
 * the next. Against another transport over TLS (which answers 404, not
 * serving /leases without gateways): answers come over https. Every
 * raftd allocation is counted and none may be left at the end.
 */
#include <poll.h>
#include <pthread.h>

#include "peer_util.h"

#include "cluster/leasehttp.h"

#define CLUSTER 0x1000

enum fake_mode {
	FAKE_ANSWER,        /* 200 with the request's body, keep-alive */
	FAKE_SILENT,        /* reads requests, never answers */
	FAKE_CLOSE_AFTER,   /* answers, then closes without Connection: close */
};

/* A leader's peer port as far as /leases goes. */
struct fake {
	int lfd;
	uint16_t port;
	char url[64];
	pthread_t t;
	_Atomic int mode;
	_Atomic int stop;
	_Atomic unsigned accepted;   /* connections taken */
	_Atomic unsigned closed;     /* connections the client closed */
	_Atomic unsigned requests;   /* whole requests read */
};

struct fake_conn {
	int fd;
	size_t len;
	char buf[8192];
};

/* Answers the whole requests in c->buf. false when c must be closed. */
static bool fake_serve(struct fake *f, struct fake_conn *c)
{
	for (;;) {
		char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
		if (!end)
			return true;
		size_t head = (size_t)(end - c->buf) + 4, body = 0;
		char *cl = memmem(c->buf, head, "Content-Length: ", 16);
		if (cl)
			body = strtoul(cl + 16, NULL, 10);
		if (c->len < head + body)
			return true;
		f->requests++;
		if (f->mode != FAKE_SILENT) {
			char out[2048];
			int n = snprintf(out, sizeof(out),
					 "HTTP/1.1 200 OK\r\nContent-Type: application/protobuf\r\n"
					 "Content-Length: %zu\r\n\r\n", body);
			memcpy(out + n, c->buf + head, body);
			CHECK(write(c->fd, out, (size_t)n + body) == (ssize_t)((size_t)n + body));
		}
		memmove(c->buf, c->buf + head + body, c->len - head - body);
		c->len -= head + body;
		if (f->mode == FAKE_CLOSE_AFTER)
			return false;
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	struct fake_conn *conns = calloc(64, sizeof(*conns));
	struct pollfd pfd[65];
	size_t n = 0;

	CHECK(conns != NULL);
	while (!f->stop) {
		pfd[0] = (struct pollfd){ .fd = f->lfd, .events = POLLIN };
		for (size_t i = 0; i < n; i++)
			pfd[i + 1] = (struct pollfd){ .fd = conns[i].fd, .events = POLLIN };
		if (poll(pfd, n + 1, 50) <= 0)
			continue;
		if ((pfd[0].revents & POLLIN) && n < 64) {
			int fd = accept(f->lfd, NULL, NULL);
			if (fd >= 0) {
				conns[n++] = (struct fake_conn){ .fd = fd };
				f->accepted++;
			}
		}
		for (size_t i = 0; i < n; i++) {
			struct fake_conn *c = &conns[i];
			if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) || pfd[i + 1].fd != c->fd)
				continue;
			ssize_t r = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
			bool keep = r > 0;
			if (r <= 0)
				f->closed++;
			else {
				c->len += (size_t)r;
				keep = fake_serve(f, c);
			}
			if (!keep) {
				close(c->fd);
				conns[i] = conns[--n];
				i--;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		close(conns[i].fd);
	free(conns);
	return NULL;
}

static void fake_start(struct fake *f, enum fake_mode mode)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1;

	memset(f, 0, sizeof(*f));
	f->mode = mode;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(f->lfd >= 0);
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(f->lfd, 64) == 0);
	CHECK(getsockname(f->lfd, (struct sockaddr *)&sa, &sl) == 0);
	f->port = ntohs(sa.sin_port);
	snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%u", f->port);
	CHECK_EQ(pthread_create(&f->t, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	f->stop = 1;
	pthread_join(f->t, NULL);
	close(f->lfd);
}

/* Forwards a renewal of lease id (token id too) to urls. */
static void forward(struct pt_node *a, const char *const *urls, size_t n, int64_t id,
		    int timeout_ms)
{
	struct leasehttp_req r = { .id = id };
	CHECK_EQ(peer_lease_forward(a->p, urls, n, &r, (uint64_t)id, timeout_ms), 0);
}

/* The next PEER_EV_LEASE_DONE within timeout_ms: 0 or -ETIMEDOUT. */
static int next_done(struct pt_node *a, struct peer_event *ev, int timeout_ms)
{
	for (;;) {
		int rc = pt_next(a, ev, timeout_ms);
		if (rc || ev->kind == PEER_EV_LEASE_DONE)
			return rc;
		peer_event_release(ev);
	}
}

/* Waits for the answer to lease id's renewal: a 200 whose body is the
 * request's own (the fake echoes it). */
static void expect_echo(struct pt_node *a, int64_t id)
{
	struct peer_event ev;
	struct leasehttp_req r = { .id = id };
	uint8_t want[LEASEHTTP_MAX_REQUEST];
	size_t n = leasehttp_request_encode(&r, want);

	CHECK_EQ(next_done(a, &ev, 5000), 0);
	CHECK_EQ(ev.token, (uint64_t)id);
	CHECK_EQ(ev.status, 200);
	CHECK(ev.len == n && memcmp(ev.buf, want, n) == 0);
	peer_event_release(&ev);
}

static bool until(_Atomic unsigned *v, unsigned want)
{
	for (int i = 0; i < 500 && *v != want; i++)
		usleep(10000);
	return *v == want;
}

static void test_reuse(struct pt_node *a)
{
	struct fake f;
	fake_start(&f, FAKE_ANSWER);
	const char *urls[] = { f.url };

	/* one at a time: one connection carries them all */
	for (int64_t id = 1; id <= 50; id++) {
		forward(a, urls, 1, id, 5000);
		expect_echo(a, id);
	}
	CHECK_EQ(f.accepted, 1u);
	CHECK_EQ(f.requests, 50u);

	/* many at once: every one answered, on at most 16 connections */
	bool seen[200] = { false };
	for (int64_t id = 100; id < 200; id++)
		forward(a, urls, 1, id, 5000);
	for (int k = 0; k < 100; k++) {
		struct peer_event ev;
		CHECK_EQ(next_done(a, &ev, 5000), 0);
		CHECK(ev.token >= 100 && ev.token < 200 && !seen[ev.token]);
		CHECK_EQ(ev.status, 200);
		seen[ev.token] = true;
		peer_event_release(&ev);
	}
	CHECK(f.accepted <= 16u);
	CHECK_EQ(f.closed, 0u);
	fake_stop(&f);
}

/* A server that closes its side after each answer (as one does with
 * connections idle too long): the next request finds its connection
 * gone and is sent again on a new one, with no error reported. */
static void test_server_closes(struct pt_node *a)
{
	struct fake f;
	fake_start(&f, FAKE_CLOSE_AFTER);
	const char *urls[] = { f.url };

	for (int64_t id = 1; id <= 10; id++) {
		forward(a, urls, 1, id, 5000);
		expect_echo(a, id);
		/* let the close reach the client sometimes, race it other times */
		if (id % 2)
			usleep(20000);
	}
	CHECK_EQ(f.requests, 10u);
	CHECK_EQ(f.accepted, 10u);
	fake_stop(&f);
}

/* A silent leader: the request ends at its deadline; a cancelled one
 * ends with no event, its connection closed, and the next leader
 * answers at once. */
static void test_silent_and_cancel(struct pt_node *a)
{
	struct fake silent, live;
	struct peer_event ev;
	fake_start(&silent, FAKE_SILENT);
	fake_start(&live, FAKE_ANSWER);
	const char *s_urls[] = { silent.url };
	const char *l_urls[] = { live.url };

	forward(a, s_urls, 1, 7, 300);
	CHECK_EQ(next_done(a, &ev, 5000), 0);
	CHECK(ev.token == 7 && ev.status == -ETIMEDOUT);
	peer_event_release(&ev);
	CHECK(until(&silent.closed, 1));

	forward(a, s_urls, 1, 8, 60000);
	CHECK(until(&silent.requests, 2));
	peer_lease_cancel(a->p, 8);
	CHECK(until(&silent.closed, 2));
	forward(a, l_urls, 1, 9, 5000);
	expect_echo(a, 9);
	CHECK_EQ(next_done(a, &ev, 300), -ETIMEDOUT);
	/* cancelled before it was sent: nothing reaches the server */
	forward(a, l_urls, 1, 10, 5000);
	peer_lease_cancel(a->p, 10);
	forward(a, l_urls, 1, 11, 5000);
	for (;;) {
		CHECK_EQ(next_done(a, &ev, 5000), 0);
		bool last = ev.token == 11;
		CHECK(ev.token == 10 || ev.token == 11); /* 10 may have gone out first */
		peer_event_release(&ev);
		if (last)
			break;
	}
	fake_stop(&silent);
	fake_stop(&live);
}

/* The first URL refuses connections: the second answers. */
static void test_fallback(struct pt_node *a)
{
	struct fake dead, live;
	fake_start(&dead, FAKE_ANSWER);
	fake_stop(&dead); /* its port now refuses */
	fake_start(&live, FAKE_ANSWER);
	const char *urls[] = { dead.url, live.url };

	for (int64_t id = 1; id <= 3; id++) {
		forward(a, urls, 2, id, 5000);
		expect_echo(a, id);
	}
	CHECK_EQ(live.accepted, 1u);
	/* both refuse: an error, not a status */
	fake_stop(&live);
	struct peer_event ev;
	forward(a, urls, 2, 4, 5000);
	CHECK_EQ(next_done(a, &ev, 5000), 0);
	CHECK(ev.token == 4 && ev.status < 0);
	peer_event_release(&ev);
}

/* Over TLS to another transport (no gateways: /leases is 404 there). */
static void test_tls(void)
{
	struct pt_node a = { 0 }, b = { 0 };
	struct tls_info info = { .side = TLS_SIDE_PEER };
	const char *hosts[] = { "127.0.0.1", "localhost" };
	char dir[300];

	wt_path(dir, sizeof(dir), "fixtures");
	CHECK_EQ(tls_self_cert(dir, hosts, 2, &info), 0);
	CHECK_EQ(tls_ctx_new(&info, TLS_SERVER, &b.sctx), 0);
	CHECK_EQ(tls_ctx_new(&info, TLS_CLIENT, &a.cctx), 0);
	tls_info_free(&info);
	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "https://127.0.0.1:0"), 0);
	const char *urls[] = { b.url };
	for (int64_t id = 1; id <= 5; id++) {
		struct peer_event ev;
		forward(&a, urls, 1, id, 5000);
		CHECK_EQ(next_done(&a, &ev, 5000), 0);
		CHECK_EQ(ev.token, (uint64_t)id);
		CHECK_EQ(ev.status, 404);
		peer_event_release(&ev);
	}
	pt_stop(&a);
	pt_stop(&b);
	tls_ctx_free(a.cctx);
	tls_ctx_free(b.sctx);
}

int main(void)
{
	struct pt_node a = { 0 };

	signal(SIGPIPE, SIG_IGN);
	wt_count_allocs();
	if (!getenv("CETCD_TEST_VERBOSE"))
		log_set_level(LOG_LEVEL_ERROR);
	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	test_reuse(&a);
	test_server_closes(&a);
	test_silent_and_cancel(&a);
	test_fallback(&a);
	pt_stop(&a);
	test_tls();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_peer_lease: ok\n");
	return 0;
}
