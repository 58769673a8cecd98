/* etcd's Watch service in gatewayd (watch.c) and its key matcher
 * (watch_match.c).
 *
 * Events come from stored's feed on the broadcast ring (stored/events.h),
 * read with this process's own cursor. A watcher is either synced (it gets
 * the ring's events as they are read) or catching up from the db's key
 * bucket (keyed by revision): a watcher that starts in the past, every
 * watcher after the cursor was lapped (or stored asked for a resync), and
 * a watcher whose stream had more than WATCH_QUEUE_HIGH bytes unsent when
 * its events came. A watcher's next_rev only grows, so it never gets an
 * event twice nor skips one. While a stream's client reads slower than
 * its events come, its synced watchers' events are held and then sent
 * merged, each watcher's in one response (watch.c).
 */
#ifndef CETCD_GATEWAYD_WATCH_H
#define CETCD_GATEWAYD_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the matcher: which watchers a key concerns ---- */

/* One watched key or range, the first bytes of its owner. The key and
 * then the range end are the owner's bytes too, at the matcher's key_off
 * from the entry's start, so an entry holds no pointer to them; a range
 * also keeps its tree links there, after the end (wm_entry_size). With
 * 100,000 watchers a gateway, every byte here is 100 kB.
 *
 * Exact keys are found by hash: a singly linked chain per bucket, at
 * most WM_LOAD entries a bucket on average, the hash recomputed from the
 * key when the table grows. Ranges live in an interval tree: a treap
 * ordered by (start key, entry address), each node knowing the entry
 * with the largest end in its subtree, so a lookup descends only into
 * subtrees that hold a range reaching past the key and stops at the
 * first start after it. Its cost is O((1 + matches) * log ranges),
 * whatever the ranges that cannot match.
 *
 * The kind follows from the end, as etcd's rules say (already
 * normalised): end_len 0 = one key (WM_KEY); the one byte "\0" = every
 * key >= key (WM_FROM_KEY); else [key, end) (WM_RANGE). */
struct wm_entry {
	union {
		struct wm_entry *next; /* in the matcher, WM_KEY: the bucket chain */
		void *spare;           /* not in a matcher: free for the owner */
	};
	uint32_t key_len, end_len;
};
enum { WM_KEY = 0, WM_RANGE = 1, WM_FROM_KEY = 2 };
/* Exact keys a bucket holds on average before the table doubles. */
#define WM_LOAD 2

struct watch_matcher {
	size_t key_off;            /* from an entry to its key bytes */
	struct wm_entry **buckets; /* power of two */
	size_t nbuckets, nkeys;
	struct wm_entry *ranges;   /* root of the interval treap */
	size_t nranges;
	uint64_t rng;              /* xorshift state for treap priorities */
};

/* Bytes an owner allocates for an entry at its start whose key bytes
 * begin key_off bytes in: the key, the end and, for a range, its tree
 * node. */
size_t wm_entry_size(size_t key_off, size_t key_len, size_t end_len);
/* Sets e's lengths; the owner has written the key, then the end, at the
 * matcher's key_off from e. */
void wm_entry_set(struct wm_entry *e, size_t key_len, size_t end_len);
static inline const uint8_t *wm_key(const struct watch_matcher *m, const struct wm_entry *e)
{
	return (const uint8_t *)e + m->key_off;
}
int wm_kind(const struct watch_matcher *m, const struct wm_entry *e);
bool wm_covers(const struct watch_matcher *m, const struct wm_entry *e, const uint8_t *key,
	       size_t len);
/* The matcher's entries have their key bytes key_off bytes after their
 * start. 0 or -ENOMEM. */
int wm_init(struct watch_matcher *m, size_t key_off);
void wm_fini(struct watch_matcher *m);
/* 0 or -ENOMEM (the table could not grow; e is added anyway). */
int wm_add(struct watch_matcher *m, struct wm_entry *e);
void wm_del(struct watch_matcher *m, struct wm_entry *e);
/* Calls fn for every entry that covers key, each once; fn must not add
 * or remove entries. */
typedef void (*wm_fn)(void *arg, struct wm_entry *e);
void wm_match(const struct watch_matcher *m, const uint8_t *key, size_t len, wm_fn fn, void *arg);

/* ---- the service (gatewayd/server.h calls these) ---- */

struct gw_server;
/* Unsent bytes above which a stream's watchers stop taking live events
 * and catch up from the db later. */
#define WATCH_QUEUE_HIGH (1u << 20)
/* Unsent bytes above which a stream's events are held and merged per
 * watcher until its client catches up (watch.c); CETCD_WATCH_HOLD_BYTES
 * sets it, 0 never holds. */
#define WATCH_HOLD_BYTES (16u << 10)

int watch_register(struct gw_server *s);
void watch_free(struct gw_server *s);
/* Reads the ring, dispatches events, runs catch-ups and progress. */
void watch_turn(struct gw_server *s);
/* After the flush: keeps the loop awake while catch-up has room to go. */
void watch_flushed(struct gw_server *s);
/* Monotonic time of the next progress tick or release of held events,
 * INT64_MAX if none. */
int64_t watch_next_deadline(struct gw_server *s);
/* For the waker thread: the ring has records for watchers. */
bool watch_has_work(struct gw_server *s);
/* Keeps the event ring read (and the loop woken by it) while something
 * other than a watcher waits on the store's changes (conc.c); each hold
 * is released once. */
void watch_hold(struct gw_server *s);
void watch_release(struct gw_server *s);
/* Whether the slot wants stored's event wake-ups. */
bool watch_wants_events(struct gw_server *s);

#endif
