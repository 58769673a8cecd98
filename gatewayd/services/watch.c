/* etcd 3.4's Watch service (watch.h): one bidirectional stream per call,
 * many watchers per stream, fed from stored's event ring and, when behind,
 * from the db. */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/check.h"
#include "base/clock/clock.h"
#include "etcdserverpb/rpc.pb-c.h"
#include "gatewayd/dlist.h"
#include "gatewayd/server.h"
#include "gatewayd/services/watch.h"
#include "gatewayd/transport/grpc_wire.h"
#include "proto/wire.h"
#include "shm/bcast.h"
#include "shm/doorbell.h"
#include "shm/slot.h"
#include "base/log/log.h"
#include "shm/region.h"
#include "stored/events.h"
#include "stored/mvcc/mvcc.h"
#include "stored/mvcc/revision.h"

/* Key-bucket entries a turn's catch-ups read, all watchers together. */
#define WATCH_CATCHUP_BUDGET 20000u
/* A catch-up response closes at the first revision boundary past this. */
#define WATCH_CATCHUP_CHUNK (256u * 1024)
/* etcd's default progress interval; --experimental-watch-progress-notify-interval
 * sets it, and CETCD_WATCH_PROGRESS_MS (in ms) overrides both. */
#define WATCH_PROGRESS_NS (600ll * 1000000000)

struct watch_stream;

/* With 100,000 watchers a gateway, every byte here is 100 kB, and the
 * allocator's size class is what counts: with a 15-byte key a watcher
 * takes 64 bytes. While it catches up (not synced), the matcher entry's
 * spare word links it on ws->catchup. */
struct watcher {
	struct wm_entry m;           /* first: the matcher hands it back */
	struct watch_stream *st;
	struct watcher *snext;       /* the stream's watchers */
	int64_t id;
	int64_t next_rev;            /* next revision it may be sent; only grows */
	bool synced : 1;             /* in the matcher, taking ring events; else in ws->catchup */
	bool prev_kv : 1, noput : 1, nodelete : 1, fragment : 1, progress_notify : 1;
	bool sent_since_tick : 1;    /* events since the last progress tick */
	uint8_t bytes[];             /* key then range end (the matcher's key_off) */
};

_Static_assert(offsetof(struct watcher, bytes) + 15 <= 64,
	       "a watcher on a 15-byte key fits the allocator's 64-byte class");

/* The next watcher on the catching-up list. */
static struct watcher *unext(const struct watcher *w)
{
	return w->m.spare;
}

struct watch_stream {
	struct dlist node;           /* ws->streams */
	uint64_t call_id;
	struct watcher *ws;
	int64_t next_id;             /* etcd's nextID: the next automatic id */
	int64_t progress_rev;        /* last revision a progress response named */
	bool progress_wait;          /* a ProgressRequest waits for catch-ups */
	/* Events held while the stream's client is behind (hold_events), in
	 * the order dispatched; their bytes in hbuf. NULL when none. */
	struct watch_held *held;
	size_t nheld, held_cap;
	uint8_t *hbuf;
	size_t hlen, hcap;
	int64_t hold_since_ns;       /* when the first of them was held */
};

/* An event held for w, the last revision of its batch being rev. */
struct watch_held {
	struct watcher *w;
	int64_t rev;                 /* the last revision of its batch */
	int64_t evrev;               /* the event's own */
	uint32_t off, len;           /* in the stream's hbuf */
};

/* One event of the batch being read from the ring, with its two
 * encodings as a WatchResponse.events field (with and without prev_kv). */
struct watch_gev {
	size_t off, len;             /* the record in gbuf */
	struct events_ev ev;
	size_t enc_off[2], enc_len[2]; /* in ebuf; enc_len 0: not yet */
};

/* An event of the batch for a watcher: its events chain in batch order. */
struct watch_pair {
	uint32_t ev;
	int32_t next;                /* the watcher's next pair, -1: none */
};

/* A watcher the batch concerns, with its first and last pair. */
struct watch_touch {
	struct watcher *w;
	int32_t head, tail;
	uint32_t slot;               /* its place in ws->tslots */
};

struct watch_state {
	struct bcast *b;
	struct bcast_cursor cur;
	bool cur_valid;
	_Atomic bool active;          /* the waker looks at the ring */
	_Atomic uint64_t seen_head;   /* the cursor position after the last drain */
	uint8_t *rbuf;
	size_t rcap;
	/* The batch: the records read from the ring and not yet dispatched,
	 * whole revisions first (ncomplete of them), then the start of one
	 * whose last record has not come yet. */
	uint8_t *gbuf;
	size_t glen, gcap;
	struct watch_gev *gev;
	size_t ngev, gev_cap, ncomplete;
	uint8_t *ebuf;                /* encodings */
	size_t elen, ecap;
	struct watch_pair *pairs;
	size_t npairs, pairs_cap;
	/* The watchers the batch concerns, in the order first matched, and
	 * an open-addressed index of them by address (-1: empty; a power of
	 * two, at most half full). */
	struct watch_touch *touched;
	size_t ntouched, touched_cap;
	int32_t *tslots;
	size_t tslots_cap;
	bool match_lost;              /* a pair could not be recorded (no memory) */
	int64_t live_rev;             /* last revision dispatched from the ring */
	struct watch_matcher m;
	struct dlist streams;         /* newest first */
	struct watcher *catchup;
	size_t nwatchers;
	size_t nstreams;
	size_t ncatchup;              /* watchers on the catchup list */
	uint32_t holds;               /* watch_hold's, not yet released */
	int64_t progress_ns, next_tick_ns;
	uint32_t progress_waiting;    /* streams whose progress_wait is set */
	int64_t read_every_ns;        /* CETCD_WATCH_READ_EVERY_MS (tests: a
				       * gateway that lags and gets lapped) */
	_Atomic int64_t next_read_ns;
	struct mvcc_range_result res;
	uint64_t laps;
	size_t hold_bytes;            /* see stream_behind; 0: never hold */
	size_t nholding;              /* streams holding events */
	uint64_t hold_starts;         /* times a stream began to hold */
	int64_t release_at_ns;        /* the oldest hold's WATCH_HOLD_MAX_NS is up */
};

static struct watch_state *W(struct gw_server *s)
{
	return s->watch;
}

