/* .snap files (see snap.h). */
#include "raftd/wal/snap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/wire.h"
#include "raftd/alloc.h"
#include "raftd/raft/raftmsg.h"
#include "base/crc32c/crc32c.h"
#include "base/diskio/diskio.h"
#include "base/log/log.h"

#define SNAP_SUFFIX ".snap"
#define SNAP_DB_SUFFIX ".snap.db"

void snap_clear(struct snap *s)
{
	raftd_free(s->data);
	memset(s, 0, sizeof(*s));
}

void snap_name(char out[SNAP_NAME_BYTES], uint64_t term, uint64_t index)
{
	snprintf(out, SNAP_NAME_BYTES, "%016" PRIx64 "-%016" PRIx64 SNAP_SUFFIX, term, index);
}

int snap_encode(const struct snap *s, uint8_t **out, size_t *len)
{
	struct raftmsg_snapshot rs = {
		.has_data = true, .len = s->len, .data = s->data, .index = s->index,
		.term = s->term,
		.conf_state = { .voters = s->conf.voters, .n_voters = s->conf.n_voters,
				.learners = s->conf.learners, .n_learners = s->conf.n_learners },
	};
	size_t n = raftmsg_snapshot_size(&rs);
	/* snappb.Snapshot: crc (field 1, always written), data (field 2) */
	size_t total = 1 + PROTO_VARINT_MAX_BYTES + 1 + PROTO_VARINT_MAX_BYTES + n;
	uint8_t *buf = raftd_malloc(total), *body;

	if (!buf)
		return -ENOMEM;
	body = raftd_malloc(n ? n : 1);
	if (!body) {
		raftd_free(buf);
		return -ENOMEM;
	}
	raftmsg_snapshot_encode(&rs, body);
	size_t k = 0;
	buf[k++] = 0x08;
	k += proto_varint_put(buf + k, crc32c_update(0, body, n));
	buf[k++] = 0x12;
	k += proto_varint_put(buf + k, n);
	memcpy(buf + k, body, n);
	k += n;
	raftd_free(body);
	*out = buf;
	*len = k;
	return 0;
}

int snap_decode(const uint8_t *p, size_t len, struct snap *out, const char **why)
{
	struct proto_reader r = proto_reader_init(p, len);
	struct proto_field f;
	uint32_t crc = 0;
	const uint8_t *data = NULL;
	size_t data_len = 0;

	memset(out, 0, sizeof(*out));
	*why = "snap: empty snapshot";
	if (len == 0)
		return -EBADMSG;
	*why = "snap: not a snappb.Snapshot";
	while (!proto_reader_done(&r)) {
		if (proto_read_field(&r, &f))
			return -EBADMSG;
		if (f.num == 1 && f.wire != PROTO_WIRE_VARINT)
			return -EBADMSG;
		if (f.num == 2 && f.wire != PROTO_WIRE_BYTES)
			return -EBADMSG;
		if (f.num == 1)
			crc = (uint32_t)f.varint; /* gogo keeps the low 32 bits */
		else if (f.num == 2) {
			data = f.data;
			data_len = f.len;
		}
	}
	*why = "snap: empty snapshot";
	if (data_len == 0 || crc == 0)
		return -EBADMSG;
	*why = "snap: crc mismatch";
	if (crc32c_update(0, data, data_len) != crc)
		return -EBADMSG;

	struct raftmsg_snapshot rs;
	void *alloc = NULL;
	int rc = raftmsg_snapshot_decode(data, data_len, &rs, &alloc);
	*why = "snap: the data is not a raftpb.Snapshot";
	if (rc)
		return rc;
	*why = "snap: the snapshot's configuration has too many members";
	rc = -EBADMSG;
	if (rs.conf_state.n_voters > RAFT_MAX_MEMBERS ||
	    rs.conf_state.n_learners > RAFT_MAX_MEMBERS)
		goto out_free;
	out->index = rs.index;
	out->term = rs.term;
	out->conf.n_voters = rs.conf_state.n_voters;
	out->conf.n_learners = rs.conf_state.n_learners;
	if (rs.conf_state.n_voters)
		memcpy(out->conf.voters, rs.conf_state.voters,
		       rs.conf_state.n_voters * sizeof(uint64_t));
	if (rs.conf_state.n_learners)
		memcpy(out->conf.learners, rs.conf_state.learners,
		       rs.conf_state.n_learners * sizeof(uint64_t));
	out->len = rs.len;
	out->data = raftd_malloc(rs.len ? rs.len : 1);
	*why = "snap: out of memory";
	rc = -ENOMEM;
	if (!out->data)
		goto out_free;
	if (rs.len)
		memcpy(out->data, rs.data, rs.len);
	*why = NULL;
	rc = 0;
out_free:
	raftd_free(alloc);
	return rc;
}

