/* Listeners out of descriptors back off (see accept_backoff.h). */
#include "base/sock/accept_backoff.h"

#include <errno.h>

#include "base/log/log.h"

bool accept_backoff_exhausted(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOBUFS || err == -ENOMEM;
}

/* Writes the warning unless one was written less than
 * ACCEPT_BACKOFF_LOG_NS ago; counts it suppressed then. */
static void accept_backoff_log(struct accept_backoff *b, uint64_t now_ns, int err,
			       const char *what, uint64_t pause, uint64_t conns)
{
	b->failures++;
	if (b->logged && now_ns - b->logged_ns < ACCEPT_BACKOFF_LOG_NS) {
		b->suppressed++;
		return;
	}
	if (pause)
		log_warn(what, LOG_ERRNO(err), LOG_U64("pause-ms", pause / 1000000),
			 LOG_U64("connections", conns), LOG_U64("suppressed", b->suppressed));
	else
		log_warn(what, LOG_ERRNO(err), LOG_U64("connections", conns),
			 LOG_U64("suppressed", b->suppressed));
	b->logged = true;
	b->logged_ns = now_ns;
	b->suppressed = 0;
}

uint64_t accept_backoff_fail(struct accept_backoff *b, uint64_t now_ns, int err, const char *what,
			     uint64_t conns)
{
	uint64_t pause = b->pause_ns ? b->pause_ns * 2 : ACCEPT_BACKOFF_MIN_NS;

	if (pause > ACCEPT_BACKOFF_MAX_NS)
		pause = ACCEPT_BACKOFF_MAX_NS;
	b->pause_ns = pause;
	accept_backoff_log(b, now_ns, err, what, pause, conns);
	return pause;
}

void accept_backoff_warn(struct accept_backoff *b, uint64_t now_ns, int err, const char *what,
			 uint64_t conns)
{
	accept_backoff_log(b, now_ns, err, what, 0, conns);
}

void accept_backoff_ok(struct accept_backoff *b)
{
	b->pause_ns = 0;
}