static int reserve(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

/* ---- encoding ---- */

/* Appends WatchResponse field 11 (an mvccpb.Event) to w's ebuf; returns
 * its offset, or SIZE_MAX when out of memory. */
static size_t enc_event(struct watch_state *w, bool is_delete, const uint8_t *kv, size_t kv_len,
			const uint8_t *prev, size_t prev_len)
{
	size_t body = (is_delete ? 2 : 0) + 1 + proto_varint_len(kv_len) + kv_len +
		      (prev ? 1 + proto_varint_len(prev_len) + prev_len : 0);
	size_t need = 1 + proto_varint_len(body) + body;
	if (reserve((void **)&w->ebuf, &w->ecap, w->elen + need, 1))
		return SIZE_MAX;
	size_t off = w->elen;
	uint8_t *p = w->ebuf + off;
	*p++ = 0x5a; /* field 11, bytes */
	p += proto_varint_put(p, body);
	if (is_delete) {
		*p++ = 0x08; /* type = DELETE */
		*p++ = 0x01;
	}
	*p++ = 0x12; /* kv */
	p += proto_varint_put(p, kv_len);
	memcpy(p, kv, kv_len);
	p += kv_len;
	if (prev) {
		*p++ = 0x1a; /* prev_kv */
		p += proto_varint_put(p, prev_len);
		memcpy(p, prev, prev_len);
		p += prev_len;
	}
	w->elen += need;
	return off;
}

struct watch_piece {
	const uint8_t *p;
	size_t len;
};

static struct watch_stream **watch_call_stream(struct grpc_call *call);
static void stream_release(struct gw_server *s, struct watch_stream *st, struct grpc_call *call);
static void held_drop(struct watch_state *ws, struct watch_stream *st);

/* Queues one WatchResponse: the fields below, then the events' bytes.
 * Whatever the stream holds goes first, so that the stream's order is
 * the order of dispatch. */
static int send_resp(struct gw_server *s, struct grpc_call *call, int64_t rev, int64_t id,
		     bool created, bool canceled, int64_t compact_rev, const char *reason,
		     bool fragment, const struct watch_piece *ev, size_t nev)
{
	Etcdserverpb__WatchResponse r = ETCDSERVERPB__WATCH_RESPONSE__INIT;
	Etcdserverpb__ResponseHeader h = ETCDSERVERPB__RESPONSE_HEADER__INIT;
	struct watch_stream *st = *watch_call_stream(call);
	size_t evbytes = 0;

	if (st && st->nheld)
		stream_release(s, st, call);
	gw_header_pb(s, rev, &h);
	h.revision = rev;
	r.header = &h;
	r.watch_id = id;
	r.created = created;
	r.canceled = canceled;
	r.compact_revision = compact_rev;
	if (reason)
		r.cancel_reason = (char *)reason;
	r.fragment = fragment;
	for (size_t i = 0; i < nev; i++)
		evbytes += ev[i].len;
	size_t n = etcdserverpb__watch_response__get_packed_size(&r);
	uint8_t *p = grpc_call_send_reserve(call, n + evbytes);
	if (!p)
		return -ENOMEM;
	etcdserverpb__watch_response__pack(&r, p);
	p += n;
	for (size_t i = 0; i < nev; i++) {
		memcpy(p, ev[i].p, ev[i].len);
		p += ev[i].len;
	}
	s->stats.watch_responses++;
	s->stats.watch_events += nev;
	return 0;
}

/* Sends events of w (ending at revision rev) as one response, or as
 * fragments of about --max-request-bytes when w asked for them, as etcd's
 * sendFragments splits. */
static int send_events(struct gw_server *s, struct grpc_call *call, struct watcher *w, int64_t rev,
		       const struct watch_piece *ev, size_t nev)
{
	size_t total = 0;

	for (size_t i = 0; i < nev; i++)
		total += ev[i].len;
	w->sent_since_tick = true;
	if (!w->fragment || nev < 2 || total + 64 < s->max_request_bytes)
		return send_resp(s, call, rev, w->id, false, false, 0, NULL, false, ev, nev);
	size_t i = 0;
	while (i < nev) {
		size_t j = i, bytes = 0;
		while (j < nev && (j == i || bytes + ev[j].len + 64 < s->max_request_bytes))
			bytes += ev[j++].len;
		int rc = send_resp(s, call, rev, w->id, false, false, 0, NULL, j < nev, ev + i,
				   j - i);
		if (rc)
			return rc;
		i = j;
	}
	return 0;
}

/* ---- watchers ---- */

static int64_t delivered(const struct watch_state *ws, const struct watcher *w)
{
	int64_t d = w->next_rev - 1;
	return w->synced && ws->live_rev > d ? ws->live_rev : d;
}

/* Puts w (new, or synced and just taken out of the matcher) on the
 * catching-up list; a watcher already catching up stays as it is. */
static void catchup_add(struct watch_state *ws, struct watcher *w, bool is_new)
{
	if (!is_new && !w->synced)
		return;
	if (w->synced && w->next_rev <= ws->live_rev)
		w->next_rev = ws->live_rev + 1;
	w->synced = false;
	w->m.spare = ws->catchup;
	ws->catchup = w;
	ws->ncatchup++;
}

/* Takes w, which follows prev (NULL: the first), off the catching-up list.
 * A watcher put in front of w meanwhile (unsend, while a catch-up released
 * its stream) is found too. */
static void catchup_unlink(struct watch_state *ws, struct watcher *prev, struct watcher *w)
{
	if (!prev && ws->catchup != w)
		for (prev = ws->catchup; unext(prev) != w; prev = unext(prev))
			;
	if (prev)
		prev->m.spare = w->m.spare;
	else
		ws->catchup = unext(w);
	ws->ncatchup--;
}

static void watcher_free(struct watch_state *ws, struct watcher *w)
{
	if (w->synced) {
		wm_del(&ws->m, &w->m);
	} else {
		struct watcher *prev = NULL;
		for (struct watcher *c = ws->catchup; c; prev = c, c = unext(c)) {
			if (c == w) {
				catchup_unlink(ws, prev, w);
				break;
			}
		}
	}
	ws->nwatchers--;
	free(w);
}

/* Takes w out of its stream and frees it. */
static void watcher_remove(struct watch_state *ws, struct watcher *w)
{
	for (struct watcher **p = &w->st->ws; *p; p = &(*p)->snext) {
		if (*p == w) {
			*p = w->snext;
			break;
		}
	}
	watcher_free(ws, w);
}

static void stream_free(struct watch_state *ws, struct watch_stream *st)
{
	while (st->ws) {
		struct watcher *w = st->ws;
		st->ws = w->snext;
		watcher_free(ws, w);
	}
	dlist_remove(&st->node);
	ws->nstreams--;
	if (st->progress_wait)
		ws->progress_waiting--;
	held_drop(ws, st);
	free(st);
	if (ws->nwatchers == 0 && ws->holds == 0) {
		ws->cur_valid = false;
		atomic_store_explicit(&ws->active, false, memory_order_relaxed);
	}
}

/* Room for more in the stream's queue: unsent bytes, held ones included. */
static bool stream_has_room(struct grpc_call *call)
{
	struct watch_stream *st = *watch_call_stream(call);

	return grpc_call_pending_bytes(call) + (st ? st->hlen : 0) < WATCH_QUEUE_HIGH;
}

/* ---- holding events for a backlogged stream ----
 *
 * When a client reads slower than events come, sending each batch's
 * events as they are read lines up many small responses for it, and it
 * is the client's cost per response (a gRPC message, a hop through its
 * watch goroutines) that holds it back. So while a stream's client is
 * behind (stream_behind), the events dispatched to its watchers are held
 * instead; once it may be near the end of what it was sent (stream_caught_up),
 * or WATCH_HOLD_MAX_NS after the first was held, each watcher gets what
 * was held for it as one response (several above WATCH_CATCHUP_CHUNK).
 * A client that keeps up never sees a hold; one that falls further
 * behind, past WATCH_QUEUE_HIGH with the held bytes counted, catches up
 * from the db as before. Anything else sent on the stream (send_resp)
 * releases the held events first, so every response keeps its place in
 * the stream's order: a progress response never names a revision whose
 * events are still held, a cancel comes after its watcher's events. A
 * watcher's next_rev counts held events as sent.
 */

/* At most this long between holding an event and releasing it, whatever
 * the client's window says (a client may give window back lazily); etcd
 * makes a watcher that fell behind wait for its 100 ms sync loop. */
#define WATCH_HOLD_MAX_NS (100ll * 1000000)

/* The client of call is behind: more than hold_bytes wait unframed (its
 * window is used up), or it has more than hold_bytes of what it was sent
 * still to read. A client owes back what it has not read plus less than
 * one of its steps of window (h2_stream_unacked), so one that owes more
 * than a step and hold_bytes has at least hold_bytes unread, whatever
 * its window: gRPC's Go client grows its window to hundreds of kB under
 * load, so a share of the window would let most of a backlog go out one
 * event at a time. */
static bool stream_behind(const struct watch_state *ws, struct grpc_call *call)
{
	size_t window, step, unacked = grpc_call_unacked_bytes(call, &window, &step);

	return grpc_call_pending_bytes(call) > ws->hold_bytes ||
	       (window && unacked > step + ws->hold_bytes);
}

/* The client of st's call may be near the end of what it was sent: it
 * owes back at most a step and half of hold_bytes (one that read
 * everything owes less than a step, so it is never kept waiting) and
 * little waits unframed; or the hold is as old as it may get. */
static bool stream_caught_up(const struct watch_state *ws, const struct watch_stream *st,
			     struct grpc_call *call, int64_t now)
{
	size_t window, step, unacked = grpc_call_unacked_bytes(call, &window, &step);

	return (grpc_call_pending_bytes(call) <= ws->hold_bytes / 4 &&
		unacked <= step + ws->hold_bytes / 2) ||
	       now - st->hold_since_ns >= WATCH_HOLD_MAX_NS;
}

/* st holds nothing from here on; its buffers are the caller's. */
static void held_forget(struct watch_state *ws, struct watch_stream *st)
{
	if (st->nheld)
		ws->nholding--;
	st->held = NULL;
	st->hbuf = NULL;
	st->nheld = st->held_cap = st->hlen = st->hcap = 0;
}

static void held_drop(struct watch_state *ws, struct watch_stream *st)
{
	free(st->held);
	free(st->hbuf);
	held_forget(ws, st);
}

/* Holds the n pieces (events of revisions evrev[i]) of a batch ending at
 * rev for w; 0, or -ENOMEM with nothing held. */
static int hold_events(struct watch_state *ws, struct watch_stream *st, struct watcher *w,
		       int64_t rev, const struct watch_piece *pv, const int64_t *evrev, size_t n,
		       int64_t now)
{
	size_t bytes = 0;

	for (size_t i = 0; i < n; i++)
		bytes += pv[i].len;
	if (st->hlen + bytes > UINT32_MAX ||
	    reserve((void **)&st->hbuf, &st->hcap, st->hlen + bytes, 1) ||
	    reserve((void **)&st->held, &st->held_cap, st->nheld + n, sizeof(*st->held)))
		return -ENOMEM;
	if (!st->nheld) {
		ws->nholding++;
		ws->hold_starts++;
		st->hold_since_ns = now;
		if (now + WATCH_HOLD_MAX_NS < ws->release_at_ns)
			ws->release_at_ns = now + WATCH_HOLD_MAX_NS;
		if ((ws->hold_starts & (ws->hold_starts - 1)) == 0) /* 1, 2, 4, ... */
			log_info("a watch client reads slower than its events come; its events are held and merged",
				 LOG_U64("times", ws->hold_starts), LOG_I64("revision", rev));
	}
	for (size_t i = 0; i < n; i++) {
		memcpy(st->hbuf + st->hlen, pv[i].p, pv[i].len);
		st->held[st->nheld++] = (struct watch_held){
			.w = w, .rev = rev, .evrev = evrev[i], .off = (uint32_t)st->hlen,
			.len = (uint32_t)pv[i].len,
		};
		st->hlen += pv[i].len;
	}
	return 0;
}

struct held_ix {
	struct watcher *w;
	size_t i;
};

static int held_cmp(const void *a, const void *b)
{
	const struct held_ix *x = a, *y = b;

	if (x->w != y->w)
		return (uintptr_t)x->w < (uintptr_t)y->w ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/* w's held events from revision from on could not be queued after all
 * (no memory): it catches up from the db from there. The only place
 * next_rev goes back, to events that never left the gateway. */
static void unsend(struct watch_state *ws, struct watcher *w, int64_t from)
{
	if (w->synced) {
		wm_del(&ws->m, &w->m);
		catchup_add(ws, w, false);
	}
	w->next_rev = from;
}

/* Sends what st holds: each watcher's events in as few responses as
 * WATCH_CATCHUP_CHUNK allows, cut at the revision boundaries of their
 * batches, headed by the last revision of their last batch. */
static void stream_release(struct gw_server *s, struct watch_stream *st, struct grpc_call *call)
{
	struct watch_state *ws = W(s);
	struct watch_held *h = st->held;
	uint8_t *buf = st->hbuf;
	size_t n = st->nheld;

	if (!n)
		return;
	/* The stream holds nothing from here on: send_resp below must not
	 * release again. */
	held_forget(ws, st);
	s->more_work = true; /* a catch-up that waited on the room may go */

	struct held_ix *ix = malloc(n * sizeof(*ix));
	struct watch_piece *pv = malloc(n * sizeof(*pv));
	if (!ix || !pv) {
		/* no memory to merge: one response per event, as held */
		for (size_t i = 0; i < n; i++) {
			struct watch_piece one = { buf + h[i].off, h[i].len };
			if (send_events(s, call, h[i].w, h[i].rev, &one, 1))
				unsend(ws, h[i].w, h[i].evrev);
		}
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ix[i] = (struct held_ix){ h[i].w, i };
	qsort(ix, n, sizeof(*ix), held_cmp);
	for (size_t a = 0; a < n;) {
		struct watcher *w = ix[a].w;
		size_t b = a;
		while (b < n && ix[b].w == w)
			b++;
		/* [a, b): w's events in order; chunks end where a batch does */
		size_t from = a;
		while (from < b) {
			size_t to = from, bytes = 0;
			while (to < b) {
				const struct watch_held *e = &h[ix[to].i];
				if (to > from && bytes >= WATCH_CATCHUP_CHUNK &&
				    e->rev != h[ix[to - 1].i].rev)
					break;
				pv[to - from] = (struct watch_piece){ buf + e->off, e->len };
				bytes += e->len;
				to++;
			}
			if (send_events(s, call, w, h[ix[to - 1].i].rev, pv, to - from)) {
				unsend(ws, w, h[ix[from].i].evrev);
				break;
			}
			from = to;
		}
		a = b;
	}
out:
	free(ix);
	free(pv);
	free(h);
	free(buf);
}

/* st's call when st holds events that are due to go (stream_caught_up),
 * else NULL. */
static struct grpc_call *held_due(struct gw_server *s, struct watch_state *ws,
				  struct watch_stream *st, int64_t now)
{
	if (!st->nheld)
		return NULL;
	struct grpc_call *call = grpc_call_find(s->grpc, st->call_id);
	return call && stream_caught_up(ws, st, call, now) ? call : NULL;
}

/* Releases the held events of every stream whose client caught up, and
 * sets the time the oldest of the others is due. */
static void release_turn(struct gw_server *s, struct watch_state *ws)
{
	struct watch_stream *st;
	int64_t now = s->now_ns;

	ws->release_at_ns = INT64_MAX;
	if (!ws->nholding)
		return;
	dlist_for_each(st, &ws->streams, node) {
		struct grpc_call *call = held_due(s, ws, st, now);
		if (call)
			stream_release(s, st, call);
		else if (st->nheld && st->hold_since_ns + WATCH_HOLD_MAX_NS < ws->release_at_ns)
			ws->release_at_ns = st->hold_since_ns + WATCH_HOLD_MAX_NS;
	}
}

/* The revision the gateway's db shows, 0 when unknown. */
static int64_t published_rev(struct gw_server *s)
{
	struct status_stored st;
	return status_stored_read(s->r, &st) == 0 ? (int64_t)st.revision : 0;
}

static void start_cursor(struct gw_server *s, struct watch_state *ws)
{
	if (ws->cur_valid)
		return;
	bcast_cursor_init(ws->b, &ws->cur);
	ws->cur_valid = true;
	atomic_store_explicit(&ws->seen_head, ws->cur.pos, memory_order_relaxed);
	atomic_store_explicit(&ws->active, true, memory_order_release);
	shm_doorbell_want_events(shm_slot_doorbell(s->r, s->slot.index), true);
}

/*
 * etcd's isWatchPermitted: READ over the watch's range as etcd's
 * recvLoop passes it (the empty key as "\0"; a from-key range end "\0"
 * as an empty one, which etcd's IsRangePermitted then reads as the key
 * alone). A refusal is a created and canceled response with watch ID -1
 * and the gRPC error's text as its reason; false then.
 */
static bool watch_permitted(struct gw_server *s, struct grpc_call *call,
			    const Etcdserverpb__WatchCreateRequest *c, const uint8_t *key,
			    size_t klen, int64_t cur)
{
	Etcdserverpb__WatchCreateRequest as = *c;
	const struct gw_auth_info *ai;
	char reason[160];
	int rc;

	as.key.data = (uint8_t *)key;
	as.key.len = klen;
	if (as.range_end.len == 1 && as.range_end.data[0] == 0)
		as.range_end.len = 0;
	rc = gw_auth_of(s, call, &ai);
	if (rc == 0)
		rc = auth_check_watch(ai->cache, ai->user, ai->revision, &as);
	if (rc == 0)
		return true;
	if (rc != AUTH_ERR_INVALID_AUTH_TOKEN && rc != AUTH_ERR_OLD_REVISION &&
	    rc != AUTH_ERR_USER_EMPTY)
		rc = AUTH_ERR_PERMISSION_DENIED;
	snprintf(reason, sizeof(reason), "rpc error: code = %s desc = %s",
		 grpc_status_name((enum grpc_status)auth_grpc_code(rc)), auth_strerror(rc));
	send_resp(s, call, cur, -1, true, true, 0, reason, false, NULL, 0);
	return false;
}

static void watch_create(struct gw_server *s, struct grpc_call *call, struct watch_stream *st,
			 const Etcdserverpb__WatchCreateRequest *c)
{
	struct watch_state *ws = W(s);
	const uint8_t zero = 0;
	const uint8_t *key = c->key.len ? c->key.data : &zero;
	size_t klen = c->key.len ? c->key.len : 1;
	const uint8_t *end = c->range_end.data;
	size_t elen = c->range_end.len;
	int64_t cur = published_rev(s);
	int64_t id = c->watch_id;

	if (gw_auth_enabled(s) && !watch_permitted(s, call, c, key, klen, cur))
		return;
	/* etcd: a range with key >= end (other than "from key") is empty */
	if (elen && !(elen == 1 && end[0] == 0)) {
		int cmp = memcmp(key, end, klen < elen ? klen : elen);
		if (cmp > 0 || (cmp == 0 && klen >= elen)) {
			send_resp(s, call, cur, -1, true, true, 0, "mvcc: watcher range is empty",
				  false, NULL, 0);
			return;
		}
	}
	if (id == 0) {
		for (;;) {
			bool used = false;
			for (struct watcher *o = st->ws; o; o = o->snext)
				used |= o->id == st->next_id;
			if (!used)
				break;
			st->next_id++;
		}
		id = st->next_id++;
	} else {
		for (struct watcher *o = st->ws; o; o = o->snext) {
			if (o->id == id) {
				send_resp(s, call, cur, -1, true, true, 0,
					  "mvcc: duplicate watch ID provided on the WatchStream",
					  false, NULL, 0);
				return;
			}
		}
	}
	/* The key and range end follow the fields, from offsetof: sizeof
	 * would add the struct's tail padding to every watcher. */
	struct watcher *w = calloc(1, wm_entry_size(offsetof(struct watcher, bytes), klen, elen));
	if (!w) {
		send_resp(s, call, cur, -1, true, true, 0, "etcdserver: out of memory", false, NULL,
			  0);
		return;
	}
	memcpy(w->bytes, key, klen);
	if (elen)
		memcpy(w->bytes + klen, end, elen);
	wm_entry_set(&w->m, klen, elen);
	w->st = st;
	w->id = id;
	w->next_rev = c->start_revision > 0 ? c->start_revision : cur + 1;
	w->prev_kv = c->prev_kv;
	w->fragment = c->fragment;
	w->progress_notify = c->progress_notify;
	for (size_t i = 0; i < c->n_filters; i++) {
		if (c->filters[i] == ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NOPUT)
			w->noput = true;
		else if (c->filters[i] == ETCDSERVERPB__WATCH_CREATE_REQUEST__FILTER_TYPE__NODELETE)
			w->nodelete = true;
	}
	w->snext = st->ws;
	st->ws = w;
	ws->nwatchers++;
	start_cursor(s, ws);
	catchup_add(ws, w, true);
	send_resp(s, call, cur, id, true, false, 0, NULL, false, NULL, 0);
	s->more_work = true;
}

/* A watch call keeps its stream in the call's own state (zeroed when
 * the call starts, so NULL until its first request): a request finds its
 * stream without a walk of every stream. The stream lives until the call
 * finishes or is cancelled, and the slot is cleared then. */
static struct watch_stream **watch_call_stream(struct grpc_call *call)
{
	_Static_assert(sizeof(struct watch_stream *) <= GRPC_CALL_STATE_BYTES,
		       "a stream pointer fits in a call");
	return grpc_call_state(call);
}

static void watch_message(struct grpc_call *call, const uint8_t *msg, size_t len)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	struct watch_state *ws = W(s);
	struct watch_stream **slot = watch_call_stream(call);
	struct watch_stream *st = *slot;

	Etcdserverpb__WatchRequest *req =
		gw_unpack_stream(s, call, &etcdserverpb__watch_request__descriptor, &msg, &len);
	if (!req) {
		if (st)
			stream_free(ws, st); /* the call was finished */
		*slot = NULL;
		return;
	}
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st) {
			grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "grpc: out of memory");
			return;
		}
		st->call_id = grpc_call_id(call);
		*slot = st;
		dlist_insert_head(&ws->streams, &st->node);
		ws->nstreams++;
	}
	switch (req->request_union_case) {
	case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST:
		watch_create(s, call, st, req->create_request);
		break;
	case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CANCEL_REQUEST: {
		int64_t wid = req->cancel_request->watch_id;
		for (struct watcher *w = st->ws; w; w = w->snext) {
			if (w->id == wid) {
				stream_release(s, st, call); /* its events before its cancel */
				int64_t rev = delivered(ws, w);
				watcher_remove(ws, w);
				send_resp(s, call, rev, wid, false, true, 0, NULL, false, NULL, 0);
				break;
			}
		}
		break;
	}
	case ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_PROGRESS_REQUEST:
		ws->progress_waiting += !st->progress_wait;
		st->progress_wait = true;
		s->more_work = true;
		break;
	default:
		break;
	}
}

