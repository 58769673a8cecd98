/*
 * The core's messages (raft.h's struct raft_msg) as raftpb.Message on the
 * wire (raftmsg.h), both ways, with the mapping raft.h describes: a
 * ReadIndex context in Entries[0].Data (8 bytes big-endian), a heartbeat's
 * in Context, a transfer's vote with Context "CampaignTransfer", a
 * snapshot's point and configuration in Snapshot.Metadata.
 */
#ifndef CETCD_RAFTD_MSGCONV_H
#define CETCD_RAFTD_MSGCONV_H

#include "raftd/raft/raft.h"
#include "raftd/raft/raftmsg.h"

/* Room a conversion needs beside the messages: entry arrays and the
 * context bytes. Reused across calls; msgconv_scratch_free frees it. */
struct msgconv_scratch {
	struct raftmsg_entry *wents;  /* to the wire */
	size_t cap_wents;
	struct raft_entry *cents;     /* to the core */
	size_t cap_cents;
	uint8_t ctx[8];
	uint8_t ctx_entry[8];
	struct raftmsg_entry ctx_ent;
	struct raft_conf_state conf;
};

void msgconv_scratch_free(struct msgconv_scratch *s);

/* m as a wire message in *out, pointing into m (entries' data), its conf
 * state and s; valid while they are and until the next call with s.
 * 0 or -ENOMEM. */
int msgconv_to_wire(const struct raft_msg *m, struct msgconv_scratch *s, struct raftmsg *out);

/* A received wire message as the core's, pointing into w and s, valid
 * until the next call with s. -EINVAL for a type the core does not take
 * from peers or a conf state too large, -ENOMEM. */
int msgconv_from_wire(const struct raftmsg *w, struct msgconv_scratch *s, struct raft_msg *out);

#endif
