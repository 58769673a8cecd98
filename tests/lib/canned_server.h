/*
 * A one-connection HTTP server on loopback for the tests of request
 * clients: it accepts one connection, reads the request (its head and a
 * Content-Length body), keeps it for the test to look at, writes a canned
 * answer (in pieces of piece bytes, 0: at once), waits hold_ms, then
 * closes. Header-only.
 */
#ifndef CETCD_TESTS_CANNED_SERVER_H
#define CETCD_TESTS_CANNED_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct canned_server {
	int lfd;
	uint16_t port;
	const char *answer;          /* written once the request is in */
	size_t answer_len;           /* 0: strlen(answer) */
	size_t piece;
	int hold_ms;                 /* before closing */
	char request[8192];          /* what came, NUL-terminated */
	size_t request_len;
	pthread_t thread;
};

static void canned_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* Whether request[0..len) holds a whole head and its Content-Length body. */
static bool canned_request_done(const char *req, size_t len)
{
	const char *end = memmem(req, len, "\r\n\r\n", 4), *cl;
	size_t want = 0;

	if (!end)
		return false;
	cl = memmem(req, (size_t)(end - req), "Content-Length: ", 16);
	if (cl)
		want = strtoul(cl + 16, NULL, 10);
	return len >= (size_t)(end + 4 - req) + want;
}

static void *canned_run(void *arg)
{
	struct canned_server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	size_t len = s->answer_len ? s->answer_len : strlen(s->answer), off = 0;

	if (fd < 0)
		return NULL;
	while (!canned_request_done(s->request, s->request_len) &&
	       s->request_len < sizeof(s->request) - 1) {
		ssize_t n = read(fd, s->request + s->request_len,
				 sizeof(s->request) - 1 - s->request_len);
		if (n <= 0)
			break;
		s->request_len += (size_t)n;
	}
	s->request[s->request_len] = '\0';
	while (off < len) {
		size_t n = s->piece && s->piece < len - off ? s->piece : len - off;
		ssize_t w = write(fd, s->answer + off, n);
		if (w <= 0)
			break;
		off += (size_t)w;
		if (s->piece)
			canned_sleep_ms(1);
	}
	if (s->hold_ms)
		canned_sleep_ms(s->hold_ms);
	close(fd);
	return NULL;
}

/* Listens on 127.0.0.1 (an ephemeral port, in s->port) and serves one
 * connection in a thread. */
static void canned_start(struct canned_server *s, const char *answer)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);

	s->answer = answer;
	s->request_len = 0;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(s->lfd, 4) || getsockname(s->lfd, (struct sockaddr *)&sa, &sl)) {
		perror("canned_start");
		exit(1);
	}
	s->port = ntohs(sa.sin_port);
	if (pthread_create(&s->thread, NULL, canned_run, s)) {
		perror("canned_start");
		exit(1);
	}
}

/* Waits for the connection to be over. */
static void canned_stop(struct canned_server *s)
{
	pthread_join(s->thread, NULL);
	close(s->lfd);
}

#endif