static void watch_cancel(struct grpc_call *call, enum grpc_cancel_reason why)
{
	struct gw_server *s = grpc_call_handler_arg(call);
	struct watch_stream **slot = watch_call_stream(call);

	(void)why;
	if (*slot)
		stream_free(W(s), *slot);
	*slot = NULL;
}

/* ---- the ring ---- */

/* Forgets the matches of the batch. */
static void touch_reset(struct watch_state *ws)
{
	for (size_t t = 0; t < ws->ntouched; t++)
		ws->tslots[ws->touched[t].slot] = -1;
	ws->ntouched = ws->npairs = ws->elen = 0;
}

/* Drops the batch's first n events (whole revisions), keeping the rest. */
static void batch_drop(struct watch_state *ws, size_t n)
{
	touch_reset(ws);
	if (n == ws->ngev) {
		ws->glen = ws->ngev = ws->ncomplete = 0;
		return;
	}
	size_t from = ws->gev[n].off;
	memmove(ws->gbuf, ws->gbuf + from, ws->glen - from);
	ws->glen -= from;
	memmove(ws->gev, ws->gev + n, (ws->ngev - n) * sizeof(*ws->gev));
	ws->ngev -= n;
	ws->ncomplete = ws->ncomplete > n ? ws->ncomplete - n : 0;
	for (size_t i = 0; i < ws->ngev; i++)
		ws->gev[i].off -= from;
}

