/*
 * Unit tests for shm/region.c: create, attach, the cache's area, the
 * version check and its message, stale-region re-initialisation, refusals,
 * allocation failures, the unnamed region the launcher's children
 * attach to through an inherited descriptor, and the TLS session ticket
 * key every handle of a region shares and a new region draws anew.
 */
#include <fcntl.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "shm/bcast.h"
#include "base/log/errmsg.h"
#include "shm/layout.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"

static char dir[256], path[512];

static const struct shm_region_params params = {
	.slot_count = 4,
	.max_request_bytes = 64 * 1024,
	.member_id = 0x1234,
};

static bool all_zero(const uint8_t *p, size_t n)
{
	while (n--)
		if (*p++)
			return false;
	return true;
}

static void test_create_attach(void)
{
	struct shm_region *l, *a;

	CHECK_EQ(shm_region_attach(path, &a), -ENOENT);
	CHECK(strstr(errmsg_get(-ENOENT), path) != NULL);
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(shm_slot_count(a), 4);
	CHECK_EQ(shm_region_member_id(a), 0x1234);
	CHECK_EQ(shm_region_max_request_bytes(a), 64 * 1024);
	CHECK_EQ(shm_region_max_record(a), 64 * 1024 + SHM_RECORD_OVERHEAD);
	CHECK_EQ(shm_region_incarnation(a), 1);
	CHECK_EQ(shm_region_bytes(a), shm_region_bytes(l));
	/* one ticket key for every process, drawn at random */
	CHECK(memcmp(shm_region_ticket_key(a), shm_region_ticket_key(l),
		     SHM_TICKET_KEY_BYTES) == 0);
	CHECK(shm_region_ticket_key(a) != shm_region_ticket_key(l));
	CHECK(!all_zero(shm_region_ticket_key(a), SHM_TICKET_KEY_BYTES));
	/* Rings hold several of the largest record; events twice that. */
	CHECK(ring_capacity(shm_slot_ring(a, 0, SHM_SLOT_TO_RAFTD)) >=
	      4ull * shm_region_max_record(a));
	CHECK_EQ(ring_max_record(shm_daemon_ring(a, SHM_RING_COMMITTED)),
		 shm_region_max_record(a));
	CHECK_EQ(bcast_max_record(shm_events(a)),
		 2 * 64 * 1024 + SHM_RECORD_OVERHEAD);
	shm_region_set_member_id(a, 99);
	CHECK_EQ(shm_region_member_id(l), 99);

	/* raftd's ids: none until both are published, then both together */
	uint64_t mid = 1, cid = 1;
	CHECK(!shm_region_ids(l, &mid, &cid)); /* a member id without a cluster id */
	CHECK(mid == 1 && cid == 1);
	shm_region_set_ids(a, 0xaa, 0xcc);
	CHECK(shm_region_ids(l, &mid, &cid));
	CHECK(mid == 0xaa && cid == 0xcc);
	CHECK_EQ(shm_region_member_id(l), 0xaa);

	/* Everything is position independent: the two handles map the file
	 * at different addresses and still share the rings. */
	{
		struct ring *wr = shm_slot_ring(l, 2, SHM_SLOT_TO_STORED);
		struct ring *rd = shm_slot_ring(a, 2, SHM_SLOT_TO_STORED);
		struct ring_rec rec;

		CHECK((void *)wr != (void *)rd);
		CHECK_EQ(ring_push(wr, 5, "shared", 6), 0);
		CHECK_EQ(ring_peek(rd, &rec), 0);
		CHECK_EQ(rec.type, 5);
		CHECK(memcmp(rec.data, "shared", 6) == 0);
		ring_release(rd, &rec);
	}

	/* A second launcher is refused while the first lives. */
	{
		struct shm_region *l2;

		CHECK_EQ(shm_region_create(path, &params, &l2), -EBUSY);
		CHECK(strstr(errmsg_get(-EBUSY), "live cetcd launcher"));
	}
	shm_region_detach(a);
	shm_region_detach(l);
}

/* The latest-entry cache's area: its sets and a page, last in the file,
 * starting on a 2 MiB boundary of it (so that a tmpfs with huge pages can
 * back it with whole ones), and shared by every handle. */
