/* The listening sockets of a member's URLs (see config.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "config/config_int.h"

int config_url_sockaddr(const struct config_url *u, struct sockaddr_storage *ss,
			socklen_t *len, struct config_error *err)
{
	unsigned long port = 0;
	size_t digits = strspn(u->port, "0123456789");
	memset(ss, 0, sizeof(*ss));
	if (config_url_is_unix(u)) {
		/* etcd's: the socket file is the URL's host:port */
		struct sockaddr_un *un = (struct sockaddr_un *)ss;
		int n = snprintf(un->sun_path, sizeof(un->sun_path), "%s%s%s", u->host,
				 u->port[0] ? ":" : "", u->port);
		if (n <= 0 || (size_t)n >= sizeof(un->sun_path)) {
			config_errorf(err, 1, "cannot listen on %s: the socket path is too long",
				      u->text);
			return -ENAMETOOLONG;
		}
		un->sun_family = AF_UNIX;
		*len = sizeof(*un);
		return 0;
	}
	if (strcmp(u->scheme, "http") && strcmp(u->scheme, "https")) {
		config_errorf(err, 1, "cannot listen on %s: not a TCP URL", u->text);
		return -EINVAL;
	}
	/* a decimal port, as net.Listen takes it */
	if (digits > 0 && digits <= 5 && u->port[digits] == '\0')
		port = strtoul(u->port, NULL, 10);
	if (digits == 0 || digits > 5 || u->port[digits] != '\0' || port > 65535) {
		config_errorf(err, 1, "cannot listen on %s: bad port \"%s\"", u->text, u->port);
		return -EINVAL;
	}
	const char *host = strcmp(u->host, "localhost") == 0 ? "127.0.0.1" : u->host;
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof(*a4);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a6);
		return 0;
	}
	config_errorf(err, 1, "cannot listen on %s: expected IP in URL for binding", u->text);
	return -EINVAL;
}

bool config_url_is_unix(const struct config_url *u)
{
	return !strcmp(u->scheme, "unix") || !strcmp(u->scheme, "unixs");
}

/* Removes the socket file at path when nothing listens there any more (a
 * member that was killed leaves it); a file that is not a socket, or one
 * that takes connections, stays, and bind then says so. */
static void listen_unlink_stale(const struct sockaddr_un *un)
{
	struct stat st;
	int fd;

	if (lstat(un->sun_path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (const struct sockaddr *)un, sizeof(*un)) < 0 && errno == ECONNREFUSED)
		unlink(un->sun_path);
	close(fd);
}

int config_listen_url(const struct config_url *u, bool reuseport, int *fd_out,
		      struct config_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	int fd, rc;

	rc = config_url_sockaddr(u, &ss, &len, err);
	if (rc)
		return rc;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen %s: socket: %s", u->text, strerror(errno));
		return rc;
	}
	if (ss.ss_family == AF_UNIX) {
		listen_unlink_stale((const struct sockaddr_un *)&ss);
	} else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
		   (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)) {
		rc = -errno;
		config_errorf(err, 1, "listen %s: setsockopt: %s", u->text, strerror(errno));
		goto out_close_fd;
	}
	if (bind(fd, (struct sockaddr *)&ss, len) < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen %s %s:%s: bind: %s",
			      ss.ss_family == AF_UNIX ? "unix" : "tcp", u->host, u->port,
			      strerror(errno));
		goto out_close_fd;
	}
	if (listen(fd, 1024) < 0) {
		rc = -errno;
		config_errorf(err, 1, "listen %s %s:%s: %s", ss.ss_family == AF_UNIX ? "unix" : "tcp",
			      u->host, u->port, strerror(errno));
		goto out_close_fd;
	}
	*fd_out = fd;
	return 0;

out_close_fd:
	close(fd);
	return rc;
}

bool config_same_address(const struct config_url *u, const struct config_url *v)
{
	struct sockaddr_storage a, b;
	socklen_t al, bl;
	struct config_error err;

	return config_url_sockaddr(u, &a, &al, &err) == 0 &&
	       config_url_sockaddr(v, &b, &bl, &err) == 0 && al == bl && memcmp(&a, &b, al) == 0;
}

void config_close_client_fds(int *fds, size_t count)
{
	for (size_t i = 0; fds && i < count; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
}

int config_listen_client_urls(const struct cetcd_config *c, enum config_listen_which which,
			      int **out, struct config_error *err)
{
	const struct config_urls *us = &c->listen_client_urls;
	int *fds = malloc((us->count ? us->count : 1) * sizeof(*fds));

	*out = NULL;
	if (!fds) {
		config_errorf(err, 1, "listen: out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < us->count; i++)
		fds[i] = -1;
	for (size_t i = 0; i < us->count; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = config_same_address(&us->v[i], &us->v[j]);
		if (seen || (which == CONFIG_LISTEN_TCP && config_url_is_unix(&us->v[i])) ||
		    (which == CONFIG_LISTEN_UNIX && !config_url_is_unix(&us->v[i])))
			continue;
		int rc = config_listen_url(&us->v[i], true, &fds[i], err);
		if (rc) {
			fds[i] = -1;
			config_close_client_fds(fds, i);
			return rc;
		}
	}
	*out = fds;
	return 0;
}

/* Whether fd is a listening stream socket (TCP or unix). */
static bool listen_fd_ok(int fd)
{
	int v = 0;
	socklen_t len = sizeof(v);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || !v)
		return false;
	len = sizeof(v);
	return getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_STREAM;
}

int config_inherited_client_fds(size_t count, int **out)
{
	const char *env = getenv(CONFIG_CLIENT_FDS_ENV);
	int rc = 0;

	*out = NULL;
	if (!env)
		return -ENOENT;
	int *got = malloc((count + 1) * sizeof(*got));
	size_t n = 0;
	for (const char *p = env; got && *p && n <= count;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p || v < CONFIG_FD_BIND || v > INT_MAX || (*end && *end != ','))
			break;
		got[n++] = (int)v;
		p = *end ? end + 1 : end;
	}
	unsetenv(CONFIG_CLIENT_FDS_ENV);
	if (!got)
		return -ENOMEM;
	if (n != count)
		rc = -EINVAL;
	for (size_t i = 0; i < n && !rc; i++)
		if (got[i] >= 0 && !listen_fd_ok(got[i]))
			rc = -EINVAL;
	if (rc) {
		/* the caller binds anew: an inherited listener left open would
		 * stay in the SO_REUSEPORT group, and the connections the
		 * kernel hands it would never be accepted */
		for (size_t i = 0; i < n; i++)
			if (got[i] >= 0 && listen_fd_ok(got[i]))
				close(got[i]);
		free(got);
		return rc;
	}
	for (size_t i = 0; i < n; i++)
		if (got[i] >= 0)
			(void)fcntl(got[i], F_SETFD, FD_CLOEXEC);
	*out = got;
	return 0;
}