/* Every synced watcher catches up from the db: records were lost. */
static void lapped(struct gw_server *s, struct watch_state *ws)
{
	struct watch_stream *st;

	ws->laps++;
	if ((ws->laps & (ws->laps - 1)) == 0) /* 1, 2, 4, ...: not a line per lap */
		log_info("watch events were lost on the ring; watchers catch up from the db",
			 LOG_U64("laps", ws->laps), LOG_I64("revision", ws->live_rev));
	batch_drop(ws, ws->ngev);
	bcast_cursor_init(ws->b, &ws->cur);
	dlist_for_each(st, &ws->streams, node)
		for (struct watcher *w = st->ws; w; w = w->snext)
			if (w->synced) {
				wm_del(&ws->m, &w->m);
				catchup_add(ws, w, false);
			}
	s->more_work = true;
}

struct match_ctx {
	struct watch_state *ws;
	uint32_t ev;
	int64_t rev;
};

static uint32_t touch_hash(const struct watcher *w, size_t cap)
{
	return (uint32_t)((((uintptr_t)w >> 4) * 0x9e3779b97f4a7c15ull) >> 32) & (uint32_t)(cap - 1);
}

/* The index in ws->touched of w's entry, added if new; -1 when out of
 * memory. */
static int32_t touch_find(struct watch_state *ws, struct watcher *w)
{
	if (2 * (ws->ntouched + 1) > ws->tslots_cap) {
		size_t cap = ws->tslots_cap ? 2 * ws->tslots_cap : 64;
		int32_t *t = malloc(cap * sizeof(*t));
		if (!t)
			return -1;
		memset(t, 0xff, cap * sizeof(*t));
		for (size_t i = 0; i < ws->ntouched; i++) {
			uint32_t h = touch_hash(ws->touched[i].w, cap);
			while (t[h] >= 0)
				h = (h + 1) & (uint32_t)(cap - 1);
			t[h] = (int32_t)i;
			ws->touched[i].slot = h;
		}
		free(ws->tslots);
		ws->tslots = t;
		ws->tslots_cap = cap;
	}
	uint32_t h = touch_hash(w, ws->tslots_cap);
	for (; ws->tslots[h] >= 0; h = (h + 1) & (uint32_t)(ws->tslots_cap - 1))
		if (ws->touched[ws->tslots[h]].w == w)
			return ws->tslots[h];
	if (reserve((void **)&ws->touched, &ws->touched_cap, ws->ntouched + 1,
		    sizeof(*ws->touched)))
		return -1;
	int32_t i = (int32_t)ws->ntouched++;
	ws->touched[i] = (struct watch_touch){ .w = w, .head = -1, .tail = -1, .slot = h };
	ws->tslots[h] = i;
	return i;
}

