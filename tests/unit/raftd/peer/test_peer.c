/*
 * The peer transport (raftd/peer*.c) between transports in this process:
 * messages of every kind over the pipeline before the streams are up and
 * over both streams after, big entries, a peer that stops and comes back,
 * a cluster id mismatch, a removed member, unreachable peers, the plain
 * HTTP routes (/version, /members, /raft/probing) and malformed requests,
 * snapshots, TLS and unix sockets. Every raftd allocation is counted and
 * none may be left at the end.
 */
#include <pthread.h>

#include "peer_util.h"

#include "base/clock/clock.h"
#include "raftd/outbox.h"

#include <fcntl.h>

#define CLUSTER 0x1000

/* A raw HTTP exchange with a transport: the whole answer (the server
 * closes after it: the request says Connection: close). */
static char *http_exchange(uint16_t port, const char *request, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	static char answer[65536];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(fd >= 0);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK((size_t)write(fd, request, len) == len);
	for (;;) {
		ssize_t n = read(fd, answer + got, sizeof(answer) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	answer[got] = '\0';
	return answer;
}

static char *http_get(uint16_t port, const char *method, const char *path, const char *headers)
{
	char req[1024];
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s\r\n", method, path,
			 headers ? headers : "");
	return http_exchange(port, req, (size_t)n);
}

/* Sends msgs[] from a to b and checks b gets each of them once, in
 * order per stream (pt_match). */
static void exchange(struct pt_node *a, struct pt_node *b, const struct raftmsg *msgs, size_t n)
{
	struct pt_matcher mt = { .msgs = msgs, .n = n };

	for (size_t i = 0; i < n; i++)
		CHECK_EQ(peer_send(a->p, &msgs[i]), 0);
	for (size_t i = 0; i < n; i++) {
		struct peer_event ev;
		CHECK_EQ(pt_next_msg(b, &ev, 10000, NULL), 0);
		pt_match(&mt, &ev.msg);
		CHECK_EQ(ev.id, a->id);
		peer_event_release(&ev);
	}
}

/* Every kind of message from a to b (pt_all_kinds). */
static void exchange_all_kinds(struct pt_node *a, struct pt_node *b, uint64_t term)
{
	struct raftmsg msgs[PT_ALL_KINDS];
	void *blocks[PT_ALL_KINDS];
	size_t n = pt_all_kinds(a->id, b->id, term, msgs, blocks);

	exchange(a, b, msgs, n);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
}

/* Waits for an event of kind from n, dropping messages. */
static bool wait_kind(struct pt_node *n, enum peer_event_kind kind, uint64_t id, int timeout_ms)
{
	struct peer_event ev;

	while (pt_next(n, &ev, timeout_ms) == 0) {
		bool hit = ev.kind == kind && ev.id == id;
		peer_event_release(&ev);
		if (hit)
			return true;
	}
	return false;
}

/* Waits up to timeout_ms until n's transport has refused at least k
 * stream requests (answered them with an error), or has attached a
 * writer to peer id: until the dials of id's stream readers were judged,
 * one way or the other. */
static bool wait_judged(struct pt_node *n, uint64_t id, uint64_t k, int timeout_ms)
{
	int64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	while (atomic_load(&n->p->stream_refusals) < k && !pt_stream_up(n, id, PEER_STREAM_MESSAGE) &&
	       !pt_stream_up(n, id, PEER_STREAM_MSGAPP)) {
		if (clock_now_ns() >= end)
			return false;
		usleep(10000);
	}
	return true;
}

static void drain(struct pt_node *n)
{
	struct peer_event ev;

	while (pt_next(n, &ev, 50) == 0)
		peer_event_release(&ev);
}

static void test_two_members(const char *url_a, const char *url_b, struct tls_ctx *sctx,
			     struct tls_ctx *cctx)
{
	struct pt_node a = { .sctx = sctx, .cctx = cctx }, b = { .sctx = sctx, .cctx = cctx };
	struct pt_node *pa = &a, *pb = &b;
	struct raftmsg m;
	void *blk;

	CHECK_EQ(pt_start(&a, 1, CLUSTER, url_a), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, url_b), 0);
	CHECK_EQ(peer_send(a.p, &(struct raftmsg){ .type = RAFT_MSG_VOTE, .from = 1, .to = 2 }),
		 -ENOENT);
	pt_members(&a, &pb, 1, NULL, 0);
	pt_members(&b, &pa, 1, NULL, 0);

	/* before the streams: the pipeline (a vote, and a MsgApp) */
	m = pt_msg(RAFT_MSG_VOTE, 1, 2, 3, 10, 0, 0, &blk);
	exchange(&a, &b, &m, 1);
	free(blk);
	m = pt_msg(RAFT_MSG_APP, 2, 1, 3, 10, 3, 100, &blk);
	exchange(&b, &a, &m, 1);
	free(blk);

	/* on the streams both ways */
	pt_wait_streams(&a, 2);
	pt_wait_streams(&b, 1);
	CHECK(peer_active_since(a.p, 2) > 0);
	exchange_all_kinds(&a, &b, 5);
	exchange_all_kinds(&b, &a, 6);

	/* big entries: 3 MiB in one, then 64 of 64 KiB */
	m = pt_msg(RAFT_MSG_APP, 1, 2, 5, 5000, 1, 3 << 20, &blk);
	exchange(&a, &b, &m, 1);
	free(blk);
	m = pt_msg(RAFT_MSG_APP, 1, 2, 5, 5001, 64, 64 << 10, &blk);
	exchange(&a, &b, &m, 1);
	free(blk);

	pt_stop(&a);
	pt_stop(&b);
}

