/*
 * The member region file: layout, create (or re-initialise), attach,
 * detach. See region.h and layout.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "shm/barrier.h"
#include "shm/bcast.h"
#include "base/log/errmsg.h"
#include "shm/layout.h"
#include "shm/metrics.h"
#include "shm/readers.h"
#include "shm/ring.h"
#include "shm/tokens.h"

static void *(*region_alloc_fn)(size_t) = malloc;
static void (*region_free_fn)(void *) = free;

void shm_region_set_allocator(void *(*alloc_fn)(size_t),
			      void (*free_fn)(void *))
{
	region_alloc_fn = alloc_fn ? alloc_fn : malloc;
	region_free_fn = free_fn ? free_fn : free;
}

static uint64_t region_page_round(uint64_t n)
{
	return (n + SHM_PAGE - 1) & ~(uint64_t)(SHM_PAGE - 1);
}

/*
 * Fills every layout field of h from slot_count, max_request_bytes and
 * cache_bytes.
 * Both create and attach use it: attach recomputes the layout and insists
 * that the file's header agrees, field by field.
 */
static int region_layout(uint32_t slot_count, uint64_t max_request_bytes,
			 uint64_t cache_bytes, struct shm_header *h)
{
	uint64_t off, rings;

	if (slot_count < 4 || slot_count > SHM_MAX_SLOTS)
		return shm_set_error(-EINVAL, "shm: slot count %u is out of range (4 to %u)",
				     slot_count, SHM_MAX_SLOTS);
	if (max_request_bytes < 1 ||
	    max_request_bytes > SHM_MAX_REQUEST_BYTES_LIMIT) {
		return shm_set_error(-EINVAL, "shm: max request bytes %llu is out of range "
				     "(1 to %u)", (unsigned long long)max_request_bytes,
				     SHM_MAX_REQUEST_BYTES_LIMIT);
	}
	if (cache_bytes > SHM_MAX_CACHE_BYTES)
		return shm_set_error(-EINVAL, "shm: latest-entry cache of %llu bytes is too large (at most %llu)",
				     (unsigned long long)cache_bytes,
				     (unsigned long long)SHM_MAX_CACHE_BYTES);
	h->header_bytes = SHM_HEADER_BYTES;
	h->max_request_bytes = max_request_bytes;
	h->slot_count = slot_count;
	h->reader_count = slot_count * SHM_READERS_PER_SLOT + SHM_READERS_EXTRA;
	h->ring_max_record = (uint32_t)max_request_bytes + SHM_RECORD_OVERHEAD;
	h->bcast_max_record = 2 * (uint32_t)max_request_bytes +
			      SHM_RECORD_OVERHEAD;
	h->ring_stride = region_page_round(ring_footprint(
		ring_cap_for(h->ring_max_record, SHM_RING_RECORDS)));

	off = SHM_HEADER_BYTES;
	h->roles_off = off;
	off += region_page_round(SHM_ROLE_COUNT * sizeof(struct shm_role_block));
	h->slots_off = off;
	off += region_page_round((uint64_t)slot_count * sizeof(struct shm_slot));
	h->readers_off = off;
	off += region_page_round((uint64_t)h->reader_count *
				 sizeof(struct shm_reader_entry));
	h->status_off = off;
	off += sizeof(struct shm_status_block);
	h->metrics_off = off;
	h->metrics_bytes = region_page_round((uint64_t)(SHM_METRICS_GATEWAY + slot_count) *
					     sizeof(struct shm_metrics));
	off += h->metrics_bytes;
	h->tokens_off = off;
	h->tokens_bytes = region_page_round(shm_tokens_bytes());
	off += h->tokens_bytes;
	h->rings_off = off;
	rings = (uint64_t)slot_count * SHM_SLOT_RING_COUNT + SHM_DAEMON_RING_COUNT;
	off += rings * h->ring_stride;
	h->bcast_off = off;
	h->bcast_bytes = region_page_round(bcast_footprint(
		bcast_cap_for(h->bcast_max_record, SHM_RING_RECORDS)));
	off += h->bcast_bytes;
	h->blob_off = off;
	h->blob_bytes = 0;
	/* On a 2 MiB boundary of the file, so that a runtime dir on a tmpfs
	 * with huge pages (huge=within_size or advise) backs the cache's sets
	 * with whole 2 MiB pages: one lookup is then one TLB entry's worth of
	 * page walk less. Costs at most 2 MiB of the region. */
	if (cache_bytes)
		off = (off + SHM_HUGE_ALIGN - 1) & ~(uint64_t)(SHM_HUGE_ALIGN - 1);
	h->cache_off = off;
	/* The sets, and a page more for the cache's header. */
	h->cache_bytes = cache_bytes ? region_page_round(cache_bytes) + SHM_PAGE : 0;
	off += h->cache_bytes;
	h->region_bytes = off;
	return 0;
}