static void on_match(void *arg, struct wm_entry *e)
{
	struct match_ctx *mc = arg;
	struct watch_state *ws = mc->ws;
	struct watcher *w = (struct watcher *)e;
	const struct events_ev *ev = &ws->gev[mc->ev].ev;

	if (mc->rev < w->next_rev || (ev->is_delete ? w->nodelete : w->noput))
		return;
	int32_t t = touch_find(ws, w);
	if (t < 0 ||
	    reserve((void **)&ws->pairs, &ws->pairs_cap, ws->npairs + 1, sizeof(*ws->pairs))) {
		ws->match_lost = true; /* dispatch sends every synced watcher to catch up */
		return;
	}
	int32_t k = (int32_t)ws->npairs++;
	ws->pairs[k] = (struct watch_pair){ .ev = mc->ev, .next = -1 };
	if (ws->touched[t].tail >= 0)
		ws->pairs[ws->touched[t].tail].next = k;
	else
		ws->touched[t].head = k;
	ws->touched[t].tail = k;
}

/*
 * Sends the batch's whole revisions to the synced watchers they concern:
 * each watcher gets one response with its events of all of them, in
 * revision order, under the batch's last revision (etcd's client takes
 * a response of several revisions, as etcd sends them to a watcher that
 * catches up; the header names a revision the watcher has everything
 * of).
 */