static void test_cache_area(void)
{
	struct shm_region_params p = params;
	struct shm_region *l, *a;
	size_t lb, ab;

	p.cache_bytes = 3u << 20;
	CHECK_EQ(shm_region_create(path, &p, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	uint8_t *lc = shm_cache_area(l, &lb), *ac = shm_cache_area(a, &ab);
	CHECK(lc != NULL && ac != NULL);
	CHECK_EQ(lb, (3u << 20) + SHM_PAGE);
	CHECK_EQ(ab, lb);
	size_t off = shm_region_bytes(l) - lb;
	CHECK_EQ(off % SHM_HUGE_ALIGN, 0);
	CHECK(off > 0);
	lc[0] = 0x5a;
	lc[lb - 1] = 0xa5;
	CHECK_EQ(ac[0], 0x5a);
	CHECK_EQ(ac[ab - 1], 0xa5);
	shm_region_detach(a);
	shm_region_detach(l);
	unlink(path);

	/* without a cache there is no area */
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK(shm_cache_area(l, &lb) == NULL && lb == 0);
	shm_region_detach(l);
	unlink(path);
}

static void test_bad_params(void)
{
	struct shm_region_params p = params;
	struct shm_region *r;

	p.slot_count = 3;
	CHECK_EQ(shm_region_create(path, &p, &r), -EINVAL);
	CHECK(strstr(errmsg_get(-EINVAL), "slot count"));
	p = params;
	p.max_request_bytes = 0;
	CHECK_EQ(shm_region_create(path, &p, &r), -EINVAL);
	p.max_request_bytes = SHM_MAX_REQUEST_BYTES_LIMIT + 1ull;
	CHECK_EQ(shm_region_create(path, &p, &r), -EINVAL);
}

static void poke(const char *file, off_t off, const void *data, size_t len)
{
	int fd = open(file, O_WRONLY);

	CHECK(fd >= 0);
	CHECK_EQ(pwrite(fd, data, len, off), (ssize_t)len);
	close(fd);
}

static void test_version_mismatch(void)
{
	struct shm_region *l, *a;
	uint32_t v = 99;
	char msg[512];

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	poke(path, 8, &v, sizeof(v)); /* layout_version follows the magic */
	CHECK_EQ(shm_region_attach(path, &a), -EPROTO);
	snprintf(msg, sizeof(msg), "has layout version 99, but this program "
		 "uses layout version %u", SHM_LAYOUT_VERSION);
	printf("version mismatch message: %s\n", errmsg_get(-EPROTO));
	CHECK(strstr(errmsg_get(-EPROTO), msg) != NULL);
	CHECK(strstr(errmsg_get(-EPROTO), path) != NULL);

	/* Bad magic. */
	poke(path, 0, "NOTCETCD", 8);
	CHECK_EQ(shm_region_attach(path, &a), -EPROTO);
	CHECK(strstr(errmsg_get(-EPROTO), "bad magic"));
	shm_region_detach(l);

	/* The launcher re-creates a region of another version (an upgrade):
	 * restore the magic, keep the odd version. */
	poke(path, 0, "CETCDSHM", 8);
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	shm_region_detach(a);

	/* A header whose layout fields disagree with its parameters. */
	{
		uint32_t slots = 5;

		poke(path, 56, &slots, sizeof(slots)); /* slot_count */
		CHECK_EQ(shm_region_attach(path, &a), -EPROTO);
		CHECK(strstr(errmsg_get(-EPROTO), "inconsistent header"));
	}
	shm_region_detach(l);
}

static void test_not_a_region(void)
{
	struct shm_region *r;
	char other[600], buf[32];
	int fd;

	snprintf(other, sizeof(other), "%s/not-a-region", dir);
	fd = open(other, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0);
	CHECK_EQ(write(fd, "precious user data", 18), 18);
	close(fd);
	CHECK_EQ(shm_region_create(other, &params, &r), -EEXIST);
	CHECK(strstr(errmsg_get(-EEXIST), "not a cetcd"));
	fd = open(other, O_RDONLY);
	CHECK_EQ(read(fd, buf, sizeof(buf)), 18);
	CHECK(memcmp(buf, "precious user data", 18) == 0);
	close(fd);
	CHECK_EQ(shm_region_attach(other, &r), -EPROTO);

	/* An empty file: a launcher is creating it. */
	fd = open(other, O_WRONLY | O_TRUNC);
	close(fd);
	CHECK_EQ(shm_region_attach(other, &r), -EAGAIN);
	/* ... and a launcher may take an empty file over. */
	CHECK_EQ(shm_region_create(other, &params, &r), 0);
	shm_region_detach(r);
	unlink(other);
}

/* A launcher killed without detaching leaves a stale region; the next one
 * re-initialises it and slot generations keep increasing. */
static void test_stale_reinit(void)
{
	struct shm_region *l, *a, *b;
	struct shm_slot_ref s;
	uint64_t last = 0, incarnation;
	uint8_t key[SHM_TICKET_KEY_BYTES];
	int i;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	incarnation = shm_region_incarnation(l);
	memcpy(key, shm_region_ticket_key(l), sizeof(key));
	CHECK_EQ(shm_region_attach(path, &a), 0);
	for (i = 0; i < 5; i++) {
		CHECK_EQ(shm_slot_claim(a, &s), 0);
		CHECK(s.generation > last);
		last = s.generation;
		shm_slot_release(a, &s);
	}
	/* A live slot holder keeps the stale region from being replaced. */
	CHECK_EQ(shm_slot_claim(a, &s), 0);
	last = s.generation;
	shm_region_detach(l); /* the launcher "dies" */
	CHECK_EQ(shm_region_create(path, &params, &l), -EBUSY);
	CHECK(strstr(errmsg_get(-EBUSY), "still used by a live process"));
	shm_region_detach(a);

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_incarnation(l), incarnation + 1);
	/* the ticket key does not carry over: the new region draws its own */
	CHECK(memcmp(key, shm_region_ticket_key(l), sizeof(key)) != 0);
	CHECK_EQ(shm_region_attach(path, &b), 0);
	for (i = 0; i < 4; i++) {
		CHECK_EQ(shm_slot_claim(b, &s), 0);
		CHECK(s.generation > last);
	}
	shm_region_detach(b);
	shm_region_detach(l);
}

static void test_alloc_failures(void)
{
	struct shm_region *l, *a;
	long n, launcher_allocs;
	int rc;

	shm_region_set_allocator(test_alloc, test_free);
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	launcher_allocs = test_alloc_live;
	CHECK(launcher_allocs > 0);
	for (n = 1;; n++) {
		test_alloc_count = 0;
		test_alloc_fail_at = n;
		rc = shm_region_attach(path, &a);
		if (rc == 0) {
			shm_region_detach(a);
			break;
		}
		CHECK_EQ(rc, -ENOMEM);
		CHECK_EQ(test_alloc_live, launcher_allocs);
	}
	CHECK(n > 1);
	shm_region_detach(l);
	for (n = 1;; n++) {
		test_alloc_count = 0;
		test_alloc_fail_at = n;
		rc = shm_region_create(path, &params, &l);
		if (rc == 0) {
			shm_region_detach(l);
			break;
		}
		CHECK_EQ(rc, -ENOMEM);
		CHECK_EQ(test_alloc_live, 0);
	}
	test_alloc_fail_at = 0;
	CHECK_EQ(test_alloc_live, 0);

	/* A create that fails on a fresh path leaves nothing behind (no
	 * empty file for attachers to wait on). */
	{
		char fresh[600];

		snprintf(fresh, sizeof(fresh), "%s/fresh.shm", dir);
		test_alloc_count = 0;
		test_alloc_fail_at = 1;
		CHECK_EQ(shm_region_create(fresh, &params, &l), -ENOMEM);
		test_alloc_fail_at = 0;
		CHECK_EQ(access(fresh, F_OK), -1);
		CHECK_EQ(shm_region_attach(fresh, &a), -ENOENT);
	}
	shm_region_set_allocator(NULL, NULL);
}

/* Files a launcher killed mid-create left beside the region are removed
 * by the next create; other files are not. */
static void test_leftovers(void)
{
	char junk[600], keep[600];
	struct shm_region *l;
	int fd;

	snprintf(junk, sizeof(junk), "%s.new.Ab3dE9", path);
	snprintf(keep, sizeof(keep), "%s.new.keep-me", path);
	fd = open(junk, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	fd = open(keep, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(access(junk, F_OK), -1);
	CHECK_EQ(access(keep, F_OK), 0);
	unlink(keep);
	shm_region_detach(l);
}

/* Entries of directory d other than . and .. */
static int dir_entries(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	int n = 0;

	CHECK(dd != NULL);
	while ((e = readdir(dd)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(dd);
	return n;
}

/* An unnamed region is never in its directory. A child that inherits its
 * descriptor attaches through it with a description of its own: its role
 * lock is seen by the launcher's handle while it lives (a lock taken
 * through the shared description would be the launcher's own, and
 * invisible to it) and goes when the child is killed. */
static void test_unnamed(void)
{
	char udir[600];
	struct shm_region *l, *l2, *a;
	struct shm_slot_ref s, s2;
	struct stat st;
	int to_parent[2], to_child[2];
	char byte;
	pid_t pid;
	int wst;

	snprintf(udir, sizeof(udir), "%s/unnamed", dir);
	CHECK_EQ(mkdir(udir, 0700), 0);
	CHECK_EQ(shm_region_create_unnamed(udir, &params, &l), 0);
	CHECK_EQ(dir_entries(udir), 0);
	CHECK_EQ(fstat(shm_region_fd(l), &st), 0);
	CHECK_EQ(st.st_nlink, 0);
	CHECK_EQ((uint64_t)st.st_size, shm_region_bytes(l));
	CHECK_EQ(shm_region_member_id(l), 0x1234);
	CHECK_EQ(shm_region_incarnation(l), 1);

	CHECK_EQ(pipe(to_parent), 0);
	CHECK_EQ(pipe(to_child), 0);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		struct shm_region *c;
		int inherited = dup(shm_region_fd(l));

		/* never outlive a failed check of the parent's */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(to_child[1]);

		if (inherited < 0 || shm_region_attach_fd(inherited, &c) != 0 ||
		    fcntl(inherited, F_GETFD) != -1 || /* closed once attached */
		    shm_role_claim(c, SHM_ROLE_STORED) != 0)
			_exit(1);
		shm_region_set_member_id(c, 0x5678);
		if (write(to_parent[1], "a", 1) != 1)
			_exit(1);
		/* blocks until killed; a read that returns is the parent gone */
		_exit(read(to_child[0], &byte, 1) == 1 ? 0 : 1);
	}
	CHECK_EQ(read(to_parent[0], &byte, 1), 1);
	CHECK(shm_role_is_live(l, SHM_ROLE_STORED));
	CHECK_EQ(shm_region_member_id(l), 0x5678); /* the same memory */
	kill(pid, SIGKILL);
	CHECK_EQ(waitpid(pid, &wst, 0), pid);
	CHECK(!shm_role_is_live(l, SHM_ROLE_STORED));
	close(to_parent[0]);
	close(to_parent[1]);
	close(to_child[0]);
	close(to_child[1]);

	/* In this process too, the handle has its own description. */
	CHECK_EQ(shm_region_attach_fd(dup(shm_region_fd(l)), &a), 0);
	CHECK_EQ(shm_role_claim(a, SHM_ROLE_RAFTD), 0);
	CHECK(shm_role_is_live(l, SHM_ROLE_RAFTD));
	shm_region_detach(a);
	CHECK(!shm_role_is_live(l, SHM_ROLE_RAFTD));

	/* Two regions of one member never hand out the same generation:
	 * each starts from a random floor. */
	CHECK_EQ(shm_region_create_unnamed(udir, &params, &l2), 0);
	CHECK_EQ(shm_slot_claim(l, &s), 0);
	CHECK_EQ(shm_slot_claim(l2, &s2), 0);
	CHECK(s.generation != s2.generation);
	CHECK(s.generation > 1 && s2.generation > 1);
	shm_region_detach(l2);
	shm_region_detach(l);
	CHECK_EQ(dir_entries(udir), 0);

	/* Refusals: a descriptor that is not open, a file that is no region,
	 * a directory. The caller keeps its descriptor on failure. */
	CHECK_EQ(shm_region_attach_fd(987, &a), -EBADF);
	CHECK_EQ(shm_region_attach_fd(-1, &a), -EBADF);
	{
		char other[700];
		int fd;

		snprintf(other, sizeof(other), "%s/plain", udir);
		fd = open(other, O_CREAT | O_RDWR, 0600);
		CHECK(fd >= 0);
		CHECK_EQ(write(fd, "precious user data", 18), 18);
		CHECK_EQ(shm_region_attach_fd(fd, &a), -EPROTO);
		CHECK(strstr(errmsg_get(-EPROTO), "descriptor"));
		CHECK(fcntl(fd, F_GETFD) >= 0);
		close(fd);
		unlink(other);
		fd = open(udir, O_RDONLY | O_DIRECTORY);
		CHECK(fd >= 0);
		CHECK(shm_region_attach_fd(fd, &a) < 0);
		close(fd);
	}
	CHECK_EQ(shm_region_create_unnamed("/nonexistent-cetcd-dir", &params, &l), -ENOENT);
	CHECK(strstr(errmsg_get(-ENOENT), "/nonexistent-cetcd-dir"));

	/* A failed allocation leaves nothing: no memory, no file. */
	{
		long n;
		int rc;

		shm_region_set_allocator(test_alloc, test_free);
		for (n = 1;; n++) {
			test_alloc_count = 0;
			test_alloc_fail_at = n;
			rc = shm_region_create_unnamed(udir, &params, &l);
			if (rc == 0) {
				shm_region_detach(l);
				break;
			}
			CHECK_EQ(rc, -ENOMEM);
			CHECK_EQ(test_alloc_live, 0);
		}
		CHECK(n > 1);
		test_alloc_fail_at = 0;
		CHECK_EQ(test_alloc_live, 0);
		shm_region_set_allocator(NULL, NULL);
	}
	CHECK_EQ(dir_entries(udir), 0);
	CHECK_EQ(rmdir(udir), 0);
}

int main(void)
{
	test_region_path(dir, sizeof(dir), path, sizeof(path));
	test_create_attach();
	test_cache_area();
	test_bad_params();
	test_version_mismatch();
	test_not_a_region();
	test_stale_reinit();
	test_alloc_failures();
	test_leftovers();
	test_unnamed();
	printf("test_region: ok\n");
	return 0;
}