/* The outbox's release after a WAL batch, with wakes held for the batch:
 * the held messages go out in order, less the
 * accepted MsgAppResp a later one of the same term released with it
 * covers; rejections and other terms are kept. */
static void test_outbox_release(void)
{
	struct pt_node a = { 0 }, b = { 0 };
	struct pt_node *pa = &a, *pb = &b;
	struct outbox o;
	const struct raft_msg held[] = {
		{ .type = RAFT_MSG_APP_RESP, .from = 1, .to = 2, .term = 5, .index = 10 },
		{ .type = RAFT_MSG_HEARTBEAT_RESP, .from = 1, .to = 2, .term = 5, .context = 7 },
		{ .type = RAFT_MSG_APP_RESP, .from = 1, .to = 2, .term = 5, .index = 12 },
		{ .type = RAFT_MSG_APP_RESP, .from = 1, .to = 2, .term = 5, .index = 11,
		  .reject = true, .reject_hint = 12 },
		{ .type = RAFT_MSG_APP_RESP, .from = 1, .to = 2, .term = 5, .index = 12 },
		{ .type = RAFT_MSG_APP_RESP, .from = 1, .to = 2, .term = 6, .index = 13 },
	};
	const uint64_t seqs[] = { 1, 1, 2, 2, 3, 3 };
	/* what b gets after each release: indexes into held */
	const size_t first[] = { 1, 2, 3 }, second[] = { 4, 5 };

	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	pt_members(&a, &pb, 1, NULL, 0);
	pt_members(&b, &pa, 1, NULL, 0);
	pt_wait_streams(&a, 2);
	outbox_init(&o, a.p);
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
		CHECK_EQ(outbox_hold(&o, &held[i], seqs[i]), 0);
	for (int round = 0; round < 2; round++) {
		const size_t *want = round ? second : first;
		size_t n_want = round ? 2 : 3;
		outbox_release(&o, round ? 3 : 2);
		for (size_t i = 0; i < n_want; i++) {
			const struct raft_msg *m = &held[want[i]];
			struct peer_event ev;
			CHECK_EQ(pt_next_msg(&b, &ev, 10000, NULL), 0);
			CHECK_EQ(ev.msg.type, (int32_t)m->type);
			CHECK_EQ(ev.msg.term, m->term);
			CHECK_EQ(ev.msg.index, m->index);
			CHECK_EQ(ev.msg.reject, m->reject);
			CHECK_EQ(ev.msg.reject_hint, m->reject_hint);
			peer_event_release(&ev);
		}
	}
	CHECK_EQ(o.superseded, 1);
	CHECK_EQ(o.n_held, 0);
	struct peer_event ev;
	CHECK_EQ(pt_next_msg(&b, &ev, 200, NULL), -ETIMEDOUT);
	outbox_free(&o);
	pt_stop(&a);
	pt_stop(&b);
}

