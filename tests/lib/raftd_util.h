/*
 * Helpers for the tests of raftd's loop pieces: a member region with small
 * rings, and the other side of raftd's rings, played by the test (a
 * gatewayd pushing proposals and read-index asks and taking replies; a
 * stored taking committed entries and publishing its status).
 */
#ifndef CETCD_TESTS_RAFTD_UTIL_H
#define CETCD_TESTS_RAFTD_UTIL_H

#include "wal_util.h"

#include "raftd/raft/raft.h"
#include "shm/msg.h"
#include "shm/region.h"
#include "shm/ring.h"
#include "shm/slot.h"
#include "shm/status.h"

/* A region for raftd tests at path (in the WAL tests' scratch dir), with
 * rings sized for max_request_bytes (small ones fill quickly). */
static inline struct shm_region *rt_region(char *path, size_t len, uint64_t max_request_bytes)
{
	struct shm_region *r;
	struct shm_region_params p = { .slot_count = 4, .max_request_bytes = max_request_bytes };

	wt_path(path, len, "region");
	CHECK_EQ(shm_region_create(path, &p, &r), 0);
	return r;
}

/* Payload i of a test proposal: recognisable bytes, len of them. */
static inline void rt_payload(uint8_t *buf, uint32_t len, uint64_t slot, uint64_t i)
{
	for (uint32_t k = 0; k < len; k++)
		buf[k] = (uint8_t)(slot * 101 + i * 7 + k);
	if (len >= 16) {
		memcpy(buf, &slot, 8);
		memcpy(buf + 8, &i, 8);
	}
}

static inline uint32_t rt_len(uint64_t i)
{
	return 16 + (uint32_t)(i * 13 % 48);
}

/* Pushes MSG_PROPOSE (request id rid, payload rt_payload(slot, rid)) on
 * ring. Returns ring_push's result. */
static inline int rt_propose_flags(struct ring *ring, const struct shm_slot_ref *s,
				   uint64_t rid, uint64_t term, uint32_t flags)
{
	uint8_t rec[256];
	struct msg_propose h = {
		.origin = { .member_id = 1, .slot = s ? s->index : 0,
			    .generation = s ? s->generation : 0, .request_id = rid },
		.term = term, .data_len = rt_len(rid), .flags = flags,
	};
	memcpy(rec, &h, sizeof(h));
	rt_payload(rec + sizeof(h), h.data_len, s ? s->index : 99, rid);
	return ring_push(ring, MSG_PROPOSE, rec, (uint32_t)(sizeof(h) + h.data_len));
}

static inline int rt_propose(struct ring *ring, const struct shm_slot_ref *s, uint64_t rid,
			     uint64_t term)
{
	return rt_propose_flags(ring, s, rid, term, 0);
}

static inline int rt_read_index(struct ring *ring, const struct shm_slot_ref *s, uint64_t rid)
{
	struct msg_read_index h = {
		.origin = { .member_id = 1, .slot = s->index, .generation = s->generation,
			    .request_id = rid },
	};
	return ring_push(ring, MSG_READ_INDEX, &h, sizeof(h));
}

/* Which proposal a committed entry carries: its slot and request id (from
 * the payload), after checking every byte. False for an entry that is no
 * test proposal (bootstrap, empty leader entries). */
static inline bool rt_decode(const uint8_t *data, uint32_t len, uint64_t *slot, uint64_t *rid)
{
	uint8_t want[256];
	if (len < 16 || len > sizeof(want))
		return false;
	memcpy(slot, data, 8);
	memcpy(rid, data + 8, 8);
	if (len != rt_len(*rid))
		return false;
	rt_payload(want, len, *slot, *rid);
	return memcmp(want, data, len) == 0;
}

/* One record taken from a ring: its type, header and body copied out. */
struct rt_rec {
	uint32_t type;
	uint32_t len;
	uint8_t data[512];
};

static inline bool rt_take(struct ring *ring, struct rt_rec *out)
{
	struct ring_rec rec;
	if (ring_peek(ring, &rec))
		return false;
	CHECK(rec.len <= sizeof(out->data));
	out->type = rec.type;
	out->len = rec.len;
	memcpy(out->data, rec.data, rec.len);
	ring_release(ring, &rec);
	return true;
}

/* A MSG_COMMITTED record's header; its data starts at rec->data + the
 * header. */
static inline struct msg_committed rt_committed(const struct rt_rec *rec)
{
	struct msg_committed h;
	CHECK_EQ(rec->type, MSG_COMMITTED);
	CHECK(rec->len >= sizeof(h));
	memcpy(&h, rec->data, sizeof(h));
	CHECK_EQ(h.data_len, rec->len - sizeof(h));
	return h;
}

/* Publishes stored's status with the given applied and durable index and
 * epoch. */
static inline void rt_stored_status(struct shm_region *r, uint64_t epoch, uint64_t applied,
				    uint64_t durable)
{
	struct status_stored st = { .epoch = epoch, .applied_index = applied,
				    .durable_index = durable };
	status_stored_write(r, &st);
}

/* A Raft core for member id among voters, its hard state at term, its log
 * empty. */
static inline struct raft *rt_core_at(uint64_t id, const uint64_t *voters, size_t n,
				      uint64_t term)
{
	struct raft_config cfg;
	struct raft *raft;
	struct raft_hardstate hs = { .term = term };

	raft_config_defaults(&cfg);
	cfg.id = id;
	cfg.voters = voters;
	cfg.n_voters = n;
	cfg.seed = 1;
	CHECK_EQ(raft_new(&cfg, &hs, 0, 0, NULL, 0, 0, &raft), 0);
	return raft;
}

#endif
