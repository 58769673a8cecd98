/*
 * Durable file I/O of a member, one layer for every process that writes
 * to the data dir: raftd's WAL segments, stored's db file, the launcher's
 * directories (and snapshot files).
 *
 * A struct diskio writes one file descriptor (which it does not own)
 * through a backend behind an ops struct:
 *   io_uring  a synced write is one linked chain (write -> ... ->
 *             fsync(DATASYNC)); a short write breaks the link and the
 *             rest of the chain is resubmitted from where it stopped;
 *   plain     pwrite(v) + fdatasync, for where io_uring is not permitted
 *             (seccomp, kernel.io_uring_disabled); diskio_open_auto logs
 *             the fallback once per process;
 *   fault     (tests) writes through to the file, fails, tears or holds
 *             chosen ops, and models what the kernel does after a failed
 *             sync (diskio_fault_open).
 *
 * One rule for errors, kept by the functions below whatever the backend:
 * a short write is resubmitted until every byte is written; a write or a
 * sync that fails is never retried. After a failed fdatasync the kernel
 * may have dropped the dirty pages written since the last good sync, so a
 * later sync that succeeds proves nothing. The diskio is then failed for
 * good (sticky): every later write, sync, chain, truncate or allocate
 * returns the first error, and its owner must exit so that the member
 * recovers from its last durable state (stored from its checkpoint, raftd
 * replaying its WAL). Reads still work.
 *
 * --unsafe-no-fsync (diskio_set_unsafe_no_sync) drops the syncs of every
 * struct diskio of the process, as etcd's WAL and bbolt skip theirs: the
 * writes still happen, in order, and a chain completes once its writes
 * did. The directory fsyncs and diskio_fdatasync stay.
 *
 * Directories: diskio_mkdir_all and diskio_sync_parent fsync the directory
 * that holds every file and directory cetcd creates or renames, so that
 * its name is as durable as its data.
 *
 * Functions return 0 or a negative errno.
 */
#ifndef CETCD_BASE_DISKIO_H
#define CETCD_BASE_DISKIO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct diskio;

/* One write: len bytes from buf at file offset off. */
struct diskio_write {
	const void *buf;
	size_t len;
	uint64_t off;
};

/* A chain has at most this many writes, each followed by its sync. */
#define DISKIO_CHAIN_MAX 4u

/* What a backend implements. The functions below call these only while
 * the diskio has not failed, and record failures themselves. */
struct diskio_ops {
	const char *name;
	/* write_batch without a sync may run on another thread than the rest
	 * (the db writes a commit's pages on a thread of their own while it
	 * builds them, stored/btree/pagewrite.h). */
	bool concurrent_writes;
	/* Writes every entry (in any order); when sync, then fdatasyncs. */
	int (*write_batch)(struct diskio *d, const struct diskio_write *w, size_t n, bool sync);
	/* Reads exactly len bytes; -ENODATA if the file ends first. */
	int (*read)(struct diskio *d, void *buf, size_t len, uint64_t off);
	int (*sync)(struct diskio *d);
	int (*truncate)(struct diskio *d, uint64_t size);
	/* fallocate mode 0; -EOPNOTSUPP where the file system cannot. */
	int (*allocate)(struct diskio *d, uint64_t off, uint64_t len);
	/* Starts writing each entry followed by an fdatasync, in order, in
	 * the background; signals the event fd when the chain has ended.
	 * -EOPNOTSUPP where the backend has no chains (nothing ran). */
	int (*chain_submit)(struct diskio *d, const struct diskio_write *w, size_t n);
	/* 0 once the chain ended with every write whole and every sync
	 * done, -EINPROGRESS while it runs (only when !wait), else its
	 * error. */
	int (*chain_reap)(struct diskio *d, bool wait);
	void (*destroy)(struct diskio *d);
};

struct diskio {
	const struct diskio_ops *ops;
	int fd;              /* written to; not owned */
	int event_fd;        /* eventfd, owned: readable when a chain ended */
	atomic_int failed;   /* 0, or the first write or sync error; never cleared */
	bool chain_busy;     /* a chain was submitted and not yet reaped */
	bool chain_unsynced; /* that chain was written at submit, unsynced
			      * (--unsafe-no-fsync); chain_rc is its result */
	int chain_rc;
	uint64_t chains;     /* statistic: chains submitted */
	uint64_t chain_bytes; /* statistic: bytes in them */
	bool inline_chain;   /* diskio_set_inline_chain */
	bool separate;       /* diskio_set_separate_writes */
};

