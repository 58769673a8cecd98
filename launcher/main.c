/* cetcd: the launcher of a member.
 *
 * Parses etcd's flags (config/config.h), creates the data dir as etcd
 * does and the member region, then starts raftd, stored and --gateways
 * gatewayd processes from the directory the launcher itself
 * lives in, each with the launcher's own arguments (gatewayd also gets
 * --gateway-index). It restarts a process that dies, with a backoff, and
 * stops the member in order on SIGTERM or SIGINT: the gateways first (no
 * new requests), then stored, then raftd, each with SIGTERM and, after a
 * grace period, SIGKILL. SIGHUP (a closed terminal) stops it the same
 * way, unless it was started with SIGHUP ignored (nohup). A daemon that exits with CONFIG_EXIT_FATAL (or cannot be executed)
 * is not restarted: the launcher stops the member and exits 1, as etcd
 * exits when it cannot start. One that exits with CONFIG_EXIT_REMOVED (the
 * member was removed from its cluster) stops the member too, and the
 * launcher exits 0, as etcd does then.
 *
 * The region has no name (shm_region_create_unnamed): the daemons inherit
 * its descriptor, and a restarted daemon inherits it again. The kernel
 * frees its memory once the last process of the member is gone, however
 * they died, so a killed member leaves nothing on the tmpfs. One launcher
 * runs per data dir: it holds a lock on <data-dir>/member through a
 * descriptor its children inherit too, so the lock goes only with the
 * last process of the member, and a new launcher started after a SIGKILL
 * waits for the old daemons to go before it starts its own.
 *
 * If the launcher dies, even by SIGKILL, its children die with it
 * (PR_SET_PDEATHSIG).
 *
 * With --prepare-only it creates the directories and a region with a name,
 * <runtime-dir>/region, and exits, for systemd units that start each
 * daemon on its own (their RuntimeDirectory= removes it on stop).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "shm/metrics.h"
#include "config/config.h"
#include "cluster/member.h"
#include "base/diskio/diskio.h"
#include "launcher/compactor.h"
#include "launcher/corrupt.h"
#include "base/log/errmsg.h"
#include "base/log/log.h"
#include "shm/region.h"

/* Restart backoff: doubles from the first value after each quick failure
 * (a run shorter than LAUNCH_STABLE_MS), up to the last. */
#define LAUNCH_BACKOFF_FIRST_MS 100u
#define LAUNCH_BACKOFF_MAX_MS 10000u
#define LAUNCH_STABLE_MS 10000u
/* Time a process gets between SIGTERM and SIGKILL when stopping. */
#define LAUNCH_STOP_GRACE_MS 3000u
/* How long a new launcher waits for the processes of a killed one to go. */
#define LAUNCH_BUSY_WAIT_MS 3000u
/* Under a Type=notify unit: how often the launcher looks whether the member
 * published itself, until it did. */
#define LAUNCH_READY_POLL_MS 20

/* Stop order: lower stages stop first. */
enum launch_stage { STAGE_GATEWAYS, STAGE_STORED, STAGE_RAFTD, STAGE_COUNT };

struct launch_child {
	char name[32];          /* "raftd", "stored", "gatewayd-0" */
	const char *prog;       /* program file name */
	enum launch_stage stage;
	int64_t gateway_index;  /* -1 for raftd and stored */
	pid_t pid;              /* 0 when not running */
	uint64_t started_ms;
	uint64_t restart_at_ms; /* 0: no restart pending */
	uint32_t backoff_ms;
};

struct launcher {
	struct cetcd_config cfg;
	int argc;
	char **argv;
	char bindir[PATH_MAX];
	char self_prog[NAME_MAX + 1]; /* the launcher's own file name there */
	pid_t self;
	int sfd;                 /* signalfd: SIGCHLD, SIGTERM, SIGINT, SIGHUP */
	int member_lock_fd;      /* <data-dir>/member, flocked; children inherit it */
	int region_fd;           /* the region's descriptor; children inherit it */
	struct launch_child *children;
	size_t nchildren;
	/* gatewayd 0's client listeners until it is started (CONFIG_CLIENT_FDS_ENV) */
	int *client_fds;
	/* the unix socket client listeners, which every gatewayd shares: kept
	 * for the member's life */
	int *unix_fds;
	struct shm_region *region;
	/* started by systemd as a Type=notify unit, and READY=1 not sent
	 * yet: it goes once the member published itself (shm_region_published) */
	bool notify_ready;
	bool stopping;
	int exit_status;
};

