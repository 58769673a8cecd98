/*
 * Fuzz target: the WAL's metadata record (etcdserverpb.Metadata, the
 * member and cluster ids every segment starts with; raftd/bootstrap.c).
 * The first input byte picks what the rest is:
 *   even: the record's data, through bootstrap_metadata_decode; taken, the
 *         ids encode (bootstrap_metadata_encode) and decode back the same;
 *   odd:  the first bytes of a segment, written as the only segment of a
 *         WAL directory and read with bootstrap_wal_ids, as a member does
 *         before it serves; it answers the ids, or -ENOENT (no metadata
 *         record) or -EBADMSG (one that does not decode), nothing else.
 * A crash, a hang or a sanitizer report is a bug.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "raftd/bootstrap.h"
#include "base/diskio/diskio.h"
#include "shm_testlib.h"

static char dir[128]; /* test_tmpdir's, removed at exit */
#define SEGMENT "0000000000000000-0000000000000000.wal"

static void record(const uint8_t *data, size_t size)
{
	uint8_t buf[BOOTSTRAP_METADATA_MAX];
	uint64_t node, cluster, node2, cluster2;

	if (bootstrap_metadata_decode(data, size, &node, &cluster) != 0)
		return;
	size_t n = bootstrap_metadata_encode(node, cluster, buf);
	if (n > sizeof(buf) || bootstrap_metadata_decode(buf, n, &node2, &cluster2) != 0 ||
	    node2 != node || cluster2 != cluster)
		abort();
}

static void segment(const uint8_t *data, size_t size)
{
	char path[sizeof(dir) + sizeof(SEGMENT) + 1];
	uint64_t node, cluster;

	snprintf(path, sizeof(path), "%s/%s", dir, SEGMENT);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size > 0 && diskio_pwrite_all(fd, data, size, 0) < 0))
		abort();
	close(fd);
	int rc = bootstrap_wal_ids(dir, &node, &cluster);
	if (rc != 0 && rc != -ENOENT && rc != -EBADMSG)
		abort();
	(void)unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;

	if (!ready) {
		test_tmpdir(dir, sizeof(dir));
		ready = true;
	}
	if (size == 0)
		return 0;
	if (data[0] % 2 == 0)
		record(data + 1, size - 1);
	else
		segment(data + 1, size - 1);
	return 0;
}