/* Compares the layout fields of a header read from a file with the layout
 * its own parameters give; names the first field that differs. */
static const char *region_layout_mismatch(const struct shm_header *file)
{
	struct shm_header want;

	memset(&want, 0, sizeof(want));
	/* cache_bytes holds the cache's whole area: its sets and a page. */
	uint64_t sets = file->cache_bytes >= SHM_PAGE ? file->cache_bytes - SHM_PAGE : 0;
	if (region_layout(file->slot_count, file->max_request_bytes, sets, &want))
		return "slot_count or max_request_bytes";
#define REGION_CHECK(f) if (file->f != want.f) return #f
	REGION_CHECK(header_bytes);
	REGION_CHECK(reader_count);
	REGION_CHECK(ring_max_record);
	REGION_CHECK(bcast_max_record);
	REGION_CHECK(ring_stride);
	REGION_CHECK(roles_off);
	REGION_CHECK(slots_off);
	REGION_CHECK(readers_off);
	REGION_CHECK(status_off);
	REGION_CHECK(metrics_off);
	REGION_CHECK(metrics_bytes);
	REGION_CHECK(tokens_off);
	REGION_CHECK(tokens_bytes);
	REGION_CHECK(rings_off);
	REGION_CHECK(bcast_off);
	REGION_CHECK(bcast_bytes);
	REGION_CHECK(blob_off);
	REGION_CHECK(blob_bytes);
	REGION_CHECK(cache_off);
	REGION_CHECK(cache_bytes);
	REGION_CHECK(region_bytes);
#undef REGION_CHECK
	return NULL;
}

/* Allocates the process-local handle for a mapped region whose layout is
 * described by h (the mapping's own header may not be written yet). */
static int region_handle_new(int fd, void *base, const struct shm_header *h,
			     struct shm_region **out)
{
	struct shm_region *r;

	r = region_alloc_fn(sizeof(*r));
	if (!r)
		goto out_nomem;
	memset(r, 0, sizeof(*r));
	r->slot_held = region_alloc_fn(h->slot_count * sizeof(bool));
	if (!r->slot_held)
		goto out_free_handle;
	r->reader_held = region_alloc_fn(h->reader_count * sizeof(bool));
	if (!r->reader_held)
		goto out_free_slots;
	memset(r->slot_held, 0, h->slot_count * sizeof(bool));
	memset(r->reader_held, 0, h->reader_count * sizeof(bool));
	r->fd = fd;
	r->base = base;
	r->bytes = h->region_bytes;
	r->hdr = base;
	/* Asks for 2 MiB pages for the cache (honoured on a tmpfs mounted
	 * with huge=advise; within_size and always need no asking; elsewhere
	 * a no-op). Every lookup lands on a random set. */
	if (h->cache_bytes)
		(void)madvise((uint8_t *)base + h->cache_off, h->cache_bytes, MADV_HUGEPAGE);
	*out = r;
	return 0;

out_free_slots:
	region_free_fn(r->slot_held);
out_free_handle:
	region_free_fn(r);
out_nomem:
	return shm_set_error(-ENOMEM, "shm: out of memory for the region handle");
}

/* Wires the rings of slot i (or, for i == slot_count, the daemon rings) to
 * the doorbells of their consumer and producer. */
