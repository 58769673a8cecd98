/*
 * proto/check.h: checks on encoded messages that protobuf-c's decoder
 * does not make, so that cetcd takes and refuses the bytes etcd 3.4
 * takes and refuses.
 *
 * The field numbers and wire types each message declares come from the
 * protobuf-c descriptors generated from cetcd's .proto files at build
 * time (proto/CMakeLists.txt); nothing here lists fields by hand.
 */
#ifndef CETCD_PROTO_CHECK_H
#define CETCD_PROTO_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

/* Deepest message nesting the checks follow. etcd's deepest legitimate
 * nesting is a few levels per nested Txn; deeper input is refused rather
 * than followed (etcd's decoder, in Go, follows any depth). */
#define PROTO_CHECK_MAX_DEPTH 64

/* The wire type (enum proto_wire_type, proto/wire.h) a field of type t
 * is declared with: varint, fixed64, fixed32 or length-delimited. */
unsigned proto_check_declared_wire(ProtobufCType t);

/* Room for the longest text proto_check_request writes. */
#define PROTO_CHECK_TEXT_MAX 192

/*
 * Checks the encoded message desc the way etcd 3.4's gogo-generated
 * decoder (rpc.pb.go's Unmarshal) reads it: every field's wire type
 * against its declaration (a repeated scalar may also come packed),
 * every varint, key and length, sub-messages at any depth; unknown fields
 * are skipped as gogo skips them (groups included, but their wire types
 * must be valid). Walks the bytes without allocating.
 *
 * text (PROTO_CHECK_TEXT_MAX bytes, may be NULL) receives, on -EBADMSG,
 * gogo's own error text, e.g. "proto: wrong wireType = 2 for field PrevKv",
 * "proto: PutRequest: illegal tag 0 (wire type 0)", "unexpected EOF",
 * "proto: integer overflow", "proto: negative length found during
 * unmarshaling"; etcd's gRPC server answers INTERNAL with it after
 * "grpc: error unmarshalling request: ". On other errors it says what
 * cetcd refused.
 *
 * *canonical (may be NULL) is set on success: true when protobuf-c reads
 * the bytes exactly as gogo does; false when they hold something it reads
 * differently or refuses (unknown fields, groups, keys or lengths longer
 * than needed, varints with bits past the 64th), and the message must be
 * decoded from proto_check_canonicalize's output instead.
 *
 * Returns 0 when etcd takes the bytes; -EBADMSG when etcd refuses them;
 * -EILSEQ when etcd takes them but a string field holds a NUL byte
 * (protobuf-c would cut the string there, so cetcd refuses it); -ELOOP
 * when messages nest deeper than PROTO_CHECK_MAX_DEPTH; -EINVAL when desc
 * is NULL or data is NULL with len > 0.
 */
int proto_check_request(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
			size_t len, char *text, bool *canonical);

/* Room proto_check_canonicalize needs for a message of len bytes. */
static inline size_t proto_check_canonical_max(size_t len)
{
	return 5 * len + 16;
}

/*
 * Writes to out (proto_check_canonical_max(len) bytes) the message that
 * etcd decodes from data, which proto_check_request accepted: the known
 * fields in their order, with the shortest keys and varints (lengths of
 * sub-messages take five bytes, a form every decoder reads), unknown
 * fields dropped, a singular message field (not of a oneof) that comes
 * more than once written once, where it first comes, holding the fields
 * of every occurrence (gogo merges them; protobuf-c would not merge them
 * alike), as etcd itself re-encodes a request before proposing it.
 * *out_len receives its length.
 * Returns 0; -EBADMSG if data does not pass proto_check_request.
 */
int proto_check_canonicalize(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
			     size_t len, uint8_t *out, size_t *out_len);

/*
 * Checks that no string field of the encoded message desc (sub-messages
 * included) holds a NUL byte; for bytes from the WAL, which gatewayd
 * already checked with proto_check_request.
 * Returns 0; -EILSEQ if a string field holds a NUL; -EBADMSG if data is
 * not a well-formed encoding (truncated field, bad wire type, field number
 * <= 0, or nesting deeper than PROTO_CHECK_MAX_DEPTH).
 */
int proto_check_strings(const ProtobufCMessageDescriptor *desc,
                        const uint8_t *data, size_t len);

#endif
