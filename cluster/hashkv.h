/*
 * GET /members/hashkv: how etcd 3.4 members ask each other for their
 * HashKV on the peer URLs (etcdserver/corrupt.go, PeerHashKVPath), for the
 * corruption checks. The request is a GET whose body is the JSON of a
 * HashKVRequest ({"revision":N}); the answer is 200 with the JSON of a
 * HashKVResponse as Go's encoding/json writes it
 * ({"header":{"revision":N},"hash":H,"compact_revision":C}, zero fields
 * left out), or 400 with the MVCC error's text when the revision was
 * compacted or is in the future.
 *
 * Both sides are here: the JSON of the request and the answer (the server
 * side is gatewayd's, which raftd's peer port hands the request to), and
 * a blocking client for the launcher's checks (cluster/peer_request.h
 * makes the request). The decoders read bytes
 * from other members: every length is checked and bad input is an error,
 * never a crash (tests/fuzz/fuzz_hashkv.c).
 */
#ifndef CETCD_CLUSTER_HASHKV_H
#define CETCD_CLUSTER_HASHKV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HASHKV_PATH "/members/hashkv"

/* The largest answer body hashkv_fetch reads: a HashKVResponse is under
 * 200 bytes, an error text a line. */
#define HASHKV_MAX_ANSWER (64u * 1024u)

/* etcd's mvcc errors, as its handler writes them and its client looks
 * for them in a 400 answer. */
#define HASHKV_ERR_COMPACTED "mvcc: required revision has been compacted"
#define HASHKV_ERR_FUTURE_REV "mvcc: required revision is a future revision"

/* A HashKVResponse's fields that matter. */
struct hashkv_resp {
	uint64_t member_id;      /* header.member_id (etcd's handler leaves it 0) */
	int64_t revision;        /* header.revision */
	uint32_t hash;
	int64_t compact_revision;
};

/* json.Unmarshal of a HashKVRequest: *rev gets "revision" (0 when absent
 * or null). Keys match without regard to case, unknown ones are skipped,
 * as Go does. Returns 0 or -EBADMSG (not one JSON object, a revision that
 * is not an integer in int64's range, trailing bytes). */
int hashkv_request_decode(const void *p, size_t len, int64_t *rev);

/* json.Marshal of a HashKVRequest into buf; the length, or -ENOSPC. */
int hashkv_request_encode(char *buf, size_t cap, int64_t rev);

/* json.Marshal of the HashKVResponse etcd's handler writes (a header with
 * only the revision) into buf; the length, or -ENOSPC. */
int hashkv_response_encode(char *buf, size_t cap, const struct hashkv_resp *r);

/* json.Unmarshal of a HashKVResponse into *out (zeroed first). Returns 0
 * or -EBADMSG. */
int hashkv_response_decode(const void *p, size_t len, struct hashkv_resp *out);

/* How a fetch ended, beside its return code. */
enum hashkv_outcome {
	HASHKV_OK = 0,
	HASHKV_FAILED,           /* no answer, or one that is not a HashKV */
	HASHKV_COMPACTED,        /* etcd's rpctypes.ErrCompacted */
	HASHKV_FUTURE_REV,       /* etcd's rpctypes.ErrFutureRev */
};

struct tls_ctx;

/*
 * Asks the member at peer URL url (http, https, unix, unixs) for its
 * HashKV at rev, as etcd's getPeerHashKVHTTP does, waiting at most
 * timeout_ms for all of it. tls is the peer client context for https and
 * unixs URLs (NULL without peer TLS). Returns the outcome; on
 * HASHKV_OK *out holds the answer, otherwise err (cap bytes) says what
 * went wrong in etcd's words where etcd has some ("unknown error: ..."),
 * for the "failed hash kv request" warning.
 */
enum hashkv_outcome hashkv_fetch(const char *url, int64_t rev, struct tls_ctx *tls,
				 int timeout_ms, struct hashkv_resp *out, char *err, size_t cap);

/* The same, asked of this member's gatewayd at its local socket a
 * (base/sock/gwsock.h). */
struct gwsock_addr;
enum hashkv_outcome hashkv_fetch_local(const struct gwsock_addr *a, int64_t rev, int timeout_ms,
				       struct hashkv_resp *out, char *err, size_t cap);

/* The outcome of a peer's raw answer (status and body), as etcd reads
 * it; split out of hashkv_fetch for the fuzz target and the tests. */
enum hashkv_outcome hashkv_answer(int status, const void *body, size_t len,
				  struct hashkv_resp *out, char *err, size_t cap);

#endif
