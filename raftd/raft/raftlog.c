/*
 * The in-memory Raft log (see raftlog.h). Entries live in one array,
 * ents[i] holding index snap_index + 1 + i; each entry's data is a block
 * of its own, owned by the log.
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
		raft_entry_free_data(&l->ents[i]);
	}
	l->n = from;
}

void raftlog_free(struct raftlog *l)
{
	log_truncate_at(l, 0);
	raftd_free(l->ents);
	l->ents = NULL;
	l->cap = 0;
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
	raftlog_free(l);
	raftlog_init(l, snap_index, snap_term);
	l->ents = ents;
	l->n = l->cap = n;
	for (size_t i = 0; i < n; i++)
		l->bytes += raftlog_entry_bytes(&ents[i]);
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

static int log_reserve(struct raftlog *l, size_t more)
{
	return raftd_reserve((void **)&l->ents, &l->cap, l->n + more, sizeof(*l->ents), 64);
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
		if (ents[i].len) {
			d->data = raftd_malloc(ents[i].len);
			if (!d->data)
				goto out_undo;
			memcpy(d->data, ents[i].data, ents[i].len);
		}
		l->bytes += raftlog_entry_bytes(d);
	}
	l->n += n;
	return 0;

out_undo:
	while (i--) {
		l->bytes -= raftlog_entry_bytes(&l->ents[l->n + i]);
		raft_entry_free_data(&l->ents[l->n + i]);
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
		raft_entry_free_data(&l->ents[i]);
	}
	memmove(l->ents, l->ents + drop, (l->n - drop) * sizeof(*l->ents));
	l->n -= drop;
	/* a log that was long (a restart's replay, a follower away) gives
	 * its array back once it is short again */
	if (l->cap > 1024 && l->n < l->cap / 4) {
		size_t cap = l->n * 2 > 64 ? l->n * 2 : 64;
		struct raft_entry *e = raftd_realloc(l->ents, cap * sizeof(*l->ents));
		if (e) {
			l->ents = e;
			l->cap = cap;
		}
	}
	l->snap_index = index;
	l->snap_term = term;
}

void raftlog_reset(struct raftlog *l, uint64_t index, uint64_t term)
{
	log_truncate_at(l, 0);
	l->snap_index = index;
	l->snap_term = term;
	l->persisting = l->stabled = l->committed = l->applying = index;
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
