/*
 * The crash journal of the fault backend (diskio.h, "crash journal"):
 * written by a process whose file is on the fault backend, read back by
 * tests/tools/crashrevert after that process was killed, to give the
 * file what a power cut at the kill could have left.
 *
 * Journal bytes (little endian):
 *   header  "cetcdCL1", u64 synced size (the file's size at its last
 *           completed sync)
 *   record  u64 kind (1, 2, 3 below), u64 off, u64 len, u64 old_len,
 *           then old_len bytes:
 *     write     len bytes written at off; the old_len bytes they
 *               overwrote (the rest lay past the end of the file)
 *     truncate  the file cut or grown to off (len 0); the old_len bytes
 *               it cut off, from off on
 *     allocate  fallocate of len bytes at off (old_len 0)
 * A record that the kill cut short ends the journal: its op had not
 * started; so does a header cut short (the file is as synced).
 */
#include "base/diskio/diskio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define CRASHLOG_MAGIC "cetcdCL1"
#define CRASHLOG_HEADER 16u
#define CRASHLOG_RECORD 32u
#define CRASHLOG_SECTOR 512u

uint64_t diskio_fault_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- writing (the fault backend) ---- */

int diskio_crashlog_begin(struct diskio_crashlog *l, int file_fd, uint64_t synced_size)
{
	char proc[64], path[DISKIO_CRASHLOG_PATH_MAX];
	uint8_t head[CRASHLOG_HEADER];
	static const char suffix[] = DISKIO_CRASHLOG_SUFFIX;

	if (l->fd >= 0)
		return 0;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", file_fd);
	ssize_t n = readlink(proc, path, sizeof(path) - sizeof(suffix));
	if (n < 0)
		return -errno;
	if ((size_t)n >= sizeof(path) - sizeof(suffix))
		return -ENAMETOOLONG;
	path[n] = '\0';
	/* a file already unlinked: nothing of it survives a crash anyway */
	static const char deleted[] = " (deleted)";
	if ((size_t)n >= sizeof(deleted) - 1 &&
	    strcmp(path + n - (sizeof(deleted) - 1), deleted) == 0)
		return 0;
	memcpy(path + n, suffix, sizeof(suffix));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	memcpy(head, CRASHLOG_MAGIC, 8);
	put64(head + 8, synced_size);
	int rc = diskio_pwrite_all(fd, head, sizeof(head), 0);
	if (rc < 0) {
		close(fd);
		unlink(path);
		return rc;
	}
	memcpy(l->path, path, (size_t)n + sizeof(suffix));
	l->fd = fd;
	return 0;
}

