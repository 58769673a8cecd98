/*
 * The Raft log in memory, and the two value types the Raft core and the
 * WAL share: an entry and the hard state.
 *
 * A raftlog holds the entries after a snapshot point (snap_index,
 * snap_term), in index order, with no gaps, and owns each entry's data.
 * Four marks walk along it (all only grow, except that a conflicting
 * append from a new leader pulls persisting and stabled back):
 *
 *   applying <= committed,  applying <= stabled <= persisting <= last
 *
 *   persisting  last index handed to the WAL (ready.entries)
 *   stabled     last index known durable in this member's WAL
 *   committed   last index known committed in the cluster
 *   applying    last index handed to the application (ready.committed)
 *
 * Entries go to the application only once committed and durable here.
 */
#ifndef CETCD_RAFTD_RAFTLOG_H
#define CETCD_RAFTD_RAFTLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* raftpb.EntryType */
enum raft_entry_type {
	RAFT_ENTRY_NORMAL = 0,
	RAFT_ENTRY_CONF_CHANGE = 1,
	RAFT_ENTRY_CONF_CHANGE_V2 = 2,
};

/* raftpb.Entry. Who owns data is said wherever an entry is handed over. */
struct raft_entry {
	uint64_t term;
	uint64_t index;
	uint32_t type; /* enum raft_entry_type */
	uint32_t len;  /* bytes at data */
	uint8_t *data; /* NULL when len == 0 */
};

/* raftpb.HardState: what must be durable before a vote or an append is
 * acknowledged. All zero means "nothing recorded yet". */
struct raft_hardstate {
	uint64_t term;
	uint64_t vote;
	uint64_t commit;
};

static inline bool raft_hardstate_is_empty(const struct raft_hardstate *hs)
{
	return hs->term == 0 && hs->vote == 0 && hs->commit == 0;
}

/*
 * Where an entry's record lies in this member's WAL, so that its data can
 * leave memory once applied and durable and be read back when a lagging
 * follower needs it: the segment's sequence number, the offset of the
 * record's frame in it, and the WAL's CRC chain value before the record
 * (which the record's own CRC continues, so a read-back is checked as a
 * replay checks it). off 0 means no known place (a segment's first
 * record is never an entry): the entry's data stays in memory.
 */
struct raftlog_loc {
	uint64_t seg;
	uint64_t off;
	uint32_t crc;
};

/* Reads the data of entry e (index, term, type and len set, data NULL) back
 * from where loc says: *data (raftd_malloc, e->len bytes) or a -errno. */
typedef int (*raftlog_load_fn)(void *ctx, const struct raft_entry *e,
			       const struct raftlog_loc *loc, uint8_t **data);

struct raftlog {
	struct raft_entry *ents; /* ents[0..n): indexes snap_index+1 .. last */
	struct raftlog_loc *locs; /* locs[i]: where ents[i] lies in the WAL */
	size_t n;
	size_t cap;
	uint64_t snap_index; /* the entry before ents[0] (0 for an empty start) */
	uint64_t snap_term;
	uint64_t persisting;
	uint64_t stabled;
	uint64_t committed;
	uint64_t applying;
	uint64_t bytes; /* the entries' size: raftlog_entry_bytes of each,
			 * whether its data is in memory or not */
	uint64_t resident; /* bytes of entry data held in memory */
	/* Data dropped from memory (raftlog_evict): entries in
	 * (snap_index, evicted_to] with a place in the WAL hold none, but
	 * while raftlog_load has read them back for one ready. */
	uint64_t evicted_to;
	raftlog_load_fn load;
	void *load_ctx;
	uint64_t *loaded; /* indexes read back, freed by raftlog_unload */
	size_t n_loaded;
	size_t cap_loaded;
	uint64_t loaded_bytes; /* their data */
	uint64_t load_failed; /* the highest index that could not be read
			       * back (0: none); raftlog_take_load_failure */
};

/* What one entry costs the log: its data and its slot. */
static inline uint64_t raftlog_entry_bytes(const struct raft_entry *e)
{
	return (uint64_t)e->len + sizeof(*e);
}

/* An empty log starting after (snap_index, snap_term); every mark sits at
 * snap_index. Never fails. */
void raftlog_init(struct raftlog *l, uint64_t snap_index, uint64_t snap_term);

/* Frees every entry and its data. l can be initialised again after. */
void raftlog_free(struct raftlog *l);

/* Takes ownership of ents[0..n) (allocated with raftd_malloc, each data
 * too) as the log after (snap_index, snap_term), all of it durable:
 * persisting = stabled = last. ents[i].index must be snap_index + 1 + i and
 * terms must not decrease; otherwise -EINVAL and nothing is taken. */
int raftlog_restore(struct raftlog *l, uint64_t snap_index, uint64_t snap_term,
		    struct raft_entry *ents, size_t n);