/* A peer that stops: messages to it are reported unreachable; when it
 * comes back on its address the streams come back. */
static void test_reconnect(void)
{
	struct pt_node a = { 0 }, b = { 0 };
	struct pt_node *pa = &a, *pb = &b;
	char url_b[300];
	struct raftmsg m;
	void *blk;

	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	snprintf(url_b, sizeof(url_b), "%s", b.url);
	pt_members(&a, &pb, 1, NULL, 0);
	pt_members(&b, &pa, 1, NULL, 0);
	pt_wait_streams(&a, 2);
	pt_wait_streams(&b, 1);
	drain(&a);

	pt_stop(&b);
	/* a's stream readers from b break and b's port refuses a's dials:
	 * b is down, said once */
	CHECK(wait_kind(&a, PEER_EV_DOWN, 2, 5000));
	CHECK(!wait_kind(&a, PEER_EV_DOWN, 2, 500));
	/* the stream writers notice (or the posts fail): unreachable */
	m = pt_msg(RAFT_MSG_HEARTBEAT, 1, 2, 5, 0, 0, 0, &blk);
	bool unreachable = false;
	for (int i = 0; i < 100 && !unreachable; i++) {
		CHECK_EQ(peer_send(a.p, &m), 0);
		unreachable = wait_kind(&a, PEER_EV_UNREACHABLE, 2, 100);
	}
	CHECK(unreachable);
	/* and the peer turns inactive (just after the report) */
	for (int i = 0; i < 500 && peer_active_since(a.p, 2); i++)
		usleep(10000);
	CHECK_EQ(peer_active_since(a.p, 2), 0);
	free(blk);

	/* back on the same address */
	memset(&b, 0, sizeof(b));
	CHECK_EQ(pt_start(&b, 2, CLUSTER, url_b), 0);
	pt_members(&b, &pa, 1, NULL, 0);
	pt_wait_streams(&a, 2);
	pt_wait_streams(&b, 1);
	exchange_all_kinds(&a, &b, 7);
	exchange_all_kinds(&b, &a, 7);
	/* its streams came up again: down again is said again */
	pt_stop(&b);
	CHECK(wait_kind(&a, PEER_EV_DOWN, 2, 5000));
	pt_stop(&a);
}

/* A member of another cluster is refused (412 "cluster ID mismatch"):
 * nothing arrives, messages to it are unreachable; a removed member's
 * streams get 410 and its posts 403, and it learns it was removed. */