/* ---- use ---- */

/* Writes every entry; when sync, the whole batch is durable on return.
 * The failure error (sticky), or the backend's -errno (-EIO, a failed
 * sync's error, ...), which fails d; -ENOMEM, and without sync -ENOSPC or
 * -EDQUOT (a full file system refused the write), leave d usable. */
int diskio_write_batch(struct diskio *d, const struct diskio_write *w, size_t n, bool sync);

/* One write without a sync. Errors as diskio_write_batch. */
int diskio_write(struct diskio *d, const void *buf, size_t len, uint64_t off);

/* fdatasync. Errors as diskio_write_batch. */
int diskio_sync(struct diskio *d);

/* Reads exactly len bytes at off: -ENODATA if the file ends first, or
 * pread's -errno. Works on a failed diskio too. */
int diskio_read(struct diskio *d, void *buf, size_t len, uint64_t off);

/* ftruncate / fallocate (allocate: -EOPNOTSUPP where the file system
 * cannot). The failure error (sticky), or the call's -errno, which does
 * not fail d. */
int diskio_truncate(struct diskio *d, uint64_t size);
int diskio_allocate(struct diskio *d, uint64_t off, uint64_t len);

/* Starts a chain: each of w[0..n) written and then fdatasynced, strictly
 * in order, in the background. Buffers stay valid and unchanged until it
 * is reaped. -EINVAL unless 1 <= n <= DISKIO_CHAIN_MAX; -EBUSY while
 * another is in flight; -EOPNOTSUPP where the backend has none (nothing
 * ran: write synchronously instead); the failure error (sticky); or the
 * backend's -errno, which fails d. */
int diskio_chain_submit(struct diskio *d, const struct diskio_write *w, size_t n);

/* Collects the chain in flight: 0 when it completed (or none was in
 * flight), -EINPROGRESS when !wait and it still runs (never blocks then),
 * else its error, which fails d. */
int diskio_chain_reap(struct diskio *d, bool wait);
/* How many syncs this thread has waited for so far: write batches with
 * sync, diskio_sync, chains reaped with wait, diskio_fdatasync and
 * directory syncs. The difference over a stretch of work tells whether
 * it waited for the disk (stored's switch to a defragmented db must not). */
uint64_t diskio_thread_syncs(void);

/* Points d at another file (the WAL's next segment). -EBUSY while a chain
 * is in flight. */
int diskio_set_fd(struct diskio *d, int fd);

static inline bool diskio_chain_busy(const struct diskio *d) { return d->chain_busy; }
static inline int diskio_event_fd(const struct diskio *d) { return d->event_fd; }
static inline const char *diskio_name(const struct diskio *d) { return d->ops->name; }
/* 0, or the error that failed d for good. */
static inline int diskio_failed(const struct diskio *d) { return atomic_load(&d->failed); }

/* --unsafe-no-fsync: from now on, for every struct diskio of the process,
 * a sync is skipped (write_batch with sync writes only; diskio_sync
 * returns 0) and a chain's writes are made at submit without syncs. Set
 * once at start, before any I/O. */
void diskio_set_unsafe_no_sync(bool on);
bool diskio_unsafe_no_sync(void);

/* Frees d (not its fd); a chain in flight is waited for first. NULL is
 * accepted. */
void diskio_close(struct diskio *d);

/* ---- backends ---- */

/* Plain pwrite/pread/fdatasync on fd; its chains run inside submit.
 * -ENOMEM, -errno of eventfd. */
int diskio_plain_open(int fd, struct diskio **out);

/* The plain backend's ops, for a test backend that changes only some of
 * them: it starts from a copy and sets up its struct (with its struct
 * diskio first) with diskio_base_init, and frees it in its own destroy. */
const struct diskio_ops *diskio_plain_ops(void);

/* For backends: fills the shared part of d (ops, fd, a fresh eventfd,
 * not failed, zeroed counters). -errno of eventfd. */
