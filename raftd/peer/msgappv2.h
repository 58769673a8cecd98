/*
 * etcd 3.4's msgappv2 stream (GET /raft/stream/msgappv2/<id>), which a
 * leader uses for MsgApp to one follower. Each frame starts with a type
 * byte:
 *
 *   0 link heartbeat   nothing follows; stands for
 *                      raftpb.Message{Type: MsgHeartbeat}.
 *   1 app entries      a MsgApp that continues the previous one: an
 *                      8-byte big-endian entry count, then per entry an
 *                      8-byte length and a raftpb.Entry, then the commit
 *                      index (8 bytes). Term, logTerm and index are the
 *                      stream's: the reader rebuilds
 *                      {MsgApp, from: remote, to: local, term: T,
 *                      logTerm: T, index: I, entries, commit}.
 *   2 app              an 8-byte length and a whole raftpb.Message.
 *
 * Both ends carry (term, index): after a full message, its term and the
 * index of its last entry (its index when it has none); each entry of an
 * app entries frame adds one to index. The writer sends the short form
 * when the stream's index and term equal the message's index and logTerm
 * and logTerm equals term. The state starts at (0, 0) with each stream.
 *
 * Encoding and decoding are on buffers (no I/O). The decoder takes the
 * bytes received so far and consumes a frame only once it is whole.
 */
#ifndef CETCD_RAFTD_MSGAPPV2_H
#define CETCD_RAFTD_MSGAPPV2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/peer/msgframe.h"
#include "raftd/raft/raftmsg.h"

enum msgappv2_frame_type {
	MSGAPPV2_LINK_HEARTBEAT = 0,
	MSGAPPV2_APP_ENTRIES = 1,
	MSGAPPV2_APP = 2,
};

/* The writer's side of one stream. */
struct msgappv2_encoder {
	uint64_t term;  /* of the last full message sent */
	uint64_t index; /* of the last entry sent */
};

void msgappv2_encoder_init(struct msgappv2_encoder *e);

/* Bytes msgappv2_encode will write for m in e's present state. */
size_t msgappv2_encoded_size(const struct msgappv2_encoder *e, const struct raftmsg *m);

/*
 * Writes m's frame at dst (msgappv2_encoded_size(e, m) bytes, asked just
 * before) and advances e. Returns the bytes written. Which form is
 * written follows etcd's encoder exactly, so the bytes are etcd's; m is
 * meant to be a MsgApp or a link heartbeat, as on etcd's streams (any
 * other message that happens to continue the stream would come out as a
 * MsgApp, as from etcd).
 */
size_t msgappv2_encode(struct msgappv2_encoder *e, const struct raftmsg *m, uint8_t *dst);

/* The reader's side of one stream. */
struct msgappv2_decoder {
	uint64_t local;  /* this member: "to" of app entries frames */
	uint64_t remote; /* the peer: their "from" */
	uint64_t term;
	uint64_t index;
	int error;       /* 0, or the error that failed the stream */
};

void msgappv2_decoder_init(struct msgappv2_decoder *d, uint64_t local, uint64_t remote);

/*
 * Decodes the frame at the start of buf[0..len).
 *   0         *frame_len is the frame's size (the caller consumes it);
 *             out is the message (a link heartbeat is a message for
 *             which msgframe_is_link_heartbeat holds); entry data and
 *             bytes fields point into buf, the entries array is out's
 *             allocation: raftmsg_release(out). d advances.
 *   -EAGAIN   buf holds less than the frame: *frame_len is how many
 *             bytes it needs at least (more than len, possibly still
 *             less than the whole frame when its lengths are not all in
 *             yet). Nothing is consumed, d is unchanged.
 *   -EBADMSG  an unknown frame type, or a message or entry that is not
 *             raftpb (etcd's reader would close the stream, or panic);
 *   -EMSGSIZE a frame over MSGFRAME_STREAM_MAX bytes;
 *             after either, d is failed and every later call returns the
 *             same error: the stream must be closed.
 *   -ENOMEM   nothing consumed, d unchanged; the call may be repeated.
 * out is zeroed on every error.
 */
int msgappv2_decode(struct msgappv2_decoder *d, const uint8_t *buf, size_t len,
		    struct raftmsg *out, size_t *frame_len);

#endif
