/*
 * proto/check.h: checks on encoded messages that protobuf-c's decoder
 * does not make.
 */
#ifndef CETCD_PROTO_CHECK_H
#define CETCD_PROTO_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

/* Deepest message nesting proto_check_strings follows. etcd's deepest
 * legitimate nesting is a few levels per nested Txn; deeper input is
 * refused rather than followed. */
#define PROTO_CHECK_MAX_DEPTH 64

/*
 * Checks that no string field of the encoded message desc (sub-messages
 * included) holds a NUL byte. protobuf-c stores strings NUL-terminated,
 * so it would silently read "root\0x" as "root"; etcd reads the whole
 * string. A request that fails this check must be refused before it is
 * unpacked (etcd would not treat it as the shortened name).
 * Walks the wire bytes without allocating; data is only read.
 * Returns 0; -EILSEQ if a string field holds a NUL; -EBADMSG if data is
 * not a well-formed encoding (truncated field, bad wire type, field number
 * 0, or nesting deeper than PROTO_CHECK_MAX_DEPTH).
 */
int proto_check_strings(const ProtobufCMessageDescriptor *desc,
                        const uint8_t *data, size_t len);

#endif
