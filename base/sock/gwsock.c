/* The local sockets of the gatewayd instances (see gwsock.h). */
#include "base/sock/gwsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int gwsock_addr_of(const char *data_dir, uint32_t index, struct gwsock_addr *out)
{
	struct stat st;
	int n;

	if (stat(data_dir, &st) < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->sa.sun_family = AF_UNIX;
	/* sun_path[0] = '\0': the abstract namespace; the name is not
	 * NUL-terminated, its length is the address length */
	n = snprintf(out->sa.sun_path + 1, sizeof(out->sa.sun_path) - 1,
		     "cetcd-gateway/%llx:%llx/%u", (unsigned long long)st.st_dev,
		     (unsigned long long)st.st_ino, index);
	out->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	return 0;
}

int gwsock_listen(const struct gwsock_addr *a, int *out_fd)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	if (bind(fd, (const struct sockaddr *)&a->sa, a->len) < 0 || listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*out_fd = fd;
	return 0;
}

bool gwsock_same_user(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) == 0 && cr.uid == geteuid();
}

int gwsock_connect(const struct gwsock_addr *a, int *out_fd)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	if (connect(fd, (const struct sockaddr *)&a->sa, a->len) < 0) {
		rc = errno == ENOENT ? -ECONNREFUSED : -errno;
		close(fd);
		return rc;
	}
	if (!gwsock_same_user(fd)) {
		close(fd);
		return -EPERM;
	}
	*out_fd = fd;
	return 0;
}