static void test_refusals(void)
{
	struct pt_node a = { 0 }, b = { 0 }, c = { 0 };
	struct pt_node *pa = &a, *pb = &b, *pc = &c;
	struct raftmsg m;
	void *blk;
	char *ans, hdr[256];

	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&c, 3, CLUSTER + 1, "http://127.0.0.1:0"), 0);
	pt_members(&a, &pc, 1, NULL, 0);
	pt_members(&c, &pa, 1, NULL, 0);
	m = pt_msg(RAFT_MSG_VOTE, 1, 3, 5, 0, 0, 0, &blk);
	CHECK_EQ(peer_send(a.p, &m), 0);
	CHECK(wait_kind(&a, PEER_EV_UNREACHABLE, 3, 5000));
	free(blk);
	/* once each has judged the other's stream dials (both streams, and
	 * each dialed again after a refusal), none of them attached a writer */
	CHECK(wait_judged(&a, 3, 4, 30000));
	CHECK(wait_judged(&c, 1, 4, 30000));
	for (int s = 0; s < PEER_N_STREAMS; s++) {
		CHECK(!pt_stream_up(&a, 3, s));
		CHECK(!pt_stream_up(&c, 1, s));
	}
	struct peer_event ev;
	CHECK_EQ(pt_next_msg(&c, &ev, 200, NULL), -ETIMEDOUT);

	/* the stream handler's answers, in etcd's order of checks */
	uint16_t port = peer_listen_port(a.p, 0);
	snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-ID: %x\r\nX-Server-Version: 3.4.0\r\n"
		 "X-Raft-To: 1\r\n", CLUSTER + 1);
	ans = http_get(port, "GET", "/raft/stream/message/3", hdr);
	CHECK(strstr(ans, "HTTP/1.1 412 Precondition Failed\r\n"));
	CHECK(strstr(ans, "\r\n\r\ncluster ID mismatch\n"));
	CHECK(strstr(ans, "X-Etcd-Cluster-Id: 1000\r\n"));
	snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-ID: %x\r\nX-Server-Version: 2.3.0\r\n"
		 "X-Min-Cluster-Version: 2.3.0\r\n", CLUSTER);
	ans = http_get(port, "GET", "/raft/stream/message/3", hdr);
	CHECK(strstr(ans, "\r\n\r\nincompatible version\n"));
	snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-ID: %x\r\nX-Raft-To: 1\r\n"
		 "X-Server-Version: 3.4.0\r\n", CLUSTER);
	ans = http_get(port, "GET", "/raft/stream/msgappv2/3", hdr);
	CHECK(strstr(ans, "HTTP/1.1 404 Not Found\r\n") && strstr(ans, "invalid path\n"));
	ans = http_get(port, "GET", "/raft/stream/message/xyz", hdr);
	CHECK(strstr(ans, "\r\n\r\ninvalid from\n"));
	ans = http_get(port, "GET", "/raft/stream/message/9", hdr);
	CHECK(strstr(ans, "\r\n\r\nerror sender not found\n"));
	ans = http_get(port, "POST", "/raft/stream/message/3", hdr);
	CHECK(strstr(ans, "HTTP/1.1 405 Method Not Allowed\r\n") && strstr(ans, "Allow: GET\r\n"));
	snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-ID: %x\r\nX-Raft-To: 7\r\n"
		 "X-Server-Version: 3.4.0\r\n", CLUSTER);
	ans = http_get(port, "GET", "/raft/stream/message/3", hdr);
	CHECK(strstr(ans, "\r\n\r\nto field mismatch\n"));

	/* b was removed: a answers its streams 410, its posts 403 */
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	uint64_t removed = 2;
	struct pt_node *both[] = { pb, pc };
	pt_members(&a, both, 2, &removed, 1);
	pt_members(&b, &pa, 1, NULL, 0);
	CHECK(wait_kind(&b, PEER_EV_REMOVED, 1, 5000));
	snprintf(hdr, sizeof(hdr), "X-Etcd-Cluster-ID: %x\r\nX-Raft-To: 1\r\n"
		 "X-Server-Version: 3.4.0\r\n", CLUSTER);
	ans = http_get(port, "GET", "/raft/stream/message/2", hdr);
	CHECK(strstr(ans, "HTTP/1.1 410 Gone\r\n") && strstr(ans, "\r\n\r\nremoved member\n"));
	pt_stop(&b);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	pt_members(&b, &pa, 1, NULL, 0);
	m = pt_msg(RAFT_MSG_VOTE, 2, 1, 5, 0, 0, 0, &blk);
	CHECK_EQ(peer_send(b.p, &m), 0); /* the pipeline: streams are refused */
	free(blk);
	CHECK(wait_kind(&b, PEER_EV_REMOVED, 1, 5000));
	CHECK_EQ(pt_next_msg(&a, &ev, 300, NULL), -ETIMEDOUT);
	pt_stop(&a);
	pt_stop(&b);
	pt_stop(&c);
}

/* The routes besides raft's, and what a malformed request gets. */
struct promote_call {
	uint16_t port;
	char answer[1024];
};

static void *promote_post(void *arg)
{
	struct promote_call *pc = arg;
	snprintf(pc->answer, sizeof(pc->answer), "%s",
		 http_get(pc->port, "POST", "/members/promote/5", NULL));
	return NULL;
}

