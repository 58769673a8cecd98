/*
 * raftpb on the wire: the messages peers exchange (raftpb.Message with its
 * Entries and Snapshot) and the ConfChange an EntryConfChange entry
 * carries, encoded byte for byte as etcd 3.4's gogo-generated Marshal
 * encodes them and decoded as its Unmarshal decodes them.
 *
 * etcd's rules that shape the bytes:
 *   - fields are written in a fixed order, and the non-nullable scalars
 *     (every field below but the bytes fields and repeated ones) are
 *     written even when zero: Message always has type..index, commit,
 *     snapshot (itself with metadata, conf_state and auto_leave), reject
 *     and rejectHint;
 *   - a bytes field (Entry.Data, Snapshot.data, Message.context,
 *     ConfChange.context) is written when present, even empty: gogo
 *     tells nil from empty, so each carries a has_ flag here;
 *   - enums are int32 in Go: a negative one is written as a 10-byte
 *     varint, and decoding keeps the low 32 bits of the varint;
 *   - decoding takes fields in any order; a repeated scalar field takes
 *     the last value, Entries append, and the embedded non-nullable
 *     messages (snapshot, metadata, conf_state) merge, so their id lists
 *     append too; ConfState lists are accepted packed or not; unknown
 *     fields (groups included) are skipped and dropped.
 *
 * Decoding is zero-copy for bytes: entry data, snapshot data and context
 * point into the decoded buffer, which must outlive the message. The
 * arrays (entries, conf state ids) of a decoded message are one raftd
 * allocation, freed by raftmsg_release.
 *
 * Encoding writes into a caller's buffer of exactly the *_size bytes; no
 * encoder fails or allocates.
 */
#ifndef CETCD_RAFTD_RAFTMSG_H
#define CETCD_RAFTD_RAFTMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* raftpb.Entry. */
struct raftmsg_entry {
	uint64_t term;
	uint64_t index;
	int32_t type;          /* raftpb.EntryType (enum raft_entry_type) */
	bool has_data;         /* Data present; false: len == 0, data NULL */
	size_t len;
	const uint8_t *data;
};

/* raftpb.ConfState: the members a snapshot's configuration holds. */
struct raftmsg_conf_state {
	const uint64_t *voters;
	size_t n_voters;
	const uint64_t *learners;
	size_t n_learners;
	const uint64_t *voters_outgoing;
	size_t n_voters_outgoing;
	const uint64_t *learners_next;
	size_t n_learners_next;
	bool auto_leave;
};

/* raftpb.Snapshot with its SnapshotMetadata. In a MsgSnap from etcd 3.4,
 * data is the v2 store's JSON; the db file follows the message in the
 * snapshot body (see msgframe.h). */
struct raftmsg_snapshot {
	bool has_data;
	size_t len;
	const uint8_t *data;
	struct raftmsg_conf_state conf_state;
	uint64_t index;
	uint64_t term;
};

/* raftpb.Message. */
struct raftmsg {
	int32_t type;          /* raftpb.MessageType (enum raft_msg_type) */
	uint64_t to;
	uint64_t from;
	uint64_t term;
	uint64_t log_term;
	uint64_t index;
	struct raftmsg_entry *entries;
	size_t n_entries;
	uint64_t commit;
	struct raftmsg_snapshot snapshot;
	bool reject;
	uint64_t reject_hint;
	bool has_context;
	size_t context_len;
	const uint8_t *context;
	void *alloc;           /* decoded: the block holding the arrays; else NULL */
};

/* raftpb.ConfChange, the data of an EntryConfChange entry. */
struct raftmsg_conf_change {
	uint64_t id;
	int32_t type;          /* raftpb.ConfChangeType */
	uint64_t node_id;
	bool has_context;
	size_t context_len;
	const uint8_t *context;
};

