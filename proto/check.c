/*
 * proto/check.c: wire-level checks (see check.h).
 */
#include "proto/check.h"

#include <errno.h>
#include <string.h>

/* Reads a varint of at most 10 bytes at *p (< end). 0 or -EBADMSG. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 70 && *p < end; shift += 7) {
		uint8_t b = *(*p)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -EBADMSG;
}

static int check_strings(const ProtobufCMessageDescriptor *desc,
                         const uint8_t *p, const uint8_t *end, unsigned depth)
{
	if (depth > PROTO_CHECK_MAX_DEPTH)
		return -EBADMSG;
	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t key, n;
		int rc;

		if (read_varint(&p, end, &key) < 0 || (key >> 3) == 0 || (key >> 3) > UINT32_MAX)
			return -EBADMSG;
		switch (key & 7) {
		case 0: /* varint */
			if (read_varint(&p, end, &n) < 0)
				return -EBADMSG;
			continue;
		case 1: /* 64-bit */
			n = 8;
			break;
		case 5: /* 32-bit */
			n = 4;
			break;
		case 2: /* length-delimited */
			if (read_varint(&p, end, &n) < 0 || n > (uint64_t)(end - p))
				return -EBADMSG;
			f = protobuf_c_message_descriptor_get_field(desc, (unsigned)(key >> 3));
			if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING &&
			    memchr(p, '\0', n) != NULL)
				return -EILSEQ;
			if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				rc = check_strings(f->descriptor, p, p + n, depth + 1);
				if (rc < 0)
					return rc;
			}
			break;
		default: /* groups (unused by etcd) and invalid wire types */
			return -EBADMSG;
		}
		if (n > (uint64_t)(end - p))
			return -EBADMSG;
		p += n;
	}
	return 0;
}

int proto_check_strings(const ProtobufCMessageDescriptor *desc,
                        const uint8_t *data, size_t len)
{
	if (desc == NULL || (data == NULL && len > 0))
		return -EBADMSG;
	if (len == 0)
		return 0;
	return check_strings(desc, data, data + len, 0);
}