static int region_init_rings(struct shm_region *r)
{
	struct shm_header *h = r->hdr;
	struct shm_doorbell *raftd = &shm_role_block(r, SHM_ROLE_RAFTD)->doorbell;
	struct shm_doorbell *stored = &shm_role_block(r, SHM_ROLE_STORED)->doorbell;
	struct shm_doorbell *slot;
	uint64_t base;
	uint32_t i;
	int rc = 0;

	for (i = 0; i < h->slot_count && rc == 0; i++) {
		slot = &shm_slot_at(r, i)->doorbell;
		base = (uint64_t)i * SHM_SLOT_RING_COUNT;
		rc |= ring_init(shm_ring_at(r, base + SHM_SLOT_TO_RAFTD),
				h->ring_stride, h->ring_max_record, raftd, slot);
		rc |= ring_init(shm_ring_at(r, base + SHM_SLOT_FROM_RAFTD),
				h->ring_stride, h->ring_max_record, slot, raftd);
		rc |= ring_init(shm_ring_at(r, base + SHM_SLOT_FROM_STORED),
				h->ring_stride, h->ring_max_record, slot, stored);
		rc |= ring_init(shm_ring_at(r, base + SHM_SLOT_TO_STORED),
				h->ring_stride, h->ring_max_record, stored, slot);
	}
	base = (uint64_t)h->slot_count * SHM_SLOT_RING_COUNT;
	rc |= ring_init(shm_ring_at(r, base + SHM_RING_COMMITTED),
			h->ring_stride, h->ring_max_record, stored, raftd);
	rc |= ring_init(shm_ring_at(r, base + SHM_RING_STORED_PROPOSALS),
			h->ring_stride, h->ring_max_record, raftd, stored);
	rc |= bcast_init(r->base + h->bcast_off, h->bcast_bytes,
			 h->bcast_max_record);
	return rc ? -EINVAL : 0;
}

/*
 * Draws the member's TLS session ticket key into h from the kernel's random
 * source, waiting for it to be seeded if it is not yet. No fallback: a key
 * that can be guessed lets whoever guesses it read the tickets. Returns 0,
 * or -errno of getrandom.
 */
static int region_draw_ticket_key(struct shm_header *h)
{
	ssize_t n;
	int rc;

	do
		n = getrandom(h->ticket_key, sizeof(h->ticket_key), 0);
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(h->ticket_key))
		return 0;
	rc = n < 0 ? -errno : -EIO;
	return shm_set_error(rc, "shm: cannot draw the TLS session ticket key: getrandom: %s",
			     strerror(-rc));
}

/* Lays out a fresh region in r's zero-filled mapping. */
static int region_init(struct shm_region *r, const struct shm_region_params *p,
		       uint64_t generation_floor, uint64_t incarnation)
{
	struct shm_header *h = r->hdr;
	uint32_t i;
	int rc;

	if (region_layout(p->slot_count, p->max_request_bytes, p->cache_bytes, h))
		return -EINVAL;
	rc = region_draw_ticket_key(h);
	if (rc)
		return rc;
	atomic_init(&h->generation_floor, generation_floor);
	h->incarnation = incarnation;
	atomic_init(&h->member_id, p->member_id);
	atomic_init(&h->cluster_id, 0);
	for (i = 0; i < SHM_ROLE_COUNT; i++) {
		shm_doorbell_init(&shm_role_block(r, i)->doorbell);
		atomic_init(&shm_role_block(r, i)->holder_pid, 0);
	}
	/* Starting every slot at the old floor keeps generations increasing
	 * across re-initialisation: the next claim hands out floor + 1. */
	for (i = 0; i < p->slot_count; i++) {
		atomic_init(&shm_slot_at(r, i)->generation, generation_floor);
		atomic_init(&shm_slot_at(r, i)->holder_pid, 0);
		shm_doorbell_init(&shm_slot_at(r, i)->doorbell);
	}
	for (i = 0; i < h->reader_count; i++) {
		atomic_init(&shm_reader_at(r, i)->txid, READERS_IDLE);
		atomic_init(&shm_reader_at(r, i)->holder_pid, 0);
	}
	status_seqlock_init(shm_status_at(r)->raftd);
	status_seqlock_init(shm_status_at(r)->stored);
	status_delivered_init(shm_status_at(r)->stored_delivered);
	status_waiting_init(shm_status_at(r)->stored_waiting);
	if (region_init_rings(r))
		return shm_set_error(-EINVAL, "shm: ring layout does not fit (internal error)");
	/* Last: the header says what this is. Nobody can see the file yet
	 * (it is renamed into place afterwards), so no fence is needed. */
	h->layout_version = SHM_LAYOUT_VERSION;
	memcpy(h->magic, SHM_MAGIC, sizeof(h->magic));
	return 0;
}

/*
 * Opens (creating if missing) the file at path and takes its launcher
 * lock, making sure the locked file is still the one at path (another
 * launcher may have renamed a new region over it meanwhile).
 */
