/*
 * Open-file-description locks on single bytes of the region file.
 *
 * OFD locks (F_OFD_SETLK) belong to an open file description, not to a
 * process: the kernel drops them when the last descriptor of that
 * description closes, which includes the death of the process by any
 * signal. That makes them the liveness test for roles, slots and reader
 * entries: no pid is ever compared, so pid reuse and pid namespaces cannot
 * fool it.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "shm/layout.h"

static void ofdlock_fill(struct flock *fl, short type, off_t byte, off_t len)
{
	memset(fl, 0, sizeof(*fl));
	fl->l_type = type;
	fl->l_whence = SEEK_SET;
	fl->l_start = byte;
	fl->l_len = len;
	fl->l_pid = 0; /* required by F_OFD_* */
}

int ofdlock_try(int fd, off_t byte)
{
	struct flock fl;

	ofdlock_fill(&fl, F_WRLCK, byte, 1);
	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 0;
	if (errno == EAGAIN || errno == EACCES)
		return -EBUSY;
	return -errno;
}

void ofdlock_release(int fd, off_t byte)
{
	struct flock fl;

	ofdlock_fill(&fl, F_UNLCK, byte, 1);
	(void)fcntl(fd, F_OFD_SETLK, &fl);
}

static int ofdlock_probe(int fd, off_t byte, off_t len)
{
	struct flock fl;

	ofdlock_fill(&fl, F_WRLCK, byte, len);
	if (fcntl(fd, F_OFD_GETLK, &fl) != 0)
		return -errno;
	return fl.l_type != F_UNLCK;
}

int ofdlock_is_held(int fd, off_t byte)
{
	return ofdlock_probe(fd, byte, 1);
}

int ofdlock_any_from(int fd, off_t from)
{
	return ofdlock_probe(fd, from, 0); /* len 0: to the end and beyond */
}
