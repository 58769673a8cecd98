/* Plain refusals on the client port (see refuse.h). */
#include "gatewayd/refuse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "shm/log.h"

/* RFC 9113 section 3.4: the client connection preface. */
static const char refuse_h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
#define REFUSE_PREFACE_LEN (sizeof(refuse_h2_preface) - 1)

static const char refuse_http[] =
	"HTTP/1.1 503 Service Unavailable\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Content-Length: 39\r\n"
	"Connection: close\r\n"
	"\r\n" REFUSE_TEXT "\n";
_Static_assert(sizeof(REFUSE_TEXT "\n") - 1 == 39, "Content-Length of the 503 body");

/* HTTP/2 frames: an empty SETTINGS (the server's preface), then GOAWAY
 * (last stream 0, REFUSED_STREAM = 0x7) with the text as debug data. */
#define REFUSE_GOAWAY_LEN (8 + sizeof(REFUSE_TEXT) - 1)
static const char refuse_h2[] =
	"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
	"\x00\x00\x2e\x07\x00\x00\x00\x00\x00"
	"\x00\x00\x00\x00\x00\x00\x00\x07" REFUSE_TEXT;
_Static_assert(REFUSE_GOAWAY_LEN == 0x2e, "GOAWAY frame length");

enum refuse_state { REFUSE_READING, REFUSE_LINGERING };

struct refuse_conn {
	struct refuse_source src; /* first: epoll data.ptr points here */
	uint32_t idx;             /* position in t->conns */
	enum refuse_state state;
	uint64_t deadline_ms;     /* CLOCK_MONOTONIC */
	size_t len;
	char buf[REFUSE_PREFACE_LEN];
};

static uint64_t refuse_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void refuse_init(struct refuse *t, int epfd)
{
	memset(t, 0, sizeof(*t));
	t->epfd = epfd;
}

int refuse_add_listener(struct refuse *t, int fd)
{
	struct refuse_source *ls = realloc(t->listeners, (t->listener_count + 1) * sizeof(*ls));
	struct epoll_event ev = { .events = EPOLLIN };
	if (!ls)
		return -ENOMEM;
	t->listeners = ls;
	/* the array may have moved: re-point the listeners already added */
	for (uint32_t i = 0; i < t->listener_count; i++) {
		ev.data.ptr = &ls[i];
		epoll_ctl(t->epfd, EPOLL_CTL_MOD, ls[i].fd, &ev);
	}
	ls[t->listener_count] = (struct refuse_source){ .kind = REFUSE_LISTENER, .fd = fd };
	ev.data.ptr = &ls[t->listener_count];
	if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	t->listener_count++;
	return 0;
}

static void refuse_drop(struct refuse *t, struct refuse_conn *c)
{
	struct refuse_conn *last = t->conns[--t->conn_count];
	t->conns[c->idx] = last;
	last->idx = c->idx;
	close(c->src.fd); /* also leaves the epoll set */
	free(c);
}

/* Sends the answer the bytes read so far call for and starts lingering. */
static void refuse_answer(struct refuse *t, struct refuse_conn *c)
{
	bool h2 = c->len == REFUSE_PREFACE_LEN &&
		  memcmp(c->buf, refuse_h2_preface, REFUSE_PREFACE_LEN) == 0;
	const char *msg = h2 ? refuse_h2 : refuse_http;
	size_t len = h2 ? sizeof(refuse_h2) - 1 : sizeof(refuse_http) - 1;

	/* a few hundred bytes into a fresh socket's buffer: one send suffices,
	 * and a peer that cannot take them is not waited for */
	if (send(c->src.fd, msg, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		refuse_drop(t, c);
		return;
	}
	shutdown(c->src.fd, SHUT_WR);
	t->refused++;
	c->state = REFUSE_LINGERING;
	c->deadline_ms = refuse_now_ms() + REFUSE_LINGER_MS;
}

static void refuse_accept(struct refuse *t, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_warn("accept failed on the client port", LOG_ERRNO(-errno));
			return;
		}
		struct refuse_conn *c = NULL;
		if (t->conn_count < REFUSE_MAX_CONNS)
			c = calloc(1, sizeof(*c));
		if (!c) {
			/* table full: answer at once, without waiting to read */
			send(fd, refuse_http, sizeof(refuse_http) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			t->refused++;
			continue;
		}
		*c = (struct refuse_conn){
			.src = { .kind = REFUSE_CONN, .fd = fd },
			.idx = t->conn_count,
			.state = REFUSE_READING,
			.deadline_ms = refuse_now_ms() + REFUSE_READ_MS,
		};
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP, .data.ptr = c };
		if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(c);
			continue;
		}
		t->conns[t->conn_count++] = c;
	}
}

static void refuse_read(struct refuse *t, struct refuse_conn *c)
{
	char sink[4096];
	for (;;) {
		char *dst = c->state == REFUSE_READING ? c->buf + c->len : sink;
		size_t room = c->state == REFUSE_READING ? sizeof(c->buf) - c->len : sizeof(sink);
		ssize_t n = recv(c->src.fd, dst, room, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n == 0 && c->state == REFUSE_READING && c->len > 0) {
			/* the client said something and stopped: answer it (the
			 * next event sees the end again and closes) */
			refuse_answer(t, c);
			return;
		}
		if (n <= 0) {
			refuse_drop(t, c); /* end of stream or error */
			return;
		}
		if (c->state == REFUSE_LINGERING)
			continue;
		c->len += (size_t)n;
		/* answer as soon as the bytes cannot be the HTTP/2 preface any
		 * more, or are all of it */
		if (memcmp(c->buf, refuse_h2_preface, c->len) != 0 || c->len == sizeof(c->buf)) {
			refuse_answer(t, c);
			return;
		}
	}
}

void refuse_event(struct refuse *t, struct refuse_source *src, uint32_t events)
{
	if (src->kind == REFUSE_LISTENER) {
		refuse_accept(t, src->fd);
		return;
	}
	struct refuse_conn *c = (struct refuse_conn *)src;
	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		refuse_read(t, c);
}

int refuse_next_timeout_ms(const struct refuse *t)
{
	uint64_t now, next = UINT64_MAX;
	if (t->conn_count == 0)
		return -1;
	now = refuse_now_ms();
	for (uint32_t i = 0; i < t->conn_count; i++)
		if (t->conns[i]->deadline_ms < next)
			next = t->conns[i]->deadline_ms;
	return next <= now ? 0 : (int)(next - now);
}

void refuse_expire(struct refuse *t)
{
	uint64_t now = refuse_now_ms();
	for (uint32_t i = t->conn_count; i-- > 0;) {
		struct refuse_conn *c = t->conns[i];
		if (c->deadline_ms > now)
			continue;
		if (c->state == REFUSE_READING)
			refuse_answer(t, c); /* a client that waits for us to speak */
		else
			refuse_drop(t, c);
	}
}

void refuse_close(struct refuse *t)
{
	while (t->conn_count > 0)
		refuse_drop(t, t->conns[t->conn_count - 1]);
	for (uint32_t i = 0; i < t->listener_count; i++)
		close(t->listeners[i].fd);
	free(t->listeners);
	t->listeners = NULL;
	t->listener_count = 0;
}