static int region_lock_path(const char *path, int *out_fd)
{
	struct stat fst, pst;
	int fd, rc, tries;

	for (tries = 0; tries < 100; tries++) {
		fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0) {
			rc = -errno;
			return shm_set_error(rc, "shm: cannot open %s: %s", path,
					     strerror(errno));
		}
		rc = ofdlock_try(fd, SHM_LOCK_LAUNCHER);
		if (rc) {
			close(fd);
			if (rc == -EBUSY)
				shm_set_error(rc, "shm: region %s is held by a live "
					      "cetcd launcher; stop it first, "
					      "or give this member another "
					      "--runtime-dir", path);
			else
				shm_set_error(rc, "shm: cannot lock %s: %s", path,
					      strerror(-rc));
			return rc;
		}
		if (fstat(fd, &fst) == 0 && stat(path, &pst) == 0 &&
		    fst.st_dev == pst.st_dev && fst.st_ino == pst.st_ino) {
			*out_fd = fd;
			return 0;
		}
		close(fd);
	}
	return shm_set_error(-EBUSY, "shm: %s keeps being replaced while being opened", path);
}

/*
 * Checks that the existing (locked) file may be replaced and reads what
 * carries over: the generation floor and the incarnation.
 */
static int region_check_old(const char *path, int fd, uint64_t *floor,
			    uint64_t *incarnation, bool *empty)
{
	struct shm_header prefix;
	struct stat st;
	int rc;

	*floor = 0;
	*incarnation = 0;
	*empty = false;
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		return shm_set_error(rc, "shm: cannot stat %s: %s", path, strerror(errno));
	}
	if (st.st_size == 0) {
		*empty = true; /* just created, or a create that died early */
		return 0;
	}
	if (st.st_size < (off_t)SHM_HEADER_PREFIX_BYTES ||
	    pread(fd, &prefix, SHM_HEADER_PREFIX_BYTES, 0) !=
	    (ssize_t)SHM_HEADER_PREFIX_BYTES ||
	    memcmp(prefix.magic, SHM_MAGIC, sizeof(prefix.magic)) != 0) {
		return shm_set_error(-EEXIST, "shm: %s exists and is not a cetcd shared-memory "
				     "region; it was left alone: remove it or choose "
				     "another --runtime-dir", path);
	}
	rc = ofdlock_any_from(fd, SHM_LOCK_LAUNCHER + 1);
	if (rc != 0) {
		if (rc > 0)
			return shm_set_error(-EBUSY, "shm: stale region %s is still used by a "
					     "live process (it holds a role, slot or "
					     "reader lock); stop that process first",
					     path);
		return shm_set_error(rc, "shm: cannot test locks on %s: %s", path,
				     strerror(-rc));
	}
	*floor = atomic_load_explicit(&prefix.generation_floor,
				      memory_order_relaxed);
	*incarnation = prefix.incarnation;
	return 0;
}

/*
 * Removes the "<path>.new.*" files a launcher killed in the middle of a
 * create left behind (each may be as large as a region). Only called with
 * the launcher lock held: every create holds it while its file exists.
 */
static void region_remove_leftovers(const char *path)
{
	char dir[PATH_MAX], prefix[NAME_MAX + 8], victim[PATH_MAX];
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	struct dirent *e;
	size_t plen;
	DIR *d;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	plen = (size_t)snprintf(prefix, sizeof(prefix), "%s.new.", base);
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, plen) != 0 ||
		    strlen(e->d_name) != plen + 6)
			continue;
		if ((size_t)snprintf(victim, sizeof(victim), "%s/%s", dir,
				     e->d_name) < sizeof(victim))
			unlink(victim);
	}
	closedir(d);
}

/*
 * Sizes the new file. Its pages are not reserved: tmpfs allocates a page
 * when it is first touched, so an idle member holds only the pages it
 * uses (the rings give back what they no longer use, shm/ring.h). The
 * runtime dir must have room for the whole region now, so that a tmpfs
 * far too small is an error here; one that fills up later with other
 * files is the operator's to watch.
 */
