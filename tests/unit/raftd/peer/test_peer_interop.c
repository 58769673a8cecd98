/*
 * cetcd's peer transport against etcd 3.4's own (rafthttp.Transport from
 * Debian's golang-etcd-server-dev, run by tests/tools/peerinterop with a
 * stub Raft): the pipeline both ways before the streams are up, every
 * kind of message both ways on the msgapp and message streams, streams
 * that stay up across etcd's 5 s read timeout (link heartbeats both
 * ways), and unreachable reports once the etcd member is gone.
 *
 * The Go tool is built by tests/integration/peer_interop.sh, which runs
 * this program with PEER_INTEROP_GO naming it; run alone (as a unit
 * test), this program runs that script. It exits 77 when go or etcd's Go
 * packages are missing.
 */
#include "peer_util.h"
#include "base/clock/clock.h"
#include "base/hex/hex.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <sys/wait.h>

#define CLUSTER 0x1000
#define GO_ID 2

/* The etcd member: its process and the pipes to it. */
struct go_peer {
	pid_t pid;
	int in;               /* its stdin */
	int out;              /* its stdout */
	char buf[16 << 20];           /* holds a RECV line of a few MiB */
	size_t len;
	char url[128];
};

/* Runs the script that builds the Go tool and runs this program again. */
static int run_script(void)
{
	char exe[PATH_MAX], src[PATH_MAX], build[PATH_MAX], script[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	CHECK(n > 0);
	exe[n] = '\0';
	/* <build>/tests/unit/raftd/peer/test_peer_interop; this file is
	 * <src>/tests/unit/raftd/peer/test_peer_interop.c */
	snprintf(build, sizeof(build), "%s", dirname(dirname(dirname(dirname(dirname(exe))))));
	snprintf(exe, sizeof(exe), "%s", __FILE__);
	snprintf(src, sizeof(src), "%s", dirname(dirname(dirname(dirname(dirname(exe))))));
	if (src[0] != '/')
		SKIP("the source tree is not known (built from %s)", __FILE__);
	snprintf(script, sizeof(script), "%s/tests/integration/peer_interop.sh", src);
	setenv("CETCD_SRC", src, 1);
	setenv("CETCD_BUILD", build, 1);
	execlp("bash", "bash", script, (char *)NULL);
	perror("bash");
	return 1;
}

static void go_start(struct go_peer *g, const char *tool, const char *peers)
{
	int to[2], from[2];
	char id[20], cid[20];

	CHECK(pipe2(to, O_CLOEXEC) == 0 && pipe2(from, O_CLOEXEC) == 0);
	snprintf(id, sizeof(id), "%x", GO_ID);
	snprintf(cid, sizeof(cid), "%x", CLUSTER);
	g->pid = fork();
	CHECK(g->pid >= 0);
	if (g->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		execl(tool, tool, "-id", id, "-cluster", cid, "-peer", peers,
		      getenv("CETCD_TEST_VERBOSE") ? "-v" : "-v=false", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	g->in = to[1];
	g->out = from[0];
	g->len = 0;
}

/* The next line from the etcd member (without its line end), within
 * timeout_ms; NULL on timeout or its exit. Valid until the next call. */
static char *go_line(struct go_peer *g, int timeout_ms)
{
	static char line[sizeof(g->buf)];
	int64_t end = clock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (;;) {
		char *nl = memchr(g->buf, '\n', g->len);
		if (nl) {
			size_t n = (size_t)(nl - g->buf);
			memcpy(line, g->buf, n);
			line[n] = '\0';
			memmove(g->buf, nl + 1, g->len - n - 1);
			g->len -= n + 1;
			return line;
		}
		int64_t now = clock_now_ns();
		if (now >= end)
			return NULL;
		struct pollfd pf = { .fd = g->out, .events = POLLIN };
		if (poll(&pf, 1, (int)((end - now) / 1000000u) + 1) <= 0)
			continue;
		ssize_t r = read(g->out, g->buf + g->len, sizeof(g->buf) - g->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			fprintf(stderr, "the etcd member's output ended (%s)\n", r ? strerror(errno) : "EOF");
			return NULL;
		}
		g->len += (size_t)r;
	}
}

/* The next line that starts with prefix (others are dropped). */
static char *go_expect(struct go_peer *g, const char *prefix, int timeout_ms)
{
	char *l;

	while ((l = go_line(g, timeout_ms)))
		if (!strncmp(l, prefix, strlen(prefix)))
			return l;
	return NULL;
}

static void go_send(struct go_peer *g, const struct raftmsg *m)
{
	size_t n = raftmsg_size(m);
	uint8_t *b = malloc(n + 1);
	char *text = malloc(2 * n + 8);

	CHECK(b && text);
	raftmsg_encode(m, b);
	strcpy(text, "SEND ");
	for (size_t i = 0; i < n; i++) {
		text[5 + 2 * i] = "0123456789abcdef"[b[i] >> 4];
		text[6 + 2 * i] = "0123456789abcdef"[b[i] & 15];
	}
	text[5 + 2 * n] = '\n';
	CHECK((size_t)write(g->in, text, 6 + 2 * n) == 6 + 2 * n);
	free(b);
	free(text);
}

/* Reads a RECV line into m (decoded into *buf, freed by the caller). */
static void go_recv(struct go_peer *g, struct raftmsg *m, uint8_t **buf)
{
	char *l = go_expect(g, "RECV ", 10000);
	size_t n;

	if (!l)
		fprintf(stderr, "no RECV from the etcd member; buffered: %.*s\n", (int)g->len, g->buf);
	CHECK(l);
	l += 5;
	n = strlen(l) / 2;
	*buf = malloc(n + 1);
	CHECK(*buf);
	CHECK(hex_decode(l, 2 * n, *buf) == (ssize_t)n);
	CHECK_EQ(raftmsg_decode(*buf, n, m), 0);
}

static uint64_t go_active(struct go_peer *g, uint64_t id)
{
	char cmd[64], *l;
	unsigned long long since;

	snprintf(cmd, sizeof(cmd), "ACTIVE %llx\n", (unsigned long long)id);
	CHECK((size_t)write(g->in, cmd, strlen(cmd)) == strlen(cmd));
	l = go_expect(g, "ACTIVE ", 5000);
	CHECK(l && sscanf(l, "ACTIVE %*s %llu", &since) == 1);
	return since;
}

/* msgs[] from cetcd's transport a to the etcd member. */
static void to_go(struct pt_node *a, struct go_peer *g, const struct raftmsg *msgs, size_t n)
{
	struct pt_matcher mt = { .msgs = msgs, .n = n };

	for (size_t i = 0; i < n; i++)
		CHECK_EQ(peer_send(a->p, &msgs[i]), 0);
	for (size_t i = 0; i < n; i++) {
		struct raftmsg m;
		uint8_t *buf;
		go_recv(g, &m, &buf);
		pt_match(&mt, &m);
		raftmsg_release(&m);
		free(buf);
	}
}

/* msgs[] from the etcd member to cetcd's transport a. */
static void from_go(struct go_peer *g, struct pt_node *a, const struct raftmsg *msgs, size_t n)
{
	struct pt_matcher mt = { .msgs = msgs, .n = n };

	for (size_t i = 0; i < n; i++)
		go_send(g, &msgs[i]);
	for (size_t i = 0; i < n; i++) {
		struct peer_event ev;
		CHECK_EQ(pt_next_msg(a, &ev, 10000, NULL), 0);
		CHECK_EQ(ev.id, GO_ID);
		pt_match(&mt, &ev.msg);
		peer_event_release(&ev);
	}
}

static void free_blocks(void **blocks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(blocks[i]);
}

int main(void)
{
	const char *tool = getenv("PEER_INTEROP_GO");
	struct pt_node a = { 0 }, b = { 0 }, gonode = { .id = GO_ID };
	struct pt_node *pg = &gonode;
	static struct go_peer g;
	struct raftmsg msgs[PT_ALL_KINDS], m;
	void *blocks[PT_ALL_KINDS], *blk;
	char peers[300], *l;
	size_t n;

	if (!tool)
		return run_script();
	signal(SIGPIPE, SIG_IGN);
	wt_count_allocs();
	if (!getenv("CETCD_TEST_VERBOSE"))
		log_set_level(LOG_LEVEL_ERROR);

	CHECK_EQ(pt_start(&a, 1, CLUSTER, "http://127.0.0.1:0"), 0);
	snprintf(peers, sizeof(peers), "1=%s", a.url);
	go_start(&g, tool, peers);
	l = go_expect(&g, "LISTEN ", 30000);
	CHECK(l);
	snprintf(g.url, sizeof(g.url), "%s", l + 7);
	snprintf(gonode.url, sizeof(gonode.url), "%s", g.url);

	/* the pipeline, cetcd to etcd: member 3 is unknown to the etcd
	 * member, whose stream handler refuses it, so posts carry it */
	CHECK_EQ(pt_start(&b, 3, CLUSTER, "http://127.0.0.1:0"), 0);
	pt_members(&b, &pg, 1, NULL, 0);
	m = pt_msg(RAFT_MSG_VOTE, 3, GO_ID, 9, 50, 0, 0, &blk);
	to_go(&b, &g, &m, 1);
	free(blk);
	m = pt_msg(RAFT_MSG_APP, 3, GO_ID, 9, 50, 3, 1000, &blk);
	to_go(&b, &g, &m, 1);
	free(blk);
	pt_stop(&b);

	/* the pipeline, etcd to cetcd: a does not know the etcd member yet,
	 * so it refuses its streams and etcd posts */
	m = pt_msg(RAFT_MSG_VOTE, GO_ID, 1, 9, 50, 0, 0, &blk);
	from_go(&g, &a, &m, 1);
	free(blk);

	/* the streams, both ways */
	pt_members(&a, &pg, 1, NULL, 0);
	pt_wait_streams(&a, GO_ID);
	for (int i = 0; i < 300 && !go_active(&g, 1); i++)
		usleep(10000);
	usleep(500000); /* etcd's writers attach as cetcd's readers connect */
	n = pt_all_kinds(1, GO_ID, 5, msgs, blocks);
	to_go(&a, &g, msgs, n);
	free_blocks(blocks, n);
	n = pt_all_kinds(GO_ID, 1, 6, msgs, blocks);
	from_go(&g, &a, msgs, n);
	free_blocks(blocks, n);
	m = pt_msg(RAFT_MSG_APP, 1, GO_ID, 7, 9000, 2, 2 << 20, &blk);
	to_go(&a, &g, &m, 1);
	free(blk);
	m = pt_msg(RAFT_MSG_APP, GO_ID, 1, 7, 9000, 2, 2 << 20, &blk);
	from_go(&g, &a, &m, 1);
	free(blk);

	/* past etcd's 5 s read timeout: the link heartbeats keep every
	 * stream up, on both sides */
	uint64_t go_since = go_active(&g, 1), c_since = peer_active_since(a.p, GO_ID);
	CHECK(go_since && c_since);
	sleep(7);
	CHECK_EQ(go_active(&g, 1), go_since);
	CHECK_EQ(peer_active_since(a.p, GO_ID), c_since);
	CHECK(pt_stream_up(&a, GO_ID, PEER_STREAM_MSGAPP));
	CHECK(pt_stream_up(&a, GO_ID, PEER_STREAM_MESSAGE));
	n = pt_all_kinds(1, GO_ID, 8, msgs, blocks);
	to_go(&a, &g, msgs, n);
	free_blocks(blocks, n);

	/* the etcd member goes: what cetcd sends it is unreachable */
	CHECK(write(g.in, "QUIT\n", 5) == 5);
	CHECK(waitpid(g.pid, NULL, 0) == g.pid);
	bool unreachable = false;
	m = pt_msg(RAFT_MSG_HEARTBEAT, 1, GO_ID, 8, 0, 0, 0, &blk);
	for (int i = 0; i < 100 && !unreachable; i++) {
		struct peer_event ev;
		CHECK_EQ(peer_send(a.p, &m), 0);
		while (!unreachable && pt_next(&a, &ev, 100) == 0) {
			unreachable = ev.kind == PEER_EV_UNREACHABLE && ev.id == GO_ID;
			peer_event_release(&ev);
		}
	}
	free(blk);
	CHECK(unreachable);
	pt_stop(&a);
	close(g.in);
	close(g.out);
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_peer_interop: ok\n");
	return 0;
}
