/*
 * The peer transport driven by the caller's thread (peer_opts.driven), as
 * raftd's loop drives it: two transports in this process and one thread
 * that polls both, runs both, sends and takes events, with no thread of
 * the transports' own. Messages of every kind go over the pipeline and
 * then over both streams, a big entry and a snapshot too, and a peer
 * that stops is reported unreachable. A peer that stops reading holds
 * the sender's memory to its limits: the stream's queue to its bytes,
 * the connection's buffer to its high water and a message. One
 * transport knows the other by a host name,
 * which its resolver thread looks up while the drive goes on. Every
 * raftd allocation is counted and none may be left at the end.
 */
#include <netdb.h>

#include "peer_util.h"
#include "base/clock/clock.h"

#define CLUSTER 0x2000

/* One round of what raftd's loop does: each transport's run (its timers,
 * what was sent), then a wait of up to max_ms for its sockets, polled
 * when readable. */
static void drive(struct pt_node *const *v, size_t n, int max_ms)
{
	struct pollfd pf[4];
	int wait_ms = max_ms;

	CHECK(n <= 4);
	for (size_t i = 0; i < n; i++) {
		int ms = peer_run(v[i]->p);
		if (ms >= 0 && ms < wait_ms)
			wait_ms = ms;
		pf[i] = (struct pollfd){ .fd = peer_poll_fd(v[i]->p), .events = POLLIN };
	}
	CHECK(poll(pf, n, wait_ms) >= 0);
	for (size_t i = 0; i < n; i++)
		if (pf[i].revents & POLLIN)
			peer_poll(v[i]->p);
}

/* The bytes a's stream s to id has queued, and its connection holds
 * unwritten. */
static void stream_held(struct pt_node *a, uint64_t id, int s, size_t *queued, size_t *out)
{
	pthread_mutex_lock(&a->p->mu);
	struct peer_remote *r = peer_remote_find(a->p, id);
	*queued = r ? r->wq[s].bytes : 0;
	pthread_mutex_unlock(&a->p->mu);
	*out = r && r->writer[s] ? peer_buf_size(&r->writer[s]->out) : 0;
}

/* The next event of to, driving every transport meanwhile: 0 or
 * -ETIMEDOUT. */
static int driven_next(struct pt_node *const *v, size_t n, struct pt_node *to,
		       struct peer_event *ev, int timeout_ms)
{
	int64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	while (clock_now_ns() < end) {
		if (peer_recv(to->p, ev) == 0)
			return 0;
		drive(v, n, 10);
	}
	return peer_recv(to->p, ev) == 0 ? 0 : -ETIMEDOUT;
}

/* Sends msgs[] from a to b and checks b gets each once, in order per
 * stream. */
static void driven_exchange(struct pt_node *const *v, struct pt_node *a, struct pt_node *b,
			    const struct raftmsg *msgs, size_t n)
{
	struct pt_matcher mt = { .msgs = msgs, .n = n };

	for (size_t i = 0; i < n; i++)
		CHECK_EQ(peer_send(a->p, &msgs[i]), 0);
	for (size_t i = 0; i < n;) {
		struct peer_event ev;
		CHECK_EQ(driven_next(v, 2, b, &ev, 10000), 0);
		if (ev.kind == PEER_EV_MESSAGE) {
			pt_match(&mt, &ev.msg);
			CHECK_EQ(ev.id, a->id);
			i++;
		}
		peer_event_release(&ev);
	}
}

static void driven_all_kinds(struct pt_node *const *v, struct pt_node *a, struct pt_node *b,
			     uint64_t term)
{
	struct raftmsg msgs[PT_ALL_KINDS];
	void *blocks[PT_ALL_KINDS];
	size_t n = pt_all_kinds(a->id, b->id, term, msgs, blocks);

	driven_exchange(v, a, b, msgs, n);
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
}

/* Whether "localhost" resolves to 127.0.0.1 first, as a transport that
 * listens there needs when it is dialed by that name. */
