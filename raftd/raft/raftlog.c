/*
 * The in-memory Raft log (see raftlog.h). Entries live in one array,
 * ents[i] holding index snap_index + 1 + i, their places in the WAL in a
 * second one beside it (locs[i]); each entry's data is a block of its
 * own, owned by the log, or on disk only (raftlog_evict).
 */
#include "raftd/raft/raftlog.h"

#include <errno.h>
#include <string.h>

#include "raftd/alloc.h"

void raftlog_init(struct raftlog *l, uint64_t snap_index, uint64_t snap_term)
{
	memset(l, 0, sizeof(*l));
	l->snap_index = snap_index;
	l->snap_term = snap_term;
	l->persisting = l->stabled = l->committed = l->applying = snap_index;
	l->evicted_to = snap_index;
}

/* Frees e's data, as long as the log counts it. */
static void entry_drop_data(struct raftlog *l, struct raft_entry *e)
{
	if (e->data)
		l->resident -= e->len;
	raftd_free(e->data);
	e->data = NULL;
}

void raft_entry_free_data(struct raft_entry *e)
{
	raftd_free(e->data);
	e->data = NULL;
	e->len = 0;
}

/* Frees the data of ents[from..n) and forgets them. */
static void log_truncate_at(struct raftlog *l, size_t from)
{
	for (size_t i = from; i < l->n; i++) {
		l->bytes -= raftlog_entry_bytes(&l->ents[i]);
		entry_drop_data(l, &l->ents[i]);
		l->ents[i].len = 0;
	}
	l->n = from;
}

void raftlog_free(struct raftlog *l)
{
	log_truncate_at(l, 0);
	raftd_free(l->ents);
	raftd_free(l->locs);
	raftd_free(l->loaded);
	l->ents = NULL;
	l->locs = NULL;
	l->loaded = NULL;
	l->cap = 0;
	l->n_loaded = l->cap_loaded = 0;
}