/* The next PEER_EV_PROMOTE (its token), failing the test after 5 s. */
static uint64_t next_promote(struct pt_node *a, uint64_t want_id)
{
	struct peer_event ev;
	while (pt_next(a, &ev, 5000) == 0) {
		bool hit = ev.kind == PEER_EV_PROMOTE && ev.id == want_id;
		uint64_t token = ev.token;
		peer_event_release(&ev);
		if (hit)
			return token;
	}
	fprintf(stderr, "no PEER_EV_PROMOTE for %llu\n", (unsigned long long)want_id);
	exit(1);
}

/* POST /members/promote/<id> waits for the loop thread's answer (etcd's
 * peerMemberPromoteHandler); peer_promote_forward makes that request and
 * reports the answer (here to the member itself). */
static void test_promote(struct pt_node *a, uint16_t port)
{
	static const char refused[] =
		"etcdserver: can only promote a learner member which is in sync with leader\n";
	static const char members[] = "[{\"id\":5,\"peerURLs\":[\"http://127.0.0.1:1\"]}]\n";
	struct promote_call pc = { .port = port };
	struct peer_event ev;
	pthread_t t;

	CHECK_EQ(pthread_create(&t, NULL, promote_post, &pc), 0);
	uint64_t token = next_promote(a, 5);
	CHECK_EQ(peer_promote_answer(a->p, token, 412, "text/plain; charset=utf-8", refused,
				     sizeof(refused) - 1), 0);
	pthread_join(t, NULL);
	CHECK(strstr(pc.answer, "HTTP/1.1 412 Precondition Failed\r\n"));
	CHECK(strstr(pc.answer, "X-Etcd-Cluster-Id: 1000\r\n"));
	CHECK(strstr(pc.answer, "\r\n\r\netcdserver: can only promote a learner member which is in sync with leader\n"));
	/* an answer for a request that is gone is dropped */
	CHECK_EQ(peer_promote_answer(a->p, token, 200, "application/json", "[]", 2), 0);

	char url[64];
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
	const char *urls[] = { "http://127.0.0.1:1", url };
	CHECK_EQ(peer_promote_forward(a->p, urls, 2, 5, 77, 5000), 0);
	token = next_promote(a, 5);
	CHECK_EQ(peer_promote_answer(a->p, token, 200, "application/json", members,
				     sizeof(members) - 1), 0);
	bool done = false;
	while (!done && pt_next(a, &ev, 5000) == 0) {
		if (ev.kind == PEER_EV_PROMOTE_DONE) {
			CHECK_EQ(ev.token, 77);
			CHECK_EQ(ev.status, 200);
			CHECK(ev.len == sizeof(members) - 1 && memcmp(ev.buf, members, ev.len) == 0);
			done = true;
		}
		peer_event_release(&ev);
	}
	CHECK(done);
	/* nobody answers at all: an error instead of a status */
	const char *none[] = { "http://127.0.0.1:1" };
	CHECK_EQ(peer_promote_forward(a->p, none, 1, 5, 78, 2000), 0);
	done = false;
	while (!done && pt_next(a, &ev, 5000) == 0) {
		if (ev.kind == PEER_EV_PROMOTE_DONE) {
			CHECK(ev.token == 78 && ev.status < 0);
			done = true;
		}
		peer_event_release(&ev);
	}
	CHECK(done);
}

