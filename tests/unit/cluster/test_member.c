/*
 * Unit tests for cluster/member.c: SHA-1 against FIPS 180 test vectors, and
 * member and cluster IDs against the numbers Debian's etcd 3.4.23 printed
 * (`etcdctl member list -w json`) for these exact flags:
 *
 *   etcd --name x --initial-advertise-peer-urls http://127.0.0.1:55739
 *        --initial-cluster x=http://127.0.0.1:55739 --initial-cluster-token t
 *     member_id 2368843873074947290, cluster_id 4617891303893155766
 *
 *   etcd --name m2 (two peer URLs, default token etcd-cluster)
 *        --initial-cluster m2=http://127.0.0.1:35975,m2=http://127.0.0.1:47619
 *     member_id 7240914925012837226, cluster_id 16987665117039494853
 */
#include "shm_testlib.h"

#include <pthread.h>
#include <signal.h>

#include "config/config.h"
#include "cluster/member.h"
#include "shm/region.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void check_sha1(const char *in, size_t len, const char *want)
{
	uint8_t d[20];
	char h[41];
	member_sha1(in, len, d);
	hex(d, 20, h);
	if (strcmp(h, want) != 0) {
		fprintf(stderr, "sha1 of %zu bytes: %s, want %s\n", len, h, want);
		exit(1);
	}
}

static void test_sha1(void)
{
	check_sha1("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
	check_sha1("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d");
	const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	check_sha1(two, strlen(two), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
	/* lengths around the padding boundary (55, 56, 64 bytes) */
	char a[1000];
	memset(a, 'a', sizeof(a));
	check_sha1(a, 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a");
	check_sha1(a, 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699");
	check_sha1(a, 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d");
	check_sha1(a, 1000, "291e9a6c66994949b57ba5e650361e98fc36b1ba");
}

static void test_ids(void)
{
	const char *one[] = { "http://127.0.0.1:55739" };
	uint64_t id;
	CHECK_EQ(member_id_compute(one, 1, "t", &id), 0);
	CHECK(id == 2368843873074947290ull);
	CHECK(member_cluster_id(&id, 1) == 4617891303893155766ull);

	/* given out of order: sorted before hashing */
	const char *two[] = { "http://127.0.0.1:47619", "http://127.0.0.1:35975" };
	CHECK_EQ(member_id_compute(two, 2, "etcd-cluster", &id), 0);
	CHECK(id == 7240914925012837226ull);
	CHECK(member_cluster_id(&id, 1) == 16987665117039494853ull);

	/* the cluster id sorts the member ids */
	uint64_t ids[3] = { 30, 10, 20 }, sorted[3] = { 10, 20, 30 };
	CHECK(member_cluster_id(ids, 3) == member_cluster_id(sorted, 3));
	CHECK(member_cluster_id(ids, 3) != member_cluster_id(ids, 2));
}

static void test_config(void)
{
	struct cetcd_config cfg;
	struct config_error err;
	uint64_t mid, cid;
	char *argv[] = { "gatewayd", "--name", "x",
			 "--initial-advertise-peer-urls", "http://127.0.0.1:55739",
			 "--initial-cluster", "x=http://127.0.0.1:55739",
			 "--initial-cluster-token", "t", NULL };
	char *env[] = { NULL };

	CHECK_EQ(config_init(&cfg), 0);
	int rc = config_parse(&cfg, CONFIG_PROG_GATEWAYD, 9, argv, env, &err);
	if (rc)
		fprintf(stderr, "config: %s\n", err.msg);
	CHECK_EQ(rc, 0);
	CHECK_EQ(member_ids_from_config(&cfg, &mid, &cid), 0);
	CHECK(mid == 2368843873074947290ull);
	CHECK(cid == 4617891303893155766ull);
	mid = cid = 0;
	CHECK_EQ(member_ids_load(&cfg, NULL, &mid, &cid), 0);
	CHECK(mid == 2368843873074947290ull && cid == 4617891303893155766ull);
	/* a name the initial cluster does not list */
	free(cfg.name);
	cfg.name = strdup("y");
	CHECK_EQ(member_ids_from_config(&cfg, &mid, &cid), -ENOENT);
	CHECK_EQ(member_ids_load(&cfg, NULL, &mid, &cid), -ENOENT);
	config_free(&cfg);

	/* the defaults: default=http://localhost:2380, token etcd-cluster */
	char *argv2[] = { "gatewayd", NULL };
	CHECK_EQ(config_init(&cfg), 0);
	CHECK_EQ(config_parse(&cfg, CONFIG_PROG_GATEWAYD, 1, argv2, env, &err), 0);
	const char *def[] = { "http://localhost:2380" };
	uint64_t want;
	CHECK_EQ(member_id_compute(def, 1, "etcd-cluster", &want), 0);
	CHECK_EQ(member_ids_from_config(&cfg, &mid, &cid), 0);
	CHECK(mid == want);
	config_free(&cfg);
}

static void *publish_later(void *arg)
{
	struct timespec ts = { 0, 150 * 1000000L };
	nanosleep(&ts, NULL);
	shm_region_set_ids(arg, 0xabc, 0xdef);
	return NULL;
}

/* stored and gatewayd wait for the ids raftd publishes, whatever the
 * flags derive; a stop signal ends the wait. */
static void test_ids_wait(void)
{
	struct shm_region_params rp = { .slot_count = 4, .max_request_bytes = 64 * 1024 };
	struct cetcd_config cfg;
	struct config_error err;
	struct shm_region *r;
	char dir[256], path[512];
	uint64_t mid = 0, cid = 0;
	char *argv[] = { "stored", NULL };
	char *env[] = { NULL };
	sigset_t term, old;
	pthread_t t;

	test_region_path(dir, sizeof(dir), path, sizeof(path));
	CHECK_EQ(shm_region_create(path, &rp, &r), 0);
	CHECK_EQ(config_init(&cfg), 0);
	CHECK_EQ(config_parse(&cfg, CONFIG_PROG_STORED, 1, argv, env, &err), 0);

	/* a stop signal pending while nothing is published */
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	CHECK_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
	CHECK_EQ(kill(getpid(), SIGTERM), 0);
	CHECK_EQ(member_ids_wait(&cfg, r, &mid, &cid), -EINTR);
	int sig;
	CHECK_EQ(sigwait(&term, &sig), 0);
	CHECK_EQ(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);

	/* published a while after the wait began: those ids, not the flags' */
	CHECK_EQ(pthread_create(&t, NULL, publish_later, r), 0);
	CHECK_EQ(member_ids_wait(&cfg, r, &mid, &cid), 0);
	CHECK(mid == 0xabc && cid == 0xdef);
	pthread_join(t, NULL);
	/* a restarted daemon finds them at once */
	mid = cid = 0;
	CHECK_EQ(member_ids_wait(&cfg, r, &mid, &cid), 0);
	CHECK(mid == 0xabc && cid == 0xdef);
	config_free(&cfg);
	shm_region_detach(r);
}

int main(void)
{
	test_sha1();
	test_ids();
	test_config();
	test_ids_wait();
	printf("test_member: ok\n");
	return 0;
}
