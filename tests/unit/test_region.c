/*
 * Unit tests for shm/region.c: create, attach, the cache's area, the
 * version check and its message, stale-region re-initialisation, refusals, allocation failures.
 */
#include <fcntl.h>
#include <stdatomic.h>

#include "shm_testlib.h"

#include "shm/bcast.h"
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

static void test_create_attach(void)
{
	struct shm_region *l, *a;

	CHECK_EQ(shm_region_attach(path, &a), -ENOENT);
	CHECK(strstr(shm_region_last_error(), path) != NULL);
	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_attach(path, &a), 0);
	CHECK_EQ(shm_slot_count(a), 4);
	CHECK_EQ(shm_region_member_id(a), 0x1234);
	CHECK_EQ(shm_region_max_request_bytes(a), 64 * 1024);
	CHECK_EQ(shm_region_max_record(a), 64 * 1024 + SHM_RECORD_OVERHEAD);
	CHECK_EQ(shm_region_incarnation(a), 1);
	CHECK_EQ(shm_region_bytes(a), shm_region_bytes(l));
	/* Rings hold several of the largest record; events twice that. */
	CHECK(ring_capacity(shm_slot_ring(a, 0, SHM_SLOT_TO_RAFTD)) >=
	      4ull * shm_region_max_record(a));
	CHECK_EQ(ring_max_record(shm_daemon_ring(a, SHM_RING_COMMITTED)),
		 shm_region_max_record(a));
	CHECK_EQ(bcast_max_record(shm_events(a)),
		 2 * 64 * 1024 + SHM_RECORD_OVERHEAD);
	shm_region_set_member_id(a, 99);
	CHECK_EQ(shm_region_member_id(l), 99);

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
		CHECK(strstr(shm_region_last_error(), "live cetcd launcher"));
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
	CHECK(strstr(shm_region_last_error(), "slot count"));
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
	printf("version mismatch message: %s\n", shm_region_last_error());
	CHECK(strstr(shm_region_last_error(), msg) != NULL);
	CHECK(strstr(shm_region_last_error(), path) != NULL);

	/* Bad magic. */
	poke(path, 0, "NOTCETCD", 8);
	CHECK_EQ(shm_region_attach(path, &a), -EPROTO);
	CHECK(strstr(shm_region_last_error(), "bad magic"));
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
		CHECK(strstr(shm_region_last_error(), "inconsistent header"));
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
	CHECK(strstr(shm_region_last_error(), "not a cetcd"));
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
	int i;

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	incarnation = shm_region_incarnation(l);
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
	CHECK(strstr(shm_region_last_error(), "still used by a live process"));
	shm_region_detach(a);

	CHECK_EQ(shm_region_create(path, &params, &l), 0);
	CHECK_EQ(shm_region_incarnation(l), incarnation + 1);
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
	printf("test_region: ok\n");
	return 0;
}
