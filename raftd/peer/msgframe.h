/*
 * How etcd 3.4's peer transport (rafthttp) frames raftpb.Messages, apart
 * from the msgappv2 stream (msgappv2.h):
 *
 *   message stream  GET /raft/stream/message/<id>: a response body of
 *                   frames, each an 8-byte big-endian length then that
 *                   many bytes of raftpb.Message. A reader refuses a
 *                   length over 512 MiB (etcd's readBytesLimit,
 *                   ErrExceedSizeLimit). The link heartbeat, written
 *                   when a stream has been idle, is the frame of
 *                   raftpb.Message{Type: MsgHeartbeat} (to and from 0);
 *                   readers drop it.
 *   pipeline        POST /raft: the body is one raftpb.Message, not
 *                   framed (raftmsg_decode of the whole body).
 *   snapshot        POST /raft/snapshot: one frame as above whose message
 *                   is the MsgSnap (with its snapshot's metadata and
 *                   data), read with no limit (etcd reads up to 2^63
 *                   bytes), then the db file's bytes to the end of the
 *                   body. etcd answers 400 "wrong raft message type" to
 *                   a frame of another type.
 *
 * Pure functions on buffers, no I/O; decoders are incremental in that
 * they say how many bytes a frame needs and consume nothing until it is
 * all there.
 */
#ifndef CETCD_RAFTD_MSGFRAME_H
#define CETCD_RAFTD_MSGFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "raftd/raft/raftmsg.h"

/* Bytes of a frame's length word. */
#define MSGFRAME_LEN_BYTES 8u

/* The longest message etcd takes from a stream (readBytesLimit); also
 * the bound this member puts on msgappv2 frames, which etcd leaves
 * unbounded. */
#define MSGFRAME_STREAM_MAX ((uint64_t)512 * 1024 * 1024)

/* The bound etcd puts on a snapshot body's message: none in practice. */
#define MSGFRAME_SNAPSHOT_MAX ((uint64_t)1 << 63)

static inline void msgframe_put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static inline uint64_t msgframe_get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* etcd's isLinkHeartbeatMessage: a MsgHeartbeat from and to no one. */
bool msgframe_is_link_heartbeat(const struct raftmsg *m);

/* A link heartbeat message (type MsgHeartbeat, everything else zero). */
void msgframe_link_heartbeat(struct raftmsg *m);

/* Bytes of m's frame: length word and message. */
size_t msgframe_size(const struct raftmsg *m);

/* Writes m's frame at dst (msgframe_size(m) bytes); returns its size. */
size_t msgframe_encode(const struct raftmsg *m, uint8_t *dst);

/*
 * Decodes the frame at the start of buf[0..len). max is the longest
 * message taken (MSGFRAME_STREAM_MAX on the message stream,
 * MSGFRAME_SNAPSHOT_MAX for a snapshot body).
 *   0        *frame_len is the frame's size; out is the message, as
 *            raftmsg_decode leaves it (pointing into buf, released with
 *            raftmsg_release);
 *   -EAGAIN  buf holds less than the frame: *frame_len is how many bytes
 *            it needs at least (more than len); nothing is consumed;
 *   -EMSGSIZE the length word is over max (the stream must be closed);
 *   -EBADMSG the message is not raftpb (the stream must be closed);
 *   -ENOMEM.
 * out is zeroed on every error.
 */
int msgframe_decode(const uint8_t *buf, size_t len, uint64_t max, struct raftmsg *out,
		    size_t *frame_len);

#endif
