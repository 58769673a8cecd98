/*
 * The messages the daemons of one member exchange on the rings.
 *
 * Every ring record is (type, payload) (shm/ring.h). The payload of each
 * type below starts with a fixed header struct in host byte order (all
 * processes of a member run on one host and one build) followed by the
 * bytes the header says. Types count from 1; the attach exchange
 * (shm/hello.h) keeps its own types at the top of the space.
 *
 * Request identity (invariant 2, docs/invariants.md) is (member id, slot, slot
 * generation, request id): struct msg_origin. A result is delivered to a
 * gatewayd call only if all four match; a restarted gatewayd (new
 * generation) never takes its predecessor's results, and a proposal
 * forwarded from another member is answered by that member.
 *
 * Raft entry data. A proposal's bytes are an etcdserverpb.
 * InternalRaftRequest followed by one extra field, MSG_ORIGIN_FIELD, that
 * carries the msg_origin as a nested message of four varints (member_id=1,
 * slot=2, generation=3, request_id=4). Appending a field to an encoded
 * message is still a valid encoding of that message, so the entry stays an
 * InternalRaftRequest to any decoder (etcd's keeps it as an unknown field).
 * raftd never looks inside: the bytes go to the WAL and to stored as they
 * came. stored finds the origin with msg_origin_find.
 *
 * Flows (ring names from shm/slot.h):
 *   gatewayd -> raftd   SHM_SLOT_TO_RAFTD      MSG_PROPOSE, MSG_READ_INDEX
 *   raftd -> gatewayd   SHM_SLOT_FROM_RAFTD    MSG_READ_INDEX_REPLY,
 *                                              MSG_PROPOSE_REJECT
 *   raftd -> stored     SHM_RING_COMMITTED     MSG_COMMITTED,
 *                                              MSG_SNAPSHOT_INSTALL
 *   stored -> raftd     SHM_RING_STORED_PROPOSALS  MSG_PROPOSE
 *   stored -> gatewayd  SHM_SLOT_FROM_STORED   MSG_RESULT, MSG_RESULT_INTERIM
 *   gatewayd -> stored  SHM_SLOT_TO_STORED     MSG_KEEPALIVE, MSG_DEFRAG
 */
#ifndef CETCD_SHM_MSG_H
#define CETCD_SHM_MSG_H

#include <stddef.h>
#include <stdint.h>

enum msg_type {
	MSG_PROPOSE = 1,          /* msg_propose + entry data */
	MSG_READ_INDEX = 2,       /* msg_read_index */
	MSG_READ_INDEX_REPLY = 3, /* msg_read_index_reply */
	MSG_PROPOSE_REJECT = 4,   /* msg_reject + message text */
	MSG_COMMITTED = 5,        /* msg_committed + entry data */
	MSG_RESULT = 6,           /* msg_result + response bytes or text */
	MSG_KEEPALIVE = 7,        /* msg_keepalive */
	MSG_MOVE_LEADER = 8,      /* msg_move_leader: a gateway asks raftd to
				   * hand leadership over; the answer is a
				   * MSG_RESULT or MSG_PROPOSE_REJECT from
				   * raftd */
	MSG_PROMOTE = 9,          /* msg_promote: a gateway asks raftd to
				   * promote a learner; raftd refuses it
				   * (MSG_PROPOSE_REJECT) or proposes the
				   * change, which stored answers */
	MSG_SNAPSHOT_INSTALL = 10, /* msg_snapshot_install + path: raftd
				    * tells stored to replace its db with a
				    * db received from the leader */
	MSG_LEASE_FORWARD = 11,   /* msg_keepalive: a follower's gateway asks
				   * raftd to renew a lease or read its
				   * remaining time at the leader (POST
				   * /leases, /leases/internal on its peer
				   * URL); raftd answers with a MSG_RESULT
				   * as stored's lessor would */
	MSG_DEFRAG = 12,          /* msg_defrag: a gateway asks stored to
				   * defragment the db (Maintenance.
				   * Defragment); stored answers with a
				   * MSG_RESULT once the new file is the db */
	MSG_RESULT_INTERIM = 13,  /* msg_result_interim: stored still works
				   * on the request (a physical compaction's
				   * deletion); its MSG_RESULT comes later */
};

