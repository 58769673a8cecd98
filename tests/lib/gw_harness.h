/*
 * A gatewayd in the test's process, driven turn by turn, with an
 * nghttp2 client over a socket pair, while the test plays raftd and
 * stored on the same region: the plumbing a test of the gateway's loop
 * needs (tests/unit/gatewayd/test_server.c and
 * tests/unit/gatewayd/services/test_watch_progress.c use it).
 *
 * gwh_start makes the region (in a fresh temporary dir, with data/member/
 * snap below it), claims raftd's and stored's roles and starts the
 * gateway on a slot with the given parameters; gwh_hello attaches it to
 * them; gwh_open_db opens the db stored writes, publishing each batch's
 * events on the region's ring; gwh_stop frees it all; call, answer and
 * one_proposal make a unary call, wait for its answer and take the
 * proposal it made. Everything is static: one test, one
 * gateway.
 */
#ifndef CETCD_TESTS_TEST_GW_HARNESS_H
#define CETCD_TESTS_TEST_GW_HARNESS_H

#include "h2_client.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "etcdserverpb/rpc.pb-c.h"
#include "base/clock/clock.h"
#include "gatewayd/server.h"
#include "config/config.h"
#include "cluster/member.h"
#include "shm/hello.h"
#include "shm/msg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/status.h"
#include "stored/btree/arena.h"
#include "stored/btree/btree.h"
#include "stored/events.h"
#include "stored/mvcc/mvcc.h"

static char dir[256];
static struct cetcd_config cfg;
static struct shm_region *gwr;   /* the gateway's handle */
static struct shm_region *harn;  /* the test's: raftd and stored */
static struct shm_region *gwh_launcher;
static struct shm_slot_ref slot;
static struct gw_server *srv;
static uint64_t member_id, cluster_id;
static int cfd = -1;             /* the gRPC client's end */
static struct tc_client tc;

static struct btree_db *db;
static struct mvcc_store *store;
static struct stored_events gwh_events;

/* ---- the client and the gateway's turns ---- */

/* Moves what the client queued to the gateway and what the gateway sent
 * to the client. */
static void client_pump(void)
{
	for (;;) {
		const uint8_t *d;
		ssize_t n = nghttp2_session_mem_send(tc.session, &d);
		CHECK(n >= 0);
		if (n == 0)
			break;
		while (n > 0) {
			ssize_t w = write(cfd, d, (size_t)n);
			if (w < 0 && errno == EAGAIN) {
				gw_server_turn(srv, 0); /* let the server read */
				continue;
			}
			CHECK(w > 0);
			d += w;
			n -= w;
		}
	}
	for (;;) {
		static uint8_t buf[1 << 16];
		ssize_t n = read(cfd, buf, sizeof(buf));
		if (n <= 0)
			break;
		CHECK_EQ(nghttp2_session_mem_recv(tc.session, buf, (size_t)n), n);
	}
}

/* A few turns of client and server. */
static void spin(int turns)
{
	for (int i = 0; i < turns; i++) {
		client_pump();
		gw_server_turn(srv, 1);
		client_pump();
	}
}

/* ---- calls, and the proposals they make ---- */

/* Turns until s closed (at most 5 s). */
static inline void wait_closed(struct tc_stream *s)
{
	int64_t end = clock_now_ns() + 5000000000ull;
	while (!s->closed) {
		CHECK(clock_now_ns() < end);
		spin(1);
	}
}

static inline struct tc_stream *call(const char *path, const ProtobufCMessage *m)
{
	uint8_t *buf = malloc(protobuf_c_message_get_packed_size(m) + 1);
	CHECK(buf != NULL);
	size_t len = protobuf_c_message_pack(m, buf);
	struct tc_stream *s = tc_request(&tc, path, NULL);
	tc_queue_message(&tc, s, 0, buf, len, true);
	free(buf);
	spin(2);
	return s;
}

static inline void check_status(const struct tc_stream *s, int code, const char *msg);

/* The one response message of a call that must succeed. */
static inline const uint8_t *answer(struct tc_stream *s, size_t *len)
{
	wait_closed(s);
	check_status(s, 0, NULL);
	const uint8_t *m = tc_message(s, 0, len);
	CHECK(m != NULL);
	return m;
}

