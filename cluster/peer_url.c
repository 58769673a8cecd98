/* Peer URLs: parsed and resolved (see peer_url.h). */
#include "cluster/peer_url.h"

#include <errno.h>
#include <netdb.h>
#include <string.h>
#include <sys/un.h>

int peer_url_parse(const char *text, struct peer_url *u)
{
	const char *sep = strstr(text, "://"), *hp, *end, *colon;
	size_t hlen;

	memset(u, 0, sizeof(*u));
	if (!sep)
		return -EINVAL;
	if (!strncmp(text, "http", 4) && sep == text + 4) {
	} else if (!strncmp(text, "https", 5) && sep == text + 5) {
		u->tls = true;
	} else if (!strncmp(text, "unix", 4) && sep == text + 4) {
		u->unix_socket = true;
	} else if (!strncmp(text, "unixs", 5) && sep == text + 5) {
		u->unix_socket = u->tls = true;
	} else {
		return -EINVAL;
	}
	hp = sep + 3;
	end = hp + strcspn(hp, "/?#");
	hlen = (size_t)(end - hp);
	if (hlen == 0)
		return -EINVAL;
	if (u->unix_socket) {
		/* etcd dials the URL's host:port as the socket's path */
		if (hlen >= sizeof(u->host))
			return -EINVAL;
		memcpy(u->host, hp, hlen);
		return 0;
	}
	if (hp[0] == '[') {
		const char *rb = memchr(hp, ']', hlen);
		if (!rb || (size_t)(rb - hp - 1) >= sizeof(u->host))
			return -EINVAL;
		memcpy(u->host, hp + 1, (size_t)(rb - hp - 1));
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(hp, ':', hlen);
		if ((size_t)((colon ? colon : end) - hp) >= sizeof(u->host))
			return -EINVAL;
		memcpy(u->host, hp, (size_t)((colon ? colon : end) - hp));
	}
	if (colon) {
		const char *port = colon + 1;
		size_t plen = (size_t)(end - port);
		/* Go reads the port as a number: "0002380" is 2380 */
		while (plen > 1 && port[0] == '0' && port[1] >= '0' && port[1] <= '9') {
			port++;
			plen--;
		}
		if (plen == 0 || plen >= sizeof(u->port))
			return -EINVAL;
		memcpy(u->port, port, plen);
	} else {
		strcpy(u->port, u->tls ? "443" : "80");
	}
	return 0;
}

/* host and port resolved with getaddrinfo's flags (besides
 * AI_NUMERICSERV): -EAGAIN when AI_NUMERICHOST refuses a name. */
static int peer_url_lookup(const struct peer_url *u, int flags, struct sockaddr_storage *ss,
			   socklen_t *sl)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | flags }, *ai;
	const char *host = u->host[0] ? u->host : "127.0.0.1";
	int rc = getaddrinfo(host, u->port, &hints, &ai);

	if (rc)
		return rc == EAI_NONAME && (flags & AI_NUMERICHOST) ? -EAGAIN : -EHOSTUNREACH;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

/* A unix URL's address: 1 when u is one (0: it is not). */
static int peer_url_unix(const struct peer_url *u, struct sockaddr_storage *ss, socklen_t *sl)
{
	struct sockaddr_un *sa = (struct sockaddr_un *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!u->unix_socket)
		return 0;
	if (strlen(u->host) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	sa->sun_family = AF_UNIX;
	strcpy(sa->sun_path, u->host);
	*sl = sizeof(*sa);
	return 1;
}

int peer_url_sockaddr(const struct peer_url *u, struct sockaddr_storage *ss, socklen_t *sl)
{
	int rc = peer_url_unix(u, ss, sl);

	return rc ? (rc < 0 ? rc : 0) : peer_url_lookup(u, 0, ss, sl);
}

int peer_url_sockaddr_numeric(const struct peer_url *u, struct sockaddr_storage *ss,
			      socklen_t *sl)
{
	int rc = peer_url_unix(u, ss, sl);

	return rc ? (rc < 0 ? rc : 0) : peer_url_lookup(u, AI_NUMERICHOST, ss, sl);
}
