/*
 * The local sockets of a member's gatewayd instances: how raftd hands a
 * gatewayd the connections that come to the peer port but belong to the
 * client API (gRPC over HTTP/2, which etcd serves on its peer listeners
 * too, and GET /members/hashkv), as plain bytes once raftd has ended the
 * peer TLS.
 *
 * Each gatewayd instance listens on an abstract unix socket (no file to
 * leave behind) whose name is tied to the member's data dir, by its
 * device and inode, and to the instance's --gateway-index. Both ends
 * check that the other runs as the same user (SO_PEERCRED): no other
 * user of the host can reach the API around the peer port's TLS, nor
 * pose as a gatewayd to raftd.
 */
#ifndef CETCD_BASE_GWSOCK_H
#define CETCD_BASE_GWSOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

/* A gatewayd's socket address. */
struct gwsock_addr {
	struct sockaddr_un sa;
	socklen_t len;
};

/* The address of gatewayd instance `index` of the member whose data dir
 * is data_dir (which must exist). Returns 0, or -errno of stat. */
int gwsock_addr_of(const char *data_dir, uint32_t index, struct gwsock_addr *out);

/* Binds and listens on a, non-blocking. Returns 0 with *out_fd, -EADDRINUSE
 * (another gatewayd of this index runs), or -errno. */
int gwsock_listen(const struct gwsock_addr *a, int *out_fd);

/* Connects to a non-blocking socket at a (a unix connect completes or
 * fails at once) and checks that its listener runs as this user.
 * Returns 0 with *out_fd, -ECONNREFUSED (nothing listens: that gatewayd
 * is down), -EPERM (another user's socket), or -errno. */
int gwsock_connect(const struct gwsock_addr *a, int *out_fd);

/* Whether the process at the other end of the unix socket fd runs as
 * this process's user. */
bool gwsock_same_user(int fd);

#endif
