/*
 * etcd's msgappv2 stream codec (see msgappv2.h): the forms and the
 * (term, index) state of rafthttp's msgAppV2Encoder and msgAppV2Decoder,
 * over buffers.
 *
 * The decoder is incremental without keeping partial frames: each call
 * looks at the bytes from the frame's start again. For an app entries
 * frame that only walks the length words (no entry is decoded before the
 * frame is whole), so a frame that arrives in k pieces costs k walks of
 * its headers.
 */
#include "raftd/peer/msgappv2.h"

#include <errno.h>
#include <string.h>

#include "raftd/alloc.h"
#include "raftd/raft/raft.h"

/* Bytes of an app entries frame before its first entry: type, count. */
#define ENTRIES_HEAD (1u + 8u)

void msgappv2_encoder_init(struct msgappv2_encoder *e)
{
	memset(e, 0, sizeof(*e));
}

/* etcd's choice between the short and the full form. */
static bool continues(const struct msgappv2_encoder *e, const struct raftmsg *m)
{
	return e->index == m->index && e->term == m->log_term && m->log_term == m->term;
}

size_t msgappv2_encoded_size(const struct msgappv2_encoder *e, const struct raftmsg *m)
{
	size_t n;

	if (msgframe_is_link_heartbeat(m))
		return 1;
	if (!continues(e, m))
		return 1 + msgframe_size(m);
	n = ENTRIES_HEAD + 8;
	for (size_t i = 0; i < m->n_entries; i++)
		n += 8 + raftmsg_entry_size(&m->entries[i]);
	return n;
}

size_t msgappv2_encode(struct msgappv2_encoder *e, const struct raftmsg *m, uint8_t *dst)
{
	uint8_t *p = dst;

	if (msgframe_is_link_heartbeat(m)) {
		*p = MSGAPPV2_LINK_HEARTBEAT;
		return 1;
	}
	if (continues(e, m)) {
		*p++ = MSGAPPV2_APP_ENTRIES;
		msgframe_put_u64(p, m->n_entries);
		p += 8;
		for (size_t i = 0; i < m->n_entries; i++) {
			size_t n = raftmsg_entry_encode(&m->entries[i], p + 8);
			msgframe_put_u64(p, n);
			p += 8 + n;
			e->index++;
		}
		msgframe_put_u64(p, m->commit);
		p += 8;
		return (size_t)(p - dst);
	}
	*p++ = MSGAPPV2_APP;
	p += msgframe_encode(m, p);
	e->term = m->term;
	e->index = m->n_entries ? m->entries[m->n_entries - 1].index : m->index;
	return (size_t)(p - dst);
}

void msgappv2_decoder_init(struct msgappv2_decoder *d, uint64_t local, uint64_t remote)
{
	memset(d, 0, sizeof(*d));
	d->local = local;
	d->remote = remote;
}

/*
 * Walks the length words of the app entries frame at buf: *count entries,
 * *frame_len its size. 0 when it is all in buf; -EAGAIN with *frame_len
 * the bytes needed to go on; -EMSGSIZE when its entries pass
 * MSGFRAME_STREAM_MAX bytes.
 */
static int scan_entries(const uint8_t *buf, size_t len, uint64_t *count, size_t *frame_len)
{
	size_t pos = ENTRIES_HEAD;

	if (len < pos) {
		*frame_len = pos;
		return -EAGAIN;
	}
	*count = msgframe_get_u64(buf + 1);
	if (*count > MSGFRAME_STREAM_MAX / 8)
		return -EMSGSIZE;
	for (uint64_t i = 0; i < *count; i++) {
		if (len < pos + 8) {
			*frame_len = pos + 8;
			return -EAGAIN;
		}
		uint64_t n = msgframe_get_u64(buf + pos);
		if (n > MSGFRAME_STREAM_MAX || pos + 8 + n - ENTRIES_HEAD > MSGFRAME_STREAM_MAX)
			return -EMSGSIZE;
		pos += 8 + (size_t)n;
	}
	*frame_len = pos + 8;
	return len < *frame_len ? -EAGAIN : 0;
}

/* Builds the MsgApp of a whole app entries frame of count entries. */
static int decode_entries(struct msgappv2_decoder *d, const uint8_t *buf, uint64_t count,
			  struct raftmsg *out)
{
	size_t pos = ENTRIES_HEAD;
	struct raftmsg_entry *ents = NULL;

	if (count) {
		ents = raftd_calloc((size_t)count, sizeof(*ents));
		if (!ents)
			return -ENOMEM;
	}
	for (uint64_t i = 0; i < count; i++) {
		size_t n = (size_t)msgframe_get_u64(buf + pos);
		if (raftmsg_entry_decode(buf + pos + 8, n, &ents[i])) {
			raftd_free(ents);
			return -EBADMSG;
		}
		pos += 8 + n;
	}
	out->type = RAFT_MSG_APP;
	out->from = d->remote;
	out->to = d->local;
	out->term = d->term;
	out->log_term = d->term;
	out->index = d->index;
	out->entries = ents;
	out->n_entries = (size_t)count;
	out->alloc = ents;
	out->commit = msgframe_get_u64(buf + pos);
	d->index += count;
	return 0;
}

/* Fails the stream with rc (and returns it). */
static int fail(struct msgappv2_decoder *d, int rc)
{
	d->error = rc;
	return rc;
}

int msgappv2_decode(struct msgappv2_decoder *d, const uint8_t *buf, size_t len,
		    struct raftmsg *out, size_t *frame_len)
{
	uint64_t count;
	int rc;

	memset(out, 0, sizeof(*out));
	if (d->error)
		return d->error;
	if (len == 0) {
		*frame_len = 1;
		return -EAGAIN;
	}
	switch (buf[0]) {
	case MSGAPPV2_LINK_HEARTBEAT:
		msgframe_link_heartbeat(out);
		*frame_len = 1;
		return 0;
	case MSGAPPV2_APP_ENTRIES:
		rc = scan_entries(buf, len, &count, frame_len);
		if (rc == 0)
			rc = decode_entries(d, buf, count, out);
		break;
	case MSGAPPV2_APP:
		rc = msgframe_decode(buf + 1, len - 1, MSGFRAME_STREAM_MAX, out, frame_len);
		if (rc == 0 || rc == -EAGAIN)
			*frame_len += 1;
		if (rc == 0) {
			d->term = out->term;
			d->index = out->n_entries ? out->entries[out->n_entries - 1].index
						  : out->index;
		}
		break;
	default:
		rc = -EBADMSG;
	}
	if (rc == -EBADMSG || rc == -EMSGSIZE)
		return fail(d, rc);
	return rc;
}
