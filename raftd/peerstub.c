/* The peer port until the peer protocol exists (see peerstub.h). */
#include "raftd/peerstub.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shm/log/errmsg.h"
#include "shm/log/log.h"

/* etcd's peers speak HTTP (rafthttp); a plain 503 says it in their terms. */
static const char peerstub_reply[] =
	"HTTP/1.1 503 Service Unavailable\r\n"
	"Content-Type: text/plain; charset=utf-8\r\n"
	"Connection: close\r\n"
	"\r\n" PEERSTUB_TEXT "\n";

/* etcd's peer TLS set-up (configurePeerListeners): the info from the
 * flags, its log line, and the server context. */
static int peerstub_tls(struct peerstub *p, const struct cetcd_config *c)
{
	struct tls_info info;
	char text[2048], suites[1024] = "";
	int rc;

	rc = tls_info_from_config(c, TLS_SIDE_PEER, &info);
	if (rc) {
		log_error("failed to get peer self-signed certs", LOG_STR("error", errmsg_get(rc)));
		return rc;
	}
	/* etcd prints its TLSInfo with this String method */
	snprintf(text, sizeof(text),
		 "cert = %s, key = %s, trusted-ca = %s, client-cert-auth = %s, crl-file = %s",
		 info.cert_file ? info.cert_file : "", info.key_file ? info.key_file : "",
		 info.trusted_ca_file ? info.trusted_ca_file : "",
		 info.client_cert_auth ? "true" : "false", info.crl_file ? info.crl_file : "");
	for (size_t i = 0, n = 0; i < c->cipher_suites.count && n < sizeof(suites); i++)
		n += (size_t)snprintf(suites + n, sizeof(suites) - n, "%s%s", i ? "," : "",
				      c->cipher_suites.v[i]);
	log_info("starting with peer TLS", LOG_STR("tls-info", text),
		 LOG_STR("cipher-suites", suites));
	rc = tls_ctx_new(&info, TLS_SERVER, &p->tls_ctx);
	tls_info_free(&info);
	if (rc)
		log_error("cannot serve TLS on the peer port", LOG_STR("error", errmsg_get(rc)));
	return rc;
}

int peerstub_listen(struct peerstub *p, const struct cetcd_config *c)
{
	const struct config_urls *urls = &c->listen_peer_urls;
	bool files = c->peer_cert_file[0] || c->peer_key_file[0];
	int rc;

	memset(p, 0, sizeof(*p));
	p->stop_fd = -1;
	if (urls->count > PEERSTUB_MAX_LISTENERS) {
		log_error("too many peer URLs", LOG_U64("count", urls->count),
			  LOG_U64("max", PEERSTUB_MAX_LISTENERS));
		return -E2BIG;
	}
	for (size_t i = 0; i < urls->count; i++) {
		const struct config_url *u = &urls->v[i];
		p->tls[i] = strcmp(u->scheme, "https") == 0;
		if (p->tls[i] && !p->tls_ctx && (rc = peerstub_tls(p, c)))
			return rc;
		if (!p->tls[i] && files)
			log_warn("scheme is HTTP while key and cert files are present; ignoring key and cert files",
				 LOG_STR("peer-url", u->text));
		if (!p->tls[i] && c->peer_client_cert_auth)
			log_warn("scheme is HTTP while --peer-client-cert-auth is enabled; ignoring client cert auth for this URL",
				 LOG_STR("peer-url", u->text));
	}
	for (size_t i = 0; i < urls->count; i++) {
		struct config_error err;
		rc = config_listen_url(&urls->v[i], false, &p->fds[p->count], &err);
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

/* The refusal over TLS: etcd's handshake (and its checks) first, then the
 * same reply. Blocks for PEERSTUB_HANDSHAKE_MS at most. */
static void peerstub_refuse_tls(struct peerstub *p, int fd)
{
	struct tls_conn *conn;
	char remote[INET6_ADDRSTRLEN + 8] = "";
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int rc;

	if (tls_conn_new(p->tls_ctx, fd, NULL, &conn))
		return;
	rc = tls_conn_handshake_timed(conn, PEERSTUB_HANDSHAKE_MS);
	if (rc) {
		if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
			getnameinfo((struct sockaddr *)&ss, sl, remote, sizeof(remote), NULL, 0,
				    NI_NUMERICHOST);
		log_warn("rejected connection", LOG_STR("remote-addr", remote),
			 LOG_STR("error", errmsg_get(rc)));
		p->rejected++;
	} else if (tls_conn_write_all_timed(conn, peerstub_reply, sizeof(peerstub_reply) - 1,
					    PEERSTUB_HANDSHAKE_MS) == 0) {
		tls_conn_shutdown(conn);
		p->refused++;
	}
	tls_conn_free(conn);
}

static void peerstub_refuse(struct peerstub *p, uint32_t i)
{
	for (;;) {
		int fd = accept4(p->fds[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return; /* EAGAIN, or an error the next poll shows again */
		}
		if (p->tls[i]) {
			peerstub_refuse_tls(p, fd);
		} else {
			send(fd, peerstub_reply, sizeof(peerstub_reply) - 1,
			     MSG_NOSIGNAL | MSG_DONTWAIT);
			p->refused++;
		}
		shutdown(fd, SHUT_WR);
		close(fd);
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
				peerstub_refuse(p, i);
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
	tls_ctx_free(p->tls_ctx);
	p->tls_ctx = NULL;
}
