/* The peer port until the peer protocol exists (see peerstub.h). */
#include "raftd/peerstub.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm/log/log.h"

/* etcd's peers speak HTTP (rafthttp); a plain 503 says it in their terms. */
static const char peerstub_reply[] =
	"HTTP/1.1 503 Service Unavailable\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Connection: close\r\n"
	"\r\n" PEERSTUB_TEXT "\n";

int peerstub_listen(struct peerstub *p, const struct config_urls *urls)
{
	memset(p, 0, sizeof(*p));
	p->stop_fd = -1;
	if (urls->count > PEERSTUB_MAX_LISTENERS) {
		log_error("too many peer URLs", LOG_U64("count", urls->count),
			  LOG_U64("max", PEERSTUB_MAX_LISTENERS));
		return -E2BIG;
	}
	for (size_t i = 0; i < urls->count; i++) {
		struct config_error err;
		int rc = config_listen_url(&urls->v[i], false, &p->fds[p->count], &err);
		if (rc) {
			log_error("cannot listen for peers", LOG_STR("address", urls->v[i].text),
				  LOG_STR("reason", err.msg));
			return rc;
		}
		p->count++;
		log_info("listening for peers (refusing them until the peer protocol exists)",
			 LOG_STR("address", urls->v[i].text));
	}
	return 0;
}

static void peerstub_refuse(struct peerstub *p, int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN, or an error the next poll shows again */
		}
		send(fd, peerstub_reply, sizeof(peerstub_reply) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		shutdown(fd, SHUT_WR);
		close(fd);
		p->refused++;
	}
}

static void *peerstub_main(void *arg)
{
	struct peerstub *p = arg;
	struct pollfd pfds[PEERSTUB_MAX_LISTENERS + 1];

	for (uint32_t i = 0; i < p->count; i++)
		pfds[i] = (struct pollfd){ .fd = p->fds[i], .events = POLLIN };
	pfds[p->count] = (struct pollfd){ .fd = p->stop_fd, .events = POLLIN };
	for (;;) {
		if (poll(pfds, p->count + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("poll failed on the peer port", LOG_ERRNO(-errno));
			return NULL;
		}
		if (pfds[p->count].revents)
			return NULL;
		for (uint32_t i = 0; i < p->count; i++)
			if (pfds[i].revents)
				peerstub_refuse(p, pfds[i].fd);
	}
}

int peerstub_start(struct peerstub *p)
{
	sigset_t all, old;
	int rc;

	p->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (p->stop_fd < 0)
		return -errno;
	/* signals go to the main thread only */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&p->thread, NULL, peerstub_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return rc;
	p->running = true;
	return 0;
}

void peerstub_stop(struct peerstub *p)
{
	const uint64_t one = 1;
	if (p->running) {
		if (write(p->stop_fd, &one, sizeof(one)) < 0)
			log_warn("cannot stop the peer port thread", LOG_ERRNO(-errno));
		pthread_join(p->thread, NULL);
		p->running = false;
	}
	if (p->stop_fd >= 0)
		close(p->stop_fd);
	p->stop_fd = -1;
	for (uint32_t i = 0; i < p->count; i++)
		close(p->fds[i]);
	p->count = 0;
}