int diskio_base_init(struct diskio *d, const struct diskio_ops *ops, int fd);

/* Tells a chain's waiter that it ended (backends whose chains end without
 * the kernel signalling the eventfd). */
void diskio_signal(struct diskio *d);

/* io_uring: a ring for chains, made now, and a ring of entries (0 = 64)
 * for synchronous batches, made on first use (where the kernel refuses
 * it then, batches go through plain syscalls). -errno of
 * io_uring_queue_init (-EPERM, -ENOSYS where it is refused; -ENOMEM past
 * the kernel's limits), -ENOMEM, -errno of eventfd. */
int diskio_uring_open(int fd, unsigned entries, struct diskio **out);

/* Test knob of the io_uring backend: each submitted write carries at most
 * cap bytes (0 = no cap), so that larger writes complete short and are
 * resubmitted. A chain run at submit (diskio_chain_runs_inline) is not
 * submitted to the kernel, and so not capped. Ignored by other backends. */
void diskio_uring_set_write_cap(struct diskio *d, size_t cap);

/* The largest write of a chain run by the caller itself: a few
 * microseconds of copying (a WAL batch of a few puts). Larger ones, a busy
 * WAL's batches and its zero padding, go to the worker threads, where the
 * caller goes on with its work while they are written. */
#define DISKIO_INLINE_CHAIN_MAX (64u << 10)

/* Whether a chain of one small write (up to DISKIO_INLINE_CHAIN_MAX) is
 * run at submit on the caller's thread, pwrite then fdatasync, instead of
 * on io_uring's worker thread that must be woken to start it and that
 * wakes the caller when it ends. The caller then waits for the write and
 * the sync (a slow disk's too), and the event fd is signalled before
 * submit returns; off (the default), every chain goes to the worker. The
 * fault backend runs such a chain at submit too (unless it holds chains);
 * the plain backend runs every chain at submit anyway. */
void diskio_set_inline_chain(struct diskio *d, bool on);

/* Whether a chain of n writes, len bytes in all, is one that runs at
 * submit on the caller's thread (diskio_set_inline_chain on, one write,
 * len up to DISKIO_INLINE_CHAIN_MAX). The one rule for it: the backends
 * follow it, and a caller that must know before it submits asks it. */
bool diskio_chain_runs_inline(const struct diskio *d, size_t n, size_t len);

/* Whether the writes of a batch without a sync go out one pwrite each,
 * adjacent ones too (off, the default: runs of adjacent writes share a
 * pwritev, diskio_pwrite_batch). For a file rewritten a page here and a
 * page there, as the db is: the kernel gives a write's new page cache a
 * folio of the write's size, and a later 4 KiB write into a large folio
 * costs the copy, the dirtying and the writeback of buffer heads for all
 * of it (on ext4, 2-3 times the CPU of a write into a folio of one page).
 * Every backend. */
void diskio_set_separate_writes(struct diskio *d, bool on);

/* io_uring when the kernel allows it, else plain (whatever the reason,
 * -ENOMEM from the ring's setup included); the fallback is logged once per
 * process, naming what (e.g. "the WAL", "the db") it is for. -ENOMEM,
 * -errno of eventfd. */
int diskio_open_auto(int fd, const char *what, struct diskio **out);

/* ---- plain helpers ---- */

/* pwrite of every byte, short writes and EINTR resumed. */
int diskio_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);
/* Writes a batch with pwrite; entries that follow each other in the file
 * (in the order given) go together in one pwritev of up to DISKIO_RUN_MAX. */
#define DISKIO_RUN_MAX 256
int diskio_pwrite_batch(int fd, const struct diskio_write *w, size_t n);
/* A backend's writes of a batch without a sync: diskio_pwrite_batch, or
 * one pwrite each under diskio_set_separate_writes. */
int diskio_pwrite_unsynced(struct diskio *d, const struct diskio_write *w, size_t n);
/* pread of exactly len bytes: -ENODATA if the file ends first. */
int diskio_pread_all(int fd, void *buf, size_t len, uint64_t off);
/* fdatasync of a file no diskio holds yet (a WAL segment being made or
 * repaired before the WAL opens): -errno on failure, which the caller
 * returns and never retries, as every sync of this layer. */