int raftlog_restore(struct raftlog *l, uint64_t snap_index, uint64_t snap_term,
		    struct raft_entry *ents, size_t n)
{
	uint64_t prev_term = snap_term;
	for (size_t i = 0; i < n; i++) {
		if (ents[i].index != snap_index + 1 + i || ents[i].term < prev_term)
			return -EINVAL;
		prev_term = ents[i].term;
	}
	struct raftlog_loc *locs = raftd_calloc(n ? n : 1, sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	raftlog_load_fn load = l->load;
	void *load_ctx = l->load_ctx;
	raftlog_free(l);
	raftlog_init(l, snap_index, snap_term);
	l->load = load;
	l->load_ctx = load_ctx;
	l->ents = ents;
	l->locs = locs;
	l->n = l->cap = n;
	for (size_t i = 0; i < n; i++) {
		l->bytes += raftlog_entry_bytes(&ents[i]);
		if (ents[i].data)
			l->resident += ents[i].len;
	}
	l->persisting = l->stabled = raftlog_last_index(l);
	return 0;
}

const struct raft_entry *raftlog_entry(const struct raftlog *l, uint64_t index)
{
	if (index <= l->snap_index || index > raftlog_last_index(l))
		return NULL;
	return &l->ents[index - l->snap_index - 1];
}

uint64_t raftlog_term(const struct raftlog *l, uint64_t index)
{
	if (index == l->snap_index)
		return l->snap_term;
	const struct raft_entry *e = raftlog_entry(l, index);
	return e ? e->term : 0;
}

bool raftlog_is_up_to_date(const struct raftlog *l, uint64_t last_index,
			   uint64_t last_term)
{
	uint64_t my_term = raftlog_last_term(l);
	return last_term > my_term ||
	       (last_term == my_term && last_index >= raftlog_last_index(l));
}

/* Room for more entries in both arrays. */
static int log_reserve(struct raftlog *l, size_t more)
{
	if (l->n + more <= l->cap)
		return 0;
	size_t cap = l->cap * 2 > 64 ? l->cap * 2 : 64;
	if (cap < l->n + more)
		cap = l->n + more;
	struct raft_entry *e = raftd_realloc(l->ents, cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	l->ents = e; /* bigger than cap says until both have grown */
	struct raftlog_loc *c = raftd_realloc(l->locs, cap * sizeof(*c));
	if (!c)
		return -ENOMEM;
	l->locs = c;
	l->cap = cap;
	return 0;
}

int raftlog_append(struct raftlog *l, const struct raft_entry *ents, size_t n)
{
	if (n == 0)
		return 0;
	if (log_reserve(l, n))
		return -ENOMEM;
	size_t i;
	for (i = 0; i < n; i++) {
		struct raft_entry *d = &l->ents[l->n + i];
		*d = ents[i];
		d->index = raftlog_last_index(l) + 1 + i;
		d->data = NULL;
		memset(&l->locs[l->n + i], 0, sizeof(l->locs[0]));
		if (ents[i].len) {
			d->data = raftd_malloc(ents[i].len);
			if (!d->data)
				goto out_undo;
			memcpy(d->data, ents[i].data, ents[i].len);
			l->resident += d->len;
		}
		l->bytes += raftlog_entry_bytes(d);
	}
	l->n += n;
	return 0;

out_undo:
	while (i--) {
		l->bytes -= raftlog_entry_bytes(&l->ents[l->n + i]);
		entry_drop_data(l, &l->ents[l->n + i]);
	}
	return -ENOMEM;
}

int raftlog_maybe_append(struct raftlog *l, uint64_t prev_index, uint64_t prev_term,
			 const struct raft_entry *ents, size_t n, bool *matched,
			 uint64_t *last_new)
{
	*matched = false;
	if (prev_index < l->snap_index) {
		/* The start is compacted here, so it was committed: skip what
		 * this log already covers. */
		uint64_t skip = l->snap_index - prev_index;
		if (skip > n) {
			*matched = true;
			*last_new = prev_index + n;
			return 0;
		}
		ents += skip;
		n -= skip;
		prev_index = l->snap_index;
		prev_term = l->snap_term;
	}
	if (prev_index > raftlog_last_index(l) || raftlog_term(l, prev_index) != prev_term)
		return 0;

	size_t i = 0;
	uint64_t last = raftlog_last_index(l);
	while (i < n && prev_index + 1 + i <= last &&
	       raftlog_term(l, prev_index + 1 + i) == ents[i].term)
		i++;
	if (i < n && prev_index + 1 + i <= last) {
		uint64_t conflict = prev_index + 1 + i;
		if (conflict <= l->committed)
			return -EPROTO;
		log_truncate_at(l, (size_t)(conflict - l->snap_index - 1));
		if (l->persisting >= conflict)
			l->persisting = conflict - 1;
		if (l->stabled >= conflict)
			l->stabled = conflict - 1;
	}
	if (i < n) {
		int rc = raftlog_append(l, ents + i, n - i);
		if (rc)
			return rc;
	}
	*matched = true;
	*last_new = prev_index + n;
	return 0;
}

void raftlog_compact(struct raftlog *l, uint64_t index)
{
	if (index > l->applying)
		index = l->applying;
	if (index > l->stabled)
		index = l->stabled;
	if (index <= l->snap_index)
		return;
	size_t drop = (size_t)(index - l->snap_index);
	uint64_t term = raftlog_term(l, index);
	for (size_t i = 0; i < drop; i++) {
		l->bytes -= raftlog_entry_bytes(&l->ents[i]);
		entry_drop_data(l, &l->ents[i]);
	}
	memmove(l->ents, l->ents + drop, (l->n - drop) * sizeof(*l->ents));
	memmove(l->locs, l->locs + drop, (l->n - drop) * sizeof(*l->locs));
	l->n -= drop;
	/* a log that was long (a restart's replay, a follower away) gives
	 * its arrays back once it is short again */
	if (l->cap > 1024 && l->n < l->cap / 4) {
		size_t cap = l->n * 2 > 64 ? l->n * 2 : 64;
		struct raft_entry *e = raftd_realloc(l->ents, cap * sizeof(*l->ents));
		if (e) {
			l->ents = e;
			struct raftlog_loc *c = raftd_realloc(l->locs, cap * sizeof(*l->locs));
			if (c)
				l->locs = c; /* else it stays longer */
			l->cap = cap;
		}
	}
	l->snap_index = index;
	l->snap_term = term;
	if (l->evicted_to < index)
		l->evicted_to = index;
}

void raftlog_reset(struct raftlog *l, uint64_t index, uint64_t term)
{
	log_truncate_at(l, 0);
	l->snap_index = index;
	l->snap_term = term;
	l->persisting = l->stabled = l->committed = l->applying = index;
	l->evicted_to = index;
	l->n_loaded = 0;
	l->loaded_bytes = 0;
}

const struct raft_entry *raftlog_slice(const struct raftlog *l, uint64_t lo,
				       uint64_t hi, size_t *n)
{
	if (hi <= lo || lo < l->snap_index || hi > raftlog_last_index(l)) {
		*n = 0;
		return NULL;
	}
	*n = (size_t)(hi - lo);
	return &l->ents[lo - l->snap_index];
}

/* ---- entry data on disk only ---- */

void raftlog_set_loader(struct raftlog *l, raftlog_load_fn load, void *ctx)
{
	l->load = load;
	l->load_ctx = ctx;
}

struct raftlog_loc *raftlog_locs_from(struct raftlog *l, uint64_t index)
{
	if (index <= l->snap_index || index > raftlog_last_index(l))
		return NULL;
	return &l->locs[index - l->snap_index - 1];
}

void raftlog_set_locs(struct raftlog *l, uint64_t from, const struct raftlog_loc *locs,
		      size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct raftlog_loc *at = raftlog_locs_from(l, from + i);
		if (at)
			*at = locs[i];
	}
}

void raftlog_evict(struct raftlog *l, uint64_t hi, uint64_t keep)
{
	if (!l->load || l->resident <= keep)
		return;
	if (hi > l->applying)
		hi = l->applying;
	if (hi > l->stabled)
		hi = l->stabled;
	if (hi > raftlog_last_index(l))
		hi = raftlog_last_index(l);
	uint64_t goal = keep - keep / 4;
	uint64_t at = l->evicted_to;
	while (at < hi && l->resident > goal) {
		at++;
		size_t i = (size_t)(at - l->snap_index - 1);
		if (l->locs[i].off)
			entry_drop_data(l, &l->ents[i]);
	}
	l->evicted_to = at;
}

int raftlog_load(struct raftlog *l, uint64_t lo, uint64_t hi)
{
	if (lo < l->snap_index)
		lo = l->snap_index;
	if (hi > l->evicted_to)
		hi = l->evicted_to;
	for (uint64_t at = lo + 1; at <= hi; at++) {
		size_t i = (size_t)(at - l->snap_index - 1);
		struct raft_entry *e = &l->ents[i];
		if (e->data || !e->len || !l->locs[i].off)
			continue;
		if (l->loaded_bytes >= RAFTLOG_LOAD_MAX_BYTES)
			return -EAGAIN;
		if (raftd_reserve((void **)&l->loaded, &l->cap_loaded, l->n_loaded + 1,
				  sizeof(*l->loaded), 64))
			return -ENOMEM;
		uint8_t *data = NULL;
		int rc = l->load(l->load_ctx, e, &l->locs[i], &data);
		if (rc) {
			/* out of memory is tried again at the next ready */
			if (rc != -ENOMEM && l->load_failed < at)
				l->load_failed = at;
			return rc;
		}
		e->data = data;
		l->resident += e->len;
		l->loaded_bytes += e->len;
		l->loaded[l->n_loaded++] = at;
	}
	return 0;
}

void raftlog_unload(struct raftlog *l)
{
	for (size_t k = 0; k < l->n_loaded; k++) {
		uint64_t at = l->loaded[k];
		if (at > l->snap_index && at <= l->evicted_to && at <= raftlog_last_index(l))
			entry_drop_data(l, &l->ents[at - l->snap_index - 1]);
	}
	l->n_loaded = 0;
	l->loaded_bytes = 0;
}

uint64_t raftlog_take_load_failure(struct raftlog *l)
{
	uint64_t at = l->load_failed;
	l->load_failed = 0;
	return at;
}