/* Field number of the origin appended to proposal bytes; far above any
 * field etcd's InternalRaftRequest uses. */
#define MSG_ORIGIN_FIELD 4096u
/* Most bytes msg_origin_encode writes. */
#define MSG_ORIGIN_MAX_BYTES 48u

struct msg_origin {
	uint64_t member_id;
	uint32_t slot;
	uint32_t reserved;   /* zero */
	uint64_t generation; /* of the slot, when the request was made */
	uint64_t request_id; /* unique within (slot, generation) */
};

/* MSG_PROPOSE. data_len bytes of entry data follow (the proposal bytes
 * with the origin field already appended). */
struct msg_propose {
	struct msg_origin origin;
	uint64_t term;     /* stored's lease revokes and checkpoints: the term
			    * they were made in (invariant 8, docs/invariants.md); with
			    * MSG_PROPOSE_F_SEEN_TERM, a gateway's request: the
			    * raftd term it saw when it sent it; else 0 */
	uint32_t data_len;
	uint32_t flags;    /* MSG_PROPOSE_F_* */
};

/* msg_propose.flags: the data is a raftpb.ConfChange (with the origin
 * appended), proposed as an EntryConfChange; otherwise an EntryNormal. */
#define MSG_PROPOSE_F_CONF_CHANGE 1u
/* msg_propose.flags: `term` is the term the gateway saw in raftd's status
 * when it sent the request. raftd refuses it with "etcdserver: leader
 * changed" if its term has moved on since, so that a gateway can tell a
 * request lost in a leader change (status_raftd.settled_term) from one
 * still on its way. */
#define MSG_PROPOSE_F_SEEN_TERM 2u

/* MSG_READ_INDEX: a gatewayd asks for a read index; raftd batches these
 * and confirms leadership once for many. */
struct msg_read_index {
	struct msg_origin origin;
};

/* MSG_READ_INDEX_REPLY. status 0: read at or after applied index `index`
 * is linearizable, and `term` is raftd's term when the round that
 * confirmed it was answered (a round asked after the request came: the
 * leader of that term still led when the request came). Otherwise a gRPC
 * status code, and `index` and `term` are 0. */
struct msg_read_index_reply {
	struct msg_origin origin;
	uint64_t index;
	uint64_t term;
	int32_t status;
	uint32_t reserved;
};

/* MSG_PROPOSE_REJECT: raftd refused a proposal or read (no leader, stopping,
 * too large). text_len bytes of the gRPC message text follow, e.g.
 * "etcdserver: no leader". */
struct msg_reject {
	struct msg_origin origin;
	int32_t status;   /* gRPC status code */
	uint32_t text_len;
};

/* MSG_COMMITTED: one committed entry that is durable in this member's WAL
 * (invariant 5, docs/invariants.md). data_len bytes of entry data follow. */
struct msg_committed {
	uint64_t index;
	uint64_t term;
	uint32_t entry_type; /* raftpb.EntryType */
	uint32_t data_len;
};

/* MSG_RESULT: the outcome of one applied request. status 0: body_len bytes
 * of the encoded response message follow (PutResponse, TxnResponse, ...).
 * Otherwise a gRPC status code and body_len bytes of message text. */
struct msg_result {
	struct msg_origin origin;
	uint64_t index;    /* Raft index of the entry */
	uint64_t revision; /* store revision after it */
	int32_t status;
	uint32_t body_len;
};

/*
 * MSG_RESULT_INTERIM: the request origin names is applied and its answer
 * waits for work that goes on (a physical compaction's deletion: stored
 * sends one about every second while it runs). It answers nothing: the
 * gateway only moves the request's deadline on, so that a long deletion
 * is not answered "request timed out" while one that stopped (stored
 * hung or dead) still is. The same identity rules as for MSG_RESULT
 * apply; a gateway that matches no waiting request drops it.
 */
