/*
 * Unit tests for cluster/peer_request.c, the one way cetcd's programs
 * make an HTTP/1.1 request to a member, against a canned server on
 * loopback (tests/lib/canned_server.h): the request as it goes out (Go's
 * client's head, a body's length and type, Connection: close, IPv6 and
 * unix hosts), answers by length, by chunks, to the end of the stream and
 * after an interim head, answers arriving in small pieces, and each stage
 * a failure is reported at: no such address, a refused connection, a
 * server that does not answer in time, an answer that is not HTTP, cut
 * short or over the bound; a request on a socket the caller connected;
 * the Host header for each kind of peer URL. Then hashkv_fetch's words for the same (cluster/hashkv.c).
 */
#include "shm_testlib.h"

#include <errno.h>
#include <signal.h>

#include "canned_server.h"
#include "cluster/hashkv.h"
#include "cluster/peer_request.h"
#include "cluster/peer_url.h"

static const struct peer_request get_version = { .method = "GET", .path = "/version",
						 .max_body = 1024 };

/* Asks a canned server answering answer for rq; returns the result. */
static int ask(struct canned_server *s, const char *answer, const struct peer_request *rq,
	       int timeout_ms, struct peer_answer *a, enum peer_request_stage *stage)
{
	struct peer_url u;
	char url[64];
	int rc;

	canned_start(s, answer);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", s->port);
	CHECK_EQ(peer_url_parse(url, &u), 0);
	rc = peer_request_url(&u, NULL, rq, timeout_ms, a, stage);
	canned_stop(s);
	return rc;
}

static void test_answers(void)
{
	struct canned_server s = { 0 };
	enum peer_request_stage stage;
	struct peer_answer a;
	char want[256];

	/* by length: the request as Go's client sends it */
	CHECK_EQ(ask(&s, "HTTP/1.1 200 OK\r\nX-Etcd-Cluster-Id: 1000\r\nContent-Length: 5\r\n\r\nhello",
		     &get_version, 5000, &a, &stage), 0);
	CHECK(a.status == 200 && a.len == 5 && strcmp(a.body, "hello") == 0 && !a.close);
	CHECK(strcmp(a.cluster_id, "1000") == 0);
	peer_answer_free(&a);
	snprintf(want, sizeof(want),
		 "GET /version HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: Go-http-client/1.1\r\n"
		 "Connection: close\r\n\r\n", s.port);
	CHECK(strcmp(s.request, want) == 0);

	/* a POST with a body and its type; another user agent */
	const struct peer_request post = { .method = "POST", .path = "/leases",
					   .user_agent = "cetcd",
					   .content_type = "application/protobuf", .body = "\x08\x01",
					   .body_len = 2, .max_body = 1024 };
	CHECK_EQ(ask(&s, "HTTP/1.1 204 No Content\r\n\r\n", &post, 5000, &a, &stage), 0);
	CHECK(a.status == 204 && a.len == 0 && a.body && a.body[0] == '\0');
	peer_answer_free(&a);
	snprintf(want, sizeof(want),
		 "POST /leases HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUser-Agent: cetcd\r\n"
		 "Content-Length: 2\r\nContent-Type: application/protobuf\r\nConnection: close\r\n"
		 "\r\n\x08\x01", s.port);
	CHECK(strcmp(s.request, want) == 0);
	/* a POST without a body says its length is 0 */
	const struct peer_request empty = { .method = "POST", .path = "/members/promote/5",
					    .max_body = 1024 };
	CHECK_EQ(ask(&s, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &empty, 5000, &a, &stage),
		 0);
	peer_answer_free(&a);
	CHECK(strstr(s.request, "\r\nContent-Length: 0\r\n") != NULL);

	/* chunked, after 100 Continue, in pieces of 3 bytes */
	s.piece = 3;
	CHECK_EQ(ask(&s,
		     "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "4\r\n[{}]\r\n0\r\n\r\n",
		     &get_version, 5000, &a, &stage), 0);
	CHECK(a.status == 200 && strcmp(a.body, "[{}]") == 0);
	peer_answer_free(&a);
	s.piece = 0;

	/* to the end of the stream */
	CHECK_EQ(ask(&s, "HTTP/1.0 200 OK\r\n\r\nall of it", &get_version, 5000, &a, &stage), 0);
	CHECK(a.close && strcmp(a.body, "all of it") == 0);
	peer_answer_free(&a);
}