/* etcd's fileutil.TouchDirAll: create with 0700, or warn if an existing
 * directory is more open than that. Every directory created has its
 * parent fsynced, so that it survives a crash (diskio_mkdir_all). */
static int launch_private_dir(const char *what, const char *path)
{
	struct stat st;
	int rc = diskio_mkdir_all(path, 0700);
	if (rc) {
		log_error("cannot create directory", LOG_STR("directory", what),
			  LOG_STR("path", path), LOG_ERRNO(rc));
		return rc;
	}
	if (stat(path, &st) == 0 && (st.st_mode & 0777) != 0700)
		log_warn("check file permission: directory exists, but the permission is not 0700; restrict it to prevent unprivileged access to the data",
			 LOG_STR("path", path), LOG_U64("permission", st.st_mode & 0777));
	if (access(path, W_OK) < 0) {
		rc = -errno;
		log_error("directory is not writable", LOG_STR("path", path), LOG_ERRNO(rc));
		return rc;
	}
	return 0;
}

/* Creates the data dir and member/. */
static int launch_prepare_dirs(const struct cetcd_config *c)
{
	char member[PATH_MAX];
	int rc;

	rc = launch_private_dir("data-dir", c->data_dir);
	if (rc)
		return rc;
	if (snprintf(member, sizeof(member), "%s/member", c->data_dir) >= (int)sizeof(member))
		return -ENAMETOOLONG;
	return launch_private_dir("member-dir", member);
}

static void launch_warn_not_tmpfs(const char *dir)
{
	struct statfs fs;

	if (statfs(dir, &fs) == 0 && fs.f_type != TMPFS_MAGIC && fs.f_type != RAMFS_MAGIC)
		log_warn("runtime dir is not on tmpfs: the region's pages may be written back to disk; use --runtime-dir on a tmpfs such as /dev/shm or /run",
			 LOG_STR("runtime-dir", dir));
}

/* --prepare-only: creates the runtime dir, which holds the region's
 * name. */
static int launch_runtime_dir(const struct cetcd_config *c)
{
	int rc = launch_private_dir("runtime-dir", c->runtime_dir);

	if (rc == 0)
		launch_warn_not_tmpfs(c->runtime_dir);
	return rc;
}

/*
 * The directory an unnamed region is made in: the runtime dir, or, while
 * it does not exist, its nearest existing ancestor. That is the file
 * system the runtime dir would be made on (a directory that does not
 * exist is no mount point), and nothing is created that a SIGKILL could
 * leave behind. Writes it to buf.
 */