static int snap_path(char *buf, size_t cap, const char *dir, const char *name)
{
	int n = snprintf(buf, cap, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int snap_save(const char *dir, const struct snap *s)
{
	char name[SNAP_NAME_BYTES], path[4096];
	uint8_t *buf;
	size_t len;
	int fd, rc;

	snap_name(name, s->term, s->index);
	rc = snap_path(path, sizeof(path), dir, name);
	if (rc)
		return rc;
	rc = snap_encode(s, &buf, &len);
	if (rc)
		return rc;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = diskio_pwrite_all(fd, buf, len, 0);
	if (!rc)
		rc = diskio_fdatasync(fd);
	close(fd);
	if (!rc)
		rc = diskio_sync_dir(dir);
	if (rc) {
		log_warn("failed to write a snap file", LOG_STR("path", path), LOG_ERRNO(rc));
		if (unlink(path) < 0 && errno != ENOENT)
			log_warn("failed to remove a broken snap file", LOG_STR("path", path));
	}
out_free:
	raftd_free(buf);
	return rc;
}

/* Whether name ends in suffix (and has something before it). */
static bool snap_has_suffix(const char *name, const char *suffix)
{
	size_t n = strlen(name), k = strlen(suffix);
	return n > k && strcmp(name + n - k, suffix) == 0;
}

static int snap_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir ending in suffix, sorted ascending (*out: raftd_malloc'ed
 * names in one raftd_malloc'ed array; free with snap_names_free). */
static int snap_list(const char *dir, const char *suffix, char ***out, size_t *n)
{
	DIR *d = opendir(dir);
	char **v = NULL;
	size_t count = 0, cap = 0;
	struct dirent *e;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (!snap_has_suffix(e->d_name, suffix))
			continue;
		rc = raftd_reserve((void **)&v, &cap, count + 1, sizeof(*v), 16);
		if (rc)
			break;
		v[count] = raftd_malloc(strlen(e->d_name) + 1);
		if (!v[count]) {
			rc = -ENOMEM;
			break;
		}
		strcpy(v[count++], e->d_name);
	}
	closedir(d);
	if (count)
		qsort(v, count, sizeof(*v), snap_name_cmp);
	*out = v;
	*n = count;
	return rc;
}

static void snap_names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		raftd_free(v[i]);
	raftd_free(v);
}

/* Reads a whole file into *out (raftd_malloc). */
static int snap_read_file(const char *path, uint8_t **out, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		goto out_close;
	}
	*len = (size_t)st.st_size;
	*out = raftd_malloc(*len ? *len : 1);
	rc = *out ? diskio_pread_all(fd, *out, *len, 0) : -ENOMEM;
	if (rc) {
		raftd_free(*out);
		*out = NULL;
	}
out_close:
	close(fd);
	return rc;
}

int snap_load_newest(const char *dir, const struct wal_snap *points, size_t n,
		     struct snap *out)
{
	char **names, path[4096];
	size_t count;
	int rc = snap_list(dir, SNAP_SUFFIX, &names, &count);

