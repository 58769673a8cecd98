/* Committed entries to stored, and replay when stored restarts (see
 * feed.h). */
#include "raftd/feed.h"

#include <errno.h>
#include <string.h>

#include "base/log/log.h"
#include "shm/msg.h"
#include "shm/ring.h"

void feed_init(struct feed *f, struct ring *ring, const struct status_stored *st)
{
	memset(f, 0, sizeof(*f));
	f->ring = ring;
	f->epoch = st->epoch;
	f->durable = st->durable_index;
	/* Not after its applied index, even while stored runs: a stored that
	 * restarted keeps the applied index of the root it holds published
	 * (its predecessor's) until it has replayed that far, and takes
	 * entries only from its own applied index on; what it already
	 * applied comes again as duplicates, which it skips. */
	f->next = st->durable_index + 1;
}

uint64_t feed_start_after(const struct feed *f)
{
	return f->next - 1;
}

void feed_skip_to(struct feed *f, uint64_t index)
{
	if (f->next <= index)
		f->next = index + 1;
}

void feed_handed(struct feed *f, uint64_t index)
{
	if (index > f->handed)
		f->handed = index;
}

int feed_install(struct feed *f, uint64_t index, uint64_t term, const char *path)
{
	size_t n = strlen(path);
	if (n >= sizeof(f->install_path))
		return -ENAMETOOLONG;
	memcpy(f->install_path, path, n + 1);
	f->install_active = true;
	f->install_pushed = false;
	f->install_index = index;
	f->install_term = term;
	if (f->next <= index)
		f->next = index + 1;
	feed_handed(f, index);
	f->stalled = false;
	return 0;
}

void feed_install_hold(struct feed *f)
{
	f->install_held = true;
}

void feed_install_release(struct feed *f)
{
	f->install_held = false;
}

/* After stored's state changed: whether the install is still to do. */
static void feed_install_check(struct feed *f)
{
	if (!f->install_active || f->epoch == 0)
		return;
	if (f->durable >= f->install_index) {
		f->install_active = false;
		return;
	}
	if (f->next <= f->install_index + 1 && f->install_pushed) {
		/* stored lost it (restarted before its durable index got
		 * there): the install goes again, then what follows it */
		log_info("stored restarted before the received snapshot was durable; installing it again",
			 LOG_U64("snapshot-index", f->install_index),
			 LOG_U64("stored-durable-index", f->durable));
		f->install_pushed = false;
	}
	if (f->next <= f->install_index)
		f->next = f->install_index + 1;
}

bool feed_observe(struct feed *f, const struct status_stored *st)
{
	f->durable = st->durable_index;
	if (st->epoch == f->epoch) {
		if (f->install_active && f->durable >= f->install_index)
			f->install_active = false;
		return false;
	}
	f->epoch = st->epoch;
	if (st->epoch == 0)
		return false;
	log_info("stored restarted; replaying committed entries after its durable index",
		 LOG_U64("stored-epoch", st->epoch), LOG_U64("from-index", st->durable_index + 1),
		 LOG_U64("was-at-index", f->next), LOG_U64("committed-index", f->handed));
	f->next = st->durable_index + 1;
	f->stalled = false;
	f->replays++;
	feed_install_check(f);
	return true;
}

bool feed_pending(const struct feed *f)
{
	if (f->install_active && !f->install_pushed)
		return f->epoch != 0 && !f->install_held;
	return !f->stalled && f->next <= f->handed;
}

uint64_t feed_keep_from(const struct feed *f)
{
	return f->durable + 1 < f->next ? f->durable + 1 : f->next;
}

/* Logs once why the feed cannot go on. */
static void feed_stall(struct feed *f, const char *why, const struct raftlog *log)
{
	if (f->stalled)
		return;
	f->stalled = true;
	log_error(why, LOG_U64("index", f->next),
		  LOG_U64("log-first-index", raftlog_first_index(log)),
		  LOG_U64("log-last-index", raftlog_last_index(log)),
		  LOG_U64("ring-max-record", ring_max_record(f->ring)));
}

/* Pushes the MSG_SNAPSHOT_INSTALL record. 0, -EAGAIN (ring full), -EIO. */
static int feed_push_install(struct feed *f)
{
	size_t plen = strlen(f->install_path);
	struct msg_snapshot_install h = { .index = f->install_index, .term = f->install_term,
					  .path_len = (uint32_t)plen };
	uint32_t len = (uint32_t)(sizeof(h) + plen);
	void *p;
	int rc = ring_reserve(f->ring, len, &p);
	if (rc)
		return rc == -EAGAIN ? rc : -EIO;
	memcpy(p, &h, sizeof(h));
	memcpy((uint8_t *)p + sizeof(h), f->install_path, plen);
	rc = ring_commit(f->ring, MSG_SNAPSHOT_INSTALL, len);
	if (rc)
		return -EIO;
	f->wake_due |= ring_publish_quiet(f->ring);
	f->install_pushed = true;
	log_info("handed stored a received snapshot to install", LOG_STR("path", f->install_path),
		 LOG_U64("snapshot-index", f->install_index));
	return 0;
}

void feed_wake(struct feed *f)
{
	if (!f->wake_due)
		return;
	f->wake_due = false;
	ring_wake_consumer(f->ring);
}

int feed_pump(struct feed *f, const struct raftlog *log, unsigned max_records)
{
	unsigned n = 0;
	int rc = 0;

	f->blocked = false;
	if (f->install_active && !f->install_pushed) {
		if (f->epoch == 0 || f->install_held)
			return 0; /* stored's state is not known yet, or the
				   * snapshot is not durable here yet */
		rc = feed_push_install(f);
		if (rc == -EAGAIN) {
			f->blocked = true;
			f->full++;
			return 0;
		}
		if (rc)
			return rc == -EIO || ring_has_failed(f->ring) ? -EIO : 0;
		n++;
	}
	while (!f->stalled && f->next <= f->handed && n < max_records) {
		const struct raft_entry *e = raftlog_entry(log, f->next);
		if (!e) {
			feed_stall(f, "stored needs a committed entry this member's log no longer holds; restore the member from a snapshot", log);
			break;
		}
		if (e->len && !e->data) {
			/* data leaves memory only below feed_keep_from */
			feed_stall(f, "stored needs a committed entry whose data this member's log keeps only in the WAL; restart the member", log);
			break;
		}
		struct msg_committed h = {
			.index = e->index, .term = e->term, .entry_type = e->type, .data_len = e->len,
		};
		uint64_t len = sizeof(h) + (uint64_t)e->len;
		void *p;
		rc = len > ring_max_record(f->ring) ? -EMSGSIZE :
		     ring_reserve(f->ring, (uint32_t)len, &p);
		if (rc == -EAGAIN) {
			f->blocked = true;
			f->full++;
			rc = 0;
			break;
		}
		if (rc == -EMSGSIZE) {
			feed_stall(f, "a committed entry is larger than a ring record; raise --max-request-bytes to at least the largest entry", log);
			rc = 0;
			break;
		}
		if (rc)
			break;
		memcpy(p, &h, sizeof(h));
		if (e->len)
			memcpy((uint8_t *)p + sizeof(h), e->data, e->len);
		rc = ring_commit(f->ring, MSG_COMMITTED, (uint32_t)len);
		if (rc)
			break;
		f->next++;
		n++;
	}
	if (n) {
		f->wake_due |= ring_publish_quiet(f->ring);
		f->pushed += n;
	}
	if (rc == -EIO || ring_has_failed(f->ring))
		return -EIO;
	return (int)n;
}