static void dispatch(struct gw_server *s, struct watch_state *ws)
{
	size_t nev = ws->ncomplete;
	if (nev == 0)
		return;
	int64_t rev = ws->gev[nev - 1].ev.main;
	struct watch_piece pieces[64], *pv = pieces;
	int64_t revs[64], *rv = revs;
	size_t pcap = 64;

	for (uint32_t i = 0; i < nev; i++) {
		events_decode(ws->gbuf + ws->gev[i].off, ws->gev[i].len, &ws->gev[i].ev);
		ws->gev[i].enc_len[0] = ws->gev[i].enc_len[1] = 0;
		struct match_ctx mc = { .ws = ws, .ev = i, .rev = ws->gev[i].ev.main };
		wm_match(&ws->m, ws->gev[i].ev.key, ws->gev[i].ev.key_len, on_match, &mc);
	}
	for (size_t t = 0; t < ws->ntouched; t++) {
		struct watcher *w = ws->touched[t].w;
		struct grpc_call *call = grpc_call_find(s->grpc, w->st->call_id);
		if (!call)
			continue;
		if (!stream_has_room(call)) {
			wm_del(&ws->m, &w->m);
			catchup_add(ws, w, false);
			continue;
		}
		size_t n = 0;
		bool failed = false;
		for (int32_t k = ws->touched[t].head; k >= 0; k = ws->pairs[k].next) {
			struct watch_gev *g = &ws->gev[ws->pairs[k].ev];
			int v = w->prev_kv && g->ev.prev ? 1 : 0;
			if (!g->enc_len[v]) {
				size_t before = ws->elen;
				size_t off = enc_event(ws, g->ev.is_delete, g->ev.kv, g->ev.kv_len,
						       v ? g->ev.prev : NULL, g->ev.prev_len);
				if (off == SIZE_MAX) {
					failed = true;
					break;
				}
				g->enc_off[v] = off;
				g->enc_len[v] = ws->elen - before;
			}
			if (n == pcap) {
				struct watch_piece *np = malloc(2 * pcap * sizeof(*np));
				int64_t *nr = malloc(2 * pcap * sizeof(*nr));
				if (!np || !nr) {
					free(np);
					free(nr);
					failed = true;
					break;
				}
				memcpy(np, pv, n * sizeof(*np));
				memcpy(nr, rv, n * sizeof(*nr));
				if (pv != pieces) {
					free(pv);
					free(rv);
				}
				pv = np;
				rv = nr;
				pcap *= 2;
			}
			pv[n].len = g->enc_len[v];
			rv[n] = g->ev.main;
			pv[n++].p = (const uint8_t *)(uintptr_t)g->enc_off[v];
		}
		if (!failed) {
			for (size_t i = 0; i < n; i++) /* offsets into pointers, ebuf is final */
				pv[i].p = ws->ebuf + (uintptr_t)pv[i].p;
			struct watch_stream *st = w->st;
			/* Asked for each watcher, not once a batch: the events
			 * queued for the stream's earlier watchers count. */
			if (st->nheld || (ws->hold_bytes && stream_behind(ws, call))) {
				failed = hold_events(ws, st, w, rev, pv, rv, n, s->now_ns) != 0;
				if (!failed) {
					w->sent_since_tick = true;
					s->stats.watch_held += n;
				}
			} else {
				failed = send_events(s, call, w, rev, pv, n) != 0;
			}
		}
		if (failed) {
			wm_del(&ws->m, &w->m);
			catchup_add(ws, w, false);
			continue;
		}
		w->next_rev = rev + 1;
	}
	if (pv != pieces) {
		free(pv);
		free(rv);
	}
	if (ws->match_lost) {
		struct watch_stream *st;

		/* Some watcher this batch concerns was not recorded: every
		 * synced watcher not sent this batch reads it from the db
		 * (before live_rev moves, so their next_rev stays <= rev). */
		ws->match_lost = false;
		dlist_for_each(st, &ws->streams, node)
			for (struct watcher *w = st->ws; w; w = w->snext)
				if (w->synced && w->next_rev <= rev) {
					wm_del(&ws->m, &w->m);
					catchup_add(ws, w, false);
				}
		s->more_work = true;
	}
	if (rev > ws->live_rev)
		ws->live_rev = rev;
	batch_drop(ws, nev);
}

static void read_ring(struct gw_server *s, struct watch_state *ws)
{
	struct bcast_rec rec;

	if (!ws->cur_valid)
		return;
	if (ws->read_every_ns) {
		int64_t now = clock_now_ns();
		if (now < atomic_load_explicit(&ws->next_read_ns, memory_order_relaxed))
			return;
		atomic_store_explicit(&ws->next_read_ns, now + ws->read_every_ns,
				      memory_order_relaxed);
	}
	for (unsigned n = 0; n < GW_RING_BATCH; n++) {
		int rc = bcast_read(ws->b, &ws->cur, &rec, ws->rbuf, ws->rcap);
		if (rc == -EAGAIN)
			break;
		if (rc == -ENOBUFS) {
			if (reserve((void **)&ws->rbuf, &ws->rcap, rec.len, 1)) {
				lapped(s, ws);
				break;
			}
			n--;
			continue;
		}
		if (rc) {
			lapped(s, ws);
			continue;
		}
		if (rec.type != EVENTS_REC_EVENT) {
			lapped(s, ws);
			continue;
		}
		/* A revision's records come together, and revisions in order. */
		struct events_ev ev;
		const struct events_ev *prev = ws->ngev ? &ws->gev[ws->ngev - 1].ev : NULL;
		if (events_decode(rec.data, rec.len, &ev) ||
		    (prev && (prev->last ? ev.main <= prev->main : ev.main != prev->main))) {
			log_warn("the watch event ring holds a malformed record; catching up from the db");
			lapped(s, ws);
			continue;
		}
		if (reserve((void **)&ws->gbuf, &ws->gcap, ws->glen + rec.len, 1) ||
		    reserve((void **)&ws->gev, &ws->gev_cap, ws->ngev + 1, sizeof(*ws->gev))) {
			lapped(s, ws);
			continue;
		}
		memcpy(ws->gbuf + ws->glen, rec.data, rec.len);
		ws->gev[ws->ngev] = (struct watch_gev){ .off = ws->glen, .len = rec.len, .ev = ev };
		ws->ngev++;
		ws->glen += rec.len;
		if (ev.last)
			ws->ncomplete = ws->ngev;
	}
	dispatch(s, ws);
	if (bcast_has_data(ws->b, &ws->cur))
		s->more_work = true;
	atomic_store_explicit(&ws->seen_head, ws->cur.pos, memory_order_release);
}