static bool localhost_is_v4(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	bool v4;

	if (getaddrinfo("localhost", "1", &hints, &ai))
		return false;
	v4 = ai->ai_family == AF_INET &&
	     ((struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	freeaddrinfo(ai);
	return v4;
}

/* peer_url_sockaddr_numeric: addresses and unix paths at once, a name
 * refused with -EAGAIN. */
static void test_numeric(void)
{
	struct sockaddr_storage ss;
	struct peer_url u;
	socklen_t sl;

	CHECK_EQ(peer_url_parse("http://127.0.0.1:2380", &u), 0);
	CHECK_EQ(peer_url_sockaddr_numeric(&u, &ss, &sl), 0);
	CHECK_EQ(ss.ss_family, AF_INET);
	CHECK_EQ(ntohs(((struct sockaddr_in *)&ss)->sin_port), 2380);
	CHECK_EQ(peer_url_parse("https://[::1]:2380", &u), 0);
	CHECK_EQ(peer_url_sockaddr_numeric(&u, &ss, &sl), 0);
	CHECK_EQ(ss.ss_family, AF_INET6);
	CHECK_EQ(peer_url_parse("unix://peer-a:1", &u), 0);
	CHECK_EQ(peer_url_sockaddr_numeric(&u, &ss, &sl), 0);
	CHECK_EQ(ss.ss_family, AF_UNIX);
	CHECK_EQ(peer_url_parse("http://localhost:2380", &u), 0);
	CHECK_EQ(peer_url_sockaddr_numeric(&u, &ss, &sl), -EAGAIN);
}

int main(void)
{
	struct pt_node a = { .driven = true, .queue_bytes = 1 << 20 }, b = { .driven = true };
	struct pt_node *pa = &a, *pb = &b, *const both[] = { &a, &b };
	struct peer_event ev;
	struct raftmsg m;
	void *blk;
	bool unreachable = false;

	signal(SIGPIPE, SIG_IGN);
	wt_count_allocs();
	if (!getenv("CETCD_TEST_VERBOSE"))
		log_set_level(LOG_LEVEL_ERROR);

	test_numeric();
	wt_path(b.snap_dir, sizeof(b.snap_dir), "snap");
	CHECK(mkdir(b.snap_dir, 0700) == 0);
	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	CHECK_EQ(pt_start(&b, 2, CLUSTER, "http://127.0.0.1:0"), 0);
	/* a dials b by name where localhost is 127.0.0.1 */
	if (localhost_is_v4())
		snprintf(b.url, sizeof(b.url), "http://localhost:%u", peer_listen_port(b.p, 0));
	else
		printf("test_peer_driven: localhost is not 127.0.0.1 first; b is dialed by address\n");
	pt_members(&a, &pb, 1, NULL, 0);
	pt_members(&b, &pa, 1, NULL, 0);

	/* before the streams are up: the pipeline */
	m = pt_msg(RAFT_MSG_VOTE, 2, 1, 3, 10, 0, 0, &blk);
	driven_exchange(both, &b, &a, &m, 1);
	free(blk);

	/* the streams come up with nothing but the drive */
	for (int i = 0; i < 1000; i++) {
		if (pt_stream_up(&a, 2, PEER_STREAM_MSGAPP) && pt_stream_up(&a, 2, PEER_STREAM_MESSAGE) &&
		    pt_stream_up(&b, 1, PEER_STREAM_MSGAPP) && pt_stream_up(&b, 1, PEER_STREAM_MESSAGE))
			break;
		drive(both, 2, 10);
	}
	CHECK(pt_stream_up(&a, 2, PEER_STREAM_MSGAPP) && pt_stream_up(&a, 2, PEER_STREAM_MESSAGE));
	CHECK(pt_stream_up(&b, 1, PEER_STREAM_MSGAPP) && pt_stream_up(&b, 1, PEER_STREAM_MESSAGE));
	CHECK(peer_active_since(a.p, 2) > 0);
	driven_all_kinds(both, &a, &b, 5);
	driven_all_kinds(both, &b, &a, 6);
	m = pt_msg(RAFT_MSG_APP, 1, 2, 5, 5000, 1, 3 << 20, &blk);
	driven_exchange(both, &a, &b, &m, 1);
	free(blk);

	/* a snapshot: b's db file is made durable on a thread, whose end
	 * wakes b's drive through its poll fd; a hears it went through */
	{
		char db[300];
		size_t size = (2 << 20) + 77;
		uint8_t *data = malloc(size);
		bool done = false;

		CHECK(data);
		for (size_t i = 0; i < size; i++)
			data[i] = (uint8_t)(i * 7 + (i >> 10));
		wt_path(db, sizeof(db), "db");
		wt_write_file(db, data, size);
		m = pt_snap_msg(1, 2, 90, 5);
		CHECK_EQ(peer_send_snapshot(a.p, &m, db), 0);
		do
			CHECK_EQ(driven_next(both, 2, &b, &ev, 20000), 0);
		while (ev.kind != PEER_EV_MESSAGE && (peer_event_release(&ev), 1));
		pt_check_snap(&ev, &m, data, size);
		while (!done && driven_next(both, 2, &a, &ev, 10000) == 0) {
			done = ev.kind == PEER_EV_SNAPSHOT_DONE && ev.id == 2;
			CHECK(!done || ev.ok);
			peer_event_release(&ev);
		}
		CHECK(done);
		free(data);
	}

	/* b stops reading (is not driven) while a sends it 64 MiB of
	 * MsgApps, 64 KiB each: past what the sockets take, a's connection
	 * holds at most its high water and a message, its queue at most
	 * queue_bytes, and what does not fit is dropped and reported. Then
	 * b reads again, and the stream goes on (the encoder's state is
	 * that of the last message queued, not of one dropped). */
	{
		size_t entry = 64 << 10, queued, out, max_queued = 0, max_out = 0;
		int drops = 0, sent = 0;

		for (uint64_t i = 0; i < 1024; i++) {
			m = pt_msg(RAFT_MSG_APP, 1, 2, 5, 6000 + i, 1, entry, &blk);
			CHECK_EQ(peer_send(a.p, &m), 0);
			free(blk);
			sent++;
			drive(&pa, 1, 0);
			while (peer_recv(a.p, &ev) == 0) {
				drops += ev.kind == PEER_EV_UNREACHABLE && ev.id == 2;
				peer_event_release(&ev);
			}
			stream_held(&a, 2, PEER_STREAM_MSGAPP, &queued, &out);
			if (queued > max_queued)
				max_queued = queued;
			if (out > max_out)
				max_out = out;
		}
		printf("test_peer_driven: a stalled peer: %d MsgApps sent, %d drops reported, "
		       "at most %zu bytes queued and %zu in the connection\n",
		       sent, drops, max_queued, max_out);
		CHECK(drops > 0);
		CHECK(max_queued <= a.queue_bytes);
		CHECK(max_out <= PEER_OUT_HIGH_WATER + entry + 1024);
		/* b reads again: what was queued arrives, then a new one */
		int got = 0;
		for (;;) {
			stream_held(&a, 2, PEER_STREAM_MSGAPP, &queued, &out);
			if (!queued && !out)
				break;
			if (driven_next(both, 2, &b, &ev, 5000) != 0)
				break;
			got += ev.kind == PEER_EV_MESSAGE;
			peer_event_release(&ev);
		}
		CHECK(!queued && !out);
		CHECK(got > 0);
		while (driven_next(both, 2, &b, &ev, 200) == 0)
			peer_event_release(&ev);
		m = pt_msg(RAFT_MSG_APP, 1, 2, 5, 9000, 2, 100, &blk);
		driven_exchange(both, &a, &b, &m, 1);
		free(blk);
		CHECK(pt_stream_up(&a, 2, PEER_STREAM_MSGAPP));
	}

	/* b gone: a's messages to it are reported unreachable */
	pt_stop(&b);
	m = pt_msg(RAFT_MSG_HEARTBEAT, 1, 2, 5, 0, 0, 0, &blk);
	for (int i = 0; i < 200 && !unreachable; i++) {
		CHECK_EQ(peer_send(a.p, &m), 0);
		if (driven_next(both, 1, &a, &ev, 50) == 0) {
			unreachable = ev.kind == PEER_EV_UNREACHABLE && ev.id == 2;
			peer_event_release(&ev);
		}
	}
	free(blk);
	CHECK(unreachable);
	pt_stop(&a);

	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_peer_driven: ok\n");
	return 0;
}
