/* Preparing a received db for installation (see install.h). */
#include "stored/install.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/diskio/diskio.h"
#include "base/log/errmsg.h"
#include "stored/btree/btree.h"
#include "stored/membership_db.h"
#include "stored/mvcc/mvcc.h"

/* Copies the file open at in (size bytes) to out. */
static int install_copy(int in, int out, uint64_t size, const char *src, const char *tmp)
{
	static char buf[1 << 16];
	uint64_t off = 0;

	while (off < size) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(size - off), 0);
		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
			      errno == EOPNOTSUPP)) {
			/* another file system, or a kernel without it */
			n = pread(in, buf, sizeof(buf), (off_t)off);
			if (n > 0 && diskio_pwrite_all(out, buf, (size_t)n, off) < 0)
				n = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errmsg_set(-errno, "stored: copying the received db %s to %s: %s", src,
					  tmp, strerror(errno));
		if (n == 0)
			return errmsg_set(-EIO, "stored: the received db %s ended at %llu of %llu bytes while it was copied",
					  src, (unsigned long long)off, (unsigned long long)size);
		off += (uint64_t)n;
	}
	int rc = diskio_fdatasync(out);
	return rc < 0 ? errmsg_set(rc, "stored: syncing %s: %s", tmp, strerror(-rc)) : 0;
}

/* Copies the file open at in (size bytes) through io, then syncs it. */
static int install_copy_io(int in, struct diskio *io, uint64_t size, const char *src,
			   const char *tmp)
{
	static char buf[1 << 16];
	uint64_t off = 0;
	int rc;

	while (off < size) {
		size_t len = size - off < sizeof(buf) ? (size_t)(size - off) : sizeof(buf);
		rc = diskio_pread_all(in, buf, len, off);
		if (rc == -ENODATA)
			return errmsg_set(-EIO, "stored: the received db %s ended before %llu bytes while it was copied",
					  src, (unsigned long long)size);
		if (rc < 0)
			return errmsg_set(rc, "stored: reading the received db %s: %s", src,
					  strerror(-rc));
		rc = diskio_write(io, buf, len, off);
		if (rc < 0)
			return errmsg_set(rc, "stored: copying the received db %s to %s: %s", src,
					  tmp, strerror(-rc));
		off += len;
	}
	rc = diskio_sync(io);
	return rc < 0 ? errmsg_set(rc, "stored: syncing %s: %s", tmp, strerror(-rc)) : 0;
}

/* Copies src to tmp (through io_open's disk I/O when given); *bytes gets
 * its size. */
static int install_copy_file(const char *src, const char *tmp,
			     int (*io_open)(int fd, void *arg, struct diskio **out),
			     void *io_open_arg, uint64_t *bytes)
{
	struct stat st;
	int in, out, rc;

	in = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return errmsg_set(-errno, "stored: the received db %s: open: %s", src,
				  strerror(errno));
	if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = errmsg_set(-EUCLEAN, "stored: the received db %s is not a regular file", src);
		goto out_close_in;
	}
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		rc = errmsg_set(-errno, "stored: %s: open: %s", tmp, strerror(errno));
		goto out_close_in;
	}
	*bytes = (uint64_t)st.st_size;
	if (io_open) {
		struct diskio *io;
		rc = io_open(out, io_open_arg, &io);
		if (rc == 0) {
			rc = install_copy_io(in, io, *bytes, src, tmp);
			diskio_close(io);
		} else {
			rc = errmsg_set(rc, "stored: %s: opening its disk I/O: %s", tmp, strerror(-rc));
		}
	} else {
		rc = install_copy(in, out, *bytes, src, tmp);
	}
	close(out);
out_close_in:
	close(in);
	return rc;
}

/* Checks the copy and opens it as stored opens its db. */
static int install_open(const char *tmp, uint64_t min_index, uint64_t map_size,
			int (*io_open)(int fd, void *arg, struct diskio **out), void *io_open_arg,
			struct install_info *out)
{
	struct btree_db_opts o = {
		.map_size = map_size, .io_open = io_open, .io_open_arg = io_open_arg,
	};
	struct membership members = { 0 };
	struct mvcc_store *store = NULL;
	struct btree_db *db;
	struct btree_txn *t;
	struct mvcc_state ms;
	int rc;

	rc = btree_db_open(tmp, &o, &db);
	if (rc)
		return rc;
	rc = btree_db_check(db);
	if (rc)
		goto out_close;
	rc = mvcc_store_open(db, NULL, &store);
	if (rc)
		goto out_close;
	mvcc_store_state(store, &ms);
	if (ms.consistent_index < min_index) {
		rc = errmsg_set(-ERANGE, "stored: the received db has consistent index %llu, below the snapshot's index %llu",
				(unsigned long long)ms.consistent_index,
				(unsigned long long)min_index);
		goto out_close;
	}
	rc = btree_db_read_begin(db, NULL, &t);
	if (!rc) {
		rc = membership_db_load(t, &members);
		btree_txn_end(t);
		membership_free(&members);
	}
	if (!rc)
		rc = btree_db_checkpoint(db, NULL);
	if (rc)
		goto out_close;
	out->consistent_index = ms.consistent_index;
	out->revision = ms.rev;
	out->index_rebuilt = ms.rebuilt;
out_close:
	mvcc_store_close(store);
	btree_db_close(db);
	return rc;
}

int install_prepare(const char *src, const char *tmp, uint64_t min_index, uint64_t map_size,
		    struct install_info *out)
{
	return install_prepare_io(src, tmp, min_index, map_size, NULL, NULL, out);
}

int install_prepare_io(const char *src, const char *tmp, uint64_t min_index, uint64_t map_size,
		       int (*io_open)(int fd, void *arg, struct diskio **out), void *io_open_arg,
		       struct install_info *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = install_copy_file(src, tmp, io_open, io_open_arg, &out->bytes);
	if (!rc)
		rc = install_open(tmp, min_index, map_size, io_open, io_open_arg, out);
	if (rc) {
		/* keep the reason: unlink must not replace it */
		int saved = rc;
		(void)unlink(tmp);
		return saved;
	}
	return 0;
}