static int region_size_file(const char *path, int fd, uint64_t bytes)
{
	struct statvfs sv;
	int rc;

	if (bytes > (uint64_t)SIZE_MAX / 2 || ftruncate(fd, (off_t)bytes) != 0) {
		rc = bytes > (uint64_t)SIZE_MAX / 2 ? -EFBIG : -errno;
		return shm_set_error(rc, "shm: cannot size the region %s to %llu bytes: "
				     "%s", path, (unsigned long long)bytes,
				     strerror(-rc));
	}
	if (fstatvfs(fd, &sv) == 0 && sv.f_blocks != 0 &&
	    (uint64_t)sv.f_bavail * sv.f_frsize < bytes)
		return shm_set_error(-ENOSPC, "shm: no room for the %llu MiB region %s: the "
				     "runtime dir has %llu MiB free; make it larger or "
				     "lower --max-request-bytes",
				     (unsigned long long)(bytes >> 20), path,
				     (unsigned long long)(((uint64_t)sv.f_bavail * sv.f_frsize) >> 20));
	return 0;
}

/*
 * A generation floor for a region that carries none over: random, so that
 * the generations of two regions of one member never meet, whatever the
 * clock did between them. A restarted member replays WAL entries whose
 * origins name its earlier region's (slot, generation, request id); a new
 * gatewayd whose first calls reused them would take those results as its
 * own. 2^62 leaves room for every claim a region will ever make.
 */
static uint64_t region_fresh_floor(void)
{
	uint64_t v = 0;
	struct timespec ts;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		clock_gettime(CLOCK_REALTIME, &ts);
		v = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		v ^= (uint64_t)getpid() << 40;
	}
	v &= (1ull << 62) - 1;
	return v ? v : 1;
}

/*
 * Builds a region in the empty file fd (named what in messages): takes its
 * launcher lock, sizes it, maps it and lays it out. On failure the caller
 * still owns fd and whatever name it has.
 */
static int region_build(int fd, const char *what, const struct shm_header *layout,
			const struct shm_region_params *p, uint64_t floor,
			uint64_t incarnation, struct shm_region **out)
{
	struct shm_region *r;
	void *base;
	int rc;

	rc = ofdlock_try(fd, SHM_LOCK_LAUNCHER);
	if (rc)
		return shm_set_error(rc, "shm: cannot lock %s: %s", what, strerror(-rc));
	rc = region_size_file(what, fd, layout->region_bytes);
	if (rc)
		return rc;
	base = mmap(NULL, layout->region_bytes, PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		return shm_set_error(rc, "shm: cannot map %s: %s", what, strerror(errno));
	}
	rc = region_handle_new(fd, base, layout, &r);
	if (rc)
		goto out_unmap;
	rc = region_init(r, p, floor, incarnation);
	if (rc)
		goto out_free_handle;
	r->launcher = true;
	*out = r;
	return 0;

out_free_handle:
	region_free_fn(r->reader_held);
	region_free_fn(r->slot_held);
	region_free_fn(r);
out_unmap:
	munmap(base, layout->region_bytes);
	return rc;
}

int shm_region_create(const char *path, const struct shm_region_params *p,
		      struct shm_region **out)
{
	struct shm_header layout;
	uint64_t floor, incarnation;
	struct shm_region *r;
	char tmp[PATH_MAX];
	int old_fd = -1, fd, rc;
	bool old_empty = false;

	memset(&layout, 0, sizeof(layout));
	rc = region_layout(p->slot_count, p->max_request_bytes, p->cache_bytes, &layout);
	if (rc)
		return rc;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.new.XXXXXX", path) >=
	    sizeof(tmp)) {
		return shm_set_error(-ENAMETOOLONG, "shm: region path %s is too long", path);
	}
	rc = region_lock_path(path, &old_fd);
	if (rc)
		return rc;
	rc = region_check_old(path, old_fd, &floor, &incarnation, &old_empty);
	if (rc)
		goto out_close_old;
	if (old_empty)
		floor = region_fresh_floor();
	region_remove_leftovers(path);

	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		shm_set_error(rc, "shm: cannot create %s: %s", tmp, strerror(errno));
		goto out_close_old;
	}
	rc = region_build(fd, tmp, &layout, p, floor, incarnation + 1, &r);
	if (rc)
		goto out_unlink_tmp;
	if (rename(tmp, path) != 0) {
		rc = -errno;
		shm_set_error(rc, "shm: cannot rename %s to %s: %s", tmp, path,
			      strerror(errno));
		shm_region_detach(r);
		unlink(tmp);
		goto out_close_old;
	}
	close(old_fd);
	*out = r;
	return 0;

out_unlink_tmp:
	unlink(tmp);
	close(fd);