static inline void check_status(const struct tc_stream *s, int code, const char *msg)
{
	if (s->grpc_status != code || (msg && strcmp(s->grpc_message, msg) != 0)) {
		fprintf(stderr, "stream %d: status %d \"%s\", want %d \"%s\"\n", s->id,
			s->grpc_status, s->grpc_message, code, msg ? msg : "");
		exit(1);
	}
}


struct rec {
	uint32_t type;
	uint32_t len;
	uint8_t *data;
};

/* Takes every record the gateway sent raftd. */
static inline int take_to_raftd(struct rec *out, int max)
{
	struct ring *r = shm_slot_ring(harn, slot.index, SHM_SLOT_TO_RAFTD);
	struct ring_rec rec;
	int n = 0;
	while (n < max && ring_peek(r, &rec) == 0) {
		out[n].type = rec.type;
		out[n].len = rec.len;
		out[n].data = malloc(rec.len + 1);
		CHECK(out[n].data != NULL);
		memcpy(out[n].data, rec.data, rec.len);
		ring_release(r, &rec);
		n++;
	}
	return n;
}

static inline void free_recs(struct rec *v, int n)
{
	for (int i = 0; i < n; i++)
		free(v[i].data);
}

/* The one proposal the gateway sent, within 5 s of turns: a proposal
 * may wait for a worker thread (a password's hash), which a loaded
 * machine can keep off a CPU for longer than a few turns. */
static inline struct rec one_proposal(void)
{
	struct rec v[4];
	int n;
	int64_t end = clock_now_ns() + 5000000000ll;
	while ((n = take_to_raftd(v, 4)) == 0 && clock_now_ns() <= end)
		spin(1);
	CHECK_EQ(n, 1);
	return v[0];
}

/* ---- playing stored ---- */

/* Puts key=value in one batch and publishes the batch's root in stored's
 * status, as stored/loop.c does; the batch's events stay unpublished
 * until gwh_publish_events. Returns the revision. */
static inline int64_t gwh_put_root(const char *key, const char *value)
{
	Etcdserverpb__PutRequest req;
	Etcdserverpb__PutResponse *resp;
	struct arena a;
	static uint64_t index = 1;

	etcdserverpb__put_request__init(&req);
	req.key.data = (uint8_t *)key;
	req.key.len = strlen(key);
	req.value.data = (uint8_t *)value;
	req.value.len = strlen(value);
	arena_init(&a);
	CHECK_EQ(mvcc_batch_begin(store), 0);
	CHECK_EQ(mvcc_apply_begin(store, index++), 0);
	CHECK_EQ(mvcc_put(store, &req, &a, &resp), 0);
	struct btree_root root;
	CHECK_EQ(mvcc_batch_commit(store, &root), 0);
	arena_release(&a);
	struct mvcc_state st;
	mvcc_store_state(store, &st);
	struct status_stored pub = {
		.root_page = root.root_pgid, .txid = root.txid, .applied_index = st.consistent_index,
		.revision = (uint64_t)st.rev, .high_water_page = root.hwm_pgid, .epoch = 1,
	};
	status_stored_write(harn, &pub);
	return st.rev;
}

/* The last batches' events on the ring, and the gateways woken. */
static inline void gwh_publish_events(void)
{
	events_publish(&gwh_events);
	shm_events_notify(harn);
}

/* gwh_put_root, then its events. */
static inline int64_t db_put(const char *key, const char *value)
{
	int64_t rev = gwh_put_root(key, value);
	gwh_publish_events();
	return rev;
}

static inline void gwh_open_db(void)
{
	char path[600];
	struct btree_db_opts o = { .create = true, .map_size = 1ull << 30 };

	snprintf(path, sizeof(path), "%s/data/member/snap/db", dir);
	CHECK_EQ(btree_db_open(path, &o, &db), 0);
	events_init(&gwh_events, shm_events(harn));
	struct mvcc_store_opts mo = { .on_event = events_on_event, .event_arg = &gwh_events };
	CHECK_EQ(mvcc_store_open(db, &mo, &store), 0);
}

