/*
 * .snap files (raftd/wal/snap.c): the bytes etcd writes (a corpus file etcd
 * 3.4 wrote decodes to its point, configuration and v2 store), a save and
 * load round trip, the choice of the newest file a WAL records, broken
 * files set aside as etcd's loadSnap does, and the purge of old files.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wal_util.h"

#include "raftd/wal/snap.h"
#include "cluster/membership.h"
#include "cluster/v2store.h"
#include "base/log/log.h"

static bool exists(const char *dir, const char *name)
{
	char p[600];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return stat(p, &st) == 0;
}

static void make_snap(struct snap *s, uint64_t index, uint64_t term)
{
	static const char data[] = "{\"Root\":null}";
	memset(s, 0, sizeof(*s));
	s->index = index;
	s->term = term;
	s->conf.n_voters = 3;
	s->conf.voters[0] = 10, s->conf.voters[1] = 20, s->conf.voters[2] = 30;
	s->conf.n_learners = 1;
	s->conf.learners[0] = 40;
	s->len = sizeof(data) - 1;
	s->data = raftd_malloc(s->len);
	CHECK(s->data);
	memcpy(s->data, data, s->len);
}

/* A .snap file etcd 3.4 wrote (tests/fuzz/corpus/snapfile/etcd.snap). */
static void test_etcd_file(void)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s", __FILE__);
	char *slash = strrchr(path, '/');
	CHECK(slash);
	snprintf(slash, sizeof(path) - (size_t)(slash - path), "/../../../fuzz/corpus/snapfile/etcd.snap");
	size_t len;
	uint8_t *b = wt_read_file(path, &len);
	struct snap s;
	const char *why;
	CHECK_EQ(snap_decode(b, len, &s, &why), 0);
	CHECK_EQ(s.index, 0x250);
	CHECK_EQ(s.term, 4);
	CHECK_EQ(s.conf.n_voters, 1);
	struct membership m;
	membership_init(&m);
	CHECK_EQ(v2store_decode(s.data, s.len, &m), 0);
	CHECK_EQ(m.count, 1);
	CHECK_EQ(m.v[0].id, s.conf.voters[0]);
	CHECK(m.has_version);
	membership_free(&m);
	/* cetcd's encoding of what etcd wrote is etcd's bytes */
	uint8_t *again;
	size_t again_len;
	CHECK_EQ(snap_encode(&s, &again, &again_len), 0);
	CHECK_EQ(again_len, len);
	CHECK(memcmp(again, b, len) == 0);
	raftd_free(again);
	snap_clear(&s);
	/* a flipped bit is a crc mismatch */
	b[len - 3] ^= 4;
	CHECK_EQ(snap_decode(b, len, &s, &why), -EBADMSG);
	CHECK(strcmp(why, "snap: crc mismatch") == 0);
	free(b);
	snap_clear(&s);
}

static void test_save_load_purge(void)
{
	char dir[512];
	struct snap s, got;

	wt_path(dir, sizeof(dir), "snapdir");
	CHECK_EQ(mkdir(dir, 0700), 0);
	struct wal_snap points[4] = { { 100, 2 }, { 200, 2 }, { 300, 3 }, { 400, 3 } };
	for (int i = 0; i < 4; i++) {
		make_snap(&s, points[i].index, points[i].term);
		CHECK_EQ(snap_save(dir, &s), 0);
		snap_clear(&s);
	}
	/* a file the WAL does not record (written, then a crash before the
	 * WAL's record) is passed over */
	make_snap(&s, 500, 3);
	CHECK_EQ(snap_save(dir, &s), 0);
	snap_clear(&s);
	CHECK_EQ(snap_load_newest(dir, points, 4, &got), 0);
	CHECK_EQ(got.index, 400);
	CHECK_EQ(got.term, 3);
	CHECK_EQ(got.conf.n_voters, 3);
	CHECK_EQ(got.conf.voters[2], 30);
	CHECK_EQ(got.conf.learners[0], 40);
	CHECK(got.len == strlen("{\"Root\":null}") && memcmp(got.data, "{\"Root\":null}", got.len) == 0);
	snap_clear(&got);

	/* a broken newest file is renamed aside and the next one loads */
	char name[SNAP_NAME_BYTES], path[600];
	snap_name(name, 3, 400);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	wt_write_file(path, (const uint8_t *)"\x08\x01\x12\x01x", 5);
	CHECK_EQ(snap_load_newest(dir, points, 4, &got), 0);
	CHECK_EQ(got.index, 300);
	snap_clear(&got);
	CHECK(exists(dir, "0000000000000003-0000000000000190.snap.broken"));
	CHECK(!exists(dir, name));
	CHECK_EQ(snap_load_newest(dir, points, 0, &got), -ENOENT);

	/* .snap.db files older than a snapshot go with it (etcd's
	 * ReleaseSnapDBs); purge keeps the newest max of each kind */
	wt_write_file(strcat(strcpy(path, dir), "/0000000000000064.snap.db"), (const uint8_t *)"x", 1);
	wt_write_file(strcat(strcpy(path, dir), "/000000000000012c.snap.db"), (const uint8_t *)"x", 1);
	CHECK_EQ(snap_release_dbs(dir, 200), 1);
	CHECK(!exists(dir, "0000000000000064.snap.db"));
	CHECK(exists(dir, "000000000000012c.snap.db"));
	CHECK_EQ(snap_purge(dir, 0), 0);
	CHECK_EQ(snap_purge(dir, 2), 2); /* 100 and 200; 300 and 500 stay */
	CHECK(!exists(dir, "0000000000000002-0000000000000064.snap"));
	CHECK(!exists(dir, "0000000000000002-00000000000000c8.snap"));
	CHECK(exists(dir, "0000000000000003-000000000000012c.snap"));
	CHECK(exists(dir, "0000000000000003-00000000000001f4.snap"));
	CHECK(exists(dir, "000000000000012c.snap.db"));
	CHECK(exists(dir, "0000000000000003-0000000000000190.snap.broken"));
}

int main(void)
{
	log_set_level(LOG_LEVEL_FATAL);
	wt_count_allocs();
	test_etcd_file();
	test_save_load_purge();
	CHECK_EQ(wt_live_allocs(), 0);
	printf("test_snap: ok\n");
	return 0;
}
