/* A member's peer URL, as raftd dials it and the launcher's corruption
 * check asks it: http, https, unix and unixs (etcd's schemes). */
#ifndef CETCD_CLUSTER_PEER_URL_H
#define CETCD_CLUSTER_PEER_URL_H

#include <stdbool.h>
#include <sys/socket.h>

struct peer_url {
	bool tls;
	bool unix_socket;
	char host[256];                   /* the socket's path for unix */
	char port[8];
};

/* Parses "scheme://host:port" (http, https, unix, unixs), the port's
 * leading zeros dropped. -EINVAL, also for a host of more than 255 bytes
 * (no name or address is that long) and an empty port or one of more
 * than 7 bytes. */
int peer_url_parse(const char *text, struct peer_url *u);

/* The address to connect to: the socket's path (etcd dials a unix URL's
 * host:port as one), or host and port resolved (a name may block in the
 * resolver). 0, -ENAMETOOLONG, or -EHOSTUNREACH (no such host). */
int peer_url_sockaddr(const struct peer_url *u, struct sockaddr_storage *ss, socklen_t *sl);

/* As peer_url_sockaddr without ever asking the resolver: -EAGAIN when
 * the host is a name rather than an address. */
int peer_url_sockaddr_numeric(const struct peer_url *u, struct sockaddr_storage *ss,
			      socklen_t *sl);

#endif
