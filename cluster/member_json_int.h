/*
 * The JSON pieces member_json.c is built from, shared with the other
 * codecs of etcd's JSON in cluster/ (v2store.c): writing as Go's
 * encoding/json writes, reading what it accepts.
 */
#ifndef CETCD_CLUSTER_MEMBER_JSON_INT_H
#define CETCD_CLUSTER_MEMBER_JSON_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An output buffer, NUL-terminated, grown with realloc. */
struct mj_buf {
	char *p;
	size_t len;
	size_t cap;
	bool failed; /* out of memory: everything after is dropped */
};

void mj_add(struct mj_buf *b, const void *data, size_t n);
void mj_adds(struct mj_buf *b, const char *s);
/* A JSON string as Go's encoding/json writes it (HTML-safe escapes,
 * U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD). */
void mj_string(struct mj_buf *b, const char *s);
/* An array of strings. */
void mj_strings(struct mj_buf *b, char *const *v, size_t n);
/* Hands the text over (*out malloc'ed), or -ENOMEM (freed). */
int mj_finish(struct mj_buf *b, char **out, size_t *len);

/* Input: p moves forward as values are read. */
struct mj_in {
	const unsigned char *p;
	const unsigned char *end;
	unsigned depth;        /* nesting, bounded by MJ_MAX_DEPTH */
};

#define MJ_MAX_DEPTH 64u

void mj_ws(struct mj_in *in);
/* Skips white space, then c if it is next (returns whether it was). */
bool mj_eat(struct mj_in *in, char c);
/* A JSON string into *out (malloc'ed, NUL-terminated), or skipped when
 * out is NULL; one holding NUL is refused. 0, -EBADMSG, -ENOMEM. */
int mj_string_in(struct mj_in *in, char **out);
/* Any JSON value, skipped. 0 or -EBADMSG. */
int mj_skip_value(struct mj_in *in);
/* An unsigned 64-bit decimal number. 0 or -EBADMSG. */
int mj_u64_in(struct mj_in *in, uint64_t *out);
int mj_bool_in(struct mj_in *in, bool *out);

#endif
