/*
 * Unit tests for raftd/peer/peer_fetch.c's blocking requests, against a
 * canned server on loopback (tests/lib/canned_server.h): an answer with
 * its status, cluster id and body in raftd's memory, and the error texts
 * as Go's http.Client words them for each way a request fails (a URL
 * that is not a peer URL, a TLS URL without peer TLS, a refused
 * connection, an answer that is not HTTP, one cut short, no answer in
 * time).
 */
#include "shm_testlib.h"

#include <errno.h>
#include <signal.h>

#include "canned_server.h"
#include "base/log/errmsg.h"
#include "raftd/peer/peer_fetch.h"

/* peer_fetch of GET /version from a canned server answering answer. */
static int fetch(struct canned_server *s, const char *answer, int timeout_ms, char *url,
		 struct peer_fetch_resp *out)
{
	int rc;

	canned_start(s, answer);
	sprintf(url, "http://127.0.0.1:%u", s->port);
	rc = peer_fetch(NULL, url, "GET", "/version", timeout_ms, out);
	canned_stop(s);
	return rc;
}

/* Checks that rc's text is "Get \"<url>/version\": <tail>". */
static void check_text(int rc, const char *url, const char *tail)
{
	char want[600];

	snprintf(want, sizeof(want), "Get \"%s/version\": %s", url, tail);
	if (strcmp(errmsg_get(rc), want) != 0) {
		fprintf(stderr, "error text %s\n  wanted %s\n", errmsg_get(rc), want);
		exit(1);
	}
}

int main(void)
{
	struct canned_server s = { 0 };
	struct peer_fetch_resp r;
	char url[64], want[300];
	int rc;

	signal(SIGPIPE, SIG_IGN);
	CHECK_EQ(fetch(&s, "HTTP/1.1 200 OK\r\nX-Etcd-Cluster-Id: 1000\r\nContent-Length: 44\r\n\r\n"
			   "{\"etcdserver\":\"3.4.0\",\"etcdcluster\":\"3.4.0\"}",
		       5000, url, &r), 0);
	CHECK(r.status == 200 && strcmp(r.cluster_id, "1000") == 0 && r.len == 44);
	CHECK(strcmp(r.body, "{\"etcdserver\":\"3.4.0\",\"etcdcluster\":\"3.4.0\"}") == 0);
	peer_fetch_free(&r);
	snprintf(want, sizeof(want),
		 "GET /version HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: Go-http-client/1.1\r\n"
		 "Connection: close\r\n\r\n", s.port);
	CHECK(strcmp(s.request, want) == 0);

	rc = fetch(&s, "hello\r\n\r\n", 5000, url, &r);
	CHECK_EQ(rc, -EBADMSG);
	check_text(rc, url, "malformed HTTP response");
	rc = fetch(&s, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhel", 5000, url, &r);
	CHECK_EQ(rc, -ECONNRESET);
	check_text(rc, url, "EOF");
	s.hold_ms = 600;
	rc = fetch(&s, "", 100, url, &r);
	s.hold_ms = 0;
	CHECK_EQ(rc, -ETIMEDOUT);
	check_text(rc, url,
		   "context deadline exceeded (Client.Timeout exceeded while awaiting headers)");

	/* a port nobody listens on: bound, never listened on */
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	s.port = ntohs(sa.sin_port);
	sprintf(url, "http://127.0.0.1:%u", s.port);
	rc = peer_fetch(NULL, url, "GET", "/version", 5000, &r);
	CHECK_EQ(rc, -ECONNREFUSED);
	snprintf(want, sizeof(want), "dial tcp 127.0.0.1:%u: connect: Connection refused", s.port);
	check_text(rc, url, want);
	close(fd);

	rc = peer_fetch(NULL, "https://127.0.0.1:1", "POST", "/version", 5000, &r);
	CHECK_EQ(rc, -EPROTONOSUPPORT);
	CHECK(strcmp(errmsg_get(rc), "Post \"https://127.0.0.1:1/version\": no peer TLS is "
				     "configured for this URL") == 0);
	rc = peer_fetch(NULL, "ftp://x", "GET", "/version", 5000, &r);
	CHECK_EQ(rc, -EINVAL);
	CHECK(strcmp(errmsg_get(rc), "Get \"ftp://x/version\": unsupported URL") == 0);
	printf("raftd/peer/test_peer_fetch: ok\n");
	return 0;
}
