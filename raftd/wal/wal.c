/*
 * The WAL (see wal.h): creating and opening a WAL directory, group
 * commit, and cutting segments. Decoding lives in walread.c, the record
 * bytes in walrec.c, the disk requests through base/diskio/.
 *
 * Batches: `pending` collects encoded records; `inflight` is the batch
 * being written (at most one). A batch lives in one segment: when it is
 * begun and the segment it would continue has reached segment_bytes, it
 * starts a new segment instead, with that segment's header records, and
 * is written into the preallocated temporary file that becomes the
 * segment once the batch is durable (rename, then directory fsync).
 */
#include "raftd/wal/wal.h"
#include "base/clock/clock.h"
#include "shm/metrics.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "raftd/alloc.h"
#include "base/diskio/diskio.h"
#include "raftd/wal/walread.h"
#include "raftd/wal/walrec.h"
#include "base/log/log.h"

#define WAL_NAME_BYTES 40 /* "%016x-%016x.wal" and NUL */

/*
 * Zeros a batch's write carries past its records, into space that was
 * only allocated. A segment is preallocated with fallocate (as etcd
 * does), so its blocks are unwritten extents: the first write into each
 * one changes the file's extent map, and the fdatasync after it must
 * write that metadata too, a second synchronous write. Measured here
 * (ext4, 2.1 KB appends, each fdatasynced): 191-211 us median and
 * 1.1-1.3 ms p99 into fallocated space, 144-157 us and 0.4-0.6 ms into
 * written zeros. So when a batch reaches past what this file holds
 * written, its write goes on with zeros to WAL_ZERO_AHEAD further: one
 * longer write every 512 KiB of log, and the fdatasyncs between write
 * data only. Readers see the same: allocated space reads as zeros too.
 */
#define WAL_ZERO_AHEAD (512u * 1024)

struct wal_batch {
	uint8_t *buf;
	size_t len;
	size_t cap;
	uint64_t seq;         /* batch number */
	uint64_t off;         /* file offset of buf[0] */
	bool new_segment;     /* starts segment (seg_seq, seg_index) */
	bool cut_after;       /* a save in it filled the segment (etcd's rule) */
	uint64_t seg_seq;     /* the segment the batch goes to */
	uint64_t seg_index;
};

struct wal {
	char *dir;
	int dir_fd;
	struct diskio *io;
	uint64_t segment_bytes;

	/* The last segment with a name; everything before tail_end is durable. */
	int tail_fd;
	uint64_t tail_seq;
	uint64_t tail_index;
	uint64_t tail_end;
	/* The file being written holds written bytes (records or zeros)
	 * up to here; appends below it convert no unwritten extents. */
	uint64_t zeroed_end;

	/* The preallocated temporary file the next segment is written to. */
	int next_fd;          /* -1 when none is prepared */
	char next_name[16];
	unsigned tmp_count;

	/* The writer's view, including records not yet durable. */
	uint32_t crc;         /* chain value after the last record encoded */
	uint64_t last_index;  /* last entry index appended (etcd's enti) */
	struct raft_hardstate state; /* last non-empty hard state appended */
	uint8_t *metadata;    /* NULL = no metadata field */
	size_t metadata_len;

	struct wal_batch pending;
	struct wal_batch inflight; /* valid while diskio_chain_busy(io) */
	uint64_t batches;     /* batch numbers handed out */
	uint64_t appended_seq;
	uint64_t durable_seq;
	bool cut_next;        /* the last batch filled its segment: the next
			       * one starts a new segment */
	/* etcd's page writer, replayed to cut where etcd cuts: bytes of the
	 * segment it would have written to the file, and still buffered. */
	uint64_t pw_flushed;
	uint64_t pw_buffered;
	int err;              /* failure error, sticky */
	struct shm_metrics *metrics; /* raftd's block, or NULL (wal_set_metrics) */
	int64_t submit_ns;    /* when the batch in flight was submitted */
	bool inline_writes;   /* wal_set_inline_writes */
	bool submit_owed;     /* inline: a submit left to wal_submit_owed */
	/* wal_read_entry's segment other than the tail, kept open */
	int read_fd;          /* -1 when none */
	uint64_t read_seq;
	/* and what it read last: bytes [rbuf_off, rbuf_off + rbuf_len) of
	 * segment rbuf_seq, so that a run of records costs one read */
	uint8_t *rbuf;
	size_t rbuf_len;
	uint64_t rbuf_seq;
	uint64_t rbuf_off;
};

void wal_set_metrics(struct wal *w, struct shm_metrics *m)
{
	w->metrics = m;
}

/* ---- small file helpers ---- */

static void segment_name(char *buf, uint64_t seq, uint64_t index)
{
	snprintf(buf, WAL_NAME_BYTES, "%016" PRIx64 "-%016" PRIx64 ".wal", seq, index);
}

/* etcd's fileutil.Preallocate(f, size, extend=true). */
static int preallocate(int fd, uint64_t size)
{
	if (fallocate(fd, 0, 0, (off_t)size) == 0)
		return 0;
	if (errno != EOPNOTSUPP && errno != ENOSYS)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)
		return -errno;
	return 0;
}

/* Removes dir and the files in it (a leftover dir.tmp). */
static int remove_flat_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) < 0) {
			int rc = -errno;
			closedir(d);
			return rc;
		}
	}
	closedir(d);
	return rmdir(dir) < 0 ? -errno : 0;
}

