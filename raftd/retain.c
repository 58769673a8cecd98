/* The rule of how much applied log raftd keeps (see retain.h). */
#include "raftd/retain.h"

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t retain_compact_to(const struct raftlog *log, const struct retain *r)
{
	uint64_t base = log->snap_index;
	if (!r->keep_from)
		return base;
	/* the highest index that may go at all */
	uint64_t hi = min_u64(min_u64(r->keep_from - 1, log->applying), log->stabled);
	if (hi <= base + RETAIN_FLOOR_ENTRIES)
		return base;
	uint64_t hard = min_u64(hi - RETAIN_FLOOR_ENTRIES, r->limit);
	if (hard <= base)
		return base;

	/* the margin, and the followers' needs within --snapshot-count */
	uint64_t want = hi > r->margin ? hi - r->margin : 0;
	if (r->followers < want) {
		uint64_t cap = want > r->max_extra ? want - r->max_extra : 0;
		want = r->followers > cap ? r->followers : cap;
	}
	want = min_u64(want, hard);

	/* the budget: drop from the front down to three quarters of it */
	if (log->bytes > r->budget) {
		uint64_t left = log->bytes, goal = r->budget - r->budget / 4;
		uint64_t at = base;
		while (at < hard && left > goal) {
			at++;
			left -= raftlog_entry_bytes(raftlog_entry(log, at));
		}
		return at > want ? at : want; /* at > base: it walked only
					       * what now goes */
	}
	/* a step: so many entries, or so many bytes by their mean size */
	uint64_t n = want > base ? want - base : 0;
	if (n >= RETAIN_STEP_ENTRIES || (log->n && n * (log->bytes / log->n) >= RETAIN_STEP_BYTES))
		return want;
	return base;
}