/* raftpb.ConfChangeType */
enum raftmsg_conf_change_type {
	RAFTMSG_CONF_ADD_NODE = 0,
	RAFTMSG_CONF_REMOVE_NODE = 1,
	RAFTMSG_CONF_UPDATE_NODE = 2,
	RAFTMSG_CONF_ADD_LEARNER_NODE = 3,
};

/* ---- Entry ---- */

size_t raftmsg_entry_size(const struct raftmsg_entry *e);
/* Writes raftmsg_entry_size(e) bytes at dst; returns that count. */
size_t raftmsg_entry_encode(const struct raftmsg_entry *e, uint8_t *dst);
/* Decodes p[0..len) into out (out->data points into p). 0 or -EBADMSG. */
int raftmsg_entry_decode(const uint8_t *p, size_t len, struct raftmsg_entry *out);

/* ---- Message ---- */

size_t raftmsg_size(const struct raftmsg *m);
/* Writes raftmsg_size(m) bytes at dst; returns that count. m->alloc is
 * not read. */
size_t raftmsg_encode(const struct raftmsg *m, uint8_t *dst);

/*
 * Decodes p[0..len) into out. Bytes fields point into p; entries and the
 * conf state lists live in out->alloc (NULL when there are none), one
 * raftd allocation of at most 24 times len (an empty entry takes 2 bytes
 * on the wire and 48 here, as in etcd's own decoder), which
 * raftmsg_release frees. 0; -EBADMSG for bytes etcd's Unmarshal refuses (out is then
 * zeroed, nothing allocated); -ENOMEM.
 */
int raftmsg_decode(const uint8_t *p, size_t len, struct raftmsg *out);

/* Frees what raftmsg_decode allocated and zeroes m. Safe on a zeroed
 * message and on one built by hand (alloc NULL). */
void raftmsg_release(struct raftmsg *m);

/* ---- Snapshot on its own (as in a snap file's snappb.snapshot) ---- */

size_t raftmsg_snapshot_size(const struct raftmsg_snapshot *s);
size_t raftmsg_snapshot_encode(const struct raftmsg_snapshot *s, uint8_t *dst);
/* As raftmsg_decode; the conf state lists live in *alloc (NULL when
 * empty), freed with raftd_free. 0, -EBADMSG or -ENOMEM. */
int raftmsg_snapshot_decode(const uint8_t *p, size_t len, struct raftmsg_snapshot *out,
			    void **alloc);

/* ---- ConfChange ---- */

size_t raftmsg_conf_change_size(const struct raftmsg_conf_change *cc);
size_t raftmsg_conf_change_encode(const struct raftmsg_conf_change *cc, uint8_t *dst);
/* out->context points into p. 0 or -EBADMSG. */
int raftmsg_conf_change_decode(const uint8_t *p, size_t len, struct raftmsg_conf_change *out);

/* ---- What etcd puts in the bytes fields ---- */

/* The context of a MsgVote / MsgPreVote that a leadership transfer
 * started (raft's campaignTransfer): such a vote ignores the leader
 * lease. */
#define RAFTMSG_CAMPAIGN_TRANSFER "CampaignTransfer"
#define RAFTMSG_CAMPAIGN_TRANSFER_LEN 16u

/* True for the context of a transfer's vote. */
bool raftmsg_is_campaign_transfer(const struct raftmsg *m);

/*
 * A ReadIndex request's context as etcd's server makes it: the request id
 * as 8 big-endian bytes. It travels as Entries[0].Data of MsgReadIndex and
 * MsgReadIndexResp, and as the context of the MsgHeartbeat rounds that
 * confirm it (and their MsgHeartbeatResp).
 */
#define RAFTMSG_READ_CTX_LEN 8u
void raftmsg_read_ctx_put(uint8_t out[RAFTMSG_READ_CTX_LEN], uint64_t id);
/* The id in a context of 8 bytes; -EINVAL for any other length (a
 * context this member did not make). */
int raftmsg_read_ctx_get(const uint8_t *p, size_t len, uint64_t *id);

#endif