int diskio_fdatasync(int fd);

/* ---- directories ---- */

/* fsyncs the directory dir. -errno of open or fsync. */
int diskio_sync_dir(const char *dir);

/* fsyncs the directory that holds path (its name's entry). -ENAMETOOLONG,
 * -errno of open or fsync. */
int diskio_sync_parent(const char *path);

/* mkdir -p with mode for the directories it creates; the parent of each
 * one it creates is fsynced, and so is the parent of path when path
 * already existed (a creator that died before its fsync is covered).
 * -ENAMETOOLONG, -ENOTDIR, -errno of mkdir, open or fsync. */
int diskio_mkdir_all(const char *path, mode_t mode);

/* Test hook: called with the path of every directory fsynced through
 * diskio_sync_dir (and so by the two above), after the fsync succeeded.
 * NULL removes it. */
void diskio_set_dir_sync_hook(void (*hook)(const char *dir));

/* Allocation hook of the layer (its handles and temporary arrays), so
 * that tests can count allocations. NULL restores malloc/free. */
void diskio_set_allocator(void *(*alloc_fn)(size_t), void (*free_fn)(void *));
/* For backends: a zeroed block through the hook (NULL on no memory), and
 * its free. */
void *diskio_zalloc(size_t size);
void diskio_free(void *p);

/* ---- the fault-injecting backend (tests) ---- */

/*
 * It writes through to fd with plain syscalls and keeps, for every write
 * since the last successful sync, the bytes it replaced. That is the
 * file's durable content: what the last good sync saw. A sync that fails
 * does what the kernel may do after a failed fdatasync: it drops every
 * write since the last good sync (the file's bytes go back to its durable
 * content; what lay past its end then reads as zeros, and its size stays,
 * as a running kernel keeps it), and the diskio is failed.
 * diskio_fault_crash turns the file into what a power cut at that moment
 * could leave (there the size goes back too).
 */
struct diskio_fault_opts {
	long fail_write_at;   /* the nth write (0-based) fails with fail_errno,
			       * writing nothing; -1 = never */
	long fail_sync_at;    /* the nth sync fails with fail_errno; -1 = never */
	int fail_errno;       /* positive errno, default EIO */
	long tear_write_at;   /* the nth write is torn: a random subset (seed)
			       * of its 512-byte sectors is written, it fails
			       * with EIO and the device is gone; -1 = never */
	long cut_at_op;       /* after this many ops (writes, syncs, truncates,
			       * allocates) the device is gone: every later op
			       * does nothing and fails with EIO; -1 = never */
	int chain;            /* background chains (DISKIO_FAULT_CHAIN_*) */
	uint64_t seed;        /* for tear_write_at */
	long fail_allocate_at; /* the nth allocate fails with fail_errno,
				* allocating nothing; -1 = never */
	bool fail_repeat;     /* every write, sync or allocate from its
			       * fail_*_at on fails, not only that one */
	/* When set, the fail_*_at counts take only the ops made while this
	 * file exists. Without fail_repeat a fault fires only if this
	 * backend removes the file then (so it fires once, in one process
	 * of many that share the options); with it, the file stays, and
	 * ops go through again once someone removes it. */
	const char *trigger_path;
	/* Every write call (a batch of writes, a chain) first waits this
	 * many milliseconds, as a slow device would: while the trigger file
	 * exists when one is set (it is never removed for this). 0 = never. */
	long delay_ms;
	/* Keeps the crash journal of each file it writes beside it (see
	 * "crash journal" below). */
	bool crashlog;
};

enum {
	DISKIO_FAULT_CHAIN_NONE,       /* refused: the caller writes synchronously */
	DISKIO_FAULT_CHAIN_AT_SUBMIT,  /* its ops run as it is submitted */
	DISKIO_FAULT_CHAIN_AT_REAP,    /* its ops run only when it is reaped, after
					* whatever the caller wrote meanwhile;
					* one that diskio_chain_runs_inline
					* runs at submit */
	DISKIO_FAULT_CHAIN_HELD,       /* its ops run at diskio_fault_release;
					* reaping with wait before then: -EDEADLK */
};

