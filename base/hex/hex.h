/*
 * Hexadecimal digits as the decoders of outside bytes read them: chunk
 * sizes and %-escapes of HTTP, \u escapes of JSON, grpc-message escapes,
 * member and cluster ids (etcd's types.ID), WAL file names.
 *
 * Either case is a digit; nothing else is (no sign, no "0x", no space).
 * Pure functions, thread-safe.
 */
#ifndef CETCD_BASE_HEX_H
#define CETCD_BASE_HEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The value (0 to 15) of hex digit c, or -1 when c is none (any int: a
 * plain char that is negative is none). */
int hex_digit(int c);

/* Reads s[0..len) whole as a hex number, as Go's strconv.ParseUint(s,
 * 16, 64) does: one digit at least, leading zeros allowed, and the first
 * digit that would overflow ends it. Sets *v only on success. Returns 0,
 * -EINVAL (empty, or a byte that is not a digit), or -ERANGE (the value
 * does not fit in 64 bits). It reads s in order and no further than the
 * first byte that is not a digit: a string's NUL before len ends it. */
int hex_parse_u64(const char *s, size_t len, uint64_t *v);

/* Decodes the hex digits s[0..len), two a byte, into out, which has room
 * for len / 2 bytes. Returns the count of bytes (len / 2), or -EINVAL when
 * len is odd or a byte of s is not a digit (out then holds the bytes
 * before it). Like hex_parse_u64 it stops at the first non-digit. */
ssize_t hex_decode(const char *s, size_t len, uint8_t *out);

#endif