	if (rc == -ENOENT)
		return -ENOENT;
	if (rc)
		goto out_free;
	rc = -ENOENT;
	for (size_t i = count; i-- > 0;) {
		uint64_t term, index;
		char tail;
		if (sscanf(names[i], "%16" SCNx64 "-%16" SCNx64 ".sna%c", &term, &index, &tail) != 3)
			continue;
		bool wanted = false;
		for (size_t k = 0; k < n && !wanted; k++)
			wanted = points[k].index == index && points[k].term == term;
		if (!wanted || snap_path(path, sizeof(path), dir, names[i]))
			continue;
		uint8_t *buf = NULL;
		size_t len = 0;
		const char *why = NULL;
		rc = snap_read_file(path, &buf, &len);
		if (rc) {
			log_warn("failed to read a snap file", LOG_STR("path", path), LOG_ERRNO(rc));
			goto out_free;
		}
		rc = snap_decode(buf, len, out, &why);
		raftd_free(buf);
		if (rc == -ENOMEM)
			goto out_free;
		if (rc == 0 && (out->index != index || out->term != term)) {
			why = "snap: the snapshot's point is not the one its name says";
			snap_clear(out);
			rc = -EBADMSG;
		}
		if (rc == 0)
			goto out_free;
		/* etcd's loadSnap: set the broken file aside, try the next */
		char broken[4200];
		snprintf(broken, sizeof(broken), "%s.broken", path);
		log_warn("failed to read a snap file", LOG_STR("path", path), LOG_STR("error", why));
		if (rename(path, broken) < 0)
			log_warn("failed to rename a broken snap file", LOG_STR("path", path),
				 LOG_STR("broken-path", broken), LOG_ERRNO(-errno));
		else
			log_warn("renamed to a broken snap file", LOG_STR("path", path),
				 LOG_STR("broken-path", broken));
		rc = -ENOENT;
	}
out_free:
	snap_names_free(names, count);
	return rc;
}

/* Removes the oldest names of dir ending in suffix until max remain. */
static int snap_purge_suffix(const char *dir, const char *suffix, unsigned max)
{
	char **names, path[4096];
	size_t count;
	int removed = 0, rc = snap_list(dir, suffix, &names, &count);

	if (rc)
		return rc == -ENOENT ? 0 : rc;
	for (size_t i = 0; i + max < count; i++) {
		if (snap_path(path, sizeof(path), dir, names[i]))
			continue;
		if (unlink(path) < 0) {
			rc = -errno;
			log_warn("failed to purge a snap file", LOG_STR("path", path), LOG_ERRNO(rc));
			break;
		}
		log_info("purged", LOG_STR("path", path));
		removed++;
	}
	snap_names_free(names, count);
	return rc ? rc : removed;
}

int snap_purge(const char *dir, unsigned max)
{
	if (max == 0)
		return 0;
	int a = snap_purge_suffix(dir, SNAP_SUFFIX, max);
	if (a < 0)
		return a;
	int b = snap_purge_suffix(dir, SNAP_DB_SUFFIX, max);
	return b < 0 ? b : a + b;
}

int snap_release_dbs(const char *dir, uint64_t index)
{
	char **names, path[4096];
	size_t count;
	int removed = 0, rc = snap_list(dir, SNAP_DB_SUFFIX, &names, &count);

	if (rc)
		return rc == -ENOENT ? 0 : rc;
	for (size_t i = 0; i < count; i++) {
		uint64_t db_index;
		char tail;
		if (sscanf(names[i], "%16" SCNx64 ".snap.d%c", &db_index, &tail) != 2 ||
		    strlen(names[i]) != 16 + strlen(SNAP_DB_SUFFIX) || db_index >= index)
			continue;
		if (snap_path(path, sizeof(path), dir, names[i]))
			continue;
		if (unlink(path) < 0) {
			rc = -errno;
			break;
		}
		log_info("removed old snapshot db file", LOG_STR("path", path));
		removed++;
	}
	snap_names_free(names, count);
	return rc ? rc : removed;
}