static char *path_join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = raftd_malloc(a + b + 2);
	if (p) {
		memcpy(p, dir, a);
		p[a] = '/';
		memcpy(p + a + 1, name, b + 1);
	}
	return p;
}

/* ---- segment listing ---- */

struct seg_list {
	char (*names)[WAL_NAME_BYTES];
	size_t n;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The segment names of dir, sorted; other files are ignored (logged,
 * except etcd's temporary *.tmp files). */
static int list_segments(const char *dir, struct seg_list *out)
{
	size_t cap = 0;
	out->names = NULL;
	out->n = 0;
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		uint64_t seq, index;
		if (e->d_name[0] == '.')
			continue;
		if (!wal_parse_name(e->d_name, &seq, &index)) {
			size_t l = strlen(e->d_name);
			if (l < 4 || strcmp(e->d_name + l - 4, ".tmp"))
				log_warn("ignored file in WAL directory",
					 LOG_STR("path", e->d_name));
			continue;
		}
		rc = raftd_reserve((void **)&out->names, &cap, out->n + 1, sizeof(*out->names), 16);
		if (rc)
			break;
		/* A name that parses is exactly 36 bytes. */
		memcpy(out->names[out->n++], e->d_name, strlen(e->d_name) + 1);
	}
	closedir(d);
	if (rc) {
		raftd_free(out->names);
		out->names = NULL;
		out->n = 0;
		return rc;
	}
	if (out->n)
		qsort(out->names, out->n, sizeof(*out->names), name_cmp);
	return 0;
}

bool wal_exists(const char *dir)
{
	struct seg_list l;
	if (list_segments(dir, &l))
		return false;
	raftd_free(l.names);
	return l.n > 0;
}

/* ---- replay ---- */

/* What a scan leaves for the writer. */
struct scan {
	int tail_fd;          /* write mode: the tail, open and locked */
	uint64_t tail_seq;
	uint64_t tail_index;
	uint64_t tail_end;
	uint64_t tail_size;
	uint32_t crc;
	uint64_t last_index;
};

__attribute__((format(printf, 3, 4)))
static int scan_fail(struct wal_replay *rep, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rep->error, sizeof(rep->error), fmt, ap);
	va_end(ap);
	return rc;
}

/* Decodes one segment file; in write mode the last one stays open in
 * s->tail_fd, locked. */
static int scan_segment(struct wal_decoder *d, const char *dir, const char *name,
			bool is_last, bool write, struct scan *s, bool *torn)
{
	struct wal_replay *rep = d->rep;
	bool keep = write && is_last;
	char *path = path_join(dir, name);
	if (!path)
		return scan_fail(rep, -ENOMEM, "wal: out of memory opening %s", name);
	int fd = open(path, (keep ? O_RDWR : O_RDONLY) | O_CLOEXEC);
	raftd_free(path);
	if (fd < 0)
		return scan_fail(rep, -errno, "wal: cannot open %s in %s: %s", name, dir,
				 strerror(errno));
	int rc;
	if (keep && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		scan_fail(rep, rc, "wal: %s in %s is locked by another process; "
			  "is another member running on this data directory?", name, dir);
		goto out_close;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = scan_fail(rep, -errno, "wal: cannot stat %s: %s", name, strerror(errno));
		goto out_close;
	}
	size_t len = (size_t)st.st_size;
	const uint8_t *map = NULL;
	if (len) {
		map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			rc = scan_fail(rep, -errno, "wal: cannot map %s: %s", name,
				       strerror(errno));
			goto out_close;
		}
	}
	uint64_t end;
	rc = wal_decode_segment(d, name, map, len, is_last, &end, torn);
	if (map)
		munmap((void *)map, len);
	if (rc)
		goto out_close;
	if (is_last) {
		s->tail_end = end;
		s->tail_size = len;
	}
	if (keep) {
		s->tail_fd = fd;
		return 0;
	}
	rc = 0;
out_close:
	close(fd);
	return rc;
}

/*
 * Replays dir from (snap_index, snap_term) into rep, as etcd's
 * openAtIndex + ReadAll. In write mode the tail stays open (s->tail_fd)
 * and the snapshot record is required.
 */
static int scan(const char *dir, uint64_t snap_index, uint64_t snap_term, bool write,
		struct wal_replay *rep, struct scan *s)
{
	struct wal_decoder d;
	struct seg_list l;

