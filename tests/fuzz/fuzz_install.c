/*
 * Fuzz target: arbitrary bytes as a db received from the leader, prepared
 * for installation as stored does on MSG_SNAPSHOT_INSTALL (install.h):
 * copied beside a db, checked (metas, page size, the whole tree, etcd's
 * buckets, members, consistent index), opened as stored opens its db
 * (cetcd's index built for it) and checkpointed. Any refusal is fine; a
 * crash, a hang or a sanitizer report is a bug. The first input byte
 * chooses the snapshot index the file must reach (0-255), so both the
 * accepted path and the "consistent index below" refusal are reached.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/diskio/diskio.h"
#include "base/log/log.h"
#include "stored/install.h"
#include "shm_testlib.h"

#define INSTALL_MAP_SIZE (1ull << 30)

static char dir[128]; /* test_tmpdir's, removed at exit */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	char src[64], tmp[sizeof(dir) + 32];
	struct install_info info;

	if (!ready) {
		test_tmpdir(dir, sizeof(dir));
		log_set_level(LOG_LEVEL_ERROR);
		ready = true;
	}
	if (size == 0)
		return 0;
	int fd = memfd_create("install-input", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (size > 1 && diskio_pwrite_all(fd, data + 1, size - 1, 0) < 0)
		abort();
	snprintf(src, sizeof(src), "/proc/self/fd/%d", fd);
	snprintf(tmp, sizeof(tmp), "%s/db.installing", dir);
	(void)install_prepare(src, tmp, data[0], INSTALL_MAP_SIZE, &info);
	(void)unlink(tmp);
	close(fd);
	return 0;
}
