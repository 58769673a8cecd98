/*
 * Seqlocked status records (see status.h).
 *
 * Ordering (see barrier.h): the writer makes `seq` odd, release fence,
 * stores the words, then stores the next even `seq` with release. A reader
 * loads `seq` with acquire, loads the words, acquire fence, re-loads
 * `seq`: equal and even means no write overlapped the copy. The words are
 * relaxed atomics, so a torn read is a retry, never undefined behaviour.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "base/clock/clock.h"
#include "shm/barrier.h"
#include "shm/layout.h"
#include "shm/status.h"

/* A reader that keeps seeing a write in progress spins, then yields, and
 * gives up with -EAGAIN after STATUS_READ_GIVE_UP_MS: the writer died
 * mid-write (a live writer is only ever a few stores away from done, even
 * when it is preempted on a loaded machine). */
#define STATUS_READ_SPINS 1000
#define STATUS_READ_GIVE_UP_MS 500

struct status_seqlock {
	_Atomic uint64_t seq; /* odd while a write is in progress */
	_Atomic uint64_t words[STATUS_SEQLOCK_WORDS];
};
_Static_assert(sizeof(struct status_seqlock) == STATUS_SEQLOCK_BYTES,
	       "seqlock size");

void status_seqlock_init(void *mem)
{
	struct status_seqlock *s = mem;
	unsigned i;

	atomic_init(&s->seq, 0);
	for (i = 0; i < STATUS_SEQLOCK_WORDS; i++)
		atomic_init(&s->words[i], 0);
}

/* The protocol on a sequence word and the n words after it, for records
 * of any length: status_seqlock's, and the waiting compactions'. */
