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

/*
 * Decodes base64 of in[0..n) (standard or URL-safe alphabet, padded or
 * not, as the decoder above reads bytes fields) into out, which has room
 * for n * 3 / 4 bytes; *out_len gets the bytes written. Returns 0, or
 * -EINVAL with the offending input byte in *bad_at.
 */
int proto_json_base64_decode(const char *in, size_t n, uint8_t *out, size_t *out_len,
			     size_t *bad_at);

/* What a member of an object holds. */
enum proto_json_kind {
	PROTO_JSON_STRING,
	PROTO_JSON_NUMBER,
	PROTO_JSON_BOOL,
	PROTO_JSON_NULL,
	PROTO_JSON_OBJECT,
	PROTO_JSON_ARRAY,
};

/* One member of an object. key is the decoded key; value is the decoded
 * string for PROTO_JSON_STRING, else the value's JSON text (a number's
 * token as written, an object's or array's whole text, checked). Neither
 * is NUL-terminated; both are valid only during the callback. */
struct proto_json_member {
	const char *key;
	size_t key_len;
	enum proto_json_kind kind;
	const char *value;
	size_t value_len;
	size_t offset; /* where the value starts in the input */
};

/* Called for each member in input order (a repeated key comes again); a
 * nonzero return stops the walk and is returned. */
typedef int (*proto_json_member_fn)(void *arg, const struct proto_json_member *m);

/*
 * Reads in[0..len) as one JSON object, white space around it allowed and
 * nothing else, calling fn for each of its members: for readers of small
 * JSON documents that are not protobuf messages (a JWT's header and
 * claims). Memory for decoded strings comes from alloc (NULL: malloc) and
 * is freed before the return. Returns 0, fn's nonzero return, -EINVAL
 * (malformed, or not an object: err says what and where), -EAGAIN (cut
 * short: err says "unexpected EOF") or -ENOMEM.
 */
int proto_json_object_each(const char *in, size_t len, proto_json_member_fn fn, void *arg,
			   ProtobufCAllocator *alloc, struct proto_json_err *err);

#endif