static inline struct diskio_fault_opts diskio_fault_defaults(void)
{
	struct diskio_fault_opts o = {
		.fail_write_at = -1, .fail_sync_at = -1, .fail_errno = 5 /* EIO */,
		.tear_write_at = -1, .cut_at_op = -1, .chain = DISKIO_FAULT_CHAIN_NONE,
		.seed = 1, .fail_allocate_at = -1,
	};
	return o;
}

/* -ENOMEM, -errno of fstat or eventfd. */
int diskio_fault_open(int fd, const struct diskio_fault_opts *o, struct diskio **out);

/* diskio_fault_open with the options arg points to, for openers of the
 * form of btree_db_opts.io_open. */
int diskio_fault_open_arg(int fd, void *arg, struct diskio **out);

/*
 * For tests only: the fault backend for a real raftd's WAL or stored's
 * db, chosen through the environment, which only tests set; raftd and
 * stored ask for their file at start. The variable holds items separated
 * by commas:
 *   file=wal|db      the file it is for (required)
 *   write=N, sync=N, allocate=N
 *                    the Nth (0-based) write, sync or allocate of the
 *                    file fails (one of them or delay= is required)
 *   errno=EIO|ENOSPC|EDQUOT|EROFS   the error (default EIO)
 *   repeat           every such op from the Nth on fails
 *   trigger=PATH     count only the ops made while PATH exists; without
 *                    repeat, the process whose fault fires removes PATH,
 *                    so a restarted process runs without the fault
 *   chain=submit|reap   when chained writes run (default submit; with
 *                    reap, a chain run on the caller's thread,
 *                    diskio_set_inline_chain, still runs at submit)
 *   delay=MS         every write call waits MS milliseconds first (with
 *                    trigger: while PATH exists); a slow disk, no failure
 *   crashlog         keeps the crash journal of each file it writes
 *                    (below), so that a test can kill the process and
 *                    turn the file into what a power cut could have left
 *                    (tests/tools/crashrevert); alone, no failure
 * file=both names the WAL and the db (each process its own).
 * e.g. CETCD_TEST_DISKIO_FAULT=file=wal,sync=0,trigger=/tmp/t fails the
 * first fdatasync of the WAL after /tmp/t is created, once.
 */
#define DISKIO_TEST_FAULT_ENV "CETCD_TEST_DISKIO_FAULT"

/* Reads DISKIO_TEST_FAULT_ENV for file ("wal" or "db"): 0 with *on false
 * when it is unset or names another file; 0 with *on true and o filled
 * (logged as a warning) when it names file; -EINVAL (logged) when it does
 * not parse. o's trigger path stays valid for the life of the process. */
int diskio_test_fault(const char *file, struct diskio_fault_opts *o, bool *on);

enum diskio_crash_mode {
	DISKIO_CRASH_DROP_ALL,  /* every write since the last sync is lost */
	DISKIO_CRASH_RANDOM,    /* each is kept, lost, or torn at a 512-byte
				 * boundary, at random (seed) */
	DISKIO_CRASH_KEEP_ALL,  /* every write reached the disk, only the
				 * syncs after the cut did not happen */
};

/* Rewrites the file as a power cut at this moment could leave it, and
 * marks the device gone. 0 or -errno of the repair writes. */
int diskio_fault_crash(struct diskio *d, enum diskio_crash_mode mode, uint64_t seed);

/*
 * Crash journal. A killed process cannot lose its unsynced writes: the
 * page cache keeps them. With the option crashlog, the fault backend keeps
 * beside each file it writes (the file's path, as /proc/self/fd names it
 * at the first write after a sync, + DISKIO_CRASHLOG_SUFFIX) an undo
 * journal of every op since the file's last completed sync: a write's
 * offset and the bytes it overwrote, a truncate's cut-off bytes, an
 * allocate, and the file's size at that sync. A record is appended (not
 * synced: the page cache outlives a kill) before its op touches the file,
 * so the journal is whole at any kill point; a record (or the header)
 * cut short ends it.
 * A completed sync removes the journal: fdatasync through diskio_sync, a
 * batch with sync, each sync of a chain (the backend's chains sync each
 * write; io_uring's chained fsyncs are these ops on the real backend). A
 * failed sync (which reverts the file) and closing the diskio remove it
 * too. Not simulated: ops outside the backend (the WAL's fallocate of a
 * new segment and ftruncate of a full one, a file's creation or rename,
 * stored's sync_file_range, which syncs nothing durable by itself), and
 * names not yet made durable by a directory fsync: every name counts as
 * durable. diskio_crashlog_revert, after the kill and before the restart,
 * rewrites the file as a power cut could have left it.
 */