static void test_http_routes(void)
{
	struct pt_node a = { 0 };
	const char members[] = "[{\"id\":1,\"peerURLs\":[\"http://127.0.0.1:2380\"],\"name\":\"a\"}]";
	char *ans;

	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	uint16_t port = peer_listen_port(a.p, 0);
	ans = http_get(port, "GET", "/version", NULL);
	CHECK(strstr(ans, "HTTP/1.1 200 OK\r\n"));
	CHECK(strstr(ans, "\r\n\r\n{\"etcdserver\":\"3.4.0\",\"etcdcluster\":\"not_decided\"}"));
	CHECK_EQ(peer_set_cluster_version(a.p, "3.4.0"), 0);
	ans = http_get(port, "GET", "/version", NULL);
	CHECK(strstr(ans, "{\"etcdserver\":\"3.4.0\",\"etcdcluster\":\"3.4.0\"}"));
	ans = http_get(port, "PUT", "/version", NULL);
	CHECK(strstr(ans, "HTTP/1.1 405 Method Not Allowed\r\n"));

	CHECK_EQ(peer_set_members_json(a.p, members, sizeof(members) - 1), 0);
	ans = http_get(port, "GET", "/members", NULL);
	CHECK(strstr(ans, "Content-Type: application/json\r\n"));
	CHECK(strstr(ans, "X-Etcd-Cluster-Id: 1000\r\n"));
	CHECK(strstr(ans, "\r\n\r\n[{\"id\":1,"));

	ans = http_get(port, "GET", "/raft/probing", NULL);
	CHECK(strstr(ans, "HTTP/1.1 200 OK\r\n") && strstr(ans, "{\"OK\":true,\"Now\":\""));
	ans = http_get(port, "GET", "/nothing", NULL);
	CHECK(strstr(ans, "HTTP/1.1 404 Not Found\r\n") && strstr(ans, "404 page not found\n"));
	ans = http_get(port, "POST", "/members/promote/x5", NULL);
	CHECK(strstr(ans, "HTTP/1.1 404 Not Found\r\n") && strstr(ans, "member x5 not found in cluster\n"));
	ans = http_get(port, "GET", "/members/promote/5", NULL);
	CHECK(strstr(ans, "HTTP/1.1 405 Method Not Allowed\r\n") && strstr(ans, "Allow: POST\r\n"));
	test_promote(&a, port);
	ans = http_get(port, "GET", "/raft", NULL);
	CHECK(strstr(ans, "HTTP/1.1 405 Method Not Allowed\r\n") && strstr(ans, "Allow: POST\r\n"));

	/* a pipeline post that is not raftpb, and one of another cluster */
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "POST /raft HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			 "X-Etcd-Cluster-ID: 1000\r\nX-Server-Version: 3.4.0\r\nContent-Length: 3\r\n\r\n\xff\xff\xff");
	ans = http_exchange(port, req, (size_t)n);
	CHECK(strstr(ans, "HTTP/1.1 400 Bad Request\r\n"));
	CHECK(strstr(ans, "error unmarshalling raft message\n"));
	n = snprintf(req, sizeof(req),
		     "POST /raft HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		     "X-Etcd-Cluster-ID: 1001\r\nX-Server-Version: 3.4.0\r\nContent-Length: 2\r\n\r\n\x08\x05");
	ans = http_exchange(port, req, (size_t)n);
	CHECK(strstr(ans, "\r\n\r\ncluster ID mismatch\n"));

	/* keep-alive: two posts on one connection, the second chunked */
	n = snprintf(req, sizeof(req),
		     "POST /raft HTTP/1.1\r\nHost: x\r\nX-Etcd-Cluster-ID: 1000\r\nX-Server-Version: 3.4.0\r\n"
		     "Content-Length: 6\r\n\r\n\x08\x05\x10\x01\x18\x07"
		     "POST /raft HTTP/1.1\r\nHost: x\r\nX-Etcd-Cluster-ID: 1000\r\nX-Server-Version: 3.4.0\r\n"
		     "Connection: close\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "2\r\n\x08\x05\r\n4\r\n\x10\x01\x18\x07\r\n0\r\n\r\n");
	ans = http_exchange(port, req, (size_t)n);
	CHECK(strstr(ans, "HTTP/1.1 204 No Content\r\n"));
	CHECK(strstr(strstr(ans, "204") + 3, "HTTP/1.1 204 No Content\r\n"));
	for (int i = 0; i < 2; i++) {
		struct peer_event ev;
		CHECK_EQ(pt_next_msg(&a, &ev, 2000, NULL), 0);
		CHECK_EQ(ev.msg.type, RAFT_MSG_VOTE);
		CHECK_EQ(ev.msg.from, 7);
		peer_event_release(&ev);
	}

	/* malformed heads: refused and closed, the server goes on */
	static const char *const bad[] = {
		"GARBAGE\r\n\r\n",
		"GET /version HTTP/2.0\r\n\r\n",
		"GET /version HTTP/1.1\r\nNo-Colon\r\n\r\n",
		"POST /raft HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
		"POST /raft HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"GET /version HTTP/1.1\r\n Folded: x\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ans = http_exchange(port, bad[i], strlen(bad[i]));
		if (!strstr(ans, "HTTP/1.1 400 Bad Request\r\n")) {
			fprintf(stderr, "bad request %zu answered: %s\n", i, ans);
			exit(1);
		}
	}
	static char huge[HTTP_MAX_HEAD + 1024];
	n = snprintf(huge, sizeof(huge), "GET /version HTTP/1.1\r\nX: ");
	memset(huge + n, 'a', sizeof(huge) - (size_t)n);
	ans = http_exchange(port, huge, sizeof(huge));
	CHECK(strstr(ans, "HTTP/1.1 431 "));
	ans = http_get(port, "GET", "/version", NULL);
	CHECK(strstr(ans, "HTTP/1.1 200 OK\r\n"));
	pt_stop(&a);
}

/* Messages to a peer that never answers are reported unreachable. */
static void test_unreachable(void)
{
	struct pt_node a = { 0 }, ghost = { .id = 9 };
	struct pt_node *pg = &ghost;
	struct raftmsg m;
	void *blk;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);

	/* a port that is certainly closed: bound, never listened on */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	snprintf(ghost.url, sizeof(ghost.url), "http://127.0.0.1:%u", ntohs(sa.sin_port));
	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	pt_members(&a, &pg, 1, NULL, 0);
	m = pt_msg(RAFT_MSG_APP, 1, 9, 5, 10, 2, 10, &blk);
	CHECK_EQ(peer_send(a.p, &m), 0);
	CHECK(wait_kind(&a, PEER_EV_UNREACHABLE, 9, 5000));
	/* a full pipeline queue drops at once and says so */
	for (int i = 0; i < 200; i++)
		CHECK_EQ(peer_send(a.p, &m), 0);
	CHECK(wait_kind(&a, PEER_EV_UNREACHABLE, 9, 5000));
	free(blk);
	CHECK_EQ(peer_active_since(a.p, 9), 0);
	/* a member set without it drops it */
	CHECK_EQ(peer_set_members(a.p, NULL, 0, NULL, 0), 0);
	CHECK_EQ(peer_send(a.p, &m), -ENOENT);
	pt_stop(&a);
	close(fd);
}

/* A snapshot: the MsgSnap and the db file after it, written to the
 * receiver's snap dir. */
static void test_snapshot(void)
{
	struct pt_node a = { 0 }, b = { 0 };
	struct pt_node *pa = &a, *pb = &b;
	char db[300];
	size_t size = (5 << 20) + 123;
	uint8_t *data = malloc(size);
	struct peer_event ev;

	CHECK(data);
	for (size_t i = 0; i < size; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 12));
	wt_path(db, sizeof(db), "db");
	wt_write_file(db, data, size);
	wt_path(b.snap_dir, sizeof(b.snap_dir), "snap");
	CHECK(mkdir(b.snap_dir, 0700) == 0);
	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	pt_members(&a, &pb, 1, NULL, 0);
	pt_members(&b, &pa, 1, NULL, 0);

	struct raftmsg m = pt_snap_msg(1, 2, 77, 4);
	CHECK_EQ(peer_send_snapshot(a.p, &m, db), 0);
	CHECK_EQ(pt_next_msg(&b, &ev, 20000, NULL), 0);
	pt_check_snap(&ev, &m, data, size);
	CHECK(wait_kind(&a, PEER_EV_SNAPSHOT_DONE, 2, 10000));

	/* to a member that takes no snapshots: refused, reported */
	struct pt_node *pa2 = &a;
	CHECK_EQ(peer_send_snapshot(b.p, &(struct raftmsg){ .type = RAFT_MSG_SNAP, .from = 2, .to = 1 },
				    db), 0);
	bool failed = false;
	for (int i = 0; i < 100 && !failed; i++) {
		struct peer_event e2;
		if (pt_next(&b, &e2, 100))
			continue;
		failed = e2.kind == PEER_EV_SNAPSHOT_DONE && !e2.ok;
		peer_event_release(&e2);
	}
	CHECK(failed);
	(void)pa2;
	CHECK_EQ(peer_send_snapshot(a.p, &(struct raftmsg){ .type = RAFT_MSG_SNAP, .to = 5 }, db),
		 -ENOENT);
	pt_stop(&a);
	pt_stop(&b);
	free(data);
}

