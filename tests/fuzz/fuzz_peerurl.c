/*
 * Fuzz target: peer URLs as a peer supplies them (a member's peerURLs in
 * the membership JSON of the WAL, of a snapshot, of a joined cluster's
 * GET /members), through cluster/peer_url.c: the input up to its first NUL
 * is the URL. Taken, it must name a port, and its address is looked up
 * without the resolver (peer_url_sockaddr_numeric). The same text also
 * goes through the check the Cluster service and the flags make
 * (config_parse_url, etcd's types.NewURLs): the canonical text of a URL
 * it takes, as a member's URL is kept, must parse to the same host and
 * port, and must be taken unless it is past peer_url.h's limits, where
 * no member could be reached.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_int.h"
#include "cluster/peer_url.h"

static void require(int cond, const char *what, const char *url)
{
	if (!cond) {
		fprintf(stderr, "fuzz_peerurl: %s: %s\n", what, url);
		abort();
	}
}

/* A port as a number is read: without its leading zeros. */
static const char *port_digits(const char *p)
{
	while (p[0] == '0' && p[1] >= '0' && p[1] <= '9')
		p++;
	return p;
}

/* The parser's verdict on url against the check's. */
static void against_check(const char *url)
{
	struct config_url cu;
	struct peer_url again;
	char why[256];

	if (config_parse_url(url, &cu, why, sizeof(why)) != 0)
		return;
	/* peer_url.h's limits: no member is reachable at such a URL (a unix
	 * URL's host:port is its socket's path) */
	bool is_unix = strncmp(cu.scheme, "unix", 4) == 0;
	bool dialable = is_unix ? strlen(strstr(cu.text, "://") + 3) < sizeof(again.host) :
				  strlen(cu.host) < sizeof(again.host) && cu.port[0] != '\0' &&
					  strlen(port_digits(cu.port)) < sizeof(again.port);
	int rc = peer_url_parse(cu.text, &again);
	require(!dialable || rc == 0, "a URL the check takes is refused", url);
	if (rc == 0 && !again.unix_socket) {
		require(strcmp(again.host, cu.host) == 0, "the host differs from the check's", url);
		require(strcmp(again.port, port_digits(cu.port)) == 0,
			"the port differs from the check's", url);
	}
	free(cu.text);
	free(cu.host);
	free(cu.port);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ss;
	struct peer_url u;
	socklen_t sl;
	char *url = malloc(size + 1);

	if (!url)
		return 0;
	memcpy(url, data, size);
	url[size] = '\0';
	int rc = peer_url_parse(url, &u);
	require(rc == 0 || rc == -EINVAL, "an error besides -EINVAL", url);
	if (rc == 0) {
		require(memchr(u.host, '\0', sizeof(u.host)) && memchr(u.port, '\0', sizeof(u.port)),
			"host or port not terminated", url);
		require(u.unix_socket || u.port[0] != '\0', "no port", url);
		int arc = peer_url_sockaddr_numeric(&u, &ss, &sl);
		require(arc == 0 || arc == -EAGAIN || arc == -ENAMETOOLONG || arc == -EHOSTUNREACH,
			"an address lookup error besides those documented", url);
	}
	against_check(url);
	free(url);
	return 0;
}