	wal_decoder_init(&d, rep, snap_index, snap_term);
	memset(s, 0, sizeof(*s));
	s->tail_fd = -1;
	int rc = list_segments(dir, &l);
	if (rc)
		return scan_fail(rep, rc, "wal: cannot list %s: %s", dir, strerror(-rc));
	if (l.n == 0) {
		rc = scan_fail(rep, -ENOENT, "wal: no WAL segment in %s", dir);
		goto out_free;
	}
	/* etcd's searchIndex: the last segment starting at or before the snapshot. */
	size_t first = l.n;
	uint64_t seq, index, prev_seq = 0;
	for (size_t i = l.n; i-- > 0;) {
		wal_parse_name(l.names[i], &seq, &index);
		if (snap_index >= index) {
			first = i;
			break;
		}
	}
	if (first == l.n) {
		rc = scan_fail(rep, -ENOENT,
			       "wal: no segment in %s holds index %" PRIu64
			       " (the oldest is %s); the WAL does not reach back to the snapshot",
			       dir, snap_index, l.names[0]);
		goto out_free;
	}
	for (size_t i = first; i < l.n; i++) {
		wal_parse_name(l.names[i], &seq, &index);
		if (i > first && seq != prev_seq + 1) {
			rc = scan_fail(rep, -ENOENT,
				       "wal: segment %s does not follow %s in %s; "
				       "a segment is missing", l.names[i], l.names[i - 1], dir);
			goto out_free;
		}
		prev_seq = seq;
	}
	for (size_t i = first; i < l.n; i++) {
		bool torn = false, last = i + 1 == l.n;
		rc = scan_segment(&d, dir, l.names[i], last, write, s, &torn);
		if (rc)
			goto out_close_tail;
		if (torn) {
			rep->torn_offset = s->tail_end;
			snprintf(rep->torn_segment, sizeof(rep->torn_segment), "%s", l.names[i]);
		}
	}
	if (write && !d.snap_found) {
		rc = scan_fail(rep, -ENOENT,
			       "wal: no snapshot record for index %" PRIu64 " term %" PRIu64
			       " in %s; the WAL does not match the snapshot",
			       snap_index, snap_term, dir);
		goto out_close_tail;
	}
	wal_parse_name(l.names[l.n - 1], &s->tail_seq, &s->tail_index);
	s->crc = d.crc;
	s->last_index = d.last_index;
	rc = 0;
	goto out_free;

out_close_tail:
	if (s->tail_fd >= 0)
		close(s->tail_fd);
	s->tail_fd = -1;
	wal_replay_free(rep);
out_free:
	raftd_free(l.names);
	return rc;
}

int wal_read(const char *dir, uint64_t snap_index, uint64_t snap_term,
	     struct wal_replay *rep)
{
	struct scan s;
	return scan(dir, snap_index, snap_term, false, rep, &s);
}

int wal_snapshots(const char *dir, struct wal_replay *rep)
{
	struct wal_decoder d;
	struct seg_list l;
	struct scan s = { .tail_fd = -1 };

	wal_decoder_init(&d, rep, 0, 0);
	d.points_only = true;
	int rc = list_segments(dir, &l);
	if (rc)
		return scan_fail(rep, rc, "wal: cannot list %s: %s", dir, strerror(-rc));
	if (l.n == 0)
		rc = scan_fail(rep, -ENOENT, "wal: no WAL segment in %s", dir);
	for (size_t i = 0; !rc && i < l.n; i++) {
		bool torn = false;
		rc = scan_segment(&d, dir, l.names[i], i + 1 == l.n, false, &s, &torn);
	}
	raftd_free(l.names);
	if (rc) {
		wal_replay_free(rep);
		return rc;
	}
	size_t k = 0;
	for (size_t i = 0; i < rep->n_snaps; i++)
		if (rep->snaps[i].index <= rep->state.commit)
			rep->snaps[k++] = rep->snaps[i];
	rep->n_snaps = k;
	return 0;
}

/* ---- the writer ---- */

static int wal_fail(struct wal *w, int rc, const char *what)
{
	if (!w->err) {
		w->err = rc;
		log_error("WAL write failed; the log accepts nothing more until raftd restarts",
			  LOG_STR("dir", w->dir), LOG_STR("step", what), LOG_ERRNO(rc));
	}
	return w->err;
}