/* TLS contexts from etcd's self-signed certificate for 127.0.0.1. */
static void tls_contexts(struct tls_ctx **sctx, struct tls_ctx **cctx)
{
	struct tls_info info = { .side = TLS_SIDE_PEER };
	const char *hosts[] = { "127.0.0.1", "localhost" };
	char dir[300];

	wt_path(dir, sizeof(dir), "fixtures");
	CHECK_EQ(tls_self_cert(dir, hosts, 2, &info), 0);
	CHECK_EQ(tls_ctx_new(&info, TLS_SERVER, sctx), 0);
	CHECK_EQ(tls_ctx_new(&info, TLS_CLIENT, cctx), 0);
	tls_info_free(&info);
}

/* A stream chunk's head: the size in lower-case hex, CRLF. */
static void test_chunk_head(void)
{
	static const struct {
		size_t size;
		const char *head;
	} cases[] = {
		{ 0, "0\r\n" }, { 9, "9\r\n" }, { 10, "a\r\n" }, { 0xf, "f\r\n" },
		{ 0x10, "10\r\n" }, { 4096, "1000\r\n" }, { 0xabcdef, "abcdef\r\n" },
		{ SIZE_MAX, "ffffffffffffffff\r\n" },
	};
	struct peer_buf b = { 0 };
	size_t at = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ(peer_buf_chunk_head(&b, cases[i].size), 0);
		CHECK_EQ(b.len - at, strlen(cases[i].head));
		CHECK(memcmp(b.p + at, cases[i].head, b.len - at) == 0);
		at = b.len;
	}
	peer_buf_free(&b);
}

