/*
 * installdrive: stands in for raftd in a member whose stored and gatewayd
 * run on their own (tests/integration/install_etcd.sh), to hand stored a
 * received db (MSG_SNAPSHOT_INSTALL) as raftd does after a MsgSnap.
 *
 *   installdrive REGION SNAP_DB PRE POST GO_FILE
 *
 * claims the raftd role of the member region REGION, publishes the
 * member's ids (the region's member id, cluster id 1), answers the
 * daemons' hellos, publishes itself as the leader, and commits PRE puts
 * pre/NNNN (index 1..PRE). It prints "pre-applied" once stored applied
 * them, then waits for GO_FILE to exist and sends the install of SNAP_DB
 * at its consistent index I, then POST puts post/NNNN (I+1..I+POST). On
 * every new epoch of stored (a restart), it sends again, as raftd does:
 * the install while stored's durable index is below I, then the puts
 * from there. It prints "done applied A generation G" once stored
 * published I+POST, and serves hellos until SIGTERM.
 */
#include <inttypes.h>
#include <signal.h>

#include "stored_util.h"

#include "raftpb/raft.pb-c.h"
#include "shm/hello.h"

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static struct ring *committed;
static struct shm_region *r;

/* Waits while the ring is full (answering hellos), then rings stored. */
#define PUSH(expr)                                                          \
	do {                                                                \
		int rc_;                                                    \
		while ((rc_ = (expr)) == -EAGAIN) {                         \
			hello_serve(r, SHM_ROLE_RAFTD);                     \
			usleep(200);                                        \
		}                                                           \
		CHECK_EQ(rc_, 0);                                           \
		shm_doorbell_ring(shm_role_doorbell(r, SHM_ROLE_STORED));   \
	} while (0)

static void put_at(uint64_t index, const char *prefix, uint64_t n, struct tbuf *buf)
{
	char key[64], val[64];
	snprintf(key, sizeof(key), "%s/%04" PRIu64, prefix, n);
	snprintf(val, sizeof(val), "%s-%" PRIu64, prefix, n);
	tst_put(key, val, NULL, buf);
	PUSH(tst_commit(committed, index, 1, RAFTPB__ENTRY_TYPE__EntryNormal, buf->p, buf->len));
}

static void install_at(uint64_t index, const char *path)
{
	PUSH(tst_install(committed, index, 1, path));
}

/* Serves hellos until cond holds or SIGTERM. */
#define SERVE_UNTIL(cond)                                  \
	do {                                               \
		while (!stop && !(cond)) {                 \
			hello_serve(r, SHM_ROLE_RAFTD);    \
			usleep(2000);                      \
		}                                          \
	} while (0)

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_term };
	struct tbuf buf = { 0 };
	struct status_stored st = { 0 };

	if (argc != 6) {
		fprintf(stderr, "usage: installdrive REGION SNAP_DB PRE POST GO_FILE\n");
		return 2;
	}
	const char *snap = argv[2], *go = argv[5];
	uint64_t pre = strtoull(argv[3], NULL, 0), post = strtoull(argv[4], NULL, 0);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	CHECK_EQ(shm_region_attach(argv[1], &r), 0);
	CHECK_EQ(hello_claim_role(r, SHM_ROLE_RAFTD), 0);
	/* stored and gatewayd wait for the ids raftd resolves */
	uint64_t mid = shm_region_member_id(r);
	shm_region_set_ids(r, mid ? mid : 1, 1);
	committed = shm_daemon_ring(r, SHM_RING_COMMITTED);
	uint64_t index = tst_file_index(snap);
	CHECK(index > pre);
	struct status_raftd rs = {
		.leader_id = shm_region_member_id(r), .term = 1, .commit_index = index + post,
		.is_leader = true,
	};
	status_raftd_write(r, &rs);

	SERVE_UNTIL(status_stored_read(r, &st) == 0 && st.epoch > 0);
	uint64_t epoch = st.epoch;
	for (uint64_t i = st.durable_index + 1; i <= pre; i++)
		put_at(i, "pre", i, &buf);
	SERVE_UNTIL(status_stored_read(r, &st) == 0 && st.applied_index >= pre && st.root_page);
	printf("pre-applied %" PRIu64 " install-index %" PRIu64 "\n", st.applied_index, index);
	fflush(stdout);
	SERVE_UNTIL(access(go, F_OK) == 0);

	install_at(index, snap);
	for (uint64_t i = 1; i <= post; i++)
		put_at(index + i, "post", i, &buf);
	while (!stop) {
		hello_serve(r, SHM_ROLE_RAFTD);
		if (status_stored_read(r, &st) == 0 && st.epoch != epoch && st.epoch != 0) {
			/* a new stored: hand over again from its durable index */
			epoch = st.epoch;
			uint64_t from = st.durable_index + 1;
			if (st.durable_index < index) {
				install_at(index, snap);
				from = index + 1;
			}
			printf("resent from %" PRIu64 " to epoch %" PRIu64 "%s\n", from, epoch,
			       st.durable_index < index ? " with the install" : "");
			fflush(stdout);
			for (uint64_t i = from; i <= index + post; i++)
				put_at(i, "post", i - index, &buf);
		}
		if (st.applied_index >= index + post && st.root_page)
			break;
		usleep(2000);
	}
	printf("done applied %" PRIu64 " generation %" PRIu64 "\n", st.applied_index,
	       st.db_generation);
	fflush(stdout);
	SERVE_UNTIL(false);
	tbuf_free(&buf);
	shm_role_release(r, SHM_ROLE_RAFTD);
	shm_region_detach(r);
	return 0;
}
