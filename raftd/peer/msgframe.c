/*
 * rafthttp's message frames (see msgframe.h): etcd's messageEncoder and
 * messageDecoder.decodeLimit over buffers.
 */
#include "raftd/peer/msgframe.h"

#include <errno.h>
#include <string.h>

#include "raftd/raft/raft.h"

bool msgframe_is_link_heartbeat(const struct raftmsg *m)
{
	return m->type == RAFT_MSG_HEARTBEAT && m->from == 0 && m->to == 0;
}

void msgframe_link_heartbeat(struct raftmsg *m)
{
	memset(m, 0, sizeof(*m));
	m->type = RAFT_MSG_HEARTBEAT;
}

size_t msgframe_size(const struct raftmsg *m)
{
	return MSGFRAME_LEN_BYTES + raftmsg_size(m);
}

size_t msgframe_encode(const struct raftmsg *m, uint8_t *dst)
{
	size_t n = raftmsg_size(m);

	msgframe_put_u64(dst, n);
	return MSGFRAME_LEN_BYTES + raftmsg_encode(m, dst + MSGFRAME_LEN_BYTES);
}

int msgframe_decode(const uint8_t *buf, size_t len, uint64_t max, struct raftmsg *out,
		    size_t *frame_len)
{
	uint64_t n;

	memset(out, 0, sizeof(*out));
	if (len < MSGFRAME_LEN_BYTES) {
		*frame_len = MSGFRAME_LEN_BYTES;
		return -EAGAIN;
	}
	n = msgframe_get_u64(buf);
	if (n > max || n > SIZE_MAX - MSGFRAME_LEN_BYTES)
		return -EMSGSIZE;
	*frame_len = MSGFRAME_LEN_BYTES + (size_t)n;
	if (len < *frame_len)
		return -EAGAIN;
	return raftmsg_decode(buf + MSGFRAME_LEN_BYTES, (size_t)n, out);
}
