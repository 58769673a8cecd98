/*
 * Unit tests for cluster/initial_cluster.c: --initial-cluster values
 * parsed into members, their ids and the cluster id, checked against the
 * numbers Debian's etcd 3.4.23 printed for the flags listed in
 * test_member.c, and the values etcd refuses.
 */
#include "shm_testlib.h"

#include "cluster/initial_cluster.h"
#include "cluster/member.h"

static void test_parse(void)
{
	struct initial_cluster c;

	CHECK_EQ(initial_cluster_parse("x=http://127.0.0.1:55739", "t", &c), 0);
	CHECK_EQ(c.count, 1);
	CHECK(c.v[0].id == 2368843873074947290ull);
	CHECK(c.cluster_id == 4617891303893155766ull);
	CHECK(strcmp(c.v[0].name, "x") == 0);
	CHECK(initial_cluster_find(&c, "x") == &c.v[0]);
	CHECK(initial_cluster_find(&c, "y") == NULL);
	initial_cluster_free(&c);

	/* a name given twice is one member with two URLs; spaces around a
	 * URL and the scheme's case do not change the id (names are taken
	 * as they are, as etcd's URLsMap does) */
	CHECK_EQ(initial_cluster_parse("m2= HTTP://127.0.0.1:47619,m2=http://127.0.0.1:35975 ",
				       "etcd-cluster", &c), 0);
	CHECK_EQ(c.count, 1);
	CHECK_EQ(c.v[0].n_peer_urls, 2);
	CHECK(strcmp(c.v[0].peer_urls[0], "http://127.0.0.1:35975") == 0);
	CHECK(strcmp(c.v[0].peer_urls[1], "http://127.0.0.1:47619") == 0);
	CHECK(c.v[0].id == 7240914925012837226ull);
	CHECK(c.cluster_id == 16987665117039494853ull);
	initial_cluster_free(&c);

	/* three members: sorted by id, cluster id over all three */
	CHECK_EQ(initial_cluster_parse("a=http://10.0.0.1:2380,b=http://10.0.0.2:2380,"
				       "c=http://10.0.0.3:2380", "tok", &c), 0);
	CHECK_EQ(c.count, 3);
	CHECK(c.v[0].id < c.v[1].id && c.v[1].id < c.v[2].id);
	uint64_t ids[3] = { c.v[2].id, c.v[0].id, c.v[1].id };
	CHECK(c.cluster_id == member_cluster_id(ids, 3));
	const char *u[] = { "http://10.0.0.2:2380" };
	uint64_t bid;
	CHECK_EQ(member_id_compute(u, 1, "tok", &bid), 0);
	CHECK(initial_cluster_find(&c, "b")->id == bid);
	initial_cluster_free(&c);

	CHECK_EQ(initial_cluster_parse("", "t", &c), -EINVAL);
	CHECK_EQ(initial_cluster_parse("noequals", "t", &c), -EINVAL);
	/* two names with the same URLs get the same id: refused, as etcd does */
	CHECK_EQ(initial_cluster_parse("a=http://h:1,b=http://h:1", "t", &c), -EEXIST);
}

int main(void)
{
	test_parse();
	printf("test_initial_cluster: ok\n");
	return 0;
}