static void seqlock_write(_Atomic uint64_t *seqp, _Atomic uint64_t *dst, const uint64_t *words,
			  unsigned n)
{
	uint64_t seq = atomic_load_explicit(seqp, memory_order_relaxed);
	unsigned i;

	seq |= 1; /* odd: also finishes over a dead writer's odd value */
	atomic_store_explicit(seqp, seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (i = 0; i < n; i++)
		atomic_store_explicit(&dst[i], words[i], memory_order_relaxed);
	atomic_store_explicit(seqp, seq + 1, memory_order_release);
}

static int seqlock_read(_Atomic uint64_t *seqp, _Atomic uint64_t *src, uint64_t *words,
			unsigned n)
{
	int64_t give_up = 0;
	uint64_t s1, s2;
	unsigned i, tries;

	for (tries = 0;; tries++) {
		if (tries == STATUS_READ_SPINS) {
			give_up = clock_now_ms() + STATUS_READ_GIVE_UP_MS;
		} else if (tries > STATUS_READ_SPINS) {
			if (clock_now_ms() > give_up)
				break;
			sched_yield();
		} else if (tries) {
			shm_cpu_relax();
		}
		s1 = atomic_load_explicit(seqp, memory_order_acquire);
		if (s1 & 1)
			continue;
		for (i = 0; i < n; i++)
			words[i] = atomic_load_explicit(&src[i],
							memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(seqp, memory_order_relaxed);
		if (s1 == s2)
			return 0;
	}
	return shm_set_error(-EAGAIN, "status: a write stayed in progress for %d ms; its "
			     "writer died mid-write and has not been restarted yet",
			     STATUS_READ_GIVE_UP_MS);
}

void status_seqlock_write(struct status_seqlock *s, const uint64_t *words, unsigned n)
{
	seqlock_write(&s->seq, s->words, words, n < STATUS_SEQLOCK_WORDS ? n : STATUS_SEQLOCK_WORDS);
}

int status_seqlock_read(const struct status_seqlock *s, uint64_t *words, unsigned n)
{
	struct status_seqlock *m = (struct status_seqlock *)s;

	return seqlock_read(&m->seq, m->words, words,
			    n < STATUS_SEQLOCK_WORDS ? n : STATUS_SEQLOCK_WORDS);
}

uint64_t status_seqlock_version(const struct status_seqlock *s)
{
	struct status_seqlock *m = (struct status_seqlock *)s;

	return atomic_load_explicit(&m->seq, memory_order_acquire) / 2;
}

static struct status_seqlock *status_raftd_lock(struct shm_region *r)
{
	return (struct status_seqlock *)shm_status_at(r)->raftd;
}

static struct status_seqlock *status_stored_lock(struct shm_region *r)
{
	return (struct status_seqlock *)shm_status_at(r)->stored;
}

enum {
	RAFTD_LEADER, RAFTD_TERM, RAFTD_COMMIT, RAFTD_IS_LEADER, RAFTD_SETTLED_TERM,
	RAFTD_SETTLED_INDEX, RAFTD_IS_LEARNER, RAFTD_WORDS
};
enum {
	STORED_ROOT, STORED_TXID, STORED_APPLIED, STORED_REVISION,
	STORED_HIGH_WATER, STORED_EPOCH, STORED_DURABLE, STORED_DB_GEN, STORED_FLAGS,
	STORED_DB_INO, STORED_FREE_PAGES, STORED_DEFRAG_COUNT, STORED_DEFRAG_LAST,
	STORED_DEFRAG_TOTAL, STORED_AUTH_REVISION, STORED_WORDS
};
/* The bits of STORED_FLAGS. */
#define STORED_FLAG_NO_SPACE 1u
#define STORED_FLAG_AUTH_ENABLED 2u
_Static_assert(STORED_WORDS <= STATUS_SEQLOCK_WORDS, "stored's record fits its seqlock");

void status_raftd_write(struct shm_region *r, const struct status_raftd *st)
{
	uint64_t w[RAFTD_WORDS];

	w[RAFTD_LEADER] = st->leader_id;
	w[RAFTD_TERM] = st->term;
	w[RAFTD_COMMIT] = st->commit_index;
	w[RAFTD_IS_LEADER] = st->is_leader;
	w[RAFTD_SETTLED_TERM] = st->settled_term;
	w[RAFTD_SETTLED_INDEX] = st->settled_index;
	w[RAFTD_IS_LEARNER] = st->is_learner;
	status_seqlock_write(status_raftd_lock(r), w, RAFTD_WORDS);
}

int status_raftd_read(struct shm_region *r, struct status_raftd *out)
{
	uint64_t w[RAFTD_WORDS];
	int rc = status_seqlock_read(status_raftd_lock(r), w, RAFTD_WORDS);

	if (rc)
		return rc;
	out->leader_id = w[RAFTD_LEADER];
	out->term = w[RAFTD_TERM];
	out->commit_index = w[RAFTD_COMMIT];
	out->is_leader = w[RAFTD_IS_LEADER] != 0;
	out->settled_term = w[RAFTD_SETTLED_TERM];
	out->settled_index = w[RAFTD_SETTLED_INDEX];
	out->is_learner = w[RAFTD_IS_LEARNER] != 0;
	return 0;
}

void status_stored_write(struct shm_region *r, const struct status_stored *st)
{
	uint64_t w[STORED_WORDS];

	w[STORED_ROOT] = st->root_page;
	w[STORED_TXID] = st->txid;
	w[STORED_APPLIED] = st->applied_index;
	w[STORED_REVISION] = st->revision;
	w[STORED_HIGH_WATER] = st->high_water_page;
	w[STORED_EPOCH] = st->epoch;
	w[STORED_DURABLE] = st->durable_index;
	w[STORED_DB_GEN] = st->db_generation;
	w[STORED_FLAGS] = (st->db_no_space ? STORED_FLAG_NO_SPACE : 0) |
			  (st->auth_enabled ? STORED_FLAG_AUTH_ENABLED : 0);
	w[STORED_DB_INO] = st->db_ino;
	w[STORED_FREE_PAGES] = st->free_pages;
	w[STORED_DEFRAG_COUNT] = st->defrag_count;
	w[STORED_DEFRAG_LAST] = st->defrag_last_ns;
	w[STORED_DEFRAG_TOTAL] = st->defrag_total_ns;
	w[STORED_AUTH_REVISION] = st->auth_revision;
	status_seqlock_write(status_stored_lock(r), w, STORED_WORDS);
}

int status_stored_read(struct shm_region *r, struct status_stored *out)
{
	uint64_t w[STORED_WORDS];
	int rc = status_seqlock_read(status_stored_lock(r), w, STORED_WORDS);

	if (rc)
		return rc;
	out->root_page = w[STORED_ROOT];
	out->txid = w[STORED_TXID];
	out->applied_index = w[STORED_APPLIED];
	out->revision = w[STORED_REVISION];
	out->high_water_page = w[STORED_HIGH_WATER];
	out->epoch = w[STORED_EPOCH];
	out->durable_index = w[STORED_DURABLE];
	out->db_generation = w[STORED_DB_GEN];
	out->db_no_space = (w[STORED_FLAGS] & STORED_FLAG_NO_SPACE) != 0;
	out->auth_enabled = (w[STORED_FLAGS] & STORED_FLAG_AUTH_ENABLED) != 0;
	out->db_ino = w[STORED_DB_INO];
	out->free_pages = w[STORED_FREE_PAGES];
	out->defrag_count = w[STORED_DEFRAG_COUNT];
	out->defrag_last_ns = w[STORED_DEFRAG_LAST];
	out->defrag_total_ns = w[STORED_DEFRAG_TOTAL];
	out->auth_revision = w[STORED_AUTH_REVISION];
	return 0;
}

uint64_t status_stored_version(struct shm_region *r)
{
	return status_seqlock_version(status_stored_lock(r));
}

static _Atomic uint64_t *status_delivered_word(struct shm_region *r)
{
	return (_Atomic uint64_t *)shm_status_at(r)->stored_delivered;
}

void status_delivered_init(void *mem)
{
	atomic_init((_Atomic uint64_t *)mem, 0);
}

void status_stored_deliver(struct shm_region *r, uint64_t index)
{
	atomic_store_explicit(status_delivered_word(r), index, memory_order_release);
}

uint64_t status_stored_delivered(struct shm_region *r)
{
	return atomic_load_explicit(status_delivered_word(r), memory_order_acquire);
}

/* The waiting compactions' record: a sequence word, then the count and
 * STATUS_WAITING_WORDS words an entry, under the same protocol as the
 * status records (seqlock_write, seqlock_read). */
#define STATUS_WAITING_WORDS 6u
#define STATUS_WAITING_ALL (1u + STATUS_WAITING_MAX * STATUS_WAITING_WORDS)
struct status_waiting_rec {
	_Atomic uint64_t seq;
	_Atomic uint64_t words[STATUS_WAITING_ALL];
};
_Static_assert(sizeof(struct status_waiting_rec) <= STATUS_WAITING_BYTES,
	       "the waiting record fits its bytes");

static struct status_waiting_rec *status_waiting_at(struct shm_region *r)
{
	return (struct status_waiting_rec *)shm_status_at(r)->stored_waiting;
}

void status_waiting_init(void *mem)
{
	struct status_waiting_rec *w = mem;

	atomic_init(&w->seq, 0);
	for (unsigned i = 0; i < STATUS_WAITING_ALL; i++)
		atomic_init(&w->words[i], 0);
}

void status_waiting_write(struct shm_region *r, const struct status_waiting *w, unsigned n)
{
	struct status_waiting_rec *rec = status_waiting_at(r);
	uint64_t words[STATUS_WAITING_ALL];

	if (n > STATUS_WAITING_MAX)
		n = STATUS_WAITING_MAX;
	words[0] = n;
	for (unsigned i = 0; i < n; i++) {
		uint64_t *d = words + 1 + i * STATUS_WAITING_WORDS;
		d[0] = w[i].origin.member_id;
		d[1] = w[i].origin.slot;
		d[2] = w[i].origin.generation;
		d[3] = w[i].origin.request_id;
		d[4] = w[i].index;
		d[5] = w[i].term;
	}
	seqlock_write(&rec->seq, rec->words, words, 1 + n * STATUS_WAITING_WORDS);
}

int status_waiting_read(struct shm_region *r, struct status_waiting *w, unsigned max)
{
	struct status_waiting_rec *rec = status_waiting_at(r);
	uint64_t words[STATUS_WAITING_ALL];
	int rc = seqlock_read(&rec->seq, rec->words, words, STATUS_WAITING_ALL);

	if (rc)
		return rc;
	uint64_t n = words[0] < STATUS_WAITING_MAX ? words[0] : STATUS_WAITING_MAX;
	if (n > max)
		n = max;
	for (unsigned i = 0; i < n; i++) {
		const uint64_t *d = words + 1 + i * STATUS_WAITING_WORDS;
		w[i] = (struct status_waiting){
			.origin = { .member_id = d[0], .slot = (uint32_t)d[1],
				    .generation = d[2], .request_id = d[3] },
			.index = d[4],
			.term = d[5],
		};
	}
	return (int)n;
}