out_close_old:
	/* An empty file is ours (or a dead launcher's): do not leave it to
	 * make attachers wait for a region that will never come. */
	if (old_empty)
		unlink(path);
	close(old_fd);
	return rc;
}

/* Opens a file in dir that has no name. O_TMPFILE where the file system
 * has it; elsewhere a named file unlinked at once. */
static int region_open_unnamed(const char *dir)
{
	char tmp[PATH_MAX];
	int fd, err;

	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		return fd;
	err = errno;
	if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL)
		return shm_set_error(-err, "shm: cannot create the region in %s: %s", dir,
				     strerror(err));
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/region.unnamed.XXXXXX", dir) >=
	    sizeof(tmp)) {
		return shm_set_error(-ENAMETOOLONG, "shm: runtime dir %s is too long", dir);
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		return shm_set_error(-err, "shm: cannot create the region in %s: %s", dir,
				     strerror(err));
	}
	unlink(tmp);
	return fd;
}

int shm_region_create_unnamed(const char *dir, const struct shm_region_params *p,
			      struct shm_region **out)
{
	struct shm_header layout;
	char what[PATH_MAX];
	int fd, rc;

	memset(&layout, 0, sizeof(layout));
	rc = region_layout(p->slot_count, p->max_request_bytes, p->cache_bytes, &layout);
	if (rc)
		return rc;
	snprintf(what, sizeof(what), "the unnamed region in %s", dir);
	fd = region_open_unnamed(dir);
	if (fd < 0)
		return fd;
	rc = region_build(fd, what, &layout, p, region_fresh_floor(), 1, out);
	if (rc)
		close(fd);
	return rc;
}

int shm_region_fd(const struct shm_region *r)
{
	return r->fd;
}

/* Reads and checks the header of an opened region file. */
static int region_check_header(const char *path, int fd, struct stat *st,
			       struct shm_header *h)
{
	const char *field;

	if (st->st_size == 0)
		return shm_set_error(-EAGAIN, "shm: region %s is empty: a launcher is creating "
				     "it; retry", path);
	if (st->st_size < (off_t)SHM_HEADER_BYTES ||
	    pread(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
	    memcmp(h->magic, SHM_MAGIC, sizeof(h->magic)) != 0) {
		return shm_set_error(-EPROTO, "shm: %s is not a cetcd shared-memory region "
				     "(bad magic)", path);
	}
	if (h->layout_version != SHM_LAYOUT_VERSION)
		return shm_set_error(-EPROTO, "shm: region %s has layout version %u, but this "
				     "program uses layout version %u; run every "
				     "process of the member from the same cetcd "
				     "build (restart the launcher to re-create the "
				     "region)", path, h->layout_version,
				     SHM_LAYOUT_VERSION);
	field = region_layout_mismatch(h);
	if (field)
		return shm_set_error(-EPROTO, "shm: region %s has an inconsistent header "
				     "(field %s); restart the launcher to re-create it",
				     path, field);
	if ((uint64_t)st->st_size != h->region_bytes)
		return shm_set_error(-EPROTO, "shm: region %s is %llu bytes, its header says "
				     "%llu; restart the launcher to re-create it", path,
				     (unsigned long long)st->st_size,
				     (unsigned long long)h->region_bytes);
	return 0;
}

/* Checks and maps the region file open at fd (named what in messages);
 * on success the handle owns fd, on failure the caller does. */
static int region_attach_open(const char *what, int fd, struct shm_region **out)
{
	struct shm_header h;
	struct stat st;
	void *base;
	int rc;

	if (fstat(fd, &st) != 0) {
		rc = -errno;
		return shm_set_error(rc, "shm: cannot stat %s: %s", what, strerror(errno));
	}
	if (!S_ISREG(st.st_mode))
		return shm_set_error(-EPROTO, "shm: %s is not a regular file, so not a region", what);
	rc = region_check_header(what, fd, &st, &h);
	if (rc)
		return rc;
	base = mmap(NULL, h.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		return shm_set_error(rc, "shm: cannot map %s: %s", what, strerror(errno));
	}
	rc = region_handle_new(fd, base, &h, out);
	if (rc)
		munmap(base, h.region_bytes);
	return rc;
}

int shm_region_attach(const char *path, struct shm_region **out)
{
	int fd, rc;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOENT)
			return shm_set_error(rc, "shm: no region at %s (is the cetcd "
					     "launcher running with this "
					     "--runtime-dir?)", path);
		return shm_set_error(rc, "shm: cannot open %s: %s", path, strerror(errno));
	}
	rc = region_attach_open(path, fd, out);
	if (rc)
		close(fd);
	return rc;
}