#define DISKIO_CRASHLOG_SUFFIX ".crashlog"
#define DISKIO_CRASHLOG_PATH_MAX 4096
/* Bounds of what a journal may name: offsets and sizes up to 1 TiB, and
 * at most 1 GiB of unsynced writes. */
#define DISKIO_CRASHLOG_MAX_OFF (1ull << 40)
#define DISKIO_CRASHLOG_MAX_BYTES (1ull << 30)

enum diskio_crashlog_kind {
	DISKIO_CRASHLOG_WRITE = 1,
	DISKIO_CRASHLOG_TRUNCATE = 2,
	DISKIO_CRASHLOG_ALLOCATE = 3,
};

struct diskio_crashlog {
	int fd;   /* the journal, -1 while none is open */
	char path[DISKIO_CRASHLOG_PATH_MAX];
};

/* Opens (truncating) the journal of the file file_fd refers to, when none
 * is open, with the size the file had at its last sync. No journal for a
 * file already unlinked. -ENAMETOOLONG, -errno. */
int diskio_crashlog_begin(struct diskio_crashlog *l, int file_fd, uint64_t synced_size);
/* Appends one record (nothing when no journal is open). -errno. */
int diskio_crashlog_append(struct diskio_crashlog *l, enum diskio_crashlog_kind kind,
			   uint64_t off, uint64_t len, const void *old, size_t old_len);
/* The file was synced (or is done with): removes the journal. */
void diskio_crashlog_end(struct diskio_crashlog *l);

struct diskio_crashlog_info {
	uint64_t synced_size;
	size_t records;       /* whole records */
	size_t used;          /* bytes of header and whole records */
	uint64_t write_bytes; /* bytes the writes wrote */
	uint64_t end;         /* the furthest byte any record touches */
	bool headless;        /* the header was cut short: no op had begun
			       * (synced_size unknown, nothing to undo) */
};

/* Reads a journal's bytes: 0 and info, or -EBADMSG when they are not a
 * journal (a bad header, a record of no known kind or out of bounds). */
int diskio_crashlog_parse(const uint8_t *buf, size_t size, struct diskio_crashlog_info *info);

/* Rewrites the file fd as the power cut mode describes, from its journal
 * buf: DROP_ALL undoes every op and truncates the file to its synced
 * size; RANDOM then replays each op kept, lost, or (a write) torn at a
 * 512-byte boundary of the file, at random (seed); KEEP_ALL leaves the
 * file. Then fdatasyncs it. -EBADMSG (the file untouched), -EFBIG (more
 * than DISKIO_CRASHLOG_MAX_BYTES of writes), -ENOMEM, -errno. */
int diskio_crashlog_revert(const uint8_t *buf, size_t size, int fd,
			   enum diskio_crash_mode mode, uint64_t seed);

/* xorshift64*: the fault backend's random choices, reproducible from
 * the seed. */
uint64_t diskio_fault_rand(uint64_t *state);

/* Cuts the device after n more ops (n = 0: now). */
void diskio_fault_cut_after(struct diskio *d, long n);

/* Makes the sync that comes after n more syncs fail (n = 0: the next). */
void diskio_fault_fail_sync_after(struct diskio *d, long n);

/* Runs a held chain now (it completes as the options say). false if none
 * was held. */
bool diskio_fault_release(struct diskio *d);
bool diskio_fault_is_held(const struct diskio *d);
/* Changes the chain mode (a held chain stays held until released). */
void diskio_fault_set_chain(struct diskio *d, int chain);

/* Counters of the fault backend: ops so far, and whether the device is
 * gone. */
long diskio_fault_ops(const struct diskio *d);
bool diskio_fault_is_cut(const struct diskio *d);

#endif
