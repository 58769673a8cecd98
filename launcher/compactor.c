/*
 * The auto-compactor: etcd 3.4's etcdserver/api/v3compactor (periodic.go,
 * revision.go), with its schedule and its log lines.
 *
 * Where it runs: a process of the member beside the others, the launcher's
 * program again (COMPACTOR_ENV set), started, restarted and stopped like
 * the corruption monitor (launcher/monitor.c), or by its own systemd unit.
 * A compaction is a client's Compact in etcd too (the compactor calls the
 * server's Compact, a Raft proposal): here it is KV.Compact on this
 * member's own gatewayd over the local socket, which proposes it through
 * raftd as it does a client's, so the compaction takes the one path that
 * is tested with etcd's clients, is applied by every member's stored in
 * Raft order, and waits for its result. Leadership and the store's
 * revision are read from the region (raftd's and stored's status), which
 * is what etcd's compactor asks its server (Pause/Resume on leadership
 * changes, Rev()). Neither raftd (which knows the leader but not the
 * revision, and whose loop must not wait on a proposal's result) nor the
 * launcher's supervision loop (which must not block on a call) is a better
 * home.
 */
#include "launcher/compactor.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/clock/clock.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "config/config.h"
#include "launcher/grpcc.h"
#include "base/log/log.h"
#include "shm/region.h"
#include "shm/status.h"

#define HOUR_NS (3600LL * 1000000000)
/* etcd's retryDivisor */
#define COMPACTOR_DIVISOR 10

int compactor_init(struct compactor *c, const char *mode, int64_t retention, int64_t now_ns,
		   int64_t revision_interval_ns)
{
	memset(c, 0, sizeof(*c));
	if (retention <= 0)
		return -EINVAL;
	c->retention = retention;
	if (strcmp(mode, "revision") == 0) {
		if (revision_interval_ns <= 0)
			return -EINVAL;
		c->interval_ns = revision_interval_ns;
		return 0;
	}
	if (strcmp(mode, "periodic") != 0)
		return -EINVAL;
	c->periodic = true;
	c->compact_every_ns = retention > HOUR_NS ? HOUR_NS : retention;
	c->interval_ns = c->compact_every_ns / COMPACTOR_DIVISOR;
	if (c->interval_ns == 0)
		return -EINVAL;
	c->base_ns = retention;
	c->last_success_ns = now_ns;
	c->keep = (size_t)(retention / c->interval_ns) + 1;
	c->revs = calloc(c->keep, sizeof(*c->revs));
	return c->revs ? 0 : -ENOMEM;
}

void compactor_free(struct compactor *c)
{
	free(c->revs);
	c->revs = NULL;
}

void compactor_sample(struct compactor *c, int64_t rev)
{
	if (!c->periodic)
		return;
	if (c->nrevs == c->keep) {
		/* the oldest goes: revs[0] stays the revision of P ago */
		memmove(c->revs, c->revs + 1, (c->keep - 1) * sizeof(*c->revs));
		c->nrevs--;
	}
	c->revs[c->nrevs++] = rev;
}

int64_t compactor_due(struct compactor *c, int64_t now_ns, bool leading, int64_t rev)
{
	if (!leading)
		return 0;
	if (!c->periodic) {
		int64_t at = rev - c->retention;
		return at <= 0 || at == c->prev ? 0 : at;
	}
	if (now_ns - c->last_success_ns < c->base_ns || c->nrevs == 0)
		return 0;
	/* after the first full retention, every min(P, 1h) */
	c->base_ns = c->compact_every_ns;
	return c->revs[0];
}

void compactor_done(struct compactor *c, int64_t now_ns, int64_t rev, bool ok)
{
	if (!ok)
		return;
	if (c->periodic)
		c->last_success_ns = now_ns;
	else
		c->prev = rev;
}

/* ---- the process ---- */

static void compactor_duration(int64_t ns, char out[32])
{
	log_duration_text((uint64_t)(ns < 0 ? 0 : ns) / 1000000, out);
}

/* KV.Compact at rev on this member's gatewayd: 0, or an error with its
 * text in text. A revision compacted already counts as done, as in etcd. */
static int compactor_compact(const struct cetcd_config *cfg, int64_t rev, int timeout_ms,
			     char *text, size_t cap)
{
	Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	uint8_t *resp = NULL;
	size_t len = 0;

	req.revision = rev;
	text[0] = '\0';
	int rc = grpcc_member_unary(cfg, "/etcdserverpb.KV/Compact", &req.base, timeout_ms, &resp,
				    &len, text, cap);
	free(resp);
	if (rc > 0 && strstr(text, "required revision has been compacted"))
		return 0;
	if (rc < 0)
		snprintf(text, cap, "%s", strerror(-rc));
	return rc;
}