int main(void)
{
	struct tls_ctx *sctx, *cctx;
	char cwd[512];

	signal(SIGPIPE, SIG_IGN);
	wt_count_allocs();
	if (!getenv("CETCD_TEST_VERBOSE"))
		log_set_level(LOG_LEVEL_ERROR);

	const char *only = getenv("TEST_PEER_ONLY");
	if (!only || !strcmp(only, "chunk"))
		test_chunk_head();
	if (!only || !strcmp(only, "routes"))
		test_http_routes();
	if (!only || !strcmp(only, "http"))
		test_two_members("http://127.0.0.1:0", "http://127.0.0.1:0", NULL, NULL);
	if (!only || !strcmp(only, "reconnect"))
		test_reconnect();
	if (!only || !strcmp(only, "refusals"))
		test_refusals();
	if (!only || !strcmp(only, "unreachable"))
		test_unreachable();
	if (!only || !strcmp(only, "snapshot"))
		test_snapshot();
	if (!only || !strcmp(only, "outbox"))
		test_outbox_release();
	if (only) {
		CHECK_EQ(wt_live_allocs(), 0);
		return 0;
	}

	tls_contexts(&sctx, &cctx);
	test_two_members("https://127.0.0.1:0", "https://127.0.0.1:0", sctx, cctx);

	/* unix sockets name their file as etcd does: host:port, relative */
	CHECK(getcwd(cwd, sizeof(cwd)));
	CHECK(chdir(wt_scratch()) == 0);
	test_two_members("unix://peer-a:1", "unix://peer-b:2", NULL, NULL);
	test_two_members("unixs://peer-c:1", "unixs://peer-d:2", sctx, cctx);
	CHECK(chdir(cwd) == 0);
	tls_ctx_free(sctx);
	tls_ctx_free(cctx);

	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_peer: ok\n");
	return 0;
}