/* ---- catching up from the db ---- */

/* The value of key at revision rev - 1 (etcd's prev_kv), or NULL. */
static const uint8_t *prev_at(struct watch_state *ws, struct mvcc_view *v, const uint8_t *key,
			      size_t klen, int64_t rev, size_t *len)
{
	Etcdserverpb__RangeRequest r = ETCDSERVERPB__RANGE_REQUEST__INIT;

	if (rev <= 1)
		return NULL;
	r.key.data = (uint8_t *)key;
	r.key.len = klen;
	r.revision = rev - 1;
	if (mvcc_range(v, &r, &ws->res) || ws->res.n == 0)
		return NULL;
	*len = ws->res.kvs[0].kv_len;
	return ws->res.kvs[0].kv;
}

/*
 * Sends w the events of the db from w->next_rev on, in chunks that end at
 * revision boundaries, within *budget entries. Joins the synced watchers
 * when it reaches the db's revision. Returns false when w was removed
 * (compacted).
 */
static bool catchup_one(struct gw_server *s, struct watch_state *ws, struct grpc_call *call,
			struct watcher *w, struct mvcc_view *v, unsigned *budget, bool *done)
{
	struct btree_cursor c;
	struct btree_kv kv;
	uint8_t seek[REV_BYTES];
	struct watch_piece *pv = NULL;
	size_t n = 0, pcap = 0, bytes = 0, chunk_n = 0;
	int64_t cur_main = 0, chunk_rev = 0;
	int rc;

	*done = false;
	/* What the stream holds goes first, and before w->next_rev is read:
	 * a release that fails moves it back. */
	stream_release(s, w->st, call);
	if (v->compact_rev > 0 && w->next_rev < v->compact_rev) {
		/* etcd: a watcher whose start was compacted is cancelled */
		send_resp(s, call, 0, w->id, false, true, v->compact_rev, NULL, false, NULL, 0);
		watcher_remove(ws, w);
		return false;
	}
	ws->elen = 0;
	btree_cursor_init(&c, v->key);
	rev_encode((struct rev){ .main = w->next_rev, .sub = 0 }, seek);
	rc = btree_cursor_seek(&c, seek, sizeof(seek), &kv);
	for (;;) {
		struct rev r = { .main = INT64_MAX };
		bool tomb = false;
		if (rc == 0 && rev_decode(kv.key, kv.key_len, &r, &tomb))
			rc = -EBADMSG;
		bool end = rc != 0 || r.main > v->rev;
		if (end || r.main != cur_main) {
			if (cur_main) { /* cur_main is complete */
				chunk_n = n;
				chunk_rev = cur_main;
			}
			bool stop = end || *budget == 0 || !stream_has_room(call);
			bool clean = rc == 0 || rc == -ENOENT;
			if (chunk_n && (stop || bytes >= WATCH_CATCHUP_CHUNK)) {
				for (size_t i = 0; i < chunk_n; i++)
					pv[i].p = ws->ebuf + (uintptr_t)pv[i].p;
				if (send_events(s, call, w, end && clean ? v->rev : chunk_rev, pv,
						chunk_n))
					break;
				w->next_rev = chunk_rev + 1;
				n = chunk_n = 0;
				bytes = 0;
				ws->elen = 0;
			} else if (cur_main && chunk_n == 0 && cur_main >= w->next_rev) {
				w->next_rev = cur_main + 1; /* nothing of it concerned w */
			}
			if (end) {
				if (clean) {
					if (v->rev + 1 > w->next_rev)
						w->next_rev = v->rev + 1;
					*done = true;
				}
				break;
			}
			if (stop)
				break;
			cur_main = r.main;
		}
		if (*budget)
			(*budget)--;
		struct mvcc_kv f;
		if (mvcc_kv_decode(kv.val, kv.val_len, &f) == 0 && wm_covers(&ws->m, &w->m, f.key, f.key_len) &&
		    !(tomb ? w->nodelete : w->noput)) {
			uint8_t tbuf[64];
			const uint8_t *evkv = kv.val;
			size_t evlen = kv.val_len;
			uint8_t *heap = NULL;
			if (tomb) {
				struct mvcc_kv t = { .key = f.key, .key_len = f.key_len, .mod_rev = r.main };
				evlen = mvcc_kv_encoded_len(&t);
				uint8_t *out = evlen <= sizeof(tbuf) ? tbuf : (heap = malloc(evlen));
				if (!out)
					break;
				mvcc_kv_encode(&t, out);
				evkv = out;
			}
			const uint8_t *prev = NULL;
			size_t prev_len = 0;
			if (w->prev_kv && (tomb || f.create_rev != f.mod_rev))
				prev = prev_at(ws, v, f.key, f.key_len, r.main, &prev_len);
			size_t before = ws->elen;
			size_t off = enc_event(ws, tomb, evkv, evlen, prev, prev_len);
			free(heap);
			if (off == SIZE_MAX || reserve((void **)&pv, &pcap, n + 1, sizeof(*pv)))
				break;
			pv[n].p = (const uint8_t *)(uintptr_t)off;
			pv[n++].len = ws->elen - before;
			bytes += ws->elen - before;
		}
		rc = btree_cursor_next(&c, &kv);
	}
	free(pv);
	ws->elen = 0;
	return true;
}

static void catchup_turn(struct gw_server *s, struct watch_state *ws)
{
	struct gw_read rd;
	struct mvcc_view v;
	unsigned budget = WATCH_CATCHUP_BUDGET;

	if (!ws->catchup)
		return;
	if (gw_read_begin(s, &rd))
		return; /* tried again next turn */
	if (mvcc_view_open(rd.txn, &v)) {
		gw_read_end(s, &rd);
		return;
	}
	if (rd.cache)
		mvcc_view_use_cache(&v, rd.cache, rd.st.db_generation);
	struct watcher *prev = NULL, *w = ws->catchup;
	while (w && budget) {
		struct grpc_call *call = grpc_call_find(s->grpc, w->st->call_id);
		if (!call || !stream_has_room(call)) {
			prev = w;
			w = unext(w);
			continue;
		}
		bool done;
		if (!catchup_one(s, ws, call, w, &v, &budget, &done)) {
			w = prev ? unext(prev) : ws->catchup; /* w was removed */
			continue;
		}
		struct watcher *next = unext(w);
		/* Joins the ring's watchers only if every event after v.rev is
		 * still to come on the cursor: it was (re)started before this
		 * read began, and nothing past v.rev was dispatched yet. */
		if (done && ws->live_rev <= v.rev) {
			catchup_unlink(ws, prev, w);
			w->synced = true;
			wm_add(&ws->m, &w->m);
		} else {
			prev = w;
		}
		w = next;
	}
	mvcc_view_close(&v);
	gw_read_end(s, &rd);
}

