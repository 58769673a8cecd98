/* The start-up every daemon shares: the stop signals, the flags, the log
 * name, and the member's region (see config.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "config/config_int.h"

#include "base/diskio/diskio.h"
#include "base/log/errmsg.h"
#include "shm/region.h"

/* ---- daemons ---- */

void config_stop_signals(sigset_t *set)
{
	struct sigaction old;

	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	if (sigaction(SIGHUP, NULL, &old) != 0 || old.sa_handler != SIG_IGN)
		sigaddset(set, SIGHUP);
}

bool config_stop_pending(void)
{
	sigset_t stop, pending;

	config_stop_signals(&stop);
	if (sigpending(&pending))
		return false;
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&stop, sig) == 1 && sigismember(&pending, sig) == 1)
			return true;
	return false;
}

int config_daemon_start(struct cetcd_config *c, enum config_program prog, const char *log_name,
			int argc, char *const argv[], struct shm_region **region,
			int *exit_status)
{
	char path[PATH_MAX];
	const char *inherited;
	sigset_t set;
	int rc;

	config_stop_signals(&set);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = config_load(c, prog, argc, argv, exit_status);
	if (rc)
		return rc;
	if (prog == CONFIG_PROG_GATEWAYD && c->gateway_index >= 0) {
		char name[64];
		snprintf(name, sizeof(name), "%s-%lld", log_name, (long long)c->gateway_index);
		log_set_name(name);
	} else {
		log_set_name(log_name);
	}
	if (c->unsafe_no_fsync && (prog == CONFIG_PROG_RAFTD || prog == CONFIG_PROG_STORED)) {
		diskio_set_unsafe_no_sync(true);
		log_warn("--unsafe-no-fsync is set: the WAL and the db are written without fsync; a crash of the machine can lose acknowledged writes");
	}
	rc = config_region_path(c, path, sizeof(path));
	if (rc) {
		log_error("runtime dir path is too long", LOG_STR("runtime-dir", c->runtime_dir));
		goto out_fatal;
	}
	inherited = getenv(CONFIG_REGION_FD_ENV);
	if (inherited) {
		/* started by the launcher: the region has no name, only the
		 * descriptor this process inherited */
		char *end;
		long fd;
		errno = 0;
		fd = strtol(inherited, &end, 10);
		rc = errno || *end || end == inherited || fd < 0 || fd > INT_MAX ? -EBADF
			: shm_region_attach_fd((int)fd, region);
		unsetenv(CONFIG_REGION_FD_ENV);
		snprintf(path, sizeof(path), "descriptor %s from the launcher", inherited);
	} else {
		/* -EAGAIN: a launcher is creating the region right now */
		for (int tries = 0; tries < 100; tries++) {
			rc = shm_region_attach(path, region);
			if (rc != -EAGAIN)
				break;
			usleep(50 * 1000);
		}
	}
	switch (rc) {
	case 0:
		log_info("attached to the member region", LOG_STR("region", path),
			 LOG_I64("pid", getpid()));
		return 0;
	case -ENOENT:
		log_error("no member region; start the cetcd launcher (or 'cetcd --prepare-only', cetcd-region.service) with the same --data-dir and --runtime-dir first",
			  LOG_STR("region", path));
		break;
	case -EPROTO:
		log_error("refusing to attach to the member region: it was made by another cetcd version; stop every process of the member and start it again with one version",
			  LOG_STR("region", path), LOG_STR("reason", errmsg_get(rc)));
		break;
	default:
		log_error("cannot attach to the member region", LOG_STR("region", path),
			  LOG_STR("reason", errmsg_get(rc)), LOG_ERRNO(rc));
		break;
	}
out_fatal:
	config_free(c);
	*exit_status = CONFIG_EXIT_FATAL;
	return rc ? rc : -EINVAL;
}

int config_region_path(const struct cetcd_config *c, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/region", c->runtime_dir);
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

uint64_t config_request_timeout_ms(const struct cetcd_config *c)
{
	return 5000 + 2 * (uint64_t)c->election_timeout_ms;
}

void config_daemon_ready(void)
{
	int rc = sd_notify(0, "READY=1");

	if (rc < 0)
		log_warn("cannot tell the service manager that the daemon is ready",
			 LOG_ERRNO(rc));
}

void config_daemon_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1");
}

void config_watchdog_init(struct config_watchdog *w, int64_t now_ns)
{
	uint64_t usec = 0;

	/* > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is us */
	if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) {
		*w = (struct config_watchdog){ 0 };
		return;
	}
	w->every_ns = (int64_t)(usec / 2) * 1000;
	if (w->every_ns < 1000000)
		w->every_ns = 1000000;
	w->next_ns = now_ns;
	log_info("feeding systemd's watchdog", LOG_U64("every-ms", (uint64_t)w->every_ns / 1000000));
}

int config_watchdog_turn(struct config_watchdog *w, int64_t now_ns)
{
	if (!w->every_ns)
		return -1;
	if (now_ns >= w->next_ns) {
		int rc = sd_notify(0, "WATCHDOG=1");
		if (rc < 0)
			log_warn("cannot feed systemd's watchdog", LOG_ERRNO(rc));
		w->next_ns = now_ns + w->every_ns;
	}
	int64_t left = (w->next_ns - now_ns + 999999) / 1000000;
	return left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left;
}