static inline uint64_t raftlog_last_index(const struct raftlog *l)
{
	return l->snap_index + l->n;
}

static inline uint64_t raftlog_first_index(const struct raftlog *l)
{
	return l->snap_index + 1;
}

/* The entry at index, or NULL outside (snap_index, last]. */
const struct raft_entry *raftlog_entry(const struct raftlog *l, uint64_t index);

/* Term of the entry at index: snap_term at snap_index, 0 above last or
 * below snap_index (unknown). */
uint64_t raftlog_term(const struct raftlog *l, uint64_t index);

static inline uint64_t raftlog_last_term(const struct raftlog *l)
{
	return raftlog_term(l, raftlog_last_index(l));
}

/* Whether a log ending at (last_index, last_term) is at least as
 * up to date as this one (Raft's election restriction). */
bool raftlog_is_up_to_date(const struct raftlog *l, uint64_t last_index,
			   uint64_t last_term);

/* Appends copies of ents[0..n) (their data copied) after last, with the
 * indexes last + 1 ... (whatever ents[i].index says); terms and types are
 * copied. 0 or -ENOMEM (then nothing was appended). */
int raftlog_append(struct raftlog *l, const struct raft_entry *ents, size_t n);

/*
 * A follower's append: if the entry at prev_index has prev_term, keeps
 * what agrees with ents[0..n) (indexes prev_index + 1 ...), drops the
 * first conflicting entry and all after it, and appends the rest.
 * Refuses (*matched = false) when prev_index is beyond last or its term
 * differs. Entries at or below committed never conflict (if they would,
 * the leader broke Raft's invariants: -EPROTO). Sets *last_new to the
 * index of the last entry of ents when matched.
 * 0, -ENOMEM, -EPROTO.
 */
int raftlog_maybe_append(struct raftlog *l, uint64_t prev_index, uint64_t prev_term,
			 const struct raft_entry *ents, size_t n, bool *matched,
			 uint64_t *last_new);

/* Drops entries at or before index (they were snapshotted and applied
 * elsewhere); index is clamped to min(applying, stabled). The snapshot
 * point moves to index. */
void raftlog_compact(struct raftlog *l, uint64_t index);

/* Throws the whole log away and starts after (index, term): a snapshot
 * from the leader replaced it. Marks move to index. */
void raftlog_reset(struct raftlog *l, uint64_t index, uint64_t term);

/* Entries (lo, hi] as a pointer into the log, *n of them; valid until the
 * log next changes. lo must be >= snap_index and hi <= last. */
const struct raft_entry *raftlog_slice(const struct raftlog *l, uint64_t lo,
				       uint64_t hi, size_t *n);

/* Frees one entry's data (entries handed over with ownership). */
void raft_entry_free_data(struct raft_entry *e);

/* ---- entry data on disk only ---- */

/* How data dropped from memory is read back (NULL: nothing is dropped). */
void raftlog_set_loader(struct raftlog *l, raftlog_load_fn load, void *ctx);

/* The places of the entries persisting + 1 ..., as the WAL fills them in
 * (raft_ready's entry_locs); NULL when there are none. */
struct raftlog_loc *raftlog_locs_from(struct raftlog *l, uint64_t index);

/* Sets the places of entries from, from + 1, ... (n of them; those the
 * log does not hold are skipped): a replay's, for entries restored. */
void raftlog_set_locs(struct raftlog *l, uint64_t from, const struct raftlog_loc *locs,
		      size_t n);

/*
 * Drops from memory the data of entries up to hi (clamped to applying and
 * stabled), oldest first, that have a place in the WAL, while the data
 * held exceeds keep bytes, down to three quarters of it (so that it works
 * in steps). Needs a loader. The entries themselves stay (index, term,
 * type, len): the Raft core decides with them as before.
 */
void raftlog_evict(struct raftlog *l, uint64_t hi, uint64_t keep);

/* At most this much data is read back between two raftlog_unload calls
 * (one ready's MsgApps): a follower catching up gets the rest in the
 * next ones, as the transport's queue of 32 MiB would drop it anyway. */
#define RAFTLOG_LOAD_MAX_BYTES (8u << 20)

/*
 * Reads back the data of entries (lo, hi] that raftlog_evict dropped, so
 * that raftlog_slice's entries carry it until raftlog_unload. 0, -EAGAIN
 * when RAFTLOG_LOAD_MAX_BYTES are read back already, or the loader's
 * error for the first entry it could not read (noted for
 * raftlog_take_load_failure, but for -ENOMEM). Entries read before stay
 * read back.
 */
int raftlog_load(struct raftlog *l, uint64_t lo, uint64_t hi);

/* Drops again what raftlog_load read back. */
void raftlog_unload(struct raftlog *l);

/* The highest index that raftlog_load could not read back since the last
 * call, or 0; the log is fit only to be compacted past it. */
uint64_t raftlog_take_load_failure(struct raftlog *l);

#endif