static int launch_region_dir(const struct cetcd_config *c, char *buf, size_t len)
{
	struct stat st;
	char *slash;

	if (snprintf(buf, len, "%s", c->runtime_dir) >= (int)len)
		return -ENAMETOOLONG;
	while (stat(buf, &st) < 0) {
		if (errno != ENOENT)
			return -errno;
		slash = strrchr(buf, '/');
		if (!slash)
			snprintf(buf, len, ".");
		else if (slash == buf)
			buf[1] = '\0';
		else
			*slash = '\0';
	}
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/*
 * Takes the lock of the member's data dir: an exclusive flock on
 * <data-dir>/member. A launcher killed just before may still have children
 * dying, and they hold it through the descriptor they inherited: it is
 * retried for LAUNCH_BUSY_WAIT_MS before giving up.
 */
static int launch_lock_member(const struct cetcd_config *c, int *out_fd)
{
	char member[PATH_MAX];
	int64_t give_up = clock_now_ms() + LAUNCH_BUSY_WAIT_MS;
	int fd, rc;

	if (snprintf(member, sizeof(member), "%s/member", c->data_dir) >= (int)sizeof(member))
		return -ENAMETOOLONG;
	fd = open(member, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		log_error("cannot open the member dir", LOG_STR("path", member), LOG_ERRNO(rc));
		return rc;
	}
	while ((rc = flock(fd, LOCK_EX | LOCK_NB)) < 0 && errno == EWOULDBLOCK &&
	       clock_now_ms() < give_up)
		usleep(50 * 1000);
	if (rc < 0) {
		rc = -errno;
		if (rc == -EWOULDBLOCK)
			log_error("another cetcd launcher, or a process it started, is still running for this member; stop it first",
				  LOG_STR("data-dir", c->data_dir));
		else
			log_error("cannot lock the member dir", LOG_STR("path", member),
				  LOG_ERRNO(rc));
		close(fd);
		return rc;
	}
	*out_fd = fd;
	return 0;
}

static void launch_region_params(const struct cetcd_config *c, struct shm_region_params *p)
{
	uint64_t slots = 2 * (uint64_t)c->gateways + 2;
	*p = (struct shm_region_params){
		.slot_count = (uint32_t)(slots < 4 ? 4 : slots),
		.max_request_bytes = c->max_request_bytes,
		.member_id = 0,
		.cache_bytes = c->latest_cache_mib << 20,
	};
}

/* Creates the member's region, which has no name, on the runtime dir's
 * file system (launch_region_dir). */
static int launch_create_region(const struct cetcd_config *c, struct shm_region **out)
{
	struct shm_region_params p;
	char dir[PATH_MAX];
	int rc;

	launch_region_params(c, &p);
	rc = launch_region_dir(c, dir, sizeof(dir));
	if (rc) {
		log_error("cannot use the runtime dir", LOG_STR("runtime-dir", c->runtime_dir),
			  LOG_ERRNO(rc));
		return rc;
	}
	launch_warn_not_tmpfs(dir);
	rc = shm_region_create_unnamed(dir, &p, out);
	if (rc) {
		log_error("cannot create the member region", LOG_STR("runtime-dir", dir),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		return rc;
	}
	log_info("created the member region", LOG_STR("runtime-dir", dir),
		 LOG_U64("slots", p.slot_count), LOG_U64("bytes", shm_region_bytes(*out)));
	shm_metrics_own(shm_metrics_block(*out, SHM_METRICS_LAUNCHER));
	return 0;
}

/* --prepare-only: creates (or re-creates, after a crash) the region file
 * <runtime-dir>/region for daemons that start on their own. */
static int launch_prepare_region(const struct cetcd_config *c, struct shm_region **out)
{
	char path[PATH_MAX];
	struct shm_region_params p;
	int rc = config_region_path(c, path, sizeof(path));

	if (rc) {
		log_error("runtime dir path is too long", LOG_STR("runtime-dir", c->runtime_dir));
		return rc;
	}
	launch_region_params(c, &p);
	rc = shm_region_create(path, &p, out);
	switch (rc) {
	case 0:
		log_info("created the member region", LOG_STR("region", path),
			 LOG_U64("slots", p.slot_count), LOG_U64("bytes", shm_region_bytes(*out)),
			 LOG_U64("incarnation", shm_region_incarnation(*out)));
		return 0;
	case -EBUSY:
		log_error("a process of this member is still running with the region; stop it first",
			  LOG_STR("region", path), LOG_STR("reason", errmsg_get(rc)));
		break;
	case -EEXIST:
		log_error("the runtime dir holds a file that is not a cetcd region; remove it or choose another --runtime-dir",
			  LOG_STR("region", path));
		break;
	default:
		log_error("cannot create the member region", LOG_STR("region", path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
	}
	return rc;
}

/* The directory of the running executable, where the daemons live too. */
static int launch_find_bindir(struct launcher *l)
{
	static const char *const progs[] = { "raftd", "stored", "gatewayd" };
	char exe[PATH_MAX], path[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		log_error("cannot read /proc/self/exe", LOG_ERRNO(-errno));
		return -errno;
	}
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (strlen(slash ? slash + 1 : exe) >= sizeof(l->self_prog))
		return -ENAMETOOLONG; /* no file name is that long */
	strcpy(l->self_prog, slash ? slash + 1 : exe);
	if (slash)
		*slash = '\0';
	snprintf(l->bindir, sizeof(l->bindir), "%s", exe);
	for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", l->bindir, progs[i]);
		if (access(path, X_OK) < 0) {
			int rc = -errno;
			log_error("cannot find a cetcd program beside the launcher; install cetcd's programs together",
				  LOG_STR("program", path), LOG_ERRNO(rc));
			return rc;
		}
	}
	return 0;
}

static int launch_plan(struct launcher *l)
{
	bool monitor = l->cfg.experimental_corrupt_check_time_ns > 0;
	bool compactor = l->cfg.auto_compaction_retention_value > 0;

	l->nchildren = 2 + l->cfg.gateways + monitor + compactor;
	l->children = calloc(l->nchildren, sizeof(*l->children));
	if (!l->children)
		return -ENOMEM;
	l->children[0] = (struct launch_child){ .name = "raftd", .prog = "raftd",
						.stage = STAGE_RAFTD, .gateway_index = -1 };
	l->children[1] = (struct launch_child){ .name = "stored", .prog = "stored",
						.stage = STAGE_STORED, .gateway_index = -1 };
	for (uint32_t i = 0; i < l->cfg.gateways; i++) {
		struct launch_child *ch = &l->children[2 + i];
		*ch = (struct launch_child){ .prog = "gatewayd", .stage = STAGE_GATEWAYS,
					     .gateway_index = i };
		snprintf(ch->name, sizeof(ch->name), "gatewayd-%u", i);
	}
	/* --experimental-corrupt-check-time: this program again, as the
	 * corruption monitor (launcher/monitor.c) */
	if (monitor)
		l->children[2 + l->cfg.gateways] = (struct launch_child){
			.name = CORRUPT_MONITOR_NAME, .prog = l->self_prog, .stage = STAGE_GATEWAYS,
			.gateway_index = -1 };
	/* --auto-compaction-retention: the auto-compactor
	 * (launcher/compactor.c) */
	if (compactor)
		l->children[l->nchildren - 1] = (struct launch_child){
			.name = COMPACTOR_NAME, .prog = l->self_prog, .stage = STAGE_GATEWAYS,
			.gateway_index = -1 };
	return 0;
}

/* Binds gatewayd 0's client listeners before any process starts (see
 * CONFIG_CLIENT_FDS_ENV). Where that fails, gatewayd binds them itself
 * and says why it cannot. */
static void launch_bind_client_urls(struct launcher *l)
{
	struct config_error err;

	if (l->cfg.gateways == 0 || l->cfg.listen_client_urls.count == 0)
		return;
	if (config_listen_client_urls(&l->cfg, CONFIG_LISTEN_TCP, &l->client_fds, &err))
		log_warn("cannot bind the client listeners ahead of the gateway",
			 LOG_STR("reason", err.msg));
	if (config_listen_client_urls(&l->cfg, CONFIG_LISTEN_UNIX, &l->unix_fds, &err))
		log_warn("cannot bind the unix socket client listeners; gatewayd 0 binds them",
			 LOG_STR("reason", err.msg));
}

/* Closes the unix socket listeners and removes their files, as etcd's
 * listener does when it closes. */
static void launch_close_unix_fds(struct launcher *l)
{
	const struct config_urls *us = &l->cfg.listen_client_urls;
	struct sockaddr_storage ss;
	socklen_t len;
	struct config_error err;

	for (size_t i = 0; l->unix_fds && i < us->count; i++)
		if (l->unix_fds[i] >= 0 &&
		    config_url_sockaddr(&us->v[i], &ss, &len, &err) == 0)
			unlink(((struct sockaddr_un *)&ss)->sun_path);
	config_close_client_fds(l->unix_fds, us->count);
	l->unix_fds = NULL;
}

static void launch_close_client_fds(struct launcher *l)
{
	config_close_client_fds(l->client_fds, l->cfg.listen_client_urls.count);
	l->client_fds = NULL;
}

/* In the child that becomes a gatewayd: the unix socket listeners, and
 * for gatewayd 0's first start the TCP ones, stay open across exec, named
 * in CONFIG_CLIENT_FDS_ENV (CONFIG_FD_BIND: TCP ones it binds itself).
 * -1 with errno on failure. */
static int launch_pass_client_fds(struct launcher *l, bool tcp_too)
{
	size_t n = l->cfg.listen_client_urls.count;
	char *buf = malloc(n * 12 + 1), *p = buf;

	if (!buf)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int fd = l->unix_fds && l->unix_fds[i] >= 0 ? l->unix_fds[i] :
			 config_url_is_unix(&l->cfg.listen_client_urls.v[i]) ? -1 :
			 tcp_too && l->client_fds ? l->client_fds[i] : CONFIG_FD_BIND;
		if (fd >= 0 && fcntl(fd, F_SETFD, 0) < 0)
			return -1;
		p += sprintf(p, "%s%d", i ? "," : "", fd);
	}
	*p = 0;
	return setenv(CONFIG_CLIENT_FDS_ENV, buf, 1);
}

/* Starts one process: the launcher's own arguments, after
 * --gateway-index for a gatewayd. The child dies with the launcher. */
static int launch_spawn(struct launcher *l, struct launch_child *ch)
{
	char path[PATH_MAX + 16], index_arg[48];
	char **av = calloc((size_t)l->argc + 2, sizeof(*av));
	size_t n = 0;
	pid_t pid;

	if (!av)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", l->bindir, ch->prog);
	av[n++] = path;
	if (ch->gateway_index >= 0) {
		snprintf(index_arg, sizeof(index_arg), "--gateway-index=%lld",
			 (long long)ch->gateway_index);
		av[n++] = index_arg;
	}
	for (int i = 1; i < l->argc; i++)
		av[n++] = l->argv[i];
	av[n] = NULL;

	pid = fork();
	if (pid == 0) {
		char fd_arg[16];
		sigset_t none;
		/* die with the launcher; if it died before this line, the
		 * parent is already someone else: leave at once */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != l->self)
			_exit(1);
		/* the region and the member lock go to the daemon: the
		 * launcher is single-threaded, so setenv is safe here */
		snprintf(fd_arg, sizeof(fd_arg), "%d", l->region_fd);
		if (fcntl(l->region_fd, F_SETFD, 0) < 0 ||
		    fcntl(l->member_lock_fd, F_SETFD, 0) < 0 ||
		    setenv(CONFIG_REGION_FD_ENV, fd_arg, 1) < 0 ||
		    (!strcmp(ch->name, CORRUPT_MONITOR_NAME) &&
		     setenv(CORRUPT_MONITOR_ENV, "1", 1) < 0) ||
		    (!strcmp(ch->name, COMPACTOR_NAME) && setenv(COMPACTOR_ENV, "1", 1) < 0)) {
			dprintf(2, "cetcd: cannot pass the region to %s: %s\n", path,
				strerror(errno));
			_exit(127);
		}
		if (ch->gateway_index >= 0 &&
		    ((ch->gateway_index == 0 && l->client_fds) || l->unix_fds) &&
		    launch_pass_client_fds(l, ch->gateway_index == 0) < 0) {
			dprintf(2, "cetcd: cannot pass the client listeners to %s: %s\n", path,
				strerror(errno));
			_exit(127);
		}
		/* the launcher is the unit's main process: only it tells
		 * systemd (the daemons would, as their own units do) */
		unsetenv("NOTIFY_SOCKET");
		signal(SIGPIPE, SIG_DFL);
		/* a closed terminal stops the member through the launcher, in
		 * order; the daemons keep SIGHUP ignored (config_stop_signals) */
		signal(SIGHUP, SIG_IGN);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(path, av);
		dprintf(2, "cetcd: cannot execute %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	free(av);
	if (pid < 0) {
		int rc = -errno;
		log_error("cannot start process", LOG_STR("process", ch->name), LOG_ERRNO(rc));
		return rc;
	}
	if (ch->gateway_index == 0)
		launch_close_client_fds(l); /* its own now; a restart binds anew */
	ch->pid = pid;
	ch->started_ms = clock_now_ms();
	ch->restart_at_ms = 0;
	log_info("started process", LOG_STR("process", ch->name), LOG_I64("pid", pid));
	return 0;
}

static struct launch_child *launch_child_by_pid(struct launcher *l, pid_t pid)
{
	for (size_t i = 0; i < l->nchildren; i++)
		if (l->children[i].pid == pid)
			return &l->children[i];
	return NULL;
}

/* Reaps every exited child; schedules restarts unless stopping. */
static void launch_reap(struct launcher *l)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		struct launch_child *ch = launch_child_by_pid(l, pid);
		if (!ch)
			continue;
		ch->pid = 0;
		uint64_t ran_ms = clock_now_ms() - ch->started_ms;
		if (WIFSIGNALED(st))
			log_info("process exited", LOG_STR("process", ch->name), LOG_I64("pid", pid),
				 LOG_STR("signal", strsignal(WTERMSIG(st))), LOG_U64("ran-ms", ran_ms));
		else
			log_info("process exited", LOG_STR("process", ch->name), LOG_I64("pid", pid),
				 LOG_I64("exit-code", WEXITSTATUS(st)), LOG_U64("ran-ms", ran_ms));
		if (l->stopping)
			continue;
		if (WIFEXITED(st) && WEXITSTATUS(st) == CONFIG_EXIT_REMOVED) {
			log_info("the member was removed from the cluster; stopping it",
				 LOG_STR("process", ch->name));
			l->stopping = true;
			continue;
		}
		if (WIFEXITED(st) && (WEXITSTATUS(st) == CONFIG_EXIT_FATAL ||
				      WEXITSTATUS(st) == 126 || WEXITSTATUS(st) == 127)) {
			log_error("process cannot run with this configuration; stopping the member",
				  LOG_STR("process", ch->name), LOG_I64("exit-code", WEXITSTATUS(st)));
			l->stopping = true;
			l->exit_status = 1;
			continue;
		}
		if (ran_ms >= LAUNCH_STABLE_MS || ch->backoff_ms == 0)
			ch->backoff_ms = LAUNCH_BACKOFF_FIRST_MS;
		else if (ch->backoff_ms < LAUNCH_BACKOFF_MAX_MS)
			ch->backoff_ms = ch->backoff_ms * 2 > LAUNCH_BACKOFF_MAX_MS
						 ? LAUNCH_BACKOFF_MAX_MS
						 : ch->backoff_ms * 2;
		ch->restart_at_ms = clock_now_ms() + ch->backoff_ms;
		log_warn("restarting process", LOG_STR("process", ch->name),
			 LOG_U64("backoff-ms", ch->backoff_ms));
	}
}

/* Reads pending signals: SIGCHLD reaps, SIGTERM/SIGINT/SIGHUP start the
 * stop. */
static void launch_read_signals(struct launcher *l, int *stop_requests)
{
	struct signalfd_siginfo si;
	while (read(l->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			launch_reap(l);
		} else {
			log_info("received signal; stopping the member",
				 LOG_STR("signal", strsignal((int)si.ssi_signo)));
			l->stopping = true;
			(*stop_requests)++;
		}
	}
	launch_reap(l); /* SIGCHLDs coalesce: reap whatever is there */
}

static int launch_wait(struct launcher *l, int timeout_ms)
{
	struct pollfd pfd = { .fd = l->sfd, .events = POLLIN };
	int n = poll(&pfd, 1, timeout_ms);
	return n < 0 && errno != EINTR ? -errno : 0;
}

/* Supervises until asked to stop (or a process cannot run). */
static void launch_supervise(struct launcher *l)
{
	int stop_requests = 0;

	launch_bind_client_urls(l);
	for (size_t i = 0; i < l->nchildren && !l->stopping; i++)
		if (launch_spawn(l, &l->children[i]))
			l->children[i].restart_at_ms = clock_now_ms() + LAUNCH_BACKOFF_MAX_MS;
	while (!l->stopping) {
		uint64_t now = clock_now_ms(), next = UINT64_MAX;
		for (size_t i = 0; i < l->nchildren; i++) {
			struct launch_child *ch = &l->children[i];
			if (ch->pid || !ch->restart_at_ms)
				continue;
			if (ch->restart_at_ms <= now && launch_spawn(l, ch))
				ch->restart_at_ms = now + LAUNCH_BACKOFF_MAX_MS;
			if (!ch->pid && ch->restart_at_ms < next)
				next = ch->restart_at_ms;
		}
		int timeout = next == UINT64_MAX ? -1 : (int)(next > now ? next - now : 0);
		if (l->notify_ready && (timeout < 0 || timeout > LAUNCH_READY_POLL_MS))
			timeout = LAUNCH_READY_POLL_MS;
		if (launch_wait(l, timeout)) {
			log_error("poll failed in the launcher", LOG_ERRNO(-errno));
			l->stopping = true;
			l->exit_status = 1;
		}
		launch_read_signals(l, &stop_requests);
		if (l->notify_ready && shm_region_published(l->region)) {
			l->notify_ready = false;
			config_daemon_ready();
			log_info("told the service manager that the member is ready");
		}
	}
}

/* Stops the processes stage by stage: SIGTERM, then SIGKILL after the
 * grace period, or at once on a second stop signal. */
static void launch_stop(struct launcher *l)
{
	int stop_requests = 0;

	for (int stage = 0; stage < STAGE_COUNT; stage++) {
		bool killed = false;
		uint64_t deadline = clock_now_ms() + LAUNCH_STOP_GRACE_MS;
		for (size_t i = 0; i < l->nchildren; i++) {
			struct launch_child *ch = &l->children[i];
			ch->restart_at_ms = 0;
			if (ch->stage == (enum launch_stage)stage && ch->pid) {
				log_info("stopping process", LOG_STR("process", ch->name),
					 LOG_I64("pid", ch->pid));
				kill(ch->pid, SIGTERM);
			}
		}
		for (;;) {
			bool alive = false;
			for (size_t i = 0; i < l->nchildren; i++)
				alive |= l->children[i].stage == (enum launch_stage)stage &&
					 l->children[i].pid != 0;
			if (!alive)
				break;
			uint64_t now = clock_now_ms();
			if (!killed && (now >= deadline || stop_requests > 0)) {
				for (size_t i = 0; i < l->nchildren; i++) {
					struct launch_child *ch = &l->children[i];
					if (ch->stage != (enum launch_stage)stage || !ch->pid)
						continue;
					log_warn("process did not stop in time; killing it",
						 LOG_STR("process", ch->name), LOG_I64("pid", ch->pid));
					kill(ch->pid, SIGKILL);
				}
				killed = true;
			}
			launch_wait(l, killed ? 1000 : (int)(deadline - now));
			launch_read_signals(l, &stop_requests);
		}
	}
}

int main(int argc, char **argv)
{
	static struct launcher l = { .member_lock_fd = -1, .region_fd = -1 };
	struct shm_region *region = NULL;
	sigset_t set;
	int status, rc;

	if (getenv(CORRUPT_MONITOR_ENV))
		return corrupt_monitor_main(argc, argv);
	if (getenv(COMPACTOR_ENV))
		return compactor_main(argc, argv);

	/* signals are read from a signalfd; blocked from the start so that
	 * none is lost, and children unblock them before exec. SIGHUP is
	 * not among them when it was ignored at start (nohup), as it then
	 * stays ignored in etcd (Go's runtime leaves it so) */
	config_stop_signals(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = config_load(&l.cfg, CONFIG_PROG_LAUNCHER, argc, argv, &status);
	if (rc)
		return status;
	log_set_name("cetcd");
	l.argc = argc;
	l.argv = argv;
	l.self = getpid();
	status = 1;

	log_info("starting cetcd", LOG_STR("cetcd-version", CETCD_VERSION),
		 LOG_STR("etcd-api-version", CETCD_ETCD_API_VERSION), LOG_STR("name", l.cfg.name),
		 LOG_STR("data-dir", l.cfg.data_dir), LOG_STR("runtime-dir", l.cfg.runtime_dir),
		 LOG_U64("gateways", l.cfg.gateways), LOG_I64("pid", l.self));

	if (!l.cfg.prepare_only && launch_find_bindir(&l))
		goto out_free_config;
	if (launch_prepare_dirs(&l.cfg))
		goto out_free_config;
	if (launch_lock_member(&l.cfg, &l.member_lock_fd))
		goto out_free_config;
	if (l.cfg.experimental_initial_corrupt_check && corrupt_initial_check(&l.cfg))
		goto out_unlock;
	if (l.cfg.prepare_only) {
		if (launch_runtime_dir(&l.cfg) || launch_prepare_region(&l.cfg, &region))
			goto out_unlock;
		log_info("prepared the member (data dir, runtime dir, region); exiting as --prepare-only asks");
		status = 0;
		goto out_detach;
	}
	if (launch_create_region(&l.cfg, &region))
		goto out_unlock;
	l.region_fd = shm_region_fd(region);
	l.region = region;
	l.notify_ready = getenv("NOTIFY_SOCKET") != NULL;
	l.sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (l.sfd < 0) {
		log_error("cannot watch signals", LOG_ERRNO(-errno));
		goto out_detach;
	}
	if (launch_plan(&l)) {
		log_error("out of memory");
		goto out_close_sfd;
	}

	launch_supervise(&l);
	config_daemon_stopping();
	launch_stop(&l);
	launch_close_unix_fds(&l);
	status = l.exit_status;
	log_info("stopped cetcd", LOG_I64("exit-code", status));

	free(l.children);
out_close_sfd:
	close(l.sfd);
out_detach:
	shm_region_detach(region);
out_unlock:
	close(l.member_lock_fd);
out_free_config:
	config_free(&l.cfg);
	return status;
}
