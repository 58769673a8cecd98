/* gatewayd: a member's client-facing process.
 *
 * For now a skeleton: it claims a slot in the member region, exchanges the
 * attach hello with raftd and stored through the slot's rings, and answers
 * every client connection with a plain refusal (refuse.h). Several
 * gatewayd share the client address through SO_REUSEPORT.
 *
 * One epoll loop waits on the listeners and connections, on a signalfd
 * (SIGTERM, SIGINT) and on the eventfd a waker thread makes readable when
 * the slot's reply rings have records (waker.h explains why a thread).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "shm/hello.h"
#include "gatewayd/refuse.h"
#include "gatewayd/waker.h"
#include "shm/config.h"
#include "shm/doorbell.h"
#include "shm/log.h"
#include "shm/region.h"
#include "shm/slot.h"

/* Retry period for a hello that did not fit in its ring. */
#define GW_HELLO_RETRY_MS 100

/* epoll sources of this loop, beside the refuse table's. */
enum { GW_SIGNAL = 10, GW_WAKER = 11 };

struct gw {
	struct cetcd_config cfg;
	struct shm_region *r;
	struct shm_slot_ref slot;
	int epfd;
	struct refuse_source sig; /* kind GW_SIGNAL, signalfd */
	struct refuse_source wake; /* kind GW_WAKER, the waker's eventfd */
	struct refuse refuse;
	struct waker waker;
	bool hello_sent[SHM_ROLE_COUNT];
	bool acked[SHM_ROLE_COUNT];
};

static bool gw_replies_waiting(void *arg)
{
	struct gw *g = arg;
	return hello_replies_waiting(g->r, &g->slot);
}

/* Sends the hellos not sent yet. A full ring (records of a dead
 * predecessor the daemon has not consumed yet) is retried later. */
static void gw_send_hellos(struct gw *g)
{
	for (int role = 0; role < SHM_ROLE_COUNT; role++) {
		if (g->hello_sent[role])
			continue;
		int rc = hello_send(g->r, &g->slot, (enum shm_role)role, g->cfg.gateway_index);
		if (rc == 0)
			g->hello_sent[role] = true;
		else if (rc != -EAGAIN)
			log_warn("cannot send the attach hello",
				 LOG_STR("peer", hello_role_name((enum shm_role)role)), LOG_ERRNO(rc));
	}
}

static void gw_take_replies(struct gw *g)
{
	for (int role = 0; role < SHM_ROLE_COUNT; role++) {
		int rc = hello_take_acks(g->r, &g->slot, (enum shm_role)role, &g->acked[role]);
		if (rc < 0)
			log_warn("cannot read the slot's reply ring",
				 LOG_STR("peer", hello_role_name((enum shm_role)role)), LOG_ERRNO(rc));
	}
}

static int gw_epoll_add(struct gw *g, struct refuse_source *src)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = src };
	return epoll_ctl(g->epfd, EPOLL_CTL_ADD, src->fd, &ev) < 0 ? -errno : 0;
}

/* Opens the client listeners (shared with the other gatewayd). */
static int gw_listen(struct gw *g)
{
	const struct config_urls *us = &g->cfg.listen_client_urls;
	for (size_t i = 0; i < us->count; i++) {
		struct config_error err;
		int fd, rc = config_listen_url(&us->v[i], true, &fd, &err);
		if (rc) {
			log_error("cannot listen for clients", LOG_STR("address", us->v[i].text),
				  LOG_STR("reason", err.msg));
			return rc;
		}
		rc = refuse_add_listener(&g->refuse, fd);
		if (rc) {
			close(fd);
			return rc;
		}
		log_info("listening for clients (refusing them until the gRPC server exists)",
			 LOG_STR("address", us->v[i].text));
	}
	return 0;
}

/* Runs until SIGTERM or SIGINT. Returns the signal. */
static int gw_loop(struct gw *g)
{
	struct epoll_event evs[64];

	for (;;) {
		int timeout = refuse_next_timeout_ms(&g->refuse);
		bool unsent = !g->hello_sent[SHM_ROLE_RAFTD] || !g->hello_sent[SHM_ROLE_STORED];
		if (unsent && (timeout < 0 || timeout > GW_HELLO_RETRY_MS))
			timeout = GW_HELLO_RETRY_MS;

		int n = epoll_wait(g->epfd, evs, 64, timeout);
		if (n < 0 && errno != EINTR) {
			log_error("epoll_wait failed", LOG_ERRNO(-errno));
			return SIGTERM;
		}
		for (int i = 0; i < n; i++) {
			struct refuse_source *src = evs[i].data.ptr;
			if (src->kind == GW_SIGNAL) {
				struct signalfd_siginfo si;
				if (read(src->fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
					return (int)si.ssi_signo;
			} else if (src->kind == GW_WAKER) {
				gw_take_replies(g);
				waker_drained(&g->waker);
			} else {
				refuse_event(&g->refuse, src, evs[i].events);
			}
		}
		refuse_expire(&g->refuse);
		if (unsent)
			gw_send_hellos(g);
	}
}

int main(int argc, char **argv)
{
	static struct gw g; /* large (connection table): not on the stack */
	sigset_t set;
	int status, rc, sig;

	rc = config_daemon_start(&g.cfg, CONFIG_PROG_GATEWAYD, "gatewayd", argc, argv, &g.r,
				 &status);
	if (rc)
		return status;
	status = 1;

	rc = shm_slot_claim(g.r, &g.slot);
	if (rc) {
		log_error("cannot claim a gateway slot in the member region",
			  LOG_U64("slots", shm_slot_count(g.r)), LOG_ERRNO(rc));
		goto out_detach;
	}
	log_info("claimed a gateway slot", LOG_U64("slot", g.slot.index),
		 LOG_U64("generation", g.slot.generation), LOG_I64("pid", getpid()));

	g.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (g.epfd < 0) {
		log_error("epoll_create1 failed", LOG_ERRNO(-errno));
		goto out_release_slot;
	}
	refuse_init(&g.refuse, g.epfd);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	g.sig = (struct refuse_source){ .kind = GW_SIGNAL,
					.fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK) };
	if (g.sig.fd < 0 || gw_epoll_add(&g, &g.sig)) {
		log_error("cannot watch signals", LOG_ERRNO(-errno));
		goto out_close_fds;
	}
	rc = gw_listen(&g);
	if (rc) {
		status = CONFIG_EXIT_FATAL;
		goto out_close_listeners;
	}
	rc = waker_start(&g.waker, shm_slot_doorbell(g.r, g.slot.index), gw_replies_waiting, &g);
	if (rc) {
		log_error("cannot start the ring waker thread", LOG_ERRNO(rc));
		goto out_close_listeners;
	}
	g.wake = (struct refuse_source){ .kind = GW_WAKER, .fd = waker_fd(&g.waker) };
	rc = gw_epoll_add(&g, &g.wake);
	if (rc) {
		log_error("cannot watch the ring waker", LOG_ERRNO(rc));
		goto out_stop_waker;
	}

	gw_send_hellos(&g);
	sig = gw_loop(&g);
	log_info("stopping", LOG_STR("signal", strsignal(sig)),
		 LOG_U64("refused-connections", g.refuse.refused));
	status = 0;

out_stop_waker:
	waker_stop(&g.waker);
out_close_listeners:
	refuse_close(&g.refuse);
out_close_fds:
	if (g.sig.fd >= 0)
		close(g.sig.fd);
	close(g.epfd);
out_release_slot:
	shm_slot_release(g.r, &g.slot);
out_detach:
	shm_region_detach(g.r);
	config_free(&g.cfg);
	return status;
}
