/*
 * tests/fuzz/unpack.h: the steps gatewayd's gw_unpack (gatewayd/server.c)
 * takes on a request body, for the fuzz targets of request decoding
 * (fuzz_kvreq, fuzz_gwreq): proto/wire.h's field reader over the bytes,
 * proto_check_request, proto_check_canonicalize when the check asks for
 * it, then protobuf-c's unpack. Aborts when they disagree: the check's
 * text must be a NUL-terminated sentence when it refuses; bytes it takes
 * as canonical must unpack; bytes it takes otherwise must canonicalize
 * into bytes it takes again, that unpack, and that canonicalize to
 * themselves.
 */
#ifndef CETCD_TESTS_FUZZ_UNPACK_H
#define CETCD_TESTS_FUZZ_UNPACK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/check.h"
#include "proto/wire.h"

/* Every field the reader finds lies inside the bytes. */
static inline void fuzz_read_fields(const uint8_t *data, size_t size)
{
	struct proto_reader r = proto_reader_init(data, size);
	struct proto_field f;

	while (!proto_reader_done(&r) && proto_read_field(&r, &f) == 0)
		if (r.p > data + size || f.start < data || f.len > size)
			abort();
}

/* What gatewayd decodes of data (checked, taken): the canonical copy
 * when one is needed, held in *canon (freed by the caller). */
static inline const uint8_t *fuzz_request_bytes(const ProtobufCMessageDescriptor *d,
						const uint8_t *data, size_t *size, bool canonical,
						uint8_t **canon)
{
	if (canonical)
		return data;
	size_t cap = proto_check_canonical_max(*size), n, n2;
	uint8_t *c = malloc(cap), *c2 = malloc(proto_check_canonical_max(cap));
	if (!c || !c2 || proto_check_canonicalize(d, data, *size, c, &n) != 0 || n > cap ||
	    proto_check_request(d, c, n, NULL, NULL) != 0 ||
	    proto_check_canonicalize(d, c, n, c2, &n2) != 0 || n2 != n || memcmp(c, c2, n) != 0)
		abort();
	free(c2);
	*canon = c;
	*size = n;
	return c;
}

/*
 * A request body as gw_unpack decodes it: the message (free it with
 * protobuf_c_message_free_unpacked(m, NULL)), or NULL when gatewayd
 * refuses the bytes.
 */
static inline ProtobufCMessage *fuzz_unpack_request(const ProtobufCMessageDescriptor *d,
						    const uint8_t *data, size_t size)
{
	char text[PROTO_CHECK_TEXT_MAX];
	uint8_t *canon = NULL;
	bool canonical;
	ProtobufCMessage *m;

	fuzz_read_fields(data, size);
	int rc = proto_check_request(d, data, size, text, &canonical);
	if (memchr(text, '\0', sizeof(text)) == NULL || (rc != 0 && text[0] == '\0'))
		abort();
	if (rc != 0)
		return NULL;
	data = fuzz_request_bytes(d, data, &size, canonical, &canon);
	m = protobuf_c_message_unpack(d, NULL, size, data);
	if (!m)
		abort();
	free(canon);
	return m;
}

#endif