/* ---- progress ---- */

static void progress_turn(struct gw_server *s, struct watch_state *ws)
{
	struct watch_stream *st;
	int64_t now = clock_now_ns();
	bool tick = now >= ws->next_tick_ns;

	if (tick)
		ws->next_tick_ns = now + ws->progress_ns;
	else if (!ws->progress_waiting)
		return; /* most turns: no stream to look at */
	dlist_for_each(st, &ws->streams, node) {
		if (!tick && !st->progress_wait)
			continue;
		struct grpc_call *call = grpc_call_find(s->grpc, st->call_id);
		if (!call)
			continue;
		/* held events go first, and before the revisions are read: a
		 * release that fails moves a watcher's next_rev back */
		stream_release(s, st, call);
		if (st->progress_wait) {
			int64_t min = INT64_MAX;
			for (struct watcher *w = st->ws; w; w = w->snext) {
				int64_t d = delivered(ws, w);
				min = d < min ? d : min;
			}
			if (min == INT64_MAX)
				min = published_rev(s) > ws->live_rev ? published_rev(s) : ws->live_rev;
			if (min >= st->progress_rev) {
				send_resp(s, call, min, -1, false, false, 0, NULL, false, NULL, 0);
				st->progress_rev = min;
				st->progress_wait = false;
				ws->progress_waiting--;
			}
		}
		if (!tick)
			continue;
		for (struct watcher *w = st->ws; w; w = w->snext) {
			if (!w->progress_notify)
				continue;
			/* etcd elides a tick's progress when events went out since
			 * the last one, and sends only for a synced watcher */
			if (!w->sent_since_tick && w->synced && stream_has_room(call))
				send_resp(s, call, delivered(ws, w), w->id, false, false, 0, NULL,
					  false, NULL, 0);
			w->sent_since_tick = false;
		}
	}
}

/* ---- the service ---- */

void watch_turn(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (ws) {
		shm_metric_set(s->metrics, SHM_M_WATCHERS, ws->nwatchers);
		shm_metric_set(s->metrics, SHM_M_WATCH_STREAMS, ws->nstreams);
		shm_metric_set(s->metrics, SHM_M_SLOW_WATCHERS, ws->ncatchup);
	}
	if (!ws || (dlist_empty(&ws->streams) && !ws->holds))
		return;
	release_turn(s, ws);
	read_ring(s, ws);
	catchup_turn(s, ws);
	progress_turn(s, ws);
}

void watch_flushed(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (!ws)
		return;
	for (struct watcher *w = ws->catchup; w; w = unext(w)) {
		struct grpc_call *call = grpc_call_find(s->grpc, w->st->call_id);
		if (call && stream_has_room(call)) {
			s->more_work = true;
			return;
		}
	}
	if (ws->progress_waiting)
		s->more_work = true; /* retried while catch-ups run */
	if (ws->nholding) {
		struct watch_stream *st;
		dlist_for_each(st, &ws->streams, node)
			if (held_due(s, ws, st, s->now_ns)) {
				s->more_work = true; /* release_turn sends them */
				return;
			}
	}
}

int64_t watch_next_deadline(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (!ws || dlist_empty(&ws->streams))
		return INT64_MAX;
	int64_t r = atomic_load_explicit(&ws->next_read_ns, memory_order_relaxed);
	int64_t next = ws->read_every_ns && ws->cur_valid && r < ws->next_tick_ns ? r : ws->next_tick_ns;
	return ws->release_at_ns < next ? ws->release_at_ns : next;
}

bool watch_has_work(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (!ws || !atomic_load_explicit(&ws->active, memory_order_acquire))
		return false;
	if (ws->read_every_ns && clock_now_ns() < atomic_load_explicit(&ws->next_read_ns,
								  memory_order_relaxed))
		return false; /* the timer brings the next read */
	struct bcast_cursor c = {
		.pos = atomic_load_explicit(&ws->seen_head, memory_order_relaxed),
	};
	return bcast_has_data(ws->b, &c);
}

void watch_hold(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (!ws)
		return;
	ws->holds++;
	start_cursor(s, ws);
}

void watch_release(struct gw_server *s)
{
	struct watch_state *ws = W(s);

	if (!ws || ws->holds == 0)
		return;
	if (--ws->holds == 0 && ws->nwatchers == 0) {
		ws->cur_valid = false;
		atomic_store_explicit(&ws->active, false, memory_order_relaxed);
	}
}

bool watch_wants_events(struct gw_server *s)
{
	struct watch_state *ws = W(s);
	return ws && atomic_load_explicit(&ws->active, memory_order_relaxed);
}

static const struct grpc_handler watch_handler = {
	.on_message = watch_message,
	.on_cancel = watch_cancel,
};

int watch_register(struct gw_server *s)
{
	struct watch_state *ws = calloc(1, sizeof(*ws));
	const char *env = getenv("CETCD_WATCH_PROGRESS_MS");

	if (!ws || wm_init(&ws->m, offsetof(struct watcher, bytes))) {
		free(ws);
		return -ENOMEM;
	}
	dlist_init(&ws->streams);
	ws->b = shm_events(s->r);
	ws->progress_ns = WATCH_PROGRESS_NS;
	if (s->cfg && s->cfg->experimental_watch_progress_notify_interval_ns > 0)
		ws->progress_ns = s->cfg->experimental_watch_progress_notify_interval_ns;
	if (env && atoll(env) > 0)
		ws->progress_ns = atoll(env) * 1000000ll;
	ws->next_tick_ns = clock_now_ns() + ws->progress_ns;
	ws->hold_bytes = WATCH_HOLD_BYTES;
	env = getenv("CETCD_WATCH_HOLD_BYTES");
	if (env)
		ws->hold_bytes = (size_t)atoll(env);
	ws->release_at_ns = INT64_MAX;
	env = getenv("CETCD_WATCH_READ_EVERY_MS");
	if (env && atoll(env) > 0)
		ws->read_every_ns = atoll(env) * 1000000ll;
	atomic_init(&ws->next_read_ns, 0);
	atomic_init(&ws->active, false);
	atomic_init(&ws->seen_head, 0);
	mvcc_range_result_init(&ws->res);
	s->watch = ws;
	return grpc_server_handle(s->grpc, "/etcdserverpb.Watch/Watch", &watch_handler, s);
}

void watch_free(struct gw_server *s)
{
	struct watch_state *ws = W(s);
	struct watch_stream *st;

	if (!ws)
		return;
	while ((st = dlist_entry(dlist_first(&ws->streams), struct watch_stream, node)))
		stream_free(ws, st);
	wm_fini(&ws->m);
	mvcc_range_result_free(&ws->res);
	free(ws->rbuf);
	free(ws->gbuf);
	free(ws->gev);
	free(ws->ebuf);
	free(ws->pairs);
	free(ws->touched);
	free(ws->tslots);
	free(ws);
	s->watch = NULL;
}