static void test_failures(void)
{
	struct canned_server s = { 0 };
	enum peer_request_stage stage;
	struct peer_answer a;
	struct peer_url u;

	/* not HTTP, cut short, over the bound */
	CHECK_EQ(ask(&s, "SSH-2.0-OpenSSH_9.2\r\n", &get_version, 5000, &a, &stage), -EBADMSG);
	CHECK_EQ(stage, PEER_REQUEST_ANSWER);
	CHECK_EQ(ask(&s, "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhel", &get_version, 5000, &a,
		     &stage), -ECONNRESET);
	CHECK_EQ(stage, PEER_REQUEST_ANSWER);
	const struct peer_request small = { .method = "GET", .path = "/members", .max_body = 4 };
	CHECK_EQ(ask(&s, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", &small, 5000, &a,
		     &stage), -EMSGSIZE);
	CHECK_EQ(stage, PEER_REQUEST_ANSWER);

	/* no answer in time */
	s.hold_ms = 600;
	CHECK_EQ(ask(&s, "", &get_version, 100, &a, &stage), -ETIMEDOUT);
	CHECK_EQ(stage, PEER_REQUEST_EXCHANGE);
	s.hold_ms = 0;

	/* a port nobody listens on: bound, never listened on */
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char url[300];
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	CHECK_EQ(peer_url_parse(url, &u), 0);
	CHECK_EQ(peer_request_url(&u, NULL, &get_version, 5000, &a, &stage), -ECONNREFUSED);
	CHECK_EQ(stage, PEER_REQUEST_CONNECT);

	/* hashkv_fetch's words for the same */
	struct hashkv_resp r;
	char err[512], want[600];
	CHECK_EQ(hashkv_fetch(url, 0, NULL, 5000, &r, err, sizeof(err)), HASHKV_FAILED);
	snprintf(want, sizeof(want), "Get \"%s/members/hashkv\": Connection refused", url);
	CHECK(strcmp(err, want) == 0);
	close(fd);

	/* a unix socket path too long for sockaddr_un */
	memset(url, 'a', sizeof(url));
	memcpy(url, "unix://", 7);
	strcpy(url + 250, ":1");
	CHECK_EQ(peer_url_parse(url, &u), 0);
	CHECK_EQ(peer_request_url(&u, NULL, &get_version, 5000, &a, &stage), -ENAMETOOLONG);
	CHECK_EQ(stage, PEER_REQUEST_ADDRESS);
}

/* hashkv_fetch and hashkv_fetch_local's requests and outcomes. */
static void test_hashkv(void)
{
	struct canned_server s = { 0 };
	struct hashkv_resp r;
	char url[64], err[512];

	canned_start(&s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 57\r\n"
			 "\r\n{\"header\":{\"revision\":9},\"hash\":123,\"compact_revision\":4}");
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", s.port);
	CHECK_EQ(hashkv_fetch(url, 7, NULL, 5000, &r, err, sizeof(err)), HASHKV_OK);
	canned_stop(&s);
	CHECK(r.revision == 9 && r.hash == 123 && r.compact_revision == 4);
	CHECK(strstr(s.request, "GET /members/hashkv HTTP/1.1\r\n") == s.request);
	CHECK(strstr(s.request, "\r\nUser-Agent: cetcd\r\nContent-Length: 14\r\n"
				"Content-Type: application/json\r\nConnection: close\r\n\r\n"
				"{\"revision\":7}") != NULL);

	canned_start(&s, "HTTP/1.1 400 Bad Request\r\nContent-Length: 43\r\n\r\n"
			 "mvcc: required revision has been compacted\n");
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", s.port);
	CHECK_EQ(hashkv_fetch(url, 2, NULL, 5000, &r, err, sizeof(err)), HASHKV_COMPACTED);
	canned_stop(&s);

	canned_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"hea");
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", s.port);
	CHECK_EQ(hashkv_fetch(url, 0, NULL, 5000, &r, err, sizeof(err)), HASHKV_FAILED);
	canned_stop(&s);
	CHECK(strcmp(err, "malformed HTTP response") == 0);

	CHECK_EQ(hashkv_fetch("ftp://x", 0, NULL, 5000, &r, err, sizeof(err)), HASHKV_FAILED);
	CHECK(strcmp(err, "parse \"ftp://x\": invalid URL") == 0);
	CHECK_EQ(hashkv_fetch("https://127.0.0.1:1", 0, NULL, 5000, &r, err, sizeof(err)),
		 HASHKV_FAILED);
	CHECK(strcmp(err, "a TLS peer URL without peer TLS") == 0);
}

/* The Host header: brackets for IPv6, localhost for unix sockets. */
static void test_host(void)
{
	static const char *const cases[][2] = {
		{ "http://10.0.0.1:2380", "10.0.0.1:2380" },
		{ "https://[::1]:02380", "[::1]:2380" },
		{ "http://infra0.example.com:2380", "infra0.example.com:2380" },
		{ "unix://member.sock:1", "localhost" },
	};
	char host[PEER_REQUEST_HOST_MAX];
	struct peer_url u;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ(peer_url_parse(cases[i][0], &u), 0);
		CHECK_EQ(peer_request_host(&u, host, sizeof(host)), (int)strlen(cases[i][1]));
		if (strcmp(host, cases[i][1]) != 0) {
			fprintf(stderr, "%s: Host %s\n", cases[i][0], host);
			exit(1);
		}
	}
}

/* A request on a socket the caller connected. */
static void test_fd(void)
{
	struct canned_server s = { 0 };
	enum peer_request_stage stage;
	struct peer_answer a;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	canned_start(&s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	sa.sin_port = htons(s.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK_EQ(peer_request_fd(fd, "localhost", &get_version, 5000, &a, &stage), 0);
	canned_stop(&s);
	close(fd);
	CHECK(a.status == 200 && strcmp(a.body, "ok") == 0);
	peer_answer_free(&a);
	CHECK(strstr(s.request, "\r\nHost: localhost\r\n") != NULL);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_answers();
	test_failures();
	test_hashkv();
	test_fd();
	test_host();
	printf("cluster/test_peer_request: ok\n");
	return 0;
}