struct msg_result_interim {
	struct msg_origin origin;
	uint64_t index;    /* Raft index of the entry */
};

/* MSG_MOVE_LEADER (Maintenance.MoveLeader). */
struct msg_move_leader {
	struct msg_origin origin;
	uint64_t target;   /* the member to lead */
};

/* MSG_PROMOTE (Cluster.MemberPromote). */
struct msg_promote {
	struct msg_origin origin;
	uint64_t member_id;  /* the learner */
};

/* MSG_KEEPALIVE: a question for stored's lessor (stored/lessor.h), which
 * answers with a MSG_RESULT carrying the encoded response: renew a lease
 * (LeaseKeepAliveResponse), a lease's remaining time (LeaseTimeToLive-
 * Response, with its keys when MSG_LEASE_F_KEYS) or every lease
 * (LeaseLeasesResponse). Renewals and remaining times are the leader's
 * alone: a stored that is not the leader's answers them Unavailable
 * "etcdserver: not leader". */
enum msg_lease_op {
	MSG_LEASE_KEEPALIVE = 0,
	MSG_LEASE_TIME_TO_LIVE = 1,
	MSG_LEASE_LEASES = 2,
};
#define MSG_LEASE_F_KEYS 1u
struct msg_keepalive {
	struct msg_origin origin;
	int64_t lease_id;
	uint32_t op;       /* enum msg_lease_op */
	uint32_t flags;    /* MSG_LEASE_F_* */
	/* A renewal: the term in which raftd confirmed this member's
	 * leadership after the request came (msg_read_index_reply.term). The
	 * lessor renews only as the primary of that very term (invariant 8,
	 * docs/invariants.md); 0 for the other questions. */
	uint64_t term;
};

/* MSG_DEFRAG. A request that comes while a defragmentation runs waits for
 * the next one, which serves every request waiting when it begins. */
struct msg_defrag {
	struct msg_origin origin;
};

/*
 * MSG_SNAPSHOT_INSTALL, on SHM_RING_COMMITTED in log order: every entry
 * before it is at or below `index`, every MSG_COMMITTED after it is above.
 * path_len bytes of a NUL-free path follow: a complete, fsynced db file
 * (etcd's member/snap/<index %016x>.snap.db) whose consistent index is at
 * least `index`. stored makes it its db (written, fsynced, renamed over
 * member/snap/db, directory fsynced, db_generation bumped: invariant 3,
 * docs/invariants.md), reloads what it keeps from the db (revision, membership),
 * and publishes applied_index = durable_index = the db's consistent index.
 * It then skips the MSG_COMMITTED entries at or below that index, as it
 * does after a restart. A stored that restarts before publishing the
 * install gets the same message again from raftd (raftd keeps the file
 * until stored's durable index reaches `index`), so installing is
 * idempotent. A file that is not a valid db, or whose consistent index is
 * below `index`, is refused with an error line and stored stops applying
 * (as on a gap) rather than serve a wrong state.
 */
struct msg_snapshot_install {
	uint64_t index;    /* the Raft snapshot's index */
	uint64_t term;     /* and term */
	uint32_t path_len;
	uint32_t reserved; /* zero */
};

/*
 * Writes the origin as field MSG_ORIGIN_FIELD (length-delimited, nested
 * varints) to buf, which has room for MSG_ORIGIN_MAX_BYTES. Returns the
 * number of bytes written.
 */
size_t msg_origin_encode(const struct msg_origin *o, uint8_t *buf);

/*
 * Finds the origin field among the top-level fields of an encoded message
 * (the last one wins, as protobuf merges). Walks the fields without
 * decoding the rest. Returns 0 and fills *o, -ENOENT if there is none,
 * -EBADMSG if the bytes are not a well-formed message.
 */
int msg_origin_find(const uint8_t *data, size_t len, struct msg_origin *o);

#endif