/* One round's compaction, logged as etcd's compactor logs it. */
static void compactor_run_once(struct compactor *c, const struct cetcd_config *cfg, int64_t rev,
			       int timeout_ms)
{
	char period[32], took[32], retry[32], text[256];
	int64_t start = clock_now_ns();

	compactor_duration(c->retention, period);
	compactor_duration(c->interval_ns, retry);
	if (c->periodic)
		log_info("starting auto periodic compaction", LOG_I64("revision", rev),
			 LOG_STR("compact-period", period));
	else
		log_info("starting auto revision compaction", LOG_I64("revision", rev),
			 LOG_I64("revision-compaction-retention", c->retention));
	int rc = compactor_compact(cfg, rev, timeout_ms, text, sizeof(text));
	int64_t now = clock_now_ns();
	/* etcd's periodic "took" runs from the last success */
	compactor_duration(now - (c->periodic ? c->last_success_ns : start), took);
	if (rc == 0 && c->periodic)
		log_info("completed auto periodic compaction", LOG_I64("revision", rev),
			 LOG_STR("compact-period", period), LOG_STR("took", took));
	else if (rc == 0)
		log_info("completed auto revision compaction", LOG_I64("revision", rev),
			 LOG_I64("revision-compaction-retention", c->retention),
			 LOG_STR("took", took));
	else if (c->periodic)
		log_warn("failed auto periodic compaction", LOG_I64("revision", rev),
			 LOG_STR("compact-period", period), LOG_STR("retry-interval", retry),
			 LOG_STR("error", text));
	else
		log_warn("failed auto revision compaction", LOG_I64("revision", rev),
			 LOG_I64("revision-compaction-retention", c->retention),
			 LOG_STR("retry-interval", retry), LOG_STR("error", text));
	compactor_done(c, now, rev, rc == 0);
}

/* The revision mode's interval: 5 minutes, or the test-only override. */
static int64_t compactor_revision_interval(void)
{
	const char *t = getenv(COMPACTOR_TEST_INTERVAL_ENV);
	char *end;
	if (!t || !*t)
		return COMPACTOR_REVISION_INTERVAL_NS;
	long long ms = strtoll(t, &end, 10);
	if (*end || ms <= 0) {
		log_warn("ignoring a malformed test-only interval", LOG_STR("variable", COMPACTOR_TEST_INTERVAL_ENV),
			 LOG_STR("value", t));
		return COMPACTOR_REVISION_INTERVAL_NS;
	}
	log_warn("revision compaction interval set for tests only",
		 LOG_STR("variable", COMPACTOR_TEST_INTERVAL_ENV), LOG_I64("interval-ms", ms));
	return ms * 1000000;
}

int compactor_main(int argc, char **argv)
{
	static struct cetcd_config cfg;
	struct shm_region *r;
	struct signalfd_siginfo si;
	struct compactor c;
	sigset_t set;
	int status, sfd = -1;

	if (config_daemon_start(&cfg, CONFIG_PROG_LAUNCHER, COMPACTOR_NAME, argc, argv, &r, &status))
		return status;
	status = CONFIG_EXIT_FATAL;
	if (cfg.auto_compaction_retention_value == 0) {
		log_info("auto compaction is off (--auto-compaction-retention is 0)");
		status = 0;
		goto out;
	}
	if (compactor_init(&c, cfg.auto_compaction_mode, cfg.auto_compaction_retention_value,
			   clock_now_ns(), compactor_revision_interval())) {
		log_error("cannot start the auto-compactor",
			  LOG_STR("auto-compaction-mode", cfg.auto_compaction_mode),
			  LOG_STR("auto-compaction-retention", cfg.auto_compaction_retention));
		goto out;
	}
	config_stop_signals(&set);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sfd < 0) {
		log_error("cannot start the auto-compactor", LOG_ERRNO(-errno));
		goto out_compactor;
	}
	int timeout_ms = (int)config_request_timeout_ms(&cfg);
	char every[32];
	compactor_duration(c.interval_ns, every);
	log_info("enabled auto compaction", LOG_STR("auto-compaction-mode", cfg.auto_compaction_mode),
		 LOG_STR("auto-compaction-retention", cfg.auto_compaction_retention),
		 LOG_STR("interval", every));
	for (;;) {
		struct status_raftd rs;
		struct status_stored ss;
		bool have = status_stored_read(r, &ss) == 0;
		if (have)
			compactor_sample(&c, (int64_t)ss.revision);
		int64_t deadline = clock_now_ns() + c.interval_ns;
		bool stop = false;
		for (int64_t left; !stop && (left = deadline - clock_now_ns()) > 0;) {
			int64_t ms = (left + 999999) / 1000000;
			struct pollfd pfd = { .fd = sfd, .events = POLLIN };
			int n = poll(&pfd, 1, ms > INT32_MAX ? INT32_MAX : (int)ms);
			stop = n > 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si);
		}
		if (stop)
			break;
		bool leading = status_raftd_read(r, &rs) == 0 && rs.is_leader;
		have = status_stored_read(r, &ss) == 0;
		int64_t rev = compactor_due(&c, clock_now_ns(), leading && have,
					    have ? (int64_t)ss.revision : 0);
		if (rev > 0)
			compactor_run_once(&c, &cfg, rev, timeout_ms);
	}
	status = 0;
	close(sfd);
out_compactor:
	compactor_free(&c);
out:
	shm_region_detach(r);
	config_free(&cfg);
	return status;
}
