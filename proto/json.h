/*
 * proto/json.h: protobuf messages as JSON, the way etcd 3.4's HTTP/JSON
 * gateway writes and reads them (grpc-gateway's runtime.JSONPb with
 * OrigName, over golang/protobuf's jsonpb), driven by protobuf-c's
 * descriptors: one encoder and one decoder for every message type.
 *
 * Written (proto_json_encode), as jsonpb writes with OrigName and without
 * EmitDefaults:
 *   - field names as the .proto spells them ("create_revision");
 *   - fields at their default left out (0, false, "", empty bytes, empty
 *     repeated, absent message), except a oneof's chosen member, which
 *     is always written;
 *   - 64-bit integers as decimal strings, 32-bit ones as numbers;
 *   - bytes as standard base64 with padding;
 *   - enums by name (a value without a name as a bare number);
 *   - strings escaped as Go's encoding/json escapes them (<, >, & and
 *     U+2028/2029 as \u escapes, invalid UTF-8 as U+FFFD);
 *   - fields in field-number order (etcd's .proto files declare them in
 *     that order, which is the order jsonpb follows), no spaces.
 *
 * Read (proto_json_decode), accepting what jsonpb's Unmarshaler with
 * AllowUnknownFields accepts:
 *   - the .proto name or the lowerCamelCase JSON name of a field; when a
 *     key comes twice the last one counts; unknown keys are skipped (their
 *     values must still be well-formed JSON);
 *   - null for any field (left at its default), null for the message;
 *   - integers as JSON numbers or as strings holding one, range-checked;
 *   - bytes as base64, standard or URL-safe, padded or not;
 *   - enums by name or number.
 * The result is the message's protobuf encoding (the gateway hands it to
 * a gRPC call as it is), so no message is built in memory.
 *
 * Both sides are bounded: nesting deeper than PROTO_JSON_MAX_DEPTH is an
 * error, and malformed input of any kind is an error with a text, never a
 * crash.
 */
#ifndef CETCD_PROTO_JSON_H
#define CETCD_PROTO_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Deepest nesting of JSON objects and arrays read or written. */
#define PROTO_JSON_MAX_DEPTH 64

/* A growable byte buffer. Zero-initialised with alloc NULL is empty and
 * allocates with malloc; otherwise memory comes from alloc. */
struct proto_json_buf {
	uint8_t *data;
	size_t len; /* bytes held */
	size_t cap; /* bytes allocated */
	ProtobufCAllocator *alloc;
};

/* Appends n bytes. 0 or -ENOMEM. */
int proto_json_buf_append(struct proto_json_buf *b, const void *p, size_t n);
/* Frees the memory; b is empty afterwards (alloc kept). */
void proto_json_buf_free(struct proto_json_buf *b);

/* Appends m's JSON to out. 0, -ENOMEM, or -EINVAL (nesting deeper than
 * PROTO_JSON_MAX_DEPTH). */
int proto_json_encode(const ProtobufCMessage *m, struct proto_json_buf *out);

/* Appends s[0..len) as a JSON string (quotes included), escaped as Go's
 * encoding/json escapes it. 0 or -ENOMEM. */
int proto_json_encode_string(struct proto_json_buf *out, const char *s, size_t len);

/* Why a decode failed. */
#define PROTO_JSON_ERR_MAX 200
struct proto_json_err {
	char text[PROTO_JSON_ERR_MAX]; /* NUL-terminated */
	size_t offset;                 /* byte of the input where it was found */
};

/*
 * Decodes the JSON value at the start of in[0..len) (white space before
 * it skipped) as a message of type d, appending its protobuf encoding to
 * wire. *used gets the bytes consumed: through the value's end, so that a
 * stream of values (a Watch request body) is read one after another.
 * Returns
 *   0        a message was decoded;
 *   -ENODATA nothing but white space (a stream's end);
 *   -EAGAIN  the value is cut short: more bytes could complete it (at
 *            the end of the input the caller reports err's text, "unexpected
 *            EOF");
 *   -EINVAL  malformed, or not a d: err says what and where;
 *   -ENOMEM.
 * On an error wire may hold part of an encoding: truncate it to its old
 * length.
 */
int proto_json_decode(const ProtobufCMessageDescriptor *d, const char *in, size_t len,
		      size_t *used, struct proto_json_buf *wire, struct proto_json_err *err);

#endif