int shm_region_attach_fd(int fd, struct shm_region **out)
{
	char proc[64], what[64];
	int own, rc;

	snprintf(what, sizeof(what), "inherited as descriptor %d", fd);
	if (fd < 0 || fcntl(fd, F_GETFD) < 0)
		return shm_set_error(-EBADF, "shm: %s: no such open descriptor", what);
	/* Opening the descriptor's /proc link makes a new open file
	 * description of the same file: OFD locks taken through it are this
	 * process's alone, and go when it dies. */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	own = open(proc, O_RDWR | O_CLOEXEC);
	if (own < 0) {
		rc = -errno;
		return shm_set_error(rc, "shm: cannot reopen %s through %s: %s (is /proc "
				     "mounted?)", what, proc, strerror(errno));
	}
	rc = region_attach_open(what, own, out);
	if (rc) {
		close(own);
		return rc;
	}
	close(fd);
	return 0;
}

void shm_region_detach(struct shm_region *r)
{
	if (!r)
		return;
	munmap(r->base, r->bytes);
	close(r->fd); /* drops every OFD lock taken through it */
	region_free_fn(r->reader_held);
	region_free_fn(r->slot_held);
	region_free_fn(r);
}

uint64_t shm_region_member_id(const struct shm_region *r)
{
	return atomic_load_explicit(&r->hdr->member_id, memory_order_acquire);
}

void shm_region_set_member_id(struct shm_region *r, uint64_t member_id)
{
	atomic_store_explicit(&r->hdr->member_id, member_id,
			      memory_order_release);
}

void shm_region_set_ids(struct shm_region *r, uint64_t member_id, uint64_t cluster_id)
{
	atomic_store_explicit(&r->hdr->member_id, 0, memory_order_relaxed);
	atomic_store_explicit(&r->hdr->cluster_id, cluster_id, memory_order_release);
	atomic_store_explicit(&r->hdr->member_id, member_id, memory_order_release);
}

bool shm_region_ids(const struct shm_region *r, uint64_t *member_id, uint64_t *cluster_id)
{
	uint64_t mid = atomic_load_explicit(&r->hdr->member_id, memory_order_acquire);
	uint64_t cid = atomic_load_explicit(&r->hdr->cluster_id, memory_order_acquire);

	/* the member id again: a raftd publishing other ids in between would
	 * have cleared it first */
	if (!mid || !cid || atomic_load_explicit(&r->hdr->member_id, memory_order_acquire) != mid)
		return false;
	*member_id = mid;
	*cluster_id = cid;
	return true;
}

void shm_region_set_published(struct shm_region *r)
{
	atomic_store_explicit(&r->hdr->published, 1, memory_order_release);
}

bool shm_region_published(const struct shm_region *r)
{
	return atomic_load_explicit(&r->hdr->published, memory_order_acquire) != 0;
}

uint64_t shm_region_incarnation(const struct shm_region *r)
{
	return r->hdr->incarnation;
}

const uint8_t *shm_region_ticket_key(const struct shm_region *r)
{
	return r->hdr->ticket_key;
}

uint64_t shm_region_max_request_bytes(const struct shm_region *r)
{
	return r->hdr->max_request_bytes;
}

uint32_t shm_region_max_record(const struct shm_region *r)
{
	return r->hdr->ring_max_record;
}

size_t shm_region_bytes(const struct shm_region *r)
{
	return r->bytes;
}

void *shm_cache_area(struct shm_region *r, size_t *bytes)
{
	*bytes = r->hdr->cache_bytes;
	return r->hdr->cache_bytes ? r->base + r->hdr->cache_off : NULL;
}

struct bcast *shm_events(struct shm_region *r)
{
	return (struct bcast *)(r->base + r->hdr->bcast_off);
}

void shm_events_notify(struct shm_region *r)
{
	struct shm_doorbell *d;
	uint32_t i;

	shm_full_fence();
	for (i = 0; i < r->hdr->slot_count; i++) {
		d = &shm_slot_at(r, i)->doorbell;
		if (atomic_load_explicit(&d->wants_events, memory_order_relaxed))
			shm_doorbell_wake(d);
	}
}
