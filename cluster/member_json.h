/*
 * A member as etcd 3.4 writes it in JSON: membership.Member in a
 * ConfChange's context and in the db's members bucket, and
 * membership.Attributes in a member's "publish" request. The texts are
 * byte for byte what Go's encoding/json gives for the same member, so an
 * etcd member reading what cetcd wrote (or comparing it) sees its own
 * format:
 *
 *   Member      {"id":N,"peerURLs":[...],"isLearner":true,"name":"...",
 *                "clientURLs":[...]}  (isLearner, name and clientURLs
 *                omitted when false or empty)
 *   Attributes  {"name":"...","clientURLs":[...]}  (both omitted when empty)
 *
 * The decoder accepts any JSON object with these keys (in any order, with
 * white space, escapes and unknown keys, which are skipped): what etcd
 * writes and what a later etcd might add.
 */
#ifndef CETCD_CLUSTER_MEMBER_JSON_H
#define CETCD_CLUSTER_MEMBER_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include "cluster/member.h"

/* json.Marshal(membership.Member) of m into *out (malloc'ed, NUL-terminated,
 * *len bytes without the NUL). 0 or -ENOMEM. */
int member_json_encode(const struct member_info *m, char **out, size_t *len);

/* json.Marshal(membership.ConfigChangeContext): a ConfChange's context
 * as etcd 3.4 proposes it for AddNode, AddLearnerNode and a promotion:
 * the member's fields, then "isPromote". */
int member_json_encode_context(const struct member_info *m, bool is_promote, char **out,
			       size_t *len);

/* json.Marshal(membership.Attributes): m's name and client URLs. */
int member_json_encode_attributes(const struct member_info *m, char **out, size_t *len);

/*
 * Decodes a Member (or an Attributes: the keys present are set, the others
 * left as they are in out) from p[0..len) into out, which the caller has
 * zeroed or filled; fields it sets replace what was there. Returns 0,
 * -EBADMSG (not a JSON object, a key of the wrong type, an id that is not
 * an unsigned 64-bit number, trailing bytes) or -ENOMEM. On failure out
 * keeps what it held and nothing leaks.
 */
int member_json_decode(const void *p, size_t len, struct member_info *out);

/*
 * A JSON array of Members (what a peer's GET /members answers: etcd's
 * []*membership.Member), each decoded as member_json_decode; null is an
 * empty list. *out (malloc'ed, *n of them; free each with
 * member_info_clear, then the array) is set only on success. Returns 0,
 * -EBADMSG (not an array of Member objects, trailing bytes) or -ENOMEM.
 */
int member_json_decode_array(const void *p, size_t len, struct member_info **out, size_t *n);

/* A ConfChange's context as etcd 3.4 writes it (membership's
 * ConfigChangeContext: the member's fields and "isPromote"), decoded as
 * member_json_decode does; *is_promote is false when the key is absent. */
int member_json_decode_context(const void *p, size_t len, struct member_info *out,
			       bool *is_promote);

#endif
