/* The launcher's corruption check (etcd's --experimental-initial-corrupt-
 * check, etcdserver/corrupt.go CheckInitialHashKV). */
#ifndef CETCD_LAUNCHER_CORRUPT_H
#define CETCD_LAUNCHER_CORRUPT_H

struct cetcd_config;

/*
 * Before any process of the member serves: when the member was started
 * before (it has a WAL; etcd checks only then), its HashKV at its current
 * revision, from the db on disk, is compared with each peer's at that
 * revision, asked for on the peers' URLs (GET /members/hashkv, as etcd
 * asks). A peer whose hash differs with the same compact revision is a
 * mismatch; a different compact revision, a peer that is behind or
 * ahead of the compaction, or one that cannot be asked, is a warning, as
 * in etcd. Returns 0 when no peer differs, -EUCLEAN on a mismatch (etcd's
 * error logged), or the error of reading the db (logged).
 */
int corrupt_initial_check(const struct cetcd_config *cfg);

/* Set in the environment of the launcher's own program when it is to run
 * as the member's corruption monitor (monitor.c). */
#define CORRUPT_MONITOR_ENV "CETCD_CORRUPT_MONITOR"
#define CORRUPT_MONITOR_NAME "corrupt-check"

/* The corruption monitor's process (--experimental-corrupt-check-time,
 * monitor.c): checks while this member leads until a stop signal. The
 * process's exit status. */
int corrupt_monitor_main(int argc, char **argv);

#endif