int diskio_crashlog_append(struct diskio_crashlog *l, enum diskio_crashlog_kind kind,
			   uint64_t off, uint64_t len, const void *old, size_t old_len)
{
	uint8_t rec[CRASHLOG_RECORD];
	struct iovec iov[2] = { { rec, sizeof(rec) }, { (void *)old, old_len } };
	size_t total = sizeof(rec) + old_len;

	if (l->fd < 0)
		return 0;
	memset(rec, 0, sizeof(rec));
	put64(rec, (uint64_t)kind);
	put64(rec + 8, off);
	put64(rec + 16, len);
	put64(rec + 24, old_len);
	/* O_APPEND: one writev, resumed where it stopped */
	for (size_t done = 0; done < total;) {
		ssize_t n = writev(l->fd, iov, old_len ? 2 : 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		done += (size_t)n;
		for (int i = 0; i < 2; i++) {
			size_t take = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
			iov[i].iov_base = (uint8_t *)iov[i].iov_base + take;
			iov[i].iov_len -= take;
			n -= (ssize_t)take;
		}
	}
	return 0;
}

void diskio_crashlog_end(struct diskio_crashlog *l)
{
	if (l->fd < 0)
		return;
	unlink(l->path);
	close(l->fd);
	l->fd = -1;
}

/* ---- reading back (the revert tool) ---- */

struct crashlog_rec {
	uint64_t kind, off, len, old_len;
	const uint8_t *old;
	uint8_t *data; /* a write's bytes, read back before it is undone */
};

int diskio_crashlog_parse(const uint8_t *buf, size_t size, struct diskio_crashlog_info *info)
{
	memset(info, 0, sizeof(*info));
	if (size < CRASHLOG_HEADER) {
		/* killed while the journal was begun: before the first op */
		if (memcmp(buf, CRASHLOG_MAGIC, size < 8 ? size : 8) != 0)
			return -EBADMSG;
		info->headless = true;
		return 0;
	}
	if (memcmp(buf, CRASHLOG_MAGIC, 8) != 0)
		return -EBADMSG;
	info->synced_size = get64(buf + 8);
	if (info->synced_size > DISKIO_CRASHLOG_MAX_OFF)
		return -EBADMSG;
	info->end = info->synced_size;
	size_t at = CRASHLOG_HEADER;
	while (size - at >= CRASHLOG_RECORD) {
		const uint8_t *r = buf + at;
		uint64_t kind = get64(r), off = get64(r + 8), len = get64(r + 16);
		uint64_t old_len = get64(r + 24);
		if (kind < DISKIO_CRASHLOG_WRITE || kind > DISKIO_CRASHLOG_ALLOCATE ||
		    off > DISKIO_CRASHLOG_MAX_OFF || len > DISKIO_CRASHLOG_MAX_OFF - off ||
		    old_len > DISKIO_CRASHLOG_MAX_OFF - off)
			return -EBADMSG;
		if ((kind == DISKIO_CRASHLOG_WRITE && old_len > len) ||
		    (kind == DISKIO_CRASHLOG_TRUNCATE && len != 0) ||
		    (kind == DISKIO_CRASHLOG_ALLOCATE && old_len != 0))
			return -EBADMSG;
		if (old_len > size - at - CRASHLOG_RECORD)
			break; /* cut short by the kill: its op never started */
		at += CRASHLOG_RECORD + (size_t)old_len;
		if (kind == DISKIO_CRASHLOG_WRITE)
			info->write_bytes += len;
		uint64_t end = off + (len > old_len ? len : old_len);
		if (end > info->end)
			info->end = end;
		info->records++;
	}
	info->used = at;
	return 0;
}

/* Reads len bytes at off; what lies past the end of the file is zeros. */
static int crashlog_read(int fd, uint8_t *buf, size_t len, uint64_t off)
{
	struct stat st;
	memset(buf, 0, len);
	if (fstat(fd, &st) < 0)
		return -errno;
	uint64_t size = (uint64_t)st.st_size;
	if (off >= size)
		return 0;
	return diskio_pread_all(fd, buf, size - off < len ? (size_t)(size - off) : len, off);
}

/* Replays rec as the power cut left it (RANDOM: kept, lost, or a write
 * torn at a sector boundary of the file). */
static int crashlog_replay(int fd, const struct crashlog_rec *r, uint64_t *rng)
{
	uint64_t pick = diskio_fault_rand(rng) % 3;
	if (pick == 2)
		return 0; /* lost */
	if (r->kind == DISKIO_CRASHLOG_TRUNCATE)
		return ftruncate(fd, (off_t)r->off) < 0 ? -errno : 0;
	if (r->kind == DISKIO_CRASHLOG_ALLOCATE) {
		/* (fallocate refuses a length of 0) */
		if (r->len && fallocate(fd, 0, (off_t)r->off, (off_t)r->len) < 0 && errno != EOPNOTSUPP)
			return -errno;
		return 0;
	}
	uint64_t keep = r->len;
	if (pick == 1) {
		/* torn: the sectors before a boundary inside the write made it */
		uint64_t first = r->off / CRASHLOG_SECTOR + 1;
		uint64_t last = (r->off + r->len + CRASHLOG_SECTOR - 1) / CRASHLOG_SECTOR;
		uint64_t cut = last > first ? first + diskio_fault_rand(rng) % (last - first) : first;
		keep = cut * CRASHLOG_SECTOR - r->off;
		if (keep > r->len)
			keep = r->len;
	}
	return diskio_pwrite_all(fd, r->data, (size_t)keep, r->off);
}

int diskio_crashlog_revert(const uint8_t *buf, size_t size, int fd,
			   enum diskio_crash_mode mode, uint64_t seed)
{
	struct diskio_crashlog_info info;
	int rc = diskio_crashlog_parse(buf, size, &info);
	if (rc < 0)
		return rc;
	if (info.write_bytes > DISKIO_CRASHLOG_MAX_BYTES)
		return -EFBIG;
	/* every write made it, or none had begun */
	if (mode == DISKIO_CRASH_KEEP_ALL || info.headless)
		return fdatasync(fd) < 0 ? -errno : 0;

	struct crashlog_rec *recs = diskio_zalloc((info.records + 1) * sizeof(*recs));
	if (!recs)
		return -ENOMEM;
	size_t at = CRASHLOG_HEADER;
	for (size_t i = 0; i < info.records; i++) {
		const uint8_t *r = buf + at;
		recs[i] = (struct crashlog_rec){ get64(r), get64(r + 8), get64(r + 16),
						 get64(r + 24), r + CRASHLOG_RECORD, NULL };
		at += CRASHLOG_RECORD + (size_t)recs[i].old_len;
	}

	/* Undo, newest first: each write's bytes are read back first (every
	 * later op is undone by then), for a replay. */
	for (size_t i = info.records; rc == 0 && i-- > 0;) {
		struct crashlog_rec *r = &recs[i];
		if (r->kind == DISKIO_CRASHLOG_WRITE && mode == DISKIO_CRASH_RANDOM) {
			r->data = diskio_zalloc(r->len ? (size_t)r->len : 1);
			rc = r->data ? crashlog_read(fd, r->data, (size_t)r->len, r->off) : -ENOMEM;
		}
		if (rc == 0 && r->old_len)
			rc = diskio_pwrite_all(fd, r->old, (size_t)r->old_len, r->off);
	}
	if (rc == 0 && ftruncate(fd, (off_t)info.synced_size) < 0)
		rc = -errno;
	if (mode == DISKIO_CRASH_RANDOM) {
		uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 1;
		for (size_t i = 0; rc == 0 && i < info.records; i++)
			rc = crashlog_replay(fd, &recs[i], &rng);
	}
	if (rc == 0 && fdatasync(fd) < 0)
		rc = -errno;
	for (size_t i = 0; i < info.records; i++)
		diskio_free(recs[i].data);
	diskio_free(recs);
	return rc;
}