/* ---- start and stop ---- */

/* The dirs, the region, the config (member "gw" on the dirs with the
 * n_flags flags after, then tune(&cfg) unless NULL), and the gateway with
 * params p (its cfg and ids are filled in here) and its client. The
 * waker thread's futex waits (thread mode) time out after an hour: no
 * test may need the backstop (invariant 7, docs/invariants.md). */
static void gwh_start(struct gw_params *p, uint32_t max_request_bytes, char *const *flags,
		      int n_flags, void (*tune)(struct cetcd_config *))
{
	struct config_error err;
	char data_dir[600], path[700], dd[700];
	char *argv[32];
	int argc = 0, sv[2];

	test_tmpdir(dir, sizeof(dir));
	snprintf(data_dir, sizeof(data_dir), "%s/data", dir);
	CHECK_EQ(mkdir(data_dir, 0700), 0);
	snprintf(path, sizeof(path), "%s/data/member", dir);
	CHECK_EQ(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/data/member/snap", dir);
	CHECK_EQ(mkdir(path, 0700), 0);

	snprintf(dd, sizeof(dd), "--data-dir=%s", data_dir);
	CHECK(n_flags >= 0 && n_flags <= 27);
	argv[argc++] = "gatewayd";
	argv[argc++] = "--name";
	argv[argc++] = "gw";
	argv[argc++] = dd;
	for (int i = 0; i < n_flags; i++)
		argv[argc++] = flags[i];
	argv[argc] = NULL;
	char *env[] = { NULL };
	CHECK_EQ(config_init(&cfg), 0);
	if (config_parse(&cfg, CONFIG_PROG_GATEWAYD, argc, argv, env, &err)) {
		fprintf(stderr, "config: %s\n", err.msg);
		exit(1);
	}
	cfg.max_request_bytes = max_request_bytes;
	if (tune)
		tune(&cfg);
	CHECK_EQ(member_ids_from_config(&cfg, &member_id, &cluster_id), 0);

	snprintf(path, sizeof(path), "%s/region", dir);
	struct shm_region_params rp = { .slot_count = 4, .max_request_bytes = max_request_bytes,
					.member_id = member_id };
	CHECK_EQ(shm_region_create(path, &rp, &gwh_launcher), 0);
	CHECK_EQ(shm_region_attach(path, &gwr), 0);
	CHECK_EQ(shm_region_attach(path, &harn), 0);
	CHECK_EQ(shm_role_claim(harn, SHM_ROLE_RAFTD), 0);
	CHECK_EQ(shm_role_claim(harn, SHM_ROLE_STORED), 0);
	CHECK_EQ(shm_slot_claim(gwr, &slot), 0);

	p->cfg = &cfg;
	p->member_id = member_id;
	p->cluster_id = cluster_id;
	CHECK_EQ(gw_server_new(gwr, &slot, p, &srv), 0);
	srv->waker.backstop_ms = 3600 * 1000;
	CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ(gw_server_adopt(srv, sv[0]), 0);
	cfd = sv[1];
	CHECK_EQ(fcntl(cfd, F_SETFL, O_NONBLOCK), 0);
	tc_init(&tc, 1 << 20);
}

/* The gateway's attach hellos, answered as raftd and stored. */
static void gwh_hello(void)
{
	gw_server_hello(srv);
	CHECK_EQ(hello_serve(harn, SHM_ROLE_RAFTD), 1);
	CHECK_EQ(hello_serve(harn, SHM_ROLE_STORED), 1);
	spin(3);
	CHECK(srv->attached[SHM_ROLE_RAFTD] && srv->attached[SHM_ROLE_STORED]);
}

static void gwh_stop(void)
{
	tc_fini(&tc);
	close(cfd);
	gw_server_drain(srv, 100);
	gw_server_free(srv);
	if (store) {
		mvcc_store_close(store);
		events_fini(&gwh_events);
		btree_db_close(db);
	}
	shm_slot_release(gwr, &slot);
	shm_region_detach(gwr);
	shm_region_detach(harn);
	shm_region_detach(gwh_launcher);
	config_free(&cfg);
}

#endif