/* Opens and preallocates the temporary file of the next segment. */
static int prepare_next(struct wal *w)
{
	if (w->next_fd >= 0)
		return 0;
	snprintf(w->next_name, sizeof(w->next_name), "%u.tmp", w->tmp_count % 2);
	int fd = openat(w->dir_fd, w->next_name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int rc = 0;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		rc = -errno;
	if (!rc)
		rc = preallocate(fd, w->segment_bytes);
	if (rc) {
		close(fd);
		unlinkat(w->dir_fd, w->next_name, 0);
		return rc;
	}
	w->next_fd = fd;
	w->tmp_count++;
	return 0;
}

static int batch_reserve(struct wal_batch *b, size_t more)
{
	return raftd_reserve((void **)&b->buf, &b->cap, b->len + more, 1, 64 * 1024);
}

/* How many zeros a write that ends at end carries after its records
 * (WAL_ZERO_AHEAD), in a file written up to zeroed_end: none while it
 * stays in written space, and never past the segment's preallocated
 * size. */
static size_t pad_after(const struct wal *w, uint64_t end, uint64_t zeroed_end)
{
	if (end <= zeroed_end || end >= w->segment_bytes)
		return 0;
	uint64_t to = (end + WAL_ZERO_AHEAD) & ~(uint64_t)4095;
	if (to > w->segment_bytes)
		to = w->segment_bytes;
	return to > end ? (size_t)(to - end) : 0;
}

/* The zeros b's write carries. */
static size_t zero_pad(const struct wal *w, const struct wal_batch *b)
{
	/* a new segment is a fresh file, allocated only */
	return pad_after(w, b->off + b->len, b->new_segment ? 0 : w->zeroed_end);
}

/* The most a new segment's header records (crc, metadata, hard state)
 * take. */
static size_t segment_head_max(const struct wal *w)
{
	return 2 * WALREC_SMALL_MAX + walrec_metadata_size(w->metadata, w->metadata_len);
}

/* The bytes wal_submit would write now: the pending batch and its zeros,
 * or, with nothing pending but a cut due, a new segment's header records
 * (at their most) and their zeros; 0 when it would write nothing. */
static size_t submit_len(const struct wal *w)
{
	const struct wal_batch *p = &w->pending;
	if (p->len)
		return p->len + zero_pad(w, p);
	if (!w->cut_next)
		return 0;
	size_t head = segment_head_max(w);
	return head + pad_after(w, head, 0);
}

/* Room for more bytes in the pending batch; begins the batch if it is
 * empty: in the segment the previous batch went to, or, when that batch
 * filled it, in a new segment that starts with its header records. */
static int pending_prepare(struct wal *w, size_t more)
{
	struct wal_batch *p = &w->pending;
	if (p->len)
		return batch_reserve(p, more);

	bool busy = diskio_chain_busy(w->io);
	p->new_segment = w->cut_next;
	p->cut_after = false;
	p->seq = w->batches + 1;
	if (!p->new_segment) {
		p->seg_seq = busy ? w->inflight.seg_seq : w->tail_seq;
		p->seg_index = busy ? w->inflight.seg_index : w->tail_index;
		p->off = busy ? w->inflight.off + w->inflight.len : w->tail_end;
		return batch_reserve(p, more);
	}
	int rc = batch_reserve(p, segment_head_max(w) + more);
	if (rc)
		return rc;
	w->cut_next = false;
	p->seg_seq = (busy ? w->inflight.seg_seq : w->tail_seq) + 1;
	p->seg_index = w->last_index + 1;
	p->off = 0;
	p->len += walrec_encode_crc(p->buf + p->len, w->crc);
	p->len += walrec_encode_metadata(p->buf + p->len, &w->crc, w->metadata, w->metadata_len);
	if (!raft_hardstate_is_empty(&w->state))
		p->len += walrec_encode_state(p->buf + p->len, &w->crc, &w->state);
	/* etcd syncs the new segment's header before anything else. */
	w->pw_flushed = p->len;
	w->pw_buffered = 0;
	return 0;
}

/*
 * etcd decides to cut after a save when the file offset, which counts
 * only what its page writer (pkg/ioutil/pagewriter.go: 4 KiB pages, a
 * 128 KiB buffer) has flushed, reached the segment size. These replay
 * that accounting, so that segments end where etcd's would for the same
 * saves. Group commit only moves a cut to the end of its batch.
 */
#define PW_PAGE (8u * 512)
#define PW_WATERMARK (128u * 1024)

static void pw_write(struct wal *w, uint64_t len)
{
	if (len + w->pw_buffered <= PW_WATERMARK) {
		w->pw_buffered += len;
		return;
	}
	uint64_t slack = PW_PAGE - (w->pw_flushed + w->pw_buffered) % PW_PAGE;
	if (slack != PW_PAGE) {
		if (slack > len) {
			w->pw_buffered += len;
			return;
		}
		w->pw_buffered += slack;
		len -= slack;
	}
	w->pw_flushed += w->pw_buffered;
	w->pw_buffered = 0;
	if (len > PW_PAGE) {
		uint64_t pages = len / PW_PAGE * PW_PAGE;
		w->pw_flushed += pages;
		len -= pages;
	}
	w->pw_buffered = len;
}

/* One frame through the page writer: etcd writes the length word, then
 * the record with its padding. */
static void pw_frame(struct wal *w, size_t frame)
{
	pw_write(w, WALREC_FRAME_BYTES);
	pw_write(w, frame - WALREC_FRAME_BYTES);
}

static void pw_sync(struct wal *w)
{
	w->pw_flushed += w->pw_buffered;
	w->pw_buffered = 0;
}

int wal_save(struct wal *w, const struct raft_hardstate *hs,
	     const struct raft_entry *ents, size_t n)
{
	return wal_save_locs(w, hs, ents, n, NULL);
}

int wal_save_locs(struct wal *w, const struct raft_hardstate *hs,
		  const struct raft_entry *ents, size_t n, struct raftlog_loc *locs)
{
	if (w->err)
		return w->err;
	bool with_state = hs && !raft_hardstate_is_empty(hs);
	if (n == 0 && !with_state)
		return 0;
	size_t need = with_state ? WALREC_SMALL_MAX : 0;
	for (size_t i = 0; i < n; i++) {
		size_t sz = walrec_entry_size(&ents[i]);
		if (sz - WALREC_FRAME_BYTES >= WALREC_MAX_RECORD)
			return -EMSGSIZE;
		need += sz;
	}
	int rc = pending_prepare(w, need);
	if (rc)
		return rc;
	struct wal_batch *p = &w->pending;
	for (size_t i = 0; i < n; i++) {
		if (locs)
			locs[i] = (struct raftlog_loc){ .seg = p->seg_seq, .off = p->off + p->len,
							.crc = w->crc };
		size_t f = walrec_encode_entry(p->buf + p->len, &w->crc, &ents[i]);
		p->len += f;
		pw_frame(w, f);
		w->last_index = ents[i].index;
	}
	/* etcd's raft.MustSync: entries, or a new term or vote. */
	bool must_sync = n > 0 || (with_state && (hs->term != w->state.term ||
						  hs->vote != w->state.vote));
	if (with_state) {
		size_t f = walrec_encode_state(p->buf + p->len, &w->crc, hs);
		p->len += f;
		pw_frame(w, f);
		w->state = *hs;
	}
	if (w->pw_flushed >= w->segment_bytes)
		p->cut_after = true;
	else if (must_sync)
		pw_sync(w);
	w->appended_seq = p->seq;
	return 0;
}

int wal_save_snapshot(struct wal *w, uint64_t index, uint64_t term)
{
	if (w->err)
		return w->err;
	int rc = pending_prepare(w, WALREC_SMALL_MAX);
	if (rc)
		return rc;
	struct wal_batch *p = &w->pending;
	size_t f = walrec_encode_snapshot(p->buf + p->len, &w->crc, index, term);
	p->len += f;
	pw_frame(w, f);
	pw_sync(w);
	if (w->last_index < index)
		w->last_index = index;
	w->appended_seq = p->seq;
	return 0;
}

int wal_submit(struct wal *w)
{
	if (w->err)
		return w->err;
	if (diskio_chain_busy(w->io))
		return 0;
	if (w->pending.len == 0) {
		if (!w->cut_next)
			return 0;
		/* Cut a full segment now, as etcd does right after the save
		 * that filled it. */
		int rc = pending_prepare(w, 0);
		if (rc)
			return rc;
	}
	struct wal_batch *p = &w->pending;
	int fd = w->tail_fd;
	if (p->new_segment) {
		int rc = prepare_next(w);
		if (rc)
			return wal_fail(w, rc, "preallocating a segment");
		/* The old tail is complete: give back its unused space. */
		if (ftruncate(w->tail_fd, (off_t)w->tail_end) < 0)
			return wal_fail(w, -errno, "truncating the full segment");
		fd = w->next_fd;
		w->zeroed_end = 0; /* a fresh file, allocated only */
	}
	size_t pad = zero_pad(w, p);
	if (pad) {
		int rc = batch_reserve(p, pad);
		if (rc)
			return wal_fail(w, rc, "growing a write buffer");
		memset(p->buf + p->len, 0, pad);
	}
	struct diskio_write req = { p->buf, p->len + pad, p->off };
	/* before the submit, which may write and sync the batch itself */
	w->submit_ns = w->metrics ? clock_now_ns() : 0;
	int rc = diskio_set_fd(w->io, fd);
	if (!rc)
		rc = diskio_chain_submit(w->io, &req, 1);
	if (rc)
		return wal_fail(w, rc, "submitting a write");
	if (w->metrics)
		shm_metric_add(w->metrics, SHM_M_WAL_WRITE_BYTES, p->len);
	if (p->off + p->len + pad > w->zeroed_end)
		w->zeroed_end = p->off + p->len + pad;
	struct wal_batch t = w->inflight;
	w->inflight = *p;
	*p = t;
	p->len = 0;
	w->batches = w->inflight.seq;
	if (w->inflight.cut_after)
		w->cut_next = true;
	return 0;
}

/* The in-flight batch was written and synced: move the tail, and give a
 * new segment its name. */
static int complete_inflight(struct wal *w)
{
	struct wal_batch *b = &w->inflight;
	if (b->new_segment) {
		char name[WAL_NAME_BYTES];
		segment_name(name, b->seg_seq, b->seg_index);
		if (renameat(w->dir_fd, w->next_name, w->dir_fd, name) < 0)
			return wal_fail(w, -errno, "renaming a new segment");
		int rc = diskio_sync_dir(w->dir);
		if (rc)
			return wal_fail(w, rc, "syncing the WAL directory");
		close(w->tail_fd);
		w->tail_fd = w->next_fd;
		w->next_fd = -1;
		w->tail_seq = b->seg_seq;
		w->tail_index = b->seg_index;
		log_info("created a new WAL segment", LOG_STR("path", name));
		rc = prepare_next(w);
		if (rc)
			return wal_fail(w, rc, "preallocating a segment");
	}
	w->tail_end = b->off + b->len;
	w->durable_seq = b->seq;
	return 0;
}

/* Finishes the batch in flight if it is done (or, when wait, once it is),
 * then submits the next one. 1 if a batch finished, 0 if none did, or the
 * failure error. */
static int finish(struct wal *w, bool wait)
{
	if (!diskio_chain_busy(w->io))
		return 0;
	int rc = diskio_chain_reap(w->io, wait);
	if (rc == -EINPROGRESS)
		return 0;
	if (rc)
		return wal_fail(w, rc, "writing and syncing a batch");
	if (w->metrics)
		shm_metric_observe(w->metrics, SHM_H_WAL_FSYNC, (uint64_t)(clock_now_ns() - w->submit_ns));
	rc = complete_inflight(w);
	size_t next = rc ? 0 : submit_len(w);
	if (next && diskio_chain_runs_inline(w->io, 1, next))
		/* the next sync would hold the caller here; what is pending
		 * now is owed, not what the caller saves later (a hard state
		 * whose commit alone moved waits for the next batch) */
		w->submit_owed = true;
	else if (!rc)
		rc = wal_submit(w);
	return rc ? rc : 1;
}

int wal_reap(struct wal *w)
{
	if (w->err)
		return w->err;
	int done = finish(w, false);
	if (done || w->inline_writes)
		return done;
	int rc = wal_submit(w);
	return rc ? rc : 0;
}

void wal_submit_later(struct wal *w)
{
	w->submit_owed = true;
}

int wal_submit_owed(struct wal *w)
{
	if (!w->submit_owed)
		return w->err;
	w->submit_owed = false;
	return wal_submit(w);
}

int wal_sync(struct wal *w)
{
	uint64_t target = w->appended_seq;
	while (!w->err && w->durable_seq < target) {
		int rc = wal_submit(w);
		if (rc)
			return rc;
		rc = finish(w, true);
		if (rc < 0)
			return rc;
	}
	return w->err;
}

void wal_set_inline_writes(struct wal *w, bool on)
{
	w->inline_writes = on;
	diskio_set_inline_chain(w->io, on);
}

int wal_event_fd(const struct wal *w)
{
	return diskio_event_fd(w->io);
}

uint64_t wal_last_seq(const struct wal *w)
{
	return w->appended_seq;
}

uint64_t wal_durable_seq(const struct wal *w)
{
	return w->durable_seq;
}

bool wal_idle(const struct wal *w)
{
	return w->pending.len == 0 && !diskio_chain_busy(w->io);
}

int wal_error(const struct wal *w)
{
	return w->err;
}

uint64_t wal_last_index(const struct wal *w)
{
	return w->last_index;
}

const char *wal_io_name(const struct wal *w)
{
	return diskio_name(w->io);
}

/* A writer over an open tail; takes over io (closing it on failure). */
static int wal_new(const char *dir, const struct wal_options *o, struct wal **out)
{
	struct diskio *io = o ? o->io : NULL;
	int rc;
	if (!io) {
		rc = diskio_open_auto(-1, "the WAL", &io);
		if (rc)
			return rc;
	}
	struct wal *w = raftd_calloc(1, sizeof(*w));
	if (!w) {
		diskio_close(io);
		return -ENOMEM;
	}
	w->io = io;
	w->segment_bytes = o && o->segment_bytes ? o->segment_bytes : WAL_SEGMENT_BYTES;
	w->tail_fd = w->next_fd = w->dir_fd = w->read_fd = -1;
	w->dir = raftd_malloc(strlen(dir) + 1);
	if (!w->dir) {
		wal_close(w);
		return -ENOMEM;
	}
	strcpy(w->dir, dir);
	w->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (w->dir_fd < 0) {
		rc = -errno;
		wal_close(w);
		return rc;
	}
	*out = w;
	return 0;
}

static int set_metadata(struct wal *w, const uint8_t *md, size_t len)
{
	if (!md)
		return 0;
	w->metadata = raftd_malloc(len);
	if (!w->metadata)
		return -ENOMEM;
	memcpy(w->metadata, md, len);
	w->metadata_len = len;
	return 0;
}

int wal_open(const char *dir, uint64_t snap_index, uint64_t snap_term,
	     const struct wal_options *o, struct wal **out, struct wal_replay *rep)
{
	struct scan s;
	struct wal *w;

	int rc = scan(dir, snap_index, snap_term, true, rep, &s);
	if (rc) {
		log_error("cannot open the WAL", LOG_STR("error", rep->error));
		if (o && o->io)
			diskio_close(o->io);
		return rc;
	}
	char name[WAL_NAME_BYTES];
	segment_name(name, s.tail_seq, s.tail_index);
	if (rep->torn_offset || rep->torn_segment[0])
		log_warn("cut a torn tail off the WAL (a write that never completed)",
			 LOG_STR("segment", name), LOG_U64("offset", s.tail_end));
	/* Zero everything after the last valid record, keeping the space
	 * allocated (etcd's ZeroToEnd): half-written records past a zero
	 * length word must not resurface between new ones. */
	if (s.tail_size > s.tail_end) {
		rc = ftruncate(s.tail_fd, (off_t)s.tail_end) < 0 ? -errno : 0;
		if (rc == 0)
			rc = preallocate(s.tail_fd, s.tail_size);
		if (rc == 0)
			rc = diskio_fdatasync(s.tail_fd);
		if (rc) {
			snprintf(rep->error, sizeof(rep->error),
				 "wal: cannot clear the tail of %s in %s: %s", name, dir,
				 strerror(-rc));
			goto out_close_tail;
		}
	}
	rc = wal_new(dir, o, &w);
	if (rc) {
		o = NULL; /* io is closed */
		goto out_close_tail;
	}
	w->tail_fd = s.tail_fd;
	w->tail_seq = s.tail_seq;
	w->tail_index = s.tail_index;
	w->tail_end = s.tail_end;
	w->zeroed_end = s.tail_end; /* past it: allocated again just above */
	w->pw_flushed = s.tail_end;
	w->crc = s.crc;
	w->last_index = s.last_index;
	w->state = rep->state;
	rc = set_metadata(w, rep->metadata, rep->metadata_len);
	if (!rc)
		rc = prepare_next(w);
	if (rc) {
		snprintf(rep->error, sizeof(rep->error), "wal: cannot prepare %s: %s", dir,
			 strerror(-rc));
		wal_close(w);
		wal_replay_free(rep);
		return rc;
	}
	*out = w;
	return 0;

out_close_tail:
	close(s.tail_fd);
	if (o && o->io)
		diskio_close(o->io);
	wal_replay_free(rep);
	return rc;
}

int wal_purge(struct wal *w, uint64_t snap_index, unsigned max_wals)
{
	struct seg_list l;
	int removed = 0, rc;

	if (max_wals == 0)
		return 0;
	rc = list_segments(w->dir, &l);
	if (rc)
		return rc;
	/* the segment replay from snap_index starts in (etcd's searchIndex) */
	size_t keep = 0;
	for (size_t i = l.n; i-- > 0;) {
		uint64_t seq, index;
		wal_parse_name(l.names[i], &seq, &index);
		if (snap_index >= index) {
			keep = i;
			break;
		}
	}
	for (size_t i = 0; i < keep && l.n - (size_t)removed > max_wals; i++) {
		uint64_t seq, index;
		wal_parse_name(l.names[i], &seq, &index);
		if (seq >= w->tail_seq)
			break;
		if (w->read_fd >= 0 && seq == w->read_seq) {
			close(w->read_fd);
			w->read_fd = -1;
		}
		if (seq == w->rbuf_seq)
			w->rbuf_len = 0;
		char *path = path_join(w->dir, l.names[i]);
		if (!path) {
			rc = -ENOMEM;
			break;
		}
		if (unlink(path) < 0) {
			rc = -errno;
			log_warn("failed to purge a WAL segment", LOG_STR("path", path), LOG_ERRNO(rc));
			raftd_free(path);
			break;
		}
		log_info("purged", LOG_STR("path", path));
		raftd_free(path);
		removed++;
	}
	raftd_free(l.names);
	return rc ? rc : removed;
}

/* Writes the first segment into tmpdir; returns its open fd in *fd_out and
 * the chain value and length after its records. */
static int create_first_segment(const char *tmpdir, const uint8_t *md, size_t md_len,
				uint64_t segment_bytes, int *fd_out, uint32_t *crc,
				uint64_t *end)
{
	char name[WAL_NAME_BYTES];
	segment_name(name, 0, 0);
	char *path = path_join(tmpdir, name);
	if (!path)
		return -ENOMEM;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc = fd < 0 ? -errno : 0;
	if (rc)
		log_error("cannot create the first WAL segment", LOG_STR("path", path),
			  LOG_ERRNO(rc));
	raftd_free(path);
	if (rc)
		return rc;
	size_t cap = 2 * WALREC_SMALL_MAX + walrec_metadata_size(md, md_len);
	uint8_t *buf = raftd_malloc(cap);
	if (!buf) {
		rc = -ENOMEM;
		goto out_close;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = preallocate(fd, segment_bytes);
	if (rc)
		goto out_free;
	size_t n = 0;
	*crc = 0;
	n += walrec_encode_crc(buf + n, 0);
	n += walrec_encode_metadata(buf + n, crc, md, md_len);
	n += walrec_encode_snapshot(buf + n, crc, 0, 0);
	rc = diskio_pwrite_all(fd, buf, n, 0);
	if (rc)
		goto out_free;
	rc = diskio_fdatasync(fd);
	if (rc)
		goto out_free;
	raftd_free(buf);
	*end = n;
	*fd_out = fd;
	return 0;

out_free:
	raftd_free(buf);
out_close:
	close(fd);
	return rc;
}

int wal_create(const char *dir, const uint8_t *metadata, size_t metadata_len,
	       const struct wal_options *o, struct wal **out)
{
	struct wal *w;
	int fd = -1, rc;
	uint32_t crc = 0;
	uint64_t end = 0;
	uint64_t seg = o && o->segment_bytes ? o->segment_bytes : WAL_SEGMENT_BYTES;
	char *tmpdir = NULL;

	if (wal_exists(dir)) {
		rc = -EEXIST;
		goto out_close_io;
	}
	/* Built in dir.tmp and renamed, so that a WAL appears whole or not at all. */
	size_t dl = strlen(dir);
	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	tmpdir = raftd_malloc(dl + 5);
	if (!tmpdir) {
		rc = -ENOMEM;
		goto out_close_io;
	}
	memcpy(tmpdir, dir, dl);
	memcpy(tmpdir + dl, ".tmp", 5);
	rc = remove_flat_dir(tmpdir);
	if (!rc)
		rc = diskio_mkdir_all(tmpdir, 0700);
	if (rc) {
		log_error("cannot create the temporary WAL directory",
			  LOG_STR("path", tmpdir), LOG_ERRNO(rc));
		goto out_free_tmpdir;
	}
	rc = create_first_segment(tmpdir, metadata, metadata_len, seg, &fd, &crc, &end);
	if (rc)
		goto out_remove_tmpdir;
	/* The segment's name is durable in dir.tmp before dir.tmp becomes dir. */
	rc = diskio_sync_dir(tmpdir);
	if (rc)
		goto out_close_fd;
	if (rmdir(dir) < 0 && errno != ENOENT) {
		rc = -errno;
		log_error("cannot replace the WAL directory (it must be empty)",
			  LOG_STR("path", dir), LOG_ERRNO(rc));
		goto out_close_fd;
	}
	if (rename(tmpdir, dir) < 0) {
		rc = -errno;
		log_error("cannot rename the temporary WAL directory",
			  LOG_STR("path", tmpdir), LOG_ERRNO(rc));
		goto out_close_fd;
	}
	/* The rename is durable once the parent directory is. */
	rc = diskio_sync_parent(dir);
	if (rc) {
		log_error("cannot sync the data directory", LOG_STR("path", tmpdir),
			  LOG_ERRNO(rc));
		close(fd);
		raftd_free(tmpdir);
		goto out_close_io;
	}
	raftd_free(tmpdir);
	tmpdir = NULL;
	rc = wal_new(dir, o, &w);
	if (rc) {
		close(fd);
		return rc;
	}
	w->tail_fd = fd;
	w->tail_end = end;
	w->zeroed_end = end;
	w->pw_flushed = end;
	w->crc = crc;
	rc = set_metadata(w, metadata, metadata_len);
	if (!rc)
		rc = prepare_next(w);
	if (rc) {
		wal_close(w);
		return rc;
	}
	*out = w;
	return 0;

out_close_fd:
	close(fd);
out_remove_tmpdir:
	remove_flat_dir(tmpdir);
out_free_tmpdir:
	raftd_free(tmpdir);
out_close_io:
	if (o && o->io)
		diskio_close(o->io);
	return rc;
}

int wal_close(struct wal *w)
{
	if (!w)
		return 0;
	int rc = 0;
	if (w->tail_fd >= 0 && !w->err)
		rc = wal_sync(w);
	/* A cut begun by the last sync may still be in flight. */
	while (!w->err && diskio_chain_busy(w->io))
		if (finish(w, true) < 0)
			break;
	if (!rc)
		rc = w->err;
	diskio_close(w->io);
	if (w->next_fd >= 0) {
		close(w->next_fd);
		unlinkat(w->dir_fd, w->next_name, 0);
	}
	if (w->tail_fd >= 0)
		close(w->tail_fd);
	if (w->read_fd >= 0)
		close(w->read_fd);
	raftd_free(w->rbuf);
	if (w->dir_fd >= 0)
		close(w->dir_fd);
	raftd_free(w->pending.buf);
	raftd_free(w->inflight.buf);
	raftd_free(w->metadata);
	raftd_free(w->dir);
	raftd_free(w);
	return rc;
}

/* ---- reading an entry back ---- */

/* A descriptor of segment seq for reading: the tail's, or one opened by
 * name (and kept for the next read). -ENOENT when no such segment is
 * left (purged). */
static int read_fd_for(struct wal *w, uint64_t seq)
{
	if (seq == w->tail_seq && w->tail_fd >= 0)
		return w->tail_fd;
	if (w->read_fd >= 0 && w->read_seq == seq)
		return w->read_fd;
	struct seg_list l;
	int rc = list_segments(w->dir, &l);
	if (rc)
		return rc;
	int fd = -ENOENT;
	for (size_t i = 0; i < l.n; i++) {
		uint64_t s, index;
		if (wal_parse_name(l.names[i], &s, &index) && s == seq) {
			fd = openat(w->dir_fd, l.names[i], O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				fd = -errno;
			break;
		}
	}
	raftd_free(l.names);
	if (fd < 0)
		return fd;
	if (w->read_fd >= 0)
		close(w->read_fd);
	w->read_fd = fd;
	w->read_seq = seq;
	return fd;
}

/* Reads up to len bytes at off, at least need of them (the file may end
 * after those); *got what was read. */
static int pread_some(int fd, uint8_t *buf, size_t len, size_t need, uint64_t off, size_t *got)
{
	size_t done = 0;
	while (done < len) {
		ssize_t k = pread(fd, buf + done, len - done, (off_t)(off + done));
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			break;
		done += (size_t)k;
	}
	*got = done;
	return done < need ? -EBADMSG : 0; /* the file ends before the record */
}

/* The bytes [off, off + len) of segment seq, through the read buffer:
 * a miss reads WAL_READ_AHEAD bytes from off (or len, when more). */
#define WAL_READ_AHEAD (256u * 1024)

static int read_at(struct wal *w, uint64_t seq, uint64_t off, size_t len, const uint8_t **out)
{
	if (w->rbuf && w->rbuf_seq == seq && off >= w->rbuf_off &&
	    off + len <= w->rbuf_off + w->rbuf_len) {
		*out = w->rbuf + (off - w->rbuf_off);
		return 0;
	}
	int fd = read_fd_for(w, seq);
	if (fd < 0)
		return fd;
	size_t want = len > WAL_READ_AHEAD ? len : WAL_READ_AHEAD;
	uint8_t *b = raftd_realloc(w->rbuf, want);
	if (!b)
		return -ENOMEM;
	w->rbuf = b;
	w->rbuf_len = 0;
	size_t got = 0;
	int rc = pread_some(fd, b, want, len, off, &got);
	if (rc)
		return rc;
	/* the tail's bytes past its durable end are zeros or a batch in
	 * flight now and records later: keep none of them */
	if (seq == w->tail_seq && got > len && off + got > w->tail_end)
		got = w->tail_end > off + len ? (size_t)(w->tail_end - off) : len;
	w->rbuf_seq = seq;
	w->rbuf_off = off;
	w->rbuf_len = got;
	*out = b;
	return 0;
}

int wal_read_entry(struct wal *w, const struct raft_entry *e, const struct raftlog_loc *loc,
		   uint8_t **data)
{
	if (!loc->off)
		return -ENOENT;
	const uint8_t *buf;
	struct raft_entry got;
	size_t need = WALREC_FRAME_BYTES;
	int rc;
	/* the length word, then the record it says (two turns at most) */
	for (int turn = 0; turn < 3; turn++) {
		rc = read_at(w, loc->seg, loc->off, need, &buf);
		if (rc)
			return rc;
		rc = wal_frame_entry(buf, need, loc->crc, e, &got, &need);
		if (rc != -EAGAIN)
			break;
	}
	if (rc == -EAGAIN)
		rc = -EBADMSG;
	uint8_t *out = NULL;
	if (!rc && e->len) {
		out = raftd_malloc(e->len);
		if (out)
			memcpy(out, got.data, e->len);
		else
			rc = -ENOMEM;
	}
	if (!rc)
		*data = out;
	return rc;
}
